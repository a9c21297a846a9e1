/**
 * Pure parsing of the SSH world: known_hosts matching (plain, hashed, [host]:port, wildcards,
 * negation, @revoked, @cert-authority), host-key verdicts, fingerprints, `[user@]host[:port]`
 * targets and ssh_config resolution.
 */
import { createHash, createHmac } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { InvalidArgumentError } from '../../src/providers/remote/errors.ts'
import { HostKeyChangedError, HostKeyRevokedError, UnknownHostKeyError } from '../../src/providers/ssh/errors.ts'
import {
  checkHostKey,
  entryMatches,
  fingerprintOf,
  keyTypeOf,
  knownHostsName,
  normalizeFingerprint,
  parseKnownHosts,
  preferredHostKeyAlgorithms,
} from '../../src/providers/ssh/known-hosts.ts'
import { expandPath, parseSshTarget, resolveSshTarget } from '../../src/providers/ssh/target.ts'

/** A syntactically valid key blob of `type` (the verdicts only compare bytes). */
function blob(type: string, fill: number): Buffer {
  const name = Buffer.from(type)
  const head = Buffer.alloc(4)
  head.writeUInt32BE(name.length)
  return Buffer.concat([head, name, Buffer.alloc(32, fill)])
}
const ED_A = blob('ssh-ed25519', 1)
const ED_B = blob('ssh-ed25519', 2)
const ECDSA = blob('ecdsa-sha2-nistp256', 3)
const line = (patterns: string, key: Buffer, marker = ''): string => `${marker}${marker ? ' ' : ''}${patterns} ${keyTypeOf(key)} ${key.toString('base64')}`

describe('known_hosts', () => {
  it('names hosts as OpenSSH looks them up', () => {
    expect(knownHostsName('example.org', 22)).toBe('example.org')
    expect(knownHostsName('127.0.0.1', 2222)).toBe('[127.0.0.1]:2222')
  })

  it('computes ssh-keygen style SHA256 fingerprints', () => {
    expect(fingerprintOf(ED_A)).toBe(`SHA256:${createHash('sha256').update(ED_A).digest('base64').replace(/=+$/, '')}`)
    expect(fingerprintOf(ED_A)).toMatch(/^SHA256:[A-Za-z0-9+/]{43}$/)
    expect(keyTypeOf(ED_A)).toBe('ssh-ed25519')
    expect(normalizeFingerprint(` ${fingerprintOf(ED_A)}= `)).toBe(fingerprintOf(ED_A))
    expect(() => normalizeFingerprint('MD5:aa:bb')).toThrow(TypeError)
  })

  it('parses markers, comments and skips malformed lines', () => {
    const entries = parseKnownHosts([
      '# comment',
      '',
      line('a.example,b.example', ED_A),
      line('c.example', ED_B, '@revoked'),
      line('*.example', ECDSA, '@cert-authority'),
      'broken-line-without-key',
      '@unknown-marker x ssh-ed25519 AAAA',
    ].join('\n'), 'kh')
    expect(entries.map(entry => [entry.marker, entry.patterns, entry.keyType, entry.source])).toEqual([
      [undefined, 'a.example,b.example', 'ssh-ed25519', 'kh:3'],
      ['revoked', 'c.example', 'ssh-ed25519', 'kh:4'],
      ['cert-authority', '*.example', 'ecdsa-sha2-nistp256', 'kh:5'],
    ])
    expect(entries[0]!.key.equals(ED_A)).toBe(true)
  })

  it('matches plain, bracketed, wildcard, negated and hashed patterns', () => {
    const [entry] = parseKnownHosts(line('*.example.org,!bad.example.org,[127.0.0.1]:2222,h?st', ED_A))
    expect(entryMatches(entry!, 'www.example.org')).toBe(true)
    expect(entryMatches(entry!, 'WWW.EXAMPLE.ORG')).toBe(true)
    expect(entryMatches(entry!, 'bad.example.org')).toBe(false)
    expect(entryMatches(entry!, '[127.0.0.1]:2222')).toBe(true)
    expect(entryMatches(entry!, '127.0.0.1')).toBe(false)
    expect(entryMatches(entry!, '[127.0.0.1]:2223')).toBe(false)
    expect(entryMatches(entry!, 'host')).toBe(true)
    expect(entryMatches(entry!, 'hoost')).toBe(false)
    const salt = Buffer.alloc(20, 7)
    const hashed = `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update('[10.1.2.3]:2200').digest('base64')}`
    const [hashedEntry] = parseKnownHosts(line(hashed, ED_A))
    expect(entryMatches(hashedEntry!, '[10.1.2.3]:2200')).toBe(true)
    expect(entryMatches(hashedEntry!, '10.1.2.3')).toBe(false)
  })

  it('trusts a known key, and tells unknown, changed and revoked keys apart', () => {
    const trust = { entries: parseKnownHosts([line('h1', ED_A), line('h2', ECDSA), line('h3', ED_B, '@revoked'), line('h3', ED_A)].join('\n'), 'kh'), pinned: [] }
    expect(checkHostKey(trust, 'h1', ED_A)).toBeUndefined()
    const changed = checkHostKey(trust, 'h1', ED_B)
    expect(changed).toBeInstanceOf(HostKeyChangedError)
    expect((changed as HostKeyChangedError).expected).toEqual([`${fingerprintOf(ED_A)} (kh:1)`])
    // Known only with another key type: unknown (as OpenSSH), saying which types are known.
    const otherType = checkHostKey(trust, 'h2', ED_A)
    expect(otherType).toBeInstanceOf(UnknownHostKeyError)
    expect(otherType!.message).toContain('keys of other types are known for it: ecdsa-sha2-nistp256')
    const unknown = checkHostKey(trust, 'nowhere', ED_A)
    expect(unknown).toBeInstanceOf(UnknownHostKeyError)
    expect((unknown as UnknownHostKeyError).fingerprint).toBe(fingerprintOf(ED_A))
    expect(checkHostKey(trust, 'h3', ED_B)).toBeInstanceOf(HostKeyRevokedError)
    expect(checkHostKey(trust, 'h3', ED_A)).toBeUndefined()
  })

  it('checks only the pinned fingerprints when some are pinned', () => {
    const trust = { entries: parseKnownHosts(line('h1', ED_A)), pinned: [fingerprintOf(ED_B)] }
    expect(checkHostKey(trust, 'h1', ED_B)).toBeUndefined()
    const error = checkHostKey(trust, 'h1', ED_A)
    expect(error).toBeInstanceOf(HostKeyChangedError)
    expect((error as HostKeyChangedError).expected).toEqual([fingerprintOf(ED_B)])
  })

  it('prefers the host-key algorithms of the key types known for the host', () => {
    const trust = { entries: parseKnownHosts([line('h1', ECDSA), line('h1', blob('ssh-rsa', 4)), line('h2', ED_A)].join('\n')), pinned: [] }
    expect(preferredHostKeyAlgorithms(trust, 'h1')).toEqual(['ecdsa-sha2-nistp256', 'rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'])
    expect(preferredHostKeyAlgorithms(trust, 'h3')).toEqual([])
  })
})

describe('targets', () => {
  it('parses [user@]host[:port], bracketed and bare IPv6', () => {
    expect(parseSshTarget('example.org')).toEqual({ user: undefined, host: 'example.org', port: undefined })
    expect(parseSshTarget('me@example.org:2222')).toEqual({ user: 'me', host: 'example.org', port: 2222 })
    expect(parseSshTarget('me@[::1]:2222')).toEqual({ user: 'me', host: '::1', port: 2222 })
    expect(parseSshTarget('fe80::1')).toEqual({ user: undefined, host: 'fe80::1', port: undefined })
    expect(parseSshTarget('a@b@host')).toEqual({ user: 'a@b', host: 'host', port: undefined })
    for (const bad of ['@host', 'host:0', 'host:70000', 'host:x', 'me@', '[::1']) expect(() => parseSshTarget(bad), bad).toThrow(InvalidArgumentError)
  })

  it('resolves Host aliases through ssh_config: HostName, User, Port, IdentityFile, ProxyJump, UserKnownHostsFile', () => {
    const configText = [
      'Host box',
      '  HostName 10.0.0.5',
      '  User deploy',
      '  Port 2200',
      '  IdentityFile ~/.ssh/box_key',
      '  IdentityFile %d/keys/%r@%h',
      '  ProxyJump jumper',
      'Host jumper',
      '  HostName jump.example.org',
      '  User hop',
      'Host *',
      '  UserKnownHostsFile ~/.ssh/kh1 ~/.ssh/kh2',
    ].join('\n')
    const resolved = resolveSshTarget(parseSshTarget('box'), { configText, home: '/home/me', localUser: 'me' })
    expect(resolved).toMatchObject({
      alias: 'box', host: '10.0.0.5', port: 2200, user: 'deploy',
      identityFiles: ['/home/me/.ssh/box_key', '/home/me/keys/deploy@10.0.0.5'],
      knownHostsFiles: ['/home/me/.ssh/kh1', '/home/me/.ssh/kh2'],
    })
    expect(resolved.jumps.map(jump => [jump.host, jump.port, jump.user])).toEqual([['jump.example.org', 22, 'hop']])
    // The target's own user and port win over the config file.
    expect(resolveSshTarget(parseSshTarget('root@box:22'), { configText, home: '/home/me', localUser: 'me' })).toMatchObject({ host: '10.0.0.5', port: 22, user: 'root' })
    // No config: the local user and port 22.
    expect(resolveSshTarget(parseSshTarget('plain'), { home: '/home/me', localUser: 'me' })).toEqual({ alias: 'plain', host: 'plain', port: 22, user: 'me', identityFiles: [], knownHostsFiles: undefined, jumps: [] })
    expect(resolveSshTarget(parseSshTarget('box'), { configText, home: '/home/me', localUser: 'me', proxyJump: 'none' }).jumps).toEqual([])
  })

  it('refuses a ProxyJump loop', () => {
    const configText = 'Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n'
    expect(() => resolveSshTarget(parseSshTarget('a'), { configText, home: '/h', localUser: 'me' })).toThrow(InvalidArgumentError)
  })

  it('expands ssh_config tokens in file names', () => {
    const facts = { home: '/home/me', localUser: 'me', host: 'h.example', user: 'deploy', port: 2200, alias: 'box' }
    expect(expandPath('~/x/%n-%h-%p-%r-%u-%%', facts)).toBe('/home/me/x/box-h.example-2200-deploy-me-%')
    expect(expandPath('~', facts)).toBe('/home/me')
  })
})
