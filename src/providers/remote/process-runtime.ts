/**
 * The world-neutral half of a runtime's `spawn` and `resolveExecutable`: spec validation, the
 * world's private state directory (spills, status files), executable lookup through the control
 * channel, and the set of live processes a runtime ends at disposal.
 * @module dsh-remote-worlds/providers/remote/process-runtime
 */
import { posix } from 'node:path'
import type { SubprocessSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import { EMPTY_PROGRAM_MESSAGE } from './boundary.ts'
import type { ControlChannel } from './control-channel.ts'
import { ExecutableNotFoundError, InvalidArgumentError } from './errors.ts'
import { stateDirectoryName } from './ownership.ts'
import { RemoteProcessHandle, type RemoteProcessStart } from './process.ts'

/** Largest delay one Node timer represents (upstream `MAX_TIMER_DELAY_MS`). */
const MAX_TIMER_DELAY_MS = 2 ** 31 - 1

/**
 * The checks every provider makes before `spawn` returns (the local provider's, synchronously).
 * @throws InvalidArgumentError for an empty argv[0], a relative cwd or an unusable graceMs.
 * @throws Error `aborted before spawn` when the spec's signal already aborted.
 */
export function checkSpawnSpec(spec: SubprocessSpawnSpec): void {
  const program = spec.argv[0]
  if (program === undefined || program.length === 0) throw new InvalidArgumentError(EMPTY_PROGRAM_MESSAGE)
  if (!Number.isFinite(spec.graceMs) || spec.graceMs <= 0 || spec.graceMs > MAX_TIMER_DELAY_MS) {
    throw new InvalidArgumentError(`subprocess graceMs must be a positive finite number no greater than ${MAX_TIMER_DELAY_MS}`)
  }
  if (!spec.cwd.startsWith('/')) throw new InvalidArgumentError(`cwd must be an absolute path in the remote world: ${JSON.stringify(spec.cwd)}`)
  for (const mode of [spec.stdio.stdout, spec.stdio.stderr]) {
    if (mode === 'pipe' || mode === 'inherit') continue
    if (!Number.isSafeInteger(mode.maxBytes) || mode.maxBytes < 0) throw new InvalidArgumentError(`collect maxBytes must be a non-negative safe integer, got ${mode.maxBytes}`)
    if (mode.spill !== undefined && (!Number.isSafeInteger(mode.spill.maxBytes) || mode.spill.maxBytes < 0)) throw new InvalidArgumentError(`spill maxBytes must be a non-negative safe integer, got ${mode.spill.maxBytes}`)
  }
  if (spec.signal?.aborted === true) throw new Error(`aborted before spawn: ${String(spec.signal.reason ?? 'aborted')}`)
}

/**
 * Resolve one executable in the world, as its user: absolute paths are verified (a regular
 * file with execute permission); bare names are searched in `path` (the world's scrubbed PATH
 * with the caller's explicit PATH over it); relative paths with a separator are rejected.
 * Relative PATH entries (and empty ones, meaning the cwd) are skipped: the lookup has no cwd.
 * One control request, answered with shell builtins (no process is started).
 * @returns the absolute path (normalized).
 * @throws InvalidArgumentError for an empty or relative command, or one holding NUL/newline.
 * @throws ExecutableNotFoundError when nothing matches.
 */
export async function resolveRemoteExecutable(control: ControlChannel, command: string, path: string | undefined, where: string, signal?: AbortSignal): Promise<string> {
  if (command.length === 0) throw new InvalidArgumentError('executable must be non-empty')
  signal?.throwIfAborted()
  let candidates: string[]
  if (command.startsWith('/')) candidates = [command]
  else if (command.includes('/')) throw new InvalidArgumentError(`command ${JSON.stringify(command)} is a relative path; use an absolute path or a bare PATH name`)
  else candidates = (path ?? '').split(':').filter(dir => dir.startsWith('/')).map(dir => posix.join(dir, command))
  if (candidates.some(candidate => /[\0\n]/.test(candidate))) throw new InvalidArgumentError(`command ${JSON.stringify(command)} holds NUL or a newline`)
  const index = await control.firstExecutable(candidates)
  signal?.throwIfAborted()
  if (index === undefined) throw new ExecutableNotFoundError(command, where)
  return candidates[index]!
}

/**
 * The world's private state directory (mode 0700, as the world's user): spill files and the
 * wrapper's status files live there, in the world, where the model's file tools can read them.
 * Created on first use, removed (recursively) when the runtime is disposed.
 */
export class RemoteStateDirectory {
  private creating: Promise<string> | undefined
  private created: string | undefined

  /**
   * @param clientId - the owning client's id (ownership.ts): the directory is named after it
   *   ({@link stateDirectoryName}), so the reaper of a gone client's sessions removes it too.
   */
  constructor(private readonly clientId: string) {}

  /**
   * The directory, created on first call under the world's TMPDIR (else /tmp).
   * @param ambient - the world's ambient environment (for TMPDIR).
   */
  ensure(control: ControlChannel, ambient: Readonly<Record<string, string>>): Promise<string> {
    if (this.creating === undefined) {
      const base = ambient.TMPDIR !== undefined && ambient.TMPDIR.startsWith('/') && !/[\0\n]/.test(ambient.TMPDIR) ? ambient.TMPDIR : '/tmp'
      const dir = posix.join(base, stateDirectoryName(control.info.uid, this.clientId))
      const creating = control.makePrivateDirs([dir]).then(() => {
        this.created = dir
        return dir
      })
      this.creating = creating
      creating.catch(() => { if (this.creating === creating) this.creating = undefined })
    }
    return this.creating
  }

  /**
   * Remove the directory and everything in it. Best effort; idempotent.
   * @param control - asked for a control channel only when the directory was created (an SSH
   *   world whose connections all closed would otherwise reconnect just to find nothing to do).
   */
  async remove(control: () => Promise<ControlChannel | undefined>): Promise<void> {
    const dir = this.created
    this.created = undefined
    this.creating = undefined
    if (dir === undefined) return
    await (await control().catch(() => undefined))?.removePaths([dir]).catch(() => undefined)
  }
}

/** The live processes of one runtime. */
export class RemoteProcessSet {
  private readonly live = new Set<RemoteProcessHandle>()

  /** Start a process and keep it until its whole tree exited. */
  spawn(start: RemoteProcessStart): RemoteProcessHandle {
    const handle = new RemoteProcessHandle(start)
    this.live.add(handle)
    const release = async (): Promise<void> => {
      if (handle.released) return
      await handle.waitForExit()
      await handle.spillsSettled
      this.live.delete(handle)
    }
    handle.done.then(release, release).catch(() => {
      // Kept: disposal retries the teardown.
    })
    return handle
  }

  /**
   * The starts of held processes (process-holding.ts) not yet settled: the runtime's disposal
   * lets them finish before it closes the world, so a background job started just before its
   * client ended is in the world and recorded, not lost half started.
   */
  heldStarts(): Promise<unknown>[] {
    return [...this.live].filter(handle => handle.holding !== undefined).map(handle => handle.whenStarted())
  }

  /** Number of processes whose tree is not yet known to be gone. */
  get size(): number {
    return this.live.size
  }

  /**
   * Terminate every live process tree and wait for it to exit (upstream disposal semantics).
   * @returns the failures (empty when every tree exited).
   */
  async dispose(): Promise<unknown[]> {
    // A held process (a background job that outlives its client) is let go, not ended.
    for (const handle of this.live) {
      if (handle.holding === undefined) continue
      handle.release()
      this.live.delete(handle)
    }
    const handles = [...this.live]
    const outcomes = await Promise.allSettled(handles.map(async handle => {
      handle.terminate()
      await handle.done.catch(() => undefined)
      await handle.waitForExit()
      await handle.spillsSettled
      this.live.delete(handle)
    }))
    return outcomes.flatMap(outcome => outcome.status === 'rejected' ? [outcome.reason as unknown] : [])
  }
}
