/**
 * The Node.js this package runs on, checked when it is imported: every entry point (the library,
 * the cordis plugins, the CLI) imports this module first. The upstream DSH packages and this one
 * use `Promise.withResolvers` (Node 22); on an older Node, mounting would succeed and the first
 * use would fail with `TypeError: Promise.withResolvers is not a function`. Failing at import,
 * with the version named, is the clear error instead: the message goes to stderr (once per
 * process) and is thrown, so it is seen even where a loader catches the import error and does
 * not show it (the dsh CLI under Node 20).
 * @module dsh-remote-worlds/node-version
 */

/** The oldest Node.js this package supports (package.json `engines.node`). */
export const REQUIRED_NODE = '22.19.0'

/** True when `version` (`process.versions.node` form, `MAJOR.MINOR.PATCH`) is at least {@link REQUIRED_NODE}. */
export function nodeSupported(version: string): boolean {
  const have = version.split('.').map(Number)
  const need = REQUIRED_NODE.split('.').map(Number)
  for (let index = 0; index < need.length; index += 1) {
    const difference = (have[index] ?? 0) - need[index]!
    if (difference !== 0) return difference > 0
  }
  return true
}

/** Set on `globalThis` once the refusal is printed: a second copy of this module (another install of the package in the same process) prints nothing more. */
const REPORTED = Symbol.for('dsh-remote-worlds.node-version-reported')

/** The refusal for `version` run by `execPath`: names what is needed, what runs, and the fix. */
export function nodeVersionMessage(version: string, execPath: string): string {
  return `dsh-remote-worlds needs Node.js >= ${REQUIRED_NODE}; this is Node.js ${version} (${execPath}). Run it with Node 22.19 or later (the upstream DSH packages need it too).`
}

if (!nodeSupported(process.versions.node)) {
  const message = nodeVersionMessage(process.versions.node, process.execPath)
  // Printed here, not only thrown: the upstream DSH loader catches a plugin's import error and,
  // under this old Node, its boot then reports only "plugin(s) failed to load ... see the
  // error(s) logged above" with nothing above it. Once per process: a second copy of the
  // package (two installs, one process) would otherwise repeat it.
  const flags = globalThis as { [REPORTED]?: true }
  if (flags[REPORTED] !== true) {
    flags[REPORTED] = true
    process.stderr.write(`${message}\n`)
  }
  throw new Error(message)
}
