/**
 * The output of a held job read back by a client that did not start it (a restarted client):
 * the raw streams of its process wrapper from the offsets the last reader reached, turned into
 * what the model reads of a background `bash` job, as dsh-bash-local's process handle and
 * dsh-tool-bash render it (stdout, then `[stderr]` and stderr), without the wrapper's start
 * marker and exit trailer, and saying what the world's log dropped in between.
 * @module dsh-remote-worlds/jobs/job-output
 */
import { StringDecoder } from 'node:string_decoder'
import type { SubprocessOutcome } from '@deepseek-ai/dsh-subprocess'
import { BoundaryScanner } from '../providers/remote/boundary.ts'
import { outcomeOfTrailer } from '../providers/remote/process.ts'
import { TrailerScanner } from '../providers/remote/process-wrapper.ts'

/** One read of a re-found job's output. */
export interface JobOutputRead {
  /** The text since the last read, rendered as the bash tool renders a background read. */
  delta: string
  /** Bytes dropped before they were read (both streams): by the world's log, or from memory between reads. */
  dropped: number
}

/**
 * The unread bytes of each stream a re-found job keeps between reads (bytes): what a live
 * job's reader keeps, dsh-bash-local's `maxOutputBytes` default (64e3, its lib/index.js), so
 * a read after a restart is no larger than one before it.
 */
export const REFOUND_RETAINED_BYTES = 64_000

/** The notice a read carries when the world's log dropped output before anyone read it. */
export function droppedNotice(bytes: number): string {
  return `[${bytes} bytes of output were dropped: the world keeps the latest part of each stream]`
}

/** The notice a read carries when more than {@link REFOUND_RETAINED_BYTES} came between two reads. */
export function droppedFromMemoryNotice(bytes: number, retained: number): string {
  return `[${bytes} bytes of output were dropped from memory: a job found again keeps the latest ${retained} bytes of each stream between reads]`
}

/** The last `bytes` bytes of `text` as UTF-8, cut at a character boundary; and how many bytes were cut. */
function keepLast(text: string, bytes: number): { text: string; cut: number } {
  const encoded = Buffer.from(text, 'utf8')
  if (encoded.length <= bytes) return { text, cut: 0 }
  let start = encoded.length - bytes
  // Not inside a character: UTF-8 continuation bytes are 0b10xxxxxx.
  while (start < encoded.length && (encoded[start]! & 0xc0) === 0x80) start += 1
  return { text: encoded.subarray(start).toString('utf8'), cut: start }
}

/** Accumulates a re-found job's two raw streams (see the module comment). */
export class RefoundJobOutput {
  private readonly text = { stdout: '', stderr: '' }
  private readonly decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') }
  /** The raw offset each stream was received up to. */
  private readonly received: { stdout: number; stderr: number }
  private dropped = 0
  /** Bytes cut from the unread text to keep it within {@link retained}. */
  private droppedFromMemory = 0
  /** Unread bytes taken in per stream since the text was last within the bound (a cheap over-estimate). */
  private readonly taken = { stdout: 0, stderr: 0 }
  private readonly retained: number
  /** Where the program's own stdout bytes begin (dsh-job's DIR/KEY.start), when known. */
  private readonly programStart: number | undefined
  /** Until the start marker went by (a read from offset 0 begins with it). */
  private boundary: BoundaryScanner | undefined
  private readonly trailer: TrailerScanner

  /**
   * @param nonce - the process wrapper's nonce.
   * @param from - the raw offsets the last reader consumed up to.
   * @param options.retained - the unread bytes of each stream kept between reads (the oldest go first).
   * @param options.programStart - the stdout offset where the program's own bytes begin (past
   *   the start marker), so a gap that took the marker counts only the program's bytes.
   */
  constructor(nonce: string, from: { stdout: number; stderr: number }, options: { retained?: number; programStart?: number | undefined } = {}) {
    this.received = { ...from }
    this.retained = options.retained ?? REFOUND_RETAINED_BYTES
    this.programStart = options.programStart
    this.boundary = from.stdout === 0 ? new BoundaryScanner(nonce, 1 << 16, { process: true }) : undefined
    this.trailer = new TrailerScanner(nonce)
  }

  /** The raw offsets received so far: where a later reader resumes once this was read. */
  get cursor(): { stdout: number; stderr: number } {
    return { ...this.received }
  }

  /** One piece of a stream at its absolute offset (a gap from what was received was dropped). */
  push(stream: 'stdout' | 'stderr', offset: number, data: Buffer): void {
    if (stream === 'stdout' && this.boundary !== undefined && this.programStart !== undefined) {
      this.fromProgramStart(offset, data, this.programStart)
      return
    }
    if (offset > this.received[stream]) {
      this.dropped += offset - this.received[stream]
      // Past a gap, the start marker is gone with what was dropped.
      if (stream === 'stdout') this.boundary = undefined
    }
    this.received[stream] = offset + data.length
    let bytes = data
    if (stream === 'stdout' && this.boundary !== undefined) {
      let event
      try {
        event = this.boundary.push(bytes)
      } catch {
        event = undefined
      }
      if (event?.kind === 'pending') return
      this.boundary = undefined
      bytes = event !== undefined && 'rest' in event && Buffer.isBuffer(event.rest) ? event.rest : bytes
    }
    if (stream === 'stderr') bytes = this.trailer.push(bytes)
    this.append(stream, bytes)
  }

  /**
   * Stdout before the start marker went by, where dsh-job said where it ends: the bytes before
   * that offset are the marker's (skipped), and a gap is counted from there.
   */
  private fromProgramStart(offset: number, data: Buffer, start: number): void {
    const gapFrom = Math.max(this.received.stdout, start)
    if (offset > gapFrom) this.dropped += offset - gapFrom
    this.received.stdout = offset + data.length
    const skip = Math.max(0, start - offset)
    if (skip >= data.length) return
    this.boundary = undefined
    this.append('stdout', data.subarray(skip))
  }

  /** Decode `bytes` onto `stream`'s unread text, within the bound. */
  private append(stream: 'stdout' | 'stderr', bytes: Buffer): void {
    this.text[stream] += this.decoders[stream].write(bytes)
    this.taken[stream] += bytes.length
    // Trimmed when it may hold twice the bound: a cut costs a copy of the text.
    if (this.taken[stream] > 2 * this.retained) this.trim(stream)
  }

  /** Keep the latest {@link retained} bytes of `stream`'s unread text. */
  private trim(stream: 'stdout' | 'stderr'): void {
    const kept = keepLast(this.text[stream], this.retained)
    this.text[stream] = kept.text
    this.droppedFromMemory += kept.cut
    this.taken[stream] = Buffer.byteLength(kept.text)
  }

  /** The text since the last read (consumed), rendered (see the module comment). */
  read(): JobOutputRead {
    this.trim('stdout')
    this.trim('stderr')
    this.taken.stdout = 0
    this.taken.stderr = 0
    const fromMemory = this.droppedFromMemory
    this.droppedFromMemory = 0
    const out = this.text.stdout
    const err = this.text.stderr
    this.text.stdout = ''
    this.text.stderr = ''
    const dropped = this.dropped
    this.dropped = 0
    const separator = out.length > 0 && !out.endsWith('\n') ? '\n' : ''
    let delta = out + (err.length > 0 ? `${separator}[stderr]\n${err}` : '')
    if (dropped > 0) delta = `${delta}${delta.length > 0 && !delta.endsWith('\n') ? '\n' : ''}${droppedNotice(dropped)}`
    if (fromMemory > 0) delta = `${delta}${delta.length > 0 && !delta.endsWith('\n') ? '\n' : ''}${droppedFromMemoryNotice(fromMemory, this.retained)}`
    return { delta, dropped: dropped + fromMemory }
  }

  /**
   * The job's exit facts: the wrapper's trailer when it came (the program's own status, a death
   * by signal told apart), else the holder's record of the wrapper.
   */
  outcome(holderSaid: SubprocessOutcome): SubprocessOutcome {
    this.text.stdout += this.decoders.stdout.end()
    this.text.stderr += this.decoders.stderr.end()
    return this.trailer.trailer !== undefined ? outcomeOfTrailer(this.trailer.trailer, new Set()) : holderSaid
  }
}
