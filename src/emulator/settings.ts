/**
 * The runtime setting `terminal` of both worlds: whether each remote terminal keeps an
 * emulator, whether it answers the program's terminal queries, and how much scrollback it keeps.
 * @module dsh-remote-worlds/emulator/settings
 */
import { z } from 'zod'

/** Lines above the viewport an emulator keeps by default (about 2 KiB each at 160 columns). */
export const DEFAULT_SCROLLBACK_LINES = 200
/** Upper bound of `scrollback` (lines), so a typo cannot make every terminal hold a gigabyte. */
export const MAX_SCROLLBACK_LINES = 10_000

/**
 * `terminal` in the Docker and SSH runtime configs:
 * - `emulator` (default true): keep an xterm.js headless emulator per terminal, fed the PTY
 *   output (its screen: `WorldTerminal.screen()`); false: none, and no replies.
 * - `replies` (default `'answer'`): answer the program's terminal queries from the emulator
 *   (cursor position DSR 6, DSR 5, DA1, DA2, DECRQM, XTVERSION, OSC 4/10/11/12 colours,
 *   CSI 18 t). `'off'`: answer none (for a harness that answers them itself). The pinned
 *   terminal-bash (0.1.0-rc.8) answers none, so without this a program that asks waits forever.
 *   Either way a query is never answered twice (emulator/reply-guard.ts).
 * - `scrollback` (default {@link DEFAULT_SCROLLBACK_LINES}): lines kept above the viewport.
 */
export const TerminalEmulatorSettings = z.object({
  emulator: z.boolean().optional(),
  replies: z.enum(['answer', 'off']).optional(),
  scrollback: z.number().int().min(0).max(MAX_SCROLLBACK_LINES).optional(),
}).strict()

/** Input shape of {@link TerminalEmulatorSettings}. */
export type TerminalEmulatorSettings = z.input<typeof TerminalEmulatorSettings>

/** The settings with defaults applied; undefined when the emulator is off. */
export interface EmulatorChoice {
  replies: boolean
  scrollback: number
}

/** Apply the defaults of {@link TerminalEmulatorSettings}. */
export function emulatorChoice(settings: TerminalEmulatorSettings | undefined): EmulatorChoice | undefined {
  if (settings?.emulator === false) return undefined
  return { replies: (settings?.replies ?? 'answer') === 'answer', scrollback: settings?.scrollback ?? DEFAULT_SCROLLBACK_LINES }
}
