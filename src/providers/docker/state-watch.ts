/**
 * The engine's view of one container, kept current from its event stream (Engine API
 * `GET /events`), so a question asked on every spawn costs no request.
 *
 * Why: a pre-started exec (exec-pool/) of a PAUSED container takes its spec and runs it when
 * the container is unpaused, maybe hours later; a fresh exec is refused at once by the engine
 * (409, "is paused"). So pooled execs are used only while this watch says the container runs
 * unpaused, and only those started since the container last died (`epoch`).
 * @module dsh-remote-worlds/providers/docker/state-watch
 */
import type { Readable } from 'node:stream'
import type Docker from 'dockerode'

/** The container events that change what a pooled exec may do (Engine API event actions). */
const WATCHED_ACTIONS = ['pause', 'unpause', 'die', 'start', 'destroy'] as const

/** The watch of one container; see the module documentation. */
export class ContainerStateWatch {
  private paused = false
  private gone = false
  private following = false
  private deaths = 0
  private stream: Readable | undefined
  private buffered = ''

  private constructor() {}

  /**
   * Follow `containerId`'s events from one second before now (the engine replays that second,
   * so a pause between the caller's inspect and this subscription is seen).
   * @returns the watch; one whose stream could not be opened reports {@link usable} false.
   */
  static async follow(docker: Docker, containerId: string): Promise<ContainerStateWatch> {
    const watch = new ContainerStateWatch()
    try {
      const stream = await docker.getEvents({
        since: Math.floor(Date.now() / 1000) - 1,
        filters: { container: [containerId], type: ['container'], event: [...WATCHED_ACTIONS] },
      }) as unknown as Readable
      watch.stream = stream
      watch.following = true
      stream.on('data', (chunk: Buffer) => watch.onData(chunk))
      const lost = (): void => { watch.following = false }
      stream.once('end', lost)
      stream.once('close', lost)
      stream.on('error', lost)
      // The watch must not keep a process alive that has nothing else to do.
      ;(stream as unknown as { socket?: { unref?: () => void } }).socket?.unref?.()
    } catch {
      watch.following = false
    }
    return watch
  }

  /** True while the engine's events are followed and the container runs, not paused. */
  get usable(): boolean {
    return this.following && !this.paused && !this.gone
  }

  /** How many times the container died since the watch began (an exec started before is gone). */
  get epoch(): number {
    return this.deaths
  }

  /** Stop following. Idempotent. */
  close(): void {
    this.following = false
    this.stream?.destroy()
  }

  private onData(chunk: Buffer): void {
    this.buffered += chunk.toString('utf8')
    let newline = this.buffered.indexOf('\n')
    while (newline >= 0) {
      const line = this.buffered.slice(0, newline).trim()
      this.buffered = this.buffered.slice(newline + 1)
      newline = this.buffered.indexOf('\n')
      if (line.length === 0) continue
      let action: unknown
      try {
        const event = JSON.parse(line) as { Action?: unknown; status?: unknown }
        action = event.Action ?? event.status
      } catch {
        continue
      }
      if (action === 'pause') this.paused = true
      else if (action === 'unpause') this.paused = false
      else if (action === 'die') {
        this.deaths += 1
        this.paused = false
      } else if (action === 'destroy') this.gone = true
    }
  }
}
