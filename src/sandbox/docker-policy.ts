/**
 * Sandbox policy -> Docker container-create options for a MANAGED Docker world (DESIGN.md
 * section 6). Pure: no engine calls. The container IS the confinement, so a managed world is
 * created from the policy mode it must enforce:
 *
 * | mode               | rootfs    | workspace mount | /tmp           | hardening + limits |
 * |--------------------|-----------|-----------------|----------------|--------------------|
 * | read-only          | read-only | read-only       | private tmpfs  | yes                |
 * | workspace-write    | read-only | read-write      | private tmpfs  | yes                |
 * | danger-full-access | writable  | read-write      | (image's /tmp) | no (explicit limits only) |
 *
 * Hardening of the confined modes: `CapDrop: ['ALL']`, `no-new-privileges`, NetworkMode `none`,
 * an init process (`Init: true`, zombies reaped), a non-root `User` (default `1000:1000`), and
 * the resource limits {@link DEFAULT_DOCKER_LIMITS} (each configurable). Docker keeps `/dev/shm`
 * and `/dev/mqueue` writable (private, ephemeral, like bubblewrap's `--dev`), and makes its own
 * `/etc/hosts`, `/etc/hostname`, `/etc/resolv.conf` read-only under a read-only rootfs.
 *
 * `/tmp` is mounted `exec` (Docker mounts a tmpfs noexec unless told otherwise): a program the
 * agent builds there runs, and so does the file server the filesystem half copies in when the
 * read-only rootfs leaves the user no writable HOME (src/files, providers/remote/world-tools).
 *
 * `/tmp` under read-only: a private tmpfs, per the project design. It is container-private and
 * vanishes with the container, so no persistent file effect is possible through it; it counts
 * against the memory limit.
 * @module dsh-remote-worlds/sandbox/docker-policy
 */
import { isAbsolute } from 'node:path'
import type { SandboxMode } from '@deepseek-ai/dsh-sandbox'
import { statSync } from 'node:fs'
import type Docker from 'dockerode'
import { InvalidArgumentError } from '../providers/remote/errors.ts'

/** Where the workspace comes from: a host folder (bind mount) or a named Docker volume. */
export type DockerWorkspaceSource =
  | { /** Absolute host path, bind-mounted at the workspace root. */ bind: string }
  | { /** Named volume (created by the engine when missing), mounted at the workspace root. */ volume: string }

/** Resource limits of a managed container (Docker HostConfig units). */
export interface DockerLimits {
  /** Maximum number of processes/threads in the container (`PidsLimit`). */
  pidsLimit?: number
  /** Memory limit in bytes (`Memory`; `MemorySwap` is set equal, so no swap beyond it). */
  memoryBytes?: number
  /** CPU quota in units of 1e-9 CPUs (`NanoCpus`; 1e9 = one CPU). */
  nanoCpus?: number
  /** Size of the private `/tmp` tmpfs in bytes (confined modes). */
  tmpBytes?: number
}

/**
 * Default limits of confined managed containers: 512 processes (stops a fork bomb, leaves room
 * for builds), 2 GiB memory without extra swap, two CPUs, a 256 MiB `/tmp`.
 */
export const DEFAULT_DOCKER_LIMITS: Readonly<Required<DockerLimits>> = Object.freeze({
  pidsLimit: 512,
  memoryBytes: 2 * 1024 ** 3,
  nanoCpus: 2_000_000_000,
  tmpBytes: 256 * 1024 ** 2,
})

/** User a confined managed container runs as when none is configured (the image's `agent`). */
export const DEFAULT_SANDBOX_USER = '1000:1000'

/** Label on a managed container naming the mode it was created to enforce (informational only: the inspector never trusts it). */
export const SANDBOX_MODE_LABEL = 'dsh-remote-worlds.sandbox-mode'

/** Input of {@link dockerCreateOptions}. */
export interface DockerSandboxSpec {
  /** The mode the container must enforce. */
  mode: SandboxMode
  /** Absolute workspace root INSIDE the container (the policy's `workspaceRoot`). */
  workspaceRoot: string
  /**
   * The workspace's source. Required for `workspace-write`; optional otherwise (without it the
   * workspace root is whatever the image has there, read-only under `read-only`).
   */
  workspace?: DockerWorkspaceSource | undefined
  /** Container user (`name`, `uid`, `uid:gid`) of a confined mode, which refuses root. Default {@link DEFAULT_SANDBOX_USER}; danger-full-access keeps the image's user. */
  user?: string | undefined
  /** Limits; confined modes fill the gaps from {@link DEFAULT_DOCKER_LIMITS}, danger-full-access applies only those given. */
  limits?: DockerLimits | undefined
}

/** What a managed container's workspace folder on the host means for its exec user. */
export type WorkspaceFolderVerdict =
  | { kind: 'missing' }
  | { kind: 'not-a-folder' }
  /** Owned by root: readable, but a confined (never root) user cannot write it. */
  | { kind: 'root-owned' }
  /** Owned by this non-root user: a confined shell runs as it, so workspace-write can write. */
  | { kind: 'owner'; user: string }

/**
 * Judge a host folder to be bound as a managed container's workspace (a bind the engine would
 * otherwise create as root when it is missing). Used by the runtime and the CLI alike, each
 * phrasing the refusal in its own terms (config or flags).
 * @param path - the host folder.
 */
export function judgeWorkspaceFolder(path: string): WorkspaceFolderVerdict {
  let stat
  try {
    stat = statSync(path)
  } catch {
    return { kind: 'missing' }
  }
  if (!stat.isDirectory()) return { kind: 'not-a-folder' }
  return stat.uid === 0 ? { kind: 'root-owned' } : { kind: 'owner', user: `${stat.uid}:${stat.gid}` }
}

/**
 * The user confined shells run as in a container created for `mode` with `workspace` and no
 * configured user: the owner of a host-folder workspace when that is not root (so
 * workspace-write can write there, as the CLI does); undefined otherwise (the default sandbox
 * user, or the image's user under danger-full-access).
 * @throws InvalidArgumentError for a missing folder or a file (the engine would create a
 *   root-owned folder in its place), or a root-owned folder under workspace-write (a confined
 *   shell never runs as root, so nothing could be written).
 */
export function workspaceOwnerUser(workspace: DockerWorkspaceSource | undefined, mode: SandboxMode): string | undefined {
  const bind = workspace !== undefined && 'bind' in workspace ? workspace.bind : undefined
  if (bind === undefined || mode === 'danger-full-access') return undefined
  const folder = judgeWorkspaceFolder(bind)
  if (folder.kind === 'missing') throw new InvalidArgumentError(`workspace.bind ${bind}: no such host folder`)
  if (folder.kind === 'not-a-folder') throw new InvalidArgumentError(`workspace.bind ${bind}: not a folder`)
  if (folder.kind === 'owner') return folder.user
  if (mode === 'workspace-write') throw new InvalidArgumentError(`workspace.bind ${bind} is owned by root, and confined shells never run as root, so workspace-write could write nothing there: give the folder to the user who should write there (e.g. chown 1000:1000), or configure \`user\` (UID:GID) of a user that may write it`)
  return undefined
}

/** True for a user spec that certainly names root (`root`, `0`, `0:…`, `root:…`). */
export function namesRoot(user: string): boolean {
  const name = user.split(':', 1)[0]
  return name === 'root' || name === '0'
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value <= 0) throw new InvalidArgumentError(`sandbox limit ${name} must be a positive integer, got ${value}`)
  return value
}

function limitFields(limits: DockerLimits): Docker.HostConfig {
  const fields: Docker.HostConfig = {}
  if (limits.pidsLimit !== undefined) fields.PidsLimit = positiveInteger('pidsLimit', limits.pidsLimit)
  if (limits.memoryBytes !== undefined) {
    fields.Memory = positiveInteger('memoryBytes', limits.memoryBytes)
    fields.MemorySwap = fields.Memory
  }
  if (limits.nanoCpus !== undefined) fields.NanoCpus = positiveInteger('nanoCpus', limits.nanoCpus)
  return fields
}

function workspaceMount(spec: DockerSandboxSpec): Docker.MountSettings[] {
  const source = spec.workspace
  if (source === undefined) return []
  const readOnly = spec.mode === 'read-only'
  if ('bind' in source) {
    if (!isAbsolute(source.bind)) throw new InvalidArgumentError(`workspace bind source must be an absolute host path, got ${JSON.stringify(source.bind)}`)
    return [{ Type: 'bind', Source: source.bind, Target: spec.workspaceRoot, ReadOnly: readOnly }]
  }
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(source.volume)) throw new InvalidArgumentError(`invalid Docker volume name ${JSON.stringify(source.volume)}`)
  return [{ Type: 'volume', Source: source.volume, Target: spec.workspaceRoot, ReadOnly: readOnly }]
}

/**
 * The create options (Config + HostConfig fields) of a managed container that enforces
 * `spec.mode`. Merge them under any caller overrides; `DockerWorld.open` adds Image, Cmd and
 * its managed label.
 * @throws InvalidArgumentError for a relative workspace root or bind source, an invalid volume
 *   name or limit, a root user under a confined mode, or `workspace-write` without a workspace.
 */
export function dockerCreateOptions(spec: DockerSandboxSpec): Docker.ContainerCreateOptions {
  if (!isAbsolute(spec.workspaceRoot)) throw new InvalidArgumentError(`workspace root must be an absolute path inside the container, got ${JSON.stringify(spec.workspaceRoot)}`)
  const mounts = workspaceMount(spec)
  const labels = { [SANDBOX_MODE_LABEL]: spec.mode }
  if (spec.mode === 'danger-full-access') {
    // The container keeps the image's user; the exec user (runtime config) is applied per exec.
    return {
      Labels: labels,
      HostConfig: {
        Init: true,
        ReadonlyRootfs: false,
        ...(mounts.length > 0 ? { Mounts: mounts } : {}),
        ...limitFields(spec.limits ?? {}),
      },
    }
  }
  if (spec.mode === 'workspace-write' && mounts.length === 0) {
    throw new InvalidArgumentError('workspace-write needs a workspace source (a host folder to bind, or a named volume)')
  }
  const user = spec.user ?? DEFAULT_SANDBOX_USER
  if (namesRoot(user)) throw new InvalidArgumentError(`sandbox mode ${spec.mode} runs as a non-root user; refusing user ${JSON.stringify(user)}`)
  const limits = { ...DEFAULT_DOCKER_LIMITS, ...spec.limits }
  const tmpBytes = positiveInteger('tmpBytes', limits.tmpBytes)
  return {
    User: user,
    Labels: labels,
    HostConfig: {
      ReadonlyRootfs: true,
      Mounts: mounts,
      Tmpfs: { '/tmp': `rw,exec,nosuid,nodev,size=${tmpBytes},mode=1777` },
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges:true'],
      NetworkMode: 'none',
      Init: true,
      ...limitFields(limits),
    },
  }
}

/**
 * Merge create options: `over` wins field by field; `HostConfig` and `Labels` merge one level
 * deep (so an override of one HostConfig field keeps the policy's others).
 */
export function mergeCreateOptions(base: Docker.ContainerCreateOptions, over: Docker.ContainerCreateOptions | undefined): Docker.ContainerCreateOptions {
  if (over === undefined) return base
  return {
    ...base,
    ...over,
    Labels: { ...base.Labels, ...over.Labels },
    HostConfig: { ...base.HostConfig, ...over.HostConfig },
  }
}
