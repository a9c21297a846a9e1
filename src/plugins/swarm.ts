/**
 * `dsh-remote-worlds/swarm`: the swarm world as a cordis plugin, mountable by the upstream
 * loader from a `cordis.patch.yml` entry. It provides `ctx.subprocess` (a
 * {@link SwarmSubprocessRuntime}): a one-replica service created from `image` AND the
 * composition's sandbox policy, placed by the swarm, whose task's container runs the Docker
 * world's mechanism on its node's engine (docs/swarm.md). Pair it with
 * `dsh-remote-worlds/swarm/sandbox` for `ctx.sandbox` in the same world.
 *
 * Disposal ends every process and terminal it started, removes the service and proves its
 * container gone on its node.
 * @module dsh-remote-worlds/plugins/swarm
 */
// First: fails at import, naming the required version, on a Node.js too old (node-version.ts).
import '../node-version.ts'
import type { Context } from '@deepseek-ai/cordis'
import type {} from '@deepseek-ai/dsh-sandbox-policy'
import z from '@deepseek-ai/schemastery'
import type { TerminalEmulatorSettings } from '../emulator/settings.ts'
import { SwarmSubprocessRuntime, type SwarmRuntimeConfig } from '../providers/swarm/swarm-runtime.ts'
import { defined } from './defined.ts'
import { TerminalSetting, terminalSetting } from './terminal-setting.ts'

/** Cordis plugin name. */
export const name = 'dsh-remote-worlds-swarm'

/** The sandbox policy decides what the service is created to enforce. */
export const inject = ['sandboxPolicy']

/** An engine endpoint: its address, and the TLS files (tcp://) or key (ssh://) it needs. */
export interface Endpoint {
  host: string
  tls?: { ca?: string; cert?: string; key?: string }
  identity?: string
}

/** Plugin config. */
export interface Config {
  /** A manager's engine: `unix:///PATH`, `tcp://HOST:PORT` (with tls) or `ssh://USER@HOST[:PORT]`. */
  manager: Endpoint
  /** Every node's engine (default: the manager's only). */
  nodes?: Endpoint[]
  /** The image (name or ID), loaded into every node. */
  image: string
  /** Exec user (`name`, `uid`, `uid:gid`). A confined mode needs a non-root one. */
  user?: string
  /** The workspace source on the node, mounted at the policy's workspace root. */
  workspace?: { bind?: string; volume?: string }
  /** Resource limits (defaults apply under confined modes). */
  limits?: { pidsLimit?: number; memoryBytes?: number; nanoCpus?: number; tmpBytes?: number }
  /** What a node must have free to take the task. */
  reservations?: { nanoCpus?: number; memoryBytes?: number }
  /** Placement constraints and spread preferences. */
  placement?: { constraints?: string[]; preferences?: string[] }
  /** `none` (default) or `host` (danger-full-access only). */
  network?: 'none' | 'host'
  /** How long the task may take to be placed and start (ms, default 30 000). */
  scheduleTimeoutMs?: number
  /** End what dead clients left (their sessions, their swarm worlds) when this one opens its world (default true). */
  reapOrphans?: boolean
  /** Each terminal's emulator. */
  terminal?: TerminalEmulatorSettings
}

const Endpoint: z<Endpoint> = z.object({
  host: z.string().required().description('unix:///PATH, tcp://HOST:PORT (with tls) or ssh://USER@HOST[:PORT].'),
  tls: z.object({ ca: z.string(), cert: z.string(), key: z.string() }).description('tcp:// only: PEM files of the CA, the client certificate and key.'),
  identity: z.string().description('ssh:// only: the private key file.'),
})

/** Schema of {@link Config}, validated by cordis (and the loader) before {@link apply}. */
export const Config: z<Config> = z.object({
  manager: Endpoint.required().description('A swarm manager\'s engine: services and tasks are made and read there.'),
  nodes: z.array(Endpoint).description('Every node\'s engine, matched to its node by the NodeID it reports (default: the manager\'s only).'),
  image: z.string().required().description('The image (name or ID); every node must hold it, nothing is pulled.'),
  user: z.string().description('Exec user (name, uid or uid:gid). A confined mode needs a non-root user.'),
  workspace: z.object({
    bind: z.string().description('A folder on the node mounted at the workspace root.'),
    volume: z.string().description('A named volume on the node mounted at the workspace root.'),
  }).description('The workspace source.'),
  limits: z.object({ pidsLimit: z.natural(), memoryBytes: z.natural(), nanoCpus: z.natural(), tmpBytes: z.natural() }).description('Resource limits.'),
  reservations: z.object({ nanoCpus: z.natural(), memoryBytes: z.natural() }).description('What a node must have free to take the task.'),
  placement: z.object({ constraints: z.array(z.string()), preferences: z.array(z.string()) }).description('Constraints (node.labels.zone==a) and preferences (spread=node.labels.zone).'),
  network: z.union(['none', 'host'] as const).description('none (default) or host (danger-full-access only).'),
  scheduleTimeoutMs: z.natural().description('How long the task may take to be placed and start (ms, default 30000).'),
  reapOrphans: z.boolean().description('End what dead clients left when this one opens its world (default true).'),
  terminal: TerminalSetting,
})

/** An endpoint as the runtime takes it (the schema turns absent objects into `{}`). */
function endpoint(value: Endpoint): SwarmRuntimeConfig['manager'] {
  const tls = value.tls === undefined ? {} : defined(value.tls)
  return {
    host: value.host,
    ...(tls.ca !== undefined && tls.cert !== undefined && tls.key !== undefined ? { tls: { ca: tls.ca, cert: tls.cert, key: tls.key } } : {}),
    ...(value.identity !== undefined && value.identity !== null ? { identity: value.identity } : {}),
  }
}

/**
 * Register the swarm runtime as `ctx.subprocess`, its service created from the composition's
 * sandbox policy (default mode, workspace root).
 * @throws InvalidArgumentError (from the runtime) for a config it cannot use.
 */
export async function apply(ctx: Context, config: Config): Promise<void> {
  const { manager, nodes, workspace, limits, reservations, placement, terminal, ...rest } = defined(config)
  const source = workspace?.bind !== undefined ? { bind: workspace.bind } : workspace?.volume !== undefined ? { volume: workspace.volume } : undefined
  const limitValues = limits === undefined ? {} : defined(limits)
  const reservationValues = reservations === undefined ? {} : defined(reservations)
  const placementValues = placement === undefined ? {} : defined(placement)
  const runtimeConfig: SwarmRuntimeConfig = {
    ...rest,
    manager: endpoint(manager),
    ...(nodes !== undefined && nodes.length > 0 ? { nodes: nodes.map(endpoint) } : {}),
    ...terminalSetting(terminal),
    ...(source !== undefined ? { workspace: source } : {}),
    ...(Object.keys(limitValues).length > 0 ? { limits: limitValues } : {}),
    ...(Object.keys(reservationValues).length > 0 ? { reservations: reservationValues } : {}),
    ...(Object.keys(placementValues).length > 0 ? { placement: placementValues } : {}),
    policy: { mode: ctx.sandboxPolicy.defaultMode, workspaceRoot: ctx.sandboxPolicy.workspaceRoot },
  }
  await ctx.plugin(SwarmSubprocessRuntime, runtimeConfig)
}
