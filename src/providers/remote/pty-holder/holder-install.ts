/**
 * Whether a world's terminals get dsh-pty (held-terminal.ts) and where it is: the holder is a
 * world tool (world-tools/install.ts), copied in once per user by content hash. A world where no
 * copy can run (an architecture without a build, every cache directory read-only or noexec) keeps
 * the PTY the engine or sshd allocates: its terminals work, but a signal death reads as 128+N in
 * Docker and a cancel under a flood drains what the transport buffered.
 * @module dsh-remote-worlds/providers/remote/pty-holder/holder-install
 */
import { WorldToolUnavailableError } from '../errors.ts'
import { SESSION_TAG_VARIABLE } from '../ownership.ts'
import { shQuote } from '../quote.ts'
import { installWorldTool } from '../world-tools/install.ts'
import { type WorldToolCopy, worldToolCommand } from '../world-tools/launch.ts'
import type { WorldOwner } from '../world-owner.ts'

/** Where a world's terminals stand: the holder's copy, or why there is none. */
export type TerminalHolder = WorldToolCopy | { unavailable: string }

const refused = new WeakMap<WorldOwner, string>()

/**
 * The holder of the owner's world, installing it on first use. A refusal is kept for the
 * owner's life (the next terminals do not retry the copy); a failure to reach the world is not.
 * @throws the owner's errors when the world cannot be reached.
 */
export async function terminalHolder(owner: WorldOwner): Promise<TerminalHolder> {
  const known = refused.get(owner)
  if (known !== undefined) return { unavailable: known }
  try {
    // The install's own object: one per copy made or found, so a standby started from an
    // earlier one (before the copy was refused and made anew) is told apart (exec-pool/pool.ts).
    return await installWorldTool(owner, 'dsh-pty')
  } catch (error) {
    if (!(error instanceof WorldToolUnavailableError)) throw error
    refused.set(owner, error.message)
    return { unavailable: error.message }
  }
}

/**
 * The exec script that runs the holder `copy`, verified (world-tools/launch.ts), with `args`
 * (`sh -c SCRIPT` in both worlds; none: a holder waiting for its first frame).
 * @param tag - a session tag of the client (ownership.ts) for the holder itself: the next
 *   client's reaper ends a holder a dead client left (one stopped by its own shell, say). It is
 *   not the terminal's tag, so the terminal's teardown never ends the holder before it reported.
 */
export function holderScript(copy: WorldToolCopy, tag?: string, args: readonly string[] = []): string {
  return worldToolCommand(copy, args, { assignments: tag === undefined ? undefined : `${SESSION_TAG_VARIABLE}=${shQuote(tag)}` })
}
