/**
 * The filesystem half's critical section lives in the world, not in one host process: two
 * clients in two processes editing one file, and a client killed in the middle of a write.
 * The second client is test/helpers/fs-client.ts, started with this Node (`--import tsx`).
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import type Docker from 'dockerode'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld, type RemoteWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { codeOf, inWorld } from '../helpers/fs-cases.ts'
import { hangGuard, startTestContainer, unpauseSettled, waitFor } from './helpers.ts'

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
let container: Docker.Container

/** A second client process and its JSON lines. */
function client(...args: string[]): { child: ChildProcessWithoutNullStreams; next(): Promise<Record<string, unknown>> } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/fs-client.ts', ...args], { cwd: root, stdio: ['pipe', 'pipe', 'pipe'] })
  const lines = createInterface({ input: child.stdout })
  const queue: string[] = []
  const waiting: ((line: string) => void)[] = []
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  lines.on('line', line => {
    const waiter = waiting.shift()
    if (waiter !== undefined) waiter(line)
    else queue.push(line)
  })
  const next = (): Promise<Record<string, unknown>> => hangGuard(new Promise<string>((resolve, reject) => {
    const line = queue.shift()
    if (line !== undefined) resolve(line)
    else {
      waiting.push(resolve)
      child.once('exit', code => reject(new Error(`the client exited (${code}) before its next line: ${stderr}`)))
    }
  }), 60_000, `the client's next line (${args.join(' ')})`).then(line => JSON.parse(line) as Record<string, unknown>)
  return { child, next }
}

const sh = (script: string, user = 'agent'): Promise<string> => inWorld(container.id, script, user)

/** The unnamed files (O_TMPFILE) of /srv/clients that the processes PIDS (a shell word) hold open, one per line (read as agent: another uid's /proc/PID/fd needs ptrace rights). */
const stagedBy = (pids: string): Promise<string> => sh(`for p in ${pids}; do for f in /proc/$p/fd/*; do readlink "$f"; done; done 2>/dev/null | grep "^/srv/clients/#" || true`)

beforeAll(async () => {
  container = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'fs-clients' } })
  await sh('mkdir -p /srv/clients && chown agent:agent /srv/clients', 'root')
})

afterAll(async () => {
  await container?.remove({ force: true })
})

describe('two clients in two processes', () => {
  it('editing one version of one file: one edits, the other gets FS_STALE_VERSION, and the file holds the winner\'s edit', async () => {
    await sh('printf "count: 0" > /srv/clients/shared.txt')
    const first = client('edit-once', container.id, '/srv/clients/shared.txt', 'first')
    const second = client('edit-once', container.id, '/srv/clients/shared.txt', 'second')
    const [a, b] = await Promise.all([first.next(), second.next()])
    // Both hold the same version before either edits.
    expect(a.ready).toBe(b.ready)
    first.child.stdin.write('go\n')
    second.child.stdin.write('go\n')
    const outcomes = [(await first.next()).outcome, (await second.next()).outcome]
    expect([...outcomes].sort()).toEqual(['FS_STALE_VERSION', 'edited'])
    const winner = outcomes[0] === 'edited' ? 'first' : 'second'
    expect(await sh('cat /srv/clients/shared.txt')).toBe(`count: ${winner}`)
  })

  it('appending with guarded edits from both at once loses no line', async () => {
    await sh('echo log: > /srv/clients/log.txt')
    const ones = client('append', container.id, '/srv/clients/log.txt', 'one', '40')
    const twos = client('append', container.id, '/srv/clients/log.txt', 'two', '40')
    const [a, b] = await Promise.all([ones.next(), twos.next()])
    expect([a.done, b.done]).toEqual([40, 40])
    const lines = (await sh('cat /srv/clients/log.txt')).trim().split('\n').slice(1).sort()
    const expected = [...Array.from({ length: 40 }, (_, i) => `one-${i}`), ...Array.from({ length: 40 }, (_, i) => `two-${i}`)].sort()
    expect(lines).toEqual(expected)
  }, 120_000)
})

describe('a client killed in the middle of a write', () => {
  it('leaves the target as it was, and its server ends leaving nothing in the folder', async () => {
    await sh('printf OLD > /srv/clients/target.txt')
    const writer = client('partial-write', container.id, '/srv/clients/target.txt')
    const partial = await writer.next()
    expect(partial.partial).toBe(true)
    // The server holds the first MiB in an unnamed file of the folder (O_TMPFILE).
    expect(await waitFor(() => stagedBy(String(partial.server)), staged => staged.length > 0)).toMatch(/^\/srv\/clients\/#\d+ \(deleted\)\n$/)
    writer.child.kill('SIGKILL')
    // The client's death closed the server's stdin: it exits, and its unnamed file goes with it.
    const servers = (): Promise<string> => sh(`ps -eo pid= | grep -x " *${String(partial.server)}" || true`, 'root')
    expect(await waitFor(servers, pids => pids.length === 0)).toBe('')
    expect(await sh('ls -A /srv/clients | grep -c "dsh-" || true; cat /srv/clients/target.txt')).toBe('0\nOLD')
  })
})

describe('a client killed in the middle of a long reply', () => {
  it('its server stops streaming and ends (it watches its stdin between data frames), though the container still drains it', async () => {
    const reader = client('endless-read', container.id)
    const reading = await reader.next()
    expect(reading.reading).toBe(true)
    reader.child.kill('SIGKILL')
    const servers = (): Promise<string> => sh(`ps -eo pid= | grep -x " *${String(reading.server)}" || true`, 'root')
    expect(await waitFor(servers, pids => pids.length === 0, 20_000)).toBe('')
  }, 60_000)
})

describe('the world\'s file server killed in the middle of a write', () => {
  let world: RemoteWorld

  beforeAll(async () => {
    world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: container.id, user: 'agent' }, workspaceRoot: '/srv' })
  })
  afterAll(async () => {
    await world?.dispose()
  })

  it('fails the write with FS_IO_ERROR, never publishes a part, and the next call gets a new server', async () => {
    const fs = world.fs!
    await sh('printf OLD > /srv/clients/big.txt')
    const target = await fs.resolve('/srv/clients/big.txt')
    const writing = fs.writeText(target, 'x'.repeat(200 * 1024 * 1024))
    writing.catch(() => undefined)
    await waitFor(() => stagedBy('$(pgrep -x dsh-fsd)'), staged => staged.length > 0, 30_000, 5)
    await sh('pkill -KILL -x dsh-fsd', 'root')
    expect(await codeOf(writing)).toBe('FS_IO_ERROR')
    await expect(writing).rejects.toThrow(/^cannot write "\/srv\/clients\/big.txt": the world's file server was lost/)
    // Nothing published, and nothing left: the staged content was an unnamed file.
    expect(await sh('ls -A /srv/clients | grep -c "^\\.big" || true; cat /srv/clients/big.txt')).toBe('0\nOLD')
    // A new server serves the next call.
    expect(await fs.readText(target)).toBe('OLD')
  }, 120_000)
})

describe('a paused container', () => {
  it('a request to a silent server fails with FS_IO_ERROR after the silence bound, and after unpause the next call is served', async () => {
    const world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: container.id, user: 'agent' }, workspaceRoot: '/srv', fs: { silenceMs: 2_000 } })
    try {
      const fs = world.fs!
      await sh('echo awake > /srv/clients/paused.txt')
      const target = await fs.resolve('/srv/clients/paused.txt')
      await fs.stat(target)
      await container.pause()
      try {
        // A stat that needs the server (resolve's own answer served the first).
        const stalled = fs.stat(target)
        await expect(hangGuard(stalled, 30_000, 'a read in a paused container')).rejects.toThrow(/the world's file server was lost \(the file server in .* did not answer within 2000 ms \(frozen or stuck/)
        expect(await codeOf(stalled)).toBe('FS_IO_ERROR')
      } finally {
        await unpauseSettled(container.id)
      }
      expect(await fs.readText(await fs.resolve('/srv/clients/paused.txt'))).toBe('awake\n')
    } finally {
      await world.dispose()
    }
  }, 90_000)
})

describe('a restarted container whose cache of the file server was a tmpfs', () => {
  it('the file server is copied in again and the file tools work on', async () => {
    const confined = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'fs-clients' }, User: '1000:1000', HostConfig: { ReadonlyRootfs: true, Tmpfs: { '/tmp': 'rw,exec,mode=1777' } } })
    const world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: confined.id }, workspaceRoot: '/tmp' })
    try {
      const fs = world.fs!
      await fs.writeText(await fs.resolve('/tmp/before.txt'), 'before\n')
      expect(await inWorld(confined.id, 'ls -d /tmp/dsh-remote-tools-1000/*/dsh-fsd | wc -l', '1000:1000')).toBe('1\n')
      await confined.restart({ t: 0 })
      // The tmpfs is new: no copy of the server, and no file of before.
      expect(await inWorld(confined.id, 'ls -A /tmp/dsh-remote-tools-1000 /tmp/before.txt 2>&1 | grep -c "No such file" || true', '1000:1000')).toBe('2\n')
      // The first calls may meet the restart itself (the exec of a container coming up).
      const write = async (): Promise<string> => { await fs.writeText(await fs.resolve('/tmp/after.txt'), 'after\n'); return 'ok' }
      const after = await waitFor(() => write().catch((error: Error) => error.message), outcome => outcome === 'ok', 30_000, 500)
      expect(after).toBe('ok')
      expect(await inWorld(confined.id, 'cat /tmp/after.txt', '1000:1000')).toBe('after\n')
    } finally {
      await world.dispose()
      await confined.remove({ force: true })
    }
  }, 120_000)
})

describe('a bind-mounted single file', () => {
  it('cannot be replaced atomically: FS_IO_ERROR saying it is a mount point, and it is left as it was', async () => {
    const host = mkdtempSync(join(tmpdir(), 'dsh-fs-single-'))
    writeFileSync(join(host, 'config.txt'), 'original\n')
    chownSync(join(host, 'config.txt'), 1000, 1000)
    const mounted = await startTestContainer({ Labels: { 'dsh-remote-worlds.test': 'fs-clients' }, HostConfig: { Binds: [`${join(host, 'config.txt')}:/home/agent/config.txt`] } })
    const world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: mounted.id, user: 'agent' }, workspaceRoot: '/srv' })
    try {
      const fs = world.fs!
      const writing = fs.writeText(await fs.resolve('/home/agent/config.txt'), 'changed\n')
      await expect(writing).rejects.toThrow('cannot write "/home/agent/config.txt": cannot replace it: it is a mount point (a bind-mounted file cannot be replaced atomically; write it from the shell)')
      expect(await codeOf(writing)).toBe('FS_IO_ERROR')
      expect(readFileSync(join(host, 'config.txt'), 'utf8')).toBe('original\n')
    } finally {
      await world.dispose()
      await mounted.remove({ force: true })
      rmSync(host, { recursive: true, force: true })
    }
  }, 60_000)
})

describe("durability 'flushed'", () => {
  it('writes and edits publish as with the default durability (the fsync itself is not observable from here)', async () => {
    const world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: container.id, user: 'agent' }, workspaceRoot: '/srv', fs: { durability: 'flushed' } })
    try {
      const fs = world.fs!
      const target = await fs.resolve('/srv/clients/flushed.txt')
      expect((await fs.writeText(target, 'one\n')).operation).toBe('create')
      expect((await fs.editText(target, { oldString: 'one', newString: 'two', replaceAll: false })).after).toBe('two\n')
      expect(await sh('cat /srv/clients/flushed.txt')).toBe('two\n')
    } finally {
      await world.dispose()
    }
  })
})
