/**
 * Raw egress forwards (`--egress [WORLD_PORT:]HOST:PORT`): a port on the world's 127.0.0.1
 * whose every connection this client dials to HOST:PORT, judged by the rules as a CONNECT to it
 * would be (egress-gateway.ts `serveForward`), for what speaks no HTTP: databases, SSH, SMTP.
 * The CLI's `--egress HOST:PORT` also allows HOST:PORT (as `--allow HOST:PORT`): naming it is
 * the permission, and a `--deny` rule still wins.
 * @module dsh-remote-worlds/network/egress-forward
 */
import { parsePort } from './names.ts'

/** An `--egress` that is not `[WORLD_PORT:]HOST:PORT`. */
export class InvalidEgressForwardError extends Error {
  readonly code = 'INVALID_EGRESS_FORWARD'
  constructor(readonly text: string, problem: string) {
    super(`invalid --egress ${JSON.stringify(text)}: ${problem}; the form is [WORLD_PORT:]HOST:PORT (HOST a name or an IP literal, IPv6 in brackets; WORLD_PORT defaults to PORT)`)
    this.name = 'InvalidEgressForwardError'
  }
}

/** One raw egress forward. */
export interface EgressForwardSpec {
  /** The port on the world's 127.0.0.1 (default: {@link port}). */
  worldPort: number
  /** The name or IP literal dialed (no brackets). */
  host: string
  port: number
}

/**
 * Parse `[WORLD_PORT:]HOST:PORT`.
 * @throws InvalidEgressForwardError naming what is wrong.
 */
export function parseEgressForward(text: string): EgressForwardSpec {
  const match = /^(?:(\d+):)?(\[[^\]]+\]|[^:[\]]+):(\d+)$/.exec(text)
  if (match === null) throw new InvalidEgressForwardError(text, 'expected [WORLD_PORT:]HOST:PORT')
  const port = parsePort(match[3]!)
  const worldPort = match[1] === undefined ? port : parsePort(match[1])
  if (port === undefined || worldPort === undefined) throw new InvalidEgressForwardError(text, 'a port is 1..65535')
  const host = match[2]!.startsWith('[') ? match[2]!.slice(1, -1) : match[2]!
  return { worldPort, host, port }
}

/** The allow rule an `--egress` forward implies: its HOST:PORT (IPv6 bracketed). */
export function impliedAllowRule(spec: EgressForwardSpec): string {
  return spec.host.includes(':') ? `[${spec.host}]:${spec.port}` : `${spec.host}:${spec.port}`
}
