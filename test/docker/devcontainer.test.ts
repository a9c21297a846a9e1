/**
 * Dev containers (issue 15): `--devcontainer [FOLDER]` attaches to the container the Dev
 * Containers tooling labelled for a project folder, with the user, workspace folder and
 * remoteEnv of its devcontainer.json; a stopped container needs `--start`; several matches are
 * listed; none gives the command that starts one. The library path (`resolveDevcontainer`, the
 * runtime's `devcontainer: { folder }`) gives terminals and spawned processes the same. Real
 * engine, real containers (test/helpers/devcontainer-world.ts), no mocks.
 */
import { execFile } from 'node:child_process'
import { createRequire } from 'node:module'
import { rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Context } from '@deepseek-ai/cordis'
import SandboxPolicyService from '@deepseek-ai/dsh-sandbox-policy'
import type { SubprocessRuntime } from '@deepseek-ai/dsh-subprocess'
import type Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { resolveDevcontainer } from '../../src/devcontainer/index.ts'
import * as dockerPlugin from '../../src/plugins/docker.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { checkAgentSessionCase, runAgentSessionCase } from '../helpers/agent-session-case.ts'
import { type ProjectFolder, createDevcontainer, makeProjectFolder, removeFixtures, startDevcontainer, sweepDevcontainerFixtures } from '../helpers/devcontainer-world.ts'
import { docker } from './helpers.ts'

const root = fileURLToPath(new URL('../..', import.meta.url))
/** tsx's loader by absolute path, so the CLI also runs from a project folder (`--devcontainer` without a value). */
const tsxLoader = createRequire(import.meta.url).resolve('tsx')
const script = join(tmpdir(), `dsh-devcontainer-script-${process.pid}.txt`)
const SEND = 'id -un; pwd; echo $FOO'

/** `dsh-remote-worlds ARGS` as a child process (in `cwd`, default the repository). */
async function cli(args: string[], cwd = root): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise(resolve => {
    execFile(process.execPath, ['--import', tsxLoader, join(root, 'src/cli/main.ts'), ...args], { cwd, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : (error as { code?: number }).code ?? -1, stdout, stderr })
    })
  })
}

/** The one `run --json` record of {@link SEND} in `project`'s dev container, as agent. */
function expectedRecord(project: ProjectFolder): unknown {
  return { i: 1, line: 1, text: SEND, waitReason: 'stdin_read', sessionStatus: { kind: 'running' }, output: `${SEND}\nagent\n/workspaces/${project.basename}\nbar\ndsh> `, truncated: false, ms: expect.any(Number) }
}

const records = (stdout: string): unknown[] => stdout.trim().split('\n').map(line => JSON.parse(line) as unknown)
const nameOf = async (container: Docker.Container): Promise<string> => (await container.inspect()).Name.replace(/^\//, '')

const containers: Docker.Container[] = []
let project: ProjectFolder
let container: Docker.Container

beforeAll(async () => {
  await sweepDevcontainerFixtures()
  writeFileSync(script, `${SEND}\n`)
  project = makeProjectFolder()
  container = await startDevcontainer(project)
  containers.push(container)
})

afterAll(async () => {
  await removeFixtures(containers)
  rmSync(script, { force: true })
})

describe('dsh-remote-worlds run --devcontainer FOLDER', () => {
  it('runs as remoteUser, in workspaceFolder, with remoteEnv', async () => {
    const { code, stdout, stderr } = await cli(['run', '--devcontainer', project.folder, '--script', script, '--json'])
    expect(records(stdout)).toEqual([expectedRecord(project)])
    expect(stderr).toMatch(new RegExp(`^# dev container of ${project.folder}, shell pid \\d+\\n# closed: nothing of the session is left running\\n$`))
    expect(code).toBe(0)
  })

  it('--devcontainer without a folder is the current directory', async () => {
    const { code, stdout } = await cli(['run', '--devcontainer', '--script', script, '--json'], project.folder)
    expect(records(stdout)).toEqual([expectedRecord(project)])
    expect(code).toBe(0)
  })

  it('passes the handed agent case', async () => {
    const { records: steps, stderr } = await runAgentSessionCase(['--devcontainer', project.folder])
    checkAgentSessionCase(steps, stderr)
  }, 120_000)

  it('refuses a sandbox mode the container does not enforce before the shell starts', async () => {
    const { code, stdout, stderr } = await cli(['run', '--devcontainer', project.folder, '--mode', 'workspace-write', '--script', script, '--json'])
    expect(stdout).toBe('')
    expect(stderr).toMatch(new RegExp(`^dsh-remote-worlds: SandboxUnavailableError \\[SANDBOX_UNAVAILABLE\\]: docker container ${container.id.slice(0, 12)} as agent .*the root filesystem is writable \\(HostConfig.ReadonlyRootfs is off\\).*\\(sandbox mode workspace-write cannot be enforced there, so nothing was started; use a world that enforces it, or danger-full-access\\)\\n$`))
    expect(code).toBe(2)
  })
})

describe('dsh-remote-worlds doctor --devcontainer FOLDER', () => {
  it('names what of devcontainer.json is applied and what is not, and which sandbox modes the container enforces', async () => {
    const { code, stdout } = await cli(['doctor', '--devcontainer', project.folder])
    const lines = stdout.split('\n')
    const at = lines.findIndex(line => line.startsWith('  dev container of '))
    expect(lines.slice(at, at + 7)).toEqual([
      `  dev container of ${project.folder}: docker container ${container.id.slice(0, 12)} (${await nameOf(container)}), configured by ${project.configFile}`,
      '    user: agent (remoteUser of devcontainer.json)',
      `    workspace: /workspaces/${project.basename} (workspaceFolder), the shell's cwd and the sandbox's workspace root`,
      '    remoteEnv for terminals and spawned processes: FOO',
      '    as the container was created: image',
      '    not applied: forwardPorts, postStartCommand',
      '    sandbox: judged like any attached container; enforces no confined mode; read-only and workspace-write are refused before the shell starts',
    ])
    expect(lines).toContain('      read-only: NOT available (fails closed with SandboxUnavailableError)')
    expect(lines).toContain('      workspace-write: NOT available (fails closed with SandboxUnavailableError)')
    expect(code).toBe(0)
  }, 60_000)

  it('--json: an explicit --user wins over remoteUser, and says so', async () => {
    const { code, stdout } = await cli(['doctor', '--devcontainer', project.folder, '--user', 'root', '--json'])
    const report = JSON.parse(stdout) as { checks: { name: string; ok: boolean; detail: string }[]; devcontainer: unknown }
    expect(report.devcontainer).toEqual({
      folder: project.folder,
      configFile: project.configFile,
      container: container.id.slice(0, 12),
      name: await nameOf(container),
      started: false,
      user: 'root',
      userSource: 'given explicitly (--user, the runtime\'s `user`), which wins over remoteUser of devcontainer.json (agent)',
      workspaceFolder: `/workspaces/${project.basename}`,
      workspaceFolderSource: 'workspaceFolder',
      remoteEnv: ['FOO'],
      atCreation: ['image'],
      notApplied: ['forwardPorts', 'postStartCommand'],
      enforces: [],
      refuses: ['read-only', 'workspace-write'],
    })
    expect(report.checks.find(check => check.name === 'control channel')!.detail).toMatch(/^uid 0, /)
    expect(code).toBe(0)
  }, 60_000)
})

describe('dsh-remote-worlds --devcontainer: which container', () => {
  it('a stopped dev container: an error naming --start; with --start it is started and works', async () => {
    const stopped = makeProjectFolder()
    const made = await startDevcontainer(stopped)
    containers.push(made)
    await made.stop({ t: 1 })
    const refused = await cli(['run', '--devcontainer', stopped.folder, '--script', script, '--json'])
    expect(refused.stderr).toBe(`dsh-remote-worlds: DevcontainerStoppedError [DEVCONTAINER_STOPPED]: the dev container of ${stopped.folder}, ${made.id.slice(0, 12)} (${await nameOf(made)}), is not running (state exited): pass --start to start it (runtime config \`devcontainer: { start: true }\`), or run \`devcontainer up --workspace-folder ${stopped.folder}\`\n`)
    expect(refused.code).toBe(2)
    expect((await made.inspect()).State.Running).toBe(false)

    const started = await cli(['run', '--devcontainer', stopped.folder, '--start', '--script', script, '--json'])
    expect(records(started.stdout)).toEqual([expectedRecord(stopped)])
    expect(started.code).toBe(0)
    expect((await made.inspect()).State.Running).toBe(true)
  }, 60_000)

  it('two matching containers: an error listing both (id, name, state, config file)', async () => {
    const twice = makeProjectFolder()
    const prefix = `dsh-devcontainer-test-${process.pid}-${Date.now()}`
    const first = await createDevcontainer(twice, `${prefix}-a`)
    containers.push(first)
    const second = await createDevcontainer(twice, `${prefix}-b`)
    containers.push(second)
    const { code, stderr } = await cli(['run', '--devcontainer', twice.folder, '--script', script])
    expect(stderr).toBe([
      `dsh-remote-worlds: DevcontainerAmbiguousError [DEVCONTAINER_AMBIGUOUS]: 2 containers are labelled as the dev container of ${twice.folder}:`,
      `  ${first.id.slice(0, 12)}  ${prefix}-a  created  config ${twice.configFile}`,
      `  ${second.id.slice(0, 12)}  ${prefix}-b  created  config ${twice.configFile}`,
      'remove the ones no longer used (docker rm -f ID), or attach to one with --docker ID',
      '',
    ].join('\n'))
    expect(code).toBe(2)
  })

  it('no matching container: an error giving the command that starts one', async () => {
    const none = makeProjectFolder()
    const { code, stderr } = await cli(['run', '--devcontainer', none.folder, '--script', script])
    expect(stderr).toBe(`dsh-remote-worlds: DevcontainerNotFoundError [DEVCONTAINER_NOT_FOUND]: no dev container of ${none.folder} exists: no container carries the label devcontainer.local_folder=${none.folder} (with devcontainer.config_file=${none.configFile}, when it has that label); start one with \`devcontainer up --workspace-folder ${none.folder}\` (the Dev Containers CLI) or by opening the folder in a container from your editor\n`)
    expect(code).toBe(2)
  })

  it('--start without --devcontainer, and --devcontainer with another target, are usage errors', async () => {
    const start = await cli(['run', '--docker', container.id, '--start', '--script', script])
    expect(start.stderr).toBe('dsh-remote-worlds: InvalidArgumentError [INVALID_ARGUMENT]: --start applies to --devcontainer targets only\n')
    const both = await cli(['run', '--docker', container.id, '--devcontainer', project.folder, '--script', script])
    expect(both.stderr).toBe('dsh-remote-worlds: InvalidArgumentError [INVALID_ARGUMENT]: use one of --docker CONTAINER, --image IMAGE, --devcontainer [FOLDER] or --ssh [USER@]HOST[:PORT]\n')
    expect([start.code, both.code]).toEqual([2, 2])
  })
})

describe('the library: resolveDevcontainer and the runtime\'s devcontainer config', () => {
  const JSON_WITH_CONTAINER_ENV = `{
    "remoteUser": "agent",
    // the default workspace folder: /workspaces/<folder name>
    "remoteEnv": {
      "FOO": "bar",
      "WHERE": "\${containerEnv:IN_CONTAINER}:\${containerWorkspaceFolderBasename}",
      "PATH": "\${containerEnv:PATH}:/opt/extra",
    },
  }`
  let library: ProjectFolder
  let made: Docker.Container

  beforeAll(async () => {
    library = makeProjectFolder(JSON_WITH_CONTAINER_ENV)
    made = await startDevcontainer(library, { env: ['IN_CONTAINER=yes'], metadata: JSON.stringify([{ remoteUser: 'agent' }]) })
    containers.push(made)
  })

  it('resolveDevcontainer gives the container, the user, the workspace folder and remoteEnv (${containerEnv:VAR} resolved)', async () => {
    expect(await resolveDevcontainer(library.folder, { docker })).toEqual({
      folder: library.folder,
      configFile: library.configFile,
      container: made.id,
      name: await nameOf(made),
      started: false,
      user: 'agent',
      userSource: 'remoteUser of devcontainer.json',
      workspaceFolder: `/workspaces/${library.basename}`,
      workspaceFolderSource: 'default',
      remoteEnv: { FOO: 'bar', WHERE: `yes:${library.basename}`, PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/extra' },
      unset: [],
      atCreation: [],
      unsupported: [],
    })
  })

  it('terminals and spawned processes get remoteEnv, as remoteUser; an explicit user wins', async () => {
    const resolved = await resolveDevcontainer(library.folder, { docker })
    for (const [user, expected] of [[undefined, 'agent'], ['root', 'root']] as const) {
      const world = await openWorld({
        runtime: DockerSubprocessRuntime,
        runtimeConfig: { devcontainer: { folder: library.folder }, ...(user !== undefined ? { user } : {}) },
        workspaceRoot: resolved.workspaceFolder,
      })
      try {
        const terminal = await world.open()
        const sent = await terminal.send('echo "$(id -un) $PWD $FOO $WHERE"')
        expect(sent.viewport.split('\n')).toContain(`${expected} /workspaces/${library.basename} bar yes:${library.basename}`)
        await terminal.close()
        const proc = world.runtime.spawn({
          argv: ['sh', '-c', 'echo "$(id -un) $PWD $FOO $PATH"'],
          cwd: resolved.workspaceFolder,
          stdio: { stdin: 'ignore', stdout: { maxBytes: 65_536 }, stderr: { maxBytes: 65_536 } },
          graceMs: 1_000,
        })
        expect((await proc.done).exitCode).toBe(0)
        expect(proc.collected.stdout!.readFrom(0).text).toBe(`${expected} /workspaces/${library.basename} bar /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/extra\n`)
      } finally {
        await world.dispose()
      }
    }
  })

  it('the cordis plugin dsh-remote-worlds/docker takes devcontainer: { folder }', async () => {
    const resolved = await resolveDevcontainer(library.folder, { docker })
    const ctx = new Context()
    try {
      await ctx.plugin(SandboxPolicyService, { mode: 'danger-full-access', workspaceRoot: resolved.workspaceFolder })
      await ctx.plugin(dockerPlugin, { devcontainer: { folder: library.folder } })
      const runtime = ctx.get('subprocess') as unknown as SubprocessRuntime
      const proc = runtime.spawn({
        argv: ['sh', '-c', 'echo "$(id -un) $FOO"'],
        cwd: resolved.workspaceFolder,
        stdio: { stdin: 'ignore', stdout: { maxBytes: 65_536 }, stderr: { maxBytes: 65_536 } },
        graceMs: 1_000,
      })
      expect((await proc.done).exitCode).toBe(0)
      expect(proc.collected.stdout!.readFrom(0).text).toBe('agent bar\n')
    } finally {
      await ctx.fiber.dispose()
    }
  })
})
