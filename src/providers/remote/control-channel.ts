/**
 * The persistent remote control channel shared by every world: one non-PTY remote process per
 * (world, uid) running `control.sh`, sent over its stdin. Requests and replies are single
 * lines tagged with ids; up to {@link CONTROL_PIPELINE_DEPTH} requests are in flight at once
 * (the program reads them one by one from its stdin and answers in order).
 *
 * Why a persistent channel: on loopback it answers a /proc probe in ~0.35 ms, where a fresh
 * `docker exec` costs ~46 ms and a fresh SSH channel ~3.6 ms (DESIGN.md section 3).
 * @module dsh-remote-worlds/providers/remote/control-channel
 */
import { readFileSync } from 'node:fs'
import type { Readable, Writable } from 'node:stream'
import PQueue from 'p-queue'
import { type WorldUserFacts, parseEnvEntries } from './environment.ts'
import { ControlChannelError, InvalidArgumentError } from './errors.ts'
import { SharedBatches, SharedRounds } from './rounds.ts'

/**
 * The control program's text (world/control/control.sh), sent verbatim over the remote process's
 * stdin. The same path from here in a checkout and from dist/src in the package, whose build
 * copies it to dist/world/control/.
 */
export const CONTROL_PROGRAM: string = readFileSync(new URL('../../../world/control/control.sh', import.meta.url), 'utf8')

/** A process identity: a pid names the same process only while its start time is the same. */
export interface ProcessIdentity {
  /** Process id in the remote world's pid namespace. */
  pid: number
  /** Start time after boot in clock ticks (`/proc/PID/stat` field 22). */
  starttime: number
}

/** Parsed `/proc/PID/stat` fields (proc(5) numbering). */
export interface RemoteProcStat {
  /** [3] state letter (R S D Z T t X I ...). */
  state: string
  /** [4] parent pid. */
  ppid: number
  /** [5] process group id. */
  pgrp: number
  /** [6] session id. */
  session: number
  /** [7] controlling tty device number; 0 when none. */
  ttyNr: number
  /** [8] foreground process group of the controlling tty; -1 when none. */
  tpgid: number
  /** [22] start time in clock ticks. */
  starttime: number
}

/** One row of the remote process table. */
export interface RemoteProcess extends ProcessIdentity {
  ppid: number
  pgrp: number
  session: number
  state: string
  /** The process is ours and holds the session tag in question (set by {@link markTagged}; ownership.ts). */
  tagged: boolean
}

/** The process table and the tagged processes, read in one round (see {@link ControlChannel.freshSnapshot}). */
export interface ProcessSnapshot {
  table: RemoteProcess[]
  tagged: TaggedProcess[]
}

/** One registration of the ownership registry: a control program of a client. */
export interface OwnerRegistration extends ProcessIdentity {
  /** The client id (32 hex digits). */
  client: string
  /** The control program still runs: the client's channel to this world is live. */
  live: boolean
}

/** A process of this uid that carries a session tag in its environment. */
export interface TaggedProcess extends ProcessIdentity {
  /** The tag's value (`CLIENT.SESSION`, unchecked: whatever the environment holds). */
  tag: string
}

/** Foreground facts of one terminal. */
export interface ForegroundFacts {
  /** The tty's foreground process group (tpgid); -1 when the tty has none. */
  tpgid: number
  /** The shell's own process group. */
  shellPgrp: number
  /**
   * True only when a member of the foreground group is PROVEN blocked reading the session's
   * terminal: the pty itself on any fd, or `/dev/tty` while its controlling tty is the pty
   * (control.sh `waits`).
   */
  inputWaiting: boolean
  /**
   * The waiting thread's wait (`TID:NR:A0:A1:RUNS`: thread id, system call number, its first two
   * arguments, and how many times the thread was scheduled), undefined when not waiting. A
   * different value on a later probe means the thread left its wait and waited again between
   * the probes.
   */
  waitingCall: string | undefined
}

/**
 * A world's identity: the boot id of its kernel, the inode of its pid namespace and the start time
 * of its pid 1 (clock ticks since boot). Another boot id is a rebooted host; another pid
 * namespace or pid 1, a restarted container.
 */
export interface WorldIdentity {
  bootId: string
  pidNamespace: string
  initStart: string
}

/** Signals the control program sends, by their `kill -s` names. */
export type RemoteSignalName = 'INT' | 'TERM' | 'KILL' | 'TSTP' | 'HUP' | 'CONT'

/** Outcome of signalling the foreground group. */
export type SignalForegroundResult =
  | { kind: 'signalled'; pgid: number }
  | { kind: 'refused'; pgid: number }
  | { kind: 'failed'; pgid: number }
  | { kind: 'gone' }

/** What the program reports about itself at start. */
export interface ControlInfo {
  /** Numeric uid the program (and so every probe) runs as. */
  uid: number
  /** `x86_64`, `aarch64` or `unknown` (stdin-wait proofs need a known syscall table). */
  arch: string
  /** The control process's own pid in the remote world. */
  pid: number
  /** `$HOME` of the control process's user, or undefined when unset. */
  home: string | undefined
}

/** The byte streams of one remote non-PTY process. */
export interface ControlTransport {
  /** The remote process's stdin. */
  readonly stdin: Writable
  /** The remote process's stdout (stderr is discarded by the program itself). */
  readonly stdout: Readable
  /** Release the transport (close the exec / channel). Must not throw. */
  close(): void
}

const READY_TIMEOUT_MS = 15_000
/**
 * Requests in flight at once on one channel. The program reads each request line (and a
 * request's own lines) from its stdin with the shell's `read` builtin, which takes a pipe one
 * byte at a time and so never reads past its line, and no command it runs reads that stdin:
 * requests written ahead wait in the pipe, unread, until their turn. The bound keeps what
 * waits there small (most requests are a few dozen bytes).
 */
export const CONTROL_PIPELINE_DEPTH = 32
/** Default bound of one request's reply, see {@link ControlChannelOptions.requestTimeoutMs}. */
export const DEFAULT_CONTROL_REQUEST_TIMEOUT_MS = 10_000
/** Output a login may print before the program's READY line (bytes). */
const PREAMBLE_MAX_BYTES = 64 * 1024
/**
 * The longest reply line the channel takes (bytes, its newline excluded): 64 MiB. The longest
 * legitimate ones list every process of the world (control.sh `ps`, `tags`: under 60 bytes a
 * process, so about a million processes) or carry a process's argv or environment as hex
 * (`cmdline`, `environ`: at most twice ARG_MAX, 4 MiB with an 8 MiB stack). A longer line is
 * not the control program speaking (a planted one, or a broken world): the channel fails with
 * {@link ControlChannelError} before it holds more, as the PTY protocol refuses a frame past
 * its 1 MiB (pty-holder/protocol.ts).
 */
export const CONTROL_LINE_MAX_BYTES = 64 * 1024 * 1024
const TOKEN = /^[A-Za-z0-9_:.,/-]+$/

/**
 * What the world printed instead of READY, for a message: its first 200 characters, without
 * the line ending an engine or a login ends it with (Docker's exec failures end in `\r\n`,
 * e.g. `unable to find user nosuchuser: no matching entries in passwd file\r\n`).
 */
function preamble(text: string): string {
  return text.slice(0, 200).replace(/[\r\n]+$/, '')
}

/** Options of {@link ControlChannel.open}. */
export interface ControlChannelOptions {
  /**
   * How long the oldest request in flight may wait for its reply, in ms (default
   * {@link DEFAULT_CONTROL_REQUEST_TIMEOUT_MS}). Every operation is a few builtins or one fork,
   * so no healthy program comes near it; a program that does not answer is frozen (a paused
   * container, a stopped process) or stuck. A request that times out FAILS THE CHANNEL: a
   * program that missed one reply cannot be trusted to answer the next in order.
   */
  requestTimeoutMs?: number | undefined
}

/**
 * One live control program. All methods reject with {@link ControlChannelError} once the
 * transport ended or the program answered something unexpected.
 */
export class ControlChannel {
  /** Facts the program reported at start. */
  readonly info: ControlInfo
  private readonly transport: ControlTransport
  private readonly queue = new PQueue({ concurrency: CONTROL_PIPELINE_DEPTH })
  /** Requests written and not answered, in the order written (the program answers in that order). */
  private readonly pending = new Map<number, { op: string; resolve: (fields: string[]) => void; reject: (error: Error) => void }>()
  /** The reply bound of the oldest request in flight (see {@link send}). */
  private headTimer: { id: number; timer: NodeJS.Timeout } | undefined
  private nextId = 1
  /** The start of the reply line being received (chunks without its newline yet). */
  private partial: Buffer[] = []
  private partialBytes = 0
  private failure: ControlChannelError | undefined
  private readonly closedPromise = Promise.withResolvers<void>()
  private readonly where: string
  /** The bound of one request's reply (ms; see {@link ControlChannelOptions.requestTimeoutMs}). */
  readonly requestTimeoutMs: number
  private facts: Promise<WorldUserFacts> | undefined
  /** The shared snapshot being taken (see {@link sharedSnapshot}). */
  private snapshot: Promise<{ table: RemoteProcess[]; tagged: TaggedProcess[] }> | undefined
  /** {@link kill}'s batches per signal, and {@link ignoringTerm}'s. */
  private readonly killBatches = new Map<RemoteSignalName, SharedBatches<ProcessIdentity, Map<string, 'signalled' | 'gone' | 'error'>>>()
  private readonly ignoringBatches = new SharedBatches<ProcessIdentity, Set<string>>(items => this.ignoringTermNow(items))
  /** The group whose rounds {@link freshSnapshot} shares, when it joined one. */
  private scanGroup: ScanGroup | undefined
  /** The scans of {@link freshSnapshot}, in shared rounds. */
  private readonly freshScans = new SharedRounds<ProcessSnapshot>(async () => ({ table: await this.processTable(), tagged: await this.taggedProcesses() }))

  private constructor(transport: ControlTransport, info: ControlInfo, rest: string, where: string, requestTimeoutMs: number) {
    this.transport = transport
    this.info = info
    this.where = where
    this.requestTimeoutMs = requestTimeoutMs
    if (rest.length > 0) this.keep(Buffer.from(rest, 'latin1'))
    transport.stdout.on('data', this.onData)
    transport.stdout.once('end', () => this.fail(new ControlChannelError('the remote control program ended')))
    transport.stdout.once('close', () => this.fail(new ControlChannelError('the remote control channel closed')))
    transport.stdout.once('error', (error: Error) => this.fail(new ControlChannelError(`the remote control channel failed: ${error.message}`, { cause: error })))
    transport.stdin.on('error', (error: Error) => this.fail(new ControlChannelError(`the remote control channel failed: ${error.message}`, { cause: error })))
  }

  /**
   * Send the program over `transport` and wait for its `READY` line.
   * @param transport - stdin/stdout of a freshly started remote `sh` (e.g. `sh -s` or `sh -c 'eval ...'`)
   *   that reads its program from stdin.
   * @param where - world description for error messages.
   * @param options - see {@link ControlChannelOptions}.
   * @returns the live channel.
   * @throws ControlChannelError when the program does not start within 15 s or the stream ends first.
   * @throws InvalidArgumentError for a request timeout that is not a positive integer.
   */
  static async open(transport: ControlTransport, where: string, options: ControlChannelOptions = {}): Promise<ControlChannel> {
    const requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_CONTROL_REQUEST_TIMEOUT_MS
    if (!Number.isInteger(requestTimeoutMs) || requestTimeoutMs <= 0) throw new InvalidArgumentError(`control request timeout must be a positive integer (ms): ${requestTimeoutMs}`)
    const ready = Promise.withResolvers<ControlChannel>()
    let text = ''
    const onData = (chunk: Buffer): void => {
      text += chunk.toString('latin1')
      // A login's startup files (an SSH login shell's rc files) may print lines before the
      // program starts: skip whole lines until READY, within a bound.
      let start = 0
      for (let newline = text.indexOf('\n'); newline >= 0; newline = text.indexOf('\n', start)) {
        const line = text.slice(start, newline)
        start = newline + 1
        const match = /^READY (\d+) (\S+) (\d+) (\S+)$/.exec(line)
        if (match === null) continue
        cleanup()
        const home = match[4] === '-' ? undefined : Buffer.from(match[4]!, 'hex').toString('utf8')
        ready.resolve(new ControlChannel(transport, { uid: Number(match[1]), arch: match[2]!, pid: Number(match[3]), home }, text.slice(start), where, requestTimeoutMs))
        return
      }
      if (text.length > PREAMBLE_MAX_BYTES) {
        cleanup()
        transport.close()
        ready.reject(new ControlChannelError(`the remote control program in ${where} did not start: ${JSON.stringify(preamble(text))}`))
      }
    }
    const onEnd = (): void => {
      cleanup()
      transport.close()
      const said = preamble(text)
      ready.reject(new ControlChannelError(`the remote control program in ${where} ended before it started${said.length > 0 ? `: ${JSON.stringify(said)}` : ''}`))
    }
    const onError = (error: Error): void => {
      cleanup()
      transport.close()
      ready.reject(new ControlChannelError(`the remote control channel in ${where} failed: ${error.message}`, { cause: error }))
    }
    const timer = setTimeout(() => {
      cleanup()
      transport.close()
      ready.reject(new ControlChannelError(`the remote control program in ${where} did not answer within ${READY_TIMEOUT_MS} ms`))
    }, READY_TIMEOUT_MS)
    // A world that refuses the program (Docker's exec of a missing user, a login that exits)
    // may close its stdin before the write lands: EPIPE. Its stdout still carries what it said
    // and then ends, so onEnd reports it; the write error alone adds nothing.
    const onStdinError = (): void => {}
    const cleanup = (): void => {
      clearTimeout(timer)
      transport.stdout.off('data', onData)
      transport.stdout.off('end', onEnd)
      transport.stdout.off('close', onEnd)
      transport.stdout.off('error', onError)
      transport.stdin.off('error', onStdinError)
    }
    transport.stdout.on('data', onData)
    transport.stdout.once('end', onEnd)
    transport.stdout.once('close', onEnd)
    transport.stdout.once('error', onError)
    transport.stdin.on('error', onStdinError)
    // A stream destroyed before open() was called emits nothing more: say so now, not in 15 s.
    if (transport.stdout.destroyed) {
      onEnd()
      return ready.promise
    }
    transport.stdin.write(`${CONTROL_PROGRAM}\n`)
    return ready.promise
  }

  /** True until the transport ended or failed. */
  get alive(): boolean {
    return this.failure === undefined
  }

  /** Resolves when the channel has ended for any reason. */
  get closed(): Promise<void> {
    return this.closedPromise.promise
  }

  /**
   * Send one raw request.
   * @param op - operation name.
   * @param args - tokens (digits, letters, `:,./_-`); anything else is rejected before sending.
   * @returns the reply's fields after the id: `[status, ...fields]`.
   * @throws InvalidArgumentError for a token that would break the line protocol.
   * @throws ControlChannelError when the channel is gone, or when no reply came within the
   *   request timeout (which fails the channel; see {@link ControlChannelOptions.requestTimeoutMs}).
   */
  request(op: string, args: readonly (string | number)[] = []): Promise<string[]> {
    const tokens = [op, ...args.map(String)]
    for (const token of tokens) {
      if (!TOKEN.test(token)) throw new InvalidArgumentError(`control request token is not protocol-safe: ${JSON.stringify(token)}`)
    }
    return this.send(op, id => `${id} ${tokens.join(' ')}\n`)
  }

  /**
   * Queue one request: write it as soon as fewer than {@link CONTROL_PIPELINE_DEPTH} are in
   * flight, and wait for its reply. The program answers in order, so the request timeout runs
   * for the oldest request in flight only, from the moment it became the oldest (a request
   * behind a slow one does not count the slow one's time).
   *
   * Why pipelined: with one request in flight, each reply had to come back through the
   * client's event loop before the next request could leave. Under 20 terminals flooding
   * output an event-loop turn took seconds, so the 20 SIGINTs of a cancel and the probes
   * queued with them came back one turn each: 15-24 s until the last SIGINT landed (issue 21).
   * Written at once, they are answered in one turn.
   */
  private send(op: string, encode: (id: number) => string | Buffer): Promise<string[]> {
    return this.queue.add(async () => {
      if (this.failure !== undefined) throw this.failure
      const id = this.nextId++
      const reply = Promise.withResolvers<string[]>()
      this.pending.set(id, { op, ...reply })
      this.armHeadTimer()
      this.transport.stdin.write(encode(id))
      return reply.promise
    }) as Promise<string[]>
  }

  /** Run the reply bound for the oldest request in flight, when it is not running for it already. */
  private armHeadTimer(): void {
    const head = this.pending.entries().next()
    if (head.done === true) {
      if (this.headTimer !== undefined) clearTimeout(this.headTimer.timer)
      this.headTimer = undefined
      return
    }
    const [id, { op }] = head.value
    if (this.headTimer?.id === id) return
    if (this.headTimer !== undefined) clearTimeout(this.headTimer.timer)
    this.headTimer = {
      id,
      timer: setTimeout(() => {
        this.fail(new ControlChannelError(`the remote control program in ${this.where} did not answer ${op} within ${this.requestTimeoutMs} ms (frozen or stuck); the control channel is closed`))
      }, this.requestTimeoutMs),
    }
  }

  /**
   * Send one request followed by raw lines (paths, names: any bytes but NUL and newline), which
   * the operation reads itself; the count is appended to `args`.
   * @throws InvalidArgumentError for a line holding NUL or a newline, or an unsafe token.
   */
  private requestLines(op: string, args: readonly (string | number)[], lines: readonly string[]): Promise<string[]> {
    for (const line of lines) {
      if (/[\0\n]/.test(line)) throw new InvalidArgumentError(`control request line holds NUL or a newline: ${JSON.stringify(line)}`)
    }
    const tokens = [op, ...args.map(String), String(lines.length)]
    for (const token of tokens) {
      if (!TOKEN.test(token)) throw new InvalidArgumentError(`control request token is not protocol-safe: ${JSON.stringify(token)}`)
    }
    return this.send(op, id => Buffer.from(`${id} ${tokens.join(' ')}\n${lines.map(line => `${line}\n`).join('')}`, 'utf8'))
  }

  /**
   * The first of `candidates` that is a regular file the program's user may execute
   * (`test -f` and `test -x`, as the user the world runs things as).
   * @param options.unwritable - also neither the file nor its directory writable by that user
   *   (control.sh `trusted`): a program run outside a fence, which no confined program of the
   *   user can have planted. Root can write everything, so none qualifies for root.
   * @returns its index, or undefined when none is.
   */
  async firstExecutable(candidates: readonly string[], options: { unwritable?: boolean } = {}): Promise<number | undefined> {
    if (candidates.length === 0) return undefined
    const reply = await this.requestLines(options.unwritable === true ? 'trusted' : 'which', [], candidates)
    if (reply[0] === 'none') return undefined
    if (reply[0] !== 'ok' || reply.length !== 2) throw this.unexpected('which', reply)
    return Number(reply[1])
  }

  /**
   * Of the cache directories `dirs`, the first that holds a running copy of the world tool
   * `name` with build hash `sha256` (world-tools/install.ts): DIR/SHA256/NAME, in directories
   * of the user that are no symlinks and writable by nobody else, whose content hashes to
   * `sha256` (the open file, then run as that file: control.sh `tool`) and whose `--version`
   * exits 0. None in a world without sha256sum. Three forks on this channel, where a setup
   * script would cost an exec (~200 ms in Docker).
   * @returns the index in `dirs`, or undefined when none holds one.
   */
  async findWorldTool(name: string, sha256: string, dirs: readonly string[]): Promise<number | undefined> {
    if (dirs.length === 0) return undefined
    const reply = await this.requestLines('tool', [name, sha256], dirs)
    if (reply[0] === 'none') return undefined
    if (reply[0] !== 'ok' || reply.length !== 2) throw this.unexpected('tool', reply)
    return Number(reply[1])
  }

  /**
   * Create directories with mode 0700, as the program's user (parents must exist; an existing
   * path fails, so a directory someone else prepared is never adopted).
   * @throws ControlChannelError when `mkdir` fails.
   */
  async makePrivateDirs(paths: readonly string[]): Promise<void> {
    const reply = await this.requestLines('mkprivate', [], paths)
    if (reply[0] !== 'ok') throw new ControlChannelError(`cannot create ${paths.join(', ')} in the remote world`)
  }

  /**
   * Remove paths recursively (`rm -rf`), as the program's user.
   * @returns false when `rm` reported a failure.
   */
  async removePaths(paths: readonly string[]): Promise<boolean> {
    if (paths.length === 0) return true
    const reply = await this.requestLines('rmtree', [], paths)
    if (reply[0] !== 'ok' && reply[0] !== 'err') throw this.unexpected('rmtree', reply)
    return reply[0] === 'ok'
  }

  /**
   * What the world offers this uid: a passwd entry or a private home, and its locales. Asked
   * once per channel (the answer is kept).
   */
  userFacts(): Promise<WorldUserFacts> {
    this.facts ??= this.request('facts').then(reply => {
      if (reply[0] !== 'ok' || reply.length !== 4) throw this.unexpected('facts', reply)
      return {
        passwdEntry: reply[1] === '1',
        privateHome: reply[2] === '-' || reply[2]!.startsWith('!') ? undefined : Buffer.from(reply[2]!, 'hex').toString('utf8'),
        refusedHome: reply[2]!.startsWith('!') ? Buffer.from(reply[2]!.slice(1), 'hex').toString('utf8') : undefined,
        locales: reply[3] === '-' ? undefined : reply[3]!.split(','),
      }
    })
    this.facts.catch(() => { this.facts = undefined })
    return this.facts
  }

  /**
   * The program's own initial environment (`/proc/PID/environ`): what the remote world gives
   * a process it starts (for SSH, the login's HOME, USER, LOGNAME, PATH, SHELL, ...).
   * Entries without `=` are skipped.
   */
  async environ(): Promise<Record<string, string>> {
    const reply = await this.request('environ')
    if (reply[0] !== 'ok' || reply.length > 2) throw this.unexpected('environ', reply)
    return parseEnvEntries(Buffer.from(reply[1] ?? '', 'hex').toString('utf8').split('\0'))
  }

  /**
   * Parse `/proc/PID/stat` of one process.
   * @returns the fields, or undefined when the process does not exist.
   */
  async stat(pid: number): Promise<RemoteProcStat | undefined> {
    return parseStatReply(await this.request('stat', [pid]))
  }

  /**
   * Parse an arbitrary file with the program's stat parser (pins the parser on hostile comm names).
   * @param path - a path without spaces or shell-special characters.
   */
  async statFile(path: string): Promise<RemoteProcStat | undefined> {
    return parseStatReply(await this.request('statfile', [path]))
  }

  /**
   * Foreground facts of the terminal whose session leader is `shell`.
   * @returns undefined when the shell (this identity) is gone.
   */
  async foreground(shell: ProcessIdentity): Promise<ForegroundFacts | undefined> {
    const reply = await this.request('fg', [shell.pid, shell.starttime])
    if (reply[0] === 'gone') return undefined
    if (reply[0] !== 'ok' || reply.length !== 5) throw this.unexpected('fg', reply)
    const inputWaiting = reply[3] === '1'
    return { tpgid: Number(reply[1]), shellPgrp: Number(reply[2]), inputWaiting, waitingCall: inputWaiting ? reply[4] : undefined }
  }

  /**
   * Signal the CURRENT foreground group of the shell's tty, read and signalled in one remote
   * step (no window between reading tpgid and `kill`). SIGKILL to the shell's own group is refused.
   */
  async signalForeground(shell: ProcessIdentity, signal: RemoteSignalName): Promise<SignalForegroundResult> {
    const reply = await this.request('sigfg', [shell.pid, shell.starttime, signal])
    switch (reply[0]) {
      case 'gone': return { kind: 'gone' }
      case 'ok': return { kind: 'signalled', pgid: Number(reply[1]) }
      case 'refused': return { kind: 'refused', pgid: Number(reply[1]) }
      case 'err': return { kind: 'failed', pgid: Number(reply[1]) }
      default: throw this.unexpected('sigfg', reply)
    }
  }

  /** The whole remote process table (pid, ppid, pgrp, session, state, starttime); no row `tagged` (see {@link markTagged}). */
  async processTable(): Promise<RemoteProcess[]> {
    const reply = await this.request('ps')
    if (reply[0] !== 'ok') throw this.unexpected('ps', reply)
    return reply.slice(1).map(field => {
      const [pid, ppid, pgrp, session, state, starttime] = field.split(',')
      return { pid: Number(pid), ppid: Number(ppid), pgrp: Number(pgrp), session: Number(session), state: state ?? '?', starttime: Number(starttime), tagged: false }
    })
  }

  /**
   * {@link processTable} and {@link taggedProcesses} for watchers that poll: callers
   * that ask while one such request is queued or in flight share its answer, so hundreds of
   * processes waiting for their trees to exit cost one request per round, not one each. The
   * answer may have been taken a moment before the call; for a liveness poll that only delays
   * seeing an exit by one round (a process born since descends from one alive then).
   */
  sharedSnapshot(): Promise<{ table: RemoteProcess[]; tagged: TaggedProcess[] }> {
    if (this.snapshot === undefined) {
      const taking = (async () => ({ table: await this.processTable(), tagged: await this.taggedProcesses() }))()
      this.snapshot = taking
      const clear = (): void => { if (this.snapshot === taking) this.snapshot = undefined }
      taking.then(clear, clear)
    }
    return this.snapshot
  }

  /**
   * {@link processTable} and {@link taggedProcesses} taken AFTER the call, shared by every
   * caller of the same round: a call while no scan runs starts one at once; calls that arrive
   * while a scan is in flight all wait for the next scan, which starts when that one ends, and
   * one scan serves them all. Unlike {@link sharedSnapshot}, the answer never predates the
   * call, so a teardown that signalled and then asks sees the effect of its own signal
   * (rounds.ts).
   *
   * Why: a scan reads every `/proc/PID/stat` and greps every `/proc/PID/environ` (tens of ms
   * with a few hundred processes), and a teardown ladder asks three or more times; 100
   * terminals closed at once scanned one after another took 14.8 s (Docker) and 7.8 s (SSH)
   * here (issue 21). Sharing rounds makes it a few scans in all.
   * @throws ControlChannelError as {@link processTable}; every caller of the round gets it.
   */
  freshSnapshot(): Promise<ProcessSnapshot> {
    return this.scanGroup?.ask() ?? this.freshScans.ask()
  }

  /**
   * Share {@link freshSnapshot}'s rounds with the other channels of `group`: channels of one
   * world and uid (an SSH pool's connections to one login) see the same process table, so one
   * scan per round serves the terminals of them all.
   */
  joinScanGroup(group: ScanGroup): void {
    this.scanGroup = group
    group.add(this)
  }

  /** One scan, on this channel (see {@link ScanGroup}). */
  scanNow(): Promise<ProcessSnapshot> {
    return this.freshScans.ask()
  }

  /**
   * Register this control program as a live channel of `client` in the world's ownership
   * registry (`/tmp/dsh-remote-owners-UID`, mode 0700; see ownership.ts).
   * @returns undefined when registered, else why not (`dir`: the registry directory is not
   *   usable, e.g. another user made it or /tmp is read-only; `write`: the file cannot be made).
   */
  async register(client: string): Promise<string | undefined> {
    const reply = await this.request('own', [client])
    if (reply[0] === 'ok') return undefined
    if (reply[0] === 'err') return reply[1] ?? 'unknown'
    throw this.unexpected('own', reply)
  }

  /**
   * The world's identity as this program sees it (control.sh `ident`): see {@link WorldIdentity}.
   */
  async worldIdentity(): Promise<WorldIdentity> {
    const reply = await this.request('ident')
    if (reply[0] !== 'ok' || reply.length !== 4) throw this.unexpected('ident', reply)
    return { bootId: reply[1]!, pidNamespace: reply[2]!, initStart: reply[3]! }
  }

  /**
   * The descriptions of the held shells in `directory` (world/dsh-pty/hold.c `write_meta`: lines of
   * NAME=VALUE words), as written; none when the directory is not this uid's own.
   */
  async heldShellLines(directory: string): Promise<string[]> {
    const reply = await this.request('held', [directory])
    if (reply[0] !== 'ok') throw this.unexpected('held', reply)
    return reply.slice(1).map(field => field.replaceAll(',', ' '))
  }

  /** Every registration of the ownership registry of this uid, with whether its program runs. */
  async owners(): Promise<OwnerRegistration[]> {
    const reply = await this.request('owners')
    if (reply[0] !== 'ok') throw this.unexpected('owners', reply)
    return reply.slice(1).flatMap(field => {
      const match = /^([0-9a-f]{32}):(\d+):(\d+):([01])$/.exec(field)
      return match === null ? [] : [{ client: match[1]!, pid: Number(match[2]), starttime: Number(match[3]), live: match[4] === '1' }]
    })
  }

  /** Remove registrations whose program is gone (the program re-checks; a live one is kept). */
  async unregister(registrations: readonly OwnerRegistration[]): Promise<void> {
    for (const batch of batches(registrations)) {
      const reply = await this.request('unown', batch.map(entry => `${entry.client}:${entry.pid}:${entry.starttime}`))
      if (reply[0] !== 'ok') throw this.unexpected('unown', reply)
    }
  }

  /**
   * A process's command line (`/proc/PID/cmdline`: its argv, each argument NUL-terminated), as
   * lowercase hex of those bytes.
   * @returns undefined when the process (this identity) is gone or its command line unreadable.
   */
  async commandLine(process: ProcessIdentity): Promise<string | undefined> {
    const reply = await this.request('cmdline', [process.pid, process.starttime])
    if (reply[0] === 'gone') return undefined
    if (reply[0] !== 'ok' || reply.length > 2) throw this.unexpected('cmdline', reply)
    return reply[1] ?? ''
  }

  /** Our live processes whose environment holds a session tag (any value). */
  async taggedProcesses(): Promise<TaggedProcess[]> {
    const reply = await this.request('tags')
    if (reply[0] !== 'ok') throw this.unexpected('tags', reply)
    return reply.slice(1).flatMap(field => {
      const match = /^(\d+):(\d+):(.*)$/.exec(field)
      return match === null ? [] : [{ pid: Number(match[1]), starttime: Number(match[2]), tag: match[3]! }]
    })
  }

  /**
   * Send `signal` to each process whose identity still matches.
   *
   * Calls of one signal share batches (rounds.ts): while a `kill` of that signal is in flight,
   * later calls join the next request, so 100 teardown ladders at once send a few requests per
   * step instead of 100 one after another (issue 21). Each process is signalled at or after
   * its call.
   * @returns per pid of `members`: `signalled`, `gone` (identity no longer alive) or `error`.
   */
  async kill(signal: RemoteSignalName, members: readonly ProcessIdentity[]): Promise<Map<number, 'signalled' | 'gone' | 'error'>> {
    if (members.length === 0) return new Map()
    let batcher = this.killBatches.get(signal)
    if (batcher === undefined) {
      batcher = new SharedBatches(items => this.killNow(signal, items))
      this.killBatches.set(signal, batcher)
    }
    const all = await batcher.add(members)
    return new Map(members.flatMap(member => {
      const code = all.get(identityKey(member))
      return code === undefined ? [] : [[member.pid, code] as const]
    }))
  }

  /**
   * One batch of {@link kill}: duplicates sent once, at most 200 identities a request.
   * @returns per identity (`PID:START`; two callers may name one pid with different start
   *   times), its outcome: the program answers in the order asked.
   */
  private async killNow(signal: RemoteSignalName, members: readonly ProcessIdentity[]): Promise<Map<string, 'signalled' | 'gone' | 'error'>> {
    const result = new Map<string, 'signalled' | 'gone' | 'error'>()
    for (const batch of batches(unique(members))) {
      const reply = await this.request('kill', [signal, ...batch.map(member => `${member.pid}:${member.starttime}`)])
      if (reply[0] !== 'ok' || reply.length !== batch.length + 1) throw this.unexpected('kill', reply)
      for (const [index, field] of reply.slice(1).entries()) {
        const [pid, code] = field.split(':')
        if (Number(pid) !== batch[index]!.pid) throw this.unexpected('kill', reply)
        result.set(identityKey(batch[index]!), code === 's' ? 'signalled' : code === 'g' ? 'gone' : 'error')
      }
    }
    return result
  }

  /**
   * The subset of `members` that are alive and have SIGTERM in their ignored mask. Calls share
   * batches as {@link kill}'s do.
   */
  async ignoringTerm(members: readonly ProcessIdentity[]): Promise<Set<number>> {
    if (members.length === 0) return new Set()
    const all = await this.ignoringBatches.add(members)
    return new Set(members.filter(member => all.has(identityKey(member))).map(member => member.pid))
  }

  /** One batch of {@link ignoringTerm}: the identities (`PID:START`) alive and ignoring TERM. */
  private async ignoringTermNow(members: readonly ProcessIdentity[]): Promise<Set<string>> {
    const ignoring = new Set<string>()
    for (const batch of batches(unique(members))) {
      const reply = await this.request('ignterm', batch.map(member => `${member.pid}:${member.starttime}`))
      if (reply[0] !== 'ok' || reply.length !== batch.length + 1) throw this.unexpected('ignterm', reply)
      for (const [index, field] of reply.slice(1).entries()) {
        const [pid, flag] = field.split(':')
        if (Number(pid) !== batch[index]!.pid) throw this.unexpected('ignterm', reply)
        if (flag === '1') ignoring.add(identityKey(batch[index]!))
      }
    }
    return ignoring
  }

  /**
   * The control program's own `/proc/PID/cgroup` and the cgroup lines of its
   * `/proc/PID/mountinfo` (proc(5)): where its cgroup is, for cgroup.ts to locate the counter
   * files. Two forks; ask once per channel (resource-events.ts memoizes it).
   * @returns both texts, empty when unreadable.
   */
  async cgroupFacts(): Promise<{ procCgroup: string; mountinfo: string }> {
    const reply = await this.request('cgroup')
    if (reply[0] !== 'ok' || reply.length !== 3) throw this.unexpected('cgroup', reply)
    const text = (hex: string): string => hex === '-' ? '' : Buffer.from(hex, 'hex').toString('utf8')
    return { procCgroup: text(reply[1]!), mountinfo: text(reply[2]!) }
  }

  /**
   * Read small key/value or single-value files (cgroup counters and limits) with the program's
   * builtins only (no fork; cheap enough for every send). At most 32 lines a file.
   * @param paths - absolute paths (any bytes but NUL and newline).
   * @returns per path, its text rebuilt as `WORD WORD\n` lines (words as split by the shell),
   *   or undefined when unreadable or empty.
   * @throws InvalidArgumentError for a path holding NUL or a newline.
   */
  async readSmallFiles(paths: readonly string[]): Promise<(string | undefined)[]> {
    if (paths.length === 0) return []
    const reply = await this.requestLines('counters', [], paths)
    if (reply[0] !== 'ok' || reply.length !== paths.length + 1) throw this.unexpected('counters', reply)
    return reply.slice(1).map(field => field === '-' ? undefined : field.split(',').map(line => `${line.split(':').join(' ')}\n`).join(''))
  }

  /** End the program (stdin EOF) and release the transport. Idempotent. */
  close(): void {
    if (this.failure === undefined) {
      try {
        // Ask the program to exit: closing an attach socket or channel alone may leave it running.
        this.transport.stdin.write('0 quit\n')
      } catch {
        // The transport is already gone.
      }
    }
    this.fail(new ControlChannelError('the remote control channel was closed'))
  }

  private readonly onData = (chunk: Buffer): void => {
    if (this.failure !== undefined) return
    // Only the new chunk is searched for newlines: a long line costs its length once.
    let start = 0
    for (let newline = chunk.indexOf(0x0a); newline >= 0; newline = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, newline)
      const line = (this.partialBytes === 0 ? piece : Buffer.concat([...this.partial, piece])).toString('latin1')
      this.partial = []
      this.partialBytes = 0
      start = newline + 1
      if (line.length > CONTROL_LINE_MAX_BYTES) return this.overlong(line.length)
      const fields = line.split(' ').filter(field => field.length > 0)
      const id = Number(fields[0])
      const waiter = this.pending.get(id)
      if (waiter !== undefined) {
        this.pending.delete(id)
        waiter.resolve(fields.slice(1))
      }
    }
    if (start < chunk.length && !this.keep(chunk.subarray(start))) return
    this.armHeadTimer()
  }

  /** Keep the start of a line; false (the channel failed) past {@link CONTROL_LINE_MAX_BYTES}. */
  private keep(piece: Buffer): boolean {
    this.partial.push(piece)
    this.partialBytes += piece.length
    if (this.partialBytes <= CONTROL_LINE_MAX_BYTES) return true
    this.overlong(this.partialBytes)
    return false
  }

  private overlong(bytes: number): void {
    this.partial = []
    this.partialBytes = 0
    this.fail(new ControlChannelError(`the remote control program in ${this.where} sent a reply line of more than ${CONTROL_LINE_MAX_BYTES} bytes (${bytes} without its end): not the control program's protocol; the control channel is closed`))
  }

  private fail(error: ControlChannelError): void {
    if (this.failure !== undefined) return
    this.failure = error
    for (const waiter of this.pending.values()) waiter.reject(error)
    this.pending.clear()
    if (this.headTimer !== undefined) clearTimeout(this.headTimer.timer)
    this.headTimer = undefined
    // Not `this.queue.clear()`: p-queue drops cleared tasks without settling the promises
    // `add()` returned, so a request queued behind the one in flight hung forever (and with it
    // a terminate() waiting for in-flight probes). Queued tasks now run and reject at once.
    try {
      this.transport.stdin.end()
    } catch {
      // The transport is already gone; nothing to flush.
    }
    this.transport.close()
    this.closedPromise.resolve()
  }

  private unexpected(op: string, reply: readonly string[]): ControlChannelError {
    return new ControlChannelError(`unexpected control reply to ${op}: ${JSON.stringify(reply.join(' ').slice(0, 200))}`)
  }
}

function parseStatReply(reply: readonly string[]): RemoteProcStat | undefined {
  if (reply[0] === 'gone') return undefined
  if (reply[0] !== 'ok' || reply.length !== 8) throw new ControlChannelError(`unexpected control reply to stat: ${JSON.stringify(reply.join(' '))}`)
  const [, state, ppid, pgrp, session, ttyNr, tpgid, starttime] = reply
  return { state: state!, ppid: Number(ppid), pgrp: Number(pgrp), session: Number(session), ttyNr: Number(ttyNr), tpgid: Number(tpgid), starttime: Number(starttime) }
}

/**
 * Control channels of one world and uid that share {@link ControlChannel.freshSnapshot}'s
 * rounds: each round scans on one live member (the next one when a member fails mid-scan).
 */
export class ScanGroup {
  private readonly members = new Set<ControlChannel>()
  private readonly rounds = new SharedRounds<ProcessSnapshot>(() => this.scan())

  /** Add a channel; it leaves the group when it closes. */
  add(channel: ControlChannel): void {
    this.members.add(channel)
    void channel.closed.then(() => this.members.delete(channel))
  }

  /** A snapshot taken at or after the call (see {@link ControlChannel.freshSnapshot}). */
  ask(): Promise<ProcessSnapshot> {
    return this.rounds.ask()
  }

  private async scan(): Promise<ProcessSnapshot> {
    let failure: unknown = new ControlChannelError('no live control channel to read the process table')
    for (const member of this.members) {
      if (!member.alive) continue
      try {
        return await member.scanNow()
      } catch (error) {
        failure = error
      }
    }
    throw failure
  }
}

/** `PID:START`, the key of one identity. */
function identityKey(identity: ProcessIdentity): string {
  return `${identity.pid}:${identity.starttime}`
}

/** `members` without repeated identities, in first-seen order. */
function unique(members: readonly ProcessIdentity[]): ProcessIdentity[] {
  const seen = new Map<string, ProcessIdentity>()
  for (const member of members) if (!seen.has(identityKey(member))) seen.set(identityKey(member), member)
  return [...seen.values()]
}

/** Keep request lines short (the program splits them into positional parameters). */
function batches<T>(items: readonly T[], size = 200): T[][] {
  const result: T[][] = []
  for (let index = 0; index < items.length; index += size) result.push(items.slice(index, index + size))
  return result
}

/**
 * The table with `tagged` set on the rows of the processes that carry `tag` (by identity, from
 * {@link ControlChannel.taggedProcesses}); the table itself when none does.
 */
export function markTagged(table: readonly RemoteProcess[], tagged: readonly TaggedProcess[], tag: string): RemoteProcess[] {
  const ours = new Set(tagged.filter(process => process.tag === tag).map(process => `${process.pid}:${process.starttime}`))
  return ours.size === 0 ? [...table] : table.map(row => ours.has(`${row.pid}:${row.starttime}`) ? { ...row, tagged: true } : row)
}

/** True for the states of a process that has finished running (zombie, dead). */
export function isDeadState(state: string): boolean {
  return state === 'Z' || state === 'X' || state === 'x'
}
