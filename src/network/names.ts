/**
 * Host names and IP literals as the egress policy compares them: one canonical spelling of each,
 * so a rule and a target written differently (`Example.COM.` and `example.com`, `::FFFF:10.0.0.1`
 * and `10.0.0.1`, `fd00:0::1` and `fd00::1`) are the same thing. Pure; no lookups.
 *
 * The lowest floor of src/network/: rules.ts, resolve.ts and http-proxy-request.ts import it,
 * it imports nothing of theirs.
 * @module dsh-remote-worlds/network/names
 */
import { isIPv4, isIPv6 } from 'node:net'

/** The longest host name (RFC 1035 §2.3.4: 255 octets on the wire, 253 characters written). */
export const MAX_HOST_NAME_LENGTH = 253

/** An IP address in bytes and in its canonical text. */
export interface IpAddress {
  /** 4 for IPv4 (also for an IPv4-mapped IPv6 address, `::ffff:a.b.c.d`), 6 for IPv6. */
  family: 4 | 6
  /** Canonical text: dotted quad for IPv4, RFC 5952 for IPv6 (lower case, longest zero run as `::`). No brackets. */
  address: string
  /** 4 or 16 bytes, network order. */
  bytes: Uint8Array
}

/** One DNS label: letters, digits, hyphens (not first or last), and `_` (service labels such as `_acme`), 1 to 63 characters. */
const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/

/**
 * The canonical spelling of a host name, or undefined when `text` is not one.
 * Lower-cased, one trailing dot dropped; every label must be {@link LABEL}, the whole at most
 * {@link MAX_HOST_NAME_LENGTH} characters, and the last label not all digits (RFC 3696 §2: no
 * top-level domain is numeric, so `10.1` or `1.2.3` is never taken for a name, nor for an
 * address: Node's net.isIPv4 accepts only the dotted quad). IP literals are not names: see
 * {@link parseIpAddress}. No IDN conversion: callers that take user text convert it first.
 */
export function normalizeHostName(text: string): string | undefined {
  const name = (text.endsWith('.') ? text.slice(0, -1) : text).toLowerCase()
  if (name.length === 0 || name.length > MAX_HOST_NAME_LENGTH) return undefined
  const labels = name.split('.')
  if (!labels.every(label => LABEL.test(label))) return undefined
  if (/^[0-9]+$/.test(labels[labels.length - 1]!)) return undefined
  return name
}

/**
 * An IP literal (no brackets, no zone, no prefix length), or undefined when `text` is not one.
 * IPv4 only as the dotted quad of decimal numbers (net.isIPv4: `010.0.0.1` and `10.1` are not
 * addresses). An IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, RFC 4291 §2.5.5.2) is returned as
 * the IPv4 address it carries: a socket dialled to it reaches that IPv4 host.
 */
export function parseIpAddress(text: string): IpAddress | undefined {
  if (isIPv4(text)) {
    const bytes = Uint8Array.from(text.split('.').map(Number))
    return { family: 4, address: formatIpv4(bytes), bytes }
  }
  if (text.includes('%') || !isIPv6(text)) return undefined
  const bytes = ipv6Bytes(text)
  if (bytes === undefined) return undefined
  if (isIpv4Mapped(bytes)) {
    const v4 = bytes.slice(12)
    return { family: 4, address: formatIpv4(v4), bytes: v4 }
  }
  return { family: 6, address: formatIpv6(bytes), bytes }
}

/** Whether 16 bytes are an IPv4-mapped IPv6 address (`::ffff:0:0/96`). */
export function isIpv4Mapped(bytes: Uint8Array): boolean {
  return bytes.length === 16 && bytes.subarray(0, 10).every(byte => byte === 0) && bytes[10] === 0xff && bytes[11] === 0xff
}

/** `host:port`, with an IPv6 address bracketed (`[fd00::1]:443`). */
export function formatAuthority(host: string, port: number): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`
}

/** A decimal TCP port, 1 to 65535, written with digits only and no leading zero; undefined otherwise. */
export function parsePort(text: string): number | undefined {
  if (!/^[1-9][0-9]{0,4}$/.test(text)) return undefined
  const port = Number(text)
  return port <= 65535 ? port : undefined
}

/** The canonical dotted quad of 4 bytes. */
function formatIpv4(bytes: Uint8Array): string {
  return [...bytes].join('.')
}

/** RFC 5952 §4: lower-case hex without leading zeros, the longest run of two or more zero words (the first of equals) as `::`. */
function formatIpv6(bytes: Uint8Array): string {
  const words: number[] = []
  for (let i = 0; i < 16; i += 2) words.push((bytes[i]! << 8) | bytes[i + 1]!)
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < 8;) {
    if (words[i] !== 0) { i++; continue }
    let j = i
    while (j < 8 && words[j] === 0) j++
    if (j - i > bestLength) { bestStart = i; bestLength = j - i }
    i = j
  }
  const hex = words.map(word => word.toString(16))
  if (bestStart < 0) return hex.join(':')
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`
}

/** The 16 bytes of an IPv6 text net.isIPv6 accepted (with an optional dotted-quad tail). */
function ipv6Bytes(text: string): Uint8Array | undefined {
  let body = text
  const tail: number[] = []
  const lastColon = body.lastIndexOf(':')
  if (body.slice(lastColon + 1).includes('.')) {
    const quad = body.slice(lastColon + 1)
    if (!isIPv4(quad)) return undefined
    const [a, b, c, d] = quad.split('.').map(Number) as [number, number, number, number]
    tail.push((a << 8) | b, (c << 8) | d)
    body = body.slice(0, lastColon + 1)
    // `::1.2.3.4` leaves `::`, `64:ff9b::1.2.3.4` leaves `64:ff9b::`, `1:2:3:4:5:6:1.2.3.4` leaves `1:2:3:4:5:6:`.
    if (body.endsWith(':') && !body.endsWith('::')) body = body.slice(0, -1)
  }
  const parseWords = (part: string): number[] => part === '' ? [] : part.split(':').map(word => parseInt(word, 16))
  const gap = body.indexOf('::')
  let words: number[]
  if (gap >= 0) {
    const left = parseWords(body.slice(0, gap))
    const right = [...parseWords(body.slice(gap + 2)), ...tail]
    const zeros = 8 - left.length - right.length
    if (zeros < 1) return undefined
    words = [...left, ...new Array<number>(zeros).fill(0), ...right]
  } else {
    words = [...parseWords(body), ...tail]
  }
  if (words.length !== 8 || words.some(word => !Number.isInteger(word) || word < 0 || word > 0xffff)) return undefined
  const bytes = new Uint8Array(16)
  words.forEach((word, i) => { bytes[2 * i] = word >> 8; bytes[2 * i + 1] = word & 0xff })
  return bytes
}
