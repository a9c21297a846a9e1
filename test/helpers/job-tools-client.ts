/**
 * A DSH agent composition as its own process, for the case that kills it with SIGKILL
 * (job-tool-cases.ts): it starts `command` with the `bash` tool in the background, reads it with
 * `job_output` until `until` appeared, says the job id, what it read and READY, and waits.
 *
 * Run as `node --import tsx test/helpers/job-tools-client.ts JSON` (a {@link JobClientPlan}).
 */
import type { JobClientPlan } from './job-client.ts'
import { callTool, openToolWorld, shown } from './job-tools.ts'

const plan = JSON.parse(process.argv[2] ?? '{}') as JobClientPlan
try {
  const world = await openToolWorld(plan.world, plan.session)
  const started = await callTool(world, 'bash', { command: plan.command, description: 'a background job', run_in_background: true })
  const id = (started as unknown as { value: { jobId?: string } }).value.jobId
  if (started.isError || id === undefined) throw new Error(`bash did not start a job: ${shown(started)}`)
  process.stdout.write(`ID ${id}\n`)
  let text = ''
  for (const deadline = Date.now() + 30_000; !text.includes(plan.until);) {
    if (Date.now() > deadline) throw new Error(`the job never printed ${JSON.stringify(plan.until)}: ${JSON.stringify(text)}`)
    text += `${shown(await callTool(world, 'job_output', { job_id: id }))}\n`
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  await (world.ctx.get('jobs') as unknown as { settled(): Promise<void> }).settled()
  process.stdout.write(`READ ${JSON.stringify(text)}\nREADY\n`)
  await new Promise(() => undefined)
} catch (error) {
  process.stdout.write(`FAILED ${(error as Error).message.replaceAll('\n', ' ')}\n`)
  process.exit(1)
}
