/**
 * SSH targets: `[user@]host[:port]` as given on a command line, resolved through `~/.ssh/config`
 * Host sections (HostName, User, Port, IdentityFile, ProxyJump, UserKnownHostsFile) with the
 * `ssh-config` parser. Command-line values win over the config file, as with OpenSSH.
 * @module dsh-remote-worlds/providers/ssh/target
 */
import { readFileSync } from 'node:fs'
import { homedir, hostname as localHostname, userInfo } from 'node:os'
import { join } from 'node:path'
import SSHConfig from 'ssh-config'
import { InvalidArgumentError } from '../remote/errors.ts'

/** A target as written: `[user@]host[:port]`, `[user@][v6addr]:port`, or a Host alias. */
export interface SshTargetSpec {
  user?: string | undefined
  host: string
  port?: number | undefined
}

/** A target after `~/.ssh/config`: everything needed to connect to one hop. */
export interface ResolvedSshTarget {
  /** The name as given (an alias or a host name). */
  alias: string
  /** Host name or address to connect to (config `HostName`, else the alias). */
  host: string
  port: number
  user: string
  /** Identity files named by the config (expanded; may not exist). */
  identityFiles: string[]
  /** `UserKnownHostsFile` entries (expanded), when the config sets them. */
  knownHostsFiles: string[] | undefined
  /** Jump hosts, outermost first (config `ProxyJump`, or the caller's). */
  jumps: ResolvedSshTarget[]
}

/** Inputs of {@link resolveSshTarget} besides the target itself. */
export interface ResolveOptions {
  /** ssh_config text; undefined means no config file. */
  configText?: string | undefined
  /** Local user name (default user and `%u`). */
  localUser?: string
  /** Local home directory (`~`, `%d`). */
  home?: string
  /** Override the jump hosts (`ProxyJump` syntax, or `none`). */
  proxyJump?: string | undefined
}

/**
 * Parse `[user@]host[:port]`.
 * @throws InvalidArgumentError for an empty host, a bad port or stray brackets.
 */
export function parseSshTarget(text: string): SshTargetSpec {
  const at = text.lastIndexOf('@')
  const user = at >= 0 ? text.slice(0, at) : undefined
  let rest = at >= 0 ? text.slice(at + 1) : text
  if (user !== undefined && user.length === 0) throw new InvalidArgumentError(`empty user name in SSH target ${JSON.stringify(text)}`)
  let port: number | undefined
  let host: string
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(rest)
  if (bracketed !== null) {
    host = bracketed[1]!
    if (bracketed[2] !== undefined) port = parsePort(bracketed[2], text)
  } else if ((rest.match(/:/g) ?? []).length === 1) {
    const colon = rest.indexOf(':')
    port = parsePort(rest.slice(colon + 1), text)
    rest = rest.slice(0, colon)
    host = rest
  } else {
    host = rest // a bare IPv6 address has several colons and no port
  }
  if (host.length === 0 || /[\s[\]@]/.test(host)) throw new InvalidArgumentError(`invalid host in SSH target ${JSON.stringify(text)}`)
  return { user, host, port }
}

function parsePort(text: string, target: string): number {
  const port = Number(text)
  if (!/^\d+$/.test(text) || port < 1 || port > 65535) throw new InvalidArgumentError(`invalid port in SSH target ${JSON.stringify(target)}`)
  return port
}

/** The default user config file, read if present. */
export function readDefaultSshConfig(home = homedir()): string | undefined {
  try {
    return readFileSync(join(home, '.ssh', 'config'), 'utf8')
  } catch {
    return undefined
  }
}

/**
 * Resolve a target through ssh_config. Precedence (OpenSSH's): the target's own user and port,
 * then the first value the config gives, then defaults (local user, port 22).
 * @throws InvalidArgumentError for an unparsable target, port, or a ProxyJump loop.
 */
export function resolveSshTarget(spec: SshTargetSpec, options: ResolveOptions = {}, depth = 0): ResolvedSshTarget {
  if (depth > 8) throw new InvalidArgumentError(`ProxyJump chain deeper than 8 hops at ${spec.host} (a loop?)`)
  const localUser = options.localUser ?? userInfo().username
  const home = options.home ?? homedir()
  const config = options.configText === undefined ? undefined : SSHConfig.parse(options.configText)
  const computed = config?.compute(spec.host, { ignoreCase: true, matchExec: false }) ?? {}
  const first = (key: string): string | undefined => {
    const value = computed[key]
    return Array.isArray(value) ? value[0] : value
  }
  const all = (key: string): string[] => {
    const value = computed[key]
    return value === undefined ? [] : Array.isArray(value) ? value : [value]
  }
  const host = (first('hostname') ?? spec.host).replaceAll('%h', spec.host)
  const configPort = first('port')
  const port = spec.port ?? (configPort !== undefined ? parsePort(configPort, `${spec.host} (ssh_config Port)`) : 22)
  const user = spec.user ?? first('user') ?? localUser
  const expand = (path: string): string => expandPath(path, { home, localUser, host, user, port, alias: spec.host })
  const knownHosts = all('userknownhostsfile').flatMap(value => value.split(/\s+/)).filter(value => value.length > 0)
  const jumpText = options.proxyJump ?? first('proxyjump')
  const jumps = jumpText === undefined || jumpText === 'none'
    ? []
    : jumpText.split(',').map(hop => resolveSshTarget(parseSshTarget(hop.trim()), { ...options, proxyJump: undefined }, depth + 1))
  return {
    alias: spec.host,
    host,
    port,
    user,
    identityFiles: all('identityfile').map(expand),
    knownHostsFiles: knownHosts.length > 0 ? knownHosts.map(expand) : undefined,
    jumps,
  }
}

/** ssh_config(5) TOKENS and `~` in file names (the subset that needs no remote facts). */
export function expandPath(path: string, facts: { home: string; localUser: string; host: string; user: string; port: number; alias: string }): string {
  const withTokens = path.replace(/%([%dhilnpru])/g, (_match, token: string) => {
    switch (token) {
      case '%': return '%'
      case 'd': return facts.home
      case 'h': return facts.host
      case 'i': return String(userInfo().uid)
      case 'l': return localHostname()
      case 'n': return facts.alias
      case 'p': return String(facts.port)
      case 'r': return facts.user
      default: return facts.localUser // u
    }
  })
  if (withTokens === '~') return facts.home
  return withTokens.startsWith('~/') ? join(facts.home, withTokens.slice(2)) : withTokens
}

/** `user@host:port` for messages. */
export function describeTarget(target: Pick<ResolvedSshTarget, 'user' | 'host' | 'port'>): string {
  return `${target.user}@${target.host.includes(':') ? `[${target.host}]` : target.host}:${target.port}`
}
