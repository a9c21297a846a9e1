/**
 * The foreground-probe rows: `inspectForeground()` round trips on a terminal spawned directly
 * through the runtime with the spec terminal-bash used (argv, env, cwd, rows, cols, graceMs).
 * @module bench/rows/probe
 */
import { setTimeout as delay } from 'node:timers/promises'
import { untilPrompt, waitForeground } from '../terminal-steps.ts'
import { type SampleTable, pushSample, withTimeout } from '../timing.ts'
import type { BenchTarget } from '../worlds.ts'

/** The rows, in report order. */
export const PROBE_METRICS = [
  'inspectForeground (idle prompt)',
  'inspectForeground (first after new prompt)',
  'inspectForeground (sleep running)',
] as const

/**
 * Measure `runs` probes of each kind into `samples` (reason: `inputWaiting` or `notWaiting`):
 * - at an idle prompt, probed repeatedly (the shell stays in the same blocked read);
 * - the first probe after a NEW prompt (the shell just re-entered its read: the probe that
 *   settles a send);
 * - while a foreground `sleep` runs (what terminal-bash polls every pollIntervalMs during a command).
 * @throws Error when no terminal-bash spawn spec was observed on `target` yet.
 */
export async function inspectRuns(target: BenchTarget, runs: number, samples: SampleTable): Promise<void> {
  const spec = target.lastSpec()
  if (spec === undefined) throw new Error('bench: no terminal-bash spawn spec observed')
  const { signal: _unused, ...rest } = spec
  const handle = await withTimeout(target.world.runtime.spawnTerminal({ ...rest }), 'direct spawnTerminal')
  try {
    await untilPrompt(handle)
    const probe = async (metric: string): Promise<void> => {
      const started = performance.now()
      const facts = await handle.inspectForeground()
      const ms = performance.now() - started
      if (facts === undefined) throw new Error('bench: inspectForeground returned undefined for a live shell')
      pushSample(samples, metric, { ms, reason: facts.inputWaiting ? 'inputWaiting' : 'notWaiting' })
    }
    const repeated = async (metric: string): Promise<void> => {
      for (let index = 0; index < 5; index += 1) await handle.inspectForeground() // warm-up
      for (let index = 0; index < runs; index += 1) await probe(metric)
    }
    await repeated('inspectForeground (idle prompt)')
    for (let index = 0; index < runs; index += 1) {
      const prompt = untilPrompt(handle)
      await handle.write('\r')
      await prompt
      await delay(30) // let the shell block in its read again
      await probe('inspectForeground (first after new prompt)')
    }
    await handle.write('sleep 30\r')
    await waitForeground(handle, pgid => pgid !== handle.pid, 'the sleep job')
    await repeated('inspectForeground (sleep running)')
    await handle.signalForeground('SIGINT')
  } finally {
    await withTimeout(handle.terminate(), 'direct terminate', 15_000)
  }
}
