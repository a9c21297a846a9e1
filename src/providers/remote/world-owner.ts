/**
 * The owner of one remote world, as the halves that run on it see it: the process half
 * (`ctx.subprocess`, the runtimes) and the filesystem half (`ctx.fs`, src/files) share one
 * owner per target, so they share its connections, control channel, exec user, environment and
 * confinement. The Docker and SSH runtimes are owners; the filesystem half and the world tools
 * (providers/remote/world-tools) reach them only through this interface, never through the runtime classes.
 * @module dsh-remote-worlds/providers/remote/world-owner
 */
import type { ControlChannel } from './control-channel.ts'
import type { UserEnvironment } from './environment.ts'
import type { ProcessTransport } from './process.ts'
import type { Persistence } from './pty-holder/persistence.ts'

/**
 * One remote world's owner (the Docker or SSH runtime). Every method opens the world on first
 * use and runs as the world's user.
 */
export interface WorldOwner {
  /** World description for messages, e.g. `docker container 0123456789ab as agent`. */
  describe(): string
  /**
   * The control channel of the world's user (control.sh).
   * @throws the world's open errors (TargetNotFoundError, TransportError, ...); WorldClosedError after disposal.
   */
  control(): Promise<ControlChannel>
  /** The environment the world gives its user (HOME, PATH, locale; remote/environment.ts). */
  userEnvironment(): Promise<UserEnvironment>
  /**
   * Start `sh -c SCRIPT` without a PTY, stdin attached, as the world's user: a fresh exec
   * (Docker) or exec channel (SSH). Nothing is killed when the transport closes; a program that
   * must not outlive its client ends at its stdin's EOF.
   * @throws TargetNotRunningError, TransportError, WorldClosedError.
   */
  openProcess(script: string): Promise<ProcessTransport>
  /** A new session tag of this client (ownership.ts): a program carrying it is reaped when the client is gone. */
  newTag(): string
  /**
   * Whether the world answers its programs now, as far as this client knows without asking it:
   * false for a container the engine reported paused or stopped (Docker's event watch,
   * docker/state-watch.ts), or whose events it cannot follow; true for SSH worlds. A lookup
   * only the world's own programs can answer (a control-channel request) is skipped when false,
   * so the caller meets the world's own error at once (an exec's TargetNotRunningError) instead
   * of waiting out the control channel's bound.
   * @throws the world's open errors.
   */
  answering(): Promise<boolean>
  /**
   * Variables every program this world starts from now on gets (terminals and `spawn`), layered
   * over the world's ambient environment, so under a spec's own env: the network half's proxy
   * settings (src/network/world-network.ts). Each call replaces the previous layer; programs
   * already running keep what they started with.
   */
  setWorldVariables(variables: Readonly<Record<string, string>>): void
  /**
   * How long what runs in the world outlives this client (the runtime's `persistence` setting,
   * pty-holder/persistence.ts): held shells follow it, and the background jobs of the jobs room
   * (src/jobs/) are held in the world only under `'client'`.
   */
  persistenceSetting(): Persistence
  /**
   * Keep the world open for `work` (a record written to the world, say) when this client ends:
   * the runtime's disposal waits for it, bounded, before it refuses work and closes the world.
   * Cordis does not order one plugin's disposal after another's, so a half above the runtime
   * (the jobs room) cannot finish its writes in its own.
   */
  keepOpenFor(work: Promise<unknown>): void
}

/** The property a runtime exposes its owner by (a symbol, so no seam's own names are taken). */
export const WORLD_OWNER: unique symbol = Symbol.for('dsh-remote-worlds.world-owner')

/** Something carrying a {@link WorldOwner} (our runtimes do). */
export interface HasWorldOwner {
  readonly [WORLD_OWNER]: WorldOwner
}

/**
 * The world owner behind a `ctx.subprocess` service, when it is one of this package's runtimes.
 * @returns undefined for any other value (a local provider, another package's runtime).
 */
export function worldOwnerOf(value: unknown): WorldOwner | undefined {
  if (typeof value !== 'object' || value === null || !(WORLD_OWNER in value)) return undefined
  return (value as HasWorldOwner)[WORLD_OWNER]
}
