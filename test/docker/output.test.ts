/**
 * Output bytes of a Docker terminal are delivered exactly: `handle.output` carries the program's
 * bytes as the PTY produced them, nothing decoded, re-encoded, dropped or reordered, whatever the
 * write boundaries. Checked at the handle (runtime.spawnTerminal) with raw Buffers, and through
 * the UNCHANGED terminal-bash for what it renders.
 */
import { once } from 'node:events'
import { Context } from '@deepseek-ai/cordis'
import type { SubprocessTerminalHandle, SubprocessTerminalSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { IMAGE, UPSTREAM_TUNING, aliveInContainer, containerProcesses, hangGuard, waitFor } from './helpers.ts'

let ctx: Context
let runtime: DockerSubprocessRuntime
let containerId: string

beforeAll(async () => {
  ctx = new Context()
  await ctx.plugin(DockerSubprocessRuntime, { image: IMAGE })
  runtime = ctx.subprocess as DockerSubprocessRuntime
  containerId = (await runtime.world()).containerId
})

afterAll(async () => {
  await ctx?.fiber.dispose()
})

/** A terminal running `sh -c SCRIPT` (dash: printf takes octal escapes, not \x). */
function shSpec(script: string): SubprocessTerminalSpawnSpec {
  return { argv: ['/bin/sh', '-c', script], cwd: '/', env: { TERM: 'dumb' }, rows: 24, cols: 80, graceMs: 500 }
}

/** Every chunk of a terminal's output until it ends, and its exit. */
async function collect(handle: SubprocessTerminalHandle): Promise<{ chunks: Buffer[]; all: Buffer }> {
  const chunks: Buffer[] = []
  handle.output.on('data', (chunk: Buffer) => chunks.push(chunk))
  await hangGuard(once(handle.output, 'end'), 30_000, 'output end')
  expect(await hangGuard(handle.done, 30_000, 'done')).toEqual({ exitCode: 0, signal: null })
  return { chunks, all: Buffer.concat(chunks) }
}

/**
 * Run `sh -c SCRIPT` (two writes 300 ms apart) until its output came split: byte `offset` in a
 * later chunk than the byte before it. A busy client may read both writes as one chunk, so up to
 * three runs; each one's bytes must be exact. Returns the last run's.
 */
async function collectSplit(script: string, offset: (all: Buffer) => number, expected: Buffer): Promise<{ chunks: Buffer[]; all: Buffer }> {
  let run: { chunks: Buffer[]; all: Buffer } | undefined
  for (let attempt = 0; attempt < 3; attempt++) {
    run = await collect(await runtime.spawnTerminal(shSpec(script)))
    expect(run.all).toEqual(expected)
    if (chunkOf(run.chunks, offset(run.all)) > chunkOf(run.chunks, offset(run.all) - 1)) break
  }
  return run!
}

/** Index of the chunk that holds byte `offset` of the concatenation. */
function chunkOf(chunks: readonly Buffer[], offset: number): number {
  let seen = 0
  for (const [index, chunk] of chunks.entries()) {
    seen += chunk.length
    if (offset < seen) return index
  }
  return -1
}

describe('handle.output bytes, exactly', () => {
  it('reassembles a UTF-8 character split across writes (e4 b8 | ad = 中)', async () => {
    const { chunks, all } = await collectSplit("printf '\\344\\270'; sleep 0.3; printf '\\255'", () => 2, Buffer.from([0xe4, 0xb8, 0xad]))
    expect(all.toString('utf8')).toBe('中')
    // The split is really there: the last byte came in a later chunk than the first two.
    expect(chunkOf(chunks, 2)).toBeGreaterThan(chunkOf(chunks, 1))
  })

  it('passes an OSC 133 prompt marker split across writes byte-exact', async () => {
    const { chunks, all } = await collectSplit("printf 'a\\033]133;'; sleep 0.3; printf 'D;0\\007b'", bytes => bytes.indexOf(0x44), Buffer.from('a\x1b]133;D;0\x07b', 'latin1'))
    // The split is really there: the marker's `D` came in a later chunk than its `;`.
    expect(chunkOf(chunks, all.indexOf(0x44))).toBeGreaterThan(chunkOf(chunks, all.indexOf(0x3b)))
  })

  it('passes invalid UTF-8 byte-exact and keeps the stream going after it', async () => {
    // Lone continuation bytes, an overlong lead, a truncated sequence at a write boundary, bytes
    // that are never valid (c0, ff, fe), a NUL, and an escape: all as the program wrote them.
    const handle = await runtime.spawnTerminal(shSpec("printf '\\377\\376abc\\300'; sleep 0.2; printf '\\200\\277x\\360\\237'; sleep 0.2; printf '\\000after\\033[0m\\342\\202'; sleep 0.2; printf '\\254end'"))
    const { all } = await collect(handle)
    expect(all).toEqual(Buffer.from([
      0xff, 0xfe, 0x61, 0x62, 0x63, 0xc0,
      0x80, 0xbf, 0x78, 0xf0, 0x9f,
      0x00, ...Buffer.from('after\x1b[0m'), 0xe2, 0x82,
      0xac, ...Buffer.from('end'),
    ]))
    // The € split over the last write boundary survived the invalid bytes before it.
    expect(all.subarray(-6).toString('utf8')).toBe('€end')
  })

  it('applies the PTY\'s own output processing only: \\n becomes \\r\\n, nothing else changes', async () => {
    const handle = await runtime.spawnTerminal(shSpec("printf 'l1\\nl2\\r\\n\\t|'"))
    const { all } = await collect(handle)
    expect(all).toEqual(Buffer.from('l1\r\nl2\r\r\n\t|'))
  })

  it('gives a handle for a program that exits at once, with its exit status and its output', async () => {
    // The program is gone before the control channel could stat it: the identity comes with
    // the start marker. Repeated, since this is a race the provider must not depend on.
    for (let round = 0; round < 8; round++) {
      const handle = await runtime.spawnTerminal(shSpec(`printf 'r${round}'; exit ${round + 1}`))
      const chunks: Buffer[] = []
      handle.output.on('data', (chunk: Buffer) => chunks.push(chunk))
      await hangGuard(once(handle.output, 'end'), 30_000, 'output end')
      expect(await hangGuard(handle.done, 30_000, 'done')).toEqual({ exitCode: round + 1, signal: null })
      expect(Buffer.concat(chunks).toString()).toBe(`r${round}`)
      await handle.terminate()
    }
  })

  it('a program that exits at once leaving a child in its session: terminate still kills the child', async () => {
    // HUP ignored: the session leader's exit hangs up the tty's foreground group.
    const handle = await runtime.spawnTerminal(shSpec('trap "" HUP; sleep 97 & exit 0'))
    handle.output.resume()
    expect(await hangGuard(handle.done, 30_000, 'done')).toEqual({ exitCode: 0, signal: null })
    // The child may still be between its fork and its exec of sleep when the leader's exit is seen.
    const sleeper = await waitFor(async () => (await containerProcesses(containerId)).find(row => row.session === handle.pid && row.comm === 'sleep'), row => row !== undefined)
    expect(sleeper).toBeDefined()
    await handle.terminate()
    expect(await aliveInContainer(containerId, sleeper!.pid)).toBe(false)
  })

  it('delivers 100 MB with the byte count exact and bounded memory while consuming', async () => {
    const total = 100_000_000
    const handle = await runtime.spawnTerminal(shSpec(`head -c ${total} /dev/zero | tr '\\000' x`))
    const baseline = process.memoryUsage().rss
    let peak = baseline
    let bytes = 0
    let foreign = 0
    let chunks = 0
    const sample = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss) }, 50)
    handle.output.on('data', (chunk: Buffer) => {
      // Count, never keep: every byte must be an `x`.
      bytes += chunk.length
      for (let index = 0; index < chunk.length; index++) if (chunk[index] !== 0x78) foreign++
      if (++chunks % 64 === 0) peak = Math.max(peak, process.memoryUsage().rss)
    })
    try {
      await hangGuard(once(handle.output, 'end'), 120_000, '100 MB of output')
      expect(await hangGuard(handle.done, 30_000, 'done')).toEqual({ exitCode: 0, signal: null })
    } finally {
      clearInterval(sample)
    }
    expect(bytes).toBe(total)
    expect(foreign).toBe(0)
    expect(peak - baseline).toBeLessThan(200 * 1024 * 1024)
  }, 150_000)
})

describe('through terminal-bash', () => {
  let world: RemoteWorld

  beforeAll(async () => {
    world = await openWorld({
      runtime: DockerSubprocessRuntime,
      runtimeConfig: { container: containerId },
      workspaceRoot: '/tmp',
      terminal: { ...UPSTREAM_TUNING, idleSilenceMs: 5_000, timeoutMs: 8_000 },
    })
  })

  afterAll(async () => {
    await world?.dispose()
  })

  it('renders a character split across writes as one character, and the shell stays usable after invalid bytes', async () => {
    const terminal = await world.open()
    const split = await terminal.send("printf 'A\\344\\270'; sleep 0.3; printf '\\255B\\n'")
    expect(split.waitReason).toBe('stdin_read')
    expect(split.viewport).toContain('A中B')
    const invalid = await terminal.send("printf '\\377\\300x\\n'; echo still-here")
    expect(invalid.waitReason).toBe('stdin_read')
    expect(invalid.viewport).toContain('still-here')
    await terminal.close()
  })
})
