/**
 * The wire format of the world-side network relay (world/relay-net/relay-net.c, `dsh-relay`),
 * both directions: frames, the fields inside them, and the constants of its flow control. Pure;
 * no streams.
 *
 * A frame is a 9-byte header (u32 payload length, u32 id, u8 code; little-endian) and its
 * payload, at most {@link MAX_FRAME_BYTES} in either direction. A payload of fields is a
 * sequence of (u32 length, bytes). Client to relay: `L` listen (HOST, PORT), `U` stop
 * listening, `C` connect (HOST, PORT), `D` data, `F` end of sending, `X` abort, `W` credit (u32).
 * Relay to client: the first frame `H` (hello: "dsh-relay", protocol, arch), `A` accepted
 * (LISTENER, PEER_HOST, PEER_PORT; the relay's stream ids have {@link ACCEPTED_ID_BIT} set),
 * `K` ok, `E` error (ERRNO_NAME, MESSAGE), `D`, `F`, `X` (ERRNO_NAME, MESSAGE), `W`.
 * Each direction of each stream has a window of {@link RELAY_WINDOW_BYTES}, full at the start:
 * a sender has at most that many `D` bytes not yet credited by a `W`.
 * @module dsh-remote-worlds/network/relay/protocol
 */

/** Bytes of a frame header. */
export const FRAME_HEADER_BYTES = 9

/** The protocol version this client speaks (the hello's second field; relay-net.c `PROTOCOL`). */
export const RELAY_PROTOCOL_VERSION = '1'

/** The first field of the relay's hello. */
export const RELAY_HELLO_NAME = 'dsh-relay'

/**
 * The largest payload of a frame, either direction (bytes; relay-net.c `MAX_FRAME`): 1 MiB. The
 * relay's largest are `D` frames of {@link RELAY_DATA_CHUNK_BYTES}; a longer announced length
 * is not this protocol.
 */
export const MAX_FRAME_BYTES = 1 << 20

/** Each direction's window of each stream (bytes; relay-net.c `WINDOW`): 256 KiB. */
export const RELAY_WINDOW_BYTES = 262_144

/** The largest `D` payload either side sends (bytes; relay-net.c `DATA_CHUNK`): 64 KiB. */
export const RELAY_DATA_CHUNK_BYTES = 65_536

/** A receiver credits at least this many delivered bytes at once, or all of them when its buffer drained (bytes). */
export const RELAY_CREDIT_BATCH_BYTES = 65_536

/** Set in the ids of streams the relay accepted; clear in the ids the client chooses. */
export const ACCEPTED_ID_BIT = 0x8000_0000

/** The largest id the client chooses for a listener or a stream (ids start at 1). */
export const MAX_CLIENT_ID = 0x7fff_ffff

/**
 * The relay broke its protocol (a frame that cannot be decoded, an unknown code, data past its
 * window): a broken build or not the relay. Its channel is closed with this.
 */
export class RelayProtocolError extends Error {
  readonly code: string = 'RELAY_PROTOCOL'
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'RelayProtocolError'
  }
}

/** A frame header announced more than {@link MAX_FRAME_BYTES}: not the relay's protocol. */
export class RelayFrameTooLargeError extends RelayProtocolError {
  override readonly code = 'RELAY_FRAME_TOO_LARGE'
  /**
   * @param bytes - the announced payload length.
   * @param limit - the decoder's bound (bytes).
   * @param frameCode - the frame's code letter.
   */
  constructor(readonly bytes: number, readonly limit: number, readonly frameCode: string) {
    super(`the relay announced a ${JSON.stringify(frameCode)} frame of ${bytes} bytes (at most ${limit}): not dsh-relay's protocol`)
    this.name = 'RelayFrameTooLargeError'
  }
}

/** One decoded frame. */
export interface RelayFrame {
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
 * Decode a payload of fields (views of the payload).
 * @throws RelayProtocolError when a field's length runs past the payload.
 */
export function decodeFields(payload: Buffer): Buffer[] {
  const fields: Buffer[] = []
  let offset = 0
  while (offset < payload.length) {
    if (offset + 4 > payload.length) throw new RelayProtocolError(`truncated field length at byte ${offset} of a ${payload.length}-byte payload`)
    const length = payload.readUInt32LE(offset)
    if (offset + 4 + length > payload.length) throw new RelayProtocolError(`a field of ${length} bytes at byte ${offset} runs past the ${payload.length}-byte payload`)
    fields.push(payload.subarray(offset + 4, offset + 4 + length))
    offset += 4 + length
  }
  return fields
}

/** Decode a payload of fields as UTF-8 strings. @throws RelayProtocolError as {@link decodeFields}. */
export function decodeTextFields(payload: Buffer): string[] {
  return decodeFields(payload).map(field => field.toString('utf8'))
}

/**
 * Encode one frame (the payload is copied in after the header).
 * @throws RangeError for a payload over {@link MAX_FRAME_BYTES} (the relay would refuse it and exit).
 */
export function encodeFrame(id: number, code: string, payload: Uint8Array = Buffer.alloc(0)): Buffer {
  if (payload.length > MAX_FRAME_BYTES) throw new RangeError(`a ${JSON.stringify(code)} frame of ${payload.length} bytes (at most ${MAX_FRAME_BYTES})`)
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.length)
  frame.writeUInt32LE(payload.length, 0)
  frame.writeUInt32LE(id >>> 0, 4)
  frame.writeUInt8(code.charCodeAt(0), 8)
  frame.set(payload, FRAME_HEADER_BYTES)
  return frame
}

/** A `W` frame granting `bytes` of credit on stream `id`. */
export function encodeCredit(id: number, bytes: number): Buffer {
  const payload = Buffer.allocUnsafe(4)
  payload.writeUInt32LE(bytes, 0)
  return encodeFrame(id, 'W', payload)
}

/**
 * The credit of a `W` payload (bytes).
 * @throws RelayProtocolError when the payload is not 4 bytes.
 */
export function decodeCredit(payload: Buffer): number {
  if (payload.length !== 4) throw new RelayProtocolError(`a W frame of ${payload.length} bytes (4 expected)`)
  return payload.readUInt32LE(0)
}

/**
 * Splits a byte stream into frames. Chunks may cut frames anywhere. A frame that arrived in one
 * chunk is handed on as a view of it (no copy), one spread over several chunks is copied once.
 * A header announcing more than the bound throws {@link RelayFrameTooLargeError} at once
 * (nothing of that frame is buffered), and every later push throws it again.
 */
export class RelayFrameDecoder {
  private chunks: Buffer[] = []
  private head = 0
  private buffered = 0
  /** The frame being received, once its header is in. */
  private current: { id: number; code: string; length: number } | undefined
  private broken: RelayFrameTooLargeError | undefined

  /**
   * @param onFrame - called once per complete frame, in order; it may replace itself through
   *   {@link RelayFrameDecoder.handler}.
   * @param maxPayload - the bound of one frame's payload (bytes; default {@link MAX_FRAME_BYTES}).
   */
  constructor(public handler: (frame: RelayFrame) => void, private readonly maxPayload = MAX_FRAME_BYTES) {}

  /**
   * Add received bytes; what is complete is delivered before this returns.
   * @throws RelayFrameTooLargeError for a header past the bound (and for every push after it);
   *   whatever the handler throws.
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
          this.broken = new RelayFrameTooLargeError(length, this.maxPayload, code)
          this.chunks = []
          this.head = 0
          this.buffered = 0
          throw this.broken
        }
        this.current = { id: header.readUInt32LE(4), code, length }
      }
      if (this.buffered < this.current.length) return
      const frame = this.current
      this.current = undefined
      this.handler({ id: frame.id, code: frame.code, payload: this.take(frame.length) })
    }
  }

  /** Bytes received but not yet delivered. */
  get pending(): number {
    return this.buffered
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

  /** The first chunk's bytes, at most `limit` of them, removed (a view). */
  private takeUpTo(limit: number): Buffer {
    const first = this.chunks[this.head]!
    let part: Buffer
    if (first.length <= limit) {
      part = first
      this.head += 1
      if (this.head === this.chunks.length) {
        this.chunks = []
        this.head = 0
      } else if (this.head >= 1024) {
        this.chunks = this.chunks.slice(this.head)
        this.head = 0
      }
    } else {
      part = first.subarray(0, limit)
      this.chunks[this.head] = first.subarray(limit)
    }
    this.buffered -= part.length
    return part
  }
}
