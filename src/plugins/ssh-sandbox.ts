/**
 * `dsh-remote-worlds/ssh/sandbox`: `ctx.sandbox` for the SSH world of `ctx.subprocess` (mount
 * `dsh-remote-worlds/ssh` too), backed by bubblewrap on the remote host, probed once; without a
 * working bubblewrap every confined mode fails closed (src/sandbox/ssh-companion.ts).
 * @module dsh-remote-worlds/plugins/ssh-sandbox
 */
// First: fails at import, naming the required version, on a Node.js too old (node-version.ts).
import '../node-version.ts'
import type { Context } from '@deepseek-ai/cordis'
import type {} from '@deepseek-ai/dsh-sandbox-policy'
import z from '@deepseek-ai/schemastery'
import { applySshSandbox } from '../sandbox/ssh-companion.ts'

/** Cordis plugin name. */
export const name = 'dsh-remote-worlds-ssh-sandbox'

/** The world to confine in, and the policy it is judged against. */
export const inject = ['subprocess', 'sandboxPolicy']

/** No options: every fact comes from probing the host. */
export interface Config {}

/** Schema of {@link Config}. */
export const Config: z<Config> = z.object({})

/**
 * Probe bubblewrap on the host of `ctx.subprocess` (an SSH runtime) and register `ctx.sandbox`.
 * @throws InvalidArgumentError when `ctx.subprocess` is not an SSH runtime; the world's connect errors.
 */
export async function apply(ctx: Context): Promise<void> {
  await applySshSandbox(ctx)
}
