/**
 * `DockerSandboxProvider`: `ctx.sandbox` for a Docker world. The container IS the confinement:
 * `confine()` returns the caller's argv unchanged when the container (as inspected) enforces
 * the requested mode, states the enforcement, and names the denial texts this backend's
 * kernel prints; otherwise it throws `SandboxUnavailableError`, so terminal-bash never starts
 * the shell. `confine()` is synchronous, so the facts (inspect result, terminal uid) are
 * gathered before the provider is constructed (see {@link dockerSandboxCompanion}).
 * @module dsh-remote-worlds/sandbox/docker-provider
 */
import type { Context } from '@deepseek-ai/cordis'
import { SandboxProvider } from '@deepseek-ai/dsh-sandbox'
import type { ConfinedArgv, ConfinedSandboxMode, SandboxPolicy } from '@deepseek-ai/dsh-sandbox'
import { assessDockerMode, type DockerModeAssessment, type DockerSandboxFacts } from './docker-inspect.ts'
import { WorldSandboxUnavailableError } from './unavailable.ts'
import { SANDBOX_MODES, type ReportingSandbox, type SandboxModeReport, type WorldSandboxReport } from './report.ts'

/**
 * What a denied file effect prints inside a Docker world: EROFS on read-only mounts and the
 * read-only rootfs, EACCES where permissions deny (e.g. root-owned files for the non-root user).
 */
export const DOCKER_DENIAL_SIGNATURES: readonly string[] = Object.freeze(['Read-only file system', 'Permission denied'])

/** Construction options of {@link DockerSandboxProvider}. */
export interface DockerSandboxProviderConfig extends DockerSandboxFacts {
  /** World description for reports and errors, e.g. `docker container 0123456789ab as agent`. */
  where: string
  /** True when the world created the container (from the policy) and removes it on dispose. */
  managed: boolean
  /** Workspace root reports use when none is given (the composition's policy root). */
  workspaceRoot: string
  /**
   * How another world built on a container names itself (a swarm task's, say): `kind` replaces
   * managed/attached in the report's world, `mechanism` the report's mechanism of the confined
   * modes, `fix` the refusal's advice. Default: the Docker world's.
   */
  wording?: { kind: string; mechanism: string; fix: string } | undefined
}

/** `ctx.sandbox` over a container whose HostConfig and mounts are the confinement. */
export class DockerSandboxProvider extends SandboxProvider implements ReportingSandbox {
  private readonly config: DockerSandboxProviderConfig
  private readonly verdicts = new Map<string, DockerModeAssessment>()

  constructor(ctx: Context, config: DockerSandboxProviderConfig) {
    super(ctx)
    this.config = config
  }

  /** The verdict for one mode and workspace root (cached: the inspected facts do not change). */
  assess(mode: ConfinedSandboxMode, workspaceRoot: string): DockerModeAssessment {
    const key = `${mode}\0${workspaceRoot}`
    let verdict = this.verdicts.get(key)
    if (verdict === undefined) {
      verdict = assessDockerMode(this.config, mode, workspaceRoot)
      this.verdicts.set(key, verdict)
    }
    return verdict
  }

  /**
   * Return `argv` unchanged (the container confines it) when the container enforces
   * `policy.mode` for `policy.workspaceRoot`.
   * @throws SandboxUnavailableError naming every reason the container does not enforce the mode.
   */
  confine(argv: readonly string[], policy: SandboxPolicy): ConfinedArgv {
    const verdict = this.assess(policy.mode, policy.workspaceRoot)
    if (!verdict.enforced) {
      throw new WorldSandboxUnavailableError(policy.mode, this.config.where, `${this.config.where} does not enforce ${policy.mode} for workspace ${policy.workspaceRoot}: ${verdict.reasons.join('; ')}`,
        this.config.wording?.fix ?? 'Attach to a container whose HostConfig enforces it (a read-only root filesystem, no added capabilities, and for workspace-write the workspace its only writable mount: docs/dsh-cli.md), or let this package create the container from an image')
    }
    return {
      argv: [...argv],
      enforcement: verdict.enforcement,
      denialSignatures: DOCKER_DENIAL_SIGNATURES,
      runnerFailureRules: [],
    }
  }

  /** Which modes this container enforces and how (for `doctor` and `--mode`). */
  report(workspaceRoot: string = this.config.workspaceRoot): WorldSandboxReport {
    const mechanism = this.config.wording?.mechanism ?? `docker container (${this.config.managed ? 'managed, created from the policy' : 'attached, inspected'})`
    const modes = SANDBOX_MODES.map((mode): SandboxModeReport => {
      if (mode === 'danger-full-access') {
        const rootfs = this.config.info.HostConfig.ReadonlyRootfs === true ? 'read-only rootfs (the container\'s own)' : 'writable rootfs'
        return { mode, available: true, enforcement: 'none', mechanism: 'none', facts: [`no sandbox: the shell runs unconfined in the container (${rootfs})`], gaps: [] }
      }
      const verdict = this.assess(mode, workspaceRoot)
      return verdict.enforced
        ? { mode, available: true, enforcement: verdict.enforcement, mechanism, facts: verdict.facts, gaps: verdict.gaps }
        : { mode, available: false, enforcement: 'unavailable', mechanism, facts: verdict.facts, gaps: verdict.reasons }
    })
    const host = this.config.info.HostConfig
    const positive = (value: number | undefined): number | null => value === undefined || value === null || value <= 0 ? null : value
    return {
      world: `${this.config.where} (${this.config.wording?.kind ?? (this.config.managed ? 'managed' : 'attached')})`,
      workspaceRoot,
      modes,
      limits: {
        pidsLimit: positive(host.PidsLimit),
        memoryBytes: positive(host.Memory),
        nanoCpus: positive(host.NanoCpus),
        networkMode: host.NetworkMode ?? null,
      },
    }
  }
}

export default DockerSandboxProvider
