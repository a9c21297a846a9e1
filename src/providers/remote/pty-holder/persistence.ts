/**
 * The runtime setting `persistence` of both worlds (issue 22): whether a terminal's shell
 * outlives its transport or its client.
 * - `'off'`: the shell ends with its pipe (dsh-pty's attached mode).
 * - `'connection'` (the default, issue 33): a held shell (`dsh-pty --hold`, hold.c). Inside a live client, a transport
 *   loss shorter than `reconnectDeadlineMs` is invisible to terminal-bash: the handle stays,
 *   `done` does not reject, writes and probes wait, output resumes at its offset.
 * - `'client'`: as `'connection'`, and the shell also survives its client's death: a later
 *   client of the same DSH session and spawn spec gets the same shell back (held-shells.ts).
 *
 * The default rule. A world configured without `persistence` gets `'connection'` where dsh-pty,
 * the holder, can run, and `'off'` where it cannot (no build for the architecture, no writable
 * exec-able cache directory: pty-holder/holder-install.ts): the default never makes a world fail
 * and never holds a shell the world cannot hold; the runtime reports which it is
 * (`RemoteSubprocessRuntime.persistenceInEffect`, the CLI's `doctor`). A mode that is GIVEN,
 * `'off'` included, is kept as given: a given `'connection'` or `'client'` is refused where the
 * holder cannot run (PersistenceUnavailableError). Measured (issue 33's closing notes): a held
 * shell costs 1.02x of `'off'` over SSH and 1.06x in Docker from open to prompt, and ~1.0x on an
 * echo's settle; `npm run bench` prints both rows.
 * @module dsh-remote-worlds/providers/remote/pty-holder/persistence
 */
import { z } from 'zod'

/** Output a detached held shell keeps (bytes; the holder drops the oldest beyond it). */
export const DEFAULT_LOG_BYTES = 8 * 1024 * 1024
/** How long a held shell lives without any client (ms): 24 h. */
export const DEFAULT_TTL_MS = 24 * 60 * 60 * 1000
/** How long a transport may stay lost before the terminal fails (ms). */
export const DEFAULT_RECONNECT_DEADLINE_MS = 60_000

/** The modes of {@link PersistenceSetting}. */
export const PERSISTENCE_MODES = ['off', 'connection', 'client'] as const
export type PersistenceMode = typeof PERSISTENCE_MODES[number]

/** The mode of a world configured without `persistence`, where dsh-pty can hold its shells (see the module documentation). */
export const DEFAULT_PERSISTENCE_MODE: PersistenceMode = 'connection'

/**
 * `persistence` in the Docker and SSH runtime configs: a mode, or `{ mode, logBytes?, ttlMs?,
 * reconnectDeadlineMs?, stateDir? }`. `stateDir` is where a `'client'` world keeps the secrets of
 * its held shells on this machine (default `$XDG_STATE_HOME/dsh-remote-worlds/held`, else
 * `~/.local/state/dsh-remote-worlds/held`).
 */
export const PersistenceSetting = z.union([
  z.enum(PERSISTENCE_MODES),
  z.object({
    mode: z.enum(PERSISTENCE_MODES),
    logBytes: z.number().int().min(64 * 1024).max(1024 * 1024 * 1024).optional(),
    ttlMs: z.number().int().min(1000).optional(),
    reconnectDeadlineMs: z.number().int().min(0).optional(),
    stateDir: z.string().min(1).optional(),
  }).strict(),
])
export type PersistenceSetting = z.input<typeof PersistenceSetting>

/** The setting with its defaults applied. */
export interface Persistence {
  mode: PersistenceMode
  /**
   * True when the config gave no mode (the mode is {@link DEFAULT_PERSISTENCE_MODE}): a world
   * whose holder cannot run then degrades to `'off'` instead of refusing its terminals.
   */
  defaulted: boolean
  logBytes: number
  ttlMs: number
  reconnectDeadlineMs: number
  stateDir: string | undefined
}

/** Apply the defaults of {@link PersistenceSetting} (absent: {@link DEFAULT_PERSISTENCE_MODE}, `defaulted`). */
export function persistenceChoice(setting: PersistenceSetting | undefined): Persistence {
  const given = typeof setting === 'string' || setting === undefined ? { mode: setting ?? DEFAULT_PERSISTENCE_MODE } : setting
  return {
    mode: given.mode,
    defaulted: setting === undefined,
    logBytes: 'logBytes' in given && given.logBytes !== undefined ? given.logBytes : DEFAULT_LOG_BYTES,
    ttlMs: 'ttlMs' in given && given.ttlMs !== undefined ? given.ttlMs : DEFAULT_TTL_MS,
    reconnectDeadlineMs: 'reconnectDeadlineMs' in given && given.reconnectDeadlineMs !== undefined ? given.reconnectDeadlineMs : DEFAULT_RECONNECT_DEADLINE_MS,
    stateDir: 'stateDir' in given ? given.stateDir : undefined,
  }
}
