/**
 * A client that dies leaves nothing running for good on an SSH host (the shared suite,
 * test/helpers/client-death-cases.ts), against a real OpenSSH sshd, logged in as `agent`.
 */
import { afterAll, beforeAll } from 'vitest'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { clientDeathCases } from '../helpers/client-death-cases.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld

beforeAll(async () => {
  sshd = await startSshdWorld()
})

afterAll(async () => {
  await sshd?.stop()
})

clientDeathCases({
  name: 'ssh',
  containerId: () => sshd.containerId,
  // Persistence 'off', given (the default is 'connection', whose held shells outlive a dead client by design).
  cliFlags: () => ['--ssh', `agent@127.0.0.1:${sshd.ports[0]}`, '--identity', sshd.clientKeyFile, '--known-hosts', sshd.knownHostsFile, '--persist', 'off'],
  plugin: async ctx => {
    await ctx.plugin(SshSubprocessRuntime, { target: `agent@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false, persistence: 'off' })
  },
})
