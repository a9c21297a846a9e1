/**
 * The keepalive of a world's node: its engine is asked `GET /_ping` every interval (one ask in
 * flight at a time, each awaited up to the whole bound); when no answer has come for interval x
 * (countMax + 1) the node is lost (a dead peer is known within that bound, as the SSH world's
 * ssh2 keepalive does it). Then every request and stream on the node's connection ends with
 * {@link SwarmNodeLostError} (endpoints.ts `fail`), so nothing waits on a peer that will never
 * answer, and the Docker world's handles reject as they do when a container dies.
 *
 * Silence is judged only on a tick that came on time: when this process's event loop was stalled
 * (a tick more than two intervals after the last), an answer may be waiting unread behind the
 * timer (Node runs timers before I/O), so that tick only asks again.
 */
import type { EngineConnection } from './endpoints.ts'
import { SwarmNodeLostError } from './errors.ts'

/** Keepalive settings: probe interval (ms) and how many probes may go unanswered before the one that decides. */
export interface KeepaliveSettings {
  intervalMs: number
  countMax: number
}

/** The defaults: 1 s x 3 (a lost node is known within 4 s), as the SSH world's. */
export const DEFAULT_KEEPALIVE: Readonly<KeepaliveSettings> = Object.freeze({ intervalMs: 1_000, countMax: 3 })

/** One node's keepalive (see the module documentation). */
export class NodeWatch {
  /** Settles with the node's loss; never rejects, never settles while the node answers. */
  readonly lost: Promise<SwarmNodeLostError>
  private settle!: (error: SwarmNodeLostError) => void
  private timer: NodeJS.Timeout | undefined
  private lastAnswer = Date.now()
  private lastTick = Date.now()
  private asking = false
  private stopped = false

  /**
   * Start watching.
   * @param where - the node for messages, e.g. `node dsh-swarm-2 (j1ztfrfvg19i)`.
   */
  constructor(private readonly connection: EngineConnection, private readonly nodeId: string, private readonly where: string, private readonly settings: KeepaliveSettings = DEFAULT_KEEPALIVE) {
    this.lost = new Promise(resolve => { this.settle = resolve })
    this.timer = setInterval(() => this.tick(), settings.intervalMs)
    this.timer.unref()
  }

  /** The bound of silence after which the node is lost (ms). */
  get boundMs(): number {
    return this.settings.intervalMs * (this.settings.countMax + 1)
  }

  private tick(): void {
    if (this.stopped) return
    const now = Date.now()
    const onTime = now - this.lastTick <= 2 * this.settings.intervalMs
    this.lastTick = now
    if (!this.asking) {
      this.asking = true
      void this.connection.answers(this.boundMs).then(answered => {
        this.asking = false
        if (answered) this.lastAnswer = Date.now()
      })
    }
    if (onTime && now - this.lastAnswer > this.boundMs) {
      this.declare(new SwarmNodeLostError(`${this.where} was lost: its engine ${this.connection.host} did not answer for ${this.boundMs} ms (keepalive ${this.settings.intervalMs} ms x ${this.settings.countMax + 1}); the world's task, its terminals and processes are gone with it: open a new world (the swarm places it on a node that answers)`, this.nodeId))
    }
  }

  /** Declare the node lost now (also from outside: an engine that refuses every connection). */
  declare(error: SwarmNodeLostError): void {
    if (this.stopped) return
    this.stop()
    this.connection.fail(error)
    this.settle(error)
  }

  /** Stop probing. Idempotent. */
  stop(): void {
    this.stopped = true
    clearInterval(this.timer)
  }
}
