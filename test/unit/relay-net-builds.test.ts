/**
 * Both builds of the network relay (dist/world-tools/linux-{x86_64,aarch64}/dsh-relay) keep its
 * protocol's promises, driven by the package's own client (src/network/relay/relay-channel.ts):
 * the x86_64 build run directly, the aarch64 one under `qemu-aarch64-static` (user-mode
 * emulation; .ci/run installs it), each as a child of this test on plain pipes, as a world runs
 * it. Every socket is a real TCP socket on 127.0.0.1 of this machine (never another address):
 * node's own servers and clients are the world's peers.
 */
import { type ChildProcessWithoutNullStreams, type SpawnSyncReturns, spawn, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { once } from 'node:events'
import { readFileSync, readlinkSync } from 'node:fs'
import { type AddressInfo, type Server, type Socket, connect as netConnect, createServer } from 'node:net'
import { join } from 'node:path'
import type { Duplex } from 'node:stream'
import { describe, expect, it } from 'vitest'
import { RELAY_WINDOW_BYTES } from '../../src/network/relay/protocol.ts'
import { RelayChannel, RelayConnectError, RelayListenError, type RelayPeer, RelayStream, RelayStreamError } from '../../src/network/relay/relay-channel.ts'
import { worldTool } from '../../src/providers/remote/world-tools/manifest.ts'
import { ROOT } from '../helpers/built-package.ts'

type Arch = 'x86_64' | 'aarch64'
const LOOPBACK = '127.0.0.1'

/** The build the world tools' manifest serves (made by `npm run build:world-tools`). */
function build(arch: Arch): string {
  const path = join(ROOT, 'dist', 'world-tools', `linux-${arch}`, 'dsh-relay')
  expect(worldTool('dsh-relay', arch).hostPath).toBe(path)
  return path
}

/** Start the build of `arch`: x86_64 directly, aarch64 under qemu-aarch64-static. */
function spawnBuild(arch: Arch, args: string[] = []): ChildProcessWithoutNullStreams {
  build(arch)
  return arch === 'x86_64'
    ? spawn(join(ROOT, 'dist', 'world-tools', 'linux-x86_64', 'dsh-relay'), args, { stdio: ['pipe', 'pipe', 'pipe'] })
    : spawn('qemu-aarch64-static', [build(arch), ...args], { stdio: ['pipe', 'pipe', 'pipe'] })
}

/** Run the build of `arch` to its end (as {@link spawnBuild}). */
function runBuild(arch: Arch, args: string[]): SpawnSyncReturns<string> {
  build(arch)
  return arch === 'x86_64'
    ? spawnSync(join(ROOT, 'dist', 'world-tools', 'linux-x86_64', 'dsh-relay'), args, { encoding: 'utf8' })
    : spawnSync('qemu-aarch64-static', [build(arch), ...args], { encoding: 'utf8' })
}

interface Started {
  child: ChildProcessWithoutNullStreams
  channel: RelayChannel
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  stderr: () => string
}

/**
 * Start a relay and open its channel.
 * @param kill - the transport's close kills the process (else it only ends stdin: the relay must end by itself).
 */
async function start(arch: Arch, kill = true): Promise<Started> {
  const child = spawnBuild(arch)
  let said = ''
  child.stderr.on('data', (chunk: Buffer) => { said += chunk.toString('utf8') })
  child.stdin.on('error', () => undefined)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(resolve => child.once('exit', (code, signal) => resolve({ code, signal })))
  const channel = await RelayChannel.open({ stdin: child.stdin, stdout: child.stdout, close: () => { if (kill) child.kill('SIGKILL') } }, `the ${arch} build`, { stderr: () => said })
  return { child, channel, exited, stderr: () => said }
}

/** Everything a readable side gives until its end. */
function collect(stream: Duplex): Promise<Buffer> {
  const chunks: Buffer[] = []
  stream.on('data', (chunk: Buffer) => chunks.push(chunk))
  return new Promise((resolve, reject) => {
    stream.once('end', () => resolve(Buffer.concat(chunks)))
    stream.once('error', reject)
  })
}

/** A node server on 127.0.0.1, port chosen by the kernel. */
async function serve(onConnection: (socket: Socket) => void): Promise<{ server: Server; port: number }> {
  const server = createServer({ allowHalfOpen: true }, onConnection)
  server.listen(0, LOOPBACK)
  await once(server, 'listening')
  return { server, port: (server.address() as AddressInfo).port }
}

/** A node client connected to 127.0.0.1:port (allowing half-open). */
async function dial(port: number): Promise<Socket> {
  const socket = netConnect({ host: LOOPBACK, port, allowHalfOpen: true })
  await once(socket, 'connect')
  return socket
}

/** The process's resident set (bytes), from /proc/PID/status VmRSS (proc(5)). */
function residentBytes(pid: number): number {
  const line = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(line?.[1]) * 1024
}

/** `bytes` of deterministic, incompressible-looking content (a counter through SHA-256). */
function content(bytes: number, seed: string): Buffer {
  const out = Buffer.allocUnsafe(bytes)
  for (let offset = 0, block = 0; offset < bytes; block++) offset += createHash('sha256').update(`${seed}:${block}`).digest().copy(out, offset)
  return out
}

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex')

/** Resolves when `condition` holds, checking at each turn of the event loop's timers. */
async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise(resolve => setTimeout(resolve, 5))
}

/** Write `data` in 64 KiB pieces, honouring backpressure; resolves once all is written and `end()` called. */
async function produce(stream: Duplex, data: Buffer, state: { written: number; blocked: boolean }): Promise<void> {
  for (let offset = 0; offset < data.length; offset += 65_536) {
    const more = stream.write(data.subarray(offset, offset + 65_536))
    state.written = Math.min(data.length, offset + 65_536)
    if (!more) {
      state.blocked = true
      await once(stream, 'drain')
      state.blocked = false
    }
  }
  stream.end()
}

describe.each(['x86_64', 'aarch64'] as const)('the %s build of dsh-relay', arch => {
  it('prints its version and exits 0, and says hello with its protocol, architecture, pid and namespaces', async () => {
    const version = runBuild(arch, ['--version'])
    expect([version.status, version.stdout]).toEqual([0, 'dsh-relay 3\n'])
    const { channel, child } = await start(arch)
    // This process's namespaces: the relay was started in them.
    expect(channel.info).toEqual({ protocol: '3', arch, pid: child.pid, netns: readlinkSync('/proc/self/ns/net'), userns: readlinkSync('/proc/self/ns/user') })
    expect(channel.alive).toBe(true)
    channel.close()
    expect(await channel.closed).toBeUndefined()
    expect(channel.alive).toBe(false)
  })

  it('listens on port 0, gives each accepted connection as a stream, and carries bytes and half-closes both ways', async () => {
    const { channel } = await start(arch)
    try {
      const accepted = Promise.withResolvers<{ stream: RelayStream; peer: RelayPeer; received: Promise<Buffer> }>()
      const listener = await channel.listen(LOOPBACK, 0, (stream, peer) => {
        stream.on('error', accepted.reject)
        accepted.resolve({ stream, peer, received: collect(stream) })
      })
      expect(listener.port).toBeGreaterThan(0)
      const client = await dial(listener.port)
      const clientReceived = collect(client)
      const clientClosed = once(client, 'close')
      const { stream, peer, received } = await accepted.promise
      expect(peer).toEqual({ host: LOOPBACK, port: client.localPort })
      // The process at the other end is this one, named just after the accept (sock_diag, or
      // /proc/net/tcp where qemu-user passes no NETLINK_SOCK_DIAG; then the holders' fds).
      if (stream.origin === undefined) await once(stream, 'origin')
      expect(stream.origin).toEqual({ pid: process.pid, command: readFileSync('/proc/self/comm', 'utf8').trim() })
      expect(stream.id >>> 31).toBe(1)
      const streamClosed = once(stream, 'close')
      // The world's client speaks and ends its sending; the stream reads it all, then its end.
      client.end('ping from the world')
      expect((await received).toString()).toBe('ping from the world')
      // Half-closed: the stream still sends, then ends; the world's client reads both.
      stream.write('pong ')
      stream.end('and the rest')
      expect((await clientReceived).toString()).toBe('pong and the rest')
      await Promise.all([streamClosed, clientClosed])
      expect([stream.destroyed, stream.errored]).toEqual([true, null])
      listener.close()
      expect(channel.alive).toBe(true)
    } finally {
      channel.close()
    }
  })

  it('connects inside the world and carries bytes both ways; a closed port, a taken one and a name are typed refusals', async () => {
    const { channel } = await start(arch)
    const serverGot = Promise.withResolvers<Buffer>()
    const { server, port } = await serve(socket => {
      collect(socket).then(got => {
        serverGot.resolve(got)
        socket.end(`server read ${got.length} bytes`)
      }, serverGot.reject)
    })
    try {
      const stream = await channel.connect(LOOPBACK, port)
      stream.on('error', () => undefined)
      const received = collect(stream)
      stream.end('hello, server')
      expect((await serverGot.promise).toString()).toBe('hello, server')
      expect((await received).toString()).toBe('server read 13 bytes')

      // A port nobody listens on: the one the server had, once closed.
      const closed = await serve(() => undefined)
      closed.server.close()
      await once(closed.server, 'close')
      const refused = await channel.connect(LOOPBACK, closed.port).then(() => undefined, (error: unknown) => error)
      expect(refused).toBeInstanceOf(RelayConnectError)
      expect([(refused as RelayConnectError).code, (refused as RelayConnectError).port]).toEqual(['ECONNREFUSED', closed.port])
      // The relay resolves no names.
      const named = await channel.connect('localhost', port).then(() => undefined, (error: unknown) => error)
      expect((named as RelayConnectError).code).toBe('EINVAL')
      // A port the node server holds.
      const taken = await channel.listen(LOOPBACK, port, () => undefined).then(() => undefined, (error: unknown) => error)
      expect(taken).toBeInstanceOf(RelayListenError)
      expect((taken as RelayListenError).code).toBe('EADDRINUSE')
      expect(channel.alive).toBe(true)
    } finally {
      channel.close()
      server.close()
    }
  })

  it('resets: destroy() resets the world\'s socket, and a reset in the world destroys the stream with ECONNRESET', async () => {
    const { channel } = await start(arch)
    const sockets: Socket[] = []
    const connected = Promise.withResolvers<void>()
    const { server, port } = await serve(socket => {
      sockets.push(socket)
      socket.on('error', () => undefined)
      connected.resolve()
    })
    try {
      const ours = await channel.connect(LOOPBACK, port)
      const oursFailed = once(ours, 'error').then(([error]) => error as unknown, (error: unknown) => error)
      await connected.promise
      // The world's peer resets: the relay reads ECONNRESET and sends X.
      sockets[0]!.resetAndDestroy()
      const error = await oursFailed
      expect(error).toBeInstanceOf(RelayStreamError)
      expect((error as RelayStreamError).code).toBe('ECONNRESET')

      // Our destroy(): the world's peer sees a reset.
      const second = Promise.withResolvers<Socket>()
      const { server: other, port: otherPort } = await serve(socket => second.resolve(socket))
      const theirs = await channel.connect(LOOPBACK, otherPort)
      const peer = await second.promise
      const peerFailed = once(peer, 'error').then(([failure]) => failure as NodeJS.ErrnoException)
      theirs.destroy()
      expect((await peerFailed).code).toBe('ECONNRESET')
      other.close()
      expect(channel.alive).toBe(true)
    } finally {
      channel.close()
      server.close()
    }
  })

  it('carries 20 MB each way through one stream exactly, within its window and bounded memory while both readers pause', async () => {
    const { child, channel } = await start(arch)
    try {
      const up = content(20_000_000, 'up')
      const down = content(20_000_000, 'down')
      const accepted = Promise.withResolvers<RelayStream>()
      const listener = await channel.listen(LOOPBACK, 0, stream => {
        stream.on('error', accepted.reject)
        accepted.resolve(stream)
      })
      const client = await dial(listener.port)
      client.on('error', () => undefined)
      const stream = await accepted.promise
      // The relay's memory, sampled all along.
      let maxResident = residentBytes(child.pid!)
      const sampler = setInterval(() => { maxResident = Math.max(maxResident, residentBytes(child.pid!)) }, 20)
      try {
        // Both readers paused: the world's client does not read, nor does the stream.
        client.pause()
        const upState = { written: 0, blocked: false }
        const downState = { written: 0, blocked: false }
        const uploading = produce(client, up, upState)
        const downloading = produce(stream, down, downState)
        // The relay sent exactly one window to the paused stream, and then read no more.
        await until(() => stream.readableLength === RELAY_WINDOW_BYTES && upState.blocked && downState.blocked)
        expect(stream.readableLength).toBe(RELAY_WINDOW_BYTES)
        for (let sample = 0; sample < 5; sample++) {
          await new Promise(resolve => setImmediate(resolve))
          maxResident = Math.max(maxResident, residentBytes(child.pid!))
        }
        expect(stream.readableLength).toBe(RELAY_WINDOW_BYTES)
        // Both resume; every byte arrives, in order.
        const started = performance.now()
        const received = Promise.all([collect(stream), collect(client), uploading, downloading])
        // An explicit pause() is not undone by a 'data' listener.
        client.resume()
        const [gotUp, gotDown] = await received
        const seconds = (performance.now() - started) / 1000
        expect([gotUp.length, sha256(gotUp)]).toEqual([up.length, sha256(up)])
        expect([gotDown.length, sha256(gotDown)]).toEqual([down.length, sha256(down)])
        console.log(`[dsh-relay ${arch}] 20 MB each way through one stream after the pause: ${(40 / seconds).toFixed(1)} MB/s both ways together; max RSS ${(maxResident / 1e6).toFixed(1)} MB`)
      } finally {
        clearInterval(sampler)
      }
      // A static build holds at most its buffers (a window per stream, its queues); qemu adds its own.
      expect(maxResident).toBeLessThan(arch === 'x86_64' ? 20_000_000 : 64_000_000)
      listener.close()
    } finally {
      channel.close()
    }
  }, 120_000)

  it('carries 50 concurrent streams, each its own bytes', async () => {
    const { channel } = await start(arch)
    const { server, port } = await serve(socket => {
      socket.on('error', () => undefined)
      // An echo: everything back, then the end.
      socket.pipe(socket)
    })
    try {
      const payloads = Array.from({ length: 50 }, (_, index) => content(100_000 + index, `stream ${index}`))
      const echoed = await Promise.all(payloads.map(async payload => {
        const stream = await channel.connect(LOOPBACK, port)
        stream.on('error', () => undefined)
        const received = collect(stream)
        stream.end(payload)
        return received
      }))
      expect(echoed.map(sha256)).toEqual(payloads.map(sha256))
      expect(channel.alive).toBe(true)
    } finally {
      channel.close()
      server.close()
    }
  }, 120_000)

  it('exits 0 at stdin EOF, closing its listener and its connections by itself', async () => {
    const { channel, exited } = await start(arch, false)
    const accepted = Promise.withResolvers<RelayStream>()
    const listener = await channel.listen(LOOPBACK, 0, stream => {
      stream.on('error', () => undefined)
      accepted.resolve(stream)
    })
    const client = await dial(listener.port)
    client.on('error', () => undefined)
    // The world's client sees the relay's end of the connection (it reads EOF).
    const clientEnded = once(client, 'end')
    await accepted.promise
    // close() ends stdin; this transport's close kills nothing.
    channel.close()
    expect(await exited).toEqual({ code: 0, signal: null })
    await clientEnded
    client.destroy()
    const refused = netConnect({ host: LOOPBACK, port: listener.port })
    const [error] = await once(refused, 'error') as [NodeJS.ErrnoException]
    expect(error.code).toBe('ECONNREFUSED')
  })
})
