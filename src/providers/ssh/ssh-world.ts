/**
 * One SSH target as a remote world: a pool of authenticated connections, each carrying one
 * persistent control channel (`sh -s`, non-PTY, as the login user) and up to MaxSessions - 1
 * terminal channels (`exec(wrapper, { pty })`).
 *
 * OpenSSH facts relied on (DESIGN.md sections 4-5): `MaxSessions` (default 10) bounds the
 * session channels of one connection, the control channel included, and the next open fails
 * with `Channel open failure`; closing an exec channel does not stop non-PTY children, so
 * teardown goes through the control channel; `channel.signal()` is refused or hits the wrong
 * group, so signals go through the control channel too; `env` requests are dropped unless
 * AcceptEnv allows them, so the environment is set by the start wrapper (`env -i`).
 * @module dsh-remote-worlds/providers/ssh/ssh-world
 */
import { PassThrough } from 'node:stream'
import PQueue from 'p-queue'
import type { Client } from 'ssh2'
import { ControlChannel, ScanGroup } from '../remote/control-channel.ts'
import { TransportError, WorldClosedError } from '../remote/errors.ts'
import type { SessionOwnership } from '../remote/ownership.ts'
import type { TerminalTransport } from '../remote/terminal.ts'
import { type HostLookup, type SshHop, type SshTimings, connectSsh } from './connect.ts'
import { ChannelRefusedError, type PtyRequest, type SshExecChannel, openExecChannel } from './exec-channel.ts'
import { describeTarget } from './target.ts'

/** Variables a shell sets for itself: not part of what the login gives a new process (exported for the runtime's env lookups). */
const SHELL_OWN_VARIABLES = new Set(['PWD', 'OLDPWD', 'SHLVL', '_'])

/** Pool settings. */
export interface SshPoolSettings {
  /** The server's MaxSessions: channels per connection, the control channel included (>= 2). */
  maxSessions: number
  /** Close a connection this long after its last terminal channel closed (ms). */
  idleMs: number
  /** Handshakes in flight at once per target (OpenSSH drops connections beyond MaxStartups, default 10). */
  maxConcurrentConnects: number
}

/** Options of {@link SshWorld}. */
export interface SshWorldOptions {
  hop: SshHop
  jumps: readonly SshHop[]
  timings: SshTimings
  pool: SshPoolSettings
  lookup?: HostLookup | undefined
  /** The client's session ownership: every control program registers with it (remote/ownership.ts). */
  ownership?: SessionOwnership | undefined
}

/** Pool counters (for tests, doctor and the benchmark). */
export interface SshPoolStats {
  /** Connections live or being established. */
  connections: number
  /** Terminal channels open or reserved, over all connections. */
  terminalChannels: number
  /** Connections opened since the world was created. */
  opened: number
  /** Session channels per connection in use now (configured, or lower as learned from the server). */
  maxSessions: number
}

/** One authenticated connection with its control channel. */
export class SshConnection {
  /** The login's ambient environment as the control program received it (shell-own variables removed). */
  readonly ambientEnv: Readonly<Record<string, string>>
  /** Whether the connection still works; false after the transport closed for any reason. */
  alive = true
  /** Why the connection ended, for messages. */
  lastError: Error | undefined

  private constructor(
    readonly client: Client,
    readonly control: ControlChannel,
    ambientEnv: Record<string, string>,
    /** TCP + handshake + authentication wall time (ms). */
    readonly connectMs: number,
    readonly where: string,
  ) {
    this.ambientEnv = ambientEnv
  }

  /**
   * Connect, start the control program, read the login environment.
   * @throws the typed connect errors of {@link connectSsh}; ControlChannelError when the program does not start.
   */
  static async open(options: SshWorldOptions, onClose: (connection: SshConnection) => void): Promise<SshConnection> {
    const where = `ssh ${describeTarget(options.hop.target)}`
    const { client, connectMs } = await connectSsh(options.hop, options.jumps, options.timings, options.lookup)
    let lastError: Error | undefined
    // After the handshake ssh2 reports a lost connection as 'error' (e.g. Keepalive timeout), then
    // 'close'. Both are heard from here on: a close while the control program starts is kept.
    client.on('error', (error: Error) => { lastError = error })
    let clientClosed = false
    let onClientClose = (): void => { clientClosed = true }
    client.once('close', () => onClientClose())
    try {
      // By its absolute path: the login shell would look `sh` up on a PATH that may hold a
      // directory a confined agent can write (~/.local/bin), and this program runs unfenced.
      const { channel } = await openExecChannel(client, '/bin/sh -s', undefined, where)
      channel.stderr.resume()
      const control = await ControlChannel.open({
        stdin: channel,
        stdout: channel,
        close: () => { try { channel.close() } catch { /* connection gone */ } },
      }, where)
      // Registered before any session of this client can start on this connection.
      await options.ownership?.adopt(control)
      const environ = await control.environ()
      const ambient = Object.fromEntries(Object.entries(environ).filter(([name]) => !SHELL_OWN_VARIABLES.has(name)))
      const connection = new SshConnection(client, control, ambient, connectMs, where)
      const closed = (): void => {
        if (!connection.alive) return
        connection.alive = false
        connection.lastError ??= lastError
        control.close()
        onClose(connection)
      }
      onClientClose = closed
      if (clientClosed) closed()
      control.closed.then(() => {
        // A control program that died alone leaves the connection unusable for terminals.
        if (connection.alive) { connection.lastError ??= new Error('the control channel ended'); client.end(); closed() }
      }, () => undefined)
      return connection
    } catch (error) {
      client.end()
      throw error
    }
  }

  /** Why terminals on this connection failed, for TransportError messages. */
  lossReason(): string {
    return this.lastError !== undefined ? this.lastError.message : 'the connection closed'
  }

  /** End the control program and the connection. Idempotent. */
  close(): void {
    this.control.close()
    this.client.end()
  }
}

interface PoolEntry {
  ready: Promise<SshConnection>
  connection: SshConnection | undefined
  /** Slots reserved or holding an open channel on this connection (the control channel not counted). */
  used: number
  /** Users of this connection's control channel that outlive their channel (a terminal until its teardown ends). */
  holds: number
  /** Session channels open on this connection, the control channel included. */
  openChannels: number
  /** Channel opens sent and not answered yet. */
  opening: number
  /** The server refused a channel; cleared when one of this connection's channels closes. */
  saturated: boolean
  /** When a channel of this connection last closed (performance.now() ms). */
  lastCloseAt: number
  dead: boolean
  idleTimer: NodeJS.Timeout | undefined
}

/** Result of {@link SshWorld.run}. */
export interface SshRunResult {
  exitCode: number | null
  stdout: string
  stderr: string
}

/** A reserved channel slot on one connection. */
export interface SshLease {
  readonly connection: SshConnection
  /**
   * Open a PTY exec channel running `script` (the login shell runs it with -c).
   * The slot is released when the channel closes.
   * @throws ChannelRefusedError when the server's MaxSessions is reached on this connection.
   */
  openTerminal(script: string, rows: number, cols: number): Promise<TerminalTransport>
  /**
   * Open a non-PTY exec channel running `command`; the slot is released when it closes.
   * @throws ChannelRefusedError when the server's MaxSessions is reached on this connection.
   */
  exec(command: string): Promise<SshExecChannel>
  /** Give the slot back if no channel was opened on it. Idempotent. */
  release(): void
  /**
   * Keep the connection (and its control channel) open until the returned function is called,
   * even after the channel closed: a terminal's teardown goes on through the control channel
   * after its shell (and so its PTY channel) is gone. The returned function is idempotent.
   */
  retain(): () => void
}

/** Slot attempts of {@link SshWorld.withSlot} before a refusal is final. */
const SLOT_ATTEMPTS = 8
/** A refusal this soon after a close of the same connection may be the server's lag in freeing it (ms). */
const RECENT_CLOSE_MS = 1_000

/**
 * A target and its connection pool. Connections open lazily; one connection serves many
 * terminals; another opens when every connection has MaxSessions channels (or the server
 * refused one); a connection closes `idleMs` after its last terminal channel.
 */
export class SshWorld {
  readonly options: SshWorldOptions
  private readonly entries = new Set<PoolEntry>()
  private readonly connects: PQueue
  /**
   * Every connection logs in as the same user on the same host, so their control channels see
   * one process table: teardowns on all of them share one scan per round (control-channel.ts).
   */
  private readonly scanGroup = new ScanGroup()
  private opened = 0
  private disposed = false
  /**
   * Session channels per connection: the configured MaxSessions, lowered to what the server
   * allowed when it refused a channel (the number open on that connection at the refusal).
   */
  private maxSessions: number

  constructor(options: SshWorldOptions) {
    if (!Number.isInteger(options.pool.maxSessions) || options.pool.maxSessions < 2) throw new RangeError('maxSessions must be an integer >= 2 (the control channel takes one session)')
    this.options = options
    this.maxSessions = options.pool.maxSessions
    this.connects = new PQueue({ concurrency: options.pool.maxConcurrentConnects })
  }

  /** `ssh user@host:port` for messages. */
  describe(): string {
    return `ssh ${describeTarget(this.options.hop.target)}`
  }

  /** Pool counters. */
  stats(): SshPoolStats {
    let terminalChannels = 0
    for (const entry of this.entries) terminalChannels += entry.used
    return { connections: this.entries.size, terminalChannels, opened: this.opened, maxSessions: this.maxSessions }
  }

  /**
   * Run `use` with a reserved slot. When the server refuses the channel `use` opens
   * (ChannelRefusedError: its MaxSessions is lower than configured, or a just-closed channel is
   * not freed yet), the pool learns the limit and `use` runs again on another connection.
   * @throws the connect errors; whatever `use` throws; ChannelRefusedError after repeated refusals.
   */
  async withSlot<T>(use: (lease: SshLease) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      const lease = await this.lease()
      try {
        return await use(lease)
      } catch (error) {
        lease.release()
        if (!(error instanceof ChannelRefusedError) || attempt >= SLOT_ATTEMPTS) throw error
      }
    }
  }

  /**
   * Run a command (the login shell runs it with -c) on a non-PTY channel; collect its output.
   * @throws the connect errors; TransportError when the connection is lost meanwhile.
   */
  run(command: string): Promise<SshRunResult> {
    return this.withSlot(async lease => {
      const { channel, closed } = await lease.exec(command)
      const stdout: Buffer[] = []
      const stderr: Buffer[] = []
      channel.on('data', (chunk: Buffer) => stdout.push(chunk))
      channel.stderr.on('data', (chunk: Buffer) => stderr.push(chunk))
      const outcome = await closed
      if (outcome === undefined && !lease.connection.alive) throw new TransportError(`${lease.connection.where}: lost the connection while running a command: ${lease.connection.lossReason()}`)
      return { exitCode: outcome?.exitCode ?? null, stdout: Buffer.concat(stdout).toString('utf8'), stderr: Buffer.concat(stderr).toString('utf8') }
    })
  }

  /**
   * Reserve a terminal slot, on an existing connection with room or on a new one.
   * @throws the connect errors when a new connection is needed and cannot be made.
   */
  async lease(): Promise<SshLease> {
    for (let attempt = 0; ; attempt += 1) {
      if (this.disposed) throw new WorldClosedError()
      const entry = this.pick() ?? this.connect()
      entry.used += 1
      if (entry.idleTimer !== undefined) { clearTimeout(entry.idleTimer); entry.idleTimer = undefined }
      let connection: SshConnection
      try {
        connection = await entry.ready
      } catch (error) {
        entry.used -= 1
        throw error
      }
      if (!entry.dead && !this.disposed) return this.makeLease(entry, connection)
      entry.used -= 1
      if (attempt >= 3) throw new TransportError(`${this.describe()}: ${connection.lossReason()}`)
    }
  }

  /**
   * A live connection (any; they all log in as the same user), connecting if none is open.
   * For work that needs no channel slot of its own: control requests, the login's environment.
   */
  async connection(): Promise<SshConnection> {
    if (this.disposed) throw new WorldClosedError()
    let connecting: PoolEntry | undefined
    for (const entry of this.entries) {
      if (entry.connection?.alive === true && entry.connection.control.alive) {
        this.maybeIdle(entry)
        return entry.connection
      }
      if (entry.connection === undefined && !entry.dead) connecting ??= entry
    }
    // Join a connection being made rather than making another one.
    const entry = connecting ?? this.connect()
    const connection = await entry.ready
    // An idle connection stays at least idleMs after its last use through here.
    this.maybeIdle(entry)
    return connection
  }

  /**
   * A live control channel of the login user ({@link connection}'s). Used, e.g., to tear down a
   * terminal whose own connection was lost.
   */
  async control(): Promise<ControlChannel> {
    return (await this.connection()).control
  }

  private pick(): PoolEntry | undefined {
    const capacity = this.maxSessions - 1
    let best: PoolEntry | undefined
    for (const entry of this.entries) {
      if (entry.dead || entry.saturated || entry.used >= capacity) continue
      // Fill the fullest connection first, so idle ones can close.
      if (best === undefined || entry.used > best.used) best = entry
    }
    return best
  }

  private connect(): PoolEntry {
    const entry: PoolEntry = { ready: undefined as unknown as Promise<SshConnection>, connection: undefined, used: 0, holds: 0, openChannels: 1, opening: 0, saturated: false, lastCloseAt: -Infinity, dead: false, idleTimer: undefined }
    this.opened += 1
    entry.ready = this.connects.add(async () => {
      if (this.disposed) throw new WorldClosedError()
      return SshConnection.open(this.options, () => this.onConnectionClosed(entry))
    }, { throwOnTimeout: true }).then(connection => {
      entry.connection = connection
      connection.control.joinScanGroup(this.scanGroup)
      if (this.disposed) connection.close()
      return connection
    }, (error: unknown) => {
      entry.dead = true
      this.entries.delete(entry)
      throw error
    })
    entry.ready.catch(() => undefined)
    this.entries.add(entry)
    return entry
  }

  private onConnectionClosed(entry: PoolEntry): void {
    entry.dead = true
    if (entry.idleTimer !== undefined) clearTimeout(entry.idleTimer)
    this.entries.delete(entry)
  }

  private release(entry: PoolEntry): void {
    entry.used -= 1
    this.maybeIdle(entry)
  }

  /** (Re)start the idle countdown of a connection nobody uses. */
  private maybeIdle(entry: PoolEntry): void {
    if (entry.used !== 0 || entry.holds !== 0 || entry.dead) return
    if (entry.idleTimer !== undefined) clearTimeout(entry.idleTimer)
    entry.idleTimer = setTimeout(() => {
      entry.idleTimer = undefined
      if (entry.used !== 0 || entry.holds !== 0 || entry.dead) return
      entry.dead = true
      this.entries.delete(entry)
      entry.connection?.close()
    }, this.options.pool.idleMs)
    entry.idleTimer.unref()
  }

  private makeLease(entry: PoolEntry, connection: SshConnection): SshLease {
    let released = false
    const release = (): void => {
      if (released) return
      released = true
      this.release(entry)
    }
    const open = async (command: string, pty: PtyRequest | undefined): Promise<SshExecChannel> => {
      // The server answers channel opens in order, so when this one is refused it holds the
      // channels open and the earlier opens still in flight (a PTY exec completes only after
      // its pty and exec requests, so later refusals can arrive before earlier completions).
      const before = entry.openChannels + entry.opening
      entry.opening += 1
      let opened: SshExecChannel
      try {
        opened = await openExecChannel(connection.client, command, pty, connection.where)
      } catch (error) {
        if (error instanceof ChannelRefusedError) this.refused(entry, before)
        release()
        throw error
      } finally {
        entry.opening -= 1
      }
      entry.openChannels += 1
      void opened.closed.then(() => {
        entry.openChannels -= 1
        entry.lastCloseAt = performance.now()
        entry.saturated = false
        release()
      })
      return opened
    }
    return {
      connection,
      release,
      retain: () => {
        entry.holds += 1
        let held = true
        return () => {
          if (!held) return
          held = false
          entry.holds -= 1
          this.maybeIdle(entry)
        }
      },
      openTerminal: async (script, rows, cols) => terminalTransport(await open(script, { rows, cols }), connection),
      exec: command => open(command, undefined),
    }
  }

  /**
   * The server refused a channel on `entry` while it held `held` (open or being opened before
   * this one): it allows no more than that. Right
   * after a channel of the connection closed, the server may still count it (it frees a session
   * only after the close exchange), so then the refusal only marks the connection full until
   * another of its channels closes, or briefly.
   */
  private refused(entry: PoolEntry, held: number): void {
    entry.saturated = true
    if (performance.now() - entry.lastCloseAt > RECENT_CLOSE_MS) {
      this.maxSessions = Math.max(2, Math.min(this.maxSessions, held))
    } else {
      setTimeout(() => { entry.saturated = false }, RECENT_CLOSE_MS).unref()
    }
  }

  /**
   * Close every connection (terminals must have been terminated by the owner). Idempotent.
   */
  async dispose(): Promise<void> {
    if (this.disposed) return
    this.disposed = true
    this.connects.clear()
    const entries = [...this.entries]
    this.entries.clear()
    for (const entry of entries) {
      entry.dead = true
      if (entry.idleTimer !== undefined) clearTimeout(entry.idleTimer)
    }
    const connections = await Promise.allSettled(entries.map(entry => entry.ready))
    for (const outcome of connections) if (outcome.status === 'fulfilled') outcome.value.close()
  }
}

/** The PTY channel as the world-neutral terminal's transport. */
function terminalTransport({ channel, closed }: SshExecChannel, connection: SshConnection): TerminalTransport {
  const output = new PassThrough()
  channel.pipe(output)
  channel.stderr.resume()
  return {
    output,
    write: data => new Promise<void>((resolve, reject) => {
      if (!channel.writable || !connection.alive) {
        reject(new TransportError(`${connection.where}: the terminal channel is closed${connection.alive ? '' : ` (${connection.lossReason()})`}`))
        return
      }
      channel.write(data, error => error ? reject(new TransportError(`${connection.where}: write failed: ${error.message}`, { cause: error })) : resolve())
    }),
    resize: async (rows, cols) => {
      if (channel.writable) channel.setWindow(rows, cols, 0, 0)
    },
    exit: async () => {
      const outcome = await closed
      if (outcome !== undefined) return outcome
      throw new TransportError(`${connection.where}: lost the terminal: ${connection.alive ? 'the channel closed without an exit status' : connection.lossReason()}`)
    },
    close: () => {
      try { channel.close() } catch { /* the connection is gone */ }
    },
  }
}
