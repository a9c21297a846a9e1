/**
 * The egress family (issue 34, item 6): what a confined world pays for its way out
 * (src/network/, docs/network.md), on a world of its own made as the network suites make one:
 * in Docker a managed read-only container (NetworkMode none) with a host workspace folder owned
 * by uid 1000 (test/network/docker-egress.test.ts); over SSH a read-only world under bubblewrap
 * on an sshd container where bubblewrap works, its programs in the relay's network namespace
 * (test/network/ssh-egress.test.ts). Both with `network: 'allow'` and rules naming this bench's
 * servers, which this client's resolver maps to 127.0.0.1 (`resolve`, as curl's --resolve).
 * Every socket is on 127.0.0.1 (the world's own, or this machine's): no other address is ever
 * dialed.
 *
 * - `direct loopback connect`, `egress connect (allowed)`: ONE python3 process in the world
 *   (process start would dominate a process per sample) serves a listener on the world's own
 *   127.0.0.1 and, per iteration, times a TCP connect to it (connect(2) returned), then a
 *   connect to the proxy port with `CONNECT allowed.test:PORT` until the proxy's `200` head is
 *   in (the relay, the transport, the gateway's verdict and its dial of this machine's server,
 *   and back); the two alternate, so both see the same machine.
 * - `egress 100 MB download`: the world's python3 CONNECTs through the proxy to a server on this
 *   machine's 127.0.0.1, sends one line (a tunnel's first bytes are read for a TLS hello before
 *   anything is carried, egress-gateway.ts), and reads until EOF: the server writes 100 MiB and
 *   closes. Timed in the world, connect to EOF.
 * - `forwarded port 100 MB`: `world.network.forward('0:PORT')` to a python3 server on the
 *   world's 127.0.0.1 that writes 100 MiB per connection and closes; a Node process of its own on
 *   this machine connects to the forward and reads to the end (connect to end, timed by it).
 * The report divides the two 100 MB rows' MB/s by the raw transport row of the same world, run
 * and direction (bench/report.ts): the download's bytes go into the world (the raw `stdin` row),
 * the forward's come out (the raw `stdout` row); and the connect row's median by the direct one's.
 * @module bench/rows/egress
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { type AddressInfo, type Server, type Socket, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Context } from '@deepseek-ai/cordis'
import { type RemoteWorld, openWorld } from '../../src/backend/world.ts'
import { MANAGED_LABEL } from '../../src/providers/docker/docker-world.ts'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { BWRAP_CAPABLE, startSshdWorld } from '../../test/helpers/sshd-world.ts'
import { STDOUT_THROUGHPUT_BYTES, type SampleTable, pushSample, withTimeout } from '../timing.ts'

export const DIRECT_CONNECT_METRIC = 'direct loopback connect'
export const EGRESS_CONNECT_METRIC = 'egress connect (allowed)'
export const EGRESS_DOWNLOAD_METRIC = 'egress 100 MB download'
export const FORWARD_METRIC = 'forwarded port 100 MB'

/** The rows, in report order. */
export const EGRESS_METRICS = [DIRECT_CONNECT_METRIC, EGRESS_CONNECT_METRIC, EGRESS_DOWNLOAD_METRIC, FORWARD_METRIC] as const

/** Payload bytes of the two throughput rows (100 MiB, as the raw transport row), for their MB/s. */
export const EGRESS_BYTES: Readonly<Record<string, number>> = {
  [EGRESS_DOWNLOAD_METRIC]: STDOUT_THROUGHPUT_BYTES,
  [FORWARD_METRIC]: STDOUT_THROUGHPUT_BYTES,
}

/** The label bench/worlds.ts's exit sweep removes containers by (`dsh-remote-worlds.bench=<pid>`). */
const BENCH_LABELS = { 'dsh-remote-worlds.bench': String(process.pid) }

/** Connect samples of each connect row (after {@link CONNECT_WARMUP} discarded), at least. */
const CONNECT_SAMPLES = 50
const CONNECT_WARMUP = 5
/** Runs of a 100 MB row at most (as the raw rows: min(runs, 5)), after one discarded. */
const MAX_THROUGHPUT_RUNS = 5
/** Bound of a whole in-world measuring process, and of one forwarded download (ms). */
const PROCESS_STEP_MS = 300_000
const DOWNLOAD_STEP_MS = 120_000

/**
 * argv: PROXY_PORT TARGET N. Per iteration: a direct connect to its own listener, then a
 * CONNECT through the proxy until the 200 head; prints `DIRECT_MS EGRESS_MS` per iteration.
 */
const CONNECT_PY = `import socket, sys, threading, time
proxy, target, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
server = socket.socket()
server.bind(('127.0.0.1', 0))
server.listen(128)
port = server.getsockname()[1]
def serve():
    while True:
        server.accept()[0].close()
threading.Thread(target=serve, daemon=True).start()
request = ('CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' % (target, target)).encode()
for _ in range(n):
    started = time.perf_counter()
    s = socket.create_connection(('127.0.0.1', port))
    direct = (time.perf_counter() - started) * 1000
    s.close()
    started = time.perf_counter()
    s = socket.create_connection(('127.0.0.1', proxy))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(request)
    head = b''
    while b'\\r\\n\\r\\n' not in head:
        part = s.recv(4096)
        if not part: sys.exit('the proxy closed after %r' % head)
        head += part
    egress = (time.perf_counter() - started) * 1000
    s.close()
    if b' 200 ' not in head.split(b'\\r\\n')[0]: sys.exit('the proxy said %r' % head[:200])
    print('%.4f %.4f' % (direct, egress), flush=True)
`

/**
 * argv: PROXY_PORT TARGET N. Per iteration: CONNECT through the proxy, one line up, then read
 * to EOF; prints `MS BYTES` (connect to EOF).
 */
const DOWNLOAD_PY = `import socket, sys, time
proxy, target, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
request = ('CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n' % (target, target)).encode()
buffer = bytearray(1 << 20)
for _ in range(n):
    started = time.perf_counter()
    s = socket.create_connection(('127.0.0.1', proxy))
    s.sendall(request)
    head = b''
    while b'\\r\\n\\r\\n' not in head:
        part = s.recv(4096)
        if not part: sys.exit('the proxy closed after %r' % head)
        head += part
    if b' 200 ' not in head.split(b'\\r\\n')[0]: sys.exit('the proxy said %r' % head[:200])
    total = len(head) - head.index(b'\\r\\n\\r\\n') - 4
    s.sendall(b'send\\n')
    while True:
        got = s.recv_into(buffer)
        if got == 0: break
        total += got
    ms = (time.perf_counter() - started) * 1000
    s.close()
    print('%.4f %d' % (ms, total), flush=True)
`

/** argv: BYTES. Listens on the world's 127.0.0.1 (prints the port), writes BYTES to each connection and closes it. */
const SERVE_PY = `import socket, sys
size = int(sys.argv[1])
server = socket.socket()
server.bind(('127.0.0.1', 0))
server.listen(16)
print(server.getsockname()[1], flush=True)
block = bytes(1 << 20)
while True:
    c = server.accept()[0]
    left = size
    try:
        while left > 0:
            c.sendall(block[:min(left, len(block))])
            left -= min(left, len(block))
        c.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    c.close()
`

/** The Docker runtime with the bench's label on its managed container (worlds.ts's sweep removes it if the run dies). */
class EgressDockerRuntime extends DockerSubprocessRuntime {
  constructor(ctx: Context, config: ConstructorParameters<typeof DockerSubprocessRuntime>[1]) {
    super(ctx, config, { create: { Labels: { [MANAGED_LABEL]: 'true', ...BENCH_LABELS } } })
  }
}

/** The uid the image's user has (`agent`), who owns the workspace folder. */
const AGENT_UID = 1000

/** A host folder for the world's /workspace, owned by {@link AGENT_UID} (as test/sandbox/helpers.ts `hostWorkspace`). */
function hostWorkspace(): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), 'dsh-bench-egress-'))
  chownSync(path, AGENT_UID, AGENT_UID)
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) }
}

/** A server on this machine's 127.0.0.1 (port chosen by the kernel). */
async function listenLoopback(onConnection: (socket: Socket) => void): Promise<{ server: Server; port: number }> {
  const server = createServer({ noDelay: true }, socket => {
    socket.on('error', () => undefined)
    onConnection(socket)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return { server, port: (server.address() as AddressInfo).port }
}

/**
 * The download's server, on this machine's 127.0.0.1, in a Node process of its own (as a real
 * server is: this process carries the world's side of the tunnel, and must not also make the
 * bytes): each connection gets `bytes` zeros once it sent its first line, then the end.
 */
async function zeroServer(bytes: number): Promise<{ port: number; stop(): void }> {
  const script = `const net = require('node:net')
const block = Buffer.alloc(1 << 20)
const server = net.createServer({ noDelay: true }, socket => {
  socket.on('error', () => {})
  socket.once('data', () => {
    let left = ${bytes}
    const pump = () => {
      while (left > 0) {
        const part = left >= block.length ? block : block.subarray(0, left)
        left -= part.length
        if (!socket.write(part)) { socket.once('drain', pump); return }
      }
      socket.end()
    }
    pump()
  })
})
server.listen(0, '127.0.0.1', () => process.stdout.write(server.address().port + '\\n'))`
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  const [line] = await withTimeout(once(child.stdout!, 'data') as Promise<[Buffer]>, 'the download server')
  return { port: Number(line.toString('utf8').trim()), stop: () => { child.kill() } }
}

/**
 * One read of a forward, by a Node process of its own (as a real client of a forward is: this
 * process carries the world's side of the tunnel, and must not also take the bytes): it connects
 * to this machine's 127.0.0.1:`port`, reads to the end, and prints the span connect to end (ms)
 * and the bytes read, which are returned.
 * @throws Error when the reader fails or prints no measurement within the step's bound.
 */
async function readForward(port: number): Promise<{ ms: number; bytes: number }> {
  const script = `const net = require('node:net')
const started = performance.now()
let bytes = 0
const socket = net.connect({ host: '127.0.0.1', port: ${port} })
socket.on('data', chunk => { bytes += chunk.length })
socket.on('end', () => { process.stdout.write((performance.now() - started) + ' ' + bytes + '\\n'); socket.destroy() })
socket.on('error', error => { process.stderr.write(String(error) + '\\n'); process.exit(1) })`
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout!.on('data', (chunk: Buffer) => { out += chunk.toString('utf8') })
  const [code] = await withTimeout(once(child, 'exit') as Promise<[number | null]>, FORWARD_METRIC, DOWNLOAD_STEP_MS)
  const [ms, bytes] = out.trim().split(' ').map(Number)
  if (code !== 0 || ms === undefined || bytes === undefined || Number.isNaN(ms)) throw new Error(`bench: ${FORWARD_METRIC}: the reader exited ${code} printing ${JSON.stringify(out)}`)
  return { ms, bytes }
}

/** The bench's confined world with its scripts in `dir` (a folder of the world). */
interface EgressWorld {
  world: RemoteWorld
  dir: string
  dispose(): Promise<void>
}

/** The scripts the rows run in the world, by file name. */
const SCRIPTS = [['egress-connect.py', CONNECT_PY], ['egress-download.py', DOWNLOAD_PY], ['egress-serve.py', SERVE_PY]] as const

/** A managed read-only container with a host workspace at /workspace holding the scripts. */
async function dockerEgressWorld(image: string, network: { allow: string[]; resolve: string[] }): Promise<EgressWorld> {
  const workspace = hostWorkspace()
  try {
    for (const [name, text] of SCRIPTS) writeFileSync(join(workspace.path, name), text)
    const world = await openWorld({ runtime: EgressDockerRuntime, runtimeConfig: { image, workspace: { bind: workspace.path } }, mode: 'read-only', workspaceRoot: '/workspace', network })
    return { world, dir: '/workspace', dispose: async () => { await world.dispose().finally(() => workspace.remove()) } }
  } catch (error) {
    workspace.remove()
    throw error
  }
}

/** The SSH world's workspace, on the sshd container. */
const SSH_WORKSPACE = '/dsh-ws'

/** A read-only SSH world under bubblewrap, on an sshd container of its own where bubblewrap works, the scripts in its workspace. */
async function sshEgressWorld(image: string, network: { allow: string[]; resolve: string[] }): Promise<EgressWorld> {
  const sshd = await startSshdWorld([{}], { image, hostConfig: BWRAP_CAPABLE })
  try {
    const files = SCRIPTS.map(([name, text]) => `printf %s '${Buffer.from(text).toString('base64')}' | base64 -d > ${SSH_WORKSPACE}/${name}`).join(' && ')
    const made = await sshd.exec(['sh', '-c', `mkdir -p ${SSH_WORKSPACE} && ${files} && chown -R agent:agent ${SSH_WORKSPACE}`])
    if (made.exitCode !== 0) throw new Error(`bench: the SSH egress world's workspace could not be made (exit ${made.exitCode})`)
    const world = await openWorld({
      runtime: SshSubprocessRuntime,
      runtimeConfig: { target: `agent@127.0.0.1:${sshd.ports[0]}`, identity: sshd.clientKeyFile, knownHosts: sshd.knownHostsFile, sshConfig: false, agent: false },
      mode: 'read-only',
      workspaceRoot: SSH_WORKSPACE,
      network,
    })
    return { world, dir: SSH_WORKSPACE, dispose: async () => { await world.dispose().finally(() => sshd.stop()) } }
  } catch (error) {
    await sshd.stop()
    throw error
  }
}

/**
 * `argv` as the world's confined programs run it (`ctx.sandbox.confine`, as DSH's tools ask):
 * over SSH that puts it in the relay's network namespace, where the proxy port is.
 */
function confined({ world, dir }: EgressWorld, argv: readonly string[]): string[] {
  return [...world.ctx.sandbox.confine(argv, { mode: 'read-only', workspaceRoot: dir }).argv]
}

/** Run python3 `script` in the world (ONE process, confined) and return its stdout lines. */
async function runInWorld(egress: EgressWorld, script: string, args: readonly string[], what: string): Promise<string[]> {
  const { world, dir } = egress
  const handle = world.runtime.spawn({ argv: confined(egress, ['python3', `${dir}/${script}`, ...args]), cwd: dir, graceMs: 1_000, stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } })
  let out = ''
  let err = ''
  handle.stdout!.on('data', (chunk: Buffer) => { out += chunk.toString('utf8') })
  handle.stderr!.on('data', (chunk: Buffer) => { if (err.length < 4_000) err += chunk.toString('utf8') })
  const outcome = await withTimeout(handle.done, what, PROCESS_STEP_MS)
  if (!handle.stdout!.readableEnded) await withTimeout(once(handle.stdout!, 'end'), `${what}: stdout end`)
  if (outcome.exitCode !== 0) throw new Error(`bench: ${what} exited ${JSON.stringify(outcome)}: ${err.trim().slice(-500)}`)
  return out.trim().split('\n').filter(line => line.length > 0)
}

/**
 * Measure the egress rows of `kind` into `samples` on a world of their own (opened and disposed here).
 * @param image - the world image (python3 in it; over SSH, the sshd container's).
 * @throws Error when a download delivers anything but the payload, or a world step fails.
 */
export async function egressRuns(kind: 'docker' | 'ssh', image: string, runs: number, samples: SampleTable): Promise<void> {
  // This machine's servers, on 127.0.0.1: the CONNECT target (holds the tunnel), the download.
  const holder = await listenLoopback(socket => socket.resume())
  const download = await zeroServer(STDOUT_THROUGHPUT_BYTES)
  let egress: EgressWorld | undefined
  try {
    const network = {
      allow: [`allowed.test:${holder.port}`, `allowed.test:${download.port}`],
      resolve: [`allowed.test:${holder.port}:127.0.0.1`, `allowed.test:${download.port}:127.0.0.1`],
    }
    egress = kind === 'docker' ? await dockerEgressWorld(image, network) : await sshEgressWorld(image, network)
    const { world, dir } = egress
    const proxy = String(world.network.proxyPort)

    const connects = await runInWorld(egress, 'egress-connect.py', [proxy, `allowed.test:${holder.port}`, String(CONNECT_WARMUP + Math.max(runs, CONNECT_SAMPLES))], EGRESS_CONNECT_METRIC)
    for (const line of connects.slice(CONNECT_WARMUP)) {
      const [direct, egress] = line.split(' ').map(Number)
      pushSample(samples, DIRECT_CONNECT_METRIC, { ms: direct! })
      pushSample(samples, EGRESS_CONNECT_METRIC, { ms: egress! })
    }
    console.error(`[bench] ${kind}: egress connect rows done`)

    const throughputRuns = Math.min(runs, MAX_THROUGHPUT_RUNS)
    const downloads = await runInWorld(egress, 'egress-download.py', [proxy, `allowed.test:${download.port}`, String(1 + throughputRuns)], EGRESS_DOWNLOAD_METRIC)
    for (const [index, line] of downloads.entries()) {
      const [ms, bytes] = line.split(' ').map(Number)
      if (bytes !== STDOUT_THROUGHPUT_BYTES) throw new Error(`bench: ${EGRESS_DOWNLOAD_METRIC} delivered ${bytes} bytes, expected ${STDOUT_THROUGHPUT_BYTES}`)
      if (index > 0) pushSample(samples, EGRESS_DOWNLOAD_METRIC, { ms: ms! })
    }
    console.error(`[bench] ${kind}: egress download row done`)

    const server = world.runtime.spawn({ argv: confined(egress, ['python3', `${dir}/egress-serve.py`, String(STDOUT_THROUGHPUT_BYTES)]), cwd: dir, graceMs: 1_000, stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } })
    server.stderr!.resume()
    try {
      const [portLine] = await withTimeout(once(server.stdout!, 'data') as Promise<[Buffer]>, 'the world\'s python3 server')
      const forward = await world.network.forward(`0:${Number(portLine.toString('utf8').trim())}`)
      try {
        for (let run = 0; run <= throughputRuns; run += 1) {
          const { ms, bytes } = await readForward(forward.host.port)
          if (bytes !== STDOUT_THROUGHPUT_BYTES) throw new Error(`bench: ${FORWARD_METRIC} delivered ${bytes} bytes, expected ${STDOUT_THROUGHPUT_BYTES}`)
          if (run > 0) pushSample(samples, FORWARD_METRIC, { ms })
        }
      } finally {
        await forward.close()
      }
    } finally {
      server.terminate()
      await withTimeout(server.waitForExit(), 'the world\'s python3 server exit').catch(() => undefined)
    }
    console.error(`[bench] ${kind}: forwarded port row done`)
  } finally {
    await egress?.dispose()
    holder.server.close()
    download.stop()
  }
}
