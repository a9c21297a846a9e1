/**
 * The terminal start wrapper and its boundary marker. Both worlds run the same tiny POSIX
 * script as the PTY's first process: it enters the cwd, checks the program exists, prints a
 * marker carrying a random nonce and `$$`, then `exec env -i NAME=VALUE... argv`, so the
 * published pid IS the program's pid and the environment is exactly the requested one.
 * The nonce (128 random bits, never written to the terminal before the marker) makes the
 * marker unforgeable by anything the program later prints.
 * @module dsh-remote-worlds/providers/remote/boundary
 */
import { randomBytes } from 'node:crypto'
import { CwdNotFoundError, ExecutableNotFoundError, InvalidArgumentError, type RemoteWorldError, START_ERRNO, SpawnFailedError } from './errors.ts'
import { shQuote, shQuoteArgv, shQuoteEnvEntry } from './quote.ts'

/**
 * The largest wrapper script a remote start can carry (bytes): Linux's limit of ONE exec
 * argument (MAX_ARG_STRLEN, 32 pages; include/uapi/linux/binfmts.h). The script is one
 * argument of `sh -c` in a Docker exec, and the SSH exec command line that sshd hands to the
 * login shell's `-c`; argv and the whole environment are inside it.
 */
export const MAX_WRAPPER_BYTES = 128 * 1024

/**
 * Refuse a wrapper that cannot be exec'd (the kernel would fail the start with E2BIG, which
 * the transports report only as a start without a marker).
 * @throws InvalidArgumentError naming the size and the limit.
 */
export function checkWrapperSize(script: string): void {
  const bytes = Buffer.byteLength(script)
  if (bytes >= MAX_WRAPPER_BYTES) throw new InvalidArgumentError(`argv and environment are too large for a remote start (${bytes} bytes with the wrapper; a single exec argument is limited to ${MAX_WRAPPER_BYTES} bytes)`)
}

/** The message of an empty argv[0], in the upstream local provider's words (subprocess-local). */
export const EMPTY_PROGRAM_MESSAGE = 'invalid argv: expected a non-empty program name at argv[0]'

/** Exit codes the wrapper uses before `exec` for its own failures. */
export const WRAPPER_EXIT = { cwd: 97, executable: 127 } as const

/** A built wrapper: the script and the nonce its markers carry. */
export interface StartWrapper {
  /** POSIX sh script to run as `sh -c SCRIPT` (or as an SSH exec command line). */
  script: string
  /** Hex nonce embedded in the markers. */
  nonce: string
}

/**
 * Build the start wrapper.
 * @param argv - program and arguments; argv[0] is resolved in PATH of `env` when it has no `/`.
 * @param cwd - absolute working directory in the remote world.
 * @param env - the complete environment of the program (nothing else is inherited).
 * @param size - the PTY window size; when given, the wrapper applies it (`stty`) BEFORE it execs
 *   the program. A size applied later (Docker drops a resize sent before exec start, so the
 *   provider re-applies it after the marker) reaches an interactive bash as SIGWINCH while it
 *   prints its first prompt; readline then redraws the prompt without the OSC 133 marker, the
 *   prompt tail no longer matches, and terminal-bash's startup settles only by inferred idle
 *   (~3.5 s instead of ~0.1 s, on about half of the opens). Once set here, the later resize to
 *   the same size is a no-op for the kernel (no SIGWINCH). A missing `stty` is ignored.
 * @returns the script and its nonce.
 * @throws InvalidArgumentError for an empty argv, a relative cwd, NUL anywhere, or a script
 *   over {@link MAX_WRAPPER_BYTES}.
 */
export function buildStartWrapper(argv: readonly string[], cwd: string, env: Readonly<Record<string, string>>, size?: { rows: number; cols: number }): StartWrapper {
  const program = argv[0]
  if (program === undefined || program.length === 0) throw new InvalidArgumentError(EMPTY_PROGRAM_MESSAGE)
  if (!cwd.startsWith('/')) throw new InvalidArgumentError(`cwd must be an absolute path in the remote world: ${JSON.stringify(cwd)}`)
  const nonce = randomBytes(16).toString('hex')
  const path = env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
  const envWords = Object.entries(env).map(([name, value]) => shQuoteEnvEntry(name, value)).join(' ')
  const marker = markerCommand(nonce)
  const script = [
    ...preflightLines(program, cwd, path, marker),
    // `$1`, when set, is a saved `stty -g` state to restore first: a Docker standby hands its
    // PTY over in raw mode (docker/exec-pool/boot-scripts.ts). One `stty` does both where it
    // can (GNU coreutils); two where a saved state must stand alone.
    ...(size !== undefined && validSize(size.rows) && validSize(size.cols)
      ? [`stty \${1:+"$1"} rows ${size.rows} cols ${size.cols} 2>/dev/null || { stty "$1"; stty rows ${size.rows} cols ${size.cols}; } 2>/dev/null`]
      : ['[ -z "$1" ] || stty "$1" 2>/dev/null']),
    // The marker carries the start time with the pid (`pid:PID,STARTTIME`, field 22 of
    // /proc/$$/stat: the 20th after the last ") "; exec keeps it): a program that exits at once
    // is gone before the provider could stat it, and its identity must still fence teardown.
    // 0 when /proc is unreadable or the shell does not split (the provider then stats the pid).
    `_dshS=0 _dshL=; { IFS= read -r _dshL; } </proc/$$/stat 2>/dev/null; set -f; set -- \${_dshL##*') '}; set +f; [ $# -ge 20 ] && _dshS=\${20}`,
    `${marker('pid', '"$$,$_dshS"')}`,
    `exec env -i ${envWords} ${shQuoteArgv(argv)}`,
  ].join('\n')
  checkWrapperSize(script)
  return { script, nonce }
}

/**
 * A printf command that writes the boundary marker `\nDSHB<nonce>:KIND:TAIL\n` to stdout. The
 * marker text is assembled by printf at run time, so the nonce never appears as one run of bytes
 * in the script itself (a shell that echoed its command line could not forge it).
 * @param nonce - the wrapper's nonce.
 * @returns a function of the marker kind and its (already quoted/expanded) tail word.
 */
export function markerCommand(nonce: string): (kind: string, tail: string) => string {
  return (kind, tail) => `printf '\\n%s%s:${kind}:%s\\n' DSHB ${shQuote(nonce)} ${tail}`
}

/**
 * The wrapper's checks before anything starts, shared by the terminal and the process wrappers:
 * enter `cwd` (else the `cwd` marker and exit 97), and find `program` as an executable FILE
 * (else the `exe` marker and exit 127). A failure marker's tail is the errno number of the
 * failure ({@link BoundaryEvent} `errno`); a name searched in PATH and not found is ENOENT.
 * @param program - argv[0]; searched in `path` when it has no `/`.
 * @param cwd - absolute working directory.
 * @param path - the PATH the program will be searched in (the child's).
 * @param marker - see {@link markerCommand}.
 * @returns script lines.
 */
export function preflightLines(program: string, cwd: string, path: string, marker: (kind: string, tail: string) => string): string[] {
  const dir = shQuote(cwd, 'cwd')
  const file = shQuote(program)
  return [
    // The marker's tail is the errno chdir(2) would give (2 ENOENT, 20 ENOTDIR, 13 EACCES), the
    // code the local provider's spawn reports for the same cwd.
    `cd ${dir} 2>/dev/null || { if [ ! -e ${dir} ]; then _dshE=2; elif [ ! -d ${dir} ]; then _dshE=20; else _dshE=13; fi; ${marker('cwd', '"$_dshE"')}; exit ${WRAPPER_EXIT.cwd}; }`,
    program.includes('/')
      // Missing: ENOENT; present but not an executable file: EACCES, as execve(2) says.
      ? `[ -f ${file} ] && [ -x ${file} ] || { if [ -e ${file} ]; then _dshE=13; else _dshE=2; fi; ${marker('exe', '"$_dshE"')}; exit ${WRAPPER_EXIT.executable}; }`
      // Search PATH for an executable FILE, as env(1)'s execvp will. Not `command -v`: it also
      // reports shell builtins (echo, printf, kill, test...), so a name missing from PATH passed
      // the check and `env` then failed with 127 after the pid was published. Entries are cut
      // with parameter expansions (no IFS splitting, which zsh as an SSH login shell skips).
      : `_dshP=${shQuote(`${path}:`)} _dshX=1; while [ -n "$_dshP" ]; do _dshD=\${_dshP%%:*}; _dshP=\${_dshP#*:}; if [ -f "\${_dshD:-.}"/${shQuote(program)} ] && [ -x "\${_dshD:-.}"/${shQuote(program)} ]; then _dshX=0; break; fi; done
[ "$_dshX" = 0 ] || { ${marker('exe', '2')}; exit ${WRAPPER_EXIT.executable}; }`,
  ]
}

function validSize(value: number): boolean {
  return Number.isSafeInteger(value) && value > 0 && value <= 0xffff
}

/** What {@link BoundaryScanner.push} found. */
export type BoundaryEvent =
  | { kind: 'pending' }
  | { kind: 'started'; pid: number; rest: Buffer; extra?: number[]; exec?: true }
  /** `errno`: the Linux errno number the wrapper reported for a `cwd` or `exe` failure, when it did. */
  | { kind: 'failed'; reason: 'cwd' | 'exe' | 'tool'; preamble: string; errno?: number }

/**
 * The typed error of a wrapper's failure marker, with the errno name the wrapper reported as
 * its `code` (ENOENT when it reported none).
 * @param event - a `failed` event of {@link BoundaryScanner.push}.
 * @param program - argv[0] as requested; `cwd` the requested working directory; `where` names the world.
 */
export function startFailure(event: Extract<BoundaryEvent, { kind: 'failed' }>, program: string, cwd: string, where: string): RemoteWorldError {
  const errno = event.errno === undefined ? 'ENOENT' : START_ERRNO[event.errno] ?? 'ENOENT'
  if (event.reason === 'cwd') return new CwdNotFoundError(cwd, where, errno)
  if (event.reason === 'exe') return new ExecutableNotFoundError(program, where, errno === 'EACCES' ? 'EACCES' : 'ENOENT')
  return new SpawnFailedError(`cannot start a process in ${where}: \`setsid\` (util-linux or busybox) is not installed there`)
}

/**
 * Finds the wrapper's marker in the first bytes of terminal output. Everything up to and
 * including the marker line is dropped (the marker's leading newline only separates it from
 * whatever a login shell printed before); the bytes after it are the program's output.
 */
export class BoundaryScanner {
  private buffer: Buffer = Buffer.alloc(0)
  private readonly pattern: RegExp
  private readonly maxBytes: number

  /**
   * @param nonce - the wrapper's nonce.
   * @param maxBytes - how much pre-marker output to hold before giving up (bytes).
   */
  constructor(nonce: string, maxBytes = 1 << 20, options: { process?: boolean } = {}) {
    this.maxBytes = maxBytes
    // A `pid` marker may carry more numbers after the pid (`pid:PID,N,...`: start times, the
    // process wrapper's own pid). The process wrapper's extra kinds (options.process): `pidx`,
    // the wrapper became the program itself; `tool`, a missing helper.
    this.pattern = new RegExp(`DSHB${nonce}:(${options.process === true ? 'pidx|pid|cwd|exe|tool' : 'pid|cwd|exe'}):(\\d+(?:,\\d+)*|-)\\r?\\n`)
  }

  /**
   * Consume one chunk.
   * @throws InvalidArgumentError never; returns `failed` events for wrapper failures.
   * @throws RangeError when more than `maxBytes` arrive without a marker.
   */
  push(chunk: Buffer): BoundaryEvent {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk])
    // latin1 maps bytes 1:1, so string offsets are byte offsets.
    const text = this.buffer.toString('latin1')
    const match = this.pattern.exec(text)
    if (match === null) {
      if (this.buffer.length > this.maxBytes) throw new RangeError(`no start marker within ${this.maxBytes} bytes of terminal output`)
      return { kind: 'pending' }
    }
    const preamble = this.buffer.subarray(0, match.index).toString('utf8').trim()
    if (match[1] === 'pid' || match[1] === 'pidx') {
      const [pid, ...extra] = match[2]!.split(',').map(Number)
      const rest = this.buffer.subarray(match.index + match[0].length)
      const event: BoundaryEvent = extra.length > 0 ? { kind: 'started', pid: pid!, rest, extra } : { kind: 'started', pid: pid!, rest }
      // `pidx`: the wrapper became the program (process-wrapper.ts exec mode).
      return match[1] === 'pidx' ? { ...event, exec: true } : event
    }
    const reason = match[1] as 'cwd' | 'exe' | 'tool'
    return match[2] === '-' ? { kind: 'failed', reason, preamble } : { kind: 'failed', reason, preamble, errno: Number(match[2]) }
  }

  /** Bytes seen so far without a marker, for error messages. */
  get seen(): string {
    return this.buffer.toString('utf8')
  }
}
