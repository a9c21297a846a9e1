/**
 * The sandbox companion of a runtime: how a world composition (openWorld) gets a `ctx.sandbox`
 * that enforces the policy IN THE SAME WORLD as `ctx.subprocess`. World-neutral.
 * @module dsh-remote-worlds/sandbox/companion
 */
import type { Context } from '@deepseek-ai/cordis'
import type { SandboxMode } from '@deepseek-ai/dsh-sandbox'
import type {} from '@deepseek-ai/dsh-sandbox-policy'
import type { ReportingSandbox, WorldSandboxReport } from './report.ts'
import { formatSandboxReport } from './report.ts'

/** The composition's policy, known before the runtime is constructed. */
export interface CompositionPolicy {
  /** The deployment default mode (`ctx.sandboxPolicy.defaultMode`). */
  mode: SandboxMode
  /** The canonical workspace root (`ctx.sandboxPolicy.workspaceRoot`), a path in the remote world. */
  workspaceRoot: string
}

/**
 * A runtime's sandbox companion. A runtime class carries one as its static `sandboxCompanion`;
 * openWorld uses it unless told otherwise.
 */
export interface SandboxCompanion<C> {
  /** Adjust the runtime config for the policy (e.g. a managed container created from it). */
  configure?(config: C, policy: CompositionPolicy): C
  /**
   * Register `ctx.sandbox` for the world of `ctx.subprocess` (loaded after the runtime,
   * before terminal-bash). Gathers every fact `confine()` needs, since `confine()` is synchronous.
   */
  plugin(ctx: Context): Promise<void>
}

/** Name of the cordis logger sandbox notices go to. */
export const SANDBOX_LOGGER = 'dsh-remote-sandbox'

/**
 * Say what the composition's default mode means in this world, once, on the `dsh-remote-sandbox`
 * logger (also kept in `ctx.logger.buffer`): `WARNING: ... run UNCONFINED` for danger-full-access,
 * `WARNING: ... cannot be enforced ...; terminals will fail closed` for an unenforceable mode, the
 * enforcement (full/partial, with gaps) otherwise. Logged at INFO: cordis exports levels up to
 * INFO by default and drops WARN (level 2), so a warn() would be silent.
 * @returns the line logged.
 */
export function announceSandbox(ctx: Context, report: WorldSandboxReport, mode: SandboxMode): string {
  const logger = ctx.logger(SANDBOX_LOGGER)
  const entry = report.modes.find(candidate => candidate.mode === mode)
  if (entry === undefined) throw new Error(`no sandbox report entry for mode ${mode}`)
  let line: string
  if (entry.enforcement === 'none') {
    line = `WARNING: sandbox mode danger-full-access: terminals in ${report.world} run UNCONFINED (no sandbox)`
  } else if (!entry.available) {
    line = `WARNING: sandbox mode ${mode} cannot be enforced in ${report.world}; terminals will fail closed: ${entry.gaps.join('; ')}`
  } else {
    line = `sandbox mode ${mode}: enforced (${entry.enforcement}) by ${entry.mechanism} in ${report.world}${entry.gaps.length > 0 ? `; gaps: ${entry.gaps.join('; ')}` : ''}`
  }
  logger.info(line)
  return line
}

/**
 * Register `provider` (a sandbox plugin class) with `config` as `ctx.sandbox`, say what the
 * composition's default mode means there ({@link announceSandbox}), and return it.
 * @throws whatever the provider's construction throws.
 */
export async function provideSandbox<P extends ReportingSandbox, C>(ctx: Context, provider: new (ctx: Context, config: C) => P, config: C): Promise<P> {
  await ctx.plugin(provider as never, config as never)
  // ctx.get: a plugin context (the loader's entry) may not read a service it did not inject.
  const registered = ctx.get('sandbox') as unknown as P
  announceSandbox(ctx, registered.report(ctx.sandboxPolicy.workspaceRoot), ctx.sandboxPolicy.defaultMode)
  return registered
}

/** The world's sandbox report from a composed context (`ctx.sandbox` when it reports itself). */
export function sandboxReportOf(ctx: Context, workspaceRoot?: string): WorldSandboxReport | undefined {
  const sandbox = ctx.get('sandbox') as Partial<ReportingSandbox> | undefined
  return typeof sandbox?.report === 'function' ? sandbox.report(workspaceRoot) : undefined
}

export { formatSandboxReport }
