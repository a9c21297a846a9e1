/**
 * Typed failures of connecting to an SSH world. Each has its own class and `code` (see
 * {@link RemoteWorldErrorCode}); all fail at connect time, before anything runs remotely.
 * @module dsh-remote-worlds/providers/ssh/errors
 */
import { RemoteWorldError } from '../remote/errors.ts'

/** The server rejected every configured authentication method. */
export class SshAuthenticationError extends RemoteWorldError {
  /** `user@host:port` that was tried. */
  readonly destination: string
  /** The methods offered, in order (e.g. `publickey:~/.ssh/id_ed25519`, `agent`, `password`). */
  readonly methods: readonly string[]

  /** Identity files that were named but could not be used, each with why (see SshCredentials.skipped). */
  readonly skipped: readonly string[]

  constructor(destination: string, methods: readonly string[], options: { cause?: unknown; skipped?: readonly string[] | undefined } = {}) {
    const skipped = options.skipped ?? []
    const tried = methods.length > 0 ? methods.join(', ') : skipped.length > 0 ? 'no method' : 'no method (configure --identity, an ssh-agent or a password)'
    super('AUTH_FAILED', `authentication to ${destination} failed; tried: ${tried}${skipped.length > 0 ? `; skipped identity files: ${skipped.join(', ')}` : ''}`, { cause: options.cause })
    this.destination = destination
    this.methods = methods
    this.skipped = skipped
  }
}

/** The server's host key is not in any known_hosts file (and no fingerprint is pinned). */
export class UnknownHostKeyError extends RemoteWorldError {
  /** The name looked up in known_hosts (`host` or `[host]:port`). */
  readonly host: string
  /** The presented key's fingerprint, `SHA256:<base64>` as `ssh-keygen -l` prints it. */
  readonly fingerprint: string
  /** The presented key's type, e.g. `ssh-ed25519`. */
  readonly keyType: string

  constructor(host: string, keyType: string, fingerprint: string, detail = '') {
    super('HOST_KEY_UNKNOWN', `the host key of ${host} is not trusted: ${keyType} ${fingerprint} is in no known_hosts file${detail}; verify it out of band, then add it (ssh-keyscan) or pin the fingerprint`)
    this.host = host
    this.keyType = keyType
    this.fingerprint = fingerprint
  }
}

/** The server presented a key different from the one known (or pinned) for it. */
export class HostKeyChangedError extends RemoteWorldError {
  /** The name looked up in known_hosts (`host` or `[host]:port`). */
  readonly host: string
  /** The presented key's fingerprint. */
  readonly fingerprint: string
  /** The presented key's type. */
  readonly keyType: string
  /** Fingerprints of the keys known or pinned for this host. */
  readonly expected: readonly string[]

  constructor(host: string, keyType: string, fingerprint: string, expected: readonly string[]) {
    super('HOST_KEY_CHANGED', `REMOTE HOST KEY CHANGED for ${host}: it presented ${keyType} ${fingerprint}, but ${expected.join(', ')} is known for it; someone may be intercepting the connection, or the host was reinstalled`)
    this.host = host
    this.keyType = keyType
    this.fingerprint = fingerprint
    this.expected = expected
  }
}

/** The server presented a key marked `@revoked` in known_hosts. */
export class HostKeyRevokedError extends RemoteWorldError {
  readonly host: string
  readonly fingerprint: string

  constructor(host: string, fingerprint: string) {
    super('HOST_KEY_REVOKED', `the host key ${fingerprint} presented by ${host} is marked @revoked in known_hosts`)
    this.host = host
    this.fingerprint = fingerprint
  }
}

/** Nothing listens on the target port (TCP RST). */
export class ConnectionRefusedError extends RemoteWorldError {
  constructor(destination: string, options?: { cause?: unknown }) {
    super('CONNECTION_REFUSED', `connection to ${destination} refused: no SSH server listens there`, options)
  }
}

/** The host name does not resolve. */
export class HostNotFoundError extends RemoteWorldError {
  /** The name that failed to resolve. */
  readonly hostname: string

  constructor(hostname: string, options?: { cause?: unknown }) {
    const code = (options?.cause as { code?: string } | undefined)?.code
    super('HOST_NOT_FOUND', `cannot resolve host name ${JSON.stringify(hostname)}${code !== undefined ? ` (${code})` : ''}`, options)
    this.hostname = hostname
  }
}

/** TCP did not connect within the connect timeout (no answer at all: filtered, unreachable). */
export class ConnectTimeoutError extends RemoteWorldError {
  constructor(destination: string, timeoutMs: number, options?: { cause?: unknown }) {
    super('CONNECT_TIMEOUT', `TCP connection to ${destination} did not complete within ${timeoutMs} ms`, options)
  }
}

/**
 * TCP connected but the SSH handshake (version exchange, key exchange, authentication) did not
 * finish within the connect timeout: the server accepts connections but never speaks SSH, or
 * is frozen.
 */
export class HandshakeTimeoutError extends RemoteWorldError {
  /** How far the handshake got: `banner` (no SSH identification), `kex`, or `auth`. */
  readonly phase: 'banner' | 'kex' | 'auth'

  constructor(destination: string, phase: 'banner' | 'kex' | 'auth', timeoutMs: number) {
    const what = phase === 'banner' ? 'the server accepted TCP but sent no SSH identification' : phase === 'kex' ? 'the SSH key exchange did not finish' : 'authentication did not finish'
    super('HANDSHAKE_TIMEOUT', `SSH handshake with ${destination} timed out after ${timeoutMs} ms: ${what}`)
    this.phase = phase
  }
}
