/**
 * What the login shells' startup files NAME: the files they source, the PATH directories they
 * add and the programs they run, read from the files themselves. A fence (fence.ts) keeps these
 * fixed too, because the user's next login (interactive or not) runs them outside the fence:
 * conda's hook in `~/.bashrc` runs `~/miniconda3/bin/conda` and adds `~/miniconda3/bin` to the
 * PATH, gcloud's line sources `~/google-cloud-sdk/path.bash.inc`, and none of these lies in a
 * dot-entry of HOME. Asking an interactive shell instead would run the user's interactive
 * startup (agents, multiplexers) on every probe; reading the text runs nothing.
 *
 * What is read: each startup file in {@link STARTUP_FILES} that is a regular file, its first
 * {@link STARTUP_FILE_BYTES} bytes, and then, once, the files those source (conda.sh, path.bash.inc).
 * What counts as a name, in a line with its comment removed:
 * - the word after `.` or `source`;
 * - each `:`-separated part of a `PATH=` (or `export PATH=`) value;
 * - the first word of a command: at the line's start, after `;`, `&&`, `||`, `|`, `then`,
 *   `do`, `$(` or a backquote (conda's `$('/home/u/miniconda3/bin/conda' 'shell.bash' 'hook')`).
 * A word counts when, after its quotes are removed and a leading `~`, `$HOME` or `${HOME}` is
 * expanded, it is an absolute path with no other expansion or glob in it; the rest (a path made
 * of other variables, a relative path) cannot be known without running the file, which
 * docs/how-it-works.md says.
 * @module dsh-remote-worlds/sandbox/startup-names
 */
import { posix } from 'node:path'
import { isWithin } from '../providers/remote/paths.ts'
import { shQuote } from '../providers/remote/quote.ts'

/** The startup files read, relative to HOME (bash, sh and zsh; `~/.ssh/rc` is run by sshd). */
export const STARTUP_FILES: readonly string[] = Object.freeze([
  '.bashrc', '.bash_profile', '.bash_login', '.profile', '.bash_logout', '.bash_aliases',
  '.zshenv', '.zprofile', '.zshrc', '.zlogin', '.zlogout', '.ssh/rc',
])

/** At most this many bytes of each file are read (256 KiB: a startup file is far smaller). */
export const STARTUP_FILE_BYTES = 262_144

/** At most this many sourced files are read in the second round. */
const SOURCED_FILES_READ = 32

/**
 * The script that prints the files `paths` (absolute), each as `PATH NUL CONTENT NUL`, the
 * content bounded at {@link STARTUP_FILE_BYTES}; missing, unreadable and non-regular files are
 * left out. The whole is hex-encoded by one od(1) so any byte survives. /bin/sh, builtins but
 * head(1) and od(1).
 */
export function startupFilesScript(paths: readonly string[]): string {
  const body = `for _f in ${paths.map(path => shQuote(path)).join(' ')}; do [ -f "$_f" ] && [ -r "$_f" ] || continue; printf '%s\\0' "$_f"; head -c ${STARTUP_FILE_BYTES} -- "$_f" 2>/dev/null | tr -d '\\000'; printf '\\0'; done | od -An -v -tx1`
  return `exec /bin/sh -c ${shQuote(body)}\n`
}

/** Parse {@link startupFilesScript}'s output: each file read, by path. */
export function parseStartupFiles(stdout: string): Map<string, string> {
  const fields = Buffer.from(stdout.replace(/[^0-9a-f]/gi, ''), 'hex').toString('utf8').split('\0')
  const files = new Map<string, string>()
  for (let at = 0; at + 1 < fields.length; at += 2) files.set(fields[at]!, fields[at + 1]!)
  return files
}

/** One shell word's text without its quotes, or undefined when it holds what only running tells (`$X`, a glob, `$(...)`). */
function literalWord(word: string, home: string | undefined): string | undefined {
  let text = word
  if (home !== undefined) text = text.replace(/^(["']?)(?:~|\$HOME|\$\{HOME\})(?=\/|["']|$)/, `$1${home}`)
  text = text.replace(/'([^']*)'/g, '$1')
  if (/[$`*?[\]\\'"{}]/.test(text)) return undefined
  return text
}

/** The absolute path a word names, normalized, or undefined. */
function absolutePath(word: string, home: string | undefined): string | undefined {
  const text = literalWord(word, home)
  if (text === undefined || !text.startsWith('/') || /[\0\n]/.test(text)) return undefined
  return posix.normalize(text).replace(/(.)\/$/, '$1')
}

/** A line's words (quotes kept, so `'a b'` is one word), up to an unquoted `#` that starts a word. */
function words(line: string): string[] {
  const found: string[] = []
  for (const match of line.matchAll(/(?:'[^']*'|[^\s';|&()])+|&&|\|\||[;|()]/g)) {
    if (match[0].startsWith('#')) break
    found.push(match[0])
  }
  return found
}

/** Words after which the next word is a command's first word. */
const COMMAND_STARTERS = new Set([';', '&&', '||', '|', 'then', 'do', 'else', 'elif', 'if', 'while', 'until', '!', '{', '(', 'eval', 'exec', 'command'])

/**
 * The absolute paths one startup file's text names (see the module comment), split in the files
 * it sources and the rest.
 * @param home - the user's HOME, for `~` and `$HOME`.
 */
export function namedPaths(text: string, home: string | undefined): { sourced: string[]; named: string[] } {
  const sourced = new Set<string>()
  const named = new Set<string>()
  for (const raw of text.split(/\r?\n/)) {
    // Double quotes only group (a path with a space in them is rare and not read); `$(` and
    // backquotes start a command like `;` does; a test's operands (`[ -f P ]`) are no command.
    const line = raw.replace(/"/g, '').replace(/\$\(|`/g, ' ; ').replace(/(^|\s)\[\[?\s.*?\]\]?/g, '$1')
    const list = words(line)
    let commandStart = true
    for (let at = 0; at < list.length; at++) {
      const word = list[at]!
      if (COMMAND_STARTERS.has(word) || word === ')' || word === '}') { commandStart = COMMAND_STARTERS.has(word); continue }
      const assignment = /^(?:export\s+)?PATH=(.*)$/s.exec(word)
      if (assignment !== null) {
        for (const part of assignment[1]!.replace(/^["']|["']$/g, '').split(':')) {
          const path = absolutePath(part, home)
          if (path !== undefined) named.add(path)
        }
        continue
      }
      if (word === 'export' || /^[A-Za-z_][A-Za-z0-9_]*=/.test(word)) continue
      if (commandStart) {
        if ((word === '.' || word === 'source') && at + 1 < list.length) {
          const path = absolutePath(list[at + 1]!, home)
          if (path !== undefined) sourced.add(path)
          at++
        } else {
          const path = absolutePath(word, home)
          if (path !== undefined) named.add(path)
        }
        commandStart = false
      }
    }
  }
  return { sourced: [...sourced], named: [...named] }
}

/** What the startup files name: the files they source, and the programs and PATH directories they run from. */
export interface StartupNames {
  sourced: string[]
  named: string[]
}

/**
 * Everything the user's startup files name, read in the world by `run` (two runs at most: the
 * startup files, then the files they source).
 * @param run - runs a POSIX sh script in the world as the user; its failure reads as "nothing named".
 * @param home - the user's HOME (undefined: nothing is read).
 */
export async function startupNamedPaths(run: (script: string) => Promise<{ exitCode: number | null; stdout: string }>, home: string | undefined): Promise<StartupNames> {
  const found: StartupNames = { sourced: [], named: [] }
  if (home === undefined) return found
  const read = async (paths: readonly string[]): Promise<string[]> => {
    const result = await run(startupFilesScript(paths))
    if (result.exitCode !== 0) return []
    const fresh: string[] = []
    for (const text of parseStartupFiles(result.stdout).values()) {
      const names = namedPaths(text, home)
      for (const path of names.named) if (!found.named.includes(path)) found.named.push(path)
      for (const path of names.sourced) if (!found.sourced.includes(path)) { found.sourced.push(path); fresh.push(path) }
    }
    return fresh
  }
  const startupFiles = STARTUP_FILES.map(entry => posix.join(home, entry))
  const sourced = (await read(startupFiles)).filter(path => !startupFiles.includes(path)).slice(0, SOURCED_FILES_READ)
  if (sourced.length > 0) await read(sourced)
  return found
}

/**
 * The paths a fence keeps fixed for what the startup files name. A path in a non-dot entry of
 * HOME is kept with its whole installation, that entry (`~/miniconda3` for `~/miniconda3/bin`:
 * conda's python and libraries lie beside it; `~/google-cloud-sdk` for its `path.bash.inc`,
 * which puts a bin directory it computes on the PATH), unless a workspace root is that entry or
 * lies inside it (`~/go/src/app` for `~/go/bin`): there only the named path is kept, so that
 * workspace is not refused for what it does not hold. Elsewhere (`/opt/x/bin`, a dot-entry of
 * HOME) the named path is kept.
 */
export function startupProtected(names: StartupNames, home: string | undefined, workspaceRoots: readonly string[]): string[] {
  const kept = new Set<string>()
  for (const path of [...names.sourced, ...names.named]) {
    const first = home !== undefined && path.startsWith(`${home}/`) ? path.slice(home.length + 1).split('/')[0]! : undefined
    const installation = first === undefined || first.startsWith('.') ? undefined : posix.join(home!, first)
    const holdsRoot = installation !== undefined && workspaceRoots.some(root => isWithin(installation, root))
    kept.add(installation === undefined || holdsRoot ? path : installation)
  }
  return [...kept]
}
