/**
 * A spawn taken by a holder instead of the world's own open: how a background job's program
 * outlives its client (src/jobs/, world/dsh-job/). The jobs room runs a producer's start inside
 * {@link holdProcesses}; a spawn made there (synchronously, as DSH's shell executor makes it)
 * hands its wrapper script to the holder, which starts it in the world under a process that
 * belongs to no client and returns a transport carrying the wrapper's stdout and stderr and
 * its exit, as the world's own transport would. Everything else of the process (the start
 * marker, collect and spill, signals and teardown through the control channel) is unchanged.
 * What changes for a held process: it carries no session tag of this client (no reaper of a
 * dead client ends it), and its wrapper always waits for the program (the exit trailer), since
 * the transport's exit facts are the holder's, not the program's.
 * @module dsh-remote-worlds/providers/remote/process-holding
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import type { ProcessTransport } from './process.ts'

/** A holder of spawns made inside {@link holdProcesses}. */
export interface ProcessHolding {
  /**
   * Start `sh -c script` (a process wrapper whose markers carry `nonce`) held in the world.
   * @returns the transport of its output and exit.
   * @throws the holder's start errors (the spawn's `done` rejects with them).
   */
  open(script: string, facts: { nonce: string }): Promise<ProcessTransport>
  /**
   * Where the wrapper of a held process keeps its status file (process-wrapper.ts), for the
   * world user `uid`: a path that outlives this client (its state directory goes with it), in a
   * directory the holder makes before the wrapper runs.
   */
  statusFile(uid: number): string
}

const holding = new AsyncLocalStorage<ProcessHolding>()

/** Run `start` so that the spawns it makes synchronously (stdin ignored) are held by `holder`. */
export function holdProcesses<T>(holder: ProcessHolding, start: () => T): T {
  return holding.run(holder, start)
}

/** The holder of spawns made now, if a {@link holdProcesses} call is on the stack. */
export function currentProcessHolding(): ProcessHolding | undefined {
  return holding.getStore()
}
