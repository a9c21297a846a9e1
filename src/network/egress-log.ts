/**
 * The record of every connection a confined world asked for: one JSON line per decision (and
 * per finished connection, with its byte counts), appended to a file the user names, and
 * running totals for a status line. Writing never fails the relay: a write error is kept,
 * reported once, and the totals go on.
 * @module dsh-remote-worlds/network/egress-log
 */
import { type FileHandle, open } from 'node:fs/promises'

/** One connection the world asked for, as logged. */
export interface EgressRecord {
  /** When it was decided (or ended), ISO 8601 (`new Date().toISOString()`). */
  time: string
  /** The world's name, as the CLI shows it. */
  world: string
  /** The world's process that opened it, when the relay knows (pid in the world's pid namespace). */
  process?: { pid: number; command?: string }
  /** What the world asked for: a name, or an IP literal (no brackets). */
  host: string
  /** The address dialled or judged, when there was one. */
  address?: string
  /** TCP port, 1..65535. */
  port: number
  /** How it came: a CONNECT tunnel, a plain http:// request through the proxy, or a forwarded port. */
  via: 'connect' | 'http' | 'forward'
  verdict: 'allow' | 'deny'
  /** The text of the deciding rule, when a rule decided. */
  rule?: string
  /** The verdict's one-line reason (rules.ts EgressVerdict.reason). */
  reason: string
  /** Bytes from the world to the far end. */
  bytesUp: number
  /** Bytes from the far end to the world. */
  bytesDown: number
  /** Why an allowed connection failed (a dial refused, a name not resolved), when it did. */
  error?: string
}

/** Totals over every record given to {@link EgressLog.record}. */
export interface EgressCounts {
  /** Records with verdict 'allow'. */
  allowed: number
  /** Records with verdict 'deny'. */
  denied: number
  /** Sum of bytesUp. */
  bytesUp: number
  /** Sum of bytesDown. */
  bytesDown: number
}

/** Options of {@link EgressLog}. */
export interface EgressLogOptions {
  /** Called once, with the first error opening or writing the file; later records are then only counted. */
  onError?: (error: Error) => void
}

/**
 * Counts egress records and, given a file, appends each as one JSON line. The file is opened
 * for appending (created with mode 0600 when absent; an existing file keeps its mode and
 * content, never truncated) at the first record. Lines are written in record order by one
 * writer, so they never interleave; records that arrive while a write is under way go in the
 * next write together. Keys are written in {@link EgressRecord}'s order, absent ones left out.
 *
 * {@link EgressLog.record} never throws and never waits. The first error opening or writing the
 * file is kept ({@link EgressLog.error}) and passed to `onError` once; from then on records are
 * counted and not written. After {@link EgressLog.close}, records are counted and not written.
 */
export class EgressLog {
  private readonly totals: EgressCounts = { allowed: 0, denied: 0, bytesUp: 0, bytesDown: 0 }
  private pending: string[] = []
  private writing: Promise<void> | undefined
  private handle: FileHandle | undefined
  private failure: Error | undefined
  private closed = false

  /**
   * @param file - the log file's path; without it, records are only counted.
   * @param options - see {@link EgressLogOptions}.
   */
  constructor(private readonly file?: string, private readonly options: EgressLogOptions = {}) {}

  /** The first error opening or writing the file, once there was one. */
  get error(): Error | undefined {
    return this.failure
  }

  /** Count `r` and queue its line. */
  record(r: EgressRecord): void {
    if (r.verdict === 'allow') this.totals.allowed++
    else this.totals.denied++
    this.totals.bytesUp += r.bytesUp
    this.totals.bytesDown += r.bytesDown
    if (this.file === undefined || this.closed || this.failure !== undefined) return
    this.pending.push(`${JSON.stringify(canonical(r))}\n`)
    this.writing ??= this.drain()
  }

  /** Totals so far (a copy). */
  counts(): EgressCounts {
    return { ...this.totals }
  }

  /** Write what is queued, then close the file. Resolves also when writing failed (see {@link EgressLog.error}). */
  async close(): Promise<void> {
    this.closed = true
    await this.writing
    const handle = this.handle
    this.handle = undefined
    await handle?.close().catch(error => this.fail(error))
  }

  private async drain(): Promise<void> {
    try {
      this.handle ??= await open(this.file!, 'a', 0o600)
      while (this.pending.length > 0) {
        const lines = this.pending.join('')
        this.pending = []
        await this.handle.appendFile(lines, 'utf8')
      }
    } catch (error) {
      this.fail(error)
      this.pending = []
    } finally {
      this.writing = undefined
    }
  }

  private fail(error: unknown): void {
    if (this.failure !== undefined) return
    this.failure = error instanceof Error ? error : new Error(String(error))
    try {
      this.options.onError?.(this.failure)
    } catch {
      // A throwing handler must not reach the relay either.
    }
  }
}

/** `r` with its keys in the interface's order and nothing else. */
function canonical(r: EgressRecord): EgressRecord {
  return {
    time: r.time,
    world: r.world,
    ...(r.process === undefined ? {} : { process: r.process.command === undefined ? { pid: r.process.pid } : { pid: r.process.pid, command: r.process.command } }),
    host: r.host,
    ...(r.address === undefined ? {} : { address: r.address }),
    port: r.port,
    via: r.via,
    verdict: r.verdict,
    ...(r.rule === undefined ? {} : { rule: r.rule }),
    reason: r.reason,
    bytesUp: r.bytesUp,
    bytesDown: r.bytesDown,
    ...(r.error === undefined ? {} : { error: r.error }),
  }
}
