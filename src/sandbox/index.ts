/**
 * Sandbox policy in remote worlds (DESIGN.md section 6): a same-world `ctx.sandbox` for each
 * runtime, and the report the CLI (`--mode`, `doctor`) reads.
 *
 * - Docker: the container IS the confinement. A managed container is created from the policy
 *   ({@link dockerCreateOptions}); any container is judged from its inspect facts
 *   ({@link assessDockerMode}); {@link DockerSandboxProvider} passes argv through or fails closed.
 * - SSH: {@link BubblewrapSandboxProvider} wraps argv in the host's bubblewrap, probed once per
 *   world ({@link probeBwrap}), or fails closed.
 * - Report: {@link sandboxReportOf}(ctx) on a composed world, {@link formatSandboxReport} for text.
 * @module dsh-remote-worlds/sandbox
 */
export { announceSandbox, SANDBOX_LOGGER, sandboxReportOf } from './companion.ts'
export type { CompositionPolicy, SandboxCompanion } from './companion.ts'
export { applyDockerSandbox, dockerSandboxCompanion } from './docker-companion.ts'
export { assessDockerMode, boundingCaps, DOCKER_DEFAULT_CAPS, noNewPrivileges } from './docker-inspect.ts'
export type { DockerModeAssessment, DockerSandboxFacts } from './docker-inspect.ts'
export { DEFAULT_DOCKER_LIMITS, DEFAULT_SANDBOX_USER, dockerCreateOptions, mergeCreateOptions, SANDBOX_MODE_LABEL } from './docker-policy.ts'
export type { DockerLimits, DockerSandboxSpec, DockerWorkspaceSource } from './docker-policy.ts'
export { DOCKER_DENIAL_SIGNATURES, DockerSandboxProvider } from './docker-provider.ts'
export type { DockerSandboxProviderConfig } from './docker-provider.ts'
export { BubblewrapSandboxProvider, BWRAP_DENIAL_SIGNATURES, BWRAP_RUNNER_FAILURE_RULES, bwrapProbeScript, bwrapProfileArgs, parseBwrapProbe, probeBwrap } from './bwrap.ts'
export type { BubblewrapSandboxConfig, BwrapProbe, BwrapProfileProbe, RemoteRun, RemoteRunResult } from './bwrap.ts'
export { applySshSandbox, sshRun, sshSandboxCompanion } from './ssh-companion.ts'
export { formatSandboxReport, SANDBOX_MODES } from './report.ts'
export type { ReportingSandbox, SandboxModeReport, WorldSandboxReport } from './report.ts'
