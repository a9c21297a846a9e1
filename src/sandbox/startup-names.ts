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
 * {@link STARTUP_FILE_BYTES} bytes, and then the files those source (conda.sh, path.bash.inc),
 * three levels deep. What counts as a name, in a line with its comment removed:
 * - the word after `.`, `\.` (nvm's) or `source` (and `--`);
 * - each path a `for` loop lists (Fedora's `for rc in ~/.bashrc.d/*`), a plain glob in its last
 *   component expanded by the world's sh ({@link isGlob});
 * - each `:`-separated part of any assignment's value (`PATH=`, `PATH+=`, `PROMPT_COMMAND=`,
 *   `ZDOTDIR=`, `NVM_DIR=`, an alias body), after `export`, `declare -x` and the like;
 * - the first word of a command: at the line's start, after `;`, `&&`, `||`, `|`, `then`,
 *   `do`, a `case` arm's `)`, `$(` or a backquote (conda's
 *   `$('/home/u/miniconda3/bin/conda' 'shell.bash' 'hook')`), and after `env`, `sudo`, `time`,
 *   `nohup`, `builtin`, `command`, `exec`, `eval`.
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

/** At most this many sourced files are read, over at most {@link SOURCE_ROUNDS} rounds of the script. */
const SOURCED_FILES_READ = 32

/** The startup files, then what they source, then what those source, and one more level. */
const SOURCE_ROUNDS = 4

/**
 * The script that prints the files `paths` (absolute), each as `PATH NUL CONTENT NUL`, the
 * content bounded at {@link STARTUP_FILE_BYTES}; missing, unreadable and non-regular files are
 * left out. The whole is hex-encoded by one od(1) so any byte survives. /bin/sh, builtins but
 * head(1) and od(1).
 */
export function startupFilesScript(paths: readonly string[]): string {
  const body = `for _f in ${paths.map(path => isGlob(path) ? `${shQuote(posix.dirname(path))}/${posix.basename(path)}` : shQuote(path)).join(' ')}; do [ -f "$_f" ] && [ -r "$_f" ] || continue; printf '%s\\0' "$_f"; head -c ${STARTUP_FILE_BYTES} -- "$_f" 2>/dev/null | tr -d '\\000'; printf '\\0'; done | od -An -v -tx1`
  return `exec /bin/sh -c ${shQuote(body)}\n`
}

/**
 * A path whose last component is a plain glob (`~/.bashrc.d/*.sh`: letters, digits, `._-` and
 * `*?`), which {@link startupFilesScript} lets the world's sh expand; nothing else is left unquoted.
 */
export function isGlob(path: string): boolean {
  const base = posix.basename(path)
  return /[*?]/.test(base) && /^[A-Za-z0-9._*?-]+$/.test(base) && !/[*?[\]]/.test(posix.dirname(path))
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
function absolutePath(word: string, home: string | undefined, glob = false): string | undefined {
  const text = literalWord(glob ? word.replace(/[*?]/g, '\u0001') : word, home)?.replace(/\u0001/g, '*')
  if (glob && text !== undefined && text.includes('*') && !isGlob(text)) return undefined
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
const COMMAND_STARTERS = new Set([';', '&&', '||', '|', 'then', 'do', 'else', 'elif', 'if', 'while', 'until', '!', '{', '(', ')'])

/** Words that run the command after them (and their options, `-x`), so that word is still a command's first. */
const PREFIX_WORDS = new Set(['eval', 'exec', 'command', 'builtin', 'export', 'alias', 'declare', 'typeset', 'local', 'readonly', 'env', 'time', 'nohup', 'nice', 'sudo', 'doas'])

/**
 * The absolute paths one startup file's text names (see the module comment), split in the files
 * it sources and the rest.
 * @param home - the user's HOME, for `~` and `$HOME`.
 */
export function namedPaths(text: string, home: string | undefined): { sourced: string[]; named: string[] } {
  const sourced = new Set<string>()
  const named = new Set<string>()
  // A backslash at a line's end continues it.
  for (const raw of text.replace(/\\\r?\n/g, ' ').split(/\r?\n/)) {
    // Double quotes only group (a path with a space in them is rare and not read); `$(` and
    // backquotes start a command like `;` does; a test's operands (`[ -f P ]`) are no command;
    // `${PATH:+:$PATH}` (CUDA's idiom) adds nothing a rule could name.
    const line = raw.replace(/"/g, '').replace(/\$\{PATH:\+[^}]*\}/g, '').replace(/\$\(|`/g, ' ; ').replace(/(^|\s)\[\[?\s.*?\]\]?/g, '$1')
    const list = words(line)
    let commandStart = true
    for (let at = 0; at < list.length; at++) {
      const word = list[at]!
      if (COMMAND_STARTERS.has(word) || word === '}') { commandStart = COMMAND_STARTERS.has(word); continue }
      // Any assignment's value (`PATH+=`, `PROMPT_COMMAND=`, `ZDOTDIR=`, `BASH_ENV=`, an alias
      // body): each `:`-separated part that is a literal absolute path is named.
      const assignment = /^[A-Za-z_][A-Za-z0-9_]*\+?=(.*)$/s.exec(word)
      if (assignment !== null) {
        for (const part of assignment[1]!.split(':')) {
          const path = absolutePath(part, home)
          if (path !== undefined) named.add(path)
        }
        continue
      }
      // `for f in ~/.bashrc.d/*.sh ~/x.sh; do . "$f"; done` (Fedora's ~/.bashrc): each listed
      // file counts as sourced, a glob's by what it matches in the world.
      if (commandStart && word === 'for' && list[at + 2] === 'in') {
        at += 3
        for (; at < list.length && list[at] !== ';' && list[at] !== 'do'; at++) {
          const path = absolutePath(list[at]!, home, true)
          if (path !== undefined) sourced.add(path)
        }
        at--
        continue
      }
      if (!commandStart || PREFIX_WORDS.has(word) || word.startsWith('-')) continue
      if (word === '.' || word === '\\.' || word === 'source') {
        let next = at + 1
        if (list[next] === '--') next++
        const path = next < list.length ? absolutePath(list[next]!, home) : undefined
        if (path !== undefined) sourced.add(path)
        at = next
      } else {
        const path = absolutePath(word, home)
        if (path !== undefined) named.add(path)
      }
      commandStart = false
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
 * Everything the user's startup files name, read in the world by `run` ({@link SOURCE_ROUNDS}
 * runs at most: the startup files, then the files they source, and so on).
 * @param run - runs a POSIX sh script in the world as the user; its failure reads as "nothing named".
 * @param home - the user's HOME (undefined: nothing is read).
 */
export async function startupNamedPaths(run: (script: string) => Promise<{ exitCode: number | null; stdout: string }>, home: string | undefined): Promise<StartupNames> {
  const found: StartupNames = { sourced: [], named: [] }
  if (home === undefined) return found
  const startupFiles = STARTUP_FILES.map(entry => posix.join(home, entry))
  const read = async (paths: readonly string[]): Promise<string[]> => {
    const result = await run(startupFilesScript(paths))
    if (result.exitCode !== 0) return []
    const fresh: string[] = []
    for (const [path, text] of parseStartupFiles(result.stdout)) {
      if (!startupFiles.includes(path) && !found.sourced.includes(path)) found.sourced.push(path)
      const names = namedPaths(text, home)
      for (const path of names.named) if (!found.named.includes(path)) found.named.push(path)
      for (const path of names.sourced) {
        if (isGlob(path)) { if (!fresh.includes(path)) fresh.push(path) }
        else if (!found.sourced.includes(path)) { found.sourced.push(path); fresh.push(path) }
      }
    }
    return fresh
  }
  let budget = SOURCED_FILES_READ
  let next = (await read(startupFiles)).filter(path => !startupFiles.includes(path))
  for (let round = 1; round < SOURCE_ROUNDS && next.length > 0 && budget > 0; round++) {
    const batch = next.slice(0, budget)
    budget -= batch.length
    next = await read(batch)
  }
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
