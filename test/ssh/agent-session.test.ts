/**
 * The agent-session-basic case (test/fixtures, a copy of ../shared/cases) through the real
 * `dsh-remote-worlds run --ssh USER@127.0.0.1:PORT --identity KEY --known-hosts FILE --json` CLI against
 * a real OpenSSH sshd, as the non-root user and as root; after the session nothing of it is left
 * on the host (the CLI's /proc scan, and a `docker exec` ps of the sshd container).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { checkAgentSessionCase, runAgentSessionCase } from '../helpers/agent-session-case.ts'
import { shellEndingCliCases } from '../helpers/shell-ending-case.ts'
import { type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'

let sshd: SshdWorld

beforeAll(async () => {
  sshd = await startSshdWorld()
})

afterAll(async () => {
  await sshd?.stop()
})

describe.each(['agent', 'root'])('agent-session-basic as %s through dsh-remote-worlds run --ssh', user => {
  it('settles every step as the case expects and leaves nothing running', async () => {
    const { records, stderr } = await runAgentSessionCase(['--ssh', `${user}@127.0.0.1:${sshd.ports[0]}`, '--identity', sshd.clientKeyFile, '--known-hosts', sshd.knownHostsFile, '--cwd', '/tmp'])
    checkAgentSessionCase(records, stderr)
    // The CLI disconnected: no per-connection sshd and nothing the login started is left.
    expect(await sshd.leftovers()).toEqual([])
  }, 90_000)
})

describe('the shell\'s end through dsh-remote-worlds run --ssh --json (as agent)', () => {
  shellEndingCliCases(() => ['--ssh', `agent@127.0.0.1:${sshd.ports[0]}`, '--identity', sshd.clientKeyFile, '--known-hosts', sshd.knownHostsFile, '--cwd', '/tmp'])
})
