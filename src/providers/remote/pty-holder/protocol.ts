/**
 * The frames between the client and dsh-pty, the terminal's world-side parent (world/dsh-pty/dsh-pty.c states
 * the protocol; this is its client half). Every frame is u8 type, u32 payload length
 * (little-endian), payload.
 * @module dsh-remote-worlds/providers/remote/pty-holder/protocol
 */

import type { ForegroundFacts } from '../control-channel.ts'
import { CodedFrameSplitter } from '../frames.ts'

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
  /** `a`: the answer to an attach (held mode, see {@link attachFrame}). */
  | AttachReply
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

/**
 * The hold frame, sent instead of a spawn to a dsh-pty waiting for its first frame: it starts a
 * held shell's holder at `stem` (STEM.sock, STEM.meta; hold.c) and becomes the relay to it, so
 * the frames after it are the held protocol's ({@link heldSpawnFrame} first).
 * @throws RangeError for a stem longer than dsh-pty takes (4095 bytes).
 */
export function holdFrame(stem: string): Buffer {
  const bytes = Buffer.from(stem, 'utf8')
  if (bytes.length === 0 || bytes.length > 4095) throw new RangeError(`a held shell's stem of ${bytes.length} bytes is not one dsh-pty takes (1 to 4095)`)
  return frame('W', bytes)
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

/** What a held shell's spawn names besides the shell (dsh-pty hold.c, the `D` frame). */
export interface DetachedSpawn {
  /** Output kept while no client reads it (bytes; 0: the holder's default, 8 MiB). */
  logBytes: number
  /** Seconds without a controller after which the holder hangs the shell up (0: never). */
  ttlSeconds: number
  /** SHA-256 of the secret an attach must present (32 bytes). */
  secretDigest: Buffer
  /** The owner id the holder registers as (32 hex digits): the shell's session tag names it. */
  owner: string
  /** The controller id of the client that spawns (its ownership client id). */
  controller: string
  /** What a later client looks the shell up by (held-shells.ts). */
  key: string
  /** Free text for listings (JSON). */
  label: string
}

/** A u16-length-prefixed UTF-8 string. */
function shortString(text: string): Buffer {
  const bytes = Buffer.from(text, 'utf8')
  if (bytes.length > 0xffff) throw new RangeError(`a dsh-pty string of ${bytes.length} bytes does not fit its u16 length`)
  const length = Buffer.alloc(2)
  length.writeUInt16LE(bytes.length, 0)
  return Buffer.concat([length, bytes])
}

/**
 * The spawn frame of a held shell (after {@link holdFrame}): as {@link spawnFrame}, plus what makes the
 * shell outlive its client (see {@link DetachedSpawn}).
 * @throws RangeError when it does not fit one frame.
 */
export function heldSpawnFrame(rows: number, cols: number, credit: number, held: DetachedSpawn, script: string): Buffer {
  if (held.secretDigest.length !== 32) throw new RangeError('a held shell\'s secret digest is 32 bytes')
  const head = Buffer.alloc(16)
  head.writeUInt16LE(rows, 0)
  head.writeUInt16LE(cols, 2)
  head.writeUInt32LE(credit, 4)
  head.writeUInt32LE(held.logBytes, 8)
  head.writeUInt32LE(held.ttlSeconds, 12)
  const payload = Buffer.concat([head, held.secretDigest, shortString(held.owner), shortString(held.controller), shortString(held.key), shortString(held.label), Buffer.from(script, 'utf8')])
  if (payload.length > MAX_HOLDER_FRAME) throw new RangeError(`a held shell's spawn of ${payload.length} bytes does not fit a dsh-pty frame (${MAX_HOLDER_FRAME} bytes)`)
  return frame('D', payload)
}

/** The top bit of an attach's resume offset: the rest counts bytes back from the log's head. */
const FROM_HEAD = 1n << 63n

/**
 * An attach to a held shell: the secret, whether to take the shell over from a controller whose
 * client is gone (the holder checks the ownership registry), where its output resumes, the credit
 * the client can take at once (bytes), and this client's controller id. `resume` is an absolute
 * offset, or `{ fromHead: N }` for the last N bytes of the log (a client that never read it).
 */
export function attachFrame(secret: Buffer, takeover: boolean, resume: number | { fromHead: number }, credit: number, controller: string): Buffer {
  if (secret.length !== 32) throw new RangeError('a held shell\'s secret is 32 bytes')
  const head = Buffer.alloc(13)
  head[0] = takeover ? 1 : 0
  head.writeBigUInt64LE(typeof resume === 'number' ? BigInt(resume) : FROM_HEAD | BigInt(resume.fromHead), 1)
  head.writeUInt32LE(credit, 9)
  return frame('A', Buffer.concat([secret, head, shortString(controller)]))
}

/**
 * Input frames of a held shell: each carries the offset of its first byte in the shell's input,
 * so the holder applies every byte once, however often a reconnect resends it.
 */
export function inputAtFrames(offset: number, data: Buffer): Buffer {
  const step = MAX_HOLDER_FRAME - 8
  const parts: Buffer[] = []
  for (let at = 0; at < data.length; at += step) {
    const head = Buffer.alloc(8)
    head.writeBigUInt64LE(BigInt(offset + at), 0)
    parts.push(frame('J', Buffer.concat([head, data.subarray(at, at + step)])))
  }
  return Buffer.concat(parts)
}

/** The release frame: the client collected the shell's exit; the holder ends. */
export function releaseFrame(): Buffer {
  return frame('Q', Buffer.alloc(0))
}

/** The answer to an attach (`a`, dsh-pty hold.c). */
export interface AttachReply {
  type: 'attached'
  /** attached; busy (another live client controls it); denied (wrong secret, or another uid); invalid (no shell yet, or a resume beyond the log). */
  status: 'attached' | 'busy' | 'denied' | 'invalid'
  /** The holder's pid and its start time (clock ticks), and the shell's pid, in the world's pid namespace. */
  holder: number
  holderStart: number
  shell: number
  /** The log: the oldest offset it keeps, and the offset of its next byte. */
  tail: number
  head: number
  /** Where the output that follows starts (an offset). */
  start: number
  /** The input bytes the holder accepted in all. */
  accepted: number
  /** The shell's end, when it ended (as the exit frame says it). */
  ended: { code: number; signal: null } | { code: null; signal: number } | undefined
  /** The world the holder runs in: its boot id and pid namespace (inode). */
  bootId: string
  pidNamespace: string
  /** The controller that holds the shell now ('-': none). */
  controller: string
}

const ATTACH_STATUSES = ['attached', 'busy', 'denied', 'invalid'] as const

function attachReply(payload: Buffer): AttachReply {
  const [bootId = '', pidNamespace = '', controller = '-'] = payload.subarray(53).toString('latin1').split(' ')
  const ended = payload[41] !== 1 ? undefined : payload[42] === 1 ? { code: null, signal: payload[43]! } : { code: payload[43]!, signal: null }
  return {
    type: 'attached',
    status: ATTACH_STATUSES[payload[0]!] ?? 'invalid',
    holder: payload.readUInt32LE(1),
    shell: payload.readUInt32LE(5),
    tail: Number(payload.readBigUInt64LE(9)),
    head: Number(payload.readBigUInt64LE(17)),
    start: Number(payload.readBigUInt64LE(25)),
    accepted: Number(payload.readBigUInt64LE(33)),
    ended,
    holderStart: Number(payload.readBigUInt64LE(45)),
    bootId,
    pidNamespace,
    controller,
  }
}

const SIGNAL_OUTCOMES = ['signalled', 'refused', 'failed', 'gone'] as const

/**
 * Splits dsh-pty's stdout into frames, whatever its chunking.
 */
export class HolderFrameReader {
  private readonly splitter = new CodedFrameSplitter(MAX_HOLDER_FRAME, 'dsh-pty')

  /**
   * Consume one chunk of the holder's stdout.
   * @returns the frames it completed, in order.
   * @throws RangeError for a frame longer than {@link MAX_HOLDER_FRAME} (not dsh-pty speaking).
   */
  push(chunk: Buffer): HolderFrame[] {
    return this.splitter.push(chunk).map(frame => decode(frame.code, frame.payload))
  }
}

function decode(code: number, payload: Buffer): HolderFrame {
  switch (String.fromCharCode(code)) {
    case 'H': return { type: 'hello', text: payload.toString('utf8') }
    case 'P': return { type: 'started', pid: payload.readUInt32LE(0), holder: payload.length >= 8 ? payload.readUInt32LE(4) : 0 }
    case 'O': return { type: 'output', data: payload }
    case 'X': return payload[0] === 1 ? { type: 'exit', code: null, signal: payload[1]! } : { type: 'exit', code: payload[1]!, signal: null }
    case 'E': return { type: 'error', text: payload.toString('utf8') }
    case 'a': return attachReply(payload)
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
