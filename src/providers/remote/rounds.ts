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
  /** A round is a batch without items (see {@link SharedBatches}: the same join-the-next rule). */
  private readonly batches: SharedBatches<never, T>

  /** @param take - asks the question once; its rejection reaches every caller of that round. */
  constructor(take: () => Promise<T>) {
    this.batches = new SharedBatches(() => take())
  }

  /** The answer of a round that starts at or after this call. */
  ask(): Promise<T> {
    return this.batches.add([])
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
