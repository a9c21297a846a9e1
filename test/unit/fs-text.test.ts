/**
 * The text semantics of ctx.fs (src/files/text.ts), paths in the world (src/files/paths.ts), and
 * which spawned programs are the host's packaged ripgrep (world-tools/ripgrep.ts). Pure.
 */
import { FsError } from '@deepseek-ai/dsh-fs'
import { describe, expect, it } from 'vitest'
import { displayPathOf, fileUrlOf, isWithin, rawJoin } from '../../src/files/paths.ts'
import { TextStreamDecoder, applyLiteralEdit, decodeText, detectLineEndings, diffBasis, restoreLineEndings } from '../../src/files/text.ts'
import { isPackagedRipgrep } from '../../src/providers/remote/world-tools/ripgrep.ts'
import { cacheDirectories } from '../../src/providers/remote/world-tools/install.ts'

function fsCode(run: () => unknown): string {
  try {
    run()
  } catch (error) {
    expect(error).toBeInstanceOf(FsError)
    return (error as FsError).code
  }
  throw new Error('expected an FsError')
}

describe('decoding', () => {
  it('reads valid UTF-8 exactly and refuses invalid bytes and NULs with FS_NOT_TEXT', () => {
    expect(decodeText(Buffer.from('grüß\r\n'), 'read', '/f', true)).toBe('grüß\r\n')
    expect(() => decodeText(Buffer.from([0x61, 0xff]), 'read', '/f', true)).toThrow('cannot read "/f": invalid UTF-8 text')
    expect(() => decodeText(Buffer.from([0x61, 0, 0x62]), 'edit', '/f', false)).toThrow('cannot edit "/f": binary file')
  })

  it('reads look for a NUL in the first 8192 bytes only; edits anywhere', () => {
    const late = Buffer.concat([Buffer.alloc(8192, 0x61), Buffer.from([0])])
    expect(decodeText(late, 'read', '/f', true).length).toBe(8193)
    expect(fsCode(() => decodeText(late, 'edit', '/f', false))).toBe('FS_NOT_TEXT')
  })

  it('a streaming decoder joins a multibyte character cut between chunks, and refuses one cut at the end', () => {
    const euro = Buffer.from('€')
    const decoder = new TextStreamDecoder('/f')
    expect([decoder.decode(euro.subarray(0, 1)), decoder.decode(euro.subarray(1)), decoder.decode(undefined)]).toEqual(['', '€', ''])
    const cut = new TextStreamDecoder('/f')
    cut.decode(euro.subarray(0, 2))
    expect(() => cut.decode(undefined)).toThrow('cannot read "/f": invalid UTF-8 text')
  })

  it('a streaming decoder finds a NUL of the sample in a later chunk', () => {
    const decoder = new TextStreamDecoder('/f')
    decoder.decode(Buffer.alloc(8000, 0x61))
    expect(() => decoder.decode(Buffer.from([0x61, 0]))).toThrow('cannot read "/f": binary file')
    const past = new TextStreamDecoder('/f')
    past.decode(Buffer.alloc(8192, 0x61))
    expect(past.decode(Buffer.from([0x61, 0]))).toBe('a\u0000')
  })

  it('the diff basis is LF-normalized text, or null for binary and invalid UTF-8', () => {
    expect(diffBasis(Buffer.from('a\r\nb'))).toBe('a\nb')
    expect(diffBasis(Buffer.from([0]))).toBeNull()
    expect(diffBasis(Buffer.from([0xc3]))).toBeNull()
  })
})

describe('line endings and literal edits', () => {
  it('a file is CRLF when CRLF pairs outnumber lone LFs in its first 4096 characters', () => {
    expect(detectLineEndings('a\r\nb\r\nc\n')).toBe('CRLF')
    expect(detectLineEndings('a\r\nb\nc\n')).toBe('LF')
    expect(detectLineEndings(`${'x\n'.repeat(2048)}${'y\r\n'.repeat(5000)}`)).toBe('LF')
    expect(restoreLineEndings('a\nb\r\nc', 'CRLF')).toBe('a\r\nb\r\nc')
    expect(restoreLineEndings('a\nb', 'LF')).toBe('a\nb')
  })

  it('replaces one literal match; refuses none, an empty old text and several without replaceAll', () => {
    expect(applyLiteralEdit('a $1 b', '$1', '$$', false, '/f')).toEqual({ content: 'a $$ b', replacements: 1 })
    expect(applyLiteralEdit('x\ny\n', 'x\r\ny', 'z', false, '/f').content).toBe('z\n')
    expect(() => applyLiteralEdit('abc', 'd', 'e', false, '/f')).toThrow('old_string was not found in "/f"')
    expect(fsCode(() => applyLiteralEdit('abc', '', 'e', false, '/f'))).toBe('FS_EDIT_NOT_FOUND')
    expect(() => applyLiteralEdit('aXaXa', 'a', 'b', false, '/f')).toThrow('old_string matched 3 times in "/f"; provide a more specific old_string or set replace_all to true')
    expect(applyLiteralEdit('aXaXa', 'a', 'b', true, '/f')).toEqual({ content: 'bXbXb', replacements: 3 })
  })
})

describe('paths in the world', () => {
  it('joins without lexical clean-up, shows lexically, and encodes file: URIs byte by byte', () => {
    expect(rawJoin('/ws', 'link/../x')).toBe('/ws/link/../x')
    expect(rawJoin('/ws/', 'x')).toBe('/ws/x')
    expect(rawJoin('/ws', '/abs')).toBe('/abs')
    expect(displayPathOf('/ws', 'link/../x')).toBe('/ws/x')
    expect(fileUrlOf('/a b/ü#?%\n')).toBe('file:///a%20b/%C3%BC%23%3F%25%0A')
    expect(fileUrlOf("/keep-._~!$&'()*+,;=:@")).toBe("file:///keep-._~!$&'()*+,;=:@")
  })

  it('containment is by whole components', () => {
    expect(isWithin('/ws', '/ws')).toBe(true)
    expect(isWithin('/ws', '/ws/a')).toBe(true)
    expect(isWithin('/ws', '/wsx')).toBe(false)
    expect(isWithin('/', '/anything')).toBe(true)
  })
})

describe('world tools', () => {
  it('the host paths of the packaged ripgrep are recognised, on any host OS; other programs are not', () => {
    expect(isPackagedRipgrep('/app/node_modules/@vscode/ripgrep-linux-x64/bin/rg')).toBe(true)
    expect(isPackagedRipgrep('/app/node_modules/@vscode/ripgrep/bin/rg')).toBe(true)
    expect(isPackagedRipgrep('C:\\app\\node_modules\\@vscode\\ripgrep-win32-x64\\bin\\rg.exe')).toBe(true)
    expect(isPackagedRipgrep(`${process.execPath}-rg`)).toBe(true)
    expect(isPackagedRipgrep('rg')).toBe(false)
    expect(isPackagedRipgrep('/usr/bin/rg')).toBe(false)
    expect(isPackagedRipgrep('/app/node_modules/@vscode/ripgrep-linux-x64/bin/rgx')).toBe(false)
  })

  it('cache directories: XDG_CACHE_HOME, else HOME/.cache, then per-uid temp directories', () => {
    expect(cacheDirectories({ HOME: '/home/a' }, 1000)).toEqual(['/home/a/.cache/dsh-remote-worlds/tools', '/var/tmp/dsh-remote-tools-1000', '/tmp/dsh-remote-tools-1000', '/dev/shm/dsh-remote-tools-1000'])
    expect(cacheDirectories({ HOME: '/home/a', XDG_CACHE_HOME: '/c' }, 5)[0]).toBe('/c/dsh-remote-worlds/tools')
    expect(cacheDirectories({ HOME: '/' }, 0)).toEqual(['/var/tmp/dsh-remote-tools-0', '/tmp/dsh-remote-tools-0', '/dev/shm/dsh-remote-tools-0'])
  })
})
