/**
 * The variables of devcontainer.json, resolved as the Dev Containers specification defines them
 * (containers.dev, "Variables in devcontainer.json"; devcontainers/spec
 * docs/specs/devcontainerjson-reference.md) and its reference CLI resolves them
 * (devcontainers/cli src/spec-common/variableSubstitution.ts). Pure.
 *
 * A reference is `${NAME}` or `${NAME:ARG[:DEFAULT]}`, split on every `:`; the DEFAULT is the
 * first part after ARG (the reference CLI's `args[1]`: `${localEnv:X:a:b}` is `a` when X is unset):
 * - `${localEnv:VAR}` (and its older spelling `${env:VAR}`): the variable of the machine that
 *   reads the file (here: this process); unset gives the DEFAULT, else the empty string. A VAR
 *   the ambient scrub drops (credential-shaped or `DSH_*`, remote/environment.ts
 *   `isScrubbedName`) is withheld: it has no value here, and the caller must not apply what
 *   uses it (the harness's environment never crosses but for what is named on purpose);
 * - `${localWorkspaceFolder}`, `${localWorkspaceFolderBasename}`: the project folder on that machine;
 * - `${containerWorkspaceFolder}`, `${containerWorkspaceFolderBasename}`: the workspace folder in
 *   the container (the resolved `workspaceFolder`);
 * - `${devcontainerId}`: once the container is known, {@link devcontainerId} of its labels;
 * - `${containerEnv:VAR}`: a variable of the running container, resolved in a second step,
 *   once the container is known ({@link substituteContainerEnv}).
 *
 * Anything else (a name the specification does not define) is left as written and reported,
 * so a caller can name it as not applied.
 * @module dsh-remote-worlds/devcontainer/variables
 */
import { createHash } from 'node:crypto'
import { posix } from 'node:path'
import { scrubKind } from '../providers/remote/environment.ts'

/** What the variables of the first step stand for. */
export interface LocalVariables {
  /** The project folder on this machine (absolute). */
  localWorkspaceFolder: string
  /** This machine's environment, read by `${localEnv:VAR}`. */
  localEnv: Readonly<Record<string, string | undefined>>
  /** The workspace folder in the container; undefined while `workspaceFolder` itself is resolved. */
  containerWorkspaceFolder?: string | undefined
  /** `${devcontainerId}` ({@link devcontainerId}); undefined while no container is known. */
  devcontainerId?: string | undefined
}

/** A resolved string, the references it kept because they have no value here, and those withheld. */
export interface Substituted {
  value: string
  /** References left as written, e.g. `${nope}`. */
  unresolved: string[]
  /**
   * `${localEnv:VAR}` references to a variable the ambient scrub drops, each with why, e.g.
   * `${localEnv:DEEPSEEK_API_KEY}, a credential-shaped variable of this client`; each stands for
   * the empty string in {@link value}, which must then not be applied.
   */
  withheld: string[]
}

const REFERENCE = /\$\{([^}]*)\}/g

/** Split `NAME:ARG:DEFAULT[:...]`: the DEFAULT is the part after ARG (later parts are ignored, as the reference CLI ignores them). */
function parts(inner: string): { name: string; arg: string | undefined; fallback: string | undefined } {
  const [name = '', arg, fallback] = inner.split(':')
  return { name, arg, fallback }
}

/** The basename of a path of this machine or the container (both POSIX here). */
function basename(path: string): string {
  return posix.basename(path.replace(/\/+$/, '')) || path
}

/**
 * Resolve every reference but `${containerEnv:...}` (kept as written for the second step, and
 * not reported).
 * @example substituteLocal('/workspaces/${localWorkspaceFolderBasename}', { localWorkspaceFolder: '/home/me/app', localEnv: {} }).value === '/workspaces/app'
 * @example substituteLocal('${localEnv:GITHUB_TOKEN}', { localWorkspaceFolder: '/a', localEnv: { GITHUB_TOKEN: 'x' } }) // { value: '', unresolved: [], withheld: ['${localEnv:GITHUB_TOKEN}, a credential-shaped variable of this client'] }
 */
export function substituteLocal(text: string, variables: LocalVariables): Substituted {
  const unresolved: string[] = []
  const withheld: string[] = []
  const value = text.replace(REFERENCE, (reference, inner: string) => {
    const { name, arg, fallback } = parts(inner)
    switch (name) {
      case 'localEnv':
      case 'env': {
        if (arg === undefined || arg === '') break
        const kind = scrubKind(arg)
        if (kind !== undefined) {
          withheld.push(`${reference}, a ${kind} variable of this client`)
          return ''
        }
        return variables.localEnv[arg] ?? fallback ?? ''
      }
      case 'localWorkspaceFolder':
        return variables.localWorkspaceFolder
      case 'localWorkspaceFolderBasename':
        return basename(variables.localWorkspaceFolder)
      case 'containerWorkspaceFolder':
        if (variables.containerWorkspaceFolder === undefined) break
        return variables.containerWorkspaceFolder
      case 'containerWorkspaceFolderBasename':
        if (variables.containerWorkspaceFolder === undefined) break
        return basename(variables.containerWorkspaceFolder)
      case 'devcontainerId':
        if (variables.devcontainerId === undefined) break
        return variables.devcontainerId
      case 'containerEnv':
        return reference
    }
    unresolved.push(reference)
    return reference
  })
  return { value, unresolved, withheld }
}

/**
 * The second step: resolve `${containerEnv:VAR[:DEFAULT]}` from the container's environment
 * (unset gives the DEFAULT, else the empty string); every other reference stays as it is.
 */
export function substituteContainerEnv(text: string, containerEnv: Readonly<Record<string, string | undefined>>): string {
  return text.replace(REFERENCE, (reference, inner: string) => {
    const { name, arg, fallback } = parts(inner)
    if (name !== 'containerEnv' || arg === undefined || arg === '') return reference
    return containerEnv[arg] ?? fallback ?? ''
  })
}

/** True when `text` refers to the container's environment (`${containerEnv:VAR}`). */
export function refersToContainerEnv(text: string): boolean {
  return [...text.matchAll(REFERENCE)].some(match => parts(match[1]!).name === 'containerEnv')
}

/**
 * `${devcontainerId}` of a container identified by these labels, as the specification's
 * "Label-based Computation" defines it (devcontainers/spec docs/specs/devcontainer-id-variable.md;
 * the reference CLI's `devcontainerIdForLabels`): the labels as a JSON object with sorted keys
 * and no optional whitespace, its UTF-8 SHA-256, as a base-32 number (digits 0-9a-v) left-padded
 * with `0` to 52 characters. The reference CLI's labels are `devcontainer.local_folder` and
 * `devcontainer.config_file` (the first alone for a container labelled before the second existed).
 * @example devcontainerId({ 'devcontainer.local_folder': '/home/me/app', 'devcontainer.config_file': '/home/me/app/.devcontainer/devcontainer.json' }) // 52 characters of [0-9a-v]
 */
export function devcontainerId(labels: Readonly<Record<string, string>>): string {
  // A replacer list both sorts the keys and keeps them in that order (even integer-like ones).
  const input = JSON.stringify(labels, Object.keys(labels).sort())
  const digest = createHash('sha256').update(input, 'utf8').digest('hex')
  return BigInt(`0x${digest}`).toString(32).padStart(52, '0')
}
