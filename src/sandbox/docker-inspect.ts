/**
 * Does a running container enforce a sandbox mode? Decided from its inspect result
 * (HostConfig, Mounts, Config.User) plus the uid terminals run as, never from labels. Pure.
 *
 * A confined mode is ENFORCED when all of these hold (otherwise it is unavailable, and
 * `confine()` fails closed):
 * - the root filesystem is read-only (`ReadonlyRootfs`);
 * - no persistent writable mount (bind or volume) exists outside the workspace; under
 *   `read-only` none at all, and the workspace root is not on a writable tmpfs;
 * - under `workspace-write` the workspace root itself is writable (a read-write bind/volume
 *   mounted exactly there, or a tmpfs);
 * - the container is not privileged, does not share the host's pid namespace (the host's
 *   `/proc/PID/root` would reach host files), has no engine socket mounted (the shell could
 *   start an unconfined container), and no capability that defeats mount flags (SYS_ADMIN,
 *   DAC_READ_SEARCH, SYS_MODULE, SYS_RAWIO) can be held by the terminals' user: the user is
 *   root, or may become root through setuid programs (no `no-new-privileges`).
 *
 * Private tmpfs mounts (`/tmp`, `/dev/shm`, `/dev/mqueue`, HostConfig.Tmpfs) are allowed
 * outside the workspace: they are container-private and vanish with the container (bubblewrap
 * gives the same `--dev` and `--tmpfs /tmp`).
 *
 * Enforcement is `full` unless one of these GAPS holds, then `partial`:
 * - host devices are passed in (`Devices`, `DeviceCgroupRules`, `DeviceRequests`): a writable
 *   block device bypasses every mount flag, and inspect cannot tell whether it is one;
 * - a bind mount uses shared or slave propagation: mounts the host adds under it later appear
 *   inside with their own (possibly writable) flags.
 * @module dsh-remote-worlds/sandbox/docker-inspect
 */
import type { ConfinedSandboxMode, SandboxEnforcement } from '@deepseek-ai/dsh-sandbox'
import type Docker from 'dockerode'
import { isWithin } from '../providers/remote/paths.ts'

/** How the gap of a container with a network of its own begins (a swarm task that proved lo only drops it). */
export const NETWORK_GAP_PREFIX = 'the container has a network'

/** What the inspector needs to know about a container. */
export interface DockerSandboxFacts {
  /** The container's inspect result (only HostConfig, Mounts and Config.User are read). */
  info: Pick<Docker.ContainerInspectInfo, 'HostConfig' | 'Mounts'> & { Config: Pick<Docker.ContainerInspectInfo['Config'], 'User'> }
  /**
   * Numeric uid the terminals run as (the control channel reports it). Undefined when unknown;
   * the inspector then assumes the user may be root.
   */
  execUid?: number | undefined
}

/** The verdict for one mode. */
export type DockerModeAssessment =
  | { mode: ConfinedSandboxMode; enforced: true; enforcement: SandboxEnforcement; facts: string[]; gaps: string[] }
  | { mode: ConfinedSandboxMode; enforced: false; facts: string[]; reasons: string[] }

/** Docker's default capability set (moby 20.10+), names without `CAP_`. */
export const DOCKER_DEFAULT_CAPS: readonly string[] = [
  'CHOWN', 'DAC_OVERRIDE', 'FSETID', 'FOWNER', 'MKNOD', 'NET_RAW', 'SETGID', 'SETUID', 'SETFCAP',
  'SETPCAP', 'NET_BIND_SERVICE', 'SYS_CHROOT', 'KILL', 'AUDIT_WRITE',
]

/** Capabilities that defeat read-only mounts or reach host files. */
const DEFEATING_CAPS: readonly string[] = ['SYS_ADMIN', 'DAC_READ_SEARCH', 'SYS_MODULE', 'SYS_RAWIO']

/** Host paths whose mount hands the shell a container-engine socket. */
const ENGINE_SOCKET_DIRS = new Set(['/run', '/var/run', '/run/docker', '/var/run/docker', '/run/containerd', '/var/run/containerd', '/run/podman'])

/** Tmpfs mounts Docker always gives a container (private, ephemeral). */
const IMPLICIT_TMPFS = ['/dev/shm', '/dev/mqueue']

function capName(cap: unknown): string {
  return String(cap).toUpperCase().replace(/^CAP_/, '')
}

/** The capability bounding set the container's processes get (`['ALL']` for everything). */
export function boundingCaps(hostConfig: Docker.HostConfig): string[] {
  if (hostConfig.Privileged === true) return ['ALL']
  const add = ((hostConfig.CapAdd ?? []) as unknown[]).map(capName)
  const drop = ((hostConfig.CapDrop ?? []) as unknown[]).map(capName)
  if (add.includes('ALL')) return ['ALL']
  const base = drop.includes('ALL') ? [] : DOCKER_DEFAULT_CAPS.filter(cap => !drop.includes(cap))
  return [...new Set([...base, ...add.filter(cap => !drop.includes(cap) || drop.includes('ALL'))])].sort()
}

/** True when SecurityOpt sets no-new-privileges. */
export function noNewPrivileges(hostConfig: Docker.HostConfig): boolean {
  return ((hostConfig.SecurityOpt ?? []) as string[]).some(option => /^no-new-privileges(?:[:=]true)?$/.test(option))
}


function normalize(path: string): string {
  const trimmed = path.replace(/\/+$/, '')
  return trimmed === '' ? '/' : trimmed
}

interface MountView {
  destination: string
  writable: boolean
  tmpfs: boolean
  describe: string
  source: string
  type: string
  propagation: string
}

function mountViews(facts: DockerSandboxFacts): MountView[] {
  const views: MountView[] = []
  for (const mount of facts.info.Mounts ?? []) {
    const destination = normalize(mount.Destination)
    const tmpfs = mount.Type === 'tmpfs'
    const origin = mount.Type === 'volume' ? `volume ${mount.Name ?? mount.Source}` : tmpfs ? 'tmpfs' : `${mount.Type} of ${mount.Source}`
    views.push({
      destination,
      writable: mount.RW,
      tmpfs,
      describe: `${destination} (${mount.RW ? 'read-write' : 'read-only'} ${origin})`,
      source: mount.Source ?? '',
      type: mount.Type,
      propagation: mount.Propagation ?? '',
    })
  }
  for (const [destination, options] of Object.entries(facts.info.HostConfig.Tmpfs ?? {})) {
    const writable = !String(options).split(',').includes('ro')
    views.push({ destination: normalize(destination), writable, tmpfs: true, describe: `${normalize(destination)} (${writable ? 'read-write' : 'read-only'} private tmpfs)`, source: '', type: 'tmpfs', propagation: '' })
  }
  for (const destination of IMPLICIT_TMPFS) {
    if (!views.some(view => view.destination === destination)) {
      views.push({ destination, writable: true, tmpfs: true, describe: `${destination} (read-write private tmpfs)`, source: '', type: 'tmpfs', propagation: '' })
    }
  }
  return views
}

/** The mount whose destination covers `path` most specifically; undefined = the rootfs. */
function coveringMount(views: readonly MountView[], path: string): MountView | undefined {
  let best: MountView | undefined
  for (const view of views) {
    if (isWithin(view.destination, path) && (best === undefined || view.destination.length > best.destination.length)) best = view
  }
  return best
}

/**
 * Decide whether the container enforces `mode` for `workspaceRoot` (a path inside the
 * container). See the module comment for the rules.
 */
export function assessDockerMode(facts: DockerSandboxFacts, mode: ConfinedSandboxMode, workspaceRoot: string): DockerModeAssessment {
  const hostConfig = facts.info.HostConfig
  const workspace = normalize(workspaceRoot)
  const views = mountViews(facts)
  const reasons: string[] = []
  const gaps: string[] = []
  const enforcing: string[] = []

  if (hostConfig.ReadonlyRootfs === true) enforcing.push('read-only root filesystem')
  else reasons.push('the root filesystem is writable (HostConfig.ReadonlyRootfs is off)')

  if (hostConfig.Privileged === true) reasons.push('the container is privileged (every capability and device; mounts can be remounted writable)')
  if (hostConfig.PidMode === 'host') reasons.push('the container shares the host pid namespace (PidMode host): host processes\' /proc/PID/root reaches host files')

  const caps = boundingCaps(hostConfig)
  const nnp = noNewPrivileges(hostConfig)
  const mayBeRoot = facts.execUid === undefined || facts.execUid === 0 || !nnp
  const defeating = caps.includes('ALL') ? ['ALL'] : caps.filter(cap => DEFEATING_CAPS.includes(cap))
  if (defeating.length > 0 && mayBeRoot && hostConfig.Privileged !== true) {
    const who = facts.execUid === 0 ? 'the terminals run as root' : facts.execUid === undefined ? 'the terminals\' uid is unknown' : 'setuid programs can make the terminals\' user root (no no-new-privileges)'
    reasons.push(`capabilities ${defeating.join(', ')} are in the bounding set and ${who}: mount flags can be defeated`)
  }
  enforcing.push(caps.length === 0 ? 'capabilities: none (CapDrop ALL)' : `capabilities: ${caps.join(', ')}`)
  if (nnp) enforcing.push('no-new-privileges')
  if (facts.execUid !== undefined) enforcing.push(`terminals run as uid ${facts.execUid}`)

  for (const view of views) {
    if (view.type === 'bind' && (/\.sock$/.test(view.source) || ENGINE_SOCKET_DIRS.has(normalize(view.source)))) {
      reasons.push(`${view.describe} may hand the shell a container-engine socket (it could start an unconfined container)`)
    }
  }

  for (const view of views) {
    if (!view.writable) continue
    if (view.tmpfs) {
      if (mode === 'read-only' && (isWithin(workspace, view.destination) || isWithin(view.destination, workspace))) {
        reasons.push(`the workspace ${workspace} is on or contains a writable tmpfs: ${view.describe}`)
      }
      continue
    }
    if (mode === 'workspace-write' && isWithin(workspace, view.destination)) continue
    reasons.push(mode === 'read-only'
      ? `writable mount ${view.describe}: read-only allows no persistent writes`
      : `writable mount outside the workspace ${workspace}: ${view.describe}`)
  }

  const covering = coveringMount(views, workspace)
  if (mode === 'workspace-write') {
    if (covering === undefined) {
      if (hostConfig.ReadonlyRootfs === true) reasons.push(`the workspace ${workspace} is not writable: it lies on the read-only root filesystem (mount a read-write bind or volume there)`)
    } else if (!covering.writable) {
      reasons.push(`the workspace ${workspace} is not writable: it lies in ${covering.describe}`)
    } else {
      enforcing.push(`workspace ${workspace}: ${covering.describe}`)
    }
  } else {
    enforcing.push(`workspace ${workspace}: ${covering === undefined ? `on the ${hostConfig.ReadonlyRootfs === true ? 'read-only' : 'writable'} root filesystem` : covering.describe}`)
  }
  const scratch = views.filter(view => view.tmpfs && view.writable && !isWithin(workspace, view.destination)).map(view => view.destination)
  if (scratch.length > 0) enforcing.push(`private writable tmpfs (ephemeral): ${scratch.join(', ')}`)

  const devices = [
    ...((hostConfig.Devices ?? []) as { PathOnHost?: string; PathInContainer?: string }[]).map(device => `${device.PathOnHost ?? '?'} -> ${device.PathInContainer ?? '?'}`),
    ...(hostConfig.DeviceCgroupRules ?? []).map(rule => `cgroup rule ${rule}`),
    ...((hostConfig as { DeviceRequests?: unknown[] }).DeviceRequests ?? []).map(() => 'device request'),
  ]
  if (devices.length > 0 && hostConfig.Privileged !== true) gaps.push(`host devices are passed in (${devices.join('; ')}): a writable block device bypasses mount flags`)
  for (const view of views) {
    if (view.type === 'bind' && /^r?(shared|slave)$/.test(view.propagation)) {
      gaps.push(`${view.describe} uses ${view.propagation} propagation: mounts the host adds under it later appear inside with their own flags`)
    }
  }

  // The network is outside DSH's policy vocabulary, but a confined world keeps lo only
  // (network/world-network.ts): a container with a network of its own is a gap, said.
  const network = hostConfig.NetworkMode ?? 'default'
  if (network === 'none') enforcing.push('network: none (lo only)')
  else gaps.push(`${NETWORK_GAP_PREFIX} (NetworkMode ${network}): its programs reach what that network reaches (a confined world keeps lo only where NetworkMode is none)`)

  if (reasons.length > 0) return { mode, enforced: false, facts: enforcing, reasons }
  return { mode, enforced: true, enforcement: gaps.length === 0 ? 'full' : 'partial', facts: enforcing, gaps }
}
