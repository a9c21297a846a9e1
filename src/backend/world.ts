/**
 * One small API that composes a remote world: a cordis Context with the upstream terminal
 * service, the upstream sandbox policy and the UNCHANGED `@deepseek-ai/dsh-terminal-bash` on
 * top of one of our runtimes, plus the owner (Agent) object those packages need.
 * The CLI and the tests use this; a DSH composition mounts the runtime plugin directly.
 * @module dsh-remote-worlds/backend/world
 */
import { Context } from '@deepseek-ai/cordis'
import AgentRegistry, { Inbox } from '@deepseek-ai/dsh-agent'
import type { Agent } from '@deepseek-ai/dsh-agent'
import SandboxPolicyService from '@deepseek-ai/dsh-sandbox-policy'
import SessionStore, { SessionId } from '@deepseek-ai/dsh-session'
import type { SubprocessRuntime } from '@deepseek-ai/dsh-subprocess'
import type { FileSystem } from '@deepseek-ai/dsh-fs'
import TerminalSessionService from '@deepseek-ai/dsh-terminal'
import type { TerminalReadResult, TerminalSendOperation, TerminalSendResult, TerminalSessionId, TerminalSignal, TerminalSignalResult } from '@deepseek-ai/dsh-terminal'
import * as terminalBash from '@deepseek-ai/dsh-terminal-bash'
import { randomUUID } from 'node:crypto'
import type { ResourceEvent, ResourceWatch } from '../providers/remote/resource-events.ts'
import type { TerminalScreen } from '../emulator/screen.ts'
import { ScreenUnavailableError, WorldClosedError } from '../providers/remote/errors.ts'
import { DISPOSAL_START_WAIT_MS, RemoteSubprocessRuntime, settledWithin } from '../providers/remote/runtime.ts'
import type { RemoteTerminalHandle } from '../providers/remote/terminal.ts'
import type { SandboxCompanion } from '../sandbox/companion.ts'
import { mountRemoteFileSystem } from '../files/remote-file-system.ts'
import { worldOwnerOf } from '../providers/remote/world-owner.ts'
import { WorldJobRegistry } from '../jobs/registry.ts'
import { type WorldNetwork, type WorldNetworkOptions, mountWorldNetwork } from '../network/world-network.ts'

/** terminal-bash settings a world may override (upstream defaults otherwise; ms and bytes). */
export interface TerminalTuning {
  /**
   * The shell's dialect: `'bash'` (default) or `'pwsh'` (PowerShell; terminal-bash then runs
   * `shellPath -NoLogo -NoProfile` and sets its prompt function). The program must exist IN the
   * world (`pwsh` in the image `dsh-remote-worlds/target-pwsh:bookworm`, docker/ensure-world.sh).
   */
  shellDialect?: 'bash' | 'pwsh'
  /** The shell program in the world (default: /bin/bash, or `pwsh` for the pwsh dialect). */
  shellPath?: string
  /** Its arguments (default: the dialect's). */
  shellArgs?: string[]
  pollIntervalMs?: number
  exactProbeAfterMs?: number
  idleSilenceMs?: number
  handoffGraceMs?: number
  timeoutMs?: number
  disposeGraceMs?: number
  rows?: number
  cols?: number
  scrollbackLines?: number
  scrollbackMaxBytes?: number
  maxReadBytes?: number
}

/**
 * A runtime plugin: a `SubprocessRuntime` subclass constructed by cordis as `new R(ctx, config)`,
 * optionally carrying the sandbox companion that provides a same-world `ctx.sandbox`.
 */
export type RuntimePlugin<C> = (new (ctx: Context, config: C) => SubprocessRuntime) & { sandboxCompanion?: SandboxCompanion<C> }

/** Options of {@link openWorld}. */
export interface OpenWorldOptions<C> {
  /** The runtime class (e.g. DockerSubprocessRuntime) and its config. */
  runtime: RuntimePlugin<C>
  runtimeConfig: C
  /** Sandbox mode; only `danger-full-access` runs without a `ctx.sandbox` provider. */
  mode?: 'read-only' | 'workspace-write' | 'danger-full-access'
  /**
   * Workspace root IN THE REMOTE WORLD; also the default cwd of new terminals.
   * Note: upstream sandbox-policy canonicalizes it with the LOCAL realpath when that path
   * exists locally too.
   */
  workspaceRoot: string
  /** terminal-bash tuning. */
  terminal?: TerminalTuning
  /**
   * The world's sandbox companion (src/sandbox): adjusts the runtime config to the policy (a
   * managed Docker container is created from it) and registers `ctx.sandbox`. Default: the
   * runtime class's static `sandboxCompanion`; `false` composes no sandbox (then only
   * `danger-full-access` can start terminals; terminal-bash refuses the others).
   */
  sandbox?: SandboxCompanion<C> | false
  /** Extra plugins to load before terminal-bash (e.g. another sandbox provider, with `sandbox: false`). */
  plugins?: readonly ((ctx: Context) => Promise<unknown>)[]
  /**
   * The filesystem half: `ctx.fs` in the same world (src/files, the `dsh-remote-worlds/fs`
   * plugin), loaded after the sandbox so it is confined as the shells are. Default: when the
   * runtime is one of this package's; false leaves `ctx.fs` out (a composition that brings its own).
   */
  fs?: boolean | { cwd?: string; diffBasisMaxBytes?: number; silenceMs?: number; durability?: 'written' | 'flushed' }
  /**
   * The owner agent's session id, which terminal-bash gives every terminal as DSH_SESSION_ID:
   * with persistence 'client', a later world of the same session and spec takes its held shells
   * back. Default: a fresh id.
   */
  session?: string
  /**
   * The world's network (src/network/world-network.ts): `'none'` (the confined modes' default:
   * lo only), `'allow'` with rules (connections through this client, judged and dialed here),
   * or `'full'` (danger-full-access's, and only its). A setting the world cannot enforce is
   * refused when the world opens.
   */
  network?: WorldNetworkOptions
}

/**
 * A send result with the resource-limit events the world's cgroup counted between the send's
 * start and its settlement (see {@link WorldTerminal.send}).
 */
export interface WorldSendResult extends TerminalSendResult {
  /**
   * OOM kills and refused forks counted while the send ran, e.g.
   * `[{ kind: 'oom_kill', count: 1, limitBytes: 268435456 }]`. Absent when nothing was
   * counted, or the world has no readable cgroup counters (`dsh-remote-worlds doctor` says which).
   * Counted per cgroup: another process of the same container (over SSH, the same login
   * session) hitting the limit during the send is reported too.
   */
  events?: ResourceEvent[] | undefined
}

/** A send operation whose result carries resource-limit events. */
export interface WorldSendOperation extends TerminalSendOperation {
  done: Promise<WorldSendResult>
}

/** A timed send result. */
export interface TimedSendResult extends WorldSendResult {
  /** Wall time from the write to settlement, in ms. */
  ms: number
}

/** One open persistent shell. */
export interface WorldTerminal {
  /** Registry id. */
  readonly id: TerminalSessionId
  /** Remote pid of the shell. */
  readonly pid: number | undefined
  /** Startup output. */
  readonly motd: string
  /**
   * Start a send; the operation can be cancelled (a real SIGINT to the foreground group). Its
   * result carries `events` (see {@link WorldSendResult}): the cgroup counters are read when
   * the send starts (queued on the control channel ahead of the write's own probes, not
   * awaited) and once more at settlement (one control round trip).
   */
  startSend(text: string, options?: { submit?: boolean; signal?: AbortSignal }): WorldSendOperation
  /** Send and wait for settlement. */
  send(text: string, options?: { submit?: boolean; signal?: AbortSignal }): Promise<TimedSendResult>
  /** Signal the foreground process group. */
  signal(signal: TerminalSignal): Promise<TerminalSignalResult>
  /** Read scrollback. */
  read(offset?: number, count?: number): TerminalReadResult
  /**
   * Top-level status.
   * @throws WorldClosedError once the world was disposed or detached (a detached held shell
   *   runs on, but no longer as this client's).
   */
  status(): { kind: 'running' } | { kind: 'exited'; exitCode: number | null; signal: string | null }
  /**
   * What the terminal shows now: `{ rows, cols, cursor: { row, col }, altScreen, lines }`
   * (emulator/screen.ts `TerminalScreen`; 0-based cursor, one trimmed string per row), after
   * every output byte received so far. `scrollback: n` adds up to n lines that scrolled off.
   * @throws ScreenUnavailableError when the world keeps no emulator for it (runtime setting
   *   `terminal: { emulator: false }`, a runtime that is not one of ours) or it was closed.
   */
  screen(options?: { scrollback?: number }): Promise<TerminalScreen>
  /**
   * Set the window size in character cells: the PTY's (the program gets SIGWINCH) and the
   * emulator's. terminal-bash keeps its own configured size for nothing else (it never resizes).
   * @throws ScreenUnavailableError for a runtime that is not one of ours; InvalidArgumentError for a bad size.
   */
  resize(rows: number, cols: number): Promise<void>
  /** Close and prove quiescence. */
  close(): Promise<void>
}

/** A composed world. */
export interface RemoteWorld {
  readonly ctx: Context
  readonly agent: Agent
  /** The runtime instance (`ctx.subprocess`). */
  readonly runtime: SubprocessRuntime
  /** The filesystem half (`ctx.fs`) in the same world; undefined with `fs: false`. */
  readonly fs: FileSystem | undefined
  /** The world's network setting in force (its live rules, its egress counts). */
  readonly network: WorldNetwork
  /** Open a persistent shell (cwd defaults to the workspace root). */
  open(options?: { cwd?: string; name?: string; signal?: AbortSignal }): Promise<WorldTerminal>
  /** Close every terminal, dispose the runtime (removing a managed container). */
  dispose(): Promise<void>
  /**
   * Persistence 'client': leave every held shell running in the world for a later world of the
   * same session to take back (until its TTL), then dispose as {@link dispose} does the rest.
   * @returns how many shells were left.
   */
  detach(): Promise<number>
}

/**
 * A minimal registered-agent stand-in that owns terminals (terminal services key sessions by
 * owner): a store-entered session and no model. Register it with `ctx.agents.register`.
 * @param ctx - a context with `ctx.sessions` (dsh-session's SessionStore).
 * @param options.cwd - the session header's cwd (a path in the world): where DSH's file tools
 *   resolve relative paths and ripgrep runs for this agent.
 */
export function ownerAgent(ctx: Context, rawId: string, options: { cwd?: string } = {}): Agent {
  const id = SessionId(rawId)
  const scope = ctx.plugin({ inject: ['sessions'], apply: () => {} })
  // A store-entered session publishes `session/event`, so upstream observers hold, e.g.
  // terminal-bash's fence: no `sandbox/mode` change while terminals are open.
  const session = options.cwd === undefined ? scope.ctx.sessions.create(id) : scope.ctx.sessions.create(id, { meta: { cwd: options.cwd } })
  return {
    id,
    options: {},
    session,
    inbox: new Inbox(session, { inserted: () => {}, discarded: () => {}, claimed: () => {} }),
    status: 'idle',
    ctx: scope.ctx,
    send: () => {},
    followup: () => {},
    steer: () => {},
    inject: () => {},
    cancel() {},
    runMaintenance: (task: (signal: AbortSignal) => unknown) => task(new AbortController().signal),
    whenIdle: () => Promise.resolve(),
  } as unknown as Agent
}

/**
 * The resource-limit watch of the runtime's world for the terminal with remote pid `pid`, when
 * the runtime is one of ours (a local runtime has none); undefined otherwise or when it fails.
 */
async function resourceWatchOf(runtime: SubprocessRuntime, pid: number | undefined): Promise<ResourceWatch | undefined> {
  if (!(runtime instanceof RemoteSubprocessRuntime)) return undefined
  return runtime.resourceWatch(pid).catch(() => undefined)
}

/**
 * Our handle of the terminal whose shell has remote pid `pid`.
 * @throws ScreenUnavailableError when the runtime is not one of ours or the terminal is gone.
 */
function remoteHandleOf(runtime: SubprocessRuntime, pid: number | undefined): RemoteTerminalHandle {
  if (!(runtime instanceof RemoteSubprocessRuntime)) throw new ScreenUnavailableError('this world\'s runtime keeps no terminal emulator (only the Docker and SSH runtimes of dsh-remote-worlds do)')
  const handle = pid === undefined ? undefined : runtime.terminal(pid)
  if (handle === undefined) throw new ScreenUnavailableError(`terminal ${pid ?? '(no pid)'} is closed`)
  return handle
}

/**
 * Compose a world: AgentRegistry, TerminalSessionService, SandboxPolicyService, the runtime,
 * optional plugins, then terminal-bash; register one owner agent.
 * @throws whatever the runtime's construction throws (e.g. InvalidArgumentError for bad config).
 */
export async function openWorld<C>(options: OpenWorldOptions<C>): Promise<RemoteWorld> {
  const ctx = new Context()
  let agent: Agent
  let network: WorldNetwork
  try {
    await ctx.plugin(SessionStore)
    await ctx.plugin(AgentRegistry)
    await ctx.plugin(TerminalSessionService)
    await ctx.plugin(SandboxPolicyService, { mode: options.mode ?? 'danger-full-access', workspaceRoot: options.workspaceRoot })
    const companion = options.sandbox === false ? undefined : options.sandbox ?? options.runtime.sandboxCompanion
    const policy = { mode: ctx.sandboxPolicy.defaultMode, workspaceRoot: ctx.sandboxPolicy.workspaceRoot }
    const runtimeConfig = companion?.configure === undefined ? options.runtimeConfig : companion.configure(options.runtimeConfig, policy)
    await ctx.plugin(options.runtime as never, runtimeConfig as never)
    if (companion !== undefined) await companion.plugin(ctx)
    // Default: whenever the runtime is one of ours (a local runtime brings no world to serve).
    const fs = options.fs ?? (worldOwnerOf(ctx.get('subprocess')) !== undefined)
    if (fs !== false) await mountRemoteFileSystem(ctx, fs === true ? {} : fs)
    // Before the first terminal: under 'allow', every program the world starts gets the proxy.
    const mounted = await mountWorldNetwork(ctx, options.network ?? {}, ctx.sandboxPolicy.defaultMode)
    network = mounted
    ctx.effect(() => () => mounted.close(), 'network teardown')
    for (const plugin of options.plugins ?? []) await plugin(ctx)
    await ctx.plugin(terminalBash, { ...options.terminal })
    agent = ownerAgent(ctx, options.session ?? `dsh-remote-${randomUUID()}`)
    ctx.agents.register(agent)
    // The session's background jobs held in the world (plugins may mount dsh-remote-worlds/jobs):
    // found again, and their output read back, before the world is handed out.
    const jobs = ctx.get('jobs')
    if (jobs instanceof WorldJobRegistry) await jobs.ready(agent)
  } catch (error) {
    // Disposal also removes a managed container the sandbox companion already created.
    await ctx.fiber.dispose().catch(() => undefined)
    throw error
  }
  const runtime = ctx.subprocess
  let disposed: Promise<void> | undefined
  /** Whether the world was left with {@link RemoteWorld.detach} rather than disposed. */
  let detached = false

  /**
   * Terminal opens in flight. A dispose or detach waits for them (bounded) before it lists the
   * terminals to close: a terminal handed out just after that list was taken would outlive the
   * world (under persistence 'client', held until its TTL).
   */
  const opening = new Set<Promise<unknown>>()
  const settleOpens = (): Promise<void> => settledWithin([...opening], DISPOSAL_START_WAIT_MS)

  const open = async (request: { cwd?: string; name?: string; signal?: AbortSignal } = {}): Promise<WorldTerminal> => {
    if (disposed !== undefined) throw new WorldClosedError()
    const spawning = ctx.terminals.spawn(agent, {
      type: 'shell',
      ...(request.name !== undefined ? { name: request.name } : {}),
      ...(request.cwd !== undefined ? { cwd: request.cwd } : {}),
    }, request.signal)
    opening.add(spawning)
    const forget = (): void => { opening.delete(spawning) }
    spawning.then(forget, forget)
    const created = await spawning
    const id = created.sessionId
    // Located now (once per control channel), so a send's first reading is not held up by it.
    const watch = await resourceWatchOf(runtime, created.pid)
    const startSend = (text: string, sendOptions: { submit?: boolean; signal?: AbortSignal } = {}): WorldSendOperation => {
      const before = watch?.snapshot()
      const operation = ctx.terminals.startSend(agent, id, { text, submit: sendOptions.submit ?? true, ...(sendOptions.signal !== undefined ? { signal: sendOptions.signal } : {}) })
      if (watch === undefined || before === undefined) return operation
      const done = operation.done.then(async (result): Promise<WorldSendResult> => {
        const events = await watch.eventsSince(await before)
        return events.length > 0 ? { ...result, events } : result
      })
      // As upstream's own `done`: a send that fails (the world died) before its caller awaits
      // `done` is not an unhandled rejection; the caller still sees it when it awaits.
      done.catch(() => undefined)
      return { done, readOutput: () => operation.readOutput(), cancel: () => operation.cancel() }
    }
    return {
      id,
      pid: created.pid,
      motd: created.motd,
      startSend,
      send: async (text, sendOptions) => {
        const started = performance.now()
        const result = await startSend(text, sendOptions).done
        return { ...result, ms: performance.now() - started }
      },
      signal: signal => ctx.terminals.signal(agent, id, signal),
      read: (offset = 0, count = 500) => ctx.terminals.read(agent, id, { offset, count }),
      status: () => {
        // The terminal service ends with the world: a detached shell goes on, but not this client's.
        if (disposed !== undefined) throw new WorldClosedError(`the world of terminal ${id} was ${detached ? 'detached (its held shells go on in the world)' : 'disposed'}: the terminal is no longer this client's`)
        return ctx.terminals.list(agent).find(snapshot => snapshot.sessionId === id)?.status ?? { kind: 'exited', exitCode: null, signal: null }
      },
      screen: async screenOptions => remoteHandleOf(runtime, created.pid).screen(screenOptions),
      resize: async (rows, cols) => remoteHandleOf(runtime, created.pid).resize(rows, cols),
      close: async () => { await ctx.terminals.kill(agent, id) },
    }
  }

  return {
    ctx,
    agent,
    runtime,
    fs: ctx.get('fs'),
    network,
    open,
    detach: async () => {
      detached ||= disposed === undefined
      const runtime = ctx.subprocess
      const left = runtime instanceof RemoteSubprocessRuntime ? runtime.detachHeldShells() : 0
      await (disposed ??= (async () => {
        await settleOpens()
        const open = ctx.terminals.list(agent)
        await Promise.allSettled(open.map(snapshot => ctx.terminals.kill(agent, snapshot.sessionId)))
        await ctx.fiber.dispose()
      })())
      return left
    },
    dispose: () => {
      disposed ??= (async () => {
        await settleOpens()
        const open = ctx.terminals.list(agent)
        const closes = await Promise.allSettled(open.map(snapshot => ctx.terminals.kill(agent, snapshot.sessionId)))
        await ctx.fiber.dispose()
        const failures = closes.flatMap(outcome => outcome.status === 'rejected' ? [outcome.reason as unknown] : [])
        if (failures.length > 0) throw new AggregateError(failures, 'closing terminals failed')
      })()
      return disposed
    },
  }
}
