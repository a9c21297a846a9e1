/**
 * The memory section (not timed rows): the client's resident set while
 * {@link FLOOD_TERMINALS} terminals of one world each print as fast as they can for
 * {@link FLOOD_SECONDS} s, with the emulator on and off. What it shows: whether the client's
 * memory is bounded under sustained output (terminal-bash keeps bounded buffers; the emulator
 * pauses a terminal's output above its high watermark), i.e. flat after a warm-up.
 *
 * RSS is the whole process's (main thread, the emulator worker, buffers), so each phase starts
 * after a GC (when the bench runs with --expose-gc, as `npm run bench` does) and records its
 * own starting point.
 * @module bench/rows/memory
 */
import { setTimeout as delay } from 'node:timers/promises'
import type { WorldSendOperation, WorldTerminal } from '../../src/backend/world.ts'
import { round, withTimeout } from '../timing.ts'
import { LONG_SEND_TUNING, type StartedWorld, type WorldName } from '../worlds.ts'

/** Terminals flooding at once. */
export const FLOOD_TERMINALS = 20
/** How long they flood (s); RSS is sampled every second. */
export const FLOOD_SECONDS = 30
/** Samples before this second are the warm-up; the slope is fitted to the samples from here on (s). */
export const FLOOD_WARM_UP_SECONDS = 10
/** Seconds whose RSS the record lists. */
const REPORTED_SECONDS = [5, 10, 20, 30] as const
/** What each terminal runs: one line of text, forever, as fast as the terminal takes it. */
export const FLOOD_COMMAND = "yes 'flood line of text to keep the emulator busy'"
/** Bound on the cancel of all floods until every terminal is back at its prompt (ms). */
const CANCEL_STEP_MS = 60_000
/** Bytes per MB in the records (decimal, as the throughput rows). */
const BYTES_PER_MB = 1e6

/** One phase's record, as written to the JSON (`section: 'memory'`). */
export interface MemoryRecord {
  section: 'memory'
  metric: string
  world: WorldName
  terminals: number
  seconds: number
  /** RSS after a GC, before the terminals opened (MB). */
  rss_mb_at_start: number
  /** RSS at these seconds of the flood (MB), keyed by second. */
  rss_mb_at_s: Record<string, number>
  /** Highest RSS sampled during the flood (MB). */
  rss_mb_max: number
  /** Least-squares slope of RSS from {@link FLOOD_WARM_UP_SECONDS} s to the end (MB/s); ~0 is flat. */
  rss_mb_after_warmup_slope_mb_per_s: number
  /** RSS after the cancel, the close of every terminal and a GC (MB). */
  rss_mb_after_close: number
  /** Terminal output the client received during the flood, all terminals together (MB/s). */
  output_mb_per_s: number
  /** From the cancel of all floods until the first send settled (ms). */
  cancel_to_first_prompt_ms: number
  /** From the cancel of all floods until every send settled (ms). */
  cancel_to_prompts_ms: number
  /** Output the client received from the cancel until every send settled (MB): the backlog drained. */
  output_mb_after_cancel: number
  /** How the cancelled sends settled (`stdin_read` at the prompt expected). */
  wait_reasons: Record<string, number>
}

/** The metric of a phase. */
export function floodMetric(emulator: boolean): string {
  return `client RSS, ${FLOOD_TERMINALS} flooding terminals (emulator ${emulator ? 'on' : 'off'})`
}

/**
 * Both phases on `started`'s world: emulator off first, then on (so the off phase does not
 * inherit an emulator worker's heap from its predecessor; the worker ends 30 s after its last
 * emulator closes).
 */
export async function floodMemory(started: StartedWorld): Promise<MemoryRecord[]> {
  const records: MemoryRecord[] = []
  for (const emulator of [false, true]) {
    const record = await floodPhase(started, emulator)
    console.error(`[bench] ${started.world}: ${record.metric}: max ${record.rss_mb_max} MB, slope ${record.rss_mb_after_warmup_slope_mb_per_s} MB/s`)
    records.push(record)
  }
  return records
}

/** The process's resident set now (MB). */
export function rssMb(): number {
  return process.memoryUsage().rss / BYTES_PER_MB
}

/** A GC when the process exposes one (node --expose-gc); otherwise nothing. */
export function collectGarbage(): void {
  (globalThis as { gc?: () => void }).gc?.()
}

/** Least-squares slope of `y` over `x` (y units per x unit); 0 for fewer than two points. */
function slope(points: readonly { x: number; y: number }[]): number {
  if (points.length < 2) return 0
  const meanX = points.reduce((sum, point) => sum + point.x, 0) / points.length
  const meanY = points.reduce((sum, point) => sum + point.y, 0) / points.length
  let covariance = 0
  let variance = 0
  for (const point of points) {
    covariance += (point.x - meanX) * (point.y - meanY)
    variance += (point.x - meanX) ** 2
  }
  return variance === 0 ? 0 : covariance / variance
}

/** One phase: open, flood and sample, cancel (a real SIGINT to each foreground group), close. */
async function floodPhase(started: StartedWorld, emulator: boolean): Promise<MemoryRecord> {
  const metric = floodMetric(emulator)
  const target = await started.compose({ tuning: LONG_SEND_TUNING, emulator })
  const terminals: WorldTerminal[] = []
  try {
    // A first terminal opens the world (container, control channel) before the baseline.
    await withTimeout((await withTimeout(target.world.open(), 'open')).close(), 'close')
    collectGarbage()
    const atStart = rssMb()
    const firstHandle = target.handles.length
    for (let index = 0; index < FLOOD_TERMINALS; index += 1) terminals.push(await withTimeout(target.world.open(), 'open'))
    let outputBytes = 0
    for (const handle of target.handles.slice(firstHandle)) handle.output.on('data', (chunk: Buffer | string) => { outputBytes += chunk.length })

    const floods: WorldSendOperation[] = terminals.map(terminal => terminal.startSend(FLOOD_COMMAND))
    const floodStart = performance.now()
    const series: { x: number; y: number }[] = []
    for (let second = 1; second <= FLOOD_SECONDS; second += 1) {
      // Sleep to the next whole second of the flood; a late timer (a busy event loop) is
      // recorded at its real time.
      await delay(Math.max(0, floodStart + second * 1000 - performance.now()))
      series.push({ x: (performance.now() - floodStart) / 1000, y: rssMb() })
    }
    const floodSeconds = (performance.now() - floodStart) / 1000
    const floodBytes = outputBytes

    const cancelStart = performance.now()
    let firstSettleMs: number | undefined
    for (const flood of floods) flood.cancel()
    const settling = floods.map(flood => flood.done.then(result => {
      firstSettleMs ??= performance.now() - cancelStart
      return result
    }))
    const settled = await withTimeout(Promise.all(settling), `${metric}: cancel`, CANCEL_STEP_MS)
    const cancelMs = performance.now() - cancelStart
    const drainedBytes = outputBytes - floodBytes
    const reasons: Record<string, number> = {}
    for (const result of settled) reasons[result.waitReason] = (reasons[result.waitReason] ?? 0) + 1
    if (reasons.stdin_read !== FLOOD_TERMINALS) console.error(`[bench] ${started.world}: ${metric}: cancelled floods settled as ${JSON.stringify(reasons)}`)
    await withTimeout(Promise.all(terminals.splice(0).map(terminal => terminal.close())), `${metric}: close`)
    collectGarbage()

    const atSecond = (second: number): number => series[second - 1]!.y
    return {
      section: 'memory',
      metric,
      world: started.world,
      terminals: FLOOD_TERMINALS,
      seconds: FLOOD_SECONDS,
      rss_mb_at_start: round(atStart),
      rss_mb_at_s: Object.fromEntries(REPORTED_SECONDS.map(second => [String(second), round(atSecond(second))])),
      rss_mb_max: round(Math.max(...series.map(point => point.y))),
      rss_mb_after_warmup_slope_mb_per_s: round(slope(series.filter(point => point.x >= FLOOD_WARM_UP_SECONDS))),
      rss_mb_after_close: round(rssMb()),
      output_mb_per_s: round(floodBytes / BYTES_PER_MB / floodSeconds),
      cancel_to_first_prompt_ms: round(firstSettleMs ?? cancelMs),
      cancel_to_prompts_ms: round(cancelMs),
      output_mb_after_cancel: round(drainedBytes / BYTES_PER_MB),
      wait_reasons: reasons,
    }
  } finally {
    await Promise.allSettled(terminals.map(terminal => terminal.close()))
    await target.dispose()
  }
}
