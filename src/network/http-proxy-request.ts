/**
 * The first request on a connection to the world's HTTP proxy port, as the client reads it
 * (RFC 9110 §9.3.6 CONNECT, RFC 9112 §3.2 request targets), and the few responses the client
 * writes back itself. Pure; no sockets.
 *
 * Two kinds of request are taken: `CONNECT host:port` (a tunnel: HTTPS, SSH, any TCP; the
 * client answers {@link proxyConnected} and relays bytes), and any other method with an
 * absolute-form `http://host[:port]/path` target (plain HTTP: the client dials host:port and
 * sends the head rewritten to origin-form, then relays the rest). `https://` in absolute form is
 * refused with 501: clients tunnel TLS with CONNECT, and the client here never terminates TLS.
 *
 * Only the head of the first request is read; what follows it on the connection (a body, later
 * requests) is the relay's to carry as bytes. A later request on a kept-alive connection thus
 * reaches the origin the first one named (origin servers accept absolute-form, RFC 9112
 * §3.2.2), never another host: the policy was decided for that origin.
 * @module dsh-remote-worlds/network/http-proxy-request
 */
import { normalizeHostName, parseIpAddress, parsePort } from './names.ts'

/** The longest request head read (bytes, the final CRLFCRLF included); a longer one is 431. */
export const MAX_PROXY_HEAD_BYTES = 64 * 1024

/** What {@link parseProxyRequestHead} found. */
export type ProxyRequestHead =
  /** No CRLFCRLF yet and fewer than {@link MAX_PROXY_HEAD_BYTES} bytes: read more. */
  | { kind: 'incomplete' }
  /** Not a request this proxy takes: answer {@link proxyResponse}(status, reason, …) and close. */
  | { kind: 'invalid'; status: 400 | 431 | 501; reason: string }
  | {
    kind: 'connect'
    /** Canonical host: a lower-case name, or an IP literal without brackets. */
    host: string
    /** TCP port, 1..65535 (required in CONNECT). */
    port: number
    /** Bytes of the head, final CRLFCRLF included: the tunnel's bytes start after them. */
    headBytes: number
    /** `HTTP/1.0` or `HTTP/1.1`, as the request line said. */
    version: string
  }
  | {
    kind: 'forward'
    /** The method, as sent (case-sensitive, RFC 9110 §9.1). */
    method: string
    /** Canonical host, as for 'connect'. */
    host: string
    /** TCP port, 1..65535; 80 when the URL has none. */
    port: number
    /**
     * The head to send the origin: the request line in origin-form (`GET /path?q HTTP/1.1`),
     * every header as received except `Proxy-*` ones (Proxy-Authorization, Proxy-Connection),
     * and `Host` set to the URL's authority (RFC 9112 §3.2.2: a proxy replaces it), in the
     * place of the first Host header or right after the request line. Ends with CRLFCRLF.
     */
    originForm: Buffer
    /**
     * The request body's length by its Content-Length (0 without one); undefined for a chunked
     * or unreadable length, whose end this reader does not find (the server's close after the
     * request, which `Connection: close` asks for, ends the connection then).
     */
    bodyBytes: number | undefined
    /** Bytes of the received head, final CRLFCRLF included: what follows is the body or later requests. */
    headBytes: number
    /** `HTTP/1.0` or `HTTP/1.1`, as the request line said. */
    version: string
  }

const HEAD_END = Buffer.from('\r\n\r\n')
/** RFC 9110 §5.6.2 token: methods and header names. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/

/**
 * Read the head of the first request on a proxy connection.
 * @param buffer - everything received so far on the connection, from its first byte.
 * @returns 'incomplete' until the head's CRLFCRLF arrives; 'invalid' with 400 (malformed, an
 *   origin-form or asterisk target, a host that is neither a DNS name nor an IP literal, a
 *   CONNECT without a port, userinfo in the URL, a header folded or without a colon), 431 (no
 *   end within {@link MAX_PROXY_HEAD_BYTES}) or 501 (an `https://` or other scheme's URL, a
 *   version other than HTTP/1.0 and 1.1); else the request. Never throws.
 */
export function parseProxyRequestHead(buffer: Buffer): ProxyRequestHead {
  // RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the request line.
  let start = 0
  while (buffer[start] === 0x0d && buffer[start + 1] === 0x0a) start += 2
  const end = buffer.indexOf(HEAD_END, start)
  if (end < 0 || end + 4 > MAX_PROXY_HEAD_BYTES) {
    if (end >= 0 || buffer.length >= MAX_PROXY_HEAD_BYTES) return invalid(431, `the request head is longer than ${MAX_PROXY_HEAD_BYTES} bytes`)
    return { kind: 'incomplete' }
  }
  const headBytes = end + 4
  const lines = buffer.toString('latin1', start, end).split('\r\n')
  const requestLine = lines[0]!
  if (/[\0-\x1f\x7f]/.test(requestLine)) return invalid(400, 'the request line holds a control character')
  const parts = requestLine.split(' ')
  if (parts.length !== 3) return invalid(400, `the request line ${JSON.stringify(clip(requestLine))} is not METHOD TARGET VERSION`)
  const [method, target, version] = parts as [string, string, string]
  if (!TOKEN.test(method)) return invalid(400, `the method ${JSON.stringify(clip(method))} is not a token`)
  if (!/^HTTP\/[0-9]\.[0-9]$/.test(version)) return invalid(400, `the version ${JSON.stringify(clip(version))} is not HTTP/x.y`)
  if (version !== 'HTTP/1.1' && version !== 'HTTP/1.0') return invalid(501, `${version} is not supported; this proxy speaks HTTP/1.1`)
  const headers: [string, string][] = []
  for (const line of lines.slice(1)) {
    if (line.startsWith(' ') || line.startsWith('\t')) return invalid(400, 'a folded header line (obsolete line folding, RFC 9112 §5.2)')
    const colon = line.indexOf(':')
    if (colon <= 0 || !TOKEN.test(line.slice(0, colon))) return invalid(400, `the header line ${JSON.stringify(clip(line))} is not NAME: VALUE`)
    if (/[\0\r\n]/.test(line)) return invalid(400, 'a header holds a NUL or a bare CR or LF')
    headers.push([line.slice(0, colon), line.slice(colon + 1)])
  }

  if (method === 'CONNECT') {
    const authority = parseAuthority(target, undefined)
    if (typeof authority === 'string') return invalid(400, `CONNECT ${clip(target)}: ${authority}`)
    return { kind: 'connect', host: authority.host, port: authority.port, headBytes, version }
  }

  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(target)
  if (scheme === null) return invalid(400, `the target ${JSON.stringify(clip(target))} is not an absolute http:// URL; set this address as the HTTP proxy (http_proxy), and use CONNECT host:port for anything else`)
  if (scheme[1]!.toLowerCase() !== 'http') return invalid(501, `${scheme[1]}:// URLs are not forwarded; ${scheme[1]!.toLowerCase() === 'https' ? 'an HTTPS client tunnels with CONNECT host:443 (set https_proxy)' : 'only http:// is, and CONNECT host:port'}`)
  const rest = target.slice(scheme[0].length)
  const pathAt = rest.search(/[/?#]/)
  const authorityText = pathAt < 0 ? rest : rest.slice(0, pathAt)
  let path = pathAt < 0 ? '/' : rest.slice(pathAt)
  const fragment = path.indexOf('#')
  if (fragment >= 0) path = path.slice(0, fragment)
  if (path === '' || path.startsWith('?')) path = `/${path}`
  if (authorityText.includes('@')) return invalid(400, `the URL ${JSON.stringify(clip(target))} holds user information; send credentials in an Authorization header`)
  const authority = parseAuthority(authorityText, 80)
  if (typeof authority === 'string') return invalid(400, `the URL ${JSON.stringify(clip(target))}: ${authority}`)

  const hostValue = authorityText
  const out: string[] = [`${method} ${path} ${version}`]
  let hostSet = false
  let bodyBytes: number | undefined = 0
  for (const [name, value] of headers) {
    const lower = name.toLowerCase()
    if (lower.startsWith('proxy-')) continue
    if (lower === 'host') {
      if (!hostSet) out.push(`Host: ${hostValue}`)
      hostSet = true
      continue
    }
    // One request per connection: the server closes after it (see below).
    if (lower === 'connection' || lower === 'keep-alive') continue
    if (lower === 'content-length' && bodyBytes !== undefined) bodyBytes = /^\s*\d+\s*$/.test(value) ? Number(value) : undefined
    if (lower === 'transfer-encoding') bodyBytes = undefined
    out.push(`${name}:${value}`)
  }
  if (!hostSet) out.splice(1, 0, `Host: ${hostValue}`)
  // The rules judged this request's host alone: a second request on the same connection could
  // name another virtual host of the same server. So the server is asked to close after this
  // one, and nothing the world sends after this request's body is carried.
  out.push('Connection: close')
  const originForm = Buffer.from(`${out.join('\r\n')}\r\n\r\n`, 'latin1')
  return { kind: 'forward', method, host: authority.host, port: authority.port, originForm, headBytes, version, bodyBytes }
}

/**
 * A response the client writes itself (a refusal, a failed dial): an HTTP/1.1 status line,
 * `Content-Type: text/plain; charset=utf-8`, `Content-Length`, `Connection: close`, and `detail`
 * as the body (one line, newline-terminated) for the agent to read.
 * @param status - the status code, 100..599.
 * @param reason - the reason phrase; CR, LF and other control characters become spaces.
 * @param detail - why, in words (UTF-8); a CR or LF in it becomes a space.
 */
export function proxyResponse(status: number, reason: string, detail: string): Buffer {
  const phrase = reason.replace(/[\0-\x1f\x7f]/g, ' ')
  const body = Buffer.from(`${detail.replace(/[\r\n]+/g, ' ')}\n`, 'utf8')
  const head = `HTTP/1.1 ${status} ${phrase}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`
  return Buffer.concat([Buffer.from(head, 'latin1'), body])
}

/** The answer to a CONNECT once the client's dial succeeded: `HTTP/1.1 200 Connection established` and an empty line. */
export function proxyConnected(): Buffer {
  return Buffer.from('HTTP/1.1 200 Connection established\r\n\r\n', 'latin1')
}

function invalid(status: 400 | 431 | 501, reason: string): ProxyRequestHead {
  return { kind: 'invalid', status, reason }
}

/** At most 200 characters of text from the wire, for a reason line. */
function clip(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text
}

/**
 * `host:port` or `[v6]:port`; the port may be left out when `defaultPort` is given (an empty
 * port after the colon too, RFC 3986 §3.2.3). A string is the problem.
 */
function parseAuthority(text: string, defaultPort: number | undefined): { host: string; port: number } | string {
  let hostText: string
  let portText: string | undefined
  if (text.startsWith('[')) {
    const close = text.indexOf(']')
    if (close < 0) return 'an opening [ without ]'
    hostText = text.slice(1, close)
    const after = text.slice(close + 1)
    if (after !== '' && !after.startsWith(':')) return `unexpected ${JSON.stringify(after)} after ]`
    portText = after === '' ? undefined : after.slice(1)
    const address = parseIpAddress(hostText)
    if (address === undefined || !hostText.includes(':')) return `[${hostText}] is not an IPv6 address`
    hostText = address.address
  } else {
    const colon = text.lastIndexOf(':')
    if (text.indexOf(':') !== colon) return 'an IPv6 address must be in brackets ([::1]:443)'
    hostText = colon < 0 ? text : text.slice(0, colon)
    portText = colon < 0 ? undefined : text.slice(colon + 1)
    const host = parseIpAddress(hostText)?.address ?? normalizeHostName(hostText)
    if (host === undefined) return `${JSON.stringify(hostText)} is not a host name or IP address`
    hostText = host
  }
  if (portText === undefined || portText === '') {
    if (defaultPort === undefined) return 'a port is required (host:port)'
    return { host: hostText, port: defaultPort }
  }
  const port = parsePort(portText)
  if (port === undefined) return `port ${JSON.stringify(portText)} is not a number from 1 to 65535`
  return { host: hostText, port }
}
