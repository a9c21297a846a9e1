/**
 * The exec pool of one Docker world: per exec user, reusable launchers for ordinary processes
 * and one standby exec for the next terminal (boot-scripts.ts says why and what runs): a TTY
 * exec waiting for the terminal wrapper, or, once the world's terminals are known to run on
 * dsh-pty (remote/pty-holder/), a holder waiting for its spawn frame (holder-standby.ts).
 *
 * - **Launchers.** A spawn takes an idle launcher, or starts one (what a fresh exec costs);
 *   after its run the launcher waits for the next spawn. At most {@link MAX_IDLE_LAUNCHERS} wait
 *   per user; more are retired as they come free. A process whose stdin is attached is a
 *   launcher's last run: it takes the exec's own stdin (its EOF is the exec's stdin closing),
 *   and another launcher is started for the spawns after it.
 * - **Standby.** A terminal takes the standby (waiting for it if it is still starting) and the
 *   next one starts 250 ms later, so a world's terminals after the first start on a warm exec.
 * - **Warm-up.** {@link ExecPool.warm} starts one launcher and one standby for a user, when the
 *   world's control channel for that user first opened.
 * - **Fallback.** Where the world lacks `cat` (launchers) or `stty` (standbys), that kind is
 *   switched off for the world and spawns use fresh execs, as they did before the pool.
 * - **Lifetime.** Every pooled exec carries a session tag of this client (remote/ownership.ts),
 *   so a client that dies leaves nothing that the next client's reaper does not end; a
 *   launcher also ends by itself when its socket closes. {@link ExecPool.dispose} ends them all
 *   and proves it with ExecInspect.
 * @module dsh-remote-worlds/providers/docker/exec-pool/pool
 */
import { setTimeout as delay } from 'node:timers/promises'
import type { SubprocessOutcome } from '@deepseek-ai/dsh-subprocess'
import { CleanupFailedError, WorldClosedError } from '../../remote/errors.ts'
import type { ProcessTransport } from '../../remote/process.ts'
import type { WorldToolCopy } from '../../remote/world-tools/launch.ts'
import { SESSION_TAG_VARIABLE } from '../../remote/ownership.ts'
import { ProcessLauncher } from './launcher.ts'
import { PreStartRefusedError } from './ready.ts'
import { HolderStandby } from './holder-standby.ts'
import { PtyStandby } from './standby.ts'
import type { StartExec, StartedExec } from './started-exec.ts'

/** Idle launchers kept per exec user (an idle one is one `sh` reading its stdin). */
export const MAX_IDLE_LAUNCHERS = 8

/** How long after a terminal took the standby the next one starts (ms); see refillStandby. */
const STANDBY_REFILL_DELAY_MS = 250

/** Retired launchers kept for disposal's proof before the ended ones are pruned. */
const RETIRED_PRUNE_AT = 64

/** How long disposal waits for ExecInspect to report every pooled exec ended (ms). */
const DISPOSE_PROOF_BOUND_MS = 10_000

/** Options of {@link ExecPool}. */
export interface ExecPoolOptions {
  /** The world's exec start. */
  startExec: StartExec
  /** A fresh session tag of this client for each pooled exec; undefined: untagged. */
  newTag?: (() => string) | undefined
  /** World description for messages, per user. */
  describe: (user: string | undefined) => string
  /** The exit facts of a finished exec of `user` (ExecInspect), for a launcher's stdin run. */
  execOutcome: (exec: StartedExec['exec'], user: string | undefined) => Promise<SubprocessOutcome>
  /**
   * The engine's view of the container (state-watch.ts): pooled execs are used only while it is
   * `usable` (running, not paused), and only those started in the current `epoch` (since the
   * container last died). Undefined: always usable.
   */
  state?: { readonly usable: boolean; readonly epoch: number } | undefined
}

/** A standby of either kind. */
type TerminalStandby = PtyStandby | HolderStandby

/** The pool of one exec user. */
interface UserPool {
  readonly idle: ProcessLauncher[]
  /** Every launcher whose stream is open (idle or busy). */
  readonly launchers: Set<ProcessLauncher>
  /** The execs of launchers whose stream closed, until disposal proves them ended. */
  readonly retired: Set<StartedExec['exec']>
  /** Standbys not yet proven ended (the waiting one, and ones quit or dropped). */
  readonly standbys: Set<Promise<TerminalStandby>>
  /** The warm-up's launcher while it starts: the first spawn claims it rather than starting another. */
  warming: Promise<ProcessLauncher> | undefined
  /** The standby the next terminal takes. */
  next: Promise<TerminalStandby> | undefined
  /** The holder's copy once terminals asked for holder standbys; undefined: TTY standbys. */
  holder: WorldToolCopy | undefined
  launchersOff: boolean
  standbyOff: boolean
}

/** The exec pool of one world; see the module documentation. */
export class ExecPool {
  private readonly options: ExecPoolOptions
  private readonly users = new Map<string, UserPool>()
  private disposed = false

  constructor(options: ExecPoolOptions) {
    this.options = options
  }

  /** Start one launcher and one standby for `user` in the background (once per user). */
  warm(user: string | undefined): void {
    if (this.disposed || this.users.has(user ?? '') || !this.usable) return
    const pool = this.of(user)
    this.warmLauncher(user, pool)
    pool.next = this.startStandby(user, pool)
  }

  /**
   * Run `script` on an idle launcher of `user`, or on a new one.
   * @param options.stdin - the run takes the launcher's stdin, as a fresh exec's (its last run,
   *   launcher.ts); another launcher is then started for the spawns after it, unless one waits.
   *   Without it the run's stdin is /dev/null (a process wrapper for stdin `ignore`).
   * @returns its transport; undefined when launchers are off in this world (the caller starts
   *   a fresh exec).
   * @throws the world's typed errors when no exec can start (e.g. TargetNotRunningError).
   */
  async launch(user: string | undefined, script: string, options: { stdin?: boolean } = {}): Promise<ProcessTransport | undefined> {
    if (this.disposed) throw new WorldClosedError()
    const pool = this.of(user)
    // A paused container would run the spec when unpaused; a fresh exec is refused at once.
    if (pool.launchersOff || !this.usable) return undefined
    let launcher = pool.idle.pop()
    while (launcher !== undefined && !this.current(launcher)) {
      if (launcher.idle) launcher.retire()
      launcher = pool.idle.pop()
    }
    if (launcher === undefined && pool.warming !== undefined) {
      const warming = pool.warming
      pool.warming = undefined
      launcher = await warming.catch(() => undefined)
    }
    if (launcher?.idle !== true) {
      try {
        launcher = await this.startLauncher(user, pool)
      } catch (error) {
        if (error instanceof PreStartRefusedError) return undefined
        throw error
      }
    }
    if (options.stdin === true) this.refillLaunchers(user, pool)
    return launcher.run(script, options)
  }

  /**
   * Hand a terminal wrapper to `user`'s TTY standby (waiting for it while it starts, starting one
   * when there is none), and start the next standby.
   * @returns the started exec running the wrapper; undefined when standbys are off in this
   *   world (the caller starts a fresh exec).
   * @throws the world's typed errors when no exec can start.
   */
  async standby(user: string | undefined, script: string): Promise<StartedExec | undefined> {
    if (this.disposed) throw new WorldClosedError()
    const pool = this.of(user)
    if (pool.standbyOff || pool.holder !== undefined || !this.usable) return undefined
    let standby: TerminalStandby
    try {
      standby = await this.claimStandby(user, pool, waiting => waiting instanceof PtyStandby, unfit => unfit.drop())
    } catch (error) {
      if (error instanceof PreStartRefusedError) return undefined
      throw error
    }
    return (standby as PtyStandby).take(script)
  }

  /**
   * Take `user`'s holder standby for a terminal (waiting for it while it starts, starting one
   * when there is none or it runs another path), and start the next one. From the first call
   * on, the user's standbys are holders: a TTY standby waiting is ended.
   * @param copy - dsh-pty's copy in the world (world-tools/launch.ts), as installed: a standby
   *   started from another object (an earlier copy, since refused and made anew) is not taken.
   * @returns the started exec running the holder; undefined while the container is paused (the
   *   caller's fresh exec then fails with the world's own error).
   * @throws the world's typed errors when no exec can start.
   */
  async holderStandby(user: string | undefined, copy: WorldToolCopy): Promise<StartedExec | undefined> {
    if (this.disposed) throw new WorldClosedError()
    const pool = this.of(user)
    if (!this.usable) return undefined
    pool.holder = copy
    // A TTY standby (the warm-up's, from before the holder was known) is ended through its own
    // quit, and stays in `standbys` for disposal's proof.
    const standby = await this.claimStandby(user, pool, waiting => waiting instanceof HolderStandby && waiting.copy === copy, unfit => unfit instanceof PtyStandby ? unfit.quit() : unfit.drop())
    return (standby as HolderStandby).take()
  }

  /**
   * The standby waiting for `user`'s next terminal, when it `fits` and is current; otherwise
   * it is handed to `discard`, and a new one (of the pool's kind, see {@link startStandby}) is
   * started and waited for, so a world that cannot start execs fails here with its own typed
   * error. Either way the next standby is scheduled.
   * @returns the standby, no longer the pool's: from now on it is a terminal, which its own
   *   handle ends and proves ended.
   * @throws the new standby's start failure.
   */
  private async claimStandby(user: string | undefined, pool: UserPool, fits: (waiting: TerminalStandby) => boolean, discard: (unfit: TerminalStandby) => void): Promise<TerminalStandby> {
    let pending = pool.next
    pool.next = undefined
    let standby = pending === undefined ? undefined : await pending.catch(() => undefined)
    if (standby === undefined || !fits(standby) || !this.current(standby)) {
      // None waiting, or the one waiting is of the other kind, died, or is from before the
      // container last died.
      if (standby !== undefined) discard(standby)
      pending = this.startStandby(user, pool)
      standby = await pending
    }
    if (pending !== undefined) pool.standbys.delete(pending)
    this.refillStandby(user, pool)
    return standby
  }

  /**
   * End every pooled exec and prove it: launchers get EOF on their stdin, standbys a zero-line
   * spec; then ExecInspect must report each one not running (a removed container counts).
   * Idempotent.
   * @throws CleanupFailedError when one still runs after {@link DISPOSE_PROOF_BOUND_MS}, or the
   *   engine could not say.
   */
  async dispose(): Promise<void> {
    this.disposed = true
    const execs: StartedExec['exec'][] = []
    for (const pool of this.users.values()) {
      pool.next = undefined
      pool.idle.length = 0
      for (const launcher of [...pool.launchers]) launcher.retire()
      execs.push(...pool.retired)
      pool.retired.clear()
      // A start in flight when the container was paused may not settle until it is unpaused:
      // wait for it within the proof's bound; one that settles later quits itself (startStandby).
      const standbys = await Promise.race([
        Promise.allSettled(pool.standbys),
        // Unref'd: a settled race must not hold a process that has nothing else to do.
        delay(DISPOSE_PROOF_BOUND_MS, undefined, { ref: false }).then(() => [] as PromiseSettledResult<TerminalStandby>[]),
      ])
      pool.standbys.clear()
      for (const outcome of standbys) {
        if (outcome.status !== 'fulfilled') continue
        outcome.value.quit()
        execs.push(outcome.value.exec)
      }
    }
    const deadline = Date.now() + DISPOSE_PROOF_BOUND_MS
    const running = await Promise.all(execs.map(async exec => {
      for (;;) {
        const state = await exec.inspect().then(info => info.Running ? 'running' : 'ended', (error: { statusCode?: number }) => error.statusCode === 404 ? 'ended' : 'unknown')
        if (state === 'ended') return undefined
        if (Date.now() >= deadline) return `${exec.id.slice(0, 12)} (${state})`
        await delay(10)
      }
    }))
    const left = running.filter(entry => entry !== undefined)
    if (left.length > 0) throw new CleanupFailedError([], `; pooled execs not proven ended: ${left.join(', ')}`)
  }

  /** True while pooled execs may take a spec (see {@link ExecPoolOptions.state}). */
  private get usable(): boolean {
    return this.options.state?.usable ?? true
  }

  /** True when `started` was started since the container last died, and it can still take a spec. */
  private current(started: ProcessLauncher | TerminalStandby): boolean {
    return started.epoch === (this.options.state?.epoch ?? 0) && (started instanceof ProcessLauncher ? started.idle : started.usable)
  }

  private of(user: string | undefined): UserPool {
    const key = user ?? ''
    let pool = this.users.get(key)
    if (pool === undefined) {
      pool = { idle: [], launchers: new Set(), retired: new Set(), standbys: new Set(), warming: undefined, next: undefined, holder: undefined, launchersOff: false, standbyOff: false }
      this.users.set(key, pool)
    }
    return pool
  }

  private env(): string[] {
    const tag = this.options.newTag?.()
    return tag === undefined ? [] : [`${SESSION_TAG_VARIABLE}=${tag}`]
  }

  private async startLauncher(user: string | undefined, pool: UserPool): Promise<ProcessLauncher> {
    try {
      const epoch = this.options.state?.epoch ?? 0
      const launcher = await ProcessLauncher.start(this.options.startExec, user, this.env(), this.options.describe(user), exec => this.options.execOutcome(exec, user))
      launcher.epoch = epoch
      pool.launchers.add(launcher)
      launcher.onIdle = idle => this.release(pool, idle)
      launcher.onEnded = ended => this.forget(pool, ended)
      if (launcher.hasEnded) this.forget(pool, launcher)
      if (this.disposed) {
        launcher.retire()
        throw new WorldClosedError()
      }
      return launcher
    } catch (error) {
      if (error instanceof PreStartRefusedError && error.reason === 'tool') pool.launchersOff = true
      throw error
    }
  }

  /** A launcher whose run ended: keep it idle, or retire it when enough wait. */
  private release(pool: UserPool, launcher: ProcessLauncher): void {
    if (!launcher.idle) return
    if (this.disposed || pool.idle.length >= MAX_IDLE_LAUNCHERS) {
      launcher.retire()
      return
    }
    pool.idle.push(launcher)
  }

  /**
   * A launcher whose stream closed: kept for disposal's proof. Kept bounded: past
   * {@link RETIRED_PRUNE_AT}, the ones ExecInspect already reports ended are dropped.
   */
  private forget(pool: UserPool, launcher: ProcessLauncher): void {
    pool.launchers.delete(launcher)
    const index = pool.idle.indexOf(launcher)
    if (index >= 0) pool.idle.splice(index, 1)
    pool.retired.add(launcher.exec)
    if (pool.retired.size < RETIRED_PRUNE_AT) return
    for (const exec of [...pool.retired]) {
      void exec.inspect().then(info => { if (!info.Running) pool.retired.delete(exec) }, () => undefined)
    }
  }

  /**
   * Start a launcher {@link STANDBY_REFILL_DELAY_MS} from now (off the critical path of the
   * run that used one up), unless one waits or starts by then: the next spawn finds it idle.
   */
  private refillLaunchers(user: string | undefined, pool: UserPool): void {
    const timer = setTimeout(() => {
      if (this.disposed || pool.launchersOff || pool.idle.length > 0 || pool.warming !== undefined || !this.usable) return
      this.warmLauncher(user, pool)
    }, STANDBY_REFILL_DELAY_MS)
    timer.unref()
  }

  /** Start a launcher that the next spawn claims while it starts, and that waits idle once started. */
  private warmLauncher(user: string | undefined, pool: UserPool): void {
    const warming = this.startLauncher(user, pool)
    pool.warming = warming
    warming.then(launcher => {
      if (pool.warming !== warming) return
      pool.warming = undefined
      this.release(pool, launcher)
    }, () => { if (pool.warming === warming) pool.warming = undefined })
  }

  /**
   * Start the next standby {@link STANDBY_REFILL_DELAY_MS} from now, unless a terminal took or
   * started one meanwhile: an exec start costs the engine ~40 ms of CPU, which on a small
   * machine would slow the very terminal that just took the standby.
   */
  private refillStandby(user: string | undefined, pool: UserPool): void {
    const timer = setTimeout(() => {
      if (this.disposed || (pool.standbyOff && pool.holder === undefined) || pool.next !== undefined) return
      pool.next = this.startStandby(user, pool)
    }, STANDBY_REFILL_DELAY_MS)
    timer.unref()
  }

  /** Start a standby of the user's kind: a holder once {@link holderStandby} named one, else a TTY standby. */
  private startStandby(user: string | undefined, pool: UserPool): Promise<TerminalStandby> {
    const epoch = this.options.state?.epoch ?? 0
    const kind: Promise<TerminalStandby> = pool.holder === undefined
      ? PtyStandby.start(this.options.startExec, user, this.env())
      : HolderStandby.start(this.options.startExec, user, this.env(), pool.holder)
    const starting = kind.then(standby => {
      standby.epoch = epoch
      return standby
    })
    pool.standbys.add(starting)
    starting.then(standby => {
      if (this.disposed) standby.quit()
    }, (error: unknown) => {
      pool.standbys.delete(starting)
      if (error instanceof PreStartRefusedError && error.reason === 'tool') pool.standbyOff = true
      // A failed start is not kept for the next terminal (it starts its own, and reports why).
      if (pool.next === starting) pool.next = undefined
    })
    return starting
  }
}

export { PreStartRefusedError }
