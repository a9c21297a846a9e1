/**
 * Resource-limit events of a world: the OOM kills and refused forks its cgroup counted while a
 * terminal send or a spawned process ran. The counters are read through the world's control
 * channel (control.sh `cgroup` once per channel, `counters` at each start and end: builtins
 * only); where they are is worked out by cgroup.ts.
 *
 * What it proves and what it does not: the counters belong to the control program's cgroup,
 * which is the cgroup of every shell and process of that (world, uid) in a container, and the
 * login session's cgroup over SSH. A kill of ANOTHER process of the same cgroup during the send
 * is counted too; a process that moved itself to another cgroup is not. `oom_kill` counts every
 * OOM kill of a process of the cgroup, also one by a host-wide OOM (the limit shown is the
 * cgroup's, which may then not be what ran out).
 * @module dsh-remote-worlds/providers/remote/resource-events
 */
import { type CgroupLocation, type CgroupWatchPlan, effectiveLimit, locateCgroupCounters, parseFlatKeyed } from './cgroup.ts'
import type { ControlChannel } from './control-channel.ts'

/**
 * One resource-limit event seen while a send or process ran.
 * - `oom_kill`: `count` processes of the world's cgroup were killed by the OOM killer;
 *   `limitBytes` is the cgroup's effective memory limit in bytes (null: none set).
 * - `pids_max`: `count` forks were refused by the pids limit; `limit` is the effective
 *   pids.max (null: none set).
 */
export type ResourceEvent =
  | { kind: 'oom_kill'; count: number; limitBytes: number | null }
  | { kind: 'pids_max'; count: number; limit: number | null }

/** One reading of the counters and limits (undefined: that file was unreadable). */
export interface ResourceCounters {
  /** The cgroup's OOM-kill counter. */
  oomKill: number | undefined
  /** The cgroup's refused-fork counter. */
  pidsMax: number | undefined
  /** Effective memory limit in bytes, null when none. */
  memoryLimit: number | null
  /** Effective pids limit, null when none. */
  pidsLimit: number | null
}

/** What a watch reports about itself (doctor). */
export interface ResourceWatchReport {
  /** True when at least one counter file was readable. */
  watched: boolean
  /** Cgroup version of the watched files. */
  version?: 1 | 2 | 'mixed' | undefined
  /** The counter files read, e.g. `/sys/fs/cgroup/memory/memory.oom_control (oom_kill)`. */
  files: string[]
  /** The effective limits when read. */
  memoryLimit?: number | null | undefined
  pidsLimit?: number | null | undefined
  /** Why nothing is watched, when nothing is. */
  reason?: string | undefined
}

const watches = new WeakMap<ControlChannel, Promise<ResourceWatch>>()

/**
 * The counters of one control channel's cgroup. Get it with {@link ResourceWatch.of}; take a
 * {@link snapshot} when a send or process starts and ask {@link eventsSince} when it ends.
 * Never throws for an unwatchable world: its snapshots are undefined and it reports no events.
 */
export class ResourceWatch {
  /** Where the counters are, or why there are none. */
  readonly location: CgroupLocation
  private readonly control: ControlChannel
  private readonly paths: string[]

  private constructor(control: ControlChannel, location: CgroupLocation) {
    this.control = control
    this.location = location
    const plan = location.kind === 'found' ? location.plan : undefined
    this.paths = plan === undefined ? [] : [plan.memory?.eventsFile ?? '', plan.pids?.eventsFile ?? '', ...plan.memory?.limitFiles ?? [], ...plan.pids?.limitFiles ?? []].filter(path => path.length > 0)
  }

  /**
   * The watch of `control`'s cgroup, located once per channel (one `cgroup` request).
   * @returns a watch; one whose location is `none` when the program's cgroup or mounts are
   *   unreadable or the request failed (it then reports nothing).
   */
  static of(control: ControlChannel): Promise<ResourceWatch> {
    let watch = watches.get(control)
    if (watch === undefined) {
      watch = control.cgroupFacts().then(
        facts => new ResourceWatch(control, locateCgroupCounters(facts.procCgroup, facts.mountinfo)),
        (error: unknown) => new ResourceWatch(control, { kind: 'none', reason: `the control channel could not read its cgroup: ${(error as Error).message}` }),
      )
      watches.set(control, watch)
    }
    return watch
  }

  /** The located plan, when there is one. */
  get plan(): CgroupWatchPlan | undefined {
    return this.location.kind === 'found' ? this.location.plan : undefined
  }

  /**
   * Read the counters and limits now: one `counters` request (builtins only). Call it before
   * the work starts without awaiting it: it is queued on the channel ahead of the probes that
   * precede a terminal write.
   * @returns the reading, or undefined when nothing is watched or the channel failed.
   */
  async snapshot(): Promise<ResourceCounters | undefined> {
    const plan = this.plan
    if (plan === undefined) return undefined
    let texts: (string | undefined)[]
    try {
      texts = await this.control.readSmallFiles(this.paths)
    } catch {
      return undefined
    }
    const byPath = new Map(this.paths.map((path, index) => [path, texts[index]]))
    const counter = (watched: CgroupWatchPlan['memory']): number | undefined => {
      const text = watched === undefined ? undefined : byPath.get(watched.eventsFile)
      return text === undefined ? undefined : parseFlatKeyed(text).get(watched!.key)
    }
    const limit = (watched: CgroupWatchPlan['memory']): number | null => effectiveLimit((watched?.limitFiles ?? []).map(path => byPath.get(path)))
    const counters = { oomKill: counter(plan.memory), pidsMax: counter(plan.pids), memoryLimit: limit(plan.memory), pidsLimit: limit(plan.pids) }
    return counters.oomKill === undefined && counters.pidsMax === undefined ? undefined : counters
  }

  /**
   * The events counted since `before` (a {@link snapshot} taken when the work started): one
   * more `counters` request.
   * @returns the events, empty when nothing new was counted, `before` is undefined, or the
   *   reading failed.
   */
  async eventsSince(before: ResourceCounters | undefined): Promise<ResourceEvent[]> {
    if (before === undefined) return []
    const after = await this.snapshot()
    return after === undefined ? [] : resourceEventsBetween(before, after)
  }

  /** What this watch reads and the limits now (one `counters` request), or why it reads nothing. */
  async report(): Promise<ResourceWatchReport> {
    const plan = this.plan
    if (plan === undefined) return { watched: false, files: [], reason: this.location.kind === 'none' ? this.location.reason : undefined }
    const now = await this.snapshot()
    if (now === undefined) return { watched: false, version: plan.version, files: [], reason: `the counter files are not readable (${[plan.memory?.eventsFile, plan.pids?.eventsFile].filter(path => path !== undefined).join(', ')})` }
    const files = [
      ...(plan.memory !== undefined && now.oomKill !== undefined ? [`${plan.memory.eventsFile} (${plan.memory.key})`] : []),
      ...(plan.pids !== undefined && now.pidsMax !== undefined ? [`${plan.pids.eventsFile} (${plan.pids.key})`] : []),
    ]
    return {
      watched: true,
      version: plan.version,
      files,
      ...(now.oomKill !== undefined ? { memoryLimit: now.memoryLimit } : {}),
      ...(now.pidsMax !== undefined ? { pidsLimit: now.pidsLimit } : {}),
    }
  }
}

/**
 * The events between two readings: a counter that grew is an event with the growth as its
 * count and the later reading's limit. A counter unreadable in either reading reports nothing.
 */
export function resourceEventsBetween(before: ResourceCounters, after: ResourceCounters): ResourceEvent[] {
  const events: ResourceEvent[] = []
  if (before.oomKill !== undefined && after.oomKill !== undefined && after.oomKill > before.oomKill) events.push({ kind: 'oom_kill', count: after.oomKill - before.oomKill, limitBytes: after.memoryLimit })
  if (before.pidsMax !== undefined && after.pidsMax !== undefined && after.pidsMax > before.pidsMax) events.push({ kind: 'pids_max', count: after.pidsMax - before.pidsMax, limit: after.pidsLimit })
  return events
}

/** Bytes for humans in binary units: `256 MiB`, `1.5 GiB`, `512 B`. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB']
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1 }
  return `${Number.isInteger(value) ? value : value.toFixed(1)} ${units[unit]}`
}

/**
 * One event as a sentence, e.g. `the world's memory limit (256 MiB) killed 1 process (oom_kill)`.
 */
export function describeResourceEvent(event: ResourceEvent): string {
  const plural = (count: number, word: string): string => `${count} ${word}${count === 1 ? '' : word.endsWith('s') ? 'es' : 's'}`
  if (event.kind === 'oom_kill') {
    return event.limitBytes === null
      ? `the out-of-memory killer killed ${plural(event.count, 'process')} of the world (oom_kill; the world's cgroup sets no memory limit)`
      : `the world's memory limit (${formatBytes(event.limitBytes)}) killed ${plural(event.count, 'process')} (oom_kill)`
  }
  return event.limit === null
    ? `the pids controller refused ${plural(event.count, 'fork')} (pids.events max)`
    : `the world's process limit (${event.limit}) refused ${plural(event.count, 'fork')} (pids.events max)`
}
