/**
 * The exec-starting verb the pool needs from its world, as types only, so the pool never
 * imports the world that owns it (docker-world.ts imports the pool).
 * @module dsh-remote-worlds/providers/docker/exec-pool/started-exec
 */
import type { Duplex } from 'node:stream'
import type Docker from 'dockerode'
import type { SubprocessOutcome } from '@deepseek-ai/dsh-subprocess'

/** A started exec: its engine object and hijacked duplex stream (attach listeners at once). */
export interface StartedExec {
  exec: Docker.Exec
  stream: Duplex
}

/** Options of one exec start. */
export interface ExecStartOptions {
  /** Engine-allocated PTY (`Tty: true`). */
  tty: boolean
  /** Exec user (`User`); undefined: the container's. */
  user: string | undefined
  /** Attach stdin (default true). */
  stdin?: boolean | undefined
  /** Extra `KEY=VALUE` entries of the exec's environment (`Env`), over the container's. */
  env?: readonly string[] | undefined
}

/**
 * Start an exec running `cmd` (argv, no shell) in the world's container.
 * @throws the world's typed errors (TargetNotRunningError, EngineUnavailableError, WorldClosedError).
 */
export type StartExec = (cmd: string[], options: ExecStartOptions) => Promise<StartedExec>

/**
 * The exit facts of an exec whose stream ended (ExecInspect).
 * @throws TransportError when the container stopped or the engine vanished meanwhile.
 */
export type ExecOutcome = (exec: Docker.Exec) => Promise<SubprocessOutcome>
