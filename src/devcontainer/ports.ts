/**
 * devcontainer.json `forwardPorts` and `portsAttributes`: which ports of the container are
 * forwarded to this machine, and their labels. Pure.
 *
 * Source: devcontainers/spec docs/specs/devcontainerjson-reference.md. `forwardPorts` is "an
 * array of port numbers or "host:port" values" (🏷️: also in the `devcontainer.metadata` label);
 * the reference CLI merges the label's entries and the file's as a union, in order, without
 * repeats (devcontainers/cli src/spec-node/imageMetadata.ts `mergeConfiguration`). `portsAttributes`
 * maps "a port number, range, or regular expression" to attributes (`label`, `onAutoForward`,
 * `protocol`, `requireLocalPort`, `elevateIfNeeded`); merged per key, later wins.
 *
 * Applied here: a port of the container's own loopback (a number 1..65535, or `"N"`,
 * `"localhost:N"`, `"127.0.0.1:N"`), forwarded from this machine's 127.0.0.1 on the same port
 * (another free port when it is taken, as VS Code does), with the `label` of its single-port
 * `portsAttributes` key. A `host:port` of another host (a compose service, `"db:5432"`) and every
 * other attribute are listed as not applied, by name.
 * @module dsh-remote-worlds/devcontainer/ports
 */

/** A port of the dev container forwarded to this machine. */
export interface DevcontainerForwardPort {
  /** The port on the container's loopback (and, when free, on this machine's 127.0.0.1). */
  port: number
  /** `portsAttributes[port].label`, when set. */
  label?: string
}

/** What {@link forwardPortsOf} reads of one configuration (the file, or one metadata entry). */
export interface ForwardPortsPart {
  /** The ports, in order, without repeats. */
  ports: number[]
  /** Labels by port (single-port `portsAttributes` keys only). */
  labels: Record<number, string>
  /** Entries and attributes not applied, one phrase each (`forwardPorts entry "db:5432": ...`). */
  unsupported: string[]
  /** Wrong shapes (`forwardPorts` not an array, `portsAttributes` not an object). */
  problems: string[]
}

/** The port of a `forwardPorts` entry forwarded here, or undefined for any other entry. */
export function forwardPortEntry(entry: unknown): number | undefined {
  const valid = (port: number): number | undefined => Number.isInteger(port) && port >= 1 && port <= 65_535 ? port : undefined
  if (typeof entry === 'number') return valid(entry)
  if (typeof entry !== 'string') return undefined
  const match = /^(?:(?:localhost|127\.0\.0\.1):)?([1-9][0-9]{0,4})$/.exec(entry)
  return match === null ? undefined : valid(Number(match[1]))
}

/**
 * Read `forwardPorts` and `portsAttributes` of one configuration object.
 * @param from - appended to each phrase, e.g. ` (the container's devcontainer.metadata label)`; default none.
 */
export function forwardPortsOf(config: Readonly<Record<string, unknown>>, from = ''): ForwardPortsPart {
  const part: ForwardPortsPart = { ports: [], labels: {}, unsupported: [], problems: [] }
  const forward = config.forwardPorts
  if (forward !== undefined) {
    if (!Array.isArray(forward)) {
      part.problems.push(`forwardPorts${from}: must be an array of ports or "host:port" strings`)
    } else {
      for (const entry of forward as unknown[]) {
        const port = forwardPortEntry(entry)
        if (port === undefined) part.unsupported.push(`forwardPorts entry ${JSON.stringify(entry)}${from}: only a port of the container's own loopback is forwarded (N, "localhost:N" or "127.0.0.1:N", N 1..65535)`)
        else if (!part.ports.includes(port)) part.ports.push(port)
      }
    }
  }
  const attributes = config.portsAttributes
  if (attributes !== undefined) {
    if (attributes === null || typeof attributes !== 'object' || Array.isArray(attributes)) {
      part.problems.push(`portsAttributes${from}: must be an object keyed by port`)
    } else {
      for (const [key, value] of Object.entries(attributes as Record<string, unknown>)) {
        const port = /^[1-9][0-9]{0,4}$/.test(key) && Number(key) <= 65_535 ? Number(key) : undefined
        if (port === undefined || value === null || typeof value !== 'object' || Array.isArray(value)) {
          part.unsupported.push(`portsAttributes ${JSON.stringify(key)}${from}: only a single port's attributes object is applied`)
          continue
        }
        for (const [name, attribute] of Object.entries(value as Record<string, unknown>)) {
          if (name === 'label' && typeof attribute === 'string') part.labels[port] = attribute
          else part.unsupported.push(`portsAttributes.${key}.${name}${from}`)
        }
      }
    }
  }
  return part
}

/**
 * The forwarded ports of several parts merged: the ports' union in order without repeats, each
 * port's label the last part's that sets one.
 * @param parts - in merge order (the metadata label's entries, then the file).
 * @example mergeForwardPorts([{ ports: [3000], labels: {} }, { ports: [3000, 8080], labels: { 3000: 'App' } }]) // [{ port: 3000, label: 'App' }, { port: 8080 }]
 */
export function mergeForwardPorts(parts: readonly Pick<ForwardPortsPart, 'ports' | 'labels'>[]): DevcontainerForwardPort[] {
  const ports: number[] = []
  const labels: Record<number, string> = {}
  for (const part of parts) {
    for (const port of part.ports) if (!ports.includes(port)) ports.push(port)
    Object.assign(labels, part.labels)
  }
  return ports.map(port => labels[port] !== undefined ? { port, label: labels[port] } : { port })
}
