/**
 * The package as users meet it: the tarball `npm pack` makes (its `prepack` builds dist/),
 * installed with npm into a scratch project next to the upstream packages it names as peers.
 * - The tarball holds the library, the CLI, the image scripts and the bundle patch; no tests,
 *   no bench, no sources.
 * - The composition example of docs/compositions.md, copied as it stands, runs there under
 *   Node 22, prints from the container, and exits promptly after its disposal.
 * - A Node older than the engines range fails at import with the required version named.
 * - As a DSH bundle: a profile lists the installed package in `dsh.profile.bundles` (what
 *   `dsh plugin add` writes), the upstream loader composes the profile with the package's own
 *   cordis.patch.yml, the environment chooses a managed container, dsh-base's local rows are
 *   disabled, and the terminal tool then runs in the container.
 */
import { execFile } from 'node:child_process'
import { chownSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type { Context } from '@deepseek-ai/cordis'
import { boot, loadProfile } from '@deepseek-ai/dsh-app-boot'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { bootedManagedWorld, bootedTerminal } from '../helpers/booted.ts'
import { IMAGE, docker, hangGuard, startTestContainer } from '../docker/helpers.ts'
import { ROOT, packedTarball } from '../helpers/built-package.ts'

const run = promisify(execFile)
const tmp = mkdtempSync(join(tmpdir(), 'dsh-remote-packed-'))
const home = join(tmp, 'dsh-home')
/** The scratch project, which is also the DSH profile `packed` (a profile is a package directory). */
const project = join(home, 'profiles', 'packed')
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; version: string; peerDependencies: Record<string, string>; devDependencies: Record<string, string> }
const devDependencies = pkg.devDependencies
/** The upstream packages of the file tools the README example and the stand-in dsh-base mount (the README's install line). */
const BUNDLE_TOOLS = ['@deepseek-ai/dsh-tools', '@deepseek-ai/dsh-system-prompt', '@deepseek-ai/dsh-llm', '@deepseek-ai/dsh-tool-fs', '@deepseek-ai/dsh-fs-observation-policy', '@deepseek-ai/dsh-tool-fs-search', '@deepseek-ai/dsh-tool-str-replace-editor'] as const
let tarball: string
/** The tarball's files, as `npm pack --json` lists them. */
let packedFiles: string[]

/** The composition example of docs/compositions.md: the js block after the `example:` marker. */
function readmeExample(): string {
  const readme = readFileSync(join(ROOT, 'docs', 'compositions.md'), 'utf8')
  const marker = readme.indexOf('<!-- example: test/package/packed.test.ts runs the next block -->')
  expect(marker).toBeGreaterThan(0)
  const block = /```js\n([\s\S]*?)```/.exec(readme.slice(marker))
  expect(block).not.toBeNull()
  return block![1]!
}

beforeAll(async () => {
  const packed = await packedTarball()
  tarball = join(tmp, packed.filename)
  copyFileSync(packed.path, tarball)
  packedFiles = packed.files
  mkdirSync(project, { recursive: true })
  writeFileSync(join(project, 'package.json'), `${JSON.stringify({
    name: 'dsh-profile-packed',
    private: true,
    type: 'module',
    // The peers, and the upstream tool packages the bundle test's stand-in base mounts.
    dependencies: { [pkg.name]: `file:${tarball}`, ...pkg.peerDependencies, ...Object.fromEntries(BUNDLE_TOOLS.map(name => [name, devDependencies[name]!])) },
    dsh: { profile: { bundles: ['test-base', pkg.name] } },
  }, null, 2)}\n`)
  // From npm's cache when it has them (the project's own install put them there).
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: project, maxBuffer: 16 << 20 })
}, 300_000)

afterAll(() => {
  rmSync(tmp, { recursive: true, force: true })
})

describe('the packed tarball', () => {
  it('holds the library, the CLI, the image scripts and the bundle patch, and nothing of tests, bench or sources', () => {
    const files = packedFiles
    expect(files.filter(path => /^(dist\/(test|bench)|test|bench|src|scratch)\//.test(path) || path.endsWith('.map'))).toEqual([])
    expect(files).toEqual(expect.arrayContaining([
      'package.json',
      'README.md',
      'LICENSE',
      'cordis.patch.yml',
      'docs/DESIGN.md',
      'docs/compositions.md',
      'docs/files.md',
      'docker/ensure-world.sh',
      'docker/Dockerfile',
      'dist/src/index.js',
      'dist/src/index.d.ts',
      'dist/src/cli/main.js',
      'dist/src/plugins/docker.js',
      'dist/world/control/control.sh',
      'dist/src/emulator/worker.js',
      'dist/src/plugins/fs.js',
      'dist/src/plugins/jobs.js',
      'dist/world-tools/linux-x86_64/dsh-fsd',
      'dist/world-tools/linux-x86_64/dsh-pty',
      'dist/world-tools/linux-x86_64/dsh-relay',
      'dist/world-tools/linux-x86_64/dsh-job',
      'dist/world-tools/linux-x86_64/rg',
      'dist/world-tools/linux-x86_64/rg.LICENSE',
      'dist/world-tools/linux-aarch64/dsh-fsd',
      'dist/world-tools/linux-aarch64/dsh-pty',
      'dist/world-tools/linux-aarch64/dsh-relay',
      'dist/world-tools/linux-aarch64/dsh-job',
      'dist/world-tools/linux-aarch64/rg',
      'dist/world-tools/linux-aarch64/rg.LICENSE',
    ]))
    // The upstream packages are peers, installed once beside it: one cordis in the project.
    const cordisCopies = readdirSync(join(project, 'node_modules', pkg.name)).includes('node_modules')
      ? readdirSync(join(project, 'node_modules', pkg.name, 'node_modules'))
      : []
    expect(cordisCopies).not.toContain('@deepseek-ai')
  })

  it('runs the composition example of docs/compositions.md as written, under Node 22, and exits after its disposal', async () => {
    writeFileSync(join(project, 'example.mjs'), readmeExample())
    // The process ends with its disposal: `run` resolves at its exit (the hang guard is generous).
    const { stdout } = await hangGuard(run(process.execPath, ['example.mjs'], { cwd: project, timeout: 120_000 }), 120_000, 'the composition example')
    const info = await docker.listContainers({ all: true, filters: { ancestor: [IMAGE], label: ['dsh-remote-worlds.managed=true'] } })
    // The file the write tool wrote is the one the process ran, in the container.
    expect(stdout).toMatch(/^0 42 agent in [0-9a-f]{12}\n$/)
    // The managed container went with the disposal.
    expect(info.filter(container => stdout.includes(container.Id.slice(0, 12)))).toEqual([])
  }, 150_000)

  it('installs its command as dsh-remote-worlds only (dsh-remote belongs to other npm packages)', async () => {
    const bin = readdirSync(join(project, 'node_modules', '.bin'))
    expect(bin.filter(name => name.startsWith('dsh-remote'))).toEqual(['dsh-remote-worlds'])
    // Through this Node 22 (the bin's `#!/usr/bin/env node` may find an older system Node).
    const { stdout } = await run(process.execPath, [join(project, 'node_modules', '.bin', 'dsh-remote-worlds'), '--help'], { cwd: project })
    expect(stdout).toMatch(/^Usage: dsh-remote-worlds \[options\] \[command\]\n/)
  })

  it('answers terminal queries and shows the screen from the installed package (the emulator worker runs from dist)', async () => {
    const script = `printf '\\033[6n'; read -rs -d R pos; echo "got-\${#pos}"\n@screen\n`
    const cli = run(process.execPath, [join(project, 'node_modules', '.bin', 'dsh-remote-worlds'), 'run', '--image', IMAGE, '--user', 'agent', '--cwd', '/tmp', '--json', '--script', '-'], { cwd: project, timeout: 120_000 })
    cli.child.stdin!.end(script)
    const { stdout } = await hangGuard(cli, 120_000, 'the packed CLI')
    const [query, screen] = stdout.trim().split('\n').map(line => JSON.parse(line) as { waitReason?: string; output?: string; screen?: { lines: string[] } })
    expect(query!.waitReason).toBe('stdin_read')
    expect(query!.output).toMatch(/\ngot-[56]\n/)
    expect(screen!.screen!.lines.filter(line => /^got-[56]$/.test(line))).toHaveLength(1)
  }, 150_000)

  it('fails at import on a Node older than 22.19, naming the required version', async () => {
    // A preload that makes this Node report an older version, as Node 20 would.
    writeFileSync(join(project, 'old-node.mjs'), "Object.defineProperty(process, 'versions', { value: { ...process.versions, node: '20.20.2' } })\n")
    const failure = await run(process.execPath, ['--import', './old-node.mjs', 'example.mjs'], { cwd: project }).then(() => undefined, (error: { code: number; stderr: string }) => error)
    expect(failure?.code).toBe(1)
    expect(failure?.stderr).toContain(`Error: dsh-remote-worlds needs Node.js >= 22.19.0; this is Node.js 20.20.2 (${process.execPath})`)
  })
})

describe('the packed package as a DSH bundle', () => {
  let ctx: Context | undefined
  // Not below /tmp: the managed container binds the working directory at the same path, and
  // its /tmp is a private tmpfs (the sandbox refuses a workspace there, rightly).
  const workspace = mkdtempSync('/var/tmp/dsh-remote-packed-ws-')
  const saved = { cwd: process.cwd(), env: { ...process.env } }

  beforeAll(() => {
    // A stand-in for dsh-base: the rows a profile starts from, the local `subprocess`,
    // `sandbox` and `fs-sandbox` rows included (their packages are not installed: the bundle
    // must disable them), and dsh-base's file tools, which must then act in the world.
    const base = join(project, 'node_modules', 'test-base')
    mkdirSync(base, { recursive: true })
    writeFileSync(join(base, 'package.json'), JSON.stringify({ name: 'test-base', version: '1.0.0', dsh: { bundle: { patch: './cordis.patch.yml' } } }))
    writeFileSync(join(base, 'cordis.patch.yml'), `- insert:
    - id: session
      name: '@deepseek-ai/dsh-session'
    - id: agent
      name: '@deepseek-ai/dsh-agent'
    - id: terminal
      name: '@deepseek-ai/dsh-terminal'
    - id: subprocess
      name: '@deepseek-ai/dsh-subprocess-local'
    - id: sandbox
      name: '@deepseek-ai/dsh-sandbox-local'
    - id: sandbox-policy
      name: '@deepseek-ai/dsh-sandbox-policy'
      config:
        mode: read-only
        workspaceRoot: !!js process.cwd()
    - id: terminal-bash
      name: '@deepseek-ai/dsh-terminal-bash'
    - id: fs-sandbox
      name: '@deepseek-ai/dsh-fs-sandbox'
    - id: system-prompt
      name: '@deepseek-ai/dsh-system-prompt'
    - id: tools
      name: '@deepseek-ai/dsh-tools'
    - id: fs-observation-policy
      name: '@deepseek-ai/dsh-fs-observation-policy'
    - id: tool-fs
      name: '@deepseek-ai/dsh-tool-fs'
`)
    writeFileSync(join(project, 'cordis.yml'), '[]\n')
    writeFileSync(join(project, 'cordis.patch.yml'), '[]\n')
    writeFileSync(join(workspace, 'hello.txt'), 'hello from the project\n')
    chownSync(workspace, 1000, 1000)
  })

  afterAll(async () => {
    await ctx?.fiber.dispose().catch(() => undefined)
    process.chdir(saved.cwd)
    process.env = saved.env
    rmSync(workspace, { recursive: true, force: true })
  })

  it('composes the chosen world from its own patch: local rows disabled, the terminal tool in a managed container', async () => {
    // What a user's shell would hold: the world chosen by the environment, dsh started in the project.
    process.env.DSH_HOME = home
    process.env.DSH_REMOTE_DOCKER_IMAGE = IMAGE
    process.env.DSH_REMOTE_USER = 'agent'
    process.chdir(workspace)
    const profile = loadProfile('dsh-remote-test', 'packed', join(project, 'package.json'), home)
    expect(profile.layers.map(layer => [layer.packageName, layer.patchPath])).toEqual([
      ['test-base', join(project, 'node_modules/test-base/cordis.patch.yml')],
      [pkg.name, join(project, 'node_modules', pkg.name, 'cordis.patch.yml')],
    ])
    ctx = await hangGuard(boot('dsh-remote-test', join(project, 'cordis.yml'), [...profile.layers.flatMap(layer => layer.patches), ...profile.patches]), 60_000, 'boot')
    const world = await bootedManagedWorld(ctx)
    const info = world.info
    expect(info.HostConfig.ReadonlyRootfs).toBe(true)

    const facts = await (await bootedTerminal(ctx, 'bundle-test')).send('echo "host=$(hostname) uid=$(id -u) pwd=$PWD"; cat hello.txt; touch denied 2>&1')
    expect(facts).toContain(`host=${info.Config.Hostname} uid=1000 pwd=${workspace}`)
    expect(facts).toContain('hello from the project')
    expect(facts).toContain("touch: cannot touch 'denied': Read-only file system")

    // The file tools act in the same world: ctx.fs is this package's, reading the container's
    // workspace, and the read-only mode refuses the write tool with the sandbox marker.
    expect(ctx.get('fs')?.constructor.name).toBe('RemoteFileSystem')
    const tool = (name: string, args: Record<string, unknown>): Promise<unknown> => ctx!.get('tools')!.execute({ signal: new AbortController().signal, callId: `call-${name}` as never, name, arguments: args })
    expect(JSON.stringify(await tool('read', { file_path: 'hello.txt' }))).toContain('hello from the project')
    expect(JSON.stringify(await tool('write', { file_path: 'new.txt', content: 'x' }))).toContain('[sandbox: file access denied under read-only mode]')
    await hangGuard(ctx.fiber.dispose(), 30_000, 'dispose')
    ctx = undefined
    await expect(docker.getContainer(world.containerId).inspect()).rejects.toMatchObject({ statusCode: 404 })
  }, 120_000)

  /** Boot the profile as a user's shell would, with these DSH_REMOTE_* variables. */
  async function bootWith(variables: Record<string, string>): Promise<Context> {
    for (const name of Object.keys(process.env).filter(name => name.startsWith('DSH_REMOTE_'))) delete process.env[name]
    Object.assign(process.env, { DSH_HOME: home }, variables)
    process.chdir(workspace)
    const profile = loadProfile('dsh-remote-test', 'packed', join(project, 'package.json'), home)
    return boot('dsh-remote-test', join(project, 'cordis.yml'), [...profile.layers.flatMap(layer => layer.patches), ...profile.patches])
  }

  it('attaches to a running container named by DSH_REMOTE_DOCKER_CONTAINER, judged by its own HostConfig', async () => {
    // A container that enforces read-only for this workspace: read-only rootfs, the folder bound read-only.
    const attached = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'packed' }, HostConfig: { ReadonlyRootfs: true, Tmpfs: { '/tmp': '' }, Binds: [`${workspace}:${workspace}:ro`], CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'] } })
    try {
      ctx = await hangGuard(bootWith({ DSH_REMOTE_DOCKER_CONTAINER: attached.id, DSH_REMOTE_USER: 'agent' }), 60_000, 'boot')
      const runtime = ctx.get('subprocess') as unknown as { world(): Promise<{ containerId: string; managed: boolean }> }
      expect(await runtime.world()).toMatchObject({ containerId: attached.id, managed: false })
      const facts = await (await bootedTerminal(ctx, 'bundle-attach')).send('echo "uid=$(id -u) pwd=$PWD"; cat hello.txt; touch denied 2>&1')
      expect(facts).toContain(`uid=1000 pwd=${workspace}`)
      expect(facts).toContain('hello from the project')
      expect(facts).toContain("touch: cannot touch 'denied': Read-only file system")
      await hangGuard(ctx.fiber.dispose(), 30_000, 'dispose')
      ctx = undefined
      // An attached container is the user's: it stays.
      expect((await attached.inspect()).State.Running).toBe(true)
    } finally {
      await attached.remove({ force: true })
    }
  }, 120_000)

  it('fails the boot with the runtime\'s own error for a world it cannot use (here, an SSH target\'s bad port)', async () => {
    const failure = await bootWith({ DSH_REMOTE_SSH: 'agent@127.0.0.1:99999' }).then(
      booted => { ctx = booted; return undefined },
      (error: unknown) => error,
    )
    // The loader names the entry and the runtime's typed error (before, the entry looked
    // active and only the services waiting for `subprocess` were reported).
    expect((failure as Error).message).toContain('dsh-remote-worlds/ssh: InvalidArgumentError: invalid port in SSH target "agent@127.0.0.1:99999"')
  }, 60_000)
})
