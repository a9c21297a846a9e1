/**
 * Container start to first prompt, two ways, in the same run: through DshWorldContainer
 * (testcontainers: create, lifeline attach, start, the world-ready wait, openWorld, first
 * terminal's prompt) and through the managed Docker world's own open (openWorld creating the
 * container, first terminal's prompt). Each run starts and removes a fresh container.
 * @module bench/rows/container-start
 */
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { DshWorldContainer } from '../../src/testcontainers/index.ts'
import type { Sample, SampleTable } from '../timing.ts'

/** Row names (bench/worlds.ts adds them to the docker world's rows). */
export const CONTAINER_START_METRICS = ['start to first prompt (DshWorldContainer)', 'start to first prompt (managed open)'] as const

/** One timed start: from nothing to the first terminal's settled prompt (ms); the world is then removed. */
async function timed(start: () => Promise<{ world: RemoteWorld; stop: () => Promise<void> }>): Promise<number> {
  const started = performance.now()
  const { world, stop } = await start()
  try {
    await world.open()
    return performance.now() - started
  } finally {
    await world.dispose()
    await stop()
  }
}

/**
 * Measure both ways `runs` times each (at most 10; one warm-up each, discarded), alternating.
 * @param image - the world image.
 */
export async function measureContainerStart(image: string, runs: number): Promise<SampleTable> {
  const viaTestcontainers = async (): Promise<{ world: RemoteWorld; stop: () => Promise<void> }> => {
    const container = await new DshWorldContainer(image).start()
    return { world: await container.openWorld(), stop: async () => { await container.stop() } }
  }
  const viaManaged = async (): Promise<{ world: RemoteWorld; stop: () => Promise<void> }> => ({
    world: await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image }, workspaceRoot: '/tmp' }),
    stop: async () => undefined,
  })
  const samples = new Map<string, Sample[]>(CONTAINER_START_METRICS.map(metric => [metric, []]))
  const count = Math.min(runs, 10)
  for (let run = 0; run <= count; run += 1) {
    const a = await timed(viaTestcontainers)
    const b = await timed(viaManaged)
    if (run === 0) continue
    samples.get(CONTAINER_START_METRICS[0])!.push({ ms: a })
    samples.get(CONTAINER_START_METRICS[1])!.push({ ms: b })
  }
  return samples
}
