/**
 * `ctx.jobs` whose background jobs live in the remote world (issue 35): the job registry
 * contract of `@deepseek-ai/dsh-jobs` 0.1.0-rc.8, every rule of it as the upstream process-local
 * registry keeps it (this class is `@deepseek-ai/dsh-jobs-local`'s, extended), plus durability
 * where the world holds what outlives its client (the runtime's persistence `'client'`):
 *
 * - A producer's start runs inside `holdProcesses` (providers/remote/process-holding.ts): the
 *   program it spawns (DSH's `bash` tool with run_in_background, through the shell executor) is
 *   started by dsh-job (world/dsh-job/) under a holder that belongs to no client, with its
 *   output in two bounded rings in the world and no session tag of this client, so it survives
 *   this client's death and its disposal, and no reaper of a dead client takes it. The
 *   producer's own handle reads the output live, as from any process.
 * - Its record (job-records.ts: id, kind, label, owner session, the stream offsets the model has
 *   read up to) is kept beside it in the world. A later client of the same DSH session finds it
 *   again: the first time an agent of that session asks this registry anything, its jobs are
 *   registered with their ids, states and labels, their output read on from where the last
 *   reader stopped (job-output.ts: nothing twice, and what the ring dropped is said), their
 *   end reported with the true exit status or signal, even when it came while no client was
 *   attached. `kill` ends the job's whole process group in the world.
 * - Disposal (this client ending, or the owning agent) lets held jobs go instead of cancelling
 *   them: they run on in the world, their records stay, and no completion notice is sent for
 *   them. A job nobody reads ends at the holder's TTL (the persistence's `ttlMs`, 24 h by
 *   default, as held shells). With persistence `'off'` or `'connection'`, or without a remote
 *   world, a job is the upstream registry's: it ends with its client.
 *
 * Ids: this registry issues `<kind>-N` above every id its world's records hold, so a new job
 * never takes the id of one a restarted client finds again; the upstream registry's own ids are
 * mapped to these and never shown.
 * @module dsh-remote-worlds/jobs/registry
 */
import { randomBytes } from 'node:crypto'
import type { Context } from '@deepseek-ai/cordis'
import type { Agent } from '@deepseek-ai/dsh-agent'
import { JobId, type JobDoneListener, type JobHooks, type JobOutcome, type JobRead, type JobSnapshot, type JobStart } from '@deepseek-ai/dsh-jobs'
import LocalJobRegistry from '@deepseek-ai/dsh-jobs-local'
import type { SubprocessOutcome } from '@deepseek-ai/dsh-subprocess'
import { type ProcessHolding, holdProcesses } from '../providers/remote/process-holding.ts'
import { type WorldOwner, worldOwnerOf } from '../providers/remote/world-owner.ts'
import { endHeldJob, type JobCursor, jobsDirectory, type JobTail, outcomeOfEnd, runHeldJob, tailJob } from './job-holder.ts'
import { RefoundJobOutput } from './job-output.ts'
import { type JobRecord, JOB_RECORD_VERSION, jobRecordLine, type ListedJob, listJobRecords, removeJobFiles } from './job-records.ts'

/** The registry's configuration: the upstream registry's (`maxConcurrentJobsPerOwner`). */
export const Config = LocalJobRegistry.Config
export type Config = { maxConcurrentJobsPerOwner?: number }

/** What a job's status says once its holder let it go at this client's disposal (never shown to a model: no notice is sent). */
const DETACHED_DETAIL = 'detached: it runs on in the world'

/** A job of this registry held in the world. */
interface HeldJob {
  /** The world it is held in (kept: while this client ends, `ctx.subprocess` may be gone already). */
  owner: WorldOwner
  /** Its record, once the holder started it (dsh-job wrote it to the world then). */
  record: JobRecord | undefined
  /** Where its files are. */
  dir: string
  /** The raw offsets read so far: a live job's transport, or a re-found job's reader. */
  cursor(): JobCursor
  /** The tail that reads it, through which its cursor is recorded. */
  tail: JobTail | undefined
  /** The cursor last asked to be recorded (as `OUT ERR`). */
  recorded: string
  /** Cursor records and the removal of its files, in flight. */
  writing: Promise<void>
  /** A reader saw its end: its files are removed, nothing more is recorded. */
  collected: boolean
  /** A re-found job: resolves once its tail handed on all the output the world held (or ended). */
  caughtUp?: Promise<void>
}

/**
 * The outcome of a held process as the `bash` tool maps it (dsh-tool-bash `processOutcome`):
 * a signal is `killed`, anything else `completed` with its exit code.
 */
function processOutcome(outcome: SubprocessOutcome): JobOutcome {
  return outcome.signal !== null ? { status: 'killed', detail: `signal: ${outcome.signal}` } : { status: 'completed', detail: `exit code: ${outcome.exitCode ?? 0}` }
}

/** See the module comment. Loaded as a plugin, it registers as `ctx.jobs`. */
export class WorldJobRegistry extends LocalJobRegistry {
  static override Config = Config

  private readonly context: Context
  /** The ids this registry shows, and the upstream registry's behind them, both ways. */
  private readonly shown = new Map<string, string>()
  private readonly inner = new Map<string, string>()
  /** The last number issued per kind (and above every id a world record holds). */
  private readonly issued = new Map<string, number>()
  /** Jobs held in the world, by shown id. */
  private readonly held = new Map<string, HeldJob>()
  /** Held jobs let go at disposal: their settlement is no completion. */
  private readonly detached = new Set<string>()
  /** The world's records, read once when the registry starts. */
  private records: Promise<ListedJob[]> | undefined
  private loaded: ListedJob[] | undefined
  /** Sessions whose world jobs were registered here. */
  private readonly refound = new Set<string>()
  /** Kill requests of re-found jobs on their way to the holder. */
  private readonly killing = new Set<Promise<void>>()
  /** Said once that this world's jobs are not held (its persistence is not 'client'). */
  private saidNotHeld = false
  /** This registry (or an owner) is being disposed: held jobs are let go, not cancelled. */
  private detaching = false
  private readonly detachingOwners = new WeakSet<Agent>()
  private readonly watchedOwners = new WeakSet<Agent>()

  constructor(ctx: Context, config: Config) {
    super(ctx, config as never)
    this.context = ctx
    // After the upstream registry's own teardown effect, so it runs first (effects end last
    // registered first): the held jobs it is about to cancel are let go instead.
    // A held job's start in flight (dsh-job and its record) is finished by the runtime's own
    // disposal, which cordis does not order after this one (process-runtime.ts heldStarts).
    ctx.effect(() => () => { this.detaching = true }, 'world jobs: let held jobs go')
    this.records = this.readRecords()
  }

  /**
   * The world's job records, read once (the world opens for it); also raises the issued ids
   * above theirs. Resolves to none where there is no remote world or it cannot be read.
   *
   * With `caller`, its session's jobs are also found again now (as at its first call) and this
   * resolves once each one's output, as the world held it, has been read back, and each one
   * that ended says so: the caller's first read then shows what came while no client was there.
   * Without it, a session's jobs are found at its first call, whose read may come before their
   * output did (`(no new output)`, status running).
   */
  async ready(caller?: Agent): Promise<ListedJob[]> {
    const listed = await (this.records ??= this.readRecords())
    if (caller === undefined) return listed
    this.refind(caller)
    await Promise.all([...this.held.values()].filter(job => job.record?.session === caller.id).map(job => job.caughtUp))
    // A job's end reaches the upstream registry's record through a chain of promise reactions
    // (microtasks): all of them have run before the next macrotask.
    await new Promise(resolve => setImmediate(resolve))
    return listed
  }

  private async readRecords(): Promise<ListedJob[]> {
    const owner = this.owner()
    if (owner === undefined) return this.loaded = []
    try {
      const control = await owner.control()
      const listed = await listJobRecords(owner, jobsDirectory(control.info.uid))
      for (const { record } of listed) this.noteIssued(record.kind, record.id)
      this.loaded = listed
    } catch (error) {
      this.context.logger('jobs').warn(`jobs: the world's job records could not be read: ${(error as Error).message}`)
      this.loaded = []
    }
    return this.loaded
  }

  /**
   * Resolves once every record write asked for so far reached the world (a read's cursor, a
   * new job), and every kill of a job found again reached its holder: the reads before it are
   * not shown again to a later client. A client killed between a read and this may show that
   * read's text once more.
   */
  async settled(): Promise<void> {
    await Promise.allSettled([...[...this.held.values()].map(job => job.writing), ...this.killing])
  }

  override start(spec: JobStart): JobId {
    this.refind(spec.owner)
    const holding = this.holdingFor(spec)
    let id = ''
    const producer = holding === undefined ? spec : { ...spec, run: () => this.letGoAtDisposal(holdProcesses(holding.holding, () => spec.run()), () => id, spec.owner) }
    const innerId = super.start(producer)
    id = this.issue(spec.kind)
    this.link(innerId, id)
    this.watchOwner(spec.owner)
    if (holding !== undefined) {
      this.held.set(id, holding.job)
      holding.registered(id)
    }
    return JobId(id)
  }

  override list(caller?: Agent): JobSnapshot[] {
    this.refind(caller)
    return super.list(caller).map(snapshot => this.shownSnapshot(snapshot))
  }

  override get(id: JobId, caller?: Agent): JobSnapshot {
    this.refind(caller)
    // Looked up outside the translation: its error names the id asked for, already a shown one.
    const innerId = this.innerId(id)
    return this.shownSnapshot(this.translated(() => super.get(innerId, caller)))
  }

  override read(id: JobId, caller?: Agent): JobRead {
    this.refind(caller)
    const innerId = this.innerId(id)
    const read = this.translated(() => super.read(innerId, caller))
    const snapshot = this.shownSnapshot(read.snapshot)
    this.afterRead(snapshot)
    return { text: read.text, snapshot }
  }

  override kill(id: JobId, caller?: Agent, reason?: string): 'requested' | 'already-finished' {
    this.refind(caller)
    const innerId = this.innerId(id)
    return this.translated(() => super.kill(innerId, caller, reason))
  }

  override async wait(id: JobId, timeoutMs: number, caller?: Agent, signal?: AbortSignal): Promise<JobSnapshot> {
    this.refind(caller)
    const innerId = this.innerId(id)
    return this.shownSnapshot(await this.translatedAsync(() => super.wait(innerId, timeoutMs, caller, signal)))
  }

  override onJobDone(listener: JobDoneListener): () => void {
    return super.onJobDone((snapshot, owner) => {
      const shown = this.shownSnapshot(snapshot)
      if (this.detached.has(shown.id)) return
      return listener(shown, owner)
    })
  }

  /** The world owner of `ctx.subprocess`, when it is one of this package's runtimes. */
  private owner(): WorldOwner | undefined {
    return worldOwnerOf(this.context.get('subprocess'))
  }

  /**
   * How a new job is held in the world, when it is: a remote world whose persistence is
   * 'client'. The holding starts the first spawn of the producer's start under dsh-job.
   */
  private holdingFor(spec: JobStart): { holding: ProcessHolding; job: HeldJob; registered(id: string): void } | undefined {
    const owner = this.owner()
    if (owner === undefined) return undefined
    const persistence = owner.persistenceSetting()
    if (persistence.mode !== 'client') {
      if (!this.saidNotHeld) this.context.logger('jobs').info(`jobs: background jobs in ${owner.describe()} end with this client (persistence '${persistence.mode}'); persistence 'client' holds them in the world`)
      this.saidNotHeld = true
      return undefined
    }
    const key = `${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`
    let delivered: JobCursor = { stdout: 0, stderr: 0 }
    const job: HeldJob = { owner, record: undefined, dir: '', cursor: () => ({ ...delivered }), tail: undefined, recorded: '0 0', writing: Promise.resolve(), collected: false }
    let id: string | undefined
    const startedAt = Date.now()
    const holding: ProcessHolding = {
      // Beside the job's files: the wrapper writes it while the program runs, which may be long
      // after this client and its state directory are gone.
      statusFile: uid => `${jobsDirectory(uid)}/${key}.status`,
      // Part of the spawn's start, which the runtime's disposal lets finish (bounded): the job is
      // recorded before its client may end, so a later client finds it.
      open: async (script, { nonce }) => {
        const control = await owner.control()
        job.dir = jobsDirectory(control.info.uid)
        const record: JobRecord = { version: JOB_RECORD_VERSION, key, id: id ?? '', kind: spec.kind, label: spec.label, ...(spec.owner !== undefined ? { session: spec.owner.id } : {}), ...(spec.outputLimitBytes !== undefined ? { outputLimitBytes: spec.outputLimitBytes } : {}), startedAt, nonce }
        // dsh-job writes the record before the job starts: one exec starts, records and reads it.
        const run = await runHeldJob(owner, { dir: job.dir, key }, { ttlSeconds: Math.ceil(persistence.ttlMs / 1000), logBytes: persistence.logBytes, nonce, meta: jobRecordLine(record), script })
        job.record = record
        job.tail = run.tail
        delivered = run.delivered
        return run.transport
      },
    }
    return { holding, job, registered: shown => { id = shown } }
  }

  /**
   * `hooks` whose cancel, while this registry or `owner` is being disposed, lets a held job go
   * (it settles here as detached, with no notice) instead of ending it.
   */
  private letGoAtDisposal(hooks: JobHooks, id: () => string, owner: Agent | undefined): JobHooks {
    const detached = Promise.withResolvers<JobOutcome>()
    return {
      cancel: reason => {
        const letGo = this.detaching || (owner !== undefined && this.detachingOwners.has(owner))
        if (letGo) {
          this.detached.add(id())
          detached.resolve({ status: 'completed', detail: DETACHED_DETAIL })
          return
        }
        hooks.cancel(reason)
      },
      done: Promise.race([hooks.done, detached.promise]),
      ...(hooks.readOutput !== undefined ? { readOutput: () => hooks.readOutput!() } : {}),
    }
  }

  /** Mark `owner`'s disposal before the upstream registry's owner cleanup runs (LIFO effects). */
  private watchOwner(owner: Agent | undefined): void {
    if (owner === undefined || this.watchedOwners.has(owner)) return
    this.watchedOwners.add(owner)
    owner.ctx.effect(() => () => { this.detachingOwners.add(owner) }, 'world jobs: let the owner\'s held jobs go')
  }

  /**
   * Register the world's jobs of `agent`'s session here, once (see the module comment). Only
   * after the records were read; a session whose registration fails (no controller yet) is
   * tried again at its next call.
   */
  private refind(agent: Agent | undefined): void {
    if (agent === undefined || this.loaded === undefined || this.refound.has(agent.id)) return
    this.refound.add(agent.id)
    const owner = this.owner()
    if (owner === undefined) return
    const known = new Set([...this.held.values()].map(job => job.record?.key))
    for (const listed of [...this.loaded].sort((a, b) => a.record.startedAt - b.record.startedAt)) {
      const { record } = listed
      if (record.session !== agent.id || known.has(record.key)) continue
      // Two clients of one session at once each issue ids from the records they read: a job
      // under an id already shown here (another job's) is shown under a new one.
      const id = this.inner.has(record.id) ? this.issue(record.kind) : record.id
      try {
        const innerId = super.start({
          kind: record.kind as JobStart['kind'],
          label: record.label,
          owner: agent,
          ...(record.outputLimitBytes !== undefined ? { outputLimitBytes: record.outputLimitBytes } : {}),
          run: () => this.letGoAtDisposal(this.refoundHooks(owner, listed, id), () => id, agent),
        })
        this.link(innerId, id)
        this.noteIssued(record.kind, id)
        this.watchOwner(agent)
      } catch (error) {
        this.refound.delete(agent.id)
        this.context.logger('jobs').warn(`jobs: the world's job ${record.id} could not be registered again: ${(error as Error).message}`)
      }
    }
  }

  /** The hooks of a job a restarted client found again: its holder's output and end, read on from the record's cursor. */
  private refoundHooks(owner: WorldOwner, { record, cursor, programStart }: ListedJob, id: string): JobHooks {
    const output = new RefoundJobOutput(record.nonce, cursor, { programStart })
    const done = Promise.withResolvers<JobOutcome>()
    const job: HeldJob = { owner, record, dir: '', cursor: () => output.cursor, tail: undefined, recorded: `${cursor.stdout} ${cursor.stderr}`, writing: Promise.resolve(), collected: false }
    this.held.set(id, job)
    const place = owner.control().then(control => {
      job.dir = jobsDirectory(control.info.uid)
      return { dir: job.dir, key: record.key }
    })
    const tail = place.then(where => tailJob(owner, where, cursor, {
      output: (stream, offset, data) => output.push(stream, offset, data),
      end: line => done.resolve(processOutcome(output.outcome(outcomeOfEnd(line)))),
      fail: error => done.resolve({ status: 'failed', detail: `the job's output in the world cannot be read: ${error.message}` }),
    }))
    tail.then(started => { job.tail = started }, (error: unknown) => done.resolve({ status: 'failed', detail: `the job's output in the world cannot be read: ${(error as Error).message}` }))
    job.caughtUp = tail.then(started => started.caughtUp(), () => undefined)
    return {
      cancel: () => {
        // The holder ends every process of the job (TERM, then KILL) and records its end; the
        // tail reports it. The world stays open for the request when this client ends at once.
        const kill = place.then(where => this.signalHolder(owner, where.dir, record.key))
        this.killing.add(kill)
        void kill.finally(() => this.killing.delete(kill))
        owner.keepOpenFor(kill)
      },
      done: done.promise,
      readOutput: () => output.read().delta,
    }
  }

  /**
   * End a re-found job through its holder (job-holder.ts endHeldJob), found by the job's state
   * as it is now; a job that ended has none. A failure is logged.
   */
  private async signalHolder(owner: WorldOwner, dir: string, key: string): Promise<void> {
    try {
      const holder = (await listJobRecords(owner, dir)).find(listed => listed.record.key === key)?.holder
      if (holder !== undefined) await endHeldJob(owner, holder, key)
    } catch (error) {
      this.context.logger('jobs').warn(`jobs: the holder of job ${key} could not be signalled: ${(error as Error).message}`)
    }
  }

  /** After a read: the reader's offsets are recorded in the world; an ended job read to its end leaves it. */
  private afterRead(snapshot: JobSnapshot): void {
    const job = this.held.get(snapshot.id)
    if (job?.record === undefined || job.collected) return
    const terminal = snapshot.status === 'completed' || snapshot.status === 'killed' || snapshot.status === 'failed'
    const { owner, dir, record } = job
    if (terminal && !this.detached.has(snapshot.id)) {
      job.collected = true
      job.writing = job.writing.then(() => dir === '' ? undefined : removeJobFiles(owner, dir, record.key)).catch(() => undefined)
      owner.keepOpenFor(job.writing)
      return
    }
    const cursor = job.cursor()
    const line = `${cursor.stdout} ${cursor.stderr}`
    if (line === job.recorded || job.tail === undefined) return
    job.recorded = line
    const recording = job.tail.recordCursor(cursor).catch((error: unknown) => {
      this.context.logger('jobs').warn(`jobs: the cursor of ${record.id} could not be recorded: ${(error as Error).message}`)
    })
    job.writing = Promise.all([job.writing, recording]).then(() => undefined)
    owner.keepOpenFor(job.writing)
  }

  private issue(kind: string): string {
    const next = (this.issued.get(kind) ?? 0) + 1
    this.issued.set(kind, next)
    return `${kind}-${next}`
  }

  /** Raise the number issued for `kind` to at least `id`'s (`<kind>-N`). */
  private noteIssued(kind: string, id: string): void {
    const match = /-(\d+)$/.exec(id)
    if (match === null || !id.startsWith(`${kind}-`)) return
    this.issued.set(kind, Math.max(this.issued.get(kind) ?? 0, Number(match[1])))
  }

  private link(innerId: string, id: string): void {
    this.shown.set(innerId, id)
    this.inner.set(id, innerId)
  }

  /** The upstream registry's id of shown `id`. @throws Error `unknown job ID` as upstream words it. */
  private innerId(id: string): JobId {
    const innerId = this.inner.get(id)
    if (innerId === undefined) throw new Error(`unknown job ${id}`)
    return JobId(innerId)
  }

  private shownSnapshot(snapshot: JobSnapshot): JobSnapshot {
    return { ...snapshot, id: JobId(this.shown.get(snapshot.id) ?? snapshot.id) }
  }

  /** The upstream registry's errors name its ids: said again with the shown ones. */
  private translated<T>(call: () => T): T {
    try {
      return call()
    } catch (error) {
      throw this.shownError(error)
    }
  }

  private async translatedAsync<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call()
    } catch (error) {
      throw this.shownError(error)
    }
  }

  private shownError(error: unknown): unknown {
    if (!(error instanceof Error)) return error
    const match = /^(unknown job |job )(\S+)( .*)?$/.exec(error.message)
    if (match === null || !this.shown.has(match[2]!)) return error
    error.message = `${match[1]}${this.shown.get(match[2]!)}${match[3] ?? ''}`
    return error
  }
}

export default WorldJobRegistry
