/**
 * Upstream terminal-bash's real-shell suite (tests/local.spec.ts) over SSH: the UNCHANGED
 * terminal-bash on SshSubprocessRuntime against a real OpenSSH sshd (project image, host
 * networking, 127.0.0.1, keys generated per run), as `agent` and as root. Process checks read
 * the sshd container's pid namespace through a separate `docker exec`.
 */
import { afterAll, afterEach, beforeAll, describe, expect } from 'vitest'
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { UPSTREAM_TUNING, USERS, execIn } from '../docker/helpers.ts'
import { manyTerminalCases } from '../helpers/many-terminal-cases.ts'
import { AMBIENT_FOR_SCRUB_TEST, type RealShellWorld, realShellCases } from '../helpers/real-shell-cases.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

/** Workspace root on the SSH host (absent on the test machine, so no local realpath applies). */
const WORKSPACE = '/dsh-ws'

let sshd: SshdWorld
const worlds: RemoteWorld[] = []

beforeAll(async () => {
  sshd = await startSshdWorld([{ setEnv: AMBIENT_FOR_SCRUB_TEST }])
  const made = await execIn(sshd.containerId, ['sh', '-c', `mkdir -p ${WORKSPACE} && chmod 1777 ${WORKSPACE}`])
  expect(made.exitCode).toBe(0)
})

afterAll(async () => {
  await sshd?.stop()
})

afterEach(async () => {
  for (const world of worlds.splice(0)) await world.dispose()
})

/** The SSH world as the shared cases see it: a fresh composition per test, as upstream's harness(). */
const sshWorld: RealShellWorld = {
  containerId: () => sshd.containerId,
  workspace: WORKSPACE,
  harness: async (login, timing = {}) => {
    const world = await openWorld({
      runtime: SshSubprocessRuntime,
      runtimeConfig: { target: `${login}@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false },
      workspaceRoot: WORKSPACE,
      terminal: { ...UPSTREAM_TUNING, ...timing },
    })
    worlds.push(world)
    return world
  },
}

describe.each(USERS)('terminal-bash real shell over SSH as $label', ({ user, uid }) => {
  realShellCases(sshWorld, user, uid)
})

// Issue 21: many terminals at once, floods under flow control (one user: the cases are about
// the control channel and the transports, not about who runs the shell).
describe('many terminals and output floods over SSH as agent', () => {
  manyTerminalCases(sshWorld, 'agent')
})
