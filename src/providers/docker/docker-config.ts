/**
 * The Docker runtime's configuration schema, in a room below the runtime and the sandbox
 * companion that both read it (so neither imports the other for it).
 * @module dsh-remote-worlds/providers/docker/docker-config
 */
import { z } from 'zod'
import { TerminalEmulatorSettings } from '../../emulator/settings.ts'
import { LocaleSettingSchema } from '../remote/environment.ts'
import { PersistenceSetting } from '../remote/pty-holder/persistence.ts'

const positiveInt = z.number().int().positive()

/** The sandbox policy a world is created from (sandbox/docker-policy.ts): the mode and the workspace root in the world. Shared with the swarm runtime's config. */
export const PolicySetting = z.object({
  mode: z.enum(['read-only', 'workspace-write', 'danger-full-access']),
  workspaceRoot: z.string().startsWith('/'),
}).strict()

/** A created world's workspace source: a host folder to bind, or a named volume. */
export const WorkspaceSourceSetting = z.union([z.object({ bind: z.string().min(1) }).strict(), z.object({ volume: z.string().min(1) }).strict()])

/** A created world's resource limits (sandbox/docker-policy.ts `DockerLimits`). */
export const LimitsSetting = z.object({ pidsLimit: positiveInt, memoryBytes: positiveInt, nanoCpus: positiveInt, tmpBytes: positiveInt }).partial().strict()

/** Configuration of the DockerSubprocessRuntime (src/providers/docker); validated with zod at construction. */
export const DockerRuntimeConfig = z.object({
  /** Attach to this existing, running container (name or id). */
  container: z.string().min(1).optional(),
  /** Or run a managed throwaway container from this image (removed at disposal). */
  image: z.string().min(1).optional(),
  /**
   * Or attach to the dev container the Dev Containers tooling started for this project folder
   * (src/devcontainer): found by its labels when the world opens; its devcontainer.json's
   * `remoteUser` (else `containerUser`) is the exec user unless `user` is given (an explicit
   * `user` wins), and its `remoteEnv` is added to what terminals and spawned processes get.
   * `config` names its configuration file, as the reference CLI's `--config` (then only a
   * container whose `devcontainer.config_file` label names that file, or that has no such
   * label, matches); default: the file the folder's container was made from. `start: true`
   * starts it when it is stopped. Give the sandbox policy and the terminals its
   * `workspaceFolder` (`resolveDevcontainer(folder, { config })` returns it).
   */
  devcontainer: z.object({ folder: z.string().min(1), config: z.string().min(1).optional(), start: z.boolean().optional() }).strict().optional(),
  /** Exec user (`name`, `uid`, `uid:gid`); the control channel runs as the same user. Default: the image's user (a dev container's: its configured one). */
  user: z.string().min(1).optional(),
  /**
   * The locale of terminals and spawned programs (remote/environment.ts `chooseLocale`):
   * `'auto'` (default) sets LANG to the caller's UTF-8 LANG when the world has it, else to
   * C.UTF-8 when the world has it, and only when the world's own environment names no locale;
   * a locale name sets LANG to it; `false` keeps the world's environment as it is.
   */
  locale: LocaleSettingSchema.optional(),
  /**
   * Each terminal's emulator (emulator/settings.ts): `{ emulator?: boolean, replies?: 'answer' |
   * 'off', scrollback?: lines }`; default: an emulator that answers terminal queries, 200 lines
   * of scrollback.
   */
  terminal: TerminalEmulatorSettings.optional(),
  /** Docker engine socket; default: dockerode's (`DOCKER_HOST` or /var/run/docker.sock). */
  socketPath: z.string().min(1).optional(),
  /**
   * Reply bound of each control-channel request, in ms (default 10 000). A request that times
   * out (a paused container, a stuck control program) fails the channel, so a teardown fails
   * instead of hanging.
   */
  controlTimeoutMs: positiveInt.optional(),
  /**
   * The sandbox policy a MANAGED container is created from (src/sandbox/docker-policy.ts);
   * openWorld sets it from its mode and workspace root. Ignored for creation when attaching
   * (an attached container is inspected instead).
   */
  policy: PolicySetting.optional(),
  /** Managed container only: the workspace source mounted at `policy.workspaceRoot` (host folder or named volume). */
  workspace: WorkspaceSourceSetting.optional(),
  /** Managed container only: resource limits (defaults: DEFAULT_DOCKER_LIMITS under confined modes). */
  limits: LimitsSetting.optional(),
  /**
   * Whether terminals' shells outlive their transport (`'connection'`) or their client
   * (`'client'`), held in the container by dsh-pty (remote/pty-holder/persistence.ts), or neither
   * (`'off'`). Default `'connection'` where dsh-pty can run in the container, else `'off'`
   * (reported by `persistenceInEffect()` and `doctor`); a given mode is kept, and refused where it
   * cannot hold. A managed container (`image`) ends with its client: `'client'` is refused there.
   */
  persistence: PersistenceSetting.optional(),
  /**
   * End what clients that died left running in the container (their tagged sessions, see
   * remote/ownership.ts) when this client first connects as a user. Default true; off lists
   * them without ending them (`dsh-remote-worlds doctor`).
   */
  reapOrphans: z.boolean().optional(),
}).strict().refine(config => [config.container, config.image, config.devcontainer].filter(target => target !== undefined).length === 1, {
  message: 'exactly one of `container`, `image` or `devcontainer` is required',
}).refine(config => (config.workspace === undefined && config.limits === undefined) || (config.image !== undefined && config.policy !== undefined), {
  message: '`workspace` and `limits` apply only to a managed container (`image`) created from a `policy`; an attached container is inspected as it is',
})

/** Input shape of {@link DockerRuntimeConfig}. */
export type DockerRuntimeConfig = z.input<typeof DockerRuntimeConfig>
