# dsh-remote-worlds control program (POSIX sh). Sent over the stdin of one persistent non-PTY
# process per (world, uid); nothing is written to the remote disk. See control-channel.ts for
# the protocol and the /proc facts it relies on. Every /proc read is a shell builtin `read`
# with a redirection, so a probe forks nothing; dd/od run only to read a select/poll fd set.
exec 2>/dev/null
# Byte semantics for every parser below (and printf "'C" in memw), whatever the world's locale.
LC_ALL=C; export LC_ALL
# System call numbers that can mean "waiting for terminal input on fd 0", per architecture.
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

# memw PID: the blocked select/pselect6 or poll/ppoll call in _n _a0 _a1 (set by waits) includes
# fd 0 in what it waits to read. Reads the fd set from /proc/PID/mem (the only step that forks).
memw() {
  if [ "$_n" = "$SYS_SELECT" ] || [ "$_n" = "$SYS_PSELECT" ]; then
    # select(nfds, readfds, ...): bit 0 of the first byte of readfds is fd 0. One raw byte via
    # one dd (no od pipeline: a fork costs ~1 ms in a container). printf "'C" is the byte's value
    # (LC_ALL=C); a NUL or newline byte is dropped by the command substitution and reads as 0,
    # which is even like both of them; a failed read is empty too, so never true.
    [ $((_a0)) -ge 1 ] && [ $((_a1)) -ne 0 ] || return 1
    _b=$(dd if="/proc/$1/mem" bs=1 count=1 skip=$((_a1)) iflag=skip_bytes)
    [ $(($(printf '%d' "'$_b") % 2)) -eq 1 ]
    return
  fi
  # poll(fds, nfds, ...): struct pollfd { int fd; short events; short revents; }, POLLIN = 1.
  _c=$((_a1))
  [ "$_c" -ge 1 ] && [ $((_a0)) -ne 0 ] || return 1
  [ "$_c" -gt 64 ] && _c=64
  set -f; set -- $(memb "$1" $((_a0)) $((_c * 8))); set +f
  while [ $# -ge 8 ]; do
    [ "$1$2$3$4" = 0000 ] && [ $(($5 % 2)) -eq 1 ] && return 0
    shift 8
  done
  return 1
}

# Memo of memw answers per thread, so repeated probes of the SAME blocked call fork nothing
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

# waits PID TTY: PID's fd 0 is the terminal TTY (same file: `test -ef`, no fork) and some thread
# of PID is blocked in read(0), or in select/pselect6, poll/ppoll or epoll_wait/epoll_pwait with
# fd 0 among what it waits for. A pipeline stage reading a PIPE on fd 0 (`make | sort`) waits
# for its producer, not for the user, so it never counts. Unreadable means no.
waits() {
  _wp=$1
  [ "/proc/$_wp/fd/0" -ef "$2" ] || return 1
  for _t in /proc/$_wp/task/*; do
    _n= _a0= _a1= _rest=
    { read -r _n _a0 _a1 _rest; } < "$_t/syscall" || [ -n "$_n" ] || continue
    case $_n in ''|running|-*) continue ;; esac
    if [ "$_n" = "$SYS_READ" ]; then
      [ $((_a0)) -eq 0 ] && return 0
    elif [ "$_n" = "$SYS_SELECT" ] || [ "$_n" = "$SYS_PSELECT" ] || [ "$_n" = "$SYS_POLL" ] || [ "$_n" = "$SYS_PPOLL" ]; then
      if memo "$_t" "$_n $_a0 $_a1 $_rest"; then
        [ "$_M" = 1 ] && return 0
        continue
      fi
      if memw "$_wp"; then remember "$_t" 1; return 0; fi
      remember "$_t" 0
    elif [ "$_n" = "$SYS_EPWAIT" ] || [ "$_n" = "$SYS_EPPWAIT" ]; then
      # epoll_wait(epfd, ...): the epoll instance's fdinfo lists one "tfd: FD" line per watched fd.
      while read -r _k _v _rest; do
        [ "$_k" = tfd: ] && [ "$_v" = 0 ] && return 0
      done < "/proc/$_wp/fdinfo/$((_a0))"
    fi
  done
  return 1
}

# fgwait SHELL TPGID: a member of process group TPGID waits on fd 0. Checks the group leader,
# then walks the shell's descendants through the task children files (bounded).
fgwait() {
  _g=$2 _tty=/proc/$1/fd/0
  if st "/proc/$_g/stat" && [ "$S_PGRP" = "$_g" ] && waits "$_g" "$_tty"; then return 0; fi
  _q="$1 " _seen=0
  while [ -n "$_q" ] && [ "$_seen" -lt 1024 ]; do
    _p=${_q%%' '*}; _q=${_q#*' '}
    [ -n "$_p" ] || continue
    _seen=$((_seen + 1))
    if [ "$_p" != "$_g" ] && st "/proc/$_p/stat" && [ "$S_PGRP" = "$_g" ] && waits "$_p" "$_tty"; then return 0; fi
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

_uid=$(id -u) _owned= _me=0
st "/proc/$$/stat" && _me=$S_START
# HOME as hex, so any byte survives the line protocol; "-" when unset or empty.
_home=$(printf '%s' "$HOME" | od -An -v -tx1 | tr -d ' \n')
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
      echo "$_id ok $(od -An -v -tx1 < /proc/$$/environ | tr -d ' \n')" ;;
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
      if live "$1" "$2"; then echo "$_id ok $(od -An -v -tx1 < "/proc/$1/cmdline" | tr -d ' \n')"; else echo "$_id gone"; fi ;;
    statfile)
      # statfile PATH: parse any file as a stat line (pins the parser on hostile comm names).
      if st "$1"; then echo "$_id ok $S_STATE $S_PPID $S_PGRP $S_SID $S_TTY $S_TPGID $S_START"
      else echo "$_id gone"; fi ;;
    fg)
      # fg PID START -> ok TPGID SHELL_PGRP WAITING(1|0) | gone
      if live "$1" "$2"; then
        _tp=$S_TPGID _sp=$S_PGRP
        if [ "$_tp" -gt 0 ] && fgwait "$1" "$_tp"; then echo "$_id ok $_tp $_sp 1"; else echo "$_id ok $_tp $_sp 0"; fi
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
    which)
      # which N, then N raw lines (candidate paths) -> ok INDEX | none: the first candidate that
      # is a regular file we may execute (builtin test only, no fork).
      _n=$1 _i=0 _hit=
      while [ "$_i" -lt "$_n" ]; do
        IFS= read -r _l || break
        if [ -z "$_hit" ] && [ -f "$_l" ] && [ -x "$_l" ]; then _hit=$_i; fi
        _i=$((_i + 1))
      done
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
    cgroup)
      # cgroup -> ok HEX HEX: this program's /proc/PID/cgroup, and the lines of its
      # /proc/PID/mountinfo whose filesystem is cgroup or cgroup2 (proc(5)), each as hex ("-"
      # when empty). The shells of this (world, uid) run in the same container or login
      # session, so these locate their cgroup too (cgroup.ts). Two od+tr forks, asked once per
      # channel.
      _a=$(od -An -v -tx1 < "/proc/$$/cgroup" | tr -d ' \n')
      _b=$(while IFS= read -r _l; do case $_l in *' - cgroup '*|*' - cgroup2 '*) printf '%s\n' "$_l" ;; esac; done < "/proc/$$/mountinfo" | od -An -v -tx1 | tr -d ' \n')
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
    *) echo "$_id err unknown-op" ;;
  esac
done
}
