/**
 * How `run` and `shell` show a screen to humans (src/cli/run.ts): a header with size, cursor
 * (0-based, as in the JSON) and buffer, then the rows framed `    | ` without the blank rows at
 * the bottom; a send's screen follows its output; a screen that cannot be shown says why.
 */
import { describe, expect, it } from 'vitest'
import type { TerminalScreen } from '../../src/emulator/screen.ts'
import { describeScreen, formatRecord, framedScreen } from '../../src/cli/run.ts'

const altScreen: TerminalScreen = { rows: 4, cols: 20, cursor: { row: 1, col: 7 }, altScreen: true, lines: ['top', '  indented', '   ', ''] }

describe('screen rendering', () => {
  it('describes size, 0-based cursor and buffer', () => {
    expect(describeScreen(altScreen)).toBe('4x20, cursor 1:7, alternate screen')
    expect(describeScreen({ ...altScreen, altScreen: false })).toBe('4x20, cursor 1:7, normal screen')
  })

  it('says blank when no row shows anything', () => {
    expect(describeScreen({ ...altScreen, cursor: { row: 0, col: 0 }, lines: ['', ' ', '', ''] })).toBe('4x20, cursor 0:0, alternate screen, blank')
  })

  it('frames the rows, dropping only the blank rows at the bottom', () => {
    expect(framedScreen({ ...altScreen, lines: ['', 'a', '', 'b  ', '', ' '] })).toEqual(['    | ', '    | a', '    | ', '    | b  '])
  })

  it('renders an @screen record as a header and its framed rows', () => {
    expect(formatRecord({ i: 3, line: 5, text: '@screen', screen: altScreen })).toBe('[3] @screen  4x20, cursor 1:7, alternate screen\n    | top\n    |   indented')
  })

  it('renders an @screen record without a screen as the reason', () => {
    expect(formatRecord({ i: 2, line: 2, text: '@screen', screenError: 'terminal 7 in docker container abc as agent has no emulator (runtime setting terminal.emulator is false)' }))
      .toBe('[2] @screen\n    ! screen unavailable: terminal 7 in docker container abc as agent has no emulator (runtime setting terminal.emulator is false)')
  })

  it('renders a send\'s screen after its output', () => {
    const record = { i: 1, line: 1, text: 'top', waitReason: 'inferred_idle' as const, sessionStatus: { kind: 'running' as const }, output: 'top\n', truncated: false, ms: 3012.5, screen: altScreen }
    expect(formatRecord(record)).toBe('[1] inferred_idle 3012.5 ms  $ top\n    | top\n    screen: 4x20, cursor 1:7, alternate screen\n    | top\n    |   indented')
  })

  it('renders a send without a screen as before', () => {
    const record = { i: 1, line: 1, text: 'echo hi', waitReason: 'stdin_read' as const, sessionStatus: { kind: 'running' as const }, output: 'echo hi\nhi\ndsh> ', truncated: false, ms: 57 }
    expect(formatRecord(record)).toBe('[1] stdin_read        57 ms  $ echo hi\n    | echo hi\n    | hi\n    | dsh> ')
  })
})
