/**
 * A project's devcontainer.json: parsed (JSONC, with Microsoft's `jsonc-parser`), its variables
 * resolved, and every property sorted into what this package applies, what the container
 * already got when the Dev Containers tooling created it, and what is not applied. Everything
 * but {@link readDevcontainerFile} and {@link readDevcontainerSettings} is pure.
 *
 * Source of the facts: the Dev Containers specification (containers.dev; devcontainers/spec
 * docs/specs/devcontainerjson-reference.md) and its reference CLI (devcontainers/cli). Where the
 * file is looked for, and how paths are kept, is paths.ts.
 * @module dsh-remote-worlds/devcontainer/config
 */
import { readFileSync } from 'node:fs'
import { posix, relative, sep } from 'node:path'
import { type ParseError, parse, printParseErrorCode } from 'jsonc-parser'
import { DevcontainerConfigInvalidError } from './errors.ts'
import { explicitConfigFile, findDevcontainerConfig, gitRootOf, projectFolder } from './paths.ts'
import { type DevcontainerForwardPort, forwardPortsOf, mergeForwardPorts } from './ports.ts'
import { refersToContainerEnv, substituteLocal } from './variables.ts'

export { DEVCONTAINER_CONFIG_PATHS, findDevcontainerConfig, gitRootOf } from './paths.ts'

/**
 * Properties this package applies: the shell's user, its cwd and workspace root, its
 * environment, and the ports forwarded to this machine with their labels (ports.ts; entries and
 * attributes it does not apply are listed by name).
 */
export const APPLIED_PROPERTIES: readonly string[] = ['remoteUser', 'containerUser', 'workspaceFolder', 'remoteEnv', 'forwardPorts', 'portsAttributes']

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
  /**
   * The project folder `${localWorkspaceFolder}` stands for: the container's
   * `devcontainer.local_folder` label when a container is known, else the folder as given,
   * made absolute with symlinks kept (paths.ts).
   */
  folder: string
  /** The configuration file. */
  configFile: string
  /**
   * `remoteUser` with its local variables resolved, when set and not empty (an empty one is
   * ignored, as the reference CLI ignores it); `${containerEnv:VAR}` is kept for when the
   * container is known (metadata.ts).
   */
  remoteUser: string | undefined
  /** `containerUser`, likewise. */
  containerUser: string | undefined
  /** The workspace folder in the container, variables resolved. */
  workspaceFolder: string
  /** Where {@link workspaceFolder} comes from: the property, or the specification's default. */
  workspaceFolderSource: 'workspaceFolder' | 'default'
  /**
   * `remoteEnv` with its local variables resolved; `${containerEnv:VAR}` references are kept
   * for when the container is known (variables.ts `substituteContainerEnv`). `null` unsets.
   * Entries whose value uses a withheld `${localEnv:VAR}` are absent (see {@link withheld}).
   */
  remoteEnv: Record<string, string | null>
  /**
   * The file's `forwardPorts` that are forwarded (ports of the container's own loopback), in
   * order without repeats, each with its `portsAttributes` label (ports.ts).
   */
  forwardPorts: DevcontainerForwardPort[]
  /** The file's `portsAttributes` labels by port, also of ports only the metadata label forwards (metadata.ts merges them). */
  portLabels: Record<number, string>
  /** The file's properties that the container got at its creation and are taken as they are. */
  atCreation: string[]
  /**
   * What is not applied: properties (`postStartCommand`, `customizations`, ...), `forwardPorts`
   * entries of another host and `portsAttributes` other than `label` (ports.ts), and variable
   * references that have no value here (`${nope} in remoteEnv.X`).
   */
  unsupported: string[]
  /**
   * `remoteEnv` entries not applied because their value uses `${localEnv:VAR}` of a variable the
   * ambient scrub drops: `remoteEnv.HARMLESS uses ${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client`.
   * The name keeps what the container (and its metadata label) gives it.
   */
  withheld: string[]
}

/** Everything {@link devcontainerSettings} needs besides the parsed file. */
export interface DevcontainerContext {
  /** The project folder (see {@link DevcontainerSettings.folder}). */
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
  /** `${devcontainerId}` of the container (variables.ts `devcontainerId`); undefined while none is known. */
  devcontainerId?: string | undefined
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
function defaultWorkspaceFolder(config: Readonly<Record<string, unknown>>, context: DevcontainerContext): string {
  // "Defaults to "/"" for Docker Compose; otherwise "the automatic source code mount location".
  if ('dockerComposeFile' in config) return '/'
  const mountFolder = context.mountFolder ?? context.folder
  const inside = relative(mountFolder, context.folder).split(sep).filter(part => part !== '')
  return posix.join('/workspaces', posix.basename(mountFolder), ...inside)
}

/**
 * Why a `remoteEnv` name cannot be an environment variable's, or undefined when it can: the
 * exec API takes `NAME=value` entries, so a name must be non-empty and hold neither `=` nor
 * NUL (POSIX: "shall not contain the character '='"; NUL ends a C string).
 */
export function remoteEnvNameProblem(name: string): string | undefined {
  if (name === '') return 'an empty name'
  if (name.includes('=')) return 'a name holding "="'
  if (name.includes('\0')) return 'a name holding NUL'
  return undefined
}

/** What a property using a withheld `${localEnv:VAR}` is told: it is refused, not applied without it. */
function withheldProblem(key: string, withheld: readonly string[]): string {
  return `${key}: uses ${withheld.join(' and ')}, which never crosses into a world; write the value itself`
}

/**
 * What this package applies of a parsed devcontainer.json, and what it does not. Pure.
 * Variables are resolved as variables.ts says: `workspaceFolder` first (with the local
 * variables), then `remoteEnv` (with `${containerWorkspaceFolder}` standing for that result).
 * A `remoteEnv` value using a withheld `${localEnv:VAR}` (credential-shaped or `DSH_*`) is not
 * applied and is named in {@link DevcontainerSettings.withheld}.
 * @throws DevcontainerConfigInvalidError naming the file and each problem: `remoteUser`,
 *   `containerUser` or `workspaceFolder` not a string, or using a withheld `${localEnv:VAR}`;
 *   `workspaceFolder` using `${containerEnv:VAR}` or not resolving to an absolute path;
 *   `remoteEnv` not an object of strings (or nulls), a key that cannot be a variable name
 *   (empty, `=`, NUL) or a value holding NUL; `forwardPorts` not an array, `portsAttributes` not an object.
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
  const local = { localWorkspaceFolder: context.folder, localEnv: context.localEnv, devcontainerId: context.devcontainerId }
  const note = (where: string, references: readonly string[]): void => {
    for (const reference of new Set(references)) unsupported.push(`${reference} in ${where}`)
  }
  /** A user property: resolved; empty (as written or resolved) is not set. */
  const user = (key: 'remoteUser' | 'containerUser'): string | undefined => {
    const value = text(key)
    if (value === undefined || value === '') return undefined
    const substituted = substituteLocal(value, local)
    if (substituted.withheld.length > 0) problems.push(withheldProblem(key, substituted.withheld))
    note(key, substituted.unresolved)
    return substituted.value === '' ? undefined : substituted.value
  }

  const remoteUser = user('remoteUser')
  const containerUser = user('containerUser')
  const written = text('workspaceFolder')
  let workspaceFolder: string
  if (written !== undefined) {
    if (refersToContainerEnv(written)) problems.push('workspaceFolder: ${containerEnv:...} is allowed in remoteEnv only (the specification\'s variables)')
    const substituted = substituteLocal(written, local)
    if (substituted.withheld.length > 0) problems.push(withheldProblem('workspaceFolder', substituted.withheld))
    note('workspaceFolder', substituted.unresolved)
    workspaceFolder = substituted.value
    if (!workspaceFolder.startsWith('/')) problems.push(`workspaceFolder: ${JSON.stringify(written)} resolves to ${JSON.stringify(workspaceFolder)}, not an absolute path in the container`)
  } else {
    workspaceFolder = defaultWorkspaceFolder(config, context)
  }
  if (workspaceFolder.length > 1) workspaceFolder = workspaceFolder.replace(/\/+$/, '')

  const remoteEnv: Record<string, string | null> = {}
  const withheld: string[] = []
  const rawEnv = config.remoteEnv
  if (rawEnv !== undefined) {
    if (rawEnv === null || typeof rawEnv !== 'object' || Array.isArray(rawEnv)) {
      problems.push('remoteEnv: must be an object of NAME: value')
    } else {
      for (const [name, value] of Object.entries(rawEnv as Record<string, unknown>)) {
        const badName = remoteEnvNameProblem(name)
        if (badName !== undefined) {
          problems.push(`remoteEnv key ${JSON.stringify(name)}: ${badName} cannot name an environment variable`)
        } else if (value === null) {
          remoteEnv[name] = null
        } else if (typeof value === 'string') {
          if (value.includes('\0')) {
            problems.push(`remoteEnv.${name}: the value holds NUL, which no environment variable can carry`)
            continue
          }
          const substituted = substituteLocal(value, { ...local, containerWorkspaceFolder: workspaceFolder })
          note(`remoteEnv.${name}`, substituted.unresolved)
          if (substituted.withheld.length > 0) withheld.push(...substituted.withheld.map(reference => `remoteEnv.${name} uses ${reference}`))
          else remoteEnv[name] = substituted.value
        } else {
          problems.push(`remoteEnv.${name}: must be a string (or null to unset it)`)
        }
      }
    }
  }
  const ports = forwardPortsOf(config)
  problems.push(...ports.problems)
  unsupported.push(...ports.unsupported)
  if (problems.length > 0) throw new DevcontainerConfigInvalidError(context.configFile, problems)
  return { folder: context.folder, configFile: context.configFile, remoteUser, containerUser, workspaceFolder, workspaceFolderSource: written !== undefined ? 'workspaceFolder' : 'default', remoteEnv, forwardPorts: mergeForwardPorts([ports]), portLabels: ports.labels, atCreation, unsupported, withheld }
}

/**
 * Read and apply one configuration file ({@link devcontainerSettings}); the default workspace
 * folder is below the git root of `context.folder` (paths.ts `gitRootOf`).
 * @param configFile - the file (absolute).
 * @throws DevcontainerConfigInvalidError (also when the file cannot be read).
 */
export function readDevcontainerFile(configFile: string, context: Omit<DevcontainerContext, 'configFile' | 'mountFolder'>): DevcontainerSettings {
  let text: string
  try {
    text = readFileSync(configFile, 'utf8')
  } catch (error) {
    throw new DevcontainerConfigInvalidError(configFile, [`cannot be read: ${(error as Error).message}`], { cause: error })
  }
  return devcontainerSettings(parseDevcontainerJson(text, configFile), { ...context, configFile, mountFolder: gitRootOf(context.folder) })
}

/**
 * Find, read and apply a folder's devcontainer.json without looking at any container: the
 * folder as given (symlinks kept), its `options.config` or else its default file, and no
 * `${devcontainerId}` (index.ts `resolveDevcontainer` reads the file a found container was
 * made from, with its id).
 * @param folder - the project folder, relative to the current directory or absolute.
 * @param localEnv - the environment `${localEnv:VAR}` reads; default this process's.
 * @param options.config - a configuration file elsewhere (`--config`), relative to the current directory or absolute.
 * @throws InvalidArgumentError for a folder that does not exist; DevcontainerConfigMissingError;
 *   DevcontainerConfigInvalidError (also when the file cannot be read).
 */
export function readDevcontainerSettings(folder: string, localEnv: Readonly<Record<string, string | undefined>> = process.env, options: { config?: string | undefined } = {}): DevcontainerSettings {
  const project = projectFolder(folder)
  const configFile = options.config !== undefined ? explicitConfigFile(options.config, project.folder) : findDevcontainerConfig(project.folder)
  return readDevcontainerFile(configFile, { folder: project.folder, localEnv })
}
