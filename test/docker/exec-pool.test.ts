/**
 * The Docker world's exec pool (src/providers/docker/exec-pool/), against a real engine: spawns
 * run on reused launchers with nothing of one run reaching another, terminals start on a
 * standby whose PTY is exactly a fresh exec's, and disposal ends every pooled exec. Process
 * checks read the container's pid namespace through a separate `docker exec` (helpers.ts).
 */
import { Context } from '@deepseek-ai/cordis'
import type { SubprocessHandle, SubprocessSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import type Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { type ContainerProcess, containerProcesses, execsStarted, hangGuard, isDead, startTestContainer, unpauseSettled, waitFor } from './helpers.ts'

let container: Docker.Container

beforeAll(async () => {
  container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'exec-pool' } })
})

afterAll(async () => {
  await container?.remove({ force: true })
})

async function runtimeFor(): Promise<{ runtime: DockerSubprocessRuntime; dispose: () => Promise<void> }> {
  const ctx = new Context()
  await ctx.plugin(DockerSubprocessRuntime, { container: container.id, user: 'agent' })
  return { runtime: ctx.subprocess as DockerSubprocessRuntime, dispose: () => ctx.fiber.dispose() }
}

/** Live pooled execs in a container, by the name their program runs under. */
async function pooledIn(containerId: string, kind: 'dsh-launcher' | 'dsh-standby'): Promise<ContainerProcess[]> {
  return (await containerProcesses(containerId)).filter(row => row.cmdline.includes(kind) && row.cmdline.startsWith('/bin/sh -c') && !isDead(row.state))
}

/**
 * Holder standbys in a container: dsh-pty processes (the terminal's world-side parent,
 * providers/remote/pty-holder/) with no shell under them yet.
 */
async function holderStandbysIn(containerId: string): Promise<ContainerProcess[]> {
  const rows = await containerProcesses(containerId)
  return rows.filter(row => row.comm === 'dsh-pty' && !isDead(row.state) && !rows.some(child => child.ppid === row.pid))
}

/** Live pooled execs in the file's container. */
function pooled(kind: 'dsh-launcher' | 'dsh-standby'): Promise<ContainerProcess[]> {
  return pooledIn(container.id, kind)
}

/** Whether the world's engine-event watch (state-watch.ts) lets pooled execs take a spec. */
async function watchUsable(runtime: DockerSubprocessRuntime): Promise<boolean> {
  return (await runtime.world() as unknown as { stateWatch: { usable: boolean } }).stateWatch.usable
}

function spec(script: string, overrides: Partial<SubprocessSpawnSpec> = {}): SubprocessSpawnSpec {
  return { argv: ['sh', '-c', script], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' }, graceMs: 1_000, ...overrides }
}

/** Run to `done`, reading both pipes; returns their text and the outcome. */
async function run(runtime: DockerSubprocessRuntime, script: string, overrides: Partial<SubprocessSpawnSpec> = {}): Promise<{ stdout: string; stderr: string; outcome: unknown; handle: SubprocessHandle }> {
  const handle = runtime.spawn(spec(script, overrides))
  let stdout = ''
  let stderr = ''
  handle.stdout?.on('data', (chunk: Buffer) => { stdout += chunk.toString('utf8') })
  handle.stderr?.on('data', (chunk: Buffer) => { stderr += chunk.toString('utf8') })
  const outcome = await handle.done
  return { stdout, stderr, outcome, handle }
}

describe('spawns on the pool\'s launchers in the docker world, as agent', () => {
  it('ten spawns in a row run on one launcher, each with its own exact streams and exit status', async () => {
    const fixture = await runtimeFor()
    try {
      for (let index = 0; index < 10; index += 1) {
        const result = await run(fixture.runtime, `echo out-${index}; echo err-${index} >&2; exit ${index}`)
        expect(result).toMatchObject({ stdout: `out-${index}\n`, stderr: `err-${index}\n`, outcome: { exitCode: index, signal: null } })
      }
      expect((await pooled('dsh-launcher')).length).toBe(1)
    } finally {
      await fixture.dispose()
    }
  })

  it('a background child that holds stdout past the grace never writes into the next spawn\'s output', async () => {
    const fixture = await runtimeFor()
    try {
      // `early` is written before the background child starts, so it is the only line in time.
      const first = await run(fixture.runtime, 'echo early; (sleep 1; echo late-from-first) &', { graceMs: 100 })
      expect(first.stdout).toBe('early\n')
      expect(first.outcome).toEqual({ exitCode: 0, signal: null })
      const seconds: string[] = []
      for (let index = 0; index < 5; index += 1) {
        seconds.push((await run(fixture.runtime, `sleep 0.3; echo next-${index}`)).stdout)
      }
      expect(seconds).toEqual(['next-0\n', 'next-1\n', 'next-2\n', 'next-3\n', 'next-4\n'])
      await first.handle.waitForExit()
    } finally {
      await fixture.dispose()
    }
  })

  it('twelve spawns at once all complete exactly; at most 8 launchers stay waiting', async () => {
    const fixture = await runtimeFor()
    try {
      const results = await Promise.all(Array.from({ length: 12 }, (_, index) => run(fixture.runtime, `sleep 0.2; echo ${index}; exit ${index % 4}`)))
      expect(results.map(result => [result.stdout, result.outcome])).toEqual(Array.from({ length: 12 }, (_, index) => [`${index}\n`, { exitCode: index % 4, signal: null }]))
      // The four past the limit are retired: their socket closes and each exits a moment later.
      expect((await waitFor(() => pooled('dsh-launcher'), rows => rows.length === 8)).length).toBe(8)
    } finally {
      await fixture.dispose()
    }
  })

  it('a spawn with stdin attached runs on a pre-started launcher as its last run: it reads its stdin to EOF, gets its exit status, the launcher then exits, and the next spawn runs on another', async () => {
    const fixture = await runtimeFor()
    try {
      await run(fixture.runtime, 'true')
      const handle = fixture.runtime.spawn(spec('echo $$; cat; echo done; exit 3', { stdio: { stdin: 'pipe', stdout: 'pipe', stderr: 'pipe' } }))
      let stdout = ''
      handle.stdout?.on('data', (chunk: Buffer) => { stdout += chunk.toString('utf8') })
      await waitFor(async () => stdout, text => text.includes('\n'))
      const rows = await containerProcesses(container.id)
      const ancestors: ContainerProcess[] = []
      for (let row = rows.find(entry => entry.pid === Number(stdout.split('\n')[0])); row !== undefined; row = rows.find(entry => entry.pid === row!.ppid)) ancestors.push(row)
      const launcher = ancestors.find(row => row.cmdline.startsWith('/bin/sh -c') && row.cmdline.includes('dsh-launcher'))
      expect(launcher, 'a dsh-launcher among the program\'s ancestors').toBeDefined()
      handle.stdin!.end('fed\n')
      expect(await handle.done).toEqual({ exitCode: 3, signal: null })
      expect(stdout.split('\n').slice(1).join('\n')).toBe('fed\ndone\n')
      await waitFor(() => containerProcesses(container.id), now => !now.some(row => row.pid === launcher!.pid && !isDead(row.state)))
      expect((await run(fixture.runtime, 'echo next')).stdout).toBe('next\n')
    } finally {
      await fixture.dispose()
    }
  })

  it('a world process with stdin (world tools, job tails) carries no session tag of the launcher it ran on, as a fresh exec\'s', async () => {
    const fixture = await runtimeFor()
    try {
      await run(fixture.runtime, 'true')
      const transport = await fixture.runtime.openProcess('cat >/dev/null; echo "tag=${DSH_REMOTE_SESSION-none}"')
      let stdout = ''
      transport.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString('utf8') })
      transport.stdin!.end()
      expect(await transport.exit()).toEqual({ exitCode: 0, signal: null })
      expect(stdout).toBe('tag=none\n')
    } finally {
      await fixture.dispose()
    }
  })

  it('disposal ends every launcher and the standby: none is left in the container', async () => {
    const fixture = await runtimeFor()
    await Promise.all(Array.from({ length: 3 }, () => run(fixture.runtime, 'sleep 0.2')))
    await waitFor(() => pooled('dsh-standby'), rows => rows.length === 1)
    expect((await pooled('dsh-launcher')).length).toBe(3)
    await fixture.dispose()
    expect(await pooled('dsh-launcher')).toEqual([])
    expect(await pooled('dsh-standby')).toEqual([])
  })
})

describe('a paused container in the docker world, as agent', () => {
  it('spawns and terminals fail at once with TargetNotRunningError while it is paused (the pooled execs never take a spec; a first terminal even before the pause event arrived), and work again after unpause', async () => {
    const paused = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'exec-pool' } })
    const ctx = new Context()
    await ctx.plugin(DockerSubprocessRuntime, { container: paused.id, user: 'agent' })
    const runtime = ctx.subprocess as DockerSubprocessRuntime
    try {
      expect((await run(runtime, 'echo warm')).stdout).toBe('warm\n')
      // Paused only once the pool's warm-up execs run: the engine (Debian's docker.io 20.10)
      // wedges for good when a container is paused while an exec of it is starting (its unpause
      // never returns; reproduced with a plain dockerode exec), whoever starts the exec.
      await waitFor(() => pooledIn(paused.id, 'dsh-standby'), rows => rows.length === 1)
      await execsStarted(paused.id)
      // A margin for the engine's own bookkeeping after the exec's process started (its bug, not
      // a fact this test asserts).
      await new Promise(resolve => setTimeout(resolve, 200))
      await paused.pause()
      // The first terminal, asked the instant the pause returned: whether the engine's pause event
      // reached the world's watch yet is not promised, so the world asks ContainerInspect before
      // it sends its control program a request (which would wait out its bound in a frozen world).
      const first = await runtime.spawnTerminal({ argv: ['/bin/sh'], cwd: '/tmp', env: {}, rows: 24, cols: 80, graceMs: 500 }).then(() => undefined, (error: unknown) => error)
      expect((first as { code?: string }).code).toBe('TARGET_NOT_RUNNING')
      // The event reaches the watch (state-watch.ts) a moment later: the spawn below is made once
      // the watch saw it (when is not promised).
      await waitFor(() => watchUsable(runtime), usable => !usable)
      const spawned = runtime.spawn(spec('echo late-run >/tmp/late-run; echo ran'))
      spawned.stdout?.resume()
      spawned.stderr?.resume()
      const spawnError = await spawned.done.then(() => undefined, (error: unknown) => error)
      expect((spawnError as { code?: string }).code).toBe('TARGET_NOT_RUNNING')
      const terminalError = await runtime.spawnTerminal({ argv: ['/bin/sh'], cwd: '/tmp', env: {}, rows: 24, cols: 80, graceMs: 500 }).then(() => undefined, (error: unknown) => error)
      expect((terminalError as { code?: string }).code).toBe('TARGET_NOT_RUNNING')
      await unpauseSettled(paused.id)
      await waitFor(() => watchUsable(runtime), usable => usable)
      // Nothing handed over while paused ran after the unpause.
      const after = await run(runtime, 'test -e /tmp/late-run && echo late || echo never')
      expect(after.stdout).toBe('never\n')
    } finally {
      await ctx.fiber.dispose()
      await paused.remove({ force: true })
    }
  })

  it('asked the instant the pause returned, a terminal of a world opened but never used and one of a world that already ran a terminal both fail with TargetNotRunningError (no control request, no pooled exec waited on)', async () => {
    const paused = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'exec-pool' } })
    const contexts = [new Context(), new Context()]
    for (const ctx of contexts) await ctx.plugin(DockerSubprocessRuntime, { container: paused.id, user: 'agent' })
    const [unused, used] = contexts.map(ctx => ctx.subprocess as DockerSubprocessRuntime) as [DockerSubprocessRuntime, DockerSubprocessRuntime]
    const terminalSpec = { argv: ['/bin/sh'], cwd: '/tmp', env: {}, rows: 24, cols: 80, graceMs: 500 }
    try {
      // Opened, its control channel started, and nothing asked of it since.
      await unused.control()
      // A terminal ran and ended: its world's facts are known and its next terminal's standby waits.
      await (await used.spawnTerminal(terminalSpec)).terminate()
      await waitFor(() => holderStandbysIn(paused.id), rows => rows.length >= 1)
      await execsStarted(paused.id)
      // A margin for the engine's own bookkeeping after the exec's process started (see above).
      await new Promise(resolve => setTimeout(resolve, 200))
      await paused.pause()
      const outcome = (runtime: DockerSubprocessRuntime): Promise<string | undefined> => hangGuard(runtime.spawnTerminal(terminalSpec).then(() => 'started', (error: unknown) => (error as { code?: string }).code), 30_000, 'a terminal of the paused container')
      expect(await outcome(used)).toBe('TARGET_NOT_RUNNING')
      expect(await outcome(unused)).toBe('TARGET_NOT_RUNNING')
    } finally {
      await paused.unpause().catch(() => undefined)
      for (const ctx of contexts) await ctx.fiber.dispose()
      await paused.remove({ force: true })
    }
  }, 120_000)
})

describe('terminals on the pool\'s standby in the docker world, as agent', () => {
  const terminalSpec = { argv: ['/bin/bash', '--noprofile', '--norc', '-i'], cwd: '/tmp', rows: 24, cols: 80, graceMs: 500 }

  /** Type `line` and return the output until `until` appears. */
  async function ask(handle: Awaited<ReturnType<DockerSubprocessRuntime['spawnTerminal']>>, line: string, until: RegExp): Promise<string> {
    let seen = ''
    const onData = (chunk: Buffer | string): void => { seen += chunk.toString() }
    handle.output.on('data', onData)
    await handle.write(line)
    await waitFor(() => seen, text => until.test(text))
    handle.output.off('data', onData)
    return seen
  }

  it('the PTY settings are exactly a fresh exec\'s, and env bytes a tty would act on (^C, ^D, DEL, ESC) arrive intact', async () => {
    // The engine's PTY settings, from a fresh TTY exec (not the pool's).
    const engine = await container.exec({ Cmd: ['stty', '-g'], AttachStdout: true, Tty: true, User: 'agent' })
    const stream = await engine.start({ hijack: true, stdin: false, Tty: true } as Docker.ExecStartOptions)
    let text = ''
    stream.on('data', (chunk: Buffer) => { text += chunk.toString() })
    await new Promise(resolve => stream.once('end', resolve))
    const fixture = await runtimeFor()
    try {
      await fixture.runtime.control()
      expect((await waitFor(() => pooled('dsh-standby'), rows => rows.length === 1)).map(row => row.pid)).toHaveLength(1)
      const handle = await fixture.runtime.spawnTerminal({ ...terminalSpec, env: { TERM: 'dumb', PS1: 'ps1> ', ODD: 'a\x03b\x04c\x7fd\x1be' } })
      handle.output.resume()
      const settings = await ask(handle, 'echo "stty=$(stty -g)"\r', /stty=\S+\r?\n/)
      expect(/stty=(\S+)\r?\n/.exec(settings)?.[1]).toBe(text.trim())
      // `end` on a line of its own: the tty's echo of the command line ends with `echo end` too.
      const odd = await ask(handle, 'printf "%s" "$ODD" | od -An -c | tr -s " "; echo end\r', /(?:^|\n)end\r?\n/)
      expect(odd).toContain(' a 003 b 004 c 177 d 033 e')
      await handle.terminate()
    } finally {
      await fixture.dispose()
    }
  })

  it('the shell is the session leader with the PTY as its controlling tty, and a second terminal takes the next (holder) standby', async () => {
    const fixture = await runtimeFor()
    try {
      const first = await fixture.runtime.spawnTerminal({ ...terminalSpec, env: { TERM: 'dumb', PS1: 'ps1> ' } })
      first.output.resume()
      const second = await fixture.runtime.spawnTerminal({ ...terminalSpec, env: { TERM: 'dumb', PS1: 'ps1> ' } })
      second.output.resume()
      for (const handle of [first, second]) {
        const facts = await ask(handle, 'echo "sid=$(ps -o sid= -p $$ | tr -d " ") pid=$$ tty=$(tty)"\r', /sid=\d+ pid=\d+ tty=\S+\r?\n/)
        const match = /sid=(\d+) pid=(\d+) tty=(\S+)\r?\n/.exec(facts)!
        expect(match[1]).toBe(match[2])
        expect(match[2]).toBe(String(handle.pid))
        expect(match[3]).toMatch(/^\/dev\/pts\/\d+$/)
      }
      await Promise.all([first.terminate(), second.terminate()])
      // The standby for the next terminal waits already: a holder waiting for its spawn frame
      // (the warm-up's TTY standby was ended once terminals were known to run on dsh-pty).
      expect((await waitFor(() => holderStandbysIn(container.id), rows => rows.length === 1)).length).toBe(1)
      expect(await pooled('dsh-standby')).toEqual([])
    } finally {
      await fixture.dispose()
    }
    // Disposal ended it.
    expect(await holderStandbysIn(container.id)).toEqual([])
  })
})
