/**
 * Backpressure from a consumer's stream to the transport stream that feeds it.
 * @module dsh-remote-worlds/providers/remote/backpressure
 */
import type { Readable, Writable } from 'node:stream'

/**
 * Pause `source` until `target` drains, or until `target` closes: a consumer that destroyed its
 * stream (unread) must not hold the transport forever, or the transport never reaches its end
 * and whatever waits for that end (a handle's `done`, a launcher's next run) waits too.
 * Call it when `target.write()` returned false.
 */
export function holdUntilDrained(source: Readable, target: Writable): void {
  source.pause()
  const release = (): void => {
    target.off('drain', release)
    target.off('close', release)
    source.resume()
  }
  target.on('drain', release)
  target.on('close', release)
}
