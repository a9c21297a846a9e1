/**
 * The frames between the client and dsh-pty, the terminal's world-side parent (dsh-pty.c states
 * the protocol; this is its client half). Every frame is u8 type, u32 payload length
 * (little-endian), payload.
 * @module dsh-remote-worlds/providers/remote/pty-holder/protocol
 */

import type { ForegroundFacts } from '../control-channel.ts'

/** The largest frame dsh-pty accepts (bytes, header excluded; MAX_FRAME in dsh-pty.c). */
export const MAX_HOLDER_FRAME = 1 << 20

/** A frame from dsh-pty, decoded. */
export type HolderFrame =
  /** `H`: the holder runs; its version line. */
  | { type: 'hello'; text: string }
  /** `P`: the shell was forked; its pid and the holder's own, in the world's pid namespace. */
  | { type: 'started'; pid: number; holder: number }
  /** `O`: PTY output bytes. */
  | { type: 'output'; data: Buffer }
  /** `X`: the shell's wait status: an exit code, or the number of the signal that killed it. */
  | { type: 'exit'; code: number; signal: null } | { type: 'exit'; code: null; signal: number }
  /** `E`: why no shell could start. */
  | { type: 'error'; text: string }
  /** `k`: the answer to a signal request (see {@link signalFrame}). */
  | { type: 'signalled'; id: number; outcome: 'signalled' | 'refused' | 'failed' | 'gone'; pgid: number }
  /** `i`: the input bytes the holder accepted in all (queued for the PTY). */
  | { type: 'accepted'; total: number }
  /** `f`: the answer to a probe (see {@link probeFrame}); `facts` undefined when the program is gone. */
  | { type: 'probed'; id: number; facts: ForegroundFacts | undefined }
  /** A type this client does not know (a newer holder); skipped. */
  | { type: 'unknown'; code: number }

function frame(type: string, payload: Buffer): Buffer {
  const header = Buffer.alloc(5)
  header[0] = type.charCodeAt(0)
  header.writeUInt32LE(payload.length, 1)
  return Buffer.concat([header, payload])
}

/**
 * The spawn frame: the PTY's window size (character cells), the output the client can take at
 * once (bytes), and the script dsh-pty runs as `/bin/sh -c SCRIPT` on the new PTY.
 * @throws RangeError when the script does not fit one frame.
 */
export function spawnFrame(rows: number, cols: number, credit: number, script: string): Buffer {
  const text = Buffer.from(script, 'utf8')
  if (text.length + 8 > MAX_HOLDER_FRAME) throw new RangeError(`a terminal script of ${text.length} bytes does not fit a dsh-pty frame (${MAX_HOLDER_FRAME} bytes)`)
  const head = Buffer.alloc(8)
  head.writeUInt16LE(rows, 0)
  head.writeUInt16LE(cols, 2)
  head.writeUInt32LE(credit, 4)
  return frame('S', Buffer.concat([head, text]))
}

/** Input frames for `data`, split so that none exceeds {@link MAX_HOLDER_FRAME}. */
export function inputFrames(data: Buffer): Buffer {
  if (data.length <= MAX_HOLDER_FRAME) return frame('I', data)
  const parts: Buffer[] = []
  for (let at = 0; at < data.length; at += MAX_HOLDER_FRAME) parts.push(frame('I', data.subarray(at, at + MAX_HOLDER_FRAME)))
  return Buffer.concat(parts)
}

/** The resize frame (character cells; TIOCSWINSZ in the world). */
export function resizeFrame(rows: number, cols: number): Buffer {
  const payload = Buffer.alloc(4)
  payload.writeUInt16LE(rows, 0)
  payload.writeUInt16LE(cols, 2)
  return frame('R', payload)
}

/** A credit frame: the client can take `bytes` more output. */
export function creditFrame(bytes: number): Buffer {
  const payload = Buffer.alloc(4)
  payload.writeUInt32LE(bytes, 0)
  return frame('C', payload)
}

/**
 * A signal request: deliver signal `signal` (its number) to the PTY's foreground process group,
 * refusing SIGKILL when that group is `program`'s own (the pid of the program the terminal runs).
 * The holder answers with a `k` frame carrying `id`.
 */
export function signalFrame(id: number, signal: number, program: number): Buffer {
  const payload = Buffer.alloc(9)
  payload.writeUInt32LE(id, 0)
  payload[4] = signal
  payload.writeUInt32LE(program, 5)
  return frame('K', payload)
}

/**
 * A probe request: the PTY's foreground facts for `program` (pid and start time in clock ticks,
 * stat field 22), read by the holder as the control program's `fg` reads them (foreground.c).
 * The holder answers with an `f` frame carrying `id`, after every output byte it read before.
 */
export function probeFrame(id: number, program: { pid: number; starttime: number }): Buffer {
  const payload = Buffer.alloc(16)
  payload.writeUInt32LE(id, 0)
  payload.writeUInt32LE(program.pid, 4)
  payload.writeBigUInt64LE(BigInt(program.starttime), 8)
  return frame('F', payload)
}

const SIGNAL_OUTCOMES = ['signalled', 'refused', 'failed', 'gone'] as const

/**
 * Splits dsh-pty's stdout into frames, whatever its chunking.
 */
export class HolderFrameReader {
  private buffer: Buffer = Buffer.alloc(0)

  /**
   * Consume one chunk of the holder's stdout.
   * @returns the frames it completed, in order.
   * @throws RangeError for a frame longer than {@link MAX_HOLDER_FRAME} (not dsh-pty speaking).
   */
  push(chunk: Buffer): HolderFrame[] {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk])
    const frames: HolderFrame[] = []
    let at = 0
    while (this.buffer.length - at >= 5) {
      const length = this.buffer.readUInt32LE(at + 1)
      if (length > MAX_HOLDER_FRAME) throw new RangeError(`dsh-pty sent a frame of ${length} bytes (at most ${MAX_HOLDER_FRAME}): the stream is not the holder's protocol`)
      if (this.buffer.length - at < 5 + length) break
      frames.push(decode(this.buffer[at]!, this.buffer.subarray(at + 5, at + 5 + length)))
      at += 5 + length
    }
    this.buffer = at === this.buffer.length ? Buffer.alloc(0) : this.buffer.subarray(at)
    return frames
  }
}

function decode(code: number, payload: Buffer): HolderFrame {
  switch (String.fromCharCode(code)) {
    case 'H': return { type: 'hello', text: payload.toString('utf8') }
    case 'P': return { type: 'started', pid: payload.readUInt32LE(0), holder: payload.length >= 8 ? payload.readUInt32LE(4) : 0 }
    case 'O': return { type: 'output', data: payload }
    case 'X': return payload[0] === 1 ? { type: 'exit', code: null, signal: payload[1]! } : { type: 'exit', code: payload[1]!, signal: null }
    case 'E': return { type: 'error', text: payload.toString('utf8') }
    case 'i': return { type: 'accepted', total: Number(payload.readBigUInt64LE(0)) }
    case 'f': return { type: 'probed', id: payload.readUInt32LE(0), facts: payload[4] !== 0 || payload.length < 14 ? undefined : probeFacts(payload) }
    case 'k': return { type: 'signalled', id: payload.readUInt32LE(0), outcome: SIGNAL_OUTCOMES[payload[4]!] ?? 'failed', pgid: payload.readUInt32LE(5) }
    default: return { type: 'unknown', code }
  }
}

/** The facts of an `f` frame whose outcome is 0 (its layout: dsh-pty.c). */
function probeFacts(payload: Buffer): ForegroundFacts {
  const inputWaiting = payload[13] === 1
  const call = payload.subarray(14).toString('latin1')
  return { tpgid: payload.readInt32LE(5), shellPgrp: payload.readInt32LE(9), inputWaiting, waitingCall: inputWaiting && call.length > 0 ? call : undefined }
}
