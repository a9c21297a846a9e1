/**
 * Host-key trust: OpenSSH `known_hosts` files (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT": plain and
 * hashed `|1|salt|hash` host patterns, `[host]:port`, wildcards, negation, `@revoked`) or pinned
 * `SHA256:` fingerprints. There is no trust-on-first-use: an unknown key is an error naming its
 * fingerprint.
 * @module dsh-remote-worlds/providers/ssh/known-hosts
 */
import { createHash, createHmac } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import type { RemoteWorldError } from '../remote/errors.ts'
import { HostKeyChangedError, HostKeyRevokedError, UnknownHostKeyError } from './errors.ts'

/** One key line of a known_hosts file. */
export interface KnownHostEntry {
  /** `@revoked` lines deny the key; `@cert-authority` lines are kept but never match (no host certificates). */
  marker: 'revoked' | 'cert-authority' | undefined
  /** The host-pattern field as written (comma-separated patterns, or one hashed `|1|...`). */
  patterns: string
  /** Key type as written, e.g. `ssh-ed25519`. */
  keyType: string
  /** The public key blob (SSH wire format). */
  key: Buffer
  /** `file:line`, for messages. */
  source: string
}

/** Where trust comes from. */
export interface HostKeyTrust {
  /** Parsed known_hosts entries (all files concatenated, in order). */
  entries: readonly KnownHostEntry[]
  /** Pinned fingerprints (`SHA256:<base64, unpadded>`); when non-empty, known_hosts is not consulted. */
  pinned: readonly string[]
}

/** `SHA256:<base64 without padding>` of a key blob, as `ssh-keygen -l` prints it. */
export function fingerprintOf(key: Buffer): string {
  return `SHA256:${createHash('sha256').update(key).digest('base64').replace(/=+$/, '')}`
}

/** The key type named inside an SSH public key blob (its first string). */
export function keyTypeOf(key: Buffer): string {
  if (key.length < 4) return 'unknown'
  const length = key.readUInt32BE(0)
  return length > 0 && 4 + length <= key.length ? key.subarray(4, 4 + length).toString('latin1') : 'unknown'
}

/** The name OpenSSH looks a host up by: `host` on port 22, `[host]:port` otherwise. */
export function knownHostsName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`
}

/**
 * Parse known_hosts text. Comments, blank lines and malformed lines are skipped.
 * @param source - file name for `source` fields.
 */
export function parseKnownHosts(text: string, source = 'known_hosts'): KnownHostEntry[] {
  const entries: KnownHostEntry[] = []
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim()
    if (line.length === 0 || line.startsWith('#')) return
    const fields = line.split(/\s+/)
    let marker: KnownHostEntry['marker']
    if (fields[0]?.startsWith('@')) {
      const name = fields.shift()!
      if (name === '@revoked') marker = 'revoked'
      else if (name === '@cert-authority') marker = 'cert-authority'
      else return
    }
    const [patterns, keyType, base64] = fields
    if (patterns === undefined || keyType === undefined || base64 === undefined || !/^[A-Za-z0-9+/]+={0,2}$/.test(base64)) return
    entries.push({ marker, patterns, keyType, key: Buffer.from(base64, 'base64'), source: `${source}:${index + 1}` })
  })
  return entries
}

/**
 * Read and parse known_hosts files; missing files count as empty.
 * @throws the read error for anything but a missing file.
 */
export async function readKnownHosts(files: readonly string[]): Promise<KnownHostEntry[]> {
  const entries: KnownHostEntry[] = []
  for (const file of files) {
    let text: string
    try {
      text = await readFile(file, 'utf8')
    } catch (error) {
      if ((error as { code?: string }).code === 'ENOENT') continue
      throw error
    }
    entries.push(...parseKnownHosts(text, file))
  }
  return entries
}

/** OpenSSH's `match_pattern`: `*` and `?` wildcards, case-insensitive for host names. */
function globMatch(name: string, pattern: string): boolean {
  const regex = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replaceAll('*', '.*').replaceAll('?', '.')}$`, 'i')
  return regex.test(name)
}

/** True when the entry's host patterns select `name` (a `known_hostsName`). */
export function entryMatches(entry: KnownHostEntry, name: string): boolean {
  const field = entry.patterns
  if (field.startsWith('|1|')) {
    const [, , salt, hash] = field.split('|')
    if (salt === undefined || hash === undefined) return false
    return createHmac('sha1', Buffer.from(salt, 'base64')).update(name).digest('base64') === hash
  }
  let matched = false
  for (const pattern of field.split(',')) {
    if (pattern.startsWith('!')) {
      if (globMatch(name, pattern.slice(1))) return false
    } else if (globMatch(name, pattern)) {
      matched = true
    }
  }
  return matched
}

/** Host-key algorithm names that verify keys of one known_hosts key type. */
function algorithmsFor(keyType: string): string[] {
  return keyType === 'ssh-rsa' ? ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'] : [keyType]
}

/** The host-key algorithms ssh2 can negotiate (its supported list minus DSA). */
const NEGOTIABLE = new Set(['ssh-ed25519', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521', 'rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'])

/**
 * Host-key algorithms to prefer for `name`: those of the key types known for it, so the server
 * presents a key that can be checked (OpenSSH orders them the same way). Empty when nothing is known.
 */
export function preferredHostKeyAlgorithms(trust: HostKeyTrust, name: string): string[] {
  const preferred: string[] = []
  for (const entry of trust.entries) {
    if (entry.marker !== undefined || !entryMatches(entry, name)) continue
    for (const algorithm of algorithmsFor(entry.keyType)) if (NEGOTIABLE.has(algorithm) && !preferred.includes(algorithm)) preferred.push(algorithm)
  }
  return preferred
}

/**
 * Decide whether `key`, presented by the server, is trusted for `name`.
 * @returns undefined when trusted, else the typed error to fail the connection with.
 */
export function checkHostKey(trust: HostKeyTrust, name: string, key: Buffer): RemoteWorldError | undefined {
  const fingerprint = fingerprintOf(key)
  const keyType = keyTypeOf(key)
  if (trust.pinned.length > 0) {
    return trust.pinned.includes(fingerprint) ? undefined : new HostKeyChangedError(name, keyType, fingerprint, trust.pinned)
  }
  const matching = trust.entries.filter(entry => entry.marker !== 'cert-authority' && entryMatches(entry, name))
  if (matching.some(entry => entry.marker === 'revoked' && entry.key.equals(key))) return new HostKeyRevokedError(name, fingerprint)
  const known = matching.filter(entry => entry.marker === undefined)
  if (known.some(entry => entry.key.equals(key))) return undefined
  const sameType = known.filter(entry => keyTypeOf(entry.key) === keyType)
  if (sameType.length > 0) return new HostKeyChangedError(name, keyType, fingerprint, sameType.map(entry => `${fingerprintOf(entry.key)} (${entry.source})`))
  const otherTypes = [...new Set(known.map(entry => keyTypeOf(entry.key)))]
  return new UnknownHostKeyError(name, keyType, fingerprint, otherTypes.length > 0 ? ` (keys of other types are known for it: ${otherTypes.join(', ')})` : '')
}

/**
 * Normalise a pinned fingerprint: accepts `SHA256:abc...` with or without base64 padding.
 * @throws TypeError for anything else (MD5 fingerprints are not accepted).
 */
export function normalizeFingerprint(value: string): string {
  const match = /^SHA256:([A-Za-z0-9+/]{43})=?$/.exec(value.trim())
  if (match === null) throw new TypeError(`not a SHA256 host-key fingerprint (expected SHA256: and 43 base64 characters): ${JSON.stringify(value)}`)
  return `SHA256:${match[1]}`
}
