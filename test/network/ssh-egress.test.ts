/**
 * Egress and ports of a confined SSH world (issue 34, item 4): bubblewrap gives each confined
 * program a network namespace of its own, so under `network: 'allow'` the relay starts first in
 * a namespace of its own and every confined program joins it (nsenter, sandbox/shared-network.ts):
 * they all see `lo` only, reach the proxy on its 127.0.0.1, reach each other's servers, and a
 * port forwarded from this machine reaches a server any of them started. A relay that ends (as
 * a cut connection ends it) is started again in the same namespace. Real OpenSSH sshd in a
 * container on the host network (loopback only), real bubblewrap, real servers on this
 * machine's 127.0.0.1 named by test host names (`resolve`).
 */
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { type Server, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openWorld, type RemoteWorld } from '../../src/backend/world.ts'
import { networkCheck } from '../../src/cli/doctor-network.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { sandboxReportOf } from '../../src/sandbox/companion.ts'
import { BWRAP_CAPABLE, type SshdWorld, TARGET_IMAGE, startSshdWorld } from '../helpers/sshd-world.ts'
import { run } from '../sandbox/helpers.ts'
import { FETCH, PIP_INSTALL, type PackageIndex, answerStartingWith, demoWheel, expectPipThroughRules, hostGet, startPackageIndex } from './helpers.ts'

/** Workspace root on the SSH host. */
const WORKSPACE = '/dsh-ws'

/** What a shell command prints for the interfaces of its network namespace (proc(5)). */
const INTERFACES = String.raw`sed -n 's/^ *\([^:]*\):.*/\1/p' /proc/net/dev`

/** bash's own TCP connect to the world's 127.0.0.1:PORT, with a GET, printing the status line. */
const getLine = (port: number): string => `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && printf "GET / HTTP/1.0\\r\\n\\r\\n" >&3 && head -n 1 <&3' 2>&1 | tr -d '\\r'`

let host: SshdWorld
let http: Server
let httpPort = 0
let index: PackageIndex
let logDir: string
let world: RemoteWorld

async function onHost(script: string): Promise<string> {
  const result = await host.exec(['sh', '-c', script])
  expect(result.exitCode).toBe(0)
  return result.stdout
}

beforeAll(async () => {
  http = createServer((request, response) => response.end(`hello ${request.url} via ${request.headers.host}`))
  http.listen(0, '127.0.0.1')
  await once(http, 'listening')
  httpPort = (http.address() as AddressInfo).port
  index = await startPackageIndex(await demoWheel(TARGET_IMAGE))
  host = await startSshdWorld([{}], { hostConfig: BWRAP_CAPABLE })
  const files = [['fetch.py', FETCH], ['pip-install.sh', PIP_INSTALL]].map(([name, text]) => `printf %s '${Buffer.from(text!).toString('base64')}' | base64 -d > ${WORKSPACE}/${name}`)
  await onHost(`mkdir -p ${WORKSPACE} && ${files.join(' && ')} && chown -R agent:agent ${WORKSPACE}`)
  logDir = mkdtempSync(join(tmpdir(), 'dsh-ssh-egress-log-'))
  world = await openWorld({
    runtime: SshSubprocessRuntime,
    runtimeConfig: { target: `agent@127.0.0.1:${host.ports[0]}`, identity: host.clientKeyFile, knownHosts: host.knownHostsFile, sshConfig: false, agent: false },
    workspaceRoot: WORKSPACE,
    mode: 'read-only',
    network: {
      allow: [`allowed.test:${httpPort}`],
      deny: ['denied.test'],
      resolve: [`allowed.test:${httpPort}:127.0.0.1`, `denied.test:${httpPort}:127.0.0.1`, `pypi.test:${index.port}:127.0.0.1`],
      egressLog: join(logDir, 'egress.jsonl'),
    },
  })
}, 180_000)

afterAll(async () => {
  await world?.dispose()
  await host?.stop()
  http?.close()
  index?.server.close()
  if (logDir !== undefined) rmSync(logDir, { recursive: true, force: true })
})

describe('a read-only SSH world with network allow', () => {
  it('starts each confined program in the relay\'s namespace: lo only, the proxy variables, the allowed name through, the denied one refused, no name lookup', async () => {
    const { argv } = world.ctx.sandbox.confine(['/bin/true'], { mode: 'read-only', workspaceRoot: WORKSPACE })
    expect(argv.slice(0, 5)).toEqual(['/usr/bin/nsenter', '--preserve-credentials', '--user', '--net', `--target=${(world.ctx.sandbox as unknown as { joinedNetwork: number }).joinedNetwork}`])
    expect(argv).not.toContain('--unshare-net')
    const terminal = await world.open()
    const port = world.network.proxyPort!
    expect(await run(terminal, INTERFACES)).toBe('lo')
    expect(await run(terminal, 'echo "$HTTP_PROXY $NO_PROXY"')).toBe(`http://127.0.0.1:${port} localhost,127.0.0.1,::1`)
    expect(await run(terminal, `python3 ${WORKSPACE}/fetch.py http://allowed.test:${httpPort}/x`)).toBe(`200 hello /x via allowed.test:${httpPort}`)
    expect(await run(terminal, `python3 ${WORKSPACE}/fetch.py http://denied.test:${httpPort}/x`)).toBe(`403 dsh-remote-worlds egress: refused denied.test:${httpPort}: denied by rule denied.test`)
    expect(await run(terminal, 'getent hosts example.com; echo "getent $?"')).toBe('getent 2')
    // The host's own loopback (its sshd) stays out of reach: only the namespace's lo is there.
    expect(await run(terminal, `${getLine(host.ports[0]!)}`)).toBe(`bash: connect: Connection refused\nbash: line 1: /dev/tcp/127.0.0.1/${host.ports[0]}: Connection refused`)
    await terminal.close()
  })

  it('a server one terminal starts is reached from another terminal, and from this machine through a forward', async () => {
    const server = await world.open()
    const other = await world.open()
    try {
      expect(await run(server, `(cd ${WORKSPACE} && exec python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &)`)).toBe('')
      expect(await answerStartingWith('HTTP/1.0 200', () => run(other, getLine(8000)))).toBe('HTTP/1.0 200 OK')
      const forward = await world.network.forward('0:8000')
      try {
        expect(await answerStartingWith('200', () => hostGet(forward.host.port, '/fetch.py'))).toBe(`200 ${FETCH}`)
      } finally {
        await forward.close()
      }
    } finally {
      await other.close()
      await server.close()
    }
  })

  it('the confined file server runs in the same namespace', async () => {
    expect(await world.fs!.readText(await world.fs!.resolve(`${WORKSPACE}/fetch.py`))).toBe(FETCH)
    const text = await world.fs!.readText(await world.fs!.resolve('/proc/self/net/dev'))
    expect(text.split('\n').filter(line => line.includes(':')).map(line => line.split(':')[0]!.trim())).toEqual(['lo'])
  })

  it('is proven by doctor\'s network check: lo only, no name lookup, a name no rule allows refused, the allowed one through', async () => {
    expect(await networkCheck(world, WORKSPACE)).toEqual({
      name: 'network',
      ok: true,
      detail: `allow (allow allowed.test:${httpPort}; deny denied.test): interfaces: lo; a name lookup finds nothing; proxy 127.0.0.1:${world.network.proxyPort}; dsh-remote-worlds-doctor.invalid:443 HTTP/1.1 403 Forbidden (dsh-remote-worlds egress: refused dsh-remote-worlds-doctor.invalid:443: no --allow rule matches dsh-remote-worlds-doctor.invalid:443); allowed.test:${httpPort} HTTP/1.1 200 Connection established`,
    })
  })

  it('the sandbox report says every confined program shares the relay\'s namespace', () => {
    const joined = (world.ctx.sandbox as unknown as { joinedNetwork: number }).joinedNetwork
    expect(sandboxReportOf(world.ctx)?.modes.find(entry => entry.mode === 'read-only')?.facts).toContain(`network: lo only, one namespace for every confined program and the world's network relay (pid ${joined}, joined with nsenter): the host's loopback (its sshd, any service on 127.0.0.1) and abstract unix sockets are out of reach`)
  })

  it('a relay that ends (as a cut connection ends it) is started again in the same namespace: the proxy port, a running server and its forward still answer', async () => {
    const terminal = await world.open()
    const forward = await world.network.forward('0:8001')
    try {
      expect(await run(terminal, `(cd ${WORKSPACE} && exec python3 -m http.server 8001 --bind 127.0.0.1 >/dev/null 2>&1 &)`)).toBe('')
      expect(await answerStartingWith('200', () => hostGet(forward.host.port, '/fetch.py'))).toBe(`200 ${FETCH}`)
      const before = (world.ctx.sandbox as unknown as { joinedNetwork: number }).joinedNetwork
      const port = world.network.proxyPort
      expect(await onHost(`pkill -KILL -x dsh-relay; echo "pkill $?"`)).toBe('pkill 0\n')
      // The terminal started before the end fetches through the new relay, on the same port.
      expect(await answerStartingWith('200', () => run(terminal, `python3 ${WORKSPACE}/fetch.py http://allowed.test:${httpPort}/again`))).toBe(`200 hello /again via allowed.test:${httpPort}`)
      expect(world.network.proxyPort).toBe(port)
      const after = (world.ctx.sandbox as unknown as { joinedNetwork: number }).joinedNetwork
      expect(after).not.toBe(before)
      // The server it started before is still reached through the forward.
      expect(await answerStartingWith('200', () => hostGet(forward.host.port, '/fetch.py'))).toBe(`200 ${FETCH}`)
      // A terminal started after is in the same namespace: it reaches that server too.
      const later = await world.open()
      expect(await run(later, getLine(8001))).toBe('HTTP/1.0 200 OK')
      await later.close()
    } finally {
      await forward.close()
      await terminal.close()
    }
  })

  it('logs each decision with the bytes each way', () => {
    const records = readFileSync(join(logDir, 'egress.jsonl'), 'utf8').trim().split('\n').map(line => JSON.parse(line) as Record<string, unknown>)
    expect(records.filter(record => record.host === 'denied.test').map(({ via, verdict, rule }) => ({ via, verdict, rule }))).toEqual([{ via: 'http', verdict: 'deny', rule: 'denied.test' }])
    const allowed = records.filter(record => record.host === 'allowed.test' && record.via === 'http')
    expect(allowed.map(record => record.verdict)).toEqual(allowed.map(() => 'allow'))
    expect(allowed.length).toBeGreaterThanOrEqual(2)
  })
})

describe('a package manager through the proxy', () => {
  it('pip installs from a package index the rules allow, and finds nothing where they do not', async () => {
    await expectPipThroughRules(world, `${WORKSPACE}/pip-install.sh`, index, [`allowed.test:${httpPort}`])
  })
})
