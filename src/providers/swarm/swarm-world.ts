/**
 * One swarm world: a one-replica service whose task's container, on its node's engine, is a
 * {@link DockerWorld} attached as any container is. Nothing here schedules: the swarm's own
 * scheduler places the task (the constraints, preferences and reservations the user named, plus
 * `node.id!=` for nodes this client cannot reach).
 *
 * Opening: the manager creates the service (service-spec.ts); the task runs (task.ts); its node
 * is found among the configured endpoints by the NodeID each engine reports (endpoints.ts); the
 * Docker world attaches to the container on that engine; the lifeline is held (lifeline.ts);
 * what the service could not express is read in the task (task-facts.ts); the node's keepalive
 * starts (node-watch.ts). Any failure after the service exists removes it again.
 *
 * Closing: the lifeline ends (pid 1 exits), the manager removes the service, and the node's
 * engine must answer 404 for the container (the proof that nothing of the world is left there),
 * then the scratch volumes are removed there.
 * @module dsh-remote-worlds/providers/swarm/swarm-world
 */
import { randomBytes } from 'node:crypto'
import type { Duplex } from 'node:stream'
import { setTimeout as delay } from 'node:timers/promises'
import type Docker from 'dockerode'
import { DockerWorld, engineError } from '../docker/docker-world.ts'
import { RemoteWorldError } from '../remote/errors.ts'
import type { SessionOwnership } from '../remote/ownership.ts'
import type { EngineConnection, EngineIdentity } from './endpoints.ts'
import { SwarmCleanupUnprovenError, SwarmNodeUnreachableError, SwarmNotManagerError } from './errors.ts'
import { holdLifeline } from './lifeline.ts'
import { DEFAULT_KEEPALIVE, type KeepaliveSettings, NodeWatch } from './node-watch.ts'
import { type SwarmServiceRequest, serviceSpec } from './service-spec.ts'
import { type TaskFacts, readTaskFacts } from './task-facts.ts'
import { type RunningTask, type SwarmNodeInfo, waitForTask } from './task.ts'

/**
 * How long a reachability check of a node's engine may take at open (ms): the keepalive's bound
 * (node-watch.ts), past which a world there would be declared lost anyway. A unix socket with no
 * engine behind it refuses at once.
 */
const REACH_BOUND_MS = DEFAULT_KEEPALIVE.intervalMs * (DEFAULT_KEEPALIVE.countMax + 1)

/** How long teardown waits for the node's engine to forget the container (ms). */
const GONE_BOUND_MS = 30_000

/** Options of {@link SwarmWorld.open}: the service's (service-spec.ts; its name is made here) and the world's. */
export interface SwarmWorldOptions extends Omit<SwarmServiceRequest, 'name'> {
  /** The manager's connection (services and tasks are asked there). */
  manager: EngineConnection
  /** Every configured node engine (the manager's may be among them). */
  nodes: readonly EngineConnection[]
  /** The exec user of the world (the facts are read as it). */
  execUser: string | undefined
  /** How long the task may take to be placed and start (ms). */
  scheduleTimeoutMs: number
  keepalive?: KeepaliveSettings | undefined
  /** Reply bound of each control request (ms), for the Docker world. */
  controlRequestTimeoutMs?: number | undefined
  /** The client's session ownership, for the Docker world. */
  ownership?: SessionOwnership | undefined
}

/** The nodes this client reaches, by swarm NodeID, and what became of the others. */
export interface NodeMap {
  /** Connection and engine facts per NodeID. */
  reachable: Map<string, { connection: EngineConnection; identity: EngineIdentity }>
  /** Endpoints whose engine did not answer, with why. */
  silent: { host: string; reason: string }[]
}

/**
 * Ask every endpoint's engine which node it is (`/info` Swarm.NodeID).
 * @returns the nodes that answered with an id, and the endpoints that did not.
 */
export async function mapNodes(nodes: readonly EngineConnection[]): Promise<NodeMap> {
  const reachable: NodeMap['reachable'] = new Map()
  const silent: NodeMap['silent'] = []
  await Promise.all(nodes.map(async connection => {
    if (!(await connection.answers(REACH_BOUND_MS))) {
      silent.push({ host: connection.host, reason: `no answer within ${REACH_BOUND_MS} ms` })
      return
    }
    try {
      const identity = await connection.identity()
      if (identity.nodeId === '' || identity.state !== 'active') silent.push({ host: connection.host, reason: `its engine is in no swarm (Swarm.LocalNodeState ${identity.state})` })
      else reachable.set(identity.nodeId, { connection, identity })
    } catch (error) {
      silent.push({ host: connection.host, reason: (error as Error).message })
    }
  }))
  return { reachable, silent }
}

/**
 * The manager's identity, checked to be an active manager.
 * @throws SwarmNotManagerError when its engine is in no swarm or is a worker.
 * @throws EngineUnavailableError when it does not answer.
 */
export async function managerIdentity(manager: EngineConnection): Promise<EngineIdentity> {
  const identity = await manager.identity()
  if (identity.state !== 'active' || !identity.manager) {
    throw new SwarmNotManagerError(`docker engine ${manager.host} is not a swarm manager (Swarm.LocalNodeState ${identity.state}, manager ${identity.manager}): give the endpoint of a manager node (docker node ls there lists the swarm), and every node's engine as a node endpoint`)
  }
  return identity
}

/** A world's service, task, node and Docker world (see the module documentation). */
export class SwarmWorld {
  /** The Docker world of the task's container, on its node's engine. */
  readonly world: DockerWorld
  /** The service's id and name. */
  readonly service: { id: string; name: string }
  /** The running task. */
  readonly task: RunningTask
  /** The node's engine and what it says of itself. */
  readonly node: { connection: EngineConnection; identity: EngineIdentity }
  /** What the task proved about itself (task-facts.ts). */
  readonly facts: TaskFacts
  /** The node's keepalive; its `lost` settles when the node is lost. */
  readonly watch: NodeWatch
  private readonly manager: EngineConnection
  private readonly lifeline: Duplex
  private closed: Promise<void> | undefined

  private constructor(parts: { world: DockerWorld; service: { id: string; name: string }; task: RunningTask; node: SwarmWorld['node']; facts: TaskFacts; watch: NodeWatch; manager: EngineConnection; lifeline: Duplex }) {
    this.world = parts.world
    this.service = parts.service
    this.task = parts.task
    this.node = parts.node
    this.facts = parts.facts
    this.watch = parts.watch
    this.manager = parts.manager
    this.lifeline = parts.lifeline
  }

  /** Short description for messages: `swarm service NAME on node HOSTNAME`. */
  describe(): string {
    return `swarm service ${this.service.name} on node ${this.node.identity.name}`
  }

  /**
   * Create the world's service and attach to its task (see the module documentation).
   * @throws SwarmNotManagerError, EngineUnavailableError (the manager); InvalidArgumentError
   *   (service-spec.ts); SwarmTaskUnschedulableError, SwarmTaskFailedError (task.ts);
   *   SwarmNodeUnreachableError when no configured endpoint is the task's node; the Docker
   *   world's open errors; TransportError when the task's facts cannot be read.
   */
  static async open(options: SwarmWorldOptions): Promise<SwarmWorld> {
    const { manager } = options
    await managerIdentity(manager)
    const nodes = await mapNodes(options.nodes)
    let listed: SwarmNodeInfo[]
    try {
      listed = await manager.docker.listNodes() as SwarmNodeInfo[]
    } catch (error) {
      throw engineError(error, `swarm manager ${manager.host}: listing nodes`)
    }
    // The swarm places the task; it is only told which nodes this client could not attach to.
    const unreached = listed.filter(node => !nodes.reachable.has(node.ID))
    const excluded = unreached.length === 0 ? '' : `; left out, as no configured endpoint answers for them: ${unreached.map(node => `${node.Description?.Hostname ?? '?'} (${node.ID.slice(0, 12)})`).join(', ')}${nodes.silent.length === 0 ? '' : ` (endpoints that did not answer: ${nodes.silent.map(entry => `${entry.host}: ${entry.reason}`).join('; ')})`}`
    const name = `dsh-world-${randomBytes(6).toString('hex')}`
    const plan = serviceSpec({
      name,
      image: options.image,
      owner: options.owner,
      create: options.create,
      reservations: options.reservations,
      network: options.network,
      placement: { ...options.placement, constraints: [...options.placement?.constraints ?? [], ...unreached.map(node => `node.id!=${node.ID}`)] },
    })
    let serviceId: string
    try {
      serviceId = ((await manager.docker.createService(plan.spec)) as unknown as { id: string }).id
    } catch (error) {
      throw engineError(error, `swarm manager ${manager.host}: creating service ${name}`)
    }
    const describe = `swarm service ${name}`
    let world: DockerWorld | undefined
    let lifeline: Duplex | undefined
    let node: SwarmWorld['node'] | undefined
    try {
      const task = await waitForTask(manager.docker, serviceId, options.scheduleTimeoutMs, describe, excluded)
      node = nodes.reachable.get(task.nodeId)
      if (node === undefined) throw new SwarmNodeUnreachableError(`${describe}: its task runs on node ${task.nodeId}, and no configured endpoint is that node's engine: add it to the node endpoints`, task.nodeId)
      world = await DockerWorld.open({ docker: node.connection.docker, container: task.containerId, controlRequestTimeoutMs: options.controlRequestTimeoutMs, ownership: options.ownership })
      const opened = world
      lifeline = await holdLifeline(cmd => opened.startExec(cmd, { tty: false, user: undefined, stdin: true }))
      const facts = await readTaskFacts(world, options.execUser, plan.scratch)
      const watch = new NodeWatch(node.connection, task.nodeId, `node ${node.identity.name} (${task.nodeId.slice(0, 12)})`, options.keepalive ?? DEFAULT_KEEPALIVE)
      return new SwarmWorld({ world, service: { id: serviceId, name }, task, node, facts, watch, manager, lifeline })
    } catch (error) {
      lifeline?.destroy()
      await world?.dispose().catch(() => undefined)
      await removeService(manager, serviceId).catch(() => undefined)
      throw error
    }
  }

  /**
   * End the world's task and remove its service, then prove its container gone on its node and
   * remove its scratch volumes there. Idempotent (later calls share the first). The Docker world
   * must be disposed first (its terminals and control channels).
   * @throws SwarmCleanupUnprovenError when the node does not confirm the container gone within
   *   the bound (a lost node, say); EngineUnavailableError when the manager does not answer.
   */
  close(): Promise<void> {
    this.closed ??= this.closeOnce()
    return this.closed
  }

  private async closeOnce(): Promise<void> {
    this.watch.stop()
    this.lifeline.destroy()
    await removeService(this.manager, this.service.id)
    const lost = this.node.connection.failure
    if (lost !== undefined) throw new SwarmCleanupUnprovenError(`${this.describe()}: the service is removed, but its container ${this.task.containerId.slice(0, 12)} cannot be proven gone: ${lost.message}; the node's engine removes the container of a removed service when it answers again (doctor --reap lists what is left)`, { cause: lost })
    await removeTaskLeftovers(this.node.connection.docker, this.task.containerId, this.facts.scratch.map(volume => volume.name), this.describe())
  }
}

/**
 * Remove a service through the manager; one already gone counts as removed.
 * @throws EngineUnavailableError when the manager does not answer; TransportError otherwise.
 */
export async function removeService(manager: EngineConnection, serviceId: string): Promise<void> {
  try {
    await manager.docker.getService(serviceId).remove()
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode === 404) return
    throw error instanceof RemoteWorldError ? error : engineError(error, `swarm manager ${manager.host}: removing service ${serviceId}`)
  }
}

/**
 * Prove a removed service's container gone on its node (the engine answers 404 for it, within
 * {@link GONE_BOUND_MS}), then remove the world's scratch volumes there.
 * @param describe - the world for messages.
 * @throws SwarmCleanupUnprovenError when the container stays, the engine does not answer, or a
 *   volume cannot be removed.
 */
export async function removeTaskLeftovers(engine: Docker, containerId: string, volumes: readonly string[], describe: string): Promise<void> {
  const container = engine.getContainer(containerId)
  const deadline = Date.now() + GONE_BOUND_MS
  for (;;) {
    let failure: { statusCode?: number; message?: string } | undefined
    const gone = await container.inspect().then(() => false, (error: { statusCode?: number; message?: string }) => {
      failure = error
      return error.statusCode === 404
    })
    if (gone) break
    if (Date.now() >= deadline) {
      const why = failure === undefined ? 'its engine still lists the container' : `its engine does not answer (${failure.message ?? 'no answer'})`
      throw new SwarmCleanupUnprovenError(`${describe}: the service is removed, but its container ${containerId.slice(0, 12)} cannot be proven gone within ${GONE_BOUND_MS} ms: ${why}; the node's engine removes the container of a removed service when it answers again (doctor --reap lists what is left)`, { cause: failure })
    }
    await delay(failure === undefined ? 50 : 200)
  }
  for (const name of volumes) {
    await engine.getVolume(name).remove().catch((error: { statusCode?: number; message?: string }) => {
      if (error.statusCode !== 404) throw new SwarmCleanupUnprovenError(`${describe}: its scratch volume ${name} could not be removed: ${error.message ?? String(error)}`, { cause: error })
    })
  }
}
