/**
 * `SwarmSubprocessRuntime`: DSH's subprocess seam (`ctx.subprocess`) in a world the swarm
 * schedules. The world is a one-replica service created from the sandbox policy
 * (service-spec.ts); its task's container, on its node's engine, runs the Docker world's
 * mechanism unchanged (providers/docker/docker-world-runtime.ts). Disposal ends every process
 * and terminal, removes the service and proves its container gone (swarm-world.ts).
 * @module dsh-remote-worlds/providers/swarm/swarm-runtime
 */
import type { Context } from '@deepseek-ai/cordis'
import type Docker from 'dockerode'
import type { z } from 'zod'
import { DockerWorldRuntime } from '../docker/docker-world-runtime.ts'
import type { DockerWorld } from '../docker/docker-world.ts'
import { TargetNotFoundError } from '../remote/errors.ts'
import { parseRuntimeConfig } from '../remote/runtime.ts'
import { dockerCreateOptions, workspaceOwnerUser } from '../../sandbox/docker-policy.ts'
import { EngineConnection } from './endpoints.ts'
import type { SwarmNodeLostError } from './errors.ts'
import { type SwarmReapReport, reapSwarmWorlds } from './reap.ts'
import { SwarmRuntimeConfig } from './swarm-config.ts'
import { SwarmWorld, mapNodes } from './swarm-world.ts'
import type { TaskFacts } from './task-facts.ts'
import { swarmSandboxCompanion } from './sandbox.ts'

/** Default bound of the task's placement and start (ms). */
export const DEFAULT_SCHEDULE_TIMEOUT_MS = 30_000

/**
 * The subprocess seam over a swarm world (see the module documentation). The world opens on
 * first use: the service is created, its task awaited, and the Docker world attached on the
 * task's node; what gone clients left in the swarm is reaped then too (reap.ts, unless
 * `reapOrphans: false`).
 *
 * After the world's node is lost (its keepalive: node-watch.ts), every call rejects with
 * {@link SwarmNodeLostError}; open a new runtime for a new world.
 */
export class SwarmSubprocessRuntime extends DockerWorldRuntime {
  /** How openWorld gets a same-world `ctx.sandbox` for this runtime (sandbox.ts). */
  static readonly sandboxCompanion = swarmSandboxCompanion
  /** The validated configuration. */
  readonly config: z.output<typeof SwarmRuntimeConfig>
  /** Create options of the service's container: the policy mapping (when `policy` is set). */
  private readonly createOptions: Docker.ContainerCreateOptions
  private readonly manager: EngineConnection
  private readonly nodes: EngineConnection[]
  private opened: SwarmWorld | undefined
  private lostError: SwarmNodeLostError | undefined
  private reaping: Promise<SwarmReapReport> | undefined

  /**
   * @param config - see {@link SwarmRuntimeConfig}.
   * @throws InvalidArgumentError for an invalid config or endpoint, or a policy the mapping
   *   refuses (a root user under a confined mode, say).
   */
  constructor(ctx: Context, config: SwarmRuntimeConfig) {
    const parsed = parseRuntimeConfig(SwarmRuntimeConfig, config, 'swarm')
    super(ctx, 'swarm', parsed)
    this.config = parsed
    const { policy } = parsed
    this.createOptions = policy === undefined ? {} : dockerCreateOptions({ ...policy, workspace: parsed.workspace, user: parsed.user ?? workspaceOwnerUser(parsed.workspace, policy.mode), limits: parsed.limits })
    this.manager = new EngineConnection(parsed.manager)
    // The manager's endpoint serves as its node's too, unless that node is listed.
    this.nodes = [this.manager, ...(parsed.nodes ?? []).filter(node => node.host !== parsed.manager.host).map(node => new EngineConnection(node))]
  }

  /**
   * Create the world's service and attach to its task (swarm-world.ts `SwarmWorld.open`).
   * @throws TargetNotFoundError when the manager's engine does not hold the image; the errors
   *   of SwarmWorld.open (SwarmNotManagerError, SwarmTaskUnschedulableError, ...).
   */
  protected async openWorld(): Promise<DockerWorld> {
    const opened = await SwarmWorld.open({
      manager: this.manager,
      nodes: this.nodes,
      image: await this.imageId(),
      owner: this.ownership.clientId,
      create: this.createOptions,
      reservations: this.config.reservations,
      placement: this.config.placement,
      network: this.config.network,
      execUser: this.execUser,
      scheduleTimeoutMs: this.config.scheduleTimeoutMs ?? DEFAULT_SCHEDULE_TIMEOUT_MS,
      keepalive: this.config.keepalive,
      controlRequestTimeoutMs: this.config.controlTimeoutMs,
      ownership: this.ownership,
    })
    this.opened = opened
    void opened.watch.lost.then(error => { this.lostError = error })
    if (this.config.reapOrphans !== false) {
      this.reaping = this.reapSwarm({ dryRun: false })
      this.reaping.catch(() => undefined)
    }
    return opened.world
  }

  /**
   * The image's ID: given as `sha256:...`, or the manager's engine's ID for the name.
   * @throws TargetNotFoundError when the manager's engine does not hold it.
   */
  private async imageId(): Promise<string> {
    const { image } = this.config
    if (/^sha256:[0-9a-f]{64}$/.test(image)) return image
    try {
      return (await this.manager.docker.getImage(image).inspect()).Id
    } catch (error) {
      throw new TargetNotFoundError(`image ${image} is not on the swarm manager's engine ${this.manager.host} (${(error as Error).message}): load it into every node (docker save ${image} | docker -H NODE load); nodes never pull it, the service names it by ID`, { cause: error })
    }
  }

  /**
   * Find (and unless `dryRun`, remove) the swarm worlds gone clients left, through this
   * runtime's manager and node endpoints (reap.ts), never this client's own.
   * @throws EngineUnavailableError when the manager does not answer.
   */
  async reapSwarm(options: { dryRun: boolean }): Promise<SwarmReapReport> {
    return reapSwarmWorlds(this.manager, await mapNodes(this.nodes), { dryRun: options.dryRun, exceptOwner: this.ownership.clientId })
  }

  /** The world once open: its service, task, node and the facts its task proved; undefined before. */
  get swarm(): SwarmWorld | undefined {
    return this.opened
  }

  /** What the world's task proved about itself (task-facts.ts); undefined before the world opened. */
  get taskFacts(): TaskFacts | undefined {
    return this.opened?.facts
  }

  /** The reap of gone clients' swarm worlds this runtime started when its world opened, settled; undefined when none ran. */
  async swarmReaped(): Promise<PromiseSettledResult<SwarmReapReport> | undefined> {
    if (this.reaping === undefined) return undefined
    const [settled] = await Promise.allSettled([this.reaping])
    return settled
  }

  /**
   * The world (see {@link RemoteSubprocessRuntime.world}), or, once its node was lost,
   * a rejection with {@link SwarmNodeLostError}.
   */
  override world(): Promise<DockerWorld> {
    if (this.lostError !== undefined) return Promise.reject(this.lostError)
    return super.world()
  }

  /** The exec user: the configured `user`, else the service's own. */
  get execUser(): string | undefined {
    return this.config.user
  }

  /** Short description of the world for messages. */
  describe(): string {
    return this.opened?.describe() ?? `swarm world from ${this.config.image} via ${this.manager.host}`
  }

  /**
   * End every process and terminal (each proving quiescence), close the Docker world, then
   * remove the service and prove its container gone on its node. Idempotent.
   * @throws AggregateError listing every teardown that failed (everything else is still done).
   */
  override async dispose(): Promise<void> {
    const failures: unknown[] = []
    await super.dispose().catch((error: unknown) => { failures.push(...(error instanceof AggregateError ? error.errors : [error])) })
    await this.reaping?.catch(() => undefined)
    await this.opened?.close().catch((error: unknown) => { failures.push(error) })
    if (failures.length > 0) throw new AggregateError(failures, 'swarm subprocess teardown failed')
  }
}

export { SwarmRuntimeConfig }

export default SwarmSubprocessRuntime
