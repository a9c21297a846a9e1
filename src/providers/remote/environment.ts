/**
 * The environment a remote child starts with. The remote world's own ambient environment (a
 * container's `Config.Env`, a login's HOME) stands where a local provider uses its parent
 * environment, and gets the same upstream scrub; the harness's own environment never crosses.
 * @module dsh-remote-worlds/providers/remote/environment
 */
import { SENSITIVE_ENV_PATTERN } from '@deepseek-ai/dsh-subprocess'

/**
 * Scrub `ambient` exactly as upstream `scrubbedParentEnv` scrubs the local parent environment
 * (credential-shaped names matching `SENSITIVE_ENV_PATTERN`, and every `DSH_*` name, both
 * case-insensitively), then layer `explicit` on top (a deliberate entry always survives).
 *
 * @param ambient - the remote world's ambient variables.
 * @param explicit - the spec's env; `undefined` values are tombstones that remove an entry.
 * @returns a fresh object.
 */
export function remoteChildEnv(ambient: Readonly<Record<string, string>>, explicit?: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [name, value] of Object.entries(ambient)) {
    if (!SENSITIVE_ENV_PATTERN.test(name) && !name.toUpperCase().startsWith('DSH_')) env[name] = value
  }
  for (const [name, value] of Object.entries(explicit ?? {})) {
    if (value === undefined) delete env[name]
    else env[name] = value
  }
  return env
}

/**
 * Parse Docker-style `NAME=value` entries (e.g. a container's `Config.Env`).
 * @param entries - entries; ones without `=` are skipped (Docker passes them through from the client).
 */
export function parseEnvEntries(entries: readonly string[] | null | undefined): Record<string, string> {
  const env: Record<string, string> = {}
  for (const entry of entries ?? []) {
    const equals = entry.indexOf('=')
    if (equals > 0) env[entry.slice(0, equals)] = entry.slice(equals + 1)
  }
  return env
}
