/**
 * The emulator room's pure parts: the palette and colour formats, the duplicate-reply guard,
 * and the reply handlers and screen reading on a real xterm.js headless terminal in-process
 * (the worker runs the same modules; the world suites drive the worker itself).
 */
import xterm from '@xterm/headless'
import unicode11 from '@xterm/addon-unicode11'
import { describe, expect, it } from 'vitest'
import { Palette, defaultColor, formatColor, parseColor } from '../../src/emulator/palette.ts'
import { DUPLICATE_REPLY_WINDOW_MS, ReplyGuard } from '../../src/emulator/reply-guard.ts'
import { installReplies } from '../../src/emulator/replies.ts'
import { readScreen } from '../../src/emulator/screen.ts'
import { emulatorChoice } from '../../src/emulator/settings.ts'
import { TerminalEmulatorSettings } from '../../src/emulator/settings.ts'

describe('palette', () => {
  it('the 256 default colours: xterm.js ANSI 0-15, the 6x6x6 cube, the grey ramp', () => {
    expect(formatColor(defaultColor(0))).toBe('rgb:2e2e/3434/3636')
    expect(formatColor(defaultColor(9))).toBe('rgb:efef/2929/2929')
    expect(formatColor(defaultColor(16))).toBe('rgb:0000/0000/0000')
    expect(formatColor(defaultColor(17))).toBe('rgb:0000/0000/5f5f')
    expect(formatColor(defaultColor(196))).toBe('rgb:ffff/0000/0000')
    expect(formatColor(defaultColor(231))).toBe('rgb:ffff/ffff/ffff')
    expect(formatColor(defaultColor(232))).toBe('rgb:0808/0808/0808')
    expect(formatColor(defaultColor(255))).toBe('rgb:eeee/eeee/eeee')
  })

  it('parses X11 colour specifications, scaling each channel to 8 bits', () => {
    expect(parseColor('rgb:12/34/56')).toEqual({ r: 0x12, g: 0x34, b: 0x56 })
    expect(parseColor('rgb:f/8/0')).toEqual({ r: 255, g: 136, b: 0 })
    expect(parseColor('rgb:ffff/0000/8080')).toEqual({ r: 255, g: 0, b: 128 })
    expect(parseColor('#00ff00')).toEqual({ r: 0, g: 255, b: 0 })
    expect(parseColor('#f80')).toEqual({ r: 0xf0, g: 0x80, b: 0 })
    expect(parseColor('#ffff00008080')).toEqual({ r: 255, g: 0, b: 128 })
    expect(parseColor('red')).toBeUndefined()
    expect(parseColor('rgb:12/34')).toBeUndefined()
  })

  it('keeps what a program set until it is reset', () => {
    const palette = new Palette()
    palette.setColor(1, { r: 1, g: 2, b: 3 })
    palette.setSpecial('background', { r: 9, g: 9, b: 9 })
    expect(palette.color(1)).toEqual({ r: 1, g: 2, b: 3 })
    expect(palette.specialColor('background')).toEqual({ r: 9, g: 9, b: 9 })
    palette.resetColor(1)
    palette.resetSpecial('background')
    expect(palette.color(1)).toEqual(defaultColor(1))
    expect(formatColor(palette.specialColor('background'))).toBe('rgb:0000/0000/0000')
  })
})

describe('reply guard', () => {
  it('drops a harness reply of a kind the emulator sent, once', () => {
    const guard = new ReplyGuard()
    guard.noteAnswered('\x1b[12;1R\x1b[12;1R', 1000)
    expect(guard.filter('\x1b[3;4R', 1002)).toBe('')
    expect(guard.filter('\x1b[3;4R', 1003)).toBe('')
    expect(guard.filter('\x1b[3;4R', 1004)).toBe('\x1b[3;4R')
  })

  it('a write with typed text ends the watch: a later reply-shaped write is the agent\'s own and passes', () => {
    const guard = new ReplyGuard()
    guard.noteAnswered('\x1b[12;1R', 1000)
    expect(guard.filter('read -rs -d R x\r', 1001)).toBe('read -rs -d R x\r')
    expect(guard.filter('\x1b[12;5R', 1002)).toBe('\x1b[12;5R')
  })

  it('tells reply kinds apart: DA1 is not DA2, DECRPM is per mode, OSC 4 per index', () => {
    const guard = new ReplyGuard()
    guard.noteAnswered('\x1b[?1;2c\x1b[?1049;2$y\x1b]4;1;rgb:cccc/0000/0000\x07', 0)
    expect(guard.filter('\x1b[?1;2c\x1b[?1049;1$y\x1b]4;1;rgb:0000/0000/0000\x1b\\', 1)).toBe('')
    const other = new ReplyGuard()
    other.noteAnswered('\x1b[?1;2c\x1b[?1049;2$y\x1b]4;1;rgb:cccc/0000/0000\x07', 0)
    expect(other.filter('\x1b[>0;276;0c\x1b[?25;1$y\x1b]4;2;rgb:0000/0000/0000\x07', 1)).toBe('\x1b[>0;276;0c\x1b[?25;1$y\x1b]4;2;rgb:0000/0000/0000\x07')
  })

  it('forgets what it sent after the window', () => {
    const guard = new ReplyGuard()
    guard.noteAnswered('\x1bP>|xterm.js(6.0.0)\x1b\\', 0)
    expect(guard.filter('\x1bP>|other(1)\x1b\\', DUPLICATE_REPLY_WINDOW_MS + 1)).toBe('\x1bP>|other(1)\x1b\\')
  })
})

describe('settings', () => {
  it('defaults: an emulator that answers, 200 lines of scrollback; emulator false means none', () => {
    expect(emulatorChoice(undefined)).toEqual({ replies: true, scrollback: 200 })
    expect(emulatorChoice({ replies: 'off', scrollback: 0 })).toEqual({ replies: false, scrollback: 0 })
    expect(emulatorChoice({ emulator: false, replies: 'answer' })).toBeUndefined()
  })

  it('refuses unknown keys and out-of-range scrollback', () => {
    expect(TerminalEmulatorSettings.safeParse({ replies: 'yes' }).success).toBe(false)
    expect(TerminalEmulatorSettings.safeParse({ scrollback: 10_001 }).success).toBe(false)
    expect(TerminalEmulatorSettings.safeParse({ colour: 'dark' }).success).toBe(false)
  })
})

/** A headless terminal with the room's handlers, and the replies it sent. */
function emulator(rows = 5, cols = 20): { terminal: InstanceType<typeof xterm.Terminal>; replies: string[]; write(data: string): Promise<void> } {
  const terminal = new xterm.Terminal({ rows, cols, scrollback: 10, allowProposedApi: true, windowOptions: { getWinSizeChars: true } })
  terminal.loadAddon(new unicode11.Unicode11Addon())
  terminal.unicode.activeVersion = '11'
  installReplies(terminal, 'xterm.js(test)')
  const replies: string[] = []
  terminal.onData(data => replies.push(data))
  return { terminal, replies, write: data => new Promise(resolve => terminal.write(data, resolve)) }
}

describe('replies and screen on a headless terminal', () => {
  it('answers XTVERSION (CSI > q and CSI > 0 q, not CSI > 1 q) and the OSC colour queries', async () => {
    const { replies, write } = emulator()
    await write('\x1b[>q\x1b[>0q\x1b[>1q')
    await write('\x1b]10;?;?;?\x07\x1b]4;0;?;300;?;1;?\x1b\\')
    expect(replies).toEqual([
      '\x1bP>|xterm.js(test)\x1b\\',
      '\x1bP>|xterm.js(test)\x1b\\',
      '\x1b]10;rgb:ffff/ffff/ffff\x07',
      '\x1b]11;rgb:0000/0000/0000\x07',
      '\x1b]12;rgb:ffff/ffff/ffff\x07',
      '\x1b]4;0;rgb:2e2e/3434/3636\x07',
      '\x1b]4;1;rgb:cccc/0000/0000\x07',
    ])
  })

  it('xterm.js itself answers the cursor position (1-based), DA1 and the window size', async () => {
    const { replies, write } = emulator(5, 20)
    await write('ab\r\ncd\x1b[6n\x1b[c\x1b[18t')
    expect(replies).toEqual(['\x1b[2;3R', '\x1b[?1;2c', '\x1b[8;5;20t'])
  })

  it('reads the screen: rows, 0-based cursor, wide characters, trimmed painted spaces, scrollback', async () => {
    const { terminal, write } = emulator(3, 10)
    await write('one\r\ntwo\r\nthree\r\n✅ab   \x1b[4;3HZ')
    expect(readScreen(terminal, 5)).toEqual({
      rows: 3,
      cols: 10,
      cursor: { row: 2, col: 3 },
      altScreen: false,
      lines: ['two', 'three', '✅Zb'],
      scrollback: ['one'],
    })
    await write('\x1b[?1049h\x1b[Halt')
    expect(readScreen(terminal)).toMatchObject({ altScreen: true, lines: ['alt', '', ''] })
    await write('\x1b[?1049l')
    expect(readScreen(terminal).lines).toEqual(['two', 'three', '✅Zb'])
  })

  it('a cursor waiting past the last column (pending wrap) reads as the last cell', async () => {
    const { terminal, write } = emulator(2, 4)
    await write('abcd')
    expect(readScreen(terminal).cursor).toEqual({ row: 0, col: 3 })
  })
})
