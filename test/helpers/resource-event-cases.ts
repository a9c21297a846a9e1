/**
 * Resource-limit events, shared by the Docker and SSH worlds: a world whose cgroup has a
 * 256 MiB memory limit (swap equal, so swap cannot absorb it) and a pids limit of 64. A terminal
 * send that the limit kills names the kill in its `events`; a send that does not has none; a
 * spawned process killed by the limit says so on its outcome.
 */
import type { RemoteWorld } from '../../src/backend/world.ts'
import type { RemoteSubprocessOutcome } from '../../src/providers/remote/process.ts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

/** The memory limit of the world under test, in bytes (256 MiB). */
export const MEMORY_LIMIT = 256 * 1024 * 1024
/** The pids limit of the world under test. */
export const PIDS_LIMIT = 64
/** Allocates 600 MiB at once: more than the limit, so the OOM killer ends it. */
export const OOM_INPUT = "python3 -c 'b=bytearray(600<<20)'"
/**
 * Forks sleeping children until a fork is refused (exactly one refusal), then kills and reaps
 * them. Prints how many it made.
 */
export const FORK_PAST_LIMIT = `python3 -c 'exec("import os,signal,time\\nk=[]\\ntry:\\n  for _ in range(200):\\n    p=os.fork()\\n    if p==0:\\n      time.sleep(60); os._exit(0)\\n    k.append(p)\\nexcept OSError as e:\\n  print(\\"refused after\\", len(k), e.errno)\\nfor p in k: os.kill(p, signal.SIGKILL)\\nfor p in k: os.waitpid(p, 0)")'`

/** One world's setup for the cases. */
export interface ResourceEventWorld {
  /** Label in test names, e.g. `docker`. */
  name: string
  /** Open a composed world whose cgroup has {@link MEMORY_LIMIT} and {@link PIDS_LIMIT}. */
  open(): Promise<RemoteWorld>
  /**
   * Resolve once the world starts nothing more of its own after a terminal opened (the Docker
   * pool's next standby, 250 ms after a terminal took one); absent when it starts nothing.
   */
  quiet?(world: RemoteWorld): Promise<void>
}

/** Register the cases. */
export function resourceEventCases(setup: ResourceEventWorld): void {
  describe(`resource-limit events (${setup.name})`, () => {
    let world: RemoteWorld

    beforeAll(async () => {
      world = await setup.open()
    }, 60_000)

    afterAll(async () => {
      await world?.dispose()
    })

    it('a send the memory limit kills reports one oom_kill with the limit, each time; a send that does not reports none', async () => {
      const terminal = await world.open({ cwd: '/tmp' })
      const first = await terminal.send(OOM_INPUT)
      expect(first.viewport).toContain('Killed')
      expect(first.events).toEqual([{ kind: 'oom_kill', count: 1, limitBytes: MEMORY_LIMIT }])
      const second = await terminal.send(OOM_INPUT)
      expect(second.events).toEqual([{ kind: 'oom_kill', count: 1, limitBytes: MEMORY_LIMIT }])
      const quiet = await terminal.send("python3 -c 'b=bytearray(16<<20); print(len(b))'")
      expect(quiet.viewport).toContain('16777216')
      expect(quiet.events).toBeUndefined()
      await terminal.close()
    }, 60_000)

    it('a send that forks past the pids limit reports one pids_max with the limit', async () => {
      const terminal = await world.open({ cwd: '/tmp' })
      // The count is the cgroup's: a fork of anything else there while python is at the limit
      // would be refused and counted too.
      await setup.quiet?.(world)
      const result = await terminal.send(FORK_PAST_LIMIT)
      expect(result.viewport).toMatch(/refused after \d+ 11/)
      expect(result.events).toEqual([{ kind: 'pids_max', count: 1, limit: PIDS_LIMIT }])
      await terminal.close()
    }, 60_000)

    it('a spawned process the memory limit kills: SIGKILL on its outcome, with the oom_kill event', async () => {
      const handle = world.runtime.spawn({
        argv: ['python3', '-c', 'b=bytearray(600<<20)'],
        cwd: '/tmp',
        stdio: { stdin: 'ignore', stdout: { maxBytes: 1 << 20 }, stderr: { maxBytes: 1 << 20 } },
        graceMs: 500,
      })
      const outcome = await handle.done as RemoteSubprocessOutcome
      expect(outcome).toEqual({ exitCode: null, signal: 'SIGKILL', events: [{ kind: 'oom_kill', count: 1, limitBytes: MEMORY_LIMIT }] })
      await handle.waitForExit()
    }, 60_000)

    it('a spawned process that stays under the limit: the exact outcome, no events field', async () => {
      const handle = world.runtime.spawn({
        argv: ['python3', '-c', 'b=bytearray(16<<20)'],
        cwd: '/tmp',
        stdio: { stdin: 'ignore', stdout: { maxBytes: 1 << 20 }, stderr: { maxBytes: 1 << 20 } },
        graceMs: 500,
      })
      expect(await handle.done).toEqual({ exitCode: 0, signal: null })
      await handle.waitForExit()
    }, 60_000)
  })
}
