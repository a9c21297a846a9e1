/**
 * The one task of a world's service, as the manager reports it (`GET /tasks`): where it runs
 * (`NodeID`) and which container is it (`Status.ContainerStatus.ContainerID`), or why it does
 * not run (`Status.Err`, else `Status.Message`, the scheduler's and the node's own words).
 * @module dsh-remote-worlds/providers/swarm/task
 */
import { setTimeout as delay } from 'node:timers/promises'
import type Docker from 'dockerode'
import { engineError } from '../docker/docker-world.ts'
import { SwarmTaskFailedError, SwarmTaskUnschedulableError } from './errors.ts'

/** What the manager reports of a task (`GET /tasks`; only the fields read here). */
export interface SwarmTaskInfo {
  ID: string
  ServiceID: string
  NodeID?: string
  CreatedAt?: string
  Status?: { State?: string; Err?: string; Message?: string; ContainerStatus?: { ContainerID?: string } }
}

/** What the manager reports of a node (`GET /nodes`; only the fields read here). */
export interface SwarmNodeInfo {
  ID: string
  Description?: { Hostname?: string }
  Status?: { State?: string }
}

/** A running task of a world. */
export interface RunningTask {
  /** The task id. */
  id: string
  /** The swarm node it runs on. */
  nodeId: string
  /** Its container on that node's engine. */
  containerId: string
}

/** Task states after which the task never runs (swarmkit api/types.proto TaskState). */
const ENDED = new Set(['complete', 'shutdown', 'failed', 'rejected', 'remove', 'orphaned'])

/** How often the manager is asked while the task is not running yet (ms). */
const POLL_MS = 100

/** True for a task state after which the task never runs. */
export function taskEnded(state: string | undefined): boolean {
  return state !== undefined && ENDED.has(state)
}

/** The scheduler's or the node's words about a task: `Status.Err`, else `Status.Message`. */
function taskReason(task: SwarmTaskInfo | undefined): string {
  return task?.Status?.Err || task?.Status?.Message || 'no task yet'
}

/** The service's newest task (a restart-none service has one; the history limit may keep none). */
export async function serviceTask(manager: Docker, serviceId: string): Promise<SwarmTaskInfo | undefined> {
  const tasks = await manager.listTasks({ filters: { service: [serviceId] } }) as SwarmTaskInfo[]
  return tasks.sort((a, b) => (b.CreatedAt ?? '').localeCompare(a.CreatedAt ?? ''))[0]
}

/**
 * Wait until the service's task runs in a container.
 * @param boundMs - how long a task may stay unscheduled or starting (ms).
 * @param describe - the service for messages, e.g. `swarm service dsh-world-0123`.
 * @param excluded - why nodes were left out of the placement, added to the refusal.
 * @throws SwarmTaskUnschedulableError when the task is still not placed on a node after
 *   `boundMs`, with the scheduler's reason (`no suitable node (insufficient resources on 3 nodes)`).
 * @throws SwarmTaskFailedError when the task ended without running (rejected by its node, an
 *   image missing there), or was placed but did not start within `boundMs`.
 * @throws EngineUnavailableError when the manager stops answering.
 */
export async function waitForTask(manager: Docker, serviceId: string, boundMs: number, describe: string, excluded = ''): Promise<RunningTask> {
  const deadline = Date.now() + boundMs
  for (;;) {
    let task: SwarmTaskInfo | undefined
    try {
      task = await serviceTask(manager, serviceId)
    } catch (error) {
      throw engineError(error, `${describe}: listing its tasks`)
    }
    const state = task?.Status?.State
    const containerId = task?.Status?.ContainerStatus?.ContainerID
    if (state === 'running' && task?.NodeID !== undefined && containerId !== undefined && containerId !== '') {
      return { id: task.ID, nodeId: task.NodeID, containerId }
    }
    if (taskEnded(state)) throw new SwarmTaskFailedError(`${describe}: its task ended (${state}) without running: ${taskReason(task)}`, state!)
    if (Date.now() >= deadline) {
      const placed = task?.NodeID
      if (placed !== undefined && placed !== '') throw new SwarmTaskFailedError(`${describe}: its task was placed on node ${placed} but did not start within ${boundMs} ms (state ${state}: ${taskReason(task)})`, state ?? 'unknown')
      const reason = taskReason(task)
      throw new SwarmTaskUnschedulableError(`${describe}: no node took its task within ${boundMs} ms: ${reason}${excluded}; free the resources it reserves, relax its placement constraints, or add a node that meets them`, reason)
    }
    await delay(POLL_MS)
  }
}
