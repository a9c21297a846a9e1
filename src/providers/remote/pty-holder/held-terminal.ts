/**
 * A terminal transport over dsh-pty (world/dsh-pty/dsh-pty.c), the terminal's world-side parent: the holder
 * runs on a plain pipe (a non-TTY Docker exec, an SSH exec channel without a pty) and owns the
 * PTY in the world. Against a PTY the engine or sshd allocates, this gives
 * - the shell's true wait status: `{ exitCode: null, signal: 'SIGKILL' }` for a `kill -9 $$`,
 *   `{ exitCode: 137, signal: null }` for `exit 137` (Docker's ExecInspect says 137 for both);
 * - bounded output in flight: the holder reads the PTY only as far as this side granted credit,
 *   and this side grants it as the terminal's reader takes the bytes, so a cancel under an output
 *   flood drains at most the terminal's window (flow-budget.ts) plus the PTY's own buffer;
 * - a terminal that settles on the holder's exit frame, without waiting for the engine or sshd
 *   to report the end of the exec.
 *
 * A HELD shell (hold.c) outlives its pipe: when the pipe is lost, this side
 * opens another (a relay to the holder's socket), attaches again with the shell's secret, and
 * goes on where it was: output from the offset it last received, input resent from the offset the
 * holder last accepted (each byte applied once), unanswered requests asked again (a signal is
 * answered, never delivered twice). Until then writes, probes and signals wait; `output` neither
 * ends nor errs. Only a loss longer than the link's deadline fails the terminal.
 * @module dsh-remote-worlds/providers/remote/pty-holder/held-terminal
 */
import { Readable, type Writable } from 'node:stream'
import { setTimeout as delay } from 'node:timers/promises'
import type { SubprocessOutcome } from '@deepseek-ai/dsh-subprocess'
import { HeldShellBusyError, HeldShellDeniedError, HeldShellLostError, RemoteWorldError, SpawnFailedError, TransportError } from '../errors.ts'
import { constants as osConstants } from 'node:os'
import type { ForegroundFacts, ProcessIdentity, RemoteSignalName, SignalForegroundResult } from '../control-channel.ts'
import type { ProcessTransport } from '../process.ts'
import { signalName } from '../signals.ts'
import type { OutputGap, TerminalTransport } from '../terminal.ts'

export type { OutputGap }
import { MAX_WINDOW_BYTES, flowWindow, leaveFlow } from './flow-budget.ts'
import {
  type AttachReply, type DetachedSpawn, type HolderFrame, HolderFrameReader, attachFrame, creditFrame, heldSpawnFrame, inputAtFrames, inputFrames,
  holdFrame, probeFrame, releaseFrame, resizeFrame, signalFrame, spawnFrame,
} from './protocol.ts'

/**
 * The credit a held terminal starts with (bytes), before any output told how busy the process's
 * terminals are; afterwards its window is its share of the flow budget (flow-budget.ts).
 */
export const HOLDER_CREDIT_BYTES = 256 * 1024

/**
 * The most a Linux PTY holds unread on its way to the master (bytes): the tty buffer's limit
 * (TTYB_DEFAULT_MEM_LIMIT, 64 KiB, drivers/tty/tty_buffer.c) and the line discipline's read
 * buffer (N_TTY_BUF_SIZE, 4 KiB, include/linux/tty.h). A signal to the foreground group grants
 * this much credit beyond the window: what the program wrote before the signal ended it then
 * reaches the client at once, with the prompt after it, instead of one window per credit round
 * trip (each a turn of an event loop that twenty flooding terminals keep busy).
 */
export const PTY_BUFFER_BYTES = 68 * 1024

/** Stderr of the holder kept for messages (bytes). */
const STDERR_KEPT_BYTES = 4096

/** How long a discarded start waits for its holder to end the pipe after `Q` (ms) before closing it anyway. */
const RELEASE_BOUND_MS = 2_000

/** Pauses between attempts to reach a held shell again (ms), the last one repeated. */
const RECONNECT_BACKOFF_MS = [100, 250, 500, 1000, 2000] as const

/** Failures to reach a held shell that no retry mends (the world stopped, or refuses this client). */
const PERMANENT_LOSSES = new Set(['TARGET_NOT_RUNNING', 'TARGET_NOT_FOUND', 'WORLD_CLOSED', 'AUTH_FAILED', 'HOST_KEY_UNKNOWN', 'HOST_KEY_CHANGED', 'HOST_KEY_REVOKED'])

/** A request's pending answer, and the frame that asked (sent again after a reconnect). */
interface Pending<T> extends Pick<PromiseWithResolvers<T>, 'resolve' | 'reject'> {
  frame: Buffer
}


/** How a held shell is reached again after its pipe was lost. */
export interface HeldShellLink {
  /** The secret every attach presents (32 bytes; the holder keeps its SHA-256). */
  secret: Buffer
  /** This client's controller id (its ownership client id, 32 hex digits). */
  controller: string
  /** Open a fresh pipe to the holder's socket (a relay, `dsh-pty --connect SOCKET`). */
  reconnect(): Promise<ProcessTransport>
  /** How long the pipe may stay lost before the terminal fails with TransportError (ms). */
  deadlineMs: number
  /** Told of each range of output the holder dropped before this client received it. */
  onGap?: ((gap: OutputGap) => void) | undefined
}

/** What {@link openHeldTerminal} starts. */
export interface HeldTerminalStart {
  /** The start wrapper (boundary.ts), run by the holder as `/bin/sh -c SCRIPT` on the new PTY. */
  script: string
  /** The PTY's window size at start, in character cells (set before the shell runs). */
  rows: number
  cols: number
  /** World description for messages. */
  where: string
  /**
   * A held shell: the STEM its holder listens at (the pipe's dsh-pty starts it there: see
   * protocol.ts `holdFrame`), what its spawn names, and how to reach it again. Absent: the
   * attached mode (the shell ends with the pipe).
   */
  held?: { stem: string; spawn: DetachedSpawn; link: HeldShellLink } | undefined
}

/**
 * Drive dsh-pty on `pipe` (a dsh-pty waiting for its first frame, stdin attached): send the
 * spawn frame (a held shell: the hold frame, then its spawn) and resolve once the holder forked
 * the shell.
 * @returns a {@link TerminalTransport} whose `output` carries the PTY's bytes exactly.
 * @throws SpawnFailedError when the holder reports it cannot start a shell (its reason), or ends
 *   first (its stderr); TransportError when the pipe breaks first.
 */
export function openHeldTerminal(pipe: ProcessTransport, start: HeldTerminalStart): Promise<HeldTerminal> {
  return new Promise((resolve, reject) => {
    const terminal = new HeldTerminal(start, start.held?.link, { resolve, reject })
    terminal.begin(pipe, start.held === undefined
      ? spawnFrame(start.rows, start.cols, HOLDER_CREDIT_BYTES, start.script)
      : Buffer.concat([holdFrame(start.held.stem), heldSpawnFrame(start.rows, start.cols, HOLDER_CREDIT_BYTES, start.held.spawn, start.script)]))
  })
}

/** What {@link attachHeldShell} resolves with: the terminal, and the holder's answer. */
export interface AttachedShell {
  terminal: HeldTerminal
  reply: AttachReply
}

/**
 * Attach to a held shell through `pipe` (a relay to its socket): its output starts at offset
 * `resume` (a client that read it up to there), or with the last `fromHead` bytes of its log (a
 * client that never read it). `takeover`: from a controller whose client is gone.
 * @throws HeldShellBusyError, HeldShellDeniedError, HeldShellLostError (no holder behind the
 *   socket), SpawnFailedError (no shell there, or a resume beyond its output), or TransportError
 *   when the pipe ends first.
 */
export function attachHeldShell(pipe: ProcessTransport, where: string, link: HeldShellLink, resume: number | { fromHead: number }, takeover: boolean): Promise<AttachedShell> {
  return new Promise((resolve, reject) => {
    let reply: AttachReply | undefined
    const terminal = new HeldTerminal({ script: '', rows: 0, cols: 0, where }, link, {
      resolve: opened => resolve({ terminal: opened, reply: reply! }),
      reject,
    }, answer => { reply = answer })
    terminal.begin(pipe, attachFrame(link.secret, takeover, resume, HOLDER_CREDIT_BYTES, link.controller))
  })
}

/**
 * The output stream of a holder: it calls `taken` whenever its reader took bytes (a `read()` of
 * the reader's own, or flowing mode's), and whenever it asks for more (`_read`).
 *
 * Why not `_read` alone: Readable calls `_read` once, then not again until a push. A grant that
 * finds no room then (a paused reader still holds a window's worth) pushes nothing, so no
 * `_read` would ever come again once the reader drained its buffer, and no credit would go out:
 * a reader that takes in pieces (`read(64 KiB)`) stalled the output for good.
 */
class TakenReadable extends Readable {
  private readonly taken: () => void

  constructor(taken: () => void) {
    super({ highWaterMark: MAX_WINDOW_BYTES })
    this.taken = taken
  }

  override _read(): void {
    this.taken()
  }

  override read(size?: number): ReturnType<Readable['read']> {
    const chunk = super.read(size) as unknown
    if (chunk !== null) this.taken()
    return chunk
  }
}

/** One pipe to the holder and what was said on it. */
interface Wire {
  pipe: ProcessTransport
  stdin: Writable
  reader: HolderFrameReader
  /** The holder answered the spawn or the attach on it. */
  live: boolean
  /** It ended or broke (its events after that are ignored). */
  gone: boolean
}

/**
 * The transport over one dsh-pty: see the module. Made by {@link openHeldTerminal} and
 * {@link attachHeldShell}.
 */
export class HeldTerminal implements TerminalTransport {
  readonly output: Readable
  readonly sizeSetAtStart = true
  /** The holder's pid in the world, the shell's parent (0 until it started the shell). */
  parentPid = 0
  /** The shell's pid in the world (0 until the holder said). */
  shellPid = 0
  /** Output the holder dropped before this client received it (a held shell detached too long), in order. */
  readonly gaps: OutputGap[] = []
  private wire: Wire | undefined
  private readonly start: HeldTerminalStart
  private readonly link: HeldShellLink | undefined
  private readonly opened: { resolve(transport: HeldTerminal): void; reject(error: Error): void }
  private readonly onAttach: ((reply: AttachReply) => void) | undefined
  private started = false
  /** The offset of the next output byte (held: in the shell's output since it started). */
  private received = 0
  /** The offset up to which the holder may send (received + credit in flight). */
  private granted = HOLDER_CREDIT_BYTES
  private stderr = ''
  private outcome: SubprocessOutcome | undefined
  private failure: Error | undefined
  private readonly settled = Promise.withResolvers<void>()
  private outputEnded = false
  /** The client closed the transport: no reconnect. */
  private closed = false
  /** A reconnect in progress (held mode). */
  private reconnecting: Promise<void> | undefined
  /** Signal and probe requests awaiting the holder's answer, by request id. */
  private readonly signalling = new Map<number, Pending<SignalForegroundResult>>()
  private readonly probing = new Map<number, Pending<ForegroundFacts | undefined>>()
  /** The id of the next signal or probe request (u32, never 0). */
  private nextRequest = 1
  /**
   * Input: the offset of the next byte written (in the shell's input), what the holder accepted,
   * and the bytes between (held mode: resent after a reconnect). Writes wait for acceptance.
   */
  private inputSent = 0
  private inputAccepted = 0
  private unaccepted: Buffer[] = []
  private readonly acceptance: Array<{ upTo: number; resolve(): void; reject(error: Error): void }> = []
  /** The credit window now (bytes): {@link HOLDER_CREDIT_BYTES} until output arrives, then the flow budget's share. */
  private window = HOLDER_CREDIT_BYTES
  /** The credit the last attach frame gave the holder (bytes): what is granted once it answers. */
  private attachCredit = HOLDER_CREDIT_BYTES
  /** A grant is scheduled for the next tick. */
  private grantScheduled = false

  /** @internal Use {@link openHeldTerminal} or {@link attachHeldShell}. */
  constructor(start: HeldTerminalStart, link: HeldShellLink | undefined, opened: HeldTerminal['opened'], onAttach?: (reply: AttachReply) => void) {
    this.start = start
    this.link = link
    this.opened = opened
    this.onAttach = onAttach
    this.output = new TakenReadable(() => this.grantSoon())
    this.settled.promise.catch(() => undefined)
  }

  /** Whether this is a held shell (it outlives its pipe). */
  get held(): boolean {
    return this.link !== undefined
  }

  /** @internal Wire `pipe` and send its first frame. */
  begin(pipe: ProcessTransport, first: Buffer): void {
    const wire = this.connect(pipe)
    if (wire === undefined) {
      this.opened.reject(new TypeError('a dsh-pty transport needs a pipe with stdin'))
      return
    }
    this.sendOn(wire, first).catch(error => this.lost(wire, error as Error))
  }

  /**
   * Write `data` to the PTY input; resolves once the holder accepted it (its `i` count reached
   * the write's end), as a local PTY write is done once the master took it. A held shell's input
   * waits through a reconnect and is applied once. A write pending when the shell ends resolves
   * (nothing will read it); one pending when the terminal fails rejects.
   * @throws TransportError when the terminal ended or failed.
   */
  async write(data: Buffer): Promise<void> {
    if (data.length === 0) return
    if (this.outputEnded) throw this.failure ?? new TransportError(`${this.start.where}: the terminal ended`)
    const offset = this.inputSent
    this.inputSent += data.length
    const waiting = { upTo: this.inputSent, ...Promise.withResolvers<void>() }
    this.acceptance.push(waiting)
    if (this.link !== undefined) {
      this.unaccepted.push(data)
      // Sent now when the pipe is up; a reconnect resends it otherwise.
      if (this.wire?.live === true) this.sendOn(this.wire, inputAtFrames(offset, data)).catch(() => undefined)
      return waiting.promise
    }
    try {
      await this.send(inputFrames(data))
    } catch (error) {
      this.acceptance.splice(this.acceptance.indexOf(waiting), 1)
      throw error
    }
    return waiting.promise
  }

  resize(rows: number, cols: number): Promise<void> {
    // A held shell's size is set again after a reconnect only if asked again: a lost resize waits for none.
    if (this.link !== undefined && this.wire?.live !== true) return Promise.resolve()
    return this.send(resizeFrame(rows, cols))
  }

  /**
   * The shell's wait status from the holder's exit frame.
   * @throws TransportError when the pipe broke (a held shell: for longer than its deadline), or
   *   the holder ended without reporting (it was killed: the shell's status is unknown).
   */
  async exit(): Promise<SubprocessOutcome> {
    await this.settled.promise
    if (this.outcome !== undefined) return this.outcome
    if (this.failure !== undefined || this.wire === undefined) throw this.failure ?? new TransportError(`${this.start.where}: the terminal's pipe failed`)
    let holder = 'its status unknown'
    try {
      const facts = await this.wire.pipe.exit()
      holder = facts.signal !== null ? `killed by ${facts.signal}` : `exit code ${facts.exitCode}`
    } catch (error) {
      throw this.failure ?? error
    }
    throw new TransportError(`${this.start.where}: the shell's parent (dsh-pty) ended before it reported the shell's status (${holder}), so the terminal hung up; something in the world ended it (a \`kill $PPID\` from the shell, say)${this.stderr.trim().length > 0 ? `: ${this.stderr.trim()}` : ''}`)
  }

  /**
   * Release the pipe. A held shell goes on in the world, detached (its holder keeps it for its
   * TTL, for a later client); nothing is reconnected.
   */
  close(): void {
    this.closed = true
    this.wire?.pipe.close()
    if (this.link !== undefined && !this.outputEnded) {
      this.failure ??= new TransportError(`${this.start.where}: the held shell was detached`)
      this.finish()
    }
  }

  /**
   * End a held shell and release the pipe: for a start that failed, whose shell nobody will take
   * back and which must not live out its TTL. The holder hangs the shell up (SIGHUP, then
   * SIGKILL to its group after a grace) and ends (`Q`, hold.c). The pipe is closed only once
   * the holder ended it, at most {@link RELEASE_BOUND_MS} after the frame was written: closing
   * it at once could end the relay in the world before it passed `Q` on, which left the holder
   * (and, in 'client', its 24 h TTL) behind in 3 of 4 tries in Docker. Not held, or no pipe up:
   * as {@link close} (a held shell's holder then ends at its TTL).
   */
  discard(): void {
    const wire = this.wire
    if (this.link === undefined || wire === undefined || !wire.live || wire.gone) {
      this.close()
      return
    }
    // From here the pipe's end is the release's, never a cut to reconnect after (lost()).
    this.closed = true
    const released = async (): Promise<void> => {
      await this.sendOn(wire, releaseFrame())
      const deadline = performance.now() + RELEASE_BOUND_MS
      while (!wire.gone && performance.now() < deadline) await delay(10)
    }
    released().catch(() => undefined).finally(() => this.close())
  }

  /**
   * Signal the PTY's foreground process group through the holder: the kernel names the group
   * (TIOCGPGRP on the master), so the request waits behind no other terminal's probes, and no
   * other tty's group can be hit. SIGKILL to `program`'s own group (its prompt) is refused.
   * The request grants {@link PTY_BUFFER_BYTES} of credit with it.
   * @returns `gone` once the shell ended.
   * @throws TransportError when the pipe is closed, or ends or fails before the holder answered
   *   (a held shell: when it stays lost beyond its deadline).
   */
  async signalForeground(program: ProcessIdentity, signal: RemoteSignalName): Promise<SignalForegroundResult> {
    if (this.outcome !== undefined) return { kind: 'gone' }
    const number = osConstants.signals[`SIG${signal}`]
    const answer = this.ask(this.signalling, id => signalFrame(id, number, program.pid))
    // The signal's drain: what the PTY holds may come at once, not a window at a time.
    if (this.wire?.live === true) {
      this.granted += PTY_BUFFER_BYTES
      this.send(creditFrame(PTY_BUFFER_BYTES)).catch(() => undefined)
    }
    return answer
  }

  /**
   * The PTY's foreground facts, read by the holder (foreground.c) as the control program's `fg`
   * reads them: per terminal, in C, with no queue shared with other terminals, and as the
   * ancestor of the terminal's processes (their /proc/PID/syscall and mem stay readable under
   * Yama ptrace_scope=1). The answer comes after every output byte the holder read before it.
   * @returns undefined once `program` (or the shell) ended.
   * @throws TransportError when the pipe is closed, or ends or fails before the holder answered.
   */
  async foreground(program: ProcessIdentity): Promise<ForegroundFacts | undefined> {
    if (this.outcome !== undefined) return undefined
    return this.ask(this.probing, id => probeFrame(id, program))
  }

  /**
   * Send the request `build(id)` and resolve with the holder's answer to that id (see
   * {@link finish} for the answer when none comes). A held shell's request waits through a
   * reconnect and is asked again on the new pipe.
   */
  private ask<T>(waiting: Map<number, Pending<T>>, build: (id: number) => Buffer): Promise<T> {
    if (this.outputEnded) {
      if (this.outcome === undefined) return Promise.reject(this.failure ?? new TransportError(`${this.start.where}: the terminal's pipe ended`))
    }
    const id = this.nextRequest
    this.nextRequest = this.nextRequest >= 0xffffffff ? 1 : this.nextRequest + 1
    const answer = Promise.withResolvers<T>()
    const frame = build(id)
    waiting.set(id, { ...answer, frame })
    if (this.link !== undefined && this.wire?.live !== true) return answer.promise
    this.send(frame).catch(error => {
      if (this.link !== undefined) return
      waiting.delete(id)
      answer.reject(error as Error)
    })
    return answer.promise
  }

  /** Send on the current pipe. */
  private send(bytes: Buffer): Promise<void> {
    const wire = this.wire
    if (wire === undefined) return Promise.reject(new TransportError(`${this.start.where}: the terminal's pipe is closed`))
    return this.sendOn(wire, bytes)
  }

  private sendOn(wire: Wire, bytes: Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      if (wire.gone || wire.stdin.destroyed || wire.stdin.writableEnded) {
        reject(new TransportError(`${this.start.where}: the terminal's pipe is closed`))
        return
      }
      wire.stdin.write(bytes, error => error ? reject(new TransportError(`${this.start.where}: write to the terminal failed: ${error.message}`, { cause: error })) : resolve())
    })
  }

  /** Grant at the next tick, once for every take of that tick (see {@link TakenReadable}). */
  private grantSoon(): void {
    if (this.grantScheduled) return
    this.grantScheduled = true
    process.nextTick(() => {
      this.grantScheduled = false
      this.grant()
    })
  }

  /**
   * Grant the holder what the reader has room for: the window less what is in flight and what
   * `output` holds untaken. Granted in steps of at least a quarter window (one frame each), or
   * whatever the room is when nothing is in flight: no push would come to ask again.
   */
  private grant(): void {
    if (this.outcome !== undefined || this.failure !== undefined || this.wire?.live !== true) return
    const inFlight = this.granted - this.received
    const room = this.window - inFlight - this.output.readableLength
    if (room <= 0 || (room < this.window / 4 && inFlight > 0)) return
    this.granted += room
    this.send(creditFrame(room)).catch(() => undefined)
  }

  /** Wire `pipe` as the current one, every listener at once: a fast shell's frames arrive at once. */
  private connect(pipe: ProcessTransport): Wire | undefined {
    const stdin = pipe.stdin
    if (stdin === undefined) return undefined
    const wire: Wire = { pipe, stdin, reader: new HolderFrameReader(), live: false, gone: false }
    this.wire = wire
    pipe.stdout.on('data', (chunk: Buffer) => this.receive(wire, chunk))
    pipe.stdout.once('end', () => this.ended(wire))
    pipe.stdout.once('close', () => this.ended(wire))
    pipe.stdout.on('error', error => this.lost(wire, error))
    pipe.stderr.on('data', (chunk: Buffer) => {
      if (this.stderr.length < STDERR_KEPT_BYTES) this.stderr += chunk.toString('utf8').slice(0, STDERR_KEPT_BYTES - this.stderr.length)
    })
    pipe.stderr.on('error', () => undefined)
    // A write that fails (EPIPE: the holder already exited) decides nothing: the holder's
    // stdout still carries its last frames, and its end says whether an exit frame came.
    stdin.on('error', () => undefined)
    return wire
  }

  private receive(wire: Wire, chunk: Buffer): void {
    if (wire.gone) return
    let frames: HolderFrame[]
    try {
      frames = wire.reader.push(chunk)
    } catch (error) {
      this.lost(wire, error as Error)
      wire.pipe.close()
      return
    }
    for (const frame of frames) {
      switch (frame.type) {
        case 'output':
          // After the end (a held shell detached by close()): the bytes are the holder's to keep.
          if (this.outputEnded) break
          this.received += frame.data.length
          this.window = flowWindow(this)
          this.output.push(frame.data)
          break
        case 'started':
          wire.live = true
          this.parentPid = frame.holder
          this.shellPid = frame.pid
          if (!this.started) {
            this.started = true
            this.opened.resolve(this)
          }
          break
        case 'attached':
          this.attached(wire, frame)
          break
        case 'exit':
          this.outcome = frame.signal === null
            ? { exitCode: frame.code, signal: null }
            : { exitCode: null, signal: signalName(frame.signal) ?? null }
          // A held shell's holder keeps its status until collected: this client collected it.
          if (this.link !== undefined) this.sendOn(wire, releaseFrame()).catch(() => undefined)
          this.finish()
          break
        case 'accepted':
          this.accepted(frame.total)
          break
        case 'signalled': {
          const answer = this.signalling.get(frame.id)
          this.signalling.delete(frame.id)
          answer?.resolve(frame.outcome === 'gone' ? { kind: 'gone' } : { kind: frame.outcome, pgid: frame.pgid })
          break
        }
        case 'probed': {
          const answer = this.probing.get(frame.id)
          this.probing.delete(frame.id)
          answer?.resolve(frame.facts)
          break
        }
        case 'error':
          if (this.link !== undefined && /^(ENOENT|ECONNREFUSED)\b/.test(frame.text)) {
            // The relay found no holder behind the socket: it ended (its TTL, a kill), and no
            // attempt will find it again.
            this.failure ??= new HeldShellLostError('holder-gone', `${this.start.where}: the held shell's holder is gone (${frame.text}); its shell ended with it`)
            if (!this.started) this.opened.reject(this.failure)
            this.finish()
          } else if (this.link !== undefined && /^(EACCES|EPERM)\b/.test(frame.text)) {
            // The held-shell directory is another user's: this user may not reach the shell.
            this.failure ??= new HeldShellDeniedError(`${this.start.where}: the held shell is another user's: ${frame.text}`)
            if (!this.started) this.opened.reject(this.failure)
            this.finish()
          } else if (!this.started) this.opened.reject(new SpawnFailedError(`cannot start a terminal in ${this.start.where}: ${frame.text}`))
          else this.lost(wire, new TransportError(`${this.start.where}: the held shell could not be reached: ${frame.text}`))
          break
        case 'hello':
        case 'unknown':
          break
      }
    }
    this.grant()
  }

  /** The holder's count of input it accepted: writes up to it are done. */
  private accepted(total: number): void {
    if (total > this.inputAccepted) {
      // Drop what was accepted from the bytes kept for a resend.
      let drop = total - this.inputAccepted
      while (drop > 0 && this.unaccepted.length > 0) {
        const first = this.unaccepted[0]!
        if (first.length <= drop) { drop -= first.length; this.unaccepted.shift() }
        else { this.unaccepted[0] = first.subarray(drop); drop = 0 }
      }
      this.inputAccepted = total
    }
    while (this.acceptance.length > 0 && this.acceptance[0]!.upTo <= total) this.acceptance.shift()!.resolve()
  }

  /**
   * The holder's answer to an attach: the first one opens the terminal (a client that adopts a
   * held shell); a later one resumes it on a new pipe (a reconnect).
   */
  private attached(wire: Wire, reply: AttachReply): void {
    if (reply.status !== 'attached') {
      const error = reply.status === 'busy'
        ? new HeldShellBusyError(`${this.start.where}: the held shell ${reply.shell} is controlled by client ${reply.controller}, which is still connected; retry once it is gone, or end it (doctor --reap --include-persistent)`)
        : reply.status === 'denied'
          ? new HeldShellDeniedError(`${this.start.where}: the held shell ${reply.shell} refused this client: its secret does not match, or this user is not the shell's`)
          : new SpawnFailedError(`${this.start.where}: the holder ${reply.holder} has no shell to attach to, or not the output asked for`)
      this.failure ??= error
      if (!this.started) this.opened.reject(error)
      this.finish()
      wire.pipe.close()
      return
    }
    wire.live = true
    this.parentPid = reply.holder
    this.shellPid = reply.shell
    this.onAttach?.(reply)
    // Output resumes at the holder's start: later than asked when its log dropped the bytes between.
    if (this.started && reply.start > this.received) {
      const gap = { offset: this.received, bytes: reply.start - this.received }
      this.gaps.push(gap)
      this.link?.onGap?.(gap)
    }
    if (!this.started) {
      // A client that never wrote: its input goes on from what the holder accepted.
      this.inputSent = reply.accepted
      this.inputAccepted = reply.accepted
    }
    this.received = reply.start
    // Exactly the credit the attach gave (the reader may have taken more since it was sent).
    this.granted = reply.start + this.attachCredit
    // Input the holder never accepted goes again, from the holder's count: it applies each byte once.
    this.accepted(reply.accepted)
    if (this.unaccepted.length > 0) this.sendOn(wire, inputAtFrames(this.inputAccepted, Buffer.concat(this.unaccepted))).catch(() => undefined)
    for (const pending of [...this.signalling.values(), ...this.probing.values()]) this.sendOn(wire, pending.frame).catch(() => undefined)
    // The attach may have given no credit (the reader held a full window then): grant what there
    // is room for now, or no output would ever come to ask again.
    this.grant()
    if (!this.started) {
      this.started = true
      this.opened.resolve(this)
    }
  }

  private ended(wire: Wire): void {
    if (wire.gone) return
    if (!this.started && this.link === undefined) {
      const said = this.stderr.trim()
      wire.gone = true
      this.opened.reject(new SpawnFailedError(`the terminal's holder (dsh-pty) in ${this.start.where} ended before it started a shell${said.length > 0 ? `: ${said}` : ''}`))
      this.finish()
      return
    }
    this.lost(wire, undefined)
  }

  /**
   * The pipe `wire` ended or broke (`error`, or its end). Attached mode, or a held shell that
   * ended or was closed: the terminal is done. A held shell otherwise: reconnect.
   */
  private lost(wire: Wire, error: Error | undefined): void {
    if (wire.gone) return
    wire.gone = true
    if (this.outcome !== undefined || this.outputEnded) return
    if (this.link === undefined || this.closed || !this.started || this.failure !== undefined) {
      if (error !== undefined) this.failure ??= error instanceof TransportError ? error : new TransportError(`${this.start.where}: the terminal's pipe failed: ${error.message}`, { cause: error })
      if (!this.started) this.opened.reject(this.failure ?? new SpawnFailedError(`the terminal's holder (dsh-pty) in ${this.start.where} ended before it started a shell${this.stderr.trim().length > 0 ? `: ${this.stderr.trim()}` : ''}`))
      this.finish()
      return
    }
    this.reachAgain(this.link, error)
  }

  /**
   * Run {@link reconnect} unless one runs. A pipe lost while a reconnect is still finishing (its
   * attach answered, the loop not yet ended) is reached again when that loop ends: the loop
   * cannot tell, and nothing else would ever reconnect.
   */
  private reachAgain(link: HeldShellLink, cause: Error | undefined): void {
    if (this.reconnecting !== undefined) return
    this.reconnecting = this.reconnect(link, cause).finally(() => {
      this.reconnecting = undefined
      if (this.wire?.gone === true && this.outcome === undefined && !this.outputEnded && !this.closed && this.failure === undefined) this.reachAgain(link, undefined)
    })
  }

  /** Reach the held shell again through fresh pipes until one attaches, or the deadline passes. */
  private async reconnect(link: HeldShellLink, cause: Error | undefined): Promise<void> {
    const deadline = performance.now() + link.deadlineMs
    let last: Error | undefined = cause
    for (let attempt = 0; !this.closed && this.outcome === undefined && this.failure === undefined; attempt += 1) {
      if (attempt > 0) {
        const pause = RECONNECT_BACKOFF_MS[Math.min(attempt - 1, RECONNECT_BACKOFF_MS.length - 1)]!
        if (performance.now() + pause > deadline) break
        await delay(pause)
      }
      if (performance.now() > deadline) break
      try {
        const pipe = await link.reconnect()
        if (this.closed) { pipe.close(); return }
        const wire = this.connect(pipe)
        if (wire === undefined) throw new TypeError('a held shell\'s relay needs stdin')
        const credit = Math.max(0, this.window - this.output.readableLength)
        this.attachCredit = credit
        await this.sendOn(wire, attachFrame(link.secret, true, this.received, credit, link.controller))
        // The answer (or the pipe's end) decides; a pipe that ends first is lost again, and the next attempt follows.
        const outcome = await this.waitAttached(wire, deadline)
        if (outcome === 'attached') return
        if (this.failure !== undefined) return
      } catch (error) {
        last = error as Error
        // A world that cannot run anything now will not later within the deadline.
        if (error instanceof RemoteWorldError && PERMANENT_LOSSES.has(error.code)) break
      }
    }
    if (this.outcome !== undefined || this.closed) return
    this.failure ??= new TransportError(`${this.start.where}: the held shell could not be reached again within ${link.deadlineMs} ms${last !== undefined ? `: ${last.message}` : ''}`, last !== undefined ? { cause: last } : undefined)
    this.finish()
  }

  /** Resolve once `wire` is attached ('attached'), or gone or past the deadline ('lost'). */
  private async waitAttached(wire: Wire, deadline: number): Promise<'attached' | 'lost'> {
    while (!wire.live && !wire.gone && this.failure === undefined && performance.now() < deadline) await delay(10)
    if (wire.live && !wire.gone) return 'attached'
    if (!wire.gone) {
      wire.gone = true
      wire.pipe.close()
    }
    return 'lost'
  }

  /** End `output` (after every byte received) and let `exit()` answer. */
  private finish(): void {
    leaveFlow(this)
    // Requests the holder never answered: the shell is gone when it reported its end; otherwise
    // the pipe failed or the holder was killed, and nothing is known.
    const unknown = this.outcome === undefined ? this.failure ?? new TransportError(`${this.start.where}: the terminal's pipe ended before the holder answered`) : undefined
    for (const answer of this.signalling.values()) unknown === undefined ? answer.resolve({ kind: 'gone' }) : answer.reject(unknown)
    this.signalling.clear()
    for (const answer of this.probing.values()) unknown === undefined ? answer.resolve(undefined) : answer.reject(unknown)
    this.probing.clear()
    // Writes the holder never accepted: moot once the shell ended, failed when the pipe broke.
    for (const waiting of this.acceptance.splice(0)) {
      if (this.failure !== undefined && this.outcome === undefined) waiting.reject(this.failure)
      else waiting.resolve()
    }
    if (!this.outputEnded) {
      this.outputEnded = true
      this.output.push(null)
    }
    this.settled.resolve()
  }
}
