/**
 * Terminal emulators for remote terminals: the client-side half. Each {@link TerminalEmulator}
 * is an xterm.js headless terminal living in one worker thread shared by the whole process
 * (worker.ts), fed the PTY output in order, answering the program's terminal queries and
 * showing its screen.
 *
 * Why a worker: terminal-bash already parses every output byte on the main thread (measured:
 * 100 MB of `od -v` output through a Docker terminal, 4.0 s of main-thread CPU); xterm.js
 * parses at ~65 MB/s, which in the same thread added 1.4 s (1.28x the send's time). On a
 * second thread it runs beside terminal-bash instead of after it.
 * @module dsh-remote-worlds/emulator/host
 */
import { Worker } from 'node:worker_threads'
import type { HostMessage, WorkerMessage } from './protocol.ts'
import type { TerminalScreen } from './screen.ts'

/**
 * Flow control (the xterm.js flow-control guide's watermarks, xtermjs.org/docs/guides/flowcontrol):
 * output posted to the emulator but not yet parsed above HIGH pauses the PTY output (the
 * program then blocks in write(2), as with a slow real terminal); parsing back below LOW
 * resumes it. This bounds the emulator's memory under any flood, whatever the worker's speed.
 */
export const EMULATOR_HIGH_WATER_BYTES = 4 * 1024 * 1024
/** See {@link EMULATOR_HIGH_WATER_BYTES}. */
export const EMULATOR_LOW_WATER_BYTES = 1024 * 1024
/** An idle worker (no emulator left) ends after this long (ms); the next emulator starts one again. */
const IDLE_WORKER_MS = 30_000

/** How one emulator is made. */
export interface TerminalEmulatorOptions {
  /** Size in character cells. */
  rows: number
  cols: number
  /** Lines kept above the viewport of the normal buffer. */
  scrollback: number
  /** Deliver the emulator's replies (cursor position reports, DA, colours) through `onReply`. */
  replies: boolean
}

/** Where an emulator's outputs go (see {@link TerminalEmulator.connect}). */
export interface TerminalEmulatorSink {
  /** A reply for the program: write it to the PTY input (or hold it: ReplyDelivery). */
  onReply(data: string): void
  /** The output showed the harness's prompt marker, in order with the replies. */
  onPrompt(): void
  /** True: stop reading PTY output until called with false (see {@link EMULATOR_HIGH_WATER_BYTES}). */
  onBackpressure(paused: boolean): void
}

/** How long a starting worker may take to load (ms); beyond it the emulator fails. */
export const EMULATOR_START_BOUND_MS = 10_000

/** The shared worker and the emulators it serves. */
class EmulatorWorker {
  private static current: EmulatorWorker | undefined
  private readonly emulators = new Map<number, TerminalEmulator>()
  private readonly worker: Worker
  private nextId = 1
  private idleTimer: NodeJS.Timeout | undefined
  private failure: Error | undefined
  private readonly started = Promise.withResolvers<void>()

  /** The process's worker, started when none runs (or the last one failed or went idle). */
  static shared(): EmulatorWorker {
    if (EmulatorWorker.current === undefined || EmulatorWorker.current.failure !== undefined) EmulatorWorker.current = new EmulatorWorker()
    return EmulatorWorker.current
  }

  /**
   * Resolves once the worker loaded its modules (xterm.js; ~100 ms from TypeScript source,
   * less from the package's JavaScript); rejects when it failed or took longer than
   * {@link EMULATOR_START_BOUND_MS}. Output posted earlier waits in the port meanwhile, so
   * only replies are late, which is why a terminal's start waits for this.
   */
  get ready(): Promise<void> {
    return this.started.promise
  }

  private constructor() {
    // Source checkouts (tests, tsx) run worker.ts through Node's type stripping; the package runs worker.js.
    const file = import.meta.url.endsWith('.ts') ? './worker.ts' : './worker.js'
    this.worker = new Worker(new URL(file, import.meta.url))
    this.started.promise.catch(() => undefined)
    const bound = setTimeout(() => this.fail(new Error(`terminal emulator worker did not start within ${EMULATOR_START_BOUND_MS} ms`)), EMULATOR_START_BOUND_MS)
    bound.unref()
    this.worker.on('message', (message: WorkerMessage) => {
      if (message.op === 'ready') {
        clearTimeout(bound)
        this.started.resolve()
        return
      }
      this.emulators.get(message.id)?.receive(message)
    })
    this.worker.on('error', error => this.fail(error))
    this.worker.on('exit', code => this.fail(new Error(`terminal emulator worker exited (code ${code})`)))
    this.endWhenIdle()
    // Never what keeps the client alive: terminals and their transports do that. After the
    // listeners: adding a 'message' listener refs the worker again (a CLI would then wait out
    // IDLE_WORKER_MS after its last terminal closed before it exits).
    this.worker.unref()
  }

  post(message: HostMessage): void {
    if (this.failure === undefined) this.worker.postMessage(message)
  }

  attach(emulator: TerminalEmulator): number {
    clearTimeout(this.idleTimer)
    const id = this.nextId++
    this.emulators.set(id, emulator)
    return id
  }

  detach(id: number): void {
    this.emulators.delete(id)
    this.endWhenIdle()
  }

  /** With no emulator attached, end the worker after {@link IDLE_WORKER_MS} (also a warmed one never used). */
  private endWhenIdle(): void {
    if (this.emulators.size > 0 || this.failure !== undefined) return
    clearTimeout(this.idleTimer)
    this.idleTimer = setTimeout(() => {
      if (this.emulators.size > 0) return
      // A failed worker is replaced by the next shared() call.
      this.failure = new Error('terminal emulator worker ended: idle')
      void this.worker.terminate()
    }, IDLE_WORKER_MS)
    this.idleTimer.unref()
  }

  private fail(error: Error): void {
    if (this.failure !== undefined) return
    this.failure = error
    this.started.reject(error)
    void this.worker.terminate()
    for (const emulator of this.emulators.values()) emulator.receive({ op: 'failed', id: 0, message: error.message })
    this.emulators.clear()
  }
}

/**
 * Start the shared worker now when none runs, so the first terminal does not wait for it (a
 * runtime calls this at construction). Never throws; a failure shows in the emulators made later.
 */
export function warmEmulatorWorker(): void {
  EmulatorWorker.shared()
}

/**
 * One terminal's emulator: feed it the PTY output with {@link write}, in order and complete;
 * after {@link connect}, it calls `onReply` with what a terminal would answer (only when
 * `replies` is on) and `onBackpressure` when its input backs up. {@link screen} resolves after everything written
 * before it was parsed. An emulator that failed (its worker died) stays failed: `screen`
 * rejects with the reason, writes are dropped, and the terminal it watches is unaffected.
 */
export class TerminalEmulator {
  private readonly host: EmulatorWorker
  private readonly id: number
  private sink: TerminalEmulatorSink | undefined
  private readonly screens = new Map<number, PromiseWithResolvers<TerminalScreen>>()
  private readonly syncs = new Map<number, PromiseWithResolvers<void>>()
  private nextRequest = 1
  /** Bytes posted but not yet parsed. */
  private unparsed = 0
  private paused = false
  private failure: Error | undefined
  private closed = false

  constructor(options: TerminalEmulatorOptions) {
    this.host = EmulatorWorker.shared()
    this.id = this.host.attach(this)
    this.host.post({ op: 'open', id: this.id, rows: options.rows, cols: options.cols, scrollback: options.scrollback, replies: options.replies })
  }

  /**
   * Resolves when the emulator's worker runs (see EmulatorWorker.ready).
   * @throws Error when the worker failed to start.
   */
  get ready(): Promise<void> {
    return this.host.ready
  }

  /** Send replies and backpressure to `sink` from now on. */
  connect(sink: TerminalEmulatorSink): void {
    this.sink = sink
  }

  /** Feed PTY output bytes (never modified; copied to the worker). */
  write(data: Uint8Array): void {
    if (this.closed || this.failure !== undefined || data.byteLength === 0) return
    this.unparsed += data.byteLength
    this.host.post({ op: 'write', id: this.id, data })
    if (!this.paused && this.unparsed > EMULATOR_HIGH_WATER_BYTES) {
      this.paused = true
      this.sink?.onBackpressure(true)
    }
  }

  /** Resize to `rows` x `cols` cells (output posted after this is parsed at the new size). */
  resize(rows: number, cols: number): void {
    if (this.closed || this.failure !== undefined) return
    this.host.post({ op: 'resize', id: this.id, rows, cols })
  }

  /**
   * The screen after everything written so far.
   * @param scrollback - also return up to this many lines scrolled off the top.
   * @throws Error when the emulator failed or is closed.
   */
  screen(scrollback = 0): Promise<TerminalScreen> {
    if (this.failure !== undefined) return Promise.reject(this.failure)
    if (this.closed) return Promise.reject(new Error('terminal emulator is closed'))
    const request = this.nextRequest++
    const pending = Promise.withResolvers<TerminalScreen>()
    this.screens.set(request, pending)
    this.host.post({ op: 'screen', id: this.id, request, scrollback })
    return pending.promise
  }

  /**
   * Resolves once everything written so far was parsed (its replies and prompt events are
   * delivered before this resolves: messages of the worker arrive in order).
   * @throws Error when the emulator failed or is closed.
   */
  sync(): Promise<void> {
    if (this.failure !== undefined) return Promise.reject(this.failure)
    if (this.closed) return Promise.reject(new Error('terminal emulator is closed'))
    const request = this.nextRequest++
    const pending = Promise.withResolvers<void>()
    this.syncs.set(request, pending)
    this.host.post({ op: 'sync', id: this.id, request })
    return pending.promise
  }

  /** Release the worker's terminal; pending screens and syncs reject. Idempotent. */
  close(): void {
    if (this.closed) return
    this.closed = true
    this.host.post({ op: 'close', id: this.id })
    this.host.detach(this.id)
    this.rejectAll(new Error('terminal emulator is closed'))
    this.release()
  }

  /** @internal A message of the worker for this emulator. */
  receive(message: WorkerMessage): void {
    switch (message.op) {
      case 'reply':
        if (!this.closed) this.sink?.onReply(message.data)
        return
      case 'prompt':
        if (!this.closed) this.sink?.onPrompt()
        return
      case 'synced':
        this.syncs.get(message.request)?.resolve()
        this.syncs.delete(message.request)
        return
      case 'parsed':
        this.unparsed -= message.bytes
        if (this.paused && this.unparsed < EMULATOR_LOW_WATER_BYTES) this.release()
        return
      case 'screen':
        this.screens.get(message.request)?.resolve(message.screen)
        this.screens.delete(message.request)
        return
      case 'failed': {
        const error = new Error(`terminal emulator failed: ${message.message}`)
        if (message.request !== undefined) {
          this.screens.get(message.request)?.reject(error)
          this.screens.delete(message.request)
          this.syncs.get(message.request)?.reject(error)
          this.syncs.delete(message.request)
          return
        }
        this.failure = error
        this.rejectAll(error)
        // Output must never wait for an emulator that is gone.
        this.release()
      }
    }
  }

  private release(): void {
    if (!this.paused) return
    this.paused = false
    this.sink?.onBackpressure(false)
  }

  private rejectAll(error: Error): void {
    for (const pending of [...this.screens.values(), ...this.syncs.values()]) pending.reject(error)
    this.screens.clear()
    this.syncs.clear()
  }
}
