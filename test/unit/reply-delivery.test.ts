/**
 * When a proven read of the terminal stands as a wait for input, given the emulator's replies
 * (src/providers/remote/reply-delivery.ts): never while a reply waits for its reader or is being
 * written, nor in the first probe after one was written; the next probe's finding stands.
 */
import { describe, expect, it } from 'vitest'
import { ReplyDelivery } from '../../src/providers/remote/reply-delivery.ts'

/** A port whose program reads the terminal when `reading` is true; its writes wait for `release`. */
function fakePort(): { port: ConstructorParameters<typeof ReplyDelivery>[0]; written: string[]; reading: { now: boolean }; release: () => void; wrote: Promise<void> } {
  const written: string[] = []
  const reading = { now: false }
  const wrote = Promise.withResolvers<void>()
  const release = Promise.withResolvers<void>()
  return {
    written,
    reading,
    release: () => release.resolve(),
    wrote: wrote.promise,
    port: {
      readingTerminal: async () => reading.now,
      settle: async () => undefined,
      write: async data => {
        written.push(data)
        wrote.resolve()
        await release.promise
      },
      live: () => true,
    },
  }
}

describe('ReplyDelivery.inputWaitStands', () => {
  it('stands with no reply at all, as the probe found it', () => {
    const delivery = new ReplyDelivery(fakePort().port)
    expect([delivery.inputWaitStands(true), delivery.inputWaitStands(false), delivery.inputWaitStands(true)]).toEqual([true, false, true])
  })

  it('does not stand while a reply is held or written, nor in the first probe after it was written; the second stands', async () => {
    const fake = fakePort()
    const delivery = new ReplyDelivery(fake.port)
    delivery.reply('\x1b[3;1R')
    const whileHeld = delivery.inputWaitStands(true)
    fake.reading.now = true
    await fake.wrote
    const whileWriting = delivery.inputWaitStands(true)
    fake.release()
    // The write resolving ends the delivery's loop within microtasks, all run before setImmediate.
    await new Promise(resolve => setImmediate(resolve))
    expect({ whileHeld, whileWriting, firstAfter: delivery.inputWaitStands(true), secondAfter: delivery.inputWaitStands(true), written: fake.written }).toEqual({ whileHeld: false, whileWriting: false, firstAfter: false, secondAfter: true, written: ['\x1b[3;1R'] })
  })
})
