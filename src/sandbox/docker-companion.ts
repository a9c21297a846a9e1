/**
 * The Docker runtime's sandbox companion: a managed container is created FROM the policy
 * (docker-policy.ts), an attached one is inspected; either way `ctx.sandbox` becomes a
 * {@link DockerSandboxProvider} over the container's inspected facts.
 * @module dsh-remote-worlds/sandbox/docker-companion
 */
import type { Context } from '@deepseek-ai/cordis'
import type {} from '@deepseek-ai/dsh-sandbox-policy'
import type { DockerRuntimeConfig } from '../providers/docker/docker-config.ts'
import type { DockerWorld } from '../providers/docker/docker-world.ts'
import { InvalidArgumentError } from '../providers/remote/errors.ts'
import { provideSandbox, type SandboxCompanion } from './companion.ts'
import { DockerSandboxProvider } from './docker-provider.ts'

/** What the companion needs of `ctx.subprocess` (a DockerSubprocessRuntime). */
interface DockerRuntimeLike {
  world(): Promise<DockerWorld>
  /** The exec user once the world is open (a dev container's comes from its devcontainer.json). */
  readonly execUser: string | undefined
}

/**
 * Open (create or attach) the runtime's container, learn the terminals' uid from its control
 * channel, and register `ctx.sandbox`. Logs what the default mode means (see announceSandbox).
 * @throws InvalidArgumentError when `ctx.subprocess` is not a Docker runtime; whatever opening the world throws.
 */
export async function applyDockerSandbox(ctx: Context): Promise<DockerSandboxProvider> {
  const runtime = ctx.get('subprocess') as unknown as Partial<DockerRuntimeLike> | undefined
  if (runtime === undefined || typeof runtime.world !== 'function' || !('execUser' in runtime)) {
    throw new InvalidArgumentError('the Docker sandbox needs a DockerSubprocessRuntime as ctx.subprocess')
  }
  const world = await runtime.world()
  // Read after the world opened: a dev container's user is known only then. A dev container is
  // judged like any attached container (its inspect facts), so a mode it does not enforce fails
  // closed before a shell starts.
  const user = runtime.execUser
  const control = await world.control(user)
  const workspaceRoot = ctx.sandboxPolicy.workspaceRoot
  return provideSandbox(ctx, DockerSandboxProvider, {
    info: world.inspectInfo,
    execUid: control.info.uid,
    where: world.describe(user ?? (world.inspectInfo.Config.User || undefined)),
    managed: world.managed,
    workspaceRoot,
  })
}

/** Companion of DockerSubprocessRuntime: hand the policy to the runtime config, then provide `ctx.sandbox`. */
export const dockerSandboxCompanion: SandboxCompanion<DockerRuntimeConfig> = {
  configure: (config, policy) => ({ ...config, policy: { mode: policy.mode, workspaceRoot: policy.workspaceRoot } }),
  plugin: async ctx => { await applyDockerSandbox(ctx) },
}
