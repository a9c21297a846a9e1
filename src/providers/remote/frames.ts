/**
 * The frame format the package's binary world protocols share (dsh-fsd's, src/files/protocol.ts;
 * dsh-relay's, src/network/relay/protocol.ts): a 9-byte header (u32 payload length, u32 id, u8
 * code; little-endian) and its payload; a payload of fields is a sequence of (u32 length,
 * bytes). Pure; no streams. Each protocol names its codes and its bound; the decoder refuses a
 * header past the bound before it buffers any of that frame.
 * @module dsh-remote-worlds/providers/remote/frames
 */

/** Bytes of a frame header. */
export const FRAME_HEADER_BYTES = 9

/** The default bound of one frame's payload (bytes): 1 MiB, the bound of every protocol of this package (fsd's replies, the relay's frames, the PTY protocol's). */
export const MAX_FRAME_PAYLOAD_BYTES = 1 << 20

/** A frame header announced more than the decoder's bound: not the protocol it speaks. */
export class FrameTooLargeError extends Error {
  /**
   * @param bytes - the announced payload length.
   * @param limit - the decoder's bound.
   * @param code - the frame's code letter.
   */
  constructor(readonly bytes: number, readonly limit: number, readonly code: string) {
    super(`a ${JSON.stringify(code)} frame of ${bytes} bytes was announced (at most ${limit})`)
    this.name = 'FrameTooLargeError'
  }
}

/** One decoded frame. */
export interface Frame {
  id: number
  /** One ASCII letter (see the module comment). */
  code: string
  payload: Buffer
}

/**
 * Encode a sequence of fields.
 * @param fields - strings are encoded as UTF-8.
 */
export function encodeFields(fields: readonly (string | Uint8Array)[]): Buffer {
  const parts = fields.map(field => typeof field === 'string' ? Buffer.from(field, 'utf8') : field)
  const out = Buffer.allocUnsafe(parts.reduce((sum, part) => sum + 4 + part.length, 0))
  let offset = 0
  for (const part of parts) {
    out.writeUInt32LE(part.length, offset)
    out.set(part, offset + 4)
    offset += 4 + part.length
  }
  return out
}

/**
 * Decode a payload of fields.
 * @param fault - makes the error thrown for a malformed payload (default: a plain Error).
 * @throws what `fault` makes when a field's length runs past the payload (a protocol fault).
 */
export function decodeFields(payload: Buffer, fault: (message: string) => Error = message => new Error(message)): Buffer[] {
  const fields: Buffer[] = []
  let offset = 0
  while (offset < payload.length) {
    if (offset + 4 > payload.length) throw fault(`truncated field length at byte ${offset} of ${payload.length}`)
    const length = payload.readUInt32LE(offset)
    if (offset + 4 + length > payload.length) throw fault(`field of ${length} bytes at byte ${offset} runs past the ${payload.length}-byte payload`)
    fields.push(payload.subarray(offset + 4, offset + 4 + length))
    offset += 4 + length
  }
  return fields
}

/** Encode one frame. */
export function encodeFrame(id: number, code: string, payload: Uint8Array = Buffer.alloc(0)): Buffer {
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length)
  frame.writeUInt32LE(payload.length, 0)
  frame.writeUInt32LE(id, 4)
  frame.writeUInt8(code.charCodeAt(0), 8)
  frame.set(payload, FRAME_HEADER_BYTES)
  return frame
}

/**
 * Splits a byte stream into frames. Chunks may cut frames anywhere. A frame that arrived in one
 * chunk is handed on as a view of it (no copy), one spread over several chunks is copied once.
 * With `onData`, the payload of each `D` frame is handed on instead in the pieces it arrived in
 * (views, no copy at all): a 100 MB read is then never joined into frames first.
 * A header announcing more than the bound throws {@link FrameTooLargeError} at once (nothing of
 * that frame is buffered), and every later push throws it again: the stream is not decodable.
 */
export class FrameDecoder {
  private chunks: Buffer[] = []
  private head = 0
  private buffered = 0
  /** The frame being received, once its header is in. */
  private current: { id: number; code: string; remaining: number; streamed: boolean } | undefined
  /** Set once a header broke the bound. */
  private broken: Error | undefined

  /**
   * @param onFrame - called once per complete frame, in order (`D` frames too, unless `onData`).
   * @param onData - called with each piece of a `D` frame's payload, in order.
   * @param maxPayload - the bound of one frame's payload (bytes; default {@link MAX_FRAME_PAYLOAD_BYTES}).
   * @param tooLarge - makes the error for a header past the bound (default {@link FrameTooLargeError}).
   */
  constructor(
    private readonly onFrame: (frame: Frame) => void,
    private readonly onData?: ((id: number, part: Buffer) => void) | undefined,
    private readonly maxPayload: number = MAX_FRAME_PAYLOAD_BYTES,
    private readonly tooLarge: (bytes: number, limit: number, code: string) => Error = (bytes, limit, code) => new FrameTooLargeError(bytes, limit, code),
  ) {}

  /**
   * Add received bytes; what is complete is delivered before this returns.
   * @throws what `tooLarge` makes for a header past the bound (and for every push after it).
   */
  push(chunk: Buffer): void {
    if (this.broken !== undefined) throw this.broken
    if (chunk.length === 0) return
    this.chunks.push(chunk)
    this.buffered += chunk.length
    for (;;) {
      if (this.current === undefined) {
        if (this.buffered < FRAME_HEADER_BYTES) return
        const header = this.take(FRAME_HEADER_BYTES)
        const code = String.fromCharCode(header[8]!)
        const length = header.readUInt32LE(0)
        if (length > this.maxPayload) {
          // Nothing after this header is kept: the queue is dropped with the stream.
          this.broken = this.tooLarge(length, this.maxPayload, code)
          this.chunks = []
          this.head = 0
          this.buffered = 0
          throw this.broken
        }
        this.current = { id: header.readUInt32LE(4), code, remaining: length, streamed: code === 'D' && this.onData !== undefined }
      }
      const frame = this.current
      if (frame.streamed) {
        while (frame.remaining > 0 && this.buffered > 0) {
          const part = this.takeUpTo(frame.remaining)
          frame.remaining -= part.length
          this.onData!(frame.id, part)
        }
        if (frame.remaining > 0) return
        this.current = undefined
        continue
      }
      if (this.buffered < frame.remaining) return
      this.current = undefined
      this.onFrame({ id: frame.id, code: frame.code, payload: this.take(frame.remaining) })
    }
  }

  /** Bytes received but not yet delivered. */
  get pending(): number {
    return this.buffered
  }

  /** The first chunk's bytes, at most `limit` of them, removed (a view). */
  private takeUpTo(limit: number): Buffer {
    const first = this.chunks[this.head]!
    let part: Buffer
    if (first.length <= limit) {
      part = first
      this.drop()
    } else {
      part = first.subarray(0, limit)
      this.chunks[this.head] = first.subarray(limit)
    }
    this.buffered -= part.length
    return part
  }

  /** Remove and return the next `bytes` bytes (that many are buffered): a view when they are in one chunk. */
  private take(bytes: number): Buffer {
    if (bytes === 0) return Buffer.alloc(0)
    const first = this.chunks[this.head]!
    if (first.length >= bytes) return this.takeUpTo(bytes)
    const out = Buffer.allocUnsafe(bytes)
    let filled = 0
    while (filled < bytes) {
      const part = this.takeUpTo(bytes - filled)
      out.set(part, filled)
      filled += part.length
    }
    return out
  }

  /** Drop the first chunk (compacting the queue now and then, so no shift is ever quadratic). */
  private drop(): void {
    this.head += 1
    if (this.head === this.chunks.length) {
      this.chunks = []
      this.head = 0
    } else if (this.head >= 1024) {
      this.chunks = this.chunks.slice(this.head)
      this.head = 0
    }
  }
}

/**
 * The other frame shape of the world's C programs (dsh-pty's, world/dsh-pty/wire.h; dsh-job's,
 * world/dsh-job/dsh-job.c): a 5-byte header (u8 code, u32 payload length, little-endian) and its
 * payload. Splits a byte stream into them.
 */
export class CodedFrameSplitter {
  private buffer: Buffer = Buffer.alloc(0)

  /** @param maxPayload - the bound of one payload (bytes); a longer one is not the protocol. */
  constructor(private readonly maxPayload: number, private readonly program: string) {}

  /**
   * Consume one chunk.
   * @returns the frames it completed, in order (payloads are views of the stream's bytes).
   * @throws RangeError for a payload past the bound (not `program` speaking).
   */
  push(chunk: Buffer): { code: number; payload: Buffer }[] {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk])
    const frames: { code: number; payload: Buffer }[] = []
    let at = 0
    while (this.buffer.length - at >= 5) {
      const length = this.buffer.readUInt32LE(at + 1)
      if (length > this.maxPayload) throw new RangeError(`${this.program} sent a frame of ${length} bytes (at most ${this.maxPayload}): the stream is not its protocol`)
      if (this.buffer.length - at < 5 + length) break
      frames.push({ code: this.buffer[at]!, payload: this.buffer.subarray(at + 5, at + 5 + length) })
      at += 5 + length
    }
    this.buffer = at === this.buffer.length ? Buffer.alloc(0) : this.buffer.subarray(at)
    return frames
  }
}
