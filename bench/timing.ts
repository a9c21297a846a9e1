/**
 * The bench's shared timing helpers: one timed observation ({@link Sample}), a bound on every
 * measured step ({@link withTimeout}), the statistics the report uses (median, nearest-rank
 * percentile), and the payload constants several row families share (the lowest file of bench/,
 * so the rows that share them never import each other for them).
 * @module bench/timing
 */

/** One timed observation, with the settle reason when it was a send (or what a probe said). */
export interface Sample {
  /** Wall time, ms. */
  ms: number
  reason?: string
}

/** Samples by row name (metric). */
export type SampleTable = Map<string, Sample[]>

/**
 * Bytes of every 100 MB throughput row (100 MiB): the product's `100 MB stdout throughput`
 * (rows/spawn.ts), the raw transport rows (rows/raw-transport.ts) and `fs readBytes (100 MB)`
 * (rows/fs.ts), so their MB/s divide.
 */
export const STDOUT_THROUGHPUT_BYTES = 100 * 1024 * 1024

/** Upper bound of any one measured step (ms); a hang fails the bench instead of stalling it. */
export const STEP_TIMEOUT_MS = 20_000

/**
 * `promise`, or a rejection naming `what` once `ms` milliseconds have passed.
 * @param ms - the bound in ms (default {@link STEP_TIMEOUT_MS}).
 */
export function withTimeout<T>(promise: Promise<T>, what: string, ms = STEP_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`bench step timed out after ${ms} ms: ${what}`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** An empty sample list for each of `metrics`. */
export function sampleTable(metrics: readonly string[]): SampleTable {
  return new Map(metrics.map(metric => [metric, []]))
}

/** Add `sample` to the row `metric` of `samples` (the row must exist: a typo fails loudly). */
export function pushSample(samples: SampleTable, metric: string, sample: Sample): void {
  const list = samples.get(metric)
  if (list === undefined) throw new Error(`bench: no row named ${JSON.stringify(metric)}`)
  list.push(sample)
}

/** The median of `values` (mean of the two middle values for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2
}

/** Nearest-rank percentile (`p` in 0..1) of `values`. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!
}

/** `value` rounded to 3 decimals (the JSON's precision). */
export function round(value: number): number {
  return Math.round(value * 1000) / 1000
}
