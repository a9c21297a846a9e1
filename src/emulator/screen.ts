/**
 * What a terminal shows: the text of the active buffer's viewport, as a snapshot.
 * Loaded by the emulator worker (erasable TypeScript only).
 * @module dsh-remote-worlds/emulator/screen
 */
import type { Terminal } from '@xterm/headless'

/**
 * The screen of a terminal, text only.
 * - `lines` has exactly `rows` entries, top to bottom, each with its trailing spaces trimmed; a
 *   wide character (CJK, most emoji) is one string element but fills two cells.
 * - `cursor` is 0-based: `lines[cursor.row]`, cell `cursor.col` (a cell index, so a wide
 *   character before it counts 2).
 * - `altScreen` is true while a program uses the alternate screen (DEC mode 1049/47/1047:
 *   less, vim, top); the normal buffer's content is kept meanwhile and is back after it leaves.
 * - `scrollback`, only when asked, holds up to that many lines that scrolled off the top of
 *   the normal buffer, oldest first (the alternate screen has none).
 */
export interface TerminalScreen {
  rows: number
  cols: number
  cursor: { row: number; col: number }
  altScreen: boolean
  lines: string[]
  scrollback?: string[]
}

/**
 * Read the screen of `terminal` as it stands after everything written so far was parsed.
 * @param scrollbackLines - include up to this many scrollback lines (0: the field is absent).
 */
export function readScreen(terminal: Terminal, scrollbackLines = 0): TerminalScreen {
  const buffer = terminal.buffer.active
  // translateToString(true) trims only cells never written; programs that paint a row (vim's
  // `~` lines) write real spaces, which are trimmed here too.
  const text = (y: number): string => (buffer.getLine(y)?.translateToString(true) ?? '').replace(/ +$/, '')
  const lines: string[] = []
  for (let row = 0; row < terminal.rows; row++) lines.push(text(buffer.baseY + row))
  const screen: TerminalScreen = {
    rows: terminal.rows,
    cols: terminal.cols,
    // After a write into the last column the cursor waits past it (the pending wrap): cell cols - 1.
    cursor: { row: buffer.cursorY, col: Math.min(buffer.cursorX, terminal.cols - 1) },
    altScreen: buffer.type === 'alternate',
    lines,
  }
  if (scrollbackLines > 0) {
    const first = Math.max(0, buffer.baseY - scrollbackLines)
    screen.scrollback = []
    for (let y = first; y < buffer.baseY; y++) screen.scrollback.push(text(y))
  }
  return screen
}
