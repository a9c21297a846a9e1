/**
 * What a `ctx.sandbox` hides from the programs it confines, for the programs this package runs
 * confined besides shells (the file server of src/files): bubblewrap gives each one a private
 * `/tmp` and `/dev` (bwrap.ts profile), a container shares its own with every exec.
 * @module dsh-remote-worlds/sandbox/layout
 */

/** A sandbox provider that says which directories its confined programs get private copies of. */
export interface PrivateRootsSandbox {
  /** Absolute directories a confined program sees as empty, private mounts (not the world's). */
  readonly privateRoots: readonly string[]
}

/**
 * The private roots of `sandbox` (a `ctx.sandbox` value), empty for one that declares none (a
 * container: every exec shares the container's directories).
 */
export function privateRootsOf(sandbox: unknown): readonly string[] {
  if (typeof sandbox !== 'object' || sandbox === null || !('privateRoots' in sandbox)) return []
  const roots = (sandbox as PrivateRootsSandbox).privateRoots
  return Array.isArray(roots) ? roots : []
}
