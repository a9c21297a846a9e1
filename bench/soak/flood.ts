/**
 * The soak's flood row: `base64 /dev/urandom` through the unchanged terminal-bash, cancelled
 * (a real SIGINT to the foreground group) after 2 s; the time from the cancel to the settled
 * prompt, with the output before the cancel kept (the settled view holds the flood's tail).
 * @module bench/soak/flood
 */
import { setTimeout as delay } from 'node:timers/promises'
import type { RemoteWorld } from '../../src/backend/world.ts'

/** What the flood row saw. */
export interface FloodCancel {
  /** Cancel-to-prompt times (ms), one per run. */
  cancelToPromptMs: number[]
  /** How each run settled (`stdin_read` at the prompt expected). */
  waitReasons: Record<string, number>
  /** Runs whose scrollback after the cancel did not hold flood output (base64 lines). */
  outputLost: number
}

/** Run the flood `runs` times in one terminal of `world`. */
export async function floodCancel(world: RemoteWorld, runs: number): Promise<FloodCancel> {
  const result: FloodCancel = { cancelToPromptMs: [], waitReasons: {}, outputLost: 0 }
  const terminal = await world.open()
  try {
    for (let run = 0; run < runs; run += 1) {
      const operation = terminal.startSend('base64 /dev/urandom')
      await delay(2_000)
      const started = performance.now()
      operation.cancel()
      const settled = await operation.done
      result.cancelToPromptMs.push(performance.now() - started)
      result.waitReasons[settled.waitReason] = (result.waitReasons[settled.waitReason] ?? 0) + 1
      // base64 prints 76-character lines of [A-Za-z0-9+/]: the settled view must hold the
      // flood's tail before the prompt.
      if (!/[A-Za-z0-9+/]{76}\n/.test(settled.viewport.replaceAll('\r', ''))) result.outputLost += 1
    }
  } finally {
    await terminal.close()
  }
  return result
}
