/**
 * `DockerSubprocessRuntime`: DSH's subprocess seam (`ctx.subprocess`) in a Docker container.
 * @module dsh-remote-worlds/providers/docker/docker-runtime
 */
import type { Context } from '@deepseek-ai/cordis'
import { SubprocessRuntime } from '@deepseek-ai/dsh-subprocess'
import type { SubprocessHandle, SubprocessSpawnSpec, SubprocessTerminalHandle, SubprocessTerminalSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import Docker from 'dockerode'
import { z } from 'zod'
import type { ControlChannel } from '../remote/control-channel.ts'
import { remoteChildEnv } from '../remote/environment.ts'
import { InvalidArgumentError, NotSupportedError, WorldClosedError } from '../remote/errors.ts'
import { type RemoteTerminalHandle, startRemoteTerminal } from '../remote/terminal.ts'
import { DockerWorld } from './docker-world.ts'

/** Configuration of {@link DockerSubprocessRuntime}; validated with zod at construction. */
export const DockerRuntimeConfig = z.object({
  /** Attach to this existing, running container (name or id). */
  container: z.string().min(1).optional(),
  /** Or run a managed throwaway container from this image (removed at disposal). */
  image: z.string().min(1).optional(),
  /** Exec user (`name`, `uid`, `uid:gid`); the control channel runs as the same user. Default: the image's user. */
  user: z.string().min(1).optional(),
  /** Docker engine socket; default: dockerode's (`DOCKER_HOST` or /var/run/docker.sock). */
  socketPath: z.string().min(1).optional(),
}).strict().refine(config => (config.container === undefined) !== (config.image === undefined), {
  message: 'exactly one of `container` or `image` is required',
})

/** Input shape of {@link DockerRuntimeConfig}. */
export type DockerRuntimeConfig = z.input<typeof DockerRuntimeConfig>

/** Extra construction options that are objects, not plain config. */
export interface DockerRuntimeExtras {
  /** Use this engine connection instead of building one from `socketPath`. */
  docker?: Docker
  /** Create fields merged into a managed container (the sandbox mapping sets HostConfig). */
  create?: Docker.ContainerCreateOptions
}

/**
 * The subprocess seam over a Docker container. `spawnTerminal` runs a PTY exec (`Tty: true`)
 * with the start wrapper; foreground probing, signals and teardown go through one control
 * channel per exec user. The container is opened lazily on first use. Disposal of the cordis
 * scope terminates every terminal (proving quiescence), closes the control channels and, for a
 * managed container, removes it.
 *
 * Limits: `spawn` and `resolveExecutable` are not implemented yet and throw
 * {@link NotSupportedError}. Exit statuses come from ExecInspect, where the engine reports a
 * signal death as 128+N (the `signal` field is therefore always null).
 */
export class DockerSubprocessRuntime extends SubprocessRuntime {
  /** The validated configuration. */
  readonly config: z.output<typeof DockerRuntimeConfig>
  private readonly extras: DockerRuntimeExtras
  private worldPromise: Promise<DockerWorld> | undefined
  private readonly terminals = new Set<RemoteTerminalHandle>()
  private disposing = false

  /**
   * @param ctx - cordis context the service registers in (as `ctx.subprocess`).
   * @param config - see {@link DockerRuntimeConfig}.
   * @throws InvalidArgumentError for an invalid config.
   */
  constructor(ctx: Context, config: DockerRuntimeConfig, extras: DockerRuntimeExtras = {}) {
    super(ctx)
    const parsed = DockerRuntimeConfig.safeParse(config)
    if (!parsed.success) throw new InvalidArgumentError(`invalid Docker world config: ${parsed.error.issues.map(issue => `${issue.path.join('.') || 'config'}: ${issue.message}`).join('; ')}`)
    this.config = parsed.data
    this.extras = extras
    ctx.effect(() => () => this.dispose(), 'docker subprocess teardown')
  }

  /**
   * The container world, opened on first call.
   * @throws TargetNotFoundError, TargetNotRunningError, EngineUnavailableError (see {@link DockerWorld.open}).
   */
  world(): Promise<DockerWorld> {
    if (this.disposing) return Promise.reject(new WorldClosedError())
    if (this.worldPromise === undefined) {
      const docker = this.extras.docker ?? new Docker(this.config.socketPath === undefined ? undefined : { socketPath: this.config.socketPath })
      const opening = DockerWorld.open({ docker, container: this.config.container, image: this.config.image, create: this.extras.create })
      this.worldPromise = opening
      opening.catch(() => { if (this.worldPromise === opening) this.worldPromise = undefined })
    }
    return this.worldPromise
  }

  /** The control channel of this runtime's exec user (opens the world on first use). */
  async control(): Promise<ControlChannel> {
    return (await this.world()).control(this.config.user)
  }

  /** Short description of the world for messages. */
  describe(): string {
    return this.config.container !== undefined ? `docker container ${this.config.container}` : `managed container from ${this.config.image}`
  }

  /** @inheritdoc */
  async spawnTerminal(spec: SubprocessTerminalSpawnSpec): Promise<SubprocessTerminalHandle> {
    if (this.disposing) throw new WorldClosedError()
    spec.signal?.throwIfAborted()
    const world = await this.world()
    const user = this.config.user
    const control = await world.control(user)
    const ambient = { ...world.ambientEnv, ...(control.info.home !== undefined ? { HOME: control.info.home } : {}) }
    const handle = await startRemoteTerminal({
      spec,
      env: remoteChildEnv(ambient, spec.env),
      control,
      where: world.describe(user),
      open: script => world.openTerminal(script, user),
      worldEnded: async () => !(await world.running()),
      onTerminated: terminated => { this.terminals.delete(terminated) },
    })
    if (this.disposing) {
      await handle.terminate()
      throw new WorldClosedError()
    }
    this.terminals.add(handle)
    return handle
  }

  /** Not implemented yet in the Docker world. @throws NotSupportedError always. */
  spawn(_spec: SubprocessSpawnSpec): SubprocessHandle {
    throw new NotSupportedError('DockerSubprocessRuntime.spawn is not supported yet; use spawnTerminal')
  }

  /** Not implemented yet in the Docker world. @throws NotSupportedError always. */
  async resolveExecutable(_command: string, _env?: Readonly<Record<string, string>>, _signal?: AbortSignal): Promise<string> {
    throw new NotSupportedError('DockerSubprocessRuntime.resolveExecutable is not supported yet')
  }

  /**
   * Terminate every live terminal (quiescence proven), close the control channels, remove a
   * managed container. Idempotent.
   * @throws AggregateError listing every terminal whose teardown failed (the container is still removed).
   */
  async dispose(): Promise<void> {
    if (this.disposing) return
    this.disposing = true
    const outcomes = await Promise.allSettled([...this.terminals].map(handle => handle.terminate()))
    const failures = outcomes.flatMap(outcome => outcome.status === 'rejected' ? [outcome.reason as unknown] : [])
    const world = this.worldPromise === undefined ? undefined : await this.worldPromise.catch(() => undefined)
    await world?.dispose()
    if (failures.length > 0) throw new AggregateError(failures, 'docker subprocess teardown failed')
  }
}

export default DockerSubprocessRuntime
