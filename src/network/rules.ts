/**
 * The egress policy of a confined world, decided on the client: the world has only `lo`, its
 * relay hands each connection from its HTTP proxy port to the client, and the client asks
 * {@link decide} before it dials anything. Pure; no lookups (resolve.ts gives the addresses).
 *
 * A policy is a {@link NetworkMode} and two lists of {@link EgressRule}s, the CLI's
 * `--allow RULE` and `--deny RULE`. A rule is a host name (`example.com`), a suffix
 * (`*.example.com`: names strictly below it) or an address or network (`10.0.0.0/8`, `::1`,
 * `[fd00::]/8`), each with an optional port. In mode 'allow' deny wins: a deny rule matching the
 * name or the address refuses even what an allow rule matches.
 * @module dsh-remote-worlds/network/rules
 */
import { EventEmitter } from 'node:events'
import { domainToASCII } from 'node:url'
import { type IpAddress, formatAuthority, normalizeHostName, parseIpAddress, parsePort } from './names.ts'

/**
 * What leaves the world: 'none' nothing, 'allow' only what an `--allow` rule matches and no
 * `--deny` rule does, 'full' everything no `--deny` rule matches.
 */
export type NetworkMode = 'none' | 'allow' | 'full'

/** The modes, in the order the CLI lists them. */
export const NETWORK_MODES: readonly NetworkMode[] = ['none', 'allow', 'full']

/** The forms a rule may take, as refusals list them. */
export const EGRESS_RULE_FORMS = 'HOST, *.SUFFIX, an IPv4 or IPv6 address or CIDR (10.0.0.0/8, ::1, fd00::/8), each with an optional :PORT (IPv6 with a port in brackets: [fd00::1]:5432, [fd00::/8]:443)'

/**
 * A rule or a policy the CLI cannot take: a rule in none of the {@link EGRESS_RULE_FORMS}, an
 * unknown network mode, or allow rules with network 'none' or 'full' (which would silently
 * narrow or widen what the user asked for). `text` is what was refused; the message names the
 * accepted forms.
 */
export class InvalidEgressRuleError extends Error {
  /** Stable code a caller can branch on. */
  readonly code = 'INVALID_EGRESS_RULE'

  /**
   * @param text - the refused rule (or mode) as given.
   * @param problem - what is wrong with it, one clause.
   */
  constructor(readonly text: string, problem: string) {
    super(`egress rule ${JSON.stringify(text)}: ${problem}`)
    this.name = 'InvalidEgressRuleError'
  }
}

/** One parsed `--allow` or `--deny` rule. */
export type EgressRule =
  | {
    kind: 'host'
    /** The rule as given, for logs and refusals. */
    text: string
    /** Canonical name (lower case, no trailing dot, IDN as `xn--` labels). */
    host: string
    /** Only this port when set; any port when absent. */
    port?: number
  }
  | {
    kind: 'suffix'
    text: string
    /** Canonical name; the rule matches names ending in `.` + suffix, not the suffix itself. */
    suffix: string
    port?: number
  }
  | {
    kind: 'cidr'
    text: string
    /** 4 or 6; an IPv4-mapped IPv6 network (`::ffff:10.0.0.0/104`) is kept as the IPv4 one (`10.0.0.0/8`). */
    family: 4 | 6
    /** Canonical address of the network (host bits zero), no brackets. */
    address: string
    /** Prefix length in bits: 0..32 (IPv4) or 0..128 (IPv6); a bare address has the full length. */
    prefix: number
    port?: number
  }

/** The policy one world's connections are decided by. */
export interface EgressPolicy {
  network: NetworkMode
  allow: readonly EgressRule[]
  deny: readonly EgressRule[]
}

/** What the world asked to reach. At least one of `host` and `address`. */
export interface EgressTarget {
  /** A name, when the world asked by name (CONNECT example.com:443, a TLS server_name). An IP literal here is judged as `address`. */
  host?: string
  /** An IP: the literal the world asked for, or the address the client resolved `host` to. Brackets allowed. */
  address?: string
  /** TCP port, 1..65535. */
  port: number
}

/** The decision on one connection. */
export interface EgressVerdict {
  verdict: 'allow' | 'deny'
  /** The text of the deciding rule, when a rule decided. */
  rule?: string
  /** One line an agent can read: "denied by rule *.example.com", "no --allow rule matches example.org:443". */
  reason: string
}

/**
 * Parse one `--allow` / `--deny` rule.
 * @param text - `HOST`, `*.SUFFIX`, `ADDRESS`, `ADDRESS/PREFIX`, each optionally `:PORT`; an
 *   IPv6 address or network with a port is bracketed (`[fd00::1]:5432`, `[fd00::/8]:443`).
 *   A host name is case-insensitive and loses one trailing dot; a Unicode name is taken as its
 *   `xn--` form.
 * @throws InvalidEgressRuleError when `text` is none of these, a port is not 1..65535, a prefix
 *   is out of range, or a network has host bits set (`10.1.0.0/8`: write `10.0.0.0/8`).
 */
export function parseRule(text: string): EgressRule {
  const refuse = (problem: string): never => { throw new InvalidEgressRuleError(text, `${problem}; accepted forms: ${EGRESS_RULE_FORMS}`) }
  const trimmed = text.trim()
  if (trimmed === '') return refuse('empty rule')
  let body = trimmed
  let port: number | undefined
  const takePort = (portText: string): void => {
    port = parsePort(portText)
    if (port === undefined) refuse(`port ${JSON.stringify(portText)} is not a number from 1 to 65535`)
  }
  if (body.startsWith('[')) {
    const close = body.indexOf(']')
    if (close < 0) return refuse('an opening [ without ]')
    const after = body.slice(close + 1)
    body = body.slice(1, close)
    if (after !== '') {
      if (!after.startsWith(':')) return refuse(`unexpected ${JSON.stringify(after)} after ]`)
      takePort(after.slice(1))
    }
    if (!body.includes(':')) return refuse('brackets hold an IPv6 address or network only')
    return withPort(parseNetwork(body, text, refuse), port)
  }
  const colons = body.split(':').length - 1
  if (colons > 1) return withPort(parseNetwork(body, text, refuse), undefined) // a bare IPv6 address or network: no port
  if (colons === 1) {
    const at = body.lastIndexOf(':')
    takePort(body.slice(at + 1))
    body = body.slice(0, at)
  }
  if (body.includes('/') || parseIpAddress(body) !== undefined) return withPort(parseNetwork(body, text, refuse), port)
  if (body.startsWith('*.')) {
    const suffix = hostName(body.slice(2))
    if (suffix === undefined) return refuse(`${JSON.stringify(body.slice(2))} after *. is not a host name`)
    return withPort({ kind: 'suffix', text, suffix }, port)
  }
  if (body.includes('*')) return refuse('a wildcard is allowed only as a whole first label (*.example.com)')
  const host = hostName(body)
  if (host === undefined) return refuse(`${JSON.stringify(body)} is not a host name or IP address`)
  return withPort({ kind: 'host', text, host }, port)
}

/**
 * Parse the CLI's network options into a policy.
 * @param options.network - the mode; when absent, 'allow' if there are allow rules, else 'none'.
 * @param options.allow - `--allow` rules, see {@link parseRule}.
 * @param options.deny - `--deny` rules; they apply in every mode (in 'none' they change nothing).
 * @returns a frozen policy.
 * @throws InvalidEgressRuleError for an unknown mode, a rule {@link parseRule} refuses, or allow
 *   rules with network 'none' or 'full'.
 */
export function parsePolicy(options: { network?: string; allow?: readonly string[]; deny?: readonly string[] }): EgressPolicy {
  const allowTexts = options.allow ?? []
  const network = options.network ?? (allowTexts.length > 0 ? 'allow' : 'none')
  if (!(NETWORK_MODES as readonly string[]).includes(network)) {
    throw new InvalidEgressRuleError(network, `unknown network mode; use one of ${NETWORK_MODES.join(', ')}`)
  }
  if (allowTexts.length > 0 && network !== 'allow') {
    throw new InvalidEgressRuleError(allowTexts[0]!, `--allow rules need network 'allow', not '${network}' (${network === 'none' ? 'none refuses every connection' : 'full already allows every connection no --deny rule refuses'}); drop --network or the --allow rules`)
  }
  const allow = Object.freeze(allowTexts.map(parseRule))
  const deny = Object.freeze((options.deny ?? []).map(parseRule))
  return Object.freeze({ network: network as NetworkMode, allow, deny })
}

/**
 * Decide one connection. Mode 'none' denies everything; 'full' allows everything no deny rule
 * matches; 'allow' denies what any deny rule matches (by name or by address), else allows what
 * any allow rule matches (by name or by address), else denies. A rule with a port matches that
 * port only. Host rules and suffix rules match the name only, address rules the address only;
 * an IPv4-mapped IPv6 address is judged as its IPv4 address. A `host` or `address` that is
 * neither a host name nor an IP literal matches no rule.
 * @param policy - the policy in force.
 * @param target - what the world asked for and, when it asked by name, the address it resolved to.
 */
export function decide(policy: EgressPolicy, target: EgressTarget): EgressVerdict {
  const what = describeTarget(target)
  if (policy.network === 'none') return { verdict: 'deny', reason: `network is 'none': no connection to ${what} leaves the world` }
  const host = target.host === undefined ? undefined : hostName(target.host)
  const address = targetAddress(target)
  // Whatever the rules say: a connect(2) to an unspecified address reaches this machine's own
  // loopback (Linux), which no rule naming 127.0.0.0/8 or ::1 would then judge.
  if (address !== undefined && isUnspecified(address)) return { verdict: 'deny', reason: `${address.address} is an unspecified address, which reaches this machine's own loopback; it is never dialed` }
  const denying = policy.deny.find(rule => matchesRule(rule, host, address, target.port))
  if (denying !== undefined) return { verdict: 'deny', rule: denying.text, reason: `denied by rule ${denying.text}` }
  if (policy.network === 'full') return { verdict: 'allow', reason: `network is 'full' and no --deny rule matches ${what}` }
  const allowing = policy.allow.find(rule => matchesRule(rule, host, address, target.port))
  if (allowing !== undefined) return { verdict: 'allow', rule: allowing.text, reason: `allowed by rule ${allowing.text}` }
  return { verdict: 'deny', reason: `no --allow rule matches ${what}` }
}

/**
 * Whether one rule matches a target (port included), as {@link decide} judges it.
 * @param rule - a parsed rule.
 * @param target - see {@link EgressTarget}.
 */
export function ruleMatches(rule: EgressRule, target: EgressTarget): boolean {
  return matchesRule(rule, target.host === undefined ? undefined : hostName(target.host), targetAddress(target), target.port)
}

/**
 * The policy one world is decided by now. {@link LivePolicy.set} takes effect for every decision
 * after it (connections already dialled are not re-judged) and emits 'change' with the new and
 * the previous policy, synchronously, before it returns. A listener that throws throws out of
 * `set` (EventEmitter semantics); the new policy is in force by then.
 */
export class LivePolicy extends EventEmitter<{ change: [policy: EgressPolicy, previous: EgressPolicy] }> {
  private current: EgressPolicy

  /** @param policy - the policy in force at first. */
  constructor(policy: EgressPolicy) {
    super()
    this.current = policy
  }

  /** The policy in force. */
  get(): EgressPolicy {
    return this.current
  }

  /** Put `policy` in force for every later decision, then emit 'change'. */
  set(policy: EgressPolicy): void {
    const previous = this.current
    this.current = policy
    this.emit('change', policy, previous)
  }

  /** {@link decide} under the policy in force. */
  decide(target: EgressTarget): EgressVerdict {
    return decide(this.current, target)
  }
}

/** A network rule parsed into its bytes, cached per rule object. */
const networkBytes = new WeakMap<EgressRule, Uint8Array>()

function withPort(rule: EgressRule, port: number | undefined): EgressRule {
  return Object.freeze(port === undefined ? rule : { ...rule, port })
}

/** A host name given by a user (a rule) or by the world: Unicode as `xn--`, then canonical. */
function hostName(text: string): string | undefined {
  const ascii = /^[\x00-\x7f]*$/.test(text) ? text : domainToASCII(text)
  return ascii === '' ? undefined : normalizeHostName(ascii)
}

function parseNetwork(body: string, text: string, refuse: (problem: string) => never): EgressRule {
  const slash = body.indexOf('/')
  const addressText = slash < 0 ? body : body.slice(0, slash)
  const parsed = parseIpAddress(addressText)
  if (parsed === undefined) return refuse(`${JSON.stringify(addressText)} is not an IP address`)
  const written = addressText.includes(':') ? 128 : 32 // the length the prefix counts in: a mapped ::ffff:a.b.c.d/104 counts in IPv6 bits
  let prefix = written
  if (slash >= 0) {
    const prefixText = body.slice(slash + 1)
    if (!/^(0|[1-9][0-9]{0,2})$/.test(prefixText) || Number(prefixText) > written) return refuse(`prefix /${prefixText} is not 0 to ${written}`)
    prefix = Number(prefixText)
  }
  if (parsed.family === 4 && written === 128) {
    if (prefix < 96) return refuse(`an IPv4-mapped network needs a prefix of at least /96`)
    prefix -= 96
  }
  const masked = mask(parsed.bytes, prefix)
  if (!masked.every((byte, i) => byte === parsed.bytes[i])) {
    const network = parsed.family === 4 ? `${written === 128 ? '::ffff:' : ''}${[...masked].join('.')}` : parseIpAddress(bytesToIpv6Text(masked))!.address
    return refuse(`${body} has bits set past the prefix; the network is ${network}/${body.slice(slash + 1)}`)
  }
  const rule: EgressRule = { kind: 'cidr', text, family: parsed.family, address: parsed.address, prefix }
  return rule
}

function mask(bytes: Uint8Array, prefix: number): Uint8Array {
  const out = Uint8Array.from(bytes)
  for (let i = 0; i < out.length; i++) {
    const keep = Math.max(0, Math.min(8, prefix - 8 * i))
    out[i] = out[i]! & ((0xff << (8 - keep)) & 0xff)
  }
  return out
}

function bytesToIpv6Text(bytes: Uint8Array): string {
  const words: string[] = []
  for (let i = 0; i < 16; i += 2) words.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16))
  return words.join(':')
}

/** The target's IP: `address`, else `host` when that is an IP literal. */
function targetAddress(target: EgressTarget): IpAddress | undefined {
  if (target.address !== undefined) return parseIpAddress(unbracket(target.address))
  return target.host === undefined ? undefined : parseIpAddress(unbracket(target.host))
}

/** 0.0.0.0/8 ("this network", RFC 1122) and :: ("unspecified", RFC 4291): never a destination. */
function isUnspecified(address: IpAddress): boolean {
  return address.family === 4 ? address.bytes[0] === 0 : address.bytes.every(byte => byte === 0)
}

function unbracket(text: string): string {
  return text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text
}

function matchesRule(rule: EgressRule, host: string | undefined, address: IpAddress | undefined, port: number): boolean {
  if (rule.port !== undefined && rule.port !== port) return false
  switch (rule.kind) {
    case 'host': return host !== undefined && host === rule.host
    case 'suffix': return host !== undefined && host.length > rule.suffix.length + 1 && host.endsWith(`.${rule.suffix}`)
    case 'cidr': {
      if (address === undefined || address.family !== rule.family) return false
      let bytes = networkBytes.get(rule)
      if (bytes === undefined) {
        bytes = parseIpAddress(rule.address)!.bytes
        networkBytes.set(rule, bytes)
      }
      const masked = mask(address.bytes, rule.prefix)
      return masked.every((byte, i) => byte === bytes[i])
    }
  }
}

/** `example.org:443`, `example.org:443 (93.184.215.14)` when resolved, `[fd00::1]:5432` when asked by address. */
function describeTarget(target: EgressTarget): string {
  const address = targetAddress(target)
  if (target.host !== undefined && parseIpAddress(unbracket(target.host)) === undefined) {
    const named = formatAuthority(hostName(target.host) ?? target.host, target.port)
    return address === undefined ? named : `${named} (${address.address})`
  }
  return formatAuthority(address?.address ?? target.address ?? target.host ?? '?', target.port)
}
