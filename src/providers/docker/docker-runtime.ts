/**
 * `DockerSubprocessRuntime`: DSH's subprocess seam (`ctx.subprocess`) in a Docker container.
 * @module dsh-remote-worlds/providers/docker/docker-runtime
 */
import type { Context } from '@deepseek-ai/cordis'
import Docker from 'dockerode'
import type { z } from 'zod'
import { DockerRuntimeConfig } from './docker-config.ts'
import { parseRuntimeConfig } from '../remote/runtime.ts'
import { PersistenceUnavailableError } from '../remote/errors.ts'
import { persistenceChoice } from '../remote/pty-holder/persistence.ts'
import { DockerWorld, execUserRefusal } from './docker-world.ts'
import { DockerWorldRuntime } from './docker-world-runtime.ts'
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
export class DockerSubprocessRuntime extends DockerWorldRuntime {
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
    super(ctx, 'docker', parsed)
    this.config = parsed
    this.persistence = persistenceChoice(parsed.persistence)
    if (this.persistence.mode === 'client' && parsed.image !== undefined) throw new PersistenceUnavailableError(`a managed container (image ${parsed.image}) ends with its client, so its shells cannot outlive it: persistence 'client' needs an attached container (\`container\`), a dev container or an SSH host; 'connection' works here`)
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

  /** Short description of the world for messages. */
  describe(): string {
    if (this.config.devcontainer !== undefined) return `dev container of ${this.config.devcontainer.folder}${this.resolvedDevcontainer === undefined ? '' : ` (docker container ${this.resolvedDevcontainer.container.slice(0, 12)})`}`
    return this.config.container !== undefined ? `docker container ${this.config.container}` : `managed container from ${this.config.image}`
  }

  /**
   * A dev container's `remoteEnv`, after the container's environment and before the spec's
   * env (the Dev Containers specification: "for the supporting tool and its sub-processes like
   * terminals"). It is scrubbed with the rest of the ambient environment (remoteChildEnv), so a
   * credential-shaped name does not reach the shell; doctor names those.
   */
  protected override adjustEnvironment(base: Record<string, string>): void {
    const devcontainer = this.resolvedDevcontainer
    if (devcontainer === undefined) return
    Object.assign(base, devcontainer.remoteEnv)
    for (const name of devcontainer.unset) delete base[name]
  }
}

export { DockerRuntimeConfig }

export default DockerSubprocessRuntime
