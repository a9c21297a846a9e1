/**
 * What a client that did not start a held job reads of it (src/jobs/job-output.ts): the raw
 * streams from a cursor, rendered as the bash tool renders a background read, with what the
 * world's log dropped and what did not fit between two reads said in bytes.
 */
import { describe, expect, it } from 'vitest'
import { REFOUND_RETAINED_BYTES, RefoundJobOutput } from '../../src/jobs/job-output.ts'

const NONCE = 'ab'.repeat(16)

describe('RefoundJobOutput', () => {
  it('reads stdout then [stderr] and stderr, without the wrapper\'s exit trailer, and its cursor is the raw offsets received', () => {
    const output = new RefoundJobOutput(NONCE, { stdout: 10, stderr: 0 })
    output.push('stdout', 10, Buffer.from('one\n'))
    output.push('stderr', 0, Buffer.from(`oops\nDSHE${NONCE}:3:\n`))
    expect(output.read()).toEqual({ delta: 'one\n[stderr]\noops\n', dropped: 0 })
    expect(output.cursor).toEqual({ stdout: 14, stderr: 5 + 4 + 32 + 4 })
    expect(output.outcome({ exitCode: 0, signal: null })).toEqual({ exitCode: 3, signal: null })
  })

  it('says how many bytes the world\'s log dropped between the cursor and what it still held', () => {
    const output = new RefoundJobOutput(NONCE, { stdout: 10, stderr: 0 })
    output.push('stdout', 1_010, Buffer.from('kept\n'))
    expect(output.read()).toEqual({ delta: 'kept\n[1000 bytes of output were dropped: the world keeps the latest part of each stream]', dropped: 1_000 })
  })

  it(`keeps the latest ${REFOUND_RETAINED_BYTES} bytes of each stream between reads, says how many it dropped, and never splits a character`, () => {
    const output = new RefoundJobOutput(NONCE, { stdout: 10, stderr: 0 })
    // 300 002 bytes: 'xx' then 100 000 three-byte characters (€), which start at bytes 2 + 3k.
    const text = `xx${'€'.repeat(100_000)}`
    let offset = 10
    for (let at = 0; at < text.length; at += 1_000) {
      const chunk = Buffer.from(text.slice(at, at + 1_000))
      output.push('stdout', offset, chunk)
      offset += chunk.length
    }
    const read = output.read()
    // The last 64 000 bytes begin at byte 236 002, inside a character: the cut moves on to the
    // next one (236 003), so 63 999 bytes (21 333 whole characters) stay.
    expect(read.delta).toBe(`${'€'.repeat(21_333)}\n[236003 bytes of output were dropped from memory: a job found again keeps the latest 64000 bytes of each stream between reads]`)
    expect(read.dropped).toBe(236_003)
    expect(output.cursor.stdout).toBe(300_012)
    output.push('stdout', offset, Buffer.from('next\n'))
    expect(output.read()).toEqual({ delta: 'next\n', dropped: 0 })
  })

  it('from offset 0 with the program\'s start known, skips the wrapper\'s start marker, and a gap that took the marker counts only the program\'s bytes', () => {
    const marker = `\nDSHB${NONCE}:pid:41,9000,40,8999\n`
    const whole = new RefoundJobOutput(NONCE, { stdout: 0, stderr: 0 }, { programStart: marker.length })
    // The marker split across two pieces, the program's bytes right behind it.
    whole.push('stdout', 0, Buffer.from(marker.slice(0, 20)))
    whole.push('stdout', 20, Buffer.from(`${marker.slice(20)}hello\n`))
    expect(whole.read()).toEqual({ delta: 'hello\n', dropped: 0 })
    const gap = new RefoundJobOutput(NONCE, { stdout: 0, stderr: 0 }, { programStart: marker.length })
    gap.push('stdout', marker.length + 1_000, Buffer.from('kept\n'))
    expect(gap.read()).toEqual({ delta: 'kept\n[1000 bytes of output were dropped: the world keeps the latest part of each stream]', dropped: 1_000 })
  })
})
