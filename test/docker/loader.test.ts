/**
 * A real DSH composition: the UPSTREAM loader (`@deepseek-ai/dsh-app-boot`'s boot, over
 * cordis-plugin-loader/include) reads a `cordis.patch.yml` written exactly as a user would,
 * mounting the terminal service, terminal-bash, the sandbox policy and our Docker world
 * (`dsh-remote-worlds/docker` + `dsh-remote-worlds/docker/sandbox`) by their package names.
 *
 * The package is used as a user gets it: built (`tsc`, the `build` script's output) into a
 * package directory whose package.json `exports` the loader resolves from a profile's
 * node_modules. A terminal opened through the composed tree runs in the managed container
 * (its hostname, its pid namespace), and disposing the tree removes the container.
 */
import { mkdtempSync, readlinkSync, realpathSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { bootedManagedWorld, bootedTerminal, useLoaderProfile } from '../helpers/booted.ts'
import { worldLayer } from '../helpers/built-package.ts'
import { IMAGE, docker, hangGuard } from './helpers.ts'
import { LIFELINE_COMMAND } from '../../src/providers/docker/docker-world.ts'

const tmp = mkdtempSync(join(tmpdir(), 'dsh-remote-loader-'))
const workspace = join(tmp, 'workspace')

/** The user's patch file: replace nothing, insert the stack (an empty profile root). */
function patchFile(): string {
  return worldLayer({
    comment: 'A DSH profile layer mounting a persistent shell in a Docker world.',
    mode: 'workspace-write',
    workspaceRoot: '/workspace',
    world: `    - id: subprocess
      name: dsh-remote-worlds/docker
      config:
        image: ${IMAGE}
        user: agent
        workspace:
          bind: ${workspace}
        terminal:
          replies: 'off'
          scrollback: 50
    - id: sandbox
      name: dsh-remote-worlds/docker/sandbox`,
  })
}

const profile = useLoaderProfile(tmp, patchFile)

describe('the upstream loader composes our Docker world from cordis.patch.yml', () => {
  it('opens a terminal in the managed container, confined by the policy, and disposal removes the container', async () => {
    // The names resolve to the built package in the profile's node_modules, as for a user.
    const { profile: root, pkg } = profile.built()
    expect(realpathSync(createRequire(join(root, 'cordis.yml')).resolve('dsh-remote-worlds/docker'))).toBe(join(realpathSync(pkg), 'dist/src/plugins/docker.js'))
    const ctx = await profile.boot()
    const world = await bootedManagedWorld(ctx)
    const info = world.info
    expect(info.HostConfig.ReadonlyRootfs).toBe(true)

    const created = await bootedTerminal(ctx, 'loader-test')
    const send = created.send
    const facts = await send('printf "host=%s pid=%s uid=%s pwd=%s ns=%s init=%s\\n" "$(hostname)" "$$" "$(id -u)" "$PWD" "$(readlink /proc/self/ns/pid)" "$(tr "\\0" " " </proc/1/cmdline)"')
    const line = /host=(\S+) pid=(\d+) uid=(\d+) pwd=(\S+) ns=(\S+) init=(.*)/.exec(facts)
    expect(line, facts).not.toBeNull()
    const [, host, pid, uid, pwd, ns, init] = line!
    expect(host).toBe(info.Config.Hostname)
    // The shell's pid is a pid of the container's namespace: the terminal's pid, not a host pid.
    expect(Number(pid)).toBe(created.pid)
    expect(ns).not.toBe(readlinkSync('/proc/self/ns/pid'))
    expect(init!.trim()).toBe(`/sbin/docker-init -- ${LIFELINE_COMMAND.join(' ')}`)
    expect([uid, pwd]).toEqual(['1000', '/workspace'])
    // The plugin's `terminal` option reached the runtime, whose terminal keeps an emulator.
    const runtime = ctx.get('subprocess') as unknown as { config: { terminal?: unknown }; terminal(pid: number): { screen(): Promise<{ lines: string[] }> } | undefined }
    expect(runtime.config.terminal).toEqual({ replies: 'off', scrollback: 50 })
    expect((await runtime.terminal(created.pid!)!.screen()).lines.filter(row => row.startsWith(`host=${host} pid=${pid} `))).toHaveLength(1)
    const effects = await send('touch /workspace/ok && echo ws-ok; touch /etc/denied 2>&1')
    expect(effects).toContain('ws-ok')
    expect(effects).toContain("touch: cannot touch '/etc/denied': Read-only file system")

    await created.kill()
    await hangGuard(ctx.fiber.dispose(), 30_000, 'dispose')
    profile.disposed()
    const gone = await docker.getContainer(world.containerId).inspect().then(() => 'present', (error: { statusCode?: number }) => error.statusCode)
    expect(gone).toBe(404)
  }, 120_000)
})
