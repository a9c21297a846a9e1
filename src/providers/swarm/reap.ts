/**
 * What clients that died left in a swarm: services labelled {@link SWARM_OWNER_LABEL} whose
 * world nobody holds any more, and the scratch volumes of services that are gone.
 *
 * A world is held while its lifeline EXEC runs on its node's engine (lifeline.ts): the engine
 * ends that exec when the client's connection closes, however the client ended, and nothing
 * inside the task can start or fake an exec. So a labelled service is left over when
 * - its task ended (pid 1 read its lifeline's EOF, or the task failed), or
 * - its task runs but no lifeline exec runs in its container, and the service is older than
 *   the lifeline deadline (its client died between creating it and attaching), or
 * - its task never ran and the service is older than the deadline.
 * A running task on a node whose engine this client cannot reach is not judged (it may be held
 * by a client that reaches it); it is reported as such.
 *
 * Removing a service makes each node's engine remove its container; the reaper then proves the
 * container gone and removes the world's scratch volumes (swarm-world.ts `removeTaskLeftovers`).
 * @module dsh-remote-worlds/providers/swarm/reap
 */
import type Docker from 'dockerode'
import { engineError } from '../docker/docker-world.ts'
import { isLifelineExec } from './lifeline.ts'
import { SWARM_OWNER_LABEL, SWARM_SERVICE_LABEL } from './service-spec.ts'
import type { EngineConnection } from './endpoints.ts'
import { type NodeMap, removeService, removeTaskLeftovers } from './swarm-world.ts'
import { serviceTask, taskEnded } from './task.ts'

/** How long a world may take from its service's creation to holding its lifeline (ms). */
export const LIFELINE_DEADLINE_MS = 60_000

/** One world a gone client left. */
export interface SwarmLeftover {
  /** Service name and id. */
  service: string
  id: string
  /** The owning client's id (its label). */
  owner: string
  /** Why it counts as left over. */
  why: string
}

/** What one reap found and did. */
export interface SwarmReapReport {
  /** Services of gone clients (removed unless dry run). */
  leftovers: SwarmLeftover[]
  /** Scratch volumes of gone services, as `NODE: NAME` (removed unless dry run). */
  volumes: string[]
  /** Services that could not be judged, with why. */
  unjudged: string[]
  /** Whether anything was removed. */
  reaped: boolean
  /** Removals that failed or could not be proven (the rest was done). */
  failures: string[]
}

/** Options of {@link reapSwarmWorlds}. */
export interface SwarmReapOptions {
  /** Only find; remove nothing (what `doctor` lists). */
  dryRun?: boolean | undefined
  /** Never judge this client's own services (the caller's client id). */
  exceptOwner?: string | undefined
  /** See {@link LIFELINE_DEADLINE_MS}. */
  lifelineDeadlineMs?: number | undefined
}

/** Whether a lifeline exec runs in the container (ExecInspect of each of its execs). */
async function lifelineRuns(engine: Docker, containerId: string): Promise<boolean> {
  const info = await engine.getContainer(containerId).inspect()
  const execs = await Promise.all((info.ExecIDs ?? []).map(id => engine.getExec(id).inspect().catch(() => undefined)))
  return execs.some(exec => exec?.Running === true && isLifelineExec(exec.ProcessConfig as { entrypoint?: string; arguments?: string[] }))
}

/**
 * Find (and unless `dryRun`, remove) what gone clients left in the swarm (see the module documentation).
 * @param nodes - the node engines this client reaches (swarm-world.ts `mapNodes`).
 * @throws EngineUnavailableError when the manager does not answer.
 */
export async function reapSwarmWorlds(manager: EngineConnection, nodes: NodeMap, options: SwarmReapOptions = {}): Promise<SwarmReapReport> {
  const deadline = options.lifelineDeadlineMs ?? LIFELINE_DEADLINE_MS
  let services: Docker.Service[]
  try {
    services = await manager.docker.listServices({ filters: { label: [SWARM_OWNER_LABEL] } })
  } catch (error) {
    throw engineError(error, `swarm manager ${manager.host}: listing services`)
  }
  const leftovers: (SwarmLeftover & { node?: string | undefined; containerId?: string | undefined })[] = []
  const unjudged: string[] = []
  await Promise.all(services.map(async service => {
    const name = service.Spec?.Name ?? service.ID
    const owner = service.Spec?.Labels?.[SWARM_OWNER_LABEL] ?? ''
    if (owner === options.exceptOwner) return
    const age = Date.now() - Date.parse(service.CreatedAt ?? '')
    const task = await serviceTask(manager.docker, service.ID)
    const state = task?.Status?.State
    const containerId = task?.Status?.ContainerStatus?.ContainerID || undefined
    const entry = { service: name, id: service.ID, owner, node: task?.NodeID, containerId }
    if (task === undefined || taskEnded(state)) {
      leftovers.push({ ...entry, why: task === undefined ? 'it has no task' : `its task ended (${state})` })
      return
    }
    if (state !== 'running') {
      if (age > deadline) leftovers.push({ ...entry, why: `its task is still ${state} ${Math.round(age / 1000)} s after the service was created` })
      return
    }
    const node = task.NodeID === undefined ? undefined : nodes.reachable.get(task.NodeID)
    if (node === undefined || containerId === undefined) {
      unjudged.push(`${name}: its task runs on node ${task.NodeID ?? '?'}, whose engine this client does not reach`)
      return
    }
    const held = await lifelineRuns(node.connection.docker, containerId).catch(() => undefined)
    if (held === undefined) unjudged.push(`${name}: its node's engine did not say whether its lifeline runs`)
    else if (!held && age > deadline) leftovers.push({ ...entry, why: 'no client holds its lifeline (the exec ended with its client)' })
  }))
  const failures: string[] = []
  if (options.dryRun !== true) {
    await Promise.all(leftovers.map(async leftover => {
      try {
        await removeService(manager, leftover.id)
        const node = leftover.node === undefined ? undefined : nodes.reachable.get(leftover.node)
        if (node !== undefined && leftover.containerId !== undefined) await removeTaskLeftovers(node.connection.docker, leftover.containerId, [], `swarm service ${leftover.service}`)
      } catch (error) {
        failures.push(`${leftover.service}: ${(error as Error).message}`)
      }
    }))
  }
  // Scratch volumes whose service no longer exists. A volume exists only once its service
  // does, so a service missing from a listing made AFTER the volumes were listed is gone.
  const listings = await Promise.all([...nodes.reachable.values()].map(async node => ({ node, listed: await node.connection.docker.listVolumes({ filters: { label: [SWARM_SERVICE_LABEL] } }).catch(() => undefined) })))
  const current = new Set((await manager.docker.listServices({ filters: { label: [SWARM_OWNER_LABEL] } }).catch(() => services)).map(service => service.Spec?.Name))
  const volumes: string[] = []
  await Promise.all(listings.map(async ({ node: { connection, identity }, listed }) => {
    for (const volume of listed?.Volumes ?? []) {
      if (current.has(volume.Labels?.[SWARM_SERVICE_LABEL])) continue
      volumes.push(`${identity.name}: ${volume.Name}`)
      if (options.dryRun !== true) {
        await connection.docker.getVolume(volume.Name).remove().catch((error: { statusCode?: number; message?: string }) => {
          if (error.statusCode !== 404) failures.push(`volume ${volume.Name} on ${identity.name}: ${error.message ?? String(error)}`)
        })
      }
    }
  }))
  return { leftovers: leftovers.map(({ service, id, owner, why }) => ({ service, id, owner, why })), volumes, unjudged, reaped: options.dryRun !== true, failures }
}
