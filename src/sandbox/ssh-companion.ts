/**
 * The SSH runtime's sandbox companion: probe bubblewrap on the remote host ONCE per world (as
 * the login user, on a pooled connection), then register a {@link BubblewrapSandboxProvider}
 * as `ctx.sandbox`. Without a working bubblewrap (a network namespace with `lo` only among what
 * it must make: bwrap.ts) every confined mode fails closed.
 * @module dsh-remote-worlds/sandbox/ssh-companion
 */
import type { Context } from '@deepseek-ai/cordis'
import type {} from '@deepseek-ai/dsh-sandbox-policy'
import type { SshRuntimeConfig } from '../providers/ssh/ssh-config.ts'
import type { SshWorld } from '../providers/ssh/ssh-world.ts'
import { InvalidArgumentError } from '../providers/remote/errors.ts'
import { worldOwnerOf } from '../providers/remote/world-owner.ts'
import { fenceWritableRoots } from '../providers/remote/world-tools/install.ts'
import { BubblewrapSandboxProvider, probeBwrap, type RemoteRunResult } from './bwrap.ts'
import { provideSandbox, type SandboxCompanion } from './companion.ts'

/** What the companion needs of `ctx.subprocess` (an SshSubprocessRuntime). */
interface SshRuntimeLike {
  world(): Promise<SshWorld>
}

/**
 * Run a POSIX sh script on the SSH host as the login user over a non-PTY exec channel (the
 * pool's {@link SshWorld.run}: a slot is held while it runs, and a channel the server refuses
 * for MaxSessions is retried on another connection).
 */
export function sshRun(world: SshWorld, script: string): Promise<RemoteRunResult> {
  return world.run(script)
}

/**
 * Probe the host's bubblewrap (read-only profile, and workspace-write for the composition's
 * workspace root with its fence: fence.ts) and register `ctx.sandbox`. Logs what the default
 * mode means. From here on no world tool is kept inside the workspace (install.ts
 * `fenceWritableRoots`): the package's tools run outside the fence, where a confined agent must
 * not be able to plant one.
 * @throws InvalidArgumentError when `ctx.subprocess` is not an SSH runtime; the connect errors of the world.
 */
export async function applySshSandbox(ctx: Context): Promise<BubblewrapSandboxProvider> {
  const runtime = ctx.get('subprocess') as unknown as Partial<SshRuntimeLike> | undefined
  if (runtime === undefined || typeof runtime.world !== 'function') {
    throw new InvalidArgumentError('the SSH sandbox needs an SshSubprocessRuntime as ctx.subprocess')
  }
  const world = await runtime.world()
  const workspaceRoot = ctx.sandboxPolicy.workspaceRoot
  const owner = worldOwnerOf(runtime)
  if (owner !== undefined) fenceWritableRoots(owner, [workspaceRoot])
  // The login's HOME and PATH and the uid, as a connection learned them when it logged in (no
  // request: a connection nobody leases may close the moment it idles).
  // (A lease is given back when its channel closes; this one opens none, so it is given back here.)
  const { ambient, uid } = await world.withSlot(async lease => {
    lease.release()
    return { ambient: lease.connection.ambientEnv, uid: lease.connection.control.info.uid }
  })
  // A connect failure propagates (the world is unusable anyway); a probe failure fails closed.
  const probe = await probeBwrap(script => sshRun(world, script), [workspaceRoot], ambient, uid)
  return provideSandbox(ctx, BubblewrapSandboxProvider, { where: world.describe(), probe, workspaceRoot })
}

/** Companion of SshSubprocessRuntime: provide `ctx.sandbox` backed by the host's bubblewrap. */
export const sshSandboxCompanion: SandboxCompanion<SshRuntimeConfig> = {
  plugin: async ctx => { await applySshSandbox(ctx) },
}
