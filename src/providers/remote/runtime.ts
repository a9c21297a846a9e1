/**
 * The lifecycle every remote runtime shares: a lazily opened world, the live terminals and
 * processes it owns, and one disposal order (processes and terminals torn down with their
 * quiescence proofs, then spill files removed, then the world released).
 * @module dsh-remote-worlds/providers/remote/runtime
 */
import type { Context } from '@deepseek-ai/cordis'
import { SubprocessRuntime } from '@deepseek-ai/dsh-subprocess'
import type { z } from 'zod'
import type { ControlChannel } from './control-channel.ts'
import type { UserEnvironment } from './environment.ts'
import { InvalidArgumentError, PersistenceUnavailableError, WorldClosedError } from './errors.ts'
import { SessionOwnership, type SessionOwnershipOptions } from './ownership.ts'
import { RemoteProcessSet, RemoteStateDirectory } from './process-runtime.ts'
import { ResourceWatch } from './resource-events.ts'
import type { ProcessTransport } from './process.ts'
import { type RemoteTerminalHandle, type RemoteTerminalStart, type TerminalTransport, adoptRemoteTerminal, startRemoteTerminal } from './terminal.ts'
import type { SubprocessTerminalSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import { HeldShellLostError } from './errors.ts'
import { type DetachedEnding, DSH_PTY_SESSION_VARIABLE, DSH_SESSION_VARIABLE, heldShellKey, matchingRecords, takeHeldShell } from './pty-holder/held-adoption.ts'
import { type HeldShellRecord, HeldShellRecords, heldRecordsDirectory } from './pty-holder/held-records.ts'
import { type HeldShellPlan, heldShellLabel, planHeldShell, startHeldShell } from './pty-holder/held-shell.ts'
import { terminalHolder } from './pty-holder/holder-install.ts'
import { type Persistence, persistenceChoice } from './pty-holder/persistence.ts'
import { type WorldOwner, WORLD_OWNER } from './world-owner.ts'
import { forgetWorldTool } from './world-tools/install.ts'
import { type WorldToolCopy, saysUnverifiedTool } from './world-tools/launch.ts'
import { isPackagedRipgrep, ripgrepArgv, worldRipgrep } from './world-tools/ripgrep.ts'
import { type ProgramUnwrapper, isProgramUnwrapper } from './wrapped-program.ts'

/**
 * How long disposal waits for terminal starts in flight (ms) before it ends terminals and
 * releases the world: a start on a live world settles well within it (a held start is a few
 * round trips); one stuck on a frozen world (a paused container) would otherwise hold disposal
 * until the world thaws.
 */
export const DISPOSAL_START_WAIT_MS = 15_000

/** Wait until every promise of `pending` settled, or `ms` passed. Never rejects. */
export async function settledWithin(pending: readonly Promise<unknown>[], ms: number): Promise<void> {
  if (pending.length === 0) return
  let timer: NodeJS.Timeout | undefined
  const bound = new Promise<void>(resolve => { timer = setTimeout(resolve, ms) })
  try {
    await Promise.race([Promise.allSettled(pending), bound])
  } finally {
    clearTimeout(timer)
  }
}

/** What a runtime's world must offer the shared lifecycle. */
export interface DisposableWorld {
  /** Release connections and (for managed worlds) the world itself. Idempotent. */
  dispose(): Promise<void>
}

/**
 * Validate a runtime config with its zod schema.
 * @param what - world name for the message, e.g. `Docker`.
 * @throws InvalidArgumentError listing every issue as `path: message`.
 */
export function parseRuntimeConfig<S extends z.ZodTypeAny>(schema: S, config: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(config)
  if (!parsed.success) throw new InvalidArgumentError(`invalid ${what} world config: ${parsed.error.issues.map(issue => `${issue.path.join('.') || 'config'}: ${issue.message}`).join('; ')}`)
  return parsed.data as z.output<S>
}

/**
 * Base of the Docker and SSH runtimes (`ctx.subprocess`). Subclasses open their world and
 * start terminals/processes in it; this class memoizes the world, tracks what was started,
 * refuses new work once disposing, and disposes everything in one order when the cordis scope
 * ends.
 */
export abstract class RemoteSubprocessRuntime<W extends DisposableWorld> extends SubprocessRuntime implements WorldOwner {
  /** Processes started by `spawn`. */
  protected readonly processes = new RemoteProcessSet()
  /** The private spill directory in the world (created on first use). */
  protected readonly stateDir: RemoteStateDirectory
  /** This client's session ownership: its id, its session tags, its control registrations (ownership.ts). */
  readonly ownership: SessionOwnership
  /**
   * The client's LANG when the runtime was made: only its name crosses, to choose the world's
   * locale (environment.ts `chooseLocale`); read once, so every program of a world agrees.
   */
  protected readonly callerLang: string | undefined = process.env.LANG
  /**
   * Whether terminals' shells outlive their transport or client (config `persistence`; the
   * Docker and SSH runtimes set it, default 'connection'). A runtime with no such setting (the
   * swarm's) keeps 'off': its world is a service that ends with its client, and no setting
   * would let a user opt out of a default there.
   */
  protected persistence: Persistence = persistenceChoice('off')
  private readonly terminals = new Set<RemoteTerminalHandle>()
  /** Terminal starts not yet adopted, each settled once adopted or failed (see {@link startAdopted}). */
  private readonly starting = new Set<Promise<void>>()
  private worldPromise: Promise<W> | undefined
  private disposing = false
  private readonly label: string
  /**
   * This runtime as its world's owner, one plain object for its life. Not `this`: cordis hands
   * out a new proxy of a service per access (the service itself included), so `this` differs
   * from call to call, and state kept per owner (world-tools/install.ts,
   * pty-holder/holder-install.ts) would be looked up afresh each time.
   */
  private readonly owner: WorldOwner = {
    describe: () => this.describe(),
    control: () => this.control(),
    userEnvironment: () => this.userEnvironment(),
    openProcess: script => this.openProcess(script),
    newTag: () => this.newTag(),
    answering: () => this.answering(),
    setWorldVariables: variables => this.setWorldVariables(variables),
    persistenceSetting: () => this.persistenceSetting(),
    keepOpenFor: work => this.keepOpenFor(work),
  }

  /** See {@link setWorldVariables}: the subclasses lay these over the world's ambient environment. */
  protected worldVariables: Readonly<Record<string, string>> = {}

  /**
   * @param ctx - the cordis context the service registers in.
   * @param label - world name for messages (`docker`, `ssh`).
   * @param ownership - whether this client reaps what gone clients left (see ownership.ts).
   */
  constructor(ctx: Context, label: string, ownership: SessionOwnershipOptions = {}) {
    super(ctx)
    this.label = label
    this.ownership = new SessionOwnership(ownership)
    this.stateDir = new RemoteStateDirectory(this.ownership.clientId)
    ctx.effect(() => () => this.dispose(), `${label} subprocess teardown`)
  }

  /** Open the world (called once; a failure is forgotten so a later call retries). */
  protected abstract openWorld(): Promise<W>

  /** The control channel of this runtime's user in its world (opens the world on first use). */
  abstract control(): Promise<ControlChannel>

  /** Short description of the world for messages, e.g. `docker container 0123456789ab`. */
  abstract describe(): string

  /** The environment the world gives this runtime's user, before a spec's env (opens the world). */
  abstract userEnvironment(): Promise<UserEnvironment>

  /**
   * Start `sh -c SCRIPT` without a PTY and with stdin, as this runtime's user: how the halves
   * beside the process seam run their own programs in the world (the file server of
   * src/files, the copies of providers/remote/world-tools). See {@link WorldOwner.openProcess}.
   * @throws WorldClosedError after disposal; the world's open and start errors.
   */
  abstract openProcess(script: string): Promise<ProcessTransport>

  /**
   * Start the terminal of `start.spec`, one mechanism for every world: under persistence
   * 'client', first take back the held shell this spec names (this user's record for `target`);
   * else start a fresh one, held by dsh-pty in the world when persistence is on (its tag names
   * the holder, which no client's reaper outlives), else on the world's own transport.
   * @param world.plain - the transport of a shell that is not held.
   * @param world.holder - dsh-pty at PATH waiting for its first frame on the terminal's connection
   *   (what `plain` runs a terminal on), for the holder's start.
   * @returns the handle (not yet adopted: see {@link adoptTerminal}); `previousEnding` is set
   *   when the recorded shell ended while no client held it, `otherHeldShells` when the session
   *   holds shells of another spec.
   * @throws the errors of {@link takeBackTerminal}, {@link heldTerminalTransport} and
   *   `startRemoteTerminal`.
   */
  protected async startTerminal(start: Omit<RemoteTerminalStart, 'open' | 'tag'>, world: { plain(script: string): Promise<TerminalTransport>; holder(copy: WorldToolCopy): Promise<ProcessTransport> }): Promise<RemoteTerminalHandle> {
    const { spec, control, where } = start
    const key = this.heldKey(spec, start.env)
    const target = key === undefined ? '' : await this.heldRecordsTarget()
    const taken = key === undefined ? {} : await this.takeBackTerminal(key, target, start)
    if (taken.handle !== undefined) return taken.handle
    const held = await this.holdsShells() ? planHeldShell(control.info.uid) : undefined
    const open = (): Promise<RemoteTerminalHandle> => startRemoteTerminal({
      ...start,
      tag: held?.tag ?? this.ownership.newTag(),
      open: script => held === undefined
        ? world.plain(script)
        : this.heldTerminalTransport(held, { script, rows: spec.rows, cols: spec.cols, where }, world.holder, { key: key ?? '', label: heldShellLabel(spec) }),
    })
    let handle: RemoteTerminalHandle
    try {
      handle = await open()
    } catch (error) {
      // dsh-pty's copy was refused at its start (world-tools/launch.ts: not the build this client
      // shipped, a file planted in its place): it never ran. Copy it in anew, once.
      if (!(error instanceof Error) || !saysUnverifiedTool(error.message)) throw error
      forgetWorldTool(this.owner, 'dsh-pty')
      handle = await open()
    }
    handle.previousEnding = taken.ended
    handle.otherHeldShells = (taken.others ?? []).map(record => ({ pid: record.program.pid, cwd: record.cwd }))
    if (held !== undefined && key !== undefined) await this.recordHeldShell(handle, held, key, target, control, spec)
    return handle
  }

  /**
   * Whether a new terminal's shell is held: the mode is not 'off' and, for the default mode, dsh-pty
   * can run in this world (a default degrades to 'off' where it cannot; a given mode is refused
   * there, by {@link heldTerminalTransport}).
   */
  private async holdsShells(): Promise<boolean> {
    if (this.persistence.mode === 'off') return false
    if (!this.persistence.defaulted) return true
    return 'path' in await terminalHolder(this.owner)
  }

  /**
   * The persistence this runtime's terminals get, asked of the world (it opens on first use):
   * the mode, whether it is the default, and, when the default 'connection' degraded to 'off'
   * because dsh-pty cannot run here, why (pty-holder/persistence.ts, the default rule).
   * @throws WorldClosedError after disposal; the world's open errors.
   */
  async persistenceInEffect(): Promise<{ mode: Persistence['mode']; defaulted: boolean; degraded?: string }> {
    const { mode, defaulted } = this.persistence
    if (mode === 'off' || !defaulted) return { mode, defaulted }
    const holder = await terminalHolder(this.owner)
    return 'path' in holder ? { mode, defaulted } : { mode: 'off', defaulted, degraded: holder.unavailable }
  }

  /**
   * The transport of a held shell (persistence 'connection' or 'client'): dsh-pty holds it in the
   * world (pty-holder/held-shell.ts), started through `openHolder` (a dsh-pty on the terminal's
   * connection); later pipes to it are this runtime's {@link openProcess}.
   * @throws PersistenceUnavailableError where dsh-pty cannot run in this world (the reason).
   * @throws the holder's start errors (SpawnFailedError, TransportError).
   */
  private async heldTerminalTransport(plan: HeldShellPlan, start: { script: string; rows: number; cols: number; where: string }, openHolder: (holder: WorldToolCopy) => Promise<ProcessTransport>, identity: { key: string; label: string }): Promise<TerminalTransport> {
    const holder = await terminalHolder(this.owner)
    if (!('path' in holder)) throw new PersistenceUnavailableError(`${start.where}: persistence '${this.persistence.mode}' needs dsh-pty, the terminal's world-side parent, to hold the shell, and it cannot run here: ${holder.unavailable}`)
    return startHeldShell(plan, {
      holder,
      openHolder: () => openHolder(holder),
      reopen: script => this.openProcess(script),
      ...start,
      persistence: this.persistence,
      controller: this.ownership.clientId,
      ...identity,
      relayTag: this.newTag(),
    })
  }

  /**
   * Persistence 'client': the key a spawn spec names a held shell by (pty-holder/held-adoption.ts
   * `heldShellKey`), undefined when the mode is another or the spec has no DSH session id.
   */
  private heldKey(spec: SubprocessTerminalSpawnSpec, env: Readonly<Record<string, string>>): string | undefined {
    if (this.persistence.mode !== 'client') return undefined
    const policy = this.ctx.get('sandboxPolicy') as { defaultMode?: string } | undefined
    return heldShellKey(spec, policy?.defaultMode, env)
  }

  /**
   * What this client's records of held shells name the world by (pty-holder/held-records.ts):
   * `docker:CONTAINER_ID:USER`, `ssh:USER@HOST:PORT`.
   */
  protected abstract heldRecordsTarget(): Promise<string>

  /**
   * Forget this client's records of the held shells `ids` of this world (doctor's reap ended
   * them), so a later spawn of their session starts fresh without reporting them lost.
   */
  async forgetHeldShells(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return
    const records = this.heldRecords(await this.heldRecordsTarget())
    for (const id of ids) await records.remove(id)
  }

  /** The records of held shells this user keeps for `target` (pty-holder/held-records.ts). */
  protected heldRecords(target: string): HeldShellRecords {
    return new HeldShellRecords(heldRecordsDirectory(this.persistence.stateDir), target)
  }

  /**
   * Persistence 'client': take back the held shell `key` names for this target, if this user
   * recorded one. The record goes when the shell ends, or when it is found lost.
   * @returns the handle on the same shell; else nothing (start a fresh one), with the ending of a
   *   recorded shell that ended while no client held it (its status and last output).
   * @throws HeldShellLostError (the host rebooted, the world restarted, the holder ended or its
   *   pid is another process's: the record is dropped, so the next spawn starts fresh),
   *   HeldShellBusyError, HeldShellDeniedError.
   */
  private async takeBackTerminal(key: string, target: string, start: Omit<RemoteTerminalStart, 'open' | 'tag'>): Promise<{ handle?: RemoteTerminalHandle; ended?: DetachedEnding; others?: HeldShellRecord[] }> {
    const records = this.heldRecords(target)
    const listed = await records.list()
    const [record] = matchingRecords(listed, key, start.spec)
    const session = start.spec.env?.[DSH_SESSION_VARIABLE]
    if (record === undefined) return { others: listed.filter(entry => entry.dshSession !== undefined && entry.dshSession === session) }
    const holder = await terminalHolder(this.owner)
    if (!('path' in holder)) throw new PersistenceUnavailableError(`${start.where}: persistence 'client' needs dsh-pty, the terminal's world-side parent, to hold the shell, and it cannot run here: ${holder.unavailable}`)
    let taken
    try {
      taken = await takeHeldShell(record, start.control, { holder, reopen: script => this.openProcess(script), persistence: this.persistence, controller: this.ownership.clientId, relayTag: this.newTag(), where: start.where })
    } catch (error) {
      if (error instanceof HeldShellLostError) await records.remove(record.id)
      throw error
    }
    if (taken.kind === 'ended') {
      await records.remove(record.id)
      return { ended: taken }
    }
    const handle = await adoptRemoteTerminal({ ...start, tag: record.tag, open: () => Promise.reject(new Error('a held shell taken back opens nothing')) }, {
      transport: taken.terminal, replay: taken.replay, busy: taken.busy, program: record.program, session: record.session, parent: record.holder,
    })
    this.forgetRecordWhenEnded(handle, records, record.id)
    return { handle }
  }

  /**
   * Persistence 'client': record the held shell of `plan` that `handle` runs, so a later client
   * of this user takes it back (pty-holder/held-records.ts); forgotten when it ends.
   */
  private async recordHeldShell(handle: RemoteTerminalHandle, plan: HeldShellPlan, key: string, target: string, control: ControlChannel, spec: SubprocessTerminalSpawnSpec): Promise<void> {
    const holder = handle.worldParent
    if (holder === undefined) return
    const world = await control.worldIdentity()
    const records = this.heldRecords(target)
    await records.add({
      key, id: plan.id, stem: plan.stem, secret: plan.secret.toString('hex'), tag: plan.tag,
      holder, session: handle.session, program: handle.identity, ...world,
      pty: spec.env?.[DSH_PTY_SESSION_VARIABLE] ?? null, created: Date.now(), dshSession: spec.env?.[DSH_SESSION_VARIABLE], cwd: spec.cwd,
    })
    this.forgetRecordWhenEnded(handle, records, plan.id)
  }

  /** Forget a held shell's record once its shell ended, or was lost for good (not when detached or merely unreachable). */
  private forgetRecordWhenEnded(handle: RemoteTerminalHandle, records: HeldShellRecords, id: string): void {
    handle.done.then(() => records.remove(id), error => error instanceof HeldShellLostError ? records.remove(id) : undefined).catch(() => undefined)
  }

  /**
   * Leave every held shell of this runtime running in the world (persistence 'client'), for a
   * later client to take back; other terminals are untouched (disposal ends them).
   * @returns how many were left.
   */
  detachHeldShells(): number {
    if (this.persistence.mode !== 'client') return 0
    let count = 0
    for (const handle of [...this.terminals]) {
      if (handle.worldParent === undefined || !handle.held) continue
      handle.detach()
      count += 1
    }
    return count
  }

  /** A new session tag of this client (see {@link WorldOwner.newTag}). */
  newTag(): string {
    return this.ownership.newTag()
  }

  /**
   * This runtime as the owner of its world: what the filesystem half (`ctx.fs`, src/files)
   * shares with it (providers/remote/world-owner.ts `worldOwnerOf`).
   */
  get [WORLD_OWNER](): WorldOwner {
    return this.owner
  }

  /**
   * The resource-limit watch (resource-events.ts) of the cgroup a terminal runs in: the one of
   * the control channel its probes use, found by the shell's remote pid; without a pid, or for
   * a pid of no live terminal, the runtime's own control channel.
   * @returns the watch (it reports nothing when the world has no readable counters).
   * @throws WorldClosedError after disposal; the world's open errors.
   */
  async resourceWatch(pid?: number): Promise<ResourceWatch> {
    const terminal = pid === undefined ? undefined : this.terminal(pid)
    return ResourceWatch.of(terminal?.controlChannel ?? await this.control())
  }

  /**
   * The live terminal whose shell has remote pid `pid` (as `spawnTerminal` returned it), for
   * what the seam does not carry: its screen and its window size.
   */
  terminal(pid: number): RemoteTerminalHandle | undefined {
    return [...this.terminals].find(handle => handle.pid === pid)
  }

  /** A control channel in `world` for removing the spill directory at disposal. */
  protected abstract disposalControl(world: W): Promise<ControlChannel | undefined>

  /**
   * The world, opened on first call and shared afterwards.
   * @throws WorldClosedError after disposal; otherwise whatever {@link openWorld} throws.
   */
  world(): Promise<W> {
    if (this.disposing) return Promise.reject(new WorldClosedError())
    if (this.worldPromise === undefined) {
      const opening = this.openWorld()
      this.worldPromise = opening
      opening.catch(() => { if (this.worldPromise === opening) this.worldPromise = undefined })
    }
    return this.worldPromise
  }

  /**
   * The program a terminal's argv runs when the argv is a wrapping by this world's `ctx.sandbox`
   * (a {@link ProgramUnwrapper}, such as bubblewrap), else undefined (see wrapped-program.ts).
   */
  protected wrappedProgram(argv: readonly string[]): readonly string[] | undefined {
    const sandbox: unknown = this.ctx.get('sandbox')
    return isProgramUnwrapper(sandbox) ? sandbox.wrappedProgram(argv) : undefined
  }

  /**
   * The argv a spawn runs in the world: the spec's, except that the host path of the packaged
   * ripgrep (dsh-tool-fs-search's) becomes the world's ripgrep (world-tools/ripgrep.ts).
   * @param path - the spawn's PATH in the world.
   * @throws WorldToolUnavailableError when the world has no ripgrep and none can be copied in.
   */
  protected async worldArgv(argv: readonly string[], control: ControlChannel, path: string | undefined): Promise<readonly string[] | undefined> {
    if (argv[0] === undefined || !isPackagedRipgrep(argv[0])) return undefined
    return ripgrepArgv(await worldRipgrep(this[WORLD_OWNER], control, path), argv.slice(1))
  }

  /** See {@link WorldOwner.setWorldVariables}. */
  setWorldVariables(variables: Readonly<Record<string, string>>): void {
    this.worldVariables = { ...variables }
  }

  /** Work the world stays open for at disposal (see {@link keepOpenFor}). */
  private readonly keptOpenFor = new Set<Promise<unknown>>()

  /** See {@link WorldOwner.keepOpenFor}. */
  keepOpenFor(work: Promise<unknown>): void {
    const settled = work.then(() => undefined, () => undefined)
    this.keptOpenFor.add(settled)
    void settled.then(() => this.keptOpenFor.delete(settled))
  }

  /** See {@link WorldOwner.persistenceSetting}. */
  persistenceSetting(): Persistence {
    return this.persistence
  }

  /** See {@link WorldOwner.answering}: true unless a world knows better (Docker's event watch). */
  async answering(): Promise<boolean> {
    return true
  }

  /** @throws WorldClosedError once disposal began. */
  protected assertOpen(): void {
    if (this.disposing) throw new WorldClosedError()
  }

  /**
   * Run a terminal's start (`start`: {@link startTerminal} and what the world does around it)
   * and adopt the handle, the start registered until it is adopted. Disposal waits for
   * registered starts (at most {@link DISPOSAL_START_WAIT_MS}) before it ends terminals and
   * releases the world: a start in flight when disposal began (a dsh-pty holder forked, a shell
   * started) is adopted while the world is still open, and so terminated in it, instead of
   * leaving its holder and shell in the world with nothing left to end them.
   * @throws WorldClosedError after disposal, or when disposal began while the terminal started
   *   (what it started is terminated first); the start's errors.
   */
  protected startAdopted(start: () => Promise<RemoteTerminalHandle>): Promise<RemoteTerminalHandle> {
    this.assertOpen()
    const adopted = start().then(handle => this.adoptTerminal(handle))
    const settled = adopted.then(() => undefined, () => undefined)
    this.starting.add(settled)
    void settled.then(() => this.starting.delete(settled))
    return adopted
  }

  /**
   * Track a started terminal until it is terminated; one started while disposal began is
   * terminated at once.
   * @throws WorldClosedError when disposal began while the terminal started.
   */
  protected async adoptTerminal(handle: RemoteTerminalHandle): Promise<RemoteTerminalHandle> {
    if (this.disposing) {
      await handle.terminate()
      throw new WorldClosedError()
    }
    this.terminals.add(handle)
    return handle
  }

  /** Forget a terminated terminal (pass as `onTerminated`). */
  protected readonly forgetTerminal = (handle: RemoteTerminalHandle): void => {
    this.terminals.delete(handle)
  }

  /**
   * End every process and terminal (each proving quiescence), remove the spill directory,
   * release the world. Idempotent.
   * @throws AggregateError listing every teardown that failed (the world is still released).
   */
  async dispose(): Promise<void> {
    if (this.disposing) return
    // Before refusing new work: the starts of held processes (background jobs that outlive this
    // client) finish while the world is open, so they are recorded there, not lost half started.
    await settledWithin([...this.processes.heldStarts(), ...this.keptOpenFor], DISPOSAL_START_WAIT_MS)
    if (this.disposing) return
    this.disposing = true
    // Starts in flight adopt (and so terminate) what they started while the world is open; one
    // stuck on a frozen world is not waited for beyond the bound.
    await settledWithin([...this.starting], DISPOSAL_START_WAIT_MS)
    const [processFailures, outcomes] = await Promise.all([
      this.processes.dispose(),
      Promise.allSettled([...this.terminals].map(handle => handle.terminate())),
    ])
    const failures = [...processFailures, ...outcomes.flatMap(outcome => outcome.status === 'rejected' ? [outcome.reason as unknown] : [])]
    // A reap of what gone clients left runs through this client's control channels: let it end.
    await this.ownership.reaped()
    const world = this.worldPromise === undefined ? undefined : await this.worldPromise.catch(() => undefined)
    // Spill files live in the world until it ends.
    if (world !== undefined) await this.stateDir.remove(() => this.disposalControl(world))
    await world?.dispose()
    if (failures.length > 0) throw new AggregateError(failures, `${this.label} subprocess teardown failed`)
  }
}
