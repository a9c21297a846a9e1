/**
 * The `dsh-remote-worlds` CLI end to end: `doctor` attached to an existing container proves every
 * readiness and teardown fact as root and as the non-root user; `demo` runs a session in a
 * throwaway container, proves nothing is left, and removes the container; bad targets fail
 * with a typed error and exit code 2; `run`'s `@screen` step and the screens of its sends,
 * `shell`'s `@screen` line, and the terminal flags (`--replies`, `--no-emulator`).
 */
import { execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { containerProcesses, hangGuard, startTestContainer, waitFor } from './helpers.ts'

const root = fileURLToPath(new URL('../..', import.meta.url))
const docker = new Docker()
let container: Docker.Container

/** One `run --json` record, as far as these tests read it. */
interface RunRecord { i: number; text: string; waitReason?: string; output?: string; screen?: { rows: number; cols: number; cursor: { row: number; col: number }; altScreen: boolean; lines: string[] }; screenError?: string }

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { cwd: root, maxBuffer: 16 << 20 })
    return { code: 0, stdout, stderr }
  } catch (error) {
    const failure = error as { code: number; stdout: string; stderr: string }
    return { code: failure.code, stdout: failure.stdout, stderr: failure.stderr }
  }
}

beforeAll(async () => {
  container = await startTestContainer()
})

afterAll(async () => {
  await container?.remove({ force: true })
})

describe.each(['agent', 'root'])('dsh-remote-worlds doctor --docker CONTAINER --user %s', user => {
  it('proves pid publication, foreground probing, exact stdin-wait (fd 0 and /dev/tty), signal delivery and teardown, and names the locale and HOME', async () => {
    const { code, stdout } = await cli(['doctor', '--docker', container.id, '--user', user, '--cwd', '/tmp', '--json'])
    const report = JSON.parse(stdout) as { checks: { name: string; ok: boolean; detail: string }[] }
    expect(report.checks.map(check => [check.name, check.ok])).toEqual([
      ['control channel', true],
      ['session ownership', true],
      ['resource events', true],
      ['terminal parent', true],
      ['persistence', true],
      ['locale', true],
      ['home', true],
      ['pid publication', true],
      ['foreground probing', true],
      ['exact stdin-wait', true],
      ['signal delivery', true],
      ['terminal reads beyond fd 0', true],
      ['teardown proof', true],
      ['terminal replies', true],
      ['files', true],
      ['file writes', true],
      ['search', true],
      ['network', true],
    ])
    const detail = (name: string): string | undefined => report.checks.find(check => check.name === name)?.detail
    const home = user === 'root' ? '/root' : '/home/agent'
    expect(detail('files')).toMatch(new RegExp(`^file server ${home}/\\.cache/dsh-remote-worlds/tools/[0-9a-f]{64}/dsh-fsd( \\(copied in now\\))?; median stat round trip \\d+\\.\\d\\d ms; /tmp lists \\d+ entries$`))
    expect(detail('file writes')).toBe('a file written atomically in /tmp under danger-full-access reads back exactly')
    expect(detail('terminal parent')).toMatch(new RegExp(`^dsh-pty ${home}/\\.cache/dsh-remote-worlds/tools/[0-9a-f]{64}/dsh-pty owns each terminal's PTY and reaps its shell`))
    expect(detail('terminal parent')).toContain("persistence ('connection', 'client'): held by dsh-pty's holder (dsh-held), the one holder tier this package ships")
    // Without --persist: the default, 'connection', where dsh-pty holds shells (issue 33).
    expect(detail('persistence')).toBe('connection (the default; --persist off opts out): a transport cut shorter than the reconnect deadline is not seen by the shell')
    expect(detail('search')).toBe('glob and grep run /usr/bin/rg in the world (ripgrep 13.0.0)')
    expect(detail('network')).toBe('full: the world\'s own network, unconfined (danger-full-access)')
    expect(detail('locale')).toBe('the world\'s own LANG=C.UTF-8')
    expect(detail('home')).toBe(`HOME=${user === 'root' ? '/root' : '/home/agent'}`)
    expect(detail('terminal reads beyond fd 0')).toMatch(/^a read of \/dev\/tty on fd 3 \(group \d+\) is proven too/)
    expect(detail('terminal replies')).toMatch(/^cursor position report answered in \d+ ms \(xterm\.js headless emulator\)$/)
    expect(report.checks[0]!.detail).toContain(`uid ${user === 'root' ? 0 : 1000}, arch x86_64`)
    // This machine's kernel keeps memory and pids in cgroup v1; the container sets no limits.
    expect(report.checks[2]!.detail).toBe('cgroup v1: watching /sys/fs/cgroup/memory/memory.oom_control (oom_kill) and /sys/fs/cgroup/pids/pids.events (max); no memory limit, no pids limit')
    expect(code).toBe(0)
  }, 60_000)
})

describe('dsh-remote-worlds doctor --docker CONTAINER --user 4242:4242 --locale off', () => {
  it('names the private HOME of a uid without a passwd entry, and the locale left as the world has it', async () => {
    const { code, stdout } = await cli(['doctor', '--docker', container.id, '--user', '4242:4242', '--locale', 'off', '--cwd', '/tmp', '--json'])
    const report = JSON.parse(stdout) as { checks: { name: string; ok: boolean; detail: string }[] }
    const check = (name: string): { ok: boolean; detail: string } | undefined => report.checks.map(({ ok, detail, name: found }) => found === name ? { ok, detail } : undefined).find(found => found !== undefined)
    expect(check('home')).toEqual({ ok: true, detail: 'uid 4242 has no passwd entry: HOME=/tmp/dsh-remote-home-4242, a private directory made for it (the world\'s HOME=/ is not writable for dotfiles)' })
    expect(check('locale')).toEqual({ ok: true, detail: 'locale setting off: the world\'s environment is kept as it is' })
    expect(code).toBe(0)
  }, 60_000)
})

describe('dsh-remote-worlds run in a container with a 256 MiB memory limit', () => {
  let limited: Docker.Container
  const script = join(tmpdir(), `dsh-remote-oom-${process.pid}.txt`)

  beforeAll(async () => {
    limited = await startTestContainer({ HostConfig: { Memory: 256 << 20, MemorySwap: 256 << 20 } })
    writeFileSync(script, "python3 -c 'b=bytearray(600<<20)'\necho fine\n")
  })

  afterAll(async () => {
    await limited?.remove({ force: true })
    rmSync(script, { force: true })
  })

  it('--json: the killed send\'s record carries events, the next one none', async () => {
    const { code, stdout } = await cli(['run', '--docker', limited.id, '--user', 'agent', '--cwd', '/tmp', '--json', '--script', script])
    const records = stdout.trim().split('\n').map(line => JSON.parse(line) as { text: string; events?: unknown })
    expect(records.map(record => [record.text, record.events])).toEqual([
      ["python3 -c 'b=bytearray(600<<20)'", [{ kind: 'oom_kill', count: 1, limitBytes: 268435456 }]],
      ['echo fine', undefined],
    ])
    expect(code).toBe(0)
  }, 60_000)

  it('the human transcript names the memory limit under the killed send', async () => {
    const { code, stdout } = await cli(['run', '--docker', limited.id, '--user', 'agent', '--cwd', '/tmp', '--script', script])
    const lines = stdout.split('\n')
    const killed = lines.findIndex(line => line.includes("$ python3 -c 'b=bytearray(600<<20)'"))
    const next = lines.findIndex(line => line.includes('$ echo fine'))
    expect(lines.slice(killed, next)).toContain("    ! the world's memory limit (256 MiB) killed 1 process (oom_kill)")
    expect(lines.slice(next).filter(line => line.startsWith('    !'))).toEqual([])
    expect(code).toBe(0)
  }, 60_000)
})

describe('dsh-remote-worlds demo', () => {
  it('runs a session in a throwaway container, leaves nothing running and removes the container', async () => {
    const { code, stdout } = await cli(['demo'])
    expect(stdout).toContain('nothing of the session is left')
    expect(stdout).toMatch(/container [0-9a-f]{12} removed/)
    expect(stdout).toContain('status=130')
    expect(stdout).toContain('hi world')
    const id = /container ([0-9a-f]{12}) removed/.exec(stdout)![1]!
    await expect(docker.getContainer(id).inspect()).rejects.toMatchObject({ statusCode: 404 })
    expect(code).toBe(0)
  }, 120_000)
})

describe('dsh-remote-worlds interrupted', () => {
  it('closes its world on SIGINT: the managed container is removed and the exit status is 130', async () => {
    const managed = async (): Promise<string[]> => (await docker.listContainers({ all: true, filters: { label: ['dsh-remote-worlds.managed=true'] } })).map(info => info.Id)
    const before = new Set(await managed())
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'run', '--script', '-'], { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] })
    // A command that keeps printing never settles by silence: the CLI is mid-send when interrupted.
    // Its own sleep duration tells its container from those another test run makes meanwhile.
    const duration = `97${process.pid}`
    child.stdin.end(`sleep ${duration} &\nwhile :; do echo tick; sleep 0.2; done\n`)
    let stdout = ''
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
    await waitFor(() => stdout, text => text.includes('[1] stdin_read'), 60_000)
    const runsOurs = async (id: string): Promise<boolean> => (await containerProcesses(id).catch(() => [])).some(row => row.cmdline === `sleep ${duration}`)
    const ours = await waitFor(async () => {
      const made = (await managed()).filter(id => !before.has(id))
      const runs = await Promise.all(made.map(runsOurs))
      return made.filter((_, index) => runs[index])
    }, found => found.length === 1)
    expect(ours).toHaveLength(1)
    child.kill('SIGINT')
    const [code] = await once(child, 'exit') as [number | null]
    expect(code).toBe(130)
    await expect(docker.getContainer(ours[0]!).inspect()).rejects.toMatchObject({ statusCode: 404 })
  }, 90_000)
})

describe('dsh-remote-worlds sandbox flags', () => {
  it('refuses a confined mode in a managed container without a workspace, naming the fix', async () => {
    const { code, stderr } = await cli(['run', '--mode', 'read-only', '--script', 'test/fixtures/agent-session-basic.txt'])
    expect(stderr).toContain('InvalidArgumentError [INVALID_ARGUMENT]: --mode read-only in a managed container needs --workspace HOST_DIR')
    expect(code).toBe(2)
  })

  it('refuses a workspace folder that does not exist', async () => {
    const { code, stderr } = await cli(['run', '--workspace', '/nonexistent/dsh-remote-ws', '--script', 'test/fixtures/agent-session-basic.txt'])
    expect(stderr).toContain('InvalidArgumentError [INVALID_ARGUMENT]: --workspace /nonexistent/dsh-remote-ws: no such host folder')
    expect(code).toBe(2)
  })
})

describe('dsh-remote-worlds with a bad target', () => {
  it('names the typed error and exits 2 for an unknown container', async () => {
    const { code, stderr } = await cli(['run', '--docker', 'dsh-remote-no-such-container', '--script', 'test/fixtures/agent-session-basic.txt'])
    expect(stderr).toContain('TargetNotFoundError [TARGET_NOT_FOUND]')
    expect(code).toBe(2)
  }, 60_000)

  it('says only what is true of an image that does not exist (no "no such container")', async () => {
    const { code, stderr } = await cli(['run', '--image', 'dsh-remote-no-such-image:1', '--script', 'test/fixtures/agent-session-basic.txt'])
    expect(stderr).toBe('dsh-remote-worlds: TargetNotFoundError [TARGET_NOT_FOUND]: docker image dsh-remote-no-such-image:1 does not exist locally (the engine says: No such image: dsh-remote-no-such-image:1); build it (docker/ensure-world.sh builds the project image) or pull it\n')
    expect(code).toBe(2)
  }, 60_000)

  it('leads a refused sandbox mode with the world\'s own reason, not upstream\'s advice for local hosts', async () => {
    const { code, stderr } = await cli(['run', '--docker', container.id, '--user', 'agent', '--mode', 'read-only', '--workspace', '/tmp', '--script', 'test/fixtures/agent-session-basic.txt'])
    const line = stderr.split('\n').find(text => text.startsWith('dsh-remote-worlds: '))!
    expect(line).toMatch(/^dsh-remote-worlds: SandboxUnavailableError \[SANDBOX_UNAVAILABLE\]: docker container [0-9a-f]{12}/)
    expect(line.endsWith('(sandbox mode read-only cannot be enforced there, so nothing was started; use a world that enforces it, or danger-full-access)')).toBe(true)
    expect(line).not.toContain('Landlock')
    expect(code).toBe(2)
  }, 60_000)
})

describe('dsh-remote-worlds usage errors', () => {
  it.each([
    ['an unknown option', ['run', '--no-such-option', '--script', '-']],
    ['a bad --mode', ['run', '--mode', 'wide-open', '--script', '-']],
    ['a missing --script', ['run']],
  ])('%s exits 2 (an error), never 1 (something is left)', async (_what, args) => {
    const { code, stderr } = await cli(args)
    expect(stderr).toMatch(/^error: /)
    expect(code).toBe(2)
  })
})

describe('dsh-remote-worlds doctor on a managed container', () => {
  it('says what a confined mode needs (a workspace) instead of "not available"', async () => {
    const { stdout } = await cli(['doctor'])
    expect(stdout).toContain('read-only: available with --mode read-only --workspace HOST_DIR (a managed container is then created from that mode\'s policy, with the folder at /workspace; this one was created for danger-full-access)')
    expect(stdout).toContain('workspace-write: available with --mode workspace-write --workspace HOST_DIR')
    expect(stdout).not.toContain('NOT available')
  }, 120_000)
})

describe('dsh-remote-worlds run: screens', () => {
  const files: string[] = []
  /** A script file with these lines (removed after the tests). */
  const script = (...lines: string[]): string => {
    const file = join(tmpdir(), `dsh-remote-screen-${process.pid}-${files.length}.txt`)
    writeFileSync(file, `${lines.join('\n')}\n`)
    files.push(file)
    return file
  }
  const run = (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => cli(['run', '--docker', container.id, '--user', 'agent', '--cwd', '/tmp', ...args])
  const records = (stdout: string): RunRecord[] => stdout.trim().split('\n').map(line => JSON.parse(line) as RunRecord)
  const blankRows = (count: number): string[] => Array.from({ length: count }, () => '')
  // A full-screen program in miniature: enters the alternate screen, draws, waits for a line, leaves.
  const fullScreen = "printf '\\033[?1049h\\033[H\\033[2Jalt-screen-text'; read -rs x; printf '\\033[?1049l'"

  afterAll(() => {
    for (const file of files) rmSync(file, { force: true })
  })

  it('--json: a send into the alternate screen and @screen carry the screen; after the program left it, @screen shows the normal screen', async () => {
    // `done` answers the read (a blank line would be skipped: scripts skip blank lines).
    const { code, stdout } = await run('--json', '--script', script(fullScreen, '@screen', 'done', '@screen'))
    const [send, shown, answer, after] = records(stdout)
    const alternate = { rows: 40, cols: 160, cursor: { row: 0, col: 15 }, altScreen: true, lines: ['alt-screen-text', ...blankRows(39)] }
    expect(send!.screen).toEqual(alternate)
    expect(shown).toEqual({ i: 2, line: 2, text: '@screen', screen: alternate })
    expect([answer!.text, answer!.waitReason, 'screen' in answer!]).toEqual(['done', 'stdin_read', false])
    // Rows are trimmed of trailing spaces, also those a program wrote (the prompt's).
    expect(after).toEqual({ i: 4, line: 4, text: '@screen', screen: { rows: 40, cols: 160, cursor: { row: 1, col: 5 }, altScreen: false, lines: [`dsh> ${fullScreen}`, 'dsh>', ...blankRows(38)] } })
    expect(code).toBe(0)
  })

  it('--json: a send that settles inferred_idle carries the screen; one that settles at the prompt does not', async () => {
    // Far past the 3 s silence settle, so the sleep cannot end first on a loaded machine.
    const { code, stdout } = await run('--json', '--script', script('echo hi', 'sleep 30'))
    const [echo, sleep] = records(stdout)
    expect([echo!.waitReason, 'screen' in echo!]).toEqual(['stdin_read', false])
    expect(sleep!.waitReason).toBe('inferred_idle')
    expect(sleep!.screen).toEqual({ rows: 40, cols: 160, cursor: { row: 3, col: 0 }, altScreen: false, lines: ['dsh> echo hi', 'hi', 'dsh> sleep 30', ...blankRows(37)] })
    expect(code).toBe(0)
  })

  it('shows humans the framed screen of @screen and of a send into the alternate screen', async () => {
    const { code, stdout } = await run('--script', script(fullScreen, '@screen', 'done'))
    const lines = stdout.split('\n')
    const step = (i: number): number => lines.findIndex(line => line.startsWith(`[${i}] `))
    const sendScreen = lines.indexOf('    screen: 40x160, cursor 0:15, alternate screen')
    expect(sendScreen > step(1) && sendScreen < step(2)).toBe(true)
    expect(lines.slice(sendScreen + 1, step(2))).toEqual(['    | alt-screen-text'])
    expect(lines.slice(step(2), step(3))).toEqual(['[2] @screen  40x160, cursor 0:15, alternate screen', '    | alt-screen-text'])
    expect(code).toBe(0)
  })

  it('--no-emulator: @screen says why there is no screen, and the run goes on', async () => {
    const file = script('@screen', 'echo still-here')
    const json = await run('--no-emulator', '--json', '--script', file)
    const pid = Number(/shell pid (\d+)/.exec(json.stderr)![1])
    const reason = `terminal ${pid} in docker container ${container.id.slice(0, 12)} as agent has no emulator (runtime setting terminal.emulator is false)`
    const [shown, echo] = records(json.stdout)
    expect(shown).toEqual({ i: 1, line: 1, text: '@screen', screenError: reason })
    expect(echo!.output).toBe('echo still-here\nstill-here\ndsh> ')
    expect(json.code).toBe(0)
    const human = await run('--no-emulator', '--script', file)
    const humanPid = Number(/shell pid (\d+)/.exec(human.stdout)![1])
    expect(human.stdout.split('\n').slice(1, 3)).toEqual(['[1] @screen', `    ! screen unavailable: ${reason.replace(`terminal ${pid} `, `terminal ${humanPid} `)}`])
    expect(human.code).toBe(0)
  })

  it.each([
    ['answers a cursor position query by default', [], 'status-0'],
    ['--replies off leaves it unanswered: the read times out', ['--replies', 'off'], 'status-142'],
  ])('%s', async (_what, flags, status) => {
    // The first @screen waits for the process's emulator worker to run (its cold start is
    // ~0.5 s under tsx), so the query is not answered late. A read waiting on the terminal
    // settles the query's send as stdin_read at once; the empty @raw (nothing typed) then
    // waits for the prompt, so the status line lands in one of the two records.
    const { code, stdout } = await run(...flags, '--json', '--script', script('@screen', "printf '\\033[6n'; read -t 1 -rs -d R pos; echo \"status-$?\"", '@raw'))
    const printed = records(stdout).flatMap(record => (record.output ?? '').split('\n')).filter(line => line.startsWith('status-'))
    expect(printed).toEqual([status])
    expect(code).toBe(0)
  })

  it('exits as soon as its world is closed (the emulator worker does not hold the process)', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'run', '--docker', container.id, '--user', 'agent', '--cwd', '/tmp', '--script', script('echo hi')], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    const closed = Promise.withResolvers<void>()
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString()
      if (stderr.includes('# closed')) closed.resolve()
    })
    const exited = once(child, 'exit') as Promise<[number | null]>
    await hangGuard(closed.promise, 60_000, 'the CLI closing its terminal')
    // It waited out the worker's 30 s idle timer when a 'message' listener re-referenced it: the
    // exit follows the world's disposal, far inside that timer (a generous bound under load).
    const [code] = await hangGuard(exited, 20_000, 'the CLI exit after its world closed')
    expect(code).toBe(0)
  })
})

describe('dsh-remote-worlds doctor without terminal replies', () => {
  it.each([
    ['--replies off', ['--replies', 'off']],
    ['--no-emulator', ['--no-emulator']],
  ])('%s: the terminal replies check fails, naming the flag', async (flag, flags) => {
    const { code, stdout } = await cli(['doctor', '--docker', container.id, '--user', 'agent', '--cwd', '/tmp', ...flags, '--json'])
    const report = JSON.parse(stdout) as { checks: { name: string; ok: boolean; detail: string }[] }
    expect(report.checks.filter(check => !check.ok)).toEqual([{ name: 'terminal replies', ok: false, detail: `not answered (${flag}): programs that ask the terminal something (a cursor position, colours, device attributes) wait for an answer that never comes` }])
    expect(code).toBe(1)
  }, 60_000)
})

describe('dsh-remote-worlds shell', () => {
  it('shows the screen for a typed @screen line instead of sending it', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'shell', '--docker', container.id, '--user', 'agent', '--cwd', '/tmp'], { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] })
    child.stdin.end('echo hi\n@screen\n')
    let stdout = ''
    child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
    const [code] = await once(child, 'exit') as [number | null]
    const lines = stdout.split('\n')
    const settled = lines.findIndex(line => line.startsWith('[stdin_read, '))
    expect(lines.slice(settled + 1)).toEqual(['@screen  40x160, cursor 2:5, normal screen', '    | dsh> echo hi', '    | hi', '    | dsh>', ''])
    expect(code).toBe(0)
  })
})
