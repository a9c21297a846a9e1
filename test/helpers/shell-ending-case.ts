/**
 * The shell's end as the CLI user sees it (issue 24), shared by every world: `dsh-remote-worlds
 * run --json` with a send that ends the shell; the last record's `sessionStatus` is the shell's
 * true wait status, a signal death told apart from an exit code of 128+N.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, expect, it } from 'vitest'

const root = fileURLToPath(new URL('../..', import.meta.url))

/** The cases; call inside a describe. `targetArgs` is read when the cases run (after a beforeAll). */
export function shellEndingCliCases(targetArgs: () => readonly string[]): void {
  const scratch = mkdtempSync(join(tmpdir(), 'dsh-shell-ending-'))
  afterAll(() => rmSync(scratch, { recursive: true, force: true }))
  const endings: readonly [string, Record<string, unknown>][] = [
    ['kill -9 $$', { kind: 'exited', exitCode: null, signal: 'SIGKILL' }],
    ['exit 137', { kind: 'exited', exitCode: 137, signal: null }],
  ]
  for (const [line, status] of endings) {
    it(`run --json: a send of \`${line}\` ends the session with ${JSON.stringify(status)}`, async () => {
      const script = join(scratch, `${line.replace(/\W+/g, '-')}.txt`)
      writeFileSync(script, `echo before\n${line}\n`)
      const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'run', ...targetArgs(), '--script', script, '--json'], { cwd: root, maxBuffer: 16 << 20 })
      const records = stdout.trim().split('\n').map(text => JSON.parse(text) as { text: string; sessionStatus: unknown })
      expect(records.map(record => [record.text, record.sessionStatus])).toEqual([
        ['echo before', { kind: 'running' }],
        [line, status],
      ])
    }, 120_000)
  }
}
