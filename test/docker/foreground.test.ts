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

/** Poll until the foreground group is not the shell's; return the facts seen over `ms`. */
async function factsWhileForeground(ms: number): Promise<{ pgid: number; waiting: boolean }[]> {
  const seen: { pgid: number; waiting: boolean }[] = []
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    const facts = await terminal.inspectForeground()
    if (facts !== undefined && facts.processGroupId !== terminal.pid) seen.push({ pgid: facts.processGroupId, waiting: facts.inputWaiting })
    await delay(20)
  }
  return seen
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
    const seen = await factsWhileForeground(1_000)
    expect(seen.length).toBeGreaterThan(10)
    expect(seen.filter(facts => facts.waiting)).toEqual([])
    await delay(800)
  })

  it('proves cat blocked reading the terminal, in its own foreground group', async () => {
    await terminal.write('cat\r')
    const seen = await factsWhileForeground(600)
    expect(seen.length).toBeGreaterThan(5)
    expect(seen.at(-1)!.waiting).toBe(true)
    expect(seen.at(-1)!.pgid).not.toBe(terminal.pid)
    expect(await terminal.signalForeground('SIGINT')).toBe(seen.at(-1)!.pgid)
  })

  it('proves the last stage of a pipeline that reads the terminal (cat | sort) as waiting', async () => {
    await terminal.write('cat | sort\r')
    const seen = await factsWhileForeground(600)
    expect(seen.at(-1)!.waiting).toBe(true)
    await terminal.signalForeground('SIGINT')
  })
})
