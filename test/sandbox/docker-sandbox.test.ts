/**
 * Sandbox policy in the Docker world, end to end: the UNCHANGED terminal-bash asks
 * `ctx.sandbox.confine()` of our DockerSandboxProvider, a managed container is created from the
 * policy, and the kernel's own denials are what the shell prints. Real engine, no mocks.
 */
import { readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { SandboxUnavailableError } from '@deepseek-ai/dsh-sandbox'
import { setSandboxMode } from '@deepseek-ai/dsh-sandbox-policy'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld, type RemoteWorld, type TerminalTuning } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime, type DockerRuntimeConfig } from '../../src/providers/docker/docker-runtime.ts'
import { UNVERIFIED_TOOL_MARK } from '../../src/providers/remote/world-tools/launch.ts'
import { SANDBOX_LOGGER, sandboxReportOf } from '../../src/sandbox/companion.ts'
import { DockerSandboxProvider } from '../../src/sandbox/docker-provider.ts'
import { execIn } from '../docker/helpers.ts'
import { AGENT_UID, docker, hostWorkspace, IMAGE, run, startContainer } from './helpers.ts'

type Mode = 'read-only' | 'workspace-write' | 'danger-full-access'

function dockerWorld(runtimeConfig: DockerRuntimeConfig, mode?: Mode, workspaceRoot = '/workspace', terminal?: TerminalTuning): Promise<RemoteWorld> {
  return openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig, workspaceRoot, ...(mode !== undefined ? { mode } : {}), ...(terminal !== undefined ? { terminal } : {}) })
}

/**
 * `ps -ww -e -o comm=,args=` lines split into the world's pooled execs (a launcher or a
 * standby: `sh` running `/bin/sh -c PROGRAM dsh-launcher|dsh-standby NONCE`, see
 * src/providers/docker/exec-pool/) and the command names of everything else, in pid order.
 */
function splitPooled(text: string): { pooled: string[]; others: string[] } {
  // Rows of `ps -o pid=,ppid=,comm=,args=`.
  const rows = text.trim().split('\n').map(line => line.trim().split(/ +/)).map(([pid, ppid, comm, ...args]) => ({ pid: pid!, ppid: ppid!, comm: comm!, args: args.join(' ') }))
  // Pooled: a launcher or TTY standby (a `sh` named after its program), or a holder standby (a
  // dsh-pty with no shell under it yet; a terminal's own dsh-pty is its shell's parent), or one
  // still being verified (world-tools/launch.ts: its `sh`, and the find or sha256sum under it).
  const verifying = (row: (typeof rows)[number] | undefined): boolean => row !== undefined && row.comm === 'sh' && row.args.includes(UNVERIFIED_TOOL_MARK)
  const isPooled = (row: (typeof rows)[number]): boolean => /^\/bin\/sh -c .* dsh-(launcher|standby) [0-9a-f]{32}$/.test(row.args) || (row.comm === 'dsh-pty' && !rows.some(child => child.ppid === row.pid))
    || verifying(row) || verifying(rows.find(parent => parent.pid === row.ppid))
  return { pooled: rows.filter(isPooled).map(row => row.comm), others: rows.filter(row => !isPooled(row)).map(row => row.comm) }
}

function containerOf(world: RemoteWorld): string {
  return (world.ctx.sandbox as DockerSandboxProvider).report().world.split(' ')[2]!
}

function logLines(world: RemoteWorld): string[] {
  return world.ctx.logger.buffer.filter(message => message.name === SANDBOX_LOGGER).map(message => `${message.type}: ${String(message.args[0])}`)
}

describe('read-only (managed container created from the policy)', () => {
  // Created in beforeAll, so a filtered run (-t) leaks no host folder.
  let workspace: ReturnType<typeof hostWorkspace>
  let world: RemoteWorld

  beforeAll(async () => {
    workspace = hostWorkspace()
    world = await dockerWorld({ image: IMAGE, workspace: { bind: workspace.path } }, 'read-only')
  })
  afterAll(async () => {
    await world?.dispose()
    workspace?.remove()
  })

  it('the container carries the mapped HostConfig, and confine() passes argv through with full enforcement', async () => {
    const info = await docker.getContainer(containerOf(world)).inspect()
    expect(info.Config.User).toBe('1000:1000')
    expect(info.HostConfig.ReadonlyRootfs).toBe(true)
    expect(info.HostConfig.CapDrop).toEqual(['ALL'])
    expect(info.HostConfig.SecurityOpt).toEqual(['no-new-privileges:true'])
    expect(info.HostConfig.NetworkMode).toBe('none')
    expect(info.HostConfig.Init).toBe(true)
    expect(info.HostConfig.Tmpfs).toEqual({ '/tmp': 'rw,exec,nosuid,nodev,size=268435456,mode=1777' })
    expect([info.HostConfig.PidsLimit, info.HostConfig.Memory, info.HostConfig.NanoCpus]).toEqual([512, 2147483648, 2000000000])
    expect(info.Mounts.map(mount => [mount.Type, mount.Source, mount.Destination, mount.RW])).toEqual([['bind', workspace.path, '/workspace', false]])

    const argv = ['/bin/bash', '--noprofile', '--norc', '-i']
    expect(world.ctx.sandbox.confine(argv, { mode: 'read-only', workspaceRoot: '/workspace' })).toEqual({
      argv,
      enforcement: 'full',
      denialSignatures: ['Read-only file system', 'Permission denied'],
      runnerFailureRules: [],
    })
    expect(logLines(world)).toEqual([`info: sandbox mode read-only: enforced (full) by docker container (managed, created from the policy) in docker container ${containerOf(world)} as 1000:1000 (managed)`])
  })

  it('reading the workspace works; writing in it or under / fails with EROFS; /tmp is private scratch', async () => {
    const terminal = await world.open()
    expect(await run(terminal, 'pwd; id -u')).toBe('/workspace\n1000')
    expect(await run(terminal, 'cat hello.txt')).toBe('hello from the host')
    expect(await run(terminal, 'echo changed > hello.txt')).toBe('bash: hello.txt: Read-only file system')
    expect(await run(terminal, 'touch /workspace/new.txt')).toBe('touch: cannot touch \'/workspace/new.txt\': Read-only file system')
    expect(await run(terminal, 'echo x > /probe')).toBe('bash: /probe: Read-only file system')
    expect(await run(terminal, 'echo x > /home/agent/probe')).toBe('bash: /home/agent/probe: Read-only file system')
    expect(await run(terminal, 'echo scratch > /tmp/s && cat /tmp/s')).toBe('scratch')
    expect(readFileSync(join(workspace.path, 'hello.txt'), 'utf8')).toBe('hello from the host\n')
    await terminal.close()
  })

  it('the report says read-only is enforced and workspace-write is not', () => {
    const report = sandboxReportOf(world.ctx)!
    expect(report.modes.map(mode => [mode.mode, mode.available, mode.enforcement])).toEqual([
      ['read-only', true, 'full'],
      ['workspace-write', false, 'unavailable'],
      ['danger-full-access', true, 'none'],
    ])
    expect(report.modes[1]!.gaps).toEqual([`the workspace /workspace is not writable: it lies in /workspace (read-only bind of ${workspace.path})`])
    expect(report.limits).toEqual({ pidsLimit: 512, memoryBytes: 2147483648, nanoCpus: 2000000000, networkMode: 'none' })
  })
})

describe('workspace-write (managed container created from the policy)', () => {
  // Created in beforeAll, so a filtered run (-t) leaks no host folder.
  let workspace: ReturnType<typeof hostWorkspace>
  let world: RemoteWorld

  beforeAll(async () => {
    workspace = hostWorkspace()
    world = await dockerWorld({ image: IMAGE, workspace: { bind: workspace.path } }, 'workspace-write')
  })
  afterAll(async () => {
    await world?.dispose()
    workspace?.remove()
  })

  it('writing in the workspace works and is visible on the host side of the bind', async () => {
    const terminal = await world.open()
    expect(await run(terminal, 'echo written in the container > out.txt && cat out.txt')).toBe('written in the container')
    expect(readFileSync(join(workspace.path, 'out.txt'), 'utf8')).toBe('written in the container\n')
    expect(statSync(join(workspace.path, 'out.txt')).uid).toBe(AGENT_UID)
    expect(await run(terminal, 'mkdir -p sub/dir && echo deep > sub/dir/f && cat sub/dir/f')).toBe('deep')
    expect(readFileSync(join(workspace.path, 'sub/dir/f'), 'utf8')).toBe('deep\n')
    await terminal.close()
  })

  it('writing outside the workspace fails (except the private /tmp)', async () => {
    const terminal = await world.open()
    expect(await run(terminal, 'echo x > /probe')).toBe('bash: /probe: Read-only file system')
    expect(await run(terminal, 'echo x > /home/agent/probe')).toBe('bash: /home/agent/probe: Read-only file system')
    expect(await run(terminal, 'touch /etc/probe')).toBe('touch: cannot touch \'/etc/probe\': Read-only file system')
    expect(await run(terminal, 'echo x >> /etc/hosts')).toBe('bash: /etc/hosts: Permission denied')
    expect(await run(terminal, 'echo scratch > /tmp/s && cat /tmp/s')).toBe('scratch')
    await terminal.close()
  })

  it('the upstream sandbox-mode fence holds: no mode change while a terminal is open; after closing, the new mode fails closed here', async () => {
    const terminal = await world.open()
    expect(() => setSandboxMode(world.agent.session, 'read-only')).toThrow(
      'cannot change sandbox mode from "workspace-write" to "read-only" while persistent terminal sessions are open or being created; wait for creation to settle and close them first',
    )
    expect(world.ctx.sandboxPolicy.resolve({ session: world.agent.session }).mode).toBe('workspace-write')
    expect(await run(terminal, 'echo still > still.txt && cat still.txt')).toBe('still')
    await terminal.close()

    setSandboxMode(world.agent.session, 'read-only')
    expect(world.ctx.sandboxPolicy.resolve({ session: world.agent.session }).mode).toBe('read-only')
    // This container was made for workspace-write (its workspace is writable): read-only cannot be enforced.
    const failure = await world.open().then(() => undefined, (error: unknown) => error)
    expect(failure).toBeInstanceOf(SandboxUnavailableError)
    expect((failure as SandboxUnavailableError).code).toBe('SANDBOX_UNAVAILABLE')
    expect((failure as Error).message.endsWith(`Runner failure: docker container ${containerOf(world)} as 1000:1000 does not enforce read-only for workspace /workspace: writable mount /workspace (read-write bind of ${workspace.path}): read-only allows no persistent writes`)).toBe(true)
    // The agent reads this: it names the world and a fix there, not upstream's host advice (install bubblewrap).
    expect((failure as Error).message.startsWith(`sandbox mode "read-only" is requested but docker container ${containerOf(world)} as 1000:1000 cannot enforce it; refusing to run the command unconfined. Attach to a container whose HostConfig enforces it`)).toBe(true)
    expect((failure as Error).message).not.toContain('bubblewrap')
    expect(world.ctx.terminals.list(world.agent)).toEqual([])
    setSandboxMode(world.agent.session, 'workspace-write')
  })
})

describe('Docker limits, network and capabilities of a confined container', () => {
  // Created in beforeAll, so a filtered run (-t) leaks no host folder.
  let workspace: ReturnType<typeof hostWorkspace>
  let world: RemoteWorld

  beforeAll(async () => {
    workspace = hostWorkspace()
    // A silent 5 s bomb must settle at the prompt, not by terminal-bash's 3 s inferred idle.
    world = await dockerWorld({ image: IMAGE, workspace: { bind: workspace.path }, limits: { pidsLimit: 64, memoryBytes: 256 * 1024 ** 2 } }, 'workspace-write', '/workspace', { idleSilenceMs: 60_000 })
  })
  afterAll(async () => {
    await world?.dispose()
    workspace?.remove()
  })

  it('a fork bomb is stopped by PidsLimit and the world survives', async () => {
    const terminal = await world.open()
    expect(await run(terminal, 'cat /sys/fs/cgroup/pids/pids.max')).toBe('64')
    // The bomb runs for 5 s in timeout's process group, then the whole group is SIGKILLed.
    // (Output goes to a file: a pipeline's reader of fd 0 would be taken for a stdin wait; see the report.)
    expect(await run(terminal, 'timeout -s KILL 5 bash -c \'f(){ f|f& }; f; sleep 60\' >/tmp/bomb.log 2>&1; echo "rc=$?"')).toBe('Killed\nrc=137')
    expect(await run(terminal, 'grep -m1 -o "fork: retry: Resource temporarily unavailable" /tmp/bomb.log')).toBe('fork: retry: Resource temporarily unavailable')
    // Every bomb process is gone: init, the container's lifeline (sh), the control channel (sh),
    // the terminal's dsh-pty (its relay) and this shell's parent, the holder (dsh-held: the default
    // persistence 'connection' holds the shell), this shell, ps; besides them only the world's
    // pooled execs (a launcher, and a standby when its start came before the bomb).
    const listed = await run(terminal, 'ps -ww -e -o pid=,ppid=,comm=,args=')
    const table = splitPooled(listed)
    expect(table.others, listed).toEqual(['docker-init', 'sh', 'sh', 'dsh-pty', 'dsh-held', 'bash', 'ps'])
    expect(table.pooled.length).toBeGreaterThanOrEqual(1)
    expect(await run(terminal, 'echo alive')).toBe('alive')
    await terminal.close()
    const again = await world.open()
    expect(await run(again, 'echo a new terminal starts')).toBe('a new terminal starts')
    await again.close()
  })

  it('a memory hog is killed at the Memory limit (cgroup v1 here) and the world survives', async () => {
    const terminal = await world.open()
    expect(await run(terminal, 'cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes')).toBe('268435456\n268435456')
    expect(await run(terminal, 'python3 -c "b = b\'x\' * (512 << 20); print(\'survived\')"; echo "rc=$?"')).toBe('Killed\nrc=137')
    expect(await run(terminal, 'python3 -c "b = b\'x\' * (64 << 20); print(\'fits\')"')).toBe('fits')
    await terminal.close()
  })

  it('the network is unreachable under NetworkMode none: only lo, no routes', async () => {
    const terminal = await world.open()
    expect(await run(terminal, 'ls /sys/class/net')).toBe('lo')
    // No IPv4 route at all; IPv6 routes only through lo. (Files, not pipes: a pipeline's reader of fd 0 would look like a stdin wait.)
    expect(await run(terminal, 'grep -vc "^Iface" /proc/net/route; grep -vc " lo$" /proc/net/ipv6_route')).toBe('0\n0')
    await terminal.close()
  })

  it('no capability works: none held, chown and mount fail, even for root in the same container', async () => {
    const terminal = await world.open()
    expect(await run(terminal, 'grep -E "^(CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)" /proc/self/status')).toBe(
      'CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1',
    )
    expect(await run(terminal, 'chown agent /tmp')).toBe('chown: changing ownership of \'/tmp\': Operation not permitted')
    expect(await run(terminal, 'mount -t tmpfs none /mnt')).toBe('mount: /mnt: must be superuser to use mount.\n       dmesg(1) may have more information after failed mount system call.')
    await terminal.close()
    // uid 0 in the same container (a plain exec) holds nothing either: CapDrop ALL empties the bounding set.
    expect((await execIn(containerOf(world), ['sh', '-c', 'exec 2>&1; id -u; grep CapBnd /proc/self/status; chown 1000 /tmp; mount -t tmpfs none /mnt'], '0')).stdout).toBe(
      '0\nCapBnd:\t0000000000000000\nchown: changing ownership of \'/tmp\': Operation not permitted\nmount: /mnt: permission denied.\n       dmesg(1) may have more information after failed mount system call.\n',
    )
  })
})

describe('attached containers are inspected', () => {
  let workspace: ReturnType<typeof hostWorkspace>
  const cleanups: (() => Promise<void>)[] = []
  beforeAll(() => { workspace = hostWorkspace() })
  afterAll(async () => {
    for (const cleanup of cleanups) await cleanup()
    workspace?.remove()
  })

  it('a mode the container cannot enforce fails with SandboxUnavailableError before the shell starts', async () => {
    const plain = await startContainer({ HostConfig: { NetworkMode: 'none', Init: true } })
    cleanups.push(plain.remove)
    const world = await dockerWorld({ container: plain.id }, 'read-only', '/root')
    cleanups.unshift(() => world.dispose())
    const failure = await world.open().then(() => undefined, (error: unknown) => error)
    expect(failure).toBeInstanceOf(SandboxUnavailableError)
    expect((failure as Error).message.endsWith(`Runner failure: docker container ${plain.id.slice(0, 12)} does not enforce read-only for workspace /root: the root filesystem is writable (HostConfig.ReadonlyRootfs is off)`)).toBe(true)
    // Nothing but init, the container's command, the control channel and the pooled execs
    // (which run no program until handed one) ever ran: no bash.
    const table = (await execIn(plain.id, ['ps', '-ww', '-e', '-o', 'pid=,ppid=,comm=,args=', '--sort', 'pid'])).stdout
    expect(splitPooled(table).others, table).toEqual(['docker-init', 'sleep', 'sh', 'ps'])
    expect(logLines(world)).toEqual([`info: WARNING: sandbox mode read-only cannot be enforced in docker container ${plain.id.slice(0, 12)} (attached); terminals will fail closed: the root filesystem is writable (HostConfig.ReadonlyRootfs is off)`])
  })

  it('a hardened container enforces read-only; passed-in devices make it partial, and it says so', async () => {
    const hardened = await startContainer({
      User: '1000:1000',
      HostConfig: {
        ReadonlyRootfs: true,
        CapDrop: ['ALL'],
        SecurityOpt: ['no-new-privileges'],
        NetworkMode: 'none',
        Init: true,
        Tmpfs: { '/tmp': 'rw,size=16m' },
        Mounts: [{ Type: 'bind', Source: workspace.path, Target: '/workspace', ReadOnly: true }],
        Devices: [{ PathOnHost: '/dev/null', PathInContainer: '/dev/xnull', CgroupPermissions: 'rwm' }],
      },
    })
    cleanups.push(hardened.remove)
    const world = await dockerWorld({ container: hardened.id }, 'read-only')
    cleanups.unshift(() => world.dispose())
    const argv = ['/bin/bash']
    expect(world.ctx.sandbox.confine(argv, { mode: 'read-only', workspaceRoot: '/workspace' })).toEqual({
      argv, enforcement: 'partial', denialSignatures: ['Read-only file system', 'Permission denied'], runnerFailureRules: [],
    })
    const report = sandboxReportOf(world.ctx)!
    expect(report.modes[0]).toEqual({
      mode: 'read-only',
      available: true,
      enforcement: 'partial',
      mechanism: 'docker container (attached, inspected)',
      facts: [
        'read-only root filesystem',
        'capabilities: none (CapDrop ALL)',
        'no-new-privileges',
        'terminals run as uid 1000',
        `workspace /workspace: /workspace (read-only bind of ${workspace.path})`,
        'private writable tmpfs (ephemeral): /tmp, /dev/shm, /dev/mqueue',
        'network: none (lo only)',
      ],
      gaps: ['host devices are passed in (/dev/null -> /dev/xnull): a writable block device bypasses mount flags'],
    })
    const terminal = await world.open()
    expect(await run(terminal, 'cat hello.txt; echo no > hello.txt')).toBe('hello from the host\nbash: hello.txt: Read-only file system')
    await terminal.close()
  })
})

describe('danger-full-access', () => {
  it('runs unconfined and says so: a WARNING line, the report, a writable rootfs', async () => {
    const world = await dockerWorld({ image: IMAGE })
    try {
      const id = containerOf(world)
      expect(logLines(world)).toEqual([`info: WARNING: sandbox mode danger-full-access: terminals in docker container ${id} (managed) run UNCONFINED (no sandbox)`])
      expect(sandboxReportOf(world.ctx)!.modes.map(mode => [mode.mode, mode.available, mode.enforcement, mode.facts])).toEqual([
        ['read-only', false, 'unavailable', ['capabilities: AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, NET_RAW, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT', 'terminals run as uid 0', 'workspace /workspace: on the writable root filesystem', 'private writable tmpfs (ephemeral): /dev/shm, /dev/mqueue', 'network: none (lo only)']],
        ['workspace-write', false, 'unavailable', ['capabilities: AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, NET_RAW, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT', 'terminals run as uid 0', 'private writable tmpfs (ephemeral): /dev/shm, /dev/mqueue', 'network: none (lo only)']],
        ['danger-full-access', true, 'none', ['no sandbox: the shell runs unconfined in the container (writable rootfs)']],
      ])
      const terminal = await world.open({ cwd: '/root' })
      expect(await run(terminal, 'echo unconfined > /danger-probe && cat /danger-probe')).toBe('unconfined')
      await terminal.close()
    } finally {
      await world.dispose()
    }
  })
})

describe('composition', () => {
  it('a composition that fails after the managed container was created removes it', async () => {
    const workspace = hostWorkspace()
    try {
      const failure = await dockerWorld({ image: IMAGE, workspace: { bind: workspace.path } }, 'read-only', '/workspace', { rows: 0 }).then(() => undefined, (error: unknown) => error)
      expect((failure as Error).message).toBe('terminal-bash: rows must be a positive safe integer')
      const containers = await docker.listContainers({ all: true })
      expect(containers.filter(container => container.Mounts.some(mount => mount.Source === workspace.path))).toEqual([])
    } finally {
      workspace.remove()
    }
  })

  it('the runtime refuses workspace/limits for an attached container, and a root user under a confined mode', async () => {
    const attach = await dockerWorld({ container: 'whatever', workspace: { bind: '/tmp' } }, 'read-only').then(() => undefined, (error: unknown) => error)
    expect((attach as Error).message).toBe('invalid Docker world config: config: `workspace` and `limits` apply only to a managed container (`image`) created from a `policy`; an attached container is inspected as it is')
    const root = await dockerWorld({ image: IMAGE, user: 'root' }, 'read-only').then(() => undefined, (error: unknown) => error)
    expect((root as Error).message).toBe('sandbox mode read-only runs as a non-root user; refusing user "root"')
  })
})
