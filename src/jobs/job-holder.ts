/**
 * The client half of dsh-job (world/dsh-job/dsh-job.c states the protocol): hold a process
 * wrapper under a job holder that belongs to no client, and tail a held job's output from the
 * offsets a reader reached, as a {@link ProcessTransport} (the wrapper's stdout and stderr, and
 * the holder's exit facts) or as raw pieces for a reader that comes back later.
 * @module dsh-remote-worlds/jobs/job-holder
 */
import { PassThrough } from 'node:stream'
import type { SubprocessOutcome } from '@deepseek-ai/dsh-subprocess'
import { TransportError } from '../providers/remote/errors.ts'
import { CodedFrameSplitter } from '../providers/remote/frames.ts'
import type { ProcessTransport } from '../providers/remote/process.ts'
import { signalName } from '../providers/remote/signals.ts'
import type { WorldOwner } from '../providers/remote/world-owner.ts'
import { installWorldTool } from '../providers/remote/world-tools/install.ts'
import { worldToolCommand } from '../providers/remote/world-tools/launch.ts'
import { runInWorld } from '../providers/remote/world-tools/run.ts'

/** The version of dsh-job's protocol this half speaks (dsh-job.c `PROTOCOL`). */
export const JOB_HOLDER_PROTOCOL = '1'

/** The largest tail frame (bytes): dsh-job sends 64 KiB of output and an 8-byte offset. */
const MAX_TAIL_FRAME = 1 << 20

/** The jobs directory of a uid in a world: private to it (0700), where dsh-job keeps each job's files. */
export function jobsDirectory(uid: number): string {
  return `/tmp/dsh-remote-jobs-${uid}`
}

/** A job holder could not start its job (its `error` line, or a world that broke first). */
export class JobHoldError extends Error {
  readonly code = 'JOB_HOLD_FAILED'
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'JobHoldError'
  }
}

/** Where a held job lives: the jobs directory and its key there. */
export interface JobPlace {
  dir: string
  key: string
}

/**
 * Start `sh -c script` held by dsh-job at `place` (see the module comment).
 * @param ttlSeconds - how long the job lives with no reader (0: until it ends).
 * @param logBytes - the bound of each output ring (bytes).
 * @returns the holder's pid in the world.
 * @throws JobHoldError with the holder's reason; the world's open errors.
 */
export async function holdJob(owner: WorldOwner, place: JobPlace, ttlSeconds: number, logBytes: number, script: string): Promise<number> {
  const copy = await installWorldTool(owner, 'dsh-job')
  const result = await runInWorld(owner, worldToolCommand(copy, ['hold', place.dir, place.key, String(ttlSeconds), String(logBytes), script]))
  const line = result.stdout.trim()
  const started = /^started (\d+)$/.exec(line)
  if (result.exitCode === 0 && started !== null) return Number(started[1])
  throw new JobHoldError(`${owner.describe()}: the job holder did not start the job: ${line.replace(/^error /, '') || result.stderr.trim().slice(0, 300) || `exit ${result.exitCode}`}`)
}

/** The end of a held job, as its holder recorded it (`ended exited CODE` / `ended killed SIGNAL`). */
export function outcomeOfEnd(line: string): SubprocessOutcome {
  const killed = /^ended killed (\d+)$/.exec(line)
  if (killed !== null) return { exitCode: null, signal: signalName(Number(killed[1])) ?? 'SIGKILL' }
  const exited = /^ended exited (\d+)$/.exec(line)
  return { exitCode: exited !== null ? Number(exited[1]) : 1, signal: null }
}

/** What a tail delivers, piece by piece. */
export interface JobTailEvents {
  /** Output of one stream from an absolute offset (a gap from the last piece is output the ring dropped). */
  output(stream: 'stdout' | 'stderr', offset: number, data: Buffer): void
  /** The job ended and all its output was delivered. */
  end(line: string): void
  /** The tail failed (no such job, the world broke). */
  fail(error: Error): void
}

/** A running tail: its process, and a way to stop it. */
export interface JobTail {
  close(): void
}

/**
 * Follow the output of the held job at `place` from `from` (absolute offsets of stdout and
 * stderr). Events come in order; exactly one of `end` and `fail` comes last.
 * @throws the world's open errors.
 */
export async function tailJob(owner: WorldOwner, place: JobPlace, from: { stdout: number; stderr: number }, events: JobTailEvents): Promise<JobTail> {
  const copy = await installWorldTool(owner, 'dsh-job')
  const transport = await owner.openProcess(worldToolCommand(copy, ['tail', place.dir, place.key, String(from.stdout), String(from.stderr)]))
  const splitter = new CodedFrameSplitter(MAX_TAIL_FRAME, 'dsh-job')
  let finished = false
  let said = ''
  const finish = (error: Error | undefined, line?: string): void => {
    if (finished) return
    finished = true
    if (error !== undefined) events.fail(error)
    else events.end(line!)
    transport.close()
  }
  transport.stderr.on('data', (chunk: Buffer) => { if (said.length < 2_000) said += chunk.toString('utf8') })
  transport.stdout.on('data', (chunk: Buffer) => {
    if (finished) return
    let frames: { code: number; payload: Buffer }[]
    try {
      frames = splitter.push(chunk)
    } catch (error) {
      finish(new TransportError(`${owner.describe()}: ${(error as Error).message}`, { cause: error }))
      return
    }
    for (const frame of frames) {
      const code = String.fromCharCode(frame.code)
      if (code === 'O' || code === 'E') events.output(code === 'O' ? 'stdout' : 'stderr', Number(frame.payload.readBigUInt64LE(0)), frame.payload.subarray(8))
      else if (code === 'X') finish(undefined, frame.payload.toString('utf8'))
      else if (code === 'e') finish(new JobHoldError(`${owner.describe()}: cannot follow the job ${place.key}: ${frame.payload.toString('utf8')}`))
    }
  })
  transport.stdout.once('end', () => finish(new TransportError(`${owner.describe()}: the job ${place.key}'s output stream ended before the job did${said.trim().length > 0 ? `: ${said.trim().slice(0, 300)}` : ''}`)))
  transport.stdout.on('error', (error: Error) => finish(new TransportError(`${owner.describe()}: the job ${place.key}'s output stream failed: ${error.message}`, { cause: error })))
  return { close: () => finish(new TransportError(`${owner.describe()}: the tail of job ${place.key} was closed`)) }
}

/**
 * A held job as a {@link ProcessTransport}: the tail of its output from the start (the wrapper's
 * markers included) and its end as the exit facts. `delivered` counts the bytes of each stream
 * handed on so far (the offsets a later reader resumes from).
 */
export async function heldJobTransport(owner: WorldOwner, place: JobPlace): Promise<ProcessTransport & { delivered: { stdout: number; stderr: number } }> {
  const stdout = new PassThrough({ highWaterMark: 1 << 20 })
  const stderr = new PassThrough({ highWaterMark: 1 << 20 })
  const delivered = { stdout: 0, stderr: 0 }
  const exit = Promise.withResolvers<SubprocessOutcome>()
  exit.promise.catch(() => undefined)
  const tail = await tailJob(owner, place, { stdout: 0, stderr: 0 }, {
    output: (stream, offset, data) => {
      delivered[stream] = offset + data.length
      ;(stream === 'stdout' ? stdout : stderr).write(data)
    },
    end: line => {
      exit.resolve(outcomeOfEnd(line))
      stdout.end()
      stderr.end()
    },
    fail: error => {
      exit.reject(error)
      stdout.end()
      stderr.end()
    },
  })
  return {
    stdout,
    stderr,
    stdin: undefined,
    exit: () => exit.promise,
    close: () => tail.close(),
    delivered,
  }
}

/**
 * Ask the holder of a held job to end it: SIGTERM to the holder, which sends SIGTERM to every
 * process of the job and SIGKILL 2 s later, and records its end (dsh-job.c). Fenced: only the
 * process with pid `holder` that leads its own session and whose command line holds `key`
 * (`dsh-job hold DIR KEY ...`), so a pid taken by another process is never signalled.
 * @returns whether the holder was signalled (false: it is gone).
 * @throws the world's errors.
 */
export async function endHeldJob(owner: WorldOwner, holder: number, key: string): Promise<boolean> {
  const control = await owner.control()
  const stat = await control.stat(holder)
  if (stat === undefined || stat.session !== holder) return false
  const identity = { pid: holder, starttime: stat.starttime }
  // control.sh answers the command line as hex (its NULs kept).
  if (!Buffer.from(await control.commandLine(identity) ?? '', 'hex').toString('latin1').includes(key)) return false
  return (await control.kill('TERM', [identity])).get(holder) === 'signalled'
}
