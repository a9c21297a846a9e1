/**
 * DshWorldContainer and SshdContainer (src/testcontainers) against the real engine: the managed
 * world's sandbox mapping, the runtime config for a composition of one's own, removal when the
 * test process dies with Ryuk off, readiness asked of the world, concurrent starts of one
 * reusable container from two processes, and an sshd for the SSH world.
 */
import { execFile, spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { setTimeout as delay } from 'node:timers/promises'
import { promisify } from 'node:util'
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import { openWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { LIFELINE_COMMAND } from '../../src/providers/docker/lifeline.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { dockerCreateOptions } from '../../src/sandbox/docker-policy.ts'
import { DshWorldContainer, SshdContainer } from '../../src/testcontainers/index.ts'
import { restartKeepsAutoRemove } from '../../src/testcontainers/lifeline-restart.ts'
import { RemoteWorldError } from '../../src/providers/remote/errors.ts'
import { docker, hangGuard } from '../docker/helpers.ts'

const run = promisify(execFile)
const FIXTURE = new URL('./fixtures/start-world.ts', import.meta.url).pathname
const TEST_RUN_LABEL = 'dsh-remote-worlds.test-run'

async function containersLabelled(label: string): Promise<string[]> {
  return (await docker.listContainers({ all: true, filters: { label: [`${TEST_RUN_LABEL}=${label}`] } })).map(info => info.Id)
}

/** Run the fixture (`mode`, `label`) in a child process; resolves with it, its container's id and, for a restart mode, how the restart went. */
async function startFixture(mode: string, label: string, env: NodeJS.ProcessEnv = process.env): Promise<{ child: ReturnType<typeof spawn>; id: string; restart: string | undefined }> {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, mode, label], { stdio: ['ignore', 'pipe', 'inherit'], env })
  const line = await new Promise<string>((resolve, reject) => {
    let read = ''
    child.stdout!.on('data', (chunk: Buffer) => {
      read += chunk.toString()
      if (read.includes('\n')) resolve(read.slice(0, read.indexOf('\n')))
    })
    child.once('exit', code => reject(new Error(`the fixture (${mode}) exited (${code}) before starting its container`)))
  })
  const [id = '', restart] = line.split('\t')
  return { child, id, restart }
}

/** The containers still carrying `label` once they had 15 s to go. */
async function gone(label: string): Promise<string[]> {
  let left = await containersLabelled(label)
  for (let waited = 0; left.length > 0 && waited < 15_000; waited += 100) {
    await delay(100)
    left = await containersLabelled(label)
  }
  return left
}

describe('DshWorldContainer', () => {
  it('read-only: the managed world\'s HostConfig, field for field, and a world whose report names the mode', async () => {
    const container = await new DshWorldContainer().withUser('1000:1000').withSandbox({ mode: 'read-only', workspaceRoot: '/srv' }).start()
    try {
      const info = await docker.getContainer(container.getId()).inspect()
      const expected = dockerCreateOptions({ mode: 'read-only', workspaceRoot: '/srv', user: '1000:1000' })
      const fields = ['ReadonlyRootfs', 'Tmpfs', 'CapDrop', 'SecurityOpt', 'NetworkMode', 'Init', 'PidsLimit', 'Memory', 'MemorySwap', 'NanoCpus'] as const
      expect(Object.fromEntries(fields.map(field => [field, info.HostConfig[field as keyof typeof info.HostConfig]]))).toEqual(Object.fromEntries(fields.map(field => [field, expected.HostConfig![field as keyof typeof expected.HostConfig]])))
      expect({ user: info.Config.User, entrypoint: info.Config.Entrypoint, autoRemove: info.HostConfig.AutoRemove }).toEqual({ user: '1000:1000', entrypoint: [...LIFELINE_COMMAND], autoRemove: true })
      const world = await container.openWorld()
      try {
        const shell = await world.open()
        const result = await shell.send('id -u; touch /srv/x 2>&1; touch /tmp/x && echo tmp-ok')
        expect(result.viewport.split('\n').slice(1, -1)).toEqual(['1000', "touch: cannot touch '/srv/x': Read-only file system", 'tmp-ok'])
        await shell.close()
      } finally {
        await world.dispose()
      }
    } finally {
      await container.stop()
    }
  })

  it('runtimeConfig() mounts DockerSubprocessRuntime in a composition of one\'s own', async () => {
    const container = await new DshWorldContainer().withUser('agent').start()
    const ctx = new Context()
    try {
      expect(container.runtimeConfig()).toEqual({ container: container.getId(), user: 'agent' })
      await ctx.plugin(DockerSubprocessRuntime, container.runtimeConfig())
      const handle = ctx.subprocess.spawn({ argv: ['id', '-un'], cwd: '/tmp', stdio: { stdin: 'ignore', stdout: { maxBytes: 1024 }, stderr: { maxBytes: 1024 } }, graceMs: 500 })
      expect(await handle.done).toEqual({ exitCode: 0, signal: null })
      expect(handle.collected.stdout!.readFrom(0).text).toBe('agent\n')
    } finally {
      await ctx.fiber.dispose()
      await container.stop()
    }
  })

  it('is removed when the test process dies by SIGKILL, with Ryuk off (its lifeline)', async () => {
    const label = randomUUID()
    const { child, id } = await startFixture('hold', label)
    expect((await docker.getContainer(id).inspect()).State.Running).toBe(true)
    child.kill('SIGKILL')
    expect(await gone(label)).toEqual([])
  })

  it('refuses a confined mode with neither a workspace nor a workspace root, and an unusable sshd setting, before anything starts', async () => {
    await expect(new DshWorldContainer().withSandbox({ mode: 'read-only' }).start()).rejects.toThrow('sandbox mode read-only needs a workspace (a host folder or volume mounted at /workspace), or a workspaceRoot that exists in the image')
    expect(() => new SshdContainer().withMaxSessions(1)).toThrow('withMaxSessions(1): the SSH world needs at least 2 sessions per connection (its control channel and one terminal or process)')
    expect(() => new SshdContainer().withSetEnv({ GREETING: 'hello world' })).toThrow('withSetEnv: "GREETING=hello world" cannot be an sshd_config SetEnv entry (names are identifiers; values hold no whitespace, quotes or backslashes)')
  })

  it('keeps its lifeline across restart(), as SshdContainer does, and an engine whose restart may remove an AutoRemove container refuses it with the container running on: SIGKILL after either leaves nothing', async () => {
    const label = randomUUID()
    const world = await startFixture('restart-hold', label)
    const sshd = await startFixture('sshd-restart-hold', label)
    const engine = await docker.version()
    const outcome = restartKeepsAutoRemove(engine.ApiVersion)
      ? 'restarted'
      : `NOT_SUPPORTED: restart(): the engine (version ${engine.Version}, API ${engine.ApiVersion}) may remove an AutoRemove container while restarting it (moby/moby#39352, fixed in Docker 23.0, API 1.42); this container carries a lifeline with AutoRemove, so it was not restarted and runs on. Use Docker 23.0 or later, a reusable DshWorldContainer (withReuse(): no lifeline), or stop() it and start a new one`
    expect([world.restart, sshd.restart]).toEqual([outcome, outcome])
    expect((await containersLabelled(label)).sort()).toEqual([world.id, sshd.id].sort())
    expect(await Promise.all([world.id, sshd.id].map(async id => (await docker.getContainer(id).inspect()).State.Status))).toEqual(['running', 'running'])
    world.child.kill('SIGKILL')
    sshd.child.kill('SIGKILL')
    expect(await gone(label)).toEqual([])
  })

  it('restart() after stop() is the engine\'s refusal for a removed container, never ours that says it runs on', async () => {
    const container = await new DshWorldContainer().withLabels({ [TEST_RUN_LABEL]: randomUUID() }).start()
    await container.stop()
    const error = await container.restart().then(() => undefined, (caught: unknown) => caught)
    // 404 "no such container", or 500 "marked for removal" while the engine still removes it.
    expect({ ours: error instanceof RemoteWorldError, engine: [404, 500].includes((error as { statusCode?: number } | undefined)?.statusCode ?? 0) }).toEqual({ ours: false, engine: true })
  })

  it('a reusable container started with TESTCONTAINERS_REUSE_ENABLE=false is a fresh one, and keeps its lifeline', async () => {
    const label = randomUUID()
    const { child } = await startFixture('reuse-hold', label, { ...process.env, TESTCONTAINERS_REUSE_ENABLE: 'false' })
    child.kill('SIGKILL')
    expect(await gone(label)).toEqual([])
  })

  it('two processes starting the same reusable container at once get one container', async () => {
    const label = randomUUID()
    try {
      const starts = await Promise.all([0, 1].map(() => run(process.execPath, ['--import', 'tsx', FIXTURE, 'reuse', label], { timeout: 120_000 })))
      const ids = starts.map(({ stdout }) => stdout.trim())
      expect(ids[0]).toMatch(/^[0-9a-f]{64}$/)
      expect(ids[1]).toBe(ids[0])
      expect(await containersLabelled(label)).toEqual([ids[0]])
    } finally {
      for (const id of await containersLabelled(label)) await docker.getContainer(id).remove({ force: true })
    }
  })
})

describe('WorldReadyWaitStrategy', () => {
  it('asks the world, not its log: a world whose user cannot run a shell, or that lacks its workspace root, fails the start at once, naming why', async () => {
    // Not the 60 s startup bound: an unknown user is not a world that is still starting (a wait
    // for it would end in the hang guard's error instead of the world's reason).
    await expect(hangGuard(new DshWorldContainer().withUser('no-such-user').start(), 45_000, 'a start that cannot succeed')).rejects.toThrow(/^the world in container [0-9a-f]{12} cannot run \/bin\/sh as no-such-user: .*unable to find user no-such-user/)
    await expect(new DshWorldContainer().withUser('1000:1000').withSandbox({ mode: 'read-only', workspaceRoot: '/nonexistent' }).start()).rejects.toThrow(/^the world in container [0-9a-f]{12} has no workspace root \/nonexistent that 1000:1000 may enter$/)
  })
})

describe('SshdContainer', () => {
  it('is removed when the test process dies by SIGKILL, with Ryuk off (its lifeline beside sshd)', async () => {
    const label = randomUUID()
    const { child, id } = await startFixture('sshd-hold', label)
    expect((await docker.getContainer(id).inspect()).State.Running).toBe(true)
    child.kill('SIGKILL')
    expect(await gone(label)).toEqual([])
  })

  it('serves the SSH world on 127.0.0.1 with per-run keys and known_hosts, as the chosen login and MaxSessions', async () => {
    const sshd = await new SshdContainer().withMaxSessions(2).withUser('root').start()
    try {
      const target = sshd.sshTarget()
      expect(target).toEqual({ target: `root@127.0.0.1:${sshd.port}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false })
      const world = await openWorld({ runtime: SshSubprocessRuntime, runtimeConfig: target, workspaceRoot: '/tmp' })
      try {
        const shells = await Promise.all([world.open(), world.open(), world.open()])
        const result = await shells[0]!.send('id -un; grep ^MaxSessions /etc/dsh-sshd/sshd_config')
        expect(result.viewport.split('\n').slice(1, -1)).toEqual(['root', 'MaxSessions 2'])
        for (const shell of shells) await shell.close()
      } finally {
        await world.dispose()
      }
      const agent = await openWorld({ runtime: SshSubprocessRuntime, runtimeConfig: sshd.sshTarget('agent'), workspaceRoot: '/tmp' })
      try {
        const shell = await agent.open()
        expect((await shell.send('id -un')).viewport).toContain('\nagent\n')
        await shell.close()
      } finally {
        await agent.dispose()
      }
    } finally {
      await sshd.stop()
    }
  })
})
