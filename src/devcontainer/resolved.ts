/**
 * The shape of a resolved dev container, in the lowest room of src/devcontainer so that its
 * errors (errors.ts) can carry one and index.ts can build it.
 * @module dsh-remote-worlds/devcontainer/resolved
 */

import type { DevcontainerForwardPort } from './ports.ts'

/** Where the shell's user of a dev container is named. */
export interface DevcontainerUserOrigin {
  /** The property: `remoteUser`, or `containerUser` when no `remoteUser` is set anywhere. */
  property: 'remoteUser' | 'containerUser'
  /** The project's devcontainer.json, or the container's `devcontainer.metadata` label (its image's or a Feature's). */
  from: 'file' | 'label'
}

/** A project's dev container, found and its configuration applied. */
export interface ResolvedDevcontainer {
  /**
   * The project folder as the container's `devcontainer.local_folder` label names it: the path
   * the Dev Containers tooling resolved (symlinks kept), which `${localWorkspaceFolder}` and the
   * default workspace folder are computed from.
   */
  folder: string
  /**
   * The configuration file applied: `--config` (the runtime's `devcontainer.config`) when given,
   * else the one the container's `devcontainer.config_file` label names when it exists here,
   * else `.devcontainer/devcontainer.json` or `.devcontainer.json` of the folder.
   */
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
  /** Where {@link user} is named; undefined when it is the container's own. */
  userOrigin: DevcontainerUserOrigin | undefined
  /** The workspace folder in the container: the shell's cwd and the sandbox's workspace root. */
  workspaceFolder: string
  /** `workspaceFolder` as set in the file, or the specification's default (`/workspaces/<folder name>`). */
  workspaceFolderSource: 'workspaceFolder' | 'default'
  /** What terminals and spawned processes get over the container's environment (`${containerEnv:VAR}` resolved). */
  remoteEnv: Record<string, string>
  /** Names `remoteEnv` unsets (null values). */
  unset: string[]
  /**
   * Ports of the container forwarded to this machine when the CLI attaches (`--devcontainer`):
   * `forwardPorts` of the metadata label and the file, each with its `portsAttributes` label
   * (ports.ts, metadata.ts `devcontainerForwardPorts`).
   */
  forwardPorts: DevcontainerForwardPort[]
  /** Properties the container got when it was created, taken as they are (e.g. `containerEnv`, `mounts`). */
  atCreation: string[]
  /**
   * What is not applied: properties (e.g. `postStartCommand`), `forwardPorts` entries of another
   * host (`"db:5432"`), `portsAttributes` other than `label`, variables without
   * a value here, and a `devcontainer.metadata` label that cannot be read.
   */
  unsupported: string[]
  /**
   * `remoteEnv` entries not applied because their value uses a variable of this client that never
   * crosses into a world (credential-shaped or `DSH_*`), e.g.
   * `remoteEnv.HARMLESS uses ${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client`.
   */
  withheld: string[]
}
