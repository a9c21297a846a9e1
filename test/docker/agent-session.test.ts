/**
 * The agent-session-basic case through the real `dsh-remote-worlds run --json` CLI in a managed
 * container from the project image, as the non-root user and as root (checks shared with the SSH
 * world: test/helpers/agent-session-case.ts).
 */
import { describe, it } from 'vitest'
import { checkAgentSessionCase, runAgentSessionCase } from '../helpers/agent-session-case.ts'
import { shellEndingCliCases } from '../helpers/shell-ending-case.ts'

describe.each(['agent', 'root'])('agent-session-basic as %s through dsh-remote-worlds run --json', user => {
  it('settles every step as the case expects and leaves nothing running', async () => {
    const { records, stderr } = await runAgentSessionCase(['--user', user, '--cwd', '/tmp'])
    checkAgentSessionCase(records, stderr)
  }, 90_000)
})

describe('the shell\'s end through dsh-remote-worlds run --json (a managed container, as agent)', () => {
  shellEndingCliCases(() => ['--user', 'agent', '--cwd', '/tmp'])
})
