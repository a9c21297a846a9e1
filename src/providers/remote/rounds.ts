/**
 * Shared rounds of one question whose answer must not predate the asking (a process table
 * after a signal, whether a world is alive after an exec ended).
 * @module dsh-remote-worlds/providers/remote/rounds
 */

/**
 * One question asked in rounds: a call while no round runs starts one at once; calls that
 * arrive while a round is in flight all wait for the NEXT round, which starts the moment that
 * one ends, and one answer serves them all. So every caller's answer was taken after its call
 * (never a stale one), and N callers at once cost two rounds, not N.
 */
export class SharedRounds<T> {
  private current: Promise<T> | undefined
  private next: PromiseWithResolvers<T> | undefined

  /** @param take - asks the question once; its rejection reaches every caller of that round. */
  constructor(private readonly take: () => Promise<T>) {}

  /** The answer of a round that starts at or after this call. */
  ask(): Promise<T> {
    if (this.current === undefined) return this.start()
    this.next ??= Promise.withResolvers<T>()
    return this.next.promise
  }

  private start(): Promise<T> {
    const round = this.take()
    this.current = round
    // The latecomers' round starts in the same tick the last one ended, before any new caller.
    const ended = (): void => {
      this.current = undefined
      const waiting = this.next
      if (waiting === undefined) return
      this.next = undefined
      waiting.resolve(this.start())
    }
    round.then(ended, ended)
    return round
  }
}

/**
 * One action taken in shared batches: items added while no batch runs start one at once;
 * items added while a batch is in flight join the NEXT batch, which starts the moment that one
 * ends. Each caller gets the result of the batch that carried its items (a result covering
 * the whole batch, so callers pick their own part); an item is acted on at or after its call.
 */
export class SharedBatches<I, R> {
  private running = false
  private waiting: { items: I[]; result: PromiseWithResolvers<R> } | undefined

  /** @param run - acts on one batch's items; its rejection reaches every caller of that batch. */
  constructor(private readonly run: (items: I[]) => Promise<R>) {}

  /** Act on `items` in the batch running now (when none runs) or in the next one. */
  add(items: readonly I[]): Promise<R> {
    if (!this.running) return this.start([...items])
    this.waiting ??= { items: [], result: Promise.withResolvers<R>() }
    this.waiting.items.push(...items)
    return this.waiting.result.promise
  }

  private start(items: I[]): Promise<R> {
    this.running = true
    const batch = this.run(items)
    const ended = (): void => {
      this.running = false
      const waiting = this.waiting
      if (waiting === undefined) return
      this.waiting = undefined
      waiting.result.resolve(this.start(waiting.items))
    }
    batch.then(ended, ended)
    return batch
  }
}
