/**
 * The ordinary-process half of the seam, world-neutral: `spawn` and `resolveExecutable` driven
 * by the UNCHANGED upstream bash executor (`@deepseek-ai/dsh-bash-local`) and directly. A world
 * (Docker, SSH) supplies its runtime and where its processes run; every process check reads that
 * container's pid namespace through a separate `docker exec` (test/docker/helpers.ts), never
 * through the control channel under test.
 */
import { createHash } from 'node:crypto'
import type { PassThrough } from 'node:stream'
import { setTimeout as delay } from 'node:timers/promises'
import { Context } from '@deepseek-ai/cordis'
import LocalBashExecutor from '@deepseek-ai/dsh-bash-local'
import type { ShellExecRequest, ShellRunResult } from '@deepseek-ai/dsh-shell'
import type { SubprocessHandle, SubprocessRuntime, SubprocessSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  CwdNotFoundError,
  ExecutableNotFoundError,
  InvalidArgumentError,
  RemoteWorldError,
  SpawnCancelledError,
  TransportError,
  WorldClosedError,
} from '../../src/providers/remote/errors.ts'
import type { RemoteProcessHandle } from '../../src/providers/remote/process.ts'
import { USERS, type ContainerProcess, containerProcesses, execIn, hangGuard, waitFor } from '../docker/helpers.ts'

/** The ambient environment every world gives its processes in this suite (names the env case checks). */
export const SPAWN_AMBIENT = { SERVICE_TOKEN: 'ambient-secret', PLAIN_AMBIENT: 'kept', DROP_ME: 'ambient' } as const

/** A runtime under test (DockerSubprocessRuntime or SshSubprocessRuntime). */
type RemoteRuntime = SubprocessRuntime

/** What a world supplies to the suite. */
export interface SpawnWorld {
  /** `docker` or `ssh`, for test names. */
  name: string
  /** The container whose pid namespace (and files) the processes live in. */
  containerId(): string
  /** What `hostname` prints there. */
  hostname(): Promise<string>
  /** Register the world's runtime in `ctx` as `user` (ctx.subprocess). */
  plugin(ctx: Context, user: string): Promise<void>
  /** World-specific checks of a spawned `env` output. */
  checkEnvironment?(env: Record<string, string>): Promise<void> | void
  /** A world to break: a runtime in it, and how it vanishes mid-run. */
  vanishing(): Promise<{
    containerId: string
    plugin(ctx: Context): Promise<void>
    vanish(): Promise<void>
    /** The processes of `marker` still alive (after the vanishing and the handle's teardown). */
    leftovers(marker: string): Promise<unknown[]>
    cleanup(): Promise<void>
  }>
}

const MB = 1024 * 1024
/**
 * A `sleep` duration no other suite uses (its command line is the marker leftover scans look
 * for): `sleep` takes no other argument to carry a tag.
 */
let nextMarker = 0
function sleepMarker(): string {
  nextMarker += 1
  return `${7000 + nextMarker}.${process.pid}`
}

/** One user's composition: our runtime as `ctx.subprocess`, the upstream bash executor as `ctx.shell`. */
interface Fixture {
  ctx: Context
  shell: LocalBashExecutor
  run(request: ShellExecRequest): Promise<ShellRunResult>
}

async function compose(world: SpawnWorld, user: string): Promise<Fixture> {
  const ctx = new Context()
  await world.plugin(ctx, user)
  await ctx.plugin(LocalBashExecutor, { cwd: '/tmp', graceMs: 500 })
  const shell = ctx.shell as LocalBashExecutor
  return { ctx, shell, run: request => shell.run(shell.resolve(request)) }
}

function spec(argv: string[], overrides: Partial<SubprocessSpawnSpec> = {}): SubprocessSpawnSpec {
  return {
    argv,
    cwd: '/tmp',
    stdio: { stdin: 'ignore', stdout: { maxBytes: 1 * MB, spill: { maxBytes: 8 * MB } }, stderr: { maxBytes: 1 * MB } },
    graceMs: 500,
    ...overrides,
  }
}

/** Live (non-zombie) `sleep` processes whose command line carries `marker`. */
export async function running(containerId: string, marker: string): Promise<ContainerProcess[]> {
  return (await containerProcesses(containerId)).filter(row => row.comm === 'sleep' && row.cmdline.includes(marker) && row.state !== 'Z' && row.state !== 'X')
}

/** Read a pipe to its end, as raw bytes. */
async function drain(stream: NodeJS.ReadableStream | undefined): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of stream!) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** The suite; call at the top level of a test file. */
export function spawnCases(world: SpawnWorld): void {
  describe.each(USERS)(`the upstream bash executor through our spawn in the ${world.name} world, as $label`, ({ user, uid }) => {
    let fixture: Fixture

    beforeAll(async () => {
      fixture = await compose(world, user)
    })

    afterAll(async () => {
      await fixture?.ctx.fiber.dispose()
    })

    it('runs in the container, as the user, with exit codes and separate stdout and stderr', async () => {
      const result = await fixture.run({ command: 'echo "$(hostname) $(id -u)"; echo to-stderr >&2; exit 7', timeoutMs: 20_000 })
      expect(result.exitCode).toBe(7)
      expect(result.signal).toBeNull()
      expect(result.timedOut).toBe(false)
      expect(result.aborted).toBe(false)
      expect(result.stdout).toEqual({ text: `${await world.hostname()} ${uid}\n`, truncated: false })
      expect(result.stderr).toEqual({ text: 'to-stderr\n', truncated: false })
      const ok = await fixture.run({ command: 'true', timeoutMs: 20_000 })
      expect([ok.exitCode, ok.signal, ok.stdout.text, ok.stderr.text]).toEqual([0, null, '', ''])
    })

    it('reports a death by signal with its name, and a voluntary 128+N as an exit code', async () => {
      const killed = await fixture.run({ command: 'kill -KILL $$', timeoutMs: 20_000 })
      expect([killed.exitCode, killed.signal]).toEqual([null, 'SIGKILL'])
      const segv = await fixture.run({ command: 'kill -SEGV $$', timeoutMs: 20_000 })
      expect([segv.exitCode, segv.signal]).toEqual([null, 'SIGSEGV'])
      const voluntary = await fixture.run({ command: 'exit 137', timeoutMs: 20_000 })
      expect([voluntary.exitCode, voluntary.signal]).toEqual([137, null])
    })

    it('truncates 50 MB of stdout to its tail, with a complete spill file in the container', async () => {
      // 50 MiB of a 17-byte line pattern; its tail and its digest are known exactly.
      const size = 50 * MB
      const line = '0123456789abcdef\n'
      const result = await fixture.run({ command: `yes 0123456789abcdef | head -c ${size}; echo done >&2`, timeoutMs: 120_000 })
      expect(result.exitCode).toBe(0)
      const whole = Buffer.alloc(size, line)
      expect(result.stdout.truncated).toBe(true)
      expect(result.stdout.text).toBe(whole.subarray(size - 64_000).toString('utf8'))
      expect(result.stderr).toEqual({ text: 'done\n', truncated: false })
      const spill = result.stdout.spillPath!
      expect(spill).toMatch(new RegExp(`^/tmp/dsh-remote-${uid}-[0-9a-f]{32}/[0-9a-f]{16}\\.stdout$`))
      const stat = await execIn(world.containerId(), ['stat', '-c', '%s %u %a', spill])
      // 0600, as upstream's spill files: they hold command output, which can hold secrets.
      expect(stat.stdout.trim()).toBe(`${size} ${uid} 600`)
      const digest = await execIn(world.containerId(), ['sha256sum', spill])
      expect(digest.stdout.split(' ')[0]).toBe(createHash('sha256').update(whole).digest('hex'))
      // The spill directory is private to the user; nothing else was left in it (no status files,
      // no spills of streams that did not overflow).
      const dir = spill.slice(0, spill.lastIndexOf('/'))
      const listing = await execIn(world.containerId(), ['sh', '-c', `stat -c %a ${dir}; ls -A ${dir}`])
      expect(listing.stdout).toContain('700\n')
      expect(listing.stdout.trim().split('\n').slice(1).filter(name => !name.endsWith('.stdout'))).toEqual([])
    }, 180_000)

    it('kills the whole remote tree on timeout: session members, a setsid escapee, a TERM-ignoring child', async () => {
      const marker = sleepMarker()
      const command = [
        `sleep ${marker}1 &`,
        `setsid sleep ${marker}2 &`,
        `sh -c 'trap "" TERM; exec sleep ${marker}3' &`,
        'echo started',
        'wait',
      ].join('\n')
      // The run settles at its timeout, not when the tree would end (the hang guard is generous).
      const result = await hangGuard(fixture.run({ command, timeoutMs: 1_500 }), 30_000, 'a run past its timeout')
      expect(result.timedOut).toBe(true)
      expect([result.exitCode, result.signal]).toEqual([null, 'SIGTERM'])
      expect(result.stdout.text).toBe('started\n')
      // The ladder goes on after `done` (the TERM-ignoring child needs the KILL): nothing of the
      // tree may survive it (bounded wait: grace 500 ms + KILL + proof).
      const left = await waitFor(() => running(world.containerId(), marker), rows => rows.length === 0, 10_000)
      expect(left).toEqual([])
      // Nor the wrapper (its script carries the command) and its helpers.
      expect(await waitFor(async () => (await containerProcesses(world.containerId())).filter(row => row.cmdline.includes(marker)), rows => rows.length === 0, 10_000)).toEqual([])
    })

    it('fails typed for a cwd that does not exist, and `bash -c` reports a missing command as 127', async () => {
      const error = await fixture.run({ command: 'true', workdir: '/no/such/dir', timeoutMs: 20_000 }).then(() => undefined, (reason: unknown) => reason)
      expect(error).toBeInstanceOf(CwdNotFoundError)
      // The local provider's code for the same case (Node's spawn error), and its errno name first.
      expect([(error as CwdNotFoundError).code, (error as CwdNotFoundError).errno, (error as CwdNotFoundError).path]).toEqual(['ENOENT', -2, '/no/such/dir'])
      expect((error as CwdNotFoundError).message).toMatch(/^ENOENT: no such working directory in .+: \/no\/such\/dir$/)
      const missing = await fixture.run({ command: 'no-such-command-xyz', timeoutMs: 20_000 })
      expect(missing.exitCode).toBe(127)
      expect(missing.stderr.text).toBe('bash: line 1: no-such-command-xyz: command not found\n')
    })

    it('background processes: incremental reads, kill, and the process settles as killed', async () => {
      const marker = sleepMarker()
      const proc = fixture.shell.start(fixture.shell.resolve({ command: `echo one; echo err-one >&2; sleep ${marker}` }))
      await waitFor(() => proc.readOutput().delta.length > 0 ? 'x' : '', v => v !== '', 10_000).catch(() => undefined)
      expect(proc.kill()).toBe(true)
      await hangGuard(proc.done, 10_000, 'background done')
      expect(proc.status).toBe('killed')
      expect(proc.signal).toBe('SIGTERM')
      expect(await waitFor(() => running(world.containerId(), marker), rows => rows.length === 0, 10_000)).toEqual([])
    })
  })

  describe(`spawn directly in the ${world.name} world`, () => {
    let ctx: Context
    let runtime: RemoteRuntime

    beforeAll(async () => {
      ctx = new Context()
      await world.plugin(ctx, 'agent')
      runtime = ctx.subprocess as RemoteRuntime
    })

    afterAll(async () => {
      await ctx?.fiber.dispose()
    })

    it('publishes the remote pid as the session and group leader, and waitForExit observes the tree', async () => {
      const marker = sleepMarker()
      const handle = runtime.spawn(spec(['sh', '-c', `sleep ${marker} & echo $$; wait`], { stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } }))
      expect(handle.pid).toBe(-1)
      const first = await new Promise<string>(resolve => handle.stdout!.once('data', (chunk: Buffer) => resolve(chunk.toString())))
      expect(Number(first.trim())).toBe(handle.pid)
      // The background child may still be between its fork and its exec of sleep when `$$` arrives.
      const rows = await waitFor(() => running(world.containerId(), marker), found => found.length === 1)
      expect(rows).toHaveLength(1)
      const leader = (await containerProcesses(world.containerId())).find(row => row.pid === handle.pid)!
      expect([leader.pgrp, leader.session]).toEqual([handle.pid, handle.pid])
      expect([rows[0]!.pgrp, rows[0]!.session]).toEqual([handle.pid, handle.pid])
      const bounded = new AbortController()
      setTimeout(() => bounded.abort(), 300)
      expect(await handle.waitForExit(bounded.signal)).toBe(false)
      handle.terminate()
      expect(await hangGuard(handle.done, 10_000, 'done')).toEqual({ exitCode: null, signal: 'SIGTERM' })
      expect(await hangGuard(handle.waitForExit(), 10_000, 'waitForExit')).toBe(true)
      expect(await running(world.containerId(), marker)).toEqual([])
      // Idempotent once gone.
      handle.terminate()
      expect(await handle.waitForExit()).toBe(true)
    })

    it('delivers binary and split UTF-8 output byte-exact, on pipes and through collect readers', async () => {
      // Every byte value, then '世' (e4 b8 96) and '€' (e2 82 ac) split across separate writes.
      const script = "printf '%b' \"$(i=0; while [ $i -lt 256 ]; do printf '\\\\%03o' $i; i=$((i+1)); done)\"; printf '\\344\\270'; sleep 0.2; printf '\\226\\342'; sleep 0.2; printf '\\202\\254'"
      const expected = Buffer.concat([Buffer.from(Array.from({ length: 256 }, (_, i) => i)), Buffer.from('世€', 'utf8')])
      const piped = runtime.spawn(spec(['sh', '-c', script], { stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } }))
      const [bytes] = await Promise.all([drain(piped.stdout), drain(piped.stderr), piped.done])
      expect(bytes.equals(expected)).toBe(true)

      const utf8 = "printf '\\344\\270'; sleep 0.2; printf '\\226x\\342\\202'; sleep 0.2; printf '\\254'"
      const collected = runtime.spawn(spec(['sh', '-c', utf8]))
      const reader = collected.collected.stdout!
      expect(await collected.done).toEqual({ exitCode: 0, signal: null })
      expect(reader.readFrom(0)).toEqual({ text: '世x€', nextOffset: 7, lossy: false })
      // Offset reads are non-consuming and independent.
      expect(reader.readFrom(3)).toEqual({ text: 'x€', nextOffset: 7, lossy: false })
      expect(reader.readFrom(0).text).toBe('世x€')
      expect(reader.readFrom(7)).toEqual({ text: '', nextOffset: 7, lossy: false })
    })

    it('holds the remote writer while a pipe consumer does not read (backpressure), then delivers every byte', async () => {
      // A size no other process uses: the writer is found by its command line.
      const size = 64 * MB + (process.pid % 1000) + 1
      const handle = runtime.spawn(spec(['head', '-c', String(size), '/dev/zero'], { stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } }))
      handle.stderr!.resume()
      await new Promise(resolve => setTimeout(resolve, 1_500))
      // Nobody read stdout for 1.5 s: the writer is still there, blocked, not buffered away (once
      // it started and filled what the pipes hold: on a busy machine that may take longer).
      const writer = await waitFor(async () => (await containerProcesses(world.containerId())).find(row => row.comm === 'head' && row.cmdline.includes(String(size))), row => row?.state === 'S')
      expect(writer?.state).toBe('S')
      const bytes = await drain(handle.stdout)
      expect(bytes.length).toBe(size)
      expect(bytes.every(byte => byte === 0)).toBe(true)
      expect(await handle.done).toEqual({ exitCode: 0, signal: null })
    })

    it('refuses argv and environment too large for one exec argument, typed, before starting anything', async () => {
      const handle = runtime.spawn(spec(['sh', '-c', `: ${'x'.repeat(200_000)}`]))
      const error = await handle.done.then(() => undefined, (reason: unknown) => reason)
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect(await handle.waitForExit()).toBe(true)
    })

    it('keeps a bounded tail: lossy reads past the window, spill only for an overflowing stream within its cap', async () => {
      const mode = { maxBytes: 10, spill: { maxBytes: 100 } }
      const small = runtime.spawn(spec(['printf', '0123456789'], { stdio: { stdin: 'ignore', stdout: mode, stderr: mode } }))
      await small.done
      expect(small.collected.stdout!.readFrom(0)).toEqual({ text: '0123456789', nextOffset: 10, lossy: false })
      const over = runtime.spawn(spec(['printf', 'abcdefghijklmnopqrstuvwxyz'], { stdio: { stdin: 'ignore', stdout: mode, stderr: mode } }))
      await over.done
      const read = over.collected.stdout!.readFrom(0)
      expect(read.text).toBe('qrstuvwxyz')
      expect([read.nextOffset, read.lossy]).toEqual([26, true])
      expect(over.collected.stdout!.readFrom(20)).toEqual({ text: 'uvwxyz', nextOffset: 26, lossy: false, spillPath: read.spillPath })
      expect((await execIn(world.containerId(), ['cat', read.spillPath!])).stdout).toBe('abcdefghijklmnopqrstuvwxyz')
      // Over the spill cap: no spill advertised, and its partial file is removed.
      const huge = runtime.spawn(spec(['sh', '-c', 'head -c 1000 /dev/zero'], { stdio: { stdin: 'ignore', stdout: mode, stderr: mode } }))
      await huge.done
      const hugeRead = huge.collected.stdout!.readFrom(0)
      expect([hugeRead.text.length, hugeRead.nextOffset, hugeRead.lossy, hugeRead.spillPath]).toEqual([10, 1000, true, undefined])
      await huge.waitForExit()
      const dir = read.spillPath!.slice(0, read.spillPath!.lastIndexOf('/'))
      expect((await execIn(world.containerId(), ['ls', '-A', dir])).stdout.trim().split('\n')).toEqual([read.spillPath!.slice(dir.length + 1)])
    })

    it('stdin: pipe and data reach the program; ignore is /dev/null', async () => {
      const piped = runtime.spawn(spec(['cat'], { stdio: { stdin: 'pipe', stdout: { maxBytes: MB }, stderr: { maxBytes: MB } } }))
      piped.stdin!.write('first ')
      piped.stdin!.end(Buffer.from([0xe4, 0xb8, 0x96, 0x00, 0xff]))
      await piped.done
      expect(piped.collected.stdout!.readFrom(0).nextOffset).toBe(11)
      const data = runtime.spawn(spec(['sh', '-c', 'cat; echo; readlink /proc/$$/fd/0 >&2'], { stdio: { stdin: { data: 'héllo' }, stdout: { maxBytes: MB }, stderr: { maxBytes: MB } } }))
      await data.done
      expect(data.collected.stdout!.readFrom(0).text).toBe('héllo\n')
      const ignored = runtime.spawn(spec(['readlink', '/proc/self/fd/0']))
      await ignored.done
      expect(ignored.collected.stdout!.readFrom(0).text).toBe('/dev/null\n')
    })

    it('layers the environment after the upstream scrub of the world ambient env', async () => {
      const handle = runtime.spawn(spec(['env'], { env: { EXPLICIT: 'yes', DROP_ME: undefined, DEPLOY_KEY: 'deliberate' } }))
      await handle.done
      const env = Object.fromEntries(handle.collected.stdout!.readFrom(0).text.trim().split('\n').map(line => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]))
      // The world's ambient env (SPAWN_AMBIENT) arrives scrubbed; the spec's layer goes on top.
      expect(env.PLAIN_AMBIENT).toBe('kept')
      expect(env.SERVICE_TOKEN).toBeUndefined()
      expect(env.DROP_ME).toBeUndefined()
      expect([env.EXPLICIT, env.DEPLOY_KEY, env.HOME]).toEqual(['yes', 'deliberate', '/home/agent'])
      // Nothing of the harness; of ours only the session's ownership tag (remote/ownership.ts).
      expect(Object.keys(env).filter(name => /KEY|PASSWORD|SECRET|TOKEN/i.test(name) || name.toUpperCase().startsWith('DSH_'))).toEqual(['DEPLOY_KEY', 'DSH_REMOTE_SESSION'])
      const clientId = (runtime as unknown as { ownership: { clientId: string } }).ownership.clientId
      expect(env.DSH_REMOTE_SESSION).toMatch(new RegExp(`^${clientId}\\.[0-9a-f]{16}$`))
      await world.checkEnvironment?.(env)
    })

    it('resolveExecutable: verified absolute paths, PATH lookup (explicit PATH wins), typed failures', async () => {
      expect(await runtime.resolveExecutable('/usr/bin/env')).toBe('/usr/bin/env')
      expect(await runtime.resolveExecutable('sha256sum')).toBe('/usr/bin/sha256sum')
      expect(await runtime.resolveExecutable('ls', { PATH: '/nonexistent:/bin' })).toBe('/bin/ls')
      await expect(runtime.resolveExecutable('ls', { PATH: '/nonexistent' })).rejects.toBeInstanceOf(ExecutableNotFoundError)
      await expect(runtime.resolveExecutable('/etc/passwd')).rejects.toBeInstanceOf(ExecutableNotFoundError)
      await expect(runtime.resolveExecutable('/usr/bin')).rejects.toBeInstanceOf(ExecutableNotFoundError)
      // Readable by root only (0700): not executable for agent.
      await execIn(world.containerId(), ['sh', '-c', 'printf "#!/bin/sh\\n" >/root-only.sh; chmod 700 /root-only.sh'])
      await expect(runtime.resolveExecutable('/root-only.sh')).rejects.toBeInstanceOf(ExecutableNotFoundError)
      await expect(runtime.resolveExecutable('bin/ls')).rejects.toBeInstanceOf(InvalidArgumentError)
      await expect(runtime.resolveExecutable('')).rejects.toBeInstanceOf(InvalidArgumentError)
      const error = await runtime.resolveExecutable('no-such-binary').catch((reason: unknown) => reason) as ExecutableNotFoundError
      expect([error.code, error.executable]).toEqual(['ENOENT', 'no-such-binary'])
      expect(error.message).toMatch(/^ENOENT: command "no-such-binary" was not found on PATH in /)
      const aborted = new AbortController()
      aborted.abort(new Error('stop'))
      await expect(runtime.resolveExecutable('ls', undefined, aborted.signal)).rejects.toThrow('stop')
    })

    it('faults: a missing program and a missing cwd reject done typed; the handle settles, nothing runs', async () => {
      const missing = runtime.spawn(spec(['no-such-program-xyz']))
      const error = await missing.done.then(() => undefined, (reason: unknown) => reason)
      expect(error).toBeInstanceOf(ExecutableNotFoundError)
      expect((error as RemoteWorldError).code).toBe('ENOENT')
      expect(missing.pid).toBe(-1)
      expect(await missing.waitForExit()).toBe(true)
      const badCwd = runtime.spawn(spec(['true'], { cwd: '/no/such/dir' }))
      await expect(badCwd.done).rejects.toBeInstanceOf(CwdNotFoundError)
      expect(await badCwd.waitForExit()).toBe(true)
      // A file as cwd is ENOTDIR, a program without execute permission EACCES: Node's codes.
      const fileCwd = await runtime.spawn(spec(['true'], { cwd: '/etc/hostname' })).done.then(() => undefined, (reason: unknown) => reason)
      expect([fileCwd instanceof CwdNotFoundError, (fileCwd as RemoteWorldError).code]).toEqual([true, 'ENOTDIR'])
      const notExecutable = await runtime.spawn(spec(['/etc/hostname'])).done.then(() => undefined, (reason: unknown) => reason)
      expect([notExecutable instanceof ExecutableNotFoundError, (notExecutable as RemoteWorldError).code]).toEqual([true, 'EACCES'])
      expect((notExecutable as RemoteWorldError).message).toMatch(/^EACCES: command "\/etc\/hostname" is not an executable file in /)
      // An env too large for one exec argument is refused before anything starts.
      await expect(runtime.spawn(spec(['true'], { env: { BIG: 'x'.repeat(130 * 1024) } })).done).rejects.toThrow(/^argv and environment are too large for a remote start \(\d+ bytes with the wrapper; a single exec argument is limited to 131072 bytes\)$/)
      await expect(runtime.spawn(spec(['true'], { env: { BIG: 'x'.repeat(130 * 1024) } })).done).rejects.toBeInstanceOf(InvalidArgumentError)
      expect(() => runtime.spawn(spec([]))).toThrow(InvalidArgumentError)
      expect(() => runtime.spawn(spec(['true'], { cwd: 'relative' }))).toThrow(InvalidArgumentError)
      expect(() => runtime.spawn(spec(['true'], { graceMs: 0 }))).toThrow(InvalidArgumentError)
    })

    it('a caller that destroys stdout and stderr without reading them: done still settles, and disposal does not wait', async () => {
      // 8 MiB each: far more than the pipes and the transport hold, so the program outlives the destroy.
      const handle = runtime.spawn(spec(['sh', '-c', 'head -c 8388608 /dev/zero; head -c 8388608 /dev/zero >&2'], { stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } }))
      handle.stdout!.destroy()
      handle.stderr!.destroy()
      expect(await hangGuard(handle.done, 20_000, 'done after destroyed pipes')).toEqual({ exitCode: 0, signal: null })
      expect(await hangGuard(handle.waitForExit(), 10_000, 'waitForExit')).toBe(true)
    })

    it('a pipe the caller does not read holds the program (one hold), and terminate() still settles done as SIGTERM; the rest can be read after', async () => {
      // Neither pipe read; the program a child of its shell, as the bash tool's are.
      const handle = runtime.spawn(spec(['sh', '-c', 'head -c 33554432 /dev/zero'], { stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } }))
      await waitFor(() => handle.pid, pid => pid > 0, 20_000)
      // Held, not flooding memory: the pipe's buffer fills and stays bounded while nobody reads.
      const pipe = handle.stdout as unknown as PassThrough
      await waitFor(() => pipe.writableNeedDrain, full => full, 20_000)
      expect(pipe.listenerCount('drain')).toBe(1)
      handle.terminate()
      expect(await hangGuard(handle.done, 20_000, 'done of a terminated process nobody reads')).toEqual({ exitCode: null, signal: 'SIGTERM' })
      let late = 0
      for await (const chunk of handle.stdout!) late += (chunk as Buffer).length
      expect(late).toBeGreaterThan(0)
      expect(late).toBeLessThan(33554432)
      expect(await hangGuard(handle.waitForExit(), 10_000, 'waitForExit')).toBe(true)
    })

    it('faults: an abort before, during and after the start ends the tree', async () => {
      const before = new AbortController()
      before.abort(new Error('early'))
      expect(() => runtime.spawn(spec(['true'], { signal: before.signal }))).toThrow('aborted before spawn')

      // Abort before the start reached the world (spawn returned; the world is still being
      // prepared): the start finishes and the program is really signalled, as a local process
      // the same abort ended.
      const marker = sleepMarker()
      const during = new AbortController()
      const handle = runtime.spawn(spec(['sleep', marker], { signal: during.signal }))
      during.abort(new Error('cancel'))
      expect(await hangGuard(handle.done, 10_000, 'aborted done')).toEqual({ exitCode: null, signal: 'SIGTERM' })
      expect(handle.pid).toBeGreaterThan(0)
      expect(await hangGuard(handle.waitForExit(), 10_000, 'aborted waitForExit')).toBe(true)
      // terminate() in the same window of a spawn that could never start (a missing cwd): the
      // failed spawn, as upstream's.
      const early = runtime.spawn(spec(['true'], { cwd: '/no/such/dir' }))
      early.terminate()
      const failed = await hangGuard(early.done.then(() => undefined, (reason: unknown) => reason), 10_000, 'terminated done')
      expect([failed instanceof CwdNotFoundError, (failed as CwdNotFoundError).code]).toEqual([true, 'ENOENT'])
      expect(await early.waitForExit()).toBe(true)

      // Only on request is a start that has not reached the world stopped: nothing runs, and
      // done rejects SpawnCancelledError (the abort's reason when the signal aborted first).
      const ran = `/tmp/spawn-cancelled-${marker}`
      const asked = runtime.spawn(spec(['touch', ran])) as RemoteProcessHandle
      asked.terminate({ cancelUnstarted: true })
      const cancelled = await hangGuard(asked.done.then(() => undefined, (reason: unknown) => reason), 10_000, 'cancelled done')
      expect(cancelled).toBeInstanceOf(SpawnCancelledError)
      expect([(cancelled as SpawnCancelledError).code, (cancelled as SpawnCancelledError).message]).toEqual(['SPAWN_CANCELLED', 'terminated before the process started in the world'])
      expect([asked.pid, await asked.waitForExit()]).toEqual([-1, true])
      const abortedAsked = new AbortController()
      const cancelledByAbort = runtime.spawn(spec(['touch', ran], { signal: abortedAsked.signal })) as RemoteProcessHandle
      abortedAsked.abort(new Error('cancel'))
      cancelledByAbort.terminate({ cancelUnstarted: true })
      const reason = await hangGuard(cancelledByAbort.done.then(() => undefined, (error: unknown) => error), 10_000, 'cancelled-by-abort done')
      expect([(reason as SpawnCancelledError).code, (reason as SpawnCancelledError).message]).toEqual(['SPAWN_CANCELLED', 'aborted before spawn: Error: cancel'])
      expect((await execIn(world.containerId(), ['test', '-e', ran])).exitCode).toBe(1)

      // Abort once the program runs.
      const after = new AbortController()
      const live = runtime.spawn(spec(['sh', '-c', `echo up; exec sleep ${marker}`], { signal: after.signal, stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } }))
      await new Promise(resolve => live.stdout!.once('data', resolve))
      after.abort(new Error('cancel'))
      expect(await hangGuard(live.done, 10_000, 'aborted live done')).toEqual({ exitCode: null, signal: 'SIGTERM' })
      expect(await live.waitForExit()).toBe(true)
      expect(await running(world.containerId(), marker)).toEqual([])
    })

    // Code written against the local world, where a spawned program has always started when
    // spawn() returns, ends it at once and awaits done as a terminated outcome. Whatever the
    // start's progress, the program is really signalled and nothing of it is left.
    const TERMINATED = { exitCode: null, signal: 'SIGTERM' }
    async function expectEnded(handle: SubprocessHandle, marker: string, what: string): Promise<void> {
      expect(await hangGuard(handle.done, 10_000, `${what}: done`)).toEqual(TERMINATED)
      expect(handle.pid).toBeGreaterThan(0)
      expect(await hangGuard(handle.waitForExit(), 10_000, `${what}: waitForExit`)).toBe(true)
      expect(await running(world.containerId(), marker)).toEqual([])
    }
    const later = async (ms: number): Promise<void> => { if (ms > 0) await delay(ms) }

    it.each([0, 1, 5, 20])('terminate() %i ms after spawn(): the program is started and signalled, done is SIGTERM', async ms => {
      const marker = sleepMarker()
      const handle = runtime.spawn(spec(['sleep', marker]))
      await later(ms)
      handle.terminate()
      await expectEnded(handle, marker, `terminate at ${ms} ms`)
    })

    it.each([0, 1, 5, 20])('the spec\'s signal aborted %i ms after spawn(): the program is started and signalled, done is SIGTERM', async ms => {
      const marker = sleepMarker()
      const controller = new AbortController()
      const handle = runtime.spawn(spec(['sleep', marker], { signal: controller.signal }))
      await later(ms)
      controller.abort(new Error('stop'))
      await expectEnded(handle, marker, `abort at ${ms} ms`)
    })

    it.each([0, 1, 5, 20])('disposal %i ms after the first spawn() of a runtime: the program is started and signalled, done is SIGTERM', async ms => {
      const own = new Context()
      await world.plugin(own, 'agent')
      const marker = sleepMarker()
      const handle = (own.subprocess as RemoteRuntime).spawn(spec(['sleep', marker]))
      await later(ms)
      await hangGuard(own.fiber.dispose(), 20_000, `disposal at ${ms} ms`)
      await expectEnded(handle, marker, `disposal at ${ms} ms`)
    })

    it('disposal ends every process it started and removes the state directory', async () => {
      const own = new Context()
      await world.plugin(own, 'agent')
      const rt = own.subprocess as RemoteRuntime
      const marker = sleepMarker()
      const handles: SubprocessHandle[] = [
        rt.spawn(spec(['sh', '-c', `echo up; sleep ${marker}`], { stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } })),
        rt.spawn(spec(['sh', '-c', `trap '' TERM; echo up; sleep ${marker}9; while :; do sleep 1; done`], { stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } })),
      ]
      await Promise.all(handles.map(handle => new Promise(resolve => handle.stdout!.once('data', resolve))))
      const spilled = rt.spawn(spec(['head', '-c', '2000000', '/dev/zero']))
      await spilled.done
      const spill = spilled.collected.stdout!.readFrom(0).spillPath!
      expect((await execIn(world.containerId(), ['stat', '-c', '%s', spill])).stdout.trim()).toBe('2000000')
      // Each printed `up` before it started its sleep.
      expect(await waitFor(() => running(world.containerId(), marker), rows => rows.length === 2)).toHaveLength(2)
      await hangGuard(own.fiber.dispose(), 20_000, 'runtime disposal')
      expect(await running(world.containerId(), marker)).toEqual([])
      expect((await Promise.all(handles.map(handle => handle.done))).map(outcome => outcome.signal)).toEqual(['SIGTERM', 'SIGKILL'])
      expect((await execIn(world.containerId(), ['test', '-e', spill.slice(0, spill.lastIndexOf('/'))])).exitCode).toBe(1)
      expect(() => rt.spawn(spec(['true']))).toThrow(WorldClosedError)
    })
  })

  describe(`the ${world.name} world vanishing mid-run`, () => {
    it('rejects done with TransportError, settles the handle, and leaves nothing behind', async () => {
      const victim = await world.vanishing()
      const ctx = new Context()
      try {
        await victim.plugin(ctx)
        const runtime = ctx.subprocess as RemoteRuntime
        const marker = sleepMarker()
        const handle = runtime.spawn(spec(['sh', '-c', `echo up; sleep ${marker}`], { stdio: { stdin: 'ignore', stdout: 'pipe', stderr: { maxBytes: MB } } }))
        await new Promise(resolve => handle.stdout!.once('data', resolve))
        handle.stdout!.resume()
        // `up` is printed before the sleep starts.
        expect(await waitFor(() => running(victim.containerId, marker), rows => rows.length === 1)).toHaveLength(1)
        await victim.vanish()
        const error = await hangGuard(handle.done.then(() => undefined, (reason: unknown) => reason), 30_000, 'done after the world vanished')
        expect(error).toBeInstanceOf(TransportError)
        expect((error as TransportError).code).toBe('TRANSPORT_FAILED')
        expect(await hangGuard(handle.waitForExit(), 30_000, 'waitForExit after the world vanished')).toBe(true)
        await hangGuard(ctx.fiber.dispose(), 30_000, 'dispose after the world vanished')
        expect(await victim.leftovers(marker)).toEqual([])
      } finally {
        await victim.cleanup()
      }
    })
  })
}
