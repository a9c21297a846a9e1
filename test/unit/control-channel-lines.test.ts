/**
 * The control channel's reply lines are bounded (src/providers/remote/control-channel.ts
 * CONTROL_LINE_MAX_BYTES, 64 MiB): a program that answers with an endless line (a planted one,
 * or a broken world) fails the channel with ControlChannelError once the bound is passed, and
 * the channel holds no more than that; a long legitimate line (a process table of 200,000
 * processes, cut anywhere by the transport) is answered whole. The program is played by the test
 * over in-memory streams: it says READY and then writes what the test gives.
 */
import { PassThrough } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { CONTROL_LINE_MAX_BYTES, ControlChannel } from '../../src/providers/remote/control-channel.ts'
import { ControlChannelError } from '../../src/providers/remote/errors.ts'

async function played(): Promise<{ channel: ControlChannel; say(text: string | Buffer): void; closed(): boolean }> {
  const stdout = new PassThrough()
  const stdin = new PassThrough()
  stdin.resume()
  let closed = false
  const opening = ControlChannel.open({ stdin, stdout, close: () => { closed = true } }, 'a test world')
  stdout.write('READY 1000 x86_64 42 -\n')
  return { channel: await opening, say: text => { stdout.write(text) }, closed: () => closed }
}

describe('control reply lines', () => {
  it('are at most 64 MiB: a line past that without its end fails the channel with ControlChannelError, and every request in flight with it', async () => {
    expect(CONTROL_LINE_MAX_BYTES).toBe(67108864)
    const world = await played()
    const requests = [world.channel.request('ping'), world.channel.request('ping')]
    const megabyte = Buffer.alloc(1024 * 1024, 0x41)
    for (let i = 0; i < 65; i += 1) world.say(megabyte)
    for (const request of requests) {
      const error = await request.then(() => undefined, (reason: unknown) => reason)
      expect(error).toBeInstanceOf(ControlChannelError)
      expect((error as Error).message).toBe(`the remote control program in a test world sent a reply line of more than 67108864 bytes (${65 * 1024 * 1024} without its end): not the control program's protocol; the control channel is closed`)
    }
    expect(world.channel.alive).toBe(false)
    expect(world.closed()).toBe(true)
    // What comes after is not read.
    world.say('1 ok pong\n')
    await expect(world.channel.request('ping')).rejects.toBeInstanceOf(ControlChannelError)
  })

  it('a process table of 200,000 processes on one line, cut every 4096 bytes, is answered whole', async () => {
    const world = await played()
    const table = world.channel.processTable()
    const line = Buffer.from(`1 ok${Array.from({ length: 200_000 }, (_, i) => ` ${i + 1},1,${i + 1},${i + 1},S,${1000 + i}`).join('')}\n`)
    for (let at = 0; at < line.length; at += 4096) world.say(line.subarray(at, at + 4096))
    const processes = await table
    expect(processes.length).toBe(200_000)
    expect(processes[199_999]).toEqual({ pid: 200000, ppid: 1, pgrp: 200000, session: 200000, state: 'S', starttime: 200999, tagged: false })
    // Replies split anywhere: two in one chunk, one across chunks.
    const [a, b, c] = [world.channel.request('ping'), world.channel.request('ping'), world.channel.request('ping')]
    world.say('2 ok one\n3 ok t')
    world.say('wo\n4 ok three\n')
    expect(await Promise.all([a, b, c])).toEqual([['ok', 'one'], ['ok', 'two'], ['ok', 'three']])
    expect(world.channel.alive).toBe(true)
  })
})
