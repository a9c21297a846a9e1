/**
 * The handed agent case (test/fixtures/agent-session-basic.txt) through the real
 * `dsh-remote-worlds run --json` CLI in a swarm world on a worker node (checks shared with the
 * Docker and SSH worlds: test/helpers/agent-session-case.ts), and nothing of it left anywhere.
 */
import { describe, expect, it } from 'vitest'
import { checkAgentSessionCase, runAgentSessionCase } from '../helpers/agent-session-case.ts'
import { SWARM_CLI_FLAGS, useSwarmCluster } from '../helpers/swarm.ts'

useSwarmCluster()

describe.each(['dsh-swarm-2', 'dsh-swarm-3'])('agent-session-basic on worker %s through dsh-remote-worlds run --swarm --json', node => {
  it('settles every step as the case expects and leaves nothing running', async () => {
    const { records, stderr } = await runAgentSessionCase([...SWARM_CLI_FLAGS, '--constraint', 'node.role==worker', '--constraint', `node.labels.dsh-remote-worlds.node==${node}`, '--user', 'agent', '--cwd', '/tmp'])
    expect(stderr).toMatch(new RegExp(`^# swarm service dsh-world-[0-9a-f]{12} on node ${node}$`, 'm'))
    checkAgentSessionCase(records, stderr)
  }, 120_000)
})
