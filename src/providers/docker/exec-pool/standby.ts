/**
 * A standby: one TTY exec started before a terminal needs it, waiting in raw mode for the
 * terminal wrapper (boot-scripts.ts).
 * @module dsh-remote-worlds/providers/docker/exec-pool/standby
 */
import { randomBytes } from 'node:crypto'
import { STANDBY_QUIT, STANDBY_SCRIPT, specBytes } from './boot-scripts.ts'
import { awaitReady } from './ready.ts'
import type { StartExec, StartedExec } from './started-exec.ts'

/** A ready standby; use it once ({@link PtyStandby.take}) or end it ({@link PtyStandby.quit}). */
export class PtyStandby {
  /** The exec (ExecInspect proves it ended; resize and exit facts go through it once taken). */
  readonly exec: StartedExec['exec']
  /** The container's death count when it was started (pool.ts discards one from an earlier life). */
  epoch = 0
  private readonly started: StartedExec
  private closed = false
  private used = false

  private constructor(started: StartedExec) {
    this.started = started
    this.exec = started.exec
    started.stream.once('close', () => { this.closed = true })
  }

  /**
   * Start a standby exec as `user` and wait until it reads in raw mode.
   * @param env - extra exec environment entries (the pool's session tag).
   * @throws PreStartRefusedError when the world lacks `stty`, or the exec ended or stayed
   *   silent (ready.ts); the world's typed errors when the exec cannot start.
   */
  static async start(startExec: StartExec, user: string | undefined, env: readonly string[]): Promise<PtyStandby> {
    const nonce = randomBytes(16).toString('hex')
    const started = await startExec(['/bin/sh', '-c', STANDBY_SCRIPT, 'dsh-standby', nonce], { tty: true, user, stdin: true, env })
    const standby = new PtyStandby(started)
    try {
      await awaitReady(started.stream, nonce)
    } catch (error) {
      started.stream.destroy()
      throw error
    }
    return standby
  }

  /** True while it can still take a terminal (its stream open, not used). */
  get usable(): boolean {
    return !this.closed && !this.used && !this.started.stream.destroyed
  }

  /**
   * Hand it the terminal wrapper: it restores the PTY's settings and `exec`s `/bin/sh -c SCRIPT`.
   * @returns the exec and its stream (paused; the bytes after the readiness line are kept), for
   *   the world's terminal transport.
   */
  take(script: string): StartedExec {
    this.used = true
    this.started.stream.write(specBytes(script))
    return this.started
  }

  /** End an unused standby: a zero-line spec, then the socket. Never throws. */
  quit(): void {
    if (this.used) return
    this.used = true
    const stream = this.started.stream
    if (stream.destroyed) return
    stream.write(STANDBY_QUIT, () => { stream.end() })
  }

  /** Close the socket of an unused standby at once (its shell stays in `read`: see boot-scripts.ts). */
  drop(): void {
    this.used = true
    this.started.stream.destroy()
  }
}
