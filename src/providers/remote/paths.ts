/**
 * Path facts every room asks of world paths (canonical absolute POSIX paths, as the world's
 * kernel resolved them): the one containment test of the package.
 * @module dsh-remote-worlds/providers/remote/paths
 */

/** `child` is `parent` or below it (both canonical absolute POSIX paths; `/` holds every path). */
export function isWithin(parent: string, child: string): boolean {
  if (parent === '/' || parent === child) return true
  return child.startsWith(parent.endsWith('/') ? parent : `${parent}/`)
}
