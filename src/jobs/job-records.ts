/**
 * The record of a held job in its world, beside dsh-job's own files in the jobs directory of the
 * world's user: what a later client needs to list the job with the same id, owner session and
 * label, to read its output from where the last reader stopped, and to stop it.
 * - DIR/KEY.meta: the {@link JobRecord}, one JSON line, written by dsh-job as it starts the job
 *   (dsh-job run), never changed after.
 * - DIR/KEY.cursor: `OUT ERR`, the offsets the last reader consumed up to, written by dsh-job
 *   as a reader asks through its tail (job-holder.ts `recordCursor`).
 * - DIR/KEY.state: dsh-job's state line (the holder's pid while it runs, then the job's end).
 * - DIR/KEY.start: the stdout offset where the program's own bytes begin (past the wrapper's
 *   start marker), written by dsh-job once the marker went by.
 * - DIR/KEY.status: the process wrapper's status file (process-wrapper.ts), while it waits.
 * @module dsh-remote-worlds/jobs/job-records
 */
import { z } from 'zod'
import { shQuote } from '../providers/remote/quote.ts'
import type { WorldOwner } from '../providers/remote/world-owner.ts'
import { runInWorld } from '../providers/remote/world-tools/run.ts'
import { holderInState, type JobCursor } from './job-holder.ts'

/** The record's version (its `version` field); another one is left alone. */
export const JOB_RECORD_VERSION = 2

/** One held job's record. */
export const JobRecord = z.object({
  version: z.literal(JOB_RECORD_VERSION),
  /** dsh-job's key: the file names of the job in the jobs directory. */
  key: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/),
  /** The registry id (`bash-3`). */
  id: z.string().min(1),
  kind: z.string().min(1),
  label: z.string(),
  /** The owner's DSH session id; absent for an unowned job. */
  session: z.string().min(1).optional(),
  outputLimitBytes: z.number().int().positive().optional(),
  /** When it was registered (epoch ms). */
  startedAt: z.number(),
  /** The nonce of its process wrapper's markers (process-wrapper.ts). */
  nonce: z.string().regex(/^[0-9a-f]{32}$/),
}).strict()
export type JobRecord = z.infer<typeof JobRecord>

/** A record read from the world, with dsh-job's state line (`running ...`, `exited N ...`, `ended ...`; empty when missing). */
export interface ListedJob {
  record: JobRecord
  state: string
  /** The raw stream offsets the last reader consumed up to (the wrapper's markers included); 0 0 before any. */
  cursor: JobCursor
  /** The holder's pid the state names (job-holder.ts holderInState); undefined once the job ended. */
  holder: number | undefined
  /** The stdout offset where the program's own bytes begin; undefined before dsh-job saw the start marker. */
  programStart: number | undefined
}

/** `record` as the one line its file holds. */
export function jobRecordLine(record: JobRecord): string {
  return JSON.stringify(record)
}

/**
 * Every record in `dir` this client's version can read, with its state line. Records that do not
 * parse are left out (another version's, a partial write).
 * @throws the world's errors.
 */
export async function listJobRecords(owner: WorldOwner, dir: string): Promise<ListedJob[]> {
  // One line per job: the record's JSON, then tab-separated the state's first line, the cursor
  // and the program's start offset.
  const script = `cd ${shQuote(dir)} 2>/dev/null || exit 0
for f in *.meta; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  k=\${f%.meta}; s= c= p=
  [ -f "$k.state" ] && IFS= read -r s < "$k.state"
  [ -f "$k.cursor" ] && IFS= read -r c < "$k.cursor"
  [ -f "$k.start" ] && IFS= read -r p < "$k.start"
  { tr -d '\\n\\t' < "$f"; printf '\\t%s\\t%s\\t%s\\n' "$s" "$c" "$p"; }
done
exit 0
`
  const result = await runInWorld(owner, script)
  const listed: ListedJob[] = []
  for (const line of result.stdout.split('\n')) {
    const fields = line.split('\t')
    if (fields.length !== 4) continue
    const [json, state, cursor, start] = fields as [string, string, string, string]
    try {
      const parsed = JobRecord.safeParse(JSON.parse(json))
      if (parsed.success) listed.push({ record: parsed.data, state, holder: holderInState(state), cursor: cursorOf(cursor), programStart: /^\d+$/.test(start) ? Number(start) : undefined })
    } catch {
      // Not JSON: a partial write, or not ours.
    }
  }
  return listed
}

/**
 * Remove the files of job `key` from `dir` (its record, its output rings, its state, cursor and
 * start, its wrapper's status file).
 * @throws the world's errors.
 */
export async function removeJobFiles(owner: WorldOwner, dir: string, key: string): Promise<void> {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(key)) throw new RangeError(`not a job key: ${JSON.stringify(key)}`)
  const base = shQuote(`${dir}/${key}`)
  await runInWorld(owner, `rm -f ${base}.meta ${base}.out ${base}.err ${base}.state ${base}.touch ${base}.cursor ${base}.start ${base}.status; exit 0`)
}

/** A cursor file's line (`OUT ERR`); 0 0 when missing or not that. */
export function cursorOf(line: string): JobCursor {
  const match = /^(\d+) (\d+)$/.exec(line)
  return match === null ? { stdout: 0, stderr: 0 } : { stdout: Number(match[1]), stderr: Number(match[2]) }
}
