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
  | StartErrno
  | 'SPAWN_FAILED'
  | 'SPAWN_CANCELLED'
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
  | 'HELD_SHELL_BUSY'
  | 'HELD_SHELL_DENIED'
  | 'HELD_SHELL_LOST'
  | 'PERSISTENCE_UNAVAILABLE'
  | 'SWARM_NOT_A_MANAGER'
  | 'SWARM_TASK_UNSCHEDULABLE'
  | 'SWARM_TASK_FAILED'
  | 'SWARM_NODE_UNREACHABLE'
  | 'SWARM_NODE_LOST'
  | 'SWARM_CLEANUP_UNPROVEN'
  | 'INVALID_SESSION_NAME'

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

/**
 * A session name (the CLI's `--session`) that cannot be shown on one line: empty, or holding a
 * control character or a line or paragraph separator. It is printed in status lines, doctor's
 * listings and the detach line's command, where such a name would break the line or act on the
 * terminal. The message states the rule.
 */
export class InvalidSessionNameError extends RemoteWorldError {
  constructor(message: string) {
    super('INVALID_SESSION_NAME', message)
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

/**
 * The errno names a start failure carries as its `code`: the ones Node's `child_process.spawn`
 * (libuv's uv_spawn) gives the upstream local provider for the same case, so code written
 * against the local world branches the same way: ENOENT (no such program or directory),
 * EACCES (a program without execute permission, a directory that cannot be entered), ENOTDIR
 * (a cwd that is not a directory).
 */
export type StartErrno = 'ENOENT' | 'EACCES' | 'ENOTDIR'

/** Linux errno numbers of {@link StartErrno} (asm-generic/errno-base.h), as the wrapper reports them. */
export const START_ERRNO: Readonly<Record<number, StartErrno>> = { 2: 'ENOENT', 13: 'EACCES', 20: 'ENOTDIR' }

/**
 * The program to run does not exist (or is not an executable file) in the remote world: an
 * image without bash, a name not on PATH. `code` is the errno name the local provider's spawn
 * gives (ENOENT, or EACCES for a file without execute permission); the message starts with it.
 */
export class ExecutableNotFoundError extends RemoteWorldError {
  /** The program as requested. */
  readonly executable: string
  /** Node's errno-exception fields, as the local provider's spawn error has them. */
  readonly errno: number
  readonly syscall: string
  readonly path: string

  constructor(executable: string, where: string, code: 'ENOENT' | 'EACCES' = 'ENOENT') {
    const what = executable.includes('/') ? `command ${JSON.stringify(executable)} is not an executable file` : `command ${JSON.stringify(executable)} was not found on PATH`
    super(code, `${code}: ${what} in ${where}`)
    this.executable = executable
    this.errno = code === 'ENOENT' ? -2 : -13
    this.syscall = `spawn ${executable}`
    this.path = executable
  }
}

/**
 * The working directory cannot be entered in the remote world. `code` is the errno name the
 * local provider's spawn gives for the same cwd (ENOENT missing, ENOTDIR not a directory,
 * EACCES not enterable); the message starts with it.
 */
export class CwdNotFoundError extends RemoteWorldError {
  /** The directory as requested. */
  readonly cwd: string
  /** Node's errno-exception fields (`syscall` is the failing `chdir`). */
  readonly errno: number
  readonly syscall = 'chdir'
  readonly path: string

  constructor(cwd: string, where: string, code: StartErrno = 'ENOENT') {
    const what = code === 'ENOENT' ? 'no such working directory' : code === 'ENOTDIR' ? 'the working directory is not a directory' : 'the working directory cannot be entered (permission denied)'
    super(code, `${code}: ${what} in ${where}: ${cwd}`)
    this.cwd = cwd
    this.errno = code === 'ENOENT' ? -2 : code === 'ENOTDIR' ? -20 : -13
    this.path = cwd
  }
}

/**
 * A start cancelled before anything ran in the world, only on the caller's request: the handle's
 * `terminate({ cancelUnstarted: true })` (remote/process.ts `RemoteTerminateOptions`) while the
 * world was still being prepared. `done` rejects with it, as a failed spawn: no process
 * started, so no signal was sent and none is reported. The message is the local provider's
 * `aborted before spawn: REASON` when the spec's signal had aborted, else `terminated before the
 * process started in the world`. A plain `terminate()`, an abort or a disposal never gives it:
 * the start finishes and the program is signalled (its true outcome).
 */
export class SpawnCancelledError extends RemoteWorldError {
  constructor(message: string) {
    super('SPAWN_CANCELLED', message)
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

/** The operation is not available in this world, or on this engine (the message names it and why). */
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

/**
 * A held shell (`persistence` 'connection' or 'client') is controlled by another client that is
 * still connected: one controller at a time (world/dsh-pty/hold.c). A takeover is granted only once
 * that client is gone (no live control program of it in the world's ownership registry).
 */
export class HeldShellBusyError extends RemoteWorldError {
  constructor(message: string) {
    super('HELD_SHELL_BUSY', message)
  }
}

/** A held shell refused an attach: the secret does not match its digest, or the user is not its owner. */
export class HeldShellDeniedError extends RemoteWorldError {
  constructor(message: string) {
    super('HELD_SHELL_DENIED', message)
  }
}

/** Why a held shell this client knew is not there to reattach (see {@link HeldShellLostError}). */
export type HeldShellLoss = 'host-rebooted' | 'world-restarted' | 'holder-gone' | 'holder-replaced'

/**
 * A held shell this client recorded cannot be reattached, and a fresh one is NOT started in its
 * place silently: the host rebooted (another boot id), the world restarted (another pid
 * namespace: a restarted container), its holder ended (its TTL passed, or it was killed), or
 * another process now has the holder's pid (its start time differs). The record is dropped, so
 * the next terminal of the session starts a fresh shell.
 */
export class HeldShellLostError extends RemoteWorldError {
  /** What happened to it. */
  readonly loss: HeldShellLoss

  constructor(loss: HeldShellLoss, message: string) {
    super('HELD_SHELL_LOST', message)
    this.loss = loss
  }
}

/** Persistence was asked of a world where no held shell can run (no dsh-pty there, or a world that dies with its client). */
export class PersistenceUnavailableError extends RemoteWorldError {
  constructor(message: string) {
    super('PERSISTENCE_UNAVAILABLE', message)
  }
}
