/**
 * When an emulator reply reaches the program, and what a probe learns of it
 * (src/providers/remote/reply-delivery.ts), over a scripted terminal: which read the program is
 * in is set by the test, as a probe of the world would report it.
 */
import { describe, expect, it } from 'vitest'
import { ReplyDelivery, type ReplyPort } from '../../src/providers/remote/reply-delivery.ts'

/** A terminal whose program is in the read `reading` (undefined: not reading); records writes. */
function scriptedTerminal(): ReplyPort & { reading: string | undefined; written: string[] } {
  const port = {
    reading: undefined as string | undefined,
    written: [] as string[],
    readingTerminal: async () => port.reading,
    settle: async () => undefined,
    write: async (data: string) => {
      port.written.push(data)
    },
    live: () => true,
  }
  return port
}

describe('ReplyDelivery', () => {
  it('pending() is undefined while no reply is held', () => {
    expect(new ReplyDelivery(scriptedTerminal()).pending()).toBeUndefined()
  })

  it('holds a reply until the program reads, writes it once, and pending() names the read it went into', async () => {
    const terminal = scriptedTerminal()
    const delivery = new ReplyDelivery(terminal)
    delivery.reply('\x1b[5;7R')
    const pending = delivery.pending()
    expect(pending).toBeInstanceOf(Promise)
    await new Promise(resolve => setTimeout(resolve, 30))
    expect(terminal.written).toEqual([])
    terminal.reading = 'thread 42 read fd 0 scheduled 7'
    expect(await pending).toBe('thread 42 read fd 0 scheduled 7')
    expect(terminal.written).toEqual(['\x1b[5;7R'])
    expect(delivery.pending()).toBeUndefined()
  })

  it('a prompt drops the held reply: pending() resolves undefined and nothing is written', async () => {
    const terminal = scriptedTerminal()
    const delivery = new ReplyDelivery(terminal)
    delivery.reply('\x1b[?1;2c')
    const pending = delivery.pending()
    delivery.prompt()
    expect(delivery.pending()).toBeUndefined()
    expect(await pending).toBeUndefined()
    expect(terminal.written).toEqual([])
  })
})
