/**
 * The bench's report: rows of medians with the local baseline, floors (reported, never
 * asserted), the printed tables (timed rows and their notes, then the memory and scale
 * sections) and the JSON.
 * @module bench/report
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { DIRECT_CONNECT_METRIC, EGRESS_BYTES, EGRESS_CONNECT_METRIC, EGRESS_DOWNLOAD_METRIC, FORWARD_METRIC } from './rows/egress.ts'
import { JOBS_BESIDE_UPSTREAM, JOB_REATTACH_METRIC, JOB_START_METRIC } from './rows/jobs.ts'
import { ECHO_WITHOUT_EMULATOR_METRIC, LOCAL_TERMINAL_OUTPUT_METRIC, TERMINAL_OUTPUT_BYTES, TERMINAL_OUTPUT_WITHOUT_EMULATOR_METRIC, TERMINAL_OUTPUT_WITH_EMULATOR_METRIC } from './rows/emulator.ts'
import type { MemoryRecord } from './rows/memory.ts'
import { PWSH_DIRECT_METRIC, PWSH_ECHO_METRIC, PWSH_OPEN_METRIC, PWSH_READ_HOST_METRIC } from './rows/pwsh.ts'
import { RAW_DOCKER_METRIC, RAW_DOCKER_STDIN_METRIC, RAW_METRIC_OF_WORLD, RAW_SSH_METRIC, RAW_SSH_STDIN_METRIC, RAW_STDIN_METRIC_OF_WORLD, RAW_TRANSPORT_BYTES } from './rows/raw-transport.ts'
import { FLOOD_CANCEL_METRIC } from './rows/flood-cancel.ts'
import { CLOSE_ALL_METRIC, MANY_TERMINALS_METRIC, SINGLE_TERMINAL_METRIC, type ScaleRecord } from './rows/scale.ts'
import { FS_EDIT_METRIC, FS_GREP_METRIC, FS_LIST_METRIC, FS_METRICS, FS_READ_BYTES, FS_READ_BYTES_METRIC, FS_READ_METRIC, FS_WRITE_METRIC, type FsMixedRecord, RG_DIRECT_METRIC } from './rows/fs.ts'
import { STDOUT_THROUGHPUT_BYTES, type Sample, median, percentile, round } from './timing.ts'
import { PERSISTENCE_BESIDE_OFF, REPLAY_ROW_BYTES } from './rows/persistence.ts'
import { WORLD_NAMES, type WorldName } from './worlds.ts'

/** Report order of the rows; rows not listed (container start) follow, by name. */
const METRIC_ORDER: readonly string[] = [
  'connect (TCP+handshake+auth)',
  'open-to-prompt',
  PWSH_OPEN_METRIC,
  'spawnTerminal (to pid published)',
  'echo settle',
  ECHO_WITHOUT_EMULATOR_METRIC,
  PWSH_ECHO_METRIC,
  'cat settle (stdin_read)',
  PWSH_READ_HOST_METRIC,
  '/dev/tty read settle (stdin_read)',
  'cancel-to-prompt',
  FLOOD_CANCEL_METRIC,
  'close idle shell',
  CLOSE_ALL_METRIC,
  'inspectForeground (idle prompt)',
  'inspectForeground (first after new prompt)',
  'inspectForeground (sleep running)',
  SINGLE_TERMINAL_METRIC,
  MANY_TERMINALS_METRIC,
  'spawn-to-exit of true',
  'spawn-to-exit of true (bash tool stdio)',
  '100 MB stdout throughput',
  RAW_DOCKER_METRIC,
  RAW_SSH_METRIC,
  RAW_DOCKER_STDIN_METRIC,
  RAW_SSH_STDIN_METRIC,
  DIRECT_CONNECT_METRIC,
  EGRESS_CONNECT_METRIC,
  EGRESS_DOWNLOAD_METRIC,
  FORWARD_METRIC,
  LOCAL_TERMINAL_OUTPUT_METRIC,
  TERMINAL_OUTPUT_WITH_EMULATOR_METRIC,
  TERMINAL_OUTPUT_WITHOUT_EMULATOR_METRIC,
  ...FS_METRICS,
]

/**
 * The local row a row is compared with, when it is not the row of the same name: the local
 * provider has no emulator, so its plain `echo settle` is the baseline of both settings. (The
 * 100 MB terminal-output rows have none: local moves 10 MB; compare their MB/s.)
 */
const BASELINE_METRIC: Readonly<Record<string, string>> = {
  [ECHO_WITHOUT_EMULATOR_METRIC]: 'echo settle',
}

/**
 * The row of the SAME world a pwsh row is compared with (issue 13: pwsh beside bash): bash's
 * open, echo, and its proven terminal read (`cat`), against pwsh's open, echo and Read-Host.
 */
const BASH_COUNTERPART: Readonly<Record<string, string>> = {
  [PWSH_OPEN_METRIC]: 'open-to-prompt',
  [PWSH_ECHO_METRIC]: 'echo settle',
  [PWSH_READ_HOST_METRIC]: 'cat settle (stdin_read)',
}

/** The product's stdout throughput row, which each remote world's raw transport row stands beside (issue 14). */
const PRODUCT_THROUGHPUT_METRIC = '100 MB stdout throughput'

/**
 * The product rows each remote world's raw transport row stands beside (same payload, same world
 * and run), by the raw rows of that direction: the MB/s of each is divided by the raw row's.
 * Out of the world (stdout): the product's stdout, a file read, a forwarded port (a world's
 * server answering this machine). Into the world (stdin): the egress family's download, whose
 * bytes this client reads from this machine's server and carries in (issue 34).
 */
const BESIDE_RAW: ReadonlyMap<string, Readonly<Record<string, string>>> = new Map([
  [PRODUCT_THROUGHPUT_METRIC, RAW_METRIC_OF_WORLD],
  [FS_READ_BYTES_METRIC, RAW_METRIC_OF_WORLD],
  [FORWARD_METRIC, RAW_METRIC_OF_WORLD],
  [EGRESS_DOWNLOAD_METRIC, RAW_STDIN_METRIC_OF_WORLD],
])

/**
 * The row of the SAME world a row is compared with by its median, other than bash's (see
 * {@link BASH_COUNTERPART}): the grep tool beside the same ripgrep run by a plain exec.
 */
const DIRECT_COUNTERPART: Readonly<Record<string, string>> = {
  [FS_GREP_METRIC]: RG_DIRECT_METRIC,
  // Issue 21: a probe with 100 terminals open beside one with a single terminal open.
  [MANY_TERMINALS_METRIC]: SINGLE_TERMINAL_METRIC,
  // Issue 32, part E: pwsh's open beside the same pwsh started by a plain exec.
  [PWSH_OPEN_METRIC]: PWSH_DIRECT_METRIC,
  // Issue 33, item 5: the held rows ('connection', the default, and 'client') beside 'off'.
  ...PERSISTENCE_BESIDE_OFF,
  // Issue 34, item 6: a CONNECT through the world's proxy beside a connect on the world's own loopback.
  [EGRESS_CONNECT_METRIC]: DIRECT_CONNECT_METRIC,
  // Issue 35, item 5: a job held in the world beside the upstream process-local registry's.
  ...JOBS_BESIDE_UPSTREAM,
}

/** Bytes a throughput row moves per run, for its MB/s (MB = 10^6 bytes). */
const PAYLOAD_BYTES: Readonly<Record<string, number>> = {
  [PRODUCT_THROUGHPUT_METRIC]: STDOUT_THROUGHPUT_BYTES,
  ...RAW_TRANSPORT_BYTES,
  ...TERMINAL_OUTPUT_BYTES,
  [FS_READ_BYTES_METRIC]: FS_READ_BYTES,
  'replay throughput (8 MiB log)': REPLAY_ROW_BYTES,
  ...EGRESS_BYTES,
}

/**
 * A floor to report against (never asserted): an absolute median bound (`maxMs`: below it, or
 * at most it with `inclusive`), an absolute p90 bound (`maxP90Ms`, the same way), a ratio to
 * local (`maxRatio`), a least share of the raw transport's MB/s (`minRawRatio`), a most
 * ratio to the direct counterpart's median (`maxDirectRatio`), or a most excess over it
 * (`maxOverDirectMs`: median minus the direct median, in ms).
 */
interface Floor {
  metric: string
  worlds?: readonly WorldName[]
  maxMs?: number
  maxP90Ms?: number
  inclusive?: boolean
  maxRatio?: number
  minRawRatio?: number
  maxDirectRatio?: number
  maxOverDirectMs?: number
  source: string
}

const FLOORS: Floor[] = [
  { metric: 'inspectForeground (idle prompt)', maxMs: 2, source: 'issue 2/3' },
  { metric: 'inspectForeground (first after new prompt)', maxMs: 2, source: 'issue 2/3' },
  { metric: 'inspectForeground (sleep running)', maxMs: 2, source: 'issue 2/3' },
  { metric: 'cat settle (stdin_read)', maxMs: 400, source: 'issue 2' },
  { metric: '/dev/tty read settle (stdin_read)', worlds: ['docker', 'ssh'], maxMs: 400, source: 'issue 10' },
  { metric: 'close idle shell', maxMs: 500, source: 'issue 2' },
  // Issue 3's "open of a terminal on a connected target under 50 ms": shown on both rows.
  // open-to-prompt cannot go below terminal-bash's first readiness poll (pollIntervalMs = 50 ms
  // after spawnTerminal resolves) in ANY world; spawnTerminal is the provider's own open.
  { metric: 'open-to-prompt', worlds: ['ssh'], maxMs: 50, source: 'issue 3' },
  { metric: 'spawnTerminal (to pid published)', worlds: ['ssh'], maxMs: 50, source: 'issue 3' },
  { metric: 'echo settle', worlds: ['ssh'], maxRatio: 1.2, source: 'issue 3' },
  { metric: 'spawn-to-exit of true', worlds: ['ssh'], maxMs: 10, source: 'issue 5' },
  { metric: 'spawn-to-exit of true', worlds: ['docker'], maxMs: 80, source: 'issue 5' },
  // The filesystem half (issue 20).
  { metric: FS_READ_METRIC, worlds: ['docker', 'ssh'], maxMs: 2, inclusive: true, source: 'issue 20' },
  { metric: FS_WRITE_METRIC, worlds: ['docker', 'ssh'], maxMs: 4, inclusive: true, source: 'issue 20' },
  { metric: FS_EDIT_METRIC, worlds: ['docker', 'ssh'], maxMs: 4, inclusive: true, source: 'issue 20' },
  { metric: FS_LIST_METRIC, worlds: ['docker', 'ssh'], maxRatio: 3, source: 'issue 20' },
  { metric: FS_READ_BYTES_METRIC, worlds: ['docker', 'ssh'], minRawRatio: 0.9, source: 'issue 20' },
  { metric: FS_GREP_METRIC, worlds: ['docker', 'ssh'], maxDirectRatio: 1.2, source: 'issue 20' },
  // Many terminals at once (issue 21).
  { metric: CLOSE_ALL_METRIC, worlds: ['docker', 'ssh'], maxMs: 1000, inclusive: true, source: 'issue 21' },
  { metric: FLOOD_CANCEL_METRIC, worlds: ['docker', 'ssh'], maxP90Ms: 1000, inclusive: true, source: 'issue 21' },
  { metric: MANY_TERMINALS_METRIC, worlds: ['docker', 'ssh'], maxDirectRatio: 1.5, source: 'issue 21' },
  // The default persistence, 'connection', beside 'off' (issue 22's goal; the default since issue 33).
  { metric: 'open-to-prompt (persist connection)', worlds: ['docker', 'ssh'], maxDirectRatio: 1.1, source: 'issue 22/33' },
  { metric: 'echo settle (persist connection)', worlds: ['docker', 'ssh'], maxDirectRatio: 1.1, source: 'issue 22/33' },
  // The way out of a confined world (issue 34, item 6).
  { metric: EGRESS_CONNECT_METRIC, worlds: ['docker', 'ssh'], maxOverDirectMs: 2, inclusive: true, source: 'issue 34' },
  { metric: EGRESS_DOWNLOAD_METRIC, worlds: ['docker', 'ssh'], minRawRatio: 0.8, source: 'issue 34' },
  { metric: FORWARD_METRIC, worlds: ['docker', 'ssh'], minRawRatio: 0.8, source: 'issue 34' },
  // Background jobs held in the world (issue 35, item 5).
  { metric: JOB_START_METRIC, worlds: ['docker', 'ssh'], maxDirectRatio: 1.2, source: 'issue 35' },
  { metric: JOB_REATTACH_METRIC, worlds: ['docker', 'ssh'], maxMs: 300, inclusive: true, source: 'issue 35' },
]

/** One timed row of the JSON (field names are stable: users compare runs). */
export interface Row {
  metric: string
  world: WorldName
  median_ms: number
  p90_ms: number
  runs: number
  baseline: 'local'
  baseline_median_ms: number | null
  ratio: number | null
  floor: string | null
  floor_pass: boolean | null
  wait_reasons?: Record<string, number>
  /** Throughput rows: payload MB (10^6 bytes) per second of the median. */
  mb_per_s?: number
  /** pwsh rows: the bash row of the same world they stand beside, its median, and median / it. */
  bash_metric?: string
  bash_median_ms?: number
  ratio_to_bash?: number
  /**
   * `100 MB stdout throughput` of a remote world: the raw transport row of the same world and
   * run, its MB/s, and this row's MB/s divided by it (1 = the transport's own speed).
   */
  raw_metric?: string
  raw_mb_per_s?: number
  mb_per_s_ratio_to_raw?: number
  /**
   * `fs grep (20k files)`: the direct row of the same world and run (`rg direct (20k files)`),
   * its median, and this row's median divided by it (1 = no cost over ripgrep run directly).
   */
  direct_metric?: string
  direct_median_ms?: number
  ratio_to_direct?: number
  /** `egress connect (allowed)`: its median minus the direct row's (ms; the target is at most 2). */
  ms_over_direct?: number
}

/** The rows of every world's samples, in report order (metric, then world). */
export function buildRows(results: Map<WorldName, Map<string, Sample[]>>): Row[] {
  const local = results.get('local')
  const rows: Row[] = []
  for (const [world, samples] of results) {
    for (const [metric, list] of samples) {
      if (list.length === 0) continue
      const values = list.map(sample => sample.ms)
      const med = median(values)
      const baselineList = local?.get(BASELINE_METRIC[metric] ?? metric)
      const baseline = baselineList !== undefined && baselineList.length > 0 ? median(baselineList.map(sample => sample.ms)) : null
      const ratio = baseline === null || baseline === 0 ? null : med / baseline
      const floor = FLOORS.find(candidate => candidate.metric === metric && (candidate.worlds === undefined || candidate.worlds.includes(world)))
      const reasons: Record<string, number> = {}
      for (const sample of list) if (sample.reason !== undefined) reasons[sample.reason] = (reasons[sample.reason] ?? 0) + 1
      const payload = PAYLOAD_BYTES[metric]
      const medianOf = (other: string | undefined): number | undefined => {
        const otherList = other === undefined ? undefined : samples.get(other)
        return otherList !== undefined && otherList.length > 0 ? median(otherList.map(sample => sample.ms)) : undefined
      }
      const bashMetric = BASH_COUNTERPART[metric]
      const bash = medianOf(bashMetric)
      const rawMetric = BESIDE_RAW.get(metric)?.[world]
      const raw = medianOf(rawMetric)
      const directMetric = DIRECT_COUNTERPART[metric]
      const direct = medianOf(directMetric)
      let floorText: string | null = null
      let pass: boolean | null = null
      if (floor?.maxMs !== undefined) {
        floorText = `${floor.inclusive === true ? '<=' : '<'} ${floor.maxMs} ms`
        pass = floor.inclusive === true ? med <= floor.maxMs : med < floor.maxMs
      } else if (floor?.maxP90Ms !== undefined) {
        const p90 = percentile(values, 0.9)
        floorText = `p90 ${floor.inclusive === true ? '<=' : '<'} ${floor.maxP90Ms} ms`
        pass = floor.inclusive === true ? p90 <= floor.maxP90Ms : p90 < floor.maxP90Ms
      } else if (floor?.maxRatio !== undefined && ratio !== null) {
        floorText = `<= ${floor.maxRatio}x local`
        pass = ratio <= floor.maxRatio
      } else if (floor?.minRawRatio !== undefined && raw !== undefined) {
        // Same payload: the ratio of MB/s is the inverse ratio of the medians.
        floorText = `>= ${floor.minRawRatio}x raw MB/s`
        pass = raw / med >= floor.minRawRatio
      } else if (floor?.maxDirectRatio !== undefined && direct !== undefined) {
        floorText = `<= ${floor.maxDirectRatio}x direct`
        pass = med / direct <= floor.maxDirectRatio
      } else if (floor?.maxOverDirectMs !== undefined && direct !== undefined) {
        floorText = `<= direct + ${floor.maxOverDirectMs} ms`
        pass = med - direct <= floor.maxOverDirectMs
      }
      rows.push({
        metric,
        world,
        median_ms: round(med),
        p90_ms: round(percentile(values, 0.9)),
        runs: list.length,
        baseline: 'local',
        baseline_median_ms: baseline === null ? null : round(baseline),
        ratio: ratio === null ? null : round(ratio),
        floor: floorText,
        floor_pass: pass,
        ...(Object.keys(reasons).length > 0 ? { wait_reasons: reasons } : {}),
        ...(payload !== undefined ? { mb_per_s: round(payload / 1e6 / (med / 1000)) } : {}),
        ...(bash !== undefined ? { bash_metric: bashMetric!, bash_median_ms: round(bash), ratio_to_bash: round(med / bash) } : {}),
        // Same payload: the ratio of MB/s is the inverse ratio of the medians.
        ...(raw !== undefined && payload !== undefined ? { raw_metric: rawMetric!, raw_mb_per_s: round(payload / 1e6 / (raw / 1000)), mb_per_s_ratio_to_raw: round(raw / med) } : {}),
        ...(direct !== undefined ? { direct_metric: directMetric!, direct_median_ms: round(direct), ratio_to_direct: round(med / direct) } : {}),
        ...(direct !== undefined && floor?.maxOverDirectMs !== undefined ? { ms_over_direct: round(med - direct) } : {}),
      })
    }
  }
  const order = (row: Row): number => {
    const index = METRIC_ORDER.indexOf(row.metric)
    return index < 0 ? METRIC_ORDER.length : index
  }
  return rows.sort((a, b) => order(a) - order(b) || a.metric.localeCompare(b.metric) || WORLD_NAMES.indexOf(a.world) - WORLD_NAMES.indexOf(b.world))
}

function formatMs(value: number | null): string {
  if (value === null) return '-'
  return value < 10 ? value.toFixed(2) : value < 100 ? value.toFixed(1) : value.toFixed(0)
}

/** Print a markdown table; `numeric` columns are right-aligned. */
function printMarkdown(header: readonly string[], body: readonly (readonly string[])[], numeric: ReadonlySet<number>): void {
  const widths = header.map((title, column) => Math.max(title.length, ...body.map(cells => cells[column]!.length)))
  const line = (cells: readonly string[]): string => `| ${cells.map((cell, column) => numeric.has(column) ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!)).join(' | ')} |`
  console.log(line(header))
  console.log(`|${widths.map((width, column) => numeric.has(column) ? `${'-'.repeat(width + 1)}:` : `${'-'.repeat(width + 2)}`).join('|')}|`)
  for (const cells of body) console.log(line(cells))
}

/** Print the timed rows (stdout). */
export function printTable(rows: readonly Row[]): void {
  const header = ['metric', 'world', 'median ms', 'p90 ms', 'runs', 'local ms', 'ratio', 'floor', 'result', 'settled as', 'MB/s', 'vs bash']
  const body = rows.map(row => [
    row.metric,
    row.world,
    formatMs(row.median_ms),
    formatMs(row.p90_ms),
    String(row.runs),
    formatMs(row.baseline_median_ms),
    row.ratio === null ? '-' : `${row.ratio.toFixed(2)}x`,
    row.floor ?? '',
    row.floor_pass === null ? '' : row.floor_pass ? 'PASS' : 'FAIL',
    row.wait_reasons === undefined ? '' : Object.entries(row.wait_reasons).map(([reason, count]) => `${reason}:${count}`).join(' '),
    row.mb_per_s === undefined ? '' : row.mb_per_s.toFixed(1),
    row.ratio_to_bash === undefined ? '' : `${row.ratio_to_bash.toFixed(2)}x ${formatMs(row.bash_median_ms!)} ms`,
  ])
  printMarkdown(header, body, new Set([2, 3, 4, 5, 6, 10]))
}

/**
 * Print the table's notes on throughput (stdout): per product row that stands beside the raw
 * transport (`100 MB stdout throughput`, `fs readBytes (100 MB)`, the egress family's
 * `egress 100 MB download` and `forwarded port 100 MB`), one line per remote world
 * that has both rows: the product's MB/s divided by the raw transport's, measured in the same
 * run. Then each row beside a direct counterpart of the same world and run (the grep tool beside
 * ripgrep run directly, the egress CONNECT beside a direct loopback connect with its excess in ms), by their medians.
 */
export function printThroughputRatios(rows: readonly Row[]): void {
  for (const metric of BESIDE_RAW.keys()) {
    const lines = rows
      .filter(row => row.metric === metric && row.mb_per_s_ratio_to_raw !== undefined)
      .map(row => `  ${row.world}: ${row.mb_per_s!.toFixed(1)} / ${row.raw_mb_per_s!.toFixed(1)} MB/s = ${row.mb_per_s_ratio_to_raw!.toFixed(2)}x (\`${row.raw_metric!}\`)`)
    if (lines.length === 0) continue
    console.log(`\n${metric}, product / raw transport (MB/s of the medians):`)
    for (const line of lines) console.log(line)
  }
  for (const [metric, directMetric] of Object.entries(DIRECT_COUNTERPART)) {
    const lines = rows
      .filter(row => row.metric === metric && row.ratio_to_direct !== undefined)
      .map(row => `  ${row.world}: ${formatMs(row.median_ms)} / ${formatMs(row.direct_median_ms!)} ms = ${row.ratio_to_direct!.toFixed(2)}x${row.ms_over_direct === undefined ? '' : ` (+${formatMs(row.ms_over_direct)} ms)`}`)
    if (lines.length === 0) continue
    console.log(`\n${metric} / \`${directMetric}\` (medians, same world and run):`)
    for (const line of lines) console.log(line)
  }
}

/** Print the memory section (stdout): RSS in MB (10^6 bytes) at start, during the flood, after close; the cancel. */
export function printMemory(records: readonly MemoryRecord[]): void {
  const seconds = records[0] === undefined ? [] : Object.keys(records[0].rss_mb_at_s)
  const header = ['metric', 'world', 'start MB', ...seconds.map(second => `${second} s MB`), 'max MB', 'slope after warm-up MB/s', 'after close MB', 'output MB/s', 'cancel to first/last prompt ms', 'output after cancel MB', 'settled as']
  const body = records.map(record => [
    record.metric,
    record.world,
    record.rss_mb_at_start.toFixed(0),
    ...seconds.map(second => record.rss_mb_at_s[second]!.toFixed(0)),
    record.rss_mb_max.toFixed(0),
    record.rss_mb_after_warmup_slope_mb_per_s.toFixed(2),
    record.rss_mb_after_close.toFixed(0),
    record.output_mb_per_s.toFixed(1),
    `${record.cancel_to_first_prompt_ms.toFixed(0)} / ${record.cancel_to_prompts_ms.toFixed(0)}`,
    record.output_mb_after_cancel.toFixed(0),
    Object.entries(record.wait_reasons).map(([reason, count]) => `${reason}:${count}`).join(' '),
  ])
  printMarkdown(header, body, new Set(header.map((_, column) => column).filter(column => column >= 2 && column < header.length - 1)))
}

/**
 * Print the scale section (stdout): per world, the opens, the client's RSS before and after
 * (MB, 10^6 bytes) and per idle terminal, its sockets, SSH's pooled connections, the close of all.
 */
export function printScale(records: readonly ScaleRecord[]): void {
  const pair = (before: number | null, after: number | null): string => before === null || after === null ? '-' : `${before} / ${after}`
  const header = ['metric', 'world', 'terminals', 'opened', 'open wall ms', 'open median / max ms', 'RSS before MB', 'RSS after MB', 'MB per terminal', 'client sockets before / after', 'ssh connections before / after', 'close all ms', 'RSS after close MB']
  const body = records.map(record => [
    record.metric,
    record.world,
    String(record.terminals),
    `${record.opened} (${record.open_concurrency} at a time)`,
    record.open_wall_ms.toFixed(0),
    `${record.open_ms_median.toFixed(0)} / ${record.open_ms_max.toFixed(0)}`,
    record.rss_mb_before.toFixed(0),
    record.rss_mb_after.toFixed(0),
    record.rss_mb_per_terminal.toFixed(2),
    pair(record.client_sockets_before, record.client_sockets_after),
    pair(record.ssh_connections_before, record.ssh_connections_after),
    record.close_wall_ms.toFixed(0),
    record.rss_mb_after_close.toFixed(0),
  ])
  printMarkdown(header, body, new Set(header.map((_, column) => column).filter(column => column >= 2)))
}

/**
 * Print the fs section (stdout): per world, the mixed workload's wall time, its checks (errors,
 * stale-version retries, lost and duplicated updates: 0 errors and 0 lost or duplicated updates
 * pass) and the client's RSS before and after (MB, 10^6 bytes).
 */
export function printFs(records: readonly FsMixedRecord[]): void {
  const header = ['metric', 'world', 'callers', 'ops x runs', 'wall median / max ms', 'ops/s', 'reads / writes / edits / lists', 'errors', 'stale-version retries', 'lost updates', 'duplicated updates', 'result', 'RSS before MB', 'RSS after MB']
  const body = records.map(record => [
    record.metric,
    record.world,
    String(record.callers),
    `${record.ops} x ${record.runs} (+1 warm-up)`,
    `${formatMs(record.wall_ms_median)} / ${formatMs(record.wall_ms_max)}`,
    record.ops_per_s.toFixed(0),
    `${record.ops_by_kind.read} / ${record.ops_by_kind.write} / ${record.ops_by_kind.edit} / ${record.ops_by_kind.list}`,
    String(record.errors),
    String(record.stale_version_retries),
    String(record.lost_updates),
    String(record.duplicated_updates),
    record.errors === 0 && record.lost_updates === 0 && record.duplicated_updates === 0 ? 'PASS' : 'FAIL',
    record.rss_mb_before.toFixed(0),
    record.rss_mb_after.toFixed(0),
  ])
  printMarkdown(header, body, new Set([2, 5, 7, 8, 9, 10, 12, 13]))
}

/**
 * Write the JSON: one array, the timed rows first, then the memory, scale and fs records (told
 * apart by `section: 'memory'`, `section: 'scale'` and `section: 'fs'`; they have no
 * `median_ms`), so readers of the rows find them unchanged.
 */
export async function writeResults(path: string, rows: readonly Row[], memory: readonly MemoryRecord[], scale: readonly ScaleRecord[] = [], fs: readonly FsMixedRecord[] = []): Promise<void> {
  await mkdir(dirname(path), { recursive: true })
  await writeFile(path, `${JSON.stringify([...rows, ...memory, ...scale, ...fs], null, 2)}\n`)
}
