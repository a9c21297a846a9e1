/**
 * Egress of a confined Docker world (issue 34, src/network/): a managed read-only container
 * keeps NetworkMode none, and with `network: 'allow'` its programs reach exactly what the
 * rules allow, through the world's proxy port, judged, resolved and dialed by this client.
 * Real engine, real relay in the container, real servers on THIS machine's 127.0.0.1 only: the
 * rules name them by test host names that this client's resolver maps to 127.0.0.1
 * (`resolve`, as curl's --resolve); nothing in the world can resolve a name at all.
 */
import { createHash, randomBytes } from 'node:crypto'
import { once } from 'node:events'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { type Server, createServer } from 'node:http'
import { type AddressInfo, type Server as NetServer, createServer as createNetServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld, type RemoteWorld } from '../../src/backend/world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { InvalidArgumentError } from '../../src/providers/remote/errors.ts'
import { networkCheck } from '../../src/cli/doctor-network.ts'
import { IMAGE, hostWorkspace, run, startContainer } from '../sandbox/helpers.ts'
import { sandboxReportOf } from '../../src/sandbox/companion.ts'
import { ECHO_AT_EOF, FETCH, PIP_INSTALL, type PackageIndex, answerStartingWith, bareRepository, demoWheel, expectPipThroughRules, hostGet, hostHalfClose, startHttpsServer, startPackageIndex, testCertificates } from './helpers.ts'

/**
 * A raw CONNECT through the proxy: prints the proxy's status line, then (when it said 200)
 * what the tunnel's far end sent back for `ping`; with a third argument, a TLS hello naming
 * that server instead (the fronting attempt), printing how the tunnel ended.
 */
const TUNNEL = `import os, socket, ssl, sys
proxy = int(os.environ['HTTPS_PROXY'].rsplit(':', 1)[1])
s = socket.create_connection(('127.0.0.1', proxy), 20)
s.sendall(('CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' % (sys.argv[1], sys.argv[1])).encode())
head = b''
while b'\\r\\n\\r\\n' not in head:
    part = s.recv(4096)
    if not part: break
    head += part
print(head.split(b'\\r\\n')[0].decode())
if b' 200 ' not in head.split(b'\\r\\n')[0]: sys.exit(0)
if len(sys.argv) > 3:
    # A TLS handshake record, then 70 000 bytes of ClientHello (past the reader's 64 KiB).
    body = b'\\x01' + (69996).to_bytes(3, 'big') + b'\\x03\\x03' + bytes(69994)
    records = b''.join(b'\\x16\\x03\\x01' + len(part).to_bytes(2, 'big') + part for part in (body[i:i + 16000] for i in range(0, len(body), 16000)))
    try:
        s.sendall(records)
        print('refused at once' if s.recv(100) == b'' else 'answered')
    except OSError:
        print('refused at once')
    sys.exit(0)
if len(sys.argv) > 2:
    try:
        ssl.create_default_context().wrap_socket(s, server_hostname=sys.argv[2])
        print('handshake completed')
    except (ssl.SSLError, OSError):
        print('tunnel closed')
    sys.exit(0)
s.sendall(b'ping')
print(s.recv(100).decode())
`

let http: Server
let https: Server | undefined
let httpsPort = 0
let repoDir: string
let echo: NetServer
let echoed = 0
let httpPort = 0
let echoPort = 0
let index: PackageIndex
let workspace: ReturnType<typeof hostWorkspace>
let logDir: string
let world: RemoteWorld

const logFile = (): string => join(logDir, 'egress.jsonl')

/** The egress log's records so far, without the fields that vary by run (time, world). */
function logged(): Record<string, unknown>[] {
  return readFileSync(logFile(), 'utf8').trim().split('\n').map(line => JSON.parse(line) as Record<string, unknown>).map(({ time, world: where, ...rest }) => {
    expect(Number.isNaN(Date.parse(String(time)))).toBe(false)
    expect(where).toBe(world.runtime instanceof DockerSubprocessRuntime ? world.runtime.describe() : '')
    return rest
  })
}

beforeAll(async () => {
  http = createServer((request, response) => response.end(`hello ${request.url} via ${request.headers.host}`))
  http.listen(0, '127.0.0.1')
  await once(http, 'listening')
  httpPort = (http.address() as AddressInfo).port
  echo = createNetServer(socket => socket.on('data', chunk => { echoed += chunk.length; socket.write(chunk) }))
  echo.listen(0, '127.0.0.1')
  await once(echo, 'listening')
  echoPort = (echo.address() as AddressInfo).port
  workspace = hostWorkspace()
  writeFileSync(join(workspace.path, 'fetch.py'), FETCH)
  writeFileSync(join(workspace.path, 'tunnel.py'), TUNNEL)
  writeFileSync(join(workspace.path, 'pip-install.sh'), PIP_INSTALL)
  writeFileSync(join(workspace.path, 'echo-at-eof.py'), ECHO_AT_EOF)
  logDir = mkdtempSync(join(tmpdir(), 'dsh-egress-log-'))
  // An HTTPS server of a test CA that the world is told to trust (ca.pem in its workspace), which
  // also serves a git repository (git's dumb HTTP protocol).
  const certificates = await testCertificates(IMAGE, 'allowed.test')
  writeFileSync(join(workspace.path, 'ca.pem'), certificates.ca)
  repoDir = mkdtempSync(join(tmpdir(), 'dsh-egress-repo-'))
  ;({ server: https, port: httpsPort } = await startHttpsServer(certificates, await bareRepository(repoDir, 'hello from a repository on this machine')))
  index = await startPackageIndex(await demoWheel(IMAGE))
  world = await openWorld({
    runtime: DockerSubprocessRuntime,
    runtimeConfig: { image: IMAGE, workspace: { bind: workspace.path } },
    mode: 'read-only',
    workspaceRoot: '/workspace',
    network: {
      allow: [`allowed.test:${httpPort}`, `allowed.test:${echoPort}`],
      deny: ['denied.test'],
      egress: [`6000:raw.test:${echoPort}`],
      resolve: [`raw.test:${echoPort}:127.0.0.1`, `allowed.test:${httpPort}:127.0.0.1`, `allowed.test:${httpsPort}:127.0.0.1`, `allowed.test:${echoPort}:127.0.0.1`, `denied.test:${httpPort}:127.0.0.1`, `other.test:${httpPort}:127.0.0.1`, `pypi.test:${index.port}:127.0.0.1`],
      egressLog: logFile(),
    },
  })
})

afterAll(async () => {
  await world?.dispose()
  http?.close()
  https?.close()
  index?.server.close()
  echo?.close()
  if (repoDir !== undefined) rmSync(repoDir, { recursive: true, force: true })
  workspace?.remove()
  if (logDir !== undefined) rmSync(logDir, { recursive: true, force: true })
})

describe('a read-only Docker world with network allow', () => {
  it('gives its programs the proxy on the world\'s loopback, and the world still has lo only', async () => {
    const terminal = await world.open()
    const port = world.network.proxyPort!
    expect(port).toBeGreaterThan(0)
    expect(await run(terminal, 'echo "$HTTP_PROXY $https_proxy $NO_PROXY"')).toBe(`http://127.0.0.1:${port} http://127.0.0.1:${port} localhost,127.0.0.1,::1`)
    expect(await run(terminal, 'ls /sys/class/net')).toBe('lo')
    await terminal.close()
  })

  it('lets an allowed name through, with the name the world asked for as the Host', async () => {
    const terminal = await world.open()
    expect(await run(terminal, `python3 /workspace/fetch.py http://allowed.test:${httpPort}/x`)).toBe(`200 hello /x via allowed.test:${httpPort}`)
    await terminal.close()
  })

  it('refuses a denied name, a name no rule allows and an IP literal, each with a 403 that says why', async () => {
    const terminal = await world.open()
    // (NO_PROXY sends a client's own 127.0.0.1 past the proxy, to the world's loopback: asked of the proxy itself.)
    expect(await run(terminal, `python3 /workspace/fetch.py http://denied.test:${httpPort}/`)).toBe(`403 dsh-remote-worlds egress: refused denied.test:${httpPort}: denied by rule denied.test`)
    expect(await run(terminal, `python3 /workspace/fetch.py http://other.test:${httpPort}/`)).toBe(`403 dsh-remote-worlds egress: refused other.test:${httpPort}: no --allow rule matches other.test:${httpPort}`)
    expect(await run(terminal, `python3 /workspace/tunnel.py 127.0.0.1:${httpPort}`)).toBe(`HTTP/1.1 403 Forbidden (dsh-remote-worlds egress: refused 127.0.0.1:${httpPort}: no --allow rule matches 127.0.0.1:${httpPort})`)
    await terminal.close()
  })

  it('resolves no name in the world, and reaches nothing but the proxy directly', async () => {
    const terminal = await world.open()
    expect(await run(terminal, 'getent hosts allowed.test; echo "status $?"')).toBe('status 2')
    const direct = `python3 -c "import socket; socket.create_connection(('127.0.0.1', ${httpPort}), 5)" 2>&1 | tail -1`
    expect(await run(terminal, direct)).toBe('ConnectionRefusedError: [Errno 111] Connection refused')
    await terminal.close()
  })

  it('tunnels a CONNECT to an allowed host:port, and refuses a TLS hello that names another server', async () => {
    const terminal = await world.open()
    expect(await run(terminal, `python3 /workspace/tunnel.py allowed.test:${echoPort}`)).toBe('HTTP/1.1 200 Connection established\nping')
    const before = echoed
    expect(await run(terminal, `python3 /workspace/tunnel.py allowed.test:${echoPort} elsewhere.test`)).toBe('HTTP/1.1 200 Connection established\ntunnel closed')
    // The hello never reached the far end.
    expect(echoed).toBe(before)
    await terminal.close()
  })

  it('refuses a TLS hello that cannot be read whole (over 64 KiB), which could name any server', async () => {
    const terminal = await world.open()
    const before = echoed
    expect(await run(terminal, `python3 /workspace/tunnel.py allowed.test:${echoPort} - big`)).toBe('HTTP/1.1 200 Connection established\nrefused at once')
    expect(echoed).toBe(before)
    await terminal.close()
  })

  it('is proven by doctor\'s network check: lo only, no name lookup, a name no rule allows refused, the allowed one through', async () => {
    const check = await networkCheck(world, '/workspace')
    expect(check).toEqual({
      name: 'network',
      ok: true,
      detail: `allow (allow allowed.test:${httpPort}, allowed.test:${echoPort}, raw.test:${echoPort}; deny denied.test): interfaces: lo; a name lookup finds nothing; proxy 127.0.0.1:${world.network.proxyPort}; dsh-remote-worlds-doctor.invalid:443 HTTP/1.1 403 Forbidden (dsh-remote-worlds egress: refused dsh-remote-worlds-doctor.invalid:443: no --allow rule matches dsh-remote-worlds-doctor.invalid:443); allowed.test:${httpPort} HTTP/1.1 200 Connection established`,
    })
  })

  it('carries a raw --egress forward from its world port to the host:port it names (which it allows)', async () => {
    const terminal = await world.open()
    expect(world.network.egress).toEqual([{ worldPort: 6000, host: 'raw.test', port: echoPort }])
    const raw = `python3 -c "import socket; s = socket.create_connection(('127.0.0.1', 6000), 5); s.sendall(b'db'); print(s.recv(10).decode())"`
    expect(await run(terminal, raw)).toBe('db')
    await terminal.close()
  })

  it('applies a rule change to the next connection at once', async () => {
    const terminal = await world.open()
    world.network.setRules({ allow: [`allowed.test:${httpPort}`, `allowed.test:${echoPort}`, `other.test:${httpPort}`] })
    expect(await run(terminal, `python3 /workspace/fetch.py http://other.test:${httpPort}/y`)).toBe(`200 hello /y via other.test:${httpPort}`)
    await terminal.close()
  })

  it('logs every decision as one JSON line, with the bytes each way', async () => {
    // A connection's line is written once both its ends closed, after the command that made it returned.
    for (let waited = 0; !(existsSync(logFile()) && logged().length >= 11) && waited < 20_000; waited += 50) await delay(50)
    const records = logged()
    // One line per connection, written when it is over: connections one after another may end in either order.
    const byKey = (list: object[]): string[] => list.map(record => JSON.stringify(record)).sort()
    expect(byKey(records.map(({ host, port, via, verdict, rule }) => ({ host, port, via, verdict, rule })))).toEqual(byKey([
      { host: 'allowed.test', port: httpPort, via: 'http', verdict: 'allow', rule: `allowed.test:${httpPort}` },
      { host: 'denied.test', port: httpPort, via: 'http', verdict: 'deny', rule: 'denied.test' },
      { host: 'other.test', port: httpPort, via: 'http', verdict: 'deny', rule: undefined },
      { host: '127.0.0.1', port: httpPort, via: 'connect', verdict: 'deny', rule: undefined },
      { host: 'allowed.test', port: echoPort, via: 'connect', verdict: 'allow', rule: `allowed.test:${echoPort}` },
      { host: 'allowed.test', port: echoPort, via: 'connect', verdict: 'deny', rule: undefined },
      { host: 'other.test', port: httpPort, via: 'http', verdict: 'allow', rule: `other.test:${httpPort}` },
      { host: 'raw.test', port: echoPort, via: 'forward', verdict: 'allow', rule: `raw.test:${echoPort}` },
      { host: 'allowed.test', port: echoPort, via: 'connect', verdict: 'deny', rule: undefined },
      // doctor's proof: a name no rule allows, then the allowed one.
      { host: 'dsh-remote-worlds-doctor.invalid', port: 443, via: 'connect', verdict: 'deny', rule: undefined },
      { host: 'allowed.test', port: httpPort, via: 'connect', verdict: 'allow', rule: `allowed.test:${httpPort}` },
    ]))
    // The world's process that opened each one, as the relay found it (/proc/net/tcp, then the fds): fetch.py's python3.
    const fetched = records.find(record => record.via === 'http' && record.verdict === 'allow' && record.host === 'allowed.test')!
    expect((fetched.process as { command: string }).command).toBe('python3')
    expect((fetched.process as { pid: number }).pid).toBeGreaterThan(1)
    // The tunnel's bytes: `ping` up and back.
    const tunnel = records.find(record => record.via === 'connect' && record.verdict === 'allow' && record.port === echoPort)!
    expect([tunnel.bytesUp, tunnel.bytesDown]).toEqual([4, 4])
    const frontings = records.filter(record => record.via === 'connect' && record.verdict === 'deny' && record.host === 'allowed.test').map(record => record.reason).sort()
    expect(frontings).toEqual(['refused: a TLS handshake whose ClientHello cannot be read whole (over 64 KiB, or malformed) could name any server', 'refused: the TLS server name "elsewhere.test" is not the CONNECT host (domain fronting)'])
    expect(world.network.counts()).toEqual({ allowed: 5, denied: 6, bytesUp: records.reduce((sum, r) => sum + Number(r.bytesUp), 0), bytesDown: records.reduce((sum, r) => sum + Number(r.bytesDown), 0) })
  })
})

describe('a relay that ends', () => {
  it('is started again and listens on the same proxy port, so the programs\' proxy variables stay true', async () => {
    const terminal = await world.open()
    const port = world.network.proxyPort!
    // As a cut transport or a restarted container would end it (it ends at its stdin's EOF).
    expect(await run(terminal, 'pkill -x dsh-relay; echo "pkill $?"')).toBe('pkill 0')
    const answer = await answerStartingWith('200', () => run(terminal, `python3 /workspace/fetch.py http://allowed.test:${httpPort}/again`))
    expect(answer).toBe(`200 hello /again via allowed.test:${httpPort}`)
    expect(world.network.proxyPort).toBe(port)
    expect(await run(terminal, 'echo "$HTTP_PROXY"')).toBe(`http://127.0.0.1:${port}`)
    await terminal.close()
  })
})

describe('HTTPS through the proxy, verified end to end', () => {
  it('an HTTPS request and a git clone over HTTPS reach a server of a test CA the world trusts; without that CA the world\'s client refuses the server', async () => {
    world.network.setRules({ allow: [`allowed.test:${httpsPort}`] })
    const terminal = await world.open()
    expect(await run(terminal, `SSL_CERT_FILE=/workspace/ca.pem python3 /workspace/fetch.py https://allowed.test:${httpsPort}/secure`)).toBe(`200 hello /secure via allowed.test:${httpsPort}`)
    expect(await run(terminal, `GIT_SSL_CAINFO=/workspace/ca.pem git clone -q https://allowed.test:${httpsPort}/repo.git /tmp/clone 2>&1; git -C /tmp/clone log --format=%s`)).toBe('hello from a repository on this machine')
    // The certificate is the server's own (nothing terminates TLS on the way): the system's roots do not know it.
    expect(await run(terminal, `python3 /workspace/fetch.py https://allowed.test:${httpsPort}/secure`)).toBe('error URLError')
    await terminal.close()
  })
})

describe('a package manager through the proxy', () => {
  it('pip installs from a package index the rules allow, and finds nothing where they do not', async () => {
    await expectPipThroughRules(world, '/workspace/pip-install.sh', index, [`allowed.test:${httpPort}`])
  })
})

describe('a port forwarded into the same world', () => {
  it('carries this machine\'s connections to a server on the world\'s 127.0.0.1, and refuses while nothing listens there', async () => {
    const forward = await world.network.forward('0:8000')
    try {
      expect(forward.host.address).toBe('127.0.0.1')
      // Nothing listens on the world's port yet: the connection is closed, the forward stays.
      expect(await hostGet(forward.host.port, '/fetch.py')).toBe('error ECONNRESET')
      expect(forward.counts()).toEqual({ connections: 0, refused: 1 })
      const terminal = await world.open()
      expect(await run(terminal, '(cd /workspace && exec python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &)')).toBe('')
      const answer = await answerStartingWith('200', () => hostGet(forward.host.port, '/fetch.py'))
      expect(answer).toBe(`200 ${FETCH}`)
      await terminal.close()
    } finally {
      await forward.close()
    }
  })

  it('carries a client\'s half-close: a client that sends, then ends its sending, reads the world\'s whole answer', async () => {
    const forward = await world.network.forward('0:8001')
    const terminal = await world.open()
    try {
      expect(await run(terminal, '(exec python3 /workspace/echo-at-eof.py 8001 >/dev/null 2>&1 &)')).toBe('')
      const body = randomBytes(3_000_000)
      const expected = `echoed ${body.length} ${createHash('sha256').update(body).digest('hex').slice(0, 16)}`
      // Until the server listens, the world refuses and the forward ends the connection (`echoed 0`).
      expect(await answerStartingWith(`echoed ${body.length} `, () => hostHalfClose(forward.host.port, body))).toBe(expected)
    } finally {
      await terminal.close()
      await forward.close()
    }
  })
})

describe('a network setting the world cannot enforce', () => {
  it('an attached container with a network of its own is refused the confined default none, and taken with an explicit --network full', async () => {
    const networked = await startContainer({ User: '1000:1000', HostConfig: { NetworkMode: 'host', ReadonlyRootfs: true, CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'], Init: true, Tmpfs: { '/tmp': 'rw,size=16m' } } })
    try {
      const where = `docker container ${networked.id}`
      await expect(openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: networked.id }, mode: 'read-only', workspaceRoot: '/srv' }))
        .rejects.toThrow(new InvalidArgumentError(`network 'none' cannot be held in ${where}: it has a network of its own (NetworkMode host), which its confined programs reach; attach a container with NetworkMode none (or let this package create one), or give --network full to accept the container's own network`))
      const accepted = await openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { container: networked.id }, mode: 'read-only', workspaceRoot: '/srv', network: { network: 'full' } })
      try {
        expect(accepted.network.policy.network).toBe('full')
        const report = sandboxReportOf(accepted.ctx)!.modes.find(entry => entry.mode === 'read-only')!
        expect([report.enforcement, report.gaps]).toEqual(['partial', ['the container has a network (NetworkMode host): its programs reach what that network reaches (a confined world keeps lo only where NetworkMode is none)']])
      } finally {
        await accepted.dispose()
      }
    } finally {
      await networked.remove()
    }
  })

  it('an egress log this client cannot write is refused before anything starts, naming the file', async () => {
    await expect(openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: IMAGE }, mode: 'read-only', workspaceRoot: '/tmp', network: { allow: ['example.test'], egressLog: join(logDir, 'missing', 'egress.jsonl') } }))
      .rejects.toThrow(`cannot write the egress log ${join(logDir, 'missing', 'egress.jsonl')}: ENOENT: no such file or directory, open '${join(logDir, 'missing', 'egress.jsonl')}'`)
  })

  it('is refused before anything starts: allow in danger-full-access, full in a confined mode', async () => {
    await expect(openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: IMAGE }, mode: 'danger-full-access', workspaceRoot: '/root', network: { allow: ['example.test'] } }))
      .rejects.toThrow(new InvalidArgumentError('network \'allow\' needs a confined sandbox mode: danger-full-access has no fence to hold the network (use read-only or workspace-write)'))
    await expect(openWorld({ runtime: DockerSubprocessRuntime, runtimeConfig: { image: IMAGE }, mode: 'read-only', workspaceRoot: '/tmp', network: { network: 'full' } }))
      .rejects.toThrow(new InvalidArgumentError(`network 'full' in a read-only world is only the network a container already has; managed container from ${IMAGE} keeps lo only (use --network allow with --allow rules)`))
  })
})
