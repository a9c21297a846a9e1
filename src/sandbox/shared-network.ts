/**
 * One network namespace for all of a world's confined programs, where the fence gives each
 * program a namespace of its own (bubblewrap over SSH: every bwrap `--unshare-net`).
 *
 * A world whose programs should reach a network relay (network 'allow', ports into the world)
 * needs them in the relay's namespace. bubblewrap cannot join a namespace (it has no `--netns`),
 * so the relay is started first in a namespace of its own (bwrap `--unshare-net`, without `--dev`:
 * bwrap then makes one user namespace, which owns the network namespace; with `--dev` it nests a
 * second for the devpts mount, and a process of the inner one cannot join the outer's network:
 * setns(2) needs CAP_SYS_ADMIN in the namespace's owner), and every confined program after it is
 * started through `nsenter --user --net --target=RELAY` (util-linux) into that namespace before
 * its own bwrap, which then leaves the network as it is. The namespace stays `lo` only: bwrap
 * brings `lo` up and nothing adds an interface.
 * @module dsh-remote-worlds/sandbox/shared-network
 */

/** How a sandbox puts programs in one shared network namespace, where it can. */
export interface SharedNetworkPlan {
  /** `argv` run in a new network namespace of its own (`lo` only) that later programs join: the relay's start. */
  ownerArgv(argv: readonly string[]): readonly string[]
  /** `argv` run in the network namespace (and its owning user namespace) of the process `pid`. */
  joinedArgv(pid: number, argv: readonly string[]): readonly string[]
}

/** A sandbox whose confined programs can be put in one network namespace (see the module comment). */
export interface SharedNetworkSandbox {
  /** The plan, or why this world cannot share one namespace among its confined programs. */
  sharedNetwork(): SharedNetworkPlan | { refused: string }
  /**
   * From now on every confined program joins the network namespace of the process `pid` (the
   * relay); undefined: each gets a namespace of its own again (lo only, reaching nothing).
   */
  joinNetwork(pid: number | undefined): void
  /** The pid whose namespace confined programs join now, if any. */
  readonly joinedNetwork: number | undefined
}

/** True when `sandbox` can share one network namespace among its confined programs. */
export function isSharedNetworkSandbox(sandbox: unknown): sandbox is SharedNetworkSandbox {
  return typeof sandbox === 'object' && sandbox !== null && typeof (sandbox as Partial<SharedNetworkSandbox>).sharedNetwork === 'function' && typeof (sandbox as Partial<SharedNetworkSandbox>).joinNetwork === 'function'
}

/**
 * The bwrap arguments of the namespace's owner: everything read-only, a network namespace of its
 * own, ended with its parent. No `--dev` and no `--proc` (see the module comment).
 */
export const NETWORK_OWNER_BWRAP_ARGS: readonly string[] = Object.freeze(['--ro-bind', '/', '/', '--unshare-net', '--die-with-parent'])

/**
 * The argv prefix that runs a program in the user and network namespaces of `pid` (nsenter(1)):
 * `--preserve-credentials` keeps the caller's uid and gids (the namespace maps the user to itself).
 * @throws RangeError for a pid that is not a positive integer (never -1 or 0: nothing else is meant).
 */
export function nsenterPrefix(nsenter: string, pid: number): string[] {
  if (!Number.isInteger(pid) || pid <= 0) throw new RangeError(`a network namespace is joined through a positive pid, got ${pid}`)
  return [nsenter, '--preserve-credentials', '--user', '--net', `--target=${pid}`, '--']
}

/**
 * The argv after {@link nsenterPrefix} when `argv` starts with it (`nsenter` at `nsenter`), else undefined.
 */
export function afterNsenter(nsenter: string | undefined, argv: readonly string[]): readonly string[] | undefined {
  if (nsenter === undefined || argv[0] !== nsenter || argv[1] !== '--preserve-credentials') return undefined
  const separator = argv.indexOf('--')
  return separator > 0 && separator < argv.length - 1 ? argv.slice(separator + 1) : undefined
}
