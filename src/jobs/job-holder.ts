/**
 * The client half of dsh-job (world/dsh-job/dsh-job.c states the protocol): start a process
 * wrapper under a job holder that belongs to no client and read it as a {@link ProcessTransport}
 * (the wrapper's stdout and stderr, and the holder's exit facts), in one exec; tail a held job's
 * output from the offsets a reader reached, as raw pieces for a reader that comes back later;
 * end a held job through its holder.
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
  /** The tail failed (no such job, the world broke), or (`dsh-job run`) the job did not start. */
  fail(error: Error): void
}

/** The offsets a reader of a held job consumed up to (bytes of each stream, absolute). */
export interface JobCursor {
  stdout: number
  stderr: number
}

/** A running tail: its process, and a way to stop it. */
export interface JobTail {
  /**
   * Record `cursor` in the world (DIR/KEY.cursor, through the tail: no exec), so a later reader
   * resumes there. Resolves once it is recorded.
   * @throws JobHoldError when dsh-job could not write it, TransportError when the tail ended
   * first (the job's end, a closed tail, a broken world: the cursor is not recorded).
   */
  recordCursor(cursor: JobCursor): Promise<void>
  /**
   * Resolves once every byte the job's output held when it was asked has been handed to the
   * events (or the tail ended: its end or failure came last). Never rejects.
   */
  caughtUp(): Promise<void>
  close(): void
}

/**
 * Follow the output of the held job at `place` from `from` (absolute offsets of stdout and
 * stderr). Events come in order; exactly one of `end` and `fail` comes last.
 * @throws the world's open errors.
 */
export async function tailJob(owner: WorldOwner, place: JobPlace, from: JobCursor, events: JobTailEvents): Promise<JobTail> {
  return followJob(owner, place, ['tail', place.dir, place.key, String(from.stdout), String(from.stderr)], events)
}

/** How a job starts: what `dsh-job run` is given (dsh-job.c). */
export interface JobLaunch {
  /** How long the job lives with no reader (s; 0: until it ends). */
  ttlSeconds: number
  /** The bound of each output ring (bytes). */
  logBytes: number
  /** The process wrapper's nonce: the holder reads the job's own status from its exit trailer. */
  nonce: string
  /** The client's record of the job, one line, written as DIR/KEY.meta before the job starts (job-records.ts). */
  meta: string
  /** What `/bin/sh -c` runs. */
  script: string
}

/**
 * Start a job held by dsh-job at `place` and follow its output from the start, in one exec
 * (`dsh-job run`; see dsh-job.c): a {@link ProcessTransport} whose stdout and stderr are the
 * job's (the process wrapper's markers included) and whose exit facts are its end as the holder
 * recorded it. `delivered` counts the bytes of each stream handed on so far; `tail` records a
 * reader's cursor.
 * @returns once the program runs, with the holder's pid in the world.
 * @throws JobHoldError with dsh-job's reason when the job did not start; TransportError when the
 * world broke before it said; the world's open errors.
 */
export async function runHeldJob(owner: WorldOwner, place: JobPlace, launch: JobLaunch): Promise<{ transport: ProcessTransport; delivered: JobCursor; tail: JobTail; holder: number }> {
  const stdout = new PassThrough({ highWaterMark: 1 << 20 })
  const stderr = new PassThrough({ highWaterMark: 1 << 20 })
  const delivered = { stdout: 0, stderr: 0 }
  const exit = Promise.withResolvers<SubprocessOutcome>()
  exit.promise.catch(() => undefined)
  const started = Promise.withResolvers<number>()
  const args = ['run', place.dir, place.key, String(launch.ttlSeconds), String(launch.logBytes), launch.nonce, launch.meta, launch.script]
  const tail = await followJob(owner, place, args, {
    started: holder => started.resolve(holder),
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
      started.reject(error)
      exit.reject(error)
      stdout.end()
      stderr.end()
    },
  })
  const holder = await started.promise
  return { transport: { stdout, stderr, stdin: undefined, exit: () => exit.promise, close: () => tail.close() }, delivered, tail, holder }
}

/**
 * Run dsh-job `args` (`tail` or `run`) and hand its frames to `events` as they come.
 * `started` is `run`'s `S` frame; an `e` frame fails with a JobHoldError.
 */
async function followJob(owner: WorldOwner, place: JobPlace, args: string[], events: JobTailEvents & { started?(holder: number): void }): Promise<JobTail> {
  const copy = await installWorldTool(owner, 'dsh-job')
  const transport = await owner.openProcess(worldToolCommand(copy, args))
  const splitter = new CodedFrameSplitter(MAX_TAIL_FRAME, 'dsh-job')
  const verb = args[0] === 'run' ? 'start' : 'follow'
  let finished = false
  let said = ''
  // Cursor requests in flight, answered in order (dsh-job.c `c`), and syncs (`s`).
  const recording: PromiseWithResolvers<void>[] = []
  const syncing: PromiseWithResolvers<void>[] = []
  const finish = (error: Error | undefined, line?: string): void => {
    if (finished) return
    finished = true
    if (error !== undefined) events.fail(error)
    else events.end(line!)
    for (const pending of recording.splice(0)) pending.reject(new TransportError(`${owner.describe()}: the tail of job ${place.key} ended before it recorded the reader's cursor`))
    for (const pending of syncing.splice(0)) pending.resolve()
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
      else if (code === 'S') {
        const holder = /^started ([1-9]\d*)$/.exec(frame.payload.toString('utf8'))
        if (holder === null) finish(new TransportError(`${owner.describe()}: dsh-job said ${JSON.stringify(frame.payload.toString('utf8').slice(0, 100))}, not \`started PID\``))
        else events.started?.(Number(holder[1]))
      }
      else if (code === 'C') {
        const text = frame.payload.toString('utf8')
        if (text.startsWith('error ')) recording.shift()?.reject(new JobHoldError(`${owner.describe()}: the cursor of job ${place.key} was not recorded: ${text.slice(6)}`))
        else recording.shift()?.resolve()
      } else if (code === 'Y') syncing.shift()?.resolve()
      else if (code === 'X') finish(undefined, frame.payload.toString('utf8'))
      else if (code === 'e') finish(new JobHoldError(`${owner.describe()}: cannot ${verb} the job ${place.key}: ${frame.payload.toString('utf8')}`))
    }
  })
  transport.stdout.once('end', () => finish(new TransportError(`${owner.describe()}: the job ${place.key}'s output stream ended before the job did${said.trim().length > 0 ? `: ${said.trim().slice(0, 300)}` : ''}`)))
  transport.stdout.on('error', (error: Error) => finish(new TransportError(`${owner.describe()}: the job ${place.key}'s output stream failed: ${error.message}`, { cause: error })))
  transport.stdin?.on('error', () => undefined)
  return {
    recordCursor: cursor => {
      if (finished || transport.stdin === undefined) return Promise.reject(new TransportError(`${owner.describe()}: the tail of job ${place.key} has ended; the reader's cursor was not recorded`))
      const pending = Promise.withResolvers<void>()
      recording.push(pending)
      transport.stdin.write(`c ${cursor.stdout} ${cursor.stderr}\n`)
      return pending.promise
    },
    caughtUp: () => {
      if (finished || transport.stdin === undefined) return Promise.resolve()
      const pending = Promise.withResolvers<void>()
      syncing.push(pending)
      transport.stdin.write('s\n')
      return pending.promise
    },
    close: () => finish(new TransportError(`${owner.describe()}: the tail of job ${place.key} was closed`)),
  }
}

/**
 * The holder's pid a state line of dsh-job names (`running HOLDER CHILD`, `exited CODE HOLDER`,
 * `killed SIGNAL HOLDER`); undefined once it `ended` (the holder is gone) or without a state.
 */
export function holderInState(state: string): number | undefined {
  const match = /^running (\d+) \d+$/.exec(state) ?? /^(?:exited|killed) \d+ (\d+)$/.exec(state)
  return match !== null ? Number(match[1]) : undefined
}

/**
 * Ask the holder of a held job to end it: SIGTERM to the holder, which sends SIGTERM to every
 * process of the job and SIGKILL 2 s later, and records its end (dsh-job.c). Fenced: only the
 * process with pid `holder` that leads its own session and whose command line holds `key`
 * (`dsh-job run DIR KEY ...`), so a pid taken by another process is never signalled.
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
