/**
 * The output in flight that busy held terminals of this process share (bytes): a terminal's
 * credit window (held-terminal.ts) is {@link MAX_WINDOW_BYTES} while it is the only one that
 * received output lately, else the budget over the number that did, within
 * [{@link MIN_WINDOW_BYTES}, {@link MAX_WINDOW_BYTES}].
 *
 * Why shared: everything in flight when a cancel's SIGINT lands must pass terminal-bash before
 * the prompt can, and terminal-bash takes a few MB a second in all, on the one event loop every
 * terminal shares. One flooding terminal may keep a large window (terminal-bash pays per chunk in
 * proportion to its scrollback, so larger chunks are faster); twenty flooding at once must each
 * keep a small one, or their cancels wait behind each other's backlog (issue 21: 20 floods, ~1.5 MB
 * each in flight, came back after 5.5 s at p90).
 * @module dsh-remote-worlds/providers/remote/pty-holder/flow-budget
 */

/**
 * The output in flight busy terminals share when there are several (bytes). Measured (a scratch
 * driver of the bench's flood-cancel row, 2 cores, with the signal's drain of terminal.ts and
 * held-terminal.ts): 20 flooding terminals cancelled at once came back at 0.56 to 0.88 s (p90) at
 * 16 KiB each, 0.55 to 1.33 s at 64 KiB each (1 MiB shared). What a cancel drains is this window
 * plus what the PTY holds; terminal-bash pays ~30 ms per chunk whatever its size, so the window
 * matters less than the number of chunks after the SIGINT, but a small one keeps every stage of
 * the drain short.
 */
export const FLOW_BUDGET_BYTES = 256 * 1024
/** The smallest window a terminal gets, however many are busy (bytes). */
export const MIN_WINDOW_BYTES = 16 * 1024
/**
 * The window of a terminal busy alone (bytes): its cancel drains it alone. Measured: 100 MB
 * through terminal-bash at 11.9 MB/s (Docker), against 10.7 at 1 MiB and 11.8 on the engine's
 * PTY before dsh-pty.
 */
export const MAX_WINDOW_BYTES = 2 * 1024 * 1024
/** How recently a terminal must have received output to count as busy (ms). */
export const BUSY_WITHIN_MS = 1000

/** Terminals by when they last received output (performance.now() ms). */
const busy = new Map<object, number>()

/**
 * Note that `terminal` received output now, and return its window in bytes: all of
 * {@link MAX_WINDOW_BYTES} when it is busy alone, else its share of {@link FLOW_BUDGET_BYTES}.
 */
export function flowWindow(terminal: object): number {
  const now = performance.now()
  busy.set(terminal, now)
  let count = 0
  for (const [key, at] of busy) {
    if (now - at > BUSY_WITHIN_MS) busy.delete(key)
    else count += 1
  }
  if (count <= 1) return MAX_WINDOW_BYTES
  return Math.max(MIN_WINDOW_BYTES, Math.min(MAX_WINDOW_BYTES, Math.floor(FLOW_BUDGET_BYTES / count)))
}

/** Forget `terminal` (it ended): it no longer counts as busy. */
export function leaveFlow(terminal: object): void {
  busy.delete(terminal)
}
