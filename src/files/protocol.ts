/**
 * The wire format of the world file server (world/fsd/fsd.c), both directions: frames and the
 * fields inside them. Pure; no streams.
 *
 * A frame is a 9-byte header (u32 payload length, u32 request id, u8 code; little-endian) and
 * its payload. A payload of fields is a sequence of (u32 length, bytes). Request codes are the
 * operations (`r` resolve, `s` stat, `o` read, `f` open, `g` pread, `c` close, `l` list,
 * `w` write, `p` ping, `q` quit); replies are `K` ok, `A` absent, `D` data (one part of a longer
 * reply: a read's bytes, a listing's entries), `E` error (fields: code, message), and the
 * server's first frame `H` (hello).
 *
 * Every frame the server sends fits {@link MAX_REPLY_FRAME_BYTES} (fsd.c `MAX_REPLY`), and the
 * decoder refuses a longer one before it buffers any of it: a planted or broken server cannot
 * make the client hold more than one frame's bound.
 * The frame and field codec is the one the package's world protocols share
 * (providers/remote/frames.ts); this module names the file server's codes and bound.
 * @module dsh-remote-worlds/files/protocol
 */
import { MAX_FRAME_PAYLOAD_BYTES } from '../providers/remote/frames.ts'

export { FRAME_HEADER_BYTES, type Frame, FrameDecoder, FrameTooLargeError, decodeFields, encodeFields, encodeFrame } from '../providers/remote/frames.ts'

/** The protocol version this client speaks (the hello's second field; fsd.c `PROTOCOL`). */
export const PROTOCOL_VERSION = '2'

/**
 * The largest payload of a frame the server sends (bytes; fsd.c `MAX_REPLY`): 1 MiB, as the
 * PTY protocol's frames (pty-holder/protocol.ts). The largest legitimate ones are a read's
 * `D` frames and a `pread` reply (one 256 KiB chunk each), a listing's `D` frames (256 KiB plus
 * one entry: a name and a realpath, under 5 KiB) and a `resolve` reply (a key of at most 8 KiB
 * and at most 256 KiB of prefetched content): four times room. A write's replaced content
 * (up to the diff basis bound, 10 MiB by default) comes as `D` frames of 256 KiB.
 */
export const MAX_REPLY_FRAME_BYTES = MAX_FRAME_PAYLOAD_BYTES
