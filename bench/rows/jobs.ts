/**
 * The jobs family (issue 35): what a background job held in the world (`dsh-remote-worlds/jobs`,
 * persistence 'client') costs beside the upstream process-local registry (`dsh-jobs-local`,
 * whose job is a plain spawn of the same command), and how fast a restarted client has a job
 * back. Per remote world, on the default composition's infrastructure (Docker: attached to its
 * managed container); jobs are started as dsh-tool-bash starts them (test/helpers/job-worlds.ts).
 * - `job start to first output`, `(dsh-jobs-local)`: from `jobs.start` of `echo first; sleep 30`
 *   until `read` shows `first` (read every 1 ms); the report divides the held row by the
 *   upstream one (target: within 1.2x).
 * - `job read (1 MB)`, `(dsh-jobs-local)`: from `jobs.start` of a command printing 1 MiB until
 *   `read` gave all of it.
 * - `job reattach after client restart`: a client starts a job that prints a line, and ends
 *   before reading it; a new client of the session (composed, its records read) from its first
 *   `list` until `read` shows that line (target: at most 300 ms).
 * min(runs, 5) runs each. `--no-jobs` skips the family.
 * @module bench/rows/jobs
 */
import { randomBytes } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import type { Context } from '@deepseek-ai/cordis'
import { type JobClient, jobClient } from '../../test/helpers/job-worlds.ts'
import { heldConfig } from './persistence.ts'
import { type SampleTable, pushSample, withTimeout } from '../timing.ts'
import type { BenchTarget } from '../worlds.ts'

export const JOB_START_METRIC = 'job start to first output'
export const JOB_START_LOCAL_METRIC = 'job start to first output (dsh-jobs-local)'
export const JOB_READ_METRIC = 'job read (1 MB)'
export const JOB_READ_LOCAL_METRIC = 'job read (1 MB) (dsh-jobs-local)'
export const JOB_REATTACH_METRIC = 'job reattach after client restart'

export const JOB_METRICS = [JOB_START_METRIC, JOB_START_LOCAL_METRIC, JOB_READ_METRIC, JOB_READ_LOCAL_METRIC, JOB_REATTACH_METRIC] as const

/** The rows the report divides by the upstream registry's of the same world and run. */
export const JOBS_BESIDE_UPSTREAM: Readonly<Record<string, string>> = {
  [JOB_START_METRIC]: JOB_START_LOCAL_METRIC,
  [JOB_READ_METRIC]: JOB_READ_LOCAL_METRIC,
}

const ONE_MB = 1024 * 1024

/** Read job `id` (every 1 ms) until the text read holds `needle` or is `bytes` long; the text. */
async function readUntil(client: JobClient, id: string, done: (text: string) => boolean, what: string): Promise<string> {
  let text = ''
  await withTimeout((async () => {
    while (!done(text)) {
      text += client.jobs.read(id as never, client.agent).text
      if (!done(text)) await delay(1)
    }
  })(), what)
  return text
}

/** Measure the family into `samples` on `target`'s world (worlds of its own, disposed here). */
export async function jobsRuns(target: BenchTarget, runs: number, samples: SampleTable): Promise<void> {
  const runtime = (persistence: 'client' | 'off') => async (ctx: Context): Promise<void> => {
    await ctx.plugin(target.runtime as never, await heldConfig(target, persistence) as never)
  }
  const clients: JobClient[] = []
  const client = async (persistence: 'client' | 'off', session: string, registry: 'world' | 'upstream'): Promise<JobClient> => {
    const made = await jobClient(runtime(persistence), session, registry)
    clients.push(made)
    return made
  }
  try {
    const held = await client('client', `bench-jobs-${randomBytes(4).toString('hex')}`, 'world')
    const local = await client('off', `bench-jobs-${randomBytes(4).toString('hex')}`, 'upstream')
    for (let run = 0; run <= Math.min(runs, 5); run += 1) {
      for (const [c, startRow, readRow] of [[held, JOB_START_METRIC, JOB_READ_METRIC], [local, JOB_START_LOCAL_METRIC, JOB_READ_LOCAL_METRIC]] as const) {
        let started = performance.now()
        const first = c.background('echo first; sleep 30')
        await readUntil(c, first, text => text.includes('first'), startRow)
        if (run > 0) pushSample(samples, startRow, { ms: performance.now() - started })
        c.jobs.kill(first, c.agent)
        started = performance.now()
        const big = c.background(`head -c ${ONE_MB} /dev/zero | tr '\\0' x; sleep 30`)
        await readUntil(c, big, text => text.length >= ONE_MB, readRow)
        if (run > 0) pushSample(samples, readRow, { ms: performance.now() - started })
        c.jobs.kill(big, c.agent)
      }
    }
    console.error('[bench] jobs: start and read rows done')
    for (let run = 0; run <= Math.min(runs, 5); run += 1) {
      const session = `bench-jobs-${randomBytes(4).toString('hex')}`
      const first = await client('client', session, 'world')
      // Never read here: the next client reads its line (its start is recorded before the close).
      const again = first.background('echo after-restart; sleep 30')
      await first.close()
      clients.splice(clients.indexOf(first), 1)
      const next = await client('client', session, 'world')
      const started = performance.now()
      if (!next.jobs.list(next.agent).some(job => job.id === again)) throw new Error(`bench: ${JOB_REATTACH_METRIC}: the next client does not list ${again}`)
      await readUntil(next, again, text => text.includes('after-restart'), JOB_REATTACH_METRIC)
      if (run > 0) pushSample(samples, JOB_REATTACH_METRIC, { ms: performance.now() - started })
      for (const job of next.jobs.list(next.agent)) next.jobs.kill(job.id, next.agent)
    }
    console.error('[bench] jobs: reattach row done')
  } finally {
    for (const c of clients) await c.close().catch(() => undefined)
  }
}
