/**
 * Dev containers (issue 15): `--devcontainer [FOLDER]` attaches to the container the Dev
 * Containers tooling labelled for a project folder, with the user, workspace folder and
 * remoteEnv of its devcontainer.json; a stopped container needs `--start`; several matches are
 * listed; none gives the command that starts one. The library path (`resolveDevcontainer`, the
 * runtime's `devcontainer: { folder }`) gives terminals and spawned processes the same. Real
 * engine, real containers (test/helpers/devcontainer-world.ts), no mocks.
 */
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { request } from 'node:http'
import { createRequire } from 'node:module'
import { rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Context } from '@deepseek-ai/cordis'
import SandboxPolicyService from '@deepseek-ai/dsh-sandbox-policy'
import type { SubprocessRuntime } from '@deepseek-ai/dsh-subprocess'
import type Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { resolveTarget } from '../../src/cli/target.ts'
import { devcontainerId, resolveDevcontainer } from '../../src/devcontainer/index.ts'
import * as dockerPlugin from '../../src/plugins/docker.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { checkAgentSessionCase, runAgentSessionCase } from '../helpers/agent-session-case.ts'
import { type ProjectFolder, addConfigFile, createDevcontainer, linkTo, makeProjectFolder, removeFixtures, startDevcontainer, sweepDevcontainerFixtures } from '../helpers/devcontainer-world.ts'
import { IMAGE, docker } from './helpers.ts'

const root = fileURLToPath(new URL('../..', import.meta.url))
/** tsx's loader by absolute path, so the CLI also runs from a project folder (`--devcontainer` without a value). */
const tsxLoader = createRequire(import.meta.url).resolve('tsx')
const script = join(tmpdir(), `dsh-devcontainer-script-${process.pid}.txt`)
const SEND = 'id -un; pwd; echo $FOO'

/** `dsh-remote-worlds ARGS` as a child process (in `cwd`, default the repository; `env` over this process's environment). */
async function cli(args: string[], cwd = root, env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise(resolve => {
    execFile(process.execPath, ['--import', tsxLoader, join(root, 'src/cli/main.ts'), ...args], { cwd, env: { ...process.env, ...env }, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : (error as { code?: number }).code ?? -1, stdout, stderr })
    })
  })
}

/** The one `run --json` record of {@link SEND} in `project`'s dev container, as agent (FOO is `foo`, default `bar`; the workspace `/workspaces/<workspace>`, default the project's basename). */
function expectedRecord(project: ProjectFolder, foo = 'bar', workspace = project.basename): unknown {
  return { i: 1, line: 1, text: SEND, waitReason: 'stdin_read', sessionStatus: { kind: 'running' }, output: `${SEND}\nagent\n/workspaces/${workspace}\n${foo}\ndsh> `, truncated: false, ms: expect.any(Number) }
}

/** A devcontainer.json as agent, without workspaceFolder (the default applies), with FOO = `foo`. */
const configWithFoo = (foo: string): string => JSON.stringify({ image: IMAGE, remoteUser: 'agent', remoteEnv: { FOO: foo } })

/** The line `run` and `shell` print for the fixture's forwarded port 3000 (this machine's port: 3000, or any free one when 3000 is taken), as a regular expression's part. */
const FORWARDING = '# forwarding 127\\.0\\.0\\.1:\\d+ to the world\'s 127\\.0\\.0\\.1:3000 \\(App\\)( \\(port 3000 was taken\\))?\\n'

/** GET http://127.0.0.1:PORT/ from this machine: the status, or the error's code (e.g. ECONNRESET while nothing listens in the world). */
async function get(port: number): Promise<number | string> {
  return new Promise(resolve => {
    const req = request({ host: '127.0.0.1', port, path: '/', timeout: 5_000 }, response => {
      response.resume()
      response.on('end', () => resolve(response.statusCode ?? 0))
    })
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })))
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message))
    req.end()
  })
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
    expect(stderr).toMatch(new RegExp(`^${FORWARDING}# dev container of ${project.folder}, shell pid \\d+\\n# closed: nothing of the session is left running\\n$`))
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

  it('shell forwards the forwardPorts port: http.server on the container\'s 127.0.0.1:3000 answers a GET from this machine\'s forwarded port', async () => {
    const child = spawn(process.execPath, ['--import', tsxLoader, join(root, 'src/cli/main.ts'), 'shell', '--devcontainer', project.folder], { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] })
    let stderr = ''
    let port = 0
    const forwarded = new Promise<number>((resolve, reject) => {
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString()
        const port = /^# forwarding 127\.0\.0\.1:(\d+) to the world's 127\.0\.0\.1:3000 \(App\)( \(port 3000 was taken\))?$/m.exec(stderr)?.[1]
        if (port !== undefined) resolve(Number(port))
      })
      child.on('exit', () => reject(new Error(`the shell exited before forwarding: ${stderr}`)))
    })
    child.stdout.resume()
    try {
      port = await forwarded
      child.stdin.write('python3 -m http.server 3000 --bind 127.0.0.1 >/dev/null 2>&1 &\n')
      let status: number | string = 'not tried'
      for (let attempt = 0; attempt < 50 && status !== 200; attempt += 1) {
        status = await get(port)
        if (status !== 200) await new Promise(resolve => setTimeout(resolve, 200))
      }
      expect(status).toBe(200)
    } finally {
      child.stdin.end()
    }
    const [code] = await once(child, 'exit') as [number | null]
    expect(code).toBe(0)
    // The forward ends with the world.
    expect(await get(port)).toBe('ECONNREFUSED')
  }, 60_000)

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
    expect(lines.slice(at, at + 8)).toEqual([
      `  dev container of ${project.folder}: docker container ${container.id.slice(0, 12)} (${await nameOf(container)}), configured by ${project.configFile}`,
      '    user: agent (remoteUser of devcontainer.json)',
      `    workspace: /workspaces/${project.basename} (workspaceFolder), the shell's cwd and the sandbox's workspace root`,
      '    remoteEnv for terminals and spawned processes: FOO',
      '    forwarded ports: 3000 (App)',
      '    as the container was created: image',
      '    not applied: postStartCommand',
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
      forwardPorts: [{ port: 3000, label: 'App' }],
      atCreation: ['image'],
      notApplied: ['postStartCommand'],
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
    expect(started.stderr).toMatch(new RegExp(`^dsh-remote-worlds: --start started the dev container ${made.id.slice(0, 12)} \\(${await nameOf(made)}\\)\\n${FORWARDING}# dev container of ${stopped.folder}, shell pid \\d+\\n# closed: nothing of the session is left running\\n$`))
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
      userOrigin: { property: 'remoteUser', from: 'file' },
      workspaceFolder: `/workspaces/${library.basename}`,
      workspaceFolderSource: 'default',
      remoteEnv: { FOO: 'bar', WHERE: `yes:${library.basename}`, PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/extra' },
      unset: [],
      forwardPorts: [],
      atCreation: [],
      unsupported: [],
      withheld: [],
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

describe('--devcontainer: several configurations per project (.devcontainer/<name>/devcontainer.json), --config', () => {
  let several: ProjectFolder
  let python: string
  let fromPython: Docker.Container

  beforeAll(async () => {
    several = makeProjectFolder(configWithFoo('main'))
    python = addConfigFile(several, '.devcontainer/python/devcontainer.json', configWithFoo('python'))
    fromPython = await startDevcontainer(several, { configFile: python, metadata: undefined })
    containers.push(fromPython)
  })

  it('the only container was made from .devcontainer/python/devcontainer.json: THAT file applies', async () => {
    const { code, stdout } = await cli(['run', '--devcontainer', several.folder, '--script', script, '--json'])
    expect(records(stdout)).toEqual([expectedRecord(several, 'python')])
    expect(code).toBe(0)
    const doctor = await cli(['doctor', '--devcontainer', several.folder, '--json'])
    expect((JSON.parse(doctor.stdout) as { devcontainer: { configFile: string } }).devcontainer.configFile).toBe(python)
  }, 60_000)

  it('--config naming a file no container was made from: the error lists the folder\'s containers and the file each was made from', async () => {
    const { code, stderr } = await cli(['run', '--devcontainer', several.folder, '--config', several.configFile, '--script', script])
    expect(stderr).toBe([
      `dsh-remote-worlds: DevcontainerNotFoundError [DEVCONTAINER_NOT_FOUND]: no dev container of ${several.folder} was made from ${several.configFile}: 1 container carries the label devcontainer.local_folder=${several.folder} with another devcontainer.config_file:`,
      `  ${fromPython.id.slice(0, 12)}  ${await nameOf(fromPython)}  running  config ${python}`,
      `attach to one with --config FILE naming its configuration (the runtime's \`devcontainer.config\`), or start one from ${several.configFile} with \`devcontainer up --workspace-folder ${several.folder} --config ${several.configFile}\``,
      '',
    ].join('\n'))
    expect(code).toBe(2)
  })

  it('two containers of the folder: the one made from the default file is preferred; --config (relative to the current directory) picks the other', async () => {
    const fromMain = await startDevcontainer(several, { metadata: undefined })
    containers.push(fromMain)
    const preferred = await cli(['run', '--devcontainer', several.folder, '--script', script, '--json'])
    expect(records(preferred.stdout)).toEqual([expectedRecord(several, 'main')])
    const picked = await cli(['run', '--devcontainer', '--config', '.devcontainer/python/devcontainer.json', '--script', script, '--json'], several.folder)
    expect(records(picked.stdout)).toEqual([expectedRecord(several, 'python')])
    expect([preferred.code, picked.code]).toEqual([0, 0])
  }, 60_000)

  it('the runtime and the plugin take devcontainer: { folder, config }', async () => {
    const resolved = await resolveDevcontainer(several.folder, { docker, config: python })
    expect([resolved.container, resolved.configFile, resolved.remoteEnv]).toEqual([fromPython.id, python, { FOO: 'python' }])
    const ctx = new Context()
    try {
      await ctx.plugin(SandboxPolicyService, { mode: 'danger-full-access', workspaceRoot: resolved.workspaceFolder })
      await ctx.plugin(dockerPlugin, { devcontainer: { folder: several.folder, config: python } })
      const runtime = ctx.get('subprocess') as unknown as SubprocessRuntime
      const proc = runtime.spawn({ argv: ['sh', '-c', 'echo "$(id -un) $FOO"'], cwd: resolved.workspaceFolder, stdio: { stdin: 'ignore', stdout: { maxBytes: 65_536 }, stderr: { maxBytes: 65_536 } }, graceMs: 1_000 })
      expect((await proc.done).exitCode).toBe(0)
      expect(proc.collected.stdout!.readFrom(0).text).toBe('agent python\n')
    } finally {
      await ctx.fiber.dispose()
    }
  })
})

describe('--devcontainer: symlinked project folders and configuration files', () => {
  it('a folder reached through a symlink: the link\'s path is kept, as the reference CLI mounts it (/workspaces/<link name>), given as the link or as the real path', async () => {
    const real = makeProjectFolder(JSON.stringify({ image: IMAGE, remoteUser: 'agent', remoteEnv: { FOO: '${localWorkspaceFolderBasename}' } }))
    const link = linkTo(real.folder)
    const linkName = link.slice(link.lastIndexOf('/') + 1)
    const made = await startDevcontainer(real, { localFolder: link, configFile: join(link, '.devcontainer', 'devcontainer.json'), metadata: undefined })
    containers.push(made)
    for (const given of [link, real.folder]) {
      const { code, stdout } = await cli(['run', '--devcontainer', given, '--script', script, '--json'])
      expect(records(stdout)).toEqual([expectedRecord(real, linkName, linkName)])
      expect(code).toBe(0)
    }
  }, 60_000)

  it('a configuration that is a symlink to a shared file: compared through realpath on both sides, so the container made from the shared file is preferred', async () => {
    const shared = makeProjectFolder(configWithFoo('shared'))
    const project = makeProjectFolder()
    rmSync(project.configFile)
    symlinkSync(shared.configFile, project.configFile)
    const other = addConfigFile(project, '.devcontainer/other/devcontainer.json', configWithFoo('other'))
    const fromShared = await startDevcontainer(project, { configFile: shared.configFile, metadata: undefined })
    const fromOther = await startDevcontainer(project, { configFile: other, metadata: undefined })
    containers.push(fromShared, fromOther)
    const { code, stdout } = await cli(['run', '--devcontainer', project.folder, '--script', script, '--json'])
    expect(records(stdout)).toEqual([expectedRecord(project, 'shared')])
    expect(code).toBe(0)
  }, 60_000)
})

describe('--devcontainer: what of the client never crosses, and users named through variables', () => {
  const SECRET_ENV = { DEEPSEEK_API_KEY: 'sk-test-not-a-real-key', PLAIN_SETTING: 'plain' }
  const LINE = 'id -un; echo "[$HARMLESS][$GITHUB_TOKEN][$ID][$KEPT][$DEFAULTED]"'
  let secrets: ProjectFolder
  let made: Docker.Container
  let id: string

  beforeAll(async () => {
    secrets = makeProjectFolder(JSON.stringify({
      image: IMAGE,
      remoteUser: '${containerEnv:DEV_USER}',
      remoteEnv: {
        HARMLESS: '${localEnv:DEEPSEEK_API_KEY}',
        GITHUB_TOKEN: 'ghp-in-the-file',
        ID: '${devcontainerId}',
        KEPT: '${localEnv:PLAIN_SETTING}',
        DEFAULTED: '${localEnv:NOT_SET_ANYWHERE:first:second}',
      },
    }))
    made = await startDevcontainer(secrets, { env: ['DEV_USER=agent'], metadata: undefined })
    containers.push(made)
    id = devcontainerId({ 'devcontainer.local_folder': secrets.folder, 'devcontainer.config_file': secrets.configFile })
  })

  it('run: a remoteEnv value copying a credential is not set, and stderr says so; remoteUser from ${containerEnv:DEV_USER}; ${devcontainerId}; the first default', async () => {
    const lines = join(secrets.folder, 'lines.txt')
    writeFileSync(lines, `${LINE}\n`)
    const { code, stdout, stderr } = await cli(['run', '--devcontainer', secrets.folder, '--script', lines, '--json'], root, SECRET_ENV)
    expect(records(stdout)).toEqual([{ i: 1, line: 1, text: LINE, waitReason: 'stdin_read', sessionStatus: { kind: 'running' }, output: `${LINE}\nagent\n[][][${id}][plain][first]\ndsh> `, truncated: false, ms: expect.any(Number) }])
    expect(stdout).not.toContain('sk-test-not-a-real-key')
    expect(stderr).toMatch(new RegExp(`^${escape([
      'dsh-remote-worlds: WARNING: not applied: remoteEnv.HARMLESS uses ${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client',
      'dsh-remote-worlds: WARNING: not applied: remoteEnv.GITHUB_TOKEN: a credential-shaped name, scrubbed like the container\'s own environment',
      `# dev container of ${secrets.folder}, shell pid `,
    ].join('\n'))}\\d+\\n# closed: nothing of the session is left running\\n$`))
    expect(code).toBe(0)
  }, 60_000)

  it('shell says the same on stderr before the first prompt', async () => {
    const child = spawn(process.execPath, ['--import', tsxLoader, join(root, 'src/cli/main.ts'), 'shell', '--devcontainer', secrets.folder], { cwd: root, env: { ...process.env, ...SECRET_ENV }, stdio: ['pipe', 'pipe', 'pipe'] })
    child.stdin.end('echo "[$HARMLESS]"\n')
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
    child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
    const [code] = await once(child, 'exit') as [number | null]
    expect(stderr.split('\n').slice(0, 3)).toEqual([
      `opening dev container of ${secrets.folder} ...`,
      'dsh-remote-worlds: WARNING: not applied: remoteEnv.HARMLESS uses ${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client',
      'dsh-remote-worlds: WARNING: not applied: remoteEnv.GITHUB_TOKEN: a credential-shaped name, scrubbed like the container\'s own environment',
    ])
    // The shell shows what the send printed (the variable is empty), then the prompt it settled at.
    expect(stdout).toMatch(/^dsh> \[\]\ndsh> \n\[stdin_read, \d+ ms\]\n$/)
    expect(stdout + stderr).not.toContain('sk-test-not-a-real-key')
    expect(code).toBe(0)
  }, 60_000)

  it('doctor names both as not applied', async () => {
    const { code, stdout } = await cli(['doctor', '--devcontainer', secrets.folder, '--json'], root, SECRET_ENV)
    const report = JSON.parse(stdout) as { devcontainer: { user: string; userSource: string; remoteEnv: string[]; notApplied: string[] } }
    expect(report.devcontainer).toMatchObject({
      user: 'agent',
      userSource: 'remoteUser of devcontainer.json',
      remoteEnv: ['ID', 'KEPT', 'DEFAULTED'],
      notApplied: [
        'remoteEnv.HARMLESS uses ${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client',
        'remoteEnv.GITHUB_TOKEN: a credential-shaped name, scrubbed like the container\'s own environment',
      ],
    })
    expect(stdout).not.toContain('sk-test-not-a-real-key')
    expect(code).toBe(0)
  }, 60_000)

  it('workspaceFolder using a credential-shaped ${localEnv:...} is refused, naming the file and the property', async () => {
    writeFileSync(secrets.configFile, JSON.stringify({ image: IMAGE, workspaceFolder: '/workspaces/${localEnv:DEEPSEEK_API_KEY}' }))
    const { code, stderr } = await cli(['run', '--devcontainer', secrets.folder, '--script', script], root, SECRET_ENV)
    expect(stderr).toBe(`dsh-remote-worlds: DevcontainerConfigInvalidError [DEVCONTAINER_CONFIG_INVALID]: ${secrets.configFile} is not a usable dev container configuration: workspaceFolder: uses \${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client, which never crosses into a world; write the value itself (fix the file; it is JSON with comments and trailing commas allowed)\n`)
    expect(code).toBe(2)
  })
})

describe('--devcontainer: a remoteUser the container lacks', () => {
  let missing: ProjectFolder
  let made: Docker.Container

  beforeAll(async () => {
    missing = makeProjectFolder(JSON.stringify({ image: IMAGE, remoteUser: 'nosuchuser' }))
    made = await startDevcontainer(missing, { metadata: undefined })
    containers.push(made)
  })

  const message = async (): Promise<string> => `the dev container of ${missing.folder}, ${made.id.slice(0, 12)} (${await nameOf(made)}), has no user nosuchuser (the engine says: unable to find user nosuchuser: no matching entries in passwd file); nosuchuser is the remoteUser of ${missing.configFile}: set remoteUser there to a user the container has, or pass --user USER (the runtime's \`user\`) to run as another one`

  it('run fails before anything runs, naming the file, the property and --user', async () => {
    const { code, stdout, stderr } = await cli(['run', '--devcontainer', missing.folder, '--script', script])
    expect(stdout).toBe('')
    expect(stderr).toBe([
      `dsh-remote-worlds: DevcontainerUserNotFoundError [DEVCONTAINER_USER_NOT_FOUND]: ${await message()}`,
      `  caused by: ControlChannelError [CONTROL_FAILED]: the remote control program in docker container ${made.id.slice(0, 12)} as nosuchuser ended before it started: "unable to find user nosuchuser: no matching entries in passwd file"`,
      '',
    ].join('\n'))
    expect(code).toBe(2)
  })

  it('doctor shows the failing check and the dev container section', async () => {
    const { code, stdout } = await cli(['doctor', '--devcontainer', missing.folder])
    expect(stdout).toBe([
      `dsh-remote-worlds doctor: dev container of ${missing.folder}`,
      `  FAIL ${'dev container user'.padEnd(26)} ${await message()}`,
      `  dev container of ${missing.folder}: docker container ${made.id.slice(0, 12)} (${await nameOf(made)}), configured by ${missing.configFile}`,
      '    user: nosuchuser (remoteUser of devcontainer.json)',
      `    workspace: /workspaces/${missing.basename} (workspaceFolder not set: the specification's default), the shell's cwd and the sandbox's workspace root`,
      '    remoteEnv for terminals and spawned processes: none',
      '    forwarded ports: none',
      '    as the container was created: image',
      '    not applied: none',
      '    sandbox: not judged (no process can start as nosuchuser)',
      '',
    ].join('\n'))
    expect(code).toBe(1)
  })

  it('--user wins, so the configured user is not needed', async () => {
    const { code, stdout } = await cli(['run', '--devcontainer', missing.folder, '--user', 'agent', '--script', script, '--json'])
    expect(records(stdout)).toEqual([expectedRecord(missing, '')])
    expect(code).toBe(0)
  }, 60_000)
})

describe('resolveTarget --devcontainer', () => {
  it('names the folder and the configuration file it read; workspaceFolder is the workspace root and the cwd; --workspace sets both, --cwd the cwd only', async () => {
    const target = await resolveTarget({ devcontainer: project.folder, start: true })
    expect([target.description, target.world.runtimeConfig, target.world.workspaceRoot, target.cwd, target.managed]).toEqual([
      `dev container of ${project.folder}`, { devcontainer: { folder: project.folder, config: project.configFile, start: true } }, `/workspaces/${project.basename}`, `/workspaces/${project.basename}`, false,
    ])
    const workspace = await resolveTarget({ devcontainer: project.folder, workspace: '/srv' })
    expect([workspace.world.workspaceRoot, workspace.cwd]).toEqual(['/srv', '/srv'])
    const explicit = await resolveTarget({ devcontainer: project.folder, user: 'root', cwd: '/tmp', workspace: '/srv', mode: 'read-only' })
    expect([explicit.world.runtimeConfig, explicit.world.workspaceRoot, explicit.world.mode, explicit.cwd]).toEqual([{ devcontainer: { folder: project.folder, config: project.configFile }, user: 'root' }, '/srv', 'read-only', '/tmp'])
  })

  it('forwardPorts (the file\'s and the metadata label\'s) are forwards of the world\'s network, the same port on 127.0.0.1 or any free one, after the user\'s --forward', async () => {
    const own = { hostAddress: '127.0.0.1', hostPort: 3000, worldPort: 3000, anyPortIfTaken: true, label: 'App' }
    expect((await resolveTarget({ devcontainer: project.folder })).world.network).toEqual({ forward: [own] })
    expect((await resolveTarget({ devcontainer: project.folder, forward: ['8000:9000'], network: 'full' })).world.network).toEqual({ network: 'full', forward: ['8000:9000', own] })
    // A world port the user forwards already is not forwarded twice.
    expect((await resolveTarget({ devcontainer: project.folder, forward: ['3001:3000'] })).world.network).toEqual({ forward: ['3001:3000'] })
  })
})

/** A string as a literal part of a regular expression. */
function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
