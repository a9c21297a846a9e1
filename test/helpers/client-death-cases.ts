/**
 * A client that dies leaves nothing running for good, world-neutral (an attached container, an
 * SSH host): the real CLI runs `setsid sleep A & sleep B` in a terminal and is SIGKILLed
 * mid-command, so none of its teardown runs. What it left is listed by `doctor` (which does not
 * reap), and ended by the next client that connects; a client that is alive keeps its sessions
 * whoever else dies. Every process check reads the world's pid namespace through a separate
 * `docker exec` (test/docker/helpers.ts), never through the control channel under test.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { Context } from '@deepseek-ai/cordis'
import type { SubprocessHandle } from '@deepseek-ai/dsh-subprocess'
import { afterEach, describe, expect, it } from 'vitest'
import type { ReapReport } from '../../src/providers/remote/ownership.ts'
import type { RemoteSubprocessRuntime } from '../../src/providers/remote/runtime.ts'
import { type ContainerProcess, containerProcesses, execIn, waitFor } from '../docker/helpers.ts'

const root = fileURLToPath(new URL('../..', import.meta.url))

/** What a world supplies. */
export interface ClientDeathWorld {
  /** `docker` or `ssh`, for test names. */
  name: string
  /** The container whose pid namespace the sessions live in. */
  containerId(): string
  /** CLI target flags, as `agent` (e.g. `--docker ID --user agent`). */
  cliFlags(): string[]
  /** Register the world's runtime in `ctx` as `agent` (ctx.subprocess). */
  plugin(ctx: Context): Promise<void>
}

let nextMarker = 0
/** A `sleep` duration no other test uses: its command line is what the checks look for. */
function marker(): string {
  nextMarker += 1
  return `${9100 + nextMarker}.${process.pid}`
}

/** Live processes of the container whose environment carries a session tag of `client` (ownership.ts). */
async function taggedBy(containerId: string, client: string): Promise<number[]> {
  const script = `for p in /proc/[0-9]*; do tr '\\0' '\\n' <"$p/environ" 2>/dev/null | grep -q "^DSH_REMOTE_SESSION=${client}\\." && [ "$(cut -d' ' -f3 "$p/stat" 2>/dev/null)" != Z ] && echo "\${p#/proc/}"; done; true`
  const result = await execIn(containerId, ['sh', '-c', script])
  return result.stdout.split('\n').filter(line => line.length > 0).map(Number)
}

/**
 * The clients (other than `live`) with a control program that still runs, by the ownership
 * registry (ownership.ts: `/tmp/dsh-remote-owners-1000/CLIENT.PID.START`). A killed client's
 * control programs end a moment after the kill, when they read the end of their channel; only
 * then is it provably gone.
 */
async function runningClients(containerId: string, live: readonly string[] = []): Promise<string[]> {
  const script = 'for f in /tmp/dsh-remote-owners-1000/*.*.*; do [ -f "$f" ] || continue; b=${f##*/}; r=${b#*.}; p=${r%%.*}; set -- $(sed "s/.*) //" "/proc/$p/stat" 2>/dev/null); [ -n "$1" ] && [ "$1" != Z ] && [ "${20}" = "${r#*.}" ] && echo "${b%%.*}"; done; true'
  return (await execIn(containerId, ['sh', '-c', script])).stdout.split('\n').filter(client => client !== '' && !live.includes(client))
}

/** Wait until every client but `live` is provably gone from the world (see {@link runningClients}). */
async function othersGone(containerId: string, live: readonly string[] = []): Promise<void> {
  expect(await waitFor(() => runningClients(containerId, live), clients => clients.length === 0, 10_000)).toEqual([])
}

/** Live (non-zombie) `sleep` processes whose command line carries `tag`. */
async function sleeps(containerId: string, tag: string): Promise<ContainerProcess[]> {
  return (await containerProcesses(containerId)).filter(row => row.comm === 'sleep' && row.cmdline.includes(tag) && row.state !== 'Z' && row.state !== 'X')
}

/**
 * The input, `setsid sleep M1 & sleep M0`, behind a background ticker: a send that
 * keeps printing never settles by silence, so the CLI is mid-command whenever it is killed.
 */
export const SESSION_SCRIPT = (tag: string): string => `(while :; do echo tick; sleep 0.25; done) & setsid sleep ${tag}1 & sleep ${tag}0\n`

/** Start the CLI's `run --json` with `script` on stdin; resolves once its terminal is open. */
export async function startCli(flags: readonly string[], script: string): Promise<ChildProcessWithoutNullStreams> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'run', '--json', ...flags, '--script', '-'], { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] })
  child.stdin.end(script)
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  child.stdout.resume()
  const started = await waitFor(() => stderr, text => /shell pid \d+/.test(text) || child.exitCode !== null, 60_000)
  expect(started, `the CLI did not open its terminal: ${stderr}`).toMatch(/shell pid \d+/)
  return child
}

/** SIGKILL a child and wait for its exit. */
export async function killHard(child: ChildProcessWithoutNullStreams): Promise<void> {
  const exited = once(child, 'exit')
  child.kill('SIGKILL')
  await exited
}

/** `dsh-remote-worlds doctor --json` on the world (it lists leftovers; it never reaps them). */
async function doctor(flags: readonly string[], extra: readonly string[] = []): Promise<{ leftovers: { sessions: { client: string; processes: { pid: number }[] }[]; reaped: boolean; gaps: string[] } }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'doctor', ...flags, '--cwd', '/tmp', '--json', ...extra], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  await once(child, 'exit')
  return JSON.parse(stdout)
}

/** The suite; call at the top level of a test file. */
export function clientDeathCases(world: ClientDeathWorld): void {
  describe(`a client that dies in the ${world.name} world`, () => {
    const contexts: Context[] = []
    afterEach(async () => {
      for (const ctx of contexts.splice(0)) await ctx.fiber.dispose()
    })

    /** A new client of the world (its runtime); its first control channel starts the reap. */
    async function connect(): Promise<RemoteSubprocessRuntime<never>> {
      const ctx = new Context()
      contexts.push(ctx)
      await world.plugin(ctx)
      return ctx.subprocess as unknown as RemoteSubprocessRuntime<never>
    }

    async function reapedBy(runtime: RemoteSubprocessRuntime<never>): Promise<ReapReport> {
      await (runtime as unknown as { control(): Promise<unknown> }).control()
      const [outcome] = await runtime.ownership.reaped()
      expect(outcome?.status).toBe('fulfilled')
      return (outcome as PromiseFulfilledResult<ReapReport>).value
    }

    it('leaves its session (a setsid escapee included) to the next client, which ends it; doctor lists it first', async () => {
      const tag = marker()
      const cli = await startCli(world.cliFlags(), SESSION_SCRIPT(tag))
      // Both sleeps run before the client dies (the escapee: its own session, init's child).
      const running = await waitFor(() => sleeps(world.containerId(), tag), rows => rows.length === 2, 10_000)
      expect(running.map(row => row.cmdline).sort()).toEqual([`sleep ${tag}0`, `sleep ${tag}1`])
      await killHard(cli)
      await othersGone(world.containerId())

      const listed = await doctor(world.cliFlags())
      expect(listed.leftovers.reaped).toBe(false)
      expect(listed.leftovers.gaps).toEqual([])
      const gone = listed.leftovers.sessions.flatMap(session => session.processes.map(process => process.pid))
      // Nothing ended it: the escapee at least is still there (over SSH the hangup of the PTY
      // ends the shell and its foreground job, never the escapee, at a moment nobody promises:
      // so what is left is read after doctor looked). What still runs ran while doctor looked:
      // it was listed, and doctor did not end it.
      const left = await sleeps(world.containerId(), tag)
      expect(left.map(row => row.cmdline)).toContain(`sleep ${tag}1`)
      for (const row of left) expect(gone).toContain(row.pid)
      const escapee = left.find(row => row.cmdline === `sleep ${tag}1`)!

      const report = await reapedBy(await connect())
      expect(report.ended.map(identity => identity.pid)).toContain(escapee.pid)
      expect(await sleeps(world.containerId(), tag)).toEqual([])
      // Nothing of the dead client carries its tag any more: its sessions, and in a Docker world
      // its pooled execs (the standby waiting in a TTY read; src/providers/docker/exec-pool/).
      for (const client of new Set(listed.leftovers.sessions.map(session => session.client))) {
        expect(await taggedBy(world.containerId(), client)).toEqual([])
      }
      // The gone client's registration went with it: no registry entry of it is left.
      const registry = await execIn(world.containerId(), ['sh', '-c', 'ls -A /tmp/dsh-remote-owners-1000'])
      for (const session of listed.leftovers.sessions) expect(registry.stdout).not.toContain(session.client)
    }, 120_000)

    it('never ends the sessions of a client that is alive: of two clients, only the killed one is reaped', async () => {
      const tag = marker()
      const alive = await connect()
      // The live client: a terminal and a spawned process, both running sleeps.
      const terminal = await alive.spawnTerminal({ argv: ['/bin/sh', '-c', `setsid sleep ${tag}2 & exec sleep ${tag}3`], cwd: '/tmp', rows: 24, cols: 80, graceMs: 1_000 })
      terminal.output.resume()
      const spawned: SubprocessHandle = alive.spawn({ argv: ['sleep', `${tag}4`], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1_000 })
      spawned.stdout?.resume()
      spawned.stderr?.resume()
      const dying = await startCli(world.cliFlags(), SESSION_SCRIPT(tag))
      await waitFor(() => sleeps(world.containerId(), tag), rows => rows.length === 5, 10_000)
      await killHard(dying)
      await othersGone(world.containerId(), [alive.ownership.clientId])

      const report = await reapedBy(await connect())
      expect(report.orphans.map(orphan => orphan.client)).not.toContain(alive.ownership.clientId)
      const after = (await sleeps(world.containerId(), tag)).map(row => row.cmdline).sort()
      expect(after).toEqual([`sleep ${tag}2`, `sleep ${tag}3`, `sleep ${tag}4`])
      // Nor its files: its state directory (spills) is still there.
      const stateDir = `/tmp/dsh-remote-1000-${alive.ownership.clientId}`
      expect((await execIn(world.containerId(), ['test', '-d', stateDir])).exitCode).toBe(0)

      // The live client's own close ends its sessions, the escapee of its terminal included.
      await terminal.terminate()
      spawned.terminate()
      await spawned.waitForExit()
      expect(await sleeps(world.containerId(), tag)).toEqual([])
    }, 120_000)

    it('doctor --reap ends what a killed client left', async () => {
      const tag = marker()
      const cli = await startCli(world.cliFlags(), SESSION_SCRIPT(tag))
      await waitFor(() => sleeps(world.containerId(), tag), rows => rows.length === 2, 10_000)
      await killHard(cli)
      await othersGone(world.containerId())
      // The escapee outlives its client in every world (the foreground sleep may go with the
      // PTY's hangup over SSH, at a moment nobody promises).
      const escapee = (await sleeps(world.containerId(), tag)).find(row => row.cmdline === `sleep ${tag}1`)
      expect(escapee).toBeDefined()
      const reaped = await doctor(world.cliFlags(), ['--reap'])
      expect(reaped.leftovers.reaped).toBe(true)
      const ended = reaped.leftovers.sessions.flatMap(session => session.processes.map(process => process.pid))
      expect(ended).toContain(escapee!.pid)
      expect(await sleeps(world.containerId(), tag)).toEqual([])
    }, 120_000)
  })
}
