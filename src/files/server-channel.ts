/**
 * The client of one world file server (world/fsd/fsd.c) over the stdin/stdout of its remote
 * process. Requests are written as soon as they are made (pipelined); the server answers them
 * one at a time, in order, so a reply's frames never interleave with another's.
 * @module dsh-remote-worlds/files/server-channel
 */
import type { Readable, Writable } from 'node:stream'
import { type Frame, FrameDecoder, PROTOCOL_VERSION, decodeFields, encodeFields, encodeFrame } from './protocol.ts'

/** The byte streams of the server's remote process. */
export interface ServerTransport {
  readonly stdin: Writable
  readonly stdout: Readable
  /** Release the transport (close the exec / channel). Must not throw. */
  close(): void
}

/** What the server reports about itself at start (its hello). */
export interface ServerInfo {
  uid: number
  gid: number
  /** Its pid in the world (in its own pid namespace under bubblewrap). */
  pid: number
  /** `x86_64` or `aarch64`. */
  arch: string
  /** Its umask, as three octal digits (new files get 0666 less it). */
  umask: string
}

/** The server refused a request: `code` is an errno name (`ENOENT`) or one of its own (`STALE`, ...). */
export class ServerRefusal extends Error {
  constructor(readonly code: string, message: string) {
    super(message)
    this.name = 'ServerRefusal'
  }
}

/** The server's process or its transport ended (the world died, the connection dropped). */
export class ServerLostError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'ServerLostError'
  }
}

/**
 * The server broke its protocol: a frame longer than protocol.ts `MAX_REPLY_FRAME_BYTES`, a reply
 * that cannot be decoded, or more data for a request than it asked for. A planted program or
 * a broken build, not a file server: its channel is closed (the requests in flight reject with
 * this), and the file system's next call starts another server. Other servers live on.
 */
export class ServerProtocolError extends ServerLostError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'ServerProtocolError'
  }
}

/** A request's reply: `K` with its payload, or `A` (absent). */
export interface ServerReply {
  code: 'K' | 'A'
  payload: Buffer
}

interface Pending {
  resolve(reply: ServerReply): void
  reject(error: Error): void
  onData: ((chunk: Buffer) => void) | undefined
  onSize: ((bytes: number) => void) | undefined
  /** Bytes of `D` payload the request may still receive (see `request`'s `maxData`). */
  dataLeft: number
}

/** The decoder a channel takes over from {@link ServerChannel.open}, with its handlers replaced. */
interface DecoderHandle {
  push(chunk: Buffer): void
  replace(onFrame: (frame: Frame) => void, onData: (id: number, part: Buffer) => void): void
}

const HELLO_TIMEOUT_MS = 15_000
/**
 * Default bound of silence while a request is in flight (ms): a reply's frames keep coming
 * while a long read streams, a write's reply comes once it is published, and the server waits
 * at most 10 s for a directory lock (fsd.c LOCK_WAIT_MS). A server silent for longer is frozen
 * (a paused container, a stopped process) or stuck: the channel is failed, as the control
 * channel fails one request that times out, and the next call starts another server. Only the
 * frames of a request in flight count as signs of life: bytes for no request do not hold the
 * bound off.
 */
export const DEFAULT_SERVER_SILENCE_MS = 30_000

/**
 * One live file server. Methods reject with {@link ServerRefusal} for the server's own "no",
 * and {@link ServerLostError} once the transport ended (every request in flight then too).
 */
export class ServerChannel {
  /** The server's hello. */
  readonly info: ServerInfo
  private readonly transport: ServerTransport
  private readonly pending = new Map<number, Pending>()
  private nextId = 1
  private failure: ServerLostError | undefined
  private readonly closedPromise = Promise.withResolvers<void>()
  private readonly where: string
  private readonly silenceMs: number
  /** Fails the channel when the server is silent for silenceMs with a request in flight. */
  private watchdog: NodeJS.Timeout | undefined
  private readonly decoder: DecoderHandle

  private constructor(transport: ServerTransport, decoder: DecoderHandle, info: ServerInfo, where: string, silenceMs: number) {
    this.transport = transport
    this.info = info
    this.where = where
    this.silenceMs = silenceMs
    this.decoder = decoder
    decoder.replace(this.onFrame, this.onDataPart)
    transport.stdout.on('data', this.onBytes)
    transport.stdout.once('end', () => this.fail(new ServerLostError(`the file server in ${where} ended`)))
    transport.stdout.once('close', () => this.fail(new ServerLostError(`the file server's channel in ${where} closed`)))
    transport.stdout.on('error', (error: Error) => this.fail(new ServerLostError(`the file server's channel in ${where} failed: ${error.message}`, { cause: error })))
    transport.stdin.on('error', (error: Error) => this.fail(new ServerLostError(`the file server's channel in ${where} failed: ${error.message}`, { cause: error })))
  }

  /**
   * Wait for the server's hello on `transport`.
   * @param where - world description for messages.
   * @param options.silenceMs - see {@link DEFAULT_SERVER_SILENCE_MS}.
   * @param options.stderr - what the process printed on stderr so far, for the message of a
   *   server that ended before it started.
   * @throws ServerLostError when the transport ends first, or no hello comes within 15 s, or the
   *   hello names another protocol (the message says what the world printed instead);
   *   ServerProtocolError for a first frame past protocol.ts `MAX_REPLY_FRAME_BYTES` or a malformed hello.
   */
  static open(transport: ServerTransport, where: string, options: { silenceMs?: number; stderr?: () => string } = {}): Promise<ServerChannel> {
    const ready = Promise.withResolvers<ServerChannel>()
    let opened: ServerChannel | undefined
    let onFrame = (frame: Frame): void => {
      if (frame.id !== 0 || frame.code !== 'H') {
        finish(new ServerLostError(`the file server in ${where} did not start: it answered ${JSON.stringify(frame.code)} before its hello`))
        return
      }
      const fields = decodeFields(frame.payload).map(field => field.toString('utf8'))
      if (fields[0] !== 'dsh-fsd' || fields[1] !== PROTOCOL_VERSION) {
        // A build of another protocol, or not a file server at all.
        finish(new ServerLostError(`the file server in ${where} speaks ${JSON.stringify(fields.slice(0, 2).join(' '))}, not dsh-fsd ${PROTOCOL_VERSION}`))
        return
      }
      const info: ServerInfo = { uid: Number(fields[2]), gid: Number(fields[3]), pid: Number(fields[4]), arch: fields[5] ?? 'unknown', umask: fields[6] ?? '022' }
      cleanup()
      transport.stdout.off('data', onData)
      opened = new ServerChannel(transport, holder, info, where, options.silenceMs ?? DEFAULT_SERVER_SILENCE_MS)
      ready.resolve(opened)
    }
    let deliverData = (_id: number, _part: Buffer): void => {}
    const decoder = new FrameDecoder(frame => onFrame(frame), (id, part) => deliverData(id, part))
    const holder: DecoderHandle = {
      push: chunk => decoder.push(chunk),
      replace: (next, data) => { onFrame = next; deliverData = data },
    }
    let said = ''
    const onData = (chunk: Buffer): void => {
      // Until the hello arrives, what a world printed instead (a refusal, a shell's message)
      // is kept for the error; a hello is binary and starts with its length's low byte.
      if (said.length < 400) said += chunk.toString('latin1')
      try {
        decoder.push(chunk)
      } catch (error) {
        // Frames after the hello in the same chunk are the channel's: a fault there fails it.
        if (opened !== undefined) opened.fault(error)
        else finish(new ServerProtocolError(`the file server in ${where} sent a malformed hello: ${(error as Error).message}`, { cause: error }))
      }
    }
    const text = (): string => `${said}${options.stderr?.() ?? ''}`.replace(/[^\x20-\x7e\n]/g, '').trim().slice(0, 300)
    const onEnd = (): void => finish(new ServerLostError(`the file server in ${where} ended before it started${text().length > 0 ? `: ${JSON.stringify(text())}` : ''}`))
    const onError = (error: Error): void => finish(new ServerLostError(`the file server's channel in ${where} failed: ${error.message}`, { cause: error }))
    const timer = setTimeout(() => finish(new ServerLostError(`the file server in ${where} did not answer within ${HELLO_TIMEOUT_MS} ms`)), HELLO_TIMEOUT_MS)
    const cleanup = (): void => {
      clearTimeout(timer)
      transport.stdout.off('end', onEnd)
      transport.stdout.off('close', onEnd)
      transport.stdout.off('error', onError)
    }
    const finish = (error: ServerLostError): void => {
      cleanup()
      transport.stdout.off('data', onData)
      transport.close()
      ready.reject(error)
    }
    transport.stdout.on('data', onData)
    transport.stdout.once('end', onEnd)
    transport.stdout.once('close', onEnd)
    transport.stdout.once('error', onError)
    // The server writes first; our stdin may fail (EPIPE) when it never started.
    transport.stdin.on('error', () => undefined)
    if (transport.stdout.destroyed) onEnd()
    return ready.promise
  }

  /** True until the transport ended. */
  get alive(): boolean {
    return this.failure === undefined
  }

  /** Resolves when the channel ended for any reason. */
  get closed(): Promise<void> {
    return this.closedPromise.promise
  }

  /**
   * Send one request.
   * @param code - the operation letter.
   * @param fields - its fields.
   * @param options.content - raw bytes written right after the frame (a write's content).
   * @param options.onData - receives the `D` frames' payload of the reply, in order, in the
   *   pieces it arrived in (views of the transport's chunks: keep them, or copy them).
   * @param options.onSize - receives an `S` frame's size (bytes of the data to come; a read's).
   * @param options.maxData - the most `D` payload the reply may carry in all (bytes; the bound
   *   the request gave the server). More is a {@link ServerProtocolError} that closes the
   *   channel. Default: unbounded with `onData`, none without.
   * @throws ServerRefusal for an `E` reply; ServerLostError when the channel ended
   *   (ServerProtocolError when the server broke its protocol).
   */
  request(code: string, fields: readonly (string | Uint8Array)[], options: { content?: Uint8Array; onData?: (chunk: Buffer) => void; onSize?: (bytes: number) => void; maxData?: number } = {}): Promise<ServerReply> {
    if (this.failure !== undefined) return Promise.reject(this.failure)
    const id = this.nextId++
    if (this.nextId > 0xffff_fff0) this.nextId = 1
    const reply = Promise.withResolvers<ServerReply>()
    const dataLeft = options.maxData ?? (options.onData === undefined ? 0 : Number.POSITIVE_INFINITY)
    this.pending.set(id, { resolve: reply.resolve, reject: reply.reject, onData: options.onData, onSize: options.onSize, dataLeft })
    if (this.watchdog === undefined) this.arm()
    const frame = encodeFrame(id, code, encodeFields(fields))
    const content = options.content
    // One write where it is small: over SSH each write is a packet and costs the client a
    // channel write (~0.5 ms of main-thread time measured).
    if (content === undefined || content.length === 0) this.transport.stdin.write(frame)
    else if (content.length <= 256 * 1024) this.transport.stdin.write(Buffer.concat([frame, content]))
    else {
      this.transport.stdin.write(frame)
      this.transport.stdin.write(content)
    }
    return reply.promise
  }

  /** End the server (a quit request, then stdin EOF) and release the transport. Idempotent. */
  close(): void {
    if (this.failure === undefined) {
      try {
        this.transport.stdin.write(encodeFrame(0, 'q'))
        this.transport.stdin.end()
      } catch {
        // The transport is already gone.
      }
    }
    this.fail(new ServerLostError(`the file server in ${this.where} was closed`))
  }

  /** (Re)start the silence bound, or stop it when nothing is in flight. */
  private arm(): void {
    if (this.watchdog !== undefined) clearTimeout(this.watchdog)
    this.watchdog = this.pending.size === 0 || this.failure !== undefined ? undefined : setTimeout(() => {
      this.fail(new ServerLostError(`the file server in ${this.where} did not answer within ${this.silenceMs} ms (frozen or stuck: a paused container, a stopped process); its channel is closed`))
    }, this.silenceMs)
    this.watchdog?.unref()
  }

  /** The server's bytes, after its hello. */
  private readonly onBytes = (chunk: Buffer): void => {
    if (this.failure !== undefined) return
    try {
      this.decoder.push(chunk)
    } catch (error) {
      this.fault(error)
    }
  }

  /** The server's stream cannot be decoded (see {@link ServerProtocolError}): end this channel. */
  readonly fault = (error: unknown): void => {
    this.fail(error instanceof ServerProtocolError ? error : new ServerProtocolError(`the file server in ${this.where} broke its protocol: ${(error as Error)?.message ?? String(error)}; its channel is closed`, { cause: error }))
  }

  /** A piece of a `D` frame's payload (the decoder streams them; see protocol.ts). */
  private readonly onDataPart = (id: number, part: Buffer): void => {
    const waiter = this.pending.get(id)
    if (waiter === undefined) return
    waiter.dataLeft -= part.length
    if (waiter.dataLeft < 0) {
      this.fault(new ServerProtocolError(`the file server in ${this.where} sent more data for request ${id} than it asked for; its channel is closed`))
      return
    }
    // A sign of life of the request in flight.
    this.arm()
    waiter.onData?.(part)
  }

  private readonly onFrame = (frame: Frame): void => {
    const waiter = this.pending.get(frame.id)
    if (waiter === undefined) return
    switch (frame.code) {
      case 'S':
        waiter.onSize?.(Number(frame.payload.toString('latin1')))
        break
      case 'K':
      case 'A':
        this.pending.delete(frame.id)
        waiter.resolve({ code: frame.code, payload: frame.payload })
        break
      case 'E': {
        // Decoded first: a malformed one is the channel's fault (onBytes), not this request's refusal.
        const [code, message] = decodeFields(frame.payload).map(field => field.toString('utf8'))
        this.pending.delete(frame.id)
        waiter.reject(new ServerRefusal(code ?? 'EOTHER', message ?? 'the file server refused'))
        break
      }
      default:
        this.fault(new ServerProtocolError(`the file server in ${this.where} sent an unknown reply ${JSON.stringify(frame.code)}; its channel is closed`))
        return
    }
    // A sign of life of the requests in flight (or none left: the bound stops).
    this.arm()
  }

  private fail(error: ServerLostError): void {
    if (this.failure !== undefined) return
    this.failure = error
    if (this.watchdog !== undefined) clearTimeout(this.watchdog)
    this.watchdog = undefined
    for (const waiter of this.pending.values()) waiter.reject(error)
    this.pending.clear()
    this.transport.stdout.off('data', this.onBytes)
    try {
      this.transport.stdin.end()
    } catch {
      // Already gone.
    }
    this.transport.close()
    this.closedPromise.resolve()
  }
}
