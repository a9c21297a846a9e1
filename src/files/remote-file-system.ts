/**
 * `RemoteFileSystem`: `ctx.fs` (`@deepseek-ai/dsh-fs`) in a remote world, the filesystem half
 * beside the runtime's process half. It shares the runtime's world owner (providers/remote/
 * world-owner.ts): the same connections, exec user, environment and confinement, so a file the
 * agent writes is the file its shell runs, and the other way round.
 *
 * Every primitive is one or two requests to the world's file server (world/fsd/fsd.c): a static
 * program this package copies into the world once (providers/remote/world-tools), running as the world's
 * user and, under a confined mode, inside `ctx.sandbox`'s confinement, exactly as the shells.
 * Identity is the world's: `resolve` canonicalizes with the world's realpath, never with host
 * path rules. Text semantics (UTF-8, binary rejection, line endings, literal edits) are
 * upstream's (text.ts).
 *
 * Mutations and the critical section. `writeText` stages the content in a temporary file in
 * the target's directory and publishes it by rename (link for `createIfAbsent`, which never
 * replaces), holding an flock of that directory while it checks the guard: a reader sees the
 * old file or the new one, never a part, whoever dies mid-write (the client's death closes the
 * server's stdin; the server unlinks its temporary file). The lock lives in the world's kernel,
 * so two clients in two processes (or a client and anything else that takes it) are serialized,
 * unlike a lock in one host process. `editText` reads the file and its version, matches in the
 * client, and publishes only if, under the lock, the file still has that version AND the same
 * SHA-256 (so a same-size rewrite within one timestamp tick is caught too): two editors of one
 * version get one success and one `FS_STALE_VERSION`, never a lost update. An unguarded edit
 * that loses such a race retries on the new content.
 *
 * The fence. Under `read-only` every mutation is refused, and under `workspace-write` every one
 * outside the workspace root and the world's /tmp (unless the confinement makes /tmp private
 * to each program, as bubblewrap does), with `FS_SANDBOX_DENIED`, as
 * upstream's `dsh-fs-sandbox` (so `dsh-tool-fs` shows its sandbox marker and escalation hint).
 * The client checks the target's canonical path; the server checks again on the directory it
 * renames in (its fd's path), so a symlink swapped in between cannot move a write out. A world whose
 * `ctx.sandbox` cannot confine the mode refuses every operation of that mode, with why: never a
 * silent unconfined fallback, and never the host's filesystem.
 * @module dsh-remote-worlds/files/remote-file-system
 */
import { createHash } from 'node:crypto'
import type { Context } from '@deepseek-ai/cordis'
import { FileSystem, FsError, FsTargetKey, FsVersion } from '@deepseek-ai/dsh-fs'
import type { FsDirEntry, FsEditOutcome, FsEditRequest, FsInfo, FsPathInfo, FsTarget, FsWriteIntent, FsWriteOutcome } from '@deepseek-ai/dsh-fs'
import type { SandboxExecutionPolicy, SandboxMode } from '@deepseek-ai/dsh-sandbox'
import type {} from '@deepseek-ai/dsh-sandbox-policy'
import { InvalidArgumentError } from '../providers/remote/errors.ts'
import { type WorldOwner, worldOwnerOf } from '../providers/remote/world-owner.ts'
import { privateRootsOf } from '../sandbox/layout.ts'
import { fsErrorOf, type FsErrorContext } from './errors.ts'
import { type Confine, FileServers } from './file-servers.ts'
import { displayPathOf, fileUrlOf, isWithin, rawJoin } from './paths.ts'
import { decodeFields } from './protocol.ts'
import { type ServerChannel, type ServerReply, ServerRefusal } from './server-channel.ts'
import { TextStreamDecoder, applyLiteralEdit, decodeText, detectLineEndings, diffBasis, normalizeLineEndings, restoreLineEndings } from './text.ts'

/** Configuration of {@link RemoteFileSystem}. */
export interface RemoteFileSystemConfig {
  /** The world (the runtime's owner; `worldOwnerOf(ctx.subprocess)`). */
  owner: WorldOwner
  /**
   * Base of relative paths when a call gives no `cwd` (absolute, in the world). Default: the
   * sandbox policy's workspace root, else the world user's HOME.
   */
  cwd?: string | undefined
  /** Exclusive byte limit of each side of a write's diff basis (default 10 MiB, as upstream). */
  diffBasisMaxBytes?: number | undefined
  /**
   * How long a file server may be silent with a request in flight before it counts as frozen
   * (a paused container, a stopped process) and the request fails with FS_IO_ERROR, in ms
   * (default 30 000; server-channel.ts `DEFAULT_SERVER_SILENCE_MS`).
   */
  silenceMs?: number | undefined
  /**
   * What a write waits for before it is published (default `'written'`): `'written'` its
   * content's pages written to the disk (so a crash of the world's host leaves the old file or
   * the new one); `'flushed'` an fsync as well (the device's cache flushed: the new content
   * survives a power loss at once, as upstream's local provider; ~2-5 ms more per write on a
   * virtual disk).
   */
  durability?: 'written' | 'flushed' | undefined
}

/** The default of {@link RemoteFileSystemConfig.diffBasisMaxBytes}: 10 MiB. */
export const DEFAULT_DIFF_BASIS_MAX_BYTES = 10 * 1024 * 1024
/** Chunk of a `streamText` read (bytes; the server's data frame size). */
const STREAM_CHUNK_BYTES = 256 * 1024
/**
 * How long an unguarded edit that keeps losing races to writers in other processes is retried
 * (ms): it is an edit of the current content, so it tries again on the new content, until then.
 */
const UNGUARDED_EDIT_RETRY_MS = 10_000
/**
 * The most a whole-text read (`readText`, an edit's read) holds, in bytes: 256 MiB, half of
 * what one JavaScript string can be (V8: 2^29 - 24 UTF-16 units). A larger file is
 * FS_TOO_LARGE at once (its stat size), one that never ends (`/proc/self/pagemap` reads as
 * size 0 and is 256 GiB) once that much arrived; either way the server goes on serving.
 * `streamText` has no bound: its consumer enforces its own (upstream's contract).
 */
export const TEXT_READ_MAX_BYTES = 256 * 1024 * 1024
/**
 * How long what `resolve` read (metadata, and the content of a small file) serves the first
 * `stat` and the first read of the target it returned (ms), unless a mutation went through this
 * file system since. A tool call is resolve, stat, read: those then cost no round trip. They
 * report a state at most this old, as any stat or read is a moment old when it is used; the
 * content and the version come from one open descriptor, so they agree; and a guard built on
 * them is checked again, under the lock, at publication.
 */
const RESOLVE_STAT_FOLD_MS = 25
/**
 * Files up to this size (bytes) are read by `resolve` itself, for the first `readText` (or an
 * edit's read) of the target it returned, under the same rule as its metadata: a tool's read
 * is then one round trip. Small, so a resolve that is not followed by a read costs little.
 */
const RESOLVE_PREFETCH_BYTES = 128 * 1024

/**
 * The most entries `listDir` returns: 100 000. A directory with more is FS_TOO_LARGE (upstream's
 * contract has no pagination; a listing is returned whole or not at all). The server stops
 * reading the directory past the bound, and the client holds at most that many entries (~50 MB).
 */
export const LIST_DIR_MAX_ENTRIES = 100_000
/**
 * The most bytes the records of one listing may take on the wire: 64 MiB (a typical entry
 * takes ~110 bytes, one with a 4 KiB symlink target ~4.5 KiB). More is FS_TOO_LARGE too.
 */
export const LIST_DIR_MAX_BYTES = 64 * 1024 * 1024

/**
 * What a replacement says beyond upstream's outcome (an extension of its type: upstream's
 * consumers read only their own fields). A write or edit publishes a new file under the name
 * (atomic rename), so the replaced file's other hard links keep its old content: they are no
 * longer the same file. Upstream's local provider does the same, and says nothing.
 */
export interface RemoteReplacementFacts {
  /**
   * The other hard links of the replaced file (its link count less one), which still hold the
   * old content; absent when it had none (or the write created the file).
   */
  detachedLinks?: number
}

/** {@link RemoteFileSystem.writeText}'s outcome: upstream's, with {@link RemoteReplacementFacts}. */
export type RemoteWriteOutcome = FsWriteOutcome & RemoteReplacementFacts
/** {@link RemoteFileSystem.editText}'s outcome: upstream's, with {@link RemoteReplacementFacts}. */
export type RemoteEditOutcome = FsEditOutcome & RemoteReplacementFacts

/** The facts of a replacement whose file had `links` links. */
function replacementFacts(links: number): RemoteReplacementFacts {
  return links > 1 ? { detachedLinks: links - 1 } : {}
}

/** A stat record of the server: type, mode (octal), uid, gid, size, version. */
interface WorldStat {
  type: 'file' | 'directory' | 'symlink' | 'other'
  size: number
  version: FsVersion
}

function parseRecord(fields: readonly Buffer[], at: number): WorldStat {
  const type = fields[at]?.toString('latin1')
  return {
    type: type === 'f' ? 'file' : type === 'd' ? 'directory' : type === 'l' ? 'symlink' : 'other',
    size: Number(fields[at + 4]?.toString('latin1') ?? '0'),
    version: FsVersion(fields[at + 5]?.toString('latin1') ?? ''),
  }
}

/** What `resolve` read of its target, for the calls that follow it (see RESOLVE_STAT_FOLD_MS). */
interface Folded {
  /** The metadata, until a stat took it (undefined: absent). */
  info: FsInfo | undefined
  statTaken: boolean
  /** The content of a small regular file and its version, until a read took it. */
  content: { bytes: Buffer; version: FsVersion } | undefined
  /** When it was read (performance.now() ms). */
  at: number
  /** The file system's mutation count then. */
  mutations: number
}

/** A followed record as `stat` reports it. */
function infoOf(record: WorldStat): FsInfo {
  return { version: record.version, type: record.type === 'symlink' ? 'other' : record.type, size: record.size }
}

/** What a sandbox said when it refused: the detail after upstream's generic text, when it has one. */
function refusalOf(error: unknown): string {
  const message = (error as Error)?.message ?? String(error)
  const detail = / Runner failure: ([\s\S]*)$/.exec(message)?.[1]
  return detail ?? message
}

function aborted(verb: string): FsError {
  return new FsError(`${verb} aborted`, 'FS_ABORTED')
}

function checkAborted(signal: AbortSignal | undefined, verb: string): void {
  if (signal?.aborted === true) throw aborted(verb)
}

/**
 * `promise`, or FS_ABORTED as soon as `signal` aborts (the request itself runs to its end in the
 * world and its reply is dropped: a read is harmless, and mutations check the signal before
 * they are sent, as upstream's "aborts before atomic publication takes effect").
 */
async function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined, verb: string): Promise<T> {
  if (signal === undefined) return promise
  if (signal.aborted) {
    promise.catch(() => undefined)
    throw aborted(verb)
  }
  const stop = Promise.withResolvers<never>()
  const onAbort = (): void => stop.reject(aborted(verb))
  signal.addEventListener('abort', onAbort, { once: true })
  promise.catch(() => undefined)
  try {
    return await Promise.race([promise, stop.promise])
  } finally {
    signal.removeEventListener('abort', onAbort)
  }
}

/** The filesystem half of one remote world (see the module comment). */
export class RemoteFileSystem extends FileSystem {
  private readonly owner: WorldOwner
  private readonly servers: FileServers
  private readonly configuredCwd: string | undefined
  private readonly diffBasisMaxBytes: number
  private readonly flushed: boolean
  private readonly canonicalRoots = new Map<string, Promise<string>>()
  /** What resolve learned of the target it returned, for its first stat and read (see RESOLVE_STAT_FOLD_MS). */
  private readonly folded = new WeakMap<FsTarget, Folded>()
  /** Mutations started through this file system (a fold older than one is not used). */
  private mutations = 0
  /** Mutations of this file system per target, in order (upstream's per-target lock, in-process). */
  private readonly locks = new Map<string, Promise<unknown>>()
  /** Set once the scope is disposed: every call then fails as closed. */
  private closed = false
  /** The world user's HOME, once asked (the default cwd's last resort). */
  private home: Promise<string> | undefined
  /** The live server of each confinement key (the fast path of {@link server}). */
  private readonly channels = new Map<string, ServerChannel>()
  /** The standing policy and default cwd, asked of the services at most once a second (each ask costs ~50 µs). */
  private standing: { policy: SandboxExecutionPolicy; cwd: string | undefined; until: number } | undefined

  /**
   * @throws FsError FS_IO_ERROR for a relative `cwd` or an unusable `diffBasisMaxBytes`.
   */
  constructor(ctx: Context, config: RemoteFileSystemConfig) {
    super(ctx)
    if (config.cwd !== undefined && !config.cwd.startsWith('/')) throw new FsError(`the file system's cwd must be an absolute path in the world: ${JSON.stringify(config.cwd)}`, 'FS_IO_ERROR')
    const limit = config.diffBasisMaxBytes ?? DEFAULT_DIFF_BASIS_MAX_BYTES
    if (!Number.isSafeInteger(limit) || limit <= 0) throw new FsError(`diffBasisMaxBytes must be a positive safe integer: ${limit}`, 'FS_IO_ERROR')
    this.owner = config.owner
    if (config.silenceMs !== undefined && (!Number.isSafeInteger(config.silenceMs) || config.silenceMs <= 0)) throw new FsError(`silenceMs must be a positive safe integer: ${config.silenceMs}`, 'FS_IO_ERROR')
    this.servers = new FileServers(config.owner, { silenceMs: config.silenceMs })
    this.configuredCwd = config.cwd
    this.diffBasisMaxBytes = limit
    this.flushed = config.durability === 'flushed'
    ctx.effect(() => () => {
      this.closed = true
      return this.servers.dispose()
    }, 'remote file servers')
  }

  /**
   * The deployment's default mode when a sandbox policy is composed (every mutation is fenced
   * by the per-call policy then), else undefined (no fence, as the bare local provider).
   */
  override get sandboxMode(): SandboxMode | undefined {
    return this.ctx.get('sandboxPolicy')?.defaultMode
  }

  /** The world this file system serves, for messages. */
  describe(): string {
    return this.owner.describe()
  }

  /** @throws FsError FS_IO_ERROR once the scope was disposed (nothing is answered from memory then either). */
  private checkOpen(verb: string, displayPath: string): void {
    if (this.closed) throw new FsError(`cannot ${verb} "${displayPath}": the filesystem half of ${this.owner.describe()} was closed`, 'FS_IO_ERROR')
  }

  /**
   * The policy of a call that carries none: the deployment's, else none (unconfined), and the
   * policy's workspace root. Read from the services at most once a second: a mode changed at
   * run time reaches reads within that second, and every mutation carries its own policy.
   */
  private standingFacts(): { policy: SandboxExecutionPolicy; cwd: string | undefined } {
    const now = performance.now()
    if (this.standing !== undefined && now < this.standing.until) return this.standing
    const service = this.ctx.get('sandboxPolicy')
    const root = service?.workspaceRoot
    this.standing = {
      policy: service === undefined ? { mode: 'danger-full-access', workspaceRoot: '/' } : service.resolve(),
      cwd: root !== undefined && root.startsWith('/') ? root : undefined,
      until: now + 1_000,
    }
    return this.standing
  }

  private standingPolicy(): SandboxExecutionPolicy {
    return this.standingFacts().policy
  }

  private confineFor(policy: SandboxExecutionPolicy): Confine | undefined {
    const mode = policy.mode
    if (mode === 'danger-full-access') return undefined
    return argv => {
      const sandbox = this.ctx.get('sandbox')
      if (sandbox === undefined) throw new Error(`this composition has no ctx.sandbox to confine the file server under ${mode} in ${this.owner.describe()}`)
      return sandbox.confine(argv, { mode, workspaceRoot: policy.workspaceRoot }).argv
    }
  }

  /**
   * The server for `policy` (reads use the standing one).
   * @throws FsError FS_SANDBOX_DENIED when the world cannot confine it under that mode.
   */
  private async server(context: FsErrorContext, policy: SandboxExecutionPolicy = this.standingPolicy(), role: 'read' | 'write' = 'read'): Promise<ServerChannel> {
    this.checkOpen(context.verb, context.displayPath)
    const key = `${role}\0${policy.mode === 'danger-full-access' ? '' : `${policy.mode}\0${policy.workspaceRoot}`}`
    const known = this.channels.get(key)
    if (known?.alive === true) return known
    const confine = this.confineFor(policy)
    let confined: Confine | undefined = confine
    if (confine !== undefined) {
      // Asked here, so a refusal is the sandbox's own words, not a failed start.
      confined = argv => {
        try {
          return confine(argv)
        } catch (error) {
          throw new FsError(`cannot ${context.verb} "${context.displayPath}": file access denied under ${policy.mode} mode: ${refusalOf(error)}`, 'FS_SANDBOX_DENIED', { cause: error })
        }
      }
    }
    try {
      const channel = await this.servers.server(confined, privateRootsOf(this.ctx.get('sandbox')), role)
      this.channels.set(key, channel)
      return channel
    } catch (error) {
      throw fsErrorOf(error, context)
    }
  }

  private async request(context: FsErrorContext, code: string, fields: readonly (string | Uint8Array)[], options: { content?: Uint8Array; onData?: (chunk: Buffer) => void; onSize?: (bytes: number) => void; maxData?: number; policy?: SandboxExecutionPolicy; role?: 'read' | 'write' } = {}): Promise<ServerReply> {
    const server = await this.server(context, options.policy, options.role)
    try {
      return await server.request(code, fields, options)
    } catch (error) {
      throw fsErrorOf(error, context)
    }
  }

  /** The base of relative paths without a cwd: the configured one, the workspace root, else HOME (asked once). */
  private defaultCwd(): string | Promise<string> {
    if (this.configuredCwd !== undefined) return this.configuredCwd
    const root = this.standingFacts().cwd
    if (root !== undefined) return root
    this.home ??= this.owner.userEnvironment().then(({ ambient }) => ambient.HOME !== undefined && ambient.HOME.startsWith('/') ? ambient.HOME : '/')
    this.home.catch(() => { this.home = undefined })
    return this.home
  }

  private async base(cwd: string | undefined, verb: string, path: string): Promise<string> {
    this.checkOpen(verb, path)
    if (cwd !== undefined && cwd.startsWith('/')) return cwd
    let fallback: string
    try {
      fallback = await this.defaultCwd()
    } catch (error) {
      throw fsErrorOf(error, { verb, displayPath: path })
    }
    return cwd === undefined ? fallback : rawJoin(fallback, cwd)
  }

  /**
   * Resolve `path` against `opts.cwd` (else the default cwd) to the world's canonical identity:
   * the realpath of the file, or of its deepest existing ancestor plus the missing rest. One
   * request.
   * @throws FsError FS_NOT_FOUND for an empty path, a parent that is a file, a symlink loop;
   *   FS_PERMISSION_DENIED; FS_ABORTED.
   */
  override async resolve(path: string, opts?: { cwd?: string; signal?: AbortSignal }): Promise<FsTarget> {
    checkAborted(opts?.signal, 'resolve')
    if (path.trim().length === 0) throw new FsError('file_path must be a non-empty string', 'FS_NOT_FOUND')
    const base = await this.base(opts?.cwd, 'resolve', path)
    const displayPath = displayPathOf(base, path)
    if (path.includes('\0')) throw new FsError(`cannot resolve "${displayPath}": the path holds a NUL byte`, 'FS_NOT_FOUND')
    const reply = await abortable(this.request({ verb: 'resolve', displayPath }, 'r', [base, path, String(RESOLVE_PREFETCH_BYTES)]), opts?.signal, 'resolve')
    const fields = decodeFields(reply.payload)
    const target: FsTarget = { targetKey: FsTargetKey(fields[0]!.toString('utf8')), displayPath }
    const exists = fields[1]?.toString('latin1') === '1'
    const record = exists ? parseRecord(fields, 2) : undefined
    const prefetched = fields[exists ? 8 : 2]?.toString('latin1') === '1' && record !== undefined ? fields[exists ? 9 : 3] : undefined
    this.folded.set(target, {
      info: record === undefined ? undefined : infoOf(record),
      statTaken: false,
      content: prefetched === undefined ? undefined : { bytes: prefetched, version: record!.version },
      at: performance.now(),
      mutations: this.mutations,
    })
    return target
  }

  /** What resolve read of `target`, while it may still be used (see RESOLVE_STAT_FOLD_MS). */
  private fold(target: FsTarget): Folded | undefined {
    const folded = this.folded.get(target)
    if (folded === undefined) return undefined
    if (folded.mutations === this.mutations && performance.now() - folded.at <= RESOLVE_STAT_FOLD_MS) return folded
    this.folded.delete(target)
    return undefined
  }

  /** The content resolve read of `target`, once (a read takes it). */
  private foldedContent(target: FsTarget): { bytes: Buffer; version: FsVersion } | undefined {
    const folded = this.fold(target)
    const content = folded?.content
    if (folded !== undefined) {
      folded.content = undefined
      if (folded.statTaken) this.folded.delete(target)
    }
    return content
  }

  /** The canonical absolute path in the world (the target key itself). */
  override processPath(target: FsTarget): string {
    return String(target.targetKey)
  }

  /** The world path as a percent-encoded `file:` URI (paths.ts `fileUrlOf`). */
  override fileUrl(target: FsTarget): string {
    return fileUrlOf(this.processPath(target))
  }

  /** `child` is `parent` or below it, by their canonical world paths. */
  override contains(parent: FsTarget, child: FsTarget): boolean {
    return isWithin(this.processPath(parent), this.processPath(child))
  }

  /**
   * Metadata of the target (following symlinks), undefined when absent. One request, or none for
   * the first stat of a target `resolve` returned within the last 25 ms (resolve read it then).
   * @throws FsError FS_PERMISSION_DENIED, FS_IO_ERROR, FS_ABORTED.
   */
  override async stat(target: FsTarget, signal?: AbortSignal): Promise<FsInfo | undefined> {
    checkAborted(signal, 'stat')
    this.checkOpen('stat', target.displayPath)
    const folded = this.fold(target)
    if (folded !== undefined && !folded.statTaken) {
      folded.statTaken = true
      if (folded.content === undefined) this.folded.delete(target)
      return folded.info
    }
    const reply = await abortable(this.request({ verb: 'stat', displayPath: target.displayPath }, 's', [this.processPath(target), '1']), signal, 'stat')
    return reply.code === 'A' ? undefined : infoOf(parseRecord(decodeFields(reply.payload), 0))
  }

  /**
   * Metadata of the path entry itself (a final symlink is reported as `symlink`). The path is
   * joined to `opts.cwd` without lexical clean-up (the world's kernel walks it).
   * @throws FsError FS_NOT_FOUND for an empty path; FS_PERMISSION_DENIED; FS_ABORTED.
   */
  override async lstat(path: string, opts?: { cwd?: string }, signal?: AbortSignal): Promise<FsPathInfo | undefined> {
    checkAborted(signal, 'lstat')
    if (path.trim().length === 0) throw new FsError('file_path must be a non-empty string', 'FS_NOT_FOUND')
    const base = await this.base(opts?.cwd, 'lstat', path)
    const displayPath = displayPathOf(base, path)
    if (path.includes('\0')) throw new FsError(`cannot lstat "${displayPath}": the path holds a NUL byte`, 'FS_NOT_FOUND')
    const reply = await abortable(this.request({ verb: 'lstat', displayPath }, 's', [rawJoin(base, path), '0']), signal, 'lstat')
    if (reply.code === 'A') return undefined
    const record = parseRecord(decodeFields(reply.payload), 0)
    return { version: record.version, type: record.type, size: record.size }
  }

  /**
   * The whole file's bytes and the version of what was read (one request). The server says the
   * size first: the bytes are copied once, into one buffer, as they arrive (a file that changed
   * size meanwhile is still returned whole, as it was read).
   */
  private async readWhole(target: FsTarget, verb: 'read' | 'edit', maxBytes: number | undefined, signal: AbortSignal | undefined): Promise<{ bytes: Buffer; version: FsVersion }> {
    let out: Buffer | undefined
    let filled = 0
    const beyond: Buffer[] = []
    const reply = await abortable(this.request({ verb, displayPath: target.displayPath }, 'o', [this.processPath(target), maxBytes === undefined ? '' : String(maxBytes)], {
      // The server sends no byte past the bound (it refuses the read instead).
      ...(maxBytes === undefined ? {} : { maxData: maxBytes }),
      // A size no buffer can be (a sparse file read unbounded) keeps the pieces instead.
      onSize: size => { try { out = Buffer.allocUnsafe(size) } catch { out = undefined } },
      onData: part => {
        if (out !== undefined && beyond.length === 0 && filled + part.length <= out.length) {
          out.set(part, filled)
          filled += part.length
        } else {
          beyond.push(Buffer.from(part))
        }
      },
    }), signal, verb)
    const head = (out ?? Buffer.alloc(0)).subarray(0, filled)
    return { bytes: beyond.length === 0 ? head : Buffer.concat([head, ...beyond]), version: parseRecord(decodeFields(reply.payload), 0).version }
  }

  /**
   * The whole regular file as UTF-8 text. One request, or none for the first read of a small
   * file (<= 128 KiB) `resolve` returned within the last 25 ms (resolve read it then).
   * @throws FsError FS_NOT_FOUND, FS_NOT_REGULAR_FILE, FS_NOT_TEXT (binary or invalid UTF-8),
   *   FS_PERMISSION_DENIED, FS_IO_ERROR (the world was lost), FS_ABORTED.
   */
  override async readText(target: FsTarget, signal?: AbortSignal): Promise<string> {
    checkAborted(signal, 'read')
    this.checkOpen('read', target.displayPath)
    const { bytes } = this.foldedContent(target) ?? await this.readWhole(target, 'read', TEXT_READ_MAX_BYTES, signal)
    return decodeText(bytes, 'read', target.displayPath, true)
  }

  /**
   * The file as decoded chunks, read 256 KiB at a time from an open descriptor in the world (a
   * consumer that stops early closes it; nothing is held but one chunk ahead). The file is
   * opened at the first iteration, as upstream's generator does.
   * @throws (while iterating) the errors of {@link readText}.
   */
  override async streamText(target: FsTarget, signal?: AbortSignal): Promise<AsyncIterable<string>> {
    const context: FsErrorContext = { verb: 'read', displayPath: target.displayPath }
    const path = this.processPath(target)
    const open = (): Promise<ServerReply> => this.request(context, 'f', [path])
    const serverOf = (): Promise<ServerChannel> => this.server(context)
    async function* chunks(): AsyncGenerator<string> {
      checkAborted(signal, 'read')
      const opened = await abortable(open(), signal, 'read')
      const handle = decodeFields(opened.payload)[0]!.toString('latin1')
      const server = await serverOf()
      const decoder = new TextStreamDecoder(target.displayPath)
      const pread = (offset: number): Promise<Buffer> => server.request('g', [handle, String(offset), String(STREAM_CHUNK_BYTES)]).then(reply => reply.payload, error => { throw fsErrorOf(error, context) })
      let offset = 0
      let next = pread(offset)
      try {
        for (;;) {
          const chunk = await abortable(next, signal, 'read')
          if (chunk.length === 0) break
          offset += chunk.length
          // One chunk ahead while this one is decoded and consumed.
          next = pread(offset)
          next.catch(() => undefined)
          const text = decoder.decode(chunk)
          if (text.length > 0) yield text
        }
        const rest = decoder.decode(undefined)
        if (rest.length > 0) yield rest
      } finally {
        server.request('c', [handle]).catch(() => undefined)
      }
    }
    return chunks()
  }

  /**
   * The whole regular file's bytes, at most `maxBytes` (the server sends nothing past the
   * bound and refuses the read once it found more, so a file that grows after its stat is
   * refused, never buffered). One request.
   * @throws FsError FS_TOO_LARGE past `maxBytes`; FS_NOT_FOUND, FS_NOT_REGULAR_FILE,
   *   FS_PERMISSION_DENIED, FS_IO_ERROR, FS_ABORTED; FS_IO_ERROR for a negative or fractional bound.
   */
  override async readBytes(target: FsTarget, signal: AbortSignal | undefined, maxBytes: number): Promise<Uint8Array> {
    checkAborted(signal, 'read')
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new FsError(`readBytes maxBytes must be a non-negative safe integer, got ${maxBytes}`, 'FS_IO_ERROR')
    const { bytes } = await this.readWhole(target, 'read', maxBytes, signal)
    return bytes
  }

  /**
   * The directory's children in stable name order (upstream's `localeCompare`, ties by code
   * unit), each with its type after following symlinks (`other` for a broken one, without
   * metadata), a resolved target and its size and version. Contents are never read. One request.
   * At most {@link LIST_DIR_MAX_ENTRIES} entries ({@link LIST_DIR_MAX_BYTES} on the wire).
   * @throws FsError FS_TOO_LARGE for a directory past those bounds; FS_NOT_FOUND,
   *   FS_NOT_DIRECTORY, FS_PERMISSION_DENIED, FS_IO_ERROR, FS_ABORTED.
   */
  override async listDir(target: FsTarget, signal?: AbortSignal): Promise<FsDirEntry[]> {
    checkAborted(signal, 'list')
    const parts: Buffer[] = []
    const fields = [this.processPath(target), String(LIST_DIR_MAX_ENTRIES), String(LIST_DIR_MAX_BYTES)]
    await abortable(this.request({ verb: 'list', displayPath: target.displayPath, notDirectory: 'FS_NOT_DIRECTORY' }, 'l', fields, { onData: chunk => parts.push(chunk), maxData: LIST_DIR_MAX_BYTES }), signal, 'list')
    const dir = this.processPath(target)
    const entries: FsDirEntry[] = []
    // The D frames' payloads arrive in pieces; together they are one sequence of entries, read
    // field by field (no array of views: five per entry, 100 000 entries).
    const records = parts.length === 1 ? parts[0]! : Buffer.concat(parts)
    parts.length = 0
    let offset = 0
    const next = (encoding: 'utf8' | 'latin1'): string => {
      const length = records.readUInt32LE(offset)
      const text = records.toString(encoding, offset + 4, offset + 4 + length)
      offset += 4 + length
      return text
    }
    try {
      while (offset < records.length) {
        const name = next('utf8')
        const kind = next('latin1')
        const size = next('latin1')
        const version = next('latin1')
        const linked = next('utf8')
        const type = kind === 'f' ? 'file' : kind === 'd' ? 'directory' : 'other'
        const key = linked.length > 0 ? linked : dir === '/' ? `/${name}` : `${dir}/${name}`
        entries.push({
          name,
          type,
          target: { targetKey: FsTargetKey(key), displayPath: displayPathOf(target.displayPath, name) },
          ...(kind !== '-' ? { version: FsVersion(version) } : {}),
          ...(type === 'file' ? { size: Number(size) } : {}),
        })
      }
    } catch (error) {
      throw new FsError(`cannot list "${target.displayPath}": the world's file server sent a malformed listing (${(error as Error).message})`, 'FS_IO_ERROR', { cause: error })
    }
    return entries.sort((left, right) => left.name.localeCompare(right.name) || (left.name < right.name ? -1 : left.name > right.name ? 1 : 0))
  }

  /** The canonical world path of a writable root (kept per spelling). */
  private canonicalRoot(root: string): Promise<string> {
    let pending = this.canonicalRoots.get(root)
    if (pending === undefined) {
      const resolving = this.resolve(root, { cwd: '/' }).then(target => this.processPath(target))
      pending = resolving
      this.canonicalRoots.set(root, resolving)
      resolving.catch(() => { if (this.canonicalRoots.get(root) === resolving) this.canonicalRoots.delete(root) })
    }
    return pending
  }

  /**
   * The fence of one mutation (see the module comment): the roots the server checks again on the
   * directory it renames in (none: unfenced). The client's check is on the target's canonical
   * key; the server's, on the descriptor of the directory it publishes in, is the one a symlink
   * swapped since cannot get around (so no second resolve is paid for here).
   * @throws FsError FS_SANDBOX_DENIED under read-only, or outside the writable roots.
   */
  private async fenced(target: FsTarget, verb: 'write' | 'edit', policy: SandboxExecutionPolicy): Promise<{ target: FsTarget; roots: string[] }> {
    if (policy.mode === 'danger-full-access') return { target, roots: [] }
    if (policy.mode === 'read-only') throw new FsError(`cannot ${verb} "${target.displayPath}": file access denied under read-only mode`, 'FS_SANDBOX_DENIED')
    // The world's /tmp too, as upstream's writable roots, unless the confinement gives each
    // program a private one (bubblewrap): a file written there would be seen by nobody.
    const temp = privateRootsOf(this.ctx.get('sandbox')).some(root => isWithin(root, '/tmp')) ? [] : ['/tmp']
    const roots = await Promise.all([policy.workspaceRoot, ...temp].map(root => this.canonicalRoot(root)))
    if (!roots.some(root => isWithin(root, this.processPath(target)))) {
      throw new FsError(`cannot ${verb} "${target.displayPath}": file access denied under workspace-write mode`, 'FS_SANDBOX_DENIED')
    }
    return { target, roots }
  }

  /**
   * Run the mutation `op` of `target` after this file system's earlier ones of the same target
   * (FIFO per target key, as upstream's local provider): its own callers never race each other
   * to a stale version; other processes are serialized by the server's lock in the world.
   */
  private async withLock<T>(target: FsTarget, op: () => Promise<T>): Promise<T> {
    const key = String(target.targetKey)
    const prior = this.locks.get(key) ?? Promise.resolve()
    const run = prior.then(op, op)
    const tail = run.then(() => undefined, () => undefined)
    this.locks.set(key, tail)
    try {
      return await run
    } finally {
      if (this.locks.get(key) === tail) this.locks.delete(key)
    }
  }

  /** One publication by the server (see world/fsd/fsd.c `op_write`). */
  private async publish(target: FsTarget, verb: 'write' | 'edit', content: Buffer, guard: { kind: 'n' | 'c' | 'v' | 'h'; version?: string; sha256?: string }, beforeLimit: number, roots: readonly string[], policy: SandboxExecutionPolicy): Promise<{ operation: 'create' | 'update'; version: FsVersion; before: Buffer | undefined; links: number }> {
    // Counted at the start and at the end: a resolve answered while this was in flight does not fold.
    this.mutations += 1
    try {
      const fields = [this.processPath(target), `${guard.kind}${this.flushed ? 'f' : ''}`, guard.version ?? '', guard.sha256 ?? '', String(beforeLimit), String(roots.length), ...roots, String(content.length)]
      // The replaced content comes as data frames, less than beforeLimit bytes in all.
      const parts: Buffer[] = []
      const reply = await this.request({ verb, displayPath: target.displayPath }, 'w', fields, { content, policy, role: 'write', onData: part => parts.push(Buffer.from(part)), maxData: beforeLimit }).catch((error: unknown) => {
        // A read-only file system under a confined mode is the fence's (sandbox/fence.ts keeps
        // directories that programs outside it read fixed, inside a writable workspace): the
        // sandbox denied it, which the file tools render as such.
        const refusal = error instanceof FsError ? error.cause : undefined
        if (policy.mode !== 'danger-full-access' && refusal instanceof ServerRefusal && refusal.code === 'EROFS') {
          throw new FsError(`cannot ${verb} "${target.displayPath}": file access denied under ${policy.mode} mode: its directory is read-only inside the sandbox (${refusal.message}); the sandbox keeps fixed what programs outside it read, such as HOME's own entries and dot-entries`, 'FS_SANDBOX_DENIED', { cause: error })
        }
        throw error
      })
      const out = decodeFields(reply.payload)
      const record = parseRecord(out, 1)
      return { operation: out[0]!.toString('latin1') === 'create' ? 'create' : 'update', version: record.version, before: out[7]?.toString('latin1') === '1' ? Buffer.concat(parts) : undefined, links: Number(out[8]?.toString('latin1') ?? '0') }
    } finally {
      this.mutations += 1
    }
  }

  /**
   * Atomically create or replace the file with `content` (UTF-8). Missing parent directories
   * are made (and removed again when the write fails). An existing file keeps its mode, owner,
   * ACL and extended attributes (a write that cannot keep them is refused, never silently
   * re-owned or stripped); a new one gets what any new file there gets. A replaced file's other
   * hard links keep the old content: the outcome's `detachedLinks` counts them.
   * @param expected - `createIfAbsent` publishes without replacing (FS_NOT_OBSERVED when a file
   *   is there, even one created a moment before by someone else); `replaceIfVersion` replaces
   *   only that version (FS_STALE_VERSION), checked under the lock; omitted: unconditional.
   * @param sandboxPolicy - the call's mode and workspace root (default: the deployment's).
   * @throws FsError FS_SANDBOX_DENIED, FS_NOT_OBSERVED, FS_STALE_VERSION, FS_NOT_REGULAR_FILE,
   *   FS_PERMISSION_DENIED, FS_NOT_FOUND (a parent is a file), FS_IO_ERROR (disk full, the
   *   world lost: nothing was published), FS_ABORTED (before anything was sent).
   */
  override async writeText(target: FsTarget, content: string, expected?: FsWriteIntent, signal?: AbortSignal, sandboxPolicy?: SandboxExecutionPolicy): Promise<RemoteWriteOutcome> {
    checkAborted(signal, 'write')
    this.checkOpen('write', target.displayPath)
    return this.withLock(target, () => this.write(target, content, expected, signal, sandboxPolicy))
  }

  private async write(target: FsTarget, content: string, expected: FsWriteIntent | undefined, signal: AbortSignal | undefined, sandboxPolicy: SandboxExecutionPolicy | undefined): Promise<RemoteWriteOutcome> {
    const policy = sandboxPolicy ?? this.standingPolicy()
    const fence = await this.fenced(target, 'write', policy)
    checkAborted(signal, 'write')
    const bytes = Buffer.from(content, 'utf8')
    const guard = expected === undefined ? { kind: 'n' as const } : expected.kind === 'createIfAbsent' ? { kind: 'c' as const } : { kind: 'v' as const, version: expected.version }
    // The replaced file is the diff basis when both sides are under the limit (upstream's rule).
    const beforeLimit = bytes.length < this.diffBasisMaxBytes ? this.diffBasisMaxBytes : 0
    const published = await this.publish(fence.target, 'write', bytes, guard, beforeLimit, fence.roots, policy)
    return {
      operation: published.operation,
      version: published.version,
      before: published.operation === 'update' && published.before !== undefined ? diffBasis(published.before) : null,
      after: normalizeLineEndings(content),
      ...replacementFacts(published.links),
    }
  }

  /**
   * Replace literal text (see {@link applyLiteralEdit}) and publish atomically, keeping the
   * file's line endings, mode, owner, ACL and extended attributes (its other hard links keep the
   * old content: `detachedLinks` counts them). The guard is checked before matching.
   * @param expected - the version the caller read; a file at another version (or gone) is
   *   FS_STALE_VERSION, also when it changes between this read and the publication.
   * @throws FsError FS_STALE_VERSION (also for a missing file, guarded or not), FS_EDIT_NOT_FOUND,
   *   FS_AMBIGUOUS_EDIT, FS_NOT_TEXT, FS_NOT_REGULAR_FILE, FS_SANDBOX_DENIED,
   *   FS_PERMISSION_DENIED, FS_IO_ERROR, FS_ABORTED.
   */
  override async editText(target: FsTarget, edit: FsEditRequest, expected?: { version: FsVersion }, signal?: AbortSignal, sandboxPolicy?: SandboxExecutionPolicy): Promise<RemoteEditOutcome> {
    checkAborted(signal, 'edit')
    this.checkOpen('edit', target.displayPath)
    return this.withLock(target, () => this.edit(target, edit, expected, signal, sandboxPolicy))
  }

  private async edit(target: FsTarget, edit: FsEditRequest, expected: { version: FsVersion } | undefined, signal: AbortSignal | undefined, sandboxPolicy: SandboxExecutionPolicy | undefined): Promise<RemoteEditOutcome> {
    const policy = sandboxPolicy ?? this.standingPolicy()
    const fence = await this.fenced(target, 'edit', policy)
    const stale = (): FsError => new FsError(`cannot edit "${target.displayPath}": file changed since it was read`, 'FS_STALE_VERSION')
    const started = performance.now()
    for (let attempt = 1; ; attempt += 1) {
      let read: { bytes: Buffer; version: FsVersion }
      try {
        read = (attempt === 1 ? this.foldedContent(target) : undefined) ?? await this.readWhole(fence.target, 'edit', TEXT_READ_MAX_BYTES, signal)
      } catch (error) {
        if (error instanceof FsError && error.code === 'FS_NOT_FOUND') throw stale()
        throw error
      }
      if (expected !== undefined && read.version !== expected.version) throw stale()
      const raw = decodeText(read.bytes, 'edit', target.displayPath, false)
      const original = normalizeLineEndings(raw)
      const edited = applyLiteralEdit(original, edit.oldString, edit.newString, edit.replaceAll, target.displayPath)
      const content = Buffer.from(restoreLineEndings(edited.content, detectLineEndings(raw)), 'utf8')
      checkAborted(signal, 'edit')
      try {
        const published = await this.publish(fence.target, 'edit', content, { kind: 'h', version: read.version, sha256: createHash('sha256').update(read.bytes).digest('hex') }, 0, fence.roots, policy)
        return { version: published.version, before: original, after: edited.content, ...replacementFacts(published.links) }
      } catch (error) {
        const lostRace = error instanceof FsError && error.code === 'FS_STALE_VERSION'
        if (!lostRace || expected !== undefined || performance.now() - started > UNGUARDED_EDIT_RETRY_MS) throw lostRace ? stale() : error
      }
    }
  }
}

/** Options of {@link mountRemoteFileSystem}: those of {@link RemoteFileSystemConfig} but the owner. */
export type RemoteFileSystemOptions = Omit<RemoteFileSystemConfig, 'owner'>

/**
 * Register `ctx.fs` over the world of `ctx.subprocess` (the `dsh-remote-worlds/fs` plugin and
 * openWorld both mount it so).
 * @throws InvalidArgumentError when `ctx.subprocess` is not a runtime of this package.
 */
export async function mountRemoteFileSystem(ctx: Context, options: RemoteFileSystemOptions = {}): Promise<void> {
  const owner = worldOwnerOf(ctx.get('subprocess'))
  if (owner === undefined) throw new InvalidArgumentError('dsh-remote-worlds/fs serves the world of ctx.subprocess, which must come from dsh-remote-worlds/docker or dsh-remote-worlds/ssh (mount one of them first)')
  await ctx.plugin(RemoteFileSystem, { ...options, owner })
}

export default RemoteFileSystem
