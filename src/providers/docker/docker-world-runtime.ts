/**
 * The subprocess seam over one opened {@link DockerWorld}, whoever opened it: the Docker
 * runtime (a container it attaches to or manages, or a dev container) and the swarm runtime
 * (the container of a swarm task, on its node's engine) share this mechanism unchanged and
 * differ only in how the world opens, what it is called and who the exec user is.
 * @module dsh-remote-worlds/providers/docker/docker-world-runtime
 */
import type { Context } from '@deepseek-ai/cordis'
import type { SubprocessHandle, SubprocessSpawnSpec, SubprocessTerminalHandle, SubprocessTerminalSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import type { ControlChannel } from '../remote/control-channel.ts'
import { type LocaleSetting, type UserEnvironment, remoteChildEnv, userEnvironment } from '../remote/environment.ts'
import { ControlChannelError } from '../remote/errors.ts'
import type { ProcessTransport } from '../remote/process.ts'
import { checkSpawnSpec, resolveRemoteExecutable } from '../remote/process-runtime.ts'
import { RemoteSubprocessRuntime } from '../remote/runtime.ts'
import { WORLD_OWNER } from '../remote/world-owner.ts'
import type { RemoteTerminalHandle, TerminalTransport } from '../remote/terminal.ts'
import { openHeldTerminal } from '../remote/pty-holder/held-terminal.ts'
import { terminalHolder } from '../remote/pty-holder/holder-install.ts'
import { warmEmulatorWorker } from '../../emulator/host.ts'
import { type TerminalEmulatorSettings, emulatorChoice } from '../../emulator/settings.ts'
import type { DockerWorld } from './docker-world.ts'

/** What every runtime over a Docker world is configured with (a subset of its config). */
export interface DockerWorldSettings {
  /** The locale of terminals and spawned programs (remote/environment.ts `chooseLocale`; default 'auto'). */
  locale?: LocaleSetting | undefined
  /** Each terminal's emulator (emulator/settings.ts). */
  terminal?: TerminalEmulatorSettings | undefined
  /** End what gone clients left in the world when this client connects (default true). */
  reapOrphans?: boolean | undefined
}

/**
 * `spawnTerminal` runs dsh-pty (or, where it cannot run, a PTY exec) with the start wrapper;
 * foreground probing, signals and teardown go through one control channel per exec user.
 * `spawn` runs the process wrapper on a pooled launcher or a fresh non-TTY exec (see
 * remote/process.ts); `resolveExecutable` asks the control channel. The world opens lazily on
 * first use (subclasses' {@link openWorld}).
 */
export abstract class DockerWorldRuntime extends RemoteSubprocessRuntime<DockerWorld> {
  /** The settings the mechanism reads (locale, emulator). */
  protected readonly settings: DockerWorldSettings

  /**
   * @param label - world name for messages (`docker`, `swarm`).
   */
  constructor(ctx: Context, label: string, settings: DockerWorldSettings) {
    super(ctx, label, { reapOrphans: settings.reapOrphans })
    this.settings = settings
    // The terminals' emulator worker loads while the world opens (emulator/host.ts).
    if (emulatorChoice(settings.terminal) !== undefined) warmEmulatorWorker()
  }

  /**
   * The exec user of terminals, processes and the control channel (`name`, `uid`, `uid:gid`),
   * or undefined for the container's own user. May depend on the opened world.
   */
  abstract get execUser(): string | undefined

  /**
   * Adjust the environment the container gives the exec user (its `Config.Env` and the user's
   * HOME, in `base`) with what the runtime's configuration carries (a dev container's
   * remoteEnv); in place. Default: nothing.
   */
  protected adjustEnvironment(_base: Record<string, string>): void {}

  /** @inheritdoc */
  protected async heldRecordsTarget(): Promise<string> {
    return `docker:${(await this.world()).containerId}:${this.execUser ?? ''}`
  }

  /** @inheritdoc */
  override async answering(): Promise<boolean> {
    return (await this.world()).answering()
  }

  protected async disposalControl(world: DockerWorld): Promise<ControlChannel> {
    return world.control(this.execUser)
  }

  /** The control channel of this runtime's exec user (opens the world on first use). */
  async control(): Promise<ControlChannel> {
    return (await this.world()).control(this.execUser)
  }

  /**
   * Start `sh -c SCRIPT` in a fresh non-TTY exec with stdin, as the exec user (see
   * {@link RemoteSubprocessRuntime.openProcess}).
   * @throws WorldClosedError after disposal; TargetNotRunningError, EngineUnavailableError.
   */
  async openProcess(script: string): Promise<ProcessTransport> {
    this.assertOpen()
    const world = await this.world()
    return world.openProcess(script, this.execUser, { stdin: true })
  }

  /**
   * The PTY transport of a new terminal: dsh-pty on a non-TTY exec (pty-holder/), or, where the
   * holder cannot run in this world, a PTY exec of the engine (docker-world.ts `openTerminal`).
   */
  private async openTerminalTransport(world: DockerWorld, user: string | undefined, start: { script: string; rows: number; cols: number }): Promise<TerminalTransport> {
    const holder = await terminalHolder(this[WORLD_OWNER])
    if (!('path' in holder)) return world.openTerminal(start.script, user)
    return openHeldTerminal(await world.openHolder(holder, user), { ...start, where: world.describe(user) })
  }

  /** @inheritdoc */
  async spawnTerminal(spec: SubprocessTerminalSpawnSpec): Promise<SubprocessTerminalHandle> {
    this.assertOpen()
    spec.signal?.throwIfAborted()
    return this.startAdopted(() => this.startTerminalIn(spec))
  }

  /** The start of {@link spawnTerminal}, not yet adopted. */
  private async startTerminalIn(spec: SubprocessTerminalSpawnSpec): Promise<RemoteTerminalHandle> {
    const world = await this.world()
    const user = this.execUser
    // Asked at every start, beside the first steps: a container paused the instant before (its
    // engine event not yet seen) fails the start at once, instead of a control request waiting
    // out its bound or the pool's standby waiting, unbounded, for a frozen holder. Nothing is
    // handed to the world before the answer (`plain` and `holder` wait for it).
    const running = world.assertRunning(user)
    running.catch(() => undefined)
    const unlessStopped = <T>(step: Promise<T>): Promise<T> => Promise.race([step, running.then(() => step)])
    const control = await unlessStopped(world.control(user))
    const { ambient } = await unlessStopped(this.environmentOf(world, control))
    const common = {
      spec,
      program: this.wrappedProgram(spec.argv),
      env: remoteChildEnv(ambient, spec.env),
      control,
      where: world.describe(user),
      emulator: emulatorChoice(this.settings.terminal),
      // Not `!alive()`: a paused container has not ended (see ended()).
      worldEnded: () => world.ended(user),
      // A failed channel (a request timed out) is replaced for the teardown; a paused container refuses.
      recoverControl: () => world.recoverControl(user),
      // A held shell's parent silent in a paused container: the same refusal, at once.
      refuseFrozen: () => world.refuseIfPaused(user),
      onTerminated: this.forgetTerminal,
    }
    return this.startTerminal(common, {
      plain: async script => {
        await running
        return this.openTerminalTransport(world, user, { script, rows: spec.rows, cols: spec.cols })
      },
      holder: async copy => {
        await running
        return world.openHolder(copy, user)
      },
    })
  }

  /**
   * Start one process in the container (a non-TTY exec running the process wrapper; see
   * remote/process.ts). Returns at once; `pid` is the remote pid once published (-1 before).
   * A terminate(), an abort of `spec.signal` or this runtime's disposal before the program
   * started lets the start finish, then signals the program: `done` is its true outcome
   * (RemoteProcessHandle; `terminate({ cancelUnstarted: true })` stops a start not yet opened).
   * @throws InvalidArgumentError for an invalid spec; Error when `spec.signal` already aborted;
   *   WorldClosedError after disposal. Start failures (CwdNotFoundError,
   *   ExecutableNotFoundError, TargetNotRunningError, ...) reject `done`.
   */
  spawn(spec: SubprocessSpawnSpec): SubprocessHandle {
    this.assertOpen()
    checkSpawnSpec(spec)
    // The exec user is known once the world is open (a dev container's comes from its configuration).
    let user: string | undefined
    let opened: DockerWorld | undefined
    return this.processes.spawn({
      spec,
      tag: this.ownership.newTag(),
      where: this.describe(),
      prepare: async () => {
        const world = await this.world()
        opened = world
        user = this.execUser
        const control = await world.control(user)
        const { ambient } = await this.environmentOf(world, control)
        const stateDir = await this.stateDir.ensure(control, ambient)
        const env = remoteChildEnv(ambient, spec.env)
        return { env, control, stateDir, argv: await this.worldArgv(spec.argv, control, env.PATH) }
      },
      open: (script, options) => opened!.openProcess(script, user, options),
      // Not `!alive()`: a paused container has not ended (see ended()).
      worldEnded: async () => opened === undefined ? false : opened.ended(user),
      recoverControl: () => opened === undefined ? Promise.reject(new ControlChannelError(`${this.describe()}: no world was opened`)) : opened.recoverControl(user),
    })
  }

  /**
   * Resolve an executable in the container, as the exec user: absolute paths verified, bare
   * names searched in the container's PATH (its `Config.Env`, scrubbed) with `env.PATH` over
   * it. One control request, no exec.
   * @throws InvalidArgumentError for an empty or relative (`a/b`) command.
   * @throws ExecutableNotFoundError when nothing executable matches.
   */
  async resolveExecutable(command: string, env?: Readonly<Record<string, string>>, signal?: AbortSignal): Promise<string> {
    signal?.throwIfAborted()
    const world = await this.world()
    const control = await world.control(this.execUser)
    const path = remoteChildEnv((await this.environmentOf(world, control)).ambient, env).PATH
    return resolveRemoteExecutable(control, command, path, world.describe(this.execUser), signal)
  }

  /**
   * The environment the container gives this runtime's user, before a spec's env: `Config.Env`
   * with the user's HOME, {@link adjustEnvironment}, then the locale and a private HOME where
   * needed (see remote/environment.ts `userEnvironment`). Opens the world on first use.
   */
  async userEnvironment(): Promise<UserEnvironment> {
    const world = await this.world()
    return this.environmentOf(world, await world.control(this.execUser))
  }

  private async environmentOf(world: DockerWorld, control: ControlChannel): Promise<UserEnvironment> {
    const base: Record<string, string> = { ...world.ambientEnv, ...(control.info.home !== undefined ? { HOME: control.info.home } : {}), ...this.worldVariables }
    this.adjustEnvironment(base)
    return userEnvironment(base, await control.userFacts(), this.settings.locale ?? 'auto', this.callerLang)
  }
}
