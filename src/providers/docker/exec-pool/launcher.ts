/**
 * A launcher: one non-TTY exec that runs ordinary processes one after another, each as a
 * {@link ProcessTransport} indistinguishable from a fresh exec's (boot-scripts.ts says what
 * runs in the world and why the streams of one run can never carry another run's bytes).
 * @module dsh-remote-worlds/providers/docker/exec-pool/launcher
 */
import { randomBytes } from 'node:crypto'
import type { PassThrough } from 'node:stream'
import { PassThrough as Pipe } from 'node:stream'
import type { SubprocessOutcome } from '@deepseek-ai/dsh-subprocess'
import { holdUntilDrained } from '../../remote/backpressure.ts'
import { TransportError } from '../../remote/errors.ts'
import type { ProcessTransport } from '../../remote/process.ts'
import { TrailerScanner } from '../../remote/process-wrapper.ts'
import { demuxDockerStream } from '../demux.ts'
import { FRAME_TAG, LAUNCHER_SCRIPT, specBytes } from './boot-scripts.ts'
import { awaitReady } from './ready.ts'
import type { StartExec, StartedExec } from './started-exec.ts'

/** Buffer of each run's stdout and stderr before the exec's socket pauses (bytes), as a fresh exec's. */
const RUN_HIGH_WATER_MARK = 1 << 20

type Stream = 'stdout' | 'stderr'

/** One process run through the launcher. */
interface Run {
  readonly out: Record<Stream, PassThrough>
  readonly scanners: Record<Stream, TrailerScanner>
  readonly done: Record<Stream, boolean>
  readonly finished: PromiseWithResolvers<SubprocessOutcome>
}

/**
 * A started launcher. States: `idle` (ready for {@link ProcessLauncher.run}), `busy` (one run's
 * streams not yet ended), `ended` (its exec's stream closed: retired, or the exec died).
 */
export class ProcessLauncher {
  /** The exec (ExecInspect proves it ended). */
  readonly exec: StartedExec['exec']
  /** Called when a run's both streams ended and the launcher can take the next spec. */
  onIdle: ((launcher: ProcessLauncher) => void) | undefined
  /** Called once when its exec's stream closed. */
  onEnded: ((launcher: ProcessLauncher) => void) | undefined
  /** The container's death count when it was started (pool.ts discards one from an earlier life). */
  epoch = 0
  private readonly stream: StartedExec['stream']
  private readonly where: string
  private readonly raw: Record<Stream, PassThrough>
  private current: Run | undefined
  private state: 'starting' | 'idle' | 'busy' | 'ended' = 'starting'

  private constructor(started: StartedExec, where: string) {
    this.exec = started.exec
    this.stream = started.stream
    this.where = where
    // Split at once: the socket buffers until read, and the demux honours backpressure.
    const { stdout, stderr } = demuxDockerStream(started.stream, RUN_HIGH_WATER_MARK)
    this.raw = { stdout, stderr }
    stderr.on('data', (chunk: Buffer) => this.route('stderr', chunk))
    stdout.once('end', () => this.ended())
    stderr.once('end', () => this.ended())
    started.stream.once('close', () => this.ended())
  }

  /**
   * Start a launcher exec as `user` and wait until it can take a spec.
   * @param env - extra exec environment entries (the pool's session tag).
   * @throws PreStartRefusedError when the world lacks `cat`, or the exec ended or stayed silent
   *   (ready.ts); the world's typed errors when the exec cannot start.
   */
  static async start(startExec: StartExec, user: string | undefined, env: readonly string[], where: string): Promise<ProcessLauncher> {
    const nonce = randomBytes(16).toString('hex')
    const started = await startExec(['/bin/sh', '-c', LAUNCHER_SCRIPT, 'dsh-launcher', nonce], { tty: false, user, stdin: true, env })
    const launcher = new ProcessLauncher(started, where)
    try {
      await awaitReady(launcher.raw.stdout, nonce)
    } catch (error) {
      launcher.retire()
      throw error
    }
    if (launcher.state === 'starting') launcher.state = 'idle'
    // awaitReady paused it; a 'data' listener alone does not resume an explicitly paused stream.
    launcher.raw.stdout.on('data', (chunk: Buffer) => launcher.route('stdout', chunk))
    launcher.raw.stdout.resume()
    return launcher
  }

  /** True while the launcher can take a spec. */
  get idle(): boolean {
    return this.state === 'idle'
  }

  /** True once its exec's stream closed (retired or died). */
  get hasEnded(): boolean {
    return this.state === 'ended'
  }

  /**
   * Hand `script` (a process wrapper for stdin `ignore`) to the launcher.
   * @returns the run's transport. `close()` before both streams ended retires the launcher (a
   *   run whose streams a descendant still holds never frees it).
   * @throws Error when the launcher is not idle (a pool bug, never a world's failure).
   */
  run(script: string): ProcessTransport {
    if (this.state !== 'idle') throw new Error(`launcher in ${this.where} is ${this.state}, not idle`)
    this.state = 'busy'
    const frame = randomBytes(16).toString('hex')
    const run: Run = {
      out: { stdout: new Pipe({ highWaterMark: RUN_HIGH_WATER_MARK }), stderr: new Pipe({ highWaterMark: RUN_HIGH_WATER_MARK }) },
      scanners: { stdout: new TrailerScanner(frame, FRAME_TAG), stderr: new TrailerScanner(frame, FRAME_TAG) },
      done: { stdout: false, stderr: false },
      finished: Promise.withResolvers<SubprocessOutcome>(),
    }
    run.finished.promise.catch(() => undefined)
    this.current = run
    this.stream.write(specBytes(script, frame))
    return {
      stdout: run.out.stdout,
      stderr: run.out.stderr,
      stdin: undefined,
      exit: () => run.finished.promise,
      close: () => { if (this.current === run) this.retire() },
    }
  }

  /**
   * Close the exec's socket: the engine closes the launcher's stdin, it reads EOF and exits
   * once its current run (if any) ended. Never kills anything; idempotent.
   */
  retire(): void {
    this.stream.destroy()
    this.ended()
  }

  /** Route one chunk of the exec's `which` stream to the current run, up to its end line. */
  private route(which: Stream, chunk: Buffer): void {
    const run = this.current
    // Outside a run nothing prints (boot-scripts.ts); a launcher's own shell error is dropped.
    if (run === undefined || run.done[which]) return
    const scanner = run.scanners[which]
    const bytes = scanner.push(chunk)
    const target = run.out[which]
    // Released on drain, or when the reader destroyed the run's stream: it must not stall the next runs.
    if (bytes.length > 0 && !target.write(bytes)) holdUntilDrained(this.raw[which], target)
    if (scanner.trailer === undefined) return
    run.done[which] = true
    target.end()
    if (!run.done.stdout || !run.done.stderr) return
    this.current = undefined
    this.raw.stdout.resume()
    this.raw.stderr.resume()
    run.finished.resolve({ exitCode: scanner.trailer.status, signal: null })
    if (this.state === 'busy') {
      this.state = 'idle'
      this.onIdle?.(this)
    }
  }

  /** The exec's stream closed: end the current run's streams; its exit facts are unknowable. */
  private ended(): void {
    if (this.state === 'ended') return
    this.state = 'ended'
    this.onEnded?.(this)
    const run = this.current
    this.current = undefined
    if (run === undefined) return
    for (const which of ['stdout', 'stderr'] as const) {
      if (run.done[which]) continue
      const rest = run.scanners[which].flush()
      if (rest.length > 0) run.out[which].write(rest)
      run.out[which].end()
    }
    run.finished.reject(new TransportError(`${this.where}: the launcher exec ended while the process ran (its exit status is unknown)`))
  }
}
