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
 * wait of the same group on the next probe proves the gap, and this observer reports that one
 * probe as not waiting; the next probe of the same wait reports it.
 * @module dsh-remote-worlds/providers/remote/input-wait
 */
import type { ForegroundFacts } from './control-channel.ts'

/** One terminal's view of successive foreground probes (one instance per terminal handle). */
export class InputWaitObserver {
  private last: { tpgid: number; call: string | undefined } | undefined

  /**
   * The seam's `inputWaiting` for this probe: `facts.inputWaiting`, except `false` for a probe
   * that finds the foreground group of the probe before it waiting again, but in a different
   * wait (it left one wait and entered another in between). A group that just became
   * foreground (cat started from the prompt) is reported as it is. Probes must be observed in
   * the order the control program answered them.
   */
  observe(facts: ForegroundFacts): boolean {
    const previous = this.last
    this.last = { tpgid: facts.tpgid, call: facts.waitingCall }
    if (!facts.inputWaiting) return false
    const reentered = previous?.tpgid === facts.tpgid && previous.call !== undefined && previous.call !== facts.waitingCall
    return !reentered
  }
}
