/**
 * The one teardown ladder of every world: TERM -> CONT -> grace -> KILL, then a quiescence
 * proof, all through the control channel (DESIGN.md section 5: closing a Docker attach or an SSH
 * exec channel leaves processes running, so nothing else can be trusted to stop them).
 * @module dsh-remote-worlds/providers/remote/teardown
 */
import { setTimeout as delay } from 'node:timers/promises'
import { type ControlChannel, type ProcessIdentity, type RemoteProcess, isDeadState, markTagged } from './control-channel.ts'
import { CleanupFailedError } from './errors.ts'

const POLL_MS = 10

/**
 * The members of the terminal's process session still alive: processes whose session id is
 * the shell's pid, processes that carry the session's tag in their environment (`tagged`, see
 * ownership.ts: a `setsid` escapee whose parent exited at once, as `setsid cmd &` does in an
 * interactive shell, keeps no other link), plus descendants of any member by parent pid (a
 * `setsid` child leaves the session but not the tree while its parent lives). Processes that
 * started before the shell cannot belong to it, which fences a reused pid or session id.
 *
 * `known` identities (members seen earlier) stay members while they live, with their
 * descendants: a `setsid` child whose parent died (e.g. of the teardown's own SIGTERM) is
 * reparented to init and has a session of its own, so only its identity still ties it to the
 * terminal.
 *
 * @param table - the remote process table.
 * @param shell - identity of the terminal's session leader.
 * @param known - identities (pid, starttime) already established as members.
 * @returns non-zombie members, the shell included when alive.
 */
export function sessionMembers(table: readonly RemoteProcess[], shell: ProcessIdentity, known: readonly ProcessIdentity[] = []): RemoteProcess[] {
  const candidates = table.filter(entry => entry.starttime >= shell.starttime)
  const knownKeys = new Set(known.map(identity => `${identity.pid}:${identity.starttime}`))
  const members = new Map<number, RemoteProcess>()
  for (const entry of candidates) {
    if (entry.session === shell.pid || entry.pid === shell.pid || entry.tagged || knownKeys.has(`${entry.pid}:${entry.starttime}`)) members.set(entry.pid, entry)
  }
  // Descendants by ppid of any member, iterated to a fixed point.
  let grew = true
  while (grew) {
    grew = false
    for (const entry of candidates) {
      if (!members.has(entry.pid) && members.has(entry.ppid)) {
        members.set(entry.pid, entry)
        grew = true
      }
    }
  }
  return [...members.values()].filter(entry => !isDeadState(entry.state))
}

/** Options of {@link terminateSession}. */
export interface TerminateSessionOptions {
  /** TERM-to-KILL grace and KILL-to-proof bound, in ms. */
  graceMs: number
  /** Earlier-seen members to include even when the table no longer links them to the shell. */
  tracked?: readonly ProcessIdentity[]
  /** The session's tag (ownership.ts): processes carrying it are members wherever they went. */
  tag?: string | undefined
}

/**
 * Stop every member of the shell's session and prove it quiescent.
 *
 * 1. SIGTERM then SIGCONT to every member (a stopped job cannot act on TERM until continued).
 * 2. Wait until all are gone, at most `graceMs`. The wait ends early once every survivor has
 *    SIGTERM in its ignored mask (`/proc/PID/status` SigIgn): interactive bash ignores TERM
 *    (bash(1), SIGNALS), so waiting out the grace for it proves nothing and costs 3 s. When
 *    every member signalled still lives and ignores TERM, it ends without another table scan.
 * 3. SIGKILL survivors and anything that joined meanwhile; wait at most `graceMs` more.
 * 4. Re-read the table: no non-zombie member may remain.
 *
 * @returns the identities that were signalled (empty when nothing was alive).
 * @throws CleanupFailedError naming the survivors when quiescence cannot be proven.
 * @throws ControlChannelError when the control channel fails mid-ladder.
 */
export async function terminateSession(control: ControlChannel, shell: ProcessIdentity, options: TerminateSessionOptions): Promise<ProcessIdentity[]> {
  // A tagged session reads the table in shared rounds (ControlChannel.freshSnapshot): terminals
  // closed at once all take each step on one scan, never on one scan each.
  const table = async (): Promise<RemoteProcess[]> => {
    if (options.tag === undefined) return control.processTable()
    const { table: rows, tagged } = await control.freshSnapshot()
    return markTagged(rows, tagged, options.tag)
  }
  return terminateMembers(control, async known => sessionMembers(await table(), shell, [...(options.tracked ?? []), ...known]), options.graceMs)
}

/**
 * The ladder of {@link terminateSession} over any set of processes.
 * @param collect - the live members now; `known` holds every identity signalled so far, which
 *   stay members (with their descendants) while they live: the ladder's own SIGTERM can orphan
 *   a TERM-ignoring `setsid` grandchild out of the tree.
 * @param graceMs - TERM-to-KILL grace and KILL-to-proof bound, in ms.
 * @returns the identities that were signalled (empty when nothing was alive).
 * @throws CleanupFailedError naming the survivors when quiescence cannot be proven.
 * @throws ControlChannelError when the control channel fails mid-ladder.
 */
export async function terminateMembers(control: ControlChannel, collect: (known: readonly ProcessIdentity[]) => Promise<RemoteProcess[]>, graceMs: number): Promise<ProcessIdentity[]> {
  const signalled = new Map<string, ProcessIdentity>()
  const members = (): Promise<RemoteProcess[]> => collect([...signalled.values()])
  const remember = (found: readonly ProcessIdentity[]): void => {
    for (const member of found) signalled.set(`${member.pid}:${member.starttime}`, { pid: member.pid, starttime: member.starttime })
  }

  let alive = await members()
  if (alive.length === 0) return []
  remember(alive)
  await control.kill('TERM', alive)
  await control.kill('CONT', alive)

  const termDeadline = Date.now() + graceMs
  // When every member signalled is alive and ignores TERM (an idle interactive bash, the
  // commonest case), the grace proves nothing: go to KILL without another scan. A process
  // that joined since is found by the KILL phase's scan, as any joiner is.
  const ignoringAtOnce = await control.ignoringTerm(alive)
  if (!alive.every(member => ignoringAtOnce.has(member.pid))) {
    for (;;) {
      alive = await members()
      if (alive.length === 0) return [...signalled.values()]
      if (Date.now() >= termDeadline) break
      const ignoring = await control.ignoringTerm(alive)
      if (alive.every(member => ignoring.has(member.pid))) break
      await delay(POLL_MS)
    }
  }

  const killDeadline = Date.now() + graceMs
  for (;;) {
    remember(alive)
    await control.kill('KILL', alive)
    await delay(POLL_MS)
    alive = await members()
    if (alive.length === 0) return [...signalled.values()]
    if (Date.now() >= killDeadline) break
  }
  throw new CleanupFailedError(alive.map(member => member.pid), ` (state ${alive.map(member => `${member.pid}:${member.state}`).join(', ')})`)
}
