/**
 * ripgrep for `@deepseek-ai/dsh-tool-fs-search` in a remote world. Its `glob` and `grep` spawn
 * the packaged `@vscode/ripgrep` binary by its HOST path (`rgPath`, or a single-file build's
 * `<execPath>-rg` sidecar) through `ctx.subprocess`; no such path exists in the world. A spawn
 * of that path runs the world's ripgrep instead: the world's own `rg` on its PATH (the project
 * image has Debian's), else this package's copy of the packaged Linux build for the world's
 * architecture (install.ts), so the search reads the same files as the shell and `read`.
 * @module dsh-remote-worlds/providers/remote/world-tools/ripgrep
 */
import { posix } from 'node:path'
import type { ControlChannel } from '../control-channel.ts'
import type { WorldOwner } from '../world-owner.ts'
import { installWorldTool } from './install.ts'

/** The bin/rg of an `@vscode/ripgrep` package or of one of its platform packages (any host OS). */
const PACKAGED_RIPGREP = /(^|\/)node_modules\/@vscode\/ripgrep(-[a-z0-9]+-[a-z0-9]+)?\/bin\/rg(\.exe)?$/

/**
 * `program` is the host path of the packaged ripgrep: a `@vscode/ripgrep` package's `bin/rg`,
 * or the `<execPath>-rg` sidecar of a single-file DSH build.
 */
export function isPackagedRipgrep(program: string): boolean {
  const path = program.replaceAll('\\', '/')
  return PACKAGED_RIPGREP.test(path) || program === `${process.execPath}-rg`
}

/**
 * The ripgrep to run in the world: the first `rg` on `path` (the spawn's PATH) that the world's
 * user may execute, else the package's copy (copied in on first use).
 * @throws WorldToolUnavailableError when the world has none and the copy cannot be made.
 */
export async function worldRipgrep(owner: WorldOwner, control: ControlChannel, path: string | undefined): Promise<string> {
  const candidates = (path ?? '').split(':').filter(dir => dir.startsWith('/') && !/[\0\n]/.test(dir)).map(dir => posix.join(dir, 'rg'))
  const found = candidates.length === 0 ? undefined : await control.firstExecutable(candidates)
  if (found !== undefined) return candidates[found]!
  return (await installWorldTool(owner, 'rg')).path
}
