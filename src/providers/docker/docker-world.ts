/**
 * One Docker container as a remote world: attach to an existing container or run a managed
 * throwaway one, start execs over the Engine API (dockerode), and keep one control channel per
 * exec user.
 *
 * Docker facts relied on (DESIGN.md sections 4-5): an exec with `Tty: true` gets an
 * engine-allocated PTY and is a session leader with that PTY as controlling tty; ExecInspect's
 * `Pid` is a HOST pid (useless inside the container's pid namespace), so the pid comes from the
 * start marker; a resize sent before exec start is dropped; there is no exec-kill API and
 * closing the attach socket leaves the exec's processes running, so teardown goes through the
 * control channel.
 * @module dsh-remote-worlds/providers/docker/docker-world
 */
import { PassThrough } from 'node:stream'
import { setTimeout as delay } from 'node:timers/promises'
import type { Duplex } from 'node:stream'
import Docker from 'dockerode'
import type { SubprocessOutcome } from '@deepseek-ai/dsh-subprocess'
import { ControlChannel } from '../remote/control-channel.ts'
import { parseEnvEntries } from '../remote/environment.ts'
import {
  ControlChannelError,
  EngineUnavailableError,
  RemoteWorldError,
  TargetNotFoundError,
  TargetNotRunningError,
  TransportError,
  WorldClosedError,
} from '../remote/errors.ts'
import type { SessionOwnership } from '../remote/ownership.ts'
import type { ProcessTransport } from '../remote/process.ts'
import { SharedRounds } from '../remote/rounds.ts'
import type { TerminalTransport } from '../remote/terminal.ts'
import { demuxDockerStream } from './demux.ts'
import { holderSpoke } from './exec-pool/holder-standby.ts'
import { ExecPool } from './exec-pool/pool.ts'
import { holderScript } from '../remote/pty-holder/holder-install.ts'
import type { WorldToolCopy } from '../remote/world-tools/launch.ts'
import type { ExecStartOptions, StartedExec } from './exec-pool/started-exec.ts'
import { attachLifeline, lifelineCreateOptions } from './lifeline.ts'
import { ContainerStateWatch } from './state-watch.ts'

export { LIFELINE_COMMAND } from './lifeline.ts'

/** How long {@link DockerWorld.alive} waits for the control program's ping reply. */
const ALIVE_PING_BOUND_MS = 5_000

/** Label every managed container carries, so leftovers can be found and removed. */
export const MANAGED_LABEL = 'dsh-remote-worlds.managed'

/** Where a Docker world runs. Exactly one of `container` and `image`. */
export interface DockerTarget {
  /** Attach to this existing, running container (name or id). */
  container?: string | undefined
  /** Run a managed throwaway container from this image; removed when the world is disposed. */
  image?: string | undefined
}

/** Options of {@link DockerWorld.open}. */
export interface DockerWorldOptions extends DockerTarget {
  /** Engine connection; defaults to `DOCKER_HOST` or `/var/run/docker.sock` (dockerode's defaults). */
  docker?: Docker | undefined
  /**
   * Extra container-create fields for a managed container, merged over the defaults
   * (`sleep infinity` under the engine's init, NetworkMode `none`). Used by the sandbox mapping.
   */
  create?: Docker.ContainerCreateOptions | undefined
  /** Reply bound of each control request, in ms (see ControlChannelOptions.requestTimeoutMs). */
  controlRequestTimeoutMs?: number | undefined
  /** The client's session ownership: every control program registers with it (remote/ownership.ts). */
  ownership?: SessionOwnership | undefined
}

/** The engine's view of the container: `unknown` when the engine does not answer. */
export type ContainerState = 'running' | 'paused' | 'ended' | 'unknown'

/** Map a dockerode/engine error to this package's typed errors. */
export function engineError(error: unknown, what: string): RemoteWorldError {
  if (error instanceof RemoteWorldError) return error
  const err = error as { statusCode?: number; code?: string; message?: string; json?: { message?: string } }
  const detail = err.json?.message ?? err.message ?? String(error)
  if (err.statusCode === 404) return new TargetNotFoundError(`${what}: ${detail}`, { cause: error })
  if (err.statusCode === 409) return new TargetNotRunningError(`${what}: ${detail}`, { cause: error })
  if (err.code === 'ENOENT' || err.code === 'ECONNREFUSED' || err.code === 'EACCES' || err.code === 'ECONNRESET' || err.code === 'EPIPE') {
    return new EngineUnavailableError(`${what}: the Docker engine does not answer (${err.code}: ${detail})`, { cause: error })
  }
  return new TransportError(`${what}: ${detail}`, { cause: error })
}

/**
 * The engine's refusal of an exec user the container does not have, found in a failure's
 * message (a control channel's `ended before it started: "..."`), or undefined. The engine
 * resolves a user name through the container's own /etc/passwd and /etc/group (runc's
 * libcontainer/user) and ends the exec with that refusal where the program's output would be;
 * Docker Engine 20.10 prints `unable to find user NAME: no matching entries in passwd file`
 * (`unable to find group NAME: no matching entries in group file` for `user:group`).
 * A numeric uid never fails this way: it needs no passwd entry.
 */
export function execUserRefusal(error: unknown): string | undefined {
  const message = (error as { message?: unknown } | undefined)?.message
  if (typeof message !== 'string') return undefined
  return /unable to find (?:user|group) [^:"]*: no matching entries in (?:passwd|group) file/.exec(message)?.[0]
}

/**
 * A container that terminals and control channels run in.
 * Create with {@link DockerWorld.open}; release with {@link DockerWorld.dispose}.
 */
export class DockerWorld {
  /** The engine connection. */
  readonly docker: Docker
  /** Full container id. */
  readonly containerId: string
  /** True when this world created the container and removes it on dispose. */
  readonly managed: boolean
  /** The container's configured environment (`Config.Env`), the world's ambient env. */
  readonly ambientEnv: Readonly<Record<string, string>>
  /** The container's inspect result at open time (HostConfig, Mounts, Config). */
  readonly inspectInfo: Docker.ContainerInspectInfo
  private readonly controls = new Map<string, Promise<ControlChannel>>()
  /** {@link alive}'s checks per exec user (key: the user, '' for the image's), in shared rounds. */
  private readonly aliveRounds = new Map<string, SharedRounds<boolean>>()
  private disposed = false
  private readonly controlRequestTimeoutMs: number | undefined
  private readonly ownership: SessionOwnership | undefined
  /** A managed container's lifeline: pid 1 reads it and ends at its EOF (see {@link DockerWorld.open}). */
  private readonly lifeline: Duplex | undefined
  /** Execs started ahead of need: launchers for processes, a standby for the next terminal (exec-pool/). */
  private readonly pool: ExecPool
  /** The engine's events of the container: the pool runs nothing in a paused or dead one. */
  private readonly stateWatch: ContainerStateWatch

  private constructor(docker: Docker, info: Docker.ContainerInspectInfo, managed: { lifeline: Duplex } | undefined, stateWatch: ContainerStateWatch, options: DockerWorldOptions) {
    this.controlRequestTimeoutMs = options.controlRequestTimeoutMs
    this.ownership = options.ownership
    this.lifeline = managed?.lifeline
    this.docker = docker
    this.containerId = info.Id
    this.managed = managed !== undefined
    this.inspectInfo = info
    this.ambientEnv = parseEnvEntries(info.Config.Env)
    const ownership = options.ownership
    this.stateWatch = stateWatch
    this.pool = new ExecPool({
      state: stateWatch,
      startExec: (cmd, execOptions) => this.startExec(cmd, execOptions),
      newTag: ownership === undefined ? undefined : () => ownership.newTag(),
      describe: user => this.describe(user),
      execOutcome: (exec, user) => this.execOutcome(exec, user),
    })
  }

  /**
   * Attach to a running container, or create and start a managed one.
   *
   * A managed container lives only while this client does, however the client ends (SIGKILL,
   * OOM, power loss): its pid 1 (under the engine's init) is a shell loop reading stdin, the
   * container is created with OpenStdin and StdinOnce, and this world holds the one attach
   * stream, taken before start. When that stream closes (dispose, or the kernel closing a dead
   * client's socket), the engine closes pid 1's stdin (StdinOnce: "close stdin after the one
   * attached client disconnects", Engine API ContainerCreate), pid 1 reads EOF and exits, the
   * kernel kills every other process of the container's pid namespace, and AutoRemove removes
   * the container. No registry image and no client-side teardown is involved. The stream is
   * unref'd: a process that forgets to dispose its world may exit, and its container goes.
   * `create.Entrypoint`, `Cmd` and the stdin settings are therefore this world's, not the caller's.
   * @throws TargetNotFoundError for an unknown container or image.
   * @throws TargetNotRunningError for a stopped or paused container.
   * @throws EngineUnavailableError when the engine socket does not answer.
   */
  static async open(options: DockerWorldOptions): Promise<DockerWorld> {
    const docker = options.docker ?? new Docker()
    if ((options.container === undefined) === (options.image === undefined)) {
      throw new RemoteWorldError('INVALID_ARGUMENT', 'a Docker world needs exactly one of `container` (attach) or `image` (managed)')
    }
    if (options.container !== undefined) {
      let info: Docker.ContainerInspectInfo
      try {
        info = await docker.getContainer(options.container).inspect()
      } catch (error) {
        throw engineError(error, `docker container ${options.container}`)
      }
      assertRunning(info, options.container)
      return new DockerWorld(docker, info, undefined, await ContainerStateWatch.follow(docker, info.Id), options)
    }
    const image = options.image!
    let container: Docker.Container
    try {
      container = await docker.createContainer({
        Image: image,
        ...options.create,
        ...lifelineCreateOptions({ Init: true, NetworkMode: 'none', ...options.create?.HostConfig }),
        Labels: { ...options.create?.Labels, [MANAGED_LABEL]: 'true' },
      })
    } catch (error) {
      const mapped = engineError(error, `docker image ${image}`)
      // The engine's 404 for a missing image reads "no such container - No such image: X" through
      // dockerode; only the engine's own text is true, so that is all that is kept of it.
      if (mapped instanceof TargetNotFoundError) throw new TargetNotFoundError(`docker image ${image} does not exist locally (the engine says: ${(error as { json?: { message?: string } }).json?.message ?? 'no such image'}); build it (docker/ensure-world.sh builds the project image) or pull it`)
      throw mapped
    }
    let lifeline: Duplex | undefined
    try {
      lifeline = await attachLifeline(container)
      await container.start()
      const info = await container.inspect()
      assertRunning(info, image)
      return new DockerWorld(docker, info, { lifeline }, await ContainerStateWatch.follow(docker, info.Id), options)
    } catch (error) {
      lifeline?.destroy()
      await container.remove({ force: true }).catch(() => undefined)
      throw engineError(error, `managed container from ${image}`)
    }
  }

  /**
   * Whether the container answers its programs now: the engine's events (state-watch.ts) say it
   * runs, not paused, and so does ContainerInspect. The inspect closes the window right after a
   * `docker pause` returned, before its event reached the watch (the freezer acts at once, so a
   * request sent then waits out its bound). One inspect (a few ms); false when it fails.
   */
  async answering(): Promise<boolean> {
    if (!this.stateWatch.usable) return false
    const state = await this.docker.getContainer(this.containerId).inspect().then(info => info.State, () => undefined)
    return state !== undefined && state.Running && !state.Paused
  }

  /**
   * Fail unless the container runs now, unpaused, as ContainerInspect says (one engine round
   * trip, a few ms). The engine sets the state before `docker pause` returns, while its event
   * may reach the watch (state-watch.ts) later: in that window a control request or a pooled
   * exec (exec-pool/) would wait on a frozen program, a request for its bound, a standby with
   * no bound at all. The engine's word is taken as it stands: Docker 20.10 can call a container
   * paused again for a moment after `docker unpause` returned (a late containerd TaskPaused;
   * moby daemon/monitor.go), and its own ContainerExecCreate refuses the same way then.
   * @throws TargetNotRunningError when the container is paused, stopped, or removed.
   * @throws EngineUnavailableError when the engine does not answer.
   */
  async assertRunning(user?: string): Promise<void> {
    let info: Docker.ContainerInspectInfo
    try {
      info = await this.docker.getContainer(this.containerId).inspect()
    } catch (error) {
      if ((error as { statusCode?: number }).statusCode === 404) throw new TargetNotRunningError(`${this.describe(user)} no longer exists: it ended and was removed`, { cause: error })
      throw engineError(error, this.describe(user))
    }
    if (!info.State.Running) throw new TargetNotRunningError(`${this.describe(user)} is not running (status: ${info.State.Status})`)
    if (info.State.Paused) throw new TargetNotRunningError(`${this.describe(user)} is paused: its processes are frozen until it is unpaused`)
  }

  /** Short description for messages. */
  describe(user?: string): string {
    return `docker container ${this.containerId.slice(0, 12)}${user === undefined ? '' : ` as ${user}`}`
  }

  /**
   * The control channel for `user` (the container's default user when undefined), started on
   * first use and reused; a dead channel is replaced on the next call.
   */
  control(user: string | undefined): Promise<ControlChannel> {
    if (this.disposed) return Promise.reject(new WorldClosedError())
    const key = user ?? ''
    const existing = this.controls.get(key)
    if (existing !== undefined) {
      return existing.then(channel => channel.alive ? channel : this.replaceControl(key, user), () => this.replaceControl(key, user))
    }
    return this.replaceControl(key, user)
  }

  private replaceControl(key: string, user: string | undefined): Promise<ControlChannel> {
    const started = (async () => {
      const { exec, stream } = await this.startExec(['sh', '-s'], { tty: false, user })
      const stdout = new PassThrough()
      const stderr = new PassThrough()
      this.docker.modem.demuxStream(stream, stdout, stderr)
      stderr.resume()
      const end = (): void => { stdout.end(); stderr.end() }
      stream.once('end', end)
      stream.once('close', end)
      stream.on('error', (error: Error) => stdout.destroy(error))
      void exec
      const control = await ControlChannel.open({
        stdin: stream,
        stdout,
        // Half-close first so the final `quit` request reaches the program; then drop the socket.
        close: () => {
          stream.end()
          setTimeout(() => stream.destroy(), 1_000).unref()
        },
      }, this.describe(user), { requestTimeoutMs: this.controlRequestTimeoutMs })
      // Registered before any session of this client can start through it.
      try {
        await this.ownership?.adopt(control)
      } catch (error) {
        control.close()
        throw error
      }
      // The user is known to exist now: start its pooled execs (registered first, so a client
      // that dies from here on leaves them tagged for the next client's reaper).
      this.pool.warm(user)
      // A channel that fails while the world lives (its program killed, a request timed out) is
      // replaced at once, not at the next request: the replacement's registration is what keeps
      // this client's sessions from looking gone to another client, which confirms a gone client
      // over REAP_CONFIRM_MS (remote/ownership.ts). At most one replacement a second, so a dying
      // world is not hammered.
      const openedAt = Date.now()
      void control.closed.then(() => {
        const replace = (): void => {
          if (!this.disposed && this.controls.get(key) === started) this.control(user).catch(() => undefined)
        }
        setTimeout(replace, Math.max(0, 1_000 - (Date.now() - openedAt))).unref()
      })
      return control
    })()
    this.controls.set(key, started)
    started.catch(() => { if (this.controls.get(key) === started) this.controls.delete(key) })
    return started
  }

  /**
   * Start an exec and return its hijacked stream.
   * @param cmd - exec argv (run without a shell by the engine).
   * @throws TargetNotRunningError when the container stopped; EngineUnavailableError when the engine is gone.
   */
  async startExec(cmd: string[], options: ExecStartOptions): Promise<StartedExec> {
    if (this.disposed) throw new WorldClosedError()
    const container = this.docker.getContainer(this.containerId)
    try {
      const exec = await container.exec({
        Cmd: cmd,
        AttachStdin: options.stdin ?? true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: options.tty,
        ...(options.user !== undefined ? { User: options.user } : {}),
        ...(options.env !== undefined && options.env.length > 0 ? { Env: [...options.env] } : {}),
      })
      const stream = await exec.start({ hijack: true, stdin: options.stdin ?? true, Tty: options.tty } as Docker.ExecStartOptions)
      // Attached here, where the socket is handed over: an unheard 'error' (a reset engine
      // connection) would throw. Bytes and the end need no such care: the socket's Readable
      // buffers them until the caller reads, and exit facts come from ExecInspect, not events.
      stream.on('error', () => undefined)
      if ('setNoDelay' in stream && typeof stream.setNoDelay === 'function') stream.setNoDelay(true)
      return { exec, stream }
    } catch (error) {
      // The container existed when the world opened: a 404 now means it ended and was removed
      // (a managed container's AutoRemove, or someone's `docker rm`), which is "not running".
      if ((error as { statusCode?: number }).statusCode === 404) throw new TargetNotRunningError(`${this.describe(options.user)} no longer exists: it ended and was removed`, { cause: error })
      throw engineError(error, this.describe(options.user))
    }
  }

  /**
   * Run `sh -c SCRIPT` as `user` in a PTY exec: the pool's standby (started ahead of need; the
   * engine's exec start is off the critical path) or, where standbys cannot run, a fresh exec.
   * Either way the script runs as the exec's own process, session leader of the engine's PTY.
   * @returns the transport the world-neutral terminal drives.
   * @throws TargetNotRunningError, EngineUnavailableError, WorldClosedError (see {@link startExec}).
   */
  async openTerminal(script: string, user: string | undefined): Promise<TerminalTransport> {
    const standby = await this.pool.standby(user, script)
    const { exec, stream } = standby ?? await this.startExec(['/bin/sh', '-c', script], { tty: true, user })
    const output = new PassThrough()
    stream.pipe(output)
    stream.once('close', () => output.end())
    stream.on('error', () => output.end())
    return {
      output,
      write: data => new Promise<void>((resolve, reject) => {
        if (stream.destroyed || stream.writableEnded) {
          reject(new TransportError(`${this.describe(user)}: the terminal's attach stream is closed`))
          return
        }
        stream.write(data, error => error ? reject(new TransportError(`${this.describe(user)}: write failed: ${error.message}`, { cause: error })) : resolve())
      }),
      resize: async (rows, cols) => {
        await exec.resize({ h: rows, w: cols })
      },
      exit: () => this.execOutcome(exec, user),
      close: () => { stream.destroy() },
      sizeSetAtStart: standby !== undefined,
    }
  }

  /**
   * Run dsh-pty (remote/pty-holder/), the verified `copy`, as `user` on a non-TTY exec with stdin: the
   * pool's holder standby (the engine's exec start off the critical path) or a fresh exec.
   * @returns the holder's process transport, for remote/pty-holder/held-terminal.ts.
   * @throws TargetNotRunningError, EngineUnavailableError, WorldClosedError (see {@link startExec}).
   */
  async openHolder(copy: WorldToolCopy, user: string | undefined): Promise<ProcessTransport> {
    const standby = await this.pool.holderStandby(user, copy)
    if (standby !== undefined) {
      const transport = this.processTransport(standby, user, true)
      if (await holderSpoke(transport.stdout)) return transport
      // A standby that died before its holder spoke: a fresh exec, once.
      transport.close()
    }
    return this.processTransport(await this.startExec(['/bin/sh', '-c', holderScript(copy, this.ownership?.newTag())], { tty: false, user, stdin: true }), user, true)
  }

  /**
   * Run `sh -c SCRIPT` as `user` without a PTY: on one of the pool's launchers (an exec started
   * ahead of need, so no engine exec start on this path, see exec-pool/boot-scripts.ts; with
   * stdin, as the launcher's last run), or, where launchers cannot run, in a fresh non-TTY exec,
   * its multiplexed stream split into stdout and stderr (with backpressure, see demux.ts).
   * @param options.stdin - attach stdin (`end()` on the returned stdin half-closes the socket,
   *   which the engine turns into EOF on the process's stdin).
   * @returns the transport the world-neutral process handle drives.
   * @throws TargetNotRunningError, EngineUnavailableError, WorldClosedError (see {@link startExec}).
   */
  async openProcess(script: string, user: string | undefined, options: { stdin: boolean }): Promise<ProcessTransport> {
    const launched = await this.pool.launch(user, script, options)
    if (launched !== undefined) return launched
    return this.processTransport(await this.startExec(['/bin/sh', '-c', script], { tty: false, user, stdin: options.stdin }), user, options.stdin)
  }

  /** The process transport of a started non-TTY exec: its multiplexed stream split (with backpressure, see demux.ts). */
  private processTransport({ exec, stream }: StartedExec, user: string | undefined, stdin: boolean): ProcessTransport {
    const { stdout, stderr } = demuxDockerStream(stream)
    stream.on('error', () => undefined)
    return {
      stdout,
      stderr,
      stdin: stdin ? stream : undefined,
      exit: () => this.execOutcome(exec, user),
      close: () => { stream.destroy() },
    }
  }

  /**
   * Exit facts of a finished exec (ExecInspect). The engine reports a signal death as exit
   * code 128+N; that is passed on as the exit code, since a voluntary `exit 137` looks the same.
   * @throws TransportError when the container stopped or the engine vanished (the exec did not
   *   end on its own, so there is no exit status).
   */
  private async execOutcome(exec: Docker.Exec, user: string | undefined): Promise<SubprocessOutcome> {
    for (let attempt = 0; attempt < 100; attempt += 1) {
      let info: Docker.ExecInspectInfo
      try {
        info = await exec.inspect()
      } catch (error) {
        throw new TransportError(`${this.describe(user)}: lost the terminal: ${engineError(error, 'exec inspect').message}`, { cause: error })
      }
      if (!info.Running) {
        if (!(await this.alive(user))) throw new TransportError(`${this.describe(user)}: the container stopped while the terminal was live`)
        return { exitCode: info.ExitCode ?? null, signal: null }
      }
      // The attach stream can close a moment before the engine records the exit.
      await delay(attempt < 20 ? 5 : 50)
    }
    if (!(await this.running())) throw new TransportError(`${this.describe(user)}: the container stopped while the terminal was live`)
    throw new TransportError(`${this.describe(user)}: the terminal's attach stream closed but the exec still runs`)
  }

  /**
   * True while the container's processes run: the engine says it runs AND a control channel as
   * `user` answers a ping. Inspect alone is not enough: when a container is killed, the
   * engine reports its execs' exits while it still shows the container Running (measured: 6 of
   * 8 kills), so an exec that died with its container looked like a normal exit. A dead
   * channel is replaced by a fresh exec, which cannot start or answer in a dying container.
   *
   * Asked in shared rounds per user (remote/rounds.ts): every terminal's exit asks it, and 100
   * terminals closed at once each asking alone put 100 pings in the control channel's queue
   * and 100 loops of container inspects every 20 ms on the engine (most of a 12 s close here).
   * A round starts after the call, so an answer never predates the exit that asked.
   */
  alive(user: string | undefined): Promise<boolean> {
    const key = user ?? ''
    let rounds = this.aliveRounds.get(key)
    if (rounds === undefined) {
      rounds = new SharedRounds(() => this.aliveOnce(user))
      this.aliveRounds.set(key, rounds)
    }
    return rounds.ask()
  }

  /** One check of {@link alive}. */
  private async aliveOnce(user: string | undefined): Promise<boolean> {
    if (!(await this.running())) return false
    let settled = false
    const answered = (async () => {
      try {
        await (await this.control(user)).request('ping')
        return true
      } catch {
        return false
      }
    })()
    // A fresh exec in a dying container may neither start nor fail until the engine catches
    // up; meanwhile the engine's own state turning to stopped answers first.
    const stopped = (async () => {
      while (!settled) {
        await delay(20)
        if (!settled && !(await this.running())) return false
      }
      return true
    })()
    // Bounded: a container frozen between the checks (docker pause) never answers.
    let timer: NodeJS.Timeout | undefined
    const frozen = new Promise<'frozen'>(resolve => { timer = setTimeout(() => resolve('frozen'), ALIVE_PING_BOUND_MS) })
    const result = await Promise.race([answered, stopped, frozen]).finally(() => {
      settled = true
      clearTimeout(timer)
    })
    return result === 'frozen' ? await this.running() : result
  }

  /**
   * The engine's state of the container. Docker reports a paused container as Running AND
   * Paused: its processes are frozen, not gone.
   */
  async state(): Promise<ContainerState> {
    try {
      const info = await this.docker.getContainer(this.containerId).inspect()
      if (!info.State.Running) return 'ended'
      return info.State.Paused ? 'paused' : 'running'
    } catch (error) {
      return (error as { statusCode?: number }).statusCode === 404 ? 'ended' : 'unknown'
    }
  }

  /**
   * True when nothing can still run in the container, so a dead control channel leaves nothing
   * to stop (the `worldEnded` hook of its terminals and processes). A PAUSED container has not
   * ended: its processes resume on unpause. Not just `state()`: a killed container shows
   * Running for a moment after its execs died (see {@link alive}), so a Running one that does
   * not answer is asked again; a pause or unpause between the looks is seen by the next one.
   * An engine that does not answer counts as ended, as before (nothing can be proven either way).
   */
  async ended(user: string | undefined): Promise<boolean> {
    for (let look = 0; look < 3; look += 1) {
      const state = await this.state()
      if (state === 'paused') return false
      if (state !== 'running') return true
      if (await this.alive(user)) return false
    }
    // Still shown Running and unpaused, yet no control program can start or answer: the
    // engine lags behind a kill (alive() above).
    return true
  }

  /**
   * A fresh control channel for a teardown whose channel failed (e.g. a request timed out):
   * the `recoverControl` hook of terminals and processes.
   * @throws ControlChannelError when the container is paused (its processes are frozen, so
   *   nothing can be stopped and quiescence cannot be proven until it is unpaused), or when it
   *   stopped (then {@link ended} is true, and nothing is left to stop).
   */
  async recoverControl(user: string | undefined): Promise<ControlChannel> {
    const paused = (): ControlChannelError => this.pausedRefusal(user)
    const state = await this.state()
    if (state === 'paused') throw paused()
    if (state === 'ended') throw new ControlChannelError(`${this.describe(user)} is not running: no control channel can start`)
    // A fresh exec in a dying or freezing container may neither start nor fail until the
    // engine catches up: the engine's own state answers first then (as in alive()).
    let settled = false
    const watch = (async (): Promise<never> => {
      for (;;) {
        await delay(50)
        if (settled) return new Promise<never>(() => undefined)
        const now = await this.state()
        if (settled) return new Promise<never>(() => undefined)
        if (now === 'paused') throw paused()
        if (now === 'ended') throw new ControlChannelError(`${this.describe(user)} stopped while a control channel started`)
      }
    })()
    try {
      return await Promise.race([this.control(user), watch])
    } finally {
      settled = true
    }
  }

  /**
   * Fail with the paused container's refusal (the one {@link recoverControl} gives) when the
   * engine says the container is paused now, as ContainerInspect says (one round trip, a few
   * ms); resolve otherwise, an engine that does not answer included (nothing is known then).
   * The `refuseFrozen` hook of terminals (remote/terminal.ts): a held shell's parent that does
   * not answer in a paused container is not waited for as through a transport outage.
   * @throws ControlChannelError when the container is paused.
   */
  async refuseIfPaused(user: string | undefined): Promise<void> {
    if (await this.state() === 'paused') throw this.pausedRefusal(user)
  }

  /** What every probe, signal and teardown of a paused container's programs is refused with. */
  private pausedRefusal(user: string | undefined): ControlChannelError {
    return new ControlChannelError(`${this.describe(user)} is paused: its processes are frozen, not ended, so nothing there can be probed, signalled or proven quiescent; unpause the container and retry`)
  }

  /** True once the engine no longer knows the container (inspect answers 404). */
  private async removed(): Promise<boolean> {
    return this.docker.getContainer(this.containerId).inspect().then(() => false, (error: { statusCode?: number }) => error.statusCode === 404)
  }

  /** True while the container runs (false when stopped, paused, removed, or the engine is gone). */
  async running(): Promise<boolean> {
    return (await this.state()) === 'running'
  }

  /**
   * Close every control channel and, for a managed container, remove it (force).
   * Idempotent. Terminals must be terminated first by the owner.
   */
  async dispose(): Promise<void> {
    if (this.disposed) return
    this.disposed = true
    // The pooled execs first, while the engine still shows them: a removed container proves
    // nothing about what ran in an attached one.
    const pooled = await this.pool.dispose().then(() => undefined, (error: unknown) => error)
    this.stateWatch.close()
    const controls = await Promise.allSettled([...this.controls.values()])
    for (const outcome of controls) if (outcome.status === 'fulfilled') outcome.value.close()
    this.controls.clear()
    if (this.managed) {
      // Closing the lifeline alone ends the container (and AutoRemove removes it); the forced
      // remove makes that done before dispose returns. 404/409: it is already gone or going.
      this.lifeline?.destroy()
      const container = this.docker.getContainer(this.containerId)
      await container.remove({ force: true }).catch((error: unknown) => {
        const status = (error as { statusCode?: number }).statusCode
        if (status !== 404 && status !== 409) throw engineError(error, `removing ${this.describe()}`)
      })
      // A 409 (AutoRemove already removing it) returns early: wait until the engine forgot it.
      for (let look = 0; look < 200 && !(await this.removed()); look += 1) await delay(50)
      // Gone with the container: nothing pooled can still run.
      return
    }
    if (pooled !== undefined) throw pooled
  }
}

/**
 * Managed containers (labelled {@link MANAGED_LABEL}) that no client holds any more and the
 * engine did not remove: created but never started for at least `minAgeMs` (the client died
 * between create and start), or stopped (AutoRemove did not run, e.g. the engine restarted).
 * A running managed container is never a leftover: its pid 1 lives only while its client's
 * lifeline is open (see {@link DockerWorld.open}).
 * @param minAgeMs - how long a created container may wait for its start (ms, default 60 000).
 * @throws EngineUnavailableError when the engine does not answer.
 */
export async function managedLeftovers(docker: Docker, minAgeMs = 60_000): Promise<Docker.ContainerInfo[]> {
  let listed: Docker.ContainerInfo[]
  try {
    listed = await docker.listContainers({ all: true, filters: { label: [MANAGED_LABEL] } })
  } catch (error) {
    throw engineError(error, 'listing managed containers')
  }
  const now = Date.now() / 1000
  return listed.filter(info => info.State === 'created' ? now - info.Created >= minAgeMs / 1000 : info.State !== 'running' && info.State !== 'paused' && info.State !== 'restarting' && info.State !== 'removing')
}

function assertRunning(info: Docker.ContainerInspectInfo, name: string): void {
  if (!info.State.Running) throw new TargetNotRunningError(`docker container ${name} is not running (status: ${info.State.Status})`)
  if (info.State.Paused) throw new TargetNotRunningError(`docker container ${name} is paused`)
}
