/**
 * The pure policy -> create-options mapping and the pure container inspector. Exact values:
 * these are the contract a managed world is created from and an attached one is judged by.
 */
import { chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from '@deepseek-ai/cordis'
import { afterAll, describe, expect, it } from 'vitest'
import type Docker from 'dockerode'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { InvalidArgumentError } from '../../src/providers/remote/errors.ts'
import { DEFAULT_DOCKER_LIMITS, DEFAULT_SANDBOX_USER, dockerCreateOptions, judgeWorkspaceFolder, mergeCreateOptions } from '../../src/sandbox/docker-policy.ts'
import { assessDockerMode, boundingCaps, type DockerSandboxFacts } from '../../src/sandbox/docker-inspect.ts'

const HARDENING = {
  CapDrop: ['ALL'],
  SecurityOpt: ['no-new-privileges:true'],
  NetworkMode: 'none',
  Init: true,
  PidsLimit: 512,
  Memory: 2 * 1024 ** 3,
  MemorySwap: 2 * 1024 ** 3,
  NanoCpus: 2_000_000_000,
}

describe('dockerCreateOptions', () => {
  it('documents its defaults', () => {
    expect(DEFAULT_DOCKER_LIMITS).toEqual({ pidsLimit: 512, memoryBytes: 2147483648, nanoCpus: 2000000000, tmpBytes: 268435456 })
    expect(DEFAULT_SANDBOX_USER).toBe('1000:1000')
  })

  it('read-only: read-only rootfs, read-only workspace bind, private /tmp, hardening and default limits', () => {
    expect(dockerCreateOptions({ mode: 'read-only', workspaceRoot: '/workspace', workspace: { bind: '/srv/project' } })).toEqual({
      User: '1000:1000',
      Labels: { 'dsh-remote-worlds.sandbox-mode': 'read-only' },
      HostConfig: {
        ReadonlyRootfs: true,
        Mounts: [{ Type: 'bind', Source: '/srv/project', Target: '/workspace', ReadOnly: true }],
        Tmpfs: { '/tmp': 'rw,exec,nosuid,nodev,size=268435456,mode=1777' },
        ...HARDENING,
      },
    })
  })

  it('workspace-write: the same with a read-write workspace; a named volume; configured limits and user', () => {
    expect(dockerCreateOptions({
      mode: 'workspace-write',
      workspaceRoot: '/work',
      workspace: { volume: 'proj-data' },
      user: 'agent',
      limits: { pidsLimit: 64, memoryBytes: 256 * 1024 ** 2, nanoCpus: 500_000_000, tmpBytes: 1024 ** 2 },
    })).toEqual({
      User: 'agent',
      Labels: { 'dsh-remote-worlds.sandbox-mode': 'workspace-write' },
      HostConfig: {
        ReadonlyRootfs: true,
        Mounts: [{ Type: 'volume', Source: 'proj-data', Target: '/work', ReadOnly: false }],
        Tmpfs: { '/tmp': 'rw,exec,nosuid,nodev,size=1048576,mode=1777' },
        ...HARDENING,
        PidsLimit: 64,
        Memory: 268435456,
        MemorySwap: 268435456,
        NanoCpus: 500000000,
      },
    })
  })

  it('read-only without a workspace source mounts nothing (the image path stays under the read-only rootfs)', () => {
    expect(dockerCreateOptions({ mode: 'read-only', workspaceRoot: '/root' }).HostConfig?.Mounts).toEqual([])
  })

  it('danger-full-access: writable rootfs, no hardening, the image user, only explicit limits', () => {
    expect(dockerCreateOptions({ mode: 'danger-full-access', workspaceRoot: '/workspace', workspace: { bind: '/srv/p' }, user: 'agent' })).toEqual({
      Labels: { 'dsh-remote-worlds.sandbox-mode': 'danger-full-access' },
      HostConfig: { Init: true, ReadonlyRootfs: false, Mounts: [{ Type: 'bind', Source: '/srv/p', Target: '/workspace', ReadOnly: false }] },
    })
    expect(dockerCreateOptions({ mode: 'danger-full-access', workspaceRoot: '/w', limits: { pidsLimit: 100 } })).toEqual({
      Labels: { 'dsh-remote-worlds.sandbox-mode': 'danger-full-access' },
      HostConfig: { Init: true, ReadonlyRootfs: false, PidsLimit: 100 },
    })
  })

  it('refuses what it cannot enforce or express', () => {
    const cases: [Parameters<typeof dockerCreateOptions>[0], string][] = [
      [{ mode: 'workspace-write', workspaceRoot: '/workspace' }, 'workspace-write needs a workspace source (a host folder to bind, or a named volume)'],
      [{ mode: 'read-only', workspaceRoot: '/w', user: 'root' }, 'sandbox mode read-only runs as a non-root user; refusing user "root"'],
      [{ mode: 'workspace-write', workspaceRoot: '/w', workspace: { bind: '/x' }, user: '0:0' }, 'sandbox mode workspace-write runs as a non-root user; refusing user "0:0"'],
      [{ mode: 'read-only', workspaceRoot: 'relative' }, 'workspace root must be an absolute path inside the container, got "relative"'],
      [{ mode: 'read-only', workspaceRoot: '/w', workspace: { bind: 'rel/dir' } }, 'workspace bind source must be an absolute host path, got "rel/dir"'],
      [{ mode: 'read-only', workspaceRoot: '/w', workspace: { volume: 'bad/name' } }, 'invalid Docker volume name "bad/name"'],
      [{ mode: 'read-only', workspaceRoot: '/w', limits: { pidsLimit: 0 } }, 'sandbox limit pidsLimit must be a positive integer, got 0'],
    ]
    for (const [spec, message] of cases) {
      let caught: unknown
      try { dockerCreateOptions(spec) } catch (error) { caught = error }
      expect(caught).toBeInstanceOf(InvalidArgumentError)
      expect((caught as Error).message).toBe(message)
    }
  })

  it('merges overrides one level deep into HostConfig and Labels', () => {
    const base = dockerCreateOptions({ mode: 'read-only', workspaceRoot: '/w' })
    const merged = mergeCreateOptions(base, { Env: ['A=1'], Labels: { x: 'y' }, HostConfig: { PidsLimit: 7 } })
    expect(merged.Env).toEqual(['A=1'])
    expect(merged.Labels).toEqual({ 'dsh-remote-worlds.sandbox-mode': 'read-only', x: 'y' })
    expect(merged.HostConfig).toEqual({ ...base.HostConfig, PidsLimit: 7 })
  })
})

type Mount = Docker.ContainerInspectInfo['Mounts'][number]

function facts(hostConfig: Docker.HostConfig, mounts: Mount[], execUid: number | undefined = 1000): DockerSandboxFacts {
  return { info: { HostConfig: hostConfig, Mounts: mounts, Config: { User: '1000:1000' } }, execUid }
}

const bind = (source: string, destination: string, rw: boolean, propagation = 'rprivate'): Mount =>
  ({ Type: 'bind', Source: source, Destination: destination, Mode: rw ? '' : 'ro', RW: rw, Propagation: propagation })

const HARDENED: Docker.HostConfig = { ReadonlyRootfs: true, CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges:true'], Tmpfs: { '/tmp': 'rw,size=1m' }, NetworkMode: 'none' }

describe('assessDockerMode', () => {
  it('a policy-made read-only container enforces read-only fully, and not workspace-write', () => {
    const f = facts(HARDENED, [bind('/h/ws', '/workspace', false)])
    expect(assessDockerMode(f, 'read-only', '/workspace')).toEqual({
      mode: 'read-only',
      enforced: true,
      enforcement: 'full',
      facts: [
        'read-only root filesystem',
        'capabilities: none (CapDrop ALL)',
        'no-new-privileges',
        'terminals run as uid 1000',
        'workspace /workspace: /workspace (read-only bind of /h/ws)',
        'private writable tmpfs (ephemeral): /tmp, /dev/shm, /dev/mqueue',
        'network: none (lo only)',
      ],
      gaps: [],
    })
    expect(assessDockerMode(f, 'workspace-write', '/workspace')).toEqual({
      mode: 'workspace-write',
      enforced: false,
      facts: ['read-only root filesystem', 'capabilities: none (CapDrop ALL)', 'no-new-privileges', 'terminals run as uid 1000', 'private writable tmpfs (ephemeral): /tmp, /dev/shm, /dev/mqueue', 'network: none (lo only)'],
      reasons: ['the workspace /workspace is not writable: it lies in /workspace (read-only bind of /h/ws)'],
    })
  })

  it('a container with a network of its own enforces a mode only partly, saying so (a confined world keeps lo only where NetworkMode is none)', () => {
    const verdict = assessDockerMode(facts({ ...HARDENED, NetworkMode: 'host' }, [bind('/h/ws', '/workspace', false)]), 'read-only', '/workspace')
    expect(verdict.enforced && verdict.enforcement).toBe('partial')
    expect(verdict.enforced ? verdict.gaps : []).toEqual(['the container has a network (NetworkMode host): its programs reach what that network reaches (a confined world keeps lo only where NetworkMode is none)'])
    const bridged = assessDockerMode(facts({ ...HARDENED, NetworkMode: undefined }, [bind('/h/ws', '/workspace', false)]), 'read-only', '/workspace')
    expect(bridged.enforced ? bridged.gaps : []).toEqual(['the container has a network (NetworkMode default): its programs reach what that network reaches (a confined world keeps lo only where NetworkMode is none)'])
  })

  it('a policy-made workspace-write container enforces workspace-write fully, and not read-only', () => {
    const f = facts(HARDENED, [bind('/h/ws', '/workspace', true), bind('/h/cache', '/workspace/.cache', true)])
    const write = assessDockerMode(f, 'workspace-write', '/workspace/')
    expect(write.enforced && write.enforcement).toBe('full')
    const read = assessDockerMode(f, 'read-only', '/workspace')
    expect(read.enforced ? [] : read.reasons).toEqual([
      'writable mount /workspace (read-write bind of /h/ws): read-only allows no persistent writes',
      'writable mount /workspace/.cache (read-write bind of /h/cache): read-only allows no persistent writes',
    ])
  })

  it('fails closed on a writable rootfs, writable mounts outside the workspace, engine sockets, privilege, host pids, defeating caps', () => {
    const f = facts({ ReadonlyRootfs: false, Privileged: true, PidMode: 'host' }, [
      bind('/h/ws', '/workspace', true),
      bind('/h/data', '/data', true),
      bind('/var/run/docker.sock', '/var/run/docker.sock', false),
    ], 0)
    const verdict = assessDockerMode(f, 'workspace-write', '/workspace')
    expect(verdict.enforced ? [] : verdict.reasons).toEqual([
      'the root filesystem is writable (HostConfig.ReadonlyRootfs is off)',
      'the container is privileged (every capability and device; mounts can be remounted writable)',
      'the container shares the host pid namespace (PidMode host): host processes\' /proc/PID/root reaches host files',
      '/var/run/docker.sock (read-only bind of /var/run/docker.sock) may hand the shell a container-engine socket (it could start an unconfined container)',
      'writable mount outside the workspace /workspace: /data (read-write bind of /h/data)',
    ])
    const caps = assessDockerMode(facts({ ReadonlyRootfs: true, CapAdd: ['CAP_SYS_ADMIN'] }, [], 1000), 'read-only', '/w')
    expect(caps.enforced ? [] : caps.reasons).toEqual([
      'capabilities SYS_ADMIN are in the bounding set and setuid programs can make the terminals\' user root (no no-new-privileges): mount flags can be defeated',
    ])
    // The same capability cannot be held by a non-root user under no-new-privileges.
    expect(assessDockerMode(facts({ ReadonlyRootfs: true, CapAdd: ['SYS_ADMIN'], SecurityOpt: ['no-new-privileges'] }, [], 1000), 'read-only', '/w').enforced).toBe(true)
  })

  it('read-only refuses a workspace on a writable tmpfs', () => {
    const verdict = assessDockerMode(facts(HARDENED, []), 'read-only', '/tmp/ws')
    expect(verdict.enforced ? [] : verdict.reasons).toEqual(['the workspace /tmp/ws is on or contains a writable tmpfs: /tmp (read-write private tmpfs)'])
  })

  it('reports partial enforcement truthfully: passed-in devices, shared propagation', () => {
    const f = facts({ ...HARDENED, Devices: [{ PathOnHost: '/dev/null', PathInContainer: '/dev/xnull', CgroupPermissions: 'rwm' }] }, [bind('/h/ro', '/opt/ro', false, 'rshared')])
    expect(assessDockerMode(f, 'read-only', '/opt/ro')).toMatchObject({
      enforced: true,
      enforcement: 'partial',
      gaps: [
        'host devices are passed in (/dev/null -> /dev/xnull): a writable block device bypasses mount flags',
        '/opt/ro (read-only bind of /h/ro) uses rshared propagation: mounts the host adds under it later appear inside with their own flags',
      ],
    })
  })

  it('computes the bounding set the way Docker does', () => {
    expect(boundingCaps({ CapDrop: ['ALL'] })).toEqual([])
    expect(boundingCaps({ CapDrop: ['ALL'], CapAdd: ['CAP_CHOWN'] })).toEqual(['CHOWN'])
    expect(boundingCaps({ CapDrop: ['MKNOD', 'NET_RAW'] })).toEqual(['AUDIT_WRITE', 'CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'NET_BIND_SERVICE', 'SETFCAP', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_CHROOT'])
    expect(boundingCaps({ Privileged: true })).toEqual(['ALL'])
  })
})

describe('a managed container\'s host-folder workspace (judgeWorkspaceFolder, and the runtime that uses it)', () => {
  const base = mkdtempSync(join(tmpdir(), 'dsh-ws-judge-'))
  const owned = join(base, 'owned')
  const rootOwned = join(base, 'root-owned')
  const file = join(base, 'file')
  mkdirSync(owned)
  chownSync(owned, 1234, 4321)
  mkdirSync(rootOwned)
  writeFileSync(file, '')
  afterAll(() => rmSync(base, { recursive: true, force: true }))

  it('names the folder\'s owner, a root-owned folder, a file and a missing path', () => {
    expect(judgeWorkspaceFolder(owned)).toEqual({ kind: 'owner', user: '1234:4321' })
    expect(judgeWorkspaceFolder(rootOwned)).toEqual({ kind: 'root-owned' })
    expect(judgeWorkspaceFolder(file)).toEqual({ kind: 'not-a-folder' })
    expect(judgeWorkspaceFolder(join(base, 'missing'))).toEqual({ kind: 'missing' })
  })

  it('the runtime refuses what could not work, before any container exists, with the fix named', () => {
    const runtime = (bind: string, mode: 'read-only' | 'workspace-write') => () => new DockerSubprocessRuntime(new Context(), { image: 'any', policy: { mode, workspaceRoot: '/workspace' }, workspace: { bind } })
    expect(runtime(rootOwned, 'workspace-write')).toThrow(`workspace.bind ${rootOwned} is owned by root, and confined shells never run as root, so workspace-write could write nothing there: give the folder to the user who should write there (e.g. chown 1000:1000), or configure \`user\` (UID:GID) of a user that may write it`)
    expect(runtime(join(base, 'missing'), 'read-only')).toThrow(`workspace.bind ${join(base, 'missing')}: no such host folder`)
    expect(runtime(file, 'read-only')).toThrow(`workspace.bind ${file}: not a folder`)
    // Read-only needs no writer: a root-owned folder is fine there.
    expect(runtime(rootOwned, 'read-only')).not.toThrow()
  })
})
