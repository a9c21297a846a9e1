/**
 * A terminal transport over dsh-pty (dsh-pty.c), the terminal's world-side parent: the holder
 * runs on a plain pipe (a non-TTY Docker exec, an SSH exec channel without a pty) and owns the
 * PTY in the world. Against a PTY the engine or sshd allocates, this gives
 * - the shell's true wait status: `{ exitCode: null, signal: 'SIGKILL' }` for a `kill -9 $$`,
 *   `{ exitCode: 137, signal: null }` for `exit 137` (Docker's ExecInspect says 137 for both);
 * - bounded output in flight: the holder reads the PTY only as far as this side granted credit,
 *   and this side grants it as the terminal's reader takes the bytes, so a cancel under an output
 *   flood drains at most the terminal's window (flow-budget.ts) plus the PTY's own buffer;
 * - a terminal that settles on the holder's exit frame, without waiting for the engine or sshd
 *   to report the end of the exec.
 * @module dsh-remote-worlds/providers/remote/pty-holder/held-terminal
 */
import { Readable } from 'node:stream'
import type { SubprocessOutcome } from '@deepseek-ai/dsh-subprocess'
import { SpawnFailedError, TransportError } from '../errors.ts'
import { constants as osConstants } from 'node:os'
import type { ForegroundFacts, ProcessIdentity, RemoteSignalName, SignalForegroundResult } from '../control-channel.ts'
import type { ProcessTransport } from '../process.ts'
import { signalName } from '../signals.ts'
import type { TerminalTransport } from '../terminal.ts'
import { MAX_WINDOW_BYTES, flowWindow, leaveFlow } from './flow-budget.ts'
import { type HolderFrame, HolderFrameReader, creditFrame, inputFrames, probeFrame, resizeFrame, signalFrame, spawnFrame } from './protocol.ts'

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

/** A request's pending answer. */
type Answer<T> = Pick<PromiseWithResolvers<T>, 'resolve' | 'reject'>

/** What {@link openHeldTerminal} starts. */
export interface HeldTerminalStart {
  /** The start wrapper (boundary.ts), run by the holder as `/bin/sh -c SCRIPT` on the new PTY. */
  script: string
  /** The PTY's window size at start, in character cells (set before the shell runs). */
  rows: number
  cols: number
  /** World description for messages. */
  where: string
}

/**
 * Drive dsh-pty on `pipe` (a process running the holder, stdin attached): send the spawn frame
 * and resolve once the holder forked the shell.
 * @returns a {@link TerminalTransport} whose `output` carries the PTY's bytes exactly.
 * @throws SpawnFailedError when the holder reports it cannot start a shell (its reason), or ends
 *   first (its stderr); TransportError when the pipe breaks first.
 */
export function openHeldTerminal(pipe: ProcessTransport, start: HeldTerminalStart): Promise<TerminalTransport> {
  const stdin = pipe.stdin
  if (stdin === undefined) return Promise.reject(new TypeError('openHeldTerminal needs a transport with stdin'))
  return new Promise((resolve, reject) => {
    const terminal = new HeldTerminal(pipe, stdin, start, { resolve, reject })
    terminal.begin()
  })
}

class HeldTerminal implements TerminalTransport {
  readonly output: Readable
  readonly sizeSetAtStart = true
  /** The holder's pid in the world, the shell's parent (0 until it started the shell). */
  parentPid = 0
  private readonly pipe: ProcessTransport
  private readonly stdin: NonNullable<ProcessTransport['stdin']>
  private readonly start: HeldTerminalStart
  private readonly reader = new HolderFrameReader()
  private readonly opened: { resolve(transport: TerminalTransport): void; reject(error: Error): void }
  private started = false
  /** Credit granted to the holder in all (bytes). */
  private granted = HOLDER_CREDIT_BYTES
  /** Output received in all (bytes). */
  private received = 0
  private stderr = ''
  private outcome: SubprocessOutcome | undefined
  private failure: Error | undefined
  private readonly settled = Promise.withResolvers<void>()
  private outputEnded = false
  /** Signal requests awaiting the holder's answer, by request id. */
  private readonly signalling = new Map<number, Answer<SignalForegroundResult>>()
  /** Probe requests awaiting the holder's answer, by request id. */
  private readonly probing = new Map<number, Answer<ForegroundFacts | undefined>>()
  /** Input bytes written in all, and the writes waiting for the holder to accept them, in order. */
  private inputSent = 0
  private readonly acceptance: Array<{ upTo: number; resolve(): void; reject(error: Error): void }> = []
  /** The id of the next signal or probe request (u32, never 0). */
  private nextRequest = 1
  /** The credit window now (bytes): {@link HOLDER_CREDIT_BYTES} until output arrives, then the flow budget's share. */
  private window = HOLDER_CREDIT_BYTES

  constructor(pipe: ProcessTransport, stdin: NonNullable<ProcessTransport['stdin']>, start: HeldTerminalStart, opened: HeldTerminal['opened']) {
    this.pipe = pipe
    this.stdin = stdin
    this.start = start
    this.opened = opened
    // Readable calls read() before it hands the buffered bytes over (the buffer still looks
    // full then), and not again until a push: the grant is counted after the hand-over.
    this.output = new Readable({ highWaterMark: MAX_WINDOW_BYTES, read: () => process.nextTick(() => this.grant()) })
    // Every listener where the pipe is handed over: a fast shell's frames arrive at once.
    pipe.stdout.on('data', (chunk: Buffer) => this.receive(chunk))
    pipe.stdout.once('end', () => this.ended())
    pipe.stdout.once('close', () => this.ended())
    pipe.stdout.on('error', error => this.broke(error))
    pipe.stderr.on('data', (chunk: Buffer) => {
      if (this.stderr.length < STDERR_KEPT_BYTES) this.stderr += chunk.toString('utf8').slice(0, STDERR_KEPT_BYTES - this.stderr.length)
    })
    pipe.stderr.on('error', () => undefined)
    // A write that fails (EPIPE: the holder already exited) decides nothing: the holder's
    // stdout still carries its last frames, and its end says whether an exit frame came.
    stdin.on('error', () => undefined)
    this.settled.promise.catch(() => undefined)
  }

  begin(): void {
    this.send(spawnFrame(this.start.rows, this.start.cols, HOLDER_CREDIT_BYTES, this.start.script)).catch(error => this.broke(error as Error))
  }

  /**
   * Write `data` to the PTY input; resolves once the holder accepted it (its `i` count reached
   * the write's end), as a local PTY write is done once the master took it. A write pending when
   * the shell ends resolves (nothing will read it); one pending when the pipe breaks rejects.
   * @throws TransportError when the pipe is closed or breaks.
   */
  async write(data: Buffer): Promise<void> {
    if (data.length === 0) return
    if (this.outputEnded) throw this.failure ?? new TransportError(`${this.start.where}: the terminal ended`)
    this.inputSent += data.length
    const waiting = { upTo: this.inputSent, ...Promise.withResolvers<void>() }
    this.acceptance.push(waiting)
    try {
      await this.send(inputFrames(data))
    } catch (error) {
      this.acceptance.splice(this.acceptance.indexOf(waiting), 1)
      throw error
    }
    return waiting.promise
  }

  resize(rows: number, cols: number): Promise<void> {
    return this.send(resizeFrame(rows, cols))
  }

  /**
   * The shell's wait status from the holder's exit frame.
   * @throws TransportError when the pipe broke, or the holder ended without reporting (it was
   *   killed: the shell's status is unknown).
   */
  async exit(): Promise<SubprocessOutcome> {
    await this.settled.promise
    if (this.outcome !== undefined) return this.outcome
    let holder = 'its status unknown'
    try {
      const facts = await this.pipe.exit()
      holder = facts.signal !== null ? `killed by ${facts.signal}` : `exit code ${facts.exitCode}`
    } catch (error) {
      throw this.failure ?? error
    }
    throw this.failure ?? new TransportError(`${this.start.where}: the shell's parent (dsh-pty) ended before it reported the shell's status (${holder}), so the terminal hung up; something in the world ended it (a \`kill $PPID\` from the shell, say)${this.stderr.trim().length > 0 ? `: ${this.stderr.trim()}` : ''}`)
  }

  close(): void {
    this.pipe.close()
  }

  /**
   * Signal the PTY's foreground process group through the holder: the kernel names the group
   * (TIOCGPGRP on the master), so the request waits behind no other terminal's probes, and no
   * other tty's group can be hit. SIGKILL to `program`'s own group (its prompt) is refused.
   * The request grants {@link PTY_BUFFER_BYTES} of credit with it.
   * @returns `gone` once the shell ended.
   * @throws TransportError when the pipe is closed, or ends or fails before the holder answered.
   */
  async signalForeground(program: ProcessIdentity, signal: RemoteSignalName): Promise<SignalForegroundResult> {
    if (this.outcome !== undefined) return { kind: 'gone' }
    const number = osConstants.signals[`SIG${signal}`]
    // The signal's drain: what the PTY holds may come at once, not a window at a time.
    this.granted += PTY_BUFFER_BYTES
    return this.ask(this.signalling, id => Buffer.concat([signalFrame(id, number, program.pid), creditFrame(PTY_BUFFER_BYTES)]))
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

  /** Send the request `build(id)` and resolve with the holder's answer to that id (see {@link finish} for the answer when none comes). */
  private async ask<T>(waiting: Map<number, Answer<T>>, build: (id: number) => Buffer): Promise<T> {
    if (this.outputEnded && this.outcome === undefined) throw this.failure ?? new TransportError(`${this.start.where}: the terminal's pipe ended`)
    const id = this.nextRequest
    this.nextRequest = this.nextRequest >= 0xffffffff ? 1 : this.nextRequest + 1
    const answer = Promise.withResolvers<T>()
    waiting.set(id, answer)
    try {
      await this.send(build(id))
    } catch (error) {
      waiting.delete(id)
      throw error
    }
    return answer.promise
  }

  private send(bytes: Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.stdin.destroyed || this.stdin.writableEnded) {
        reject(new TransportError(`${this.start.where}: the terminal's pipe is closed`))
        return
      }
      this.stdin.write(bytes, error => error ? reject(new TransportError(`${this.start.where}: write to the terminal failed: ${error.message}`, { cause: error })) : resolve())
    })
  }

  /**
   * Grant the holder what the reader has room for: the window less what is in flight and what
   * `output` holds untaken. Granted in steps of at least a quarter window (one frame each), or
   * whatever the room is when nothing is in flight: no push would come to ask again.
   */
  private grant(): void {
    if (this.outcome !== undefined || this.failure !== undefined) return
    const inFlight = this.granted - this.received
    const room = this.window - inFlight - this.output.readableLength
    if (room <= 0 || (room < this.window / 4 && inFlight > 0)) return
    this.granted += room
    this.send(creditFrame(room)).catch(() => undefined)
  }

  private receive(chunk: Buffer): void {
    let frames: HolderFrame[]
    try {
      frames = this.reader.push(chunk)
    } catch (error) {
      this.broke(error as Error)
      this.pipe.close()
      return
    }
    for (const frame of frames) {
      switch (frame.type) {
        case 'output':
          this.received += frame.data.length
          this.window = flowWindow(this)
          this.output.push(frame.data)
          break
        case 'started':
          if (!this.started) {
            this.started = true
            this.parentPid = frame.holder
            this.opened.resolve(this)
          }
          break
        case 'exit':
          this.outcome = frame.signal === null
            ? { exitCode: frame.code, signal: null }
            : { exitCode: null, signal: signalName(frame.signal) ?? null }
          this.finish()
          break
        case 'signalled': {
          const answer = this.signalling.get(frame.id)
          this.signalling.delete(frame.id)
          answer?.resolve(frame.outcome === 'gone' ? { kind: 'gone' } : { kind: frame.outcome, pgid: frame.pgid })
          break
        }
        case 'accepted':
          while (this.acceptance.length > 0 && this.acceptance[0]!.upTo <= frame.total) this.acceptance.shift()!.resolve()
          break
        case 'probed': {
          const answer = this.probing.get(frame.id)
          this.probing.delete(frame.id)
          answer?.resolve(frame.facts)
          break
        }
        case 'error':
          this.opened.reject(new SpawnFailedError(`cannot start a terminal in ${this.start.where}: ${frame.text}`))
          break
        case 'hello':
        case 'unknown':
          break
      }
    }
    this.grant()
  }

  private ended(): void {
    if (!this.started) {
      const said = this.stderr.trim()
      this.opened.reject(new SpawnFailedError(`the terminal's holder (dsh-pty) in ${this.start.where} ended before it started a shell${said.length > 0 ? `: ${said}` : ''}`))
    }
    this.finish()
  }

  private broke(error: Error): void {
    if (this.outcome !== undefined) return
    this.failure ??= error instanceof TransportError ? error : new TransportError(`${this.start.where}: the terminal's pipe failed: ${error.message}`, { cause: error })
    this.opened.reject(this.failure)
    this.finish()
  }

  /** End `output` (after every byte received) and let `exit()` answer. */
  private finish(): void {
    leaveFlow(this)
    // Requests the holder never answered: its shell (and so the terminal) is gone.
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
