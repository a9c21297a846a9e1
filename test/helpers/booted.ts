/**
 * What loader tests read off a tree the upstream loader booted: the managed Docker world it
 * composed, and a terminal of the terminal service to send to (as terminal-bash's owner agent).
 */
import { chownSync, mkdirSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import { boot, loadOptionalPatches } from '@deepseek-ai/dsh-app-boot'
import type Docker from 'dockerode'
import { afterAll, beforeAll, expect } from 'vitest'
import { ownerAgent } from '../../src/backend/world.ts'
import { docker, hangGuard } from '../docker/helpers.ts'
import { type BuiltProfile, buildProfile } from './built-package.ts'

/**
 * A loader test file's profile under `tmp`: before its tests, the package built into a DSH
 * profile with `patch()` as its layer, a workspace folder `tmp/workspace` owned by uid 1000, and
 * DSH_HOME under `tmp`; `boot()` boots it with the upstream loader (bounded); after the tests,
 * the booted tree is disposed and `tmp` removed.
 */
export function useLoaderProfile(tmp: string, patch: () => string): { built: () => BuiltProfile; boot: () => Promise<Context>; disposed: () => void } {
  let built: BuiltProfile | undefined
  let ctx: Context | undefined
  beforeAll(async () => {
    built = await buildProfile(tmp)
    built.writePatch(patch())
    const workspace = join(tmp, 'workspace')
    mkdirSync(workspace)
    chownSync(workspace, 1000, 1000)
    process.env.DSH_HOME = join(tmp, 'dsh-home')
  }, 240_000)
  afterAll(async () => {
    await ctx?.fiber.dispose().catch(() => undefined)
    rmSync(tmp, { recursive: true, force: true })
  })
  return {
    built: () => built!,
    boot: async () => {
      const { profile } = built!
      const patches = loadOptionalPatches('dsh-remote-test', join(profile, 'cordis.patch.yml'))!
      ctx = await hangGuard(boot('dsh-remote-test', join(profile, 'cordis.yml'), patches), 60_000, 'boot')
      return ctx
    },
    // The test disposed the tree itself.
    disposed: () => { ctx = undefined },
  }
}

/** The booted `ctx.subprocess`: a DockerSubprocessRuntime over a managed container created from the policy. */
export async function bootedManagedWorld(ctx: Context): Promise<{ containerId: string; info: Docker.ContainerInspectInfo }> {
  const runtime = ctx.get('subprocess') as unknown as { constructor: { name: string }; world(): Promise<{ containerId: string; managed: boolean }> }
  expect(runtime.constructor.name).toBe('DockerSubprocessRuntime')
  const world = await runtime.world()
  expect(world.managed).toBe(true)
  return { containerId: world.containerId, info: await docker.getContainer(world.containerId).inspect() }
}

/** Open a shell through the terminal service for a fresh owner agent; `send` returns each send's viewport, `kill` closes it. */
export async function bootedTerminal(ctx: Context, agentId: string): Promise<{ pid: number | undefined; send(text: string): Promise<string>; kill(): Promise<void> }> {
  const agent = ownerAgent(ctx, agentId)
  ctx.agents.register(agent)
  const created = await hangGuard(ctx.terminals.spawn(agent, { type: 'shell' }), 30_000, 'terminal spawn')
  return {
    pid: created.pid,
    send: async text => (await hangGuard(ctx.terminals.startSend(agent, created.sessionId, { text, submit: true }).done, 30_000, text)).viewport,
    kill: async () => { await hangGuard(ctx.terminals.kill(agent, created.sessionId), 20_000, 'terminal kill') },
  }
}
