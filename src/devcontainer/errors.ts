/**
 * Typed failures of attaching to a project's dev container. Each has its own class and stable
 * `code` (see {@link RemoteWorldErrorCode}); each message names what to run or pass next.
 * All of them fail before anything runs in a container.
 * @module dsh-remote-worlds/devcontainer/errors
 */
import { RemoteWorldError } from '../providers/remote/errors.ts'

/** A container the Dev Containers tooling labelled for a folder, as the engine lists it. */
export interface DevcontainerCandidate {
  /** Full container id. */
  id: string
  /** The container's name, without the engine's leading `/`. */
  name: string
  /** The engine's state: `running`, `exited`, `created`, `paused`, `restarting`, `dead`. */
  state: string
  /** Its `devcontainer.config_file` label; undefined for a container labelled before that label existed. */
  configFile: string | undefined
}

/** `0123456789ab  name  running  config /path/.devcontainer/devcontainer.json`, one line per candidate. */
export function formatCandidate(candidate: DevcontainerCandidate): string {
  return `${candidate.id.slice(0, 12)}  ${candidate.name}  ${candidate.state}  config ${candidate.configFile ?? '(no devcontainer.config_file label)'}`
}

/** The folder has no dev container configuration (neither `.devcontainer/devcontainer.json` nor `.devcontainer.json`). */
export class DevcontainerConfigMissingError extends RemoteWorldError {
  /** The folder that was searched (its real path). */
  readonly folder: string

  constructor(folder: string) {
    super('DEVCONTAINER_CONFIG_MISSING', `${folder} has no dev container configuration: neither ${folder}/.devcontainer/devcontainer.json nor ${folder}/.devcontainer.json exists (pass the folder that holds it, or attach to a container with --docker CONTAINER)`)
    this.folder = folder
  }
}

/** The devcontainer.json cannot be read, is not JSONC, or a property this package applies has the wrong shape. */
export class DevcontainerConfigInvalidError extends RemoteWorldError {
  /** The configuration file. */
  readonly configFile: string
  /** Each problem, e.g. `line 3, column 5: PropertyNameExpected` or `remoteUser: must be a string`. */
  readonly problems: readonly string[]

  constructor(configFile: string, problems: readonly string[], options?: { cause?: unknown }) {
    super('DEVCONTAINER_CONFIG_INVALID', `${configFile} is not a usable dev container configuration: ${problems.join('; ')} (fix the file; it is JSON with comments and trailing commas allowed)`, options)
    this.configFile = configFile
    this.problems = problems
  }
}

/** No container carries the Dev Containers labels of the folder. */
export class DevcontainerNotFoundError extends RemoteWorldError {
  /** The folder (its real path). */
  readonly folder: string
  /** The configuration file the container had to be created from. */
  readonly configFile: string

  constructor(folder: string, configFile: string) {
    super('DEVCONTAINER_NOT_FOUND', `no dev container of ${folder} exists: no container carries the label devcontainer.local_folder=${folder} (with devcontainer.config_file=${configFile}, when it has that label); start one with \`devcontainer up --workspace-folder ${folder}\` (the Dev Containers CLI) or by opening the folder in a container from your editor`)
    this.folder = folder
    this.configFile = configFile
  }
}

/** Several containers carry the Dev Containers labels of the folder; which one is meant is not guessed. */
export class DevcontainerAmbiguousError extends RemoteWorldError {
  /** The folder (its real path). */
  readonly folder: string
  /** Every matching container. */
  readonly candidates: readonly DevcontainerCandidate[]

  constructor(folder: string, candidates: readonly DevcontainerCandidate[]) {
    super('DEVCONTAINER_AMBIGUOUS', [
      `${candidates.length} containers are labelled as the dev container of ${folder}:`,
      ...candidates.map(candidate => `  ${formatCandidate(candidate)}`),
      'remove the ones no longer used (docker rm -f ID), or attach to one with --docker ID',
    ].join('\n'))
    this.folder = folder
    this.candidates = candidates
  }
}

/** The folder's dev container exists but is not running (stopped, or paused). */
export class DevcontainerStoppedError extends RemoteWorldError {
  /** The folder (its real path). */
  readonly folder: string
  /** The container. */
  readonly candidate: DevcontainerCandidate

  constructor(folder: string, candidate: DevcontainerCandidate) {
    const which = `${candidate.id.slice(0, 12)} (${candidate.name})`
    super('DEVCONTAINER_STOPPED', candidate.state === 'paused'
      ? `the dev container of ${folder}, ${which}, is paused: resume it with \`docker unpause ${candidate.id.slice(0, 12)}\``
      : `the dev container of ${folder}, ${which}, is not running (state ${candidate.state}): pass --start to start it (runtime config \`devcontainer: { start: true }\`), or run \`devcontainer up --workspace-folder ${folder}\``)
    this.folder = folder
    this.candidate = candidate
  }
}
