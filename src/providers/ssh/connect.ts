/**
 * Establish one authenticated SSH connection (ssh2 `Client`), classifying every way it can fail
 * into a typed error, fast: name resolution, TCP connect, SSH identification and key exchange,
 * host-key trust, authentication. The TCP socket is ours (ssh2 gets it as `sock`), so each phase
 * is known exactly and `setNoDelay(true)` holds from the first byte (without it every channel
 * round trip costs ~40 ms of Nagle + delayed-ACK, DESIGN.md section 5).
 * @module dsh-remote-worlds/providers/ssh/connect
 */
import { lookup as dnsLookup } from 'node:dns/promises'
import { isIP, Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import ssh2 from 'ssh2'
import type { AnyAuthMethod, Client, ConnectConfig, ParsedKey } from 'ssh2'
import { RemoteWorldError, TransportError } from '../remote/errors.ts'
import {
  ConnectionRefusedError,
  ConnectTimeoutError,
  HandshakeTimeoutError,
  HostNotFoundError,
  SshAuthenticationError,
} from './errors.ts'
import { type HostKeyTrust, checkHostKey, fingerprintOf, knownHostsName, preferredHostKeyAlgorithms } from './known-hosts.ts'
import { type ResolvedSshTarget, describeTarget } from './target.ts'

/** Credentials to offer, in this order: keys, agent, password (also via keyboard-interactive). */
export interface SshCredentials {
  /** Parsed private keys with labels for messages (e.g. the file name). */
  keys: readonly { label: string; key: ParsedKey }[]
  /** ssh-agent socket path (SSH_AUTH_SOCK); never forwarded to the remote. */
  agent: string | undefined
  password: string | undefined
  /**
   * Identity files that were named (an ssh config `IdentityFile`, or a default `~/.ssh/id_*`
   * that exists) but could not be used, each with why (`FILE (EACCES: permission denied)`).
   * They are skipped, as OpenSSH skips them (an agent may hold the key); an authentication
   * failure names them.
   */
  skipped?: readonly string[]
}

/** Timing of connection establishment and liveness. */
export interface SshTimings {
  /** Bound of the TCP connect, and separately of the SSH handshake incl. authentication (ms). */
  connectTimeoutMs: number
  /** Keepalive probe interval (ms); a peer silent for interval x (countMax + 1) is dead. */
  keepaliveIntervalMs: number
  keepaliveCountMax: number
}

/** Resolve a host name to one address (default: the system resolver, `dns.lookup`). */
export type HostLookup = (hostname: string) => Promise<{ address: string }>

/** One hop to connect to. */
export interface SshHop {
  target: ResolvedSshTarget
  credentials: SshCredentials
  trust: HostKeyTrust
}

/** A connected, authenticated client and facts about it. */
export interface ConnectedClient {
  client: Client
  /** The jump-host clients this connection tunnels through, outermost first (closed with it). */
  via: Client[]
  /** Fingerprint of the verified host key. */
  hostKeyFingerprint: string
  /** Wall time of TCP + handshake + authentication (ms). */
  connectMs: number
}

const defaultLookup: HostLookup = hostname => dnsLookup(hostname)

/**
 * Connect to `hop` (through `jumps`, outermost first, each a full hop of its own).
 * @throws HostNotFoundError, ConnectionRefusedError, ConnectTimeoutError, HandshakeTimeoutError,
 *   UnknownHostKeyError, HostKeyChangedError, HostKeyRevokedError, SshAuthenticationError, or
 *   TransportError for anything else (e.g. the server closed the connection during the handshake).
 */
export async function connectSsh(hop: SshHop, jumps: readonly SshHop[], timings: SshTimings, lookup: HostLookup = defaultLookup): Promise<ConnectedClient> {
  const started = performance.now()
  const via: Client[] = []
  try {
    let previous: Client | undefined
    for (const jump of jumps) {
      const connected = await connectHop(jump, timings, lookup, previous)
      via.push(connected.client)
      previous = connected.client
    }
    const connected = await connectHop(hop, timings, lookup, previous)
    // Closing the target connection closes its tunnels.
    connected.client.once('close', () => { for (const client of via) client.end() })
    return { ...connected, via, connectMs: performance.now() - started }
  } catch (error) {
    for (const client of via) client.end()
    throw error
  }
}

async function connectHop(hop: SshHop, timings: SshTimings, lookup: HostLookup, through: Client | undefined): Promise<{ client: Client; hostKeyFingerprint: string }> {
  const { target } = hop
  const destination = describeTarget(target)
  const sock = through === undefined ? await openSocket(target, timings, lookup) : await forward(through, target)
  const knownName = knownHostsName(target.host, target.port)
  let hostKeyError: RemoteWorldError | undefined
  let hostKeyFingerprint = ''
  const tried: string[] = []
  const methods = authMethods(hop)
  let next = 0
  let handshakeDone = false
  const client = new ssh2.Client()
  const preferred = preferredHostKeyAlgorithms(hop.trust, knownName)
  const config: ConnectConfig = {
    sock: sock as ConnectConfig['sock'],
    username: target.user,
    readyTimeout: timings.connectTimeoutMs,
    keepaliveInterval: timings.keepaliveIntervalMs,
    keepaliveCountMax: timings.keepaliveCountMax,
    agentForward: false,
    ...(preferred.length > 0 ? { algorithms: { serverHostKey: { remove: preferred, prepend: preferred } as never } } : {}),
    hostVerifier: (key: Buffer) => {
      hostKeyError = checkHostKey(hop.trust, knownName, key)
      if (hostKeyError === undefined) hostKeyFingerprint = fingerprintOf(key)
      return hostKeyError === undefined
    },
    // Offer each configured method the server still accepts, in order; skip the rest.
    authHandler: (methodsLeft: readonly string[] | null, _partialSuccess, callback) => {
      while (next < methods.length) {
        const method = methods[next++]!
        // The first call has no list yet (null); later calls carry the server's remaining methods.
        if (methodsLeft !== null && !methodsLeft.includes(method.wire)) continue
        tried.push(method.label)
        callback(method.auth)
        return
      }
      // ssh2 ends authentication when the handler answers false.
      ;(callback as (next: AnyAuthMethod | false) => void)(false)
    },
  }
  return new Promise((resolve, reject) => {
    let settled = false
    const fail = (error: RemoteWorldError): void => {
      if (settled) return
      settled = true
      client.removeAllListeners('ready')
      client.on('error', () => undefined)
      client.destroy()
      sock.destroy()
      reject(error)
    }
    client.once('handshake', () => { handshakeDone = true })
    client.once('ready', () => {
      if (settled) return
      settled = true
      client.removeListener('close', onClose)
      resolve({ client, hostKeyFingerprint })
    })
    client.on('error', (error: Error & { level?: string }) => {
      if (settled) return
      // An unreachable agent only skips the agent method; ssh2 goes on with the next one.
      if (error.level === 'agent') return
      if (hostKeyError !== undefined) return fail(hostKeyError)
      if (error.level === 'client-authentication') return fail(new SshAuthenticationError(destination, tried, { cause: error, skipped: hop.credentials.skipped }))
      if (error.level === 'client-timeout') {
        // ssh2 records the server's identification line once it arrived (no public accessor).
        const sawBanner = (client as unknown as { _remoteVer?: string })._remoteVer !== undefined
        return fail(new HandshakeTimeoutError(destination, !sawBanner ? 'banner' : handshakeDone ? 'auth' : 'kex', timings.connectTimeoutMs))
      }
      fail(new TransportError(`SSH connection to ${destination} failed during the handshake: ${error.message}`, { cause: error }))
    })
    const onClose = (): void => {
      fail(hostKeyError ?? new TransportError(`SSH connection to ${destination} closed during the handshake`))
    }
    client.once('close', onClose)
    client.connect(config)
  })
}

interface AuthMethod {
  /** The method name in SSH_MSG_USERAUTH_FAILURE lists. */
  wire: 'publickey' | 'password' | 'keyboard-interactive'
  label: string
  auth: AnyAuthMethod
}

function authMethods(hop: SshHop): AuthMethod[] {
  const username = hop.target.user
  const methods: AuthMethod[] = []
  for (const { label, key } of hop.credentials.keys) {
    methods.push({ wire: 'publickey', label: `publickey:${label}`, auth: { type: 'publickey', username, key } })
  }
  if (hop.credentials.agent !== undefined) {
    methods.push({ wire: 'publickey', label: 'agent', auth: { type: 'agent', username, agent: hop.credentials.agent } })
  }
  const password = hop.credentials.password
  if (password !== undefined) {
    methods.push({ wire: 'password', label: 'password', auth: { type: 'password', username, password } })
    // Servers that take passwords only through PAM ask for them with keyboard-interactive.
    methods.push({
      wire: 'keyboard-interactive',
      label: 'keyboard-interactive',
      auth: {
        type: 'keyboard-interactive',
        username,
        prompt: (_name, _instructions, _lang, prompts, finish) => finish(prompts.map(prompt => (/password/i.test(prompt.prompt) && prompt.echo !== true ? password : ''))),
      },
    })
  }
  return methods
}

/** Resolve and TCP-connect, with typed failures; the socket has TCP_NODELAY and keepalive set. */
async function openSocket(target: ResolvedSshTarget, timings: SshTimings, lookup: HostLookup): Promise<Socket> {
  const destination = describeTarget(target)
  let address = target.host
  if (isIP(address) === 0) {
    try {
      address = (await lookup(target.host)).address
    } catch (error) {
      throw new HostNotFoundError(target.host, { cause: error })
    }
  }
  const socket = new Socket()
  socket.setNoDelay(true)
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new ConnectTimeoutError(destination, timings.connectTimeoutMs))
    }, timings.connectTimeoutMs)
    socket.once('connect', () => {
      clearTimeout(timer)
      socket.removeAllListeners('error')
      socket.setNoDelay(true)
      resolve(socket)
    })
    socket.once('error', (error: Error & { code?: string }) => {
      clearTimeout(timer)
      socket.destroy()
      if (error.code === 'ECONNREFUSED') reject(new ConnectionRefusedError(destination, { cause: error }))
      else if (error.code === 'ETIMEDOUT') reject(new ConnectTimeoutError(destination, timings.connectTimeoutMs, { cause: error }))
      else reject(new TransportError(`TCP connection to ${destination} failed: ${error.code ?? error.message}`, { cause: error }))
    })
    socket.connect({ host: address, port: target.port })
  })
}

/** A direct-tcpip channel through a jump host, used as the next hop's socket. */
function forward(through: Client, target: ResolvedSshTarget): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    through.forwardOut('127.0.0.1', 0, target.host, target.port, (error, channel) => {
      if (error !== undefined && error !== null) {
        const refused = /refused|connect failed/i.test(error.message) || (error as { reason?: number }).reason === 2
        reject(refused
          ? new ConnectionRefusedError(`${describeTarget(target)} (through the jump host)`, { cause: error })
          : new TransportError(`the jump host could not open a tunnel to ${describeTarget(target)}: ${error.message}`, { cause: error }))
        return
      }
      resolve(channel)
    })
  })
}
