/**
 * The variables of devcontainer.json, resolved as the Dev Containers specification defines them
 * (containers.dev, "Variables in devcontainer.json"; devcontainers/spec
 * docs/specs/devcontainerjson-reference.md). Pure.
 *
 * A reference is `${NAME}` or `${NAME:ARG[:DEFAULT]}`:
 * - `${localEnv:VAR}` (and its older spelling `${env:VAR}`): the variable of the machine that
 *   reads the file (here: this process); unset gives the DEFAULT, else the empty string;
 * - `${localWorkspaceFolder}`, `${localWorkspaceFolderBasename}`: the project folder on that machine;
 * - `${containerWorkspaceFolder}`, `${containerWorkspaceFolderBasename}`: the workspace folder in
 *   the container (the resolved `workspaceFolder`);
 * - `${containerEnv:VAR}`: a variable of the running container, allowed in `remoteEnv` only, so
 *   it is resolved in a second step, once the container is known ({@link substituteContainerEnv}).
 *
 * Anything else (`${devcontainerId}`, a name the specification does not define) is left as
 * written and reported, so a caller can name it as not applied.
 * @module dsh-remote-worlds/devcontainer/variables
 */
import { posix } from 'node:path'

/** What the variables of the first step stand for. */
export interface LocalVariables {
  /** The project folder on this machine (absolute). */
  localWorkspaceFolder: string
  /** This machine's environment, read by `${localEnv:VAR}`. */
  localEnv: Readonly<Record<string, string | undefined>>
  /** The workspace folder in the container; undefined while `workspaceFolder` itself is resolved. */
  containerWorkspaceFolder?: string | undefined
}

/** A resolved string, and the references it kept because they have no value here. */
export interface Substituted {
  value: string
  /** References left as written, e.g. `${devcontainerId}`. */
  unresolved: string[]
}

const REFERENCE = /\$\{([^}]*)\}/g

/** Split `NAME:ARG:DEFAULT` (a DEFAULT may itself contain colons). */
function parts(inner: string): { name: string; arg: string | undefined; fallback: string | undefined } {
  const [name = '', arg, ...rest] = inner.split(':')
  return { name, arg, fallback: rest.length > 0 ? rest.join(':') : undefined }
}

/** The basename of a path of this machine or the container (both POSIX here). */
function basename(path: string): string {
  return posix.basename(path.replace(/\/+$/, '')) || path
}

/**
 * Resolve every reference but `${containerEnv:...}` (kept as written for the second step, and
 * not reported).
 * @example substituteLocal('/workspaces/${localWorkspaceFolderBasename}', { localWorkspaceFolder: '/home/me/app', localEnv: {} }).value === '/workspaces/app'
 */
export function substituteLocal(text: string, variables: LocalVariables): Substituted {
  const unresolved: string[] = []
  const value = text.replace(REFERENCE, (reference, inner: string) => {
    const { name, arg, fallback } = parts(inner)
    switch (name) {
      case 'localEnv':
      case 'env':
        if (arg === undefined || arg === '') break
        return variables.localEnv[arg] ?? fallback ?? ''
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
      case 'containerEnv':
        return reference
    }
    unresolved.push(reference)
    return reference
  })
  return { value, unresolved }
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
