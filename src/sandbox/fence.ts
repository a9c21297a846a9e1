/**
 * What a bubblewrap fence must keep fixed inside a writable workspace: the files and directories
 * that something OUTSIDE the fence executes, sources or trusts. Over SSH the package's own
 * programs (the control program, setup scripts, world tools) and the user's later logins run
 * unconfined, as the same user; a workspace at (or above) HOME would otherwise let a confined
 * agent plant code there:
 * - the login shells' startup files: sshd runs every exec channel's command through the user's
 *   login shell (sshd(8) "the command is run by the user's shell with -c"), and Debian's bash
 *   reads `~/.bashrc` for it (SSH_SOURCE_BASHRC); login shells read the profiles;
 * - `~/.ssh` (`rc`, run by sshd before every command; `environment`; `authorized_keys`);
 * - every directory on the login PATH, and the ones Debian's and Ubuntu's `~/.profile` add when
 *   they exist (`~/bin`, `~/.local/bin`): a program found there runs outside the fence;
 * - every other entry of HOME whose name starts with a dot: what the startup files source
 *   (`~/.cargo/env`, `~/.bashrc.d/*`, `~/.bash_aliases`) and what the user's own programs run
 *   or trust (`~/.local/pipx`, `~/.cargo/bin`, `~/.cache`, `~/.gitconfig`) cannot be listed, but
 *   it lives there by convention: with the workspace at HOME, HOME's dot-entries are read-only;
 * - the world-tool caches (every one install.ts may use: `$XDG_CACHE_HOME` too), where another
 *   client of the same user (one without this fence) runs what it finds after hashing it: a
 *   copy writable inside the fence could be changed between that check and the run.
 * Each is kept by its name and by the path it resolves to (realpath, {@link realPathsScript}):
 * a PATH directory `/opt/tools/bin` that is a symlink into the workspace, or a HOME reached
 * through a symlink, is the workspace's all the same.
 *
 * How they are kept fixed: every directory from the workspace root down to the parent of a
 * protected path is FROZEN: bound read-only over the workspace's read-write bind, with each of
 * its entries bound read-write again except the protected ones and those on the way to them.
 * So a protected file or directory can be neither changed nor replaced nor renamed away, a
 * missing one cannot be created, and everything else in the workspace stays writable; the price
 * is that no new name can be made directly in a frozen directory (EROFS: `touch ~/new` with the
 * workspace at HOME), which the sandbox report says. What the fence cannot keep fixed is
 * refused with the path and why: a workspace that is itself protected, lies in a dot-entry of
 * HOME or contains /tmp (where the package keeps its held shells and state), a protected path
 * that is a symlink into the workspace, a protected file with more than one hard link (its
 * other name may lie in the workspace), and a workspace the probe did not look at. What the
 * startup files name outside HOME's dot-entries (conda's hook, `. ~/src/env.sh`) is read from
 * their text by startup-names.ts and kept fixed the same way; what they make of other
 * variables cannot be seen: docs/how-it-works.md says so.
 * @module dsh-remote-worlds/sandbox/fence
 */
import { posix } from 'node:path'
import { isWithin } from '../providers/remote/paths.ts'
import { shQuote } from '../providers/remote/quote.ts'
import { cacheDirectories } from '../providers/remote/world-tools/install.ts'

/** Startup files of the login shells (bash, sh, zsh) in HOME, and the directories of `~/.profile`'s PATH. */
const HOME_ENTRIES: readonly string[] = Object.freeze([
  '.bashrc', '.bash_profile', '.bash_login', '.profile', '.bash_logout',
  '.zshenv', '.zprofile', '.zshrc', '.zlogin', '.zlogout',
  '.ssh', 'bin', '.local/bin',
])

/** HOME from the login's ambient environment, when it is an absolute path other than `/`. */
export function homeOf(ambient: Readonly<Record<string, string>>): string | undefined {
  const home = ambient.HOME
  return home !== undefined && home.startsWith('/') && home !== '/' && !/[\0\n]/.test(home) ? posix.normalize(home).replace(/(.)\/$/, '$1') : undefined
}

/** `path` is a dot-entry of `home` or lies in one (`~/.cargo`, `~/.cargo/env`). */
export function inHomeDotEntry(path: string, home: string | undefined): boolean {
  if (home === undefined || path === home || !isWithin(home, path)) return false
  return path.slice(home.length + 1).startsWith('.')
}

/**
 * The paths a fence keeps fixed in this world besides HOME's dot-entries (see the module
 * comment), from the login's ambient HOME and PATH and the user's uid: absolute, normalized, no
 * duplicates.
 */
export function protectedPaths(ambient: Readonly<Record<string, string>>, uid?: number): string[] {
  const paths = new Set<string>()
  const home = homeOf(ambient)
  if (home !== undefined) for (const entry of HOME_ENTRIES) paths.add(posix.join(home, entry))
  if (uid !== undefined) for (const dir of cacheDirectories(ambient, uid)) paths.add(dir)
  for (const dir of (ambient.PATH ?? '').split(':')) if (dir.startsWith('/')) paths.add(posix.normalize(dir).replace(/(.)\/$/, '$1'))
  return [...paths].filter(path => !/[\0\n]/.test(path))
}

/** The line prefix {@link loginPathScript} marks its answer with (a profile may print too). */
const LOGIN_PATH_MARK = 'DSH-LOGIN-PATH:'

/**
 * The script that prints the PATH a login shell of the user gets (`$SHELL -l`: ~/.profile and
 * what it sources; `~/go/bin`, rustup's `~/.cargo/bin`), which sshd's commands do not read but
 * the user's own logins do: its directories are kept fixed too. Bounded at 5 s (timeout(1),
 * SIGKILL; where the world has none, not asked), stdin /dev/null, not interactive (so nothing
 * of an interactive startup, an agent or a multiplexer, is started).
 */
export function loginPathScript(): string {
  const login = `printf '${LOGIN_PATH_MARK}%s\\n' "$PATH"`
  const body = `command -v timeout >/dev/null 2>&1 || exit 0; timeout -s KILL 5 "\${SHELL:-/bin/sh}" -lc ${shQuote(login)} </dev/null 2>/dev/null | grep '^${LOGIN_PATH_MARK}' | tail -n 1`
  return `exec /bin/sh -c ${shQuote(body)}\n`
}

/** The login PATH {@link loginPathScript} printed ('' when none). */
export function parseLoginPath(stdout: string): string {
  const line = stdout.split('\n').find(text => text.startsWith(LOGIN_PATH_MARK))
  return line === undefined ? '' : line.slice(LOGIN_PATH_MARK.length)
}

/**
 * The script that prints, for each of `paths`, where it resolves (`readlink -f`: every symlink
 * followed; empty where a component before the last is missing), NUL-terminated and
 * hex-encoded by one od(1), in order. Run in /bin/sh, with the system's readlink by its path
 * (a PATH directory of the workspace may hold another).
 */
export function realPathsScript(paths: readonly string[]): string {
  const body = `{ for _p in ${paths.map(path => shQuote(path)).join(' ')}; do printf '%s\\0' "$(/usr/bin/readlink -f -- "$_p" 2>/dev/null || readlink -f -- "$_p" 2>/dev/null)"; done; } | od -An -v -tx1`
  return `exec /bin/sh -c ${shQuote(body)}\n`
}

/** Parse {@link realPathsScript}'s output: one resolved path (or '') per path asked, in order. */
export function parseRealPaths(stdout: string, count: number): string[] {
  const fields = Buffer.from(stdout.replace(/[^0-9a-f]/gi, ''), 'hex').toString('utf8').split('\0')
  return Array.from({ length: count }, (_, index) => fields[index] ?? '')
}

/** The directories from `root` down to the parent of each protected path inside it, shallowest first. */
export function chainDirectories(root: string, inside: readonly string[]): string[] {
  const chain = new Set<string>()
  for (const path of inside) {
    for (let dir = posix.dirname(path); isWithin(root, dir); dir = posix.dirname(dir)) {
      chain.add(dir)
      if (dir === root || dir === '/') break
    }
  }
  return [...chain].sort((a, b) => a.split('/').length - b.split('/').length || (a < b ? -1 : 1))
}

/** What a path is in the world (the listing's kinds). */
type Kind = 'missing' | 'dir' | 'file' | 'link' | 'other'

/** What the listing script saw of one workspace root. */
export interface FenceListing {
  /** Each protected path inside the root: its kind, and for a symlink where it resolves. */
  paths: Map<string, { kind: Kind; real?: string | undefined; links?: number | undefined }>
  /** Each chain directory: its kind, and its entries (kind by full path). */
  chain: Map<string, { kind: Kind; real?: string | undefined; entries: Map<string, Kind> }>
}

/**
 * The script that lists what {@link fenceArgs} needs for `root`: one NUL-terminated record per
 * fact (`p KIND PATH` for a protected path, `c KIND DIR` for a chain directory, `e KIND ENTRY`
 * for each entry of one, `t - REAL` after a symlink's record: where it resolves, `n - LINKS`
 * after a file's: its hard link count, stat(1)'s %h), the whole
 * hex-encoded by one od(1) so any byte of a name survives. It runs in /bin/sh whatever the login
 * shell (zsh aborts on a glob that matches nothing); builtins only but the od, and one
 * readlink(1) a symlink and one stat(1) a file.
 */
export function fenceListingScript(root: string, protectedInside: readonly string[]): string {
  const lines = [
    '_kind() { if [ -L "$1" ]; then _k=link; elif [ -d "$1" ]; then _k=dir; elif [ -f "$1" ]; then _k=file; elif [ -e "$1" ]; then _k=other; else _k=missing; fi; }',
    '_rec() { _kind "$2"; printf \'%s %s %s\\0\' "$1" "$_k" "$2"; [ "$_k" != link ] || printf \'t - %s\\0\' "$(readlink -f -- "$2")"; [ "$_k" != file ] || printf \'n - %s\\0\' "$(stat -c %h -- "$2")"; }',
    '{',
    ...protectedInside.map(path => `_rec p ${shQuote(path)}`),
    ...chainDirectories(root, protectedInside).map(dir => [
      `_d=${shQuote(dir)}; _rec c "$_d"`,
      'if [ "$_k" = dir ]; then for _e in "$_d"/* "$_d"/.[!.]* "$_d"/..?*; do [ -e "$_e" ] || [ -L "$_e" ] || continue; _kind "$_e"; printf \'e %s %s\\0\' "$_k" "$_e"; done; fi',
    ].join('\n')),
    '} | od -An -v -tx1',
  ]
  return `exec /bin/sh -c ${shQuote(lines.join('\n'))}\n`
}

/** Parse {@link fenceListingScript}'s output (hex bytes, any spacing). */
export function parseFenceListing(stdout: string): FenceListing {
  const bytes = Buffer.from(stdout.replace(/[^0-9a-f]/gi, ''), 'hex')
  const listing: FenceListing = { paths: new Map(), chain: new Map() }
  let last: { kind: Kind; real?: string | undefined; links?: number | undefined } | undefined
  let entries: Map<string, Kind> | undefined
  for (const record of bytes.toString('utf8').split('\0')) {
    const match = /^([pcetn]) (\S+) (.*)$/s.exec(record)
    if (match === null) continue
    const tag = match[1]!
    const kind = match[2]! as Kind
    const path = match[3]!
    if (tag === 'p') {
      const seen: { kind: Kind; real?: string | undefined; links?: number | undefined } = { kind }
      listing.paths.set(path, seen)
      last = seen
    } else if (tag === 'c') {
      entries = new Map()
      const seen: { kind: Kind; real?: string | undefined; entries: Map<string, Kind> } = { kind, entries }
      listing.chain.set(path, seen)
      last = seen
    } else if (tag === 'e') entries?.set(path, kind)
    else if (tag === 'n') { if (last !== undefined) last.links = Number(path) }
    else if (last !== undefined) last.real = path
  }
  return listing
}

/** The fence of one workspace root: bubblewrap arguments after `--bind ROOT ROOT`, or why there can be none. */
export type FencePlan = { args: string[]; frozen: string[] } | { refused: string }

/**
 * The refusal that needs no listing: a root that is protected itself, lies inside a protected
 * directory or a dot-entry of `home`, or contains /tmp; undefined when the root may be fenced.
 */
export function rootRefusal(root: string, protectedAll: readonly string[], home?: string): string | undefined {
  if (isWithin(root, '/tmp')) return `the workspace ${root} contains /tmp, where this package keeps what its programs outside the fence trust (held shells, state); choose a workspace below it`
  const covering = protectedAll.find(path => isWithin(path, root))
  if (covering !== undefined) return `the workspace ${root} is ${covering === root ? '' : 'inside '}${covering}, which programs outside the fence run or read (login shell startup, sshd, the PATH); choose a workspace that is not`
  if (inHomeDotEntry(root, home)) return `the workspace ${root} is in ${home}/${root.slice(home!.length + 1).split('/')[0]}, a dot-entry of HOME, which the user's shells and programs read outside the fence; choose a workspace that is not`
  return undefined
}

/**
 * The fence of `root` from its listing (see the module comment).
 * @param protectedAll - every protected path of the world ({@link protectedPaths}).
 * @param home - the world user's HOME ({@link homeOf}), whose dot-entries stay read-only.
 */
export function fenceArgs(root: string, protectedAll: readonly string[], listing: FenceListing, home?: string): FencePlan {
  const early = rootRefusal(root, protectedAll, home)
  if (early !== undefined) return { refused: early }
  const inside = protectedAll.filter(path => isWithin(root, path))
  for (const path of inside) {
    const seen = listing.paths.get(path)
    if (seen === undefined) return { refused: `the workspace ${root} was not listed for ${path}` }
    if (seen.kind === 'link' && (seen.real === undefined || seen.real === '' || isWithin(root, seen.real))) {
      return { refused: `${path}, which programs outside the fence run or read, is a symlink to ${seen.real || 'an unresolvable path'} inside the workspace ${root}, which the fence cannot keep fixed; choose another workspace, or make ${path} a file` }
    }
    if (seen.kind === 'file' && seen.links !== undefined && seen.links > 1) {
      return { refused: `${path}, which programs outside the fence run or read, has ${seen.links} hard links: another of its names may lie in the workspace ${root}, where the fence cannot keep it fixed; choose another workspace, or give ${path} a single link` }
    }
  }
  const keep = new Set(inside)
  const chain = chainDirectories(root, inside)
  for (const dir of chain) keep.add(dir)
  const args: string[] = []
  const frozen: string[] = []
  for (const dir of chain) {
    const seen = listing.chain.get(dir)
    if (seen === undefined) return { refused: `the workspace ${root} was not listed at ${dir}` }
    // A missing directory on the way is kept from being made by its frozen parent; a symlink's
    // target outside the workspace is read-only anyway, and one inside cannot be kept fixed.
    if (seen.kind === 'missing') continue
    if (seen.kind === 'link') {
      if (seen.real === undefined || seen.real === '' || isWithin(root, seen.real)) return { refused: `${dir}, on the way to paths programs outside the fence run or read, is a symlink into the workspace ${root}, which the fence cannot keep fixed` }
      continue
    }
    // A directory in a dot-entry of HOME stays read-only whole: its dot-entry is not bound again.
    if (seen.kind !== 'dir' || inHomeDotEntry(dir, home)) continue
    frozen.push(dir)
    args.push('--ro-bind', dir, dir)
    for (const [entry, kind] of [...seen.entries].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (keep.has(entry) || (kind !== 'dir' && kind !== 'file') || inHomeDotEntry(entry, home)) continue
      args.push('--bind', entry, entry)
    }
  }
  return { args, frozen }
}
