/**
 * The client of one world-side network relay (world/relay-net/relay-net.c, `dsh-relay`) over
 * the stdin/stdout of its remote process (a non-PTY exec, an SSH exec channel). The relay
 * listens and connects inside the world for this client; each TCP connection is one
 * {@link RelayStream} here, a node Duplex with the relay's flow control behind it: at most
 * {@link RELAY_WINDOW_BYTES} of each direction are in flight or buffered per stream, so neither
 * side's memory grows with a slow reader. The client decides what to listen on and to dial; the
 * relay resolves no names (HOST is an IPv4 or IPv6 literal).
 * @module dsh-remote-worlds/network/relay/relay-channel
 */
import { Duplex, type Readable, type Writable } from 'node:stream'
import {
  ACCEPTED_ID_BIT,
  MAX_CLIENT_ID,
  RELAY_CREDIT_BATCH_BYTES,
  RELAY_DATA_CHUNK_BYTES,
  RELAY_HELLO_NAME,
  RELAY_PROTOCOL_VERSION,
  RELAY_WINDOW_BYTES,
  type RelayFrame,
  RelayFrameDecoder,
  RelayProtocolError,
  decodeCredit,
  decodeTextFields,
  encodeCredit,
  encodeFields,
  encodeFrame,
} from './protocol.ts'

/** The byte streams of the relay's remote process. */
export interface RelayTransport {
  readonly stdin: Writable
  readonly stdout: Readable
  /** Release the transport (close the exec / channel). Must not throw. */
  close(): void
}

/** The relay's process or its transport ended, or it never started (code `RELAY_CHANNEL_LOST`). */
export class RelayChannelError extends Error {
  readonly code: string = 'RELAY_CHANNEL_LOST'
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'RelayChannelError'
  }
}

/** The channel was closed by {@link RelayChannel.close} (what its streams are destroyed with). */
export class RelayChannelClosedError extends RelayChannelError {
  override readonly code = 'RELAY_CHANNEL_CLOSED'
  constructor(where: string) {
    super(`the network relay in ${where} was closed`)
    this.name = 'RelayChannelClosedError'
  }
}

/** The relay could not connect inside the world: `code` is the errno name (`ECONNREFUSED`, `EINVAL` for a HOST that is not a literal). */
export class RelayConnectError extends Error {
  constructor(readonly code: string, message: string, readonly host: string, readonly port: number) {
    super(message)
    this.name = 'RelayConnectError'
  }
}

/** The relay could not listen inside the world: `code` is the errno name (`EADDRINUSE`, `EACCES`, `EINVAL`). */
export class RelayListenError extends Error {
  constructor(readonly code: string, message: string, readonly host: string, readonly port: number) {
    super(message)
    this.name = 'RelayListenError'
  }
}

/** The relay reset a stream (its socket failed or its peer reset it): `code` is the errno name (`ECONNRESET`, `EPIPE`). */
export class RelayStreamError extends Error {
  constructor(readonly code: string, message: string) {
    super(message)
    this.name = 'RelayStreamError'
  }
}

/** A listener in the world. */
export interface RelayListener {
  /** The port the relay bound (the one asked for, or the kernel's choice for 0). */
  readonly port: number
  /** Stop listening (connections accepted before live on). Idempotent. */
  close(): void
}

/** What a stream needs of its channel. */
interface StreamLink {
  send(frame: Buffer): void
  forget(id: number): void
  fault(error: Error): void
}

/**
 * One TCP connection carried by the relay, as a node Duplex (half-open allowed).
 * `write()`/`end()` send `D`/`F` frames within the stream's window: `write()` returns false
 * while the window is spent (and its callback waits for the relay's credit). `'data'`/`'end'`
 * come from the relay's `D`/`F`; bytes are credited back as the reader consumes them, so a
 * paused reader stops the relay reading the socket once a window is buffered. `destroy()` sends
 * `X` (the relay resets the socket), unless the stream already ended both ways. An `X` from the
 * relay destroys it with {@link RelayStreamError}; when the channel ends, it is destroyed with
 * the channel's error ({@link RelayChannelClosedError} after {@link RelayChannel.close}).
 */
export class RelayStream extends Duplex {
  /** The stream's id on the wire (the relay's, with {@link ACCEPTED_ID_BIT}, for an accepted one). */
  readonly id: number
  /**
   * The world's process that opened an accepted stream, once the relay said (its `P` frame,
   * right after the `A`; world/relay-net/peer-process.c): pid in the world's pid namespace and
   * its comm. Undefined until then, and for good where the relay cannot tell. The stream emits
   * `'origin'` when it is set.
   */
  origin: { pid: number; command?: string } | undefined
  private readonly link: StreamLink
  /** `D` bytes this side may still send. */
  private credit = RELAY_WINDOW_BYTES
  /** A write waiting for credit. */
  private waiting: { chunk: Buffer; callback: (error?: Error | null) => void } | undefined
  /** Bytes received (pushed) and bytes credited back. */
  private received = 0
  private credited = 0
  private sentFin = false
  private gotFin = false
  /** The relay no longer knows the stream (it sent X, or the channel ended): nothing more is sent. */
  private gone = false

  /** @internal Made by {@link RelayChannel}. */
  constructor(id: number, link: StreamLink) {
    super({ allowHalfOpen: true })
    this.id = id
    this.link = link
  }

  /** @internal A `D` payload from the relay. */
  deliver(payload: Buffer): void {
    if (this.gone || this.gotFin || this.destroyed) return
    if (this.received - this.credited + payload.length > RELAY_WINDOW_BYTES) {
      this.link.fault(new RelayProtocolError(`the relay sent past the window of stream ${this.id}`))
      return
    }
    this.received += payload.length
    this.push(payload)
    this.giveCredit()
  }

  /** @internal An `F` from the relay: its socket's peer ended its sending. */
  deliverEnd(): void {
    if (this.gone || this.gotFin || this.destroyed) return
    this.gotFin = true
    this.push(null)
  }

  /** @internal A `W` from the relay. */
  addCredit(bytes: number): void {
    if (this.gone || this.destroyed) return
    if (this.credit + bytes > RELAY_WINDOW_BYTES) {
      this.link.fault(new RelayProtocolError(`the relay credited stream ${this.id} past its window`))
      return
    }
    this.credit += bytes
    this.pump()
  }

  /** @internal The relay forgot the stream (an `X`, or the channel ended): destroy it with `error`. */
  lose(error: Error): void {
    this.gone = true
    const waiting = this.waiting
    this.waiting = undefined
    this.destroy(error)
    waiting?.callback(error)
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.gone) {
      callback(new RelayStreamError('ECLOSED', `stream ${this.id} is gone`))
      return
    }
    this.waiting = { chunk, callback }
    this.pump()
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (!this.gone) {
      this.sentFin = true
      this.link.send(encodeFrame(this.id, 'F'))
    }
    callback()
  }

  override _read(): void {
    this.giveCredit()
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // Ended both ways: the relay finishes writing and forgets it by itself.
    if (!this.gone && !(this.sentFin && this.gotFin)) this.link.send(encodeFrame(this.id, 'X'))
    this.gone = true
    const waiting = this.waiting
    this.waiting = undefined
    this.link.forget(this.id)
    callback(error)
    waiting?.callback(error ?? new RelayStreamError('ECLOSED', `stream ${this.id} was destroyed`))
  }

  /** Send what the waiting write holds, as far as the credit goes. */
  private pump(): void {
    const waiting = this.waiting
    if (waiting === undefined) return
    while (waiting.chunk.length > 0 && this.credit > 0) {
      const bytes = Math.min(waiting.chunk.length, this.credit, RELAY_DATA_CHUNK_BYTES)
      this.link.send(encodeFrame(this.id, 'D', waiting.chunk.subarray(0, bytes)))
      this.credit -= bytes
      waiting.chunk = waiting.chunk.subarray(bytes)
    }
    if (waiting.chunk.length > 0) return
    this.waiting = undefined
    waiting.callback()
  }

  /**
   * Credit what the reader consumed, a batch or more at once. Never less: the window is many
   * batches, so a sender out of credit has a batch consumed here or a reader that stopped, and
   * a credit per delivered frame would cost a transport packet each (1600 per 100 MB).
   */
  private giveCredit(): void {
    if (this.gone || this.gotFin) return
    const consumed = this.received - this.readableLength - this.credited
    if (consumed < RELAY_CREDIT_BATCH_BYTES) return
    this.credited += consumed
    this.link.send(encodeCredit(this.id, consumed))
  }
}

interface PendingConnect {
  host: string
  port: number
  resolve(stream: RelayStream): void
  reject(error: Error): void
}

interface ListenerEntry {
  host: string
  port: number
  onConnection: (stream: RelayStream, peer: RelayPeer) => void
  /** Until the relay answered the `L`. */
  pending: { resolve(listener: RelayListener): void; reject(error: Error): void } | undefined
}

/** The other end of a connection the relay accepted: its address and port, as the world's socket sees them. */
export interface RelayPeer {
  host: string
  port: number
}

/** What the relay's hello says (relay-net.c). */
export interface RelayInfo {
  /** Its protocol version ({@link RELAY_PROTOCOL_VERSION}). */
  protocol: string
  /** `uname -m` of its build (`x86_64`, `aarch64`). */
  arch: string
  /** Its pid in the pid namespace it was started from (0 when it did not say). */
  pid: number
  /** The network namespace its listeners and connects live in, `net:[INODE]` (empty when unreadable). */
  netns: string
  /** The user namespace it runs in, `user:[INODE]` (empty when unreadable). */
  userns: string
}

/** How long {@link RelayChannel.open} waits for the hello (ms). */
const HELLO_TIMEOUT_MS = 10_000

/**
 * One live relay. Listeners and streams live as long as the channel; when it ends (the
 * transport ended, the relay broke its protocol, {@link RelayChannel.close}), every stream is
 * destroyed with the reason and every request in flight rejects with it. The relay, for its
 * part, closes every socket and listener when its stdin ends: nothing depends on this client's
 * teardown.
 */
export class RelayChannel {
  /** The relay's hello (see {@link RelayInfo}). */
  readonly info: RelayInfo
  private readonly transport: RelayTransport
  private readonly where: string
  private readonly streams = new Map<number, RelayStream>()
  private readonly connects = new Map<number, PendingConnect>()
  private readonly listeners = new Map<number, ListenerEntry>()
  private nextId = 1
  private failure: Error | undefined
  private ended = false
  private readonly closedPromise: Promise<Error | undefined>
  private resolveClosed!: (why: Error | undefined) => void
  private readonly decoder: RelayFrameDecoder
  private readonly link: StreamLink

  private constructor(transport: RelayTransport, decoder: RelayFrameDecoder, info: RelayInfo, where: string) {
    this.transport = transport
    this.decoder = decoder
    this.info = info
    this.where = where
    this.closedPromise = new Promise(resolve => { this.resolveClosed = resolve })
    this.link = {
      send: frame => this.send(frame),
      forget: id => { this.streams.delete(id) },
      fault: error => this.fail(error),
    }
    decoder.handler = this.onFrame
    transport.stdout.on('data', this.onBytes)
    transport.stdout.once('end', () => this.fail(new RelayChannelError(`the network relay in ${where} ended`)))
    transport.stdout.once('close', () => this.fail(new RelayChannelError(`the network relay's channel in ${where} closed`)))
    transport.stdout.on('error', (error: Error) => this.fail(new RelayChannelError(`the network relay's channel in ${where} failed: ${error.message}`, { cause: error })))
    transport.stdin.on('error', (error: Error) => this.fail(new RelayChannelError(`the network relay's channel in ${where} failed: ${error.message}`, { cause: error })))
  }

  /**
   * Wait for the relay's hello on `transport`.
   * @param where - world description for messages.
   * @param options.stderr - what the process printed on stderr so far, for the message of a
   *   relay that ended before it started.
   * @throws RelayChannelError when the transport ends first, no hello comes within 10 s, the
   *   hello names another program or protocol version, or the first frame cannot be decoded
   *   (the message says what the world printed instead). The transport is closed then.
   */
  static open(transport: RelayTransport, where: string, options: { stderr?: () => string } = {}): Promise<RelayChannel> {
    return new Promise<RelayChannel>((resolve, reject) => {
      let opened: RelayChannel | undefined
      let said = ''
      const decoder = new RelayFrameDecoder(frame => {
        if (frame.id !== 0 || frame.code !== 'H') {
          finish(new RelayChannelError(`the network relay in ${where} did not start: it sent ${JSON.stringify(frame.code)} before its hello`))
          return
        }
        const fields = decodeTextFields(frame.payload)
        if (fields[0] !== RELAY_HELLO_NAME || fields[1] !== RELAY_PROTOCOL_VERSION) {
          finish(new RelayChannelError(`the network relay in ${where} speaks ${JSON.stringify(fields.slice(0, 2).join(' '))}, not ${RELAY_HELLO_NAME} ${RELAY_PROTOCOL_VERSION}`))
          return
        }
        cleanup()
        transport.stdout.off('data', onData)
        opened = new RelayChannel(transport, decoder, { protocol: fields[1], arch: fields[2] ?? 'unknown', pid: Number(fields[3] ?? 0), netns: fields[4] ?? '', userns: fields[5] ?? '' }, where)
        resolve(opened)
      })
      const onData = (chunk: Buffer): void => {
        // Until the hello, what a world printed instead (a refusal, a shell's message) is kept
        // for the error; a hello is binary and starts with its length's low byte.
        if (opened === undefined && said.length < 400) said += chunk.toString('latin1')
        try {
          decoder.push(chunk)
        } catch (error) {
          // Frames after the hello in the same chunk are the channel's: a fault there fails it.
          if (opened !== undefined) opened.fail(error instanceof RelayProtocolError ? error : new RelayProtocolError(`the network relay in ${where} broke its protocol: ${(error as Error).message}`, { cause: error }))
          else finish(new RelayChannelError(`the network relay in ${where} sent a malformed hello: ${(error as Error).message}`, { cause: error }))
        }
      }
      const text = (): string => `${said}${options.stderr?.() ?? ''}`.replace(/[^\x20-\x7e\n]/g, '').trim().slice(0, 300)
      const onEnd = (): void => finish(new RelayChannelError(`the network relay in ${where} ended before it started${text().length > 0 ? `: ${JSON.stringify(text())}` : ''}`))
      const onError = (error: Error): void => finish(new RelayChannelError(`the network relay's channel in ${where} failed: ${error.message}`, { cause: error }))
      const timer = setTimeout(() => finish(new RelayChannelError(`the network relay in ${where} did not answer within ${HELLO_TIMEOUT_MS} ms${text().length > 0 ? `: ${JSON.stringify(text())}` : ''}`)), HELLO_TIMEOUT_MS)
      const cleanup = (): void => {
        clearTimeout(timer)
        transport.stdout.off('end', onEnd)
        transport.stdout.off('close', onEnd)
        transport.stdout.off('error', onError)
      }
      let finished = false
      const finish = (error: RelayChannelError): void => {
        if (finished) return
        finished = true
        cleanup()
        transport.stdout.off('data', onData)
        transport.close()
        reject(error)
      }
      transport.stdout.on('data', onData)
      transport.stdout.once('end', onEnd)
      transport.stdout.once('close', onEnd)
      transport.stdout.once('error', onError)
      // The relay writes first; our stdin may fail (EPIPE) when it never started.
      transport.stdin.on('error', () => undefined)
      if (transport.stdout.destroyed) onEnd()
    })
  }

  /** True until the channel ended. */
  get alive(): boolean {
    return !this.ended
  }

  /** Resolves (never rejects) when the channel ended, with why (undefined: closed by {@link RelayChannel.close}). */
  get closed(): Promise<Error | undefined> {
    return this.closedPromise
  }

  /**
   * Listen on the world's HOST:PORT; each accepted connection is given to `onConnection` (attach
   * its listeners there: its bytes may come at once).
   * @param host - an IPv4 or IPv6 literal (`127.0.0.1`, `::1`); the relay resolves no names.
   * @param port - 0 for any free port.
   * @throws RelayListenError for the relay's refusal (`code` the errno name: `EADDRINUSE`,
   *   `EACCES`, `EINVAL`); the channel's error once it ended.
   */
  listen(host: string, port: number, onConnection: (stream: RelayStream, peer: RelayPeer) => void): Promise<RelayListener> {
    if (this.ended) return Promise.reject(this.failure ?? new RelayChannelClosedError(this.where))
    const id = this.takeId(this.listeners)
    return new Promise<RelayListener>((resolve, reject) => {
      this.listeners.set(id, { host, port, onConnection, pending: { resolve, reject } })
      this.send(encodeFrame(id, 'L', encodeFields([host, String(port)])))
    })
  }

  /**
   * Connect inside the world (the relay's non-blocking connect). The stream's bytes may follow
   * the answer at once: they wait in the stream until it is read.
   * @param host - an IPv4 or IPv6 literal; the relay resolves no names.
   * @throws RelayConnectError for the relay's refusal (`code` the errno name: `ECONNREFUSED`,
   *   `ETIMEDOUT`, `EHOSTUNREACH`, `EINVAL`); the channel's error once it ended.
   */
  connect(host: string, port: number): Promise<RelayStream> {
    if (this.ended) return Promise.reject(this.failure ?? new RelayChannelClosedError(this.where))
    const id = this.takeId(this.streams, this.connects)
    return new Promise<RelayStream>((resolve, reject) => {
      this.connects.set(id, { host, port, resolve, reject })
      this.send(encodeFrame(id, 'C', encodeFields([host, String(port)])))
    })
  }

  /**
   * End the relay (stdin EOF: it closes every socket and listener and exits) and release the
   * transport. Every stream is destroyed with {@link RelayChannelClosedError}; {@link closed}
   * resolves with undefined. Idempotent.
   */
  close(): void {
    this.finish(new RelayChannelClosedError(this.where), undefined)
  }

  /** A free client id (1..MAX_CLIENT_ID) in none of `maps`. */
  private takeId(...maps: Map<number, unknown>[]): number {
    for (;;) {
      const id = this.nextId
      this.nextId = id >= MAX_CLIENT_ID ? 1 : id + 1
      if (maps.every(map => !map.has(id))) return id
    }
  }

  private send(frame: Buffer): void {
    if (this.ended) return
    // The windows bound what waits in the transport: no backpressure is needed here.
    this.transport.stdin.write(frame)
  }

  /** The relay's bytes, after its hello. */
  private readonly onBytes = (chunk: Buffer): void => {
    if (this.ended) return
    try {
      this.decoder.push(chunk)
    } catch (error) {
      this.fail(error instanceof RelayProtocolError ? error : new RelayProtocolError(`the network relay in ${this.where} broke its protocol: ${(error as Error).message}; its channel is closed`, { cause: error }))
    }
  }

  private readonly onFrame = (frame: RelayFrame): void => {
    if (this.ended) return
    const { id, code, payload } = frame
    switch (code) {
      case 'D':
        this.streams.get(id)?.deliver(payload)
        return
      case 'W': {
        const bytes = decodeCredit(payload)
        this.streams.get(id)?.addCredit(bytes)
        return
      }
      case 'F':
        this.streams.get(id)?.deliverEnd()
        return
      case 'X': {
        const [errno, message] = decodeTextFields(payload)
        const stream = this.streams.get(id)
        if (stream === undefined) return
        this.streams.delete(id)
        stream.lose(new RelayStreamError(errno ?? 'EIO', `the relay reset stream ${id}: ${message ?? 'no reason given'}`))
        return
      }
      case 'P': {
        // Who opened a connection the relay accepted (after its A); a stream already gone is left.
        const [pid, command] = decodeTextFields(payload)
        const stream = this.streams.get(id)
        if (stream !== undefined && pid !== undefined && /^[1-9]\d*$/.test(pid)) {
          stream.origin = { pid: Number(pid), ...(command !== undefined && command !== '' ? { command } : {}) }
          stream.emit('origin')
        }
        return
      }
      case 'A': {
        const [listenerId, host, port] = decodeTextFields(payload)
        if ((id & ACCEPTED_ID_BIT) === 0 || this.streams.has(id)) throw new RelayProtocolError(`the relay accepted a connection with id ${id} (taken, or without the accepted bit)`)
        const listener = this.listeners.get(Number(listenerId))
        if (listener === undefined || listener.pending !== undefined) {
          // It crossed our U: reset it.
          this.send(encodeFrame(id, 'X'))
          return
        }
        const stream = this.newStream(id)
        try {
          listener.onConnection(stream, { host: host ?? '', port: Number(port) })
        } catch (error) {
          stream.destroy(error as Error)
        }
        return
      }
      case 'K':
      case 'E':
        this.answer(id, code, payload)
        return
      default:
        throw new RelayProtocolError(`the network relay in ${this.where} sent an unknown frame ${JSON.stringify(code)}; its channel is closed`)
    }
  }

  /** The relay's answer to an `L` or a `C` (client ids: a listener's or a stream's). */
  private answer(id: number, code: 'K' | 'E', payload: Buffer): void {
    const fields = decodeTextFields(payload)
    const connect = this.connects.get(id)
    if (connect !== undefined) {
      this.connects.delete(id)
      if (code === 'K') connect.resolve(this.newStream(id))
      else connect.reject(new RelayConnectError(fields[0] ?? 'EIO', `the relay in ${this.where} could not connect to ${connect.host}:${connect.port}: ${fields[1] ?? fields[0] ?? 'refused'}`, connect.host, connect.port))
      return
    }
    const listener = this.listeners.get(id)
    if (listener?.pending === undefined) return
    const pending = listener.pending
    listener.pending = undefined
    if (code === 'E') {
      this.listeners.delete(id)
      pending.reject(new RelayListenError(fields[0] ?? 'EIO', `the relay in ${this.where} could not listen on ${listener.host}:${listener.port}: ${fields[1] ?? fields[0] ?? 'refused'}`, listener.host, listener.port))
      return
    }
    const port = Number(fields[0])
    let open = true
    pending.resolve({
      port,
      close: () => {
        if (!open) return
        open = false
        this.listeners.delete(id)
        this.send(encodeFrame(id, 'U'))
      },
    })
  }

  private newStream(id: number): RelayStream {
    const stream = new RelayStream(id, this.link)
    this.streams.set(id, stream)
    return stream
  }

  /** The channel failed: end it with `error`. */
  private fail(error: Error): void {
    this.finish(error, error)
  }

  private finish(error: Error, why: Error | undefined): void {
    if (this.ended) return
    this.failure = error
    this.transport.stdout.off('data', this.onBytes)
    try {
      this.transport.stdin.end()
    } catch {
      // Already gone.
    }
    this.ended = true
    for (const stream of [...this.streams.values()]) stream.lose(error)
    this.streams.clear()
    for (const connect of this.connects.values()) connect.reject(error)
    this.connects.clear()
    for (const listener of this.listeners.values()) listener.pending?.reject(error)
    this.listeners.clear()
    this.transport.close()
    this.resolveClosed(why)
  }
}
