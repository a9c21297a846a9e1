/**
 * Remote confinement with bubblewrap, world-neutral: the profile (argv builder), a one-time
 * functional probe that runs through any "run this sh script in the remote world" callback,
 * and {@link BubblewrapSandboxProvider}, the `ctx.sandbox` that wraps argv in the probed
 * `bwrap` or fails closed.
 *
 * Profile (the upstream local bwrap profile, plus a private /tmp in both modes):
 * - everything read-only: `--ro-bind / /`;
 * - a fresh `/dev` (`--dev /dev`), a new pid namespace with its own `/proc`, `--die-with-parent`;
 * - a new network namespace (`--unshare-net`): the confined program has a loopback `lo` of its
 *   own and nothing else, so the host's loopback (its sshd, any service on 127.0.0.1) and its
 *   abstract unix sockets (unix(7): they belong to a network namespace, not to the filesystem)
 *   are out of reach. The probe proves it (`lo` only in /proc/self/net/dev) or the confined
 *   modes are refused; it is the world's network setting `'none'` (network/world-network.ts).
 *   (/sys is the host's, bound read-only: its class/net lists the host's interfaces, not the
 *   namespace's, as sysfs shows those of the namespace that mounted it.);
 * - a private, ephemeral `/tmp` (`--tmpfs /tmp`); under read-only a workspace below /tmp is
 *   re-bound read-only so it stays visible;
 * - workspace-write: the workspace bound read-write (`--bind ROOT ROOT`), less its fence
 *   (fence.ts): what programs outside the fence run or read (login shell startup files,
 *   `~/.ssh`, the PATH's directories) stays fixed, by frozen directories bound over it.
 * No `--new-session`: the shell keeps the terminal as its controlling tty (job control and
 * foreground probing need it); the tty is the sandboxed shell's own, so TIOCSTI reaches only it.
 * Each bwrap has its own network namespace: a server one confined program listens on is reached
 * from that program's own processes only (its shell and what it starts), not from another
 * terminal's shell or the file server.
 * @module dsh-remote-worlds/sandbox/bwrap
 */
import { posix } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import { SandboxProvider } from '@deepseek-ai/dsh-sandbox'
import type { ConfinedArgv, ConfinedSandboxMode, RunnerFailureRule, SandboxPolicy } from '@deepseek-ai/dsh-sandbox'
import { shQuote, shQuoteArgv } from '../providers/remote/quote.ts'
import type { ProgramUnwrapper } from '../providers/remote/wrapped-program.ts'
import type { PrivateRootsSandbox } from './layout.ts'
import { WorldSandboxUnavailableError } from './unavailable.ts'
import { startupNamedPaths, startupProtected } from './startup-names.ts'
import { type FencePlan, fenceArgs, fenceListingScript, homeOf, loginPathScript, parseFenceListing, parseLoginPath, parseRealPaths, protectedPaths, realPathsScript, rootRefusal } from './fence.ts'
import { isWithin } from '../providers/remote/paths.ts'
import { SANDBOX_MODES, type ReportingSandbox, type SandboxModeReport, type WorldSandboxReport } from './report.ts'
import { NETWORK_OWNER_BWRAP_ARGS, type SharedNetworkPlan, type SharedNetworkSandbox, afterNsenter, nsenterPrefix } from './shared-network.ts'

/** What a denied file effect prints under bubblewrap's read-only binds (EROFS). */
export const BWRAP_DENIAL_SIGNATURES: readonly string[] = Object.freeze(['Read-only file system'])

/** bwrap's own fatal diagnostics: the command never ran (e.g. a missing workspace). */
export const BWRAP_RUNNER_FAILURE_RULES: readonly RunnerFailureRule[] = Object.freeze([{ fatalSignatures: ['bwrap: '] }])

/** How the sandboxed processes are tied to bwrap's parent (see {@link bwrapProfileArgs}). */
export interface BwrapLifetime {
  /**
   * `--die-with-parent` (default true): bwrap, and so everything in its pid namespace, gets
   * SIGKILL when bwrap's parent exits (PR_SET_PDEATHSIG, prctl(2)). Right where the parent
   * lives as long as the session (an SSH login: a lost connection ends the sandbox). Wrong for
   * a `docker exec`, whose parent is the short-lived `runc exec`: when bwrap sets the signal
   * before runc has exited (under load), runc's exiting threads SIGKILL it; seen as exit 137 of
   * about a third of wrapped shells with the CPU saturated, with signal_generate tracing naming
   * runc threads as the senders.
   */
  dieWithParent?: boolean | undefined
}

/**
 * Directories of sockets that reach programs running OUTSIDE the fence: the services of the host
 * (`/run`, and `/var/run` where it is not a link to it: a database's `/run/postgresql`, the
 * container engine's `docker.sock`, the system D-Bus) and of the user (`/run/user/UID`: its
 * systemd and D-Bus, where `systemd-run --user` runs anything). A read-only bind does not stop
 * connect(2) on a socket, so each one the world has is hidden under an empty tmpfs. (Abstract
 * sockets are out of reach by `--unshare-net`; `/tmp` and `/dev` are the sandbox's own.) The
 * user's `~/.ssh` is hidden too ({@link maskedDirectoriesScript}): an OpenSSH ControlMaster
 * socket there runs commands on the host unconfined, and nothing in a sandbox whose network is
 * `lo` only can use its keys.
 */
export const MASKED_SOCKET_DIRECTORIES: readonly string[] = Object.freeze(['/run', '/var/run'])

/**
 * The script that prints each directory to hide that the world has, one per line: each of
 * {@link MASKED_SOCKET_DIRECTORIES} that is a directory and not a symbolic link (`/var/run` is
 * one to `/run` on most systems, hidden with it), and `HOME/.ssh` when `home` is given.
 */
export function maskedDirectoriesScript(home?: string | undefined): string {
  const candidates = [...MASKED_SOCKET_DIRECTORIES, ...(home !== undefined && home.startsWith('/') ? [posix.join(home, '.ssh')] : [])]
  return `${candidates.map(dir => `[ -d ${shQuote(dir)} ] && [ ! -L ${shQuote(dir)} ] && echo ${shQuote(dir)}`).join('; ')}; exit 0\n`
}

/**
 * The profile's network namespace: bwrap makes it inside its user namespace and brings its `lo`
 * up (bubblewrap(1) `--unshare-net`). Every confined profile has it; the probe runs the profile
 * once more without it only to word why a world cannot have it.
 */
const UNSHARE_NET: readonly string[] = Object.freeze(['--unshare-net'])

/**
 * bwrap arguments (before `--` and the command) expressing `policy`.
 * @param fence - the workspace's fence (fence.ts `fenceArgs`), bound after the workspace under
 *   workspace-write.
 * @param masked - directories hidden under an empty tmpfs ({@link MASKED_SOCKET_DIRECTORIES}
 *   that the world has: a missing one cannot be mounted over in the read-only root).
 * @param network - `'own'`: a network namespace of its own (`--unshare-net`); `'joined'`: the one
 *   the program was started in, which an nsenter prefix chose (shared-network.ts).
 * @throws Error for a relative workspace root.
 */
export function bwrapProfileArgs(policy: { mode: ConfinedSandboxMode; workspaceRoot: string }, lifetime: BwrapLifetime = {}, fence: readonly string[] = [], masked: readonly string[] = [], network: 'own' | 'joined' = 'own'): string[] {
  const root = policy.workspaceRoot
  if (!root.startsWith('/')) throw new Error(`bwrap profile: the workspace root must be absolute, got ${JSON.stringify(root)}`)
  const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--unshare-pid', ...(network === 'own' ? UNSHARE_NET : []), '--proc', '/proc', ...(lifetime.dieWithParent ?? true ? ['--die-with-parent'] : []), '--tmpfs', '/tmp']
  if (policy.mode === 'workspace-write') args.push('--bind', root, root, ...fence)
  else if (isWithin('/tmp', root)) args.push('--ro-bind', root, root)
  // Last: a bind of the workspace (HOME, say) made after a mask would show what it hid again.
  args.push(...masked.filter(dir => !isWithin(dir, root)).flatMap(dir => ['--tmpfs', dir]))
  return args
}

/** Output of one remote script run. */
export interface RemoteRunResult {
  exitCode: number | null
  stdout: string
  stderr: string
}

/** Runs a POSIX `sh` script in the remote world as the terminals' user. */
export type RemoteRun = (script: string) => Promise<RemoteRunResult>

/** Result of probing one profile. */
export type BwrapProfileProbe = { ok: true } | { ok: false; error: string }

/** What the probe learned about bubblewrap in one world. */
export type BwrapProbe =
  | {
    usable: true
    /** Absolute path of bwrap in the remote world. */
    path: string
    /** `bwrap --version` output, e.g. `bubblewrap 0.8.0`. */
    version: string
    /** The workspace-write profile, probed per workspace root. */
    workspaces: Readonly<Record<string, BwrapProfileProbe>>
    /** The fence of each probed workspace root (fence.ts). */
    fences: Readonly<Record<string, FencePlan>>
    /** What a fence keeps fixed in this world (fence.ts `protectedPaths`). */
    protected: readonly string[]
    /** The user's HOME, whose dot-entries a fence keeps read-only (fence.ts `homeOf`). */
    home?: string | undefined
    /** The socket directories hidden in every profile ({@link MASKED_SOCKET_DIRECTORIES} the world has). */
    masked: readonly string[]
    /** Absolute path of nsenter(1) (util-linux), which joins a shared network namespace; undefined where the world has none. */
    nsenter?: string | undefined
  }
  | { usable: false; reason: string }

const LINE = /^(path|version|nsenter|ro|shared|ws) ?(.*)$/

/**
 * What the read-only profile runs in the probe: the interfaces of its network namespace, one
 * `if NAME` word pair each, from /proc/self/net/dev (proc(5): two header lines, then
 * `NAME: counters`; as the swarm world reads its task's, providers/swarm/task-facts.ts).
 */
const INTERFACES_SCRIPT = 'while IFS= read -r line; do case $line in *:*) set -- ${line%%:*}; echo "if $1" ;; esac; done </proc/self/net/dev'

/**
 * The probe script: find bwrap, read its version, run the read-only profile around a listing of
 * its network interfaces (exit 0 proves the namespaces, the network's among them, and every mount
 * of the profile work; the listing proves `lo` is all there is), and the workspace-write profile
 * for each root. Where the read-only profile fails, it runs once more without `--unshare-net`
 * (`shared`): that one working says the network namespace is what this world refuses. One line
 * per fact; errors are folded onto their line.
 */
export function bwrapProbeScript(workspaceRoots: readonly string[], fences: Readonly<Record<string, FencePlan>> = {}, masked: readonly string[] = []): string {
  const roArgs = bwrapProfileArgs({ mode: 'read-only', workspaceRoot: '/' }, {}, [], masked)
  const ro = shQuoteArgv(roArgs)
  const shared = shQuoteArgv(roArgs.filter(arg => !UNSHARE_NET.includes(arg)))
  const lines = [
    'p=$(command -v bwrap 2>/dev/null) || { echo "path"; exit 0; }',
    'case $p in /*) ;; *) echo "path"; exit 0 ;; esac',
    'echo "path $p"',
    'echo "version $("$p" --version 2>&1 | tr "\\n" " ")"',
    'echo "nsenter $(command -v nsenter 2>/dev/null)"',
    `out=$("$p" ${ro} -- /bin/sh -c ${shQuote(INTERFACES_SCRIPT)} 2>&1); s=$?; echo "ro $s $(printf %s "$out" | tr "\\n" " ")"`,
    `if [ "$s" -ne 0 ]; then out=$("$p" ${shared} -- true 2>&1); echo "shared $? $(printf %s "$out" | tr "\\n" " ")"; fi`,
  ]
  for (const root of workspaceRoots) {
    const fence = fences[root]
    const ws = shQuoteArgv(bwrapProfileArgs({ mode: 'workspace-write', workspaceRoot: root }, {}, fence !== undefined && 'args' in fence ? fence.args : [], masked))
    lines.push(`out=$("$p" ${ws} -- true 2>&1); echo "ws $? $(printf %s "$out" | tr "\\n" " ")"`)
  }
  return `${lines.join('\n')}\n`
}

/**
 * Parse the probe script's output.
 * @param workspaceRoots - the roots the script probed, in order.
 */
export function parseBwrapProbe(stdout: string, workspaceRoots: readonly string[], fence: { fences: Readonly<Record<string, FencePlan>>; protected: readonly string[]; home?: string | undefined; masked?: readonly string[] } = { fences: {}, protected: [] }): BwrapProbe {
  let path = ''
  let version = ''
  let nsenter = ''
  let ro: BwrapProfileProbe | undefined
  let shared: BwrapProfileProbe | undefined
  let interfaces: string[] = []
  const ws: BwrapProfileProbe[] = []
  for (const line of stdout.split('\n')) {
    const match = LINE.exec(line)
    if (match === null) continue
    const [, key, rest = ''] = match
    if (key === 'path') path = rest.trim()
    else if (key === 'version') version = rest.trim()
    else if (key === 'nsenter') nsenter = rest.trim()
    else {
      const status = /^(\d+) ?(.*)$/.exec(rest)
      const verdict: BwrapProfileProbe = status !== null && status[1] === '0' ? { ok: true } : { ok: false, error: (status?.[2] ?? rest).trim() || `exit status ${status?.[1] ?? 'unknown'}` }
      if (key === 'ro') {
        ro = verdict
        // What the read-only profile printed: `if NAME` for each interface of its namespace.
        interfaces = (status?.[2] ?? '').split(' ').flatMap((word, index, words) => word === 'if' && index + 1 < words.length ? [words[index + 1]!] : [])
      } else if (key === 'shared') shared = verdict
      else ws.push(verdict)
    }
  }
  if (path === '') return { usable: false, reason: 'bubblewrap (bwrap) is not installed on the remote host (not found in the login PATH)' }
  if (ro === undefined) return { usable: false, reason: `the bubblewrap probe did not report (output: ${JSON.stringify(stdout.slice(0, 300))})` }
  if (!ro.ok && shared?.ok === true) return { usable: false, reason: `bubblewrap at ${path} cannot give the sandbox a network namespace of its own (--unshare-net), which keeps the host's loopback and abstract sockets out of a confined program's reach; the confined modes never run without it: ${ro.error}` }
  if (!ro.ok) return { usable: false, reason: `bubblewrap at ${path} does not work here: ${ro.error}` }
  if (interfaces.length !== 1 || interfaces[0] !== 'lo') return { usable: false, reason: `bubblewrap at ${path} gave the sandbox a network namespace with ${interfaces.length === 0 ? 'no interface it could list' : `the interfaces ${interfaces.join(', ')}`}, not lo only; the confined modes never run with a network` }
  const workspaces: Record<string, BwrapProfileProbe> = {}
  workspaceRoots.forEach((root, index) => {
    workspaces[root] = ws[index] ?? { ok: false, error: 'not probed' }
  })
  return { usable: true, path, version, workspaces, fences: fence.fences, protected: fence.protected, ...(fence.home !== undefined ? { home: fence.home } : {}), masked: fence.masked ?? [], ...(nsenter.startsWith('/') ? { nsenter } : {}) }
}

/**
 * The fence of each workspace root (fence.ts): one listing script a root that holds protected
 * paths, none for the others.
 * @throws whatever `run` throws.
 */
async function planFences(run: RemoteRun, workspaceRoots: readonly string[], protectedAll: readonly string[], home: string | undefined): Promise<Record<string, FencePlan>> {
  const fences: Record<string, FencePlan> = {}
  for (const root of workspaceRoots) {
    const refused = rootRefusal(root, protectedAll, home)
    const inside = protectedAll.filter(path => isWithin(root, path))
    if (refused !== undefined) fences[root] = { refused }
    else if (inside.length === 0) fences[root] = { args: [], frozen: [] }
    else {
      const listed = await run(fenceListingScript(root, inside))
      fences[root] = listed.exitCode === 0
        ? fenceArgs(root, protectedAll, parseFenceListing(listed.stdout), home)
        : { refused: `the listing of what the fence keeps fixed in ${root} failed (exit ${listed.exitCode}): ${listed.stderr.trim().slice(0, 300)}` }
    }
  }
  return fences
}

/**
 * Probe bubblewrap once in a remote world.
 * @param run - runs a POSIX sh script remotely as the terminals' user.
 * @param workspaceRoots - roots to probe the workspace-write profile for (it binds the root, which must exist).
 * @param ambient - the login's ambient environment (HOME and PATH name what a fence keeps fixed).
 * @param uid - the world user's uid (its world-tool cache in /var/tmp is kept fixed too).
 * @returns the verdict (a script that ran but failed is an unusable verdict).
 * @throws whatever `run` throws (e.g. the world cannot be reached: nothing can run there anyway).
 */
export async function probeBwrap(run: RemoteRun, workspaceRoots: readonly string[] = [], ambient: Readonly<Record<string, string>> = {}, uid?: number): Promise<BwrapProbe> {
  // What the startup files name (startup-names.ts: two reads at most), then each protected path
  // by its name and by where it resolves (fence.ts): one run of readlink.
  const login = parseLoginPath((await run(loginPathScript())).stdout)
  const namedHome = homeOf(ambient)
  const startup = startupProtected(await startupNamedPaths(run, namedHome), namedHome, workspaceRoots)
  const named = [...new Set([...protectedPaths(login === '' ? ambient : { ...ambient, PATH: `${ambient.PATH ?? ''}:${login}` }, uid), ...startup])]
  const asked = namedHome === undefined ? named : [namedHome, ...named]
  const resolved = asked.length === 0 ? [] : await run(realPathsScript(asked)).then(result => result.exitCode === 0 ? parseRealPaths(result.stdout, asked.length) : [])
  const home = namedHome === undefined ? undefined : resolved[0] || namedHome
  const protectedAll = [...new Set([...named, ...resolved.slice(namedHome === undefined ? 0 : 1).filter(path => path.startsWith('/'))])]
  const fences = await planFences(run, workspaceRoots, protectedAll, home)
  // A check that did not answer masks them all: a missing one then fails the profile's probe,
  // loudly, where an unmasked one would have been reachable.
  const present = await run(maskedDirectoriesScript(home))
  const maskable = [...MASKED_SOCKET_DIRECTORIES, ...(home !== undefined ? [posix.join(home, '.ssh')] : [])]
  const masked = present.exitCode === 0 ? maskable.filter(dir => present.stdout.split('\n').includes(dir)) : maskable
  const result = await run(bwrapProbeScript(workspaceRoots, fences, masked))
  if (result.exitCode !== 0) return { usable: false, reason: `the bubblewrap probe failed (exit ${result.exitCode}): ${result.stderr.trim().slice(0, 300)}` }
  return parseBwrapProbe(result.stdout, workspaceRoots, { fences, protected: protectedAll, home, masked })
}

/** Construction options of {@link BubblewrapSandboxProvider}. */
export interface BubblewrapSandboxConfig {
  /** World description, e.g. `ssh agent@127.0.0.1:2222`. */
  where: string
  /** The one-time probe's verdict. */
  probe: BwrapProbe
  /** Workspace root reports use when none is given. */
  workspaceRoot: string
  /**
   * `--die-with-parent` in the profile (default true; see {@link BwrapLifetime}). Set false in
   * a Docker world: there bwrap's parent is `runc exec`, which exits as soon as the exec started.
   */
  dieWithParent?: boolean | undefined
}

/**
 * `ctx.sandbox` that confines with the remote world's bubblewrap, or fails closed. It also names
 * the program inside an argv it wrapped ({@link ProgramUnwrapper}), so a terminal publishes the
 * shell's pid rather than bwrap's (providers/remote/wrapped-program.ts).
 */
export class BubblewrapSandboxProvider extends SandboxProvider implements ReportingSandbox, ProgramUnwrapper, PrivateRootsSandbox, SharedNetworkSandbox {
  private readonly config: BubblewrapSandboxConfig
  /** The process whose network namespace confined programs join (shared-network.ts); undefined: each has its own. */
  joinedNetwork: number | undefined
  /** The profile's private mounts: `--tmpfs /tmp` and `--dev /dev` (sandbox/layout.ts). */
  readonly privateRoots: readonly string[] = Object.freeze(['/tmp', '/dev'])

  constructor(ctx: Context, config: BubblewrapSandboxConfig) {
    super(ctx)
    this.config = config
  }

  /**
   * The fence of a workspace-write root (fence.ts): the probed plan, or for a root the probe did
   * not see, an empty one when nothing a fence keeps fixed lies inside it, else a refusal.
   */
  private fence(workspaceRoot: string): FencePlan {
    const probe = this.config.probe
    if (!probe.usable) return { refused: probe.reason }
    const probed = probe.fences[workspaceRoot]
    if (probed !== undefined) return probed
    const refused = rootRefusal(workspaceRoot, probe.protected, probe.home)
    if (refused !== undefined) return { refused }
    const inside = probe.protected.filter(path => isWithin(workspaceRoot, path))
    if (inside.length === 0) return { args: [], frozen: [] }
    return { refused: `the workspace ${workspaceRoot} holds ${inside.join(', ')}, which programs outside the fence run or read, and was not probed when the world opened, so its fence is unknown; open the world with this workspace root` }
  }

  /** Why `mode` cannot be enforced for `workspaceRoot`, or undefined when it can. */
  private refusal(mode: ConfinedSandboxMode, workspaceRoot: string): string | undefined {
    const probe = this.config.probe
    if (!probe.usable) return probe.reason
    if (!workspaceRoot.startsWith('/')) return `the workspace root ${JSON.stringify(workspaceRoot)} is not absolute`
    if (mode === 'workspace-write') {
      const fence = this.fence(workspaceRoot)
      if ('refused' in fence) return fence.refused
      const workspace = probe.workspaces[workspaceRoot]
      if (workspace !== undefined && !workspace.ok) return `bubblewrap cannot bind the workspace ${workspaceRoot} read-write: ${workspace.error}`
    }
    return undefined
  }

  /**
   * Wrap `argv` in `bwrap PROFILE --`.
   * @throws SandboxUnavailableError when bubblewrap is absent or does not work in this world,
   *   or the probe showed it cannot bind this workspace.
   */
  confine(argv: readonly string[], policy: SandboxPolicy): ConfinedArgv {
    const refusal = this.refusal(policy.mode, policy.workspaceRoot)
    if (refusal !== undefined || !this.config.probe.usable) {
      throw new WorldSandboxUnavailableError(policy.mode, this.config.where, `${this.config.where}: ${refusal ?? 'bubblewrap is unusable'}`,
        'Make bubblewrap work there for this workspace (bwrap installed, unprivileged user namespaces allowed, a network namespace among them, the workspace present), or choose a workspace its fence can keep (the reason names what it cannot)')
    }
    const joined = this.joinedNetwork
    const nsenter = this.config.probe.nsenter
    const profile = [this.config.probe.path, ...bwrapProfileArgs(policy, { dieWithParent: this.config.dieWithParent }, policy.mode === 'workspace-write' ? this.fenceArgsOf(policy.workspaceRoot) : [], this.config.probe.masked, joined === undefined ? 'own' : 'joined'), '--', ...argv]
    return {
      argv: joined === undefined || nsenter === undefined ? profile : [...nsenterPrefix(nsenter, joined), ...profile],
      enforcement: 'full',
      denialSignatures: BWRAP_DENIAL_SIGNATURES,
      runnerFailureRules: BWRAP_RUNNER_FAILURE_RULES,
    }
  }

  /** The fence's bubblewrap arguments of a root {@link refusal} accepted. */
  private fenceArgsOf(workspaceRoot: string): readonly string[] {
    const fence = this.fence(workspaceRoot)
    return 'args' in fence ? fence.args : []
  }

  /** @inheritdoc */
  sharedNetwork(): SharedNetworkPlan | { refused: string } {
    const probe = this.config.probe
    if (!probe.usable) return { refused: probe.reason }
    const nsenter = probe.nsenter
    if (nsenter === undefined) return { refused: `${this.config.where} has no nsenter (util-linux), which puts the confined programs in the network namespace of the relay` }
    return {
      ownerArgv: argv => [probe.path, ...NETWORK_OWNER_BWRAP_ARGS, '--', ...argv],
      joinedArgv: (pid, argv) => [...nsenterPrefix(nsenter, pid), ...argv],
    }
  }

  /** @inheritdoc */
  joinNetwork(pid: number | undefined): void {
    if (pid !== undefined && 'refused' in this.sharedNetwork()) throw new Error(`${this.config.where}: confined programs cannot join a network namespace here`)
    this.joinedNetwork = pid
  }

  /**
   * The argv after the profile's `--` when `argv` runs this world's bwrap (the profile's own
   * arguments are never a bare `--`), also behind the nsenter prefix of a shared network
   * namespace, else undefined.
   */
  wrappedProgram(argv: readonly string[]): readonly string[] | undefined {
    const probe = this.config.probe
    if (probe.usable) {
      const joined = afterNsenter(probe.nsenter, argv)
      if (joined !== undefined) return this.wrappedProgram(joined)
    }
    if (!probe.usable || argv[0] !== probe.path) return undefined
    const separator = argv.indexOf('--')
    return separator > 0 && separator < argv.length - 1 ? argv.slice(separator + 1) : undefined
  }

  /** Which modes this world enforces and how. */
  report(workspaceRoot: string = this.config.workspaceRoot): WorldSandboxReport {
    const probe = this.config.probe
    const mechanism = probe.usable ? `bubblewrap on the remote host (${probe.version || 'version unknown'} at ${probe.path})` : 'bubblewrap on the remote host'
    const modes = SANDBOX_MODES.map((mode): SandboxModeReport => {
      if (mode === 'danger-full-access') {
        return { mode, available: true, enforcement: 'none', mechanism: 'none', facts: ['no sandbox: the shell runs unconfined as the login user'], gaps: [] }
      }
      const refusal = this.refusal(mode, workspaceRoot)
      if (refusal !== undefined) return { mode, available: false, enforcement: 'unavailable', mechanism, facts: [], gaps: [refusal] }
      const facts = [
        'everything read-only (--ro-bind / /)',
        'private ephemeral /tmp (--tmpfs /tmp), fresh /dev, own pid namespace and /proc',
        this.joinedNetwork === undefined
          ? 'network: lo only (--unshare-net, proven when the world opened): the host\'s loopback (its sshd, any service on 127.0.0.1) and abstract unix sockets are out of reach; each confined program has a loopback of its own'
          : `network: lo only, one namespace for every confined program and the world's network relay (pid ${this.joinedNetwork}, joined with nsenter): the host's loopback (its sshd, any service on 127.0.0.1) and abstract unix sockets are out of reach`,
        mode === 'workspace-write' ? `workspace ${workspaceRoot} read-write (--bind)` : `workspace ${workspaceRoot} read-only`,
      ]
      if (probe.usable && probe.masked.length > 0) facts.push(`the host's and the user's service sockets hidden (${probe.masked.map(dir => `--tmpfs ${dir}`).join(', ')}): the services outside the fence (databases, the container engine, systemd, D-Bus, an ssh ControlMaster) are out of reach there`)
      const fence = mode === 'workspace-write' ? this.fence(workspaceRoot) : undefined
      if (fence !== undefined && 'frozen' in fence && fence.frozen.length > 0) {
        const home = probe.usable && probe.home !== undefined && isWithin(workspaceRoot, probe.home) ? `every dot-entry of ${probe.home}, ` : ''
        facts.push(`kept fixed inside the workspace: what programs outside the fence run or read (${home}${probe.usable ? probe.protected.filter(path => isWithin(workspaceRoot, path)).join(', ') : ''}); no new name can be made directly in ${fence.frozen.join(', ')}`)
      }
      const probed = probe.usable ? probe.workspaces[workspaceRoot] : undefined
      if (mode === 'workspace-write' && probed === undefined) facts.push(`workspace ${workspaceRoot} not probed: bwrap fails the start if it does not exist`)
      return { mode, available: true, enforcement: 'full', mechanism, facts, gaps: [] }
    })
    return { world: this.config.where, workspaceRoot, modes }
  }
}

export default BubblewrapSandboxProvider
