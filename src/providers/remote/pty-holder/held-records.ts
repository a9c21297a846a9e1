/**
 * What a client keeps on its own machine about the held shells it started with persistence
 * `'client'` (issue 22), so that a later client of the same user, after this one died, can prove
 * it owns them: one JSON file per target (a container as a user, a host as a user) in a private
 * directory, each record naming the shell (its held-shell id and socket stem), its secret, the
 * identities of its holder, session leader and program, and the world's identity (boot id, pid
 * namespace) when it started. The world keeps only the secret's SHA-256 (world/dsh-pty/hold.c).
 *
 * Files are 0600 in a 0700 directory and written whole (rename(2)), under a proper-lockfile lock
 * (an mkdir lock with a stale bound: a client that died frees it), so clients of one target
 * starting shells at once keep every record.
 * @module dsh-remote-worlds/providers/remote/pty-holder/held-records
 */
import { createHash } from 'node:crypto'
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises'
import { homedir } from 'node:os'
import { join } from 'node:path'
import lockfile from 'proper-lockfile'
import type { ProcessIdentity } from '../control-channel.ts'

/** A lock holder that stopped updating its lock for this long is taken as dead (ms). */
const STALE_MS = 10_000

/** One held shell this client (or an earlier one of this user) started. */
export interface HeldShellRecord {
  /** What a spawn looks it up by (held-shells.ts `heldShellKey`). */
  key: string
  /** Its held-shell id and socket stem (held-shell.ts). */
  id: string
  stem: string
  /** The secret an attach presents, as hex. */
  secret: string
  /** The shell's session tag (ownership.ts; its owner is the holder's registration). */
  tag: string
  /** The holder, the terminal session's leader and the program terminal-bash knows, in the world's pid namespace. */
  holder: ProcessIdentity
  session: ProcessIdentity
  program: ProcessIdentity
  /** The world when it started (control-channel.ts `WorldIdentity`): another boot id is a rebooted host, another pid namespace or pid 1 a restarted container. */
  bootId: string
  pidNamespace: string
  initStart: string
  /** terminal-bash's per-process terminal number (DSH_PTY_SESSION_ID) it started with, if any. */
  pty: string | null
  /** When it started (ms since the epoch). */
  created: number
  /** The spec's DSH session id and cwd, to say which shells of a session another spec did not take back (absent in older records). */
  dshSession?: string | undefined
  cwd?: string | undefined
}

/**
 * The directory of the record files: `stateDir` when given, else
 * `$XDG_STATE_HOME/dsh-remote-worlds/held`, else `~/.local/state/dsh-remote-worlds/held` (the XDG
 * Base Directory specification's default for state).
 */
export function heldRecordsDirectory(stateDir?: string): string {
  if (stateDir !== undefined) return stateDir
  const base = process.env.XDG_STATE_HOME !== undefined && process.env.XDG_STATE_HOME.startsWith('/') ? process.env.XDG_STATE_HOME : join(homedir(), '.local', 'state')
  return join(base, 'dsh-remote-worlds', 'held')
}

/** The records of one target (see the module). */
export class HeldShellRecords {
  /** The target's file. */
  readonly file: string
  private readonly directory: string

  /**
   * @param directory - see {@link heldRecordsDirectory}.
   * @param target - the target's identity, e.g. `docker:CONTAINER_ID:agent` or `ssh:agent@host:22`.
   */
  constructor(directory: string, target: string) {
    this.directory = directory
    this.file = join(directory, `${createHash('sha256').update(target).digest('hex').slice(0, 32)}.json`)
  }

  /** Every record of the target (none when the file is missing or unreadable as records). */
  async list(): Promise<HeldShellRecord[]> {
    try {
      const parsed: unknown = JSON.parse(await readFile(this.file, 'utf8'))
      return Array.isArray(parsed) ? parsed.filter(isRecord) : []
    } catch {
      return []
    }
  }

  /** Keep `record` (replacing one of the same id). */
  async add(record: HeldShellRecord): Promise<void> {
    await this.change(records => [...records.filter(known => known.id !== record.id), record])
  }

  /** Forget the record of held shell `id` (nothing when there is none). */
  async remove(id: string): Promise<void> {
    await this.change(records => records.filter(known => known.id !== id))
  }

  private async change(edit: (records: HeldShellRecord[]) => HeldShellRecord[]): Promise<void> {
    await mkdir(this.directory, { recursive: true, mode: 0o700 })
    const release = await lockfile.lock(this.directory, { realpath: false, lockfilePath: `${this.file}.lock`, stale: STALE_MS, retries: { retries: 200, minTimeout: 25, maxTimeout: 100 } })
    try {
      const records = edit(await this.list())
      const temporary = `${this.file}.${process.pid}.tmp`
      await writeFile(temporary, JSON.stringify(records, null, 1), { mode: 0o600 })
      await rename(temporary, this.file)
    } finally {
      await release().catch(() => undefined)
    }
  }
}

function isRecord(value: unknown): value is HeldShellRecord {
  if (typeof value !== 'object' || value === null) return false
  const record = value as Partial<HeldShellRecord>
  return typeof record.key === 'string' && typeof record.id === 'string' && typeof record.stem === 'string' && typeof record.secret === 'string' &&
    typeof record.tag === 'string' && typeof record.holder?.pid === 'number' && typeof record.program?.pid === 'number' && typeof record.session?.pid === 'number'
}
