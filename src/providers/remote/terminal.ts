/**
 * The world-neutral remote terminal: a {@link SubprocessTerminalHandle} over any PTY byte
 * transport (a Docker exec with `Tty: true`, an SSH exec channel with a pty) plus the world's
 * control channel for foreground probing, signalling and teardown.
 * @module dsh-remote-worlds/providers/remote/terminal
 */
import { PassThrough, type Readable } from 'node:stream'
import { setTimeout as delay } from 'node:timers/promises'
import type {
  SubprocessOutcome,
  SubprocessTerminalForeground,
  SubprocessTerminalHandle,
  SubprocessTerminalSignal,
  SubprocessTerminalSpawnSpec,
} from '@deepseek-ai/dsh-subprocess'
import { TerminalEmulator } from '../../emulator/host.ts'
import { ReplyGuard } from '../../emulator/reply-guard.ts'
import type { TerminalScreen } from '../../emulator/screen.ts'
import type { EmulatorChoice } from '../../emulator/settings.ts'
import { BoundaryScanner, buildStartWrapper, startFailure } from './boundary.ts'
import type { ControlChannel, ForegroundFacts, ProcessIdentity, RemoteSignalName, SignalForegroundResult } from './control-channel.ts'
import { InvalidArgumentError, RemoteWorldError, ScreenUnavailableError, SpawnFailedError, TransportError } from './errors.ts'
import { InputWaitObserver } from './input-wait.ts'
import { REPLY_HOLD_MS, REPLY_PROBE_INTERVAL_MS, ReplyDelivery } from './reply-delivery.ts'
import { SESSION_TAG_VARIABLE } from './ownership.ts'
import { terminateSession } from './teardown.ts'
import { findWrappedProgram } from './wrapped-program.ts'

/** Output a world dropped before the client received it (a held shell's log overflowed while it was detached). */
export interface OutputGap {
  /** The offset of the first byte dropped, in the shell's output since it started. */
  offset: number
  /** How many bytes were dropped. */
  bytes: number
}

/** The PTY byte stream of one remote process, as a world provides it. */
export interface TerminalTransport {
  /** Raw PTY output bytes; ends when the remote process's PTY side closes. */
  readonly output: Readable
  /** Deliver bytes to the PTY input. Rejects when the transport is gone. */
  write(data: Buffer): Promise<void>
  /** Set the PTY window size (rows, cols in character cells). */
  resize(rows: number, cols: number): Promise<void>
  /**
   * Exit facts of the top-level process, available after `output` ended.
   * Rejects with {@link TransportError} when the world itself broke (container stopped,
   * connection lost), so the exit status is unknowable.
   */
  exit(): Promise<SubprocessOutcome>
  /** Release local resources (socket, channel). Never kills anything remotely; never throws. */
  close(): void
  /**
   * The pid of the shell's world-side parent (pty-holder/), in the control channel's pid
   * namespace, once the shell started; absent or 0 where there is none. Teardown ends it when it
   * did not report the shell's end (its own shell stopped it).
   */
  readonly parentPid?: number | undefined
  /**
   * Signal the PTY's foreground process group from the world-side parent of the shell
   * (pty-holder/), as the control channel's `sigfg` does; absent where there is none (the
   * control channel then signals).
   */
  signalForeground?(program: ProcessIdentity, signal: RemoteSignalName): Promise<SignalForegroundResult>
  /**
   * The foreground facts of the PTY, read by the world-side parent of the shell (pty-holder/) as
   * the control channel's `fg` reads them, per terminal; absent where there is none (the control
   * channel then probes). Undefined once `program` ended.
   */
  foreground?(program: ProcessIdentity): Promise<ForegroundFacts | undefined>
  /**
   * Output the world dropped before this client received it (a held shell's log overflowed while
   * it was detached: pty-holder/held-terminal.ts), in order; absent where nothing can be dropped.
   */
  readonly gaps?: readonly OutputGap[] | undefined
  /**
   * End what the transport holds in the world and release it, for a start that failed: a held
   * shell is hung up rather than left for its TTL (pty-holder/held-terminal.ts). Absent: `close`.
   */
  discard?(): void
  /** The shell outlives this transport (a held shell: pty-holder/held-terminal.ts). */
  readonly held?: boolean | undefined
  /**
   * True when the window size is in place before the program runs, so no resize is sent at
   * start: the PTY's process was already running before the script was handed to it (a Docker
   * standby, docker/exec-pool/, which runs only where `stty` works, and the wrapper's own `stty`
   * sets the size), or the PTY was made at that size (pty-holder/).
   */
  readonly sizeSetAtStart?: boolean | undefined
}

/** What a world supplies to start one terminal. */
export interface RemoteTerminalStart {
  /** The seam's spec. */
  spec: SubprocessTerminalSpawnSpec
  /** The complete environment of the program (world ambient env, scrubbed, then spec.env). */
  env: Readonly<Record<string, string>>
  /**
   * The session's tag (ownership.ts), added to the environment as DSH_REMOTE_SESSION: the
   * teardown ends every process carrying it, and a later client finds the session by it.
   */
  tag: string
  /**
   * When `spec.argv` is a wrapper (a `ctx.sandbox` confinement), the argv of the program it runs
   * (see wrapped-program.ts): the handle then publishes that program's pid, not the wrapper's.
   */
  program?: readonly string[] | undefined
  /** Control channel running as the same uid as the terminal. */
  control: ControlChannel
  /** World description for messages, e.g. `docker container abc123 as agent`. */
  where: string
  /** Start a PTY process running `sh -c SCRIPT` (SSH: the script as the exec command). */
  open(script: string): Promise<TerminalTransport>
  /**
   * True when the world can no longer run anything (a stopped container): used when the
   * control channel is gone, to tell "nothing left to stop" from "cannot prove quiescence".
   */
  worldEnded(): Promise<boolean>
  /**
   * A fresh control channel as the same uid in the same world, for teardown when `control`
   * died with its transport while the world itself may still run (a lost SSH connection: the
   * terminal's processes may outlive it). Optional; without it a dead control channel is
   * judged by {@link worldEnded} alone.
   */
  recoverControl?: (() => Promise<ControlChannel>) | undefined
  /**
   * Reject with the world's refusal when it is frozen now (a paused container: its processes
   * neither answer nor end until it is unpaused, so nothing can be probed or signalled), resolve
   * otherwise. Asked when the shell's world-side parent has not answered a foreground probe
   * within the control channel's bound, before the answer is waited for further: a held shell's
   * parent is waited for through a transport outage (it answers once its pipe is back), which a
   * frozen world is not. Absent: the world has no such state (SSH).
   */
  refuseFrozen?: (() => Promise<void>) | undefined
  /**
   * The terminal's emulator (emulator/settings.ts `emulatorChoice`): fed the program's output,
   * it answers terminal queries (when `replies`) and shows the screen. Undefined: none.
   */
  emulator?: EmulatorChoice | undefined
  /** Called once after a successful terminate (the runtime forgets the handle). */
  onTerminated?: ((handle: RemoteTerminalHandle) => void) | undefined
}

/**
 * Transport output is coalesced before it reaches `output`: chunks are held until this many
 * bytes are pending, or until {@link OUTPUT_COALESCE_MS} after the first held chunk.
 * terminal-bash pays for each chunk in proportion to what it already holds, not to the chunk:
 * BoundedTextBuffer.append (dsh-terminal-bash lib/index.js) splits the whole scrollback into
 * lines and copies the whole 256 KiB tail into an array of characters, per append. So
 * - an SSH channel's many small chunks (one per SSH packet, ~4 KiB) starved the event loop
 *   (`seq 1 300000` took 21 s and could lose the connection to ssh2's keepalive);
 * - under an output flood the bytes in flight when a cancel's SIGINT lands (the PTY, the
 *   engine's copy buffers, socket buffers: 1.5 to 6 MB for `base64 /dev/urandom` in Docker)
 *   must all pass through terminal-bash before the prompt can: at 64 KiB per chunk that took up
 *   to 1.8 s (p90) in Docker; at 1 MiB, measured 0.2 s. A backlog arrives as back-to-back
 *   socket reads, so the bound fills at once; a trickle still flushes at the 2 ms timer.
 *
 * It is also the high-water mark of the flow control (issue 21): a handle holding this much
 * pauses its transport and hands the chunk over at the next event-loop turn, so a flood is
 * read only as fast as it is consumed, and other terminals' output and the control channel's
 * replies get their turn in between. With 20 terminals flooding, a cancel came back after
 * 38 s (Docker) and 28 s (SSH) before; measured at this bound 5 s, at 256 KiB 7.3 s and at
 * 64 KiB 8.7 s (terminal-bash takes fewer bytes a second in smaller chunks), so the drain after
 * the SIGINT, not the bound, sets that time.
 */
export const OUTPUT_COALESCE_BYTES = 1024 * 1024
/**
 * Output handed to `output` that its reader has not taken yet, above which the transport
 * pauses until the reader drains it (bytes; `output`'s highWaterMark). A reader on 'data'
 * (terminal-bash) takes each chunk as it is written, so only a paused or asynchronous reader
 * ever holds it.
 */
export const OUTPUT_READER_HIGH_WATER_BYTES = 1024 * 1024
/** Longest time a held output chunk waits for more (ms); far below terminal-bash's 50 ms polls. */
export const OUTPUT_COALESCE_MS = 2

/**
 * Under a flood, held output waits this long (ms) instead of {@link OUTPUT_COALESCE_MS}, up to
 * {@link OUTPUT_COALESCE_BYTES}: a flood is output whose last hand-over carried at least
 * {@link FLOOD_CHUNK_BYTES} less than {@link FLOOD_GAP_MS} ago. terminal-bash's cost per chunk
 * is its send's whole 256 KiB tail and scrollback plus the chunk (see
 * {@link OUTPUT_COALESCE_BYTES}), so the bigger the chunks, the fewer bytes a second it spends
 * on copies: 100 MB of `od` output went at 8.9 MB/s (Docker) and 11.5 MB/s (SSH) in the ~500
 * and ~800 KiB chunks the 2 ms timer gave, and at 9.9-12.2 and 13.2-17.6 MB/s in the ~800 and
 * ~950 KiB chunks of this rule (issue 21; 2 cores, emulator off, the same machine and hour).
 * Only a terminal that floods alone waits longer: with several flooding, a longer wait would
 * let more of each flood pile up in the handles, all of which a cancel must then hand through
 * terminal-bash before the prompt. Output that is not a flood (an echo, a prompt, a program
 * printing now and then) keeps the 2 ms wait, and a prompt marker is handed over at the next
 * turn either way, so no send settles later.
 */
export const FLOOD_COALESCE_MS = 20
/** A hand-over at least this large (bytes) says the output floods (see {@link FLOOD_COALESCE_MS}). */
const FLOOD_CHUNK_BYTES = 64 * 1024
/** A flood's next chunk comes within this long of its last hand-over (ms; see {@link FLOOD_COALESCE_MS}). */
const FLOOD_GAP_MS = 100

/** The handles whose last hand-over was a flood's, and when (performance.now() ms). */
const floodingHandles = new Map<object, number>()

/** Whether `handle` floods, and no other handle does (see {@link FLOOD_COALESCE_MS}). */
function floodsAlone(handle: object, now: number): boolean {
  let others = 0
  for (const [other, at] of floodingHandles) {
    if (now - at >= FLOOD_GAP_MS) floodingHandles.delete(other)
    else if (other !== handle) others += 1
  }
  return floodingHandles.has(handle) && others === 0
}

/**
 * After a signal to the foreground group (a cancel), output is handed over once it has been
 * quiet this long (ms), not {@link OUTPUT_COALESCE_MS} after each chunk: what the program wrote
 * before it died and the shell's next prompt then reach terminal-bash as ONE chunk.
 *
 * Why: terminal-bash pays for each chunk in proportion to what its send already holds, not to
 * the chunk (`utf8Tail` in dsh-terminal-bash lib/index.js spreads the whole 256 KiB send buffer
 * into an array of characters per append once a send printed that much): ~30 ms a chunk on 2
 * cores, whether it carries 16 KiB or a prompt. With 20 flooding terminals cancelled at once,
 * every chunk after the SIGINT queued behind every other terminal's on the one event loop
 * (issue 21: three or four chunks a terminal, back at the prompt after 1.0 to 1.7 s).
 */
export const SIGNAL_DRAIN_QUIET_MS = 15
/** The longest a signal's drain holds output (ms after the signal): a program that goes on printing is not held longer. */
export const SIGNAL_DRAIN_BOUND_MS = 300

/**
 * The longest a foreground probe waits for output the transport received before its facts but
 * still buffered (ms; see inspectForeground): the reader takes it at its pace. After it the
 * facts go as they are, as they did before the wait existed.
 */
export const PROBE_DELIVERY_BOUND_MS = 2_000

/**
 * Input typed before the program first reads the terminal waits until it does (see
 * {@link RemoteTerminalHandle.write}): at most this long (ms) after the first write.
 */
export const FIRST_READ_BOUND_MS = 10_000
/** How long the output must have been quiet before a proven read counts as the first (ms). */
const FIRST_READ_QUIET_MS = 30
/** Interval of the stdin-wait probe while input waits for the first read (ms). */
const FIRST_READ_PROBE_MS = 10

/** terminal-bash's prompt marker (OSC 133 ; D), printed before each prompt of both its dialects. */
const PROMPT_MARKER = Buffer.from('\x1b]133;D')

/**
 * How long the output must be quiet after a prompt marker before the handle warms the
 * foreground probe (ms): long enough for the shell to print its prompt and block in its read,
 * far below terminal-bash's 50 ms polls.
 *
 * Why warm it: the first probe of a new blocked read costs a fork in the world (control.sh
 * `readset` reads the select/poll fd set with `dd`: ~3 ms here, against ~2 ms for a probe
 * answered from the memo), and repeated probes of the same read are answered from control.sh's
 * memo. One probe in the quiet after the prompt moves that fork off the path of the probe that
 * settles the send; with 100 terminals each probed once in turn, every probe was a first one
 * (2.3-2.8x the probe of a terminal probed before; issue 21).
 */
const WARM_PROBE_QUIET_MS = 10

/**
 * A busy shell taken back (persistence 'client'): how long terminal-bash must have stopped
 * probing before its held live output goes (ms; it probes every 50 ms while its startup waits),
 * and the longest it is held (ms; above terminal-bash's default silence bound of 3 s).
 */
export const LIVE_HOLD_QUIET_MS = 200
export const LIVE_HOLD_BOUND_MS = 15_000

/** The window sizes {@link RemoteTerminalHandle.resize} accepts, [min, max] in character cells. */
export const TERMINAL_SIZE_LIMITS = { rows: [1, 1000], cols: [2, 1000] } as const

/** How long a wrapper may take to exec the program it wraps (ms); see wrapped-program.ts. */
const WRAPPED_PROGRAM_BOUND_MS = 5_000

const SIGNAL_NAMES: Record<SubprocessTerminalSignal, RemoteSignalName> = {
  SIGINT: 'INT', SIGTERM: 'TERM', SIGKILL: 'KILL', SIGTSTP: 'TSTP', SIGHUP: 'HUP',
}

/**
 * Start a terminal: run the start wrapper on a fresh PTY, wait for its marker, publish the pid
 * (identity fenced by start time), apply the window size, and return the live handle.
 *
 * @throws CwdNotFoundError (code ENOENT, ENOTDIR or EACCES) when `spec.cwd` cannot be entered.
 * @throws ExecutableNotFoundError (code ENOENT, or EACCES for a file without execute permission) when `argv[0]` does not exist (e.g. an image without bash).
 * @throws SpawnFailedError when the PTY ends without a marker.
 * @throws the abort reason when `spec.signal` aborts before publication (anything started is torn down).
 */
export async function startRemoteTerminal(start: RemoteTerminalStart): Promise<RemoteTerminalHandle> {
  const { spec, control, where } = start
  spec.signal?.throwIfAborted()
  const wrapper = buildStartWrapper(spec.argv, spec.cwd, { ...start.env, [SESSION_TAG_VARIABLE]: start.tag }, { rows: spec.rows, cols: spec.cols })
  // Made first so its worker loads while the PTY starts; awaited with the start marker, so the
  // program's first query is answered at once. A worker that fails leaves the terminal working
  // without replies; screen() then names the failure.
  const emulator = start.emulator === undefined ? undefined : new TerminalEmulator({ rows: spec.rows, cols: spec.cols, ...start.emulator })
  const emulatorReady = emulator?.ready.catch(() => undefined)
  let transport: TerminalTransport
  try {
    transport = await start.open(wrapper.script)
  } catch (error) {
    emulator?.close()
    throw error
  }
  /** Release what a failed start made (the PTY transport, a held shell with it, and the emulator). */
  const abandon = (): void => {
    if (transport.discard !== undefined) transport.discard()
    else transport.close()
    emulator?.close()
  }
  const scanner = new BoundaryScanner(wrapper.nonce)
  const marker = Promise.withResolvers<{ pid: number; starttime: number; rest: Buffer }>()
  const onData = (chunk: Buffer): void => {
    let event
    try {
      event = scanner.push(chunk)
    } catch (error) {
      marker.reject(new SpawnFailedError(`terminal in ${where} printed no start marker: ${(error as Error).message}`))
      return
    }
    if (event.kind === 'started') {
      // Hold later bytes in the stream until the handle attaches (nothing may be dropped).
      transport.output.pause()
      marker.resolve({ pid: event.pid, starttime: event.extra?.[0] ?? 0, rest: event.rest })
    }
    else if (event.kind === 'failed') {
      marker.reject(startFailure(event, spec.argv[0]!, spec.cwd, where))
    }
  }
  const onEnd = (): void => marker.reject(new SpawnFailedError(`terminal in ${where} ended before its start marker${scanner.seen.trim().length > 0 ? `: ${JSON.stringify(scanner.seen.trim().slice(0, 500))}` : ''}`))
  const onError = (error: Error): void => marker.reject(new TransportError(`terminal transport in ${where} failed during start: ${error.message}`, { cause: error }))
  const onAbort = (): void => marker.reject(spec.signal?.reason)
  transport.output.on('data', onData)
  transport.output.once('end', onEnd)
  transport.output.once('error', onError)
  spec.signal?.addEventListener('abort', onAbort, { once: true })
  let started: { pid: number; starttime: number; rest: Buffer }
  try {
    // A transport whose PTY has its size before the script runs needs no resize now (see
    // TerminalTransport.sizeSetAtStart).
    const resize = transport.sizeSetAtStart === true ? undefined : transport.resize(spec.rows, spec.cols).catch(() => undefined)
    started = await marker.promise
    await resize
    await emulatorReady
  } catch (error) {
    abandon()
    throw error
  } finally {
    transport.output.off('data', onData)
    transport.output.off('end', onEnd)
    transport.output.off('error', onError)
    spec.signal?.removeEventListener('abort', onAbort)
  }
  // The identity comes with the marker. The stat checks the control channel sees the same
  // process; a program that already exited (`sh -c 'exit 3'`) is gone by now, which is fine:
  // its published start time still fences the teardown of whatever it left in its session.
  const [stat, parentStat] = await Promise.all([
    control.stat(started.pid).catch(() => undefined),
    transport.parentPid !== undefined && transport.parentPid > 0 ? control.stat(transport.parentPid).catch(() => undefined) : undefined,
  ])
  const starttime = stat !== undefined && (started.starttime === 0 || stat.starttime === started.starttime)
    ? stat.starttime
    : stat === undefined && started.starttime > 0 ? started.starttime : undefined
  if (starttime === undefined) {
    abandon()
    throw new SpawnFailedError(`terminal in ${where} published pid ${started.pid}, which the control channel cannot see (different pid namespace${started.starttime === 0 ? ' or already exited' : ''})`)
  }
  const outer = { pid: started.pid, starttime }
  let program: ProcessIdentity = outer
  if (start.program !== undefined) {
    try {
      program = await findWrappedProgram(control, outer, start.program, WRAPPED_PROGRAM_BOUND_MS)
    } catch (error) {
      abandon()
      throw error
    }
  }
  const parent = parentStat === undefined ? undefined : { pid: transport.parentPid!, starttime: parentStat.starttime }
  const handle = new RemoteTerminalHandle(transport, start, program, outer, started.rest, emulator, parent)
  if (spec.signal?.aborted === true) {
    await handle.terminate().catch(() => undefined)
    throw spec.signal.reason
  }
  // Re-apply the size now that the program runs (a resize before exec start is dropped by Docker).
  if (transport.sizeSetAtStart !== true) await transport.resize(spec.rows, spec.cols).catch(() => undefined)
  return handle
}

/** A held shell a client took back (pty-holder/held-adoption.ts), for {@link adoptRemoteTerminal}. */
export interface RemoteTerminalAdoption {
  /** Its transport, attached, with the replay already read off its output. */
  transport: TerminalTransport
  /** What the client shows first (the end of its log). */
  replay: Buffer
  /** A program runs in the foreground (not the shell at its prompt). */
  busy: boolean
  /** The program terminal-bash knows, the session's leader and the shell's world-side parent, as recorded when it started. */
  program: ProcessIdentity
  session: ProcessIdentity
  parent: ProcessIdentity | undefined
}

/**
 * A handle on a held shell taken back (persistence 'client'): the same shell (same pid) as
 * before, its replay first, the window set to the spec's size, with readiness terminal-bash
 * understands (a shell at its prompt settles at once; a busy one by silence, its live output
 * held meanwhile: see `holdLive`).
 * @throws TransportError when its transport failed at once.
 */
export async function adoptRemoteTerminal(start: RemoteTerminalStart, adoption: RemoteTerminalAdoption): Promise<RemoteTerminalHandle> {
  const { spec } = start
  const emulator = start.emulator === undefined ? undefined : new TerminalEmulator({ rows: spec.rows, cols: spec.cols, ...start.emulator })
  await emulator?.ready.catch(() => undefined)
  const handle = new RemoteTerminalHandle(adoption.transport, start, adoption.program, adoption.session, adoption.replay, emulator, adoption.parent, { busy: adoption.busy })
  await adoption.transport.resize(spec.rows, spec.cols).catch(() => undefined)
  return handle
}

/**
 * A live remote terminal. `output` carries the program's bytes exactly (nothing decoded);
 * `done` resolves with the top-level exit facts, or rejects with {@link TransportError} when
 * the world broke; `output` ends in both cases.
 *
 * With an emulator (emulator/host.ts), the same bytes also feed a terminal emulator that plays
 * the terminal at the far end of the PTY: it answers the program's queries (a cursor position
 * report where the cursor really is) by writing to the PTY input, and {@link screen} shows
 * what it displays. When the emulator falls behind by more than its high-water mark, `output`
 * pauses with it (the program blocks in write(2)), so its memory stays bounded.
 */
export class RemoteTerminalHandle implements SubprocessTerminalHandle {
  /**
   * The program's pid in the remote world's pid namespace (the one the control channel probes
   * and signals in): the shell itself, also under a wrapper (see {@link RemoteTerminalStart.program}).
   */
  readonly pid: number
  /** The program's identity (pid, start time): foreground probes and signals are fenced by it. */
  readonly identity: ProcessIdentity
  /** The terminal session's leader (the start wrapper's process, a wrapper's when wrapped): teardown ends its session. */
  readonly session: ProcessIdentity
  readonly output = new PassThrough({ highWaterMark: OUTPUT_READER_HIGH_WATER_BYTES })
  readonly done: Promise<SubprocessOutcome>
  private readonly transport: TerminalTransport
  private readonly start: RemoteTerminalStart
  private readonly inflight = new Set<Promise<unknown>>()
  private readonly inputWait = new InputWaitObserver()
  private exited = false
  private closing = false
  private cleanup: Promise<void> | undefined
  /** The control channel in use: the start's, or a recovered one after it failed. */
  private control: ControlChannel
  /** A recovery of the control channel in progress. */
  private recovery: Promise<ControlChannel> | undefined
  /** Bytes the transport delivered to this handle in all, and the probes waiting for a count of them (see inspectForeground). */
  private receivedBytes = 0
  private receivedWaiters: ({ upTo: number } & PromiseWithResolvers<void>)[] = []
  /** The transport's output ended (nothing more will be received). */
  private outputDone = false
  /** Transport chunks not yet written to `output`, in arrival order. */
  private pending: Buffer[] = []
  private pendingBytes = 0
  private flushTimer: NodeJS.Timeout | undefined
  /**
   * A signal's drain in progress (see {@link SIGNAL_DRAIN_QUIET_MS}): `done` resolves when the
   * output it held was handed over; `bound` ends it at {@link SIGNAL_DRAIN_BOUND_MS}.
   */
  private drain: { done: PromiseWithResolvers<void>; bound: NodeJS.Timeout } | undefined
  /** A flush at the next event-loop turn, scheduled when {@link pendingBytes} reached the high-water mark. */
  private flushSoon: NodeJS.Immediate | undefined
  /** Flow control: why the transport's output is paused (any of the three pauses it, until terminate). */
  private holdingFull = false
  private readerBehind = false
  private emulatorBehind = false
  /** Input written before the program first read the terminal waits for this (see write). */
  private firstRead: Promise<void> | undefined
  private readFirst = false
  /**
   * A busy shell taken back: its live output waits (held, not flushed) until terminal-bash's
   * startup settled, seen as its probes stopping (see {@link holdLive}).
   */
  private liveHeld: { since: number; timer: NodeJS.Timeout } | undefined
  /** When the last foreground probe of the caller came (performance.now() ms), and how many came. */
  private lastProbeAt = 0
  private probeCount = 0
  /** The last chunk carried a prompt marker: the next one (the prompt's text) is handed over at once too. */
  private promptTailDue = false
  /** The output carried terminal-bash's prompt marker (OSC 133;D) at least once. */
  private promptSeen = false
  /** When the last output chunk arrived (performance.now() ms). */
  private lastOutputAt = performance.now()
  /** The warm-up probe after a prompt marker, scheduled (see {@link WARM_PROBE_QUIET_MS}). */
  private warmTimer: NodeJS.Timeout | undefined
  /** Foreground probes of the caller in flight (a warm-up is needless while one runs). */
  private probing = 0
  /** The shell's world-side parent (pty-holder/), when it has one. */
  private readonly parent: ProcessIdentity | undefined
  /** The terminal emulator, when the start asked for one. */
  private readonly emulator: TerminalEmulator | undefined
  /** Drops a harness's second answer to a query the emulator answered (emulator/reply-guard.ts). */
  private readonly replyGuard = new ReplyGuard()
  /** Holds each emulator reply until the program that asked reads the terminal (reply-delivery.ts). */
  private readonly replies = new ReplyDelivery({
    readingTerminal: () => this.provenRead(),
    settle: async () => {
      this.flush()
      await this.emulator?.sync()
    },
    write: data => {
      this.replyGuard.noteAnswered(data)
      return this.transport.write(Buffer.from(data, 'utf8'))
    },
    live: () => !this.exited && !this.closing,
  })

  /** @internal Use {@link startRemoteTerminal}. */
  constructor(transport: TerminalTransport, start: RemoteTerminalStart, identity: ProcessIdentity, session: ProcessIdentity, rest: Buffer, emulator?: TerminalEmulator, parent?: ProcessIdentity, adopted?: { busy: boolean }) {
    this.transport = transport
    this.parent = parent
    this.start = start
    this.control = start.control
    this.identity = identity
    this.session = session
    this.pid = identity.pid
    this.emulator = emulator
    // A shell taken back: `rest` is its replay. The emulator rebuilds its screen from it without
    // answering the queries in it (their programs asked them long ago); a busy shell's live
    // output waits until terminal-bash's startup settled (see holdLive).
    let replaying = adopted !== undefined && rest.length > 0
    if (adopted?.busy === true) this.holdLive()
    emulator?.connect({
      onReply: data => {
        if (!this.exited && !this.closing && !replaying) this.replies.reply(data)
      },
      onPrompt: () => this.replies.prompt(),
      onBackpressure: paused => {
        this.emulatorBehind = paused
        this.updateSource()
      },
    })
    if (rest.length > 0) {
      this.notePrompt(rest)
      this.emulator?.write(rest)
      this.output.write(rest)
      // The worker answers a sync after every reply to what it parsed before it.
      if (replaying) void (this.emulator?.sync() ?? Promise.resolve()).catch(() => undefined).finally(() => { replaying = false })
    }
    const outputEnded = Promise.withResolvers<void>()
    // Everything held is delivered before `done` settles and before `output` ends.
    const ended = (): void => {
      this.flush()
      this.outputDone = true
      for (const waiter of this.receivedWaiters) waiter.resolve()
      outputEnded.resolve()
    }
    transport.output.on('data', (chunk: Buffer) => this.hold(chunk))
    // A reader of `output` that stopped taking (paused, or reading asynchronously) holds the
    // transport paused until it took what it has (see flush).
    this.output.on('drain', () => {
      this.readerBehind = false
      this.updateSource()
    })
    transport.output.once('end', ended)
    transport.output.once('close', ended)
    transport.output.once('error', ended)
    // A program that ended at once may have ended the stream during the start, before these
    // listeners (its last bytes came with the marker, as `rest`).
    if (transport.output.readableEnded || transport.output.destroyed) ended()
    transport.output.resume()
    this.done = outputEnded.promise.then(() => transport.exit()).finally(() => {
      this.exited = true
      this.endOutput()
    })
    // `done` rejects only for a live transport failure; callers attach their own handlers.
    this.done.catch(() => undefined)
  }

  /**
   * Persistence 'client': the held shell of this session that ended while no client held it
   * (its status and last output), when this spawn found one instead of a shell to take back.
   */
  previousEnding: { outcome: SubprocessOutcome; tail: Buffer } | undefined
  /**
   * Persistence 'client': the held shells this user recorded for the same DSH session that this
   * spawn did not take back, their spec being another (cwd, argv, environment or sandbox mode):
   * the shell's pid and cwd. Empty otherwise.
   */
  otherHeldShells: readonly { pid: number; cwd: string | undefined }[] = []

  /** Whether the shell is held in the world (persistence 'connection' or 'client'): it outlives its transport. */
  get held(): boolean {
    return this.transport.held === true
  }

  /** The shell's world-side parent (pty-holder/), when it has one: a held shell's holder. */
  get worldParent(): ProcessIdentity | undefined {
    return this.parent
  }

  /**
   * Leave a held shell running in the world (persistence 'client'): release the transport and
   * make {@link terminate} a no-op, so a later client takes the shell back. `output` ends and
   * `done` rejects with TransportError (detached), as for a transport lost for good.
   */
  detach(): void {
    if (this.cleanup !== undefined) return
    this.closing = true
    this.cleanup = Promise.resolve()
    this.transport.close()
    this.emulator?.close()
    this.start.onTerminated?.(this)
  }

  /**
   * Output the world dropped before this client received it: ranges of a held shell's output
   * (persistence 'connection' or 'client') that its log no longer held when this client attached
   * again, as offsets in the shell's output since it started and sizes in bytes. Empty otherwise.
   */
  get outputGaps(): readonly OutputGap[] {
    return this.transport.gaps ?? []
  }

  /**
   * The control channel this terminal's probes use (the same uid, container or login session
   * as the shell): its cgroup is the shell's (resource-events.ts).
   */
  get controlChannel(): ControlChannel {
    return this.control
  }

  /**
   * @inheritdoc
   * A reply to a terminal query that the emulator already answered is dropped from `data`
   * (emulator/reply-guard.ts): the program gets one answer per query.
   *
   * Input written before the program first read the terminal waits, in order, until it does:
   * a member of the foreground group proven blocked reading it, at terminal-bash's prompt (its
   * marker seen) or with the output quiet for {@link FIRST_READ_QUIET_MS} and no emulator reply
   * held (at most {@link FIRST_READ_BOUND_MS}).
   * A program that asks the terminal something while it starts reads the answer and then
   * sets the terminal up: PowerShell's console reads the cursor position report in cooked mode,
   * then PSReadLine switches to raw mode, and a line typed ahead before that lost its Enter
   * (terminal-bash's pwsh setup line glued to the agent's first command). After the first read,
   * input goes straight through, typed ahead as in any terminal.
   */
  write(data: string): Promise<void> {
    if (this.exited) return Promise.reject(new Error('terminal process has exited'))
    // A send: what a busy adopted shell printed meanwhile goes first (see holdLive).
    this.releaseLive()
    if (this.closing) return Promise.reject(new Error('terminal is terminating'))
    const input = this.replyGuard.filter(data)
    if (input.length === 0) return Promise.resolve()
    const bytes = Buffer.from(input, 'utf8')
    if (this.readFirst) return this.track(this.transport.write(bytes))
    this.firstRead ??= this.awaitFirstRead()
    return this.track(this.firstRead.then(() => this.transport.write(bytes)))
  }

  /**
   * The read a member of the foreground group is proven blocked in now (control.sh `waits`; its
   * `waitingCall`), or undefined when none is.
   */
  private async provenRead(): Promise<string | undefined> {
    const facts = await this.probe()
    return facts?.inputWaiting === true ? facts.waitingCall : undefined
  }

  /**
   * The foreground facts: from the shell's world-side parent where there is one (its own pipe:
   * no queue shared with the world's other terminals), else from the control channel.
   */
  private probe(): Promise<ForegroundFacts | undefined> {
    const byControl = (): Promise<ForegroundFacts | undefined> => this.withControl(control => control.foreground(this.identity))
    if (this.transport.foreground === undefined) return byControl()
    // A parent that does not answer within the control channel's bound (a paused container, a
    // parent its own shell stopped): the control channel answers, or says why the world cannot.
    // A frozen world refuses first: a held shell's probe would otherwise wait for its parent.
    return this.unlessLate(this.transport.foreground(this.identity), asked => byControl().catch(async (error: unknown) => {
      // A held shell's parent silent through a transport outage: the outage that delays its
      // answer cuts the control channel off too, and the parent answers once the transport is
      // back (HeldTerminal reconnects within reconnectDeadlineMs, else rejects `asked`). A
      // world frozen meanwhile is refused, as above.
      if (!this.held) throw error
      await this.start.refuseFrozen?.()
      return asked
    }))
  }

  /**
   * `asked` of the shell's world-side parent; when it has not answered within the control
   * channel's bound, the world's refusal if it is frozen now ({@link RemoteTerminalStart.refuseFrozen}),
   * else `late(asked)`.
   */
  private unlessLate<T>(asked: Promise<T>, late: (asked: Promise<T>) => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined
    const bound = new Promise<'late'>(resolve => { timer = setTimeout(() => resolve('late'), this.control.requestTimeoutMs) })
    return Promise.race([asked, bound]).then(async answer => {
      if (answer !== 'late') return answer
      await this.start.refuseFrozen?.()
      return late(asked)
    }).finally(() => clearTimeout(timer))
  }

  /** Resolves once the program first reads the terminal, quietly (see {@link write}), or at the bound. */
  private async awaitFirstRead(): Promise<void> {
    const deadline = performance.now() + FIRST_READ_BOUND_MS
    while (performance.now() < deadline && !this.exited && !this.closing) {
      // At a harness prompt (terminal-bash's marker seen) the shell is set up: its read is the one.
      const quiet = this.promptSeen || (performance.now() - this.lastOutputAt >= FIRST_READ_QUIET_MS && !this.replies.holding)
      if (quiet && await this.provenRead().catch(() => undefined) !== undefined) break
      await delay(FIRST_READ_PROBE_MS)
    }
    this.readFirst = true
  }

  /**
   * Set the PTY window size (the program gets SIGWINCH) and the emulator's, in character cells.
   * @throws InvalidArgumentError for a size outside {@link TERMINAL_SIZE_LIMITS} (xterm.js keeps
   *   at least 2 columns; a larger screen costs the emulator memory per cell).
   * @throws Error when the terminal exited or is terminating; the transport's error when it is gone.
   */
  async resize(rows: number, cols: number): Promise<void> {
    const { rows: rowLimits, cols: colLimits } = TERMINAL_SIZE_LIMITS
    const within = (value: number, [min, max]: readonly [number, number]): boolean => Number.isSafeInteger(value) && value >= min && value <= max
    if (!within(rows, rowLimits) || !within(cols, colLimits)) throw new InvalidArgumentError(`terminal size must be ${rowLimits[0]}-${rowLimits[1]} rows and ${colLimits[0]}-${colLimits[1]} columns, got ${rows}x${cols}`)
    if (this.exited) throw new Error('terminal process has exited')
    if (this.closing) throw new Error('terminal is terminating')
    // The emulator first: what the program draws after its SIGWINCH is parsed at the new size.
    this.emulator?.resize(rows, cols)
    await this.track(this.transport.resize(rows, cols))
  }

  /**
   * What the terminal shows now, after every output byte received so far (see
   * {@link TerminalScreen}); also after the program exited, until the terminal is terminated.
   * @param options.scrollback - also return up to this many lines that scrolled off the top.
   * @throws InvalidArgumentError when `scrollback` is not a whole number.
   * @throws ScreenUnavailableError when the terminal has no emulator, was terminated, or its
   *   emulator failed (the cause).
   */
  async screen(options: { scrollback?: number } = {}): Promise<TerminalScreen> {
    const scrollback = options.scrollback ?? 0
    if (!Number.isSafeInteger(scrollback) || scrollback < 0) throw new InvalidArgumentError(`screen({ scrollback }) takes a whole number of lines, got ${String(options.scrollback)}`)
    if (this.emulator === undefined) throw new ScreenUnavailableError(`terminal ${this.pid} in ${this.start.where} has no emulator (runtime setting terminal.emulator is false)`)
    try {
      // Held output is the emulator's too: hand it over first.
      this.flush()
      return await this.emulator.screen(scrollback)
    } catch (error) {
      throw new ScreenUnavailableError(`the screen of terminal ${this.pid} in ${this.start.where} is unavailable: ${(error as Error).message}`, { cause: error })
    }
  }

  /** @inheritdoc */
  inspectForeground(): Promise<SubprocessTerminalForeground | undefined> {
    if (this.closing) return Promise.reject(new Error('terminal is terminating'))
    this.lastProbeAt = performance.now()
    this.probeCount += 1
    this.probing += 1
    return this.track(this.probe().then(facts => this.pastReplies(facts)).then(async facts => {
      // During a signal's drain, the drain's one chunk is handed over when the output goes
      // quiet, so no probe splits it (at most SIGNAL_DRAIN_BOUND_MS).
      if (this.drain !== undefined) await this.drain.done.promise
      // What the program printed before it blocked reading must reach the reader of `output`
      // before the probe that proves the read. What the transport still buffers (received
      // before these facts, but paused while the reader or the emulator was behind: a replayed
      // flood, say) is waited for as the reader takes it; then the coalescing is handed over.
      // The facts stay as they were: a probe made to say "not waiting" would let terminal-bash
      // accept the shell's prompt wait before the shell read the send (its rule for the initial
      // foreground group).
      await this.handOverReceived()
      if (facts === undefined || facts.tpgid <= 0) return undefined
      return { processGroupId: facts.tpgid, inputWaiting: this.inputWait.observe(facts) }
    }).finally(() => { this.probing -= 1 }))
  }

  /**
   * `facts`, or when they prove a read that an emulator reply is on its way to, the facts of a
   * later probe: one made once that reply was written and the program left the read it went
   * into. A program that asked the terminal something (PSReadLine asks the cursor position as it
   * draws a typed line) blocks reading the answer; that read is no wait for input, and a send
   * settled on it as `stdin_read` while pwsh went on to run the line. Saying "not waiting"
   * instead would be a fact invented (see inspectForeground), so the answer waits: at most the
   * reply's hold ({@link REPLY_HOLD_MS}) and a control request's bound, after which the facts
   * stand as they are. A query printed before the read is parsed first (the probe's answer
   * follows the output printed before the read), so its reply is held by then.
   */
  private async pastReplies(facts: ForegroundFacts | undefined): Promise<ForegroundFacts | undefined> {
    const emulator = this.emulator
    if (emulator === undefined) return facts
    const deadline = performance.now() + REPLY_HOLD_MS + this.control.requestTimeoutMs
    while (facts?.inputWaiting === true && !this.closing && performance.now() < deadline) {
      // Also what the transport still buffers: a query printed after a flood is in it.
      await this.handOverReceived()
      if (!await emulator.sync().then(() => true, () => false)) return facts
      const delivery = this.replies.pending()
      if (delivery === undefined) return facts
      const answered = await delivery
      facts = await this.probe()
      // Written into a read the program has not left yet: it is scheduled soon, and leaves it.
      while (answered !== undefined && facts?.inputWaiting === true && facts.waitingCall === answered && !this.closing && performance.now() < deadline) {
        await delay(REPLY_PROBE_INTERVAL_MS)
        facts = await this.probe()
      }
    }
    return facts
  }

  /**
   * Hand the reader of `output` (and the emulator) everything received before this call: what
   * the transport still buffers (paused while the reader or the emulator was behind) is waited
   * for as the reader takes it, at most {@link PROBE_DELIVERY_BOUND_MS}; then the coalescing is
   * handed over.
   */
  private async handOverReceived(): Promise<void> {
    const buffered = this.liveHeld === undefined ? this.transport.output.readableLength : 0
    if (buffered > 0) await this.received(this.receivedBytes + buffered, PROBE_DELIVERY_BOUND_MS)
    this.flush()
  }

  /**
   * @inheritdoc
   * @throws Error when asked to SIGKILL the shell's own group (terminate the session instead),
   *   when no foreground group exists, or when the shell is gone.
   */
  signalForeground(signal: SubprocessTerminalSignal): Promise<number> {
    if (this.closing) return Promise.reject(new Error('terminal is terminating'))
    const name = SIGNAL_NAMES[signal]
    if (name === undefined) return Promise.reject(new Error(`unsupported terminal signal: ${String(signal)}`))
    this.drainHold()
    // Through the shell's parent where there is one: it waits behind no other terminal's probes.
    const delivered = this.transport.signalForeground !== undefined
      ? this.transport.signalForeground(this.identity, name)
      : this.withControl(control => control.signalForeground(this.identity, name))
    return this.track(delivered.then(result => {
      switch (result.kind) {
        case 'signalled': return result.pgid
        case 'refused': throw new Error('refusing to SIGKILL the terminal shell; terminate the terminal session instead')
        case 'failed': throw new Error(`cannot deliver ${signal} to foreground process group ${result.pgid} of terminal ${this.pid}`)
        case 'gone': throw new Error(`cannot resolve foreground process group for terminal ${this.pid}: the shell has exited`)
      }
    }))
  }

  /**
   * Stop every member of the terminal's session and prove quiescence (see
   * {@link terminateSession}); then wait for `done` and release the transport.
   * Idempotent while in flight; a failed attempt may be retried.
   * @throws CleanupFailedError naming survivors.
   * @throws ControlChannelError when the control channel is gone and the world still runs.
   */
  terminate(): Promise<void> {
    if (this.cleanup !== undefined) return this.cleanup
    this.closing = true
    const cleanup = this.terminateOnce()
    this.cleanup = cleanup
    cleanup.catch(() => { this.cleanup = undefined })
    return cleanup
  }

  private async terminateOnce(): Promise<void> {
    this.updateSource()
    await Promise.allSettled([...this.inflight])
    const graceMs = this.start.spec.graceMs
    try {
      await this.withControl(control => terminateSession(control, this.session, { graceMs, tag: this.start.tag }))
    } catch (error) {
      // A dead control channel in a world that ended (container stopped) leaves nothing running.
      if (!(error instanceof RemoteWorldError && error.code === 'CONTROL_FAILED') || !await this.start.worldEnded().catch(() => false)) throw error
    }
    // The top-level process is gone; give the transport a bounded moment to report it. The
    // bound's timer is cancelled once the report came: left running, it held a CLI process
    // open for the whole grace (3 s) after its world was closed.
    const reported = async (): Promise<void> => {
      const bound = new AbortController()
      await Promise.race([this.done.then(() => undefined, () => undefined), delay(graceMs, undefined, { signal: bound.signal }).catch(() => undefined)])
      bound.abort()
    }
    await reported()
    if (!this.exited && this.parent !== undefined) {
      // The shell's parent did not report: its own shell stopped it (`kill -STOP $PPID`), so the
      // shell is its unreaped zombie. Continued, it reaps and reports at once; one that still
      // does not is ended, so nothing of the terminal is left.
      const parent = this.parent
      await this.withControl(control => control.kill('CONT', [parent])).catch(() => undefined)
      await reported()
      if (!this.exited) {
        await this.withControl(control => control.kill('KILL', [parent])).catch(() => undefined)
        await reported()
      }
    }
    this.transport.close()
    if (!this.exited) {
      this.exited = true
      this.endOutput()
    }
    this.emulator?.close()
    this.start.onTerminated?.(this)
  }

  /**
   * Run `use` on the control channel; when the channel failed (its program was killed, a
   * request timed out), once more on a fresh one from {@link RemoteTerminalStart.recoverControl},
   * which later calls keep using. A paused or ended world makes the recovery itself fail, with
   * its reason.
   */
  private async withControl<T>(use: (control: ControlChannel) => Promise<T>): Promise<T> {
    const control = this.control
    try {
      return await use(control)
    } catch (error) {
      if (!(error instanceof RemoteWorldError && error.code === 'CONTROL_FAILED') || this.start.recoverControl === undefined) throw error
      // Concurrent calls that failed on the same channel share one recovery.
      if (this.control === control) this.recovery ??= this.start.recoverControl().finally(() => { this.recovery = undefined })
      if (this.recovery !== undefined) this.control = await this.recovery
      return use(this.control)
    }
  }

  /**
   * Hold a transport chunk for coalescing; flush after the short delay, or at the high-water
   * mark ({@link OUTPUT_COALESCE_BYTES}): then the transport pauses and the flush runs at the
   * next event-loop turn (see {@link OUTPUT_COALESCE_BYTES} for why). A chunk with a prompt
   * marker, and the one after it, are handed over at the next turn too: the command's output
   * ended, and terminal-bash
   * settles a send only once its output has been idle for a poll interval (50 ms) counted from
   * when the prompt reached it, at a poll every interval after the send was written; the
   * coalescing delay alone made the first poll miss by a millisecond or two once probes took
   * ~1 ms (echo settled at 107 ms instead of ~57).
   */
  private hold(chunk: Buffer): void {
    if (chunk.length === 0) return
    this.receivedBytes += chunk.length
    for (const waiter of this.receivedWaiters) if (waiter.upTo <= this.receivedBytes) waiter.resolve()
    this.lastOutputAt = performance.now()
    // The chunk with a prompt marker, and the next (the prompt's text, when bash printed it
    // after the marker in a separate write), go at the next turn.
    const prompt = this.notePrompt(chunk) || this.promptTailDue
    this.promptTailDue = prompt && !this.promptTailDue
    this.pending.push(chunk)
    this.pendingBytes += chunk.length
    if (this.pendingBytes >= OUTPUT_COALESCE_BYTES) {
      if (!this.holdingFull) {
        this.holdingFull = true
        this.updateSource()
      }
      this.flushSoon ??= setImmediate(() => this.flush())
    } else if (prompt && this.drain === undefined) {
      this.flushSoon ??= setImmediate(() => this.flush())
    } else if (this.drain !== undefined) {
      // A signal's drain: hand over once the output has been quiet (or at the drain's bound).
      if (this.flushTimer !== undefined) clearTimeout(this.flushTimer)
      this.flushTimer = setTimeout(() => this.flush(), SIGNAL_DRAIN_QUIET_MS)
    } else this.flushTimer ??= setTimeout(() => this.flush(), this.flooding() ? FLOOD_COALESCE_MS : OUTPUT_COALESCE_MS)
  }

  /** Whether this terminal's output floods, and no other's does (see {@link FLOOD_COALESCE_MS}). */
  private flooding(): boolean {
    return floodsAlone(this, performance.now())
  }

  /**
   * Hold a busy adopted shell's live output (see {@link LIVE_HOLD_QUIET_MS}): terminal-bash's
   * startup settles a shell it did not see at a prompt only after its output was silent for
   * its silence bound (3 s by default), which a program that prints every 100 ms never is, and a
   * startup that times out terminates the shell. The output is kept meanwhile (the transport
   * pauses at {@link OUTPUT_COALESCE_BYTES}: then the holder keeps it in its log), and follows,
   * every byte in order, once terminal-bash stopped probing for {@link LIVE_HOLD_QUIET_MS}, at
   * the first write, or after {@link LIVE_HOLD_BOUND_MS}.
   */
  private holdLive(): void {
    const since = performance.now()
    const check = (): void => {
      if (this.liveHeld === undefined) return
      const now = performance.now()
      const quiet = this.probeCount > 0 && now - this.lastProbeAt >= LIVE_HOLD_QUIET_MS
      if (quiet || now - since >= LIVE_HOLD_BOUND_MS || this.exited || this.closing) this.releaseLive()
    }
    this.liveHeld = { since, timer: setInterval(check, LIVE_HOLD_QUIET_MS / 4) }
  }

  /** Let a held live output go (see {@link holdLive}). */
  private releaseLive(): void {
    if (this.liveHeld === undefined) return
    clearInterval(this.liveHeld.timer)
    this.liveHeld = undefined
    this.flush()
  }

  /**
   * Start a signal's drain (see {@link SIGNAL_DRAIN_QUIET_MS}): from now, held output is handed
   * over once it has been quiet, as one chunk; the first hand-over, or the bound, ends it.
   */
  private drainHold(): void {
    if (this.drain !== undefined) return
    this.drain = { done: Promise.withResolvers<void>(), bound: setTimeout(() => this.endDrain(), SIGNAL_DRAIN_BOUND_MS) }
    if (this.flushTimer !== undefined) {
      clearTimeout(this.flushTimer)
      this.flushTimer = setTimeout(() => this.flush(), SIGNAL_DRAIN_QUIET_MS)
    }
  }

  /** End a signal's drain: hand over what it held. */
  private endDrain(): void {
    const drain = this.drain
    if (drain === undefined) return
    this.drain = undefined
    clearTimeout(drain.bound)
    this.flush()
    drain.done.resolve()
  }

  /**
   * Pause the transport's output while the handle holds a full chunk, the reader of `output`
   * has not taken the last one, or the emulator is behind; resume it when none is so. A paused
   * transport stops reading its socket or channel, so the world's PTY fills and the program
   * waits in write(2): nothing is dropped, and what is in flight stays bounded.
   */
  private updateSource(): void {
    const source = this.transport.output
    // Once terminating, the rest flows: the program is being ended, and its transport must
    // reach its end (which `done` waits for) whether or not anyone reads `output`.
    if (!this.closing && (this.holdingFull || this.readerBehind || this.emulatorBehind)) source.pause()
    else if (!this.exited) source.resume()
  }

  /**
   * Note a prompt marker in `chunk` (a marker split across two chunks is caught by a later
   * prompt), and warm the control channel's probe then: a probe by the shell's parent forks
   * nothing and needs no warming.
   * @returns whether `chunk` carries a marker.
   */
  private notePrompt(chunk: Buffer): boolean {
    if (!chunk.includes(PROMPT_MARKER)) return false
    this.promptSeen = true
    if (this.transport.foreground === undefined) this.warmTimer ??= setTimeout(() => this.warmProbe(), WARM_PROBE_QUIET_MS)
    return true
  }

  /**
   * Probe the foreground once the output is quiet after a prompt, so that control.sh memoises
   * the shell's new blocked read (see {@link WARM_PROBE_QUIET_MS}). The answer is dropped: it
   * reaches neither the caller nor the input-wait observer. Nothing when a probe of the caller
   * runs (it warms the memo itself), the terminal is closing, or the control channel fails.
   */
  private warmProbe(): void {
    this.warmTimer = undefined
    if (this.exited || this.closing || this.probing > 0) return
    const quietFor = performance.now() - this.lastOutputAt
    if (quietFor < WARM_PROBE_QUIET_MS) {
      this.warmTimer = setTimeout(() => this.warmProbe(), WARM_PROBE_QUIET_MS - quietFor)
      return
    }
    this.track(this.control.foreground(this.identity)).catch(() => undefined)
  }

  /**
   * Resolves once the transport delivered `upTo` bytes in all (see {@link receivedBytes}), or
   * after `boundMs`, or when the output ends. Never rejects.
   */
  private received(upTo: number, boundMs: number): Promise<void> {
    if (this.receivedBytes >= upTo || this.outputDone) return Promise.resolve()
    const waiter = { upTo, ...Promise.withResolvers<void>() }
    this.receivedWaiters.push(waiter)
    const timer = setTimeout(() => waiter.resolve(), boundMs)
    return waiter.promise.finally(() => {
      clearTimeout(timer)
      this.receivedWaiters = this.receivedWaiters.filter(other => other !== waiter)
    })
  }

  /** Write every held chunk to `output` as one chunk, in order; then let the transport go on (see {@link updateSource}). */
  private flush(): void {
    // A busy adopted shell's live output waits for terminal-bash's startup (see holdLive).
    if (this.liveHeld !== undefined && !this.exited && !this.closing) return
    if (this.flushTimer !== undefined) {
      clearTimeout(this.flushTimer)
      this.flushTimer = undefined
    }
    // A drain ends with its first hand-over of output.
    if (this.drain !== undefined && this.pending.length > 0) {
      this.endDrain()
      return
    }
    if (this.flushSoon !== undefined) {
      clearImmediate(this.flushSoon)
      this.flushSoon = undefined
    }
    if (this.pending.length === 0) return
    const data = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingBytes)
    this.pending = []
    this.pendingBytes = 0
    if (data.length >= FLOOD_CHUNK_BYTES) floodingHandles.set(this, performance.now())
    else floodingHandles.delete(this)
    this.emulator?.write(data)
    // Bytes arriving after `output` ended (a transport closed by terminate) have no reader.
    // false: the reader holds more than `output`'s high-water mark unread ('drain' resumes).
    if (!this.output.writableEnded && !this.output.write(data)) this.readerBehind = true
    if (this.holdingFull || this.readerBehind) {
      this.holdingFull = false
      this.updateSource()
    }
  }

  /** Deliver what is held, then end `output` (idempotent). */
  private endOutput(): void {
    if (this.warmTimer !== undefined) clearTimeout(this.warmTimer)
    this.warmTimer = undefined
    if (this.liveHeld !== undefined) clearInterval(this.liveHeld.timer)
    this.liveHeld = undefined
    this.endDrain()
    this.flush()
    floodingHandles.delete(this)
    if (!this.output.writableEnded) this.output.end()
  }

  private track<T>(promise: Promise<T>): Promise<T> {
    this.inflight.add(promise)
    const untrack = (): void => { this.inflight.delete(promise) }
    promise.then(untrack, untrack)
    return promise
  }
}
