/**
 * Engine endpoints of a swarm's nodes: where this client reaches each node's Docker engine
 * (a unix socket, tcp with TLS, or ssh://), and which swarm node each one is, learnt from the
 * engine's own `/info` (`Swarm.NodeID`), never from configuration.
 *
 * Each endpoint is one {@link EngineConnection}: a dockerode client whose unix and TLS sockets
 * pass through an agent that knows them all, so a node declared lost (node-watch.ts) can end
 * every request and hijacked stream on it at once, including ones the peer will never close.
 * @module dsh-remote-worlds/providers/swarm/endpoints
 */
import { readFileSync } from 'node:fs'
import http from 'node:http'
import { inspect } from 'node:util'
import https from 'node:https'
import type { Duplex } from 'node:stream'
import type { Socket } from 'node:net'
import Docker from 'dockerode'
import { InvalidArgumentError } from '../remote/errors.ts'
import { engineError } from '../docker/docker-world.ts'

/**
 * One engine endpoint: `unix:///run/docker.sock`, `tcp://HOST:PORT` (TLS required: `tls`
 * names the PEM files, as `docker --tlsverify --tlscacert --tlscert --tlskey`), or
 * `ssh://USER@HOST[:PORT]` (dockerode runs `docker system dial-stdio` on the host over ssh2;
 * `identity` names the private key, else ssh-agent's SSH_AUTH_SOCK).
 */
export interface EngineEndpoint {
  /** The engine's address (see the interface). */
  host: string
  /** TLS files of a `tcp://` endpoint: the CA that signed the engine's certificate, and the client's certificate and key. */
  tls?: { ca: string; cert: string; key: string } | undefined
  /** Private key file of an `ssh://` endpoint. */
  identity?: string | undefined
}

/** SSH keepalive of `ssh://` endpoints: interval (ms) and unanswered probes before ssh2 drops the connection. */
const SSH_KEEPALIVE = { keepaliveInterval: 1_000, keepaliveCountMax: 3 } as const

/**
 * dockerode's connection options for an endpoint.
 * @throws InvalidArgumentError for an address that is none of the three forms, a `tcp://`
 *   endpoint without `tls` (the engine's API is root on that node: never in clear text), TLS
 *   files that cannot be read, or `tls`/`identity` on the wrong form.
 */
export function dockerOptions(endpoint: EngineEndpoint): Docker.DockerOptions {
  const { host } = endpoint
  if (host.startsWith('unix://')) {
    if (endpoint.tls !== undefined || endpoint.identity !== undefined) throw new InvalidArgumentError(`engine endpoint ${host}: tls and identity apply to tcp:// and ssh:// endpoints only`)
    const socketPath = host.slice('unix://'.length)
    if (!socketPath.startsWith('/')) throw new InvalidArgumentError(`engine endpoint ${host}: a unix socket needs an absolute path (unix:///run/docker.sock)`)
    return { socketPath }
  }
  let url: URL
  try {
    url = new URL(host)
  } catch {
    throw new InvalidArgumentError(`engine endpoint ${JSON.stringify(host)}: use unix:///PATH, tcp://HOST:PORT (with tls) or ssh://USER@HOST[:PORT]`)
  }
  if (url.protocol === 'tcp:') {
    if (endpoint.tls === undefined) throw new InvalidArgumentError(`engine endpoint ${host}: a tcp endpoint needs tls ({ ca, cert, key } PEM files, as docker --tlsverify): the engine's API is root on its node and is never used in clear text`)
    if (endpoint.identity !== undefined) throw new InvalidArgumentError(`engine endpoint ${host}: identity applies to ssh:// endpoints only`)
    const read = (what: string, path: string): Buffer => {
      try {
        return readFileSync(path)
      } catch (error) {
        throw new InvalidArgumentError(`engine endpoint ${host}: cannot read its TLS ${what} ${path}: ${(error as Error).message}`)
      }
    }
    return { protocol: 'https', host: url.hostname, port: Number(url.port || 2376), ca: read('CA', endpoint.tls.ca), cert: read('certificate', endpoint.tls.cert), key: read('key', endpoint.tls.key) }
  }
  if (url.protocol === 'ssh:') {
    if (endpoint.tls !== undefined) throw new InvalidArgumentError(`engine endpoint ${host}: tls applies to tcp:// endpoints only`)
    let privateKey: Buffer | undefined
    if (endpoint.identity !== undefined) {
      try {
        privateKey = readFileSync(endpoint.identity)
      } catch (error) {
        throw new InvalidArgumentError(`engine endpoint ${host}: cannot read its identity ${endpoint.identity}: ${(error as Error).message}`)
      }
    }
    return {
      protocol: 'ssh',
      host: url.hostname,
      port: Number(url.port || 22),
      ...(url.username !== '' ? { username: decodeURIComponent(url.username) } : {}),
      sshOptions: { ...SSH_KEEPALIVE, ...(privateKey !== undefined ? { privateKey } : { agent: process.env.SSH_AUTH_SOCK }) },
    } as Docker.DockerOptions
  }
  throw new InvalidArgumentError(`engine endpoint ${host}: use unix:///PATH, tcp://HOST:PORT (with tls) or ssh://USER@HOST[:PORT]`)
}

/**
 * The agent of a unix or TLS endpoint: it keeps every socket it opens until the socket closes.
 * It inspects as one word: docker-modem 5 formats every request's options with
 * `util.inspect(options, { showHidden: true, depth: null })` whether or not its debug log is on
 * (modem.js buildRequest), and an agent in those options is walked with its in-flight sockets
 * (measured: 20 worlds opening at once spent 140 s of the client's main thread in inspect,
 * blocking it for 20 s at a time).
 */
function trackingAgent(base: typeof http.Agent | typeof https.Agent, connection: { sockets: Set<Socket>; failure: Error | undefined }): http.Agent {
  const Agent = base as typeof http.Agent
  return new (class extends Agent {
    [inspect.custom](): string {
      return 'EngineConnection agent'
    }

    override createConnection(options: object, callback?: (error: Error | null, socket: Duplex) => void): Duplex | undefined {
      if (connection.failure !== undefined) {
        callback?.(connection.failure, undefined as unknown as Duplex)
        return undefined
      }
      const socket = (super.createConnection as (options: object, callback?: unknown) => Socket | undefined)(options, callback)
      if (socket !== undefined) {
        connection.sockets.add(socket)
        socket.once('close', () => connection.sockets.delete(socket))
      }
      return socket
    }
  })()
}

/** What the engine of an endpoint says about itself (`GET /info`). */
export interface EngineIdentity {
  /** The swarm node id (`Swarm.NodeID`); empty when the engine is in no swarm. */
  nodeId: string
  /** The engine's host name (`Name`): the node's hostname in the swarm. */
  name: string
  /** `Swarm.LocalNodeState`: `active` in a swarm. */
  state: string
  /** True when the node is a manager (`Swarm.ControlAvailable`). */
  manager: boolean
}

/** One engine endpoint's connection (see the module documentation). */
export class EngineConnection {
  /** The endpoint as configured. */
  readonly endpoint: EngineEndpoint
  /** The engine's dockerode client. */
  readonly docker: Docker
  private readonly state: { sockets: Set<Socket>; failure: Error | undefined } = { sockets: new Set(), failure: undefined }

  /** @throws InvalidArgumentError for an endpoint {@link dockerOptions} refuses. */
  constructor(endpoint: EngineEndpoint) {
    this.endpoint = endpoint
    const options = dockerOptions(endpoint)
    // ssh:// endpoints keep dockerode's own agent (one SSH connection per request; ssh2's keepalive).
    const agent = options.protocol === 'ssh' ? undefined : trackingAgent(options.protocol === 'https' ? https.Agent : http.Agent, this.state)
    this.docker = new Docker({ ...options, ...(agent !== undefined ? { agent } : {}) })
  }

  /** The endpoint's address, for messages. */
  get host(): string {
    return this.endpoint.host
  }

  /** The error every request on this connection fails with once {@link fail} was called. */
  get failure(): Error | undefined {
    return this.state.failure
  }

  /**
   * The engine's own account of itself.
   * @throws EngineUnavailableError when the engine does not answer; TransportError otherwise.
   */
  async identity(): Promise<EngineIdentity> {
    try {
      const info = await this.docker.info() as { Name?: string; Swarm?: { NodeID?: string; LocalNodeState?: string; ControlAvailable?: boolean } }
      return { nodeId: info.Swarm?.NodeID ?? '', name: info.Name ?? '', state: info.Swarm?.LocalNodeState ?? 'inactive', manager: info.Swarm?.ControlAvailable === true }
    } catch (error) {
      throw engineError(error, `docker engine ${this.host}`)
    }
  }

  /**
   * True when the engine answers `GET /_ping` within `boundMs`.
   * @param boundMs - how long to wait for the answer (ms).
   */
  async answers(boundMs: number): Promise<boolean> {
    if (this.state.failure !== undefined) return false
    const abort = new AbortController()
    const timer = setTimeout(() => abort.abort(), boundMs)
    try {
      await (this.docker.ping as (options: { abortSignal: AbortSignal }) => Promise<unknown>)({ abortSignal: abort.signal })
      return true
    } catch {
      return false
    } finally {
      clearTimeout(timer)
    }
  }

  /**
   * End every request and stream on this connection with `error`, and fail every later one
   * with it. Idempotent (the first error stays). Unix and TLS endpoints only; an ssh://
   * endpoint's connections end by ssh2's keepalive.
   */
  fail(error: Error): void {
    this.state.failure ??= error
    for (const socket of this.state.sockets) socket.destroy(this.state.failure)
    this.state.sockets.clear()
  }
}
