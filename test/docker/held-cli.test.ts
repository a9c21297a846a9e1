/**
 * The CLI's held shells (issue 22), as a user runs them: `run --persist client --session NAME`
 * leaves its shell running at exit; `doctor` lists it; a later `run` of the same session and
 * target takes the same shell back (its pid, its environment); `doctor --reap
 * --include-persistent` ends it, and then `doctor` lists none.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import type Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ROOT } from '../helpers/built-package.ts'
import { execIn, startTestContainer } from './helpers.ts'

let container: Docker.Container
let dir: string

beforeAll(async () => {
  container = await startTestContainer()
  dir = mkdtempSync(join(tmpdir(), 'dsh-held-cli-'))
})

afterAll(async () => {
  await container?.remove({ force: true }).catch(() => undefined)
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
})

/** Run the CLI (its records kept in this test's folder, as XDG_STATE_HOME); never rejects. */
async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { cwd: ROOT, maxBuffer: 16 << 20, env: { ...process.env, XDG_STATE_HOME: dir } })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string }
    return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' }
  }
}

function script(name: string, lines: string[]): string {
  const file = join(dir, name)
  writeFileSync(file, `${lines.join('\n')}\n`)
  return file
}

describe('the CLI with --persist client', () => {
  it('a run leaves its shell; doctor lists it; the next run of the session takes the same shell back; doctor --reap --include-persistent ends it', async () => {
    const target = ['--docker', container.id, '--user', 'agent', '--persist', 'client', '--session', 'cli-held']
    const first = await cli(['run', ...target, '--json', '--script', script('first.txt', ['export MARK=kept-$((40+2)); echo "pid=$$"'])])
    expect(first.code).toBe(0)
    const pid = /pid=(\d+)/.exec(first.stdout)![1]!
    expect(first.stderr).toContain(`# detached: the shell (pid ${pid}) goes on in the world; \`run --persist client --session cli-held\` with the same target takes it back`)

    const listed = await cli(['doctor', '--docker', container.id, '--user', 'agent'])
    expect(listed.stdout).toMatch(new RegExp(`held shell [0-9a-f]{32}: shell ${pid} \\(holder \\d+\\), session cli-held, started \\S+: detached since \\S+ \\(ends 86400 s after that\\)`))

    const second = await cli(['run', ...target, '--json', '--script', script('second.txt', ['echo "mark=$MARK pid=$$"'])])
    expect(second.code).toBe(0)
    expect(second.stdout).toContain(`mark=kept-42 pid=${pid}`)

    const reaped = await cli(['doctor', '--docker', container.id, '--user', 'agent', '--reap', '--include-persistent'])
    expect(reaped.stdout).toMatch(new RegExp(`held shell [0-9a-f]{32}: shell ${pid} .* — ended`))
    const after = await cli(['doctor', '--docker', container.id, '--user', 'agent'])
    expect(after.stdout).toContain('held shells (--persist; they outlive their clients):\n    none')
    expect((await execIn(container.id, ['sh', '-c', `kill -0 ${pid} 2>/dev/null && echo alive || echo gone`])).stdout.trim()).toBe('gone')
  }, 180_000)

  it('--persist client without --session, and --session alone, are refused with what to add', async () => {
    const noSession = await cli(['run', '--docker', container.id, '--persist', 'client', '--script', script('x.txt', ['true'])])
    expect(noSession.code).toBe(2)
    expect(noSession.stderr).toContain('--persist client needs --session NAME: the name a later run takes the shells back by')
    const noPersist = await cli(['run', '--docker', container.id, '--session', 'x', '--script', script('y.txt', ['true'])])
    expect(noPersist.code).toBe(2)
    expect(noPersist.stderr).toContain('--session names the session a later run takes the shells back by: it needs --persist client')
  })
})
