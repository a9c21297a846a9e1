/**
 * The client half of a world's egress: every connection the world's HTTP proxy port accepted
 * (the relay in the world carries it here, src/network/relay/) is judged and dialed by this
 * client, never by the world. The world has no network interface but `lo` and no resolver:
 * the names it asks for are resolved here (resolve.ts), and only a connection the policy
 * allows (rules.ts, deny wins) is dialed, from this machine.
 *
 * One connection, in order:
 * 1. the proxy request head (http-proxy-request.ts), within {@link HEAD_TIMEOUT_MS}: `CONNECT
 *    host:port` (HTTPS, and any TCP a client tunnels) or an absolute-form request (plain HTTP);
 * 2. the verdict: a name is resolved only when a rule allows it (or `--resolve` answers it for an
 *    address rule to judge), so
 *    no lookup carries what a world chose to ask; its addresses are then judged with the name
 *    (a deny CIDR wins) and the first allowed one dialed; an IP literal is judged by the
 *    address rules alone;
 * 3. a refusal is an HTTP error whose body names the rule or says that none allowed it (the
 *    agent reads it: curl, pip and git print it), a failed dial a 502 naming why;
 * 4. for a CONNECT, the 200, then the first bytes the world sends: a TLS ClientHello whose
 *    server name (SNI) is not the CONNECT host is refused by closing both sides (domain
 *    fronting: the rules judged the CONNECT host, so the hello may name only that one);
 * 5. bytes both ways, each half closed when its side ends, and one record in the egress log
 *    (egress-log.ts) when the connection is over, with the bytes each way.
 * @module dsh-remote-worlds/network/egress-gateway
 */
import { type Socket, connect, isIP } from 'node:net'
import type { Duplex } from 'node:stream'
import type { EgressLog, EgressRecord } from './egress-log.ts'
import { formatAuthority } from './names.ts'
import { parseProxyRequestHead, proxyConnected, proxyResponse } from './http-proxy-request.ts'
import type { EgressResolver } from './resolve.ts'
import { type EgressVerdict, type LivePolicy, decide } from './rules.ts'
import { readServerName } from './tls-client-hello.ts'

/** How long a world's connection may take to send its request head, and a tunnel its first TLS bytes (ms). */
export const HEAD_TIMEOUT_MS = 30_000

/** Dials `address`:`port` from this machine: net.connect by default. */
export type Dial = (address: string, port: number) => Socket

/** Options of {@link EgressGateway}. */
export interface EgressGatewayOptions {
  /** The world, as the log names it (e.g. `docker container 0123456789ab`). */
  world: string
  policy: LivePolicy
  resolver: EgressResolver
  log: EgressLog
  dial?: Dial | undefined
  /** See {@link HEAD_TIMEOUT_MS}. */
  headTimeoutMs?: number | undefined
}

/** A connection's target and verdict, once decided. */
interface Decision {
  host: string
  port: number
  address: string | undefined
  verdict: EgressVerdict
}

/**
 * The world's process that opened a connection, as far as known when its record is written
 * (the relay says it just after accepting; pid in the world's pid namespace).
 */
export type EgressOrigin = () => EgressRecord['process']

/** How long a refusal's record waits for the relay to name the process that asked (ms; see recordRefusal). */
const ORIGIN_WAIT_MS = 500

/** Serves the proxy connections of one world (see the module comment). */
export class EgressGateway {
  private readonly dial: Dial

  constructor(private readonly options: EgressGatewayOptions) {
    this.dial = options.dial ?? ((address, port) => connect({ host: address, port, noDelay: true }))
  }

  /**
   * Serve one connection the world's proxy port accepted. Never throws: whatever goes wrong
   * ends this connection (with an HTTP error while the world still reads one) and is logged.
   */
  serve(world: Duplex, origin?: EgressOrigin): void {
    let head: Buffer = Buffer.alloc(0)
    const timer = setTimeout(() => this.refuseHead(world, 408, 'Request Timeout', `no complete proxy request within ${this.options.headTimeoutMs ?? HEAD_TIMEOUT_MS} ms`), this.options.headTimeoutMs ?? HEAD_TIMEOUT_MS)
    const onError = (): void => { clearTimeout(timer) }
    const onData = (chunk: Buffer): void => {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk])
      const request = parseProxyRequestHead(head)
      if (request.kind === 'incomplete') return
      clearTimeout(timer)
      world.off('data', onData)
      world.pause()
      if (request.kind === 'invalid') {
        this.refuseHead(world, request.status, statusText(request.status), request.reason)
        return
      }
      const rest = head.subarray(request.headBytes)
      const via = request.kind === 'connect' ? 'connect' : 'http'
      this.decide(request.host, request.port).then(decision => {
        if (decision.verdict.verdict === 'deny' || decision.address === undefined) {
          this.recordRefusal(world, origin, () => this.record(decision, via, 0, 0, undefined, origin))
          // The reason goes in the status line too: it is what clients show. An HTTPS client
          // never shows the body; urllib shows only the status line, and pip skips a refused
          // index page showing nothing but that line (at -vvv).
          const why = `dsh-remote-worlds egress: refused ${formatAuthority(decision.host, decision.port)}: ${decision.verdict.reason}`
          world.end(proxyResponse(403, `Forbidden (${why})`, why))
          return
        }
        if (request.kind === 'connect') {
          this.tunnel(world, decision, via, rest, true, origin)
          return
        }
        // The request's own body and nothing after it (see http-proxy-request.ts bodyBytes).
        const body = request.bodyBytes === undefined ? rest : rest.subarray(0, request.bodyBytes)
        const left = request.bodyBytes === undefined ? undefined : request.bodyBytes - body.length
        this.tunnel(world, decision, via, Buffer.concat([request.originForm, body]), false, origin, left)
      }, (error: unknown) => {
        const reason = error instanceof Error ? error.message : String(error)
        this.recordRefusal(world, origin, () => this.record({ host: request.host, port: request.port, address: undefined, verdict: { verdict: 'deny', reason } }, via, 0, 0, undefined, origin))
        world.end(proxyResponse(502, 'Bad Gateway', `dsh-remote-worlds egress: ${formatAuthority(request.host, request.port)}: ${reason}`))
      })
    }
    world.on('data', onData)
    world.on('error', onError)
    world.on('close', onError)
  }

  /**
   * Serve one connection of a raw forward (`--egress HOST:PORT`: a world port that reaches one
   * host:port): judged and dialed as a CONNECT to it would be, with no proxy request read and
   * no TLS check (the world names no host here: the forward does). A refusal, or a dial that
   * fails, closes the connection. Never throws.
   */
  serveForward(world: Duplex, host: string, port: number, origin?: EgressOrigin): void {
    world.pause()
    world.on('error', () => {})
    this.decide(host, port).then(decision => {
      if (decision.verdict.verdict === 'deny' || decision.address === undefined) {
        // Closed once logged: a closed stream forgets the name of its process that the relay sends.
        this.recordRefusal(world, origin, () => {
          this.record(decision, 'forward', 0, 0, undefined, origin)
          world.destroy()
        })
        return
      }
      this.tunnel(world, decision, 'forward', Buffer.alloc(0), false, origin)
    }, (error: unknown) => {
      this.recordRefusal(world, origin, () => {
        this.record({ host, port, address: undefined, verdict: { verdict: 'deny', reason: error instanceof Error ? error.message : String(error) } }, 'forward', 0, 0, undefined, origin)
        world.destroy()
      })
    })
  }

  /**
   * Log a connection refused at once when its origin is known: the relay names the process a
   * moment after it accepted (its `P` frame, world/relay-net/peer-process.c), and a refusal can
   * be faster. Written when the origin comes, the stream closes, or {@link ORIGIN_WAIT_MS} passed.
   */
  private recordRefusal(world: Duplex, origin: EgressOrigin | undefined, write: () => void): void {
    if (origin === undefined || origin() !== undefined) {
      write()
      return
    }
    let written = false
    const done = (): void => {
      if (written) return
      written = true
      clearTimeout(timer)
      world.off('origin', done)
      world.off('close', done)
      write()
    }
    const timer = setTimeout(done, ORIGIN_WAIT_MS)
    world.once('origin', done)
    world.once('close', done)
  }

  /** Answer a request that never became a connection, and log it. */
  private refuseHead(world: Duplex, status: number, text: string, reason: string): void {
    this.options.log.record({ time: new Date().toISOString(), world: this.options.world, host: '', port: 0, via: 'http', verdict: 'deny', reason, bytesUp: 0, bytesDown: 0 })
    if (!world.destroyed) world.end(proxyResponse(status, text, `dsh-remote-worlds egress: ${reason}`))
  }

  /**
   * The verdict for `host`:`port` and the address to dial (see the module comment, step 2).
   * @throws the resolver's NameNotResolvedError when an undenied name has no address.
   */
  private async decide(host: string, port: number): Promise<Decision> {
    const policy = this.options.policy.get()
    const literal = isIP(unbracket(host)) !== 0
    if (literal) {
      const address = unbracket(host)
      const verdict = decide(policy, { address, port })
      return { host, port, address: verdict.verdict === 'allow' ? address : undefined, verdict }
    }
    const name = host.toLowerCase().replace(/\.$/, '')
    const byName = decide(policy, { host: name, port })
    // Resolved only when a rule allows the name (or --resolve answers it and an address rule
    // could allow that answer, or the network is 'full'): a name no rule names is refused unresolved, so the names a world asks for never
    // reach a resolver as a way out (DNS exfiltration). Address rules judge IP literals, and the
    // addresses an allowed name resolves to (a deny CIDR still refuses them).
    const mayAllowByAddress = policy.network === 'full' || (this.options.resolver.overrides(name, port) && policy.allow.some(rule => rule.kind === 'cidr'))
    if (byName.verdict === 'deny' && (byName.rule !== undefined || !mayAllowByAddress)) return { host: name, port, address: undefined, verdict: byName }
    const addresses = await this.options.resolver.resolve(name, port)
    let first: EgressVerdict | undefined
    for (const address of addresses) {
      const verdict = decide(policy, { host: name, address, port })
      if (verdict.verdict === 'allow') return { host: name, port, address, verdict }
      first ??= verdict
    }
    return { host: name, port, address: undefined, verdict: first ?? byName }
  }

  /** Dial an allowed connection and carry bytes both ways (steps 3 to 5). */
  private tunnel(world: Duplex, decision: Decision, via: EgressRecord['via'], first: Buffer, connectMethod: boolean, origin: EgressOrigin | undefined, uploadLeft?: number | undefined): void {
    const upstream = this.dial(decision.address!, decision.port)
    let up = 0
    let down = 0
    let settled = 0
    let failure: string | undefined
    let refused: EgressVerdict | undefined
    let connected = false
    const settle = (): void => {
      settled += 1
      if (settled === 2) this.record(refused === undefined ? decision : { ...decision, verdict: refused }, via, up, down, failure, origin)
    }
    upstream.on('close', settle)
    world.on('close', settle)
    upstream.on('error', error => {
      failure ??= error.message
      if (!connected) {
        // A raw forward speaks no HTTP: its world side is closed.
        if (via === 'forward') world.destroy()
        else if (!world.destroyed) world.end(proxyResponse(502, 'Bad Gateway', `dsh-remote-worlds egress: ${formatAuthority(decision.host, decision.port)} (${decision.address}): ${error.message}`))
        return
      }
      world.destroy()
    })
    world.on('error', error => {
      failure ??= error.message
      upstream.destroy()
    })
    upstream.on('connect', () => {
      connected = true
      if (!connectMethod) {
        up += first.length
        upstream.write(first)
        this.pipe(world, upstream, bytes => { up += bytes }, bytes => { down += bytes }, uploadLeft)
        return
      }
      world.write(proxyConnected())
      this.checkServerName(world, first, decision.host).then(outcome => {
        if (outcome.kind !== 'ok') {
          refused = { verdict: 'deny', reason: outcome.kind === 'fronting' ? `refused: the TLS server name ${JSON.stringify(outcome.serverName)} is not the CONNECT host (domain fronting)` : 'refused: a TLS handshake whose ClientHello cannot be read whole (over 64 KiB, or malformed) could name any server' }
          upstream.destroy()
          world.destroy()
          return
        }
        up += outcome.bytes.length
        if (outcome.bytes.length > 0) upstream.write(outcome.bytes)
        this.pipe(world, upstream, bytes => { up += bytes }, bytes => { down += bytes })
      }, () => {
        upstream.destroy()
        world.destroy()
      })
    })
  }

  /**
   * The first bytes of a tunnel, read until they are known to be a TLS ClientHello or not.
   * @returns the bytes read (to forward), or the server name a fronting hello named.
   * @throws when the world ends or stays silent first (the tunnel then closes).
   */
  private checkServerName(world: Duplex, first: Buffer, host: string): Promise<{ kind: 'ok'; bytes: Buffer } | { kind: 'fronting'; serverName: string } | { kind: 'unreadable' }> {
    return new Promise((resolve, reject) => {
      let bytes: Buffer = first
      const timeoutMs = this.options.headTimeoutMs ?? HEAD_TIMEOUT_MS
      const done = (): void => {
        clearTimeout(timer)
        world.off('data', onData)
        world.off('end', onEnd)
        world.pause()
      }
      const judge = (): boolean => {
        const hello = readServerName(bytes)
        if (hello.kind === 'incomplete') return false
        done()
        // A TLS handshake record (content type 22) that cannot be read as a hello (past 64 KiB,
        // malformed) is refused as well: it could name any server.
        // So is a TLS record of another type before any hello (change cipher spec, alert,
        // application data, heartbeat: content types 20, 21, 23, 24, then version 3.x), which no
        // client starts with and which a server may take as the start of a handshake.
        if (hello.kind === 'not-tls' && (bytes[0] === 0x16 || (bytes.length >= 2 && [0x14, 0x15, 0x17, 0x18].includes(bytes[0]!) && bytes[1] === 0x03))) resolve({ kind: 'unreadable' })
        else if (hello.kind === 'hello' && hello.serverName !== undefined && hello.serverName.toLowerCase().replace(/\.$/, '') !== unbracket(host).toLowerCase()) resolve({ kind: 'fronting', serverName: hello.serverName })
        else resolve({ kind: 'ok', bytes })
        return true
      }
      const onData = (chunk: Buffer): void => {
        bytes = bytes.length === 0 ? chunk : Buffer.concat([bytes, chunk])
        judge()
      }
      // A world that ends its side first sent what it had: forward it.
      const onEnd = (): void => {
        done()
        resolve({ kind: 'ok', bytes })
      }
      // A server that speaks first (SSH, SMTP) is given the tunnel once the world writes.
      const timer = setTimeout(() => { done(); reject(new Error('no bytes from the world')) }, timeoutMs)
      if (bytes.length > 0 && judge()) return
      world.on('data', onData)
      world.on('end', onEnd)
      world.resume()
    })
  }

  /**
   * Bytes both ways, with backpressure; each side's end half-closes the other. With
   * `uploadLeft`, at most that many more bytes go from the world to the upstream, and the rest
   * is dropped (a plain HTTP request's body: a request behind it is not this one).
   */
  private pipe(world: Duplex, upstream: Socket, onUp: (bytes: number) => void, onDown: (bytes: number) => void, uploadLeft?: number | undefined): void {
    upstream.on('data', (chunk: Buffer) => onDown(chunk.length))
    if (uploadLeft === undefined) {
      world.on('data', (chunk: Buffer) => onUp(chunk.length))
      world.pipe(upstream)
    } else {
      let left = uploadLeft
      world.on('data', (chunk: Buffer) => {
        if (left <= 0) return
        const part = chunk.subarray(0, left)
        left -= part.length
        onUp(part.length)
        if (!upstream.write(part)) {
          world.pause()
          upstream.once('drain', () => world.resume())
        }
      })
      world.once('end', () => upstream.end())
    }
    upstream.pipe(world)
    world.resume()
    // A side that closed unpipes, which pauses its source: the world's F (or the upstream's
    // FIN) would then wait in a paused stream, and the connection would never end. The world
    // keeps flowing once the upstream is gone (what it still sends has nowhere to go), and an
    // upstream whose world is gone is closed.
    upstream.on('close', () => { if (!world.destroyed) world.resume() })
    world.on('close', () => upstream.destroy())
  }

  private record(decision: Decision, via: EgressRecord['via'], bytesUp: number, bytesDown: number, error: string | undefined, origin: EgressOrigin | undefined): void {
    this.options.log.record({
      time: new Date().toISOString(),
      world: this.options.world,
      ...(origin?.() !== undefined ? { process: origin()! } : {}),
      host: decision.host,
      ...(decision.address !== undefined ? { address: decision.address } : {}),
      port: decision.port,
      via,
      verdict: decision.verdict.verdict,
      ...(decision.verdict.rule !== undefined ? { rule: decision.verdict.rule } : {}),
      reason: decision.verdict.reason,
      bytesUp,
      bytesDown,
      ...(error !== undefined ? { error } : {}),
    })
  }
}

function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
}

function statusText(status: number): string {
  return status === 400 ? 'Bad Request' : status === 431 ? 'Request Header Fields Too Large' : status === 501 ? 'Not Implemented' : 'Error'
}
