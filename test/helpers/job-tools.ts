/**
 * DSH's own tools over this package's jobs (issue 35, item 4): a world composed as a DSH agent
 * composition runs them — the unchanged upstream `bash` tool (run_in_background through
 * `ctx.jobs`) and `job_output` / `job_kill` (`dsh-tool-jobs`) — over the upstream bash executor,
 * with `dsh-remote-worlds/jobs` as `ctx.jobs`. Used in this process and by job-tools-client.ts.
 */
import type { Context } from '@deepseek-ai/cordis'
import LocalBashExecutor from '@deepseek-ai/dsh-bash-local'
import { CallId } from '@deepseek-ai/dsh-llm'
import * as ShellEnv from '@deepseek-ai/dsh-shell-env'
import SystemPrompt from '@deepseek-ai/dsh-system-prompt'
import * as ToolBash from '@deepseek-ai/dsh-tool-bash'
import * as ToolJobs from '@deepseek-ai/dsh-tool-jobs'
import ToolRuntime, { type ToolExecutionResult } from '@deepseek-ai/dsh-tools'
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import WorldJobRegistry from '../../src/plugins/jobs.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import type { JobClientPlan } from './job-client.ts'

/** The plugins of the composition, in load order (after ctx.fs). */
const TOOL_PLUGINS: readonly ((ctx: Context) => Promise<unknown>)[] = [
  async ctx => ctx.plugin(SystemPrompt),
  async ctx => ctx.plugin(ToolRuntime),
  async ctx => ctx.plugin(ShellEnv, { dshHome: '/tmp/dsh-home' }),
  async ctx => ctx.plugin(LocalBashExecutor, { cwd: '/tmp', graceMs: 1_000 }),
  async ctx => {
    await ctx.plugin(WorldJobRegistry, {})
    await (ctx.get('jobs') as unknown as WorldJobRegistry).ready()
  },
  async ctx => ctx.plugin(ToolJobs),
  async ctx => ctx.plugin(ToolBash),
]

/** A world of `plan` for DSH session `session`, composed with the tools. */
export function openToolWorld(plan: JobClientPlan['world'], session: string): Promise<RemoteWorld> {
  const common = { workspaceRoot: '/tmp', session, plugins: TOOL_PLUGINS }
  return plan.runtime === 'docker'
    ? openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: plan.config, ...common })
    : openWorld({ runtime: SshSubprocessRuntime, runtimeConfig: plan.config, ...common })
}

let calls = 0

/** One tool call as the agent loop makes it, by the world's owner agent. */
export function callTool(world: RemoteWorld, name: string, args: Record<string, unknown>): Promise<ToolExecutionResult> {
  calls += 1
  return world.ctx.tools.execute({ signal: new AbortController().signal, callId: CallId(`job-call-${process.pid}-${calls}`), name, arguments: args, agent: world.agent })
}

/** The text a result shows the model. */
export function shown(result: ToolExecutionResult): string {
  return result.content.map(block => (block as { text?: string }).text ?? '').join('')
}
