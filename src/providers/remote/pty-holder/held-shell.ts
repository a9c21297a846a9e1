/**
 * Starting a held shell (world/dsh-pty/hold.c) and reaching it again (`dsh-pty --connect`), the same way in
 * every world: the world only gives a dsh-pty waiting for its first frame (the one its attached
 * terminals use: a pooled Docker exec, an SSH exec channel without a pty), which the hold frame
 * turns into the holder's relay, and runs a command on a plain pipe as the terminal's user.
 *
 * A held shell lives in the world's held-shell directory of its user, `/tmp/dsh-remote-held-UID`
 * (0700, this uid's, not a symlink; hold.c checks): `ID.sock` (the holder's socket), `ID.meta`
 * (its description, for listings and lookups). Its shell's session tag names an owner id of the
 * holder's own, which the holder registers in the session-ownership registry (ownership.ts), so
 * no client's reaper ends the shell while its holder lives.
 * @module dsh-remote-worlds/providers/remote/pty-holder/held-shell
 */
import { createHash, randomBytes } from 'node:crypto'
import { newClientId, SESSION_TAG_VARIABLE } from '../ownership.ts'
import type { ProcessTransport } from '../process.ts'
import type { WorldToolCopy } from '../world-tools/launch.ts'
import { holderScript } from './holder-install.ts'
import { type HeldShellLink, type HeldTerminal, type OutputGap, openHeldTerminal } from './held-terminal.ts'
import type { Persistence } from './persistence.ts'

/** Runs `sh -c SCRIPT` as the terminal's user in the world, on a plain pipe with stdin attached. */
export type PipeOpener = (script: string) => Promise<ProcessTransport>

/** The held-shell directory of `uid` in a world (see the module). */
export function heldShellDirectory(uid: number): string {
  return `/tmp/dsh-remote-held-${uid}`
}

/** One held shell's names and secret, chosen by the client before it starts. */
export interface HeldShellPlan {
  /** Its id: the file names in the held-shell directory (32 hex digits). */
  id: string
  /** STEM: the directory and the id (`STEM.sock`, `STEM.meta`). */
  stem: string
  /** The owner id its holder registers as (32 hex digits). */
  owner: string
  /** The shell's session tag (ownership.ts): `OWNER.SESSION`. */
  tag: string
  /** The secret an attach presents (32 bytes); only its SHA-256 goes to the world. */
  secret: Buffer
}

/** Choose the names and the secret of a new held shell of user `uid`. */
export function planHeldShell(uid: number): HeldShellPlan {
  const id = randomBytes(16).toString('hex')
  const owner = newClientId()
  return { id, stem: `${heldShellDirectory(uid)}/${id}`, owner, tag: `${owner}.${randomBytes(8).toString('hex')}`, secret: randomBytes(32) }
}

/** What {@link startHeldShell} needs besides the plan. */
export interface HeldShellStart {
  /** dsh-pty's path in the world (holder-install.ts). */
  holder: WorldToolCopy
  /**
   * A dsh-pty ({@link holder}) waiting for its first frame, on the terminal's connection
   * (the world's attached-terminal pipe): it becomes the relay to the new holder.
   */
  openHolder: () => Promise<ProcessTransport>
  /** Every later pipe (`dsh-pty --connect`). */
  reopen: PipeOpener
  /** The start wrapper and the PTY's size. */
  script: string
  rows: number
  cols: number
  where: string
  persistence: Persistence
  /** This client's controller id (its ownership client id). */
  controller: string
  /** What a later client looks the shell up by, and a label for listings (held-shells.ts). */
  key: string
  label: string
  /** A tag for the relays (`--connect`) this client runs: its own session tag, so a dead client's relay is reaped. */
  relayTag?: string | undefined
  onGap?: ((gap: OutputGap) => void) | undefined
}

/** How a client reaches the held shell of `plan` again (relays through `reopen`). */
export function heldShellLink(plan: Pick<HeldShellPlan, 'stem' | 'secret'>, options: Pick<HeldShellStart, 'holder' | 'reopen' | 'persistence' | 'controller' | 'relayTag' | 'onGap'>): HeldShellLink {
  return {
    secret: plan.secret,
    controller: options.controller,
    reconnect: () => options.reopen(holderScript(options.holder, options.relayTag, ['--connect', `${plan.stem}.sock`])),
    deadlineMs: options.persistence.reconnectDeadlineMs,
    onGap: options.onGap,
  }
}

/**
 * Start the held shell of `plan`: the world's dsh-pty, asked to hold, binds the shell's socket,
 * forks the holder (without this client's session tag: hold.c) and relays this pipe to it; the
 * holder starts the shell and answers `started`.
 * @throws SpawnFailedError when the holder cannot start (its reason: a held-shell directory that
 *   is not this user's, a socket path too long), TransportError when the pipe breaks first.
 */
export async function startHeldShell(plan: HeldShellPlan, start: HeldShellStart): Promise<HeldTerminal> {
  const pipe = await start.openHolder()
  return openHeldTerminal(pipe, {
    script: start.script,
    rows: start.rows,
    cols: start.cols,
    where: start.where,
    held: {
      stem: plan.stem,
      spawn: {
        logBytes: start.persistence.logBytes,
        ttlSeconds: heldTtlSeconds(start.persistence),
        secretDigest: createHash('sha256').update(plan.secret).digest(),
        owner: plan.owner,
        controller: start.controller,
        key: start.key,
        label: start.label,
      },
      link: heldShellLink(plan, start),
    },
  })
}

/**
 * What a 'connection' shell's holder waits beyond the reconnect deadline (s): the holder may see
 * the pipe go some time before the client does (a relay that ended first).
 */
const CONNECTION_TTL_SLACK_S = 10

/**
 * How long a held shell lives without a controller (s; the holder's TTL, hold.c). 'client': the
 * setting's `ttlMs`. 'connection': the reconnect deadline and a slack, since only the client that
 * started the shell may reach it again and it stops trying then; a client that died leaves
 * nothing for longer (never the 24 h of 'client').
 */
export function heldTtlSeconds(persistence: Pick<Persistence, 'mode' | 'ttlMs' | 'reconnectDeadlineMs'>): number {
  return persistence.mode === 'connection'
    ? Math.ceil(persistence.reconnectDeadlineMs / 1000) + CONNECTION_TTL_SLACK_S
    : Math.ceil(persistence.ttlMs / 1000)
}

/** The DSH ids terminal-bash puts in a terminal's environment (dsh-terminal-bash `childEnvironment`). */
const DSH_SESSION_VARIABLE = 'DSH_SESSION_ID'
const DSH_PTY_SESSION_VARIABLE = 'DSH_PTY_SESSION_ID'

/** A held shell's label for listings (`doctor`): the DSH ids of its spec, its cwd and argv. */
export function heldShellLabel(spec: { argv: readonly string[]; cwd: string; env?: Readonly<Record<string, string>> | undefined }): string {
  return JSON.stringify({ session: spec.env?.[DSH_SESSION_VARIABLE] ?? null, pty: spec.env?.[DSH_PTY_SESSION_VARIABLE] ?? null, cwd: spec.cwd, argv: spec.argv })
}

/** A held shell as its holder describes it (STEM.meta, dsh-pty hold.c `write_meta`). */
export interface HeldShellMeta {
  id: string
  /** The holder's pid and start time (clock ticks), the shell's pid, the owner id it registered as. */
  holder: number
  holderStart: number
  shell: number
  owner: string
  /** When it started and when its last controller left (seconds since the epoch; 0: a controller holds it). */
  created: number
  detached: number
  /** Seconds without a controller after which it ends (0: never). */
  ttl: number
  /** The controller id holding it, undefined when none. */
  controller: string | undefined
  /** The shell's end while it waits to be collected: its kind (0 exited, 1 signal) and code, undefined while it runs. */
  ended: { kind: number; code: number } | undefined
  /** The log: oldest offset kept and next offset (as of the last change of state). */
  log: { tail: number; head: number }
  key: string
  label: string
}

/**
 * Parse a held shell's description as control.sh `held` lists it (`id=ID` and hold.c's words).
 * @returns undefined for a line that is not one.
 */
export function parseHeldMeta(line: string): HeldShellMeta | undefined {
  const words = new Map<string, string>()
  const fields = line.split(' ')
  if (fields[1] !== 'dsh-held' && fields[0] !== 'dsh-held' && !fields.includes('dsh-held')) return undefined
  for (const field of fields) {
    const at = field.indexOf('=')
    if (at > 0) words.set(field.slice(0, at), field.slice(at + 1))
  }
  const number = (name: string): number => Number(words.get(name) ?? 'NaN')
  const text = (name: string): string => Buffer.from(words.get(name) ?? '', 'hex').toString('utf8')
  const [tail, head] = (words.get('log') ?? '0:0').split(':').map(Number)
  const ended = words.get('ended')
  const meta: HeldShellMeta = {
    id: words.get('id') ?? '',
    holder: number('holder'),
    holderStart: number('start'),
    shell: number('shell'),
    owner: words.get('owner') ?? '',
    created: number('created'),
    detached: number('detached'),
    ttl: number('ttl'),
    controller: words.get('controller') === '-' ? undefined : words.get('controller'),
    ended: ended === undefined || ended === '-' ? undefined : { kind: Number(ended.split(':')[0]), code: Number(ended.split(':')[1]) },
    log: { tail: tail ?? 0, head: head ?? 0 },
    key: text('key'),
    label: text('label'),
  }
  if (!/^[0-9a-f]{32}$/.test(meta.id) || !Number.isSafeInteger(meta.holder) || !Number.isSafeInteger(meta.holderStart)) return undefined
  return meta
}
