/**
 * `doctor`'s held shells (issue 22): the shells of this user that dsh-pty holds in the world
 * (persistence 'connection' or 'client'), whether a client holds each now or since when it is
 * detached, and, with `--reap --include-persistent`, ending them. A holder's description that
 * outlived its holder (killed with SIGKILL, a restarted container) is listed as stale and, when
 * reaping, removed.
 * @module dsh-remote-worlds/cli/doctor-held
 */
import { setTimeout as delay } from 'node:timers/promises'
import type { RemoteWorld } from '../backend/world.ts'
import { type HeldShellMeta, heldShellDirectory, parseHeldMeta } from '../providers/remote/pty-holder/held-shell.ts'
import { RemoteSubprocessRuntime } from '../providers/remote/runtime.ts'
import { controlledRuntime } from './target.ts'

/** How long ended holders may take to hang their shells up and remove their files (ms). */
const HOLDER_END_MS = 5_000

/** One held shell as doctor reports it. */
export interface HeldShellEntry {
  id: string
  /** The holder's pid and the shell's, in the world. */
  holder: number
  shell: number
  /** The DSH session of its spawn (terminal-bash's DSH_SESSION_ID), when it had one. */
  session: string | null
  /** When it started (ISO 8601). */
  created: string
  /** `held by client ID`, `detached since ISO (TTL S s)`, or `ended (status) while detached`. */
  state: string
  /** The holder is gone and its description stayed (killed with SIGKILL, a restarted container). */
  stale: boolean
}

/** What doctor found (and did) about held shells. */
export interface HeldShellReport {
  shells: HeldShellEntry[]
  /** Ended (the holders of `shells` were told to end, and stale descriptions removed). */
  reaped: boolean
}

/**
 * List this user's held shells in the world; with `reap`, end them (SIGTERM to each holder,
 * identity-fenced: it hangs its shell up, as sshd's closing of a pty does, and removes its
 * files) and remove stale descriptions.
 */
export async function scanHeldShells(world: RemoteWorld, options: { reap: boolean }): Promise<HeldShellReport> {
  const control = await controlledRuntime(world).control()
  const directory = heldShellDirectory(control.info.uid)
  const metas = (await control.heldShellLines(directory)).map(parseHeldMeta).filter((meta): meta is HeldShellMeta => meta !== undefined)
  const shells: HeldShellEntry[] = []
  for (const meta of metas) {
    const holder = await control.stat(meta.holder)
    shells.push(entryOf(meta, holder === undefined || holder.starttime !== meta.holderStart))
  }
  if (options.reap && metas.length > 0) {
    const live = metas.filter((meta, index) => !shells[index]!.stale)
    await control.kill('TERM', live.map(meta => ({ pid: meta.holder, starttime: meta.holderStart })))
    const deadline = performance.now() + HOLDER_END_MS
    while (performance.now() < deadline && (await control.heldShellLines(directory)).some(line => live.some(meta => line.includes(`id=${meta.id} `)))) await delay(100)
    await control.removePaths(metas.flatMap(meta => [`${directory}/${meta.id}.meta`, `${directory}/${meta.id}.sock`]))
    // This machine's records of them go too: the next run of their session starts fresh, with no loss to report.
    const runtime = world.runtime
    if (runtime instanceof RemoteSubprocessRuntime) await runtime.forgetHeldShells(metas.map(meta => meta.id))
  }
  return { shells, reaped: options.reap }
}

function entryOf(meta: HeldShellMeta, stale: boolean): HeldShellEntry {
  let session: string | null = null
  try {
    session = (JSON.parse(meta.label) as { session?: string | null }).session ?? null
  } catch { /* an unreadable label names no session */ }
  const state = meta.ended !== undefined
    ? `ended (${meta.ended.kind === 1 ? `signal ${meta.ended.code}` : `exit ${meta.ended.code}`}) while detached, its status kept for the next client of its session`
    : meta.controller !== undefined ? `held by client ${meta.controller}` : `detached since ${new Date(meta.detached * 1000).toISOString()} (ends ${meta.ttl > 0 ? `${meta.ttl} s after that` : 'never by itself'})`
  return { id: meta.id, holder: meta.holder, shell: meta.shell, session, created: new Date(meta.created * 1000).toISOString(), state, stale }
}

/** Render the report for humans, one line a shell. */
export function formatHeldShells(report: HeldShellReport): string[] {
  if (report.shells.length === 0) return ['none (of this uid: other users\' are seen with --user)']
  return report.shells.map(shell => {
    const what = `held shell ${shell.id}: shell ${shell.shell} (holder ${shell.holder})${shell.session !== null ? `, session ${shell.session}` : ''}, started ${shell.created}`
    if (shell.stale) return `${what}: stale (its holder is gone)${report.reaped ? ', description removed' : '; remove with doctor --reap --include-persistent'}`
    return `${what}: ${shell.state}${report.reaped ? ' — ended' : ''}`
  })
}
