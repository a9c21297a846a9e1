/**
 * Executing scripts against a terminal: `dsh-remote-worlds run` and the demo share this.
 * @module dsh-remote-worlds/cli/run
 */
import type { TerminalSessionStatus, TerminalWaitReason } from '@deepseek-ai/dsh-terminal'
import type { RemoteWorld, WorldTerminal } from '../backend/world.ts'
import { type ResourceEvent, describeResourceEvent } from '../providers/remote/resource-events.ts'
import { sessionMembers } from '../providers/remote/teardown.ts'
import type { ScriptStep } from './script.ts'
import { controlledRuntime } from './target.ts'

/**
 * One executed step, as printed by `--json` (one object per line). A send's `events` lists the
 * resource-limit events (OOM kills, refused forks) the world's cgroup counted while it ran;
 * absent when there were none (see WorldSendResult in backend/world.ts).
 */
export type StepRecord =
  | { i: number; line: number; text: string; waitReason: TerminalWaitReason; sessionStatus: TerminalSessionStatus; output: string; truncated: boolean; ms: number; events?: ResourceEvent[] }
  | { i: number; line: number; text: string; signal: string; targetPgid: number; ms: number }

/** Source text of a step, for records and transcripts. */
export function stepText(step: ScriptStep): string {
  switch (step.kind) {
    case 'send': return step.submit ? step.text : `@raw ${step.text}`
    case 'cancel-after': return `@cancel-after ${step.afterMs} ${step.text}`
    case 'signal': return `@signal ${step.signal}`
  }
}

/**
 * Execute one step.
 * @throws whatever the terminal service throws (e.g. the session has exited).
 */
export async function runStep(terminal: WorldTerminal, step: ScriptStep, i: number): Promise<StepRecord> {
  const started = performance.now()
  const text = stepText(step)
  if (step.kind === 'signal') {
    const result = await terminal.signal(step.signal)
    return { i, line: step.line, text, signal: step.signal, targetPgid: result.targetPgid, ms: round(performance.now() - started) }
  }
  const operation = terminal.startSend(step.text, { submit: step.kind === 'cancel-after' ? true : step.submit })
  let timer: NodeJS.Timeout | undefined
  if (step.kind === 'cancel-after') timer = setTimeout(() => operation.cancel(), step.afterMs)
  try {
    const result = await operation.done
    return { i, line: step.line, text, waitReason: result.waitReason, sessionStatus: result.sessionStatus, output: result.viewport, truncated: result.truncated, ms: round(performance.now() - started), ...(result.events !== undefined ? { events: result.events } : {}) }
  } finally {
    if (timer !== undefined) clearTimeout(timer)
  }
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

/** Render one record for humans; each resource-limit event is a `    ! ...` line after the output. */
export function formatRecord(record: StepRecord): string {
  if ('signal' in record) return `[${record.i}] ${record.text}  -> delivered to process group ${record.targetPgid} (${record.ms} ms)`
  const status = record.sessionStatus.kind === 'exited' ? `  session exited (code ${record.sessionStatus.exitCode ?? 'null'}${record.sessionStatus.signal !== null ? `, ${record.sessionStatus.signal}` : ''})` : ''
  const truncated = record.truncated ? '\n    | ... (output truncated: the tail follows; `read` the scrollback for more)' : ''
  const output = record.output.length === 0 ? '' : `${truncated}\n${record.output.replace(/\n$/, '').split('\n').map(line => `    | ${line}`).join('\n')}`
  const events = (record.events ?? []).map(event => `\n    ! ${describeResourceEvent(event)}`).join('')
  return `[${record.i}] ${record.waitReason.padEnd(13)} ${String(record.ms).padStart(6)} ms  $ ${record.text}${status}${output}${events}`
}

function round(ms: number): number {
  return Math.round(ms * 10) / 10
}
