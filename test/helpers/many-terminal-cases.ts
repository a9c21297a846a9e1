/**
 * Many terminals at once and terminals under an output flood (issue 21), world-neutral: what
 * the teardown rounds (one process-table scan per round for every teardown in flight), the
 * pipelined control channel and the output flow control promise. Behaviour only: no case
 * asserts a duration.
 *
 * Process checks read the world's pid namespace through a SEPARATE `docker exec` (never the
 * control channel under test), as real-shell-cases.ts does.
 */
import { createHash } from 'node:crypto'
import type { PassThrough } from 'node:stream'
import { setTimeout as delay } from 'node:timers/promises'
import type { SubprocessTerminalHandle, SubprocessTerminalSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import { expect, it } from 'vitest'
import type { RemoteSubprocessRuntime } from '../../src/providers/remote/runtime.ts'
import { OUTPUT_COALESCE_BYTES, OUTPUT_READER_HIGH_WATER_BYTES } from '../../src/providers/remote/terminal.ts'
import { terminalLeftovers } from '../docker/helpers.ts'
import type { RealShellWorld } from './real-shell-cases.ts'

/** Terminals closed at once in the first case (the bench's scale family uses as many). */
const MANY = 100
/** Opens in flight at once while they open. */
const OPEN_CONCURRENCY = 10
/** Lines of `seq` the flood case prints (~11 MB, far above every buffer on the way). */
const FLOOD_LINES = 1_500_000

/** A bash at a plain prompt, as terminal-bash would spawn it (TERM=dumb, its own PS1). */
function shellSpec(cwd: string): SubprocessTerminalSpawnSpec {
  return {
    argv: ['/bin/bash', '--noprofile', '--norc', '-i'],
    cwd,
    env: { TERM: 'dumb', PS1: 'many> ', PATH: '/usr/local/bin:/usr/bin:/bin' },
    rows: 40,
    cols: 160,
    graceMs: 3_000,
  }
}

/** Resolves once the handle's output from now on contains `text` (listener attached at the call). */
function untilOutput(handle: SubprocessTerminalHandle, text: string, boundMs = 30_000): Promise<void> {
  let seen = ''
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      handle.output.off('data', onData)
      reject(new Error(`no ${JSON.stringify(text)} in the output within ${boundMs} ms; tail ${JSON.stringify(seen.slice(-200))}`))
    }, boundMs)
    const onData = (chunk: Buffer | string): void => {
      seen = (seen + chunk.toString()).slice(-4096)
      if (!seen.includes(text)) return
      clearTimeout(timer)
      handle.output.off('data', onData)
      resolve()
    }
    handle.output.on('data', onData)
  })
}

/**
 * Register the cases (call inside a `describe` for one user).
 * @param world - the world under test (real-shell-cases.ts); `harness` composes it.
 */
export function manyTerminalCases(world: RealShellWorld, user: string): void {
  it(`closes ${MANY} terminals at once, each with a background job, and leaves no process of any`, async () => {
    const { runtime } = await world.harness(user)
    const handles: SubprocessTerminalHandle[] = []
    try {
      let next = 0
      const opener = async (): Promise<void> => {
        while (next < MANY) {
          next += 1
          const handle = await runtime.spawnTerminal(shellSpec(world.workspace))
          handles.push(handle)
          // A job of its own in each session: the teardown must end more than the shell.
          // The echoed command line holds `job-start""ed`, so only the echo's output matches.
          const started = untilOutput(handle, 'job-started')
          await handle.write('sleep 300 & echo job-start""ed\r')
          await started
        }
      }
      await Promise.all(Array.from({ length: OPEN_CONCURRENCY }, opener))
      expect(handles).toHaveLength(MANY)
      const pids = handles.map(handle => handle.pid)
      expect(new Set(pids).size).toBe(MANY)

      await Promise.all(handles.map(handle => handle.terminate()))
      // Every outcome settles after the teardown (the shells were killed, not transport failures).
      const outcomes = await Promise.allSettled(handles.map(handle => handle.done))
      expect(outcomes.filter(outcome => outcome.status === 'rejected')).toEqual([])

      let left = 0
      for (const pid of pids) left += (await terminalLeftovers(world.containerId(), pid)).length
      expect(left).toBe(0)
    } finally {
      await Promise.allSettled(handles.map(handle => handle.terminate()))
    }
  }, 180_000)

  it('delivers every byte of a flood in order to a reader that stops taking, holding a bounded amount meanwhile', async () => {
    const { runtime } = await world.harness(user)
    const handle = await runtime.spawnTerminal(shellSpec(world.workspace))
    try {
      const ready = untilOutput(handle, 'many> ')
      await handle.write('\r')
      await ready
      // The reader: chunks collected in arrival order, and for a while not taken at all.
      const chunks: Buffer[] = []
      const onData = (chunk: Buffer): void => { chunks.push(chunk) }
      handle.output.on('data', onData)
      // No echo and no CR added by the PTY, so what arrives between the markers is seq's bytes.
      // The markers are printed as two words each, so the echoed command line never holds them.
      await handle.write(`stty -echo -onlcr; printf '%s%s\\n' FLOOD- BEGIN; seq 1 ${FLOOD_LINES}; printf '%s%s\\n' FLOOD- END\r`)
      await delay(200)
      handle.output.off('data', onData)
      handle.output.pause()
      // While nothing is taken, the handle holds at most its reader's high-water mark (plus one
      // chunk on its way), however much the program still has to print: the program waits.
      const bound = OUTPUT_READER_HIGH_WATER_BYTES * 2 + OUTPUT_COALESCE_BYTES * 2
      let held = 0
      for (let look = 0; look < 20; look += 1) {
        await delay(100)
        // The handle's output is a PassThrough: what its writable side holds counts too.
        const output = handle.output as PassThrough
        held = Math.max(held, output.readableLength + output.writableLength)
      }
      expect(held).toBeLessThanOrEqual(bound)
      // Then take everything, until the end marker.
      handle.output.on('data', onData)
      handle.output.resume()
      const deadline = Date.now() + 120_000
      while (!Buffer.concat(chunks).includes('FLOOD-END\n') && Date.now() < deadline) await delay(50)
      const all = Buffer.concat(chunks)
      const begin = all.indexOf('FLOOD-BEGIN\n')
      const end = all.indexOf('FLOOD-END\n')
      expect(begin).toBeGreaterThanOrEqual(0)
      expect(end).toBeGreaterThan(begin)
      const body = all.subarray(begin + 'FLOOD-BEGIN\n'.length, end)
      let source = ''
      const expected = createHash('sha256')
      for (let line = 1; line <= FLOOD_LINES; line += 1) {
        source += `${line}\n`
        if (source.length > 65_536) {
          expected.update(source)
          source = ''
        }
      }
      expected.update(source)
      expect(body.length).toBeGreaterThan(held)
      expect(createHash('sha256').update(body).digest('hex')).toBe(expected.digest('hex'))
    } finally {
      await handle.terminate()
    }
  }, 180_000)

  it('cancels floods in several terminals at once through terminal-bash, each back at its prompt', async () => {
    const remote = await world.harness(user, { timeoutMs: 120_000 })
    const terminals = []
    for (let index = 0; index < 4; index += 1) terminals.push(await remote.open())
    try {
      const floods = terminals.map(terminal => terminal.startSend("yes 'flood line of text for the cancel case'"))
      // Each flood runs (its output arrives) before the cancel.
      const runtime = remote.runtime as RemoteSubprocessRuntime<never>
      await Promise.all(terminals.map(terminal => untilOutput(runtime.terminal(terminal.pid!)!, 'flood line of text for the cancel case\r\nflood')))
      for (const flood of floods) flood.cancel()
      const settled = await Promise.all(floods.map(flood => flood.done))
      expect(settled.map(result => result.waitReason)).toEqual(terminals.map(() => 'stdin_read'))
      // Each shell is at its prompt and takes the next command.
      for (const terminal of terminals) {
        const next = await terminal.send('echo after-$((40+2))')
        expect(next.waitReason).toBe('stdin_read')
        expect(next.viewport).toContain('after-42')
      }
    } finally {
      await Promise.allSettled(terminals.map(terminal => terminal.close()))
    }
  }, 180_000)

  it('a cancelled count reaches terminal-bash whole: every number up to the last once, in order, then the prompt', async () => {
    const remote = await world.harness(user, { timeoutMs: 120_000 })
    const terminal = await remote.open()
    try {
      const runtime = remote.runtime as RemoteSubprocessRuntime<never>
      const handle = runtime.terminal(terminal.pid!)!
      let seen = ''
      // Well into the count (past every window and buffer on the way) before the cancel.
      const far = Promise.withResolvers<void>()
      handle.output.on('data', (chunk: Buffer | string) => {
        seen += chunk.toString()
        if (seen.includes('\r\n300000\r\n', seen.length - chunk.length - 16)) far.resolve()
      })
      const count = terminal.startSend('seq 1 100000000')
      await far.promise
      count.cancel()
      expect((await count.done).waitReason).toBe('stdin_read')
      // From the first number to the prompt's marker (OSC 133;D): whole lines 1..N, then at most
      // the start of N+1 that the SIGINT cut (bash ends the killed job's line with its own newline).
      const from = seen.indexOf('\r\n1\r\n2\r\n') + 2
      const to = seen.indexOf('\x1b]133;D', from)
      expect(from).toBeGreaterThan(1)
      expect(to, JSON.stringify(seen.slice(-300))).toBeGreaterThan(from)
      const whole = seen.slice(from, to).split('\r\n').map(line => line.replace('^C', '')).filter(line => line.length > 0)
      const cut = whole.pop()!
      expect(whole.length).toBeGreaterThanOrEqual(300_000)
      const firstWrong = whole.findIndex((line, index) => line !== String(index + 1))
      expect(firstWrong, firstWrong < 0 ? '' : JSON.stringify(whole.slice(Math.max(0, firstWrong - 3), firstWrong + 3))).toBe(-1)
      expect(String(whole.length + 1).startsWith(cut), JSON.stringify({ cut, last: whole.slice(-3), tail: seen.slice(to - 100, to + 40) })).toBe(true)
    } finally {
      await terminal.close()
    }
  }, 180_000)
}
