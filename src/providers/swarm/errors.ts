/**
 * Typed failures of the swarm world. Each has a stable `code` (remote/errors.ts
 * `RemoteWorldErrorCode`) and a message that names the fix.
 * @module dsh-remote-worlds/providers/swarm/errors
 */
import { RemoteWorldError, TransportError } from '../remote/errors.ts'

/**
 * The manager endpoint is not a swarm manager (its engine's /info says the node is not in a
 * swarm, or is a worker): services can be created only through a manager.
 */
export class SwarmNotManagerError extends RemoteWorldError {
  constructor(message: string) {
    super('SWARM_NOT_A_MANAGER', message)
  }
}

/**
 * No node can take the world's task within the bound: the scheduler's reason (the task's
 * `Status.Err`, e.g. `no suitable node (insufficient resources on 3 nodes)`) is in the message
 * and in {@link reason}. The service was removed.
 */
export class SwarmTaskUnschedulableError extends RemoteWorldError {
  /** The scheduler's own words (Status.Err, else Status.Message). */
  readonly reason: string

  constructor(message: string, reason: string) {
    super('SWARM_TASK_UNSCHEDULABLE', message)
    this.reason = reason
  }
}

/**
 * The world's task ended before it ran, or while the world opened (a node rejected it, its
 * image is missing there, its container failed to start): the task's state and error are in
 * the message. The service was removed.
 */
export class SwarmTaskFailedError extends RemoteWorldError {
  /** The task's final state (`failed`, `rejected`, `complete`, `shutdown`, ...). */
  readonly state: string

  constructor(message: string, state: string) {
    super('SWARM_TASK_FAILED', message)
    this.state = state
  }
}

/**
 * The task runs on a node whose engine this client cannot reach: no configured endpoint
 * answers for that NodeID. The service was removed.
 */
export class SwarmNodeUnreachableError extends RemoteWorldError {
  /** The node's swarm id. */
  readonly nodeId: string

  constructor(message: string, nodeId: string) {
    super('SWARM_NODE_UNREACHABLE', message)
    this.nodeId = nodeId
  }
}

/**
 * The world's node was lost while the world lived: its engine stopped answering the keepalive
 * (interval x (countMax + 1) without an answer). Everything of the world is gone with it:
 * terminals' `done` rejected with a {@link TransportError} (this one, when the keepalive saw the
 * loss first), and every later call of the world rejects with this. A TransportError, so code
 * that treats any broken transport as the world's death needs no new branch.
 */
export class SwarmNodeLostError extends TransportError {
  override readonly code = 'SWARM_NODE_LOST' as const
  /** The node's swarm id. */
  readonly nodeId: string

  constructor(message: string, nodeId: string, options?: { cause?: unknown }) {
    super(message, options)
    this.nodeId = nodeId
  }
}

/**
 * Teardown removed the service but could not prove its container gone on its node (the node
 * does not answer, or the container stayed past the bound). The node's engine removes the
 * container of a removed service when it answers again; `doctor --reap` lists what is left.
 */
export class SwarmCleanupUnprovenError extends RemoteWorldError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SWARM_CLEANUP_UNPROVEN', message, options)
  }
}
