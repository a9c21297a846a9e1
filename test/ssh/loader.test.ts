/**
 * A real DSH composition over SSH: the UPSTREAM loader (`@deepseek-ai/dsh-app-boot`) reads a
 * `cordis.patch.yml` that mounts the terminal service, terminal-bash, the sandbox policy and
 * `dsh-remote-worlds/ssh` (the built package, resolved from the profile's node_modules). A
 * terminal opened through the tree runs on the sshd host (its hostname, its pid namespace), and
 * the bash executor's commands run there through our spawn.
 */
import { mkdtempSync, readlinkSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import { boot, loadOptionalPatches } from '@deepseek-ai/dsh-app-boot'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ownerAgent } from '../../src/backend/world.ts'
import { execIn, hangGuard } from '../docker/helpers.ts'
import { type BuiltProfile, buildProfile, worldLayer } from '../helpers/built-package.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

const tmp = mkdtempSync(join(tmpdir(), 'dsh-remote-ssh-loader-'))
let sshd: SshdWorld
let built: BuiltProfile
let ctx: Context | undefined

beforeAll(async () => {
  ;[sshd, built] = await Promise.all([startSshdWorld(), buildProfile(tmp)])
  built.writePatch(worldLayer({
    comment: 'A DSH profile layer: persistent shells and the bash tool on a host over SSH.',
    mode: 'danger-full-access',
    workspaceRoot: '/tmp',
    world: `    - id: subprocess
      name: dsh-remote-worlds/ssh
      config:
        target: agent@127.0.0.1:${sshd.ports[0]}
        identity: ${sshd.clientKeyFile}
        knownHosts: ${sshd.knownHostsFile}
        sshConfig: false
        agent: false`,
    after: `    - id: bash
      name: '@deepseek-ai/dsh-bash-local'
      config:
        cwd: /tmp`,
  }))
  process.env.DSH_HOME = join(tmp, 'dsh-home')
}, 120_000)

afterAll(async () => {
  await ctx?.fiber.dispose().catch(() => undefined)
  await sshd?.stop()
  rmSync(tmp, { recursive: true, force: true })
})

describe('the upstream loader composes our SSH world from cordis.patch.yml', () => {
  it('opens a terminal on the host and runs the bash tool there; disposal leaves nothing running', async () => {
    const patches = loadOptionalPatches('dsh-remote-test', join(built.profile, 'cordis.patch.yml'))!
    ctx = await hangGuard(boot('dsh-remote-test', join(built.profile, 'cordis.yml'), patches), 60_000, 'boot')
    expect((ctx.get('subprocess') as unknown as { constructor: { name: string } }).constructor.name).toBe('SshSubprocessRuntime')
    const host = (await execIn(sshd.containerId, ['hostname'])).stdout.trim()
    const hostNs = (await execIn(sshd.containerId, ['readlink', '/proc/1/ns/pid'])).stdout.trim()

    const agent = ownerAgent(ctx, 'ssh-loader-test')
    ctx.agents.register(agent)
    const created = await hangGuard(ctx.terminals.spawn(agent, { type: 'shell' }), 30_000, 'terminal spawn')
    const sent = await hangGuard(ctx.terminals.startSend(agent, created.sessionId, { text: 'printf "host=%s pid=%s user=%s ns=%s\\n" "$(hostname)" "$$" "$(id -un)" "$(readlink /proc/self/ns/pid)"', submit: true }).done, 30_000, 'send')
    const line = /host=(\S+) pid=(\d+) user=(\S+) ns=(\S+)/.exec(sent.viewport)
    expect(line, sent.viewport).not.toBeNull()
    expect([line![1], Number(line![2]), line![3], line![4]]).toEqual([host, created.pid, 'agent', hostNs])
    expect(line![4]).not.toBe(readlinkSync('/proc/self/ns/pid'))

    const shell = ctx.get('shell') as unknown as { resolve(request: object): object; run(spec: object): Promise<{ exitCode: number | null; stdout: { text: string }; stderr: { text: string } }> }
    const result = await shell.run(shell.resolve({ command: 'echo "$(hostname) $(id -un)"; echo err >&2; exit 4', timeoutMs: 20_000 }))
    expect([result.exitCode, result.stdout.text, result.stderr.text]).toEqual([4, `${host} agent\n`, 'err\n'])

    await hangGuard(ctx.terminals.kill(agent, created.sessionId), 20_000, 'terminal kill')
    await hangGuard(ctx.fiber.dispose(), 30_000, 'dispose')
    ctx = undefined
    const left = (await sshd.leftovers()).filter(row => row.user === 'agent')
    expect(left).toEqual([])
  }, 120_000)
})
