/**
 * The swarm world's pure parts, with exact values: the service spec a policy maps to (and what
 * it refuses to drop), the engine endpoints it accepts, and the refusal of a confined mode when
 * the task did not prove what a 1.41 service cannot ask for. The live checks of the same are in
 * test/swarm/ (a real cluster).
 */
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import { InvalidArgumentError } from '../../src/providers/remote/errors.ts'
import { dockerOptions } from '../../src/providers/swarm/endpoints.ts'
import { LIFELINE_ENTRYPOINT, LIFELINE_EXEC, isLifelineExec } from '../../src/providers/swarm/lifeline.ts'
import { SwarmSandboxProvider, judgedInspect, unprovenConfinement } from '../../src/providers/swarm/sandbox.ts'
import { serviceSpec } from '../../src/providers/swarm/service-spec.ts'
import type { TaskFacts } from '../../src/providers/swarm/task-facts.ts'
import { dockerCreateOptions } from '../../src/sandbox/docker-policy.ts'
import type Docker from 'dockerode'

const OWNER = '0123456789abcdef0123456789abcdef'
const IMAGE = `sha256:${'a'.repeat(64)}`

describe('serviceSpec', () => {
  it('maps the read-only policy: read-only root, no capabilities, init, user, mounts, limits, an exec tmpfs /tmp as a local tmpfs volume', () => {
    const create = dockerCreateOptions({ mode: 'read-only', workspaceRoot: '/workspace', workspace: { bind: '/srv/project' }, limits: { pidsLimit: 64 } })
    const plan = serviceSpec({ name: 'dsh-world-000000000001', image: IMAGE, owner: OWNER, create, reservations: { memoryBytes: 1 << 30 }, placement: { constraints: ['node.labels.zone==a'], preferences: ['spread=node.labels.rack'] } })
    expect(plan.scratch).toEqual([{ name: 'dsh-world-000000000001-tmp', target: '/tmp' }])
    expect(plan.spec).toEqual({
      Name: 'dsh-world-000000000001',
      Labels: { 'dsh-remote-worlds.swarm-owner': OWNER },
      TaskTemplate: {
        ContainerSpec: {
          Image: IMAGE,
          Labels: { 'dsh-remote-worlds.sandbox-mode': 'read-only', 'dsh-remote-worlds.swarm-owner': OWNER },
          Command: [...LIFELINE_ENTRYPOINT],
          Args: [],
          Hostname: '{{.Node.Hostname}}',
          StopGracePeriod: 1_000_000_000,
          User: '1000:1000',
          ReadOnly: true,
          Init: true,
          CapabilityDrop: ['ALL'],
          Mounts: [
            { Type: 'bind', Source: '/srv/project', Target: '/workspace', ReadOnly: true },
            {
              Type: 'volume',
              Source: 'dsh-world-000000000001-tmp',
              Target: '/tmp',
              ReadOnly: false,
              VolumeOptions: {
                Labels: { 'dsh-remote-worlds.swarm-owner': OWNER, 'dsh-remote-worlds.swarm-service': 'dsh-world-000000000001' },
                DriverConfig: { Name: 'local', Options: { type: 'tmpfs', device: 'tmpfs', o: 'rw,exec,nosuid,nodev,size=268435456,mode=1777' } },
              },
            },
          ],
        },
        Resources: { Limits: { Pids: 64, MemoryBytes: 2147483648, NanoCPUs: 2000000000 }, Reservations: { MemoryBytes: 1073741824 } },
        RestartPolicy: { Condition: 'none', MaxAttempts: 0 },
        Placement: { Constraints: ['node.labels.zone==a'], Preferences: [{ Spread: { SpreadDescriptor: 'node.labels.rack' } }] },
      },
      Mode: { Replicated: { Replicas: 1 } },
    })
  })

  it('danger-full-access: a writable root, init, the image\'s user, no tmpfs; network host only when asked', () => {
    const create = dockerCreateOptions({ mode: 'danger-full-access', workspaceRoot: '/root' })
    const plan = serviceSpec({ name: 'dsh-world-000000000002', image: IMAGE, owner: OWNER, create, network: 'host' })
    expect(plan.scratch).toEqual([])
    expect(plan.spec.TaskTemplate).toMatchObject({ ContainerSpec: { ReadOnly: false, Init: true }, Networks: [{ Target: 'host' }], Resources: { Limits: {}, Reservations: {} } })
    expect((plan.spec.TaskTemplate as { ContainerSpec: { User?: string } }).ContainerSpec.User).toBeUndefined()
  })

  it('refuses what a 1.41 service cannot express, naming it, and host networking under a confined mode', () => {
    const base = { name: 'dsh-world-000000000003', image: IMAGE, owner: OWNER }
    expect(() => serviceSpec({ ...base, create: { HostConfig: { Privileged: true, Devices: [] } } })).toThrow(new InvalidArgumentError('a swarm service (Engine API 1.41) cannot express HostConfig Privileged, Devices: drop it from the world\'s create options'))
    expect(() => serviceSpec({ ...base, create: { HostConfig: { SecurityOpt: ['seccomp=unconfined'] } } })).toThrow(new InvalidArgumentError('a swarm service cannot express the security option "seccomp=unconfined"'))
    expect(() => serviceSpec({ ...base, create: { HostConfig: { NetworkMode: 'bridge' } } })).toThrow(InvalidArgumentError)
    expect(() => serviceSpec({ ...base, create: { HostConfig: { Memory: 1 << 30, MemorySwap: 2 << 30 } } })).toThrow(new InvalidArgumentError(`a swarm service cannot set MemorySwap (${2 << 30}) apart from its memory limit`))
    expect(() => serviceSpec({ ...base, create: dockerCreateOptions({ mode: 'read-only', workspaceRoot: '/w' }), network: 'host' })).toThrow(new InvalidArgumentError('network host shares the node\'s network with the world: only danger-full-access may use it, a confined mode runs without a network'))
    expect(() => serviceSpec({ ...base, create: {}, placement: { preferences: ['binpack'] } })).toThrow(new InvalidArgumentError('placement preference "binpack": swarm has one kind, spread=DESCRIPTOR (e.g. spread=node.labels.zone)'))
  })
})

describe('the lifeline', () => {
  it('is pid 1\'s FIFO read and one exec holding it, known by its command', () => {
    expect(LIFELINE_ENTRYPOINT).toEqual(['/bin/sh', '-c', 'mkfifo -m 600 /dev/shm/dsh-world-lifeline && exec </dev/shm/dsh-world-lifeline && while read -r _; do :; done'])
    expect(isLifelineExec({ entrypoint: LIFELINE_EXEC[0], arguments: LIFELINE_EXEC.slice(1) })).toBe(true)
    expect(isLifelineExec({ entrypoint: '/bin/sh', arguments: ['-c', 'exec 3>/dev/shm/dsh-world-lifeline'] })).toBe(false)
    expect(isLifelineExec(undefined)).toBe(false)
  })
})

describe('engine endpoints', () => {
  it('a unix socket, an ssh host; tcp only with TLS', () => {
    expect(dockerOptions({ host: 'unix:///run/dsh-swarm/1.sock' })).toEqual({ socketPath: '/run/dsh-swarm/1.sock' })
    expect(dockerOptions({ host: 'ssh://ops@node-2:2222' })).toMatchObject({ protocol: 'ssh', host: 'node-2', port: 2222, username: 'ops', sshOptions: { keepaliveInterval: 1000, keepaliveCountMax: 3 } })
    expect(() => dockerOptions({ host: 'tcp://node-2:2375' })).toThrow(new InvalidArgumentError('engine endpoint tcp://node-2:2375: a tcp endpoint needs tls ({ ca, cert, key } PEM files, as docker --tlsverify): the engine\'s API is root on its node and is never used in clear text'))
    expect(() => dockerOptions({ host: 'tcp://node-2:2376', tls: { ca: '/nonexistent/ca.pem', cert: '/nonexistent/cert.pem', key: '/nonexistent/key.pem' } })).toThrow(/^engine endpoint tcp:\/\/node-2:2376: cannot read its TLS CA \/nonexistent\/ca.pem: ENOENT/)
    expect(() => dockerOptions({ host: 'unix://relative.sock' })).toThrow(InvalidArgumentError)
    expect(() => dockerOptions({ host: 'http://node-2' })).toThrow(new InvalidArgumentError('engine endpoint http://node-2: use unix:///PATH, tcp://HOST:PORT (with tls) or ssh://USER@HOST[:PORT]'))
  })
})

describe('a task that did not prove what its service could not ask for', () => {
  const proven: TaskFacts = { noNewPrivileges: true, interfaces: ['lo'], scratch: [{ name: 'w-tmp', target: '/tmp', tmpfs: true }] }
  const unproven: TaskFacts = { noNewPrivileges: false, interfaces: ['lo', 'eth0'], scratch: [{ name: 'w-tmp', target: '/tmp', tmpfs: false }] }
  // What a read-only task's container inspect looks like (the fields the judge reads).
  const info = {
    HostConfig: { ReadonlyRootfs: true, CapDrop: ['ALL'], Init: true, PidsLimit: 512, Memory: 2147483648, NanoCpus: 2000000000, NetworkMode: 'default' },
    Mounts: [{ Type: 'volume', Name: 'w-tmp', Source: '/var/lib/docker/volumes/w-tmp/_data', Destination: '/tmp', Driver: 'local', Mode: 'z', RW: true, Propagation: '' }],
    Config: { User: '1000:1000' },
  } as unknown as Docker.ContainerInspectInfo

  it('names each missing proof', () => {
    expect(unprovenConfinement(proven)).toEqual([])
    expect(unprovenConfinement(unproven)).toEqual([
      'no-new-privileges is not in force in the task (NoNewPrivs is not 1 in /proc/self/status): a swarm service cannot ask for it (Engine API 1.41), so the node\'s dockerd must run with --no-new-privileges',
      'the task has network interfaces besides lo (eth0): a swarm service cannot ask for network none (Engine API 1.41), so the node\'s dockerd must run without a default bridge (--bridge=none), where a task without networks has lo only',
      'the scratch volume w-tmp at /tmp is not a tmpfs of the local driver on the node',
    ])
  })

  it('the judge sees a confirmed scratch volume as the private tmpfs it is, and only then', () => {
    expect(judgedInspect(info, proven).Mounts).toEqual([{ Type: 'tmpfs', Name: undefined, Source: '', Destination: '/tmp', Driver: 'local', Mode: 'z', RW: true, Propagation: '' }])
    expect(judgedInspect(info, unproven).Mounts).toEqual(info.Mounts)
  })

  it('confine() refuses a confined mode with the reasons and the fix; a proven task enforces it in full', async () => {
    const provider = (facts: TaskFacts): SwarmSandboxProvider => new SwarmSandboxProvider(new Context(), {
      info: judgedInspect(info, facts),
      execUid: 1000,
      where: 'swarm service w on node n',
      managed: true,
      workspaceRoot: '/workspace',
      task: facts,
      wording: { kind: 'swarm task', mechanism: 'swarm service', fix: 'Run the swarm\'s node engines with --no-new-privileges and --bridge=none (docs/swarm.md), so a task proves both' },
    })
    const policy = { mode: 'read-only', workspaceRoot: '/workspace' } as never
    expect(provider(proven).confine(['bash'], policy)).toMatchObject({ argv: ['bash'], enforcement: 'full' })
    const reasons = ['writable mount /tmp (read-write volume w-tmp): read-only allows no persistent writes', ...unprovenConfinement(unproven)]
    expect(() => provider(unproven).confine(['bash'], policy)).toThrow(`sandbox mode "read-only" is requested but swarm service w on node n cannot enforce it; refusing to run the command unconfined. Run the swarm's node engines with --no-new-privileges and --bridge=none (docs/swarm.md), so a task proves both, or switch the consumer to danger-full-access. Runner failure: swarm service w on node n does not enforce read-only for workspace /workspace: ${reasons.join('; ')}`)
    expect(provider(unproven).report().modes.map(mode => [mode.mode, mode.available])).toEqual([['read-only', false], ['workspace-write', false], ['danger-full-access', true]])
    expect(provider(proven).report().limits).toEqual({ pidsLimit: 512, memoryBytes: 2147483648, nanoCpus: 2000000000, networkMode: 'none' })
    expect(provider(unproven).report().limits?.networkMode).toBe('default (lo, eth0)')
  })
})
