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
import { InvalidArgumentError, WorldClosedError } from './errors.ts'
import { SessionOwnership, type SessionOwnershipOptions } from './ownership.ts'
import { RemoteProcessSet, RemoteStateDirectory } from './process-runtime.ts'
import { ResourceWatch } from './resource-events.ts'
import type { ProcessTransport } from './process.ts'
import type { RemoteTerminalHandle } from './terminal.ts'
import { type WorldOwner, WORLD_OWNER } from './world-owner.ts'
import { isPackagedRipgrep, worldRipgrep } from './world-tools/ripgrep.ts'
import { type ProgramUnwrapper, isProgramUnwrapper } from './wrapped-program.ts'

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
  private readonly terminals = new Set<RemoteTerminalHandle>()
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
  }

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
    return [await worldRipgrep(this[WORLD_OWNER], control, path), ...argv.slice(1)]
  }

  /** @throws WorldClosedError once disposal began. */
  protected assertOpen(): void {
    if (this.disposing) throw new WorldClosedError()
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
    this.disposing = true
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
