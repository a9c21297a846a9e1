/**
 * What a world gives its user's programs besides the harness's env (issue 10, items 2 and 3):
 * a UTF-8 locale where the world has one and names none, and a writable HOME. Shared by the
 * Docker and SSH worlds.
 */
import type { SubprocessRuntime } from '@deepseek-ai/dsh-subprocess'
import { expect } from 'vitest'
import type { RemoteWorld } from '../../src/backend/world.ts'

const MB = 1024 * 1024

/** The locale input and what a UTF-8 locale prints for it. */
export const LOCALE_INPUT = "touch 中.txt; ls 中.txt; printf 'é' | wc -m"

/** Send the locale input in a fresh directory; returns the lines it printed. */
export async function localeLines(world: RemoteWorld): Promise<string[]> {
  const terminal = await world.open()
  try {
    const result = await terminal.send(`cd "$(mktemp -d)" && ${LOCALE_INPUT}`)
    expect(result.waitReason).toBe('stdin_read')
    return result.viewport.split('\n').slice(1, -1)
  } finally {
    await terminal.close()
  }
}

/** Run `sh -c SCRIPT` through the runtime's spawn (collected); returns its stdout. */
export async function spawnedOutput(runtime: SubprocessRuntime, script: string): Promise<string> {
  const handle = runtime.spawn({ argv: ['sh', '-c', script], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: { maxBytes: MB }, stderr: { maxBytes: MB } }, graceMs: 500 })
  expect(await handle.done).toEqual({ exitCode: 0, signal: null })
  return handle.collected.stdout!.readFrom(0).text
}

/** Run `fn` with the client's LANG set to `lang` (undefined: unset), restoring it after. */
export async function withCallerLang<T>(lang: string | undefined, fn: () => Promise<T>): Promise<T> {
  const previous = process.env.LANG
  if (lang === undefined) delete process.env.LANG
  else process.env.LANG = lang
  try {
    return await fn()
  } finally {
    if (previous === undefined) delete process.env.LANG
    else process.env.LANG = previous
  }
}
