/**
 * Backpressure from a consumer's stream to the transport stream that feeds it.
 * @module dsh-remote-worlds/providers/remote/backpressure
 */
import type { Readable, Writable } from 'node:stream'

/** The hold of each source held now (one per source, however many writes came back false). */
const holds = new WeakMap<Readable, { target: Writable; release: () => void }>()

/**
 * Pause `source` until `target` drains, or until `target` closes: a consumer that destroyed its
 * stream (unread) must not hold the transport forever, or the transport never reaches its end
 * and whatever waits for that end (a handle's `done`, a launcher's next run) waits too.
 * Call it when `target.write()` returned false. A source already held stays held by its first
 * hold (no second pair of listeners: chunks in flight when it paused still arrive), unless
 * its owner resumed it meanwhile or it now feeds another target (a launcher's next run).
 * @returns the release (idempotent): resume the source now, whatever the target.
 */
export function holdUntilDrained(source: Readable, target: Writable): () => void {
  const held = holds.get(source)
  if (held !== undefined && held.target === target && source.isPaused()) return held.release
  if (held !== undefined) forget(source)
  source.pause()
  const release = (): void => {
    if (holds.get(source)?.release !== release) return
    forget(source)
    source.resume()
  }
  holds.set(source, { target, release })
  target.on('drain', release)
  target.on('close', release)
  return release
}

/** Drop `source`'s hold and its listeners, without resuming it. */
function forget(source: Readable): void {
  const held = holds.get(source)
  if (held === undefined) return
  holds.delete(source)
  held.target.off('drain', held.release)
  held.target.off('close', held.release)
}
