/**
 * Confinement of the filesystem half (`ctx.fs`, src/files): the sandbox policy holds for files
 * exactly as for the shells. Managed Docker containers created from the policy, an attached
 * container that does not enforce it, and SSH hosts with and without a working bubblewrap.
 * Every file effect is checked through a separate root `docker exec`, not the server under test.
 */
import { FsError } from '@deepseek-ai/dsh-fs'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld, type RemoteWorld } from '../../src/backend/world.ts'
import { FileServers } from '../../src/files/file-servers.ts'
import { decodeFields } from '../../src/files/protocol.ts'
import { ServerRefusal } from '../../src/files/server-channel.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { worldOwnerOf } from '../../src/providers/remote/world-owner.ts'
import { DockerSandboxProvider } from '../../src/sandbox/docker-provider.ts'
import { execIn } from '../docker/helpers.ts'
import { codeOf } from '../helpers/fs-cases.ts'
import { startRace } from '../helpers/fs-race.ts'
import { BWRAP_CAPABLE, type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'
import { IMAGE, hostWorkspace, run, startContainer } from './helpers.ts'

type Mode = 'read-only' | 'workspace-write' | 'danger-full-access'

/** A shell in the container (root by default), outside every server under test. */
async function shell(containerId: string, script: string, user = 'root'): Promise<string> {
  const result = await execIn(containerId, ['sh', '-c', script], user)
  expect(result.exitCode, result.stderr).toBe(0)
  return result.stdout
}

function containerOf(world: RemoteWorld): string {
  return (world.ctx.sandbox as DockerSandboxProvider).report().world.split(' ')[2]!
}

async function denial(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await promise
  } catch (error) {
    expect(error).toBeInstanceOf(FsError)
    return { code: (error as FsError).code, message: (error as FsError).message }
  }
  throw new Error('expected the call to be refused')
}

describe('a managed container created read-only', () => {
  let workspace: ReturnType<typeof hostWorkspace>
  let world: RemoteWorld

  beforeAll(async () => {
    workspace = hostWorkspace()
    world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: IMAGE, workspace: { bind: workspace.path } }, workspaceRoot: '/workspace', mode: 'read-only' })
  })
  afterAll(async () => {
    await world?.dispose()
    workspace?.remove()
  })

  it('reads the workspace, refuses every write and edit with FS_SANDBOX_DENIED naming the mode, and changes nothing', async () => {
    const fs = world.fs!
    expect(fs.sandboxMode).toBe('read-only')
    const hello = await fs.resolve('hello.txt')
    expect(await fs.readText(hello)).toBe('hello from the host\n')
    expect(await denial(fs.writeText(hello, 'changed'))).toEqual({ code: 'FS_SANDBOX_DENIED', message: 'cannot write "/workspace/hello.txt": file access denied under read-only mode' })
    expect(await denial(fs.editText(hello, { oldString: 'hello', newString: 'bye', replaceAll: false }))).toEqual({ code: 'FS_SANDBOX_DENIED', message: 'cannot edit "/workspace/hello.txt": file access denied under read-only mode' })
    expect(await denial(fs.writeText(await fs.resolve('/tmp/scratch.txt'), 'x'))).toEqual({ code: 'FS_SANDBOX_DENIED', message: 'cannot write "/tmp/scratch.txt": file access denied under read-only mode' })
    expect(await shell(containerOf(world), 'cat /workspace/hello.txt && ls /tmp/scratch.txt 2>&1 || true', '1000:1000')).toBe('hello from the host\nls: cannot access \'/tmp/scratch.txt\': No such file or directory\n')
  })

  it('a wider per-call policy (an approved escalation) still meets the container\'s own read-only mounts: FS_PERMISSION_DENIED', async () => {
    const fs = world.fs!
    const outcome = await denial(fs.writeText(await fs.resolve('hello.txt'), 'escalated', undefined, undefined, { mode: 'danger-full-access', workspaceRoot: '/workspace' }))
    expect(outcome.code).toBe('FS_PERMISSION_DENIED')
    expect(outcome.message).toMatch(/^cannot write "\/workspace\/hello.txt": permission denied \(cannot create a temporary file in \(Read-only file system\)/)
  })
})

describe('a managed container created workspace-write', () => {
  let workspace: ReturnType<typeof hostWorkspace>
  let world: RemoteWorld

  beforeAll(async () => {
    workspace = hostWorkspace()
    world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: IMAGE, workspace: { bind: workspace.path } }, workspaceRoot: '/workspace', mode: 'workspace-write' })
  })
  afterAll(async () => {
    await world?.dispose()
    workspace?.remove()
  })

  it('writes the workspace and /tmp (the container\'s own, which its shell sees), as the container\'s user', async () => {
    const fs = world.fs!
    await fs.writeText(await fs.resolve('src/app.py'), 'print(6 * 7)\n')
    await fs.writeText(await fs.resolve('/tmp/scratch.txt'), 'scratch\n')
    const terminal = await world.open()
    expect(await run(terminal, 'python3 src/app.py; cat /tmp/scratch.txt; stat -c %u src/app.py')).toBe('42\nscratch\n1000')
    await terminal.close()
  })

  it('refuses writes outside the workspace: an absolute path, a .. escape and a symlink that leads out', async () => {
    const fs = world.fs!
    const id = containerOf(world)
    // As the container's user: its root holds no capabilities (CapDrop ALL) over agent's workspace.
    await shell(id, 'ln -s /var/tmp /workspace/escape', '1000:1000')
    for (const path of ['/home/agent/x.txt', '../etc/passwd-copy', 'escape/out.txt']) {
      const target = await fs.resolve(path)
      expect(await denial(fs.writeText(target, 'x'))).toEqual({ code: 'FS_SANDBOX_DENIED', message: `cannot write "${target.displayPath}": file access denied under workspace-write mode` })
    }
    expect(await shell(id, 'ls /var/tmp | wc -l; ls /home/agent | wc -l')).toBe('0\n0\n')
  })

  it('the server checks the directory it renames in too: a write whose path leaves the roots is OUTSIDE there', async () => {
    // Straight to the server (no client-side fence): the world's own check, on the directory fd.
    const owner = worldOwnerOf(world.runtime)!
    const servers = new FileServers(owner)
    try {
      const server = await servers.server(undefined)
      const content = Buffer.from('x')
      const refused = await server.request('w', ['/var/tmp/sneaky.txt', 'n', '', '', '0', '1', '/workspace', String(content.length)], { content }).then(() => undefined, (error: unknown) => error)
      expect(refused).toBeInstanceOf(ServerRefusal)
      expect((refused as ServerRefusal).code).toBe('OUTSIDE')
      expect((refused as ServerRefusal).message).toBe('the directory lies outside the writable roots: /var/tmp')
      // And inside the roots it publishes.
      const ok = await server.request('w', ['/workspace/fine.txt', 'n', '', '', '0', '1', '/workspace', String(content.length)], { content })
      expect(decodeFields(ok.payload)[0]!.toString()).toBe('create')
      expect(await shell(containerOf(world), 'ls /var/tmp | wc -l; cat /workspace/fine.txt', '1000:1000')).toBe('0\nx')
    } finally {
      await servers.dispose()
    }
  })
})

describe('a managed container created workspace-write, under a race (issue 32 part B)', () => {
  let workspace: ReturnType<typeof hostWorkspace>
  let world: RemoteWorld

  beforeAll(async () => {
    workspace = hostWorkspace()
    world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: IMAGE, workspace: { bind: workspace.path } }, workspaceRoot: '/workspace', mode: 'workspace-write' })
  })
  afterAll(async () => {
    await world?.dispose()
    workspace?.remove()
  })

  it('/workspace/evil, a symlink to a /dev/shm directory whose path is over 4096 bytes, exchanged with /workspace/real during 1500 writes of /workspace/real/r-N.txt: none lands outside', async () => {
    const fs = world.fs!
    const id = containerOf(world)
    const race = await startRace(id, '/workspace', '/dev/shm/race', '1000:1000')
    const outcomes: string[] = []
    try {
      for (let i = 0; i < 1500; i += 1) {
        const outcome = await fs.resolve(`/workspace/real/r-${i}.txt`).then(target => fs.writeText(target, 'r\n')).then(written => written.operation, (error: FsError) => `${error.code}: ${error.message}`)
        outcomes.push(outcome.replaceAll(`r-${i}.txt`, 'r-N.txt'))
      }
    } finally {
      expect(await race.stop()).toBeGreaterThan(0)
    }
    expect(await race.outside()).toBe(0)
    const kinds = new Set(outcomes)
    // Resolve sees the long path (a canonical key cannot be made of it), or the server, on the
    // directory it opened, cannot read that directory's path whole: refused, saying why.
    expect([...kinds].filter(kind => ![
      'create',
      'FS_NOT_FOUND: cannot resolve "/workspace/real/r-N.txt": the path is too long',
      'FS_SANDBOX_DENIED: cannot write "/workspace/real/r-N.txt": the directory\'s path cannot be read whole from /proc/self/fd (File name too long), so it cannot be checked against the writable roots: /workspace/real',
    ].includes(kind))).toEqual([])
    // The race reached the server: some writes it was sent opened the deep directory.
    expect(outcomes.filter(outcome => outcome.startsWith('FS_SANDBOX_DENIED')).length).toBeGreaterThan(0)
    expect(Number(await shell(id, 'find /workspace -name "r-*" | wc -l', '1000:1000'))).toBe(outcomes.filter(outcome => outcome === 'create').length)
  })
})

describe('an attached container that does not enforce workspace-write', () => {
  let container: { id: string; remove(): Promise<void> }
  let world: RemoteWorld

  beforeAll(async () => {
    container = await startContainer({})
    world = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: container.id, user: 'agent' }, workspaceRoot: '/home/agent', mode: 'workspace-write' })
  })
  afterAll(async () => {
    await world?.dispose()
    await container?.remove()
  })

  it('refuses reads and writes alike (fails closed, as the shells), naming why; a danger-full-access call is served', async () => {
    const fs = world.fs!
    const read = await denial(fs.resolve('/etc/hostname'))
    expect(read.code).toBe('FS_SANDBOX_DENIED')
    expect(read.message).toMatch(/^cannot resolve "\/etc\/hostname": file access denied under workspace-write mode: .* does not enforce workspace-write for workspace \/home\/agent: /)
    // An approved escalation to danger-full-access runs unconfined, as a shell would.
    const target = { targetKey: '/home/agent/escalated.txt', displayPath: '/home/agent/escalated.txt' } as never
    expect((await fs.writeText(target, 'ok', undefined, undefined, { mode: 'danger-full-access', workspaceRoot: '/home/agent' })).operation).toBe('create')
    expect(await shell(container.id, 'cat /home/agent/escalated.txt')).toBe('ok')
  })
})

describe('SSH hosts', () => {
  const WORKSPACE = '/dsh-ws'
  let capable: SshdWorld
  let refusing: SshdWorld

  const sshWorld = (host: SshdWorld, mode: Mode): Promise<RemoteWorld> => openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `agent@127.0.0.1:${host.ports[0]}`, identity: host.clientKeyFile, knownHosts: host.knownHostsFile, sshConfig: false, agent: false },
    workspaceRoot: WORKSPACE,
    mode,
  })

  beforeAll(async () => {
    ;[capable, refusing] = await Promise.all([startSshdWorld([{}], { hostConfig: BWRAP_CAPABLE }), startSshdWorld()])
    for (const host of [capable, refusing]) await shell(host.containerId, `mkdir -p ${WORKSPACE} && echo 'on the host' > ${WORKSPACE}/hello.txt && chown -R agent:agent ${WORKSPACE}`)
  })
  afterAll(async () => {
    await Promise.all([capable?.stop(), refusing?.stop()])
  })

  it('workspace-write under bubblewrap: the workspace is written; /tmp (private to each confined program) and the rest of the host are refused', async () => {
    const world = await sshWorld(capable, 'workspace-write')
    try {
      const fs = world.fs!
      await fs.writeText(await fs.resolve('notes/today.md'), '# today\n')
      for (const path of ['/tmp/x.txt', '/home/agent/y.txt']) {
        expect(await denial(fs.writeText(await fs.resolve(path), 'x'))).toEqual({ code: 'FS_SANDBOX_DENIED', message: `cannot write "${path}": file access denied under workspace-write mode` })
      }
      expect(await shell(capable.containerId, `cat ${WORKSPACE}/notes/today.md; ls /tmp | grep -c x.txt || true; ls /home/agent | grep -c y.txt || true`)).toBe('# today\n0\n0\n')
      // The servers (one for reads, one for writes) run inside bubblewrap, as the shells do: their parent is bwrap.
      const table = (await shell(capable.containerId, 'ps -eo pid=,ppid=,comm=')).trim().split('\n').map(line => line.trim().split(/\s+/))
      const parents = table.filter(row => row[2] === 'dsh-fsd').map(row => table.find(parent => parent[0] === row[1])?.[2])
      expect(parents).toEqual(['bwrap', 'bwrap'])
    } finally {
      await world.dispose()
    }
  })

  it('read-only under bubblewrap: reads work, every write is refused, nothing changes', async () => {
    const world = await sshWorld(capable, 'read-only')
    try {
      const fs = world.fs!
      const hello = await fs.resolve('hello.txt')
      expect(await fs.readText(hello)).toBe('on the host\n')
      expect(await codeOf(fs.writeText(hello, 'no'))).toBe('FS_SANDBOX_DENIED')
      expect(await shell(capable.containerId, `cat ${WORKSPACE}/hello.txt`)).toBe('on the host\n')
    } finally {
      await world.dispose()
    }
  })

  it('a host whose bubblewrap cannot run refuses every operation of a confined mode, naming why', async () => {
    const world = await sshWorld(refusing, 'workspace-write')
    try {
      const refused = await denial(world.fs!.resolve('hello.txt'))
      expect(refused.code).toBe('FS_SANDBOX_DENIED')
      expect(refused.message).toMatch(/^cannot resolve "\/dsh-ws\/hello.txt": file access denied under workspace-write mode: .*bubblewrap/)
    } finally {
      await world.dispose()
    }
  })
})
