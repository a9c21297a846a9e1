/**
 * Ports into the world: a listener on this machine whose every connection is carried by the
 * world's relay (src/network/relay/) to a port on the world's own loopback, as `ssh -L` does
 * for a host. The world needs no network for it (a confined container keeps `lo` only), and
 * nothing is published by the engine.
 *
 * `--forward [HOST_ADDR:]HOST_PORT:WORLD_PORT` (the CLI), {@link parseForwardSpec} here: the
 * host side binds 127.0.0.1 unless the user names another address; HOST_PORT 0 takes a free
 * one. A connection to a world port where nothing listens is closed at once, after the world
 * said why (ECONNREFUSED): the forward stays and the next connection tries again.
 *
 * A dev container's `forwardPorts` (src/devcontainer/ports.ts, by way of the CLI's target) are
 * specs with {@link ForwardSpec.anyPortIfTaken}: 127.0.0.1 on the same port, else any free
 * port, as VS Code forwards them; {@link PortForward.takenPort} says which port was taken.
 * @module dsh-remote-worlds/network/port-forward
 */
import { once } from 'node:events'
import { type AddressInfo, type Server, type Socket, createServer, isIP } from 'node:net'
import { parsePort } from './names.ts'
import { RelayConnectError, type RelayStream } from './relay/relay-channel.ts'

/** A `--forward` that is not `[HOST_ADDR:]HOST_PORT:WORLD_PORT`. */
export class InvalidForwardError extends Error {
  readonly code = 'INVALID_FORWARD'
  constructor(readonly text: string, problem: string) {
    super(`invalid --forward ${JSON.stringify(text)}: ${problem}; the form is [HOST_ADDR:]HOST_PORT:WORLD_PORT (HOST_PORT 0: any free port; HOST_ADDR an IP literal, IPv6 in brackets; default 127.0.0.1)`)
    this.name = 'InvalidForwardError'
  }
}

/** One forward, parsed. */
export interface ForwardSpec {
  /** The address the host side binds (an IP literal, no brackets). */
  hostAddress: string
  /** The host port; 0 takes a free one. */
  hostPort: number
  /** The port on the world's 127.0.0.1. */
  worldPort: number
  /** A label for messages (devcontainer.json `portsAttributes`' `label`). */
  label?: string | undefined
  /**
   * When the host port is taken (EADDRINUSE), listen on any free port of the same address
   * instead of failing (a dev container's `forwardPorts`, as VS Code does). Default false.
   */
  anyPortIfTaken?: boolean | undefined
}

/**
 * Parse `[HOST_ADDR:]HOST_PORT:WORLD_PORT`; a spec already parsed (a dev container's port, with
 * its label) is checked and given back as a copy.
 * @throws InvalidForwardError naming what is wrong.
 */
export function parseForwardSpec(text: string | ForwardSpec): ForwardSpec {
  if (typeof text !== 'string') {
    const shown = `${text.hostAddress}:${text.hostPort}:${text.worldPort}`
    if (isIP(text.hostAddress) === 0) throw new InvalidForwardError(shown, `${JSON.stringify(text.hostAddress)} is not an IP address`)
    if (!Number.isInteger(text.hostPort) || text.hostPort < 0 || text.hostPort > 65_535) throw new InvalidForwardError(shown, `host port ${text.hostPort} is not 0..65535`)
    if (!Number.isInteger(text.worldPort) || text.worldPort < 1 || text.worldPort > 65_535) throw new InvalidForwardError(shown, `world port ${text.worldPort} is not 1..65535`)
    return { ...text }
  }
  let rest = text
  let hostAddress = '127.0.0.1'
  const bracketed = /^\[([^\]]+)\]:(.*)$/.exec(rest)
  if (bracketed !== null) {
    hostAddress = bracketed[1]!
    rest = bracketed[2]!
  }
  const parts = rest.split(':')
  if (bracketed === null && parts.length === 3) {
    hostAddress = parts.shift()!
  }
  if (parts.length !== 2) throw new InvalidForwardError(text, 'expected two ports')
  if (isIP(hostAddress) === 0) throw new InvalidForwardError(text, `${JSON.stringify(hostAddress)} is not an IP address`)
  const hostPort = parts[0] === '0' ? 0 : parsePort(parts[0]!)
  const worldPort = parsePort(parts[1]!)
  if (hostPort === undefined) throw new InvalidForwardError(text, `host port ${JSON.stringify(parts[0])} is not 0..65535`)
  if (worldPort === undefined) throw new InvalidForwardError(text, `world port ${JSON.stringify(parts[1])} is not 1..65535`)
  return { hostAddress, hostPort, worldPort }
}

/** A live forward. */
export interface PortForward {
  readonly spec: ForwardSpec
  /** The host address and port it listens on (the port chosen when the spec said 0, or when its port was taken). */
  readonly host: { address: string; port: number }
  /** The spec's host port, when it was taken and {@link ForwardSpec.anyPortIfTaken} took another; else undefined. */
  readonly takenPort?: number | undefined
  /** Connections carried so far, and those the world refused (no listener on its port). */
  counts(): { connections: number; refused: number }
  /** Stop listening and end every carried connection. Idempotent. */
  close(): Promise<void>
}

/**
 * Listen on the host side of `spec` and carry each connection to the world's port.
 * @param connect - opens a stream to the world's 127.0.0.1:PORT (the relay's `connect`, by way of
 *   the world's network: it starts or restarts the relay when needed).
 * @param onRefused - told when the world refused a connection (nothing listens on its port).
 * @throws the host listener's error (EADDRINUSE, EACCES) as node gives it; EADDRINUSE only
 *   when the spec has no {@link ForwardSpec.anyPortIfTaken} (else any free port is taken).
 */
export async function startPortForward(spec: ForwardSpec, connect: (port: number) => Promise<RelayStream>, onRefused: (error: RelayConnectError) => void = () => {}): Promise<PortForward> {
  const sockets = new Set<Socket>()
  const totals = { connections: 0, refused: 0 }
  // allowHalfOpen: a client that ends its sending (a request, then EOF, as `nc -N` does) still
  // reads the world's whole answer; node would otherwise end this side at once, cutting it.
  const server: Server = createServer({ noDelay: true, allowHalfOpen: true }, socket => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    // Held until the world's side is there: bytes the client sends first wait in the socket.
    socket.pause()
    connect(spec.worldPort).then(stream => {
      totals.connections += 1
      stream.on('error', () => socket.destroy())
      socket.on('error', () => stream.destroy())
      if (socket.destroyed) {
        stream.destroy()
        return
      }
      socket.pipe(stream)
      stream.pipe(socket)
      socket.resume()
    }, (error: unknown) => {
      if (error instanceof RelayConnectError) {
        totals.refused += 1
        onRefused(error)
      }
      socket.destroy()
    })
  })
  const listen = async (port: number): Promise<void> => {
    server.listen(port, spec.hostAddress)
    await Promise.race([once(server, 'listening'), once(server, 'error').then(([error]) => { throw error })])
  }
  let takenPort: number | undefined
  try {
    await listen(spec.hostPort)
  } catch (error) {
    if (spec.anyPortIfTaken !== true || spec.hostPort === 0 || (error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error
    takenPort = spec.hostPort
    await listen(0)
  }
  const address = server.address() as AddressInfo
  let closing: Promise<void> | undefined
  return {
    spec,
    host: { address: address.address, port: address.port },
    ...(takenPort !== undefined ? { takenPort } : {}),
    counts: () => ({ ...totals }),
    close: () => closing ??= new Promise<void>(resolve => {
      server.close(() => resolve())
      for (const socket of sockets) socket.destroy()
    }),
  }
}
