/**
 * The swarm runtime's configuration schema, below the runtime and its sandbox companion.
 * @module dsh-remote-worlds/providers/swarm/swarm-config
 */
import { z } from 'zod'
import { TerminalEmulatorSettings } from '../../emulator/settings.ts'
import { LocaleSettingSchema } from '../remote/environment.ts'
import { LimitsSetting, PolicySetting, WorkspaceSourceSetting } from '../docker/docker-config.ts'

const positiveInt = z.number().int().positive()

/** An engine endpoint (endpoints.ts `EngineEndpoint`), or just its address. */
const Endpoint = z.union([
  z.string().min(1).transform(host => ({ host })),
  z.object({
    host: z.string().min(1),
    tls: z.object({ ca: z.string().min(1), cert: z.string().min(1), key: z.string().min(1) }).strict().optional(),
    identity: z.string().min(1).optional(),
  }).strict(),
])

/** Configuration of the SwarmSubprocessRuntime (src/providers/swarm); validated with zod at construction. */
export const SwarmRuntimeConfig = z.object({
  /**
   * A manager's engine (`unix:///PATH`, `tcp://HOST:PORT` with `tls: { ca, cert, key }`, or
   * `ssh://USER@HOST[:PORT]` with `identity`): services and tasks are made and read there.
   */
  manager: Endpoint,
  /**
   * Every node's engine, in the same forms (the manager's may be listed too; default: the
   * manager's only). Each is matched to its swarm node by the NodeID its engine reports; a node
   * with no answering endpoint here is left out of the placement (`node.id!=`).
   */
  nodes: z.array(Endpoint).optional(),
  /** The image, by name or ID; a name is resolved to its ID on the manager's engine, and every node must hold that ID (nothing is pulled). */
  image: z.string().min(1),
  /** Exec user (`name`, `uid`, `uid:gid`); default: the service's user. */
  user: z.string().min(1).optional(),
  /** As the Docker runtime's `locale` (providers/docker/docker-config.ts). */
  locale: LocaleSettingSchema.optional(),
  /** As the Docker runtime's `terminal`. */
  terminal: TerminalEmulatorSettings.optional(),
  /** Reply bound of each control-channel request, in ms (default 10 000). */
  controlTimeoutMs: positiveInt.optional(),
  /** The sandbox policy the service is created from (sandbox/docker-policy.ts, as a managed container's); openWorld sets it. */
  policy: PolicySetting.optional(),
  /** The workspace source mounted at `policy.workspaceRoot`: a folder on the node (bind) or a named volume there. */
  workspace: WorkspaceSourceSetting.optional(),
  /** Resource limits (defaults: DEFAULT_DOCKER_LIMITS under confined modes). */
  limits: LimitsSetting.optional(),
  /** What a node must have free to take the task (the scheduler's Reservations). */
  reservations: z.object({ nanoCpus: positiveInt, memoryBytes: positiveInt }).partial().strict().optional(),
  /** Placement: constraints (`node.labels.zone==a`) and spread preferences (`spread=node.labels.zone`). */
  placement: z.object({ constraints: z.array(z.string().min(1)), preferences: z.array(z.string().min(1)) }).partial().strict().optional(),
  /** `none` (default: no network, proven in the task) or `host` (the node's network; danger-full-access only). */
  network: z.enum(['none', 'host']).optional(),
  /** How long the task may take to be placed and start before the open fails (ms, default 30 000). */
  scheduleTimeoutMs: positiveInt.optional(),
  /** The node's keepalive: probe interval (ms, default 1000) and unanswered probes tolerated (default 3). */
  keepalive: z.object({ intervalMs: positiveInt, countMax: positiveInt }).strict().optional(),
  /**
   * When the world opens: end what gone clients left in it (their sessions) and remove swarm
   * worlds nobody holds (reap.ts). Default true; off lists them only (`doctor`).
   */
  reapOrphans: z.boolean().optional(),
}).strict()

/** Input shape of {@link SwarmRuntimeConfig}. */
export type SwarmRuntimeConfig = z.input<typeof SwarmRuntimeConfig>
