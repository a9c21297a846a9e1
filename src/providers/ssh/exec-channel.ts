/**
 * One SSH exec channel with its end recorded from the moment it opened.
 *
 * ssh2 parses every packet of a TCP read in one synchronous loop and emits channel events as it
 * goes (lib/client.js, CHANNEL_SUCCESS then CHANNEL_REQUEST `exit-status` / `exit-signal`, EOF,
 * CLOSE). The exec callback runs inside that loop; a promise resolved there continues only after
 * the loop, so a program that exits at once (`sh -c 'exit 7'`) has its exit report emitted
 * before any `await`ing caller could listen, and the report was lost. Every listener a caller
 * needs of the channel's end is therefore attached here, in the callback itself; stream data is
 * buffered by the channel's Readable until read, so bytes need no such care.
 * @module dsh-remote-worlds/providers/ssh/exec-channel
 */
import type { SubprocessOutcome } from '@deepseek-ai/dsh-subprocess'
import type { Client, ClientChannel } from 'ssh2'
import { RemoteWorldError, TransportError } from '../remote/errors.ts'

/**
 * The server refused to open a session channel (`Channel open failure`): this connection has
 * reached the server's MaxSessions. The caller takes a slot on another connection.
 */
export class ChannelRefusedError extends RemoteWorldError {
  constructor(where: string, options?: { cause?: unknown }) {
    super('SPAWN_FAILED', `${where}: the server refused another session channel on this connection (MaxSessions reached)`, options)
  }
}

/** A PTY request's window and terminal type. */
export interface PtyRequest {
  rows: number
  cols: number
}

/** An open exec channel and the facts of its end, recorded since it opened. */
export interface SshExecChannel {
  readonly channel: ClientChannel
  /**
   * Resolves as soon as the server reports the process's exit (RFC 4254 section 6.10:
   * `exit-status`, or `exit-signal` with the signal name, given as `SIGNAME`), before the
   * streams end. Never rejects; stays pending when no report comes (see {@link closed}).
   */
  readonly exited: Promise<SubprocessOutcome>
  /** Resolves when the channel closed: with the exit report, or undefined when none came. */
  readonly closed: Promise<SubprocessOutcome | undefined>
}

/** Exit facts from ssh2's `exit` event arguments: `(code)` or `(null, 'SIGNAME', ...)`. */
function outcomeOf(code: number | null | undefined, signal: string | undefined): SubprocessOutcome {
  if (typeof signal === 'string' && signal.length > 0) {
    return { exitCode: null, signal: (signal.startsWith('SIG') ? signal : `SIG${signal}`) as NodeJS.Signals }
  }
  return { exitCode: code ?? null, signal: null }
}

/**
 * Open a session channel running `command` (the login shell runs it with -c), with a PTY when
 * `pty` is given.
 * @throws ChannelRefusedError when the server refuses the channel (MaxSessions).
 * @throws TransportError when the connection is closed or the exec request fails.
 */
export function openExecChannel(client: Client, command: string, pty: PtyRequest | undefined, where: string): Promise<SshExecChannel> {
  return new Promise((resolve, reject) => {
    const callback = (error: Error | undefined, channel: ClientChannel): void => {
      if (error !== undefined && error !== null) {
        if (/Channel open failure/i.test(error.message)) reject(new ChannelRefusedError(where, { cause: error }))
        else reject(new TransportError(`${where}: cannot open a session channel: ${error.message}`, { cause: error }))
        return
      }
      // Synchronously, before this callback returns (see the module comment).
      let outcome: SubprocessOutcome | undefined
      const exited = Promise.withResolvers<SubprocessOutcome>()
      const closed = Promise.withResolvers<SubprocessOutcome | undefined>()
      channel.once('exit', (code: number | null, signal?: string) => {
        outcome = outcomeOf(code, signal)
        exited.resolve(outcome)
      })
      channel.once('close', () => closed.resolve(outcome))
      // An error without a listener would throw; the end is judged by `closed`.
      channel.on('error', () => undefined)
      resolve({ channel, exited: exited.promise, closed: closed.promise })
    }
    try {
      if (pty === undefined) client.exec(command, callback)
      else client.exec(command, { pty: { rows: pty.rows, cols: pty.cols, width: 0, height: 0, term: 'dumb' } }, callback)
    } catch (error) {
      reject(new TransportError(`${where}: the connection is closed: ${(error as Error).message}`, { cause: error }))
    }
  })
}
