/**
 * The `devcontainer.metadata` label: devcontainer.json snippets that images and Features carry
 * (a JSON array of objects, or one object), which the Dev Containers tooling merges UNDER the
 * project's devcontainer.json and copies onto the container it creates (devcontainers/spec
 * docs/specs/devcontainerjson-reference.md: properties marked 🏷️ "can be stored in the
 * devcontainer.metadata container image label"). A typical base image names its `remoteUser`
 * there (e.g. `vscode`), so the editor's shell runs as that user although the project's file
 * names none. Pure.
 *
 * Merge rules (the reference CLI's `mergeConfiguration`, devcontainers/cli
 * src/spec-node/imageMetadata.ts): the entries in label order, then the project's file last;
 * `remoteUser` and `containerUser` are each the last one set; `remoteEnv` objects are merged,
 * later names winning; `forwardPorts` is the union in order without repeats, each port's
 * `portsAttributes` label the last one set (ports.ts). The user is then the merged `remoteUser`, else the merged `containerUser`;
 * an empty one is skipped (the CLI takes the last entry whose user is truthy). Both are resolved
 * with `${containerEnv:VAR}` of the container too, as the reference CLI substitutes the
 * container's environment into the whole configuration it attaches with
 * (src/spec-node/devContainersSpecCLI.ts, `containerSubstitute`).
 * @module dsh-remote-worlds/devcontainer/metadata
 */
import { APPLIED_PROPERTIES, CREATION_PROPERTIES, type DevcontainerSettings, remoteEnvNameProblem } from './config.ts'
import { type DevcontainerForwardPort, forwardPortsOf, mergeForwardPorts } from './ports.ts'
import type { DevcontainerUserOrigin } from './resolved.ts'
import { substituteContainerEnv, substituteLocal } from './variables.ts'

/** The label images, Features and created dev containers carry their metadata in. */
export const METADATA_LABEL = 'devcontainer.metadata'

/** Where the metadata label's entries come from, in messages. */
const FROM_LABEL = `the container's ${METADATA_LABEL} label`

/**
 * The entries of a `devcontainer.metadata` label value.
 * @returns the objects in order; `problem` when the value is not JSON or not an object or array of objects (then no entries).
 */
export function metadataEntries(label: string | undefined): { entries: Record<string, unknown>[]; problem?: string } {
  if (label === undefined || label === '') return { entries: [] }
  let value: unknown
  try {
    value = JSON.parse(label)
  } catch (error) {
    return { entries: [], problem: `${FROM_LABEL} is not JSON (${(error as Error).message}): not applied` }
  }
  const list = Array.isArray(value) ? value : [value]
  if (!list.every(entry => entry !== null && typeof entry === 'object' && !Array.isArray(entry))) return { entries: [], problem: `${FROM_LABEL} is not an object or an array of objects: not applied` }
  return { entries: list as Record<string, unknown>[] }
}

/** The user, environment and gaps of a dev container: the project's file over the container's metadata. */
export interface DevcontainerEffect {
  /** The shell's user, or undefined for the container's own user. */
  user: string | undefined
  /** Where {@link user} comes from, e.g. `remoteUser of devcontainer.json`. */
  userSource: string
  /** Where {@link user} is named; undefined for the container's own user. */
  userOrigin: DevcontainerUserOrigin | undefined
  /**
   * The environment terminals and spawned processes get over the container's (every
   * `${containerEnv:VAR}` resolved); names set to null in `remoteEnv` are in {@link unset}.
   */
  remoteEnv: Record<string, string>
  /** Names `remoteEnv` unsets (value null). */
  unset: string[]
  /** The ports forwarded to this machine: the metadata's and the file's (see {@link devcontainerForwardPorts}). */
  forwardPorts: DevcontainerForwardPort[]
  /** The settings' own {@link DevcontainerSettings.unsupported}, then the metadata's, marked as coming from the label. */
  unsupported: string[]
  /** The settings' own {@link DevcontainerSettings.withheld}, then the metadata's (user and remoteEnv entries), marked likewise. */
  withheld: string[]
}

/**
 * The forwarded ports of a project's settings over its container's metadata entries: each
 * entry's `forwardPorts` then the file's, their union in order without repeats, each port with
 * the last `portsAttributes` label set (ports.ts). What of the entries is not applied (another
 * host's port, an attribute other than `label`, a wrong shape) is in `unsupported`, marked as
 * coming from the label.
 * @example devcontainerForwardPorts(settings, [{ forwardPorts: [3000, 'db:5432'] }]) // { forwardPorts: [{ port: 3000, label: 'App' }], unsupported: ['forwardPorts entry "db:5432" (the container\'s devcontainer.metadata label): ...'] }
 */
export function devcontainerForwardPorts(settings: Pick<DevcontainerSettings, 'forwardPorts' | 'portLabels'>, entries: readonly Record<string, unknown>[]): { forwardPorts: DevcontainerForwardPort[]; unsupported: string[] } {
  const parts = entries.map(entry => forwardPortsOf(entry, ` (${FROM_LABEL})`))
  const file = { ports: settings.forwardPorts.map(forward => forward.port), labels: settings.portLabels }
  return { forwardPorts: mergeForwardPorts([...parts, file]), unsupported: parts.flatMap(part => [...part.problems, ...part.unsupported]) }
}

/**
 * Merge a project's settings over its container's metadata entries, and resolve
 * `${containerEnv:VAR}` from the container's environment (its `Config.Env`).
 * @param localEnv - this machine's environment, for the metadata's `${localEnv:VAR}`.
 * @param devcontainerId - `${devcontainerId}` of the container, for the metadata's references.
 */
export function devcontainerEffect(settings: DevcontainerSettings, entries: readonly Record<string, unknown>[], containerEnv: Readonly<Record<string, string>>, localEnv: Readonly<Record<string, string | undefined>>, devcontainerId?: string): DevcontainerEffect {
  const unsupported = [...settings.unsupported]
  const withheld = [...settings.withheld]
  const named = new Set(settings.unsupported)
  const local = { localWorkspaceFolder: settings.folder, localEnv, containerWorkspaceFolder: settings.workspaceFolder, devcontainerId }
  type Chosen = { user: string; origin: DevcontainerUserOrigin }
  const users: Partial<Record<DevcontainerUserOrigin['property'], Chosen>> = {}
  /** Take a user property when it resolves to a non-empty name. */
  const take = (property: DevcontainerUserOrigin['property'], written: string, from: DevcontainerUserOrigin['from']): void => {
    const substituted = from === 'label' ? substituteLocal(written, local) : { value: written, withheld: [] }
    if (substituted.withheld.length > 0) {
      withheld.push(...substituted.withheld.map(reference => `${property} of ${FROM_LABEL} uses ${reference}`))
      return
    }
    const user = substituteContainerEnv(substituted.value, containerEnv)
    if (user !== '') users[property] = { user, origin: { property, from } }
  }
  const merged: Record<string, string | null> = {}
  for (const entry of entries) {
    if (typeof entry.remoteUser === 'string') take('remoteUser', entry.remoteUser, 'label')
    if (typeof entry.containerUser === 'string') take('containerUser', entry.containerUser, 'label')
    if (entry.remoteEnv !== null && typeof entry.remoteEnv === 'object') {
      for (const [name, value] of Object.entries(entry.remoteEnv as Record<string, unknown>)) {
        const badName = remoteEnvNameProblem(name)
        if (badName !== undefined) {
          unsupported.push(`remoteEnv key ${JSON.stringify(name)} (${FROM_LABEL}): ${badName} cannot name an environment variable`)
        } else if (value === null) {
          merged[name] = null
        } else if (typeof value === 'string' && !value.includes('\0')) {
          const substituted = substituteLocal(value, local)
          for (const reference of substituted.unresolved) unsupported.push(`${reference} in remoteEnv.${name} (${FROM_LABEL})`)
          if (substituted.withheld.length > 0) withheld.push(...substituted.withheld.map(reference => `remoteEnv.${name} of ${FROM_LABEL} uses ${reference}`))
          else merged[name] = substituted.value
        }
      }
    }
    for (const key of Object.keys(entry)) {
      if (APPLIED_PROPERTIES.includes(key) || CREATION_PROPERTIES.includes(key) || key === 'id' || key === 'name' || named.has(key)) continue
      named.add(key)
      unsupported.push(`${key} (${FROM_LABEL})`)
    }
  }
  if (settings.remoteUser !== undefined) take('remoteUser', settings.remoteUser, 'file')
  if (settings.containerUser !== undefined) take('containerUser', settings.containerUser, 'file')
  Object.assign(merged, settings.remoteEnv)
  const ports = devcontainerForwardPorts(settings, entries)
  unsupported.push(...ports.unsupported)
  const chosen = users.remoteUser ?? users.containerUser
  const remoteEnv: Record<string, string> = {}
  const unset: string[] = []
  for (const [name, value] of Object.entries(merged)) {
    if (value === null) unset.push(name)
    else remoteEnv[name] = substituteContainerEnv(value, containerEnv)
  }
  return {
    user: chosen?.user,
    userSource: chosen === undefined
      ? 'the container\'s own user (neither devcontainer.json nor the container\'s metadata names remoteUser or containerUser)'
      : `${chosen.origin.property} of ${chosen.origin.from === 'file' ? 'devcontainer.json' : FROM_LABEL}`,
    userOrigin: chosen?.origin,
    remoteEnv,
    unset,
    forwardPorts: ports.forwardPorts,
    unsupported,
    withheld,
  }
}
