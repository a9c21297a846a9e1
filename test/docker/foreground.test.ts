/**
 * Foreground facts straight from the runtime's terminal handle: inputWaiting is true only for
 * a foreground process PROVEN blocked reading the terminal, never for a pipeline stage that
 * reads a pipe on fd 0 while its producer runs.
 */
import { setTimeout as delay } from 'node:timers/promises'
import { Context } from '@deepseek-ai/cordis'
import type { SubprocessTerminalHandle } from '@deepseek-ai/dsh-subprocess'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DEFAULT_IMAGE } from '../../src/cli/target.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'

const BASH = { argv: ['/bin/bash', '--noprofile', '--norc', '-i'], cwd: '/tmp', env: { TERM: 'dumb', PS1: 'dsh> ' }, rows: 40, cols: 160, graceMs: 2_000 }
let runtime: DockerSubprocessRuntime
let terminal: SubprocessTerminalHandle

/**
 * Poll the foreground facts until `done(seen)` holds for those of a group other than the shell's
 * (or the hang guard expires); returns them. How many polls fit in a while is the machine's.
 */
async function factsUntil(done: (seen: readonly { pgid: number; waiting: boolean }[], shellAgain: boolean) => boolean, guardMs = 10_000): Promise<{ pgid: number; waiting: boolean }[]> {
  const seen: { pgid: number; waiting: boolean }[] = []
  const deadline = Date.now() + guardMs
  while (Date.now() < deadline) {
    const facts = await terminal.inspectForeground()
    const shellAgain = facts?.processGroupId === terminal.pid
    if (facts !== undefined && !shellAgain) seen.push({ pgid: facts.processGroupId, waiting: facts.inputWaiting })
    if (done(seen, shellAgain)) break
    await delay(20)
  }
  return seen
}

/** Wait until the shell's group is the foreground again (the job it ran ended). */
async function shellForeground(): Promise<void> {
  await factsUntil((_seen, shellAgain) => shellAgain)
}

beforeAll(async () => {
  runtime = new DockerSubprocessRuntime(new Context(), { image: DEFAULT_IMAGE, user: 'agent' })
  terminal = await runtime.spawnTerminal(BASH)
  terminal.output.resume()
})

afterAll(async () => {
  await runtime?.dispose()
})

describe('inspectForeground in the Docker world', () => {
  it('never reports a pipeline stage reading a pipe as waiting for terminal input', async () => {
    await terminal.write('sleep 1.5 | sort\r')
    // Every probe of the pipeline's whole life, until the shell is foreground again.
    const seen = await factsUntil((facts, shellAgain) => facts.length > 0 && shellAgain)
    expect(seen.length).toBeGreaterThan(0)
    expect(seen.filter(facts => facts.waiting)).toEqual([])
  })

  it('proves cat blocked reading the terminal, in its own foreground group', async () => {
    await terminal.write('cat\r')
    const seen = await factsUntil(facts => facts.at(-1)?.waiting === true)
    expect(seen.at(-1)!.waiting).toBe(true)
    expect(seen.at(-1)!.pgid).not.toBe(terminal.pid)
    expect(await terminal.signalForeground('SIGINT')).toBe(seen.at(-1)!.pgid)
    await shellForeground()
  })

  it('proves the last stage of a pipeline that reads the terminal (cat | sort) as waiting', async () => {
    await terminal.write('cat | sort\r')
    const seen = await factsUntil(facts => facts.at(-1)?.waiting === true)
    expect(seen.at(-1)!.waiting).toBe(true)
    await terminal.signalForeground('SIGINT')
  })
})

describe('a proven read and the output before it', () => {
  it('inspectForeground proves a read only once every byte printed before it reached `output`, even while its reader is behind (the transport paused)', async () => {
    // The reader takes 64 KiB every 20 ms: `output` holds its 1 MiB and the handle pauses the
    // transport, whose buffer keeps what the credit let through.
    const slow = await runtime.spawnTerminal(BASH)
    let taken = ''
    const take = (size?: number): void => {
      for (let chunk: Buffer | null; (chunk = slow.output.read(size) as Buffer | null) !== null;) {
        taken += chunk.toString('latin1')
        if (size !== undefined) break
      }
    }
    const reader = setInterval(() => take(65536), 20)
    try {
      await slow.write("head -c 3145728 /dev/zero | tr '\\0' x; echo; echo END-$((40+2)); cat\r")
      let proven = false
      const deadline = Date.now() + 30_000
      while (!proven && Date.now() < deadline) {
        const facts = await slow.inspectForeground()
        proven = facts !== undefined && facts.processGroupId !== slow.pid && facts.inputWaiting
        if (!proven) await delay(20)
      }
      expect(proven).toBe(true)
      // What the reader took, and what `output` holds for it now: everything cat's read follows.
      take()
      expect(taken.includes('x'.repeat(3145728))).toBe(true)
      expect(taken).toContain('END-42')
    } finally {
      clearInterval(reader)
      await slow.terminate()
    }
  }, 60_000)
})

describe.each(['off', 'connection'] as const)('a proven read right after a burst of output (persistence %s)', persistence => {
  it('every probe that proves the read comes after the prompt the program printed before it, in 12 tries', async () => {
    // The program writes 200 KB and its prompt in one write(2), then reads: the last bytes land
    // in the PTY a moment before the read, possibly after the loop of dsh-pty read the master
    // for its turn. A probe racing them must not prove the read before they reached `output`.
    const world = new DockerSubprocessRuntime(new Context(), { image: DEFAULT_IMAGE, user: 'agent', persistence })
    try {
      const shell = await world.spawnTerminal(BASH)
      let taken = ''
      shell.output.on('data', (chunk: Buffer) => { taken += chunk.toString('latin1') })
      for (let round = 0; round < 12; round++) {
        const ask = `ASK-${1000 + round}? `
        taken = ''
        await shell.write(`python3 -c 'import os; os.write(1, b"y" * 200000 + b"\\n" + b"ASK-%d? " % (1000 + ${round})); os.read(0, 1)'\r`)
        let proven = false
        const deadline = Date.now() + 20_000
        while (!proven && Date.now() < deadline) {
          const facts = await shell.inspectForeground()
          proven = facts !== undefined && facts.processGroupId !== shell.pid && facts.inputWaiting
        }
        expect(proven).toBe(true)
        expect(taken.slice(-200), `round ${round}`).toContain(ask)
        await shell.write('\r')
        let back = false
        while (!back && Date.now() < deadline) back = (await shell.inspectForeground())?.processGroupId === shell.pid
        expect(back).toBe(true)
      }
      await shell.terminate()
    } finally {
      await world.dispose()
    }
  }, 120_000)
})
