/**
 * Where a process's cgroup keeps the counters of resource-limit kills, and how to read them:
 * pure parsing of `/proc/self/cgroup`, the cgroup lines of `/proc/self/mountinfo` and the
 * counter and limit files, for cgroup v1 and v2. Nothing here reads a file: the control
 * program reads them in the remote world (resource-events.ts).
 *
 * Sources: proc(5) (`/proc/PID/cgroup`, `/proc/PID/mountinfo`); the kernel's
 * Documentation/admin-guide/cgroup-v2.rst (memory.events, memory.max, pids.events, pids.max),
 * Documentation/admin-guide/cgroup-v1/memory.rst (memory.oom_control, memory.limit_in_bytes)
 * and Documentation/admin-guide/cgroup-v1/pids.rst (pids.events, pids.max).
 * @module dsh-remote-worlds/providers/remote/cgroup
 */

/** One line of `/proc/PID/cgroup`: `HIERARCHY-ID:CONTROLLER-LIST:CGROUP-PATH` (proc(5)). */
export interface ProcCgroupEntry {
  /** Hierarchy id; 0 is the cgroup v2 unified hierarchy. */
  hierarchy: number
  /** Controllers bound to the hierarchy (v1, e.g. `['cpu', 'cpuacct']`, `['name=systemd']`); empty for v2. */
  controllers: string[]
  /** The process's cgroup, relative to the hierarchy's root (as the reading process's cgroup namespace sees it). */
  path: string
}

/** A cgroup filesystem mount, from one `/proc/PID/mountinfo` line (proc(5)). */
export interface CgroupMount {
  /** `cgroup` (v1) or `cgroup2`. */
  fsType: 'cgroup' | 'cgroup2'
  /** Field 4, the root: which cgroup of the hierarchy is this mount's top directory (`/docker/ID` in a container without a cgroup namespace). */
  root: string
  /** Field 5, where it is mounted. */
  mountPoint: string
  /** Super options after the separator; for v1 they name the controllers (`rw,memory`). */
  superOptions: string[]
}

/** Counter and limit files of one controller. */
export interface WatchedController {
  /** Flat-keyed file holding the counter (e.g. `/sys/fs/cgroup/memory/memory.oom_control`). */
  eventsFile: string
  /** The counter's key in it (`oom_kill`, `max`). */
  key: string
  /** The limit files of the cgroup and of each ancestor up to the mount's top, nearest first (the effective limit is the smallest). */
  limitFiles: string[]
}

/** What to read for resource-limit events: cgroup v1 or v2 files of the memory and pids controllers. */
export interface CgroupWatchPlan {
  /** 1 when both controllers found were v1 hierarchies, 2 when both v2; `mixed` otherwise. */
  version: 1 | 2 | 'mixed'
  /** OOM kills (v1: memory.oom_control `oom_kill`, kernel >= 4.13; v2: memory.events `oom_kill`). */
  memory?: WatchedController | undefined
  /** Forks refused by the pids limit (pids.events `max`). */
  pids?: WatchedController | undefined
}

/** The result of locating the counters: a plan, or why there is none. */
export type CgroupLocation = { kind: 'found'; plan: CgroupWatchPlan } | { kind: 'none'; reason: string }

/**
 * Parse `/proc/PID/cgroup` (proc(5): `hierarchy-ID:controller-list:cgroup-path` per line; the
 * v2 line is `0::PATH`). Lines that do not have that shape are skipped; a trailing
 * ` (deleted)` (a removed cgroup) is kept in the path, so it never maps to a directory.
 */
export function parseProcCgroup(text: string): ProcCgroupEntry[] {
  const entries: ProcCgroupEntry[] = []
  for (const line of text.split('\n')) {
    const first = line.indexOf(':')
    const second = first < 0 ? -1 : line.indexOf(':', first + 1)
    if (second < 0) continue
    const hierarchy = Number(line.slice(0, first))
    const path = line.slice(second + 1)
    if (!Number.isInteger(hierarchy) || first === 0 || !path.startsWith('/')) continue
    const list = line.slice(first + 1, second)
    entries.push({ hierarchy, controllers: list.length === 0 ? [] : list.split(','), path })
  }
  return entries
}

/** Decode mountinfo's octal escapes (`\040` space, `\011` tab, `\012` newline, `\134` backslash). */
function unescapeMountField(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_match, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)))
}

/**
 * The cgroup mounts of a `/proc/PID/mountinfo` text (proc(5): `ID PARENT MAJ:MIN ROOT
 * MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS`; the optional fields end at
 * the lone `-`). Other filesystems and malformed lines are skipped.
 */
export function parseCgroupMounts(mountinfo: string): CgroupMount[] {
  const mounts: CgroupMount[] = []
  for (const line of mountinfo.split('\n')) {
    const fields = line.split(' ')
    const separator = fields.indexOf('-', 6)
    if (separator < 0 || fields.length < separator + 4) continue
    const fsType = fields[separator + 1]
    if (fsType !== 'cgroup' && fsType !== 'cgroup2') continue
    mounts.push({
      fsType,
      root: unescapeMountField(fields[3]!),
      mountPoint: unescapeMountField(fields[4]!),
      superOptions: fields[separator + 3]!.split(','),
    })
  }
  return mounts
}

/**
 * The directory of cgroup `path` under `mount`: the path is relative to the hierarchy's root,
 * the mount shows the hierarchy from its `root` down. Inside a container without a cgroup
 * namespace, /proc/self/cgroup says `/docker/ID` and the mount's root is that same path, so
 * the directory is the mount point itself.
 * @returns the directory and the mount-relative path, or undefined when the cgroup is not
 *   below the mount's root (not visible through this mount).
 */
export function cgroupDirectory(mount: CgroupMount, path: string): { directory: string; relative: string } | undefined {
  const root = mount.root === '/' ? '' : mount.root.replace(/\/+$/, '')
  if (path !== root && !path.startsWith(`${root}/`)) return undefined
  // The cgroup at the mount's root ("/" under root "/") is the mount point itself.
  const relative = path.slice(root.length).replace(/\/+$/, '')
  return { directory: `${mount.mountPoint.replace(/\/+$/, '')}${relative}`, relative }
}

/** The directory and every ancestor up to the mount point, nearest first, each joined with `file`. */
function chain(mountPoint: string, relative: string, file: string): string[] {
  const top = mountPoint.replace(/\/+$/, '')
  const parts = relative.split('/').filter(part => part.length > 0)
  const files: string[] = []
  for (let depth = parts.length; depth >= 0; depth -= 1) files.push(`${top}${depth === 0 ? '' : `/${parts.slice(0, depth).join('/')}`}/${file}`)
  return files
}

/** Controller files, by cgroup version. */
const FILES = {
  memory: { 1: { events: 'memory.oom_control', key: 'oom_kill', limit: 'memory.limit_in_bytes' }, 2: { events: 'memory.events', key: 'oom_kill', limit: 'memory.max' } },
  pids: { 1: { events: 'pids.events', key: 'max', limit: 'pids.max' }, 2: { events: 'pids.events', key: 'max', limit: 'pids.max' } },
} as const

/**
 * Locate the counter files of the process whose `/proc/PID/cgroup` and mountinfo these are.
 * A controller is taken from a v1 hierarchy that has it, else from the v2 hierarchy (whether
 * v2 really has the controller enabled shows when its files are read: a missing file reads
 * as unwatched). Each hierarchy needs a mount whose root is the cgroup or an ancestor of it.
 * @param procCgroup - `/proc/PID/cgroup` text.
 * @param mountinfo - `/proc/PID/mountinfo` text (only cgroup lines matter).
 * @returns the plan, or `none` with the reason (no cgroup lines, no mount of the hierarchy,
 *   the cgroup outside every mount's root).
 */
export function locateCgroupCounters(procCgroup: string, mountinfo: string): CgroupLocation {
  const entries = parseProcCgroup(procCgroup)
  const mounts = parseCgroupMounts(mountinfo)
  if (entries.length === 0) return { kind: 'none', reason: '/proc/self/cgroup names no cgroup' }
  if (mounts.length === 0) return { kind: 'none', reason: 'no cgroup filesystem is mounted in the world' }
  const reasons: string[] = []
  const find = (controller: 'memory' | 'pids'): { watched: WatchedController; version: 1 | 2 } | undefined => {
    const v1 = entries.find(entry => entry.hierarchy !== 0 && entry.controllers.includes(controller))
    const candidates: { entry: ProcCgroupEntry; version: 1 | 2; mounts: CgroupMount[] }[] = []
    if (v1 !== undefined) candidates.push({ entry: v1, version: 1, mounts: mounts.filter(mount => mount.fsType === 'cgroup' && mount.superOptions.includes(controller)) })
    const v2 = entries.find(entry => entry.hierarchy === 0)
    if (v2 !== undefined) candidates.push({ entry: v2, version: 2, mounts: mounts.filter(mount => mount.fsType === 'cgroup2') })
    for (const candidate of candidates) {
      for (const mount of candidate.mounts) {
        const place = cgroupDirectory(mount, candidate.entry.path)
        if (place === undefined) continue
        const files = FILES[controller][candidate.version]
        return {
          version: candidate.version,
          watched: { eventsFile: `${place.directory}/${files.events}`, key: files.key, limitFiles: chain(mount.mountPoint, place.relative, files.limit) },
        }
      }
    }
    reasons.push(candidates.length === 0
      ? `no cgroup hierarchy has the ${controller} controller`
      : `the ${controller} cgroup (${candidates.map(candidate => candidate.entry.path).join(', ')}) is below no mounted cgroup root`)
    return undefined
  }
  const memory = find('memory')
  const pids = find('pids')
  if (memory === undefined && pids === undefined) return { kind: 'none', reason: reasons.join('; ') }
  const versions = new Set([memory?.version, pids?.version].filter(version => version !== undefined))
  return { kind: 'found', plan: { version: versions.size === 1 ? [...versions][0]! : 'mixed', memory: memory?.watched, pids: pids?.watched } }
}

/**
 * Parse a flat-keyed cgroup file (`KEY VALUE` per line: memory.events, memory.oom_control,
 * pids.events; cgroup-v2.rst "Interface Files"). Lines whose value is not a decimal integer
 * are skipped.
 * @returns the counters by key.
 */
export function parseFlatKeyed(text: string): Map<string, number> {
  const counters = new Map<string, number>()
  for (const line of text.split('\n')) {
    const match = /^(\S+)\s+(\d+)\s*$/.exec(line)
    if (match !== null) counters.set(match[1]!, Number(match[2]))
  }
  return counters
}

/**
 * v1's "no limit" in bytes: memory.limit_in_bytes shows PAGE_COUNTER_MAX pages, e.g.
 * 9223372036854771712 with 4 KiB pages (cgroup-v1/memory.rst). Anything from 2^62 up is taken
 * as unlimited, whatever the page size.
 */
const V1_UNLIMITED = 2 ** 62

/**
 * Parse a single-value limit file: memory.max or pids.max (`max` or an integer; cgroup-v2.rst),
 * memory.limit_in_bytes (bytes; v1's unlimited is a huge number).
 * @returns the limit, or null for no limit; undefined when the text is not a limit.
 */
export function parseLimit(text: string): number | null | undefined {
  const value = text.trim()
  if (value === 'max') return null
  if (!/^\d+$/.test(value)) return undefined
  const number = Number(value)
  return number >= V1_UNLIMITED ? null : number
}

/**
 * The effective limit of a chain of limit files (nearest first): the smallest set limit, or
 * null when none is set. Unreadable files (undefined text) are skipped.
 */
export function effectiveLimit(texts: readonly (string | undefined)[]): number | null {
  let smallest: number | null = null
  for (const text of texts) {
    const limit = text === undefined ? undefined : parseLimit(text)
    if (typeof limit === 'number' && (smallest === null || limit < smallest)) smallest = limit
  }
  return smallest
}
