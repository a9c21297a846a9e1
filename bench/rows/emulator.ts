/**
 * The emulator's costs (issue 12), each beside the same row without the emulator, in the same
 * run, on worlds composed for them (the default world of the other rows is left as it is):
 * - `echo settle (emulator off)`: the `echo settle` row of bench/rows/terminal.ts on a world
 *   whose runtime config says `terminal: { emulator: false }` (remote worlds only: the local
 *   provider has no emulator, and its `echo settle` is the baseline of both);
 * - `100 MB terminal output (emulator on)` / `(emulator off)`: a send of
 *   `terminalOutputCommand(100)` until it settles at the prompt. Every byte goes through the
 *   PTY, the transport, terminal-bash's parsing on the main thread and, when on, the emulator's
 *   worker thread. The local world (no emulator) has one row, `10 MB terminal output`: the same
 *   pipeline at a tenth of the volume (see LOCAL_OUTPUT_MIB), compared by MB/s.
 * @module bench/rows/emulator
 */
import { type SampleTable, pushSample, withTimeout } from '../timing.ts'
import { expectSettled } from '../terminal-steps.ts'
import { type BenchTarget, type Composition, DEFAULT_TUNING, LONG_SEND_TUNING, type StartedWorld } from '../worlds.ts'

export const ECHO_WITHOUT_EMULATOR_METRIC = 'echo settle (emulator off)'
export const TERMINAL_OUTPUT_WITH_EMULATOR_METRIC = '100 MB terminal output (emulator on)'
export const TERMINAL_OUTPUT_WITHOUT_EMULATOR_METRIC = '100 MB terminal output (emulator off)'
/** The local world's row: the same pipeline, a tenth of the volume (see {@link LOCAL_OUTPUT_MIB}). */
export const LOCAL_TERMINAL_OUTPUT_METRIC = '10 MB terminal output'

/** The rows, in report order. */
export const EMULATOR_METRICS = [ECHO_WITHOUT_EMULATOR_METRIC, LOCAL_TERMINAL_OUTPUT_METRIC, TERMINAL_OUTPUT_WITH_EMULATOR_METRIC, TERMINAL_OUTPUT_WITHOUT_EMULATOR_METRIC] as const

/** MiB of `od` output the remote rows print before `END`. */
const REMOTE_OUTPUT_MIB = 100
/**
 * MiB the local row prints. The upstream local provider hands terminal-bash its PTY output in
 * node-pty's ~4 KiB reads, and terminal-bash's work per chunk grows with its buffers (about
 * 15 ms per chunk once they are full, measured), so it moves this output at 0.2-0.27 MB/s: 100
 * MiB would take 6.5 min or more per run and overrun the 120 s send timeout. 10 MiB takes 40-60 s;
 * its MB/s is the steady rate. (Remote transports deliver the same output in chunks of up to hundreds of
 * KiB, so the per-chunk cost is paid far less often.)
 */
const LOCAL_OUTPUT_MIB = 10

/** Payload bytes of each terminal-output row (MiB of `od` output), for its MB/s. */
export const TERMINAL_OUTPUT_BYTES: Readonly<Record<string, number>> = {
  [TERMINAL_OUTPUT_WITH_EMULATOR_METRIC]: REMOTE_OUTPUT_MIB * 1024 * 1024,
  [TERMINAL_OUTPUT_WITHOUT_EMULATOR_METRIC]: REMOTE_OUTPUT_MIB * 1024 * 1024,
  [LOCAL_TERMINAL_OUTPUT_METRIC]: LOCAL_OUTPUT_MIB * 1024 * 1024,
}

/**
 * `mib` MiB of printable text, then a marker line. `od -v`: without -v, od prints a repeated
 * line as one `*`, so all-zero input would print almost nothing. Its output (~4x its input) is
 * cut at exactly `mib` MiB (mid-line, so `END` follows the last digits); the PTY adds a CR
 * before each of its newlines (~1.6 % more bytes).
 */
export function terminalOutputCommand(mib: number): string {
  return `head -c ${mib}M /dev/zero | od -v | head -c ${mib}M; echo END`
}

/** Runs of the terminal-output rows at most (each moves 100 MiB through the terminal). */
export const TERMINAL_OUTPUT_MAX_RUNS = 3

/** Bound of one terminal-output send in the bench (ms): above terminal-bash's own timeout, so that one reports first. */
const TERMINAL_OUTPUT_STEP_MS = 150_000

/** A terminal-output row: its world's composition and its volume. */
interface OutputRow {
  metric: string
  composition: Composition
  /** MiB of output per measured run. */
  mib: number
  /** MiB of the discarded warm-up run (JIT, the emulator worker). */
  warmUpMib: number
}

/**
 * Measure the rows of `started`'s world into `samples`: `runs` echo settles without the
 * emulator (remote worlds), and min(`runs`, {@link TERMINAL_OUTPUT_MAX_RUNS}) terminal-output
 * sends per row, alternating between the rows (emulator on, off).
 */
export async function emulatorRuns(started: StartedWorld, runs: number, samples: SampleTable): Promise<void> {
  if (started.world !== 'local') await echoWithoutEmulator(started, runs, samples)
  const rows: OutputRow[] = started.world === 'local'
    ? [{ metric: LOCAL_TERMINAL_OUTPUT_METRIC, composition: { tuning: LONG_SEND_TUNING, emulator: false }, mib: LOCAL_OUTPUT_MIB, warmUpMib: 1 }]
    : [
        { metric: TERMINAL_OUTPUT_WITH_EMULATOR_METRIC, composition: { tuning: LONG_SEND_TUNING, emulator: true }, mib: REMOTE_OUTPUT_MIB, warmUpMib: 10 },
        { metric: TERMINAL_OUTPUT_WITHOUT_EMULATOR_METRIC, composition: { tuning: LONG_SEND_TUNING, emulator: false }, mib: REMOTE_OUTPUT_MIB, warmUpMib: 10 },
      ]
  await terminalOutputRuns(started, rows, Math.min(runs, TERMINAL_OUTPUT_MAX_RUNS), samples)
}

/**
 * `echo settle (emulator off)`: as in the lifecycle rows, the first send on a freshly opened
 * terminal, one terminal per run (open and close untimed), after one discarded warm-up run.
 */
async function echoWithoutEmulator(started: StartedWorld, runs: number, samples: SampleTable): Promise<void> {
  const target = await started.compose({ tuning: DEFAULT_TUNING, emulator: false })
  try {
    for (let run = 0; run <= runs; run += 1) {
      const term = await withTimeout(target.world.open(), 'open')
      try {
        const echo = await withTimeout(term.send('echo bench'), 'echo')
        expectSettled(started.world, 'echo (emulator off)', echo, echo.ms)
        if (run > 0) pushSample(samples, ECHO_WITHOUT_EMULATOR_METRIC, { ms: echo.ms, reason: echo.waitReason })
      } finally {
        await withTimeout(term.close(), 'close')
      }
    }
  } finally {
    await target.dispose()
  }
}

/** The terminal-output rows: each run opens a fresh terminal per world (untimed) and times one send. */
async function terminalOutputRuns(started: StartedWorld, rows: readonly OutputRow[], runs: number, samples: SampleTable): Promise<void> {
  const targets: BenchTarget[] = []
  try {
    for (const { composition } of rows) targets.push(await started.compose(composition))
    for (const [index, { metric, warmUpMib }] of rows.entries()) await terminalOutput(started.world, metric, targets[index]!, terminalOutputCommand(warmUpMib))
    console.error(`[bench] ${started.world}: terminal-output warm-up done`)
    for (let run = 0; run < runs; run += 1) {
      for (const [index, { metric, mib }] of rows.entries()) {
        const result = await terminalOutput(started.world, metric, targets[index]!, terminalOutputCommand(mib))
        pushSample(samples, metric, result)
        console.error(`[bench] ${started.world}: ${metric} ${run + 1}/${runs}: ${Math.round(result.ms)} ms`)
      }
    }
  } finally {
    await Promise.all(targets.map(target => target.dispose()))
  }
}

/** Open a terminal, send `command` and time it until it settles (ms); then close the terminal. */
async function terminalOutput(world: string, metric: string, target: BenchTarget, command: string): Promise<{ ms: number; reason: string }> {
  const term = await withTimeout(target.world.open(), 'open')
  try {
    const result = await withTimeout(term.send(command), metric, TERMINAL_OUTPUT_STEP_MS)
    expectSettled(world, metric, result, result.ms)
    // The marker proves the whole output went through before the settle (od prints only digits and spaces).
    if (!/END\r?\n/.test(result.viewport)) console.error(`[bench] ${world}: ${metric}: no END line in the settled view; tail ${JSON.stringify(result.viewport.slice(-300))}`)
    return { ms: result.ms, reason: result.waitReason }
  } finally {
    await withTimeout(term.close(), 'close')
  }
}
