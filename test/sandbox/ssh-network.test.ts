/**
 * The SSH world's network under bubblewrap (issue 34, item 1): every confined profile has a
 * network namespace of its own (`--unshare-net`), so a confined shell, what it starts and the
 * confined file server see `lo` and nothing else, and neither a TCP port of the host's loopback
 * (a server this test listens with on 127.0.0.1, the world's sshd) nor an abstract unix socket
 * of the host (which belongs to a network namespace) can be reached; danger-full-access reaches
 * both. A host whose bubblewrap makes user namespaces but no network namespace refuses the
 * confined modes, saying why. Real OpenSSH sshd in a container on the host network (loopback
 * only), real bubblewrap, no mocks.
 *
 * Never sends traffic anywhere but 127.0.0.1 (DESIGN.md section 7).
 */
import { createConnection, createServer, type Server } from 'node:net'
import { SandboxUnavailableError } from '@deepseek-ai/dsh-sandbox'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld, type RemoteWorld } from '../../src/backend/world.ts'
import { networkCheck } from '../../src/cli/doctor-network.ts'
import type { WorldNetworkOptions } from '../../src/network/world-network.ts'
import { RemoteSubprocessRuntime } from '../../src/providers/remote/runtime.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { parseBwrapProbe } from '../../src/sandbox/bwrap.ts'
import { sandboxReportOf } from '../../src/sandbox/companion.ts'
import { BWRAP_CAPABLE, type SshdWorld, startSshdWorld } from '../helpers/sshd-world.ts'
import { run } from './helpers.ts'

/** Workspace root on the SSH hosts (absent on the test machine, so no local realpath applies). */
const WORKSPACE = '/dsh-ws'

/** The abstract unix socket a host service of the user listens on (unix(7): a leading NUL). */
const ABSTRACT = 'dsh-network-test'

/**
 * What a shell command prints for the interfaces of its network namespace (proc(5): `NAME:` rows;
 * the profile's own /proc follows the reader's namespace). Not /sys/class/net: the profile binds
 * the host's sysfs read-only, which lists the interfaces of the namespace that mounted it.
 */
const INTERFACES = String.raw`sed -n 's/^ *\([^:]*\):.*/\1/p' /proc/net/dev`

/** bash's own TCP connect to the host's 127.0.0.1:PORT, reading what the server greets with. */
const connect = (port: number): string => `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && head -c 5 <&3' 2>&1; echo " exit=$?"`

/** A connect to the abstract socket, in the world's python3: `connected` or the exception's name. */
const ABSTRACT_CONNECT = `python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect("\\0${ABSTRACT}"); print("connected")' 2>&1 | tail -n 1`

/**
 * A seccomp profile (Docker's format) that refuses new network namespaces only: clone(2) and
 * unshare(2) with CLONE_NEWNET (0x40000000) fail with EPERM, clone3(2) is not there (ENOSYS:
 * glibc falls back to clone, whose flags a filter can read). User, mount and pid namespaces work.
 */
const NO_NETNS_SECCOMP = JSON.stringify({
  defaultAction: 'SCMP_ACT_ALLOW',
  syscalls: [
    { names: ['clone', 'unshare'], action: 'SCMP_ACT_ERRNO', errnoRet: 1, args: [{ index: 0, value: 0x40000000, valueTwo: 0x40000000, op: 'SCMP_CMP_MASKED_EQ' }] },
    { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: 38 },
  ],
})

type Mode = 'read-only' | 'workspace-write' | 'danger-full-access'

/** Filesystem sockets of services outside the fence, and the user each listens as (see beforeAll). */
const FILE_SOCKETS = [['/run/postgresql/.s.PGSQL.5432', 'root'], ['/home/agent/.ssh/cm.sock', 'agent']] as const

/** A connect to a filesystem socket, in the world's python3: `connected` or the exception's name. */
const fileConnect = (path: string): string => `python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect("${path}"); print("connected")' 2>&1 | tail -n 1`

let capable: SshdWorld
let noNetns: SshdWorld
/** A server of this test on the test machine's 127.0.0.1 (the sshd world shares its network). */
let server: Server
let port: number

function sshWorld(host: SshdWorld, mode: Mode, network?: WorldNetworkOptions): Promise<RemoteWorld> {
  return openWorld({
    ...(network !== undefined ? { network } : {}),
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `agent@127.0.0.1:${host.ports[0]}`, identity: host.clientKeyFile, knownHosts: host.knownHostsFile, sshConfig: false, agent: false },
    workspaceRoot: WORKSPACE,
    mode,
  })
}

/** As root on the host, outside any fence. */
async function onHost(host: SshdWorld, script: string): Promise<string> {
  const result = await host.exec(['sh', '-c', script])
  expect(result.exitCode).toBe(0)
  return result.stdout
}

beforeAll(async () => {
  server = createServer(socket => socket.end('hello'))
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  port = (server.address() as { port: number }).port
  ;[capable, noNetns] = await Promise.all([
    startSshdWorld([{}], { hostConfig: BWRAP_CAPABLE }),
    startSshdWorld([{}], { hostConfig: { ...BWRAP_CAPABLE, SecurityOpt: [`seccomp=${NO_NETNS_SECCOMP}`] } }),
  ])
  for (const host of [capable, noNetns]) await onHost(host, `mkdir -p ${WORKSPACE} && chown agent:agent ${WORKSPACE}`)
  // A service of the user on an abstract socket, outside any fence, that answers each connection.
  const listen = `import socket\ns = socket.socket(socket.AF_UNIX)\ns.bind("\\0${ABSTRACT}")\ns.listen()\nwhile True: s.accept()[0].close()`
  await onHost(capable, `(runuser -u agent -- python3 -c '${listen}' >/dev/null 2>&1 &) && for i in $(seq 100); do grep -q '@${ABSTRACT}$' /proc/net/unix && break; sleep 0.05; done; grep -q '@${ABSTRACT}$' /proc/net/unix`)
  // Services on the host's filesystem sockets, reachable by anyone outside the fence: a database
  // of the host in /run (mode 0777, as PostgreSQL makes its socket), and an OpenSSH ControlMaster
  // of the user in ~/.ssh (which would run commands on the host unconfined).
  for (const [path, user] of FILE_SOCKETS) {
    const serve = `import os, socket\ns = socket.socket(socket.AF_UNIX)\ns.bind("${path}")\nos.chmod("${path}", 0o777)\ns.listen()\nwhile True: s.accept()[0].close()`
    await onHost(capable, `mkdir -p "$(dirname ${path})" && chown ${user} "$(dirname ${path})" && (runuser -u ${user} -- python3 -c '${serve}' >/dev/null 2>&1 &) && for i in $(seq 100); do [ -S ${path} ] && break; sleep 0.05; done; [ -S ${path} ]`)
  }
}, 180_000)

afterAll(async () => {
  await Promise.all([capable?.stop(), noNetns?.stop()])
  await new Promise<void>(resolve => server === undefined ? resolve() : server.close(() => resolve()))
})

describe.each(['read-only', 'workspace-write'] as const)('%s over SSH: the confined world has lo only', mode => {
  let world: RemoteWorld
  beforeAll(async () => { world = await sshWorld(capable, mode) })
  afterAll(async () => { await world?.dispose() })

  it('the shell and what it starts see lo only; the host\'s loopback ports and abstract sockets are refused', async () => {
    expect(world.ctx.sandbox.confine(['/bin/true'], { mode, workspaceRoot: WORKSPACE }).argv).toContain('--unshare-net')
    const terminal = await world.open()
    expect(await run(terminal, INTERFACES)).toBe('lo')
    // A program the shell starts, in the background, is in the same namespace.
    expect(await run(terminal, `(${INTERFACES} > /tmp/ifs &); wait; sleep 0.2; cat /tmp/ifs`)).toBe('lo')
    const refused = (target: number): string => `bash: connect: Connection refused\nbash: line 1: /dev/tcp/127.0.0.1/${target}: Connection refused\n exit=1`
    expect(await run(terminal, connect(port))).toBe(refused(port))
    expect(await run(terminal, connect(capable.ports[0]!))).toBe(refused(capable.ports[0]!))
    expect(await run(terminal, ABSTRACT_CONNECT)).toBe('ConnectionRefusedError: [Errno 111] Connection refused')
    // The host's and the user's service sockets are hidden (--tmpfs /run, --tmpfs ~/.ssh).
    for (const [path] of FILE_SOCKETS) expect(await run(terminal, fileConnect(path))).toBe('FileNotFoundError: [Errno 2] No such file or directory')
    // Its own loopback works: a server it starts is reached from the same shell.
    expect(await run(terminal, `(python3 -c 'import socket; socket.create_server(("127.0.0.1", 8765)).accept()[0].send(b"inner")' &); sleep 0.5`)).toBe('')
    expect(await run(terminal, connect(8765))).toBe('inner exit=0')
    await terminal.close()
  })

  it('the confined file server reads /proc/net/dev of its own namespace: lo only', async () => {
    const text = await world.fs!.readText(await world.fs!.resolve('/proc/self/net/dev'))
    expect(text.split('\n').filter(line => line.includes(':')).map(line => line.split(':')[0]!.trim())).toEqual(['lo'])
  })

  it('doctor\'s network check proves lo only and no name lookup, from inside the fence', async () => {
    expect(await networkCheck(world, WORKSPACE)).toEqual({ name: 'network', ok: true, detail: 'none: interfaces: lo; a name lookup finds nothing' })
  })

  it('refuses ports into a world opened without them (each program has its own namespace), saying how to name them', async () => {
    await expect(world.network.forward('0:8765')).rejects.toThrow(`${world.runtime instanceof RemoteSubprocessRuntime ? world.runtime.describe() : ''} confines each program in a network namespace of its own (bubblewrap --unshare-net), so a port carried from this machine reaches none of them; name the ports when the world opens (--forward), or use danger-full-access`)
  })

  it('the sandbox report says the network is lo only', () => {
    expect(sandboxReportOf(world.ctx)?.modes.find(entry => entry.mode === mode)?.facts).toContain('network: lo only (--unshare-net, proven when the world opened): the host\'s loopback (its sshd, any service on 127.0.0.1) and abstract unix sockets are out of reach; each confined program has a loopback of its own')
  })
})

describe('read-only over SSH with a port named when the world opens (network none)', () => {
  it('its programs share the relay\'s namespace (lo only, no proxy, the host\'s loopback refused) and the port reaches a server one of them started', async () => {
    const world = await sshWorld(capable, 'read-only', { forward: ['0:8766'] })
    try {
      const [forward] = world.network.forwards()
      expect(world.network.proxyPort).toBeUndefined()
      const terminal = await world.open()
      expect(await run(terminal, INTERFACES)).toBe('lo')
      expect(await run(terminal, 'echo "proxy=$HTTP_PROXY"')).toBe('proxy=')
      expect(await run(terminal, connect(port))).toBe(`bash: connect: Connection refused\nbash: line 1: /dev/tcp/127.0.0.1/${port}: Connection refused\n exit=1`)
      expect(await run(terminal, `(python3 -c 'import socket; socket.create_server(("127.0.0.1", 8766)).accept()[0].send(b"inner")' &); sleep 0.5`)).toBe('')
      const greeting = await new Promise<string>((resolve, reject) => {
        const socket = createConnection(forward!.host.port, '127.0.0.1')
        let said = ''
        socket.on('data', (chunk: Buffer) => { said += chunk.toString('utf8') })
        socket.on('end', () => resolve(said))
        socket.on('error', reject)
      })
      expect(greeting).toBe('inner')
      await terminal.close()
    } finally {
      await world.dispose()
    }
  })
})

describe('danger-full-access over SSH: the host\'s network, as it is', () => {
  it('the same connects reach this test\'s server and the abstract socket', async () => {
    const world = await sshWorld(capable, 'danger-full-access')
    try {
      const terminal = await world.open()
      expect(await run(terminal, connect(port))).toBe('hello exit=0')
      expect(await run(terminal, ABSTRACT_CONNECT)).toBe('connected')
      for (const [path] of FILE_SOCKETS) expect(await run(terminal, fileConnect(path))).toBe('connected')
      await terminal.close()
    } finally {
      await world.dispose()
    }
  })
})

describe('a host whose bubblewrap can make no network namespace', () => {
  it('every confined mode is refused with SandboxUnavailableError naming --unshare-net; danger-full-access runs', async () => {
    const reason = 'bubblewrap at /usr/bin/bwrap cannot give the sandbox a network namespace of its own (--unshare-net), which keeps the host\'s loopback and abstract sockets out of a confined program\'s reach; the confined modes never run without it: ' +
      // bwrap words an EPERM of its clone(2) so, whichever namespace was refused (Debian's bubblewrap).
      'bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces. See <https://deb.li/bubblewrap> or <file:///usr/share/doc/bubblewrap/README.Debian.gz>.'
    for (const mode of ['read-only', 'workspace-write'] as const) {
      const world = await sshWorld(noNetns, mode)
      try {
        const failure = await world.open().then(() => undefined, (error: unknown) => error)
        expect(failure).toBeInstanceOf(SandboxUnavailableError)
        expect((failure as Error).message.endsWith(`Runner failure: ssh agent@127.0.0.1:${noNetns.ports[0]}: ${reason}`)).toBe(true)
        expect(sandboxReportOf(world.ctx)!.modes.map(entry => [entry.mode, entry.available, entry.gaps])).toEqual([
          ['read-only', false, [reason]],
          ['workspace-write', false, [reason]],
          ['danger-full-access', true, []],
        ])
        expect((await noNetns.processes()).filter(row => row.args.includes('bash'))).toEqual([])
      } finally {
        await world.dispose()
      }
    }
    const world = await sshWorld(noNetns, 'danger-full-access')
    try {
      expect(await run(await world.open(), connect(port))).toBe('hello exit=0')
    } finally {
      await world.dispose()
    }
  }, 60_000)
})

describe('parseBwrapProbe: the network namespace is proven, not assumed', () => {
  const head = 'path /usr/bin/bwrap\nversion bubblewrap 0.8.0 \n'

  it('a read-only profile that lists lo only is usable', () => {
    expect(parseBwrapProbe(`${head}ro 0 if lo \n`, []).usable).toBe(true)
  })

  it('a namespace with another interface, or none listed, is not', () => {
    expect(parseBwrapProbe(`${head}ro 0 if lo if eth0 \n`, [])).toEqual({ usable: false, reason: 'bubblewrap at /usr/bin/bwrap gave the sandbox a network namespace with the interfaces lo, eth0, not lo only; the confined modes never run with a network' })
    expect(parseBwrapProbe(`${head}ro 0 \n`, [])).toEqual({ usable: false, reason: 'bubblewrap at /usr/bin/bwrap gave the sandbox a network namespace with no interface it could list, not lo only; the confined modes never run with a network' })
  })

  it('a profile that fails with and without --unshare-net is bubblewrap\'s failure, not the network\'s', () => {
    expect(parseBwrapProbe(`${head}ro 1 bwrap: setting up uid map: Permission denied\nshared 1 bwrap: setting up uid map: Permission denied\n`, [])).toEqual({ usable: false, reason: 'bubblewrap at /usr/bin/bwrap does not work here: bwrap: setting up uid map: Permission denied' })
  })
})
