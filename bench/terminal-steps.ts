/**
 * Untimed terminal steps the rows share: waiting for the foreground group to change, getting
 * back to a fresh prompt, waiting for a direct handle's prompt, and reporting a send that
 * settled unexpectedly.
 * @module bench/terminal-steps
 */
import { setTimeout as delay } from 'node:timers/promises'
import type { SubprocessTerminalHandle } from '@deepseek-ai/dsh-subprocess'
import type { WorldTerminal } from '../src/backend/world.ts'
import { withTimeout } from './timing.ts'

/**
 * Poll the handle until the terminal's foreground group satisfies `ok` (outside any timing).
 * @throws Error when it does not within 10 s.
 */
export async function waitForeground(handle: SubprocessTerminalHandle, ok: (pgid: number) => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000
  for (;;) {
    const facts = await handle.inspectForeground()
    if (facts !== undefined && ok(facts.processGroupId)) return
    if (Date.now() > deadline) throw new Error(`bench: foreground never became ${what} (last: ${JSON.stringify(facts)})`)
    await delay(5)
  }
}

/**
 * Interrupt what runs in the foreground and resynchronise on a fresh prompt (not timed).
 * @throws Error when the resync send does not settle as `stdin_read`.
 */
export async function backToPrompt(term: WorldTerminal, handle: SubprocessTerminalHandle): Promise<void> {
  await term.signal('SIGINT')
  await waitForeground(handle, pgid => pgid === handle.pid, 'the shell')
  const sync = await withTimeout(term.send(''), 'resync prompt')
  if (sync.waitReason !== 'stdin_read') throw new Error(`bench: resync settled as ${sync.waitReason}`)
  await delay(20)
}

/** Report (stderr) a send that did not settle as `stdin_read`, with what it saw; `ms` is its time. */
export function expectSettled(world: string, metric: string, result: { waitReason: string; viewport: string }, ms: number): void {
  if (result.waitReason === 'stdin_read') return
  console.error(`[bench] ${world}: ${metric} settled as ${result.waitReason} after ${Math.round(ms)} ms; viewport tail ${JSON.stringify(result.viewport.slice(-300))}`)
}

/**
 * Wait for the handle's next prompt (its output from now on contains terminal-bash's OSC 133 D
 * mark and ends with `dsh> `). The listener is attached at the call: call it before the write
 * that brings the prompt.
 * @throws Error when no prompt comes within the step bound.
 */
export async function untilPrompt(handle: SubprocessTerminalHandle): Promise<void> {
  let seen = ''
  const prompt = Promise.withResolvers<void>()
  const onData = (chunk: Buffer | string): void => {
    seen += chunk.toString()
    if (seen.includes('\x1b]133;D;') && seen.endsWith('dsh> ')) prompt.resolve()
  }
  handle.output.on('data', onData)
  try {
    await withTimeout(prompt.promise, 'direct terminal prompt')
  } finally {
    handle.output.off('data', onData)
  }
}
