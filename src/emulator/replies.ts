/**
 * The terminal queries xterm.js's headless build leaves unanswered, answered from the
 * emulator's own state. Headless xterm.js 6 itself answers DSR 5 and 6, DA1, DA2 and DECRQM
 * (its InputHandler) and, with `windowOptions.getWinSizeChars`, CSI 18 t. It parses but does
 * not answer XTVERSION and the OSC colour queries: its browser renderer answers those, and a
 * headless terminal has none. Everything answered here goes out through `terminal.input`, so
 * every reply of the emulator leaves by one path (`onData`).
 * Loaded by the emulator worker (erasable TypeScript only).
 * @module dsh-remote-worlds/emulator/replies
 */
import type { IDisposable, Terminal } from '@xterm/headless'
import { Palette, type SpecialColor, formatColor, parseColor } from './palette.ts'

const ESC = '\x1b'
const BEL = '\x07'
const SPECIAL: readonly SpecialColor[] = ['foreground', 'background', 'cursor']

/**
 * Answer XTVERSION and the OSC 4/10/11/12 colour queries on `terminal`, and keep the colours
 * programs set (OSC 4/10/11/12) and reset (OSC 104/110/111/112), so a later query reports them.
 *
 * Facts, from XTerm's ctlseqs (invisible-island.net/xterm/ctlseqs/ctlseqs.html):
 * - XTVERSION is `CSI > Ps q` with Ps 0 or omitted; the reply is `DCS > | text ST`.
 * - OSC 10, 11, 12 with `?` report the text foreground, background and cursor colour as
 *   `OSC Ps ; rgb:RRRR/GGGG/BBBB`; one OSC may carry several, each for the next number up.
 * - OSC 4 carries `index ; spec` pairs; a `?` spec reports that entry as `OSC 4 ; index ; rgb:...`.
 * Replies end with BEL: the parser API does not say whether the query ended with BEL or ST, and
 * readers of these replies (termenv, crossterm, PSReadLine) accept both.
 *
 * @param version - the text of the XTVERSION reply, e.g. `xterm.js(6.0.0)`.
 * @returns a disposable removing the handlers.
 */
export function installReplies(terminal: Terminal, version: string): IDisposable {
  const palette = new Palette()
  const reply = (text: string): void => terminal.input(text, false)
  const handlers: IDisposable[] = [
    terminal.parser.registerCsiHandler({ prefix: '>', final: 'q' }, params => {
      if (params.length > 1 || (params.length === 1 && params[0] !== 0)) return false
      reply(`${ESC}P>|${version}${ESC}\\`)
      return true
    }),
    terminal.parser.registerOscHandler(4, data => {
      const fields = data.split(';')
      for (let i = 0; i + 1 < fields.length; i += 2) {
        const index = Number(fields[i])
        if (!/^\d+$/.test(fields[i]!) || index > 255) continue
        if (fields[i + 1] === '?') reply(`${ESC}]4;${index};${formatColor(palette.color(index))}${BEL}`)
        else {
          const color = parseColor(fields[i + 1]!)
          if (color !== undefined) palette.setColor(index, color)
        }
      }
      return true
    }),
    terminal.parser.registerOscHandler(104, data => {
      if (data === '') palette.resetColor()
      for (const field of data === '' ? [] : data.split(';')) if (/^\d+$/.test(field)) palette.resetColor(Number(field))
      return true
    }),
  ]
  SPECIAL.forEach((_, first) => {
    handlers.push(terminal.parser.registerOscHandler(10 + first, data => {
      data.split(';').forEach((spec, offset) => {
        const which = SPECIAL[first + offset]
        if (which === undefined) return
        if (spec === '?') reply(`${ESC}]${10 + first + offset};${formatColor(palette.specialColor(which))}${BEL}`)
        else {
          const color = parseColor(spec)
          if (color !== undefined) palette.setSpecial(which, color)
        }
      })
      return true
    }))
    handlers.push(terminal.parser.registerOscHandler(110 + first, () => {
      palette.resetSpecial(SPECIAL[first]!)
      return true
    }))
  })
  return { dispose: () => handlers.forEach(handler => handler.dispose()) }
}
