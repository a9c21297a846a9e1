/**
 * The swarm service of one world, from the container-create options the sandbox policy maps to
 * (sandbox/docker-policy.ts `dockerCreateOptions`, the same mapping a managed Docker world is
 * created from). Pure: no engine calls.
 *
 * | create option (managed container)      | service spec (Engine API 1.41)                         |
 * |----------------------------------------|--------------------------------------------------------|
 * | User                                   | ContainerSpec.User                                     |
 * | HostConfig.ReadonlyRootfs              | ContainerSpec.ReadOnly                                 |
 * | HostConfig.CapDrop / CapAdd            | ContainerSpec.CapabilityDrop / CapabilityAdd           |
 * | HostConfig.Init                        | ContainerSpec.Init                                     |
 * | HostConfig.Mounts (bind, volume)       | ContainerSpec.Mounts                                   |
 * | HostConfig.Tmpfs `/tmp` (exec)         | a named volume of the `local` driver, type tmpfs, with the same options (a service's own tmpfs mounts are always noexec at 1.41: TmpfsOptions has no flags) |
 * | HostConfig.PidsLimit, Memory, NanoCpus | TaskTemplate.Resources.Limits.Pids, MemoryBytes, NanoCPUs |
 * | HostConfig.MemorySwap = Memory         | not expressible: the node's engine sets MemorySwap to twice MemoryBytes (daemon adaptContainerSettings); no swap beyond the limit only where the node has no swap |
 * | SecurityOpt no-new-privileges          | not expressible: the node's dockerd --no-new-privileges, proven in the task |
 * | NetworkMode none                       | not expressible: no Networks, on a node without a default bridge (dockerd --bridge=none), proven in the task |
 *
 * Anything else in the create options is refused (InvalidArgumentError naming the field): nothing
 * the policy asked for is dropped without a word. The service has one replica, restart policy
 * `none`, the node's hostname as the container's (`{{.Node.Hostname}}`), a stop grace of 1 s
 * ({@link STOP_GRACE_NS}), the lifeline as its entrypoint (lifeline.ts), and the reservations,
 * placement constraints and preferences given.
 * @module dsh-remote-worlds/providers/swarm/service-spec
 */
import type Docker from 'dockerode'
import { InvalidArgumentError } from '../remote/errors.ts'
import { LIFELINE_ENTRYPOINT } from './lifeline.ts'

/** Label on a swarm world's service, container and scratch volume: the id of the client that owns it (remote/ownership.ts `newClientId`). */
export const SWARM_OWNER_LABEL = 'dsh-remote-worlds.swarm-owner'

/** Label on a world's scratch volume naming its service, so a volume whose service is gone is known to be a leftover. */
export const SWARM_SERVICE_LABEL = 'dsh-remote-worlds.swarm-service'

/** Reservations of a world's task: what a node must have free to take it (scheduler units). */
export interface SwarmReservations {
  /** CPU in units of 1e-9 CPUs (1e9 = one CPU). */
  nanoCpus?: number | undefined
  /** Memory in bytes. */
  memoryBytes?: number | undefined
}

/** Where the task may run: swarm placement, as `docker service create --constraint / --placement-pref` take it. */
export interface SwarmPlacement {
  /** Constraint expressions, all of which must hold, e.g. `node.labels.zone==a`, `node.role!=manager`. */
  constraints?: readonly string[] | undefined
  /** Spread preferences, `spread=node.labels.zone` (the only kind swarm has). */
  preferences?: readonly string[] | undefined
}

/** Input of {@link serviceSpec}. */
export interface SwarmServiceRequest {
  /** The service's name (unique in the swarm). */
  name: string
  /** The image, by ID (`sha256:...`): nodes never pull it. */
  image: string
  /** The owning client's id ({@link SWARM_OWNER_LABEL}). */
  owner: string
  /** The container-create options of the policy (sandbox/docker-policy.ts), or `{}` for none. */
  create: Docker.ContainerCreateOptions
  reservations?: SwarmReservations | undefined
  placement?: SwarmPlacement | undefined
  /** `none` (default): no networks, proven none in the task; `host`: the node's network (danger-full-access only). */
  network?: 'none' | 'host' | undefined
}

/** What the spec cannot express and the task must prove (swarm-world.ts checks it). */
export interface SwarmServicePlan {
  /** The service spec to create. */
  spec: Docker.CreateServiceOptions
  /** The scratch tmpfs volumes (their names and mount targets), removed with the world. */
  scratch: { name: string; target: string }[]
}

/**
 * How long the task's processes get between the engine's SIGTERM and SIGKILL when the swarm
 * stops it (ns; a service removed while its lifeline is held, or by the reaper): 1 s, not the
 * engine's 10 s. The world's own teardown ended its sessions before; a pid 1 still blocked in
 * opening its lifeline FIFO (a client that died before holding it) was measured to wait out the
 * whole 10 s.
 */
export const STOP_GRACE_NS = 1_000_000_000

/** HostConfig fields {@link serviceSpec} translates (see the module table). */
const TRANSLATED = new Set(['ReadonlyRootfs', 'CapDrop', 'CapAdd', 'Init', 'Mounts', 'Tmpfs', 'PidsLimit', 'Memory', 'MemorySwap', 'NanoCpus', 'SecurityOpt', 'NetworkMode'])

/** `spread=node.labels.X` to the spec's form. @throws InvalidArgumentError for another form. */
function preference(text: string): { Spread: { SpreadDescriptor: string } } {
  const match = /^spread=(.+)$/.exec(text.trim())
  if (match === null) throw new InvalidArgumentError(`placement preference ${JSON.stringify(text)}: swarm has one kind, spread=DESCRIPTOR (e.g. spread=node.labels.zone)`)
  return { Spread: { SpreadDescriptor: match[1]! } }
}

/**
 * The service spec of a world (see the module documentation).
 * @throws InvalidArgumentError for a create option a service cannot express (named), a
 *   security option other than no-new-privileges, a network mode other than none, host
 *   networking under a confined policy, or a malformed placement preference.
 */
export function serviceSpec(request: SwarmServiceRequest): SwarmServicePlan {
  const host = request.create.HostConfig ?? {}
  const unknown = Object.keys(host).filter(key => !TRANSLATED.has(key) && (host as Record<string, unknown>)[key] !== undefined)
  if (unknown.length > 0) throw new InvalidArgumentError(`a swarm service (Engine API 1.41) cannot express HostConfig ${unknown.join(', ')}: drop it from the world's create options`)
  for (const option of (host.SecurityOpt ?? []) as string[]) {
    if (!/^no-new-privileges(?:[:=]true)?$/.test(option)) throw new InvalidArgumentError(`a swarm service cannot express the security option ${JSON.stringify(option)}`)
  }
  if (host.NetworkMode !== undefined && host.NetworkMode !== 'none') throw new InvalidArgumentError(`a swarm world's network is none (default) or host (its \`network\` setting), not HostConfig.NetworkMode ${JSON.stringify(host.NetworkMode)}`)
  const confined = host.ReadonlyRootfs === true
  if (request.network === 'host' && confined) throw new InvalidArgumentError('network host shares the node\'s network with the world: only danger-full-access may use it, a confined mode runs without a network')
  if (host.MemorySwap !== undefined && host.MemorySwap !== host.Memory) throw new InvalidArgumentError(`a swarm service cannot set MemorySwap (${host.MemorySwap}) apart from its memory limit`)

  const labels = { [SWARM_OWNER_LABEL]: request.owner }
  const scratch = Object.keys(host.Tmpfs ?? {}).map((target, index) => ({ name: `${request.name}-tmp${index === 0 ? '' : index}`, target }))
  const mounts: Docker.MountSettings[] = [
    ...((host.Mounts ?? []) as Docker.MountSettings[]).map(mount => ({ Type: mount.Type, Source: mount.Source, Target: mount.Target, ReadOnly: mount.ReadOnly === true })),
    ...scratch.map(({ name, target }) => ({
      Type: 'volume' as const,
      Source: name,
      Target: target,
      ReadOnly: false,
      VolumeOptions: {
        Labels: { ...labels, [SWARM_SERVICE_LABEL]: request.name },
        // The same options the managed container's HostConfig.Tmpfs has (exec, nosuid, nodev,
        // size, mode): the local driver passes them to mount(2) as flags and data.
        DriverConfig: { Name: 'local', Options: { type: 'tmpfs', device: 'tmpfs', o: host.Tmpfs![target]! } },
      },
    })),
  ]
  const limits = {
    ...(host.PidsLimit !== undefined && host.PidsLimit !== null ? { Pids: host.PidsLimit } : {}),
    ...(host.Memory !== undefined ? { MemoryBytes: host.Memory } : {}),
    ...(host.NanoCpus !== undefined ? { NanoCPUs: host.NanoCpus } : {}),
  }
  const reservations = {
    ...(request.reservations?.nanoCpus !== undefined ? { NanoCPUs: request.reservations.nanoCpus } : {}),
    ...(request.reservations?.memoryBytes !== undefined ? { MemoryBytes: request.reservations.memoryBytes } : {}),
  }
  const containerSpec: Docker.ContainerSpec = {
    Image: request.image,
    Labels: { ...request.create.Labels, ...labels },
    Command: [...LIFELINE_ENTRYPOINT],
    Args: [],
    Hostname: '{{.Node.Hostname}}',
    StopGracePeriod: STOP_GRACE_NS,
    ...(request.create.User !== undefined ? { User: request.create.User } : {}),
    ...(host.ReadonlyRootfs !== undefined ? { ReadOnly: host.ReadonlyRootfs } : {}),
    ...(host.Init !== undefined && host.Init !== null ? { Init: host.Init } : {}),
    ...(host.CapDrop !== undefined ? { CapabilityDrop: [...host.CapDrop as string[]] } : {}),
    ...(host.CapAdd !== undefined ? { CapabilityAdd: [...host.CapAdd as string[]] } : {}),
    ...(mounts.length > 0 ? { Mounts: mounts } : {}),
  }
  return {
    scratch,
    spec: {
      Name: request.name,
      Labels: labels,
      TaskTemplate: {
        ContainerSpec: containerSpec,
        Resources: { Limits: limits, Reservations: reservations },
        RestartPolicy: { Condition: 'none', MaxAttempts: 0 },
        Placement: {
          Constraints: [...request.placement?.constraints ?? []],
          Preferences: (request.placement?.preferences ?? []).map(preference),
        },
        ...(request.network === 'host' ? { Networks: [{ Target: 'host' }] } : {}),
      },
      Mode: { Replicated: { Replicas: 1 } },
    },
  }
}
