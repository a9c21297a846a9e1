/**
 * The wire format of the world-side network relay (world/relay-net/relay-net.c, `dsh-relay`),
 * both directions: frames, the fields inside them, and the constants of its flow control. Pure;
 * no streams.
 *
 * A frame is a 9-byte header (u32 payload length, u32 id, u8 code; little-endian) and its
 * payload, at most {@link MAX_FRAME_BYTES} in either direction. A payload of fields is a
 * sequence of (u32 length, bytes). Client to relay: `L` listen (HOST, PORT), `U` stop
 * listening, `C` connect (HOST, PORT), `D` data, `F` end of sending, `X` abort, `W` credit (u32).
 * Relay to client: the first frame `H` (hello: "dsh-relay", protocol, arch, pid, the
 * `net:[INODE]` and `user:[INODE]` of the namespaces it runs in), `A` accepted
 * (LISTENER, PEER_HOST, PEER_PORT; the relay's stream ids have {@link ACCEPTED_ID_BIT} set),
 * `K` ok, `E` error (ERRNO_NAME, MESSAGE), `D`, `F`, `X` (ERRNO_NAME, MESSAGE), `W`.
 * Each direction of each stream has a window of {@link RELAY_WINDOW_BYTES}, full at the start:
 * a sender has at most that many `D` bytes not yet credited by a `W`. The frame and field codec
 * is the one the package's world protocols share (providers/remote/frames.ts).
 * @module dsh-remote-worlds/network/relay/protocol
 */
import { type Frame, FrameDecoder, MAX_FRAME_PAYLOAD_BYTES, decodeFields as decodeFrameFields, encodeFrame as encodeSharedFrame } from '../../providers/remote/frames.ts'

export { FRAME_HEADER_BYTES, encodeFields } from '../../providers/remote/frames.ts'

/** The protocol version this client speaks (the hello's second field; relay-net.c `PROTOCOL`). */
export const RELAY_PROTOCOL_VERSION = '3'

/** The first field of the relay's hello. */
export const RELAY_HELLO_NAME = 'dsh-relay'

/**
 * The largest payload of a frame, either direction (bytes; relay-net.c `MAX_FRAME`): 1 MiB. The
 * relay's largest are `D` frames of {@link RELAY_DATA_CHUNK_BYTES}; a longer announced length
 * is not this protocol.
 */
export const MAX_FRAME_BYTES = MAX_FRAME_PAYLOAD_BYTES

/** Each direction's window of each stream (bytes; relay-net.c `WINDOW`, which says why): 4 MiB. */
export const RELAY_WINDOW_BYTES = 4_194_304

/** The largest `D` payload either side sends (bytes; relay-net.c `DATA_CHUNK`): 64 KiB. */
export const RELAY_DATA_CHUNK_BYTES = 65_536

/** A receiver credits delivered bytes in batches of at least this many (bytes; relay-net.c `CREDIT_BATCH`): 256 KiB, a sixteenth of the window. */
export const RELAY_CREDIT_BATCH_BYTES = 262_144

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

/** One decoded frame (codes: see the module comment). */
export type RelayFrame = Frame

/**
 * Decode a payload of fields (views of the payload).
 * @throws RelayProtocolError when a field's length runs past the payload.
 */
export function decodeFields(payload: Buffer): Buffer[] {
  return decodeFrameFields(payload, message => new RelayProtocolError(message))
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
  return encodeSharedFrame(id >>> 0, code, payload)
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
 * Splits a byte stream into frames: the shared decoder (providers/remote/frames.ts), whose
 * handler may be replaced ({@link RelayFrameDecoder.handler}). A header announcing more than the
 * bound throws {@link RelayFrameTooLargeError} at once (nothing of that frame is buffered), and
 * every later push throws it again.
 */
export class RelayFrameDecoder {
  private readonly decoder: FrameDecoder

  /**
   * @param handler - called once per complete frame, in order.
   * @param maxPayload - the bound of one frame's payload (bytes; default {@link MAX_FRAME_BYTES}).
   */
  constructor(public handler: (frame: RelayFrame) => void, maxPayload = MAX_FRAME_BYTES) {
    this.decoder = new FrameDecoder(frame => this.handler(frame), undefined, maxPayload, (bytes, limit, code) => new RelayFrameTooLargeError(bytes, limit, code))
  }

  /**
   * Add received bytes; what is complete is delivered before this returns.
   * @throws RelayFrameTooLargeError for a header past the bound (and for every push after it);
   *   whatever the handler throws.
   */
  push(chunk: Buffer): void {
    this.decoder.push(chunk)
  }

  /** Bytes received but not yet delivered. */
  get pending(): number {
    return this.decoder.pending
  }
}
