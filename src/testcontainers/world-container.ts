/**
 * `DshWorldContainer`: a testcontainers `GenericContainer` that is a remote world. Any image with
 * a POSIX shell; by default the project image. It maps the DSH sandbox policy to container
 * limits with the same code the managed Docker world uses (sandbox/docker-policy.ts), carries
 * the same lifeline (providers/docker/lifeline.ts: removed when the test process dies, Ryuk or
 * not), waits by asking the world (world-ready.ts), and once started opens the same
 * `RemoteWorld` as src/backend, or hands out the runtime config for a composition of your own.
 * @module dsh-remote-worlds/testcontainers/world-container
 */
import type { Duplex } from 'node:stream'
import Dockerode from 'dockerode'
import { AbstractStartedContainer, GenericContainer, type StartedTestContainer } from 'testcontainers'
import { type RemoteWorld, type TerminalTuning, openWorld } from '../backend/world.ts'
import { DockerSubprocessRuntime } from '../providers/docker/docker-runtime.ts'
import type { DockerRuntimeConfig } from '../providers/docker/docker-config.ts'
import { attachLifeline, lifelineCreateOptions } from '../providers/docker/lifeline.ts'
import { type DockerLimits, type DockerWorkspaceSource, dockerCreateOptions, workspaceOwnerUser } from '../sandbox/docker-policy.ts'
import { InvalidArgumentError } from '../providers/remote/errors.ts'
import { restartWithLifeline } from './lifeline-restart.ts'
import { withReuseLock } from './reuse-lock.ts'
import { disableRyukWhenAbsent } from './ryuk.ts'
import { WorldReadyWaitStrategy } from './world-ready.ts'

/** The project image (built by docker/ensure-world.sh). */
export const DSH_WORLD_IMAGE = 'dsh-remote-worlds/target:bookworm'

/** Where a host-folder workspace is mounted when no `workspaceRoot` is given. */
export const DEFAULT_WORKSPACE_ROOT = '/workspace'

/** The sandbox of a world container (see {@link DshWorldContainer.withSandbox}). */
export interface WorldSandbox {
  /** The DSH sandbox mode the container enforces. */
  mode: 'read-only' | 'workspace-write' | 'danger-full-access'
  /** The workspace: a host folder (bind-mounted), or `{ bind }` / `{ volume }`. Required for workspace-write. */
  workspace?: string | DockerWorkspaceSource | undefined
  /** Absolute workspace root inside the container (default {@link DEFAULT_WORKSPACE_ROOT}). */
  workspaceRoot?: string | undefined
  /** Limits; confined modes fill the gaps with the managed world's defaults (512 pids, 2 GiB, 2 CPUs, 256 MiB /tmp). */
  limits?: DockerLimits | undefined
}

/** What a started world container knows about itself. */
interface WorldSettings {
  user: string | undefined
  mode: WorldSandbox['mode']
  workspaceRoot: string
}

/**
 * A world container to start in a test: `new DshWorldContainer().withSandbox({ mode:
 * 'workspace-write', workspace: dir }).start()`. NetworkMode `none` and an init process by
 * default. Its pid 1 is the lifeline, except for a reusable container (`withReuse()`), which
 * must outlive the process and runs `sleep infinity`.
 */
export class DshWorldContainer extends GenericContainer {
  private worldUser: string | undefined
  private sandbox: WorldSandbox | undefined
  private lifeline: Duplex | undefined
  /** The engine, as the Docker runtime reaches it (dockerode's default: DOCKER_HOST or /var/run/docker.sock). */
  private readonly docker = new Dockerode()

  /**
   * @param image - an image with /bin/sh and the coreutils the control program runs (`od`,
   *   `dd`, `tr`, `grep`; default {@link DSH_WORLD_IMAGE}); pulled only when missing.
   */
  constructor(image: string = DSH_WORLD_IMAGE) {
    super(image)
    this.withNetworkMode('none')
    this.hostConfig.Init = true
  }

  /**
   * The user the world's shells and processes run as (`name`, `uid` or `uid:gid`): the exec
   * user, as the Docker runtime's `user`. Without a sandbox the container's own pid 1 keeps the
   * image's user; a confined mode runs the whole container as this user (never root).
   */
  override withUser(user: string): this {
    this.worldUser = user
    return this
  }

  /**
   * Enforce a DSH sandbox mode with container limits, exactly as the managed Docker world:
   * read-only rootfs, the workspace bound at its root (read-write only under workspace-write),
   * a private tmpfs /tmp, CapDrop ALL, no-new-privileges, NetworkMode none, an init, and pids,
   * memory and CPU limits (sandbox/docker-policy.ts `dockerCreateOptions`). Without a user, a
   * confined mode runs as the owner of a host-folder workspace when that is not root.
   * @throws InvalidArgumentError at `start()` for a mode the container cannot enforce (e.g.
   *   workspace-write without a workspace, or as root).
   */
  withSandbox(sandbox: WorldSandbox): this {
    this.sandbox = sandbox
    return this
  }

  /**
   * Create and start the container, wait until the world answers, and return it.
   * @throws InvalidArgumentError for a sandbox the container cannot enforce; testcontainers'
   *   errors for the engine and the image.
   */
  override async start(): Promise<StartedDshWorldContainer> {
    const settings = this.applySandbox()
    // testcontainers ignores withReuse() under TESTCONTAINERS_REUSE_ENABLE=false: then the
    // container is a fresh one and needs its lifeline.
    const reusable = this.reuse && process.env.TESTCONTAINERS_REUSE_ENABLE !== 'false'
    if (!reusable) {
      const lifeline = lifelineCreateOptions(this.hostConfig)
      const { HostConfig, ...createFields } = lifeline
      Object.assign(this.createOpts, createFields)
      this.hostConfig = HostConfig!
      // The engine removes the stopped container (AutoRemove); a second remove by stop() would
      // fail with "removal already in progress".
      this.withAutoRemove(false)
    } else {
      this.createOpts.Cmd = ['sleep', 'infinity']
    }
    this.withWaitStrategy(new WorldReadyWaitStrategy(settings.user, settings.mode === 'danger-full-access' ? undefined : settings.workspaceRoot))
    await disableRyukWhenAbsent(this.docker)
    const started = reusable
      ? await withReuseLock(JSON.stringify({ createOpts: this.createOpts, hostConfig: this.hostConfig }), () => super.start())
      : await super.start()
    return new StartedDshWorldContainer(started, settings, this.lifeline)
  }

  /** Attach the lifeline between create and start (testcontainers' hook). */
  protected override async containerCreated(containerId: string): Promise<void> {
    if (this.createOpts.OpenStdin !== true) return
    this.lifeline = await attachLifeline(this.docker.getContainer(containerId))
  }

  /** Merge the sandbox's create options into this container's. */
  private applySandbox(): WorldSettings {
    const sandbox = this.sandbox ?? { mode: 'danger-full-access' as const }
    if (sandbox.mode !== 'danger-full-access' && sandbox.workspace === undefined && sandbox.workspaceRoot === undefined) {
      throw new InvalidArgumentError(`sandbox mode ${sandbox.mode} needs a workspace (a host folder or volume mounted at ${DEFAULT_WORKSPACE_ROOT}), or a workspaceRoot that exists in the image`)
    }
    const workspaceRoot = sandbox.workspaceRoot ?? DEFAULT_WORKSPACE_ROOT
    const workspace = typeof sandbox.workspace === 'string' ? { bind: sandbox.workspace } : sandbox.workspace
    const user = this.worldUser ?? workspaceOwnerUser(workspace, sandbox.mode)
    const create = dockerCreateOptions({ mode: sandbox.mode, workspaceRoot, workspace, user, limits: sandbox.limits })
    if (create.User !== undefined) this.createOpts.User = create.User
    this.createOpts.Labels = { ...this.createOpts.Labels, ...create.Labels }
    const { NetworkMode, ...hostConfig } = create.HostConfig ?? {}
    this.hostConfig = { ...this.hostConfig, ...hostConfig }
    if (NetworkMode !== undefined) this.withNetworkMode(NetworkMode)
    return { user: user ?? create.User, mode: sandbox.mode, workspaceRoot }
  }
}

/** Options of {@link StartedDshWorldContainer.openWorld}. */
export interface OpenContainerWorldOptions {
  /** terminal-bash tuning (upstream defaults otherwise). */
  terminal?: TerminalTuning | undefined
  /** Workspace root and default cwd (default: the sandbox's workspace root, else /tmp). */
  workspaceRoot?: string | undefined
}

/** A started world container: the testcontainers handle plus the world it is. */
export class StartedDshWorldContainer extends AbstractStartedContainer {
  private readonly settings: WorldSettings
  private lifeline: Duplex | undefined

  /** @internal Use {@link DshWorldContainer.start}. */
  constructor(started: StartedTestContainer, settings: WorldSettings, lifeline: Duplex | undefined) {
    super(started)
    this.settings = settings
    this.lifeline = lifeline
  }

  /** The user the world's shells run as (undefined: the image's user). */
  get user(): string | undefined {
    return this.settings.user
  }

  /**
   * The Docker runtime's config for this container (`{ container, user }`), to mount
   * `DockerSubprocessRuntime` in a composition of your own.
   */
  runtimeConfig(): DockerRuntimeConfig {
    return { container: this.getId(), ...(this.settings.user !== undefined ? { user: this.settings.user } : {}) }
  }

  /**
   * Compose the same `RemoteWorld` as src/backend's `openWorld` on this container: its sandbox
   * mode, judged from the container's own HostConfig by the Docker sandbox companion (a mode the
   * container does not enforce is refused before a shell starts), with its report.
   * @throws SandboxUnavailableError when the container does not enforce its mode; the runtime's errors.
   */
  openWorld(options: OpenContainerWorldOptions = {}): Promise<RemoteWorld> {
    const workspaceRoot = options.workspaceRoot ?? (this.settings.mode === 'danger-full-access' ? '/tmp' : this.settings.workspaceRoot)
    return openWorld({
      runtime: DockerSubprocessRuntime,
      runtimeConfig: this.runtimeConfig(),
      mode: this.settings.mode,
      workspaceRoot,
      ...(options.terminal !== undefined ? { terminal: options.terminal } : {}),
    })
  }

  /**
   * Restart the container; one with a lifeline holds it again (lifeline-restart.ts).
   * @throws NotSupportedError, with the container untouched, when it has a lifeline and the
   *   engine is older than Docker 23.0, whose restart may remove it (lifeline-restart.ts).
   */
  override async restart(options?: Parameters<AbstractStartedContainer['restart']>[0]): Promise<void> {
    if (this.lifeline === undefined) return super.restart(options)
    this.lifeline = await restartWithLifeline(new Dockerode(), this.getId(), () => super.restart(options), this.lifeline)
  }

  /** Stop (and remove) the container; the lifeline goes with it. */
  protected override async containerStopped(): Promise<void> {
    this.lifeline?.destroy()
    // Gone with the container: a restart() now is testcontainers' own (and its "no such container").
    this.lifeline = undefined
  }
}
