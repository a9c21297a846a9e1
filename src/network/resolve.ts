/**
 * The names a confined world asks for, resolved on the client: the world has no resolver of its
 * own that reaches out (it has only `lo`), so the client turns `example.com:443` into the
 * addresses it dials and that rules.ts judges. Overrides come first, in the form of curl's
 * `--resolve HOST:PORT:ADDRESS[,ADDRESS]...`; everything else goes to the host's resolver
 * (getaddrinfo through dns.promises.lookup, so /etc/hosts and nsswitch apply as for any program
 * on the client). No caching: the host's resolver caches, and a stale answer is worse than a
 * lookup per connection.
 * @module dsh-remote-worlds/network/resolve
 */
import { promises as dns } from 'node:dns'
import { normalizeHostName, parseIpAddress, parsePort } from './names.ts'

/** An override text {@link parseResolveOverride} cannot take. */
export class InvalidResolveOverrideError extends Error {
  /** Stable code a caller can branch on. */
  readonly code = 'INVALID_RESOLVE_OVERRIDE'

  /**
   * @param text - the refused override as given.
   * @param problem - what is wrong with it, one clause.
   */
  constructor(readonly text: string, problem: string) {
    super(`--resolve ${JSON.stringify(text)}: ${problem}; the form is NAME:PORT:ADDRESS[,ADDRESS]... (IPv6 in brackets or bare: example.com:443:[::1],127.0.0.1)`)
    this.name = 'InvalidResolveOverrideError'
  }
}

/**
 * A name the client could not resolve: the host's resolver failed or answered no address.
 * `cause` is the resolver's error (its `code`, e.g. ENOTFOUND, EAI_AGAIN) when there was one.
 */
export class NameNotResolvedError extends Error {
  /** Stable code a caller can branch on. */
  readonly code = 'NAME_NOT_RESOLVED'

  /**
   * @param host - the name as asked (`host`, since Error's `name` is the class name).
   * @param port - the port it was asked with.
   * @param cause - the resolver's error, if any.
   */
  constructor(readonly host: string, readonly port: number, cause?: unknown) {
    const why = cause instanceof Error ? cause.message : 'no address'
    super(`could not resolve ${host} (for port ${port}) on the client: ${why}; check the name, or give its address with --resolve ${host}:${port}:ADDRESS`, { cause })
    this.name = 'NameNotResolvedError'
  }
}

/** One parsed `--resolve` override. */
export interface ResolveOverride {
  /** The override as given. */
  text: string
  /** Canonical name (lower case, no trailing dot). */
  name: string
  /** TCP port, 1..65535: the override applies to this port only, as curl's does. */
  port: number
  /** Canonical addresses in the order given, no brackets, at least one. */
  addresses: readonly string[]
}

/** The host's resolver: every address of a name, in the resolver's order. Rejects when it fails. */
export type LookupAll = (name: string) => Promise<string[]>

/** dns.promises.lookup with `all: true` and the resolver's own order (`verbatim`). */
export const systemLookup: LookupAll = async name => (await dns.lookup(name, { all: true, order: 'verbatim' })).map(entry => entry.address)

/**
 * Parse curl's `--resolve NAME:PORT:ADDRESS[,ADDRESS]...`. An IPv6 address may be bracketed
 * (`[::1]`) or bare (everything after the second colon is the address list). curl's `+NAME`
 * (lazy) and `-NAME` (remove) and a `*` name are not taken.
 * @throws InvalidResolveOverrideError when the name is not a host name, the port is not
 *   1..65535, or an address is empty or not an IP literal.
 */
export function parseResolveOverride(text: string): ResolveOverride {
  const refuse = (problem: string): never => { throw new InvalidResolveOverrideError(text, problem) }
  const first = text.indexOf(':')
  const second = first < 0 ? -1 : text.indexOf(':', first + 1)
  if (second < 0) return refuse('it needs three parts')
  const nameText = text.slice(0, first)
  const name = normalizeHostName(nameText)
  if (name === undefined) return refuse(`${JSON.stringify(nameText)} is not a host name`)
  const portText = text.slice(first + 1, second)
  const port = parsePort(portText)
  if (port === undefined) return refuse(`port ${JSON.stringify(portText)} is not a number from 1 to 65535`)
  const addresses = text.slice(second + 1).split(',').map(part => {
    const trimmed = part.trim()
    const bare = trimmed.startsWith('[') && trimmed.endsWith(']') ? trimmed.slice(1, -1) : trimmed
    const address = parseIpAddress(bare)
    return address === undefined ? refuse(`${JSON.stringify(trimmed)} is not an IP address`) : address.address
  })
  return { text, name, port, addresses: Object.freeze(addresses) }
}

/**
 * Turns a name and port into the addresses to dial: an IP literal is itself, an override for
 * that name and port (the first one given, as curl) gives its addresses, anything else goes to
 * the lookup. Every address is returned, in the order given or answered, canonical (an
 * IPv4-mapped answer as its IPv4 address): the caller judges each and dials in order.
 */
export class EgressResolver {
  private readonly answers = new Map<string, readonly string[]>()

  /**
   * @param overrides - parsed `--resolve` overrides; for the same name and port the first wins.
   * @param lookup - the host's resolver (default {@link systemLookup}); tests pass a scripted one.
   */
  constructor(overrides: readonly ResolveOverride[] = [], private readonly lookup: LookupAll = systemLookup) {
    for (const override of overrides) {
      const key = `${override.name}:${override.port}`
      if (!this.answers.has(key)) this.answers.set(key, override.addresses)
    }
  }

  /**
   * Resolve `name` for a connection to `port`.
   * @param name - a host name (any case, a trailing dot allowed) or an IP literal (IPv6 bracketed or bare).
   * @param port - the TCP port the connection is for; overrides match it.
   * @returns at least one canonical address.
   * @throws NameNotResolvedError when `name` is neither a host name nor an IP literal, the
   *   lookup rejects, or it answers no address.
   */
  /** Whether `--resolve` answers `name`:`port` (no lookup is then made). */
  overrides(name: string, port: number): boolean {
    const canonical = normalizeHostName(name)
    return canonical !== undefined && this.answers.has(`${canonical}:${port}`)
  }

  async resolve(name: string, port: number): Promise<string[]> {
    const literal = parseIpAddress(name.startsWith('[') && name.endsWith(']') ? name.slice(1, -1) : name)
    if (literal !== undefined) return [literal.address]
    const canonical = normalizeHostName(name)
    if (canonical === undefined) throw new NameNotResolvedError(name, port, new Error('not a host name'))
    const override = this.answers.get(`${canonical}:${port}`)
    if (override !== undefined) return [...override]
    let answered: string[]
    try {
      answered = await this.lookup(canonical)
    } catch (error) {
      throw new NameNotResolvedError(name, port, error)
    }
    const addresses = [...new Set(answered.map(address => parseIpAddress(address)?.address).filter(address => address !== undefined))]
    if (addresses.length === 0) throw new NameNotResolvedError(name, port)
    return addresses
  }
}
