/**
 * The colour state a terminal reports through OSC 4, 10, 11 and 12: a 256-entry palette plus
 * the default foreground, background and cursor colours, as programs may set and reset them.
 * Pure; loaded by the emulator worker (so erasable TypeScript only).
 * @module dsh-remote-worlds/emulator/palette
 */

/** A colour as 8-bit channels. */
export interface Rgb {
  r: number
  g: number
  b: number
}

/**
 * The 16 ANSI colours and the special colours of xterm.js's default theme (the emulator this
 * room runs is xterm.js; its ThemeService's DEFAULT_ANSI_COLORS, DEFAULT_FOREGROUND `#ffffff`,
 * DEFAULT_BACKGROUND `#000000`, DEFAULT_CURSOR `#ffffff`), so a program asking the terminal
 * sees what an xterm.js terminal with no theme would answer.
 */
const ANSI_16 = [
  '2e3436', 'cc0000', '4e9a06', 'c4a000', '3465a4', '75507b', '06989a', 'd3d7cf',
  '555753', 'ef2929', '8ae234', 'fce94f', '729fcf', 'ad7fa8', '34e2e2', 'eeeeec',
]
const DEFAULT_FOREGROUND = 'ffffff'
const DEFAULT_BACKGROUND = '000000'
const DEFAULT_CURSOR = 'ffffff'

/** OSC numbers of the special colours (ctlseqs: "OSC Ps ; Pt" with Ps 10, 11, 12). */
export type SpecialColor = 'foreground' | 'background' | 'cursor'

function hex(value: string): Rgb {
  return { r: Number.parseInt(value.slice(0, 2), 16), g: Number.parseInt(value.slice(2, 4), 16), b: Number.parseInt(value.slice(4, 6), 16) }
}

/**
 * Entry `index` of the default 256-colour palette: 0-15 the ANSI colours above; 16-231 the
 * 6x6x6 cube with channel levels 0, 95, 135, 175, 215, 255; 232-255 the grey ramp 8 + 10 * n
 * (xterm's 256colres.pl, which xterm.js follows).
 */
export function defaultColor(index: number): Rgb {
  if (index < 16) return hex(ANSI_16[index]!)
  if (index < 232) {
    const level = (n: number): number => n === 0 ? 0 : 55 + 40 * n
    const cube = index - 16
    return { r: level(Math.floor(cube / 36)), g: level(Math.floor(cube / 6) % 6), b: level(cube % 6) }
  }
  const grey = 8 + 10 * (index - 232)
  return { r: grey, g: grey, b: grey }
}

function defaultSpecial(which: SpecialColor): Rgb {
  return hex(which === 'foreground' ? DEFAULT_FOREGROUND : which === 'background' ? DEFAULT_BACKGROUND : DEFAULT_CURSOR)
}

/**
 * The colour report format of xterm: `rgb:RRRR/GGGG/BBBB`, 16 bits per channel written as four
 * hex digits, each 8-bit value repeated (`0xcc` -> `cccc`), as xterm and VTE answer.
 */
export function formatColor(color: Rgb): string {
  const channel = (value: number): string => value.toString(16).padStart(2, '0').repeat(2)
  return `rgb:${channel(color.r)}/${channel(color.g)}/${channel(color.b)}`
}

/**
 * Parse an X11 colour specification as programs send it in OSC 4/10/11/12: `rgb:R/G/B` with
 * 1 to 4 hex digits per channel (scaled to 8 bits), or `#RGB`, `#RRGGBB`, `#RRRRGGGGBBBB`.
 * @returns undefined for anything else (named colours are not resolved; the set is ignored).
 */
export function parseColor(spec: string): Rgb | undefined {
  const scale = (digits: string): number => Math.round(Number.parseInt(digits, 16) * 255 / (16 ** digits.length - 1))
  const rgb = /^rgb:([0-9a-f]{1,4})\/([0-9a-f]{1,4})\/([0-9a-f]{1,4})$/i.exec(spec)
  if (rgb !== null) return { r: scale(rgb[1]!), g: scale(rgb[2]!), b: scale(rgb[3]!) }
  const sharp = /^#((?:[0-9a-f]{3}){1,4})$/i.exec(spec)
  if (sharp === null) return undefined
  const width = sharp[1]!.length / 3
  const part = (n: number): string => sharp[1]!.slice(n * width, (n + 1) * width)
  // `#RGB` means the high digit of each channel (X11 XParseColor), the others are widths as written.
  if (width === 1) return { r: Number.parseInt(part(0), 16) * 16, g: Number.parseInt(part(1), 16) * 16, b: Number.parseInt(part(2), 16) * 16 }
  return { r: scale(part(0)), g: scale(part(1)), b: scale(part(2)) }
}

/** The colour state of one terminal: defaults until a program sets an entry, back on reset. */
export class Palette {
  private readonly indexed = new Map<number, Rgb>()
  private readonly special = new Map<SpecialColor, Rgb>()

  /** Entry `index` (0-255) as it stands now. */
  color(index: number): Rgb {
    return this.indexed.get(index) ?? defaultColor(index)
  }

  /** A special colour as it stands now. */
  specialColor(which: SpecialColor): Rgb {
    return this.special.get(which) ?? defaultSpecial(which)
  }

  /** OSC 4: set entry `index`. */
  setColor(index: number, color: Rgb): void {
    this.indexed.set(index, color)
  }

  /** OSC 10/11/12: set a special colour. */
  setSpecial(which: SpecialColor, color: Rgb): void {
    this.special.set(which, color)
  }

  /** OSC 104: reset `index`, or every entry when undefined. */
  resetColor(index?: number): void {
    if (index === undefined) this.indexed.clear()
    else this.indexed.delete(index)
  }

  /** OSC 110/111/112: reset a special colour. */
  resetSpecial(which: SpecialColor): void {
    this.special.delete(which)
  }
}
