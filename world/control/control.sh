# dsh-remote-worlds control program (POSIX sh). Sent over the stdin of one persistent non-PTY
# process per (world, uid); nothing is written to the remote disk. Every /proc read is a shell
# builtin `read` with a redirection, so a probe forks nothing; dd/od run only to read a
# select/poll fd set.
#
# Started by the client as `sh -s` on a non-PTY exec (Docker) or `/bin/sh -s` on an exec channel
# (SSH), which then writes this text and its requests to the same stdin. The wire is lines:
# first this program's `READY UID ARCH PID HOME-HEX`, then for each request `ID OP ARGS...` one
# reply `ID ok ...` or `ID WORD ...` (gone, none, refused, err WHY), answered in order (the loop
# below names every OP).
# It is not built or copied into the world: the package ships the text (dist/world/control/),
# and its version is that text. The client half: src/providers/remote/control-channel.ts
# (requests, replies, and the /proc facts the replies rely on).
exec 2>/dev/null
# Byte semantics for every parser below (and printf "'C" in readset), whatever the world's locale.
LC_ALL=C; export LC_ALL
# System call numbers that can mean "waiting for terminal input", per architecture.
# Sources: arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/unistd.h
# (aarch64 has no plain select, poll or epoll_wait).
case $(uname -m) in
  x86_64|amd64) ARCH=x86_64 SYS_READ=0 SYS_SELECT=23 SYS_PSELECT=270 SYS_POLL=7 SYS_PPOLL=271 SYS_EPWAIT=232 SYS_EPPWAIT=281 ;;
  aarch64|arm64) ARCH=aarch64 SYS_READ=63 SYS_SELECT=none SYS_PSELECT=72 SYS_POLL=none SYS_PPOLL=73 SYS_EPWAIT=none SYS_EPPWAIT=22 ;;
  *) ARCH=unknown SYS_READ=none SYS_SELECT=none SYS_PSELECT=none SYS_POLL=none SYS_PPOLL=none SYS_EPWAIT=none SYS_EPPWAIT=none ;;
esac

# st FILE: parse a /proc/PID/stat file into S_STATE S_PPID S_PGRP S_SID S_TTY S_TPGID S_START.
# comm (field 2) may hold spaces, ") " and newlines: fields 3.. start after the LAST ") ", and a
# first line with too few fields after it means comm held a newline, so the file is read whole.
st() {
  _f=$1 _l=
  { IFS= read -r _l; } < "$_f" || [ -n "$_l" ] || return 1
  _r=${_l##*') '}
  set -f; set -- $_r; set +f
  if [ $# -lt 20 ]; then
    _l=
    while IFS= read -r _x || [ -n "$_x" ]; do _l="$_l$_x "; _x=; done < "$_f"
    _r=${_l##*') '}
    set -f; set -- $_r; set +f
    [ $# -ge 20 ] || return 1
  fi
  S_STATE=$1 S_PPID=$2 S_PGRP=$3 S_SID=$4 S_TTY=$5 S_TPGID=$6
  shift 19
  S_START=$1
}

# live PID START: the process with this identity (pid, starttime) exists and is not a zombie.
live() {
  st "/proc/$1/stat" || return 1
  [ "$S_START" = "$2" ] || return 1
  case $S_STATE in Z|X|x) return 1 ;; esac
}

# memb PID OFFSET LEN: LEN bytes of the process's memory at OFFSET, as unsigned decimals.
memb() {
  dd if="/proc/$1/mem" bs="$3" count=1 skip="$2" iflag=skip_bytes | od -An -v -tu1
}

# readset PID: _fds becomes the fds that the blocked select/pselect6 or poll/ppoll call in
# _n _a0 _a1 (set by waits) waits to read, read from /proc/PID/mem (the only step that forks).
readset() {
  _fds= _rp=$1 _v=0
  if [ "$_n" = "$SYS_SELECT" ] || [ "$_n" = "$SYS_PSELECT" ]; then
    # select(nfds, readfds, ...): bit B of byte I of readfds is fd 8*I+B (at most 1024 fds).
    _c=$((_a0))
    [ "$_c" -ge 1 ] && [ $((_a1)) -ne 0 ] || return 0
    [ "$_c" -gt 1024 ] && _c=1024
    if [ "$_c" -le 8 ]; then
      # One raw byte via one dd (no od pipeline: a fork costs ~1 ms in a container). printf "'C"
      # is the byte's value (LC_ALL=C). A NUL or newline byte is dropped by the command
      # substitution, and a failed read is empty too: those read as 0 and take the od path.
      _b=$(dd if="/proc/$_rp/mem" bs=1 count=1 skip=$((_a1)) iflag=skip_bytes)
      _v=$(printf '%d' "'$_b")
    fi
    set -f
    if [ "$_v" -ne 0 ]; then set -- "$_v"; else set -- $(memb "$_rp" $((_a1)) $(((_c + 7) / 8))); fi
    set +f
    _i=0
    for _x in "$@"; do
      _bit=0
      while [ "$_x" -gt 0 ]; do
        [ $((_x % 2)) -eq 1 ] && _fds="$_fds $((_i * 8 + _bit))"
        _x=$((_x / 2)) _bit=$((_bit + 1))
      done
      _i=$((_i + 1))
    done
    return 0
  fi
  # poll(fds, nfds, ...): struct pollfd { int fd; short events; short revents; } (little-endian:
  # x86_64 and aarch64); POLLIN = 1; a negative fd is ignored by the kernel (at most 64 entries).
  _c=$((_a1))
  [ "$_c" -ge 1 ] && [ $((_a0)) -ne 0 ] || return 0
  [ "$_c" -gt 64 ] && _c=64
  set -f; set -- $(memb "$_rp" $((_a0)) $((_c * 8))); set +f
  while [ $# -ge 8 ]; do
    [ "$4" -lt 128 ] && [ $(($5 % 2)) -eq 1 ] && _fds="$_fds $(($1 + $2 * 256 + $3 * 65536 + $4 * 16777216))"
    shift 8
  done
}

# isterm PID FD: PID's fd FD is this session's terminal: the same file as the shell's fd 0 (the
# pty; `test -ef`, no fork), or /dev/tty as PID's own root sees it (a sandbox may mount another
# /dev) while PID's controlling tty (_ctty, stat field 7) is the shell's (_sttynr). A pipe, a
# socket or another tty never is. Sources: proc(5) for /proc/PID/fd and /proc/PID/root; tty(4):
# /dev/tty is the controlling terminal of the process that opens it.
isterm() {
  [ "/proc/$1/fd/$2" -ef "$_tty" ] && return 0
  [ "$_sttynr" != 0 ] && [ "$_ctty" = "$_sttynr" ] && [ "/proc/$1/fd/$2" -ef "/proc/$1/root/dev/tty" ]
}

# anyterm PID FD...: one of the fds is the session's terminal.
anyterm() {
  _ap=$1; shift
  for _x in "$@"; do isterm "$_ap" "$_x" && return 0; done
  return 1
}

# Memo of readset+anyterm answers per thread, so repeated probes of the SAME blocked call fork nothing
# (an idle bash or python prompt sits in pselect6 between probes). A call is the same while the
# thread has not run since the answer was computed: its syscall line (number, arguments, stack
# and instruction pointers) and its schedstat (cpu ns, wait ns, timeslices) are unchanged; a
# thread that left the call and entered another must have run, which changes schedstat. The
# kernel copied the fd set at entry, so the memory read cannot become truer by repeating it.
# Without a readable, live schedstat nothing is memoised. Bounded: cleared past 256 threads.
_MN=0 _ML=
memo() { # memo TASKDIR KEY -> sets _MK; returns 0 with _M set on a hit
  _MK= _M=
  _mt=${1##*/}
  case $_mt in ''|*[!0-9]*) return 1 ;; esac
  _ss=
  { read -r _ss; } < "$1/schedstat" || [ -n "$_ss" ] || return 1
  # A kernel without sched_info prints "0 0 0" forever: useless as a fence, so no memo.
  case $_ss in 0\ *|*\ 0|*[!0-9\ ]*) return 1 ;; esac
  _MK="$2 $_ss"
  eval "_mk=\${_MK_$_mt-} _mv=\${_MV_$_mt-}"
  [ "$_mk" = "$_MK" ] || return 1
  _M=$_mv
}
remember() { # remember TASKDIR RESULT: store _MK -> RESULT for this thread
  [ -n "$_MK" ] || return 0
  _mt=${1##*/}
  if [ "$_MN" -ge 256 ]; then
    for _x in $_ML; do unset "_MK_$_x" "_MV_$_x"; done
    _MN=0 _ML=
  fi
  eval "_mk=\${_MK_$_mt-}"
  [ -n "$_mk" ] || { _MN=$((_MN + 1)); _ML="$_ML $_mt"; }
  eval "_MK_$_mt=\$_MK _MV_$_mt=\$2"
}

# waits PID: some thread of PID is blocked reading this session's terminal (isterm): in read(FD),
# or in select/pselect6, poll/ppoll or epoll_wait/epoll_pwait with such an fd among what it waits
# to read. Sets _wtok to that thread's wait (TID:NR:A0:A1:RUNS, RUNS being its count of times
# scheduled, schedstat field 3, or 0 without sched_info): a blocked thread does not run, so a
# different value on a later probe means it left its wait and entered one again in between. Pagers, password prompts and editors read /dev/tty on fd 3 and
# up; a pipeline stage reading a PIPE (`make | sort`) waits for its producer, not for the user,
# so it never counts. Unreadable means no. Needs _tty, _sttynr (fgwait) and _ctty (st of PID).
waits() {
  _wp=$1 _wtok=
  for _t in /proc/$_wp/task/*; do
    _n= _a0= _a1= _rest=
    { read -r _n _a0 _a1 _rest; } < "$_t/syscall" || [ -n "$_n" ] || continue
    case $_n in ''|running|-*) continue ;; esac
    _s3=0
    { read -r _s1 _s2 _s3; } < "$_t/schedstat"
    _wtok="${_t##*/}:$_n:$_a0:$_a1:${_s3:-0}"
    if [ "$_n" = "$SYS_READ" ]; then
      isterm "$_wp" $((_a0)) && return 0
    elif [ "$_n" = "$SYS_SELECT" ] || [ "$_n" = "$SYS_PSELECT" ] || [ "$_n" = "$SYS_POLL" ] || [ "$_n" = "$SYS_PPOLL" ]; then
      if memo "$_t" "$_n $_a0 $_a1 $_rest"; then
        [ "$_M" = 1 ] && return 0
        continue
      fi
      readset "$_wp"
      set -f
      # shellcheck disable=SC2086
      if anyterm "$_wp" $_fds; then set +f; remember "$_t" 1; return 0; fi
      set +f
      remember "$_t" 0
    elif [ "$_n" = "$SYS_EPWAIT" ] || [ "$_n" = "$SYS_EPPWAIT" ]; then
      # epoll_wait(epfd, ...): the epoll instance's fdinfo lists one "tfd: FD events: HEX" line
      # per watched fd (proc(5)); EPOLLIN = 1.
      while read -r _k _v _e _ev _rest; do
        [ "$_k" = tfd: ] && [ "$_e" = events: ] && [ $((0x$_ev % 2)) -eq 1 ] && isterm "$_wp" "$_v" && return 0
      done < "/proc/$_wp/fdinfo/$((_a0))"
    fi
  done
  _wtok=
  return 1
}

# fgwait SHELL TPGID TTYNR: a member of process group TPGID waits reading the session's terminal
# (waits), TTYNR being the shell's controlling tty (stat field 7). Checks the group leader, then
# walks the shell's descendants through the task children files (bounded).
fgwait() {
  _g=$2 _tty=/proc/$1/fd/0 _sttynr=$3
  if st "/proc/$_g/stat" && [ "$S_PGRP" = "$_g" ] && _ctty=$S_TTY && waits "$_g"; then return 0; fi
  _q="$1 " _seen=0
  while [ -n "$_q" ] && [ "$_seen" -lt 1024 ]; do
    _p=${_q%%' '*}; _q=${_q#*' '}
    [ -n "$_p" ] || continue
    _seen=$((_seen + 1))
    if [ "$_p" != "$_g" ] && st "/proc/$_p/stat" && [ "$S_PGRP" = "$_g" ] && _ctty=$S_TTY && waits "$_p"; then return 0; fi
    for _cf in /proc/$_p/task/*/children; do
      _k=
      { read -r _k; } < "$_cf" || [ -n "$_k" ] || continue
      _q="$_q$_k "
    done
  done
  return 1
}

# ignterm PID: SIGTERM (bit 14 of the SigIgn mask in /proc/PID/status) is ignored.
ignterm() {
  while read -r _k _v; do
    if [ "$_k" = SigIgn: ]; then [ $((0x$_v & 16384)) -ne 0 ]; return; fi
  done < "/proc/$1/status"
  return 1
}

# The session-ownership registry (ownership.ts): one empty file CLIENT.PID.START per live control
# program of a client, in a directory private to this uid. A file whose program (PID, START) is
# gone says that client's channel to this world is gone. Like tmux's /tmp/tmux-UID, the
# directory is trusted only when it is ours and not a symlink: another user may have made it
# first, and then nothing is registered (ownership.ts treats unregistered tags as foreign).
owndir() {
  _od=/tmp/dsh-remote-owners-$_uid
  [ -d "$_od" ] || mkdir -m 700 "$_od" 2>/dev/null
  [ -d "$_od" ] && [ ! -L "$_od" ] && [ -O "$_od" ]
}

# hex: stdin as lower-case hex digits, nothing else (any byte survives the line protocol).
hex() { od -An -v -tx1 | tr -d ' \n'; }

_uid=$(id -u) _owned= _me=0
st "/proc/$$/stat" && _me=$S_START
# HOME as hex, so any byte survives the line protocol; "-" when unset or empty.
_home=$(printf '%s' "$HOME" | hex)
# The ready line and the request loop form ONE brace group, parsed whole before any of it runs:
# the shell reads its program from the same stdin as the requests, in buffered chunks, so a
# request sent the moment READY appears could otherwise be swallowed as program text by a parse
# still in progress (seen over SSH, where the program arrives in several packets).
{
echo "READY $_uid $ARCH $$ ${_home:--}"
while IFS= read -r _req; do
  set -f; set -- $_req; set +f
  _id=$1 _op=$2
  if [ $# -lt 2 ]; then echo "$_id err bad-request"; continue; fi
  shift 2
  case $_op in
    ping) echo "$_id ok pong" ;;
    environ)
      # environ -> ok HEX: this program's initial environment (NUL-separated NAME=VALUE, as hex),
      # i.e. what the remote world's login gives a process; one od+tr fork, asked once per channel.
      echo "$_id ok $(hex < /proc/$$/environ)" ;;
    quit)
      # Only a client that ends on purpose (its sessions torn down) unregisters. EOF, which is
      # also how a dead client's channel ends, leaves the file for the next reaper to judge.
      [ -z "$_owned" ] || rm -f -- "$_owned"
      exit 0 ;;
    stat)
      if st "/proc/$1/stat"; then echo "$_id ok $S_STATE $S_PPID $S_PGRP $S_SID $S_TTY $S_TPGID $S_START"
      else echo "$_id gone"; fi ;;
    cmdline)
      # cmdline PID START -> ok HEX | gone: the process's argv (NUL-terminated arguments) as hex
      # (one od and one tr fork; asked only while a wrapped program starts).
      if live "$1" "$2"; then echo "$_id ok $(hex < "/proc/$1/cmdline")"; else echo "$_id gone"; fi ;;
    statfile)
      # statfile PATH: parse any file as a stat line (pins the parser on hostile comm names).
      if st "$1"; then echo "$_id ok $S_STATE $S_PPID $S_PGRP $S_SID $S_TTY $S_TPGID $S_START"
      else echo "$_id gone"; fi ;;
    fg)
      # fg PID START -> ok TPGID SHELL_PGRP WAITING(1|0) CALL | gone; CALL is the blocked call
      # of the waiting thread (TID:NR:A0:A1), "-" when not waiting.
      if live "$1" "$2"; then
        _tp=$S_TPGID _sp=$S_PGRP
        if [ "$_tp" -gt 0 ] && fgwait "$1" "$_tp" "$S_TTY"; then echo "$_id ok $_tp $_sp 1 $_wtok"; else echo "$_id ok $_tp $_sp 0 -"; fi
      else echo "$_id gone"; fi ;;
    sigfg)
      # sigfg PID START SIG -> ok TPGID | refused TPGID | err TPGID | gone
      if live "$1" "$2"; then
        _tp=$S_TPGID
        if [ "$_tp" -le 0 ]; then echo "$_id err -1"
        elif [ "$3" = KILL ] && [ "$_tp" = "$S_PGRP" ]; then echo "$_id refused $_tp"
        elif kill -s "$3" -- "-$_tp"; then echo "$_id ok $_tp"
        else echo "$_id err $_tp"; fi
      else echo "$_id gone"; fi ;;
    ps)
      # ps -> ok PID,PPID,PGRP,SID,STATE,START ...
      _o=
      for _d in /proc/[0-9]*; do
        st "$_d/stat" && _o="$_o ${_d#/proc/},$S_PPID,$S_PGRP,$S_SID,$S_STATE,$S_START"
      done
      echo "$_id ok$_o" ;;
    own)
      # own CLIENT -> ok | err dir | err write: register this program as a live channel of CLIENT.
      if ! owndir; then echo "$_id err dir"
      elif : > "$_od/$1.$$.$_me"; then _owned="$_od/$1.$$.$_me"; echo "$_id ok"
      else echo "$_id err write"; fi 2>/dev/null ;;
    owners)
      # owners -> ok CLIENT:PID:START:LIVE ...: every registration, LIVE 1 while its program runs.
      _o=
      if owndir; then
        for _f in "$_od"/*.*.*; do
          [ -f "$_f" ] || continue
          _b=${_f##*/}; _c=${_b%%.*}; _r=${_b#*.}; _p=${_r%%.*}; _s=${_r#*.}
          if live "$_p" "$_s"; then _l=1; else _l=0; fi
          _o="$_o $_c:$_p:$_s:$_l"
        done
      fi
      echo "$_id ok$_o" ;;
    unown)
      # unown CLIENT:PID:START ... -> ok: remove registrations whose program is gone (never a live one).
      if owndir; then
        for _m in "$@"; do
          _c=${_m%%:*}; _r=${_m#*:}; _p=${_r%%:*}; _s=${_r#*:}
          live "$_p" "$_s" || set -- "$@" "$_od/$_c.$_p.$_s"
          shift
        done
        [ $# -eq 0 ] || rm -f -- "$@" </dev/null
      fi
      echo "$_id ok" ;;
    tags)
      # tags -> ok PID:START:VALUE ...: our live processes whose environment holds
      # DSH_REMOTE_SESSION (one grep and one tr; values are checked by the caller).
      _t=$(grep -a -s -z -H '^DSH_REMOTE_SESSION=' /proc/[0-9]*/environ </dev/null | tr '\0' '\n')
      _o=
      set -f
      for _l in $_t; do
        case $_l in /proc/*/environ:DSH_REMOTE_SESSION=*) ;; *) continue ;; esac
        _p=${_l#/proc/}; _p=${_p%%/*}; _v=${_l#*=}
        [ -O "/proc/$_p" ] && st "/proc/$_p/stat" || continue
        case $S_STATE in Z|X|x) continue ;; esac
        _o="$_o $_p:$S_START:$_v"
      done
      set +f
      echo "$_id ok$_o" ;;
    kill)
      # kill SIG PID:START... -> ok PID:s|g|e ... (signalled, gone, error)
      _sig=$1; shift; _o=
      for _m in "$@"; do
        _p=${_m%%:*}
        if live "$_p" "${_m#*:}"; then
          if kill -s "$_sig" "$_p"; then _o="$_o $_p:s"; else _o="$_o $_p:e"; fi
        else _o="$_o $_p:g"; fi
      done
      echo "$_id ok$_o" ;;
    ignterm)
      # ignterm PID:START... -> ok PID:1|0 ... (1: alive and ignores SIGTERM)
      _o=
      for _m in "$@"; do
        _p=${_m%%:*}
        if live "$_p" "${_m#*:}" && ignterm "$_p"; then _o="$_o $_p:1"; else _o="$_o $_p:0"; fi
      done
      echo "$_id ok$_o" ;;
    which|trusted)
      # which N, then N raw lines (candidate paths) -> ok INDEX | none: the first candidate that
      # is a regular file we may execute (builtin test only, no fork). `trusted` also wants the
      # file and its directory not writable by this user: what runs outside a fence must be
      # nothing a confined program of this user could have planted.
      _n=$1 _i=0 _hit=
      while [ "$_i" -lt "$_n" ]; do
        IFS= read -r _l || break
        if [ -z "$_hit" ] && [ -f "$_l" ] && [ -x "$_l" ] && { [ "$_op" = which ] || { [ ! -w "$_l" ] && [ ! -w "${_l%/*}/" ]; }; }; then _hit=$_i; fi
        _i=$((_i + 1))
      done
      if [ -n "$_hit" ]; then echo "$_id ok $_hit"; else echo "$_id none"; fi ;;
    tool)
      # tool NAME SHA256 N, then N raw lines (cache directories) -> ok INDEX | none: the first
      # directory DIR holding a copy of a world tool at DIR/SHA256/NAME (world-tools/install.ts)
      # that is the build this client shipped and runs. The copy, DIR/SHA256 and DIR must be this
      # user's, no symlinks, writable by nobody else (find -perm /022); the copy is opened once,
      # hashed through that open file (sha256sum <&3) and only then run, as that same file
      # (/proc/self/fd/3, as launch.ts starts it): `--version`, against a setup script's exec
      # per client. Nothing unverified runs: a planted file is skipped, and the caller copies
      # anew over it. A copy whose `--version` does not answer within 2 s is killed and skipped
      # (timeout(1) of coreutils or busybox, where the world has one): it never holds this
      # channel up. Three forks a directory that holds a copy (find, sha256sum, the copy).
      _n=$3 _i=0 _hit= _bound=
      command -v timeout >/dev/null 2>&1 && _bound="timeout -s KILL 2"
      command -v sha256sum >/dev/null 2>&1 || _n=0
      while [ "$_i" -lt "$_n" ]; do
        IFS= read -r _l || break
        _f="$_l/$2/$1"
        if [ -z "$_hit" ] && [ -f "$_f" ] && [ ! -L "$_f" ] && [ -O "$_f" ] && [ -O "$_l" ] && [ ! -L "$_l" ] && [ -O "$_l/$2" ] && [ ! -L "$_l/$2" ] \
          && [ -z "$(cd / && find "$_l" "$_l/$2" "$_f" -maxdepth 0 -perm /022 2>&1 </dev/null)" ] \
          && ( exec 3<"$_f" && _h=$(sha256sum <&3 2>/dev/null) && [ "${_h%% *}" = "$2" ] && if [ -e /proc/self/fd/3 ]; then exec $_bound /proc/self/fd/3 --version; else exec $_bound "$_f" --version; fi ) >/dev/null 2>&1 </dev/null; then _hit=$_i; fi
        _i=$((_i + 1))
      done
      # The rest of the N lines, when sha256sum is missing (nothing can be verified).
      while [ "$_i" -lt "$3" ]; do IFS= read -r _l || break; _i=$((_i + 1)); done
      if [ -n "$_hit" ]; then echo "$_id ok $_hit"; else echo "$_id none"; fi ;;
    mkprivate|rmtree)
      # mkprivate N / rmtree N, then N raw lines (absolute paths) -> ok | err: create each
      # directory with mode 0700 (the last component must not exist: never adopt a directory
      # someone else made), or remove each path recursively (one mkdir/rm fork).
      _n=$1 _i=0
      set --
      while [ "$_i" -lt "$_n" ]; do IFS= read -r _l || break; set -- "$@" "$_l"; _i=$((_i + 1)); done
      if [ "$_op" = mkprivate ]; then mkdir -m 700 -- "$@"; else rm -rf -- "$@"; fi </dev/null
      if [ $? -eq 0 ]; then echo "$_id ok"; else echo "$_id err"; fi ;;
    facts)
      # facts -> ok PASSWD HOME LOCALES (asked once per channel; a few forks):
      # PASSWD 1 when this uid has a passwd entry (getent, else /etc/passwd), 0 when not;
      # HOME (hex): for a uid WITHOUT an entry (a numeric `docker exec --user`, whose HOME the
      # engine sets to /), the private directory /tmp/dsh-remote-home-UID, made (or set) 0700 and
      # trusted only when it is ours and not a symlink, as owndir; "!" then its hex when that path
      # is unusable (another user's, a symlink, not a directory); "-" for a uid with an entry;
      # LOCALES: `locale -a`, comma-separated; "-" when the world cannot say.
      _pw=0
      if command -v getent >/dev/null; then getent passwd "$_uid" >/dev/null && _pw=1
      else while IFS=: read -r _k _x _u _rest; do [ "$_u" = "$_uid" ] && _pw=1; done < /etc/passwd; fi
      _ph=-
      if [ "$_pw" = 0 ]; then
        _d=/tmp/dsh-remote-home-$_uid
        [ -d "$_d" ] || mkdir -m 700 "$_d"
        _ph=$(printf '%s' "$_d" | hex)
        if [ -d "$_d" ] && [ ! -L "$_d" ] && [ -O "$_d" ] && chmod 700 "$_d" && [ -w "$_d" ]; then :; else _ph="!$_ph"; fi
      fi
      _lc=$(locale -a </dev/null | tr '\n' ',')
      _lc=${_lc%,}
      echo "$_id ok $_pw $_ph ${_lc:--}" ;;
    cgroup)
      # cgroup -> ok HEX HEX: this program's /proc/PID/cgroup, and the lines of its
      # /proc/PID/mountinfo whose filesystem is cgroup or cgroup2 (proc(5)), each as hex ("-"
      # when empty). The shells of this (world, uid) run in the same container or login
      # session, so these locate their cgroup too (cgroup.ts). Two od+tr forks, asked once per
      # channel.
      _a=$(hex < "/proc/$$/cgroup")
      _b=$(while IFS= read -r _l; do case $_l in *' - cgroup '*|*' - cgroup2 '*) printf '%s\n' "$_l" ;; esac; done < "/proc/$$/mountinfo" | hex)
      echo "$_id ok ${_a:--} ${_b:--}" ;;
    counters)
      # counters N, then N raw lines (paths of small cgroup files) -> ok FIELD...: per file, its
      # lines joined by "," with each line's words joined by ":" (memory.events "oom_kill 2"
      # -> "...,oom_kill:2"; memory.max "max" -> "max"), "-" when unreadable or empty. At most 32
      # lines a file. Builtin test and read only: asked at every send's start and settlement,
      # so no fork.
      _n=$1 _i=0 _o=
      while [ "$_i" -lt "$_n" ]; do
        IFS= read -r _l || break
        _i=$((_i + 1)) _f= _c=0
        if [ -r "$_l" ]; then
          while [ "$_c" -lt 32 ] && { read -r _k _v _x || [ -n "$_k" ]; }; do
            _c=$((_c + 1))
            [ -n "$_k" ] && _f="$_f${_f:+,}$_k${_v:+:$_v}"
            _k= _v=
          done < "$_l"
        fi
        _o="$_o ${_f:--}"
      done
      echo "$_id ok$_o" ;;
    ident)
      # ident -> ok BOOTID PIDNS INITSTART: the boot id (proc(5): /proc/sys/kernel/random/boot_id),
      # the inode of this program's pid namespace (namespaces(7)) and the start time of its pid 1.
      # Another boot id is a rebooted host; another pid namespace or pid 1, a restarted container
      # (a namespace's inode number may be given again once the old one is freed: pid 1's start
      # time, clock ticks since boot, is not). One ls fork.
      _b=- _i=-
      { read -r _b; } < /proc/sys/kernel/random/boot_id
      st /proc/1/stat && _i=$S_START
      set -f; set -- $(ls -Li "/proc/$$/ns/pid" </dev/null); set +f
      echo "$_id ok ${_b:--} ${1:--} $_i" ;;
    held)
      # held DIR -> ok META...: each held shell's description (DIR/ID.meta, written by dsh-pty
      # hold.c: one line of NAME=VALUE words), as id=ID and its words, commas between; nothing
      # when DIR is not this uid's own directory (a symlink, another user's). Builtins only.
      _o=
      if [ -d "$1" ] && [ ! -L "$1" ] && [ -O "$1" ]; then
        for _f in "$1"/*.meta; do
          [ -f "$_f" ] && [ ! -L "$_f" ] || continue
          _l=
          { IFS= read -r _l; } < "$_f"
          set -f; set -- $_l; set +f
          _b=${_f##*/}
          _j="id=${_b%.meta}"
          for _w in "$@"; do _j="$_j,$_w"; done
          [ $# -gt 0 ] && _o="$_o $_j"
        done
      fi
      echo "$_id ok$_o" ;;
    *) echo "$_id err unknown-op" ;;
  esac
done
}
