/**
 * `spawn` and `resolveExecutable` in the SSH world (the shared suite, test/helpers/spawn-cases.ts)
 * against a real OpenSSH sshd (project image, host networking, 127.0.0.1, keys generated per
 * run). The login's ambient environment is the suite's, set by sshd's SetEnv. The vanishing
 * world is a lost connection: its sshd processes are killed while the host (and the program)
 * lives on, so the handle must reconnect and stop the tree.
 */
import type { Context } from '@deepseek-ai/cordis'
import { afterAll, beforeAll } from 'vitest'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { execIn } from '../docker/helpers.ts'
import { SPAWN_AMBIENT, running, spawnCases } from '../helpers/spawn-cases.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld

beforeAll(async () => {
  sshd = await startSshdWorld([{ setEnv: SPAWN_AMBIENT }])
})

afterAll(async () => {
  await sshd?.stop()
})

async function plugin(ctx: Context, user: string): Promise<void> {
  await ctx.plugin(SshSubprocessRuntime, { target: `${user}@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false })
}

spawnCases({
  name: 'ssh',
  containerId: () => sshd.containerId,
  hostname: async () => (await execIn(sshd.containerId, ['hostname'])).stdout.trim(),
  plugin: async (ctx, user) => { await plugin(ctx, user) },
  vanishing: async () => ({
    containerId: sshd.containerId,
    plugin: async ctx => { await plugin(ctx, 'agent') },
    // Kill every per-connection sshd (the privileged monitors and the session processes), never
    // the listener: the connection is lost, the host and its processes live on.
    vanish: async () => { await sshd.exec(['pkill', '-KILL', '-f', '^sshd: agent']) },
    leftovers: marker => running(sshd.containerId, marker),
    cleanup: async () => undefined,
  }),
})
