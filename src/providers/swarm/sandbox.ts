/**
 * The swarm runtime's sandbox companion: the service is created FROM the policy (service-spec.ts)
 * and its task's container is judged as any container is (sandbox/docker-inspect.ts, through
 * {@link DockerSandboxProvider}), plus what the service could not express and the task had to
 * prove (task-facts.ts). A confined mode is refused, with the reason, unless the task proved both:
 * - no-new-privileges: `NoNewPrivs: 1` in a process of the task (the node's dockerd
 *   --no-new-privileges; inspect does not show it);
 * - network none: the task's network namespace has `lo` only (no Networks, on a node without a
 *   default bridge: dockerd --bridge=none).
 * The world's scratch `/tmp` is a named volume of the local driver of type tmpfs (a service's
 * tmpfs mounts are noexec at 1.41); the node's engine confirmed that, so the judge sees it as
 * the private tmpfs it is.
 * @module dsh-remote-worlds/providers/swarm/sandbox
 */
import type { Context } from '@deepseek-ai/cordis'
import type { ConfinedSandboxMode } from '@deepseek-ai/dsh-sandbox'
import type {} from '@deepseek-ai/dsh-sandbox-policy'
import type Docker from 'dockerode'
import { InvalidArgumentError } from '../remote/errors.ts'
import { provideSandbox, type SandboxCompanion } from '../../sandbox/companion.ts'
import { type DockerModeAssessment, NETWORK_GAP_PREFIX } from '../../sandbox/docker-inspect.ts'
import { DockerSandboxProvider, type DockerSandboxProviderConfig } from '../../sandbox/docker-provider.ts'
import type { WorldSandboxReport } from '../../sandbox/report.ts'
import type { DockerWorld } from '../docker/docker-world.ts'
import type { SwarmRuntimeConfig } from './swarm-config.ts'
import type { TaskFacts } from './task-facts.ts'

/** What the swarm runtime's confined modes need that a 1.41 service cannot ask for, as reasons (empty: all proven). */
export function unprovenConfinement(facts: TaskFacts): string[] {
  const reasons: string[] = []
  if (!facts.noNewPrivileges) reasons.push('no-new-privileges is not in force in the task (NoNewPrivs is not 1 in /proc/self/status): a swarm service cannot ask for it (Engine API 1.41), so the node\'s dockerd must run with --no-new-privileges')
  const others = facts.interfaces.filter(name => name !== 'lo')
  if (others.length > 0) reasons.push(`the task has network interfaces besides lo (${others.join(', ')}): a swarm service cannot ask for network none (Engine API 1.41), so the node's dockerd must run without a default bridge (--bridge=none), where a task without networks has lo only`)
  for (const volume of facts.scratch) {
    if (!volume.tmpfs) reasons.push(`the scratch volume ${volume.name} at ${volume.target} is not a tmpfs of the local driver on the node`)
  }
  return reasons
}

/** Construction options of {@link SwarmSandboxProvider}. */
export interface SwarmSandboxProviderConfig extends DockerSandboxProviderConfig {
  /** What the task proved about itself. */
  task: TaskFacts
}

/**
 * The container's inspect result as the judge should see it: each scratch volume the node's
 * engine confirmed to be a local tmpfs appears as the private tmpfs mount it is.
 */
export function judgedInspect(info: Docker.ContainerInspectInfo, facts: TaskFacts): Docker.ContainerInspectInfo {
  const tmpfs = new Set(facts.scratch.filter(volume => volume.tmpfs).map(volume => volume.name))
  return { ...info, Mounts: (info.Mounts ?? []).map(mount => mount.Type === 'volume' && mount.Name !== undefined && tmpfs.has(mount.Name) ? { ...mount, Type: 'tmpfs', Name: undefined, Source: '' } : mount) } as Docker.ContainerInspectInfo
}

/** `ctx.sandbox` over a swarm task's container (see the module documentation). */
export class SwarmSandboxProvider extends DockerSandboxProvider {
  private readonly task: TaskFacts

  constructor(ctx: Context, config: SwarmSandboxProviderConfig) {
    super(ctx, config)
    this.task = config.task
  }

  /** The container's verdict, refused where the task did not prove what the service could not ask for. */
  override assess(mode: ConfinedSandboxMode, workspaceRoot: string): DockerModeAssessment {
    const verdict = super.assess(mode, workspaceRoot)
    const unproven = unprovenConfinement(this.task)
    const proven = [
      ...this.task.noNewPrivileges ? ['no-new-privileges (the node\'s dockerd --no-new-privileges; proven in the task: NoNewPrivs 1)'] : [],
      ...unproven.length === 0 ? ['network none (proven in the task: lo only)'] : [],
    ]
    if (!verdict.enforced) return { ...verdict, facts: [...verdict.facts, ...proven], reasons: [...verdict.reasons, ...unproven] }
    if (unproven.length > 0) return { mode, enforced: false, facts: [...verdict.facts, ...proven], reasons: unproven }
    // The service's NetworkMode is the engine's default, but the task proved lo only: no gap.
    const gaps = verdict.gaps.filter(gap => !gap.startsWith(NETWORK_GAP_PREFIX))
    return { ...verdict, enforcement: gaps.length === 0 ? 'full' : 'partial', facts: [...verdict.facts, ...proven], gaps }
  }

  /** The Docker report, with the network the task proved. */
  override report(workspaceRoot?: string): WorldSandboxReport {
    const report = super.report(workspaceRoot)
    const network = this.task.interfaces.every(name => name === 'lo') ? 'none' : `default (${this.task.interfaces.join(', ')})`
    return report.limits === undefined ? report : { ...report, limits: { ...report.limits, networkMode: network } }
  }
}

/** What the companion needs of `ctx.subprocess` (a SwarmSubprocessRuntime). */
interface SwarmRuntimeLike {
  world(): Promise<DockerWorld>
  readonly execUser: string | undefined
  readonly taskFacts: TaskFacts | undefined
  describe(): string
}

/**
 * Open the runtime's world (create the service, attach to its task), learn the terminals' uid,
 * and register `ctx.sandbox`; logs what the default mode means there.
 * @throws InvalidArgumentError when `ctx.subprocess` is not a swarm runtime; whatever opening the world throws.
 */
export async function applySwarmSandbox(ctx: Context): Promise<SwarmSandboxProvider> {
  const runtime = ctx.get('subprocess') as unknown as Partial<SwarmRuntimeLike> | undefined
  if (runtime === undefined || typeof runtime.world !== 'function' || !('taskFacts' in runtime)) {
    throw new InvalidArgumentError('the swarm sandbox needs a SwarmSubprocessRuntime as ctx.subprocess')
  }
  const world = await runtime.world()
  const task = runtime.taskFacts!
  const control = await world.control(runtime.execUser)
  const workspaceRoot = ctx.sandboxPolicy.workspaceRoot
  return provideSandbox(ctx, SwarmSandboxProvider, {
    info: judgedInspect(world.inspectInfo, task),
    execUid: control.info.uid,
    where: runtime.describe!(),
    managed: true,
    workspaceRoot,
    task,
    wording: {
      kind: 'swarm task',
      mechanism: 'swarm service (created from the policy; its task\'s container inspected on its node, and what the service cannot ask for proven in the task)',
      fix: 'Run the swarm\'s node engines with --no-new-privileges and --bridge=none (docs/swarm.md), so a task proves both',
    },
  })
}

/** Companion of SwarmSubprocessRuntime: hand the policy to the runtime config, then provide `ctx.sandbox`. */
export const swarmSandboxCompanion: SandboxCompanion<SwarmRuntimeConfig> = {
  configure: (config, policy) => ({ ...config, policy: { mode: policy.mode, workspaceRoot: policy.workspaceRoot } }),
  plugin: async ctx => { await applySwarmSandbox(ctx) },
}
