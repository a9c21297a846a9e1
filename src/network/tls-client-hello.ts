/**
 * The name a TLS client asks for, read from its first flight: the server_name extension
 * (RFC 6066 §3) of its ClientHello (RFC 8446 §4.1.2; the same layout in TLS 1.0 to 1.2,
 * RFC 5246 §7.4.1.2). The client uses it to judge a tunnel opened to an address by the name the
 * world's program meant. Pure; reads bytes only, decrypts nothing (a ClientHello is plaintext;
 * Encrypted Client Hello keeps the real name in an encrypted extension, and this reads only the
 * outer, public one).
 *
 * Layout read (all integers big-endian):
 * - record: u8 content type (22 handshake), u16 legacy version (0x03xx), u16 length, fragment;
 * - handshake: u8 type (1 client_hello), u24 length, body, possibly split over several records;
 * - body: u16 legacy_version, 32 bytes random, u8-length session id (≤ 32),
 *   u16-length cipher suites (even, ≥ 2), u8-length compression methods (≥ 1),
 *   then optionally u16-length extensions, each u16 type, u16 length, data;
 * - server_name (type 0): u16-length list of (u8 name type, u16-length name); type 0 is host_name.
 * @module dsh-remote-worlds/network/tls-client-hello
 */
import { normalizeHostName } from './names.ts'

/** The longest ClientHello read (bytes of the handshake message, its 4-byte header included). */
export const MAX_CLIENT_HELLO_BYTES = 64 * 1024

/**
 * The longest record fragment taken (bytes): 2^14 plaintext (RFC 8446 §5.1) and 2048 of room,
 * as the TLSCiphertext bound, so a lenient client is not refused.
 */
const MAX_RECORD_FRAGMENT = (1 << 14) + 2048

/** What {@link readServerName} found. */
export type ClientHelloName =
  /** A prefix of a ClientHello: read more. */
  | { kind: 'incomplete' }
  /** Not a TLS ClientHello, a malformed one, one over {@link MAX_CLIENT_HELLO_BYTES}, or a host_name that is not a DNS name. */
  | { kind: 'not-tls' }
  /** A whole ClientHello; `serverName` is its host_name (lower case, no trailing dot), undefined when it sent none. */
  | { kind: 'hello'; serverName: string | undefined }

/**
 * Read the server name of the ClientHello that `bytes` starts with.
 * @param bytes - the first bytes the client sent on the connection (more than the hello is fine).
 * @returns 'incomplete' while what is there could still become a ClientHello; 'not-tls' as soon
 *   as it cannot (the first byte is not 22, a record is not a handshake record, the handshake is
 *   not a client_hello, a length runs past its container, an SNI host_name is not a host name,
 *   RFC 6066 §3's "literal IPv4 and IPv6 addresses are not permitted" included); else 'hello'.
 *   Never throws.
 */
export function readServerName(bytes: Buffer): ClientHelloName {
  try {
    return read(bytes)
  } catch {
    return NOT_TLS
  }
}

const NOT_TLS: ClientHelloName = { kind: 'not-tls' }
const INCOMPLETE: ClientHelloName = { kind: 'incomplete' }

function read(bytes: Buffer): ClientHelloName {
  const fragments: Buffer[] = []
  let handshakeBytes = 0
  let needed: number | undefined // the whole handshake message's length, once its header is in
  let offset = 0
  while (needed === undefined || handshakeBytes < needed) {
    if (offset >= bytes.length) return INCOMPLETE
    if (bytes[offset] !== 22) return NOT_TLS
    if (offset + 1 < bytes.length && bytes[offset + 1] !== 3) return NOT_TLS
    if (offset + 5 > bytes.length) return INCOMPLETE
    const length = bytes.readUInt16BE(offset + 3)
    if (length === 0 || length > MAX_RECORD_FRAGMENT) return NOT_TLS // RFC 8446 §5.1: no empty handshake fragments
    const fragment = bytes.subarray(offset + 5, offset + 5 + length)
    fragments.push(fragment)
    handshakeBytes += fragment.length
    if (needed === undefined) {
      const head = Buffer.concat(fragments)
      if (head.length >= 1 && head[0] !== 1) return NOT_TLS
      if (head.length >= 4) {
        needed = 4 + head.readUIntBE(1, 3)
        if (needed > MAX_CLIENT_HELLO_BYTES) return NOT_TLS
      }
    }
    if (fragment.length < length) return handshakeBytes >= (needed ?? Infinity) ? parseHello(Buffer.concat(fragments).subarray(4, needed)) : INCOMPLETE
    offset += 5 + length
  }
  return parseHello(Buffer.concat(fragments).subarray(4, needed))
}

/** The ClientHello body (after the handshake header). */
function parseHello(body: Buffer): ClientHelloName {
  const reader = new Reader(body)
  reader.skip(2 + 32) // legacy_version, random
  const sessionId = reader.u8()
  if (sessionId > 32) return NOT_TLS
  reader.skip(sessionId)
  const suites = reader.u16()
  if (suites < 2 || suites % 2 !== 0) return NOT_TLS
  reader.skip(suites)
  const compression = reader.u8()
  if (compression < 1) return NOT_TLS
  reader.skip(compression)
  if (reader.done()) return { kind: 'hello', serverName: undefined } // no extensions (SSL 3.0 style)
  const extensions = new Reader(reader.take(reader.u16()))
  if (!reader.done()) return NOT_TLS
  let serverName: string | undefined
  const seen = new Set<number>()
  while (!extensions.done()) {
    const type = extensions.u16()
    const data = extensions.take(extensions.u16())
    if (seen.has(type)) return NOT_TLS // RFC 8446 §4.2: no two extensions of one type
    seen.add(type)
    if (type !== 0) continue
    const list = new Reader(new Reader(data).takeAll16())
    while (!list.done()) {
      const nameType = list.u8()
      const name = list.take(list.u16())
      if (nameType !== 0) continue
      if (serverName !== undefined) return NOT_TLS // RFC 6066 §3: at most one name of a type
      if (!name.every(byte => byte > 0x20 && byte < 0x7f)) return NOT_TLS
      const canonical = normalizeHostName(name.toString('latin1'))
      if (canonical === undefined) return NOT_TLS
      serverName = canonical
    }
  }
  return { kind: 'hello', serverName }
}

/** Reads a buffer front to back; every read past the end throws RangeError (caught as 'not-tls'). */
class Reader {
  private at = 0

  constructor(private readonly bytes: Buffer) {}

  done(): boolean {
    return this.at === this.bytes.length
  }

  u8(): number {
    return this.take(1)[0]!
  }

  u16(): number {
    return this.take(2).readUInt16BE(0)
  }

  skip(length: number): void {
    this.take(length)
  }

  take(length: number): Buffer {
    if (this.at + length > this.bytes.length) throw new RangeError(`${length} bytes at ${this.at} of ${this.bytes.length}`)
    const out = this.bytes.subarray(this.at, this.at + length)
    this.at += length
    return out
  }

  /** A u16-length vector that must fill the rest of the buffer exactly. */
  takeAll16(): Buffer {
    const out = this.take(this.u16())
    if (!this.done()) throw new RangeError('bytes after the vector')
    return out
  }
}
