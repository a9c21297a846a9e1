/**
 * Find the container the Dev Containers tooling made for a project folder, through the Engine
 * API (dockerode), choose which configuration file it was made from, and judge its state.
 *
 * Source of the labels: the reference CLI (devcontainers/cli src/spec-node/singleContainer.ts,
 * `findContainerAndIdLabels` in src/spec-node/utils.ts) labels every container it creates with
 * `devcontainer.local_folder=<folder>` and `devcontainer.config_file=<configuration file>`,
 * looks a folder's container up by both, and falls back to a container carrying the first
 * alone (made before the second label existed), never to one whose config_file names another
 * file. Editors built on it (VS Code's Dev Containers) set the same labels. The CLI writes both
 * paths as it resolved them (`path.resolve`, symlinks kept), so labels are compared with the
 * folder as given and through realpath (paths.ts `namesFolder`, `sameFile`).
 * @module dsh-remote-worlds/devcontainer/locate
 */
import { existsSync } from 'node:fs'
import type Docker from 'dockerode'
import { EngineUnavailableError, type RemoteWorldError, TransportError } from '../providers/remote/errors.ts'
import { type DevcontainerCandidate, DevcontainerAmbiguousError, DevcontainerConfigMissingError, DevcontainerNotFoundError, DevcontainerStoppedError } from './errors.ts'
import { METADATA_LABEL } from './metadata.ts'
import { type ProjectFolder, defaultConfigFile, explicitConfigFile, namesFolder, sameFile } from './paths.ts'

export type { DevcontainerCandidate } from './errors.ts'

/** The label naming the local folder a dev container was created for. */
export const LOCAL_FOLDER_LABEL = 'devcontainer.local_folder'
/** The label naming the configuration file a dev container was created from. */
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

/**
 * Every container (running or not, but not being removed) whose `devcontainer.local_folder`
 * label names `folder` (paths.ts `namesFolder`), whatever configuration file it was made from;
 * sorted by name.
 * @throws EngineUnavailableError when the engine does not answer; TransportError for other engine failures.
 */
export async function findDevcontainers(docker: Docker, folder: ProjectFolder): Promise<DevcontainerCandidate[]> {
  let listed: Docker.ContainerInfo[]
  try {
    listed = await docker.listContainers({ all: true, filters: { label: [LOCAL_FOLDER_LABEL] } })
  } catch (error) {
    throw engineFailure(error, 'listing dev containers')
  }
  return listed
    .filter(info => info.State !== 'removing' && namesFolder(info.Labels[LOCAL_FOLDER_LABEL] ?? '', folder))
    .map(info => ({ id: info.Id, name: (info.Names[0] ?? info.Id.slice(0, 12)).replace(/^\//, ''), state: info.State, localFolder: info.Labels[LOCAL_FOLDER_LABEL]!, configFile: info.Labels[CONFIG_FILE_LABEL], metadata: info.Labels[METADATA_LABEL] }))
    .sort((a, b) => a.name.localeCompare(b.name))
}

/** A folder's dev container, and the configuration file it was made from. */
export interface DevcontainerChoice {
  candidate: DevcontainerCandidate
  /** The configuration file to apply (see {@link chooseDevcontainer}). */
  configFile: string
}

/**
 * Choose the folder's dev container among `candidates` (all of them name the folder), in tiers;
 * the first tier that is not empty decides, and two or more in it are ambiguous:
 * 1. its `devcontainer.config_file` names `config` (`--config`), else the folder's default
 *    file (`.devcontainer/devcontainer.json`, else `.devcontainer.json`): that file applies;
 * 2. it has no `devcontainer.config_file` label (made before that label existed): the same file applies;
 * 3. without `config` only: its `devcontainer.config_file` names another file that exists
 *    here (e.g. `.devcontainer/python/devcontainer.json`): THAT file applies, as the one the
 *    container was made from.
 * @param options.config - the explicitly named configuration file (absolute), if any.
 * @param options.defaultConfig - the folder's default configuration file when it exists.
 * @throws DevcontainerAmbiguousError listing a tier of two or more.
 * @throws DevcontainerConfigMissingError when there is neither `config`, a default file, nor a
 *   container of tier 3.
 * @throws DevcontainerNotFoundError when no tier has a container; it lists the containers of
 *   the folder made from other files (id, name, state, config file).
 */
export function chooseDevcontainer(folder: ProjectFolder, candidates: readonly DevcontainerCandidate[], options: { config?: string | undefined; defaultConfig?: string | undefined }): DevcontainerChoice {
  const wanted = options.config ?? options.defaultConfig
  const pick = (tier: readonly DevcontainerCandidate[], configFile: (candidate: DevcontainerCandidate) => string): DevcontainerChoice | undefined => {
    if (tier.length > 1) throw new DevcontainerAmbiguousError(folder.folder, tier)
    return tier.length === 1 ? { candidate: tier[0]!, configFile: configFile(tier[0]!) } : undefined
  }
  if (wanted !== undefined) {
    const chosen = pick(candidates.filter(candidate => candidate.configFile !== undefined && sameFile(candidate.configFile, wanted)), () => wanted)
      ?? pick(candidates.filter(candidate => candidate.configFile === undefined), () => wanted)
    if (chosen !== undefined) return chosen
  }
  if (options.config === undefined) {
    const chosen = pick(candidates.filter(candidate => candidate.configFile !== undefined && existsSync(candidate.configFile)), candidate => candidate.configFile!)
    if (chosen !== undefined) return chosen
  }
  if (wanted === undefined) throw new DevcontainerConfigMissingError(folder.folder)
  throw new DevcontainerNotFoundError(folder.folder, wanted, candidates.filter(candidate => candidate.configFile !== undefined), options.config !== undefined)
}

/**
 * The folder's dev container and its configuration file ({@link findDevcontainers},
 * {@link chooseDevcontainer}), whatever its state.
 * @param options.config - `--config FILE` (relative to the current directory, or absolute).
 * @throws DevcontainerConfigMissingError (also for a `config` that does not exist), DevcontainerNotFoundError,
 *   DevcontainerAmbiguousError; EngineUnavailableError, TransportError from the engine.
 */
export async function selectDevcontainer(docker: Docker, folder: ProjectFolder, options: { config?: string | undefined } = {}): Promise<DevcontainerChoice> {
  const config = options.config === undefined ? undefined : explicitConfigFile(options.config, folder.folder)
  return chooseDevcontainer(folder, await findDevcontainers(docker, folder), { config, defaultConfig: defaultConfigFile(folder.folder) })
}

/** The folder's one dev container, running. */
export interface LocatedDevcontainer extends DevcontainerChoice {
  /** True when it was stopped and this call started it. */
  started: boolean
}

/**
 * The chosen container running: a stopped one is started when `start` is true.
 * @throws DevcontainerStoppedError for a stopped container without `start` (naming `--start`), or a paused one.
 * @throws EngineUnavailableError, TransportError from the engine (a start that fails).
 */
export async function ensureDevcontainerRunning(docker: Docker, folder: ProjectFolder, choice: DevcontainerChoice, start: boolean | undefined): Promise<LocatedDevcontainer> {
  const { candidate } = choice
  if (candidate.state === 'running') return { ...choice, started: false }
  if (candidate.state === 'paused' || start !== true) throw new DevcontainerStoppedError(folder.folder, candidate)
  try {
    await docker.getContainer(candidate.id).start()
  } catch (error) {
    // 304: it was started meanwhile (by the editor, or another client).
    if ((error as { statusCode?: number }).statusCode !== 304) throw engineFailure(error, `starting the dev container ${candidate.id.slice(0, 12)} of ${folder.folder}`)
  }
  return { candidate: { ...candidate, state: 'running' }, configFile: choice.configFile, started: true }
}

/**
 * The folder's one dev container ({@link selectDevcontainer}), running ({@link ensureDevcontainerRunning}).
 * @throws the errors of both.
 */
export async function locateDevcontainer(docker: Docker, folder: ProjectFolder, options: { config?: string | undefined; start?: boolean | undefined } = {}): Promise<LocatedDevcontainer> {
  return ensureDevcontainerRunning(docker, folder, await selectDevcontainer(docker, folder, options), options.start)
}
