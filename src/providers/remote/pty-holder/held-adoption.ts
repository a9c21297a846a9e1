/**
 * A later client takes a held shell back (persistence `'client'`, issue 22): which recorded shell
 * a spawn spec names, attaching to it with its secret, what it shows first (the replay), and,
 * when it cannot be attached, why, stated as the world's facts say it: a rebooted host, a
 * restarted container, a holder that ended, or a holder's pid another process now has.
 * @module dsh-remote-worlds/providers/remote/pty-holder/held-adoption
 */
import { createHash } from 'node:crypto'
import type { SubprocessOutcome, SubprocessTerminalSpawnSpec } from '@deepseek-ai/dsh-subprocess'
import type { ControlChannel, WorldIdentity } from '../control-channel.ts'
import { HeldShellDeniedError, HeldShellLostError, RemoteWorldError } from '../errors.ts'
import { type HeldShellStart, heldShellDirectory, heldShellLink, parseHeldMeta } from './held-shell.ts'
import { holderScript } from './holder-install.ts'
import { type HeldTerminal, attachHeldShell } from './held-terminal.ts'
import type { HeldShellRecord } from './held-records.ts'

/** The DSH ids terminal-bash puts in a terminal's environment (dsh-terminal-bash `childEnvironment`). */
export const DSH_SESSION_VARIABLE = 'DSH_SESSION_ID'
export const DSH_PTY_SESSION_VARIABLE = 'DSH_PTY_SESSION_ID'

/**
 * Output a client that takes a held shell back asks of its log (bytes): the last screenfuls, enough
 * to rebuild the emulator's screen and to show the agent what the shell did while no one read it.
 */
export const REPLAY_BYTES = 64 * 1024

/** terminal-bash's prompt marker (OSC 133 ; D ; STATUS BEL), printed before each prompt. */
const PROMPT_MARKER = Buffer.from('\x1b]133;D')

/** Whether `name` is a locale variable (locale(7): LANG, LANGUAGE, LC_*). */
function isLocaleVariable(name: string): boolean {
  return name === 'LANG' || name === 'LANGUAGE' || name.startsWith('LC_')
}

/**
 * What a spawn spec names as a held shell: the DSH session id, the argv (a sandbox wrapper
 * included), the cwd, the environment but for per-process ids (DSH_PTY_SESSION_ID restarts at 1
 * in each harness process), the locale the shell gets (`worldEnv`: the program's complete
 * environment, of which only the locale variables count, since the rest of the world's ambient
 * environment may name the connection, as SSH_CONNECTION does), and the sandbox mode, so a shell
 * is never taken back across modes or locales. Undefined when the spec has no DSH session id
 * (nothing durable to name it by).
 */
export function heldShellKey(spec: SubprocessTerminalSpawnSpec, sandboxMode: string | undefined, worldEnv: Readonly<Record<string, string>> = {}): string | undefined {
  const session = spec.env?.[DSH_SESSION_VARIABLE]
  if (session === undefined) return undefined
  const byName = ([a]: [string, string], [b]: [string, string]): number => a < b ? -1 : a > b ? 1 : 0
  const env = Object.entries(spec.env ?? {}).filter(([name]) => name !== DSH_PTY_SESSION_VARIABLE).sort(byName)
  const locale = Object.entries(worldEnv).filter(([name]) => isLocaleVariable(name)).sort(byName)
  return createHash('sha256').update(JSON.stringify({ session, argv: spec.argv, cwd: spec.cwd, env, locale, mode: sandboxMode ?? null })).digest('hex')
}

/** Of `records`, the ones named `key`, the one with the spec's terminal number first, then the oldest. */
export function matchingRecords(records: readonly HeldShellRecord[], key: string, spec: SubprocessTerminalSpawnSpec): HeldShellRecord[] {
  const pty = spec.env?.[DSH_PTY_SESSION_VARIABLE] ?? null
  return records.filter(record => record.key === key).sort((a, b) => Number(b.pty === pty) - Number(a.pty === pty) || a.created - b.created)
}

/**
 * What a client shows first of a shell it takes back: the end of its log, cut so that it starts
 * at a line (a log cut mid-line, or mid escape sequence, would start with a fragment). For a
 * shell busy with a program, only what follows its last prompt marker: a marker would tell
 * terminal-bash the shell waits at a prompt, and it would take the program's process group for
 * the shell's.
 */
export function replayOf(log: Buffer, busy: boolean, cut: boolean): Buffer {
  let start = 0
  // A young shell's log still holds its start wrapper's boundary marker (boundary.ts): what the
  // shell printed starts after it.
  const boundary = /\r?\nDSHB[0-9a-f]{32}:pid:\d+,\d+\r?\n/.exec(log.toString('latin1'))
  if (boundary !== null) {
    start = boundary.index + boundary[0].length
    cut = false
  }
  if (cut) {
    const newline = log.indexOf(0x0a)
    start = newline < 0 ? log.length : newline + 1
  }
  if (busy) {
    const marker = log.lastIndexOf(PROMPT_MARKER)
    if (marker >= start) {
      const end = log.indexOf(0x07, marker)
      start = end < 0 ? log.length : end + 1
    }
  }
  return log.subarray(start)
}

/** A held shell taken back: its transport, with the replay read off it, and whether it is busy. */
export interface TakenShell {
  kind: 'attached'
  terminal: HeldTerminal
  replay: Buffer
  busy: boolean
}

/** A held shell that ended while no client held it: its status and the end of its output. */
export interface DetachedEnding {
  kind: 'ended'
  outcome: SubprocessOutcome
  tail: Buffer
}

/**
 * Attach to the held shell of `record`: through a relay (`start.reopen`), with its secret,
 * taking it over from a controller whose client is gone. The replay is read off its output.
 * @returns the attached shell, or the ending of one that ended while detached (its holder then ends).
 * @throws HeldShellLostError (the world's facts say why: see {@link diagnoseLoss}),
 *   HeldShellBusyError, HeldShellDeniedError.
 */
export async function takeHeldShell(record: HeldShellRecord, control: ControlChannel, start: Pick<HeldShellStart, 'holder' | 'reopen' | 'persistence' | 'controller' | 'relayTag' | 'onGap' | 'where'>): Promise<TakenShell | DetachedEnding> {
  const plan = { stem: record.stem, secret: Buffer.from(record.secret, 'hex') }
  const link = heldShellLink(plan, start)
  // Its directory names its user's uid (held-shell.ts): another user's shell is never reached.
  const directory = record.stem.slice(0, record.stem.lastIndexOf('/'))
  if (directory !== heldShellDirectory(control.info.uid)) {
    throw new HeldShellDeniedError(`${start.where}: held shell ${record.id} belongs to another user (${directory}), and this client runs as uid ${control.info.uid}; nothing was attached`)
  }
  // Its description first: a holder that is not the recorded one is refused before anything attaches.
  const meta = (await control.heldShellLines(directory)).map(parseHeldMeta).find(entry => entry?.id === record.id)
  if (meta !== undefined && (meta.holder !== record.holder.pid || meta.holderStart !== record.holder.starttime)) {
    throw new HeldShellLostError('holder-replaced', `${start.where}: held shell ${record.id} is held by holder ${meta.holder} (start ${meta.holderStart}), not by the recorded ${record.holder.pid} (start ${record.holder.starttime}); nothing was attached`)
  }
  if (meta === undefined) throw await diagnoseLoss(record, control, start.where, `no description ${record.stem}.meta`)
  let attached
  try {
    const pipe = await start.reopen(holderScript(start.holder, start.relayTag, ['--connect', `${record.stem}.sock`]))
    attached = await attachHeldShell(pipe, start.where, link, { fromHead: REPLAY_BYTES }, true)
  } catch (error) {
    if (error instanceof HeldShellLostError) throw await diagnoseLoss(record, control, start.where, error.message)
    throw error
  }
  const { terminal, reply } = attached
  if (reply.holder !== record.holder.pid || reply.holderStart !== record.holder.starttime) {
    terminal.close()
    throw new HeldShellLostError('holder-replaced', `${start.where}: the held shell's socket is served by holder ${reply.holder} (start ${reply.holderStart}), not by the recorded ${record.holder.pid} (start ${record.holder.starttime})`)
  }
  const log = await readReplay(terminal, reply.head - reply.start, reply.ended !== undefined)
  if (reply.ended !== undefined) {
    const outcome = await terminal.exit()
    return { kind: 'ended', outcome, tail: log }
  }
  const facts = await terminal.foreground(record.program)
  const busy = facts !== undefined && facts.tpgid > 0 && facts.tpgid !== facts.shellPgrp
  return { kind: 'attached', terminal, replay: replayOf(log, busy, reply.start > reply.tail || reply.start > 0), busy }
}

/**
 * Read the first `length` bytes of `terminal`'s output (all of it when `all`: a shell that
 * ended), leaving what follows in the stream, paused, for the handle that takes it over.
 */
function readReplay(terminal: HeldTerminal, length: number, all: boolean): Promise<Buffer> {
  const output = terminal.output
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let have = 0
    const done = (): void => {
      output.off('data', onData)
      output.off('end', onEnd)
      output.off('error', onError)
      const bytes = Buffer.concat(chunks)
      if (!all && bytes.length > length) {
        output.pause()
        output.unshift(bytes.subarray(length))
        resolve(bytes.subarray(0, length))
        return
      }
      resolve(bytes)
    }
    const onData = (chunk: Buffer): void => {
      chunks.push(chunk)
      have += chunk.length
      if (!all && have >= length) done()
    }
    const onEnd = (): void => done()
    const onError = (error: Error): void => {
      output.off('data', onData)
      reject(error)
    }
    output.on('data', onData)
    output.once('end', onEnd)
    output.once('error', onError)
    if (!all && length <= 0) done()
  })
}

/**
 * Why the holder of `record` cannot be reached, as the world's facts say it: another boot id is
 * a rebooted host; another pid namespace, a restarted container; the holder's pid alive with
 * another start time, a pid another process now has; else its holder ended (its TTL passed, it
 * was killed or the shell was ended by `doctor --reap --include-persistent`).
 */
export async function diagnoseLoss(record: HeldShellRecord, control: ControlChannel, where: string, detail: string): Promise<HeldShellLostError> {
  let world: WorldIdentity | undefined
  let holder
  try {
    world = await control.worldIdentity()
    holder = await control.stat(record.holder.pid)
  } catch (error) {
    if (!(error instanceof RemoteWorldError)) throw error
  }
  const started = new Date(record.created).toISOString()
  if (world !== undefined && world.bootId !== record.bootId) return new HeldShellLostError('host-rebooted', `${where}: the held shell started ${started} is gone: the host rebooted since (boot id ${world.bootId}, was ${record.bootId}); the next terminal starts a fresh shell`)
  if (world !== undefined && (world.pidNamespace !== record.pidNamespace || world.initStart !== record.initStart)) return new HeldShellLostError('world-restarted', `${where}: the held shell started ${started} is gone: the container restarted since (pid namespace ${world.pidNamespace}, pid 1 started at ${world.initStart}; were ${record.pidNamespace}, ${record.initStart}); the next terminal starts a fresh shell`)
  if (holder !== undefined && holder.starttime !== record.holder.starttime) return new HeldShellLostError('holder-replaced', `${where}: the held shell started ${started} is gone: its holder's pid ${record.holder.pid} is another process now (start time ${holder.starttime}, was ${record.holder.starttime}); the next terminal starts a fresh shell`)
  return new HeldShellLostError('holder-gone', `${where}: the held shell started ${started} is gone: its holder ended (its TTL passed, or it was ended) (${detail}); the next terminal starts a fresh shell`)
}

/** The tail of a shell that ended while detached, as text for a report (invalid UTF-8 replaced). */
export function endingText(ending: DetachedEnding): string {
  const status = ending.outcome.signal !== null ? `killed by ${ending.outcome.signal}` : `exit status ${ending.outcome.exitCode}`
  return `${status}; its last output: ${JSON.stringify(ending.tail.toString('utf8').slice(-2000))}`
}

