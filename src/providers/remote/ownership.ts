/**
 * Session ownership: what lets a world outlive a client that dies at any instant (SIGKILL,
 * OOM, power loss) without anything running forever, and without ever ending a session whose
 * client is alive.
 *
 * - Every runtime is a CLIENT with a random 128-bit id. Each of its control programs registers
 *   itself in the world's ownership registry, `/tmp/dsh-remote-owners-UID` (mode 0700, trusted
 *   only when owned by that uid and not a symlink): an empty file `CLIENT.PID.START` naming the
 *   control process's identity. The control program reads its requests from the client's
 *   channel, so it ends when that channel ends (EOF on its stdin: the client's socket closed,
 *   whatever killed the client). A client is provably gone from a world when it has
 *   registrations there and none of their programs runs.
 * - Every session the client starts (a terminal, a spawned process) carries the tag
 *   `DSH_REMOTE_SESSION=CLIENT.SESSION` in its environment. The environment is inherited through
 *   fork, exec and setsid, so the tag follows the session's processes where parent and session
 *   links do not (a `setsid cmd &` escapee is reparented to init at once).
 * - Unforgeable from the outside: tags are read from `/proc/PID/environ`, which only the same
 *   uid (or root) can read, and only processes of the reaper's own uid are considered; a tag is
 *   acted on only when its client has registrations in the 0700 registry, so a process that
 *   merely sets the variable is never taken for anyone's session.
 * - The reaper: when a client connects to a world (its first control program there), it judges
 *   twice, {@link REAP_CONFIRM_MS} apart (a live client replaces a failed control program at
 *   once), then ends every tagged process of a client gone both times, with the members and
 *   descendants of their sessions, through the usual teardown ladder, then removes the gone
 *   client's state directory under /tmp (its spills) and its registrations.
 *
 * A managed container needs none of this: its pid 1 lives only while its client holds an
 * attach stream (docker-world.ts).
 * @module dsh-remote-worlds/providers/remote/ownership
 */
import { randomBytes } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import type { ControlChannel, OwnerRegistration, ProcessIdentity, RemoteProcess, TaggedProcess } from './control-channel.ts'
import { sessionMembers, terminateMembers } from './teardown.ts'

/** The environment variable that carries a session's tag. */
export const SESSION_TAG_VARIABLE = 'DSH_REMOTE_SESSION'

const TAG = /^([0-9a-f]{32})\.([0-9a-f]{16})$/

/** A new client id: 32 hex digits (128 random bits). */
export function newClientId(): string {
  return randomBytes(16).toString('hex')
}

/**
 * The name of a client's state directory (spills, status files) in a world, for `uid`:
 * `dsh-remote-UID-CLIENT`, so the reaper of a gone client finds it.
 */
export function stateDirectoryName(uid: number, clientId: string): string {
  return `dsh-remote-${uid}-${clientId}`
}

/** The parts of a well-formed tag, or undefined. */
export function parseSessionTag(value: string): { client: string; session: string } | undefined {
  const match = TAG.exec(value)
  return match === null ? undefined : { client: match[1]!, session: match[2]! }
}

/** The processes of one gone client, as the reaper found them. */
export interface OrphanedClient {
  /** The client id. */
  client: string
  /** Its registrations (none of their programs runs). */
  registrations: OwnerRegistration[]
  /** Its tagged processes still alive. */
  processes: TaggedProcess[]
}

/**
 * Judge the registry and the tagged processes: the clients that are provably gone (registered,
 * and no registered program runs) with their tagged processes. Tags that are malformed, of a
 * client with no registration (unknown here: never trusted), or of a live client are skipped.
 * Pure; the facts come from {@link ControlChannel.owners} and {@link ControlChannel.taggedProcesses}.
 */
export function findOrphans(registrations: readonly OwnerRegistration[], tagged: readonly TaggedProcess[]): OrphanedClient[] {
  const clients = new Map<string, OrphanedClient & { live: boolean }>()
  for (const registration of registrations) {
    const entry = clients.get(registration.client) ?? { client: registration.client, registrations: [], processes: [], live: false }
    entry.registrations.push(registration)
    entry.live ||= registration.live
    clients.set(registration.client, entry)
  }
  for (const process of tagged) {
    const parsed = parseSessionTag(process.tag)
    if (parsed === undefined) continue
    clients.get(parsed.client)?.processes.push(process)
  }
  return [...clients.values()].filter(entry => !entry.live).map(({ client, registrations: own, processes }) => ({ client, registrations: own, processes }))
}

/** How long a client must stay gone before its sessions are judged orphaned (ms). */
export const REAP_CONFIRM_MS = 2_000

/** What one reap found and did. */
export interface ReapReport {
  /** The gone clients found, each with the tagged processes it left. */
  orphans: OrphanedClient[]
  /** Every process the ladder signalled (tagged processes and their session members). */
  ended: ProcessIdentity[]
}

/**
 * Find what gone clients left in this world (as the control program's uid) and, unless
 * `dryRun`, end it: TERM, CONT, grace, KILL, and a proof that nothing is left, over every tagged
 * process of a gone client plus the members and descendants of their sessions; then remove the
 * gone clients' state directories under /tmp and their registrations. When a gone client left
 * processes, it is judged again `confirmMs` later, and only a client gone both times counts.
 * @param options.graceMs - TERM-to-KILL grace and KILL-to-proof bound, in ms.
 * @param options.dryRun - only find (what `doctor` lists); nothing is signalled or removed.
 * @param options.confirmMs - the wait between the two judgements (ms, default {@link REAP_CONFIRM_MS}).
 * @throws CleanupFailedError naming survivors; ControlChannelError when the channel fails.
 */
export async function reapOrphans(control: ControlChannel, options: { graceMs: number; dryRun?: boolean; confirmMs?: number }): Promise<ReapReport> {
  let orphans = findOrphans(await control.owners(), await control.taggedProcesses())
  if (orphans.some(orphan => orphan.processes.length > 0)) {
    // Judged twice: a live client whose control program just failed registers its replacement
    // at once (docker-world.ts), so a client gone now and still gone a moment later is gone.
    await delay(options.confirmMs ?? REAP_CONFIRM_MS)
    const before = new Set(orphans.map(orphan => orphan.client))
    orphans = findOrphans(await control.owners(), await control.taggedProcesses()).filter(orphan => before.has(orphan.client))
  }
  if (options.dryRun === true || orphans.length === 0) return { orphans, ended: [] }
  const gone = new Set(orphans.map(orphan => orphan.client))
  // Each round re-reads the tags too: a gone client's session may still fork while it is reaped.
  const collect = async (known: readonly ProcessIdentity[]): Promise<RemoteProcess[]> => {
    const roots = (await control.taggedProcesses()).filter(process => gone.has(parseSessionTag(process.tag)?.client ?? ''))
    const table = await control.processTable()
    const members = new Map<number, RemoteProcess>()
    for (const root of [...roots, ...known]) for (const member of sessionMembers(table, root)) members.set(member.pid, member)
    return [...members.values()]
  }
  const ended = await terminateMembers(control, collect, options.graceMs)
  // Their state directories (spills) under /tmp go too: nobody can read them any more.
  await control.removePaths(orphans.map(orphan => `/tmp/${stateDirectoryName(control.info.uid, orphan.client)}`))
  await control.unregister(orphans.flatMap(orphan => orphan.registrations))
  return { orphans, ended }
}

/** Options of {@link SessionOwnership}. */
export interface SessionOwnershipOptions {
  /** End what gone clients left when this client connects (default true; doctor turns it off to list them). */
  reapOrphans?: boolean | undefined
  /** The reaper's TERM-to-KILL grace (ms, default 2000). */
  reapGraceMs?: number | undefined
}

/**
 * One client's side of session ownership: its id, the tags of its sessions, the registration
 * of each control program it opens, and the reap it runs once per world uid.
 */
export class SessionOwnership {
  /** This client's id (32 hex digits). */
  readonly clientId: string = newClientId()
  private readonly reap: boolean
  private readonly reapGraceMs: number
  private readonly reaps = new Map<number, Promise<ReapReport>>()
  private readonly refusals = new Map<number, string>()

  constructor(options: SessionOwnershipOptions = {}) {
    this.reap = options.reapOrphans ?? true
    this.reapGraceMs = options.reapGraceMs ?? 2_000
  }

  /** A fresh tag for one session: `CLIENT.SESSION` (16 hex digits of session id). */
  newTag(): string {
    return `${this.clientId}.${randomBytes(8).toString('hex')}`
  }

  /**
   * Register a freshly opened control program as a live channel of this client, before any
   * session of this client starts through it; then, the first time for its uid, start the reap
   * of what gone clients left (in the background: it never delays the caller; see {@link reaped}).
   * A registry that cannot be used is remembered ({@link unavailable}), not thrown: sessions
   * still start, but no later client can prove this one gone.
   * @throws ControlChannelError when the channel fails.
   */
  async adopt(control: ControlChannel): Promise<void> {
    const refusal = await control.register(this.clientId)
    const uid = control.info.uid
    if (refusal !== undefined) this.refusals.set(uid, refusal)
    else this.refusals.delete(uid)
    if (this.reap && !this.reaps.has(uid)) {
      const reaping = reapOrphans(control, { graceMs: this.reapGraceMs })
      reaping.catch(() => undefined)
      this.reaps.set(uid, reaping)
    }
  }

  /** Why the registry of `uid` could not be used, or undefined when this client is registered there. */
  unavailable(uid: number): string | undefined {
    const refusal = this.refusals.get(uid)
    return refusal === undefined ? undefined : refusal === 'dir' ? `the ownership registry /tmp/dsh-remote-owners-${uid} cannot be used (not creatable, or not a directory owned by uid ${uid})` : `cannot write to the ownership registry /tmp/dsh-remote-owners-${uid}`
  }

  /** The reaps started so far (one per uid), settled. */
  async reaped(): Promise<PromiseSettledResult<ReapReport>[]> {
    return Promise.allSettled(this.reaps.values())
  }
}
