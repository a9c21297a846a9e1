/**
 * Compositions for the background-job suites (src/jobs/): a world runtime as `ctx.subprocess`,
 * the upstream bash executor as `ctx.shell`, this package's job registry as `ctx.jobs` with a
 * controller attached, and an agent of a given DSH session (a new client of the same session is a
 * new composition with the same session id). Jobs are started exactly as dsh-tool-bash starts a
 * background command (its producer: `ctx.shell.start`, cancel as kill, the read delta).
 */
import { Context } from '@deepseek-ai/cordis'
import AgentRegistry from '@deepseek-ai/dsh-agent'
import type { Agent } from '@deepseek-ai/dsh-agent'
import LocalBashExecutor from '@deepseek-ai/dsh-bash-local'
import type { JobId, JobOutcome } from '@deepseek-ai/dsh-jobs'
import SessionStore from '@deepseek-ai/dsh-session'
import LocalJobRegistry from '@deepseek-ai/dsh-jobs-local'
import WorldJobRegistry from '../../src/plugins/jobs.ts'
import { ownerAgent } from '../../src/backend/world.ts'

/** One client: its context, registry and agent. */
export interface JobClient {
  ctx: Context
  jobs: WorldJobRegistry
  agent: Agent
  /** Start `command` in the background as dsh-tool-bash does; returns the job id. */
  background(command: string): JobId
  /** End the client as a clean exit does (its held jobs run on in the world). */
  close(): Promise<void>
}

/** dsh-tool-bash's outcome of a settled background process (`processOutcome`). */
function outcomeOf(proc: { status: string; exitCode: number | null; signal: string | null }): JobOutcome {
  if (proc.status === 'killed') return { status: 'killed', detail: proc.signal !== null ? `signal: ${proc.signal}` : 'killed before exit' }
  return { status: 'completed', detail: `exit code: ${proc.exitCode ?? 0}` }
}

/**
 * Compose one client.
 * @param runtime - mounts the world runtime (`ctx.subprocess`) in the context it is given.
 * @param session - the DSH session id of its agent.
 * @param registry - this package's registry (default), or the upstream `dsh-jobs-local`.
 */
export async function jobClient(runtime: (ctx: Context) => Promise<void>, session: string, registry: 'world' | 'upstream' = 'world'): Promise<JobClient> {
  const ctx = new Context()
  await ctx.plugin(AgentRegistry)
  await ctx.plugin(SessionStore)
  await runtime(ctx)
  // A read holds up to 4 MiB (the executor keeps 64 kB by default): the bench reads 1 MiB at once.
  await ctx.plugin(LocalBashExecutor, { cwd: '/tmp', graceMs: 1_000, maxOutputBytes: 4 * 1024 * 1024 })
  // 'upstream': dsh-jobs-local itself, the registry this package's is measured beside.
  if (registry === 'world') await ctx.plugin(WorldJobRegistry, {})
  else await ctx.plugin(LocalJobRegistry, {})
  const jobs = ctx.get('jobs') as unknown as WorldJobRegistry
  if (registry === 'world') await jobs.ready()
  jobs.attachController('test')
  // The agent openWorld gives a world (a store-entered session, no model), of session `session`.
  const agent = ownerAgent(ctx, session)
  ctx.agents.register(agent)
  const shell = ctx.get('shell') as unknown as LocalBashExecutor
  return {
    ctx,
    jobs,
    agent,
    background: command => jobs.start({
      kind: 'bash',
      label: command,
      owner: agent,
      run: () => {
        const proc = shell.start(shell.resolve({ command }))
        return {
          cancel: () => void proc.kill(),
          done: proc.done.then(() => outcomeOf(proc)),
          readOutput: () => proc.readOutput().delta,
        }
      },
    }),
    close: async () => { await ctx.fiber.dispose() },
  }
}
