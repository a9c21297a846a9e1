/**
 * The CLI's held shells (issue 22), as a user runs them: `run --persist client --session NAME`
 * leaves its shell running at exit; `doctor` lists it; a later `run` of the same session and
 * target takes the same shell back (its pid, its environment), and one with other options starts
 * a fresh shell and says which it did not take; `doctor --reap --include-persistent` ends them,
 * and then `doctor` lists none.
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
    expect(first.stderr).toContain(`# detached: the shell (pid ${pid}) goes on in the world; \`dsh-remote-worlds run ${target.join(' ')} --script FILE\` takes it back`)

    const listed = await cli(['doctor', '--docker', container.id, '--user', 'agent'])
    expect(listed.stdout).toMatch(new RegExp(`held shell [0-9a-f]{32}: shell ${pid} \\(holder \\d+\\), session cli-held, started \\S+: detached since \\S+ \\(ends 86400 s after that\\)`))

    // Another cwd is another spec: a fresh shell, and the run says which shell it did not take.
    const elsewhere = await cli(['run', ...target, '--cwd', '/', '--json', '--script', script('elsewhere.txt', ['echo "pid=$$"'])])
    expect(elsewhere.code).toBe(0)
    const other = /pid=(\d+)/.exec(elsewhere.stdout)![1]!
    expect(other).not.toBe(pid)
    expect(elsewhere.stderr).toContain(`# this session also holds a shell started with other options (pid ${pid} in `)
    // So is another locale (the world's LANG, not the spec's env): the second run's shell is not taken either.
    const otherLocale = await cli(['run', ...target, '--locale', 'C', '--json', '--script', script('locale.txt', ['echo "pid=$$ lang=$LANG"'])])
    expect(otherLocale.code).toBe(0)
    const third = /pid=(\d+) lang=C(?![.\w])/.exec(otherLocale.stdout)![1]!
    expect([pid, other]).not.toContain(third)
    expect(otherLocale.stderr).toContain('# this session also holds 2 shells started with other options (')

    const second = await cli(['run', ...target, '--json', '--script', script('second.txt', ['echo "mark=$MARK pid=$$"'])])
    expect(second.code).toBe(0)
    expect(second.stdout).toContain(`mark=kept-42 pid=${pid}`)

    const unwidened = await cli(['doctor', '--docker', container.id, '--user', 'agent', '--include-persistent'])
    expect(unwidened.code).toBe(2)
    expect(unwidened.stderr).toContain('--include-persistent widens --reap to the held shells: add --reap')
    const reaped = await cli(['doctor', '--docker', container.id, '--user', 'agent', '--reap', '--include-persistent'])
    expect(reaped.stdout).toMatch(new RegExp(`held shell [0-9a-f]{32}: shell ${pid} .* — ended`))
    expect(reaped.stdout).toMatch(new RegExp(`held shell [0-9a-f]{32}: shell ${other} .* — ended`))
    expect(reaped.stdout).toMatch(new RegExp(`held shell [0-9a-f]{32}: shell ${third} .* — ended`))
    const after = await cli(['doctor', '--docker', container.id, '--user', 'agent'])
    expect(after.stdout).toContain('held shells (--persist; they outlive their clients):\n    none')
    expect((await execIn(container.id, ['sh', '-c', `kill -0 ${pid} 2>/dev/null && echo alive || echo gone`])).stdout.trim()).toBe('gone')
    // The reap also forgot this machine's records: the session's next run starts fresh, with no loss to report.
    const fresh = await cli(['run', ...target, '--json', '--script', script('fresh.txt', ['echo "pid=$$"', 'exit 0'])])
    expect(fresh.stderr).not.toContain('HELD_SHELL_LOST')
    expect(fresh.code).toBe(0)
    expect(/pid=(\d+)/.exec(fresh.stdout)![1]).not.toBe(pid)
  }, 180_000)

  it('--persist client without --session, and --session alone, are refused with what to add', async () => {
    const noSession = await cli(['run', '--docker', container.id, '--persist', 'client', '--script', script('x.txt', ['true'])])
    expect(noSession.code).toBe(2)
    expect(noSession.stderr).toContain('--persist client needs --session NAME: the name a later run takes the shells back by')
    const noPersist = await cli(['run', '--docker', container.id, '--session', 'x', '--script', script('y.txt', ['true'])])
    expect(noPersist.code).toBe(2)
    expect(noPersist.stderr).toContain('--session names the session a later run takes the shells back by: it needs --persist client')
  })

  it('a --session name that cannot be shown on one line (empty, a newline, an escape) is refused with the rule, the name shown escaped on one line', async () => {
    const rule = 'cannot be shown on one line: a session name is one or more characters, none of them a control character (U+0000-U+001F, U+007F-U+009F: a newline, a tab, an escape), a line or paragraph separator (U+2028, U+2029) or a lone surrogate'
    for (const [name, shown] of [['', ''], ['night\nly', 'night\\u{000A}ly'], ['\u001b[2Jx', '\\u{001B}[2Jx']] as const) {
      const refused = await cli(['run', '--docker', container.id, '--persist', 'client', '--session', name, '--script', script('z.txt', ['true'])])
      expect(refused.code).toBe(2)
      expect(refused.stderr).toBe(`dsh-remote-worlds: InvalidSessionNameError [INVALID_SESSION_NAME]: --session "${shown}" ${rule}\n`)
    }
  })
})
