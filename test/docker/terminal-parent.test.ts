/**
 * Where the terminal's world-side parent (dsh-pty, providers/remote/pty-holder/) cannot run, a
 * Docker world's terminals fall back to the PTY the engine allocates, and say so: a container
 * whose root is read-only and whose writable places are all mounted noexec (no cache directory
 * of world-tools/install.ts can hold a copy that runs). Its default persistence degrades to 'off'
 * there; a given held mode is refused.
 */
import type Docker from 'dockerode'
import { Context } from '@deepseek-ai/cordis'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { PersistenceUnavailableError } from '../../src/providers/remote/errors.ts'
import { terminalHolder } from '../../src/providers/remote/pty-holder/holder-install.ts'
import { WORLD_OWNER } from '../../src/providers/remote/world-owner.ts'
import { worldTool } from '../../src/providers/remote/world-tools/manifest.ts'
import { startTestContainer } from './helpers.ts'

let container: Docker.Container
let ctx: Context
let runtime: DockerSubprocessRuntime

beforeAll(async () => {
  container = await startTestContainer({
    Labels: { 'dsh-remote-worlds.test': 'terminal-parent' },
    HostConfig: { ReadonlyRootfs: true, Tmpfs: { '/tmp': 'rw,noexec,mode=1777', '/var/tmp': 'rw,noexec,mode=1777', '/dev/shm': 'rw,noexec,mode=1777' } },
  })
  ctx = new Context()
  await ctx.plugin(DockerSubprocessRuntime, { container: container.id, user: 'agent' })
  runtime = ctx.subprocess as unknown as DockerSubprocessRuntime
})

afterAll(async () => {
  await ctx?.fiber.dispose()
  await container?.remove({ force: true })
})

describe('a Docker world where dsh-pty cannot run (read-only root, noexec temporary directories)', () => {
  it('names why its terminals have no world-side parent', async () => {
    const holder = await terminalHolder(runtime[WORLD_OWNER])
    const size = worldTool('dsh-pty', 'x86_64').bytes.length
    const noexec = (dir: string): string => `${dir}/dsh-remote-tools-1000: a program there cannot run (mounted noexec?)`
    expect(holder).toEqual({ unavailable: `cannot copy dsh-pty (x86_64, ${size} bytes) into docker container ${container.id}: /home/agent/.cache/dsh-remote-worlds/tools: cannot be created (read-only?); ${noexec('/var/tmp')}; ${noexec('/tmp')}; ${noexec('/dev/shm')}` })
  })

  it('still runs terminals on the engine\'s PTY, where a SIGKILL reads as exit code 137', async () => {
    const terminal = await runtime.spawnTerminal({ argv: ['bash', '--norc', '--noprofile', '-i'], cwd: '/tmp', env: { PS1: 'ready> ' }, rows: 24, cols: 80, graceMs: 1_000 })
    try {
      let seen = ''
      terminal.output.on('data', (chunk: Buffer) => { seen += chunk.toString('utf8') })
      await terminal.write('echo "parent=$(ps -o comm= -p $PPID)"; kill -9 $$\n')
      expect(await terminal.done).toEqual({ exitCode: 137, signal: null })
      // The engine's exec is the shell's parent (outside the container's pid namespace: pid 0).
      expect(seen).toContain('parent=\r\n')
    } finally {
      await terminal.terminate()
    }
  }, 60_000)

  it('degrades the default persistence to off, saying why, while a given connection is refused (issue 33)', async () => {
    const holder = await terminalHolder(runtime[WORLD_OWNER])
    const why = 'unavailable' in holder ? holder.unavailable : ''
    // Opened without `persistence`: the default 'connection' cannot hold here, so it is 'off' (the terminal above ran).
    expect(await runtime.persistenceInEffect()).toEqual({ mode: 'off', defaulted: true, degraded: why })
    const given = new Context()
    try {
      await given.plugin(DockerSubprocessRuntime, { container: container.id, user: 'agent', persistence: 'connection' })
      const refusing = given.subprocess as unknown as DockerSubprocessRuntime
      expect(await refusing.persistenceInEffect()).toEqual({ mode: 'connection', defaulted: false })
      const refusal = await refusing.spawnTerminal({ argv: ['bash', '--norc', '--noprofile', '-i'], cwd: '/tmp', env: { PS1: 'ready> ' }, rows: 24, cols: 80, graceMs: 1_000 }).then(() => undefined, (error: unknown) => error)
      expect(refusal).toBeInstanceOf(PersistenceUnavailableError)
      expect((refusal as PersistenceUnavailableError).code).toBe('PERSISTENCE_UNAVAILABLE')
      expect((refusal as Error).message).toContain(`persistence 'connection' needs dsh-pty, the terminal's world-side parent, to hold the shell, and it cannot run here: ${why}`)
    } finally {
      await given.fiber.dispose()
    }
  }, 60_000)
})
