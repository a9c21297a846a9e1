/**
 * How a world tool (manifest.ts) is started: the one shell fragment every start of dsh-pty,
 * dsh-fsd and the package's ripgrep goes through, so nothing in a world runs a cached copy that
 * is not the build this client shipped.
 *
 * The fragment opens the copy as fd 3, checks where it lies (the copy and each directory up to
 * its cache directory are the user's, no symlink, writable by nobody else), hashes THAT open
 * file (`sha256sum <&3`) and compares it with the build's SHA-256, then executes the same open
 * file (`/proc/self/fd/3`, which execve(2) follows to the file fd 3 holds, as fexecve(3) does):
 * the check and the run see one file, so a copy renamed over the cached one in between is never
 * run. Where /proc is not mounted it executes the path it checked. A copy that fails a check is
 * not run: the fragment prints {@link UNVERIFIED_TOOL_MARK} and why on stderr and exits
 * {@link UNVERIFIED_TOOL_EXIT}; the caller forgets the copy (install.ts `forgetWorldTool`), and
 * its next start copies the build in anew.
 *
 * A world without `sha256sum` (coreutils, busybox) can verify nothing: its tools are refused,
 * never run unverified. What a hash cannot stop is a write INTO the same file between the check
 * and the run by a program of the same user that may write the cache: over SSH no cache is
 * writable inside the bubblewrap fence (sandbox/fence.ts), and in a container such a program
 * is already inside the same fence, as the same user. The program started this way has fd 3 open on its own image; the
 * package's C tools close it (dsh-fsd closes every fd above 2, dsh-pty the one holding its
 * image) and name themselves (prctl PR_SET_NAME), since the kernel names a process after the
 * file it executed (`3`).
 * @module dsh-remote-worlds/providers/remote/world-tools/launch
 */
import { posix } from 'node:path'
import { shQuote, shQuoteArgv } from '../quote.ts'
import type { WorldToolName } from './manifest.ts'

/** A world tool's copy in a world, as found or made by install.ts. */
export interface WorldToolCopy {
  name: WorldToolName
  /** Absolute path of the copy: `CACHE/SHA256/NAME`. */
  path: string
  /** SHA-256 of the build (lower-case hex), which the copy must hash to each time it starts. */
  sha256: string
}

/** What a refused start prints first on stderr (then the path and why). */
export const UNVERIFIED_TOOL_MARK = 'dsh-remote-worlds: refused to run a world tool:'

/** Exit status of a refused start (126: found but not executable, as the shells use it). */
export const UNVERIFIED_TOOL_EXIT = 126

/** The executable the fragment runs: the verified open file. */
export const VERIFIED_TOOL_FD_PATH = '/proc/self/fd/3'

/** Options of {@link worldToolCommand}. */
export interface WorldToolCommandOptions {
  /** `NAME=VALUE` words exported to the program (already quoted by the caller). */
  assignments?: string | undefined
  /**
   * Wraps the program's argv (argv[0] is the file to execute) in a confinement, e.g. bubblewrap
   * (`ctx.sandbox.confine`): the check runs outside it, and the confined program is the same
   * open file (bubblewrap passes fd 3 on).
   */
  wrap?: ((argv: readonly string[]) => readonly string[]) | undefined
}

/**
 * The `sh -c` fragment that verifies `copy` and executes it with `args` (see the module comment).
 * It replaces the shell (`exec`); lines before it in the same script are the caller's.
 */
export function worldToolCommand(copy: WorldToolCopy, args: readonly string[], options: WorldToolCommandOptions = {}): string {
  const file = shQuote(copy.path)
  const sha = copy.sha256
  if (!/^[0-9a-f]{64}$/.test(sha)) throw new RangeError(`a world tool's sha256 must be 64 hex digits, got ${JSON.stringify(sha)}`)
  const directory = shQuote(posix.dirname(copy.path))
  const cache = shQuote(posix.dirname(posix.dirname(copy.path)))
  const wrap = options.wrap ?? ((argv: readonly string[]) => argv)
  const prefix = options.assignments === undefined || options.assignments === '' ? '' : `${options.assignments} `
  const refuse = (why: string): string => `{ printf '%s %s: %s\\n' ${shQuote(UNVERIFIED_TOOL_MARK)} ${file} "${why}" >&2; exit ${UNVERIFIED_TOOL_EXIT}; }`
  return [
    // Each test is a builtin.
    `[ -f ${file} ] && [ ! -L ${file} ] || ${refuse('it is missing or not a plain file')}`,
    `[ -r ${file} ] && [ -O ${file} ] && [ ! -L ${directory} ] && [ -O ${directory} ] && [ ! -L ${cache} ] && [ -O ${cache} ] || ${refuse('it, its directory or its cache directory is a symlink or not this user\'s')}`,
    `command -v sha256sum >/dev/null 2>&1 || ${refuse('the world has no sha256sum (coreutils or busybox) to verify it')}`,
    `exec 3<${file}`,
    // The two checks that need a process run side by side in one command substitution (a
    // process start is most of a check's cost: 3-5 ms each on a loaded 2-core host): find(1)
    // prints each of the three that is writable by group or others (-perm /022), or why it
    // failed, and sha256sum hashes the open file. Passed: the output is exactly one line, the
    // hash. (From /: find fails where it cannot return to a working directory the user may not
    // enter.)
    `_dshH=$(cd / && { find ${cache} ${directory} ${file} -maxdepth 0 -perm /022 2>&1 & sha256sum <&3 2>/dev/null; wait; })`,
    `case $_dshH in *'\n'*|'') ;; "${sha} "*) _dshH=${sha} ;; esac`,
    `[ "$_dshH" = ${sha} ] || ${refuse(`it, its directory or its cache directory is writable by others, or its sha256 is not ${sha} (the build this client shipped): \${_dshH:-unreadable}`)}`,
    `if [ -e ${VERIFIED_TOOL_FD_PATH} ]; then ${prefix}exec ${shQuoteArgv(wrap([VERIFIED_TOOL_FD_PATH, ...args]))}; fi`,
    `${prefix}exec ${shQuoteArgv(wrap([copy.path, ...args]))}`,
  ].join('\n')
}

/** `text` (a start's stderr, an error's message) says a world tool's copy was refused. */
export function saysUnverifiedTool(text: string): boolean {
  return text.includes(UNVERIFIED_TOOL_MARK)
}
