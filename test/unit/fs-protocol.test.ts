/**
 * The file server's wire format (src/files/protocol.ts): frames split anywhere by the transport
 * arrive whole and in order, and fields round-trip any bytes.
 */
import { describe, expect, it } from 'vitest'
import { type Frame, FrameDecoder, decodeFields, encodeFields, encodeFrame } from '../../src/files/protocol.ts'

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
