/**
 * Restarting a container that carries a lifeline (providers/docker/lifeline.ts), and with it
 * `AutoRemove`: `DshWorldContainer` and `SshdContainer`.
 *
 * An engine older than Docker 23.0 (API 1.41 and below) turns `AutoRemove` off around the stop
 * of a restart and back on as soon as its wait for the exit returns, while the exit monitor may
 * read the flag only after that, see it on, and remove the container the restart has just
 * started again (moby/moby#39352; fixed by PR #43751, shipped in 23.0, never in 20.10). This
 * project's suite met it on Debian bookworm's docker.io 20.10.24: the restarted container was
 * killed 0.3 s after its start, and the next call found "no such container". No request of the
 * API avoids it there (`AutoRemove` cannot be updated, and cannot be combined with a restart
 * policy), so such an engine refuses the restart before touching the container, which keeps
 * running with its lifeline held.
 * @module dsh-remote-worlds/testcontainers/lifeline-restart
 */
import type { Duplex } from 'node:stream'
import type Dockerode from 'dockerode'
import { attachLifeline } from '../providers/docker/lifeline.ts'
import { NotSupportedError } from '../providers/remote/errors.ts'

/** The first engine API version whose restart keeps an `AutoRemove` container (Docker 23.0). */
export const RESTART_KEEPS_AUTOREMOVE_API = '1.42'

/** Whether an engine of API version `apiVersion` (`MAJOR.MINOR`, as `GET /version` gives it) restarts an `AutoRemove` container safely. */
export function restartKeepsAutoRemove(apiVersion: string): boolean {
  const [major = 0, minor = 0] = apiVersion.split('.').map(Number)
  const [safeMajor = 0, safeMinor = 0] = RESTART_KEEPS_AUTOREMOVE_API.split('.').map(Number)
  return major > safeMajor || (major === safeMajor && minor >= safeMinor)
}

/**
 * Restart a lifeline container with testcontainers' `restart` and hold its lifeline again: the
 * restarted pid 1 reads a new stdin, which the old attach no longer holds, so without a new one
 * the container would outlive this process.
 * @param docker - the engine the container runs on.
 * @param containerId - the container.
 * @param restart - testcontainers' restart of it (stop, start, wait).
 * @param lifeline - the attach held now; destroyed once the restart is done.
 * @returns the new attach.
 * @throws NotSupportedError, before anything is done, on an engine older than API
 *   {@link RESTART_KEEPS_AUTOREMOVE_API}; the engine's and testcontainers' errors otherwise.
 */
export async function restartWithLifeline(docker: Dockerode, containerId: string, restart: () => Promise<void>, lifeline: Duplex): Promise<Duplex> {
  const engine = await docker.version()
  if (!restartKeepsAutoRemove(engine.ApiVersion)) {
    throw new NotSupportedError(`restart(): the engine (version ${engine.Version}, API ${engine.ApiVersion}) may remove an AutoRemove container while restarting it (moby/moby#39352, fixed in Docker 23.0, API ${RESTART_KEEPS_AUTOREMOVE_API}); this container carries a lifeline with AutoRemove, so it was not restarted and runs on. Use Docker 23.0 or later, a reusable DshWorldContainer (withReuse(): no lifeline), or stop() it and start a new one`)
  }
  await restart()
  lifeline.destroy()
  return attachLifeline(docker.getContainer(containerId))
}
