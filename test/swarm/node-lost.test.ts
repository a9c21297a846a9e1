/**
 * A worker lost mid-command (docker/ensure-swarm.sh kill 3: its engine, containerd, shims and
 * every process of its tasks die at once): the terminal's `done` rejects with a TransportError,
 * the node's keepalive declares it lost within its bound (SwarmNodeLostError, code
 * SWARM_NODE_LOST), every later call of that world rejects with it, and the next world opens on
 * a node that answers. The worker is restarted afterwards (the same script), so later tests have
 * three nodes, and it removes the lost world's container itself once it is back.
 */
import type { SubprocessTerminalHandle, SubprocessTerminalSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import { describe, expect, it } from 'vitest'
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import { type CleanupFailedError, TransportError } from '../../src/providers/remote/errors.ts'
import { SwarmCleanupUnprovenError, SwarmNodeLostError } from '../../src/providers/swarm/errors.ts'
import { DEFAULT_KEEPALIVE } from '../../src/providers/swarm/node-watch.ts'
import { SwarmSubprocessRuntime } from '../../src/providers/swarm/swarm-runtime.ts'
import { hangGuard, waitFor } from '../docker/helpers.ts'
import { nodeEngine, onNode, swarmConfig, swarmScript, useSwarmCluster } from '../helpers/swarm.ts'

// The killed worker is restarted after the tests (the script), and back in the swarm it removes
// the container of the service removed while it was gone.
useSwarmCluster({ settleMs: 60_000 })

const BASH: SubprocessTerminalSpawnSpec = { argv: ['/bin/bash', '--noprofile', '--norc', '-i'], cwd: '/tmp', env: { TERM: 'dumb', PS1: 'ps1> ' }, rows: 24, cols: 80, graceMs: 500 }

/** A world on dsh-swarm-3 whose terminal is mid-command (`sleep 600`), and that terminal's `done` as a settled value. */
async function midCommand(): Promise<{ world: RemoteWorld; runtime: SwarmSubprocessRuntime; terminal: SubprocessTerminalHandle; output: () => string; done: Promise<unknown> }> {
  const world = await openWorld({ runtime: SwarmSubprocessRuntime as never, runtimeConfig: swarmConfig({ user: 'agent', placement: onNode('dsh-swarm-3') }), workspaceRoot: '/tmp' })
  const runtime = world.runtime as SwarmSubprocessRuntime
  expect(runtime.swarm!.node.identity.name).toBe('dsh-swarm-3')
  const terminal = await runtime.spawnTerminal(BASH)
  let output = ''
  terminal.output.on('data', (chunk: Buffer) => { output += chunk.toString() })
  await terminal.write('sleep 600; echo after-sleep\r')
  await waitFor(() => output, text => text.includes('sleep 600; echo after-sleep'), 10_000)
  return { world, runtime, terminal, output: () => output, done: terminal.done.then(() => undefined, (error: unknown) => error) }
}

describe('a worker that stops answering mid-command (frozen: its engine hangs, its tasks run on)', () => {
  it('ends the world\'s streams with SwarmNodeLostError within the keepalive bound, though no socket closed', async () => {
    const { world, runtime, done } = await midCommand()
    const swarm = runtime.swarm!
    try {
      await swarmScript('freeze', '3')
      try {
        const bound = DEFAULT_KEEPALIVE.intervalMs * (DEFAULT_KEEPALIVE.countMax + 1)
        const lost = await hangGuard(swarm.watch.lost, bound * 3, 'the node\'s keepalive')
        expect(lost.code).toBe('SWARM_NODE_LOST')
        expect(lost.message).toContain(`node dsh-swarm-3 (${swarm.task.nodeId.slice(0, 12)}) was lost: its engine unix:///run/dsh-swarm/3.sock did not answer for ${bound} ms`)
        // Its terminal's streams ended with that error (the engine never closed them): `done`
        // rejects with it, or with the Docker world's TransportError that quotes it.
        const broken = await hangGuard(done, 10_000, 'the terminal\'s done') as TransportError
        expect(broken).toBeInstanceOf(TransportError)
        expect(broken.message.endsWith(lost.message), broken.message).toBe(true)
        await expect(runtime.spawnTerminal(BASH)).rejects.toBe(lost)
      } finally {
        await swarmScript('thaw', '3')
      }
    } finally {
      // The node answers again: the service goes, and the node removes its container (afterAll checks).
      await runtime.dispose().catch(() => undefined)
      await world.dispose()
    }
  }, 120_000)
})

describe('a worker killed mid-command', () => {
  it('gives the typed errors within the keepalive bound, and the next world opens on another node', async () => {
    const { world: lostWorld, runtime, terminal, output, done } = await midCommand()
    let disposed = false
    try {
      const swarm = runtime.swarm!

      await swarmScript('kill', '3')
      // The engine's sockets closed with it: the Docker world's own world-death error.
      const broken = await hangGuard(done, 15_000, 'the terminal\'s done')
      expect(broken).toBeInstanceOf(TransportError)
      // The keepalive: interval x (countMax + 1) without an answer (hang guard, not a timing claim).
      const bound = DEFAULT_KEEPALIVE.intervalMs * (DEFAULT_KEEPALIVE.countMax + 1)
      const lost = await hangGuard(swarm.watch.lost, bound * 3, 'the node\'s keepalive')
      expect(lost).toBeInstanceOf(SwarmNodeLostError)
      expect(lost).toBeInstanceOf(TransportError)
      expect(lost.code).toBe('SWARM_NODE_LOST')
      expect(lost.nodeId).toBe(swarm.task.nodeId)
      expect(lost.message).toContain(`node dsh-swarm-3 (${swarm.task.nodeId.slice(0, 12)}) was lost: its engine unix:///run/dsh-swarm/3.sock did not answer for ${bound} ms`)
      expect(output()).not.toContain('\r\nafter-sleep\r\n')
      // Every later call of the lost world says so.
      await expect(runtime.spawnTerminal(BASH)).rejects.toBe(lost)
      await expect(runtime.control()).rejects.toBe(lost)

      // The next world: the swarm places it on a node that answers (the only other worker).
      const next = await openWorld({ runtime: SwarmSubprocessRuntime as never, runtimeConfig: swarmConfig({ user: 'agent', placement: { constraints: ['node.role==worker'] } }), workspaceRoot: '/tmp' })
      try {
        expect((next.runtime as SwarmSubprocessRuntime).swarm!.node.identity.name).toBe('dsh-swarm-2')
        const shell = await next.open({ cwd: '/tmp' })
        expect((await shell.send('hostname')).viewport).toBe('hostname\ndsh-swarm-2\ndsh> ')
        await shell.close()
      } finally {
        await next.dispose()
      }

      // Nothing of the lost world can be proven ended (a lost node may only be cut off): its
      // terminal's teardown says why, and the runtime's removes the service and says what it
      // cannot prove. (The runtime's own dispose: a composition's dispose leaves such failures
      // to cordis, which does not pass them on.)
      await expect(terminal.terminate()).rejects.toBe(lost)
      disposed = true
      const failure = await runtime.dispose().then(() => undefined, (error: unknown) => error) as AggregateError
      expect(failure).toBeInstanceOf(AggregateError)
      // The Docker world's own (unchanged) teardown cannot prove its pooled execs ended either.
      expect(failure.errors.map(error => (error as CleanupFailedError).code)).toEqual(['CLEANUP_FAILED', 'SWARM_CLEANUP_UNPROVEN'])
      expect((failure.errors[0] as Error).message).toMatch(/^terminal cleanup failed; surviving remote pids: ; pooled execs not proven ended: [0-9a-f]{12} \(unknown\)/)
      const unproven = failure.errors.find(error => error instanceof SwarmCleanupUnprovenError) as SwarmCleanupUnprovenError
      expect(unproven.message).toBe(`swarm service ${swarm.service.name} on node dsh-swarm-3: the service is removed, but its container ${swarm.task.containerId.slice(0, 12)} cannot be proven gone: ${lost.message}; the node's engine removes the container of a removed service when it answers again (doctor --reap lists what is left)`)
      await lostWorld.dispose()
      // The manager no longer has the service (node 3's engine is not asked: it is down).
      await expect(nodeEngine(1).getService(swarm.service.id).inspect()).rejects.toMatchObject({ statusCode: 404 })
    } finally {
      if (!disposed) await lostWorld.dispose().catch(() => undefined)
    }
  }, 120_000)
})
