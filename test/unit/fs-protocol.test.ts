/**
 * The file server's wire format (src/files/protocol.ts): frames split anywhere by the transport
 * arrive whole and in order, and fields round-trip any bytes. A frame is at most 1 MiB: a longer
 * header is refused before anything of it is held, and the client channel (server-channel.ts)
 * then ends that server alone, with its requests, as a planted server's would.
 */
import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { fsErrorOf } from '../../src/files/errors.ts'
import { type Frame, FrameDecoder, FrameTooLargeError, MAX_REPLY_FRAME_BYTES, PROTOCOL_VERSION, decodeFields, encodeFields, encodeFrame } from '../../src/files/protocol.ts'
import { ServerChannel, ServerProtocolError, ServerRefusal } from '../../src/files/server-channel.ts'

function decodeAll(chunks: readonly Buffer[]): Frame[] {
  const frames: Frame[] = []
  const decoder = new FrameDecoder(frame => frames.push({ ...frame, payload: Buffer.from(frame.payload) }))
  for (const chunk of chunks) decoder.push(chunk)
  expect(decoder.pending).toBe(0)
  return frames
}

describe('frames', () => {
  const stream = Buffer.concat([
    encodeFrame(1, 'K', Buffer.from('hello')),
    encodeFrame(2, 'A'),
    encodeFrame(0xfffffff0, 'D', Buffer.alloc(20_000, 7)),
    encodeFrame(3, 'E', encodeFields(['ENOENT', 'gone'])),
  ])
  const expected = [
    { id: 1, code: 'K', payload: Buffer.from('hello') },
    { id: 2, code: 'A', payload: Buffer.alloc(0) },
    { id: 0xfffffff0, code: 'D', payload: Buffer.alloc(20_000, 7) },
    { id: 3, code: 'E', payload: encodeFields(['ENOENT', 'gone']) },
  ]

  it('decode from one chunk', () => {
    expect(decodeAll([stream])).toEqual(expected)
  })

  it('decode byte by byte (a header cut anywhere)', () => {
    expect(decodeAll([...stream].map(byte => Buffer.from([byte])))).toEqual(expected)
  })

  it('decode from chunks of every size from 2 to 13 bytes, and 64 KiB', () => {
    for (const size of [2, 3, 5, 8, 9, 10, 13, 65_536]) {
      const chunks: Buffer[] = []
      for (let at = 0; at < stream.length; at += size) chunks.push(stream.subarray(at, at + size))
      expect(decodeAll(chunks)).toEqual(expected)
    }
  })

  it('holds an incomplete frame until the rest arrives', () => {
    const frames: Frame[] = []
    const decoder = new FrameDecoder(frame => frames.push(frame))
    decoder.push(stream.subarray(0, 12))
    expect(frames.map(frame => frame.id)).toEqual([])
    // The header is taken; three payload bytes wait.
    expect(decoder.pending).toBe(3)
    decoder.push(stream.subarray(12, 14))
    expect(frames.map(frame => frame.id)).toEqual([1])
  })
})

describe('fields', () => {
  it('round-trip strings as UTF-8 and raw bytes exactly, empty ones included', () => {
    const fields = decodeFields(encodeFields(['', 'ü\nnew line', Buffer.from([0, 255, 10]), '/a b/c']))
    expect(fields.map(field => [...field])).toEqual([[], [...Buffer.from('ü\nnew line')], [0, 255, 10], [...Buffer.from('/a b/c')]])
  })

  it('refuse a field that runs past its payload', () => {
    const payload = encodeFields(['abc']).subarray(0, 5)
    expect(() => decodeFields(payload)).toThrow('field of 3 bytes at byte 0 runs past the 5-byte payload')
    expect(() => decodeFields(Buffer.from([1, 0]))).toThrow('truncated field length at byte 0 of 2')
  })
})

describe('data frames streamed', () => {
  it('hand on each D payload in the pieces it arrived in, without copying, and other frames whole', () => {
    const data = Buffer.alloc(1000, 9)
    const stream = Buffer.concat([encodeFrame(4, 'D', data), encodeFrame(4, 'K', Buffer.from('ok'))])
    const parts: Buffer[] = []
    const frames: Frame[] = []
    const decoder = new FrameDecoder(frame => frames.push(frame), (id, part) => { expect(id).toBe(4); parts.push(part) })
    const chunks = [stream.subarray(0, 100), stream.subarray(100, 600), stream.subarray(600)]
    for (const chunk of chunks) decoder.push(chunk)
    expect(parts.map(part => part.length)).toEqual([91, 500, 409])
    // Views of the received chunks: the same memory.
    expect(parts[1]!.buffer).toBe(chunks[1]!.buffer)
    expect(Buffer.concat(parts)).toEqual(data)
    expect(frames.map(frame => [frame.id, frame.code, frame.payload.toString()])).toEqual([[4, 'K', 'ok']])
  })
})

/** A header alone: its payload length, id and code (what a planted server announces). */
function header(length: number, id: number, code: string): Buffer {
  const out = Buffer.alloc(9)
  out.writeUInt32LE(length, 0)
  out.writeUInt32LE(id, 4)
  out[8] = code.charCodeAt(0)
  return out
}

describe('the frame bound', () => {
  it('is 1 MiB: a frame of exactly 1 MiB decodes, D frames streamed or not', () => {
    expect(MAX_REPLY_FRAME_BYTES).toBe(1048576)
    const big = Buffer.alloc(MAX_REPLY_FRAME_BYTES, 3)
    expect(decodeAll([encodeFrame(1, 'K', big)]).map(frame => frame.payload.length)).toEqual([1048576])
    let streamed = 0
    const decoder = new FrameDecoder(() => undefined, (_id, part) => { streamed += part.length })
    decoder.push(encodeFrame(2, 'D', big))
    expect(streamed).toBe(1048576)
  })

  it('refuses a longer header at once, keeps nothing after it, and refuses every later push', () => {
    for (const code of ['K', 'D']) {
      const frames: Frame[] = []
      const decoder = new FrameDecoder(frame => frames.push(frame), () => undefined)
      let thrown: unknown
      try {
        decoder.push(Buffer.concat([encodeFrame(1, 'A'), header(0xfffffff0, 2, code), Buffer.alloc(65536)]))
      } catch (error) {
        thrown = error
      }
      expect(thrown).toBeInstanceOf(FrameTooLargeError)
      expect((thrown as Error).message).toBe(`a "${code}" frame of 4294967280 bytes was announced (at most 1048576)`)
      expect(frames.map(frame => frame.id)).toEqual([1])
      expect(decoder.pending).toBe(0)
      expect(() => decoder.push(Buffer.alloc(65536))).toThrow(thrown as Error)
      expect(decoder.pending).toBe(0)
      expect(() => new FrameDecoder(() => undefined, undefined, 16).push(header(17, 1, 'K'))).toThrow('a "K" frame of 17 bytes was announced (at most 16)')
    }
  })
})

/** A planted server on a pair of in-memory streams: it says hello, then writes what a test gives. */
async function planted(): Promise<{ channel: ServerChannel; say(bytes: Buffer): void; closed(): boolean }> {
  const stdout = new PassThrough()
  const stdin = new PassThrough()
  stdin.resume()
  let closed = false
  const opening = ServerChannel.open({ stdin, stdout, close: () => { closed = true } }, 'a test world')
  stdout.write(encodeFrame(0, 'H', encodeFields(['dsh-fsd', PROTOCOL_VERSION, '1000', '1000', '42', 'x86_64', '022'])))
  return { channel: await opening, say: bytes => { stdout.write(bytes) }, closed: () => closed }
}

describe('a server that breaks the protocol (a planted program that says hello)', () => {
  it('announcing a 0xFFFFFFF0-byte frame and streaming zeros: every request in flight rejects with ServerProtocolError, the channel ends and holds nothing', async () => {
    const server = await planted()
    const requests = [server.channel.request('s', ['/etc/hostname', '1']), server.channel.request('o', ['/etc/hostname', '100'], { onData: () => undefined, maxData: 100 })]
    server.say(header(0xfffffff0, 1, 'K'))
    for (let i = 0; i < 16; i += 1) server.say(Buffer.alloc(1024 * 1024))
    for (const request of requests) {
      const error = await request.then(() => undefined, (reason: unknown) => reason)
      expect(error).toBeInstanceOf(ServerProtocolError)
      expect((error as Error).message).toBe('the file server in a test world broke its protocol: a "K" frame of 4294967280 bytes was announced (at most 1048576); its channel is closed')
    }
    expect(server.channel.alive).toBe(false)
    expect(server.closed()).toBe(true)
    await expect(server.channel.request('p', [])).rejects.toBeInstanceOf(ServerProtocolError)
    // As the file system reports it: FS_IO_ERROR, the server named.
    const fsError = fsErrorOf(await requests[0]!.catch((reason: unknown) => reason), { verb: 'stat', displayPath: '/etc/hostname' })
    expect([fsError.code, fsError.message]).toEqual(['FS_IO_ERROR', 'cannot stat "/etc/hostname": the world\'s file server broke its protocol and was ended (the file server in a test world broke its protocol: a "K" frame of 4294967280 bytes was announced (at most 1048576); its channel is closed)'])
  })

  it('more data for a request than it asked for (maxData), or data for a request that asked for none, ends the channel', async () => {
    for (const maxData of [8, undefined]) {
      const server = await planted()
      const received: number[] = []
      const read = maxData === undefined ? server.channel.request('s', ['/x', '1']) : server.channel.request('o', ['/x', '8'], { onData: part => received.push(part.length), maxData })
      server.say(encodeFrame(1, 'D', Buffer.alloc(8)))
      server.say(encodeFrame(1, 'D', Buffer.alloc(1)))
      const error = await read.then(() => undefined, (reason: unknown) => reason)
      expect(error).toBeInstanceOf(ServerProtocolError)
      expect((error as Error).message).toBe('the file server in a test world sent more data for request 1 than it asked for; its channel is closed')
      expect(received).toEqual(maxData === undefined ? [] : [8])
    }
  })

  it('a malformed error reply or an unknown reply code ends the channel; a well-formed refusal does not', async () => {
    const server = await planted()
    const refused = server.channel.request('s', ['/x', '1'])
    server.say(encodeFrame(1, 'E', encodeFields(['ENOENT', 'no such file'])))
    expect(await refused.catch((reason: unknown) => reason)).toBeInstanceOf(ServerRefusal)
    expect(server.channel.alive).toBe(true)
    const malformed = server.channel.request('s', ['/x', '1'])
    server.say(encodeFrame(2, 'E', Buffer.from([200, 0, 0, 0])))
    expect(((await malformed.catch((reason: unknown) => reason)) as Error).message).toBe('the file server in a test world broke its protocol: field of 200 bytes at byte 0 runs past the 4-byte payload; its channel is closed')
    const other = await planted()
    const unknown = other.channel.request('s', ['/x', '1'])
    other.say(encodeFrame(1, 'Z'))
    expect(((await unknown.catch((reason: unknown) => reason)) as Error).message).toBe('the file server in a test world sent an unknown reply "Z"; its channel is closed')
  })

  it('frames for no request in flight do not hold the silence bound off', async () => {
    const stdout = new PassThrough()
    const stdin = new PassThrough()
    stdin.resume()
    const opening = ServerChannel.open({ stdin, stdout, close: () => undefined }, 'a test world', { silenceMs: 300 })
    stdout.write(encodeFrame(0, 'H', encodeFields(['dsh-fsd', PROTOCOL_VERSION, '1000', '1000', '42', 'x86_64', '022'])))
    const channel = await opening
    const request = channel.request('s', ['/x', '1'])
    // Replies to requests never made keep coming, more often than the bound.
    const junk = setInterval(() => stdout.write(encodeFrame(999, 'K', Buffer.alloc(100))), 20)
    try {
      await expect(request).rejects.toThrow('the file server in a test world did not answer within 300 ms (frozen or stuck: a paused container, a stopped process); its channel is closed')
    } finally {
      clearInterval(junk)
    }
  })
})
