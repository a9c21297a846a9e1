/**
 * A project's devcontainer.json: found, parsed (JSONC, with Microsoft's `jsonc-parser`), its
 * variables resolved, and every property sorted into what this package applies, what the
 * container already got when the Dev Containers tooling created it, and what is not applied.
 * Everything but {@link findDevcontainerConfig} and {@link readDevcontainerSettings} is pure.
 *
 * Source of the facts: the Dev Containers specification (containers.dev; devcontainers/spec
 * docs/specs/devcontainerjson-reference.md) and its reference CLI (devcontainers/cli), which
 * looks for `.devcontainer/devcontainer.json`, then `.devcontainer.json`, in the folder.
 * @module dsh-remote-worlds/devcontainer/config
 */
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs'
import { dirname, join, posix, relative, resolve, sep } from 'node:path'
import { type ParseError, parse, printParseErrorCode } from 'jsonc-parser'
import { InvalidArgumentError } from '../providers/remote/errors.ts'
import { DevcontainerConfigInvalidError, DevcontainerConfigMissingError } from './errors.ts'
import { refersToContainerEnv, substituteLocal } from './variables.ts'

/** Where a folder's configuration is looked for, in this order (the reference CLI's order). */
export const DEVCONTAINER_CONFIG_PATHS: readonly string[] = ['.devcontainer/devcontainer.json', '.devcontainer.json']

/** Properties this package applies: the shell's user, its cwd and workspace root, and its environment. */
export const APPLIED_PROPERTIES: readonly string[] = ['remoteUser', 'containerUser', 'workspaceFolder', 'remoteEnv']

/**
 * Properties the container got when the Dev Containers tooling created it (its image, mounts,
 * environment, capabilities, the commands run at creation). Attaching takes the container as it
 * is, so these are in force as far as they were when it was created; they are listed, not applied.
 */
export const CREATION_PROPERTIES: readonly string[] = [
  'image', 'build', 'dockerFile', 'context', 'dockerComposeFile', 'service', 'runServices',
  'workspaceMount', 'mounts', 'runArgs', 'appPort', 'init', 'privileged', 'capAdd', 'securityOpt',
  'features', 'overrideFeatureInstallOrder', 'overrideCommand', 'containerEnv', 'updateRemoteUserUID',
  'initializeCommand', 'onCreateCommand', 'updateContentCommand', 'postCreateCommand', 'waitFor',
  'hostRequirements', 'entrypoint',
]

/** Properties that change nothing in a container (a display name, the schema, a Feature's id in image metadata). */
const NEUTRAL_PROPERTIES: readonly string[] = ['$schema', 'name', 'id']

/** What this package takes from a devcontainer.json. */
export interface DevcontainerSettings {
  /** The project folder: its real path (what the `devcontainer.local_folder` label is compared with). */
  folder: string
  /** The configuration file (absolute, under {@link folder}). */
  configFile: string
  /** `remoteUser`, when set. */
  remoteUser: string | undefined
  /** `containerUser`, when set. */
  containerUser: string | undefined
  /** The workspace folder in the container, variables resolved. */
  workspaceFolder: string
  /** Where {@link workspaceFolder} comes from: the property, or the specification's default. */
  workspaceFolderSource: 'workspaceFolder' | 'default'
  /**
   * `remoteEnv` with its local variables resolved; `${containerEnv:VAR}` references are kept
   * for when the container is known (variables.ts `substituteContainerEnv`). `null` unsets.
   */
  remoteEnv: Record<string, string | null>
  /** The file's properties that the container got at its creation and are taken as they are. */
  atCreation: string[]
  /**
   * What is not applied: properties (`forwardPorts`, `postStartCommand`, `customizations`, ...)
   * and variable references that have no value here (`${devcontainerId} in remoteEnv.ID`).
   */
  unsupported: string[]
}

/** Everything {@link devcontainerSettings} needs besides the parsed file. */
export interface DevcontainerContext {
  /** The project folder's real path. */
  folder: string
  /** The configuration file's path. */
  configFile: string
  /** This machine's environment, for `${localEnv:VAR}`. */
  localEnv: Readonly<Record<string, string | undefined>>
  /**
   * The folder the Dev Containers tooling mounts at `/workspaces/<its basename>` when
   * `workspaceFolder` is not set: the folder's git root (the reference CLI's
   * `--mount-workspace-git-root`, on by default), else the folder. Default: the folder.
   */
  mountFolder?: string | undefined
}

/**
 * The configuration file of `folder`: `.devcontainer/devcontainer.json`, else `.devcontainer.json`.
 * @param folder - the project folder (its real path).
 * @throws DevcontainerConfigMissingError when neither exists.
 */
export function findDevcontainerConfig(folder: string): string {
  for (const candidate of DEVCONTAINER_CONFIG_PATHS) {
    const path = join(folder, candidate)
    if (existsSync(path)) return path
  }
  throw new DevcontainerConfigMissingError(folder)
}

/** `line L, column C` (1-based) of a character offset. */
function position(text: string, offset: number): string {
  const before = text.slice(0, offset).split('\n')
  return `line ${before.length}, column ${before.at(-1)!.length + 1}`
}

/**
 * Parse devcontainer.json text: JSON with comments and trailing commas (JSONC), as the
 * specification allows.
 * @param file - the file's path, for messages.
 * @returns the top-level object.
 * @throws DevcontainerConfigInvalidError naming each syntax error's line and column, or a top level that is not an object.
 */
export function parseDevcontainerJson(text: string, file: string): Record<string, unknown> {
  const errors: ParseError[] = []
  const value: unknown = parse(text, errors, { allowTrailingComma: true, disallowComments: false, allowEmptyContent: false })
  if (errors.length > 0) throw new DevcontainerConfigInvalidError(file, errors.map(error => `${position(text, error.offset)}: ${printParseErrorCode(error.error)}`))
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new DevcontainerConfigInvalidError(file, ['the top level is not an object'])
  return value as Record<string, unknown>
}

/** The specification's default workspace folder (see {@link DevcontainerContext.mountFolder}). */
function defaultWorkspaceFolder(config: Record<string, unknown>, context: DevcontainerContext): string {
  // "Defaults to "/"" for Docker Compose; otherwise "the automatic source code mount location".
  if ('dockerComposeFile' in config) return '/'
  const mountFolder = context.mountFolder ?? context.folder
  const inside = relative(mountFolder, context.folder).split(sep).filter(part => part !== '')
  return posix.join('/workspaces', posix.basename(mountFolder), ...inside)
}

/**
 * What this package applies of a parsed devcontainer.json, and what it does not. Pure.
 * Variables are resolved as variables.ts says: `workspaceFolder` first (with the local
 * variables), then `remoteEnv` (with `${containerWorkspaceFolder}` standing for that result).
 * @throws DevcontainerConfigInvalidError when `remoteUser`, `containerUser` or `workspaceFolder`
 *   is not a string, `remoteEnv` is not an object of strings (or nulls), or `workspaceFolder`
 *   does not resolve to an absolute path.
 */
export function devcontainerSettings(config: Readonly<Record<string, unknown>>, context: DevcontainerContext): DevcontainerSettings {
  const problems: string[] = []
  const unsupported: string[] = []
  const atCreation: string[] = []
  for (const key of Object.keys(config)) {
    if (APPLIED_PROPERTIES.includes(key) || NEUTRAL_PROPERTIES.includes(key)) continue
    if (CREATION_PROPERTIES.includes(key)) atCreation.push(key)
    else unsupported.push(key)
  }
  const text = (key: string): string | undefined => {
    const value = config[key]
    if (value === undefined) return undefined
    if (typeof value === 'string') return value
    problems.push(`${key}: must be a string`)
    return undefined
  }
  const local = { localWorkspaceFolder: context.folder, localEnv: context.localEnv }
  const note = (where: string, references: readonly string[]): void => {
    for (const reference of new Set(references)) unsupported.push(`${reference} in ${where}`)
  }
  const resolveText = (key: string): string | undefined => {
    const value = text(key)
    if (value === undefined) return undefined
    const substituted = substituteLocal(value, local)
    note(key, substituted.unresolved)
    return substituted.value
  }

  const remoteUser = resolveText('remoteUser')
  const containerUser = resolveText('containerUser')
  const written = text('workspaceFolder')
  let workspaceFolder: string
  if (written !== undefined) {
    if (refersToContainerEnv(written)) problems.push('workspaceFolder: ${containerEnv:...} is allowed in remoteEnv only (the specification\'s variables)')
    const substituted = substituteLocal(written, local)
    note('workspaceFolder', substituted.unresolved)
    workspaceFolder = substituted.value
    if (!workspaceFolder.startsWith('/')) problems.push(`workspaceFolder: ${JSON.stringify(written)} resolves to ${JSON.stringify(workspaceFolder)}, not an absolute path in the container`)
  } else {
    workspaceFolder = defaultWorkspaceFolder(config, context)
  }
  if (workspaceFolder.length > 1) workspaceFolder = workspaceFolder.replace(/\/+$/, '')

  const remoteEnv: Record<string, string | null> = {}
  const rawEnv = config.remoteEnv
  if (rawEnv !== undefined) {
    if (rawEnv === null || typeof rawEnv !== 'object' || Array.isArray(rawEnv)) {
      problems.push('remoteEnv: must be an object of NAME: value')
    } else {
      for (const [name, value] of Object.entries(rawEnv as Record<string, unknown>)) {
        if (value === null) {
          remoteEnv[name] = null
        } else if (typeof value === 'string') {
          const substituted = substituteLocal(value, { ...local, containerWorkspaceFolder: workspaceFolder })
          note(`remoteEnv.${name}`, substituted.unresolved)
          remoteEnv[name] = substituted.value
        } else {
          problems.push(`remoteEnv.${name}: must be a string (or null to unset it)`)
        }
      }
    }
  }
  if (problems.length > 0) throw new DevcontainerConfigInvalidError(context.configFile, problems)
  return { folder: context.folder, configFile: context.configFile, remoteUser, containerUser, workspaceFolder, workspaceFolderSource: written !== undefined ? 'workspaceFolder' : 'default', remoteEnv, atCreation, unsupported }
}

/** The nearest folder at or above `folder` that holds a `.git` entry (a git root, or a worktree's root), else undefined. */
export function gitRootOf(folder: string): string | undefined {
  for (let current = folder; ; current = dirname(current)) {
    if (existsSync(join(current, '.git'))) return current
    if (dirname(current) === current) return undefined
  }
}

/**
 * The real path of a project folder.
 * @throws InvalidArgumentError when it does not exist or is not a folder.
 */
export function projectFolder(folder: string): string {
  let real: string
  try {
    real = realpathSync(resolve(folder))
  } catch {
    throw new InvalidArgumentError(`dev container folder ${folder}: no such folder`)
  }
  if (!statSync(real).isDirectory()) throw new InvalidArgumentError(`dev container folder ${folder}: not a folder`)
  return real
}

/**
 * Find, read and apply a folder's devcontainer.json ({@link devcontainerSettings}), with this
 * process's environment for `${localEnv:VAR}`.
 * @param folder - the project folder, relative to the current directory or absolute.
 * @throws InvalidArgumentError for a folder that does not exist; DevcontainerConfigMissingError;
 *   DevcontainerConfigInvalidError (also when the file cannot be read).
 */
export function readDevcontainerSettings(folder: string, localEnv: Readonly<Record<string, string | undefined>> = process.env): DevcontainerSettings {
  const real = projectFolder(folder)
  const configFile = findDevcontainerConfig(real)
  let text: string
  try {
    text = readFileSync(configFile, 'utf8')
  } catch (error) {
    throw new DevcontainerConfigInvalidError(configFile, [`cannot be read: ${(error as Error).message}`], { cause: error })
  }
  return devcontainerSettings(parseDevcontainerJson(text, configFile), { folder: real, configFile, localEnv, mountFolder: gitRootOf(real) })
}
