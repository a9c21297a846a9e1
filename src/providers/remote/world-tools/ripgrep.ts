/**
 * ripgrep for `@deepseek-ai/dsh-tool-fs-search` in a remote world. Its `glob` and `grep` spawn
 * the packaged `@vscode/ripgrep` binary by its HOST path (`rgPath`, or a single-file build's
 * `<execPath>-rg` sidecar) through `ctx.subprocess`, unconfined; no such path exists in the
 * world. A spawn of that path runs the world's ripgrep instead, by an absolute path: the
 * world's own `rg` on its PATH where neither it nor its directory is writable by the world's
 * user (a system install: the project image has Debian's; never one a confined agent could
 * have put in `~/.local/bin`; for root, who may write everything, one in the system's own
 * directories, {@link SYSTEM_DIRECTORIES}), else this package's copy of the packaged Linux build for the
 * world's architecture (install.ts), verified at each start (launch.ts), so the search reads
 * the same files as the shell and `read`.
 * @module dsh-remote-worlds/providers/remote/world-tools/ripgrep
 */
import { posix } from 'node:path'
import type { ControlChannel } from '../control-channel.ts'
import type { WorldOwner } from '../world-owner.ts'
import { forgetWorldTool, installWorldTool } from './install.ts'
import { type WorldToolCopy, worldToolCommand } from './launch.ts'

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

/** Where a root world's own `rg` is taken from (the FHS's command directories). */
export const SYSTEM_DIRECTORIES: readonly string[] = Object.freeze(['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin'])

/** The ripgrep a search runs in the world: a system `rg` by its path, or the package's verified copy. */
export type WorldRipgrep = { system: string } | { copy: WorldToolCopy }

/**
 * The ripgrep to run in the world: the first `rg` on `path` (the spawn's PATH) that the world's
 * user may execute and not write, nor its directory (root: the first in a system directory);
 * else the package's copy (copied in on first use).
 * @throws WorldToolUnavailableError when the world has none and the copy cannot be made.
 */
export async function worldRipgrep(owner: WorldOwner, control: ControlChannel, path: string | undefined): Promise<WorldRipgrep> {
  const root = control.info.uid === 0
  const candidates = (path ?? '').split(':').filter(dir => dir.startsWith('/') && !/[\0\n]/.test(dir) && (!root || SYSTEM_DIRECTORIES.includes(dir))).map(dir => posix.join(dir, 'rg'))
  const found = candidates.length === 0 ? undefined : await control.firstExecutable(candidates, { unwritable: !root })
  if (found !== undefined) return { system: candidates[found]! }
  // Looked up again for each search (control.sh `tool`: the hash of the cached copy, a few ms):
  // a search's spawn has no retry of its own, so a copy refused at its start (launch.ts) would
  // fail every later search; this way the next one finds the copy gone bad and copies anew.
  forgetWorldTool(owner, 'rg')
  const { name, path: at, sha256 } = await installWorldTool(owner, 'rg')
  return { copy: { name, path: at, sha256 } }
}

/**
 * The argv that runs `rg` with `args`: the system one directly, the package's copy through
 * `/bin/sh -c` and launch.ts's check (the shell becomes ripgrep: one pid).
 */
export function ripgrepArgv(rg: WorldRipgrep, args: readonly string[]): string[] {
  if ('system' in rg) return [rg.system, ...args]
  return ['/bin/sh', '-c', worldToolCommand(rg.copy, args), 'rg']
}
