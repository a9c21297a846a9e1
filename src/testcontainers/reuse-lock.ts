/**
 * A lock across processes around the start of a reusable container. testcontainers finds a
 * reusable container by the hash of its create options, under a lock that lives in one process
 * (async-lock in generic-container.js): two vitest workers (two processes) starting the same
 * reusable container at once both find none and both create one. This lock is a file in the
 * system's temporary directory, held with proper-lockfile (an mkdir lock with a stale bound, so
 * a holder that died frees it).
 * @module dsh-remote-worlds/testcontainers/reuse-lock
 */
import { createHash } from 'node:crypto'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import lockfile from 'proper-lockfile'

/** A holder that stopped updating its lock for this long is taken as dead (ms). */
const STALE_MS = 30_000

/**
 * Run `start` while holding the lock named by `key` (any string; hashed into a file name).
 * @throws whatever `start` throws; Error when the lock cannot be taken within about 2 minutes.
 */
export async function withReuseLock<T>(key: string, start: () => Promise<T>): Promise<T> {
  const file = join(tmpdir(), `dsh-remote-worlds-reuse-${createHash('sha256').update(key).digest('hex').slice(0, 32)}`)
  const release = await lockfile.lock(file, { realpath: false, stale: STALE_MS, retries: { retries: 1_200, minTimeout: 100, maxTimeout: 100 } })
  try {
    return await start()
  } finally {
    await release().catch(() => undefined)
  }
}
