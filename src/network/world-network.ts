/**
 * A world's network setting (`network: 'none' | 'allow' | 'full'`, this package's own: DSH's
 * sandbox policy has no network vocabulary at 0.1.0-rc.8), made real.
 *
 * - `'none'` (the default of the confined modes): the world has `lo` only, as a managed
 *   container (NetworkMode none) and a swarm task are made; nothing is started.
 * - `'allow'`: the same fence, plus a way out that this client controls. The world tool
 *   `dsh-relay` (world/relay-net/) runs in the world as its user and listens on the world's
 *   127.0.0.1; each connection to it is carried over the world's own transport to this
 *   client's egress gateway (egress-gateway.ts), which judges it by the rules (deny wins),
 *   resolves names itself and dials from this machine. Every program the world starts after
 *   the mount gets `HTTP_PROXY`/`HTTPS_PROXY` (and the lower-case names curl reads) naming that
 *   port, and `NO_PROXY` for the world's own loopback. The world never resolves a name.
 * - `'full'` (danger-full-access only): the world's own network, as it is; nothing is started.
 *
 * Over SSH (bubblewrap gives each confined program a network namespace of its own), the relay is
 * started first in a namespace of its own, and every confined program after it joins that one
 * (sandbox/shared-network.ts), so they all reach its proxy port and a forwarded port reaches the
 * server any of them started; after a cut of the transport the relay is started again in the
 * same namespace, joined through a process still in it (shared-namespace.ts).
 *
 * A setting the world cannot enforce is refused, never dropped: `'allow'` or `'none'` in
 * danger-full-access (no fence to hold the network), `'full'` in a confined mode, and
 * `'allow'` in a world whose network is not `lo` only (an attached container with a network)
 * or whose programs cannot share the relay's namespace (an SSH host without nsenter).
 * @module dsh-remote-worlds/network/world-network
 */
import type { Context } from '@deepseek-ai/cordis'
import { open } from 'node:fs/promises'
import { setTimeout as delay } from 'node:timers/promises'
import { InvalidArgumentError, WorldClosedError } from '../providers/remote/errors.ts'
import { SESSION_TAG_VARIABLE } from '../providers/remote/ownership.ts'
import { shQuote } from '../providers/remote/quote.ts'
import { type WorldOwner, worldOwnerOf } from '../providers/remote/world-owner.ts'
import { forgetWorldTool, installWorldTool } from '../providers/remote/world-tools/install.ts'
import { saysUnverifiedTool, worldToolCommand } from '../providers/remote/world-tools/launch.ts'
import { sandboxReportOf } from '../sandbox/companion.ts'
import { type SharedNetworkPlan, type SharedNetworkSandbox, isSharedNetworkSandbox } from '../sandbox/shared-network.ts'
import { type EgressForwardSpec, impliedAllowRule, parseEgressForward } from './egress-forward.ts'
import { EgressGateway } from './egress-gateway.ts'
import { EgressLog } from './egress-log.ts'
import { type ForwardSpec, type PortForward, parseForwardSpec, startPortForward } from './port-forward.ts'
import { RelayChannel, type RelayPeer, type RelayStream } from './relay/relay-channel.ts'
import { EgressResolver, parseResolveOverride } from './resolve.ts'
import { findNamespaceMember } from './shared-namespace.ts'
import { type EgressPolicy, LivePolicy, type NetworkMode, parsePolicy } from './rules.ts'

/** The network setting of a world (the CLI's `--network`, `--allow`, `--deny`, `--resolve`, `--egress-log`). */
export interface WorldNetworkOptions {
  /** Default: `'allow'` when `allow` names rules, else `'none'` in a confined mode and `'full'` in danger-full-access. */
  network?: NetworkMode | undefined
  /** Rules (rules.ts `parseRule`): `HOST`, `*.SUFFIX`, `CIDR`, each with an optional `:PORT`. */
  allow?: readonly string[] | undefined
  /** Rules that deny, whatever allows. */
  deny?: readonly string[] | undefined
  /** `NAME:PORT:ADDR` answers of this client's resolver, as curl's `--resolve`. */
  resolve?: readonly string[] | undefined
  /** A file each decision is appended to, as one JSON line (egress-log.ts). */
  egressLog?: string | undefined
  /**
   * Raw egress forwards, `[WORLD_PORT:]HOST:PORT` each (egress-forward.ts): a world port whose
   * connections reach HOST:PORT. Each allows its HOST:PORT, and implies `'allow'`.
   */
  egress?: readonly string[] | undefined
  /** Ports into the world, `[HOST_ADDR:]HOST_PORT:WORLD_PORT` each or its parsed form (port-forward.ts), opened at the mount. */
  forward?: readonly (string | ForwardSpec)[] | undefined
}

/** A mounted network setting. */
export interface WorldNetwork {
  /** The policy in force now. */
  readonly policy: EgressPolicy
  /** The world's proxy port (on its 127.0.0.1), under `'allow'`; else undefined. */
  readonly proxyPort: number | undefined
  /** The raw egress forwards listening on the world's 127.0.0.1. */
  readonly egress: readonly EgressForwardSpec[]
  /**
   * Change the rules of a live world: new connections are judged by them at once, open ones
   * keep going. The mode cannot change (the world was made for it); the rules the `egress`
   * forwards imply stay.
   * @throws InvalidEgressRuleError for a bad rule; InvalidArgumentError for another mode.
   */
  setRules(rules: { allow?: readonly string[]; deny?: readonly string[] }): void
  /** Decisions and bytes so far. */
  counts(): ReturnType<EgressLog['counts']>
  /**
   * Forward a port of this machine into the world (port-forward.ts): `[HOST_ADDR:]HOST_PORT:WORLD_PORT`
   * or its parsed form; the host side binds 127.0.0.1 unless it names another address. Needs no
   * network in the world: it works whatever `network` is.
   * @throws InvalidForwardError; the host listener's error (EADDRINUSE); the relay's start errors.
   */
  forward(spec: string | ForwardSpec): Promise<PortForward>
  /** The forwards open now, in the order they were made. */
  forwards(): readonly PortForward[]
  /** Stop the forwards and the relay (its stdin's EOF ends it in the world), and close the log. Idempotent. */
  close(): Promise<void>
}

/** The variables that point a world's programs at the proxy on its port. */
export function proxyVariables(port: number): Record<string, string> {
  const proxy = `http://127.0.0.1:${port}`
  const local = 'localhost,127.0.0.1,::1'
  return { HTTP_PROXY: proxy, HTTPS_PROXY: proxy, http_proxy: proxy, https_proxy: proxy, NO_PROXY: local, no_proxy: local }
}

/**
 * Mount the network setting on a composed world (after the runtime and its sandbox, before
 * the first terminal): under `'allow'`, start the relay and its proxy port, and give every
 * program the world starts from now on the proxy variables.
 * @param mode - the world's sandbox mode.
 * @throws InvalidArgumentError for a setting the world cannot enforce (see the module comment);
 *   InvalidEgressRuleError for a bad rule or `--resolve`; the world's open errors;
 *   WorldToolUnavailableError when the relay cannot be copied in.
 */
export async function mountWorldNetwork(ctx: Context, options: WorldNetworkOptions, mode: 'read-only' | 'workspace-write' | 'danger-full-access'): Promise<WorldNetwork> {
  const confined = mode !== 'danger-full-access'
  const egress = (options.egress ?? []).map(parseEgressForward)
  if (egress.length > 0 && options.network !== undefined && options.network !== 'allow') throw new InvalidArgumentError(`--egress needs network 'allow' (each one opens its HOST:PORT to the world through this client), and the network is '${options.network}'`)
  const ports = egress.map(spec => spec.worldPort)
  const twice = ports.find((port, index) => ports.indexOf(port) !== index)
  if (twice !== undefined) throw new InvalidArgumentError(`two --egress forwards listen on the world's port ${twice}; give each its own (--egress WORLD_PORT:HOST:PORT)`)
  const allow = [...options.allow ?? [], ...egress.map(impliedAllowRule)]
  const policy = parsePolicy({ network: options.network ?? (allow.length > 0 ? 'allow' : confined ? 'none' : 'full'), allow, deny: [...options.deny ?? []] })
  if (!confined && policy.network !== 'full') throw new InvalidArgumentError(`network '${policy.network}' needs a confined sandbox mode: danger-full-access has no fence to hold the network (use read-only or workspace-write)`)
  // Rules that judge nothing, and a log of nothing, are refused rather than dropped in silence.
  if (!confined && ((options.deny ?? []).length > 0 || options.egressLog !== undefined || (options.resolve ?? []).length > 0)) throw new InvalidArgumentError('--deny, --resolve and --egress-log need a confined sandbox mode: in danger-full-access nothing goes through this client to be judged or logged (use read-only or workspace-write with --network allow)')
  const overrides = (options.resolve ?? []).map(parseResolveOverride)
  const live = new LivePolicy(policy)
  if (options.egressLog !== undefined) await provenWritable(options.egressLog)
  const log = new EgressLog(options.egressLog)

  const owner = worldOwnerOf(ctx.get('subprocess'))
  const report = sandboxReportOf(ctx)
  const forwardSpecs = (options.forward ?? []).map(parseForwardSpec)
  // A container of its own network (an attached one): its confined programs reach it, so the
  // confined default 'none' does not hold there; only an explicit 'full' accepts it.
  const ownNetwork = confined && report?.limits !== undefined && report.limits.networkMode !== 'none' ? report.limits.networkMode ?? 'default' : undefined
  const where = owner?.describe() ?? 'this world'
  if (ownNetwork !== undefined && policy.network === 'none') throw new InvalidArgumentError(`network 'none' cannot be held in ${where}: it has a network of its own (NetworkMode ${ownNetwork}), which its confined programs reach; attach a container with NetworkMode none (or let this package create one), or give --network full to accept the container's own network`)
  if (confined && policy.network === 'full' && ownNetwork === undefined) throw new InvalidArgumentError(`network 'full' in a ${mode} world is only the network a container already has; ${where} keeps lo only (use --network allow with --allow rules)`)
  // A fence without a container (bubblewrap over SSH) gives each confined program a network
  // namespace of its own: the relay must make one they all join, before the first of them starts.
  const sandbox = ctx.get('sandbox') as unknown
  const perProgram = confined && report !== undefined && report.limits === undefined
  const sharing = perProgram && isSharedNetworkSandbox(sandbox) ? sandbox : undefined
  const plan = sharing?.sharedNetwork()
  const shared = sharing !== undefined && plan !== undefined && !('refused' in plan) && (policy.network === 'allow' || forwardSpecs.length > 0) ? { sandbox: sharing, plan } : undefined
  const unforwardable = perProgram && shared === undefined
    ? `${owner?.describe() ?? 'this world'} confines each program in a network namespace of its own (bubblewrap --unshare-net)${plan !== undefined && 'refused' in plan ? ` and ${plan.refused}` : ''}, so a port carried from this machine reaches none of them; name the ports when the world opens (--forward), or use danger-full-access`
    : undefined
  const relay = owner === undefined ? undefined : new WorldRelay(owner, unforwardable, shared)
  if (shared !== undefined) await relay?.channel()
  if (policy.network !== 'allow') return withForwards(networkOf(live, log, undefined, [], relay), forwardSpecs)
  if (owner === undefined || relay === undefined) throw new InvalidArgumentError('network \'allow\' needs one of this package\'s runtimes (Docker, swarm, SSH)')
  if (perProgram && shared === undefined) throw new InvalidArgumentError(`network 'allow' cannot be carried into ${owner.describe()}: ${plan !== undefined && 'refused' in plan ? plan.refused : 'its sandbox cannot put its confined programs in one network namespace'}; its confined programs keep lo only (network 'none')`)
  const networkMode = report?.limits?.networkMode
  if (shared === undefined && networkMode !== 'none') throw new InvalidArgumentError(`network 'allow' needs a world with lo only; ${owner.describe()} has ${networkMode === undefined || networkMode === null ? 'a network this package cannot see the fence of' : `NetworkMode ${networkMode}`} (let this package create the container, or attach to one with NetworkMode none)`)
  await relay.channel()
  // Described once the world is open (a managed container has its id by then).
  const gateway = new EgressGateway({ world: owner.describe(), policy: live, resolver: new EgressResolver(overrides), log })
  const port = await relay.serve('127.0.0.1', 0, stream => gateway.serve(stream, () => stream.origin))
  for (const spec of egress) await relay.serve('127.0.0.1', spec.worldPort, stream => gateway.serveForward(stream, spec.host, spec.port, () => stream.origin))
  owner.setWorldVariables(proxyVariables(port))
  return withForwards(networkOf(live, log, port, egress, relay), forwardSpecs)
}

/**
 * Open (create 0600, or append to) the egress log once before the world starts, so a path it
 * cannot write fails the mount instead of dropping every record in silence.
 * @throws InvalidArgumentError naming the file and why.
 */
async function provenWritable(file: string): Promise<void> {
  try {
    await (await open(file, 'a', 0o600)).close()
  } catch (error) {
    throw new InvalidArgumentError(`cannot write the egress log ${file}: ${(error as Error).message}`)
  }
}

/** `network` with `specs` forwarded; closed again when one cannot be. */
async function withForwards(network: WorldNetwork, specs: readonly ForwardSpec[]): Promise<WorldNetwork> {
  try {
    for (const spec of specs) await network.forward(spec)
  } catch (error) {
    await network.close()
    throw error
  }
  return network
}

/**
 * The world's relay: started on first need, and started again on the next need after it
 * ended (a restarted container, a transport that was cut), with its listeners listening again
 * on the ports they had, so the proxy variables programs were given stay true.
 */
class WorldRelay {
  private current: Promise<RelayChannel> | undefined
  private readonly listeners: { host: string; port: number; onConnection: (stream: RelayStream, peer: RelayPeer) => void }[] = []
  private closed = false
  /** The namespaces of the last relay that ran in a shared namespace (its hello), to start the next one in. */
  private namespace: { netns: string; userns: string } | undefined

  /**
   * @param unforwardable - why ports cannot be carried into this world, when they cannot.
   * @param shared - where confined programs each have a network namespace of their own: the
   *   sandbox that puts them in the relay's instead (sandbox/shared-network.ts).
   */
  constructor(private readonly owner: WorldOwner, readonly unforwardable?: string | undefined, private readonly shared?: { sandbox: SharedNetworkSandbox; plan: SharedNetworkPlan } | undefined) {}

  /**
   * The live channel, started (or started again) when there is none.
   * @throws WorldClosedError after close; the world's and the relay's start errors.
   */
  channel(): Promise<RelayChannel> {
    if (this.closed) return Promise.reject(new WorldClosedError('the world\'s network was closed'))
    if (this.current === undefined) {
      const started = this.start()
      this.current = started
      started.then(channel => channel.closed.then(() => { if (this.current === started) this.current = undefined }), () => { if (this.current === started) this.current = undefined })
    }
    return this.current
  }

  /**
   * Listen on the world's HOST:PORT for as long as the relay lives, and again on the same port
   * in each relay started after it.
   * @returns the port (chosen by the world when PORT is 0).
   */
  async serve(host: string, port: number, onConnection: (stream: RelayStream, peer: RelayPeer) => void): Promise<number> {
    const listener = await (await this.channel()).listen(host, port, onConnection)
    this.listeners.push({ host, port: listener.port, onConnection })
    return listener.port
  }

  /**
   * Where the next relay starts: in a shared world, in the namespace of the last one when a
   * process is still in it (a confined program's bwrap), else in a new one; elsewhere as it is.
   */
  private async placement(): Promise<((argv: readonly string[]) => readonly string[]) | undefined> {
    if (this.shared === undefined) return undefined
    const { plan } = this.shared
    const member = this.namespace === undefined ? undefined : await findNamespaceMember(this.owner, this.namespace)
    return member === undefined ? argv => plan.ownerArgv(argv) : argv => plan.joinedArgv(member, argv)
  }

  /** Stop the relay (its stdin's EOF ends it in the world). Idempotent. */
  async close(): Promise<void> {
    this.closed = true
    const current = this.current
    this.current = undefined
    const channel = await current?.catch(() => undefined)
    channel?.close()
    if (channel !== undefined) await Promise.race([channel.closed, delay(RELAY_CLOSE_BOUND_MS)])
  }

  private async start(): Promise<RelayChannel> {
    const channel = await startRelay(this.owner, await this.placement())
    if (this.shared !== undefined) {
      this.namespace = { netns: channel.info.netns, userns: channel.info.userns }
      this.shared.sandbox.joinNetwork(channel.info.pid)
      // Until the next relay: programs get a namespace of their own (lo only), never a dead pid's.
      channel.closed.then(() => { if (this.shared?.sandbox.joinedNetwork === channel.info.pid) this.shared.sandbox.joinNetwork(undefined) })
    }
    // Listeners of an earlier relay listen again where they were.
    for (const { host, port, onConnection } of this.listeners) await channel.listen(host, port, onConnection)
    // Started again at the next need once it ends unasked: a proxy port without a relay refuses
    // its connections, so a lost relay is replaced at once while the world has listeners.
    channel.closed.then(() => { if (!this.closed && this.listeners.length > 0) setTimeout(() => { this.channel().catch(() => undefined) }, RELAY_RESTART_DELAY_MS) })
    return channel
  }
}

/** How long closing waits for the relay's channel to end (ms). */
const RELAY_CLOSE_BOUND_MS = 5_000

/** How long after a relay ended unasked the next one starts, when listeners need it (ms). */
const RELAY_RESTART_DELAY_MS = 500

/**
 * Start the relay in the world (copied in by content hash, verified at its start as every world tool).
 * @param wrap - runs the verified program in a namespace (shared-network.ts), when it must.
 */
async function startRelay(owner: WorldOwner, wrap?: ((argv: readonly string[]) => readonly string[]) | undefined): Promise<RelayChannel> {
  for (let attempt = 1; ; attempt += 1) {
    const copy = await installWorldTool(owner, 'dsh-relay')
    // Tagged as a session of this client: should it outlive its client (its stdin's EOF ends it), the next client's reaper ends it.
    const script = `${SESSION_TAG_VARIABLE}=${shQuote(owner.newTag())}; export ${SESSION_TAG_VARIABLE}\n${worldToolCommand(copy, [], { wrap })}`
    const transport = await owner.openProcess(script)
    let stderr = ''
    transport.stderr.on('data', (chunk: Buffer) => { if (stderr.length < 2_000) stderr += chunk.toString('utf8') })
    if (transport.stdin === undefined) {
      transport.close()
      throw new Error(`${owner.describe()}: the relay's process has no stdin`)
    }
    try {
      return await RelayChannel.open({ stdin: transport.stdin, stdout: transport.stdout, close: () => transport.close() }, owner.describe(), { stderr: () => stderr })
    } catch (error) {
      // A copy refused at its start (planted, or gone): copied in anew, once.
      if (attempt >= 2 || !saysUnverifiedTool(stderr)) throw error
      forgetWorldTool(owner, 'dsh-relay')
    }
  }
}

function networkOf(live: LivePolicy, log: EgressLog, proxyPort: number | undefined, egress: readonly EgressForwardSpec[], relay: WorldRelay | undefined): WorldNetwork {
  let closing: Promise<void> | undefined
  const forwards = new Set<PortForward>()
  return {
    get policy() { return live.get() },
    proxyPort,
    egress,
    setRules: rules => {
      const current = live.get()
      // The rules an --egress forward implies stay while the forward does.
      const allow = rules.allow === undefined ? current.allow.map(rule => rule.text) : [...rules.allow, ...egress.map(impliedAllowRule)]
      live.set(parsePolicy({ network: current.network, allow, deny: [...rules.deny ?? current.deny.map(rule => rule.text)] }))
    },
    counts: () => log.counts(),
    forwards: () => [...forwards],
    forward: async spec => {
      if (relay === undefined) throw new InvalidArgumentError('ports into the world need one of this package\'s runtimes (Docker, swarm, SSH)')
      if (relay.unforwardable !== undefined) throw new InvalidArgumentError(relay.unforwardable)
      if (closing !== undefined) throw new WorldClosedError('the world\'s network was closed')
      const forward = await startPortForward(typeof spec === 'string' ? parseForwardSpec(spec) : spec, async port => (await relay.channel()).connect('127.0.0.1', port))
      forwards.add(forward)
      return forward
    },
    close: () => closing ??= (async () => {
      await Promise.allSettled([...forwards].map(forward => forward.close()))
      await relay?.close()
    })().finally(() => log.close()),
  }
}
