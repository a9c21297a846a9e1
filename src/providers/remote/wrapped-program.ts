/**
 * The program behind a wrapper argv. A terminal's argv may be a confinement wrapper around the
 * shell (`bwrap PROFILE -- /bin/bash -i`, from `ctx.sandbox.confine`). The start wrapper execs
 * that argv, so the pid it publishes is the wrapper's; bubblewrap forks (into a new pid
 * namespace under `--unshare-pid`) and runs the shell as its grandchild. A published pid that
 * names bwrap makes the shell's own foreground group look like "a child reading stdin" and lets
 * a SIGKILL to the foreground group kill the shell. So the handle publishes the process that
 * runs the inner argv, found in the outer pid namespace (the one the control channel probes and
 * signals in), while the session (for teardown) stays the wrapper's.
 *
 * Which part of an argv is the program is the wrapper's knowledge: a `ctx.sandbox` that wraps
 * says so through {@link ProgramUnwrapper} (src/sandbox/bwrap.ts does).
 * @module dsh-remote-worlds/providers/remote/wrapped-program
 */
import { setTimeout as delay } from 'node:timers/promises'
import type { ControlChannel, ProcessIdentity } from './control-channel.ts'
import { sessionMembers } from './teardown.ts'

/** A source of wrapper argvs (a `ctx.sandbox`) that can name the program a wrapped argv runs. */
export interface ProgramUnwrapper {
  /**
   * The inner argv when `argv` is one of this source's wrappings (exactly as the wrapper will
   * exec it), else undefined.
   */
  wrappedProgram(argv: readonly string[]): readonly string[] | undefined
}

/** True when `value` offers {@link ProgramUnwrapper.wrappedProgram}. */
export function isProgramUnwrapper(value: unknown): value is ProgramUnwrapper {
  return typeof (value as Partial<ProgramUnwrapper> | undefined)?.wrappedProgram === 'function'
}

/** How often the wrapper's tree is looked at while the program is not there yet (ms). */
const POLL_MS = 5

/**
 * Find the process that runs `program` inside the wrapper `outer`: a member or descendant of the
 * wrapper's session whose command line (`/proc/PID/cmdline`) is exactly `program`. The wrapper
 * needs a moment (namespaces, mounts) before it execs the program, so this looks again every
 * 5 ms until it is there.
 * @param boundMs - how long to look (ms).
 * @returns the program's identity; `outer` itself when the wrapper ended or the bound passed
 *   without the program (a wrapper that failed: its own exit then reports why).
 * @throws ControlChannelError when the channel fails.
 */
export async function findWrappedProgram(control: ControlChannel, outer: ProcessIdentity, program: readonly string[], boundMs: number): Promise<ProcessIdentity> {
  const expected = Buffer.from(program.map(arg => `${arg}\0`).join(''), 'utf8').toString('hex')
  const deadline = Date.now() + boundMs
  for (;;) {
    const members = sessionMembers(await control.processTable(), outer)
    if (!members.some(member => member.pid === outer.pid)) return outer
    // Every member again each round: the wrapper's child keeps its pid when it execs the program.
    for (const member of members) {
      if (member.pid === outer.pid) continue
      if (await control.commandLine(member) === expected) return { pid: member.pid, starttime: member.starttime }
    }
    if (Date.now() >= deadline) return outer
    await delay(POLL_MS)
  }
}
