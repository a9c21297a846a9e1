/**
 * The wire format of the world file server (server/fsd.c), both directions: frames and the
 * fields inside them. Pure; no streams.
 *
 * A frame is a 9-byte header (u32 payload length, u32 request id, u8 code; little-endian) and
 * its payload. A payload of fields is a sequence of (u32 length, bytes). Request codes are the
 * operations (`r` resolve, `s` stat, `o` read, `f` open, `g` pread, `c` close, `l` list,
 * `w` write, `p` ping, `q` quit); replies are `K` ok, `A` absent, `D` data (one part of a longer
 * reply: a read's bytes, a listing's entries), `E` error (fields: code, message), and the
 * server's first frame `H` (hello).
 * @module dsh-remote-worlds/files/protocol
 */

/** Bytes of a frame header. */
export const FRAME_HEADER_BYTES = 9

/** The protocol version this client speaks (the hello's second field). */
export const PROTOCOL_VERSION = '1'

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
 * @throws Error when a field's length runs past the payload (a protocol fault).
 */
export function decodeFields(payload: Buffer): Buffer[] {
  const fields: Buffer[] = []
  let offset = 0
  while (offset < payload.length) {
    if (offset + 4 > payload.length) throw new Error(`truncated field length at byte ${offset} of ${payload.length}`)
    const length = payload.readUInt32LE(offset)
    if (offset + 4 + length > payload.length) throw new Error(`field of ${length} bytes at byte ${offset} runs past the ${payload.length}-byte payload`)
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
 * Splits a byte stream into frames. Chunks may cut frames anywhere; a payload that arrived in
 * one chunk is handed on as a view of it (no copy), and a frame spread over several chunks is
 * copied once (linear in the bytes, whatever the chunk sizes).
 */
export class FrameDecoder {
  private chunks: Buffer[] = []
  private buffered = 0
  /** Bytes of the frame being received (header included), once its header is in. */
  private need: number | undefined

  /** @param onFrame - called once per complete frame, in order. */
  constructor(private readonly onFrame: (frame: Frame) => void) {}

  /** Add received bytes; complete frames are delivered before this returns. */
  push(chunk: Buffer): void {
    if (chunk.length === 0) return
    this.chunks.push(chunk)
    this.buffered += chunk.length
    for (;;) {
      if (this.need === undefined) {
        if (this.buffered < FRAME_HEADER_BYTES) return
        this.need = FRAME_HEADER_BYTES + this.header().readUInt32LE(0)
      }
      if (this.buffered < this.need) return
      const frame = this.take(this.need)
      this.need = undefined
      this.onFrame({ id: frame.readUInt32LE(4), code: String.fromCharCode(frame[8]!), payload: frame.subarray(FRAME_HEADER_BYTES) })
    }
  }

  /** Bytes received but not yet part of a complete frame. */
  get pending(): number {
    return this.buffered
  }

  /** The first header's bytes (at least {@link FRAME_HEADER_BYTES} are buffered). */
  private header(): Buffer {
    const first = this.chunks[0]!
    if (first.length >= FRAME_HEADER_BYTES) return first
    const parts: Buffer[] = []
    let have = 0
    for (const chunk of this.chunks) {
      parts.push(chunk)
      have += chunk.length
      if (have >= FRAME_HEADER_BYTES) break
    }
    return Buffer.concat(parts, have)
  }

  /** Remove and return the next `bytes` bytes (that many are buffered). */
  private take(bytes: number): Buffer {
    const first = this.chunks[0]!
    this.buffered -= bytes
    if (first.length >= bytes) {
      if (first.length === bytes) this.chunks.shift()
      else this.chunks[0] = first.subarray(bytes)
      return first.subarray(0, bytes)
    }
    const out = Buffer.allocUnsafe(bytes)
    let filled = 0
    let index = 0
    while (filled < bytes) {
      const chunk = this.chunks[index]!
      const used = Math.min(chunk.length, bytes - filled)
      out.set(chunk.subarray(0, used), filled)
      filled += used
      if (used === chunk.length) index += 1
      else this.chunks[index] = chunk.subarray(used)
    }
    this.chunks = this.chunks.slice(index)
    return out
  }
}
