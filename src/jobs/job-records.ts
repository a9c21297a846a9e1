/**
 * The record of a held job in its world (DIR/KEY.meta beside dsh-job's own files, in the jobs
 * directory of the world's user): what a later client needs to list the job with the same id,
 * owner session and label, to read its output from where the last reader stopped, and to stop
 * it. Written by this client (a JSON object, replaced atomically); dsh-job writes DIR/KEY.state.
 * @module dsh-remote-worlds/jobs/job-records
 */
import { z } from 'zod'
import { shQuote } from '../providers/remote/quote.ts'
import type { WorldOwner } from '../providers/remote/world-owner.ts'
import { runInWorld } from '../providers/remote/world-tools/run.ts'

/** The record's version (its `version` field); another one is left alone. */
export const JOB_RECORD_VERSION = 1

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
  /** The holder's pid in the world. */
  holder: z.number().int().positive(),
  /** The raw stream offsets a reader consumed up to (the wrapper's markers included). */
  cursor: z.object({ stdout: z.number().int().nonnegative(), stderr: z.number().int().nonnegative() }),
  /** A reader saw its end and reported it: a later client lists it no more. */
  collected: z.boolean().optional(),
}).strict()
export type JobRecord = z.infer<typeof JobRecord>

/** A record read from the world, with dsh-job's state line (`running ...`, `exited N`, `ended ...`; empty when missing). */
export interface ListedJob {
  record: JobRecord
  state: string
}

/**
 * Write (replace) `record` in `dir`.
 * @throws the world's errors; Error when the world refused the write.
 */
export async function writeJobRecord(owner: WorldOwner, dir: string, record: JobRecord): Promise<void> {
  const path = `${dir}/${record.key}.meta`
  const temporary = `${path}.${process.pid}.tmp`
  const result = await runInWorld(owner, `umask 077 && cat > ${shQuote(temporary)} && mv -f ${shQuote(temporary)} ${shQuote(path)}`, Buffer.from(`${JSON.stringify(record)}\n`, 'utf8'))
  if (result.exitCode !== 0) throw new Error(`${owner.describe()}: cannot write the job record ${path}: ${result.stderr.trim().slice(0, 300) || `exit ${result.exitCode}`}`)
}

/**
 * Every record in `dir` this client's version can read, with its state line. Records that do not
 * parse are left out (another version's, a partial write).
 * @throws the world's errors.
 */
export async function listJobRecords(owner: WorldOwner, dir: string): Promise<ListedJob[]> {
  // One line per job: the record's JSON, a tab, the state's first line.
  const script = `cd ${shQuote(dir)} 2>/dev/null || exit 0
for f in *.meta; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue
  k=\${f%.meta}; s=
  [ -f "$k.state" ] && IFS= read -r s < "$k.state"
  { tr -d '\\n\\t' < "$f"; printf '\\t%s\\n' "$s"; }
done
exit 0
`
  const result = await runInWorld(owner, script)
  const listed: ListedJob[] = []
  for (const line of result.stdout.split('\n')) {
    const tab = line.lastIndexOf('\t')
    if (tab < 0) continue
    try {
      const parsed = JobRecord.safeParse(JSON.parse(line.slice(0, tab)))
      if (parsed.success) listed.push({ record: parsed.data, state: line.slice(tab + 1) })
    } catch {
      // Not JSON: a partial write, or not ours.
    }
  }
  return listed
}

/**
 * Remove the files of job `key` from `dir` (its record, its output rings, its state).
 * @throws the world's errors.
 */
export async function removeJobFiles(owner: WorldOwner, dir: string, key: string): Promise<void> {
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(key)) throw new RangeError(`not a job key: ${JSON.stringify(key)}`)
  const base = shQuote(`${dir}/${key}`)
  await runInWorld(owner, `rm -f ${base}.meta ${base}.out ${base}.err ${base}.state ${base}.touch; exit 0`)
}
