/**
 * The POSIX sh programs of pre-started Docker execs, and the framing of the spec a spawn hands
 * them. Pure text: no transport here.
 *
 * Why: the engine's exec create + start costs ~48 ms here, and ~20 execs a second is all the
 * engine starts on 2 cores whatever the concurrency (measured: 59 ms sequential, 45-53 ms per
 * exec with 2, 4 or 8 in flight). An exec started BEFORE it is needed takes that off the
 * critical path; an exec that serves many processes takes it off the throughput too.
 *
 * - The **launcher** (a non-TTY exec) serves ordinary processes whose stdin is not attached, one
 *   after another. Per run it reads a spec, runs the process wrapper (remote/process-wrapper.ts)
 *   as `/bin/sh -c SCRIPT` with stdin on /dev/null, and relays the wrapper's stdout and stderr
 *   through one `cat` each to its own. A relay ends only when every holder of its FIFO closed
 *   it (the program and whatever it started), so when both relays ended no byte of this run can
 *   follow: the launcher then writes the run's end line `DSHX<frame>:<wrapper status>:` on each
 *   stream and reads the next spec. The frame nonce is the run's own, so program output never
 *   forges it. A run whose streams stay held (a daemon holding stdout) keeps the launcher busy;
 *   the client retires it then (pool.ts).
 *   Its last run may take its stdin (a frame nonce starting with `i`): the launcher's own stdin,
 *   past the spec, is then the program's, as a fresh exec's stdin would be (EOF when the client
 *   half-closes or its socket closes), the launcher's session tag is not passed on (a fresh exec
 *   has none), and the launcher then exits with the run's status, which ExecInspect reports as a
 *   fresh exec's. That run gets no end line: its streams end with the exec's, and its bytes
 *   pass unscanned, since a program that talks over its stdin may pause with a partial end line
 *   (a lone `D`) as the last byte written, which a scan would hold back.
 * - The **standby** (a TTY exec) serves one terminal. The engine's PTY starts in canonical mode
 *   with echo; the spec holds arbitrary bytes (an env value may hold ^C, which ISIG would turn
 *   into SIGINT, or ^? which ICANON would erase), so the standby saves the PTY's settings
 *   (`stty -g`), reads the spec in raw mode without echo, and `exec`s `/bin/sh -c SCRIPT`
 *   with the saved settings, which the terminal wrapper restores exactly before anything else
 *   runs. The wrapper is then the exec's own process, the session leader with the PTY as its
 *   controlling tty, exactly as a fresh exec's would be.
 *
 * Both announce `DSHL<nonce>:ready` once they can take a spec (after `stty`, so nothing the
 * client writes is echoed), or `DSHL<nonce>:refused:<tool>` when the world lacks `stty`, or
 * `cat`, `mktemp` or `mkfifo`, or a writable TMPDIR (the pool then uses fresh execs for that
 * kind in that world). Both read with the shell's `read` builtin, which reads a pipe or a tty
 * one byte at a time (dash, bash and busybox ash alike): it never consumes a byte past the spec.
 *
 * Neither outlives its client in a way that matters: the launcher reads its stdin, which the
 * engine closes when the attach socket closes (a dead client's socket included), so it reads
 * EOF and exits; a standby blocked in a TTY read does not see a closed socket (a TTY exec keeps
 * running, moby), so it carries a session tag (remote/ownership.ts) and the next client's
 * reaper ends it, as it ends the terminals of a dead client.
 * @module dsh-remote-worlds/providers/docker/exec-pool/boot-scripts
 */
import { SESSION_TAG_VARIABLE } from '../../remote/ownership.ts'

/** The readiness line's tag: `DSHL<nonce>:ready` or `DSHL<nonce>:refused:<tool>`. */
export const READY_TAG = 'DSHL'

/** The tag of a launcher run's end line, `DSHX<frame>:<status>:` (read with remote TrailerScanner). */
export const FRAME_TAG = 'DSHX'

/**
 * The launcher, run as `sh -c LAUNCHER_SCRIPT dsh-launcher NONCE`. fds 5 and 6 keep the exec's
 * stdout and stderr. Its two relays read FIFOs in a private directory (`mktemp -d`, removed at
 * its exit): a FIFO reader sees EOF once every writer closed it, which is the "every holder
 * closed the stream" fact a run's end needs, for two forks a run (a pipeline in a command
 * substitution, which could also carry the status, costs six). The wrapper runs in the
 * FOREGROUND (an asynchronous list of a shell without job control ignores SIGINT, which the
 * program would inherit); `wait` then waits for the two relays alone.
 */
export const LAUNCHER_SCRIPT = [
  'exec 5>&1 6>&2',
  `refuse() { printf '${READY_TAG}%s:refused:%s\\n' "$1" "$2"; exit 0; }`,
  'command -v cat >/dev/null 2>&1 || refuse "$1" cat',
  '_dshD=$(mktemp -d 2>/dev/null) || refuse "$1" mktemp',
  // The directory goes at EOF and at a TERM or HUP while idle (a reaper's); a SIGKILL, or a TERM
  // while a run holds the launcher, leaves its two empty FIFOs.
  `trap 'rm -rf "$_dshD"' EXIT`,
  "trap 'exit 143' TERM HUP",
  'mkfifo "$_dshD/o" "$_dshD/e" 2>/dev/null || refuse "$1" mkfifo',
  `printf '${READY_TAG}%s:ready\\n' "$1"`,
  'while IFS= read -r _dshN && IFS= read -r _dshF; do',
  "  case $_dshN in ''|0|*[!0-9]*) exit 0 ;; esac",
  '  _dshS= _dshI=0',
  '  while [ "$_dshI" -lt "$_dshN" ] && IFS= read -r _dshL; do _dshS="$_dshS$_dshL',
  '"; _dshI=$((_dshI + 1)); done',
  '  cat <"$_dshD/o" >&5 5>&- 6>&- &',
  '  cat <"$_dshD/e" >&6 5>&- 6>&- &',
  '  case $_dshF in',
  `    i*) (unset ${SESSION_TAG_VARIABLE}; exec /bin/sh -c "$_dshS") >"$_dshD/o" 2>"$_dshD/e" 5>&- 6>&- ;;`,
  '    *) /bin/sh -c "$_dshS" >"$_dshD/o" 2>"$_dshD/e" 5>&- 6>&- </dev/null ;;',
  '  esac',
  '  _dshT=$?',
  '  wait',
  '  case $_dshF in i*) exit "$_dshT" ;; esac',
  `  printf '${FRAME_TAG}%s:%s:\\n' "$_dshF" "$_dshT"`,
  `  printf '${FRAME_TAG}%s:%s:\\n' "$_dshF" "$_dshT" >&2`,
  'done',
].join('\n')

/**
 * The standby, run as `sh -c STANDBY_SCRIPT dsh-standby NONCE` in a TTY exec. A spec of `0`
 * lines (or EOF) ends it, with the PTY's settings restored. The terminal wrapper is run with the
 * saved settings as `$1`: it restores them in the same `stty` that sets the window size
 * (remote/boundary.ts), one process start instead of two.
 */
export const STANDBY_SCRIPT = [
  `_dshG=$(stty -g 2>/dev/null) && stty raw -echo 2>/dev/null || { printf '${READY_TAG}%s:refused:stty\\n' "$1"; exit 0; }`,
  `printf '${READY_TAG}%s:ready\\n' "$1"`,
  'IFS= read -r _dshN || exit 0',
  `case $_dshN in ''|0|*[!0-9]*) stty "$_dshG"; exit 0 ;; esac`,
  '_dshS= _dshI=0',
  'while [ "$_dshI" -lt "$_dshN" ] && IFS= read -r _dshL; do _dshS="$_dshS$_dshL',
  '"; _dshI=$((_dshI + 1)); done',
  'exec /bin/sh -c "$_dshS" dsh-terminal "$_dshG"',
].join('\n')

/**
 * The bytes that hand `script` to a launcher (`frame` set) or a standby (no frame): its line
 * count, the launcher's frame nonce, then the script's lines. Each line is read back with
 * `read -r`, so every byte but NUL survives (the wrappers reject NUL).
 * @param script - the wrapper, as it would be passed to `sh -c`.
 * @param frame - the run's frame nonce (hex), for a launcher.
 */
export function specBytes(script: string, frame?: string): Buffer {
  const lines = script.split('\n').length
  return Buffer.from(`${lines}\n${frame === undefined ? '' : `${frame}\n`}${script}\n`, 'utf8')
}

/** The bytes that end an idle standby (a spec of zero lines). */
export const STANDBY_QUIT = Buffer.from('0\n', 'latin1')
