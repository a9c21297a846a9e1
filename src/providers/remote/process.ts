/**
 * The world-neutral remote process: a {@link SubprocessHandle} over any non-PTY transport with
 * separate stdout and stderr (a non-TTY Docker exec, demultiplexed; an SSH exec channel), plus
 * the world's control channel for tree observation and teardown.
 *
 * The program runs under the process wrapper (process-wrapper.ts) in its own session; its pid
 * (= process group = session id) arrives in the start marker on stdout, its wait status in the
 * exit trailer on stderr. Both are stripped; every other byte reaches the caller exactly.
 * @module dsh-remote-worlds/providers/remote/process
 */
import { randomBytes } from 'node:crypto'
import { constants as osConstants } from 'node:os'
import { PassThrough, type Readable, type Writable } from 'node:stream'
import { setTimeout as delay } from 'node:timers/promises'
import type {
  SubprocessCollect,
  SubprocessCollectedOutputs,
  SubprocessHandle,
  SubprocessOutcome,
  SubprocessOutputMode,
  SubprocessSpawnSpec,
} from '@deepseek-ai/dsh-subprocess'
import { holdUntilDrained } from './backpressure.ts'
import { BoundaryScanner, startFailure } from './boundary.ts'
import { type ControlChannel, type ProcessIdentity, markTagged } from './control-channel.ts'
import { RemoteWorldError, SpawnCancelledError, SpawnFailedError, TransportError } from './errors.ts'
import { RemoteOutputCollector } from './output.ts'
import { type ExitTrailer, type RemoteSpill, TrailerScanner, buildProcessWrapper } from './process-wrapper.ts'
import { SESSION_TAG_VARIABLE } from './ownership.ts'
import { type ProcessHolding, currentProcessHolding } from './process-holding.ts'
import { type ResourceCounters, type ResourceEvent, ResourceWatch, resourceEventsBetween } from './resource-events.ts'
import { signalName } from './signals.ts'
import { sessionMembers, terminateSession } from './teardown.ts'

/**
 * The outcome our handles' `done` resolves to: the seam's exit facts, exactly as before, plus
 * `events` when the world's cgroup counted a resource-limit event (an OOM kill, a refused
 * fork) between the process's start and its exit (resource-events.ts). Absent when nothing was
 * counted or the world has no readable counters, so `{ exitCode, signal }` compares as before.
 */
export interface RemoteSubprocessOutcome extends SubprocessOutcome {
  /** The resource-limit events counted while the process ran (never empty when present). */
  events?: ResourceEvent[] | undefined
}

/** What a caller may ask of {@link RemoteProcessHandle.terminate} beyond the seam's `terminate()`. */
export interface RemoteTerminateOptions {
  /**
   * When the start has not yet reached the world (the world is still being prepared: nothing
   * was opened there, nothing ran), stop it instead of letting it finish: `done` rejects with
   * {@link SpawnCancelledError}, and no process ran. Once the start was opened (the program may
   * be running), the same as without it: the start finishes and the signal is delivered.
   * Default false.
   */
  cancelUnstarted?: boolean | undefined
}

/** The byte streams of one remote non-PTY process, as a world provides them. */
export interface ProcessTransport {
  /** The process's stdout bytes; ends when the remote side closed it (or the transport broke). */
  readonly stdout: Readable
  /** The process's stderr bytes, separately. */
  readonly stderr: Readable
  /** The process's stdin, when it was opened with `stdin: true`; `end()` closes it remotely. */
  readonly stdin: Writable | undefined
  /**
   * The wrapper process's own exit facts, after both streams ended; used when no exit trailer
   * arrives (exec mode, or a killed wrapper). Rejects with {@link TransportError} when the
   * world broke.
   */
  exit(): Promise<SubprocessOutcome>
  /**
   * Resolves with the process's exit facts as soon as the transport reports them, before its
   * streams end (SSH's exit-status / exit-signal); absent when the transport cannot.
   */
  readonly exited?: Promise<SubprocessOutcome> | undefined
  /** Release local resources (socket, channel). Never kills anything remotely; never throws. */
  close(): void
}

/** What a world prepares for one spawn (asynchronously, after `spawn()` returned). */
export interface RemoteProcessWorld {
  /** The complete environment of the program (world ambient env, scrubbed, then spec.env). */
  env: Readonly<Record<string, string>>
  /** Control channel running as the same uid as the process. */
  control: ControlChannel
  /** The world's private state directory (0700) for spills and status files, absolute. */
  stateDir: string
  /** The argv to run instead of the spec's (a host program mapped to the world's; world-tools/ripgrep.ts). */
  argv?: readonly string[] | undefined
}

/** What a world supplies to start one process. */
export interface RemoteProcessStart {
  /** The seam's spec. */
  spec: SubprocessSpawnSpec
  /** World description for messages, e.g. `docker container abc123 as agent`. */
  where: string
  /** The session's tag (ownership.ts), added to the environment as DSH_REMOTE_SESSION. */
  tag: string
  /** Resolve the environment, control channel and state directory. */
  prepare(): Promise<RemoteProcessWorld>
  /** Start a non-PTY process running `sh -c SCRIPT`, with stdin attached or not. */
  open(script: string, options: { stdin: boolean }): Promise<ProcessTransport>
  /** True when the world can no longer run anything (a stopped container, a lost host). */
  worldEnded(): Promise<boolean>
  /**
   * The transport reports the process's exact exit facts (code, or signal name) itself, as an
   * SSH channel does: the wrapper may then become the program (exec mode: no setsid, no
   * waiting shell) when it already leads its own session. Docker's ExecInspect reports a
   * signal as 128+N, so the Docker world leaves this off.
   */
  exactExit?: boolean | undefined
  /** A fresh control channel when `control` died with its transport (SSH); optional. */
  recoverControl?: (() => Promise<ControlChannel>) | undefined
}

/** The seam's collect disposition (anything that is not `pipe` or `inherit`). */
function isCollect(mode: SubprocessOutputMode): mode is SubprocessCollect {
  return mode !== 'pipe' && mode !== 'inherit'
}

const TREE_POLL_MS = 20
const TREE_POLL_MAX_MS = 250

/**
 * Map the exit trailer to exit facts. STATUS <= 128 is an exit code. Above, a report from the
 * shell means death by signal STATUS-128; without one (SIGINT and SIGPIPE are never reported,
 * nor is anything by shells that do not report), a status whose signal the handle delivered
 * itself is that signal, and any other is the exit code the shell saw.
 */
export function outcomeOfTrailer(trailer: ExitTrailer, delivered: ReadonlySet<number>): SubprocessOutcome {
  if (trailer.status <= 128) return { exitCode: trailer.status, signal: null }
  const signal = signalName(trailer.status - 128)
  if (signal !== undefined && (trailer.report.trim().length > 0 || delivered.has(trailer.status - 128))) return { exitCode: null, signal }
  return { exitCode: trailer.status, signal: null }
}

/** What the start marker published. */
interface Published {
  /** The program's pid (its process group and session id). */
  pid: number
  /** Its start time (0: unknown). */
  starttime: number
  /** The wrapper's pid and start time (0: none, in exec mode). */
  wrapper: number
  wrapperStart: number
  /** Exec mode: the wrapper became the program; no exit trailer follows. */
  exec: boolean
}

/** One stream of a handle: where its bytes go. */
interface OutputSink {
  /** The caller's pipe, for `pipe`. */
  pipe: PassThrough | undefined
  /** The harness's own stream, for `inherit`. */
  inherit: NodeJS.WriteStream | undefined
  /** The collector, for collect mode. */
  collector: RemoteOutputCollector | undefined
}

/**
 * A live remote process. `spawn()` returns it at once; the remote start runs behind it.
 * `pid` is -1 until the program published its pid (and stays -1 when the start failed).
 *
 * A `terminate()`, the spec's signal aborting, or the runtime's disposal that arrives before the
 * program started in the world lets the start finish, then delivers the teardown ladder to the
 * program as it would to any running one: `done` is the program's true outcome (SIGTERM for one
 * that does not handle it), as the local provider reports a process the same call ended, whose
 * program has always started when `spawn()` returns. Letting the start finish costs one start
 * (a pooled Docker launcher run ~9 ms, an SSH exec channel ~4 ms) and reports only what
 * happened; reporting a signal for a start that was stopped instead would report a signal never
 * sent. A start that could never succeed (a missing cwd or program) rejects `done` as a failed
 * spawn, terminated or not. Only a caller that asks for it (`terminate({ cancelUnstarted: true })`)
 * has a start that had not yet reached the world stopped, and `done` rejected with
 * {@link SpawnCancelledError}.
 */
export class RemoteProcessHandle implements SubprocessHandle {
  readonly stdin: Writable | undefined
  readonly stdout: Readable | undefined
  readonly stderr: Readable | undefined
  readonly collected: SubprocessCollectedOutputs
  readonly done: Promise<RemoteSubprocessOutcome>
  /** The program's identity once published. */
  identity: ProcessIdentity | undefined

  private readonly start: RemoteProcessStart
  private readonly spec: SubprocessSpawnSpec
  private readonly out: OutputSink
  private readonly err: OutputSink
  private readonly stdinPipe: PassThrough | undefined
  private control: ControlChannel | undefined
  private transport: ProcessTransport | undefined
  private remotePid = -1
  /** The wrapper's own pid and identity (its helpers: tee, head). */
  private wrapper: ProcessIdentity | undefined
  private readonly startedGate = Promise.withResolvers<ProcessIdentity | undefined>()
  private readonly tracked = new Map<string, ProcessIdentity>()
  private readonly delivered = new Set<number>()
  /** The latest backpressure hold's release, per transport stream (see deliver). */
  private readonly holds = new Map<Readable, () => void>()
  private settled = false
  private terminationRequested = false
  /** A caller asked to stop a start that has not reached the world (RemoteTerminateOptions). */
  private cancelUnstarted = false
  private termination: Promise<void> | undefined
  private terminationFailure: Error | undefined
  private treeGone = false
  private spillCleanup: Promise<void> | undefined
  /** Why a start cancelled on request ({@link RemoteTerminateOptions}) was cancelled, when the spec's signal aborted. */
  private cancelReason: string | undefined
  private readonly onAbort = (): void => {
    this.cancelReason ??= `aborted before spawn: ${String(this.spec.signal?.reason ?? 'aborted')}`
    this.terminate()
  }
  /** The world's resource counters, and their reading taken before the start. */
  private resourceWatch: ResourceWatch | undefined
  private resourcesBefore: Promise<ResourceCounters | undefined> | undefined
  /** The reading taken as soon as the exit was known (the trailer), while the streams drain. */
  private resourcesAfter: Promise<ResourceCounters | undefined> | undefined

  /**
   * The holder that runs this process instead of the world's own open, when the spawn was made
   * inside a `holdProcesses` call with stdin ignored (process-holding.ts): a background job that
   * outlives its client.
   */
  readonly holding: ProcessHolding | undefined

  /** @internal Use the runtime's `spawn`. */
  constructor(start: RemoteProcessStart) {
    this.start = start
    this.spec = start.spec
    const { stdio } = this.spec
    this.holding = stdio.stdin === 'ignore' ? currentProcessHolding() : undefined
    this.out = this.sink(stdio.stdout, process.stdout)
    this.err = this.sink(stdio.stderr, process.stderr)
    this.stdout = this.out.pipe
    this.stderr = this.err.pipe
    this.collected = {
      ...(this.out.collector !== undefined ? { stdout: this.out.collector } : {}),
      ...(this.err.collector !== undefined ? { stderr: this.err.collector } : {}),
    }
    this.stdinPipe = stdio.stdin === 'pipe' ? new PassThrough() : undefined
    this.stdin = this.stdinPipe
    this.startedGate.promise.catch(() => undefined)
    this.spec.signal?.addEventListener('abort', this.onAbort, { once: true })
    this.done = this.run().then(outcome => this.withResourceEvents(outcome))
    this.done.catch(() => undefined)
  }

  /** Remote pid of the program (its process group and session id); -1 before publication or after a failed start. */
  get pid(): number {
    return this.remotePid
  }

  /** The wrapper's status file (removed at settlement). */
  private statusFile: string | undefined
  /** The wrapper became the program (no status file, no trailer). */
  private execMode = false
  /** Where this process's stream spills live. */
  private spills: { stdout?: RemoteSpill | undefined; stderr?: RemoteSpill | undefined } = {}

  private sink(mode: SubprocessOutputMode, inherit: NodeJS.WriteStream): OutputSink {
    return {
      pipe: mode === 'pipe' ? new PassThrough({ highWaterMark: 1 << 20 }) : undefined,
      inherit: mode === 'inherit' ? inherit : undefined,
      // The spill path is known once the world is prepared; the collector learns it then.
      collector: isCollect(mode) ? new RemoteOutputCollector(mode.maxBytes, mode.spill?.maxBytes) : undefined,
    }
  }

  private async run(): Promise<SubprocessOutcome> {
    let world: RemoteProcessWorld
    try {
      world = await this.start.prepare()
    } catch (error) {
      this.startedGate.resolve(undefined)
      this.finishStreams()
      this.cleanupAbort()
      throw error
    }
    this.control = world.control
    // Located once per control channel (a round trip on the first spawn only).
    this.resourceWatch = await ResourceWatch.of(world.control)
    const { stdio } = this.spec
    const stamp = randomBytes(8).toString('hex')
    const spillOf = (collector: RemoteOutputCollector | undefined, name: string): RemoteSpill | undefined => {
      if (collector?.spillMaxBytes === undefined) return undefined
      const spill = { path: `${world.stateDir}/${stamp}.${name}`, maxBytes: collector.spillMaxBytes }
      collector.attachSpill(spill.path)
      return spill
    }
    this.spills = { stdout: spillOf(this.out.collector, 'stdout'), stderr: spillOf(this.err.collector, 'stderr') }
    this.statusFile = this.holding?.statusFile(world.control.info.uid) ?? `${world.stateDir}/.${stamp}.status`
    if (this.terminationRequested && this.cancelUnstarted) {
      // Cancelled on request before anything was opened in the world: no process ran and none
      // was killed, so the outcome is a failed spawn (the local provider throws `aborted before
      // spawn` for an aborted signal), never a SIGTERM that was not sent. Without the request the
      // start goes on, and terminateOnce signals the program once it published its pid.
      this.startedGate.resolve(undefined)
      this.treeGone = true
      this.finishStreams()
      this.cleanupAbort()
      throw new SpawnCancelledError(this.cancelReason ?? 'terminated before the process started in the world')
    }
    let script: string
    let nonce: string
    try {
      ;({ script, nonce } = buildProcessWrapper({
        argv: world.argv ?? this.spec.argv,
        cwd: this.spec.cwd,
        // A held process carries no tag of this client: no reaper of a dead client ends it.
        env: this.holding !== undefined ? world.env : { ...world.env, [SESSION_TAG_VARIABLE]: this.start.tag },
        stdin: stdio.stdin === 'ignore' ? 'ignore' : 'attached',
        stdoutSpill: this.spills.stdout,
        stderrSpill: this.spills.stderr,
        statusFile: this.statusFile,
        // A holder's exit facts are the wrapper's: it waits for the program and says its status.
        execWhenLeader: this.start.exactExit === true && this.holding === undefined,
      }))
    } catch (error) {
      this.startedGate.resolve(undefined)
      this.finishStreams()
      this.cleanupAbort()
      throw error
    }
    let transport: ProcessTransport
    try {
      // Queued on the control channel now, so the counters are read before the program starts;
      // not awaited, so the start does not wait for it.
      this.resourcesBefore = this.resourceWatch.snapshot()
      transport = this.holding !== undefined ? await this.holding.open(script, { nonce }) : await this.start.open(script, { stdin: stdio.stdin !== 'ignore' })
    } catch (error) {
      this.startedGate.resolve(undefined)
      this.finishStreams()
      this.cleanupAbort()
      throw error
    }
    this.transport = transport
    this.feedStdin(transport)
    return this.observe(transport, nonce)
  }

  private feedStdin(transport: ProcessTransport): void {
    const remote = transport.stdin
    if (remote === undefined) return
    remote.on('error', () => undefined)
    const mode = this.spec.stdio.stdin
    if (typeof mode === 'object') {
      remote.end(Buffer.from(mode.data, 'utf8'))
    } else if (this.stdinPipe !== undefined) {
      this.stdinPipe.on('error', () => undefined)
      this.stdinPipe.pipe(remote)
    }
  }

  /** Follow the transport: marker, output, trailer, end. */
  private async observe(transport: ProcessTransport, nonce: string): Promise<SubprocessOutcome> {
    const scanner = new BoundaryScanner(nonce, undefined, { process: true })
    const trailerScanner = new TrailerScanner(nonce)
    const where = this.start.where
    const marker = Promise.withResolvers<Published | undefined>()
    const trailer = Promise.withResolvers<ExitTrailer>()
    let stdoutEnded = false
    let stderrEnded = false
    const ended = Promise.withResolvers<void>()
    const checkEnded = (): void => { if (stdoutEnded && stderrEnded) ended.resolve() }
    let started = false
    let preamble = ''

    transport.stdout.on('data', (chunk: Buffer) => {
      if (started) { this.deliver(this.out, chunk, transport.stdout); return }
      let event
      try {
        event = scanner.push(chunk)
      } catch {
        marker.reject(new SpawnFailedError(`process in ${where} printed no start marker: ${JSON.stringify(scanner.seen.slice(0, 500))}`))
        return
      }
      if (event.kind === 'started') {
        started = true
        marker.resolve({ pid: event.pid, starttime: event.extra?.[0] ?? 0, wrapper: event.extra?.[1] ?? 0, wrapperStart: event.extra?.[2] ?? 0, exec: event.exec === true })
        if (event.rest.length > 0) this.deliver(this.out, event.rest, transport.stdout)
      } else if (event.kind === 'failed') {
        preamble = event.preamble
        marker.reject(startFailure(event, this.spec.argv[0]!, this.spec.cwd, where))
      }
    })
    transport.stderr.on('data', (chunk: Buffer) => {
      const bytes = trailerScanner.push(chunk)
      if (trailerScanner.trailer !== undefined) trailer.resolve(trailerScanner.trailer)
      if (bytes.length > 0) this.deliver(this.err, bytes, transport.stderr)
    })
    const onEnd = (which: 'stdout' | 'stderr') => (): void => {
      if (which === 'stdout') stdoutEnded = true
      else {
        stderrEnded = true
        const rest = trailerScanner.flush()
        if (rest.length > 0) this.deliver(this.err, rest, transport.stderr)
      }
      checkEnded()
    }
    for (const [stream, which] of [[transport.stdout, 'stdout'], [transport.stderr, 'stderr']] as const) {
      stream.once('end', onEnd(which))
      stream.once('close', onEnd(which))
      stream.once('error', onEnd(which))
    }
    marker.promise.catch(() => undefined)
    ended.promise.then(() => marker.resolve(undefined), () => undefined)

    // 1. The start marker (or a wrapper failure, or the end of both streams without it).
    let published: Published | undefined
    try {
      published = await marker.promise
    } catch (error) {
      this.startedGate.resolve(undefined)
      await ended.promise
      this.finishStreams()
      transport.close()
      this.cleanupAbort()
      throw error
    }
    if (published === undefined) {
      this.startedGate.resolve(undefined)
      this.finishStreams()
      transport.close()
      this.cleanupAbort()
      if (await this.start.worldEnded().catch(() => false)) throw new TransportError(`${where}: the world ended before the process started`)
      const facts = await transport.exit().catch((error: unknown) => { throw error })
      throw new SpawnFailedError(`process in ${where} ended before its start marker (wrapper exit ${facts.exitCode ?? facts.signal})${preamble.length > 0 ? `: ${preamble.slice(0, 500)}` : `: ${JSON.stringify(scanner.seen.slice(0, 500))}`}`)
    }
    this.remotePid = published.pid
    let starttime = published.starttime
    if (starttime === 0) starttime = (await this.control?.stat(published.pid).catch(() => undefined))?.starttime ?? 0
    this.identity = { pid: published.pid, starttime }
    this.remember([this.identity])
    if (published.wrapper > 0 && published.wrapperStart > 0) this.wrapper = { pid: published.wrapper, starttime: published.wrapperStart }
    this.startedGate.resolve(this.identity)

    // 2x. Exec mode: the wrapper became the program; the transport reports its exit facts.
    this.execMode = published.exec
    if (published.exec) return this.observeExec(transport, ended.promise)

    // 2. The exit trailer, then the drain: both streams end, or graceMs passes.
    const first = await Promise.race([trailer.promise.then(value => ({ kind: 'trailer' as const, value })), ended.promise.then(() => ({ kind: 'ended' as const }))])
    // The program has exited: read the counters now, beside the drain, not after it.
    if (first.kind === 'trailer') this.readResourcesAfter()
    let found: ExitTrailer | undefined = first.kind === 'trailer' ? first.value : trailerScanner.trailer
    if (found !== undefined && first.kind === 'trailer') {
      let timer: NodeJS.Timeout | undefined
      const drained = await Promise.race([
        ended.promise.then(() => true),
        new Promise<boolean>(resolve => { timer = setTimeout(() => resolve(false), this.spec.graceMs) }),
      ])
      clearTimeout(timer)
      if (!drained) {
        // A descendant still holds a stream: the outcome does not wait for it (as locally).
        this.out.collector?.invalidateSpill()
        this.err.collector?.invalidateSpill()
      }
    }
    found ??= trailerScanner.trailer
    if (found !== undefined) return this.settle(outcomeOfTrailer(found, this.delivered))

    // 3. Both streams ended without a trailer: the world broke, or the wrapper was killed.
    if (await this.start.worldEnded().catch(() => false)) {
      this.out.collector?.invalidateSpill()
      this.err.collector?.invalidateSpill()
      this.settleBroken(transport)
      throw new TransportError(`${where}: the world ended while the process was running`)
    }
    let facts: SubprocessOutcome
    try {
      facts = await transport.exit()
    } catch (error) {
      this.abandon(transport)
      throw error
    }
    this.out.collector?.invalidateSpill()
    this.err.collector?.invalidateSpill()
    return this.settle(facts)
  }

  /**
   * Exec mode: settle with the transport's exit facts once the process exited, after the
   * streams end or graceMs (a descendant may hold them), like the local provider's drain.
   */
  private async observeExec(transport: ProcessTransport, ended: Promise<void>): Promise<SubprocessOutcome> {
    const exited = transport.exited
    const first = await Promise.race([
      ended.then(() => undefined),
      ...(exited !== undefined ? [exited.then(outcome => outcome, () => undefined)] : []),
    ])
    if (first !== undefined) {
      let timer: NodeJS.Timeout | undefined
      await Promise.race([ended, new Promise<void>(resolve => { timer = setTimeout(resolve, this.spec.graceMs) })])
      clearTimeout(timer)
      return this.settle(first)
    }
    let facts: SubprocessOutcome
    try {
      facts = await transport.exit()
    } catch (error) {
      this.abandon(transport)
      throw error
    }
    return this.settle(facts)
  }

  /**
   * The transport broke but the world did not (a lost SSH connection): settle the streams and
   * stop the tree, which may run on with nobody reading it (the ladder reconnects through
   * recoverControl).
   */
  private abandon(transport: ProcessTransport): void {
    this.settleBroken(transport)
    this.terminate()
  }

  /** Settle without exit facts: end the streams, release the transport and the abort listener. */
  private settleBroken(transport: ProcessTransport): void {
    this.settled = true
    this.finishStreams()
    transport.close()
    this.cleanupAbort()
  }

  /**
   * Hand bytes to a stream's sink, holding the source while a pipe consumer is full. A pipe the
   * caller destroyed (unread) releases the source and discards from then on: the transport must
   * still reach its end, or the outcome would wait for a drain that never comes.
   */
  private deliver(sink: OutputSink, chunk: Buffer, source: Readable): void {
    if (this.settled && sink.pipe === undefined) return
    sink.collector?.push(chunk)
    const target = sink.pipe ?? sink.inherit
    if (target === undefined || target.destroyed) return
    // Once terminating, the caller's pace no longer holds the transport: the rest (bounded: the
    // program is being ended) is buffered for it. Held, a transport whose exit facts follow the
    // output on a shared stream (a Docker launcher's multiplexed exec) could not report the end
    // of a program whose pipe nobody reads, and `done` would wait for it.
    if (!target.write(chunk) && !this.terminationRequested) this.holds.set(source, holdUntilDrained(source, target))
  }

  /**
   * The outcome with the resource-limit events counted since the start: one `counters` request
   * after the exit (the counters are raised before the kernel's SIGKILL is sent, so an OOM kill
   * is counted by the time the exit is seen). Without a reading from the start, or when the
   * reading fails, the outcome as it is.
   */
  private async withResourceEvents(outcome: SubprocessOutcome): Promise<RemoteSubprocessOutcome> {
    if (this.resourceWatch === undefined || this.resourcesBefore === undefined) return outcome
    const before = await this.resourcesBefore
    if (before === undefined) return outcome
    this.readResourcesAfter()
    const after = await this.resourcesAfter!.catch(() => undefined)
    const events = after === undefined ? [] : resourceEventsBetween(before, after)
    return events.length > 0 ? { ...outcome, events } : outcome
  }

  /** Queue the after-exit counter reading once (see {@link withResourceEvents}). */
  private readResourcesAfter(): void {
    if (this.resourcesAfter !== undefined || this.resourceWatch === undefined || this.resourcesBefore === undefined) return
    this.resourcesAfter = this.resourceWatch.snapshot()
    this.resourcesAfter.catch(() => undefined)
  }

  private settle(outcome: SubprocessOutcome): SubprocessOutcome {
    this.settled = true
    this.cleanupAbort()
    // Collected streams stop at settlement; a pipe the caller reads ends with the transport.
    if (this.transport === undefined || (this.transport.stdout.readableEnded && this.transport.stderr.readableEnded)) this.finishStreams()
    else {
      const transport = this.transport
      let open = 2
      const one = (): void => { if (--open === 0) this.finishStreams() }
      for (const stream of [transport.stdout, transport.stderr]) {
        if (stream.readableEnded || stream.destroyed) one()
        else { stream.once('end', one); stream.once('close', () => { if (open > 0) { open = 1; one() } }) }
      }
    }
    this.spillCleanup = this.removeUselessSpills()
    return outcome
  }

  private finished = false
  private finishStreams(): void {
    if (this.finished) return
    this.finished = true
    this.out.pipe?.end()
    this.err.pipe?.end()
  }

  private cleanupAbort(): void {
    this.spec.signal?.removeEventListener('abort', this.onAbort)
  }

  /** Remove spill files that hold nothing the caller can use (no overflow, over the cap, cut). */
  private async removeUselessSpills(): Promise<void> {
    // The wrapper's status file goes too (the wrapper leaves it: an `rm` there would delay the
    // end of the transport).
    // Exec mode never writes it (the wrapper became the program).
    const paths: string[] = this.statusFile === undefined || this.execMode ? [] : [this.statusFile]
    for (const [spill, collector] of [[this.spills.stdout, this.out.collector], [this.spills.stderr, this.err.collector]] as const) {
      if (spill !== undefined && collector !== undefined && collector.spillDisposable) paths.push(spill.path)
    }
    if (paths.length === 0 || this.control === undefined) return
    await this.control.removePaths(paths).catch(() => undefined)
  }

  /** Settles when unneeded spill files were removed (the runtime awaits it at disposal). */
  get spillsSettled(): Promise<void> {
    return this.spillCleanup ?? Promise.resolve()
  }

  private remember(members: readonly ProcessIdentity[]): void {
    for (const member of members) this.tracked.set(`${member.pid}:${member.starttime}`, { pid: member.pid, starttime: member.starttime })
  }

  /**
   * Let a held process go (process-holding.ts): close this client's transport and leave the
   * process to its holder in the world, where it runs on. Nothing is signalled. For the
   * runtime's disposal: a held job outlives its client by design. No-op for a process no
   * holder holds.
   */
  release(): void {
    if (this.holding === undefined) return
    this.released = true
    this.transport?.close()
  }

  /** {@link release} was called: the process is its holder's now. */
  released = false

  /** Settles once the start published the program (or failed): for a held start the runtime's disposal lets finish. */
  whenStarted(): Promise<unknown> {
    return this.startedGate.promise
  }

  /**
   * Begin the SIGTERM -> graceMs -> SIGKILL escalation on the process tree (the program's
   * session and every descendant, through the control channel). Idempotent; a no-op once the
   * tree is gone, and for a released held process ({@link release}); also triggered by the
   * spec's abort signal and the runtime's disposal. Before
   * the program started in the world, the start finishes first and the escalation follows it
   * (see the class comment), unless `options.cancelUnstarted` stops a start not yet opened. A
   * failure surfaces from {@link waitForExit}.
   */
  terminate(options?: RemoteTerminateOptions): void {
    // A released process is its holder's (release): its transport closing is no reason to end it.
    if (this.released) return
    // Noted even when a termination already runs: its start may not have been opened yet.
    if (options?.cancelUnstarted === true) this.cancelUnstarted = true
    if (this.treeGone || this.termination !== undefined) return
    this.terminationRequested = true
    for (const release of this.holds.values()) release()
    this.holds.clear()
    this.terminationFailure = undefined
    const attempt = this.terminateOnce()
    this.termination = attempt
    attempt.then(() => undefined, (error: unknown) => {
      this.terminationFailure = error instanceof Error ? error : new Error(String(error))
      this.termination = undefined
    })
  }

  private async terminateOnce(): Promise<void> {
    const identity = await this.startedGate.promise
    if (identity === undefined) {
      // Nothing was published: the start failed (it left nothing behind) or was cancelled on
      // request before it was opened (nothing ran).
      this.transport?.close()
      this.treeGone = true
      return
    }
    const graceMs = this.spec.graceMs
    const ladder = async (control: ControlChannel): Promise<void> => {
      this.delivered.add(osConstants.signals.SIGTERM)
      const signalled = await terminateSession(control, identity, { graceMs, tracked: [...this.tracked.values()], tag: this.start.tag })
      this.remember(signalled)
      // terminateSession escalates to KILL when TERM did not end everything; a status of 137
      // after our ladder is that KILL.
      this.delivered.add(osConstants.signals.SIGKILL)
      await this.stopHelpers(control)
    }
    try {
      await ladder(this.control!)
    } catch (error) {
      if (!(error instanceof RemoteWorldError && error.code === 'CONTROL_FAILED')) throw error
      let failure: unknown = error
      if (this.start.recoverControl !== undefined) {
        try {
          this.control = await this.start.recoverControl()
          await ladder(this.control)
          failure = undefined
        } catch (recoveryError) {
          failure = recoveryError
        }
      }
      if (failure !== undefined && !await this.start.worldEnded().catch(() => false)) throw failure
    }
    this.treeGone = true
    // The program is gone; give the transport a bounded moment to deliver the trailer (the
    // bound's timer cancelled once it came, so it holds no process open for the grace).
    const bound = new AbortController()
    await Promise.race([this.done.then(() => undefined, () => undefined), delay(graceMs, undefined, { signal: bound.signal }).catch(() => undefined)])
    bound.abort()
    if (!this.settled) this.transport?.close()
  }

  /**
   * The wrapper and its helpers (`tee`, `head`) end by themselves once the program's streams
   * close; wait for that (bounded by graceMs), then stop whatever lingers (a `tee` blocked on a
   * transport nobody reads).
   */
  private async stopHelpers(control: ControlChannel): Promise<void> {
    const wrapper = this.wrapper
    if (wrapper === undefined) return
    const deadline = Date.now() + this.spec.graceMs
    while (sessionMembers(await control.processTable(), wrapper).length > 0) {
      if (Date.now() >= deadline) {
        await terminateSession(control, wrapper, { graceMs: this.spec.graceMs })
        return
      }
      await delay(TREE_POLL_MS)
    }
  }

  /**
   * Wait until the whole remote tree has exited: the program's session, its descendants (also
   * those that left the session while their parent lived), and the wrapper's helpers.
   * @param signal - optional bound for the wait.
   * @returns true when the tree exited, false when `signal` aborted first.
   * @throws the termination failure (e.g. CleanupFailedError) when a terminate attempt failed.
   */
  async waitForExit(signal?: AbortSignal): Promise<boolean> {
    if (this.treeGone) return true
    if (signal?.aborted === true) return false
    const aborted = new Promise<false>(resolve => signal?.addEventListener('abort', () => resolve(false), { once: true }))
    const identity = await Promise.race([this.startedGate.promise, aborted])
    if (identity === false) return false
    if (identity === undefined) {
      // No publication: the start failed (its transport ended) or was cancelled before it ran.
      const finished = await Promise.race([this.done.then(() => true, () => true), aborted])
      if (!finished) return false
      this.treeGone = true
      return true
    }
    // Poll fast while a termination runs (a teardown ladder waits on this) or just after the
    // start; back off for a tree that lives on (a daemon the program left), so long-lived
    // waits do not crowd the control channel the terminals' probes share.
    let interval = TREE_POLL_MS
    for (;;) {
      if (this.terminationFailure !== undefined) throw this.terminationFailure
      if (this.treeGone) return true
      let alive: boolean
      try {
        alive = await this.treeAlive(identity)
      } catch (error) {
        if (!(error instanceof RemoteWorldError && error.code === 'CONTROL_FAILED')) throw error
        if (await this.start.worldEnded().catch(() => false)) { this.treeGone = true; return true }
        if (this.start.recoverControl === undefined) throw error
        this.control = await this.start.recoverControl()
        continue
      }
      if (!alive) {
        this.treeGone = true
        if (this.settled && this.transport !== undefined && !this.finished) this.transport.close()
        await this.spillsSettled
        return true
      }
      const tick = await Promise.race([delay(interval).then(() => true), aborted])
      if (!tick) return false
      interval = this.termination !== undefined ? TREE_POLL_MS : Math.min(TREE_POLL_MAX_MS, Math.ceil(interval * 1.5))
    }
  }

  /**
   * Whether anything of the tree lives: the program's session and descendants, the processes
   * carrying the session's tag (an escapee whose parent died), and the wrapper's helpers. Read
   * from the control channel's shared snapshot (one `ps` and one tag scan per round for every
   * process waiting at once: one request each saturated the channel under a spawn load).
   */
  private async treeAlive(identity: ProcessIdentity): Promise<boolean> {
    const { table, tagged } = await this.control!.sharedSnapshot()
    const members = sessionMembers(markTagged(table, tagged, this.start.tag), identity, [...this.tracked.values()])
    this.remember(members)
    return members.length > 0 || (this.wrapper !== undefined && sessionMembers(table, this.wrapper).length > 0)
  }
}
