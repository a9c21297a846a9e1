/**
 * Paths of this machine as the Dev Containers tooling names them: a project folder, its
 * configuration files, its git root, and the comparison of a container's label with them.
 *
 * Source of the facts: the reference CLI (devcontainers/cli). It takes `--workspace-folder` and
 * `--config` through `path.resolve` (src/spec-node/devContainersSpecCLI.ts), so a folder reached
 * through a symlink keeps the link's path: in its labels, in `${localWorkspaceFolder}`, and in
 * the mount `/workspaces/<link name>`; its git root lookup "preserves symlinked paths"
 * (src/spec-common/git.ts). It looks for `.devcontainer/devcontainer.json`, then
 * `.devcontainer.json`, in the folder (`getDevContainerConfigPathIn`).
 * @module dsh-remote-worlds/devcontainer/paths
 */
import { existsSync, realpathSync, statSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { InvalidArgumentError } from '../providers/remote/errors.ts'
import { DevcontainerConfigMissingError } from './errors.ts'

/** Where a folder's configuration is looked for, in this order (the reference CLI's order). */
export const DEVCONTAINER_CONFIG_PATHS: readonly string[] = ['.devcontainer/devcontainer.json', '.devcontainer.json']

/** A project folder, as given and as it really is. */
export interface ProjectFolder {
  /** The folder made absolute (`path.resolve`), symlinks kept: as the reference CLI labels and mounts it. */
  folder: string
  /** Its real path (every symlink resolved). */
  real: string
}

/**
 * A project folder: absolute, symlinks kept, and its real path.
 * @example projectFolder('link') // { folder: '/home/me/link', real: '/home/me/src/app' }
 * @throws InvalidArgumentError when it does not exist or is not a folder.
 */
export function projectFolder(folder: string): ProjectFolder {
  const absolute = resolve(folder)
  let real: string
  try {
    real = realpathSync(absolute)
  } catch {
    throw new InvalidArgumentError(`dev container folder ${folder}: no such folder`)
  }
  if (!statSync(real).isDirectory()) throw new InvalidArgumentError(`dev container folder ${folder}: not a folder`)
  return { folder: absolute, real }
}

/**
 * The default configuration file of `folder` ({@link DEVCONTAINER_CONFIG_PATHS}), or undefined
 * when neither exists.
 */
export function defaultConfigFile(folder: string): string | undefined {
  return DEVCONTAINER_CONFIG_PATHS.map(candidate => join(folder, candidate)).find(path => existsSync(path))
}

/**
 * The configuration file of `folder`: `.devcontainer/devcontainer.json`, else `.devcontainer.json`.
 * @param folder - the project folder.
 * @throws DevcontainerConfigMissingError when neither exists.
 */
export function findDevcontainerConfig(folder: string): string {
  const found = defaultConfigFile(folder)
  if (found === undefined) throw new DevcontainerConfigMissingError(folder)
  return found
}

/**
 * An explicitly named configuration file (`--config FILE`, the runtime's `devcontainer.config`):
 * absolute (`path.resolve`, symlinks kept, as the reference CLI's `--config`).
 * @throws DevcontainerConfigMissingError (naming the file) when it does not exist.
 */
export function explicitConfigFile(file: string, folder: string): string {
  const absolute = resolve(file)
  if (!existsSync(absolute)) throw new DevcontainerConfigMissingError(folder, { config: absolute })
  return absolute
}

/** The real path of a path when it exists on this machine, else the path as written. */
export function realOrWritten(path: string): string {
  try {
    return realpathSync(path)
  } catch {
    return path
  }
}

/**
 * True when a `devcontainer.local_folder` label names the project folder: as given, as its real
 * path, or through the label's own realpath (the tooling may have been given a symlink, or the
 * real path, either way round).
 */
export function namesFolder(label: string, folder: ProjectFolder): boolean {
  return label === folder.folder || label === folder.real || realOrWritten(label) === folder.real
}

/**
 * True when two configuration file paths name one file: as written, or through realpath on
 * both sides (a config reached through a symlinked folder, or itself a symlink to a shared one).
 */
export function sameFile(a: string, b: string): boolean {
  return a === b || realOrWritten(a) === realOrWritten(b)
}

/**
 * The nearest folder at or above `folder` that holds a `.git` entry (a git root, or a
 * worktree's root), else undefined. The walk is lexical (`dirname`), so a symlinked folder's
 * link path is kept, as the reference CLI's `git rev-parse --show-cdup` lookup keeps it.
 */
export function gitRootOf(folder: string): string | undefined {
  for (let current = folder; ; current = dirname(current)) {
    if (existsSync(join(current, '.git'))) return current
    if (dirname(current) === current) return undefined
  }
}
