/**
 * demuxedText (providers/docker/demux.ts): the payloads of a whole multiplexed buffer, as a
 * container log read without `follow` arrives.
 */
import { expect, it } from 'vitest'
import { demuxedText } from '../../src/providers/docker/demux.ts'

function frame(type: 1 | 2, text: string): Buffer {
  const payload = Buffer.from(text, 'utf8')
  const header = Buffer.alloc(8)
  header[0] = type
  header.writeUInt32BE(payload.length, 4)
  return Buffer.concat([header, payload])
}

it('joins stdout and stderr frames in their order, headers removed, and keeps a truncated last frame\'s bytes', () => {
  const whole = Buffer.concat([frame(2, 'Server listening on 127.0.0.1 port 40000.\n'), frame(1, 'é\n'), frame(2, 'Bind to port 40000 failed')])
  expect(demuxedText(whole)).toBe('Server listening on 127.0.0.1 port 40000.\né\nBind to port 40000 failed')
  expect(demuxedText(whole.subarray(0, whole.length - 7))).toBe('Server listening on 127.0.0.1 port 40000.\né\nBind to port 40000')
})
