/**
 * Typed failures of remote worlds. Every error a caller can act on has its own class and a
 * stable `code`, so a CLI or a composition can branch without parsing messages.
 * @module dsh-remote-worlds/providers/remote/errors
 */

/** Stable machine-routable codes of {@link RemoteWorldError}. */
export type RemoteWorldErrorCode =
  | 'INVALID_ARGUMENT'
  | 'TARGET_NOT_FOUND'
  | 'TARGET_NOT_RUNNING'
  | 'ENGINE_UNAVAILABLE'
  | 'EXECUTABLE_NOT_FOUND'
  | 'CWD_NOT_FOUND'
  | 'SPAWN_FAILED'
  | 'TRANSPORT_FAILED'
  | 'CONTROL_FAILED'
  | 'CLEANUP_FAILED'
  | 'NOT_SUPPORTED'
  | 'WORLD_CLOSED'
  | 'SCREEN_UNAVAILABLE'
  | 'AUTH_FAILED'
  | 'HOST_KEY_UNKNOWN'
  | 'HOST_KEY_CHANGED'
  | 'HOST_KEY_REVOKED'
  | 'CONNECTION_REFUSED'
  | 'HOST_NOT_FOUND'
  | 'CONNECT_TIMEOUT'
  | 'HANDSHAKE_TIMEOUT'
  | 'DEVCONTAINER_NOT_FOUND'
  | 'DEVCONTAINER_AMBIGUOUS'
  | 'DEVCONTAINER_STOPPED'
  | 'DEVCONTAINER_CONFIG_MISSING'
  | 'DEVCONTAINER_CONFIG_INVALID'
  | 'DEVCONTAINER_USER_NOT_FOUND'
  | 'WORLD_TOOL_UNAVAILABLE'

/** Base class of every error this package throws on purpose. */
export class RemoteWorldError extends Error {
  /** Stable code; see {@link RemoteWorldErrorCode}. */
  readonly code: RemoteWorldErrorCode

  constructor(code: RemoteWorldErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = new.target.name
    this.code = code
  }
}

/** A caller-supplied value cannot be represented in the remote world (e.g. a NUL byte in argv). */
export class InvalidArgumentError extends RemoteWorldError {
  constructor(message: string) {
    super('INVALID_ARGUMENT', message)
  }
}

/** The named target (container, host alias) does not exist. */
export class TargetNotFoundError extends RemoteWorldError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('TARGET_NOT_FOUND', message, options)
  }
}

/** The target exists but cannot run processes now (a stopped or paused container). */
export class TargetNotRunningError extends RemoteWorldError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('TARGET_NOT_RUNNING', message, options)
  }
}

/** The Docker engine (or another control plane) does not answer. */
export class EngineUnavailableError extends RemoteWorldError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ENGINE_UNAVAILABLE', message, options)
  }
}

/** The program to run does not exist in the remote world (e.g. an image without bash). */
export class ExecutableNotFoundError extends RemoteWorldError {
  /** The program as requested. */
  readonly executable: string

  constructor(executable: string, where: string) {
    super('EXECUTABLE_NOT_FOUND', `executable not found in ${where}: ${executable}`)
    this.executable = executable
  }
}

/** The requested working directory does not exist (or is not enterable) in the remote world. */
export class CwdNotFoundError extends RemoteWorldError {
  /** The directory as requested. */
  readonly cwd: string

  constructor(cwd: string, where: string) {
    super('CWD_NOT_FOUND', `working directory does not exist or is not enterable in ${where}: ${cwd}`)
    this.cwd = cwd
  }
}

/** Terminal allocation failed for a reason other than a missing program or directory. */
export class SpawnFailedError extends RemoteWorldError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SPAWN_FAILED', message, options)
  }
}

/**
 * The connection to the remote world broke while something was live: the container died,
 * the engine socket closed, the SSH connection dropped. Handles reject `done` with this.
 */
export class TransportError extends RemoteWorldError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('TRANSPORT_FAILED', message, options)
  }
}

/** The remote control program answered something unexpected or is gone. */
export class ControlChannelError extends RemoteWorldError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CONTROL_FAILED', message, options)
  }
}

/** Teardown could not prove quiescence: these remote processes survived SIGKILL. */
export class CleanupFailedError extends RemoteWorldError {
  /** Surviving remote pids. */
  readonly survivors: readonly number[]

  constructor(survivors: readonly number[], detail = '') {
    super('CLEANUP_FAILED', `terminal cleanup failed; surviving remote pids: ${survivors.join(', ')}${detail}`)
    this.survivors = survivors
  }
}

/** The operation is not implemented by this world yet (named in the message). */
export class NotSupportedError extends RemoteWorldError {
  constructor(message: string) {
    super('NOT_SUPPORTED', message)
  }
}

/** The world (runtime) was disposed; nothing new can start in it. */
export class WorldClosedError extends RemoteWorldError {
  constructor(message = 'the remote world is closed') {
    super('WORLD_CLOSED', message)
  }
}

/**
 * A terminal's screen cannot be shown: the terminal runs without an emulator (runtime setting
 * `terminal: { emulator: false }`, or a world that has none, such as the upstream local
 * provider), the terminal was closed, or its emulator failed (the cause says why).
 */
export class ScreenUnavailableError extends RemoteWorldError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('SCREEN_UNAVAILABLE', message, options)
  }
}

/**
 * A program this package copies into worlds (the file server, ripgrep; providers/remote/world-tools) cannot
 * be had: its build is missing from the package, the world's architecture has none, or no
 * cache directory of the world's user can hold and run it (read-only, noexec, another user's).
 */
export class WorldToolUnavailableError extends RemoteWorldError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('WORLD_TOOL_UNAVAILABLE', message, options)
  }
}
