/**
 * `DockerSubprocessRuntime`: DSH's subprocess seam (`ctx.subprocess`) in a Docker container.
 * @module dsh-remote-worlds/providers/docker/docker-runtime
 */
import type { Context } from '@deepseek-ai/cordis'
import type { SubprocessHandle, SubprocessSpawnSpec, SubprocessTerminalHandle, SubprocessTerminalSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import Docker from 'dockerode'
import type { z } from 'zod'
import { DockerRuntimeConfig } from './docker-config.ts'
import type { ControlChannel } from '../remote/control-channel.ts'
import { type UserEnvironment, remoteChildEnv, userEnvironment } from '../remote/environment.ts'
import { ControlChannelError, InvalidArgumentError, PersistenceUnavailableError } from '../remote/errors.ts'
import type { ProcessTransport } from '../remote/process.ts'
import { checkSpawnSpec, resolveRemoteExecutable } from '../remote/process-runtime.ts'
import { RemoteSubprocessRuntime, parseRuntimeConfig } from '../remote/runtime.ts'
import { WORLD_OWNER } from '../remote/world-owner.ts'
import { type TerminalTransport, startRemoteTerminal } from '../remote/terminal.ts'
import { openHeldTerminal } from '../remote/pty-holder/held-terminal.ts'
import { terminalHolder } from '../remote/pty-holder/holder-install.ts'
import { heldShellLabel, planHeldShell } from '../remote/pty-holder/held-shell.ts'
import { persistenceChoice } from '../remote/pty-holder/persistence.ts'
import { warmEmulatorWorker } from '../../emulator/host.ts'
import { emulatorChoice } from '../../emulator/settings.ts'
import { DockerWorld, execUserRefusal } from './docker-world.ts'
import { dockerCreateOptions, mergeCreateOptions, workspaceOwnerUser } from '../../sandbox/docker-policy.ts'
import { dockerSandboxCompanion } from '../../sandbox/docker-companion.ts'
import { DevcontainerUserNotFoundError, type ResolvedDevcontainer, resolveDevcontainer } from '../../devcontainer/index.ts'


/** Extra construction options that are objects, not plain config. */
export interface DockerRuntimeExtras {
  /** Use this engine connection instead of building one from `socketPath`. */
  docker?: Docker
  /** Create fields merged over a managed container's (over the policy mapping's, when `policy` is set). */
  create?: Docker.ContainerCreateOptions
}


/**
 * The subprocess seam over a Docker container. `spawnTerminal` runs a PTY exec (`Tty: true`)
 * with the start wrapper; foreground probing, signals and teardown go through one control
 * channel per exec user. The container is opened lazily on first use. Disposal of the cordis
 * scope terminates every terminal (proving quiescence), closes the control channels and, for a
 * managed container, removes it.
 *
 * `spawn` runs a non-TTY exec with the process wrapper (remote/process.ts): the program in its
 * own session, stdout and stderr demultiplexed, spills written by `tee` into a private state
 * directory in the container (removed at disposal), the real wait status (signal names
 * included) reported by the wrapper. `resolveExecutable` asks the control channel.
 *
 * With `devcontainer: { folder, config? }` the world is the folder's dev container
 * (src/devcontainer), found when the world opens: the exec user is `user`, else the
 * devcontainer.json's `remoteUser`, else its `containerUser` (see {@link execUser}), and
 * `remoteEnv` is added to the environment of terminals and spawned processes, after the
 * container's own and before the spec's env. A configured user the container lacks fails the
 * opening (DevcontainerUserNotFoundError), before anything runs.
 *
 * Limits: a terminal's exit status comes from ExecInspect, where the engine reports a signal
 * death as 128+N (the terminal's `signal` field is therefore always null).
 */
export class DockerSubprocessRuntime extends RemoteSubprocessRuntime<DockerWorld> {
  /** How openWorld gets a same-world `ctx.sandbox` for this runtime (src/sandbox/docker-companion.ts). */
  static readonly sandboxCompanion = dockerSandboxCompanion
  /** The validated configuration. */
  readonly config: z.output<typeof DockerRuntimeConfig>
  private readonly extras: DockerRuntimeExtras
  /** Create options of a managed container: the policy mapping (when `policy` is set) under `extras.create`. */
  private readonly createOptions: Docker.ContainerCreateOptions | undefined
  /** The dev container and its applied configuration, once the world opened (`devcontainer` config only). */
  private resolvedDevcontainer: ResolvedDevcontainer | undefined

  /**
   * @param ctx - cordis context the service registers in (as `ctx.subprocess`).
   * @param config - see {@link DockerRuntimeConfig}.
   * @param extras - objects that are not plain config (engine connection, create overrides).
   * @throws InvalidArgumentError for an invalid config, or a policy the mapping refuses (e.g. a root user under a confined mode).
   */
  constructor(ctx: Context, config: DockerRuntimeConfig, extras: DockerRuntimeExtras = {}) {
    const parsed = parseRuntimeConfig(DockerRuntimeConfig, config, 'Docker')
    super(ctx, 'docker', { reapOrphans: parsed.reapOrphans })
    this.config = parsed
    this.persistence = persistenceChoice(parsed.persistence)
    if (this.persistence.mode === 'client' && parsed.image !== undefined) throw new PersistenceUnavailableError(`a managed container (image ${parsed.image}) ends with its client, so its shells cannot outlive it: persistence 'client' needs an attached container (\`container\`), a dev container or an SSH host; 'connection' works here`)
    // The terminals' emulator worker loads while the world opens (emulator/host.ts).
    if (emulatorChoice(parsed.terminal) !== undefined) warmEmulatorWorker()
    this.extras = extras
    const { policy, image } = parsed
    this.createOptions = policy !== undefined && image !== undefined
      ? mergeCreateOptions(dockerCreateOptions({ ...policy, workspace: parsed.workspace, user: parsed.user ?? (policy !== undefined ? workspaceOwnerUser(parsed.workspace, policy.mode) : undefined), limits: parsed.limits }), extras.create)
      : extras.create
  }

  /**
   * Attach to the container (a dev container: found first, see {@link devcontainer}) or create
   * the managed one (see {@link RemoteSubprocessRuntime.world}).
   * @throws TargetNotFoundError, TargetNotRunningError, EngineUnavailableError (see {@link DockerWorld.open});
   *   for a dev container also the errors of `resolveDevcontainer` (src/devcontainer), e.g.
   *   DevcontainerNotFoundError, DevcontainerAmbiguousError, DevcontainerStoppedError, and
   *   DevcontainerUserNotFoundError (see {@link checkDevcontainerUser}).
   */
  protected async openWorld(): Promise<DockerWorld> {
    const docker = this.extras.docker ?? new Docker(this.config.socketPath === undefined ? undefined : { socketPath: this.config.socketPath })
    let container = this.config.container
    let resolved: ResolvedDevcontainer | undefined
    if (this.config.devcontainer !== undefined) {
      const { folder, config, start } = this.config.devcontainer
      resolved = await resolveDevcontainer(folder, { docker, config, start })
      this.resolvedDevcontainer = resolved
      container = resolved.container
    }
    const world = await DockerWorld.open({ docker, container, image: this.config.image, create: this.createOptions, controlRequestTimeoutMs: this.config.controlTimeoutMs, ownership: this.ownership })
    if (resolved !== undefined && this.config.user === undefined && resolved.user !== undefined) await this.checkDevcontainerUser(world, resolved, resolved.user)
    return world
  }

  /**
   * Start the configured user's control channel now (the one every terminal and process of this
   * runtime uses; it is kept), so a user the container lacks fails the opening with the file and
   * property that name it, not the first terminal with the engine's words. The world is released
   * when the check fails.
   * @throws DevcontainerUserNotFoundError when the engine refuses the user (docker-world.ts `execUserRefusal`); otherwise the channel's own error.
   */
  private async checkDevcontainerUser(world: DockerWorld, resolved: ResolvedDevcontainer, user: string): Promise<void> {
    try {
      await world.control(user)
    } catch (error) {
      await world.dispose().catch(() => undefined)
      const refusal = execUserRefusal(error)
      throw refusal === undefined ? error : new DevcontainerUserNotFoundError(resolved, user, refusal, { cause: error })
    }
  }

  /**
   * The dev container this runtime attached to and what of its devcontainer.json is applied
   * (user, workspace folder, remoteEnv) or not; undefined before the world opened, and for a
   * runtime configured with `container` or `image`.
   */
  get devcontainer(): ResolvedDevcontainer | undefined {
    return this.resolvedDevcontainer
  }

  /**
   * The exec user of terminals, processes and the control channel: the configured `user`,
   * which wins; else, for a dev container, its configured user (`remoteUser`, else
   * `containerUser`, known once the world opened); else undefined (the container's own user).
   */
  get execUser(): string | undefined {
    return this.config.user ?? this.resolvedDevcontainer?.user
  }

  protected async disposalControl(world: DockerWorld): Promise<ControlChannel> {
    return world.control(this.execUser)
  }

  /** The control channel of this runtime's exec user (opens the world on first use). */
  async control(): Promise<ControlChannel> {
    return (await this.world()).control(this.execUser)
  }

  /** Short description of the world for messages. */
  describe(): string {
    if (this.config.devcontainer !== undefined) return `dev container of ${this.config.devcontainer.folder}${this.resolvedDevcontainer === undefined ? '' : ` (docker container ${this.resolvedDevcontainer.container.slice(0, 12)})`}`
    return this.config.container !== undefined ? `docker container ${this.config.container}` : `managed container from ${this.config.image}`
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
    return openHeldTerminal(await world.openHolder(holder.path, user), { ...start, where: world.describe(user) })
  }

  /** @inheritdoc */
  async spawnTerminal(spec: SubprocessTerminalSpawnSpec): Promise<SubprocessTerminalHandle> {
    this.assertOpen()
    spec.signal?.throwIfAborted()
    const world = await this.world()
    const user = this.execUser
    const control = await world.control(user)
    const { ambient } = await this.environmentOf(world, control)
    const common = {
      spec,
      program: this.wrappedProgram(spec.argv),
      env: remoteChildEnv(ambient, spec.env),
      control,
      where: world.describe(user),
      emulator: emulatorChoice(this.config.terminal),
      // Not `!alive()`: a paused container has not ended (see ended()).
      worldEnded: () => world.ended(user),
      // A failed channel (a request timed out) is replaced for the teardown; a paused container refuses.
      recoverControl: () => world.recoverControl(user),
      onTerminated: this.forgetTerminal,
    }
    // Persistence 'client': the held shell this spec names, when this user recorded one.
    const key = this.heldKey(spec)
    const target = `docker:${world.containerId}:${user ?? ''}`
    const taken = key === undefined ? {} : await this.takeBackTerminal(key, target, common)
    if (taken.handle !== undefined) return this.adoptTerminal(taken.handle)
    // A held shell (persistence): its tag names its holder, which no client's reaper outlives.
    const held = this.persistence.mode === 'off' ? undefined : planHeldShell(control.info.uid)
    const handle = await startRemoteTerminal({
      ...common,
      tag: held?.tag ?? this.ownership.newTag(),
      open: script => held === undefined
        ? this.openTerminalTransport(world, user, { script, rows: spec.rows, cols: spec.cols })
        : this.heldTerminalTransport(held, { script, rows: spec.rows, cols: spec.cols, where: world.describe(user) }, command => world.openProcess(command, user, { stdin: true }), { key: key ?? '', label: heldShellLabel(spec) }),
    })
    handle.previousEnding = taken.ended
    if (held !== undefined && key !== undefined) await this.recordHeldShell(handle, held, key, target, control, spec)
    return this.adoptTerminal(handle)
  }

  /**
   * Start one process in the container (a non-TTY exec running the process wrapper; see
   * remote/process.ts). Returns at once; `pid` is the remote pid once published (-1 before).
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
   * with the user's HOME, a dev container's `remoteEnv` over them, then the locale and a private
   * HOME where needed (see remote/environment.ts `userEnvironment`). Opens the world on first use.
   */
  async userEnvironment(): Promise<UserEnvironment> {
    const world = await this.world()
    return this.environmentOf(world, await world.control(this.execUser))
  }

  private async environmentOf(world: DockerWorld, control: ControlChannel): Promise<UserEnvironment> {
    const base: Record<string, string> = { ...world.ambientEnv, ...(control.info.home !== undefined ? { HOME: control.info.home } : {}) }
    // remoteEnv: after the container's environment, before the spec's env (the Dev Containers
    // specification: "for the supporting tool and its sub-processes like terminals"). It is
    // scrubbed with the rest of the ambient environment (remoteChildEnv), so a credential-shaped
    // name does not reach the shell; doctor names those.
    const devcontainer = this.resolvedDevcontainer
    if (devcontainer !== undefined) {
      Object.assign(base, devcontainer.remoteEnv)
      for (const name of devcontainer.unset) delete base[name]
    }
    return userEnvironment(base, await control.userFacts(), this.config.locale ?? 'auto', this.callerLang)
  }
}

export { DockerRuntimeConfig }

export default DockerSubprocessRuntime
