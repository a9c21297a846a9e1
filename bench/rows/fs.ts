/**
 * The filesystem family: `ctx.fs` of each world (src/files, `RemoteFileSystem` over the world's
 * file server; on `local`, the upstream `@deepseek-ai/dsh-fs-local` LocalFileSystem over a host
 * temporary directory, the baseline of the same run), as the upstream file tools use it:
 * - `fs read tool call (10 KB)`: `resolve(path, { cwd })`, `stat`, `readText`, exactly the calls
 *   of dsh-tool-fs's `read` for a file under its streaming threshold;
 * - `fs write (10 KB)`: `resolve` + `writeText` (unguarded), the content alternating;
 * - `fs edit (10 KB)`: `resolve` + `stat` + `editText` guarded by the version the stat saw, a
 *   literal replacement that alternates (`state: A` <-> `state: B`) so every run changes the file;
 * - `fs listDir (5000 entries)`: `listDir` of a folder of 5000 files (resolved once, untimed);
 * - `fs readBytes (100 MB)`: `readBytes` of a 100 MiB file (resolved once, untimed); the report
 *   divides its MB/s by the raw transport row of the same world and run (rows/raw-transport.ts);
 * - `fs grep (20k files)`: the upstream `grep` tool of `@deepseek-ai/dsh-tool-fs-search`,
 *   executed through `ctx.tools` (`@deepseek-ai/dsh-tools`' ToolRuntime) for an agent whose
 *   session cwd is a 20 000-file tree, beside `rg direct (20k files)`: the same ripgrep argv
 *   (`--no-config --json --regexp=...`) run directly in the world by one plain exec (dockerode
 *   exec / ssh2 exec channel / a host child process), timed as the raw transport rows are;
 * - `fs mixed x8 (1000 ops)`: 1000 operations (read tool calls, writes, guarded edits that
 *   append a unique line to a shared ledger and retry on FS_STALE_VERSION, listDir) from 8
 *   concurrent callers on one set of files; its wall time is the row, and its checks (errors,
 *   stale-version retries, lost or duplicated ledger lines, torn reads) and the client's RSS
 *   before and after are the `fs` section ({@link FsMixedRecord}).
 * The fixtures (the tree, the 100 MiB file, the 5000-entry folder, the 10 KB files) are made in
 * the world by ONE shell command through `ctx.subprocess`, never file by file over `ctx.fs`, and
 * removed after.
 * @module bench/rows/fs
 */
import { spawn as spawnChild } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Context, Fiber } from '@deepseek-ai/cordis'
import type { Agent } from '@deepseek-ai/dsh-agent'
import { FsError, type FileSystem, type FsTarget } from '@deepseek-ai/dsh-fs'
import LocalFileSystem from '@deepseek-ai/dsh-fs-local'
import { CallId } from '@deepseek-ai/dsh-llm'
import { SessionId } from '@deepseek-ai/dsh-session'
import type { SubprocessRuntime } from '@deepseek-ai/dsh-subprocess'
import SystemPrompt from '@deepseek-ai/dsh-system-prompt'
import * as toolFsSearch from '@deepseek-ai/dsh-tool-fs-search'
import ToolRuntime from '@deepseek-ai/dsh-tools'
import Docker from 'dockerode'
import type { Client } from 'ssh2'
import { DockerSubprocessRuntime } from '../../src/providers/docker/docker-runtime.ts'
import { shQuote, shQuoteArgv } from '../../src/providers/remote/quote.ts'
import { connectSsh } from '../../src/providers/ssh/connect.ts'
import { SshSubprocessRuntime } from '../../src/providers/ssh/ssh-runtime.ts'
import { STDOUT_THROUGHPUT_BYTES, type SampleTable, median, pushSample, round, withTimeout } from '../timing.ts'
import type { BenchTarget, WorldName } from '../worlds.ts'
import { collectGarbage, rssMb } from './memory.ts'
import { type PlainExecResult, plainDockerExec, plainSshExec } from './raw-transport.ts'

export const FS_READ_METRIC = 'fs read tool call (10 KB)'
export const FS_WRITE_METRIC = 'fs write (10 KB)'
export const FS_EDIT_METRIC = 'fs edit (10 KB)'
export const FS_LIST_METRIC = 'fs listDir (5000 entries)'
export const FS_READ_BYTES_METRIC = 'fs readBytes (100 MB)'
export const FS_GREP_METRIC = 'fs grep (20k files)'
export const RG_DIRECT_METRIC = 'rg direct (20k files)'
export const FS_MIXED_METRIC = 'fs mixed x8 (1000 ops)'

/** The rows, in report order. */
export const FS_METRICS = [FS_READ_METRIC, FS_WRITE_METRIC, FS_EDIT_METRIC, FS_LIST_METRIC, FS_READ_BYTES_METRIC, FS_GREP_METRIC, RG_DIRECT_METRIC, FS_MIXED_METRIC] as const

/** Bytes of the 10 KB files (read, write, edit, the mixed data files). */
const SMALL_FILE_BYTES = 10 * 1024
/** Entries of the listed folder. */
const LIST_ENTRIES = 5000
/** Bytes `fs readBytes (100 MB)` reads: 100 MiB, the raw transport rows' payload. */
export const FS_READ_BYTES = STDOUT_THROUGHPUT_BYTES
/** The grep tree: folders x files per folder = 20 000 files of ~600 bytes. */
const TREE_DIRS = 200
const TREE_FILES_PER_DIR = 100
/** What the grep rows search: one line in the first file of each folder (200 matches, under the tool's 250 inline). */
const GREP_PATTERN = 'dsh-bench-needle-[0-9]+'
const GREP_MATCHES = TREE_DIRS

/** Samples of the small-operation rows (at least 20, as the inspect rows), after {@link WARM_UP} discarded. */
const smallRuns = (runs: number): number => Math.max(runs, 20)
const WARM_UP = 5
/** Runs of the 100 MiB and mixed rows at most (as the throughput rows). */
const MAX_HEAVY_RUNS = 5
/** Bound of one 100 MiB read, one grep, the fixtures' shell command (ms). */
const HEAVY_STEP_MS = 120_000

/** The fixtures' script's last word. */
const FIXTURES_READY = 'fixtures-ready'

/** The mixed workload: callers, operations in all, shared data files and ledgers. */
const MIXED_CALLERS = 8
const MIXED_OPS = 1000
const MIXED_DATA_FILES = 16
const MIXED_LEDGERS = 4
/** A guarded append that lost this many races in a row counts as an error. */
const MIXED_EDIT_ATTEMPTS = 200
/** The last line of every ledger: an append replaces it by the new line and itself. */
const LEDGER_END = '<<ledger end>>'

/** The `fs` section's record of one world (`section: 'fs'`, not a timed row). */
export interface FsMixedRecord {
  section: 'fs'
  metric: string
  world: WorldName
  callers: number
  /** Operations per run (all callers together). */
  ops: number
  /** Measured runs (after one discarded warm-up run, whose checks count too). */
  runs: number
  wall_ms_median: number
  wall_ms_max: number
  /** ops / median wall time. */
  ops_per_s: number
  /** Operations of every run (the warm-up included) by kind. */
  ops_by_kind: Record<MixedOpKind, number>
  /**
   * Failed operations and failed checks of every run: any error but a guarded edit's
   * FS_STALE_VERSION, a torn or foreign read, a listing without an expected name, an edit
   * that lost {@link MIXED_EDIT_ATTEMPTS} races in a row, a line in a ledger that no caller wrote.
   */
  errors: number
  /** Guarded edits that lost a race (FS_STALE_VERSION) and were retried after a re-read (expected). */
  stale_version_retries: number
  /** Ledger lines a caller appended (its edit succeeded) that the final ledgers lack. */
  lost_updates: number
  /** Ledger lines present more than once (each extra copy counts). */
  duplicated_updates: number
  /** Up to 5 error messages, for the reader. */
  error_samples: string[]
  /** Client RSS after a GC, before the measured runs (after the warm-up run) and after them (MB = 10^6 bytes). */
  rss_mb_before: number
  rss_mb_after: number
}

type MixedOpKind = 'read' | 'write' | 'edit' | 'list'

/** What `fsRuns` needs of a world: its `ctx.fs`, the folder of the fixtures, its plain exec. */
interface FsWorld {
  fs: FileSystem
  /** The fixtures' folder (absolute, in the world). */
  root: string
  /**
   * The ripgrep the direct run execs: the world's `rg` on its PATH (Docker, SSH; the grep tool's
   * spawn maps the packaged one to it), the packaged `@vscode/ripgrep` on the host (local, the tool's own).
   */
  rg: string
  /** One plain exec of `argv` in `cwd` (no project code on its path), stdout to `onStdout`. */
  direct(argv: readonly string[], cwd: string, onStdout: (chunk: Buffer) => void): Promise<PlainExecResult>
  /** Release what this made (the local file system, the plain connection, the fixtures). */
  release(): Promise<void>
}

/**
 * The one shell command that makes the fixtures in `root` (bash: the project image and the host
 * have it): the 10 KB files, the 5000-entry folder, the 100 MiB file and the 20 000-file tree.
 */
function fixturesScript(root: string): string {
  return [
    'set -eu',
    `root=${shQuote(root)}`,
    'rm -rf "$root"',
    'mkdir -p "$root/list" "$root/tree" "$root/mixed"',
    'cd "$root"',
    `yes 'the quick brown fox jumps over the lazy dog 0123456789' | head -c ${SMALL_FILE_BYTES} > read.txt`,
    `{ printf 'state: A\\n'; yes 'the quick brown fox jumps over the lazy dog 0123456789'; } | head -c ${SMALL_FILE_BYTES} > edit.txt`,
    `head -c ${FS_READ_BYTES} /dev/zero > big.bin`,
    `cd list; for ((i = 0; i < ${LIST_ENTRIES}; i++)); do : > "entry-$i"; done; cd ..`,
    'cd tree',
    `for ((d = 0; d < ${TREE_DIRS}; d++)); do`,
    '  mkdir "dir-$d"',
    `  for ((f = 0; f < ${TREE_FILES_PER_DIR}; f++)); do`,
    '    if ((f == 0)); then needle="const marker = \\"dsh-bench-needle-$d\\""; else needle="const marker = \\"plain-$d-$f\\""; fi',
    '    printf \'// file %s of folder %s\\n%s\\nfunction lorem%s() {\\n  return "ipsum dolor sit amet, consectetur adipiscing elit"\\n}\\nexport const values = [1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144]\\n// sed do eiusmod tempor incididunt ut labore et dolore magna aliqua\\n// ut enim ad minim veniam, quis nostrud exercitation ullamco laboris\\n\' "$f" "$d" "$needle" "$f" > "dir-$d/file-$f.ts"',
    '  done',
    'done',
    // Written back now, so the 100 MiB of dirty pages does not land in the first fsyncs the
    // write and edit rows pay (an ext4 fsync commits the journal, with what it holds).
    'sync',
    `echo ${FIXTURES_READY}`,
  ].join('\n')
}

/**
 * Run `script` with bash through `runtime` (`ctx.subprocess`: the world's process half) in
 * `cwd`, until it exits.
 * @param expect - what its stdout must hold (the fixtures' script ends by saying so).
 * @throws Error unless it exits 0 (and prints `expect`).
 */
async function runScript(runtime: SubprocessRuntime, script: string, cwd: string, what: string, expect?: string): Promise<void> {
  const handle = runtime.spawn({ argv: ['bash', '-c', script], cwd, graceMs: 1_000, stdio: { stdin: 'ignore', stdout: 'pipe', stderr: 'pipe' } })
  let stdout = ''
  let stderr = ''
  handle.stdout!.on('data', (chunk: Buffer) => { stdout += chunk.toString('utf8') })
  handle.stderr!.on('data', (chunk: Buffer) => { stderr += chunk.toString('utf8') })
  const outcome = await withTimeout(handle.done, what, HEAVY_STEP_MS)
  if (!handle.stdout!.readableEnded) await withTimeout(new Promise(resolve => handle.stdout!.once('end', resolve)), `${what}: stdout end`)
  if (outcome.exitCode !== 0 || (expect !== undefined && !stdout.includes(expect))) throw new Error(`bench: ${what} exited ${JSON.stringify(outcome)}: ${stderr.trim().slice(0, 400)}`)
}

/** A plain exec of the host (the local world's "direct" run): a child process, stdout to `onStdout`. */
function hostExec(argv: readonly string[], cwd: string, onStdout: (chunk: Buffer) => void): Promise<PlainExecResult> {
  return withTimeout(new Promise<PlainExecResult>((resolve, reject) => {
    let stderrBytes = 0
    const started = performance.now()
    const child = spawnChild(argv[0]!, argv.slice(1), { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout.on('data', onStdout)
    child.stderr.on('data', (chunk: Buffer) => { stderrBytes += chunk.length })
    child.once('error', reject)
    child.once('close', code => resolve({ ms: performance.now() - started, exitCode: code, stderrBytes }))
  }), `host ${argv[0]}`, HEAVY_STEP_MS)
}

/** Close a plain ssh2 connection and wait for it (bounded). */
async function endSsh(client: Client): Promise<void> {
  const gone = new Promise<void>(resolve => client.once('close', () => resolve()))
  client.end()
  await withTimeout(gone, 'ssh disconnect').catch(() => undefined)
}

/**
 * The world's side of the family: `ctx.fs` (the world's own for Docker and SSH; for local a
 * LocalFileSystem mounted now over a host temporary directory), its fixtures made by one shell
 * command, and its plain exec.
 * @throws Error when a remote world has no `ctx.fs`, or the fixtures cannot be made.
 */
async function fsWorld(world: WorldName, target: BenchTarget): Promise<FsWorld> {
  const runtime = target.world.runtime
  const releases: (() => Promise<void>)[] = []
  const release = async (): Promise<void> => {
    for (const step of releases.reverse()) await step().catch((error: unknown) => console.error(`[bench] ${world}: fs cleanup: ${(error as Error).message}`))
  }
  try {
    if (world === 'local') {
      const root = await mkdtemp(join(tmpdir(), 'dsh-bench-fs-'))
      releases.push(() => rm(root, { recursive: true, force: true }))
      const fiber = await target.world.ctx.plugin(LocalFileSystem, { cwd: root })
      releases.push(() => fiber.dispose())
      await runScript(runtime, fixturesScript(root), root, 'local fs fixtures', FIXTURES_READY)
      return { fs: target.world.ctx.fs, root, rg: await toolFsSearch.resolveRgPath(), direct: hostExec, release }
    }
    const fs = target.world.fs
    if (fs === undefined) throw new Error(`bench: the ${world} world has no ctx.fs`)
    const root = `/tmp/dsh-bench-fs-${process.pid}`
    releases.push(() => runScript(runtime, `rm -rf ${shQuote(root)}`, '/tmp', `${world} fs fixtures removal`))
    await runScript(runtime, fixturesScript(root), '/tmp', `${world} fs fixtures`, FIXTURES_READY)
    if (runtime instanceof DockerSubprocessRuntime) {
      const docker = await runtime.world()
      const container = docker.docker.getContainer(docker.containerId)
      const user = runtime.config.user
      return { fs, root, rg: 'rg', direct: (argv, cwd, onStdout) => plainDockerExec(docker.docker, container, { argv, workingDir: cwd, user, what: `docker exec ${argv[0]}`, timeoutMs: HEAVY_STEP_MS }, onStdout), release }
    }
    if (runtime instanceof SshSubprocessRuntime) {
      const ssh = await runtime.world()
      // A connection of its own, outside the runtime's pool, as the raw ssh2 row's. Stdin is
      // /dev/null, as the tool's `stdin: 'ignore'` and Docker's unattached stdin: ripgrep without
      // a path searches a stdin that is not a terminal, and the channel's never ends.
      const { client } = await withTimeout(connectSsh(ssh.options.hop, ssh.options.jumps, ssh.options.timings), 'ssh connect')
      releases.push(() => endSsh(client))
      return { fs, root, rg: 'rg', direct: (argv, cwd, onStdout) => plainSshExec(client, `cd ${shQuote(cwd)} && exec ${shQuoteArgv(argv)} < /dev/null`, `ssh exec ${argv[0]}`, HEAVY_STEP_MS, onStdout), release }
    }
    throw new Error(`bench: the ${world} world's runtime is neither Docker's nor SSH's`)
  } catch (error) {
    await release()
    throw error
  }
}

/** A fresh signal, as every tool call carries one (`exec.signal`). */
const signal = (): AbortSignal => new AbortController().signal

/**
 * dsh-tool-fs's `read` on a file under its streaming threshold: resolve against the session
 * cwd, one stat (type, size, version), readText.
 * @throws FsError as the tool would surface it; Error for a target that is not a file.
 */
async function readToolCall(fs: FileSystem, path: string, cwd: string): Promise<string> {
  const abort = signal()
  const target = await fs.resolve(path, { cwd, signal: abort })
  const info = await fs.stat(target, abort)
  if (info?.type !== 'file') throw new Error(`bench: read of ${target.displayPath}: ${info === undefined ? 'not found' : `a ${info.type}`}`)
  return fs.readText(target, abort)
}

/** `count` samples of `once` (ms) into `metric`, after {@link WARM_UP} discarded. */
async function timeRow(samples: SampleTable, metric: string, count: number, once: (run: number) => Promise<void>): Promise<void> {
  for (let run = -WARM_UP; run < count; run += 1) {
    const started = performance.now()
    await withTimeout(once(run), metric)
    const ms = performance.now() - started
    if (run >= 0) pushSample(samples, metric, { ms })
  }
}

/** The read, write, edit and listDir rows. */
async function smallRows(world: FsWorld, runs: number, samples: SampleTable): Promise<void> {
  const { fs, root } = world
  const count = smallRuns(runs)
  await timeRow(samples, FS_READ_METRIC, count, async () => {
    const text = await readToolCall(fs, 'read.txt', root)
    if (text.length !== SMALL_FILE_BYTES) throw new Error(`bench: ${FS_READ_METRIC}: read ${text.length} characters, expected ${SMALL_FILE_BYTES}`)
  })
  const contents = ['A', 'B'].map(tag => `written ${tag}\n${'the quick brown fox jumps over the lazy dog 0123456789\n'.repeat(200)}`.slice(0, SMALL_FILE_BYTES))
  await timeRow(samples, FS_WRITE_METRIC, count, async run => {
    const abort = signal()
    const target = await fs.resolve('write.txt', { cwd: root, signal: abort })
    await fs.writeText(target, contents[(run + WARM_UP) % 2]!, undefined, abort)
  })
  await timeRow(samples, FS_EDIT_METRIC, count, async run => {
    const [from, to] = (run + WARM_UP) % 2 === 0 ? ['state: A', 'state: B'] : ['state: B', 'state: A']
    const abort = signal()
    const target = await fs.resolve('edit.txt', { cwd: root, signal: abort })
    const info = await fs.stat(target, abort)
    if (info === undefined) throw new Error(`bench: ${FS_EDIT_METRIC}: ${target.displayPath} is gone`)
    const outcome = await fs.editText(target, { oldString: from, newString: to, replaceAll: false }, { version: info.version }, abort)
    if (!outcome.after.startsWith(`${to}\n`)) throw new Error(`bench: ${FS_EDIT_METRIC}: the edit did not apply`)
  })
  const listed = await fs.resolve('list', { cwd: root })
  await timeRow(samples, FS_LIST_METRIC, count, async () => {
    const entries = await fs.listDir(listed, signal())
    if (entries.length !== LIST_ENTRIES) throw new Error(`bench: ${FS_LIST_METRIC}: listed ${entries.length} entries, expected ${LIST_ENTRIES}`)
  })
}

/** The 100 MiB row: min(runs, 5) reads after one discarded, a GC between reads. */
async function readBytesRow(world: FsWorld, runs: number, samples: SampleTable): Promise<void> {
  const target = await world.fs.resolve('big.bin', { cwd: world.root })
  for (let run = -1; run < Math.min(runs, MAX_HEAVY_RUNS); run += 1) {
    collectGarbage()
    const started = performance.now()
    const bytes = await withTimeout(world.fs.readBytes(target, signal(), FS_READ_BYTES), FS_READ_BYTES_METRIC, HEAVY_STEP_MS)
    const ms = performance.now() - started
    if (bytes.length !== FS_READ_BYTES) throw new Error(`bench: ${FS_READ_BYTES_METRIC}: read ${bytes.length} bytes, expected ${FS_READ_BYTES}`)
    if (run >= 0) pushSample(samples, FS_READ_BYTES_METRIC, { ms })
  }
  collectGarbage()
}

/**
 * An agent stand-in for the tool call whose session (in `ctx.sessions`) has `cwd` as its header
 * cwd (dsh-tool-fs-search's workdir): the tools pipeline keys scopes by the agent object and the
 * tool reads only `session.header`. Released with the returned fiber.
 */
function searchAgent(ctx: Context, cwd: string): { agent: Agent; fiber: Fiber } {
  const fiber = ctx.plugin({ inject: ['sessions'], apply: () => {} })
  const id = SessionId(`dsh-bench-fs-${process.pid}-${Math.random().toString(36).slice(2)}`)
  const session = fiber.ctx.sessions.create(id, { meta: { cwd } })
  return { agent: { id, options: {}, session, status: 'idle', ctx: fiber.ctx } as unknown as Agent, fiber }
}

/**
 * The grep rows, alternating (tool, direct) for runs samples each after one discarded pair:
 * the upstream tool through ToolRuntime (SystemPrompt + ToolRuntime + tool-fs-search plugged into
 * the world's context, on its `ctx.subprocess`), and the same ripgrep argv by the plain exec.
 * Each must find {@link GREP_MATCHES} matches.
 */
async function grepRows(world: FsWorld, target: BenchTarget, runs: number, samples: SampleTable): Promise<void> {
  const ctx = target.world.ctx
  const fibers: Fiber[] = []
  try {
    fibers.push(await ctx.plugin(SystemPrompt, {}))
    fibers.push(await ctx.plugin(ToolRuntime, {}))
    fibers.push(await ctx.plugin(toolFsSearch, { sampleOverCapGlobResults: false } as toolFsSearch.Config))
    const tree = `${world.root}/tree`
    const { agent, fiber } = searchAgent(ctx, tree)
    fibers.push(fiber)
    const argv = [world.rg, '--no-config', ...toolFsSearch.buildGrepCommand({ pattern: GREP_PATTERN })]
    const tool = async (run: number): Promise<number> => {
      const started = performance.now()
      const result = await withTimeout(ctx.tools.execute({ signal: signal(), callId: CallId(`bench-grep-${run}`), name: 'grep', arguments: { pattern: GREP_PATTERN }, agent }), FS_GREP_METRIC, HEAVY_STEP_MS)
      const ms = performance.now() - started
      if (result.isError) throw new Error(`bench: ${FS_GREP_METRIC}: the tool failed: ${JSON.stringify(result.error)}`)
      const found = (result.value as { matches: unknown[] }).matches.length
      if (found !== GREP_MATCHES) throw new Error(`bench: ${FS_GREP_METRIC}: ${found} matches, expected ${GREP_MATCHES}`)
      return ms
    }
    const direct = async (): Promise<number> => {
      let output = ''
      const result = await world.direct(argv, tree, chunk => { output += chunk.toString('utf8') })
      if (result.exitCode !== 0) throw new Error(`bench: ${RG_DIRECT_METRIC}: rg exited ${String(result.exitCode)} (${result.stderrBytes} bytes on stderr)`)
      const found = output.split('\n').filter(line => line.startsWith('{"type":"match"')).length
      if (found !== GREP_MATCHES) throw new Error(`bench: ${RG_DIRECT_METRIC}: ${found} matches, expected ${GREP_MATCHES}`)
      return result.ms
    }
    for (let run = -1; run < runs; run += 1) {
      const toolMs = await tool(run)
      const directMs = await direct()
      if (run < 0) continue
      pushSample(samples, FS_GREP_METRIC, { ms: toolMs })
      pushSample(samples, RG_DIRECT_METRIC, { ms: directMs })
    }
  } finally {
    for (const fiber of fibers.reverse()) await fiber.dispose().catch(() => undefined)
  }
}

/** A data file of the mixed workload: `data K TAG`, filler, `end` (exactly 10 KB). */
function dataContent(file: number, tag: string): string {
  const head = `data ${file} ${tag}\n`
  const tail = 'end\n'
  return head + 'filler of a mixed data file 0123456789\n'.repeat(300).slice(0, SMALL_FILE_BYTES - head.length - tail.length) + tail
}

/** What one mixed run found. */
interface MixedOutcome {
  wallMs: number
  errors: string[]
  staleRetries: number
  lost: number
  duplicated: number
  kinds: Record<MixedOpKind, number>
}

/** The kind of caller `caller`'s operation `op`: 4 reads, 2 writes, 3 guarded appends, 1 listDir in 10. */
function opKind(caller: number, op: number): MixedOpKind {
  const slot = (op + caller) % 10
  return slot < 4 ? 'read' : slot < 6 ? 'write' : slot < 9 ? 'edit' : 'list'
}

/**
 * One run of the mixed workload in `dir` (reset first, untimed): {@link MIXED_CALLERS} callers
 * of {@link MIXED_OPS} / callers operations each, all at once; then the ledgers checked.
 */
async function mixedRun(fs: FileSystem, dir: string, run: number): Promise<MixedOutcome> {
  const names = [...Array.from({ length: MIXED_DATA_FILES }, (_, file) => `data-${file}.txt`), ...Array.from({ length: MIXED_LEDGERS }, (_, ledger) => `ledger-${ledger}.txt`)]
  await Promise.all(names.map(async (name, index) => {
    const target = await fs.resolve(name, { cwd: dir })
    await fs.writeText(target, index < MIXED_DATA_FILES ? dataContent(index, 'initial') : `ledger ${index - MIXED_DATA_FILES}\n${LEDGER_END}\n`)
  }))
  const errors: string[] = []
  const appended: string[][] = Array.from({ length: MIXED_LEDGERS }, () => [])
  const kinds: Record<MixedOpKind, number> = { read: 0, write: 0, edit: 0, list: 0 }
  let staleRetries = 0
  const perCaller = MIXED_OPS / MIXED_CALLERS
  const operation = async (caller: number, op: number): Promise<void> => {
    const kind = opKind(caller, op)
    kinds[kind] += 1
    switch (kind) {
      case 'read': {
        const file = (caller * 5 + op) % (MIXED_DATA_FILES + MIXED_LEDGERS)
        const text = await readToolCall(fs, names[file]!, dir)
        if (file < MIXED_DATA_FILES) {
          if (text.length !== SMALL_FILE_BYTES || !text.startsWith(`data ${file} `) || !text.endsWith('end\n')) errors.push(`torn or foreign read of ${names[file]}: ${text.length} characters, starting ${JSON.stringify(text.slice(0, 30))}`)
        } else if (!text.startsWith(`ledger ${file - MIXED_DATA_FILES}\n`) || !text.endsWith(`${LEDGER_END}\n`)) {
          errors.push(`torn or foreign read of ${names[file]}: ${text.length} characters`)
        }
        return
      }
      case 'write': {
        const file = (caller * 7 + op) % MIXED_DATA_FILES
        const abort = signal()
        const target = await fs.resolve(names[file]!, { cwd: dir, signal: abort })
        await fs.writeText(target, dataContent(file, `run ${run} caller ${caller} op ${op}`), undefined, abort)
        return
      }
      case 'edit': {
        const ledger = (caller + op) % MIXED_LEDGERS
        const line = `run ${run} caller ${caller} op ${op}`
        for (let attempt = 1; ; attempt += 1) {
          const abort = signal()
          const target = await fs.resolve(names[MIXED_DATA_FILES + ledger]!, { cwd: dir, signal: abort })
          const info = await fs.stat(target, abort)
          if (info === undefined) throw new Error(`${target.displayPath} is gone`)
          try {
            await fs.editText(target, { oldString: `${LEDGER_END}\n`, newString: `${line}\n${LEDGER_END}\n`, replaceAll: false }, { version: info.version }, abort)
            appended[ledger]!.push(line)
            return
          } catch (error) {
            if (!(error instanceof FsError && error.code === 'FS_STALE_VERSION')) throw error
            staleRetries += 1
            if (attempt >= MIXED_EDIT_ATTEMPTS) throw new Error(`a guarded append to ${target.displayPath} lost ${attempt} races in a row`)
          }
        }
      }
      case 'list': {
        const abort = signal()
        const target = await fs.resolve('.', { cwd: dir, signal: abort })
        const listed = new Set((await fs.listDir(target, abort)).map(entry => entry.name))
        const missing = names.filter(name => !listed.has(name))
        if (missing.length > 0) errors.push(`listDir of ${dir} lacks ${missing.join(', ')}`)
      }
    }
  }
  const started = performance.now()
  await Promise.all(Array.from({ length: MIXED_CALLERS }, async (_, caller) => {
    for (let op = 0; op < perCaller; op += 1) {
      try {
        await operation(caller, op)
      } catch (error) {
        errors.push(`${opKind(caller, op)} by caller ${caller}: ${(error as Error).message}`)
      }
    }
  }))
  const wallMs = performance.now() - started
  // Every appended line exactly once; nothing else but the header and the end line.
  let lost = 0
  let duplicated = 0
  for (let ledger = 0; ledger < MIXED_LEDGERS; ledger += 1) {
    const text = await readToolCall(fs, names[MIXED_DATA_FILES + ledger]!, dir)
    const lines = text.split('\n').slice(1, -2)
    const counts = new Map<string, number>()
    for (const line of lines) counts.set(line, (counts.get(line) ?? 0) + 1)
    for (const line of appended[ledger]!) if (!counts.has(line)) lost += 1
    for (const [line, count] of counts) {
      if (count > 1) duplicated += count - 1
      if (!appended[ledger]!.includes(line)) errors.push(`ledger ${ledger} holds a line no caller appended: ${JSON.stringify(line)}`)
    }
  }
  return { wallMs, errors, staleRetries, lost, duplicated, kinds }
}

/** The mixed row and record: one discarded run, then min(runs, 5), RSS around the measured ones. */
async function mixedRows(worldName: WorldName, world: FsWorld, runs: number, samples: SampleTable): Promise<FsMixedRecord> {
  const dir = `${world.root}/mixed`
  const outcomes: MixedOutcome[] = [await withTimeout(mixedRun(world.fs, dir, 0), FS_MIXED_METRIC, HEAVY_STEP_MS)]
  collectGarbage()
  const before = rssMb()
  const measured = Math.min(runs, MAX_HEAVY_RUNS)
  for (let run = 1; run <= measured; run += 1) {
    const outcome = await withTimeout(mixedRun(world.fs, dir, run), FS_MIXED_METRIC, HEAVY_STEP_MS)
    pushSample(samples, FS_MIXED_METRIC, { ms: outcome.wallMs })
    outcomes.push(outcome)
  }
  collectGarbage()
  const after = rssMb()
  const walls = outcomes.slice(1).map(outcome => outcome.wallMs)
  const errors = outcomes.flatMap(outcome => outcome.errors)
  const kinds: Record<MixedOpKind, number> = { read: 0, write: 0, edit: 0, list: 0 }
  for (const outcome of outcomes) for (const kind of Object.keys(kinds) as MixedOpKind[]) kinds[kind] += outcome.kinds[kind]
  const wallMedian = median(walls)
  return {
    section: 'fs',
    metric: FS_MIXED_METRIC,
    world: worldName,
    callers: MIXED_CALLERS,
    ops: MIXED_OPS,
    runs: measured,
    wall_ms_median: round(wallMedian),
    wall_ms_max: round(Math.max(...walls)),
    ops_per_s: round(MIXED_OPS / (wallMedian / 1000)),
    ops_by_kind: kinds,
    errors: errors.length,
    stale_version_retries: outcomes.reduce((sum, outcome) => sum + outcome.staleRetries, 0),
    lost_updates: outcomes.reduce((sum, outcome) => sum + outcome.lost, 0),
    duplicated_updates: outcomes.reduce((sum, outcome) => sum + outcome.duplicated, 0),
    error_samples: errors.slice(0, 5),
    rss_mb_before: round(before),
    rss_mb_after: round(after),
  }
}

/**
 * Measure the family on `target` (a world of the default composition; for local, a
 * LocalFileSystem is mounted on its context for the family's duration): fixtures, the small
 * rows, the 100 MiB row, the grep rows, the mixed row and record; then the fixtures are removed.
 * @throws Error when a fixture cannot be made, or an operation of a timed row fails or returns
 *   the wrong result (the mixed workload's failures are counted in its record instead).
 */
export async function fsRuns(world: WorldName, target: BenchTarget, runs: number, samples: SampleTable): Promise<FsMixedRecord> {
  const opening = performance.now()
  const side = await fsWorld(world, target)
  try {
    console.error(`[bench] ${world}: fs fixtures ready ${Math.round(performance.now() - opening)} ms`)
    await smallRows(side, runs, samples)
    await readBytesRow(side, runs, samples)
    console.error(`[bench] ${world}: fs small and readBytes rows done`)
    await grepRows(side, target, runs, samples)
    console.error(`[bench] ${world}: fs grep rows done`)
    const record = await mixedRows(world, side, runs, samples)
    console.error(`[bench] ${world}: fs mixed: ${record.errors} errors, ${record.stale_version_retries} stale-version retries, ${record.lost_updates} lost updates`)
    for (const message of record.error_samples) console.error(`[bench] ${world}: fs mixed error: ${message}`)
    return record
  } finally {
    await side.release()
  }
}
