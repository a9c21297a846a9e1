/**
 * A holder standby: one non-TTY exec running dsh-pty (remote/pty-holder/), started before a
 * terminal needs it. The holder waits for its spawn frame on stdin, so the standby is ready as
 * soon as the engine started the exec; the terminal that takes it sends the frame itself
 * (pty-holder/held-terminal.ts) and reads the holder's hello like any other.
 * @module dsh-remote-worlds/providers/docker/exec-pool/holder-standby
 */
import type { Readable } from 'node:stream'
import { holderScript } from '../../remote/pty-holder/holder-install.ts'
import type { WorldToolCopy } from '../../remote/world-tools/launch.ts'
import type { StartExec, StartedExec } from './started-exec.ts'

/** A started holder standby; use it once ({@link HolderStandby.take}) or end it ({@link HolderStandby.quit}). */
export class HolderStandby {
  /** The exec (ExecInspect proves it ended). */
  readonly exec: StartedExec['exec']
  /** The holder's copy in the world it runs (a standby of another copy is not taken). */
  readonly copy: WorldToolCopy
  /** The container's death count when it was started (pool.ts discards one from an earlier life). */
  epoch = 0
  private readonly started: StartedExec
  private closed = false
  private used = false

  private constructor(started: StartedExec, copy: WorldToolCopy) {
    this.started = started
    this.exec = started.exec
    this.copy = copy
    started.stream.once('close', () => { this.closed = true })
  }

  /**
   * Start the holder `copy` (verified, world-tools/launch.ts) as `user` on a non-TTY exec with stdin.
   * @param env - extra exec environment entries (the pool's session tag).
   * @throws the world's typed errors when the exec cannot start.
   */
  static async start(startExec: StartExec, user: string | undefined, env: readonly string[], copy: WorldToolCopy): Promise<HolderStandby> {
    return new HolderStandby(await startExec(['/bin/sh', '-c', holderScript(copy)], { tty: false, user, stdin: true, env }), copy)
  }

  /** True while it can still take a terminal (its stream open, not used). */
  get usable(): boolean {
    return !this.closed && !this.used && !this.started.stream.destroyed
  }

  /**
   * Take it for a terminal.
   * @returns the exec and its multiplexed stream, nothing read from it yet.
   */
  take(): StartedExec {
    this.used = true
    return this.started
  }

  /** End an unused standby: EOF on its stdin, at which the holder exits. Never throws. */
  quit(): void {
    if (this.used) return
    this.used = true
    if (!this.started.stream.destroyed) this.started.stream.end()
  }

  /** Close its socket at once (the holder sees EOF and exits). */
  drop(): void {
    this.used = true
    this.started.stream.destroy()
  }
}

/**
 * Whether a taken standby's holder spoke: resolves true once `stdout` (the standby's demuxed
 * stdout, nothing read from it yet) has bytes (dsh-pty's hello, sent at its start), which stay
 * unread for the terminal; false when it ends or fails first. A standby is a bet placed earlier:
 * one started while the world could not fork (a fork bomb at its pids limit) dies in its launch
 * check ("Cannot fork"), and its stream may still be open when it is taken.
 */
export function holderSpoke(stdout: Readable): Promise<boolean> {
  if (stdout.readableLength > 0) return Promise.resolve(true)
  if (stdout.readableEnded || stdout.destroyed) return Promise.resolve(false)
  return new Promise(resolve => {
    const settle = (spoke: boolean): void => {
      stdout.off('readable', onReadable)
      stdout.off('end', onEnd)
      stdout.off('close', onEnd)
      stdout.off('error', onEnd)
      resolve(spoke)
    }
    const onReadable = (): void => {
      const chunk = stdout.read() as Buffer | null
      if (chunk === null) return
      stdout.unshift(chunk)
      settle(true)
    }
    const onEnd = (): void => settle(false)
    stdout.on('readable', onReadable)
    stdout.once('end', onEnd)
    stdout.once('close', onEnd)
    stdout.once('error', onEnd)
  })
}
