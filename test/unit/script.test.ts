/**
 * The `run --script` format (src/cli/script.ts): `@screen` is a step of its own and takes no
 * argument; a mistake names its line.
 */
import { describe, expect, it } from 'vitest'
import { parseScript } from '../../src/cli/script.ts'
import { InvalidArgumentError } from '../../src/providers/remote/errors.ts'

describe('parseScript', () => {
  it('reads @screen as a screen step at its line, between sends', () => {
    expect(parseScript('vim-tiny notes.txt\n@screen\n# comment\n\n:q\n@screen')).toEqual([
      { kind: 'send', text: 'vim-tiny notes.txt', submit: true, line: 1 },
      { kind: 'screen', line: 2 },
      { kind: 'send', text: ':q', submit: true, line: 5 },
      { kind: 'screen', line: 6 },
    ])
  })

  it('accepts @screen followed by spaces or a CR (a CRLF script)', () => {
    expect(parseScript('@screen  \r\n@screen\r\n')).toEqual([{ kind: 'screen', line: 1 }, { kind: 'screen', line: 2 }])
  })

  it('refuses an argument to @screen, naming the line and the argument', () => {
    expect(() => parseScript('echo hi\n@screen extra')).toThrow(new InvalidArgumentError('script line 2: @screen takes no argument, got "extra"'))
  })

  it('still refuses an unknown directive that starts like @screen', () => {
    expect(() => parseScript('@screenshot')).toThrow(new InvalidArgumentError('script line 1: unknown directive @screenshot'))
  })
})
