/**
 * `ctx.fs` in the SSH world (the shared contract suite, test/helpers/fs-cases.ts) against a real
 * OpenSSH sshd (project image, 127.0.0.1, keys generated per run), logged in as root and as
 * `agent`.
 */
import { afterAll, beforeAll } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { fsCases } from '../helpers/fs-cases.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld

beforeAll(async () => {
  sshd = await startSshdWorld()
})

afterAll(async () => {
  await sshd?.stop()
})

fsCases({
  name: 'ssh',
  containerId: () => sshd.containerId,
  open: user => openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `${user}@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false },
    workspaceRoot: '/srv',
  }),
})
