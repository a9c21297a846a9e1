/**
 * Turning the control program's foreground facts into the seam's `inputWaiting`, with one fact
 * the seam has no field for: that the shell LEFT its wait between two probes.
 *
 * terminal-bash settles a send as `stdin_read` in the shell's own process group only after a
 * probe saw that group not waiting (`acceptsStdinWait` in dsh-terminal-bash lib/index.js): at the
 * send's start the shell waits at its prompt, and that wait must not settle the send. The same
 * rule holds for any group that was foreground and waiting when the send began: `less` at its
 * "Press RETURN" prompt is answered and waits again for a command. Such a program leaves its
 * wait and enters the next within a millisecond, between two polls 50 ms apart, so no probe sees
 * the gap. The control program names the waiting thread's wait (thread, system call, fd, buffer,
 * and how many times the thread was scheduled, which a blocked thread never is): a different
 * wait of the same group than the one the last probe of that group saw proves the gap, and this
 * observer reports that one probe as not waiting; the next probe of the same wait reports it.
 * The last probe of the group need not be the last probe: in `seq 1 100000; read x` the shell's
 * group leaves its prompt for `seq`'s group and next waits in the builtin `read`, and no probe
 * sees it not waiting in between (issue 22's trial: such a send settled by terminal-bash's 3 s
 * silence, not as `stdin_read`).
 * @module dsh-remote-worlds/providers/remote/input-wait
 */
import type { ForegroundFacts } from './control-channel.ts'

/** Foreground groups whose last wait an observer remembers; more are forgotten, oldest first. */
const REMEMBERED_GROUPS = 32

/** One terminal's view of successive foreground probes (one instance per terminal handle). */
export class InputWaitObserver {
  /** Per foreground group, the wait the last probe of it saw (undefined: not waiting). */
  private readonly lastWait = new Map<number, string | undefined>()

  /**
   * The seam's `inputWaiting` for this probe: `facts.inputWaiting`, except `false` for a probe
   * that finds a group waiting in another wait than the last probe of that group saw it in (it
   * left one wait and entered another since, whatever groups were foreground in between). A
   * group first seen (cat started from the prompt) is reported as it is. Probes must be observed
   * in the order they were answered.
   */
  observe(facts: ForegroundFacts): boolean {
    const previous = this.lastWait.get(facts.tpgid)
    this.lastWait.delete(facts.tpgid)
    this.lastWait.set(facts.tpgid, facts.waitingCall)
    if (this.lastWait.size > REMEMBERED_GROUPS) this.lastWait.delete(this.lastWait.keys().next().value!)
    if (!facts.inputWaiting) return false
    return previous === undefined || previous === facts.waitingCall
  }
}
