/**
 * The flood-cancel row (issue 21): {@link FLOOD_CANCEL_TERMINALS} terminals of one world, each
 * flooding output through the unchanged terminal-bash, cancelled at once (terminal-bash's own
 * cancel path: a real SIGINT to each foreground group through `signalForeground`); every
 * terminal's time from the cancel until its send settled back at the prompt is one sample. It
 * shows how much output is in flight towards terminal-bash per terminal when the SIGINT lands
 * (all of it must pass terminal-bash before the prompt can), and how long the SIGINTs and the
 * settling probes wait behind the floods.
 * @module bench/rows/flood-cancel
 */
import { setTimeout as delay } from 'node:timers/promises'
import type { WorldSendOperation, WorldTerminal } from '../../src/backend/world.ts'
import { type SampleTable, pushSample, withTimeout } from '../timing.ts'
import type { BenchTarget, WorldName } from '../worlds.ts'
import { FLOOD_COMMAND } from './memory.ts'

/** Terminals flooding at once. */
export const FLOOD_CANCEL_TERMINALS = 20
/** How long they flood before the cancel (ms): long enough for every buffer on the way to fill. */
const FLOOD_MS = 3_000
/** Runs at most (each opens and closes its own terminals; 20 samples a run). */
const MAX_RUNS = 3
/** Bound on one run's cancel until every terminal is back at its prompt (ms). */
const CANCEL_STEP_MS = 60_000

export const FLOOD_CANCEL_METRIC = `cancel-to-prompt (${FLOOD_CANCEL_TERMINALS} flooding terminals)`

/** The rows, in report order. */
export const FLOOD_CANCEL_METRICS = [FLOOD_CANCEL_METRIC] as const

/**
 * min(runs, {@link MAX_RUNS}) runs on `target` (a world of the default composition): open
 * {@link FLOOD_CANCEL_TERMINALS} terminals, start {@link FLOOD_COMMAND} in each, flood for
 * {@link FLOOD_MS}, cancel every send at once and time each until it settled; then close them.
 * The output that arrived after the cancel is reported on stderr per run.
 */
export async function floodCancelRuns(world: WorldName, target: BenchTarget, runs: number, samples: SampleTable): Promise<void> {
  for (let run = 0; run < Math.min(runs, MAX_RUNS); run += 1) {
    const terminals: WorldTerminal[] = []
    try {
      const firstHandle = target.handles.length
      for (let index = 0; index < FLOOD_CANCEL_TERMINALS; index += 1) terminals.push(await withTimeout(target.world.open(), 'open'))
      let outputBytes = 0
      for (const handle of target.handles.slice(firstHandle)) handle.output.on('data', (chunk: Buffer | string) => { outputBytes += chunk.length })
      const floods: WorldSendOperation[] = terminals.map(terminal => terminal.startSend(FLOOD_COMMAND))
      await delay(FLOOD_MS)
      const before = outputBytes
      const cancelStart = performance.now()
      for (const flood of floods) flood.cancel()
      const settled = await withTimeout(Promise.all(floods.map(flood => flood.done.then(result => {
        pushSample(samples, FLOOD_CANCEL_METRIC, { ms: performance.now() - cancelStart, reason: result.waitReason })
        return result
      }))), `${FLOOD_CANCEL_METRIC}: cancel`, CANCEL_STEP_MS)
      const drainedMb = (outputBytes - before) / 1e6
      const reasons = settled.filter(result => result.waitReason !== 'stdin_read').map(result => result.waitReason)
      for (const result of settled) if (result.waitReason !== 'stdin_read') console.error(`[bench] ${world}: ${FLOOD_CANCEL_METRIC}: settled as ${result.waitReason}; viewport tail ${JSON.stringify(result.viewport.slice(-200))}`)
      console.error(`[bench] ${world}: ${FLOOD_CANCEL_METRIC} run ${run + 1}: all back in ${Math.round(performance.now() - cancelStart)} ms, ${drainedMb.toFixed(1)} MB of output after the cancel (${(drainedMb / FLOOD_CANCEL_TERMINALS).toFixed(2)} MB per terminal)${reasons.length > 0 ? `; settled as ${reasons.join(', ')}` : ''}`)
    } finally {
      await Promise.allSettled(terminals.map(terminal => withTimeout(terminal.close(), 'close')))
    }
  }
}
