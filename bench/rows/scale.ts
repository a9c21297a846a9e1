/**
 * The scale family (issue 14): {@link SCALE_TERMINALS} idle terminals open at once on one
 * world, on handles from `runtime.spawnTerminal` made with the exact spec terminal-bash used (as
 * bench/rows/probe.ts does), each opened to its first prompt.
 * - Timed rows: `inspectForeground (1 terminal open)` (repeated calls on the only terminal
 *   open) and `inspectForeground (100 idle terminals open)` (one call on each of the 100, in
 *   turn, every sample kept). Every probe must prove the idle prompt (`inputWaiting`). And
 *   `close 100 idle terminals at once` (one sample: the section's `close_wall_ms`).
 * - The scale section (a {@link ScaleRecord}, not a timed row): the client's RSS per idle
 *   terminal, the wall time to open the other 99 ({@link OPEN_CONCURRENCY} at a time) and to
 *   terminate all 100 at once, the client's sockets and, for SSH, the pooled connections.
 * Remote worlds only (bench/run.ts): the question is how the transports (one Docker engine
 * exec per terminal; SSH channels pooled over connections of MaxSessions channels each) and
 * their control channels bear many terminals; the local provider has neither.
 * @module bench/rows/scale
 */
import { readdirSync, readlinkSync } from 'node:fs'
import { setTimeout as delay } from 'node:timers/promises'
import type { SubprocessTerminalHandle } from '@deepseek-ai/dsh-subprocess'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { type SampleTable, median, pushSample, round, withTimeout } from '../timing.ts'
import type { BenchTarget, WorldName } from '../worlds.ts'
import { collectGarbage, rssMb } from './memory.ts'
import { untilPrompt } from '../terminal-steps.ts'

/** Terminals open at once at the peak (the first one included). */
export const SCALE_TERMINALS = 100
/** Opens in flight at once while the other terminals open. */
export const OPEN_CONCURRENCY = 10
/** How long all terminals sit idle at their prompts before the RSS sample (ms). */
const IDLE_MS = 2_000
/** Discarded calls before the single-terminal row (JIT, the memoised probe). */
const WARM_UP_PROBES = 5
/** Bound on terminating all terminals at once (ms). */
const CLOSE_ALL_STEP_MS = 60_000

export const SINGLE_TERMINAL_METRIC = 'inspectForeground (1 terminal open)'
export const MANY_TERMINALS_METRIC = `inspectForeground (${SCALE_TERMINALS} idle terminals open)`
/** One sample per world: the scale section's `close_wall_ms`, as a row with its floor. */
export const CLOSE_ALL_METRIC = `close ${SCALE_TERMINALS} idle terminals at once`

/** The rows, in report order. */
export const SCALE_METRICS = [SINGLE_TERMINAL_METRIC, MANY_TERMINALS_METRIC, CLOSE_ALL_METRIC] as const

/** The scale section's record of one world, as written to the JSON (`section: 'scale'`). */
export interface ScaleRecord {
  section: 'scale'
  metric: string
  world: WorldName
  /** Terminals open at the peak. */
  terminals: number
  /** Of those, opened at once (the first was open already, for the single-terminal row). */
  opened: number
  /** Opens in flight at once. */
  open_concurrency: number
  /** Wall time from the first of the {@link opened} opens to the last one's prompt (ms). */
  open_wall_ms: number
  /** Each of those opens, spawnTerminal call to its first prompt: median and maximum (ms). */
  open_ms_median: number
  open_ms_max: number
  /** RSS after a GC with the first terminal open, before the others opened (MB). */
  rss_mb_before: number
  /** RSS after a GC with all terminals open and idle for {@link IDLE_MS} (MB). */
  rss_mb_after: number
  /** (rss_mb_after - rss_mb_before) / opened (MB). */
  rss_mb_per_terminal: number
  /** Socket descriptors of the client process at those two points (null where /proc is missing). */
  client_sockets_before: number | null
  client_sockets_after: number | null
  /** SSH: pooled connections live at those two points, and the channels per connection (null for Docker). */
  ssh_connections_before: number | null
  ssh_connections_after: number | null
  ssh_max_sessions: number | null
  /** Wall time of terminate() on all terminals at once, until every one resolved (ms). */
  close_wall_ms: number
  /** RSS after the close and a GC (MB). */
  rss_mb_after_close: number
}

/** The client's socket descriptors now, or null where /proc/self/fd is not readable. */
function clientSockets(): number | null {
  try {
    let sockets = 0
    for (const fd of readdirSync('/proc/self/fd')) {
      try {
        if (readlinkSync(`/proc/self/fd/${fd}`).startsWith('socket:')) sockets += 1
      } catch {
        // Closed between the listing and the read (e.g. the listing's own descriptor).
      }
    }
    return sockets
  } catch {
    return null
  }
}

/** The SSH pool's counters of `target`, when its runtime is the SSH one; undefined otherwise. */
async function sshPool(target: BenchTarget): Promise<{ connections: number; maxSessions: number } | undefined> {
  const runtime = target.world.runtime
  return runtime instanceof SshSubprocessRuntime ? (await runtime.world()).stats() : undefined
}

/**
 * `count` calls of `task`, at most `limit` in flight; resolves with their results when all
 * resolved. After a failure no new call starts; the first failure is thrown once the calls in
 * flight ended.
 */
async function limited<T>(count: number, limit: number, task: () => Promise<T>): Promise<T[]> {
  const results: T[] = []
  let next = 0
  let failure: { error: unknown } | undefined
  const worker = async (): Promise<void> => {
    while (failure === undefined && next < count) {
      next += 1
      try {
        results.push(await task())
      } catch (error) {
        failure ??= { error }
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, count) }, worker))
  if (failure !== undefined) throw failure.error
  return results
}

/**
 * Measure the scale family on `target` (a world of the default composition): the
 * single-terminal row (max(runs, {@link SCALE_TERMINALS}) calls after {@link WARM_UP_PROBES}
 * discarded ones, as many as the many-terminal row), then the
 * other {@link SCALE_TERMINALS} - 1 terminals opened, RSS, one call on each of the
 * {@link SCALE_TERMINALS}, and all of them terminated at once.
 * @throws Error when no terminal-bash spawn spec was observed on `target` yet, or a probe does
 *   not prove the idle prompt; whatever an open throws (all opened terminals are terminated).
 */
export async function scaleRuns(world: WorldName, target: BenchTarget, runs: number, samples: SampleTable): Promise<ScaleRecord> {
  const spec = target.lastSpec()
  if (spec === undefined) throw new Error('bench: no terminal-bash spawn spec observed')
  const { signal: _unused, ...rest } = spec
  const handles: SubprocessTerminalHandle[] = []
  /** One terminal: spawnTerminal to its first prompt (ms). */
  const open = async (): Promise<number> => {
    const started = performance.now()
    const handle = await withTimeout(target.world.runtime.spawnTerminal({ ...rest }), 'direct spawnTerminal')
    handles.push(handle)
    await untilPrompt(handle)
    return performance.now() - started
  }
  const probe = async (handle: SubprocessTerminalHandle, metric: string): Promise<void> => {
    const started = performance.now()
    const facts = await handle.inspectForeground()
    const ms = performance.now() - started
    if (facts?.inputWaiting !== true) throw new Error(`bench: ${world}: ${metric}: terminal ${handle.pid} at an idle prompt probed as ${JSON.stringify(facts)}`)
    pushSample(samples, metric, { ms, reason: 'inputWaiting' })
  }
  try {
    await open()
    const first = handles[0]!
    await delay(30) // let the shell block in its read
    for (let index = 0; index < WARM_UP_PROBES; index += 1) await first.inspectForeground()
    for (let index = 0; index < Math.max(runs, SCALE_TERMINALS); index += 1) await probe(first, SINGLE_TERMINAL_METRIC)

    collectGarbage()
    const rssBefore = rssMb()
    const socketsBefore = clientSockets()
    const poolBefore = await sshPool(target)
    const opened = SCALE_TERMINALS - 1
    const opening = performance.now()
    const openMs = await limited(opened, OPEN_CONCURRENCY, open)
    const openWallMs = performance.now() - opening
    console.error(`[bench] ${world}: ${opened} more terminals open (${SCALE_TERMINALS} in all) in ${Math.round(openWallMs)} ms`)
    await delay(IDLE_MS)
    collectGarbage()
    const rssAfter = rssMb()
    const socketsAfter = clientSockets()
    const poolAfter = await sshPool(target)

    for (const handle of handles) await probe(handle, MANY_TERMINALS_METRIC)

    const closing = performance.now()
    await withTimeout(Promise.all(handles.map(handle => handle.terminate())), `terminate ${handles.length} terminals`, CLOSE_ALL_STEP_MS)
    const closeWallMs = performance.now() - closing
    pushSample(samples, CLOSE_ALL_METRIC, { ms: closeWallMs })
    handles.length = 0
    collectGarbage()
    return {
      section: 'scale',
      metric: `client RSS per idle terminal, ${SCALE_TERMINALS} idle terminals`,
      world,
      terminals: SCALE_TERMINALS,
      opened,
      open_concurrency: OPEN_CONCURRENCY,
      open_wall_ms: round(openWallMs),
      open_ms_median: round(median(openMs)),
      open_ms_max: round(Math.max(...openMs)),
      rss_mb_before: round(rssBefore),
      rss_mb_after: round(rssAfter),
      rss_mb_per_terminal: round((rssAfter - rssBefore) / opened),
      client_sockets_before: socketsBefore,
      client_sockets_after: socketsAfter,
      ssh_connections_before: poolBefore?.connections ?? null,
      ssh_connections_after: poolAfter?.connections ?? null,
      ssh_max_sessions: poolAfter?.maxSessions ?? null,
      close_wall_ms: round(closeWallMs),
      rss_mb_after_close: round(rssMb()),
    }
  } finally {
    await Promise.allSettled(handles.map(handle => withTimeout(handle.terminate(), 'direct terminate', 15_000)))
  }
}
