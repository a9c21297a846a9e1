/**
 * The first request on the world's HTTP proxy port (src/network/http-proxy-request.ts): a
 * CONNECT names host and port (a bracketed IPv6 too); an absolute http:// request is rewritten
 * to origin-form with Proxy-* headers dropped and Host set to the URL's authority; the head may
 * arrive in any number of pieces and ends at CRLFCRLF within 64 KiB; everything else is refused
 * with the status and reason the client answers (400, 431 or 501). And the client's own
 * responses carry their reason in a plain-text body and close the connection.
 */
import { describe, expect, it } from 'vitest'
import { MAX_PROXY_HEAD_BYTES, parseProxyRequestHead, proxyConnected, proxyResponse } from '../../src/network/http-proxy-request.ts'

const head = (text: string): Buffer => Buffer.from(text, 'latin1')

describe('CONNECT', () => {
  it('host:port, the host canonical, headBytes where the tunnel starts', () => {
    const request = head('CONNECT Example.COM:443 HTTP/1.1\r\nHost: example.com:443\r\nUser-Agent: curl/8\r\n\r\n\x16\x03\x01')
    expect(parseProxyRequestHead(request)).toEqual({ kind: 'connect', host: 'example.com', port: 443, headBytes: request.length - 3, version: 'HTTP/1.1' })
  })

  it('a bracketed IPv6 address, an IPv4 address, HTTP/1.0', () => {
    expect(parseProxyRequestHead(head('CONNECT [FD00::1]:5432 HTTP/1.1\r\n\r\n'))).toEqual({ kind: 'connect', host: 'fd00::1', port: 5432, headBytes: 35, version: 'HTTP/1.1' })
    expect(parseProxyRequestHead(head('CONNECT 10.0.0.1:22 HTTP/1.0\r\n\r\n'))).toEqual({ kind: 'connect', host: '10.0.0.1', port: 22, headBytes: 32, version: 'HTTP/1.0' })
  })

  it('empty lines before the request line are skipped and counted', () => {
    expect(parseProxyRequestHead(head('\r\n\r\nCONNECT a.test:1 HTTP/1.1\r\n\r\n'))).toEqual({ kind: 'connect', host: 'a.test', port: 1, headBytes: 33, version: 'HTTP/1.1' })
  })

  it.each([
    ['CONNECT example.com HTTP/1.1', 'CONNECT example.com: a port is required (host:port)'],
    ['CONNECT example.com: HTTP/1.1', 'CONNECT example.com:: a port is required (host:port)'],
    ['CONNECT example.com:99999 HTTP/1.1', 'CONNECT example.com:99999: port "99999" is not a number from 1 to 65535'],
    ['CONNECT fd00::1:443 HTTP/1.1', 'CONNECT fd00::1:443: an IPv6 address must be in brackets ([::1]:443)'],
    ['CONNECT [10.0.0.1]:443 HTTP/1.1', 'CONNECT [10.0.0.1]:443: [10.0.0.1] is not an IPv6 address'],
    ['CONNECT ex_ample!.com:443 HTTP/1.1', 'CONNECT ex_ample!.com:443: "ex_ample!.com" is not a host name or IP address'],
    ['CONNECT 1.2.3:443 HTTP/1.1', 'CONNECT 1.2.3:443: "1.2.3" is not a host name or IP address'],
  ])('refuses %j with 400', (line, reason) => {
    expect(parseProxyRequestHead(head(`${line}\r\n\r\n`))).toEqual({ kind: 'invalid', status: 400, reason })
  })
})

describe('absolute-form forwarding', () => {
  it('rewritten to origin-form: Proxy-* and Connection dropped, Host set to the URL authority in its place, Connection: close last', () => {
    const request = head('GET http://Example.com:8080/a/b?c=d HTTP/1.1\r\nUser-Agent: curl/8\r\nHost: wrong.test\r\nProxy-Connection: Keep-Alive\r\nProxy-Authorization: Basic eA==\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nAccept: */*\r\n\r\nBODY')
    const parsed = parseProxyRequestHead(request)
    expect(parsed).toEqual({
      kind: 'forward', method: 'GET', host: 'example.com', port: 8080, headBytes: request.length - 4, version: 'HTTP/1.1', bodyBytes: 0,
      originForm: head('GET /a/b?c=d HTTP/1.1\r\nUser-Agent: curl/8\r\nHost: Example.com:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n'),
    })
  })

  it('says the body\'s length: Content-Length\'s, none (0), or unknown for a chunked or malformed one', () => {
    const length = (headers: string): number | undefined => (parseProxyRequestHead(head(`POST http://a.test/ HTTP/1.1\r\n${headers}\r\n`)) as { bodyBytes: number | undefined }).bodyBytes
    expect(length('Content-Length: 12\r\n')).toBe(12)
    expect(length('')).toBe(0)
    expect(length('Transfer-Encoding: chunked\r\n')).toBeUndefined()
    expect(length('Content-Length: 12\r\nTransfer-Encoding: chunked\r\n')).toBeUndefined()
    expect(length('Content-Length: 1e3\r\n')).toBeUndefined()
  })

  it('port 80 by default; Host added after the request line when absent; no path is /', () => {
    expect(parseProxyRequestHead(head('HEAD HTTP://a.test HTTP/1.0\r\nX-A: 1\r\n\r\n'))).toEqual({
      kind: 'forward', method: 'HEAD', host: 'a.test', port: 80, headBytes: 39, version: 'HTTP/1.0', bodyBytes: 0,
      originForm: head('HEAD / HTTP/1.0\r\nHost: a.test\r\nX-A: 1\r\nConnection: close\r\n\r\n'),
    })
  })

  it('a query without a path gets /, a fragment is dropped, a second Host header is dropped', () => {
    const parsed = parseProxyRequestHead(head('POST http://[::1]:3000?x=1#frag HTTP/1.1\r\nHost: one\r\nHost: two\r\nContent-Length: 0\r\n\r\n'))
    expect(parsed).toMatchObject({ kind: 'forward', method: 'POST', host: '::1', port: 3000 })
    expect((parsed as { originForm: Buffer }).originForm.toString('latin1')).toBe('POST /?x=1 HTTP/1.1\r\nHost: [::1]:3000\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
  })

  it.each([
    ['GET https://example.com/ HTTP/1.1', 501, 'https:// URLs are not forwarded; an HTTPS client tunnels with CONNECT host:443 (set https_proxy)'],
    ['GET ftp://example.com/ HTTP/1.1', 501, 'ftp:// URLs are not forwarded; only http:// is, and CONNECT host:port'],
    ['GET / HTTP/1.1', 400, 'the target "/" is not an absolute http:// URL; set this address as the HTTP proxy (http_proxy), and use CONNECT host:port for anything else'],
    ['OPTIONS * HTTP/1.1', 400, 'the target "*" is not an absolute http:// URL; set this address as the HTTP proxy (http_proxy), and use CONNECT host:port for anything else'],
    ['GET http://user:pw@example.com/ HTTP/1.1', 400, 'the URL "http://user:pw@example.com/" holds user information; send credentials in an Authorization header'],
    ['GET http://exa$mple.com/ HTTP/1.1', 400, 'the URL "http://exa$mple.com/": "exa$mple.com" is not a host name or IP address'],
    ['GET http:///path HTTP/1.1', 400, 'the URL "http:///path": "" is not a host name or IP address'],
    ['GET http://example.com/ HTTP/2.0', 501, 'HTTP/2.0 is not supported; this proxy speaks HTTP/1.1'],
    ['GET http://example.com/ HTTX/1.1', 400, 'the version "HTTX/1.1" is not HTTP/x.y'],
    ['GET  http://example.com/ HTTP/1.1', 400, 'the request line "GET  http://example.com/ HTTP/1.1" is not METHOD TARGET VERSION'],
    ['G(T http://example.com/ HTTP/1.1', 400, 'the method "G(T" is not a token'],
    ['GET http://example.com/\x01 HTTP/1.1', 400, 'the request line holds a control character'],
  ])('refuses %j with %i', (line, status, reason) => {
    expect(parseProxyRequestHead(head(`${line}\r\nHost: x\r\n\r\n`))).toEqual({ kind: 'invalid', status, reason })
  })

  it('refuses a folded header, a header without a colon, and a bare LF in a header', () => {
    expect(parseProxyRequestHead(head('GET http://a.test/ HTTP/1.1\r\nX-A: 1\r\n  more\r\n\r\n'))).toEqual({ kind: 'invalid', status: 400, reason: 'a folded header line (obsolete line folding, RFC 9112 §5.2)' })
    expect(parseProxyRequestHead(head('GET http://a.test/ HTTP/1.1\r\nno colon\r\n\r\n'))).toEqual({ kind: 'invalid', status: 400, reason: 'the header line "no colon" is not NAME: VALUE' })
    expect(parseProxyRequestHead(head('GET http://a.test/ HTTP/1.1\r\nX-A: 1\nX-B: 2\r\n\r\n'))).toEqual({ kind: 'invalid', status: 400, reason: 'a header holds a NUL or a bare CR or LF' })
  })
})

describe('the head bound', () => {
  it('incomplete until CRLFCRLF, whatever the pieces', () => {
    const request = head('CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n')
    for (let cut = 0; cut < request.length; cut++) expect(parseProxyRequestHead(request.subarray(0, cut))).toEqual({ kind: 'incomplete' })
    expect(parseProxyRequestHead(request).kind).toBe('connect')
  })

  it('64 KiB without an end is 431; a head ending exactly at 64 KiB is taken', () => {
    const start = 'GET http://a.test/ HTTP/1.1\r\nX-Big: '
    const exact = head(`${start}${'a'.repeat(MAX_PROXY_HEAD_BYTES - start.length - 4)}\r\n\r\n`)
    expect(exact.length).toBe(65536)
    expect(parseProxyRequestHead(exact)).toMatchObject({ kind: 'forward', headBytes: 65536 })
    const over = head(`${start}${'a'.repeat(MAX_PROXY_HEAD_BYTES - start.length - 3)}\r\n\r\n`)
    expect(parseProxyRequestHead(over)).toEqual({ kind: 'invalid', status: 431, reason: 'the request head is longer than 65536 bytes' })
    expect(parseProxyRequestHead(over.subarray(0, MAX_PROXY_HEAD_BYTES - 1))).toEqual({ kind: 'incomplete' })
    expect(parseProxyRequestHead(over.subarray(0, MAX_PROXY_HEAD_BYTES))).toEqual({ kind: 'invalid', status: 431, reason: 'the request head is longer than 65536 bytes' })
  })

  it('never throws on garbage', () => {
    for (const bytes of [Buffer.from([0x16, 0x03, 0x01, 0, 5, 1, 0, 0, 1, 0]), Buffer.from('\r\n\r\n'), Buffer.from('\xff\xfe\r\n\r\n', 'latin1'), Buffer.alloc(70_000, 0)]) {
      expect(() => parseProxyRequestHead(bytes)).not.toThrow()
    }
    expect(parseProxyRequestHead(Buffer.from('\r\n\r\n'))).toEqual({ kind: 'incomplete' })
    expect(parseProxyRequestHead(Buffer.from('\r\n\r\n\r\n'))).toEqual({ kind: 'incomplete' })
  })
})

describe('responses', () => {
  it('proxyResponse: status, plain text, length, close, the detail as the body', () => {
    expect(proxyResponse(403, 'Forbidden', 'dsh-remote-worlds egress: example.org:443 no --allow rule matches example.org:443').toString('utf8')).toBe(
      'HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 82\r\nConnection: close\r\n\r\n'
      + 'dsh-remote-worlds egress: example.org:443 no --allow rule matches example.org:443\n',
    )
  })

  it('proxyResponse: control characters cannot split the head, the body stays one line, Content-Length counts UTF-8 bytes', () => {
    expect(proxyResponse(502, 'Bad\r\nX-Evil: 1', 'naïve\r\nline').toString('utf8')).toBe(
      'HTTP/1.1 502 Bad  X-Evil: 1\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 12\r\nConnection: close\r\n\r\nnaïve line\n',
    )
  })

  it('proxyConnected', () => {
    expect(proxyConnected().toString('latin1')).toBe('HTTP/1.1 200 Connection established\r\n\r\n')
  })
})
