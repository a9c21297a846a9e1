/**
 * The soak's churn rows: terminals opened and closed with hostile children, each close checked
 * for leaked processes by the independent checker; and spawns whose exit facts must be exact.
 * @module bench/soak/churn
 */
import { setTimeout as delay } from 'node:timers/promises'
import type { SubprocessOutcome, SubprocessRuntime } from '@deepseek-ai/dsh-subprocess'
import type { ProcessChecker } from './checker.ts'

/** What the terminal churn saw. */
export interface TerminalChurn {
  /** Terminals opened, given their hostile children, and closed. */
  terminals: number
  /** Processes of the hostile children still alive after their terminal's close, summed. */
  leakedProcesses: number
  /** Closes that left at least one process. */
  leakyCloses: number
  /** Open or close failures (error name and message), counted by text. */
  failures: Record<string, number>
  /** terminate() wall times (ms). */
  closeMs: number[]
}

/**
 * The hostile children, one line for an interactive bash: a TERM-ignoring child, a stopped job,
 * a `setsid` double fork (the escapee is init's child in its own session at once), and a zombie
 * maker (a parent that execs away from its exited child and never reaps it). Four live processes
 * carry MARKER (the stopped job stops itself before its exec, so its marker is in its `sh -c`).
 */
export function hostileChildren(marker: string): string {
  return [
    `sh -c 'trap "" TERM; exec sleep ${marker}1' &`,
    `sh -c 'kill -STOP $$; exec sleep ${marker}2' &`,
    `setsid sh -c 'sleep ${marker}3 &';`,
    `sh -c 'sleep 0 & exec sleep ${marker}4' &`,
  ].join(' ')
}

const HOSTILE_PROCESSES = 4
const BASH = ['/bin/bash', '--noprofile', '--norc', '-i']

/**
 * Open, provoke and close `count` terminals one after another, until `deadline` (epoch ms).
 * @param onFailure - sees each failure (the caller counts control-channel failures).
 */
export async function terminalChurn(runtime: SubprocessRuntime, checker: ProcessChecker, count: number, deadline: number, onFailure: (error: unknown) => void): Promise<TerminalChurn> {
  const result: TerminalChurn = { terminals: 0, leakedProcesses: 0, leakyCloses: 0, failures: {}, closeMs: [] }
  const fail = (error: unknown): void => {
    onFailure(error)
    const key = `${(error as Error).name}: ${(error as Error).message}`.slice(0, 200)
    result.failures[key] = (result.failures[key] ?? 0) + 1
  }
  for (let index = 0; index < count && Date.now() < deadline; index += 1) {
    const marker = `95${String(index).padStart(4, '0')}.${process.pid}`
    try {
      const terminal = await runtime.spawnTerminal({ argv: BASH, cwd: '/tmp', env: { TERM: 'dumb', PS1: 'dsh> ' }, rows: 24, cols: 80, graceMs: 1_000 })
      terminal.output.resume()
      await terminal.write(`${hostileChildren(marker)}\r`)
      // Close once every hostile child runs (bounded: a slow start is closed as it is).
      for (let look = 0; look < 100 && await checker.count(marker) < HOSTILE_PROCESSES; look += 1) await delay(10)
      const started = performance.now()
      await terminal.terminate()
      result.closeMs.push(performance.now() - started)
      const left = await checker.count(marker)
      result.leakedProcesses += left
      if (left > 0) result.leakyCloses += 1
    } catch (error) {
      fail(error)
    }
    result.terminals += 1
  }
  return result
}

/** What the spawn churn saw. */
export interface SpawnChurn {
  /** Spawns awaited. */
  spawns: number
  /** Spawns whose `done` rejected (an exit status lost). */
  lost: number
  /** Spawns that settled with other exit facts than the program's. */
  wrong: number
  /** Distinct lost or wrong outcomes with their counts. */
  examples: Record<string, number>
}

/** The programs of the spawn churn and the exact facts each must settle with. */
const PROGRAMS: readonly { argv: string[]; outcome: SubprocessOutcome }[] = [
  { argv: ['sh', '-c', 'exit 7'], outcome: { exitCode: 7, signal: null } },
  { argv: ['true'], outcome: { exitCode: 0, signal: null } },
  { argv: ['sh', '-c', 'echo out; echo err >&2; exit 3'], outcome: { exitCode: 3, signal: null } },
  { argv: ['sh', '-c', 'kill -TERM $$'], outcome: { exitCode: null, signal: 'SIGTERM' } },
]

/** The stdio modes the churn rotates through (the seam's dispositions). */
const STDIO = [
  { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
  { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' },
  { stdin: 'ignore', stdout: { maxBytes: 1 << 20 }, stderr: { maxBytes: 1 << 20 } },
  { stdin: 'ignore', stdout: { maxBytes: 1 << 20, spill: { maxBytes: 8 << 20 } }, stderr: { maxBytes: 1 << 20 } },
] as const

/** Run `count` spawns, `parallel` in flight, until `deadline` (epoch ms); every outcome checked exactly. */
export async function spawnChurn(runtime: SubprocessRuntime, count: number, parallel: number, deadline: number, onFailure: (error: unknown) => void): Promise<SpawnChurn> {
  const result: SpawnChurn = { spawns: 0, lost: 0, wrong: 0, examples: {} }
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < count && Date.now() < deadline) {
      const index = next++
      const program = PROGRAMS[index % PROGRAMS.length]!
      const handle = runtime.spawn({ argv: program.argv, cwd: '/tmp', stdio: STDIO[Math.floor(index / PROGRAMS.length) % STDIO.length]!, graceMs: 1_000 })
      handle.stdin?.end()
      handle.stdout?.resume()
      handle.stderr?.resume()
      try {
        const outcome = await handle.done
        if (outcome.exitCode !== program.outcome.exitCode || outcome.signal !== program.outcome.signal) {
          result.wrong += 1
          const key = `${program.argv.join(' ')} -> ${JSON.stringify(outcome)}`
          result.examples[key] = (result.examples[key] ?? 0) + 1
        }
      } catch (error) {
        onFailure(error)
        result.lost += 1
        const key = `${(error as Error).name}: ${(error as Error).message}`.slice(0, 200)
        result.examples[key] = (result.examples[key] ?? 0) + 1
      }
      result.spawns += 1
    }
  }
  await Promise.all(Array.from({ length: parallel }, worker))
  return result
}
