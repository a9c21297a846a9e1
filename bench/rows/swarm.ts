/**
 * The swarm family (issue 23; `--no-swarm` skips it): on the project's three-node cluster
 * (docker/ensure-swarm.sh, started here when it is not up),
 * - world open to first prompt as a swarm service (service create, task running, the Docker
 *   world attached on its node, lifeline and task facts, the first terminal's prompt) beside a
 *   managed container's (openWorld creating the container, first prompt), alternating in the
 *   same run, a fresh world each time;
 * - 20 worlds opened at once (no placement: the swarm spreads them over the three nodes): the
 *   wall time until every one has its first prompt, and each one's open-to-prompt.
 * Rows sit with the docker world's (its engine's family). The default composition's tuning.
 * @module bench/rows/swarm
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { type RemoteWorld, type TerminalTuning, openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { SwarmSubprocessRuntime } from '../../src/providers/swarm/swarm-runtime.ts'
import { type SampleTable, pushSample, sampleTable, withTimeout } from '../timing.ts'

/** Row names. */
export const SWARM_METRICS = [
  'open to first prompt (swarm service)',
  'open to first prompt (managed container)',
  '20 swarm worlds at once: all prompts',
  '20 swarm worlds at once: each open to prompt',
] as const

/** Worlds opened at once by the concurrency rows. */
export const SWARM_AT_ONCE = 20

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const MANAGER = 'unix:///run/dsh-swarm/1.sock'
const NODES = ['unix:///run/dsh-swarm/2.sock', 'unix:///run/dsh-swarm/3.sock']

/** docker/ensure-swarm.sh: the cluster up, the image in every node. */
async function ensureSwarm(): Promise<void> {
  const child = spawn('bash', ['docker/ensure-swarm.sh'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] })
  const [code] = await once(child, 'exit') as [number | null]
  if (code !== 0) throw new Error(`docker/ensure-swarm.sh exited with ${code}`)
}

/** Open a world, then its first terminal's prompt: the ms it took, the world, and the node it landed on (swarm). */
async function openToPrompt(open: () => Promise<RemoteWorld>): Promise<{ ms: number; world: RemoteWorld; node: string | undefined }> {
  const started = performance.now()
  const world = await open()
  try {
    await world.open()
  } catch (error) {
    await world.dispose().catch(() => undefined)
    throw error
  }
  const runtime = world.runtime
  return { ms: performance.now() - started, world, node: runtime instanceof SwarmSubprocessRuntime ? runtime.swarm?.node.identity.name : undefined }
}

/**
 * Measure the family.
 * @param image - the world image (loaded into every node by the script).
 * @param tuning - terminal-bash's tuning (the default composition's).
 * @param runs - single opens: min(runs, 10) of each kind after one warm-up each; the 20 at once: min(runs, 3) runs.
 */
export async function swarmRuns(image: string, tuning: TerminalTuning, runs: number): Promise<SampleTable> {
  await ensureSwarm()
  const samples = sampleTable(SWARM_METRICS)
  const swarm = (): Promise<RemoteWorld> => openWorld({ runtime: SwarmSubprocessRuntime as never, runtimeConfig: { manager: MANAGER, nodes: NODES, image }, workspaceRoot: '/tmp', terminal: tuning })
  const managed = (): Promise<RemoteWorld> => openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image }, workspaceRoot: '/tmp', terminal: tuning })
  const single = Math.min(runs, 10)
  for (let run = 0; run <= single; run += 1) {
    for (const [metric, open] of [[SWARM_METRICS[0], swarm], [SWARM_METRICS[1], managed]] as const) {
      const { ms, world } = await withTimeout(openToPrompt(open), metric, 60_000)
      await world.dispose()
      if (run > 0) pushSample(samples, metric, { ms })
    }
  }
  console.error('[bench] docker: swarm single opens done')
  for (let run = 0; run < Math.min(runs, 3); run += 1) {
    const started = performance.now()
    const opened = await Promise.allSettled(Array.from({ length: SWARM_AT_ONCE }, () => openToPrompt(swarm)))
    const wall = performance.now() - started
    const worlds = opened.flatMap(outcome => outcome.status === 'fulfilled' ? [outcome.value] : [])
    await Promise.allSettled(worlds.map(entry => entry.world.dispose()))
    const failed = opened.flatMap(outcome => outcome.status === 'rejected' ? [(outcome.reason as Error).message] : [])
    if (failed.length > 0) throw new Error(`bench: ${failed.length} of ${SWARM_AT_ONCE} swarm worlds did not open: ${failed[0]}`)
    pushSample(samples, SWARM_METRICS[2], { ms: wall })
    for (const entry of worlds) pushSample(samples, SWARM_METRICS[3], { ms: entry.ms })
    const perNode = new Map<string, number>()
    for (const entry of worlds) perNode.set(entry.node ?? '?', (perNode.get(entry.node ?? '?') ?? 0) + 1)
    console.error(`[bench] docker: ${SWARM_AT_ONCE} swarm worlds at once in ${Math.round(wall)} ms, by node: ${[...perNode].sort().map(([node, count]) => `${node} ${count}`).join(', ')}`)
  }
  return samples
}
