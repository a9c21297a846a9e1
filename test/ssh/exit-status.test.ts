/**
 * No exit status is lost in the SSH world (the shared suite, test/helpers/exit-status-cases.ts),
 * against a real OpenSSH sshd, logged in as `agent` (200 spawns per stdio mode here; the soak's
 * 1000 are test/long/exit-status-soak.test.ts). ssh2 emits a fast program's `exit` in the
 * same read that completes its exec request: this suite failed about 1 spawn in 10 before the
 * channel's end was recorded in the exec callback itself (src/providers/ssh/exec-channel.ts).
 */
import { afterAll, beforeAll } from 'vitest'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { exitStatusCases } from '../helpers/exit-status-cases.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld

beforeAll(async () => {
  sshd = await startSshdWorld()
})

afterAll(async () => {
  await sshd?.stop()
})

exitStatusCases({
  name: 'ssh',
  plugin: async ctx => {
    await ctx.plugin(SshSubprocessRuntime, { target: `agent@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false })
  },
}, { spawns: 200, parallel: 8 })
