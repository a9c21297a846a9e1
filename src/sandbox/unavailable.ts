/**
 * The refusal a world gives when it cannot enforce a sandbox mode.
 * @module dsh-remote-worlds/sandbox/unavailable
 */
import { type SandboxPolicy, SandboxUnavailableError } from '@deepseek-ai/dsh-sandbox'

/**
 * Upstream's `SandboxUnavailableError` (same class for `instanceof`, same name and code
 * `SANDBOX_UNAVAILABLE`, same `Runner failure: DETAIL` tail), with a message about the world
 * instead of the host. Upstream's text tells the reader to install bubblewrap or run a Landlock
 * kernel on this host, which is the wrong fix for a remote world: the agent (and its user) read
 * this message in the tool result, so it names the world's reason first and the fix that
 * applies there.
 */
export class WorldSandboxUnavailableError extends SandboxUnavailableError {
  /**
   * @param mode - the requested mode.
   * @param where - the world, as its runtime describes it (`docker container abc123 as agent`).
   * @param detail - every reason the world does not enforce the mode.
   * @param fix - what makes the world enforce it (one sentence, no final period).
   */
  constructor(mode: SandboxPolicy['mode'], where: string, detail: string, fix: string) {
    super(mode, detail)
    this.message = `sandbox mode "${mode}" is requested but ${where} cannot enforce it; refusing to run the command unconfined. ${fix}, or switch the consumer to danger-full-access. Runner failure: ${detail}`
  }
}
