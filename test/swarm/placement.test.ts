/**
 * Where a swarm world lands is the swarm scheduler's decision, with the user's placement: on the
 * real three-node cluster (docker/ensure-swarm.sh), a world placed by node label runs on that
 * node (its shell says the node's hostname), and a task no node can take is refused within the
 * bound with the scheduler's own reason, its service removed.
 */
import { describe, expect, it } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { RemoteWorldError } from '../../src/providers/remote/errors.ts'
import { SwarmTaskUnschedulableError } from '../../src/providers/swarm/errors.ts'
import { SwarmSubprocessRuntime } from '../../src/providers/swarm/swarm-runtime.ts'
import type { SwarmRuntimeConfig } from '../../src/providers/swarm/swarm-config.ts'
import { onNode, swarmConfig, useSwarmCluster } from '../helpers/swarm.ts'

// Nothing a test here made is left on any node (checked after them).
useSwarmCluster()

/** Open a world with `config`, run `command` in a shell, close everything; the output's last line before the prompt. */
async function runIn(config: SwarmRuntimeConfig, command: string): Promise<{ output: string; node: string }> {
  const world = await openWorld({ runtime: SwarmSubprocessRuntime as never, runtimeConfig: config, workspaceRoot: '/tmp' })
  try {
    const node = (world.runtime as SwarmSubprocessRuntime).swarm!.node.identity.name
    const shell = await world.open({ cwd: '/tmp' })
    const result = await shell.send(command)
    await shell.close()
    return { output: result.viewport, node }
  } finally {
    await world.dispose()
  }
}

describe('placement by node label', () => {
  it.each(['dsh-swarm-2', 'dsh-swarm-3', 'dsh-swarm-1'])('lands on %s: the shell sees that node\'s hostname', async name => {
    const { output, node } = await runIn(swarmConfig({ user: 'agent', placement: onNode(name) }), 'hostname')
    expect(node).toBe(name)
    expect(output).toBe(`hostname\n${name}\ndsh> `)
  }, 60_000)
})

describe('a task no node can take', () => {
  /** Open a world that cannot be placed; returns the refusal. */
  async function refusal(config: SwarmRuntimeConfig): Promise<SwarmTaskUnschedulableError> {
    const error = await openWorld({ runtime: SwarmSubprocessRuntime as never, runtimeConfig: config, workspaceRoot: '/tmp' }).then(async world => {
      await world.dispose()
      return undefined
    }, (reason: unknown) => reason)
    expect(error).toBeInstanceOf(SwarmTaskUnschedulableError)
    expect(error).toBeInstanceOf(RemoteWorldError)
    expect((error as SwarmTaskUnschedulableError).code).toBe('SWARM_TASK_UNSCHEDULABLE')
    return error as SwarmTaskUnschedulableError
  }

  it('an unsatisfiable memory reservation is refused within the bound, naming the scheduler\'s reason; its service is removed', async () => {
    const error = await refusal(swarmConfig({ reservations: { memoryBytes: 2 ** 50 }, scheduleTimeoutMs: 2_000 }))
    expect(error.reason).toBe('no suitable node (insufficient resources on 3 nodes)')
    expect(error.message).toMatch(/^swarm service dsh-world-[0-9a-f]{12}: no node took its task within 2000 ms: no suitable node \(insufficient resources on 3 nodes\); free the resources it reserves/)
  }, 30_000)

  it('a constraint no node meets is refused the same way, with its own reason', async () => {
    const error = await refusal(swarmConfig({ placement: { constraints: ['node.labels.dsh-remote-worlds.node==no-such-node'] }, scheduleTimeoutMs: 2_000 }))
    expect(error.reason).toBe('no suitable node (scheduling constraints not satisfied on 3 nodes)')
  }, 30_000)
})
