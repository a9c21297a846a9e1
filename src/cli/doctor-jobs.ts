/**
 * `doctor`'s background jobs (issue 35): the jobs of this user that dsh-job holds in the world
 * (src/jobs/: started under persistence 'client', they outlive their clients), with their DSH
 * session, id and state, and, with `--reap --include-jobs`, ending them (through each holder:
 * every process of the job gets SIGTERM, then SIGKILL) and removing their files. The reaper of a
 * dead client's sessions never ends them: they carry no client's session tag.
 * @module dsh-remote-worlds/cli/doctor-jobs
 */
import { setTimeout as delay } from 'node:timers/promises'
import type { RemoteWorld } from '../backend/world.ts'
import { endHeldJob, jobsDirectory } from '../jobs/job-holder.ts'
import { type ListedJob, listJobRecords, removeJobFiles } from '../jobs/job-records.ts'
import { worldOwnerOf } from '../providers/remote/world-owner.ts'

/** How long holders may take to end their jobs (TERM, KILL after 2 s, then the same for what is left) and record it (ms). */
const HOLDER_END_MS = 8_000

/** One held job as doctor reports it. */
export interface HeldJobEntry {
  id: string
  /** The DSH session that owns it (absent: unowned). */
  session: string | null
  label: string
  /** When it started (ISO 8601). */
  started: string
  /** `running (holder PID)`, `ended: exited N` / `ended: killed SIGNAL`, or `unknown` when dsh-job wrote no state. */
  state: string
}

/** What doctor found (and did) about held jobs. */
export interface HeldJobReport {
  jobs: HeldJobEntry[]
  /** Ended, and their files removed. */
  reaped: boolean
}

function entryOf({ record, state, holder }: ListedJob): HeldJobEntry {
  const ended = /^ended (.*)$/.exec(state)
  return {
    id: record.id,
    session: record.session ?? null,
    label: record.label,
    started: new Date(record.startedAt).toISOString(),
    state: ended !== null ? `ended: ${ended[1]}` : holder !== undefined ? `running (holder ${holder})` : 'unknown',
  }
}

/**
 * List this user's held jobs in the world of `runtime` (a world's `ctx.subprocess`); with `reap`,
 * end them and remove their files.
 * @throws the world's errors.
 */
export async function scanHeldJobs(runtime: RemoteWorld['runtime'] | undefined, options: { reap: boolean }): Promise<HeldJobReport> {
  const owner = worldOwnerOf(runtime)
  if (owner === undefined) return { jobs: [], reaped: false }
  const dir = jobsDirectory((await owner.control()).info.uid)
  const listed = await listJobRecords(owner, dir)
  const jobs = listed.map(entryOf)
  if (options.reap && listed.length > 0) {
    for (const { record, holder } of listed) if (holder !== undefined) await endHeldJob(owner, holder, record.key)
    const deadline = performance.now() + HOLDER_END_MS
    while (performance.now() < deadline && (await listJobRecords(owner, dir)).some(job => !job.state.startsWith('ended') && listed.some(ended => ended.record.key === job.record.key))) await delay(100)
    for (const { record } of listed) await removeJobFiles(owner, dir, record.key)
  }
  return { jobs, reaped: options.reap }
}

/** Render the report for humans, one line a job. */
export function formatHeldJobs(report: HeldJobReport): string[] {
  if (report.jobs.length === 0) return ['none (of this uid: other users\' are seen with --user)']
  return report.jobs.map(job => `job ${job.id}${job.session !== null ? ` of session ${job.session}` : ''}, started ${job.started}: ${job.state}${report.reaped ? ' — ended, files removed' : ''}: ${JSON.stringify(job.label.length > 80 ? `${job.label.slice(0, 77)}...` : job.label)}`)
}
