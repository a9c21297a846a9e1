/**
 * The egress gateway (src/network/egress-gateway.ts) on this machine's loopback, with a real
 * TCP connection standing for the world's side and a lookup that records what it is asked: a
 * name no rule allows is refused without a lookup, whatever address rules there are (the names
 * a world asks for never reach a resolver), and an allowed name is resolved and dialed.
 */
import { once } from 'node:events'
import { type AddressInfo, type Server, type Socket, connect, createServer } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { EgressGateway } from '../../src/network/egress-gateway.ts'
import { EgressLog } from '../../src/network/egress-log.ts'
import { EgressResolver } from '../../src/network/resolve.ts'
import { LivePolicy, parsePolicy } from '../../src/network/rules.ts'

const asked: string[] = []
let upstream: Server
let upstreamPort = 0

beforeAll(async () => {
  upstream = createServer(socket => socket.end('upstream'))
  upstream.listen(0, '127.0.0.1')
  await once(upstream, 'listening')
  upstreamPort = (upstream.address() as AddressInfo).port
})

afterAll(() => { upstream?.close() })

/** Serve one proxy request through a gateway of `rules`; what the world's side read back. */
async function ask(allow: string[], request: string): Promise<string> {
  const gateway = new EgressGateway({ world: 'test', policy: new LivePolicy(parsePolicy({ allow })), resolver: new EgressResolver([], async name => { asked.push(name); return ['127.0.0.1'] }), log: new EgressLog() })
  const proxy = createServer(socket => gateway.serve(socket))
  proxy.listen(0, '127.0.0.1')
  await once(proxy, 'listening')
  try {
    const client: Socket = connect((proxy.address() as AddressInfo).port, '127.0.0.1')
    let text = ''
    client.on('data', (chunk: Buffer) => { text += chunk.toString('latin1') })
    client.write(request)
    await once(client, 'end')
    client.destroy()
    return text
  } finally {
    proxy.close()
  }
}

describe('the egress gateway and name lookups', () => {
  it('refuses a name no rule allows without looking it up, though an address rule would allow its address', async () => {
    asked.length = 0
    const answer = await ask([`127.0.0.0/8:${upstreamPort}`], `GET http://secret-data.exfil.test:${upstreamPort}/ HTTP/1.1\r\nHost: secret-data.exfil.test\r\n\r\n`)
    expect(answer.split('\r\n')[0]).toBe(`HTTP/1.1 403 Forbidden (dsh-remote-worlds egress: refused secret-data.exfil.test:${upstreamPort}: no --allow rule matches secret-data.exfil.test:${upstreamPort})`)
    expect(asked).toEqual([])
  })

  it('looks up and dials a name a rule allows', async () => {
    asked.length = 0
    const answer = await ask([`allowed.test:${upstreamPort}`], `GET http://allowed.test:${upstreamPort}/ HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n`)
    expect(answer).toBe('upstream')
    expect(asked).toEqual(['allowed.test'])
  })

  it('judges an IP literal by the address rules, with no lookup', async () => {
    asked.length = 0
    const answer = await ask([`127.0.0.0/8:${upstreamPort}`], `GET http://127.0.0.1:${upstreamPort}/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`)
    expect(answer).toBe('upstream')
    expect(asked).toEqual([])
  })
})

/** An upstream that records every byte it receives, answers once a request head came, and closes after it. */
async function recordingUpstream(): Promise<{ port: number; received: () => string; close(): void }> {
  let received = ''
  const server = createServer(socket => {
    socket.on('data', (chunk: Buffer) => {
      const before = received
      received += chunk.toString('latin1')
      if (!before.includes('\r\n\r\n') && received.includes('\r\n\r\n')) setTimeout(() => socket.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok'), 100)
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return { port: (server.address() as AddressInfo).port, received: () => received, close: () => server.close() }
}

describe('what a plain HTTP request carries to the server', () => {
  it('one request and its body: Connection: close, and a request pipelined behind it (another virtual host of the server) never reaches it', async () => {
    const server = await recordingUpstream()
    try {
      const answer = await ask([`allowed.test:${server.port}`], `POST http://allowed.test:${server.port}/first HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhelloGET /second HTTP/1.1\r\nHost: secret.test\r\n\r\n`)
      expect(answer).toBe('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok')
      expect(server.received()).toBe(`POST /first HTTP/1.1\r\nHost: allowed.test:${server.port}\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello`)
    } finally {
      server.close()
    }
  })
})

describe('a CONNECT tunnel\'s first bytes', () => {
  it('a TLS record other than a handshake before any hello (a change cipher spec) is refused: nothing reaches the server', async () => {
    const server = await recordingUpstream()
    try {
      const answer = await ask([`allowed.test:${server.port}`], `CONNECT allowed.test:${server.port} HTTP/1.1\r\nHost: allowed.test\r\n\r\n\x14\x03\x03\x00\x01\x01`)
      expect(answer).toBe('HTTP/1.1 200 Connection established\r\n\r\n')
      expect(server.received()).toBe('')
    } finally {
      server.close()
    }
  })
})
