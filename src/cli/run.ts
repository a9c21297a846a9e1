/**
 * Executing scripts against a terminal: `dsh-remote-worlds run` and the demo share this.
 * @module dsh-remote-worlds/cli/run
 */
import type { TerminalSessionStatus, TerminalWaitReason } from '@deepseek-ai/dsh-terminal'
import type { RemoteWorld, WorldSendResult, WorldTerminal } from '../backend/world.ts'
import type { TerminalScreen } from '../emulator/screen.ts'
import { ScreenUnavailableError } from '../providers/remote/errors.ts'
import { type ResourceEvent, describeResourceEvent } from '../providers/remote/resource-events.ts'
import { sessionMembers } from '../providers/remote/teardown.ts'
import type { ScriptStep } from './script.ts'
import { controlledRuntime } from './target.ts'

/**
 * A send's record. `events` lists the resource-limit events (OOM kills, refused forks) the
 * world's cgroup counted while it ran; absent when there were none (see WorldSendResult in
 * backend/world.ts). `screen` is what the terminal showed after the send settled, present when
 * a full-screen program holds the alternate screen or the send settled by `inferred_idle` or
 * `timeout` (the output alone may not say what the program shows); absent otherwise, and when
 * the terminal has no emulator.
 */
export interface SendRecord { i: number; line: number; text: string; waitReason: TerminalWaitReason; sessionStatus: TerminalSessionStatus; output: string; truncated: boolean; ms: number; events?: ResourceEvent[]; screen?: TerminalScreen }

/** A `@signal` step's record: the process group the signal reached. */
export interface SignalRecord { i: number; line: number; text: string; signal: string; targetPgid: number; ms: number }

/**
 * A `@screen` step's record (`text` is `@screen`): the screen (emulator/screen.ts
 * `TerminalScreen`, every row), or `screenError` saying why the terminal has none to show
 * (e.g. `--no-emulator`); the run goes on either way.
 */
export type ScreenRecord =
  | { i: number; line: number; text: string; screen: TerminalScreen }
  | { i: number; line: number; text: string; screenError: string }

/** One executed step, as printed by `--json` (one object per line). */
export type StepRecord = SendRecord | SignalRecord | ScreenRecord

/** Source text of a step, for records and transcripts. */
export function stepText(step: ScriptStep): string {
  switch (step.kind) {
    case 'send': return step.submit ? step.text : `@raw ${step.text}`
    case 'cancel-after': return `@cancel-after ${step.afterMs} ${step.text}`
    case 'signal': return `@signal ${step.signal}`
    case 'screen': return '@screen'
  }
}

/**
 * Execute one step.
 * @returns a {@link SendRecord}, {@link SignalRecord} or {@link ScreenRecord} by the step's kind.
 * @throws whatever the terminal service throws (e.g. the session has exited); a screen the
 *   terminal cannot show is never thrown (a `@screen` record carries `screenError`, a send's
 *   record has no `screen`).
 */
export async function runStep(terminal: WorldTerminal, step: ScriptStep, i: number): Promise<StepRecord> {
  const started = performance.now()
  const text = stepText(step)
  if (step.kind === 'screen') {
    const screen = await screenOrReason(terminal)
    return typeof screen === 'string' ? { i, line: step.line, text, screenError: screen } : { i, line: step.line, text, screen }
  }
  if (step.kind === 'signal') {
    const result = await terminal.signal(step.signal)
    return { i, line: step.line, text, signal: step.signal, targetPgid: result.targetPgid, ms: round(performance.now() - started) }
  }
  const operation = terminal.startSend(step.text, { submit: step.kind === 'cancel-after' ? true : step.submit })
  let timer: NodeJS.Timeout | undefined
  if (step.kind === 'cancel-after') timer = setTimeout(() => operation.cancel(), step.afterMs)
  try {
    const result = await operation.done
    const ms = round(performance.now() - started)
    const screen = await screenWorthShowing(terminal, result)
    return { i, line: step.line, text, waitReason: result.waitReason, sessionStatus: result.sessionStatus, output: result.viewport, truncated: result.truncated, ms, ...(result.events !== undefined ? { events: result.events } : {}), ...(screen !== undefined ? { screen } : {}) }
  } finally {
    if (timer !== undefined) clearTimeout(timer)
  }
}

/**
 * The terminal's screen now, or the reason it has none to show (the message of its
 * ScreenUnavailableError: no emulator, or the terminal is closed).
 * @throws any other error of the terminal.
 */
export async function screenOrReason(terminal: WorldTerminal): Promise<TerminalScreen | string> {
  try {
    return await terminal.screen()
  } catch (error) {
    if (error instanceof ScreenUnavailableError) return error.message
    throw error
  }
}

/**
 * The screen after a settled send, when it says more than the output: a program holds the
 * alternate screen, or the send settled by silence (`inferred_idle`) or its deadline
 * (`timeout`). Undefined otherwise, and when the terminal cannot show its screen.
 */
async function screenWorthShowing(terminal: WorldTerminal, result: WorldSendResult): Promise<TerminalScreen | undefined> {
  if (result.waitReason === 'session_exit') return undefined
  const screen = await screenOrReason(terminal)
  if (typeof screen === 'string') return undefined
  return screen.altScreen || result.waitReason === 'inferred_idle' || result.waitReason === 'timeout' ? screen : undefined
}

/**
 * Processes of the terminal's session still alive in the world (a /proc scan through the
 * control channel): session id == the shell's pid, plus its descendants.
 * @returns `pid:state` strings; empty means quiescent.
 */
export async function sessionLeftovers(world: RemoteWorld, shellPid: number): Promise<string[]> {
  const control = await controlledRuntime(world).control()
  const table = await control.processTable()
  return sessionMembers(table, { pid: shellPid, starttime: 0 }).map(member => `${member.pid}:${member.state}`)
}

/**
 * Render one record for humans. A send: its header, its output framed `    | `, each
 * resource-limit event as a `    ! ...` line, then its screen when the record carries one
 * (`    screen: 40x160, cursor 3:7, alternate screen` and the screen's lines framed `    | `).
 * A `@screen` step: `[i] @screen  40x160, cursor 3:7, normal screen` and the framed lines, or
 * `[i] @screen` and `    ! screen unavailable: REASON`.
 */
export function formatRecord(record: StepRecord & { dropped?: number }): string {
  const dropped = record.dropped === undefined ? '' : `\n    ! ${record.dropped} bytes of the shell's output were dropped while it was detached (its log in the world keeps the last 8 MiB by default)`
  return formatStep(record) + dropped
}

/** One step's lines (see {@link formatRecord}). */
function formatStep(record: StepRecord): string {
  if ('signal' in record) return `[${record.i}] ${record.text}  -> delivered to process group ${record.targetPgid} (${record.ms} ms)`
  if ('screenError' in record) return `[${record.i}] ${record.text}\n    ! screen unavailable: ${record.screenError}`
  if (!('waitReason' in record)) return [`[${record.i}] ${record.text}  ${describeScreen(record.screen)}`, ...framedScreen(record.screen)].join('\n')
  const status = record.sessionStatus.kind === 'exited' ? `  session exited (code ${record.sessionStatus.exitCode ?? 'null'}${record.sessionStatus.signal !== null ? `, ${record.sessionStatus.signal}` : ''})` : ''
  const truncated = record.truncated ? '\n    | ... (output truncated: the tail follows; `read` the scrollback for more)' : ''
  const output = record.output.length === 0 ? '' : `${truncated}\n${record.output.replace(/\n$/, '').split('\n').map(line => `    | ${line}`).join('\n')}`
  const events = (record.events ?? []).map(event => `\n    ! ${describeResourceEvent(event)}`).join('')
  const screen = record.screen === undefined ? '' : ['', `    screen: ${describeScreen(record.screen)}`, ...framedScreen(record.screen)].join('\n')
  return `[${record.i}] ${record.waitReason.padEnd(13)} ${String(record.ms).padStart(6)} ms  $ ${record.text}${status}${output}${events}${screen}`
}

/**
 * A screen's size, cursor and buffer for humans: `40x160, cursor 3:7, alternate screen`
 * (rows x columns; the cursor's row:column 0-based, as in the JSON); `, blank` is added when
 * no row shows anything.
 */
export function describeScreen(screen: TerminalScreen): string {
  const blank = screen.lines.every(line => line.trimEnd().length === 0) ? ', blank' : ''
  return `${screen.rows}x${screen.cols}, cursor ${screen.cursor.row}:${screen.cursor.col}, ${screen.altScreen ? 'alternate' : 'normal'} screen${blank}`
}

/** A screen's rows framed `    | `, top to bottom, without the blank rows (empty or spaces) at the bottom. */
export function framedScreen(screen: TerminalScreen): string[] {
  const lines = [...screen.lines]
  while (lines.length > 0 && lines.at(-1)!.trimEnd().length === 0) lines.pop()
  return lines.map(line => `    | ${line}`)
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10
}
