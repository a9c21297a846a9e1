/**
 * A client that dies leaves nothing running in the Docker world: on an attached container, the
 * shared suite (test/helpers/client-death-cases.ts); a managed container ends and is removed
 * by the engine itself within seconds of its client's SIGKILL (its pid 1 lives only while the
 * client holds the attach stream); and the documented invocation (docs/cli.md: `npx tsx
 * src/cli/main.ts`) keeps its teardown on a Ctrl-C, which tsx relays to the CLI once more.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import type Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { MANAGED_LABEL } from '../../src/providers/docker/docker-world.ts'
import { SESSION_SCRIPT, clientDeathCases, killHard, startCli } from '../helpers/client-death-cases.ts'
import { type ContainerProcess, IMAGE, containerProcesses, docker, execIn, startTestContainer, waitFor } from './helpers.ts'

const root = fileURLToPath(new URL('../..', import.meta.url))
let container: Docker.Container

beforeAll(async () => {
  container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'client-death' } })
})

afterAll(async () => {
  await container?.remove({ force: true })
})

clientDeathCases({
  name: 'docker (attached container)',
  containerId: () => container.id,
  // Persistence 'off', given (the default is 'connection', whose held shells outlive a dead client by design).
  cliFlags: () => ['--docker', container.id, '--user', 'agent', '--persist', 'off'],
  plugin: async ctx => { await ctx.plugin(DockerSubprocessRuntime, { container: container.id, user: 'agent', persistence: 'off' }) },
})

describe('a live client whose control program is killed', () => {
  it('keeps its sessions: another client does not take them for a gone client\'s, and its terminal goes on', async () => {
    const { Context } = await import('@deepseek-ai/cordis')
    const tag = `93${process.pid}`
    const alive = new Context()
    const other = new Context()
    try {
      await alive.plugin(DockerSubprocessRuntime, { container: container.id, user: 'agent' })
      const runtime = alive.subprocess as unknown as DockerSubprocessRuntime
      const terminal = await runtime.spawnTerminal({ argv: ['/bin/bash', '--noprofile', '--norc', '-i'], cwd: '/tmp', env: { PS1: 'dsh> ' }, rows: 24, cols: 80, graceMs: 1_000 })
      terminal.output.resume()
      await terminal.write(`setsid sleep ${tag}1 & sleep ${tag}2 &\r`)
      await waitFor(() => running(tag), rows => rows.length === 2, 10_000)
      // Its control program dies, as the same user can make it.
      const killed = await execIn(container.id, ['kill', '-KILL', String((await runtime.control()).info.pid)], 'agent')
      expect(killed.exitCode).toBe(0)
      await other.plugin(DockerSubprocessRuntime, { container: container.id, user: 'agent' })
      const reaper = other.subprocess as unknown as DockerSubprocessRuntime
      await reaper.control()
      const [outcome] = await reaper.ownership.reaped()
      expect(outcome).toEqual({ status: 'fulfilled', value: { orphans: [], ended: [] } })
      expect((await running(tag)).length).toBe(2)
      // Its terminal goes on, on the replaced channel.
      expect(await terminal.inspectForeground()).toEqual({ processGroupId: terminal.pid, inputWaiting: true })
      await terminal.terminate()
      expect(await running(tag)).toEqual([])
    } finally {
      await other.fiber.dispose()
      await alive.fiber.dispose()
    }
  }, 60_000)
})

describe('an ownership registry another user made first', () => {
  it('is not trusted: doctor fails its session-ownership check and says what follows, and run warns', async () => {
    const squatted = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'client-death' } })
    try {
      expect((await execIn(squatted.id, ['mkdir', '-m', '777', '/tmp/dsh-remote-owners-1000'], 'nobody')).exitCode).toBe(0)
      const reason = 'the ownership registry /tmp/dsh-remote-owners-1000 cannot be used (not creatable, or not a directory owned by uid 1000): what a client that dies leaves here cannot be found by the next one, and what others left is not seen'
      const doctor = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'doctor', '--docker', squatted.id, '--user', 'agent', '--cwd', '/tmp', '--json'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
      let stdout = ''
      doctor.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
      const [code] = await once(doctor, 'exit') as [number | null]
      const report = JSON.parse(stdout) as { checks: { name: string; ok: boolean; detail: string }[]; leftovers: { gaps: string[] } }
      expect(report.checks.find(check => check.name === 'session ownership')).toEqual({ name: 'session ownership', ok: false, detail: reason })
      expect(report.leftovers.gaps).toEqual([reason])
      expect(code).toBe(1)
      const run = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'run', '--docker', squatted.id, '--user', 'agent', '--script', '-'], { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] })
      run.stdin.end('echo hi\n')
      let stderr = ''
      run.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
      run.stdout.resume()
      await once(run, 'exit')
      expect(stderr).toContain(`dsh-remote-worlds: WARNING: ${reason}\n`)
    } finally {
      await squatted.remove({ force: true })
    }
  }, 90_000)
})

/** Live sleeps carrying `tag` in their command line. */
async function running(tag: string): Promise<ContainerProcess[]> {
  return (await containerProcesses(container.id)).filter(row => row.comm === 'sleep' && row.cmdline.includes(tag) && row.state !== 'Z')
}

/** Managed containers present now (any state). */
async function managed(): Promise<Docker.ContainerInfo[]> {
  return docker.listContainers({ all: true, filters: { label: [MANAGED_LABEL] } })
}

/**
 * The managed containers made since `before` that run `sleep DURATION`: the one of the CLI under
 * test, whoever else (another test run on this engine) makes managed containers meanwhile.
 */
async function managedRunning(before: ReadonlySet<string>, duration: string): Promise<Docker.ContainerInfo[]> {
  const made = (await managed()).filter(info => !before.has(info.Id))
  const runs = await Promise.all(made.map(info => containerProcesses(info.Id).then(rows => rows.some(row => row.cmdline === `sleep ${duration}`), () => false)))
  return made.filter((_, index) => runs[index])
}

describe('a managed container whose client dies', () => {
  it('ends and is removed by the engine within seconds of a SIGKILL of the CLI, a setsid escapee with it', async () => {
    const before = new Set((await managed()).map(info => info.Id))
    const tag = `95${process.pid}`
    const cli = await startCli(['--image', IMAGE, '--user', 'agent'], SESSION_SCRIPT(tag))
    // Mid-command: both sleeps run, the setsid escapee in a session of its own.
    const ours = await waitFor(() => managedRunning(before, `${tag}1`), found => found.length === 1)
    expect(ours.map(info => info.State)).toEqual(['running'])
    const sleeping = await waitFor(async () => (await containerProcesses(ours[0]!.Id)).filter(row => row.comm === 'sleep' && row.cmdline.startsWith(`sleep ${tag}`)), rows => rows.length === 2)
    expect(sleeping.map(row => row.cmdline).sort()).toEqual([`sleep ${tag}0`, `sleep ${tag}1`])
    await killHard(cli)
    // The engine, not a timer of ours, does the work (the hang guard is generous).
    const gone = await waitFor(async () => (await managed()).some(info => info.Id === ours[0]!.Id), present => !present, 30_000, 100)
    expect(gone).toBe(false)
    await expect(docker.getContainer(ours[0]!.Id).inspect()).rejects.toMatchObject({ statusCode: 404 })
  }, 90_000)
})

describe('Ctrl-C of the documented invocation (npx tsx src/cli/main.ts, docs/cli.md)', () => {
  it('keeps the teardown: the CLI closes its world and the managed container is removed, five times in a row', async () => {
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const before = new Set((await managed()).map(info => info.Id))
      // Its own process group, as a terminal's foreground job: Ctrl-C signals the whole group
      // (npx, tsx's launcher and the CLI), and tsx relays the signal to the CLI once more.
      const child = spawn('npx', ['tsx', 'src/cli/main.ts', 'run', '--image', IMAGE, '--script', '-'], { cwd: root, stdio: ['pipe', 'pipe', 'pipe'], detached: true })
      const duration = `96${process.pid}${attempt}`
      child.stdin.end(`sleep ${duration} &\nwhile :; do echo tick; sleep 0.2; done\n`)
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
      child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
      await waitFor(() => stdout, text => text.includes('[1] stdin_read'), 60_000)
      const ours = await waitFor(() => managedRunning(before, duration), found => found.length === 1)
      expect(ours).toHaveLength(1)
      // 'close': every process holding the pipes ended, the CLI itself included (npx may end
      // first, of the SIGINT, while the CLI still tears down).
      const closed = once(child, 'close')
      process.kill(-child.pid!, 'SIGINT')
      await closed
      expect(stderr).toContain('dsh-remote-worlds: SIGINT: closing 1 world(s) ...')
      expect(stderr).not.toContain('Killed')
      await expect(docker.getContainer(ours[0]!.Id).inspect()).rejects.toMatchObject({ statusCode: 404 })
    }
  }, 300_000)
})
