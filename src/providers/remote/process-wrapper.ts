/**
 * The start wrapper of an ordinary (non-PTY) remote process, shared by every world.
 *
 * The wrapper `P` is a POSIX `sh -c` script run as the transport's process (a non-TTY `docker
 * exec`, an SSH exec channel). It:
 *
 * 1. saves the transport's stdout/stderr as fds 7/8 (the raw streams), enters the cwd and checks
 *    the program like the terminal wrapper (`cwd`/`exe` markers, see boundary.ts);
 * 2. starts the program in a NEW SESSION with `setsid`, as a FOREGROUND command: the shell's
 *    child is never a process-group leader (no job control), so `setsid` calls setsid(2) in
 *    place (no fork) and the chain `setsid -> sh -> env -i -> program` keeps one pid `C`, which
 *    is the program's pid, its process-group id and its session id. Everything the program
 *    starts stays in that session (unless it calls setsid itself) and descends from it by ppid,
 *    which is what the teardown ladder kills (teardown.ts). Foreground, not `&`: an
 *    asynchronous list of a shell without job control runs with SIGINT/SIGQUIT ignored (which
 *    the program could not undo) and stdin on /dev/null;
 * 3. just before `exec env -i`, the inner `sh` prints the start marker to the RAW stdout:
 *    `\nDSHB<nonce>:pid:C,STARTTIME,P,P_STARTTIME\n` (its own pid and start time from
 *    /proc/PID/stat, and P's: the identities the teardown fences signals with). Marker first, program bytes after, on the same pipe: the handle strips everything
 *    up to the marker;
 * 4. when `C` ends, writes the exit trailer to the RAW stderr in one write (atomic on a pipe):
 *    `DSHE<nonce>:STATUS:REPORT\n`. STATUS is the shell's `$?`: the exit code, or 128+N after
 *    death by signal N, which `$?` alone cannot tell from `exit 128+N`. The shell itself can:
 *    after a foreground command died by a signal it writes the signal's description
 *    (`Terminated`, `Killed`, `Segmentation fault (core dumped)`) to its own stderr, which the
 *    wrapper points at a status file while it waits (dash and bash both; neither reports SIGINT
 *    or SIGPIPE). REPORT is that line for STATUS > 128, else empty.
 *
 * Spill: for a collected stream with a spill, the program's stream goes through `tee` in the
 * world: one copy to the raw stream (the transport), one through `head -c CAP` into the spill
 * file, so the complete stream lands IN the world, capped at the spill limit. `tee` runs with
 * SIGPIPE ignored (set for that process only, never the program), so when `head` stops at the
 * cap, `tee` drops that output and keeps feeding the transport. The markers never pass through
 * `tee`: the spill file holds exactly the program's bytes.
 * @module dsh-remote-worlds/providers/remote/process-wrapper
 */
import { randomBytes } from 'node:crypto'
import { EMPTY_PROGRAM_MESSAGE, checkWrapperSize, markerCommand, preflightLines } from './boundary.ts'
import { InvalidArgumentError } from './errors.ts'
import { shQuote, shQuoteArgv, shQuoteEnvEntry } from './quote.ts'

/** Exit code of the wrapper when `setsid` is missing in the world. */
export const WRAPPER_TOOL_EXIT = 125

/** A spill of one stream: the remote file and the byte cap of the complete stream. */
export interface RemoteSpill {
  /** Absolute path in the world (inside the private state directory). */
  path: string
  /** Whole-stream cap in bytes; `head -c` stops writing the file there. */
  maxBytes: number
}

/** Inputs of {@link buildProcessWrapper}. */
export interface ProcessWrapperOptions {
  /** Program and arguments; argv[0] is searched in `env.PATH` when it has no `/`. */
  argv: readonly string[]
  /** Absolute working directory in the world. */
  cwd: string
  /** The complete environment of the program (nothing else is inherited). */
  env: Readonly<Record<string, string>>
  /** `ignore`: the program's stdin is /dev/null; `attached`: the transport's stdin. */
  stdin: 'ignore' | 'attached'
  /** Tee the program's stdout into this spill file. */
  stdoutSpill?: RemoteSpill | undefined
  /** Tee the program's stderr into this spill file. */
  stderrSpill?: RemoteSpill | undefined
  /**
   * When the wrapper leads its own session (an SSH exec channel's process does), let it become
   * the program itself (`pidx` marker, no exit trailer): only for a transport whose own exit
   * facts are exact (SSH's exit-status / exit-signal), and never with a spill.
   */
  execWhenLeader?: boolean | undefined
  /** A path in the private state directory for the shell's own stderr while it waits (the caller removes it). */
  statusFile: string
}

/** A built process wrapper. */
export interface ProcessWrapper {
  /** POSIX sh script, run as `sh -c SCRIPT`. */
  script: string
  /** Hex nonce of its start marker and exit trailer. */
  nonce: string
}

const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

/**
 * Build the wrapper; see the module documentation for what it does.
 * @throws InvalidArgumentError for an empty argv, a relative cwd, a bad spill cap, NUL anywhere,
 *   or a script over MAX_WRAPPER_BYTES (boundary.ts).
 */
export function buildProcessWrapper(options: ProcessWrapperOptions): ProcessWrapper {
  const { argv, cwd, env } = options
  const program = argv[0]
  if (program === undefined || program.length === 0) throw new InvalidArgumentError(EMPTY_PROGRAM_MESSAGE)
  if (!cwd.startsWith('/')) throw new InvalidArgumentError(`cwd must be an absolute path in the remote world: ${JSON.stringify(cwd)}`)
  for (const spill of [options.stdoutSpill, options.stderrSpill]) {
    if (spill !== undefined && (!Number.isSafeInteger(spill.maxBytes) || spill.maxBytes < 0)) throw new InvalidArgumentError(`spill maxBytes must be a non-negative safe integer, got ${spill.maxBytes}`)
  }
  const nonce = randomBytes(16).toString('hex')
  const marker = markerCommand(nonce)
  const envWords = Object.entries(env).map(([name, value]) => shQuoteEnvEntry(name, value)).join(' ')
  const status = shQuote(options.statusFile, 'status file')

  // The session leader: publishes (pid, start time, P's pid) on the raw stdout, then becomes the
  // program with exactly `env`, none of the wrapper's extra descriptors inherited. (A `sh`, not a
  // subshell of the wrapper: the shell reports a death by signal only for a simple command.)
  const inner = [
    '_dshS=0 _dshL=',
    '{ IFS= read -r _dshL; } </proc/$$/stat 2>/dev/null',
    // Fields after the LAST ") " start at field 3; field 22 (start time) is the 20th of them.
    `set -f; set -- "$1" "$2" \${_dshL##*') '}; [ $# -ge 22 ] && _dshS=\${22}`,
    `printf '\\n%s%s:pid:%s,%s,%s,%s\\n' DSHB ${shQuote(nonce)} "$$" "$_dshS" "$1" "$2" >&7`,
    `exec env -i ${envWords} ${shQuoteArgv(argv)} 2>&6 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-`,
  ].join('\n')

  const tee = (spill: RemoteSpill, raw: 7 | 8, fd: 4 | 5): string =>
    `{ trap '' PIPE; exec tee /dev/fd/${fd} >&${raw} 2>/dev/null; }`
  // The capped spill file, created 0600 as upstream's spills (they hold command output, which
  // can hold secrets): the umask is the pipeline stage's own, never the program's.
  const capped = (spill: RemoteSpill): string =>
    `{ umask 077; exec head -c ${spill.maxBytes} >${shQuote(spill.path, 'spill path')}; }`
  const pipelines: string[] = []
  // _dshO CMD...: CMD's stdout through tee to the raw stdout and the capped stdout spill.
  if (options.stdoutSpill !== undefined) {
    const spill = options.stdoutSpill
    pipelines.push(`_dshO() { { "$@" 4>&- | ${tee(spill, 7, 4)}; } 4>&1 | ${capped(spill)}; }`)
  }
  // _dshE CMD...: CMD's stderr through tee to the raw stderr and the capped stderr spill; its
  // stdout stays the caller's (saved as fd 9 before the pipe replaces fd 1).
  if (options.stderrSpill !== undefined) {
    const spill = options.stderrSpill
    pipelines.push(`_dshE() { { { "$@" 2>&1 1>&9 5>&- 9>&- | ${tee(spill, 8, 5)}; } 5>&1 | ${capped(spill)}; } 9>&1; }`)
  }
  const chain = [
    ...(options.stdoutSpill !== undefined ? ['_dshO'] : []),
    ...(options.stderrSpill !== undefined ? ['_dshE'] : []),
    '_dshR',
  ].join(' ')

  const script = [
    'exec 7>&1 8>&2',
    ...(options.stdin === 'ignore' ? ['exec 0</dev/null'] : []),
    ...preflightLines(program, cwd, env.PATH ?? DEFAULT_PATH, (kind, tail) => `${marker(kind, tail)} >&7`),
    // The wrapper's own start time (its identity, for the teardown of its helpers), field 22.
    // (`eval`, not an unquoted expansion: zsh, an SSH login shell that runs this script, does
    // not split words; the text after the last ") " is only numbers and a state letter.)
    `_dshW=0 _dshL=; { IFS= read -r _dshL; } </proc/$$/stat 2>/dev/null; eval "set -- \${_dshL##*') '}"; [ $# -ge 20 ] && _dshW=\${20}`,
    // Exec mode (no spill, and a transport that reports the exact exit status): when the
    // wrapper already leads its own session and group (fields 5 and 6 are its pid; an SSH
    // session is), it becomes the program itself: no setsid, no waiting shell.
    ...(options.execWhenLeader === true && options.stdoutSpill === undefined && options.stderrSpill === undefined
      ? [`if [ "$3" = "$$" ] && [ "$4" = "$$" ] && [ "$_dshW" != 0 ]; then ${marker('pidx', '"$$,$_dshW"')}; exec env -i ${envWords} ${shQuoteArgv(argv)} 7>&- 8>&-; fi`]
      : []),
    `command -v setsid >/dev/null 2>&1 || { ${marker('tool', '-')} >&7; exit ${WRAPPER_TOOL_EXIT}; }`,
    // _dshR: run the program in its own session, wait, report.
    '_dshR() {',
    // Foreground, so no signal disposition or stdin is altered (an asynchronous list without
    // job control ignores SIGINT/SIGQUIT and reads /dev/null). The group points the shell's own
    // stderr at the status file while it waits: that is where the shell reports a death by
    // signal (dash and bash alike); the program's stderr is restored from fd 6 at its exec.
    `  { setsid sh -c ${shQuote(inner)} dsh-spawn "$$" "$_dshW"; } 6>&2 2>${status}`,
    '  _dshT=$? _dshJ=',
    `  if [ "$_dshT" -gt 128 ]; then { IFS= read -r _dshJ; } <${status} 2>/dev/null; fi`,
    `  printf '%s%s:%s:%s\\n' DSHE ${shQuote(nonce)} "$_dshT" "$_dshJ" >&8`,
    '}',
    ...pipelines,
    // The status file (and any spill the caller has no use for) is removed by the handle, off
    // the critical path: an `rm` here would delay the end of the transport by a process start.
    chain,
  ].join('\n')
  checkWrapperSize(script)
  return { script, nonce }
}

/** The parsed exit trailer. */
export interface ExitTrailer {
  /** The shell's `$?` after the program ended. */
  status: number
  /** The shell's report of a death by signal (for a status > 128), else ''. */
  report: string
}

/**
 * Finds and removes the exit trailer in a stderr byte stream, whatever the chunking. Bytes that
 * could be the start of the trailer are held back until decided; everything else passes through
 * unchanged (bytes, not text).
 */
export class TrailerScanner {
  private readonly head: Buffer
  private held: Buffer = Buffer.alloc(0)
  /** The trailer, once found. */
  trailer: ExitTrailer | undefined

  /**
   * @param nonce - the wrapper's nonce.
   * @param kind - the line's four-letter tag: `DSHE` for the wrapper's exit trailer; the Docker
   *   exec pool's launcher ends each run's streams with a `DSHX` line of the same shape
   *   (providers/docker/exec-pool/boot-scripts.ts).
   */
  constructor(nonce: string, kind = 'DSHE') {
    this.head = Buffer.from(`${kind}${nonce}:`, 'latin1')
  }

  /**
   * Consume one chunk.
   * @returns the bytes to deliver now (possibly empty).
   */
  push(chunk: Buffer): Buffer {
    if (this.trailer !== undefined) return chunk
    const data = this.held.length === 0 ? chunk : Buffer.concat([this.held, chunk])
    this.held = Buffer.alloc(0)
    const at = data.indexOf(this.head)
    if (at >= 0) {
      const end = data.indexOf(0x0a, at + this.head.length)
      if (end < 0) {
        // The trailer has started but not ended: hold it (bounded: the trailer is one short line).
        if (data.length - at > 4096) return data
        this.held = data.subarray(at)
        return data.subarray(0, at)
      }
      const fields = data.subarray(at + this.head.length, end).toString('latin1')
      const match = /^(\d+):(.*)$/.exec(fields)
      if (match === null) return data
      this.trailer = { status: Number(match[1]), report: match[2]! }
      return Buffer.concat([data.subarray(0, at), data.subarray(end + 1)])
    }
    // Hold a tail that is a prefix of the trailer head.
    const keep = partialPrefix(data, this.head)
    if (keep === 0) return data
    this.held = data.subarray(data.length - keep)
    return data.subarray(0, data.length - keep)
  }

  /** Bytes held back at the end of the stream (a partial trailer that never completed). */
  flush(): Buffer {
    const rest = this.held
    this.held = Buffer.alloc(0)
    return rest
  }
}

/** Length of the longest suffix of `data` that is a proper prefix of `head`. */
function partialPrefix(data: Buffer, head: Buffer): number {
  const max = Math.min(head.length - 1, data.length)
  for (let length = max; length > 0; length--) {
    if (data.compare(head, 0, length, data.length - length, data.length) === 0) return length
  }
  return 0
}
