/**
 * Paths of a remote world: always POSIX, whatever the host is. Canonical identity comes from the
 * world (the file server's realpath); these helpers only spell what the world returned.
 * @module dsh-remote-worlds/files/paths
 */
import { posix } from 'node:path'

/**
 * The absolute path shown for `path` (display only): lexically resolved against `base`, the way
 * the local provider shows paths. Identity never comes from it (see {@link rawJoin}).
 */
export function displayPathOf(base: string, path: string): string {
  return posix.resolve(base, path)
}

/**
 * `path` when absolute, else `base/path`, with no lexical clean-up: the world's kernel walks the
 * components itself, following a symlink before a `..` after it, as a shell in the world would.
 */
export function rawJoin(base: string, path: string): string {
  if (path.startsWith('/')) return path
  return base.endsWith('/') ? `${base}${path}` : `${base}/${path}`
}

/**
 * The `file:` URI of an absolute POSIX path: `file://` and the path with each byte outside
 * RFC 3986's unreserved set, `/` and the sub-delimiters a path may hold percent-encoded (UTF-8).
 * `/a b/ü#1` → `file:///a%20b/%C3%BC%231`.
 */
export function fileUrlOf(path: string): string {
  const encoded = [...Buffer.from(path, 'utf8')].map(byte => {
    const char = String.fromCharCode(byte)
    return /[A-Za-z0-9\-._~/!$&'()*+,;=:@]/.test(char) ? char : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`
  }).join('')
  return `file://${encoded}`
}

export { isWithin } from '../providers/remote/paths.ts'
