/**
 * `dsh-remote-worlds/docker/sandbox`: `ctx.sandbox` for the Docker world of `ctx.subprocess`
 * (mount `dsh-remote-worlds/docker` too). The container is the confinement: `confine()`
 * succeeds for a mode only when the container, as inspected, enforces it; otherwise it throws
 * `SandboxUnavailableError` and terminal-bash never starts the shell (see
 * src/sandbox/docker-provider.ts).
 * @module dsh-remote-worlds/plugins/docker-sandbox
 */
// First: fails at import, naming the required version, on a Node.js too old (node-version.ts).
import '../node-version.ts'
import type { Context } from '@deepseek-ai/cordis'
import type {} from '@deepseek-ai/dsh-sandbox-policy'
import z from '@deepseek-ai/schemastery'
import { applyDockerSandbox } from '../sandbox/docker-companion.ts'

/** Cordis plugin name. */
export const name = 'dsh-remote-worlds-docker-sandbox'

/** The world to confine in, and the policy it is judged against. */
export const inject = ['subprocess', 'sandboxPolicy']

/** No options: every fact comes from the container itself. */
export interface Config {}

/** Schema of {@link Config}. */
export const Config: z<Config> = z.object({})

/**
 * Open the world of `ctx.subprocess` (a Docker runtime), inspect the container and register
 * `ctx.sandbox`; logs what the default mode means there.
 * @throws InvalidArgumentError when `ctx.subprocess` is not a Docker runtime.
 */
export async function apply(ctx: Context): Promise<void> {
  await applyDockerSandbox(ctx)
}
