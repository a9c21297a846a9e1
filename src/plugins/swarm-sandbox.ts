/**
 * `dsh-remote-worlds/swarm/sandbox`: `ctx.sandbox` for the swarm world of `ctx.subprocess`
 * (mount `dsh-remote-worlds/swarm` too). The task's container is the confinement, judged as
 * any container is, plus what the service could not ask for and the task proved
 * (src/providers/swarm/sandbox.ts); a mode it does not enforce fails closed.
 * @module dsh-remote-worlds/plugins/swarm-sandbox
 */
// First: fails at import, naming the required version, on a Node.js too old (node-version.ts).
import '../node-version.ts'
import type { Context } from '@deepseek-ai/cordis'
import type {} from '@deepseek-ai/dsh-sandbox-policy'
import z from '@deepseek-ai/schemastery'
import { applySwarmSandbox } from '../providers/swarm/sandbox.ts'

/** Cordis plugin name. */
export const name = 'dsh-remote-worlds-swarm-sandbox'

/** The world to confine in, and the policy it is judged against. */
export const inject = ['subprocess', 'sandboxPolicy']

/** No options: every fact comes from the task itself. */
export interface Config {}

/** Schema of {@link Config}. */
export const Config: z<Config> = z.object({})

/**
 * Open the world of `ctx.subprocess` (a swarm runtime), judge its task and register
 * `ctx.sandbox`; logs what the default mode means there.
 * @throws InvalidArgumentError when `ctx.subprocess` is not a swarm runtime.
 */
export async function apply(ctx: Context): Promise<void> {
  await applySwarmSandbox(ctx)
}
