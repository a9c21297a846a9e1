/**
 * Copy a tool this package carries (manifest.ts) into a world once, and find it there after:
 * a per-user cache keyed by the build's SHA-256, so a world keeps one copy per build, several
 * clients share it, and a new package version brings its own.
 *
 * Cache directories, in order (the first whose copy runs wins):
 *   $XDG_CACHE_HOME/dsh-remote-worlds/tools (else $HOME/.cache/...), /var/tmp/dsh-remote-tools-UID,
 *   /tmp/dsh-remote-tools-UID, /dev/shm/dsh-remote-tools-UID.
 * Each is used only when it is a directory of the world's user and not a symlink (as tmux
 * trusts /tmp/tmux-UID), made 0700, and lies outside every root a fence around this world lets
 * confined programs write ({@link fenceWritableRoots}: bubblewrap's workspace over SSH), where
 * a confined agent could plant a program that runs outside its fence. The copy is checked by
 * size and by hash (`sha256sum`, which the world must have: launch.ts verifies every start
 * with it), and must run (`--version`) before it is kept: a read-only HOME, a noexec /tmp or a
 * full disk moves on to the next directory. A copy found there later is hashed again before it
 * is reused, and at each start (launch.ts).
 * @module dsh-remote-worlds/providers/remote/world-tools/install
 */
import { posix } from 'node:path'
import { WorldToolUnavailableError } from '../errors.ts'
import { isWithin } from '../paths.ts'
import { shQuote } from '../quote.ts'
import type { WorldOwner } from '../world-owner.ts'
import type { WorldToolCopy } from './launch.ts'
import { type WorldToolName, worldTool } from './manifest.ts'
import { runInWorld } from './run.ts'

/** Where a tool is in a world: its copy (start it with launch.ts `worldToolCommand`). */
export interface InstalledWorldTool extends WorldToolCopy {
  /** True when it was copied in by this call (false: a copy was there). */
  copied: boolean
}

/**
 * The cache directories of a user, in the order they are tried (see the module comment), less
 * those inside `fenced` (roots confined programs may write).
 */
export function cacheDirectories(ambient: Readonly<Record<string, string>>, uid: number, fenced: readonly string[] = []): string[] {
  const dirs: string[] = []
  const xdg = ambient.XDG_CACHE_HOME
  const home = ambient.HOME
  if (xdg !== undefined && xdg.startsWith('/')) dirs.push(posix.join(xdg, 'dsh-remote-worlds', 'tools'))
  else if (home !== undefined && home.startsWith('/') && home !== '/') dirs.push(posix.join(home, '.cache', 'dsh-remote-worlds', 'tools'))
  for (const base of ['/var/tmp', '/tmp', '/dev/shm']) dirs.push(`${base}/dsh-remote-tools-${uid}`)
  return dirs.filter(dir => !/[\0\n]/.test(dir) && !fenced.some(root => isWithin(root, dir)))
}

/**
 * The script that copies its stdin (`size` bytes with hash `sha256`) into the first of `dirs`
 * that holds a running copy; prints `have PATH`, or one `skip DIR: why` line a directory and
 * `none`. A short or corrupt transfer (size, hash) is `fail: why` (exit 3).
 */
export function installToolScript(name: string, sha256: string, size: number, dirs: readonly string[]): string {
  return [
    'umask 077',
    // Every start of a copy is verified by its hash (launch.ts): a world that cannot hash cannot run one.
    'command -v sha256sum >/dev/null 2>&1 || { echo "fail: the world has no sha256sum (coreutils or busybox), which verifies each start of a world tool"; exit 3; }',
    `n=${shQuote(name)} s=${shQuote(sha256)} size=${size} t=`,
    `for b in ${dirs.map(dir => shQuote(dir)).join(' ')}; do`,
    '  mkdir -p "$b" 2>/dev/null',
    '  if [ ! -e "$b" ]; then echo "skip $b: cannot be created (read-only?)"; continue; fi',
    '  if ! { [ -d "$b" ] && [ ! -L "$b" ] && [ -O "$b" ]; }; then echo "skip $b: not a directory of this user (another user\'s, or a symlink)"; continue; fi',
    '  chmod 700 "$b" 2>/dev/null',
    '  d="$b/$s"',
    '  mkdir -p "$d" 2>/dev/null',
    '  if ! { [ -d "$d" ] && [ ! -L "$d" ] && [ -O "$d" ]; }; then echo "skip $b: cannot make a directory there"; continue; fi',
    // Made 0700 again, and whatever is at the copy's name that is not a plain file goes (a
    // directory or symlink planted there, or a mode opened to others, would refuse every start).
    '  chmod 700 "$d" 2>/dev/null',
    '  if [ -L "$d/$n" ] || { [ -e "$d/$n" ] && [ ! -f "$d/$n" ]; }; then rm -rf "$d/$n"; fi',
    '  p="$d/.$n.$$"',
    '  if [ -z "$t" ]; then',
    '    if ! cat > "$p" 2>/dev/null; then rm -f "$p"; echo "skip $b: not writable"; continue; fi',
    '    t=$p',
    '  elif ! cp "$t" "$p" 2>/dev/null; then rm -f "$p"; echo "skip $b: not writable"; continue; fi',
    '  got=$(wc -c < "$p"); got=$((got))',
    '  if [ "$got" != "$size" ]; then',
    '    if [ "$p" = "$t" ]; then echo "fail: received $got of $size bytes"; rm -f "$p"; exit 3; fi',
    '    rm -f "$p"; echo "skip $b: the copy is incomplete (disk full?)"; continue',
    '  fi',
    '  h=$(sha256sum < "$p"); h=${h%% *}',
    '  if [ "$h" != "$s" ]; then echo "fail: the copy has sha256 $h"; rm -f "$p"; exit 3; fi',
    '  chmod 700 "$p"',
    '  if ( exec 3<"$p" && exec /proc/self/fd/3 --version ) >/dev/null 2>&1 </dev/null || "$p" --version >/dev/null 2>&1 </dev/null; then',
    '    mv -f "$p" "$d/$n"',
    '    [ "$t" = "$p" ] || rm -f "$t"',
    '    echo "have $d/$n"; exit 0',
    '  fi',
    '  echo "skip $b: a program there cannot run (mounted noexec?)"',
    '  [ "$p" = "$t" ] || rm -f "$p"',
    'done',
    '[ -z "$t" ] || rm -f "$t"',
    'echo none',
  ].join('\n')
}

const installed = new WeakMap<WorldOwner, Map<WorldToolName, Promise<InstalledWorldTool>>>()
const fences = new WeakMap<WorldOwner, readonly string[]>()

/**
 * Declare the roots a fence around the owner's world lets confined programs write (absolute
 * paths; bubblewrap's workspace root over SSH). No cache directory inside one is used from now
 * on: a copy found there is forgotten, so the next {@link installWorldTool} looks elsewhere.
 * A world whose fence contains every program this package starts (a container) declares none.
 */
export function fenceWritableRoots(owner: WorldOwner, roots: readonly string[]): void {
  fences.set(owner, Object.freeze([...roots]))
  const tools = installed.get(owner)
  if (tools === undefined) return
  for (const [name, pending] of tools) {
    void pending.then(copy => {
      if (roots.some(root => isWithin(root, copy.path)) && tools.get(name) === pending) tools.delete(name)
    }, () => undefined)
  }
}

/**
 * The path of `name` in the owner's world, copying the world's architecture's build in when no
 * cache directory holds it yet. Kept per owner; a failure is forgotten, so a later call retries.
 * @throws WorldToolUnavailableError when the package has no build for the world's architecture,
 *   or no cache directory can hold a copy that runs (each directory's reason is named).
 * @throws the owner's errors (the world cannot be reached).
 */
export function installWorldTool(owner: WorldOwner, name: WorldToolName): Promise<InstalledWorldTool> {
  let tools = installed.get(owner)
  if (tools === undefined) {
    tools = new Map()
    installed.set(owner, tools)
  }
  let pending = tools.get(name)
  if (pending === undefined) {
    const started = install(owner, name)
    pending = started
    tools.set(name, started)
    started.catch(() => { if (tools.get(name) === started) tools.delete(name) })
  }
  return pending
}

/**
 * Forget where `name` was found in the owner's world, so the next {@link installWorldTool}
 * looks (and copies) again: the copy is gone (a restarted container, a cleared cache) or was
 * refused at a start (launch.ts: it is not the build this client shipped).
 */
export function forgetWorldTool(owner: WorldOwner, name: WorldToolName): void {
  installed.get(owner)?.delete(name)
}

async function install(owner: WorldOwner, name: WorldToolName): Promise<InstalledWorldTool> {
  const control = await owner.control()
  const build = worldTool(name, control.info.arch)
  const { ambient } = await owner.userEnvironment()
  const dirs = cacheDirectories(ambient, control.info.uid, fences.get(owner))
  // A copy there already is found on the control channel (control.sh `tool`: one fork); only a
  // copy runs a setup script. A world that does not answer now (a paused container) is not
  // asked: the copy's exec meets its error (TargetNotRunningError) at once.
  const found = await owner.answering() ? await control.findWorldTool(name, build.sha256, dirs) : undefined
  if (found !== undefined) return { name, sha256: build.sha256, path: posix.join(dirs[found]!, build.sha256, name), copied: false }
  const result = await runInWorld(owner, installToolScript(name, build.sha256, build.bytes.length, dirs), build.bytes)
  const copied = /^have (\/.*)$/m.exec(result.stdout)
  if (copied !== null) return { name, sha256: build.sha256, path: copied[1]!, copied: true }
  const reasons = result.stdout.split('\n').filter(line => line.startsWith('skip ') || line.startsWith('fail: ')).map(line => line.replace(/^skip /, ''))
  const said = reasons.length > 0 ? reasons.join('; ') : `the copy script said ${JSON.stringify((result.stdout + result.stderr).trim().slice(0, 300))} (exit ${result.exitCode})`
  throw new WorldToolUnavailableError(`cannot copy ${name} (${build.arch}, ${build.bytes.length} bytes) into ${owner.describe()}: ${said}`)
}
