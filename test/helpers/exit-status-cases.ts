/**
 * No exit status is lost, world-neutral: programs that end at once, in every stdio mode of the
 * seam, many times over, concurrently. A transport event that fires before its listener exists
 * (ssh2 emits a fast program's `exit` within the same read that completes the exec request)
 * shows up here as a rejected `done` or a wrong status; every one must be exact.
 */
import { Context } from '@deepseek-ai/cordis'
import type { SubprocessHandle, SubprocessOutcome, SubprocessRuntime, SubprocessSpawnSpec, SubprocessStdio } from '@deepseek-ai/dsh-subprocess'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ControlChannel } from '../../src/providers/remote/control-channel.ts'

/** What a world supplies. */
export interface ExitStatusWorld {
  /** `docker` or `ssh`, for test names. */
  name: string
  /** Register the world's runtime in `ctx` as `agent` (ctx.subprocess). */
  plugin(ctx: Context): Promise<void>
}

const MB = 1024 * 1024

/** The stdio modes of the seam every count runs in. */
export const STDIO_MODES: Readonly<Record<string, SubprocessStdio>> = {
  'pipe (stdin ignored)': { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' },
  'pipe (stdin piped)': { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' },
  'collect without a spill': { stdin: 'ignore', stdout: { maxBytes: MB }, stderr: { maxBytes: MB } },
  'collect with a spill': { stdin: 'ignore', stdout: { maxBytes: MB, spill: { maxBytes: 8 * MB } }, stderr: { maxBytes: MB, spill: { maxBytes: 8 * MB } } },
}

/** Run `count` spawns with at most `parallel` in flight; returns every outcome (or the error's text). */
async function spawnMany(runtime: SubprocessRuntime, spec: () => SubprocessSpawnSpec, count: number, parallel: number): Promise<(SubprocessOutcome | string)[]> {
  const outcomes: (SubprocessOutcome | string)[] = []
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < count) {
      next += 1
      const handle: SubprocessHandle = runtime.spawn(spec())
      handle.stdin?.end()
      handle.stdout?.resume()
      handle.stderr?.resume()
      outcomes.push(await handle.done.catch((error: unknown) => `${(error as Error).name}: ${(error as Error).message}`))
    }
  }
  await Promise.all(Array.from({ length: parallel }, worker))
  return outcomes
}

/** Tally outcomes as `JSON -> count`, so a failure shows every distinct wrong value at once. */
function tally(outcomes: readonly (SubprocessOutcome | string)[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const outcome of outcomes) {
    const key = typeof outcome === 'string' ? outcome : JSON.stringify(outcome)
    counts[key] = (counts[key] ?? 0) + 1
  }
  return counts
}

/**
 * The suite; call at the top level of a test file.
 * @param options.spawns - spawns per stdio mode (npm test: 200; the soak, test/long: 1000).
 * @param options.spawnsOnly - only the spawn-count cases (the soak's: the rest run in npm test).
 */
export function exitStatusCases(world: ExitStatusWorld, options: { spawns: number; parallel: number; spawnsOnly?: boolean }): void {
  describe(`no exit status is lost in the ${world.name} world (as agent, ${options.parallel} in flight)`, () => {
    let ctx: Context
    let runtime: SubprocessRuntime

    beforeAll(async () => {
      ctx = new Context()
      await world.plugin(ctx)
      runtime = ctx.subprocess
    })

    afterAll(async () => {
      await ctx?.fiber.dispose()
    })

    for (const [mode, stdio] of Object.entries(STDIO_MODES)) {
      it(`${options.spawns} spawns of \`exit 7\` with ${mode}: every one { exitCode: 7, signal: null }`, async () => {
        const outcomes = await spawnMany(runtime, () => ({ argv: ['sh', '-c', 'exit 7'], cwd: '/tmp', stdio, graceMs: 1_000 }), options.spawns, options.parallel)
        expect(tally(outcomes)).toEqual({ [JSON.stringify({ exitCode: 7, signal: null })]: options.spawns })
      }, 600_000)
    }
    // The soak (test/long) repeats only the counts above; the rest is npm test's.
    if (options.spawnsOnly === true) return

    it('200 spawns of `kill -TERM $$`: every one { exitCode: null, signal: SIGTERM }', async () => {
      const outcomes = await spawnMany(runtime, () => ({ argv: ['sh', '-c', 'kill -TERM $$'], cwd: '/tmp', stdio: STDIO_MODES['pipe (stdin ignored)']!, graceMs: 1_000 }), 200, options.parallel)
      expect(tally(outcomes)).toEqual({ [JSON.stringify({ exitCode: null, signal: 'SIGTERM' })]: 200 })
    }, 600_000)

    // A terminal's outcome is the shell's true wait status in every world (issue 24): the
    // terminal's world-side parent (world/dsh-pty/dsh-pty.c) reaps the shell, so a signal death
    // and an exit code of 128+N differ, as in the upstream local provider.
    const SHELL_ENDINGS: readonly [string, SubprocessOutcome][] = [
      ['kill -9 $$', { exitCode: null, signal: 'SIGKILL' }],
      ['kill -USR1 $$', { exitCode: null, signal: 'SIGUSR1' }],
      ['kill -HUP $$', { exitCode: null, signal: 'SIGHUP' }],
      ['exit 137', { exitCode: 137, signal: null }],
      ['exit 0', { exitCode: 0, signal: null }],
    ]
    for (const [line, expected] of SHELL_ENDINGS) {
      it(`an interactive bash that runs \`${line}\` ends the terminal with ${JSON.stringify(expected)}`, async () => {
        const terminal = await runtime.spawnTerminal({ argv: ['bash', '--norc', '--noprofile', '-i'], cwd: '/tmp', env: { PS1: 'ready> ' }, rows: 24, cols: 80, graceMs: 1_000 })
        try {
          terminal.output.resume()
          // Held by the handle until the shell first reads its terminal.
          await terminal.write(`${line}\n`)
          expect(await terminal.done).toEqual(expected)
        } finally {
          await terminal.terminate()
        }
      }, 60_000)
    }

    it('an interactive bash ended by terminate() reports the signal that ended it', async () => {
      const terminal = await runtime.spawnTerminal({ argv: ['bash', '--norc', '--noprofile', '-i'], cwd: '/tmp', env: { PS1: 'ready> ' }, rows: 24, cols: 80, graceMs: 1_000 })
      let seen = ''
      const prompt = new Promise<void>(resolve => terminal.output.on('data', (chunk: Buffer) => {
        seen += chunk.toString('utf8')
        if (seen.includes('ready> ')) resolve()
      }))
      await prompt
      await terminal.terminate()
      expect(await terminal.done).toEqual({ exitCode: null, signal: 'SIGKILL' })
    }, 60_000)

    it('a shell that stops its own parent (kill -STOP $PPID): terminate() continues it, so done is still the true status, and nothing is left', async () => {
      const terminal = await runtime.spawnTerminal({ argv: ['bash', '--norc', '--noprofile', '-i'], cwd: '/tmp', env: { PS1: 'ready> ' }, rows: 24, cols: 80, graceMs: 1_000 })
      let seen = ''
      terminal.output.on('data', (chunk: Buffer) => { seen += chunk.toString('utf8') })
      await terminal.write('echo "parent=$PPID"\n')
      await expect.poll(() => /parent=(\d+)\r\n/.test(seen), { timeout: 20_000 }).toBe(true)
      const parent = Number(/parent=(\d+)\r\n/.exec(seen)![1])
      const control = await (runtime as unknown as { control(): Promise<ControlChannel> }).control()
      expect((await control.stat(parent))?.state).toMatch(/^[RS]$/)
      await terminal.write('kill -STOP $PPID\n')
      await expect.poll(async () => (await control.stat(parent))?.state, { timeout: 20_000 }).toBe('T')
      await terminal.terminate()
      // Gone, or a zombie its own parent (the engine's exec, sshd) has not reaped yet.
      await expect.poll(async () => { const stat = await control.stat(parent); return stat === undefined || stat.state === 'Z' }, { timeout: 10_000 }).toBe(true)
      expect(await terminal.done).toEqual({ exitCode: null, signal: 'SIGKILL' })
    }, 60_000)

    it('200 terminals whose shell runs `exit 3`: every done is { exitCode: 3, signal: null }', async () => {
      const outcomes: (SubprocessOutcome | string)[] = []
      let next = 0
      const worker = async (): Promise<void> => {
        while (next < 200) {
          next += 1
          try {
            const terminal = await runtime.spawnTerminal({ argv: ['sh', '-c', 'exit 3'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1_000 })
            terminal.output.resume()
            outcomes.push(await terminal.done)
            await terminal.terminate()
          } catch (error) {
            outcomes.push(`${(error as Error).name}: ${(error as Error).message}`)
          }
        }
      }
      await Promise.all(Array.from({ length: options.parallel }, worker))
      expect(tally(outcomes)).toEqual({ [JSON.stringify({ exitCode: 3, signal: null })]: 200 })
    }, 600_000)
  })
}
