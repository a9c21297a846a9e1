/**
 * The one POSIX quoting function: every quoted word must come back byte-exact after a REAL
 * shell parses it. Each string goes through `sh -c 'set -- WORDS; printf "%s\0" "$@"'`, so the
 * shell's own parser is the judge, and NUL-terminated output shows word boundaries exactly.
 */
import { execFileSync } from 'node:child_process'
import { describe, expect, it } from 'vitest'
import { InvalidArgumentError, RemoteWorldError } from '../../src/providers/remote/errors.ts'
import { shQuote, shQuoteArgv, shQuoteEnvEntry } from '../../src/providers/remote/quote.ts'

/** Every POSIX shell available here: dash (`sh`) and bash parse quotes differently elsewhere. */
const SHELLS = ['sh', 'bash'] as const

/** Hostile strings: each must survive as exactly one word. */
const HOSTILE: readonly string[] = [
  "it's",
  "'",
  "''",
  "'\\''",
  '$HOME',
  '${PATH}',
  '$(id -u)',
  '`id -u`',
  'back\\slash',
  '\\',
  '\\n',
  'line1\nline2',
  '\n',
  'tab\there',
  '  leading and trailing spaces  ',
  'héllo-世界',
  '😀 emoji',
  '',
  '-n',
  '-e',
  '--',
  '-',
  '--help=yes',
  '*',
  '?',
  '[a-z]',
  '~',
  '~root',
  '!',
  '!!',
  '#comment',
  ';',
  '&&',
  '|',
  '>out',
  '<in',
  '"double"',
  '\u00a0nbsp',
  '\u0001\u007f control',
  'a=b',
]

/** Run the quoted words through a real shell and return the words it sees. */
function parseWith(shell: string, quotedWords: string): string[] {
  const out = execFileSync(shell, ['-c', `set -- ${quotedWords}; printf '%s\\0' "$@"`])
  const words = out.toString('utf8').split('\0')
  // printf terminates every word with NUL, so the last split element is the empty tail.
  expect(words.pop()).toBe('')
  return words
}

/** NUL-terminated byte output of a shell, compared as raw bytes (no decoding involved). */
function rawWith(shell: string, quotedWords: string): Buffer {
  return execFileSync(shell, ['-c', `set -- ${quotedWords}; printf '%s\\0' "$@"`])
}

describe('shQuote', () => {
  it('wraps in single quotes and writes an embedded quote as \'\\\'\'', () => {
    expect(shQuote('plain')).toBe("'plain'")
    expect(shQuote('')).toBe("''")
    expect(shQuote("it's")).toBe("'it'\\''s'")
    expect(shQuote("'")).toBe("''\\'''")
    expect(shQuote('$x `y` \\z')).toBe("'$x `y` \\z'")
  })

  describe.each(SHELLS)('round-trips through a real %s', shell => {
    it.each(HOSTILE.map(value => [JSON.stringify(value), value] as const))('one word, exactly: %s', (_label, value) => {
      expect(parseWith(shell, shQuote(value))).toEqual([value])
      expect(rawWith(shell, shQuote(value))).toEqual(Buffer.concat([Buffer.from(value, 'utf8'), Buffer.from([0])]))
    })

    it('all hostile strings as one argv keep their count, order and bytes', () => {
      expect(parseWith(shell, shQuoteArgv(HOSTILE))).toEqual(HOSTILE)
      const expected = Buffer.concat(HOSTILE.map(value => Buffer.concat([Buffer.from(value, 'utf8'), Buffer.from([0])])))
      expect(rawWith(shell, shQuoteArgv(HOSTILE))).toEqual(expected)
    })
  })

  it('rejects NUL with InvalidArgumentError (code INVALID_ARGUMENT), naming what was quoted', () => {
    const attempt = (): string => shQuote('a\0b', 'cwd')
    expect(attempt).toThrow(InvalidArgumentError)
    try {
      attempt()
      expect.unreachable('shQuote accepted a NUL byte')
    } catch (error) {
      expect(error).toBeInstanceOf(RemoteWorldError)
      expect((error as InvalidArgumentError).code).toBe('INVALID_ARGUMENT')
      expect((error as Error).message).toBe('cwd contains a NUL byte, which no remote process can receive: "a\\u0000b"')
    }
    expect(() => shQuote('\0')).toThrow(InvalidArgumentError)
  })
})

describe('shQuoteArgv', () => {
  it('joins quoted elements with single spaces; the empty argv is the empty string', () => {
    expect(shQuoteArgv(['/bin/bash', '--noprofile', "it's"])).toBe("'/bin/bash' '--noprofile' 'it'\\''s'")
    expect(shQuoteArgv([])).toBe('')
  })

  it('keeps empty elements as words of their own', () => {
    expect(parseWith('sh', shQuoteArgv(['', 'a', '', '']))).toEqual(['', 'a', '', ''])
  })

  it('rejects an element containing NUL with InvalidArgumentError', () => {
    expect(() => shQuoteArgv(['ok', 'bad\0'])).toThrow(InvalidArgumentError)
    expect(() => shQuoteArgv(['ok', 'bad\0'])).toThrow('argv element contains a NUL byte')
  })
})

describe('shQuoteEnvEntry', () => {
  it('produces one NAME=value word that a real shell parses back exactly', () => {
    for (const value of HOSTILE) {
      expect(parseWith('sh', shQuoteEnvEntry('DSH_X', value))).toEqual([`DSH_X=${value}`])
    }
  })

  it('sets exactly those variables through a real `env -i`', () => {
    const entries: [string, string][] = [['A', "it's $HOME `x`"], ['B', 'line1\nline2'], ['C', ''], ['D', 'héllo-世界'], ['lower_case', '-n']]
    const words = entries.map(([name, value]) => shQuoteEnvEntry(name, value)).join(' ')
    // `env -0` prints every variable NUL-terminated; with `env -i` nothing else is set.
    const out = execFileSync('sh', ['-c', `exec env -i ${words} env -0`]).toString('utf8').split('\0')
    expect(out.pop()).toBe('')
    expect(out).toEqual(entries.map(([name, value]) => `${name}=${value}`))
  })

  it('rejects an empty name, a name containing =, and NUL in name or value', () => {
    for (const [name, value] of [['', 'x'], ['A=B', 'x'], ['A\0', 'x'], ['A', 'x\0y']] as const) {
      expect(() => shQuoteEnvEntry(name, value)).toThrow(InvalidArgumentError)
    }
    expect(() => shQuoteEnvEntry('', 'x')).toThrow('invalid environment variable name: ""')
    expect(() => shQuoteEnvEntry('A=B', 'x')).toThrow('invalid environment variable name: "A=B"')
    expect(() => shQuoteEnvEntry('A', 'x\0y')).toThrow('environment entry A contains a NUL byte')
  })
})
