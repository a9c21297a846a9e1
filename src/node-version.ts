/**
 * The Node.js this package runs on, checked when it is imported: every entry point (the library,
 * the cordis plugins, the CLI) imports this module first. The upstream DSH packages and this one
 * use `Promise.withResolvers` (Node 22); on an older Node, mounting would succeed and the first
 * use would fail with `TypeError: Promise.withResolvers is not a function`. Failing at import,
 * with the version named, is the clear error instead.
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

if (!nodeSupported(process.versions.node)) {
  throw new Error(`dsh-remote-worlds needs Node.js >= ${REQUIRED_NODE}; this is Node.js ${process.versions.node} (${process.execPath}). Run it with Node 22.19 or later (the upstream DSH packages need it too).`)
}
