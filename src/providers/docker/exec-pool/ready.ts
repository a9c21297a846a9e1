/**
 * The readiness handshake of a pre-started exec (boot-scripts.ts): wait for its
 * `DSHL<nonce>:ready` line on the stream it prints to.
 * @module dsh-remote-worlds/providers/docker/exec-pool/ready
 */
import type { Readable } from 'node:stream'
import { READY_TAG } from './boot-scripts.ts'

/** How long a pre-started exec may take to announce itself (ms): an engine under load starts execs slowly. */
export const READY_BOUND_MS = 30_000

/** Why a pre-started exec is not usable. */
export class PreStartRefusedError extends Error {
  /**
   * @param reason - `tool` when the world lacks the tool the program needs (`cat` or `stty`):
   *   never worth retrying in that world; `ended` or `timeout` otherwise.
   */
  constructor(readonly reason: 'tool' | 'ended' | 'timeout', message: string) {
    super(message)
    this.name = 'PreStartRefusedError'
  }
}

/**
 * Read `source` until the readiness line of `nonce`, then stop reading (the stream is paused
 * and its listeners removed, so the next reader sees the bytes after the line, which are put
 * back with `unshift`).
 * @throws PreStartRefusedError when the program refused, the stream ended first (the engine's
 *   own refusal, e.g. a missing user, is then in the message), or {@link READY_BOUND_MS} passed.
 */
export function awaitReady(source: Readable, nonce: string, boundMs = READY_BOUND_MS): Promise<void> {
  const head = `${READY_TAG}${nonce}:`
  return new Promise<void>((resolve, reject) => {
    let text = ''
    const finish = (error?: PreStartRefusedError): void => {
      clearTimeout(timer)
      source.off('data', onData)
      source.off('end', onEnd)
      source.off('close', onEnd)
      source.off('error', onEnd)
      if (error === undefined) resolve()
      else reject(error)
    }
    const onData = (chunk: Buffer): void => {
      text += chunk.toString('latin1')
      const at = text.indexOf(head)
      if (at < 0) {
        if (text.length > 8192) finish(new PreStartRefusedError('ended', `the pre-started exec printed no readiness line: ${JSON.stringify(text.slice(0, 200))}`))
        return
      }
      const end = text.indexOf('\n', at)
      if (end < 0) return
      const answer = text.slice(at + head.length, end).replace(/\r$/, '')
      source.pause()
      const rest = text.slice(end + 1)
      if (answer === 'ready') {
        finish()
        if (rest.length > 0) source.unshift(Buffer.from(rest, 'latin1'))
        return
      }
      finish(new PreStartRefusedError('tool', `the world lacks \`${answer.replace(/^refused:/, '')}\`, which a pre-started exec needs`))
    }
    const onEnd = (): void => finish(new PreStartRefusedError('ended', `the pre-started exec ended before it was ready${text.trim().length > 0 ? `: ${JSON.stringify(text.trim().slice(0, 300))}` : ''}`))
    const timer = setTimeout(() => finish(new PreStartRefusedError('timeout', `the pre-started exec did not announce itself within ${boundMs} ms`)), boundMs)
    source.on('data', onData)
    source.once('end', onEnd)
    source.once('close', onEnd)
    source.once('error', onEnd)
  })
}
