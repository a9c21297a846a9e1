/**
 * The server name of a TLS ClientHello (src/network/tls-client-hello.ts): read from the first
 * bytes node:tls really sends (to a listener on 127.0.0.1 that only records them), with and
 * without SNI; every prefix of a hello is 'incomplete'; a hello split over several records is
 * joined; and garbage, HTTP, a malformed hello, an IP literal as host_name and a hello over the
 * 64 KiB bound are 'not-tls', never a throw.
 */
import { type AddressInfo, type Socket, createServer } from 'node:net'
import { connect } from 'node:tls'
import { describe, expect, it } from 'vitest'
import { MAX_CLIENT_HELLO_BYTES, readServerName } from '../../src/network/tls-client-hello.ts'

/** The first flight node:tls sends to 127.0.0.1 with `servername` (undefined: none). */
async function realClientHello(servername: string | undefined): Promise<Buffer> {
  const sockets = new Set<Socket>()
  let received = Buffer.alloc(0)
  const got = Promise.withResolvers<Buffer>()
  const server = createServer(socket => {
    sockets.add(socket)
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk])
      if (readServerName(received).kind !== 'incomplete') got.resolve(received)
    })
    socket.on('error', () => {})
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const client = connect({ host: '127.0.0.1', port, ...(servername === undefined ? {} : { servername }), rejectUnauthorized: false })
  client.on('error', () => {})
  try {
    return await got.promise
  } finally {
    client.destroy()
    for (const socket of sockets) socket.destroy()
    await new Promise<void>(resolve => server.close(() => resolve()))
  }
}

/** One TLS record of content type `type` around `fragment`. */
function record(fragment: Buffer, type = 22): Buffer {
  const header = Buffer.from([type, 3, 1, 0, 0])
  header.writeUInt16BE(fragment.length, 3)
  return Buffer.concat([header, fragment])
}

/** A minimal ClientHello handshake message whose extensions are `extensions` (already encoded). */
function helloMessage(extensions: Buffer | undefined): Buffer {
  const body = Buffer.concat([
    Buffer.from([3, 3]), Buffer.alloc(32, 7), // legacy_version, random
    Buffer.from([0]), // no session id
    Buffer.from([0, 2, 0x13, 0x01]), // one cipher suite
    Buffer.from([1, 0]), // null compression
    ...(extensions === undefined ? [] : [u16(extensions.length), extensions]),
  ])
  return Buffer.concat([Buffer.from([1]), u24(body.length), body])
}

/** A server_name extension holding one host_name of these bytes. */
function sniExtension(name: Buffer): Buffer {
  const entry = Buffer.concat([Buffer.from([0]), u16(name.length), name])
  const data = Buffer.concat([u16(entry.length), entry])
  return Buffer.concat([u16(0), u16(data.length), data])
}

function u16(value: number): Buffer {
  const out = Buffer.alloc(2)
  out.writeUInt16BE(value)
  return out
}

function u24(value: number): Buffer {
  const out = Buffer.alloc(3)
  out.writeUIntBE(value, 0, 3)
  return out
}

describe('a real ClientHello from node:tls', () => {
  it('names its servername, lower-cased', async () => {
    const bytes = await realClientHello('Example.TEST')
    expect(bytes[0]).toBe(22)
    expect(readServerName(bytes)).toEqual({ kind: 'hello', serverName: 'example.test' })
  })

  it('without SNI (an IP host and no servername) has no server name', async () => {
    expect(readServerName(await realClientHello(undefined))).toEqual({ kind: 'hello', serverName: undefined })
  })

  it('every prefix of it is incomplete', async () => {
    const bytes = await realClientHello('example.test')
    for (let cut = 0; cut < bytes.length; cut++) expect(readServerName(bytes.subarray(0, cut))).toEqual({ kind: 'incomplete' })
  })

  it('split over records of 7 bytes each it is joined; every prefix of that is incomplete', async () => {
    const bytes = await realClientHello('split.example.test')
    const message = bytes.subarray(5, 5 + bytes.readUInt16BE(3))
    const pieces: Buffer[] = []
    for (let at = 0; at < message.length; at += 7) pieces.push(record(message.subarray(at, at + 7)))
    const split = Buffer.concat(pieces)
    expect(readServerName(split)).toEqual({ kind: 'hello', serverName: 'split.example.test' })
    expect(readServerName(Buffer.concat([split, Buffer.from('anything after')]))).toEqual({ kind: 'hello', serverName: 'split.example.test' })
    for (let cut = 0; cut < split.length; cut++) expect(readServerName(split.subarray(0, cut)).kind).toBe('incomplete')
  })
})

describe('crafted hellos', () => {
  it('a hello without extensions, and one with SNI and a trailing dot', () => {
    expect(readServerName(record(helloMessage(undefined)))).toEqual({ kind: 'hello', serverName: undefined })
    expect(readServerName(record(helloMessage(sniExtension(Buffer.from('api.example.test.')))))).toEqual({ kind: 'hello', serverName: 'api.example.test' })
  })

  it('a host_name that is an IP literal, empty, or holds a NUL is not-tls', () => {
    for (const name of ['10.0.0.1', '', 'a\0.example.test', 'evil.test/x']) {
      expect(readServerName(record(helloMessage(sniExtension(Buffer.from(name)))))).toEqual({ kind: 'not-tls' })
    }
  })

  it('two server_name extensions are not-tls', () => {
    const one = sniExtension(Buffer.from('a.test'))
    expect(readServerName(record(helloMessage(Buffer.concat([one, one]))))).toEqual({ kind: 'not-tls' })
  })

  it('lengths that run past their container are not-tls', () => {
    const message = helloMessage(sniExtension(Buffer.from('a.test')))
    const broken = Buffer.from(message)
    broken.writeUInt16BE(0xffff, broken.length - 'a.test'.length - 2) // the name's length
    expect(readServerName(record(broken))).toEqual({ kind: 'not-tls' })
  })

  it('a hello over 64 KiB is not-tls, as soon as its header says so', () => {
    const header = Buffer.concat([Buffer.from([1]), u24(MAX_CLIENT_HELLO_BYTES - 3)])
    expect(readServerName(record(header))).toEqual({ kind: 'not-tls' })
    const atBound = Buffer.concat([Buffer.from([1]), u24(MAX_CLIENT_HELLO_BYTES - 4)])
    expect(readServerName(record(atBound))).toEqual({ kind: 'incomplete' })
  })

  it('another handshake type or a record of another content type is not-tls', () => {
    const message = helloMessage(undefined)
    const serverHello = Buffer.from(message)
    serverHello[0] = 2
    expect(readServerName(record(serverHello))).toEqual({ kind: 'not-tls' })
    expect(readServerName(Buffer.concat([record(message.subarray(0, 10)), record(message.subarray(10), 23)]))).toEqual({ kind: 'not-tls' })
    expect(readServerName(record(Buffer.alloc(0)))).toEqual({ kind: 'not-tls' })
  })
})

describe('not TLS', () => {
  it.each([
    ['HTTP', Buffer.from('GET / HTTP/1.1\r\n\r\n')],
    ['SSH', Buffer.from('SSH-2.0-OpenSSH_9.6\r\n')],
    ['SSLv2-style hello', Buffer.from([0x80, 0x2e, 0x01, 0x03, 0x01])],
    ['a handshake record of another version', Buffer.from([22, 2, 0, 0, 4, 1, 0, 0, 0])],
    ['random bytes', Buffer.from('16ff00deadbeefcafe', 'hex')],
  ])('%s', (_, bytes) => {
    expect(readServerName(bytes)).toEqual({ kind: 'not-tls' })
  })

  it('nothing yet, or one byte 22, is incomplete', () => {
    expect(readServerName(Buffer.alloc(0))).toEqual({ kind: 'incomplete' })
    expect(readServerName(Buffer.from([22]))).toEqual({ kind: 'incomplete' })
  })

  it('never throws on any prefix of bytes that start as TLS and then go wrong', () => {
    const bytes = Buffer.concat([Buffer.from([22, 3, 1, 0, 60, 1, 0, 0, 56]), Buffer.alloc(56, 0xff)])
    for (let cut = 0; cut <= bytes.length; cut++) expect(() => readServerName(bytes.subarray(0, cut))).not.toThrow()
    expect(readServerName(bytes)).toEqual({ kind: 'not-tls' })
  })
})
