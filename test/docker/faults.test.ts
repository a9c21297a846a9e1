/**
 * Faults of the Docker world surface as typed errors (class AND stable `.code`), and a world
 * that breaks while a terminal is live never leaves a caller hanging: `done` rejects with
 * TransportError, `output` ends, the send settles or rejects, and teardown completes.
 * Everything runs against the real engine; "broken" worlds are made for real (a stopped
 * container, a killed container, a socket path with no engine behind it).
 */
import { once } from 'node:events'
import { Context } from '@deepseek-ai/cordis'
import type { SubprocessTerminalHandle, SubprocessTerminalSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import type Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime, type DockerRuntimeConfig } from '../../src/providers/docker/docker-runtime.ts'
import { MANAGED_LABEL } from '../../src/providers/docker/docker-world.ts'
import {
  ControlChannelError,
  CwdNotFoundError,
  EngineUnavailableError,
  ExecutableNotFoundError,
  InvalidArgumentError,
  RemoteWorldError,
  TargetNotFoundError,
  TargetNotRunningError,
  TransportError,
  WorldClosedError,
} from '../../src/providers/remote/errors.ts'
import { IMAGE, UPSTREAM_TUNING, containerProcesses, docker, execsStarted, hangGuard, startTestContainer, settleState, terminalLeftovers, terminalStandbyRuns, unpauseSettled, waitFor } from './helpers.ts'

/** A runtime registered in its own cordis context, as a composition would load it. */
interface RuntimeFixture {
  runtime: DockerSubprocessRuntime
  dispose(): Promise<void>
}

async function runtimeFor(config: DockerRuntimeConfig): Promise<RuntimeFixture> {
  const ctx = new Context()
  await ctx.plugin(DockerSubprocessRuntime, config)
  return { runtime: ctx.subprocess as DockerSubprocessRuntime, dispose: () => ctx.fiber.dispose() }
}

function bashSpec(overrides: Partial<SubprocessTerminalSpawnSpec> = {}): SubprocessTerminalSpawnSpec {
  return { argv: ['/bin/bash', '--noprofile', '--norc', '-i'], cwd: '/', env: { TERM: 'dumb', PS1: 'ps1> ' }, rows: 24, cols: 80, graceMs: 500, ...overrides }
}

/** Await a rejection and check its class and code exactly. */
async function expectTyped<E extends RemoteWorldError>(promise: Promise<unknown>, type: new (...args: never[]) => E, code: string): Promise<E> {
  const error = await promise.then(() => undefined, (reason: unknown) => reason)
  expect(error, 'expected a rejection').toBeDefined()
  expect(error).toBeInstanceOf(type)
  expect(error).toBeInstanceOf(RemoteWorldError)
  expect((error as E).code).toBe(code)
  expect((error as E).name).toBe(type.name)
  return error as E
}

/** openWorld then open one shell; whichever step fails, the composition is disposed. */
async function openWorldAndShell(runtimeConfig: DockerRuntimeConfig, terminal: Record<string, unknown> = {}): Promise<void> {
  const world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig, workspaceRoot: '/tmp', terminal: { ...UPSTREAM_TUNING, ...terminal } })
  try {
    const shell = await world.open()
    await shell.close()
  } finally {
    await world.dispose()
  }
}

/** Read a handle's output until `text` appears (bounded by a hang guard). */
async function outputUntil(handle: SubprocessTerminalHandle, text: string): Promise<string> {
  let seen = ''
  await hangGuard(new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      seen += chunk.toString('utf8')
      if (seen.includes(text)) {
        handle.output.off('data', onData)
        resolve()
      }
    }
    handle.output.on('data', onData)
    handle.output.once('end', () => reject(new Error(`output ended before ${JSON.stringify(text)}: ${JSON.stringify(seen)}`)))
  }), 15_000, `output ${JSON.stringify(text)}`)
  return seen
}

const created: Docker.Container[] = []

afterAll(async () => {
  for (const container of created) await container.remove({ force: true }).catch(() => undefined)
})

describe('typed errors of the Docker world', () => {
  let healthy: RuntimeFixture
  let containerId: string

  beforeAll(async () => {
    healthy = await runtimeFor({ image: IMAGE })
    containerId = (await healthy.runtime.world()).containerId
  })

  afterAll(async () => {
    await healthy?.dispose()
  })

  it('an unknown container: TargetNotFoundError (TARGET_NOT_FOUND), from the runtime and from openWorld', async () => {
    const fixture = await runtimeFor({ container: 'dsh-no-such-container-4b1d' })
    try {
      const error = await expectTyped(fixture.runtime.spawnTerminal(bashSpec()), TargetNotFoundError, 'TARGET_NOT_FOUND')
      expect(error.message).toContain('dsh-no-such-container-4b1d')
    } finally {
      await fixture.dispose()
    }
    await expectTyped(openWorldAndShell({ container: 'dsh-no-such-container-4b1d' }), TargetNotFoundError, 'TARGET_NOT_FOUND')
  })

  it('an unknown image for a managed world: TargetNotFoundError, and no container is left behind', async () => {
    // Of this image only: other test runs on this engine may make managed containers meanwhile.
    const labelled = async (): Promise<string[]> => (await docker.listContainers({ all: true, filters: { label: [`${MANAGED_LABEL}=true`] } })).filter(info => info.Image === 'dsh-remote-worlds/no-such-image:missing').map(info => info.Id)
    const before = await labelled()
    const fixture = await runtimeFor({ image: 'dsh-remote-worlds/no-such-image:missing' })
    try {
      const error = await expectTyped(fixture.runtime.spawnTerminal(bashSpec()), TargetNotFoundError, 'TARGET_NOT_FOUND')
      expect(error.message).toContain('dsh-remote-worlds/no-such-image:missing')
    } finally {
      await fixture.dispose()
    }
    expect(await labelled()).toEqual(before)
  })

  it('a stopped container: TargetNotRunningError (TARGET_NOT_RUNNING); a paused one too', async () => {
    const stopped = await startTestContainer()
    created.push(stopped)
    await stopped.stop({ t: 0 })
    const fixture = await runtimeFor({ container: stopped.id })
    try {
      const error = await expectTyped(fixture.runtime.spawnTerminal(bashSpec()), TargetNotRunningError, 'TARGET_NOT_RUNNING')
      expect(error.message).toContain('is not running (status: exited)')
    } finally {
      await fixture.dispose()
    }
    await expectTyped(openWorldAndShell({ container: stopped.id }), TargetNotRunningError, 'TARGET_NOT_RUNNING')

    const paused = await startTestContainer()
    created.push(paused)
    await paused.pause()
    const pausedFixture = await runtimeFor({ container: paused.id })
    try {
      const error = await expectTyped(pausedFixture.runtime.spawnTerminal(bashSpec()), TargetNotRunningError, 'TARGET_NOT_RUNNING')
      expect(error.message).toContain('is paused')
    } finally {
      await pausedFixture.dispose()
      await paused.unpause()
    }
  })

  it('a missing shell: ExecutableNotFoundError with the local provider\'s code (ENOENT) naming it; the runtime stays usable', async () => {
    const error = await expectTyped(healthy.runtime.spawnTerminal(bashSpec({ argv: ['/bin/nonexistent-shell', '-i'] })), ExecutableNotFoundError, 'ENOENT')
    expect(error.executable).toBe('/bin/nonexistent-shell')
    expect(error.message).toMatch(new RegExp(`^ENOENT: command "/bin/nonexistent-shell" is not an executable file in docker container ${containerId.slice(0, 12)}( as \\S+)?$`))
    // A bare name is searched in the terminal's PATH (a builtin name does not count).
    const bare = await expectTyped(healthy.runtime.spawnTerminal(bashSpec({ argv: ['nonexistent-shell'] })), ExecutableNotFoundError, 'ENOENT')
    expect(bare.executable).toBe('nonexistent-shell')
    await expectTyped(healthy.runtime.spawnTerminal(bashSpec({ argv: ['echo', 'x'], env: { PATH: '/nonexistent' } })), ExecutableNotFoundError, 'ENOENT')
    // A directory is not a program: EACCES, as execve(2) gives.
    await expectTyped(healthy.runtime.spawnTerminal(bashSpec({ argv: ['/bin'] })), ExecutableNotFoundError, 'EACCES')
    const handle = await healthy.runtime.spawnTerminal(bashSpec())
    expect(handle.pid).toBeGreaterThan(1)
    await handle.terminate()
  })

  it('terminal-bash configured with a missing shellPath: openWorld\'s open() rejects with ExecutableNotFoundError', async () => {
    const error = await expectTyped(openWorldAndShell({ container: containerId }, { shellPath: '/opt/missing/bash' }), ExecutableNotFoundError, 'ENOENT')
    expect(error.executable).toBe('/opt/missing/bash')
  })

  it('a missing, non-directory or unenterable cwd: CwdNotFoundError naming it, with the errno code the local provider gives (ENOENT, ENOTDIR, EACCES)', async () => {
    const error = await expectTyped(healthy.runtime.spawnTerminal(bashSpec({ cwd: '/nonexistent/dir' })), CwdNotFoundError, 'ENOENT')
    expect(error.cwd).toBe('/nonexistent/dir')
    expect(error.message).toMatch(new RegExp(`^ENOENT: no such working directory in docker container ${containerId.slice(0, 12)}( as \\S+)?: /nonexistent/dir$`))
    // A file is not a directory.
    await expectTyped(healthy.runtime.spawnTerminal(bashSpec({ cwd: '/etc/hostname' })), CwdNotFoundError, 'ENOTDIR')
    // /root is mode 0700: `agent` cannot enter it.
    const asAgent = await runtimeFor({ container: containerId, user: 'agent' })
    try {
      const denied = await expectTyped(asAgent.runtime.spawnTerminal(bashSpec({ cwd: '/root' })), CwdNotFoundError, 'EACCES')
      expect(denied.cwd).toBe('/root')
    } finally {
      await asAgent.dispose()
    }
  })

  it('a NUL byte or a relative cwd: InvalidArgumentError (INVALID_ARGUMENT) before anything starts', async () => {
    await expectTyped(healthy.runtime.spawnTerminal(bashSpec({ argv: ['/bin/bash', 'a\0b'] })), InvalidArgumentError, 'INVALID_ARGUMENT')
    await expectTyped(healthy.runtime.spawnTerminal(bashSpec({ env: { X: 'a\0b' } })), InvalidArgumentError, 'INVALID_ARGUMENT')
    await expectTyped(healthy.runtime.spawnTerminal(bashSpec({ cwd: 'relative' })), InvalidArgumentError, 'INVALID_ARGUMENT')
    // An environment too large for one exec argument (128 KiB): the same refusal as spawn's.
    const big = await expectTyped(healthy.runtime.spawnTerminal(bashSpec({ env: { BIG: 'x'.repeat(130 * 1024) } })), InvalidArgumentError, 'INVALID_ARGUMENT')
    expect(big.message).toMatch(/^argv and environment are too large for a remote start \(\d+ bytes with the wrapper; a single exec argument is limited to 131072 bytes\)$/)
  })

  it('an invalid config: InvalidArgumentError (INVALID_ARGUMENT) when the plugin loads', async () => {
    for (const [config, message] of [
      [{ container: 'a', image: 'b' }, 'exactly one of `container`, `image` or `devcontainer` is required'],
      [{}, 'exactly one of `container`, `image` or `devcontainer` is required'],
      [{ image: IMAGE, socketPath: '' }, 'socketPath'],
      [{ image: IMAGE, bogus: true }, 'bogus'],
    ] as const) {
      const ctx = new Context()
      try {
        const error = await expectTyped(Promise.resolve().then(() => ctx.plugin(DockerSubprocessRuntime, config as DockerRuntimeConfig)), InvalidArgumentError, 'INVALID_ARGUMENT')
        expect(error.message).toContain(message)
      } finally {
        await ctx.fiber.dispose().catch(() => undefined)
      }
    }
  })

  it('the engine socket gone: EngineUnavailableError (ENGINE_UNAVAILABLE), from the runtime and from openWorld', async () => {
    const socketPath = '/nonexistent/dsh-docker.sock'
    const fixture = await runtimeFor({ image: IMAGE, socketPath })
    try {
      const error = await expectTyped(fixture.runtime.spawnTerminal(bashSpec()), EngineUnavailableError, 'ENGINE_UNAVAILABLE')
      expect(error.message).toContain('ENOENT')
    } finally {
      await fixture.dispose()
    }
    await expectTyped(openWorldAndShell({ container: containerId, socketPath }), EngineUnavailableError, 'ENGINE_UNAVAILABLE')
  })

  it('a shell that ends on its own in a live container resolves done with its exit status (no transport error)', async () => {
    const endings = [['exit 3', { exitCode: 3, signal: null }], ['kill -KILL $$', { exitCode: null, signal: 'SIGKILL' }], ['exit 0', { exitCode: 0, signal: null }]] as const
    for (const [line, outcome] of endings) {
      const handle = await healthy.runtime.spawnTerminal(bashSpec())
      const ended = once(handle.output, 'end')
      await outputUntil(handle, 'ps1> ')
      await handle.write(`${line}\n`)
      expect(await hangGuard(handle.done, 15_000, `done after ${line}`)).toEqual(outcome)
      await hangGuard(ended, 15_000, `output end after ${line}`)
      await handle.terminate()
    }
  })

  it('a disposed runtime: live terminals are terminated, then WorldClosedError (WORLD_CLOSED)', async () => {
    const fixture = await runtimeFor({ container: containerId })
    const handle = await fixture.runtime.spawnTerminal(bashSpec())
    const ended = once(handle.output, 'end')
    handle.output.resume()
    await fixture.dispose()
    // Disposal terminated the live terminal: done settled and output ended.
    await hangGuard(handle.done.catch(() => undefined), 15_000, 'done after dispose')
    await hangGuard(ended, 15_000, 'output end after dispose')
    expect((await containerProcesses(containerId)).filter(row => row.session === handle.pid && row.state !== 'Z')).toEqual([])
    await expectTyped(fixture.runtime.spawnTerminal(bashSpec()), WorldClosedError, 'WORLD_CLOSED')
  })
})

describe('the container killed while a terminal is live', () => {
  it('handle level: a pending write settles, done rejects with TransportError, output ends, terminate resolves', async () => {
    // Persistence 'off', given: the end of a shell that is not held (the default 'connection' holds it).
    const fixture = await runtimeFor({ image: IMAGE, persistence: 'off' })
    try {
      const handle = await fixture.runtime.spawnTerminal(bashSpec())
      const ended = once(handle.output, 'end')
      await outputUntil(handle, 'ps1> ')
      await handle.write('sleep 100\n')
      const id = (await fixture.runtime.world()).containerId
      await waitFor(async () => (await containerProcesses(id)).some(row => row.comm === 'sleep'), found => found)
      expect(await handle.inspectForeground()).toMatchObject({ inputWaiting: false })

      // Kill the whole container (its init and every exec) mid-command.
      const killed = docker.getContainer(id).kill()
      const write = handle.write('echo after\n')
      await killed
      expect(await settleState(hangGuard(write, 15_000, 'write during kill'), 15_000)).not.toBe('pending')

      const error = await hangGuard(handle.done.then(() => undefined, (reason: unknown) => reason), 15_000, 'done after kill')
      expect(error).toBeInstanceOf(TransportError)
      expect((error as TransportError).code).toBe('TRANSPORT_FAILED')
      expect((error as Error).message).toContain('the container stopped while the terminal was live')
      await hangGuard(ended, 15_000, 'output end after kill')
      expect(handle.output.readableEnded).toBe(true)

      // Every later call settles instead of hanging; terminate resolves (the world ended).
      await expect(handle.write('x')).rejects.toThrow()
      expect(await settleState(hangGuard(handle.inspectForeground(), 15_000, 'inspect after kill'), 15_000)).not.toBe('pending')
      expect(await settleState(hangGuard(handle.signalForeground('SIGINT'), 15_000, 'signal after kill'), 15_000)).not.toBe('pending')
      await hangGuard(handle.terminate(), 15_000, 'terminate after kill')
      await hangGuard(handle.terminate(), 15_000, 'second terminate after kill')
      // A new terminal in the dead world fails with a typed error, promptly.
      await expectTyped(hangGuard(fixture.runtime.spawnTerminal(bashSpec()), 15_000, 'spawn after kill'), TargetNotRunningError, 'TARGET_NOT_RUNNING')
    } finally {
      await hangGuard(fixture.dispose(), 30_000, 'dispose after kill')
    }
  }, 60_000)

  it('openWorld level: the in-flight send settles or rejects, and close and dispose complete', async () => {
    const world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: IMAGE, persistence: 'off' }, workspaceRoot: '/tmp', terminal: { ...UPSTREAM_TUNING, idleSilenceMs: 30_000, timeoutMs: 60_000 } })
    const id = (await (world.runtime as DockerSubprocessRuntime).world()).containerId
    try {
      const shell = await world.open()
      const operation = shell.startSend('sleep 100')
      await waitFor(async () => (await containerProcesses(id)).some(row => row.comm === 'sleep'), found => found)
      await docker.getContainer(id).kill()
      // Far inside the send's own bounds (silence 30 s, timeout 60 s): only the dead world settles it.
      const outcome = await hangGuard(operation.done.then(result => ({ result }), (error: unknown) => ({ error })), 20_000, 'send after kill')
      if ('result' in outcome) expect(outcome.result.waitReason).toBe('session_exit')
      else expect(outcome.error).toBeInstanceOf(Error)
      await hangGuard(shell.close().catch(() => undefined), 20_000, 'close after kill')
    } finally {
      await hangGuard(world.dispose().catch(() => undefined), 30_000, 'dispose after kill')
    }
    const gone = await docker.getContainer(id).inspect().then(() => 'exists', (error: { statusCode?: number }) => error.statusCode)
    expect(gone).toBe(404)
  }, 90_000)
})

/** What every probe, signal and teardown of a paused container's terminal says. */
const MSG_PAUSED = 'is paused: its processes are frozen, not ended, so nothing there can be probed, signalled or proven quiescent; unpause the container and retry'

describe('the container paused while a terminal is live', () => {
  // Not the container's own `sleep infinity`.
  const SLEEP = 'sleep 20'

  /**
   * Pause once the pool's next standby (started 250 ms after the terminal took one) runs and no
   * exec of the container is still starting: the engine wedges when a pause meets a starting exec.
   */
  async function pauseWhenNoExecStarts(id: string): Promise<void> {
    await waitFor(() => terminalStandbyRuns(id), found => found)
    await execsStarted(id)
    await docker.getContainer(id).pause()
  }

  /** A container this test may pause (attached, so the runtime never removes it). */
  async function pausable(): Promise<string> {
    const container = await startTestContainer()
    created.push(container)
    return container.id
  }

  /**
   * Each case runs with a shell that is not held (persistence 'off', given) and with a held one
   * (the default, 'connection'): a frozen world fails both the same way, within the control
   * channel's bound, and never waits out a held shell's reconnect deadline (60 s).
   */
  const MODES = [{ name: 'not held (persistence off)', persistence: 'off' }, { name: 'held (the default persistence, connection)', persistence: undefined }] as const

  for (const { name, persistence } of MODES) describe(name, () => {
    it('handle level: a control request times out and fails the channel; terminate rejects (paused, not quiescent); after unpause a retried terminate proves nothing is left', async () => {
      const id = await pausable()
      const fixture = await runtimeFor({ container: id, controlTimeoutMs: 2_000, ...(persistence === undefined ? {} : { persistence }) })
      try {
        const handle = await fixture.runtime.spawnTerminal(bashSpec())
        await outputUntil(handle, 'ps1> ')
        await handle.write(`${SLEEP}\n`)
        await waitFor(async () => (await containerProcesses(id)).some(row => row.cmdline === SLEEP), found => found)
        await pauseWhenNoExecStarts(id)

        // The frozen control program does not answer: the request times out and fails the channel;
        // the probe's retry on a fresh channel finds out why, and says so.
        // The message is the retry's finding, so the answer came from the control channel's bound
        // (2 s), not from a held shell's reconnect deadline (60 s, beyond the hang guard).
        const probe = await expectTyped(hangGuard(handle.inspectForeground(), 15_000, 'inspect while paused'), ControlChannelError, 'CONTROL_FAILED')
        expect(probe.message).toBe(`docker container ${id.slice(0, 12)} ${MSG_PAUSED}`)

        // Teardown fails instead of hanging, and does not claim quiescence.
        const refused = await expectTyped(hangGuard(handle.terminate(), 30_000, 'terminate while paused'), ControlChannelError, 'CONTROL_FAILED')
        expect(refused.message).toBe(`docker container ${id.slice(0, 12)} ${MSG_PAUSED}`)

        await unpauseSettled(id)
        // It told the truth: the shell and its sleep are still there.
        expect((await terminalLeftovers(id, handle.pid)).map(row => row.comm).sort()).toEqual(['bash', 'sleep'])

        // A retried terminate (on a fresh control channel) stops them and proves it.
        const ended: Promise<unknown> = handle.output.readableEnded ? Promise.resolve() : once(handle.output, 'end')
        handle.output.resume()
        await hangGuard(handle.terminate(), 30_000, 'terminate after unpause')
        await hangGuard(handle.done.catch(() => undefined), 15_000, 'done after terminate')
        await hangGuard(ended, 15_000, 'output end after terminate')
        expect(await terminalLeftovers(id, handle.pid)).toEqual([])
      } finally {
        await docker.getContainer(id).unpause().catch(() => undefined)
        await hangGuard(fixture.dispose(), 30_000, 'dispose after pause')
      }
    }, 90_000)

    it('openWorld level (the CLI path): the send settles, close rejects with a typed error, and after unpause a retried close succeeds with nothing left', async () => {
      const id = await pausable()
      const world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: id, controlTimeoutMs: 2_000, ...(persistence === undefined ? {} : { persistence }) }, workspaceRoot: '/tmp', terminal: { ...UPSTREAM_TUNING, idleSilenceMs: 30_000, timeoutMs: 5_000 } })
      let shellPid: number | undefined
      try {
        const shell = await world.open()
        const operation = shell.startSend(SLEEP)
        await waitFor(async () => (await containerProcesses(id)).some(row => row.cmdline === SLEEP), found => found)
        shellPid = (await containerProcesses(id)).find(row => row.cmdline === SLEEP)!.session
        await pauseWhenNoExecStarts(id)
        const outcome = await hangGuard(operation.done.then(result => ({ result }), (error: unknown) => ({ error })), 30_000, 'send while paused')
        // The send's foreground probe timed out (2 s) and its retry found the container paused:
        // the send rejects with that failure, not with the send's own timeout (5 s) nor after a
        // held shell's reconnect deadline (60 s, beyond the hang guard).
        expect('error' in outcome).toBe(true)
        const sendError = (outcome as { error: unknown }).error
        expect(sendError).toBeInstanceOf(ControlChannelError)
        expect((sendError as Error).message).toBe(`docker container ${id.slice(0, 12)} ${MSG_PAUSED}`)
        const closeError = await hangGuard(shell.close().then(() => undefined, (error: unknown) => error), 30_000, 'close while paused')
        // terminal-bash wraps the handle's rejection; the cause is the typed, truthful refusal.
        expect(closeError).toBeInstanceOf(Error)
        expect((closeError as Error).message).toBe('PTY cleanup failed (model request)')
        const cause = (closeError as Error).cause
        expect(cause).toBeInstanceOf(ControlChannelError)
        expect((cause as ControlChannelError).code).toBe('CONTROL_FAILED')
        expect((cause as Error).message).toBe(`docker container ${id.slice(0, 12)} ${MSG_PAUSED}`)
        await unpauseSettled(id)
        expect((await terminalLeftovers(id, shellPid)).map(row => row.comm).sort()).toEqual(['bash', 'sleep'])
        const retry = await hangGuard(shell.close().then(() => undefined, (error: unknown) => error), 30_000, 'close after unpause')
        expect(retry).toBeUndefined()
        expect(await terminalLeftovers(id, shellPid)).toEqual([])
      } finally {
        await docker.getContainer(id).unpause().catch(() => undefined)
        await hangGuard(world.dispose().catch(() => undefined), 30_000, 'dispose after pause')
      }
      expect(await terminalLeftovers(id, shellPid!)).toEqual([])
    }, 120_000)

    it('a new terminal of a world that runs one fails at once with TargetNotRunningError, and starts again after unpause', async () => {
      const id = await pausable()
      const fixture = await runtimeFor({ container: id, controlTimeoutMs: 2_000, ...(persistence === undefined ? {} : { persistence }) })
      try {
        const first = await fixture.runtime.spawnTerminal(bashSpec())
        await outputUntil(first, 'ps1> ')
        expect((await fixture.runtime.persistenceInEffect()).mode).toBe(persistence ?? 'connection')
        await pauseWhenNoExecStarts(id)
        // At once: ContainerInspect answered (TargetNotRunningError), not a control request's
        // bound (that would be a ControlChannelError) nor the pool's standby (no bound at all).
        const error = await expectTyped(hangGuard(fixture.runtime.spawnTerminal(bashSpec()), 15_000, 'a terminal of the paused container'), TargetNotRunningError, 'TARGET_NOT_RUNNING')
        expect(error.message).toBe(`docker container ${id.slice(0, 12)} is paused: its processes are frozen until it is unpaused`)
        await unpauseSettled(id)
        const again = await hangGuard(fixture.runtime.spawnTerminal(bashSpec()), 15_000, 'a terminal after unpause')
        await outputUntil(again, 'ps1> ')
        await hangGuard(again.terminate(), 30_000, 'terminate after unpause')
        await hangGuard(first.terminate(), 30_000, 'terminate the first after unpause')
      } finally {
        await docker.getContainer(id).unpause().catch(() => undefined)
        await hangGuard(fixture.dispose(), 30_000, 'dispose after pause')
      }
    }, 90_000)
  })
})
