/**
 * The terminal lifecycle rows, through the unchanged terminal-bash on a fresh terminal per run:
 * open to prompt (and the runtime's spawnTerminal inside it), echo, cat and /dev/tty read
 * settles, cancel to prompt, close of an idle shell.
 * @module bench/rows/terminal
 */
import { setTimeout as delay } from 'node:timers/promises'
import { backToPrompt, expectSettled, waitForeground } from '../terminal-steps.ts'
import { type SampleTable, pushSample, withTimeout } from '../timing.ts'
import type { BenchTarget, WorldName } from '../worlds.ts'

/** The rows, in report order. */
export const TERMINAL_METRICS = [
  'open-to-prompt',
  'spawnTerminal (to pid published)',
  'echo settle',
  'cat settle (stdin_read)',
  '/dev/tty read settle (stdin_read)',
  'cancel-to-prompt',
  'close idle shell',
] as const

/** One full run of the terminal lifecycle rows on a fresh terminal of `target`, into `samples`. */
export async function lifecycleRun(world: WorldName, target: BenchTarget, samples: SampleTable): Promise<void> {
  const before = target.handles.length

  let started = performance.now()
  const term = await withTimeout(target.world.open(), 'open')
  pushSample(samples, 'open-to-prompt', { ms: performance.now() - started })
  const handle = target.handles[before]
  if (handle === undefined || target.handles.length !== before + 1) throw new Error('bench: could not observe the spawned terminal handle')
  pushSample(samples, 'spawnTerminal (to pid published)', { ms: target.spawnMs[before]! })
  try {
    const echo = await withTimeout(term.send('echo bench'), 'echo')
    pushSample(samples, 'echo settle', { ms: echo.ms, reason: echo.waitReason })
    expectSettled(world, 'echo', echo, echo.ms)

    const cat = await withTimeout(term.send('cat'), 'cat')
    pushSample(samples, 'cat settle (stdin_read)', { ms: cat.ms, reason: cat.waitReason })
    expectSettled(world, 'cat', cat, cat.ms)
    await backToPrompt(term, handle)

    // A read of /dev/tty on fd 3 (pagers, password prompts). Remote worlds only: the upstream
    // local provider proves reads on fd 0 alone, so there it settles by 3 s of silence.
    if (world !== 'local') {
      const tty = await withTimeout(term.send("bash -c 'read -u 3 x' 3</dev/tty"), '/dev/tty read')
      pushSample(samples, '/dev/tty read settle (stdin_read)', { ms: tty.ms, reason: tty.waitReason })
      expectSettled(world, '/dev/tty read', tty, tty.ms)
      await backToPrompt(term, handle)
    }

    const sleeping = term.startSend('sleep 30')
    await waitForeground(handle, pgid => pgid !== handle.pid, 'the sleep job')
    // The job's group owns the tty a moment before the forked child has exec'd sleep: give it
    // time, so the cancel always interrupts a running `sleep` (untimed).
    await delay(100)
    started = performance.now()
    sleeping.cancel()
    const cancelled = await withTimeout(sleeping.done, 'cancel')
    pushSample(samples, 'cancel-to-prompt', { ms: performance.now() - started, reason: cancelled.waitReason })
    expectSettled(world, 'cancel', cancelled, performance.now() - started)
    // Let the shell go fully idle (the prompt has settled; nothing else is pending).
    await delay(20)
  } catch (error) {
    await term.close().catch(() => undefined)
    throw error
  }
  started = performance.now()
  await withTimeout(term.close(), 'close')
  pushSample(samples, 'close idle shell', { ms: performance.now() - started })
}
