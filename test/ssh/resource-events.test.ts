/**
 * Resource-limit events in the SSH world (the shared suite, test/helpers/resource-event-cases.ts):
 * the test sshd runs in a container with Memory = MemorySwap = 256 MiB and PidsLimit 64, logged
 * in as `agent`. The login session's cgroup is the container's, so its counters are the ones
 * the control program reads.
 */
import { afterAll, beforeAll } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { UPSTREAM_TUNING } from '../docker/helpers.ts'
import { MEMORY_LIMIT, PIDS_LIMIT, resourceEventCases } from '../helpers/resource-event-cases.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld

beforeAll(async () => {
  sshd = await startSshdWorld([{}], { hostConfig: { Memory: MEMORY_LIMIT, MemorySwap: MEMORY_LIMIT, PidsLimit: PIDS_LIMIT } })
})

afterAll(async () => {
  await sshd?.stop()
})

resourceEventCases({
  name: 'ssh',
  open: () => openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `agent@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false },
    workspaceRoot: '/tmp',
    terminal: { ...UPSTREAM_TUNING, timeoutMs: 30_000, idleSilenceMs: 3_000 },
  }),
})
