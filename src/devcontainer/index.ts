/**
 * Dev containers: attach to the container the Dev Containers tooling (an editor, or
 * `devcontainer up`) started for a project folder, as that tooling does: found by its labels,
 * with the shell's user, workspace folder and `remoteEnv` from the folder's devcontainer.json.
 *
 * - config.ts: find, parse (JSONC) and apply devcontainer.json; pure but for reading the file.
 * - variables.ts: the specification's `${...}` variables.
 * - metadata.ts: the `devcontainer.metadata` label merged under the file.
 * - locate.ts: the labelled container, through dockerode, and its state.
 *
 * The Docker runtime (`DockerSubprocessRuntime` with `devcontainer: { folder }`) calls
 * {@link resolveDevcontainer} when it opens its world; a composition calls it first too, to
 * give the sandbox policy its workspace root (`workspaceFolder`).
 * @module dsh-remote-worlds/devcontainer
 */
import Docker from 'dockerode'
import { parseEnvEntries } from '../providers/remote/environment.ts'
import { TargetNotFoundError } from '../providers/remote/errors.ts'
import { readDevcontainerSettings } from './config.ts'
import { locateDevcontainer } from './locate.ts'
import { METADATA_LABEL, devcontainerEffect, metadataEntries } from './metadata.ts'

export * from './errors.ts'
export { APPLIED_PROPERTIES, CREATION_PROPERTIES, DEVCONTAINER_CONFIG_PATHS, devcontainerSettings, findDevcontainerConfig, parseDevcontainerJson, readDevcontainerSettings } from './config.ts'
export type { DevcontainerContext, DevcontainerSettings } from './config.ts'
export { CONFIG_FILE_LABEL, LOCAL_FOLDER_LABEL, findDevcontainers, locateDevcontainer } from './locate.ts'
export type { LocatedDevcontainer } from './locate.ts'
export { METADATA_LABEL, devcontainerEffect, metadataEntries } from './metadata.ts'
export type { DevcontainerEffect } from './metadata.ts'
export { substituteContainerEnv, substituteLocal } from './variables.ts'

/** A project's dev container, found and its configuration applied. */
export interface ResolvedDevcontainer {
  /** The project folder's real path. */
  folder: string
  /** Its configuration file. */
  configFile: string
  /** The container's full id (give it to `DockerWorld.open` or the runtime's `container`). */
  container: string
  /** The container's name. */
  name: string
  /** True when it was stopped and was started (`start: true`). */
  started: boolean
  /** The shell's user (`remoteUser`, else `containerUser`), or undefined for the container's own. */
  user: string | undefined
  /** Where {@link user} comes from, e.g. `remoteUser of devcontainer.json`. */
  userSource: string
  /** The workspace folder in the container: the shell's cwd and the sandbox's workspace root. */
  workspaceFolder: string
  /** `workspaceFolder` as set in the file, or the specification's default (`/workspaces/<folder name>`). */
  workspaceFolderSource: 'workspaceFolder' | 'default'
  /** What terminals and spawned processes get over the container's environment (`${containerEnv:VAR}` resolved). */
  remoteEnv: Record<string, string>
  /** Names `remoteEnv` unsets (null values). */
  unset: string[]
  /** Properties the container got when it was created, taken as they are (e.g. `containerEnv`, `mounts`). */
  atCreation: string[]
  /**
   * What is not applied: properties (e.g. `forwardPorts`, `postStartCommand`), variables without
   * a value here, and a `devcontainer.metadata` label that cannot be read.
   */
  unsupported: string[]
}

/** Options of {@link resolveDevcontainer}. */
export interface ResolveDevcontainerOptions {
  /** Engine connection; default dockerode's (`DOCKER_HOST` or /var/run/docker.sock). */
  docker?: Docker | undefined
  /** Start the container when it is stopped (default false: DevcontainerStoppedError). */
  start?: boolean | undefined
  /** The environment `${localEnv:VAR}` reads; default this process's. */
  localEnv?: Readonly<Record<string, string | undefined>> | undefined
}

/**
 * Find a project folder's dev container and apply its devcontainer.json (config.ts), over the
 * container's `devcontainer.metadata` label (metadata.ts), with `${containerEnv:VAR}` read from
 * the container's configured environment (`Config.Env`).
 * @param folder - the project folder (relative to the current directory, or absolute).
 * @returns e.g. `{ container: '3f2a…', user: 'agent', workspaceFolder: '/workspaces/app', remoteEnv: { FOO: 'bar' }, unsupported: ['forwardPorts'], ... }`.
 * @throws InvalidArgumentError (no such folder), DevcontainerConfigMissingError,
 *   DevcontainerConfigInvalidError, DevcontainerNotFoundError, DevcontainerAmbiguousError,
 *   DevcontainerStoppedError, EngineUnavailableError; TargetNotFoundError when the container
 *   is removed while it is looked up.
 */
export async function resolveDevcontainer(folder: string, options: ResolveDevcontainerOptions = {}): Promise<ResolvedDevcontainer> {
  const localEnv = options.localEnv ?? process.env
  const settings = readDevcontainerSettings(folder, localEnv)
  const docker = options.docker ?? new Docker()
  const { candidate, started } = await locateDevcontainer(docker, { folder: settings.folder, configFile: settings.configFile, start: options.start })
  let info: Docker.ContainerInspectInfo
  try {
    info = await docker.getContainer(candidate.id).inspect()
  } catch (error) {
    throw new TargetNotFoundError(`the dev container ${candidate.id.slice(0, 12)} of ${settings.folder} could not be inspected: ${(error as Error).message}`, { cause: error })
  }
  const metadata = metadataEntries(info.Config.Labels?.[METADATA_LABEL])
  const effect = devcontainerEffect(settings, metadata.entries, parseEnvEntries(info.Config.Env), localEnv)
  return {
    folder: settings.folder,
    configFile: settings.configFile,
    container: candidate.id,
    name: candidate.name,
    started,
    user: effect.user,
    userSource: effect.userSource,
    workspaceFolder: settings.workspaceFolder,
    workspaceFolderSource: settings.workspaceFolderSource,
    remoteEnv: effect.remoteEnv,
    unset: effect.unset,
    atCreation: settings.atCreation,
    unsupported: [...effect.unsupported, ...(metadata.problem !== undefined ? [metadata.problem] : [])],
  }
}
