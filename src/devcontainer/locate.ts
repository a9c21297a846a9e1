/**
 * Find the container the Dev Containers tooling made for a project folder, through the Engine
 * API (dockerode), and judge its state.
 *
 * Source of the labels: the reference CLI (devcontainers/cli src/spec-node/singleContainer.ts)
 * labels every container it creates with `devcontainer.local_folder=<folder>` and
 * `devcontainer.config_file=<configuration file>`, and looks a folder's container up by both;
 * containers made before the second label existed carry the first only. Editors built on it
 * (VS Code's Dev Containers) set the same labels. The CLI writes the folder as it resolved it
 * (`path.resolve`, symlinks kept), so a label is compared with the folder's real path both as
 * written and through the local file system's realpath.
 * @module dsh-remote-worlds/devcontainer/locate
 */
import { realpathSync } from 'node:fs'
import type Docker from 'dockerode'
import { EngineUnavailableError, type RemoteWorldError, TransportError } from '../providers/remote/errors.ts'
import { type DevcontainerCandidate, DevcontainerAmbiguousError, DevcontainerNotFoundError, DevcontainerStoppedError } from './errors.ts'

export type { DevcontainerCandidate } from './errors.ts'

/** Label naming the project folder a dev container was created for. */
export const LOCAL_FOLDER_LABEL = 'devcontainer.local_folder'
/** Label naming the configuration file a dev container was created from. */
export const CONFIG_FILE_LABEL = 'devcontainer.config_file'

/**
 * An engine failure as this package's typed error: the socket does not answer
 * (EngineUnavailableError), or the engine refused (TransportError, with its own message).
 * (The Docker world's `engineError` maps more cases; this room stays below that one.)
 */
function engineFailure(error: unknown, what: string): RemoteWorldError {
  const failure = error as { code?: string; message?: string; json?: { message?: string } }
  const detail = failure.json?.message ?? failure.message ?? String(error)
  if (['ENOENT', 'ECONNREFUSED', 'EACCES', 'ECONNRESET', 'EPIPE'].includes(failure.code ?? '')) return new EngineUnavailableError(`${what}: the Docker engine does not answer (${failure.code}: ${detail})`, { cause: error })
  return new TransportError(`${what}: ${detail}`, { cause: error })
}

/** The real path of a label's path when it exists on this machine, else the path as written. */
function real(path: string): string {
  try {
    return realpathSync(path)
  } catch {
    return path
  }
}

/** True when a label's path names `target` (a real path), as written or through its realpath. */
function samePath(labelled: string, target: string): boolean {
  return labelled === target || real(labelled) === target
}

/**
 * Every container (running or not, but not being removed) whose labels name `folder`: its
 * `devcontainer.local_folder` is the folder, and its `devcontainer.config_file`, when it has
 * one, is `configFile`.
 * @param folder - the project folder's real path.
 * @param configFile - the configuration file's real path.
 * @throws EngineUnavailableError when the engine does not answer; TransportError for other engine failures.
 */
export async function findDevcontainers(docker: Docker, folder: string, configFile: string): Promise<DevcontainerCandidate[]> {
  let listed: Docker.ContainerInfo[]
  try {
    listed = await docker.listContainers({ all: true, filters: { label: [LOCAL_FOLDER_LABEL] } })
  } catch (error) {
    throw engineFailure(error, 'listing dev containers')
  }
  return listed
    .filter(info => info.State !== 'removing')
    .filter(info => samePath(info.Labels[LOCAL_FOLDER_LABEL] ?? '', folder))
    .filter(info => info.Labels[CONFIG_FILE_LABEL] === undefined || samePath(info.Labels[CONFIG_FILE_LABEL], configFile))
    .map(info => ({ id: info.Id, name: (info.Names[0] ?? info.Id.slice(0, 12)).replace(/^\//, ''), state: info.State, configFile: info.Labels[CONFIG_FILE_LABEL] }))
    .sort((a, b) => a.name.localeCompare(b.name))
}

/** The folder's one dev container, running. */
export interface LocatedDevcontainer {
  candidate: DevcontainerCandidate
  /** True when it was stopped and this call started it. */
  started: boolean
}

/**
 * The folder's one dev container ({@link findDevcontainers}), running: a stopped one is
 * started when `start` is true.
 * @throws DevcontainerNotFoundError when none matches (its message names `devcontainer up --workspace-folder FOLDER`).
 * @throws DevcontainerAmbiguousError when several match (its message lists them).
 * @throws DevcontainerStoppedError for a stopped container without `start` (naming `--start`), or a paused one.
 * @throws EngineUnavailableError, TransportError from the engine (a start that fails).
 */
export async function locateDevcontainer(docker: Docker, options: { folder: string; configFile: string; start?: boolean | undefined }): Promise<LocatedDevcontainer> {
  const { folder, configFile } = options
  const candidates = await findDevcontainers(docker, folder, configFile)
  if (candidates.length === 0) throw new DevcontainerNotFoundError(folder, configFile)
  if (candidates.length > 1) throw new DevcontainerAmbiguousError(folder, candidates)
  const candidate = candidates[0]!
  if (candidate.state === 'running') return { candidate, started: false }
  if (candidate.state === 'paused' || options.start !== true) throw new DevcontainerStoppedError(folder, candidate)
  try {
    await docker.getContainer(candidate.id).start()
  } catch (error) {
    // 304: it was started meanwhile (by the editor, or another client).
    if ((error as { statusCode?: number }).statusCode !== 304) throw engineFailure(error, `starting the dev container ${candidate.id.slice(0, 12)} of ${folder}`)
  }
  return { candidate: { ...candidate, state: 'running' }, started: true }
}
