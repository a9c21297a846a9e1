/**
 * Dev containers: attach to the container the Dev Containers tooling (an editor, or
 * `devcontainer up`) started for a project folder, as that tooling does: found by its labels,
 * with the shell's user, workspace folder and `remoteEnv` from the devcontainer.json it was
 * made from.
 *
 * - resolved.ts: the shape of a resolved dev container (lowest room).
 * - errors.ts: the typed failures.
 * - paths.ts: the folder, its configuration files and git root; labels compared with them.
 * - variables.ts: the specification's `${...}` variables, `${devcontainerId}` included.
 * - config.ts: parse (JSONC) and apply devcontainer.json; pure but for reading the file.
 * - ports.ts: `forwardPorts` and `portsAttributes` (the ports forwarded to this machine, their labels).
 * - metadata.ts: the `devcontainer.metadata` label merged under the file.
 * - locate.ts: the labelled container, through dockerode, which file it was made from, its state.
 *
 * The Docker runtime (`DockerSubprocessRuntime` with `devcontainer: { folder, config? }`) calls
 * {@link resolveDevcontainer} when it opens its world; a composition calls it (or
 * {@link planDevcontainer}) first too, to give the sandbox policy its workspace root (`workspaceFolder`).
 * @module dsh-remote-worlds/devcontainer
 */
import Docker from 'dockerode'
import { parseEnvEntries } from '../providers/remote/environment.ts'
import { TargetNotFoundError } from '../providers/remote/errors.ts'
import { type DevcontainerSettings, readDevcontainerFile } from './config.ts'
import { type DevcontainerCandidate, CONFIG_FILE_LABEL, LOCAL_FOLDER_LABEL, ensureDevcontainerRunning, selectDevcontainer } from './locate.ts'
import { METADATA_LABEL, devcontainerEffect, devcontainerForwardPorts, metadataEntries } from './metadata.ts'
import type { DevcontainerForwardPort } from './ports.ts'
import { type ProjectFolder, projectFolder } from './paths.ts'
import type { ResolvedDevcontainer } from './resolved.ts'
import { devcontainerId } from './variables.ts'

export * from './errors.ts'
export { APPLIED_PROPERTIES, CREATION_PROPERTIES, DEVCONTAINER_CONFIG_PATHS, devcontainerSettings, findDevcontainerConfig, parseDevcontainerJson, readDevcontainerFile, readDevcontainerSettings, remoteEnvNameProblem } from './config.ts'
export type { DevcontainerContext, DevcontainerSettings } from './config.ts'
export { CONFIG_FILE_LABEL, LOCAL_FOLDER_LABEL, chooseDevcontainer, ensureDevcontainerRunning, findDevcontainers, locateDevcontainer, selectDevcontainer } from './locate.ts'
export type { DevcontainerChoice, LocatedDevcontainer } from './locate.ts'
export { METADATA_LABEL, devcontainerEffect, devcontainerForwardPorts, metadataEntries } from './metadata.ts'
export { forwardPortEntry, forwardPortsOf, mergeForwardPorts } from './ports.ts'
export type { DevcontainerForwardPort, ForwardPortsPart } from './ports.ts'
export type { DevcontainerEffect } from './metadata.ts'
export { projectFolder } from './paths.ts'
export type { ProjectFolder } from './paths.ts'
export type { DevcontainerUserOrigin, ResolvedDevcontainer } from './resolved.ts'
export { devcontainerId, substituteContainerEnv, substituteLocal } from './variables.ts'

/** Options of {@link resolveDevcontainer} and {@link planDevcontainer}. */
export interface ResolveDevcontainerOptions {
  /** Engine connection; default dockerode's (`DOCKER_HOST` or /var/run/docker.sock). */
  docker?: Docker | undefined
  /**
   * The configuration file (`--config FILE`, as the reference CLI's): only a container whose
   * `devcontainer.config_file` names it (through realpath), or that has no such label, matches.
   * Default: the file the folder's container was made from (locate.ts `chooseDevcontainer`).
   */
  config?: string | undefined
  /** Start the container when it is stopped (default false: DevcontainerStoppedError). Not used by {@link planDevcontainer}. */
  start?: boolean | undefined
  /** The environment `${localEnv:VAR}` reads; default this process's. */
  localEnv?: Readonly<Record<string, string | undefined>> | undefined
}

/** A folder's dev container chosen and its configuration read, before its state is judged. */
export interface DevcontainerPlan {
  /** The folder as given (absolute, symlinks kept) and its real path. */
  project: ProjectFolder
  /** The container (in whatever state it is). */
  candidate: DevcontainerCandidate
  /** The configuration file it was made from, applied. */
  configFile: string
  /** What of that file applies (with `${devcontainerId}` of the container). */
  settings: DevcontainerSettings
  /** `${devcontainerId}` of the container. */
  devcontainerId: string
  /**
   * The ports to forward: the candidate's `devcontainer.metadata` label merged under the file
   * (metadata.ts `devcontainerForwardPorts`), as {@link resolveDevcontainer} gives them.
   */
  forwardPorts: DevcontainerForwardPort[]
}

/** The id labels of a candidate as the reference CLI forms them: both labels, or the folder's alone for a container made before `devcontainer.config_file` existed. */
function idLabels(candidate: DevcontainerCandidate): Record<string, string> {
  return { [LOCAL_FOLDER_LABEL]: candidate.localFolder, ...(candidate.configFile !== undefined ? { [CONFIG_FILE_LABEL]: candidate.configFile } : {}) }
}

/**
 * Choose a project folder's dev container and read the configuration file it was made from
 * (locate.ts `selectDevcontainer`, config.ts `readDevcontainerFile`), without starting or
 * judging it: `${localWorkspaceFolder}` is the container's `devcontainer.local_folder` label
 * (the folder as the tooling resolved it, symlinks kept), `${devcontainerId}` its id.
 * @param folder - the project folder (relative to the current directory, or absolute).
 * @throws InvalidArgumentError (no such folder), DevcontainerConfigMissingError,
 *   DevcontainerConfigInvalidError, DevcontainerNotFoundError, DevcontainerAmbiguousError, EngineUnavailableError.
 */
export async function planDevcontainer(folder: string, options: Omit<ResolveDevcontainerOptions, 'start'> = {}): Promise<DevcontainerPlan> {
  const project = projectFolder(folder)
  const { candidate, configFile } = await selectDevcontainer(options.docker ?? new Docker(), project, { config: options.config })
  const id = devcontainerId(idLabels(candidate))
  const settings = readDevcontainerFile(configFile, { folder: candidate.localFolder, localEnv: options.localEnv ?? process.env, devcontainerId: id })
  const forwardPorts = devcontainerForwardPorts(settings, metadataEntries(candidate.metadata).entries).forwardPorts
  return { project, candidate, configFile, settings, devcontainerId: id, forwardPorts }
}

/**
 * Find a project folder's dev container ({@link planDevcontainer}), make sure it runs (`start`),
 * and apply its devcontainer.json over the container's `devcontainer.metadata` label
 * (metadata.ts), with `${containerEnv:VAR}` read from the container's configured environment
 * (`Config.Env`). Whether the user exists is known once a process starts as that user (the
 * Docker runtime checks it when it opens its world: DevcontainerUserNotFoundError).
 * @param folder - the project folder (relative to the current directory, or absolute).
 * @returns e.g. `{ container: '3f2a…', user: 'agent', workspaceFolder: '/workspaces/app', remoteEnv: { FOO: 'bar' }, forwardPorts: [{ port: 3000, label: 'App' }], unsupported: ['postStartCommand'], withheld: [], ... }`.
 * @throws the errors of {@link planDevcontainer}; DevcontainerStoppedError; TargetNotFoundError
 *   when the container is removed while it is looked up.
 */
export async function resolveDevcontainer(folder: string, options: ResolveDevcontainerOptions = {}): Promise<ResolvedDevcontainer> {
  const localEnv = options.localEnv ?? process.env
  const docker = options.docker ?? new Docker()
  const plan = await planDevcontainer(folder, { ...options, docker, localEnv })
  const { settings } = plan
  const { candidate, started } = await ensureDevcontainerRunning(docker, plan.project, plan, options.start)
  let info: Docker.ContainerInspectInfo
  try {
    info = await docker.getContainer(candidate.id).inspect()
  } catch (error) {
    throw new TargetNotFoundError(`the dev container ${candidate.id.slice(0, 12)} of ${plan.project.folder} could not be inspected: ${(error as Error).message}`, { cause: error })
  }
  const metadata = metadataEntries(info.Config.Labels?.[METADATA_LABEL])
  const effect = devcontainerEffect(settings, metadata.entries, parseEnvEntries(info.Config.Env), localEnv, plan.devcontainerId)
  return {
    folder: settings.folder,
    configFile: settings.configFile,
    container: candidate.id,
    name: candidate.name,
    started,
    user: effect.user,
    userSource: effect.userSource,
    userOrigin: effect.userOrigin,
    workspaceFolder: settings.workspaceFolder,
    workspaceFolderSource: settings.workspaceFolderSource,
    remoteEnv: effect.remoteEnv,
    unset: effect.unset,
    forwardPorts: effect.forwardPorts,
    atCreation: settings.atCreation,
    unsupported: [...effect.unsupported, ...(metadata.problem !== undefined ? [metadata.problem] : [])],
    withheld: effect.withheld,
  }
}
