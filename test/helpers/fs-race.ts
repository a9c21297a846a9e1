/**
 * The race of issue 32 part B, played in a world: a directory `WS/real` and a symlink `WS/evil`
 * to a directory outside WS whose real path is longer than 4096 bytes (so
 * `readlink(/proc/self/fd/N)` of a descriptor of it fails with ENAMETOOLONG), exchanged again
 * and again by `renameat2(RENAME_EXCHANGE)` (python3's ctypes; the project image has python3).
 * A write of `WS/real/NAME` then opens either directory; a server that checks the fence by NAME
 * when the descriptor's path cannot be read (realpath of `WS/real`, which by then may be the
 * directory again) publishes into the deep one.
 */
import { expect } from 'vitest'
import { execIn, waitFor } from '../docker/helpers.ts'

/** Python: make the deep directory under BASE (24 levels of 200 bytes) and WS/real, WS/evil. */
const SETUP = `
import os, sys
ws, base = sys.argv[1], sys.argv[2]
level = 'd' * 200
os.makedirs(base)
os.chdir(base)
for _ in range(24):
    os.mkdir(level)
    os.chdir(level)
os.chdir(base)
# A symlink holds at most 4095 bytes: two hops of 12 levels each reach the 24th.
half = '/'.join([level] * 12)
os.symlink(half, 'h1')
os.symlink(half, half + '/h2')
os.mkdir(ws + '/real')
os.symlink(base + '/h1/h2', ws + '/evil')
print(len(os.path.realpath(ws + '/evil')))
`

/** Python: exchange WS/evil and WS/real until BASE/stop exists (in hundreds: it ends as it began). */
const LOOP = `
import ctypes, os, sys
ws, base = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
os.chdir(ws)
open(base + '/running', 'w').close()
n = 0
while not os.path.exists(base + '/stop'):
    for _ in range(100):
        if libc.renameat2(-100, b'evil', -100, b'real', 2) != 0:
            raise OSError(ctypes.get_errno(), 'renameat2')
        n += 1
print(n)
`

/** A running race in a container. */
export interface Race {
  /** Stop the loop; resolves with the number of exchanges it made. */
  stop(): Promise<number>
  /** The files named `r-*` in the deep directory (outside WS). */
  outside(): Promise<number>
}

/**
 * Set up and start the race as `user` (who owns `ws`); `base` (outside `ws`, not existing yet)
 * gets the deep directory.
 */
export async function startRace(containerId: string, ws: string, base: string, user: string): Promise<Race> {
  const setup = await execIn(containerId, ['python3', '-c', SETUP, ws, base], user)
  expect(setup.exitCode, setup.stderr).toBe(0)
  expect(Number(setup.stdout.trim())).toBeGreaterThan(4096)
  const loop = execIn(containerId, ['python3', '-c', LOOP, ws, base], user)
  const running = await waitFor(() => execIn(containerId, ['test', '-e', `${base}/running`]).then(result => result.exitCode === 0), started => started)
  expect(running).toBe(true)
  return {
    stop: async () => {
      expect((await execIn(containerId, ['touch', `${base}/stop`], user)).exitCode).toBe(0)
      const result = await loop
      expect(result.exitCode, result.stderr).toBe(0)
      return Number(result.stdout.trim())
    },
    outside: async () => {
      // As the user who made it (a managed container's root holds no capabilities); a find that
      // fails fails the count.
      const result = await execIn(containerId, ['sh', '-c', `cd / && found=$(find ${base} -name 'r-*') || exit 1; printf '%s' "$found" | grep -c . || true`], user)
      expect(result.exitCode, result.stderr).toBe(0)
      return Number(result.stdout.trim())
    },
  }
}
