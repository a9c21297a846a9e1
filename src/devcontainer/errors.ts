/**
 * Typed failures of attaching to a project's dev container. Each has its own class and stable
 * `code` (see {@link RemoteWorldErrorCode}); each message names what to run or pass next.
 * All of them fail before anything of this client runs in a container.
 * @module dsh-remote-worlds/devcontainer/errors
 */
import { RemoteWorldError } from '../providers/remote/errors.ts'
import type { ResolvedDevcontainer } from './resolved.ts'

/** A container the Dev Containers tooling labelled for a folder, as the engine lists it. */
export interface DevcontainerCandidate {
  /** Full container id. */
  id: string
  /** The container's name, without the engine's leading `/`. */
  name: string
  /** The engine's state: `running`, `exited`, `created`, `paused`, `restarting`, `dead`. */
  state: string
  /** Its `devcontainer.local_folder` label, as written (the folder as the tooling resolved it). */
  localFolder: string
  /** Its `devcontainer.config_file` label; undefined for a container labelled before that label existed. */
  configFile: string | undefined
  /** Its `devcontainer.metadata` label (metadata.ts), as written; undefined when it has none. */
  metadata?: string | undefined
}

/** `0123456789ab  name  running  config /path/.devcontainer/devcontainer.json`, one line per candidate. */
export function formatCandidate(candidate: DevcontainerCandidate): string {
  return `${candidate.id.slice(0, 12)}  ${candidate.name}  ${candidate.state}  config ${candidate.configFile ?? '(no devcontainer.config_file label)'}`
}

/**
 * The folder has no dev container configuration (neither `.devcontainer/devcontainer.json` nor
 * `.devcontainer.json`, and no container of it names one that exists), or the explicitly named
 * one (`--config FILE`) does not exist.
 */
export class DevcontainerConfigMissingError extends RemoteWorldError {
  /** The folder that was searched. */
  readonly folder: string
  /** The explicitly named configuration file that does not exist, when one was named. */
  readonly config: string | undefined

  constructor(folder: string, options: { config?: string | undefined } = {}) {
    super('DEVCONTAINER_CONFIG_MISSING', options.config !== undefined
      ? `the dev container configuration ${options.config} does not exist (pass --config the devcontainer.json a container of ${folder} was made from; the runtime's \`devcontainer.config\`)`
      : `${folder} has no dev container configuration: neither ${folder}/.devcontainer/devcontainer.json nor ${folder}/.devcontainer.json exists (pass the folder that holds it, --config FILE for one elsewhere such as ${folder}/.devcontainer/<name>/devcontainer.json, or attach to a container with --docker CONTAINER)`)
    this.folder = folder
    this.config = options.config
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

/**
 * No container of the folder was made from the configuration file: none carries the folder's
 * `devcontainer.local_folder` label, or those that do were made from another file (they are
 * listed then, with the file each was made from).
 */
export class DevcontainerNotFoundError extends RemoteWorldError {
  /** The folder. */
  readonly folder: string
  /** The configuration file the container had to be created from. */
  readonly configFile: string
  /** Containers of the folder made from another configuration file. */
  readonly mismatched: readonly DevcontainerCandidate[]

  /** @param explicit - true when the configuration file was named (`--config`), so the `devcontainer up` hint names it too. */
  constructor(folder: string, configFile: string, mismatched: readonly DevcontainerCandidate[] = [], explicit = false) {
    const up = `\`devcontainer up --workspace-folder ${folder}${explicit ? ` --config ${configFile}` : ''}\``
    super('DEVCONTAINER_NOT_FOUND', mismatched.length === 0
      ? `no dev container of ${folder} exists: no container carries the label devcontainer.local_folder=${folder} (with devcontainer.config_file=${configFile}, when it has that label); start one with ${up} (the Dev Containers CLI) or by opening the folder in a container from your editor`
      : [
        `no dev container of ${folder} was made from ${configFile}: ${mismatched.length === 1 ? '1 container carries' : `${mismatched.length} containers carry`} the label devcontainer.local_folder=${folder} with another devcontainer.config_file:`,
        ...mismatched.map(candidate => `  ${formatCandidate(candidate)}`),
        `attach to one with --config FILE naming its configuration (the runtime's \`devcontainer.config\`), or start one from ${configFile} with ${up}`,
      ].join('\n'))
    this.folder = folder
    this.configFile = configFile
    this.mismatched = mismatched
  }
}

/** Several containers of the folder are equally its dev container; which one is meant is not guessed. */
export class DevcontainerAmbiguousError extends RemoteWorldError {
  /** The folder. */
  readonly folder: string
  /** Every matching container. */
  readonly candidates: readonly DevcontainerCandidate[]

  constructor(folder: string, candidates: readonly DevcontainerCandidate[]) {
    const configs = new Set(candidates.map(candidate => candidate.configFile))
    super('DEVCONTAINER_AMBIGUOUS', [
      `${candidates.length} containers are labelled as the dev container of ${folder}:`,
      ...candidates.map(candidate => `  ${formatCandidate(candidate)}`),
      `${configs.size > 1 ? 'pick one by the configuration it was made from with --config FILE, ' : ''}remove the ones no longer used (docker rm -f ID), or attach to one with --docker ID`,
    ].join('\n'))
    this.folder = folder
    this.candidates = candidates
  }
}

/** The folder's dev container exists but is not running (stopped, or paused). */
export class DevcontainerStoppedError extends RemoteWorldError {
  /** The folder. */
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

/**
 * The user the configuration names (`remoteUser`, else `containerUser`, of the file or of the
 * container's `devcontainer.metadata` label) does not exist in the container: the engine
 * refused to start a process as that user.
 */
export class DevcontainerUserNotFoundError extends RemoteWorldError {
  /** The dev container, resolved but for its user (for a report such as doctor's). */
  readonly devcontainer: ResolvedDevcontainer
  /** The missing user. */
  readonly user: string
  /** The engine's refusal, e.g. `unable to find user nosuchuser: no matching entries in passwd file`. */
  readonly refusal: string

  constructor(devcontainer: ResolvedDevcontainer, user: string, refusal: string, options?: { cause?: unknown }) {
    const origin = devcontainer.userOrigin ?? { property: 'remoteUser', from: 'file' }
    const named = origin.from === 'file'
      ? `${user} is the ${origin.property} of ${devcontainer.configFile}: set ${origin.property} there to a user the container has`
      : `${user} is the ${origin.property} of the container's devcontainer.metadata label (its image's or a Feature's): set remoteUser in ${devcontainer.configFile} to a user the container has`
    super('DEVCONTAINER_USER_NOT_FOUND', `the dev container of ${devcontainer.folder}, ${devcontainer.container.slice(0, 12)} (${devcontainer.name}), has no user ${user} (the engine says: ${refusal}); ${named}, or pass --user USER (the runtime's \`user\`) to run as another one`, options)
    this.devcontainer = devcontainer
    this.user = user
    this.refusal = refusal
  }
}
