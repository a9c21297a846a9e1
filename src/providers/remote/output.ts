/**
 * Bounded in-memory collection of one remote output stream, whose complete copy (the spill)
 * is written IN the remote world by the process wrapper's `tee` (process-wrapper.ts).
 * @module dsh-remote-worlds/providers/remote/output
 */
import type { SubprocessOutputRead, SubprocessOutputReader } from '@deepseek-ai/dsh-subprocess'

/**
 * The in-memory tail of one stream, in whole-stream byte offsets, with the upstream reader
 * semantics (`@deepseek-ai/dsh-subprocess` `SubprocessOutputReader`): reads are offset-based and
 * non-consuming; a read from an offset that slid out of the tail is `lossy` and returns the
 * whole retained tail; `spillPath` names the file holding the complete stream once the stream
 * overflowed the tail and while it stays within the spill cap (a larger stream's spill is
 * incomplete: the wrapper's `head -c` stopped there, so it is not advertised and is removed).
 */
export class RemoteOutputCollector implements SubprocessOutputReader {
  private chunks: Buffer[] = []
  private retained = 0
  private total = 0
  private dropped = false
  private spillValid = true
  private spillFile: string | undefined

  /**
   * @param maxBytes - in-memory cap; overflow keeps the TAIL.
   * @param spillMaxBytes - whole-stream cap of the spill; undefined: no spill.
   */
  constructor(private readonly maxBytes: number, readonly spillMaxBytes: number | undefined) {}

  /** Name the remote spill file (known once the world is prepared). */
  attachSpill(path: string): void {
    if (this.spillMaxBytes !== undefined) this.spillFile = path
  }

  /** Whole-stream bytes seen so far. */
  get size(): number {
    return this.total
  }

  /** True once bytes were dropped from the in-memory tail. */
  get truncated(): boolean {
    return this.dropped
  }

  /** The spill path while it holds (or, still being written, will hold) the complete stream. */
  get spillPath(): string | undefined {
    if (!this.spillValid || this.spillFile === undefined || this.spillMaxBytes === undefined || !this.dropped || this.total > this.spillMaxBytes) return undefined
    return this.spillFile
  }

  /** True when the remote spill file is of no use (no overflow, over the cap, or invalidated): remove it. */
  get spillDisposable(): boolean {
    return this.spillFile !== undefined && this.spillPath === undefined
  }

  /** Stop advertising the spill (its writer did not finish: the stream was cut). */
  invalidateSpill(): void {
    this.spillValid = false
  }

  /** Append one chunk of the stream's bytes. */
  push(chunk: Buffer): void {
    if (chunk.length === 0) return
    this.total += chunk.length
    this.chunks.push(chunk)
    this.retained += chunk.length
    while (this.retained > this.maxBytes) {
      const head = this.chunks[0]!
      const excess = this.retained - this.maxBytes
      if (head.length <= excess) {
        this.chunks.shift()
        this.retained -= head.length
      } else {
        this.chunks[0] = head.subarray(excess)
        this.retained -= excess
      }
      this.dropped = true
    }
  }

  /** @inheritdoc */
  readFrom(fromByte: number): SubprocessOutputRead {
    const windowStart = this.total - this.retained
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks, this.retained)]
    const buffer = this.chunks[0] ?? Buffer.alloc(0)
    const lossy = fromByte < windowStart
    const start = lossy ? 0 : Math.min(buffer.length, fromByte - windowStart)
    const spillPath = this.spillPath
    return {
      text: buffer.subarray(start).toString('utf8'),
      nextOffset: this.total,
      lossy,
      ...(spillPath !== undefined ? { spillPath } : {}),
    }
  }
}
