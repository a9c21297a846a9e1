/**
 * A client of a world's background jobs as its own process, for the cases that kill a client
 * with SIGKILL (job-cases.ts): it composes a job client (job-worlds.ts) for a named DSH session
 * with persistence 'client', starts one background command, reads its output until `until`
 * appeared, says the job's id and READY, and waits to be killed.
 *
 * Run as `node --import tsx test/helpers/job-client.ts JSON`, JSON being a {@link JobClientPlan}.
 * Lines on stdout: `ID <job id>`, then `READY`; a failure is `FAILED <message>` and exit code 1.
 */
import type { Context } from '@deepseek-ai/cordis'
import { DockerSubprocessRuntime, type DockerRuntimeConfig } from '../../src/providers/docker/docker-runtime.ts'
import { SshSubprocessRuntime, type SshRuntimeConfig } from '../../src/providers/ssh/ssh-runtime.ts'
import { jobClient } from './job-worlds.ts'

/** What the client does (JSON on its command line). */
export interface JobClientPlan {
  world: { runtime: 'docker'; config: DockerRuntimeConfig } | { runtime: 'ssh'; config: SshRuntimeConfig }
  session: string
  command: string
  /** Output to wait for before READY (the job runs and its first output was read). */
  until: string
}

const plan = JSON.parse(process.argv[2] ?? '{}') as JobClientPlan
try {
  const runtime = async (ctx: Context): Promise<void> => {
    if (plan.world.runtime === 'docker') await ctx.plugin(DockerSubprocessRuntime, plan.world.config)
    else await ctx.plugin(SshSubprocessRuntime, plan.world.config)
  }
  const client = await jobClient(runtime, plan.session)
  const id = client.background(plan.command)
  process.stdout.write(`ID ${id}\n`)
  let text = ''
  for (const deadline = Date.now() + 30_000; !text.includes(plan.until);) {
    if (Date.now() > deadline) throw new Error(`the job never printed ${JSON.stringify(plan.until)}: ${JSON.stringify(text)}`)
    text += client.jobs.read(id, client.agent).text
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  // Once the record has the cursor of that read (the next client reads on from it).
  await client.jobs.settled()
  process.stdout.write(`READ ${JSON.stringify(text)}\nREADY\n`)
  await new Promise(() => undefined)
} catch (error) {
  process.stdout.write(`FAILED ${(error as Error).message.replaceAll('\n', ' ')}\n`)
  process.exit(1)
}
