/**
 * A proxy that can cut a connection the way a network does: every byte between a client and a
 * server passes through it (a TCP port on 127.0.0.1, or a Unix socket), and `cut(ms)` drops
 * every live connection and refuses new ones for `ms` (they are accepted and destroyed at once),
 * as a dropped link does to the client's side. Loopback only.
 */
import { type Server, type Socket, connect, createServer } from 'node:net'
import { setTimeout as delay } from 'node:timers/promises'

export interface SocketCut {
  /** Where clients connect: `{ port }` on 127.0.0.1, or `{ path }` of a Unix socket. */
  readonly listening: { port: number } | { path: string }
  /** Live proxied connections. */
  readonly connections: number
  /** Drop every connection now and refuse new ones for `ms`. */
  cut(ms: number): Promise<void>
  close(): Promise<void>
}

/**
 * Start a proxy to `target` (`{ port }` on 127.0.0.1, or `{ path }`), listening on `listen`
 * (`{ port: 0 }` picks a free port; `{ path }` a Unix socket path).
 */
export async function startSocketCut(target: { port: number } | { path: string }, listen: { port: number } | { path: string }): Promise<SocketCut> {
  const live = new Set<Socket>()
  let refusing = false
  // Half-open both ways: a client that ends its side (an exec's stdin EOF) still gets the rest.
  const server: Server = createServer({ allowHalfOpen: true }, client => {
    if (refusing) {
      client.destroy()
      return
    }
    const upstream = 'path' in target ? connect({ path: target.path, allowHalfOpen: true }) : connect({ port: target.port, host: '127.0.0.1', allowHalfOpen: true })
    live.add(client)
    live.add(upstream)
    const drop = (): void => {
      client.destroy()
      upstream.destroy()
      live.delete(client)
      live.delete(upstream)
    }
    // An error, or a side closed both ways, ends the pair.
    client.on('error', drop)
    upstream.on('error', drop)
    client.on('close', drop)
    upstream.on('close', drop)
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    if ('path' in listen) server.listen(listen.path, resolve)
    else server.listen(listen.port, '127.0.0.1', resolve)
  })
  const address = server.address()
  const listening = 'path' in listen ? { path: listen.path } : { port: typeof address === 'object' && address !== null ? address.port : listen.port }
  return {
    listening,
    get connections() { return live.size / 2 },
    async cut(ms: number) {
      refusing = true
      for (const socket of [...live]) socket.destroy()
      live.clear()
      await delay(ms)
      refusing = false
    },
    async close() {
      for (const socket of [...live]) socket.destroy()
      await new Promise<void>(resolve => server.close(() => resolve()))
    },
  }
}
