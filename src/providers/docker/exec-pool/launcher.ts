/**
 * A launcher: one non-TTY exec that runs ordinary processes one after another (the last of
 * them may take its stdin), each as a {@link ProcessTransport} indistinguishable from a fresh
 * exec's (boot-scripts.ts says what runs in the world and why the streams of one run can never
 * carry another run's bytes).
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
import type { ExecOutcome, StartExec, StartedExec } from './started-exec.ts'

/** Buffer of each run's stdout and stderr before the exec's socket pauses (bytes), as a fresh exec's. */
const RUN_HIGH_WATER_MARK = 1 << 20

type Stream = 'stdout' | 'stderr'

/** One process run through the launcher. */
interface Run {
  /** The launcher's last run: it took the exec's stdin, has no end line, and ends with the exec. */
  readonly last: boolean
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
  private readonly outcome: ExecOutcome
  private readonly raw: Record<Stream, PassThrough>
  private current: Run | undefined
  private state: 'starting' | 'idle' | 'busy' | 'ended' = 'starting'

  private constructor(started: StartedExec, where: string, outcome: ExecOutcome) {
    this.exec = started.exec
    this.stream = started.stream
    this.where = where
    this.outcome = outcome
    // Split at once: the socket buffers until read, and the demux honours backpressure.
    const { stdout, stderr } = demuxDockerStream(started.stream, RUN_HIGH_WATER_MARK)
    this.raw = { stdout, stderr }
    started.stream.on('error', () => undefined)
    stderr.on('data', (chunk: Buffer) => this.route('stderr', chunk))
    stdout.once('end', () => this.rawEnded('stdout'))
    stderr.once('end', () => this.rawEnded('stderr'))
    started.stream.once('close', () => this.ended())
  }

  /**
   * Start a launcher exec as `user` and wait until it can take a spec.
   * @param env - extra exec environment entries (the pool's session tag).
   * @param outcome - the exit facts of a finished exec (ExecInspect), for a run that takes stdin.
   * @throws PreStartRefusedError when the world lacks `cat`, or the exec ended or stayed silent
   *   (ready.ts); the world's typed errors when the exec cannot start.
   */
  static async start(startExec: StartExec, user: string | undefined, env: readonly string[], where: string, outcome: ExecOutcome): Promise<ProcessLauncher> {
    const nonce = randomBytes(16).toString('hex')
    const started = await startExec(['/bin/sh', '-c', LAUNCHER_SCRIPT, 'dsh-launcher', nonce], { tty: false, user, stdin: true, env })
    const launcher = new ProcessLauncher(started, where, outcome)
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
   * Hand `script` to the launcher: a process wrapper for stdin `ignore` (its stdin is
   * /dev/null), or, with `options.stdin`, any script, as the launcher's last run: its stdin is
   * the exec's, `end()` on it half-closes the socket (EOF in the world, as a fresh exec's), and
   * its exit facts are the exec's (ExecInspect) once both streams ended.
   * @returns the run's transport. `close()` before both streams ended retires the launcher (a
   *   run whose streams a descendant still holds never frees it).
   * @throws Error when the launcher is not idle (a pool bug, never a world's failure).
   */
  run(script: string, options: { stdin?: boolean } = {}): ProcessTransport {
    if (this.state !== 'idle') throw new Error(`launcher in ${this.where} is ${this.state}, not idle`)
    this.state = 'busy'
    const last = options.stdin === true
    // The `i` tells the launcher to hand over its stdin and exit after the run (boot-scripts.ts).
    const frame = `${last ? 'i' : ''}${randomBytes(16).toString('hex')}`
    const run: Run = {
      last,
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
      stdin: last ? this.stream : undefined,
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
    const bytes = run.last ? chunk : scanner.push(chunk)
    const target = run.out[which]
    // Released on drain, or when the reader destroyed the run's stream: it must not stall the next runs.
    if (bytes.length > 0 && !target.write(bytes)) holdUntilDrained(this.raw[which], target)
    if (run.last || scanner.trailer === undefined) return
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

  /**
   * One of the exec's demultiplexed streams ended (every byte of it routed). The last run's
   * stream ends with it; once both did, its exit facts are the exec's.
   */
  private rawEnded(which: Stream): void {
    const run = this.current
    if (run?.last === true && !run.done[which]) {
      run.done[which] = true
      run.out[which].end()
      if (run.done.stdout && run.done.stderr) {
        this.current = undefined
        this.outcome(this.exec).then(run.finished.resolve, run.finished.reject)
      }
    }
    this.ended()
  }

  /**
   * The exec's stream closed: end the current run's streams; its exit facts are unknowable,
   * except for the last run's, which its streams' own ends settle ({@link rawEnded}).
   */
  private ended(): void {
    if (this.state === 'ended') return
    this.state = 'ended'
    this.onEnded?.(this)
    const run = this.current
    if (run?.last === true) return
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
