/**
 * `dsh-remote-worlds/docker`: the Docker world as a cordis plugin, mountable by the upstream
 * loader from a `cordis.patch.yml` entry. It provides `ctx.subprocess` (a
 * {@link DockerSubprocessRuntime}) over an existing container (`container`), a project's dev
 * container (`devcontainer: { folder, config? }`, src/devcontainer) or a managed one created from
 * `image` AND the composition's sandbox policy (so the container itself enforces the default
 * mode; see src/sandbox/docker-policy.ts). Pair it with
 * `dsh-remote-worlds/docker/sandbox` for `ctx.sandbox` in the same world.
 *
 * Disposal of the plugin ends every process and terminal it started and removes a managed
 * container (and the spill directory in an attached one).
 * @module dsh-remote-worlds/plugins/docker
 */
// First: fails at import, naming the required version, on a Node.js too old (node-version.ts).
import '../node-version.ts'
import type { Context } from '@deepseek-ai/cordis'
import type {} from '@deepseek-ai/dsh-sandbox-policy'
import z from '@deepseek-ai/schemastery'
import type { TerminalEmulatorSettings } from '../emulator/settings.ts'
import { DockerSubprocessRuntime, type DockerRuntimeConfig } from '../providers/docker/docker-runtime.ts'
import { defined } from './defined.ts'
import { TerminalSetting, terminalSetting } from './terminal-setting.ts'

/** Cordis plugin name. */
export const name = 'dsh-remote-worlds-docker'

/** The sandbox policy decides what a managed container is created to enforce. */
export const inject = ['sandboxPolicy']

/** Plugin config. Exactly one of `container`, `devcontainer` and `image`. */
export interface Config {
  /** Attach to this running container (name or id). */
  container?: string
  /**
   * Or attach to the dev container of this project folder (found by the Dev Containers labels;
   * its devcontainer.json gives the user unless `user` is set, and remoteEnv). The composition's
   * sandbox policy should have the dev container's workspace folder as its workspace root
   * (`resolveDevcontainer(folder, { config }).workspaceFolder`). `config`: its configuration
   * file, as the reference CLI's `--config` (default: the one the container was made from).
   * `start`: start it when stopped.
   */
  devcontainer?: { folder?: string; config?: string; start?: boolean }
  /** Or run a managed container from this image, created from the sandbox policy; removed at disposal. */
  image?: string
  /** Exec user (`name`, `uid`, `uid:gid`); default: the image's user. A managed container under a confined mode needs a non-root one. */
  user?: string
  /** Docker engine socket; default `DOCKER_HOST` or /var/run/docker.sock. */
  socketPath?: string
  /** Managed container only: the host folder or named volume mounted at the policy's workspace root. */
  workspace?: { bind?: string; volume?: string }
  /** Managed container only: resource limits (defaults apply under confined modes). */
  limits?: { pidsLimit?: number; memoryBytes?: number; nanoCpus?: number; tmpBytes?: number }
  /** End what clients that died left in the container when this one connects (default true). */
  reapOrphans?: boolean
  /** Each terminal's emulator: `{ emulator?, replies?: 'answer' | 'off', scrollback? }` (src/emulator/settings.ts). */
  terminal?: TerminalEmulatorSettings
}

/** Schema of {@link Config}, validated by cordis (and the loader) before {@link apply}. */
export const Config: z<Config> = z.object({
  container: z.string().description('Attach to this running container (name or id).'),
  devcontainer: z.object({
    folder: z.string().description('The project folder whose dev container to attach to (found by its Dev Containers labels).'),
    config: z.string().description('Its devcontainer.json, as the Dev Containers CLI\'s --config (e.g. .devcontainer/python/devcontainer.json); default: the one the container was made from.'),
    start: z.boolean().description('Start the dev container when it is stopped (default false).'),
  }).description('Or attach to the dev container of a project folder; its devcontainer.json gives the user (unless `user` is set) and remoteEnv.'),
  image: z.string().description('Or run a managed container from this image, created from the sandbox policy and removed at disposal.'),
  user: z.string().description('Exec user (name, uid or uid:gid). A managed container under a confined mode needs a non-root user.'),
  socketPath: z.string().description('Docker engine socket (default: DOCKER_HOST or /var/run/docker.sock).'),
  workspace: z.object({
    bind: z.string().description('Host folder mounted at the workspace root.'),
    volume: z.string().description('Named volume mounted at the workspace root.'),
  }).description('Managed container only: the workspace source.'),
  limits: z.object({
    pidsLimit: z.natural(),
    memoryBytes: z.natural(),
    nanoCpus: z.natural(),
    tmpBytes: z.natural(),
  }).description('Managed container only: resource limits.'),
  reapOrphans: z.boolean().description('End what clients that died left in the container when this one connects (default true).'),
  terminal: TerminalSetting,
})


/**
 * Register the Docker runtime as `ctx.subprocess`. A managed container is created from the
 * composition's sandbox policy (default mode, workspace root). Awaited, so a config the
 * runtime refuses fails this entry with the runtime's own error (the loader reports it), not
 * as a `subprocess` service that never appears.
 * @throws InvalidArgumentError (from the runtime) for a config it cannot use.
 */
export async function apply(ctx: Context, config: Config): Promise<void> {
  const { workspace, limits, terminal, devcontainer, ...rest } = defined(config)
  // The schema turns an absent object option into `{}`: an empty one is absent.
  const source = workspace?.bind !== undefined ? { bind: workspace.bind } : workspace?.volume !== undefined ? { volume: workspace.volume } : undefined
  const limitValues = limits === undefined ? {} : defined(limits)
  const runtimeConfig: DockerRuntimeConfig = {
    ...rest,
    ...terminalSetting(terminal),
    ...(source !== undefined ? { workspace: source } : {}),
    // The schema turns an absent object option into `{}` here too: only a folder makes it present.
    ...(devcontainer?.folder !== undefined ? { devcontainer: { folder: devcontainer.folder, ...(devcontainer.config !== undefined ? { config: devcontainer.config } : {}), ...(devcontainer.start === true ? { start: true } : {}) } } : {}),
    ...(Object.keys(limitValues).length > 0 ? { limits: limitValues } : {}),
    ...(config.image !== undefined ? { policy: { mode: ctx.sandboxPolicy.defaultMode, workspaceRoot: ctx.sandboxPolicy.workspaceRoot } } : {}),
  }
  await ctx.plugin(DockerSubprocessRuntime, runtimeConfig)
}
