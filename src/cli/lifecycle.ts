/**
 * CLI process lifecycle: every opened world is disposed, on success, on error, and on
 * SIGINT/SIGTERM/SIGHUP (a Ctrl-C or a closed terminal must not leave a managed container or a
 * remote shell running); a cleanup failure never hides the error that caused it.
 * @module dsh-remote-worlds/cli/lifecycle
 */
import { setTimeout as delay } from 'node:timers/promises'
import type { RemoteWorld } from '../backend/world.ts'
import { type Target, openTarget } from './target.ts'

/** Every open world, and how the CLI leaves it: disposed, or (`--persist client`) detached. */
const openWorlds = new Map<RemoteWorld, () => Promise<unknown>>()
/** How long a signal-triggered teardown may take before the CLI exits anyway (ms). */
const SIGNAL_TEARDOWN_MS = 20_000

/**
 * Register a world for disposal on a terminating signal.
 * @returns a function that unregisters it.
 */
export function trackWorld(world: RemoteWorld, leave: () => Promise<unknown> = () => world.dispose()): () => void {
  openWorlds.set(world, leave)
  return () => { openWorlds.delete(world) }
}

/**
 * How the CLI leaves a world: `--persist client` detaches (its held shells go on in the world for
 * a later run of the same `--session`, until their TTL); otherwise it disposes (every shell ends).
 */
export function leaveWorld(target: Pick<Target, 'persistence'>, world: RemoteWorld): () => Promise<unknown> {
  return target.persistence === 'client' ? () => world.detach() : () => world.dispose()
}

/**
 * Open `target`, run `body`, and always leave the world (see {@link leaveWorld}: disposed, or
 * detached under `--persist client`). When `body` failed, a disposal failure is reported on
 * stderr and the body's error is rethrown (it names the cause).
 */
export async function withWorld<T>(target: Target, body: (world: RemoteWorld) => Promise<T>): Promise<T> {
  const world = await openTarget(target)
  const leave = leaveWorld(target, world)
  const untrack = trackWorld(world, leave)
  let failed = false
  try {
    return await body(world)
  } catch (error) {
    failed = true
    throw error
  } finally {
    untrack()
    try {
      await leave()
    } catch (cleanupError) {
      if (!failed) throw cleanupError
      process.stderr.write(`dsh-remote-worlds: cleanup after the failure also failed: ${describeError(cleanupError)}\n`)
    }
  }
}

/**
 * On SIGINT, SIGTERM or SIGHUP: dispose every open world (teardown ladder, managed containers
 * removed), bounded by 20 s, then exit with 128 + the first signal's number. The handlers stay
 * installed: a repeated signal while the teardown runs is ignored rather than killing the
 * process mid-teardown (a Ctrl-C reaches every process of the terminal's group, and launchers
 * such as the tsx CLI relay it once more). What a teardown cut short by SIGKILL leaves is
 * ended by the world itself (a managed container's lifeline) or by the next client's reap
 * (providers/remote/ownership.ts).
 */
export function installSignalTeardown(): void {
  const numbers: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGTERM: 15 }
  let closing = false
  for (const signal of Object.keys(numbers)) {
    process.on(signal, () => {
      if (closing) return
      closing = true
      process.stderr.write(`\ndsh-remote-worlds: ${signal}: closing ${openWorlds.size} world(s) ...\n`)
      const teardown = Promise.allSettled([...openWorlds.values()].map(leave => leave())).then(outcomes => {
        // A detach (--persist client) resolves with the number of held shells it left running.
        const left = outcomes.reduce((sum, outcome) => sum + (outcome.status === 'fulfilled' && typeof outcome.value === 'number' ? outcome.value : 0), 0)
        if (left > 0) process.stderr.write(`# detached: ${left} held shell(s) go on in the world; a later run of the same --session and options takes them back\n`)
      })
      void Promise.race([teardown, delay(SIGNAL_TEARDOWN_MS)]).then(() => process.exit(128 + numbers[signal]!))
    })
  }
}

/**
 * The message of an error, with the real reason first: upstream's SandboxUnavailableError
 * leads with generic advice for local hosts (bubblewrap, Landlock, sandbox-exec, ACL runners)
 * and ends with ` Runner failure: DETAIL`, where this package's providers say what is true of
 * the remote world; the detail is moved to the front.
 */
function leadingMessage(failure: { name?: string; message?: string }): string {
  const message = failure.message ?? ''
  const at = message.indexOf(' Runner failure: ')
  if (failure.name !== 'SandboxUnavailableError' || at < 0) return message
  const mode = /^sandbox mode "([^"]+)"/.exec(message)?.[1]
  return `${message.slice(at + ' Runner failure: '.length)} (sandbox mode ${mode ?? 'requested'} cannot be enforced there, so nothing was started; use a world that enforces it, or danger-full-access)`
}

/** One line per error: name, code, message; inner errors of an AggregateError and `cause` chains follow, indented. */
export function describeError(error: unknown): string {
  const failure = error as { name?: string; code?: string; message?: string; errors?: unknown[] }
  const head = `${failure.name ?? 'Error'}${failure.code !== undefined ? ` [${failure.code}]` : ''}: ${(failure.message === undefined ? String(error) : leadingMessage(failure)).replaceAll('\r', '')}`
  const cause = (error as { cause?: unknown }).cause
  const lines = [head]
  if (Array.isArray(failure.errors)) lines.push(...failure.errors.map(inner => `  - ${describeError(inner).replaceAll('\n', '\n    ')}`))
  if (cause !== undefined) lines.push(`  caused by: ${describeError(cause).replaceAll('\n', '\n  ')}`)
  return lines.join('\n')
}
