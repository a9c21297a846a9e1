/**
 * The keepalive of a world's node: its engine is asked `GET /_ping` every interval, each
 * answer awaited at most one interval; after `countMax + 1` unanswered in a row the node is
 * lost (a dead peer is known within interval x (countMax + 1), as the SSH world's ssh2 keepalive
 * does it). Then every request and stream on the node's connection ends with
 * {@link SwarmNodeLostError} (endpoints.ts `fail`), so nothing waits on a peer that will never
 * answer, and the Docker world's handles reject as they do when a container dies.
 * @module dsh-remote-worlds/providers/swarm/node-watch
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
  private misses = 0
  private probing = false
  private stopped = false

  /**
   * Start watching.
   * @param where - the node for messages, e.g. `node dsh-swarm-2 (j1ztfrfvg19i)`.
   */
  constructor(private readonly connection: EngineConnection, private readonly nodeId: string, private readonly where: string, private readonly settings: KeepaliveSettings = DEFAULT_KEEPALIVE) {
    this.lost = new Promise(resolve => { this.settle = resolve })
    this.timer = setInterval(() => { void this.probe() }, settings.intervalMs)
    this.timer.unref()
  }

  private async probe(): Promise<void> {
    if (this.probing || this.stopped) return
    this.probing = true
    try {
      const answered = await this.connection.answers(this.settings.intervalMs)
      if (this.stopped) return
      this.misses = answered ? 0 : this.misses + 1
      if (this.misses > this.settings.countMax) {
        const bound = this.settings.intervalMs * (this.settings.countMax + 1)
        this.declare(new SwarmNodeLostError(`${this.where} was lost: its engine ${this.connection.host} did not answer for ${bound} ms (keepalive ${this.settings.intervalMs} ms x ${this.settings.countMax + 1}); the world's task, its terminals and processes are gone with it: open a new world (the swarm places it on a node that answers)`, this.nodeId))
      }
    } finally {
      this.probing = false
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
