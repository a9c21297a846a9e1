/**
 * What loader tests read off a tree the upstream loader booted: the managed Docker world it
 * composed, and a terminal of the terminal service to send to (as terminal-bash's owner agent).
 */
import type { Context } from '@deepseek-ai/cordis'
import type Docker from 'dockerode'
import { expect } from 'vitest'
import { ownerAgent } from '../../src/backend/world.ts'
import { docker, hangGuard } from '../docker/helpers.ts'

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
