/**
 * The pure parts of held shells (issue 22): the CLI's --persist/--session rule, a holder's
 * description as control.sh lists it, the replay a client shows first, the key a spawn spec names
 * a held shell by, and the attach frames as dsh-pty reads and writes them.
 */
import { describe, expect, it } from 'vitest'
import { checkSessionName, persistenceFlag } from '../../src/cli/target.ts'
import { InvalidSessionNameError } from '../../src/providers/remote/errors.ts'
import { heldShellKey, replayOf } from '../../src/providers/remote/pty-holder/held-adoption.ts'
import { parseHeldMeta } from '../../src/providers/remote/pty-holder/held-shell.ts'
import { HolderFrameReader, attachFrame, holdFrame, inputAtFrames } from '../../src/providers/remote/pty-holder/protocol.ts'
import { persistenceChoice } from '../../src/providers/remote/pty-holder/persistence.ts'

describe('--persist and --session', () => {
  it('absent: the world\'s default (undefined); off is given as off; client needs a session; a session needs client; other modes are refused by name', () => {
    expect(persistenceFlag({})).toBeUndefined()
    expect(persistenceFlag({ persist: 'off' })).toBe('off')
    expect(persistenceFlag({ persist: 'connection' })).toBe('connection')
    expect(persistenceFlag({ persist: 'client', session: 'nightly' })).toBe('client')
    expect(() => persistenceFlag({ persist: 'client' })).toThrow('--persist client needs --session NAME: the name a later run takes the shells back by')
    expect(() => persistenceFlag({ session: 'nightly' })).toThrow('--session names the session a later run takes the shells back by: it needs --persist client')
    expect(() => persistenceFlag({ persist: 'always' })).toThrow('--persist takes off, connection or client, got "always"')
  })

  it('a session name is one or more characters that show on one line: spaces and any script pass; control characters, separators and lone surrogates are refused, shown as \\u{HEX}', () => {
    for (const name of ['nightly', ' a b ', 'ночь-1', '夜', 'a"b\\c', '🙂']) expect(checkSessionName(name)).toBe(name)
    const refusal = (name: string): unknown => { try { checkSessionName(name) } catch (error) { return error } }
    for (const [name, shown] of [['', ''], ['a\tb', 'a\\u{0009}b'], ['a\u007fb', 'a\\u{007F}b'], ['a\u0085b', 'a\\u{0085}b'], ['a\u2028b', 'a\\u{2028}b'], ['a\u2029', 'a\\u{2029}'], ['a\ud800', 'a\\u{D800}']] as const) {
      const error = refusal(name)
      expect(error).toBeInstanceOf(InvalidSessionNameError)
      expect((error as InvalidSessionNameError).code).toBe('INVALID_SESSION_NAME')
      expect((error as Error).message.startsWith(`--session "${shown}" cannot be shown on one line: a session name is one or more characters,`)).toBe(true)
    }
    expect(() => persistenceFlag({ persist: 'client', session: 'a\nb' })).toThrow(InvalidSessionNameError)
  })

  it('the runtime setting takes a mode or an object, with the defaults of 8 MiB, 24 h and 60 s; absent, the mode is connection, marked as the default (issue 33)', () => {
    expect(persistenceChoice('connection')).toEqual({ mode: 'connection', defaulted: false, logBytes: 8 * 1024 * 1024, ttlMs: 86_400_000, reconnectDeadlineMs: 60_000, stateDir: undefined })
    expect(persistenceChoice({ mode: 'client', logBytes: 65_536, ttlMs: 5_000, stateDir: '/s' })).toEqual({ mode: 'client', defaulted: false, logBytes: 65_536, ttlMs: 5_000, reconnectDeadlineMs: 60_000, stateDir: '/s' })
    expect(persistenceChoice(undefined)).toEqual({ mode: 'connection', defaulted: true, logBytes: 8 * 1024 * 1024, ttlMs: 86_400_000, reconnectDeadlineMs: 60_000, stateDir: undefined })
    expect(persistenceChoice('off')).toMatchObject({ mode: 'off', defaulted: false })
  })
})

describe('a holder\'s description (hold.c write_meta, as control.sh held lists it)', () => {
  const hex = (text: string): string => Buffer.from(text).toString('hex')
  const id = '0123456789abcdef0123456789abcdef'

  it('parses every field; free text is hex', () => {
    const line = `id=${id} dsh-held 1 holder=81 start=6123 shell=82 owner=${'a'.repeat(32)} created=1796000000 ttl=86400 detached=1796000100 controller=- ended=0:7 log=0:5120 key=${hex('k1')} label=${hex('{"session":"s1"}')}`
    expect(parseHeldMeta(line)).toEqual({
      id, holder: 81, holderStart: 6123, shell: 82, owner: 'a'.repeat(32), created: 1796000000, detached: 1796000100, ttl: 86400,
      controller: undefined, ended: { kind: 0, code: 7 }, log: { tail: 0, head: 5120 }, key: 'k1', label: '{"session":"s1"}',
    })
  })

  it('a controller and a running shell', () => {
    const parsed = parseHeldMeta(`id=${id} dsh-held 1 holder=9 start=1 shell=10 owner=o created=1 ttl=0 detached=0 controller=${'b'.repeat(32)} ended=- log=10:20 key= label=`)
    expect(parsed?.controller).toBe('b'.repeat(32))
    expect(parsed?.ended).toBeUndefined()
  })

  it('refuses what is not one', () => {
    expect(parseHeldMeta('id=xyz dsh-held 1 holder=1 start=1')).toBeUndefined()
    expect(parseHeldMeta(`id=${id} something else`)).toBeUndefined()
  })
})

describe('the replay a client that takes a shell back shows first', () => {
  const marker = '\x1b]133;D;0\x07'
  it('starts after the start wrapper\'s boundary marker', () => {
    const log = Buffer.from(`\r\nDSHB${'c'.repeat(32)}:pid:80,6123\r\nhello\r\n${marker}dsh> `)
    expect(replayOf(log, false, true).toString()).toBe(`hello\r\n${marker}dsh> `)
  })

  it('a log cut at its bound starts at its first full line', () => {
    expect(replayOf(Buffer.from(`ial line\r\nfull line\r\n${marker}dsh> `), false, true).toString()).toBe(`full line\r\n${marker}dsh> `)
    expect(replayOf(Buffer.from(`whole\r\n${marker}dsh> `), false, false).toString()).toBe(`whole\r\n${marker}dsh> `)
  })

  it('a busy shell\'s replay stops short of its last prompt marker', () => {
    const log = Buffer.from(`a\r\n${marker}dsh> make\r\nbuilding 1\r\nbuilding 2\r\n`)
    expect(replayOf(log, true, false).toString()).toBe('dsh> make\r\nbuilding 1\r\nbuilding 2\r\n')
  })
})

describe('the key a spawn spec names a held shell by', () => {
  const spec = { argv: ['/bin/bash', '-i'], cwd: '/w', env: { DSH_SESSION_ID: 's1', DSH_PTY_SESSION_ID: '1', PS1: 'dsh> ' }, rows: 40, cols: 160, graceMs: 3000 }
  it('ignores the per-process terminal number, the size; names the session, argv, cwd, env and sandbox mode', () => {
    const key = heldShellKey(spec, 'workspace-write')
    expect(key).toMatch(/^[0-9a-f]{64}$/)
    expect(heldShellKey({ ...spec, rows: 24, env: { ...spec.env, DSH_PTY_SESSION_ID: '7' } }, 'workspace-write')).toBe(key)
    expect(heldShellKey(spec, 'read-only')).not.toBe(key)
    expect(heldShellKey({ ...spec, cwd: '/x' }, 'workspace-write')).not.toBe(key)
    expect(heldShellKey({ ...spec, argv: ['bwrap', '--', '/bin/bash', '-i'] }, 'workspace-write')).not.toBe(key)
    expect(heldShellKey({ ...spec, env: { ...spec.env, PS1: '$ ' } }, 'workspace-write')).not.toBe(key)
  })

  it('names the locale the shell gets from the world, and no other world variable', () => {
    const key = heldShellKey(spec, 'workspace-write', { LANG: 'C.UTF-8', HOME: '/home/agent' })
    expect(heldShellKey(spec, 'workspace-write', { LANG: 'C.UTF-8', HOME: '/home/agent', SSH_CONNECTION: '127.0.0.1 50123 127.0.0.1 22' })).toBe(key)
    expect(heldShellKey(spec, 'workspace-write', { LANG: 'C', HOME: '/home/agent' })).not.toBe(key)
    expect(heldShellKey(spec, 'workspace-write', { LANG: 'C.UTF-8', LC_ALL: 'C', HOME: '/home/agent' })).not.toBe(key)
  })

  it('a spec without a DSH session id names none', () => {
    expect(heldShellKey({ ...spec, env: { PS1: 'dsh> ' } }, undefined)).toBeUndefined()
  })
})

describe('held-shell frames', () => {
  it('an attach carries the secret, takeover, an offset or a count back from the head, credit and the controller id', () => {
    const secret = Buffer.alloc(32, 7)
    const at = attachFrame(secret, true, 1234, 65536, 'c1')
    expect(at[0]).toBe('A'.charCodeAt(0))
    const payload = at.subarray(5)
    expect(payload.subarray(0, 32)).toEqual(secret)
    expect(payload[32]).toBe(1)
    expect(payload.readBigUInt64LE(33)).toBe(1234n)
    expect(payload.readUInt32LE(41)).toBe(65536)
    expect(payload.readUInt16LE(45)).toBe(2)
    expect(payload.subarray(47).toString()).toBe('c1')
    expect(attachFrame(secret, false, { fromHead: 100 }, 0, '').subarray(5).readBigUInt64LE(33)).toBe((1n << 63n) | 100n)
  })

  it('a hold frame carries the stem and nothing else; an empty stem or one over 4095 bytes is refused', () => {
    const stem = '/tmp/dsh-remote-held-1000/0123456789abcdef0123456789abcdef'
    expect(holdFrame(stem)).toEqual(Buffer.concat([Buffer.from([0x57, stem.length, 0, 0, 0]), Buffer.from(stem)]))
    expect(() => holdFrame('')).toThrow(RangeError)
    expect(() => holdFrame('x'.repeat(4096))).toThrow(RangeError)
    expect(holdFrame('x'.repeat(4095)).length).toBe(5 + 4095)
  })

  it('input frames carry the offset of their first byte, split at the frame bound', () => {
    const data = Buffer.alloc((1 << 20) + 10, 'x')
    const frames = inputAtFrames(500, data)
    const first = frames.readUInt32LE(1)
    expect(frames[0]).toBe('J'.charCodeAt(0))
    expect(frames.readBigUInt64LE(5)).toBe(500n)
    expect(frames[5 + first]).toBe('J'.charCodeAt(0))
    expect(frames.readBigUInt64LE(5 + first + 5)).toBe(BigInt(500 + first - 8))
  })

  it('an attach reply reads as the holder writes it', () => {
    const payload = Buffer.alloc(53)
    payload[0] = 1
    payload.writeUInt32LE(81, 1)
    payload.writeUInt32LE(82, 5)
    payload.writeBigUInt64LE(10n, 9)
    payload.writeBigUInt64LE(5000n, 17)
    payload.writeBigUInt64LE(4000n, 25)
    payload.writeBigUInt64LE(33n, 33)
    payload[41] = 1
    payload[42] = 1
    payload[43] = 9
    payload.writeBigUInt64LE(6123n, 45)
    const text = Buffer.from('boot-1 4026531836 ctl')
    const header = Buffer.alloc(5)
    header[0] = 'a'.charCodeAt(0)
    header.writeUInt32LE(payload.length + text.length, 1)
    const [frame] = new HolderFrameReader().push(Buffer.concat([header, payload, text]))
    expect(frame).toEqual({ type: 'attached', status: 'busy', holder: 81, shell: 82, tail: 10, head: 5000, start: 4000, accepted: 33, ended: { code: null, signal: 9 }, holderStart: 6123, bootId: 'boot-1', pidNamespace: '4026531836', controller: 'ctl' })
  })
})
