/*
 * dsh-pty: the world-side parent of one terminal shell (dsh-remote-worlds).
 *
 * Started by the client over a non-PTY exec (Docker) or an exec channel without a pty (SSH), it
 * allocates the terminal's PTY itself, forks the shell onto it and relays the PTY's bytes over a
 * framed protocol on stdin/stdout. Being the shell's parent is the point:
 * - it reaps the shell, so the terminal's outcome is the true wait status (a SIGKILL and an
 *   `exit 137` differ; Docker's ExecInspect reports 137 for both);
 * - it reads the PTY only as far as the client has granted credit, so the output in flight
 *   towards the client is bounded (the program blocks in write(2) when the PTY buffer is full);
 * - its exit frame reaches the client on the data stream, so a terminal settles without waiting
 *   for the engine or sshd to report the exec's end.
 * The shell stays what it is on a PTY the engine or sshd allocates: the leader of its own session
 * with the PTY as its controlling tty, so foreground probing (tpgid), the stdin-wait proof and
 * signals work unchanged (the child calls setsid(2), then TIOCSCTTY; tty_ioctl(4)).
 *
 * Frames, both directions: u8 type, u32 payload length (little-endian), payload.
 * Client to holder:
 *   S spawn   u16 rows, u16 cols, u32 initial credit (bytes), then the script for `/bin/sh -c`.
 *             The first frame, exactly once.
 *   W hold    instead of S: the STEM of a held shell (hold.c). dsh-pty starts the shell's holder
 *             there and becomes the relay between this pipe and it (relay.c); every later byte
 *             on this pipe is the held protocol's, the holder's spawn frame first. A pipe started
 *             ahead of time (a pooled exec) thus serves a held shell as well as an attached one.
 *   I input   bytes for the PTY input (queued, then written to the master as it takes them).
 *   R resize  u16 rows, u16 cols (TIOCSWINSZ on the master; the kernel sends SIGWINCH).
 *   C credit  u32 bytes more the client can take.
 *   K signal  u32 request id, u8 signal number, u32 pid of the program the terminal runs (the
 *             shell, or the program a sandbox wrapper runs): deliver the signal to the PTY's
 *             foreground process group (TIOCGPGRP on the master: the kernel's answer for this
 *             very tty, so no other tty's group can be hit), refusing SIGKILL when that group is
 *             the program's own (its prompt).
 *   F probe   u32 request id, u32 pid and u64 start time (clock ticks, stat field 22) of that
 *             program: the PTY's foreground facts (foreground.c), answered with an `f` frame.
 * Holder to client:
 *   H hello   "dsh-pty PROTOCOL ARCH", sent at start (before any frame is read).
 *   P started u32 the shell's pid, u32 the holder's own pid (both in the world's pid namespace).
 *   O output  PTY output bytes (never more in flight than the credit granted).
 *   X exit    u8 kind (0 exited, 1 killed by a signal), u8 exit code or signal number, u8 core
 *             dumped. The last frame; the holder then closes the PTY and exits 0.
 *   E error   text: why no shell could start (openpt, fork). The holder then exits 1.
 *   k signal reply  u32 request id, u8 outcome (0 signalled, 1 refused, 2 failed, 3 gone: the
 *             shell ended), u32 the foreground group (0 when gone).
 *   i input accepted  u64 the input bytes accepted in all (queued for the PTY), sent after a
 *             read of stdin that carried input frames: a write of the client is done once this
 *             count reaches its end.
 *   f probe reply   u32 request id, u8 outcome (0 facts, 1 gone: the program ended or is another
 *             process), i32 the tty's foreground group (tpgid, -1 for none), i32 the program's own
 *             group, u8 waiting (a member of the foreground group is proven blocked reading the
 *             terminal), then the waiting thread's wait `TID:NR:A0:A1:RUNS` (empty when not).
 *             Frames are answered in the order they came, on the stream that carries the output:
 *             a probe's answer follows every output byte read before it, and an answer that
 *             proves a read follows every byte the PTY held when the facts were read (relayed
 *             first; without credit for it, the answer waits for credit, at most 2 s: see probe).
 *
 * The protocol version is PROTOCOL (wire.h), said in the hello and `--version` and bumped with any
 * frame change; the held mode's further frames are hold.c's, the relay's none (relay.c).
 *
 * The client half: src/providers/remote/pty-holder/protocol.ts (the frames, both modes),
 * held-terminal.ts (one terminal over them) and holder-install.ts (whether a world's terminals get
 * it, and which copy).
 * Built by world/build.sh from this folder and world/common/ (static, x86_64 and aarch64) into
 * dist/world-tools/linux-ARCH/dsh-pty; the client copies it into a world's cache by content hash
 * (src/providers/remote/world-tools/install.ts).
 *
 * Lifetime: the holder ends when the shell has ended (after relaying what the PTY still holds, at
 * most DRAIN_BOUND_MS), or when its stdin ends (the client closed or died): it then closes the
 * PTY master, which hangs the terminal up (the kernel sends SIGHUP to the shell's session, as
 * sshd's closing of a pty does). Nothing depends on the client's teardown code running.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "errno-text.h"
#include "world-arch.h"
#include "launched.h"
#include "foreground.h"
#include "hold.h"
#include "pty-shell.h"
#include "relay.h"
#include "wire.h"

/* Input accepted from the client and not yet written to the PTY, above which stdin is not read. */
#define MAX_PENDING_INPUT (1u << 20)
/* After the shell ended: how long the PTY may stay quiet before the exit frame (ms), and the
 * longest the holder relays what is left (ms), so a background job that floods the PTY cannot
 * keep the terminal from ending. */
#define DRAIN_QUIET_MS 20
#define DRAIN_BOUND_MS 200

static unsigned char in_buf[MAX_FRAME + 5];
static size_t in_len;
static unsigned char *pending_input;
static size_t pending_len, pending_cap;
/* Input bytes accepted from the client in all (the `i` frame). */
static uint64_t input_accepted;
/* Output read from the PTY for one `O` frame. */
static unsigned char out_buf[MAX_OUTPUT];
/* Probe replies held until the PTY's output before them was sent (see probe), oldest first: at
 * most PROBE_MEMORY (a client probes one at a time), each at most PROBE_DELIVERY_BOUND_MS. */
#define PROBE_MEMORY 8
#define PROBE_DELIVERY_BOUND_MS 2000
static struct { unsigned char reply[14 + FG_CALL_MAX]; uint32_t length; long long due; } held_probes[PROBE_MEMORY];
static int held_probe_count;


static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Write one frame to stdout, whole. Exits when stdout is gone (the client will never read it). */
static void send_frame(char type, const void *payload, uint32_t length) {
  unsigned char header[5] = { (unsigned char)type, length & 0xff, length >> 8 & 0xff, length >> 16 & 0xff, length >> 24 & 0xff };
  struct iovec iov[2] = { { header, sizeof header }, { (void *)payload, length } };
  int count = 2;
  struct iovec *at = iov;
  while (count > 0) {
    ssize_t n = writev(1, at, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) { struct pollfd p = { 1, POLLOUT, 0 }; poll(&p, 1, -1); continue; }
      _exit(2);
    }
    while (count > 0 && (size_t)n >= at->iov_len) { n -= (ssize_t)at->iov_len; at++; count--; }
    if (count > 0) { at->iov_base = (char *)at->iov_base + n; at->iov_len -= (size_t)n; }
  }
}

static void send_error(const char *what) {
  char text[512];
  int n = snprintf(text, sizeof text, "%s: %s", what, errno_text(errno));
  send_frame('E', text, n < 0 ? 0 : (uint32_t)(n < (int)sizeof text ? n : (int)sizeof text - 1));
  _exit(1);
}

static void queue_input(const unsigned char *data, size_t length) {
  if (pending_len + length > pending_cap) {
    size_t cap = pending_cap == 0 ? 65536 : pending_cap;
    while (cap < pending_len + length) cap *= 2;
    unsigned char *grown = realloc(pending_input, cap);
    if (grown == NULL) _exit(3);
    pending_input = grown;
    pending_cap = cap;
  }
  memcpy(pending_input + pending_len, data, length);
  pending_len += length;
}

/* Relay one `O` frame of what the PTY master holds, at most the credit and MAX_OUTPUT (a PTY read
 * returns what the line discipline holds, a few KiB: read on while more is there, so a flood goes
 * out in frames of up to MAX_OUTPUT, not one per read). Returns the bytes sent; sets *master_hup
 * on EOF or EIO (no process holds the slave side any more: output is complete). */
static size_t relay_output(int master, uint64_t *credit, int *master_hup) {
  size_t want = *credit < MAX_OUTPUT ? (size_t)*credit : MAX_OUTPUT;
  size_t have = 0;
  while (have < want) {
    ssize_t n = read(master, out_buf + have, want - have);
    if (n > 0) { have += (size_t)n; continue; }
    if (have == 0 && (n == 0 || (errno != EAGAIN && errno != EINTR))) *master_hup = 1;
    break;
  }
  if (have > 0) { send_frame('O', out_buf, (uint32_t)have); *credit -= (uint64_t)have; }
  return have;
}

/* Relay what the PTY master holds until a read finds it empty (returns 1) or the credit runs out
 * first (returns 0). A read of the master sees every byte written to the slave before it:
 * n_tty_read flushes the pending flip-buffer work first (tty_buffer_flush_work,
 * drivers/tty/n_tty.c). */
static int relay_until_empty(int master, uint64_t *credit, int *master_hup) {
  while (!*master_hup) {
    if (*credit == 0) return 0;
    size_t want = *credit < MAX_OUTPUT ? (size_t)*credit : MAX_OUTPUT;
    if (relay_output(master, credit, master_hup) < want) return 1;
  }
  return 1;
}

/* Send the held probe replies: all of them (`all`), or those past their bound. */
static void release_probes(int all) {
  long long now = now_ms();
  int released = 0;
  while (released < held_probe_count && (all || now >= held_probes[released].due)) {
    send_frame('f', held_probes[released].reply, held_probes[released].length);
    released++;
  }
  memmove(held_probes, held_probes + released, sizeof held_probes[0] * (size_t)(held_probe_count - released));
  held_probe_count -= released;
}

/* A probe: its facts are read now, and its reply follows every byte the program printed before
 * it blocked reading. The loop may not have read those from the PTY yet (they may come in the
 * same turn as the probe), so a reply that proves a read goes after relaying what the PTY holds;
 * when the credit runs out first, it is held until the client granted more and the PTY was found
 * empty, or PROBE_DELIVERY_BOUND_MS passed (then the facts go as they are, never changed).
 * Replies go in the order the probes came. */
static void probe(const unsigned char *request, int master, int have_pty, dev_t slave_dev, ino_t slave_ino, uint64_t *credit, int *master_hup) {
  unsigned char reply[14 + FG_CALL_MAX];
  uint32_t length = fg_reply(have_pty, slave_dev, slave_ino, request, reply);
  int ready = held_probe_count == 0 && (!fg_reply_waiting(reply, length) || master < 0 || relay_until_empty(master, credit, master_hup));
  if (ready) { send_frame('f', reply, length); return; }
  if (held_probe_count == PROBE_MEMORY) {
    send_frame('f', held_probes[0].reply, held_probes[0].length);
    memmove(held_probes, held_probes + 1, sizeof held_probes[0] * (PROBE_MEMORY - 1));
    held_probe_count--;
  }
  memcpy(held_probes[held_probe_count].reply, reply, length);
  held_probes[held_probe_count].length = length;
  held_probes[held_probe_count].due = now_ms() + PROBE_DELIVERY_BOUND_MS;
  held_probe_count++;
}

/* The attached mode: one client on stdin/stdout, the shell ends with it (see the top). */
static int attached(void) {
  signal(SIGPIPE, SIG_IGN);
  /* The holder has no controlling tty (a non-PTY exec), but a hangup must never end it before
   * it reported the shell's status. */
  signal(SIGHUP, SIG_IGN);
  sigset_t chld, old_mask;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &old_mask);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) send_error("signalfd");

  static const char hello[] = "dsh-pty " PROTOCOL " " ARCH;
  send_frame('H', hello, sizeof hello - 1);

  struct pty_shell pty = { -1, -1, 0, 0 };
  int shell_status = 0, shell_ended = 0;
  long long ended_at = 0;
  /* The master gave EIO or a hangup: nothing holds the slave side (all output is read). */
  int master_hup = 0;
  /* After the shell ended, a poll that asked for output found none within DRAIN_QUIET_MS. */
  int drain_quiet = 0;
  uint64_t credit = 0;

  for (;;) {
    /* After the shell ended: the exit frame once the PTY holds nothing more (a read window of
     * DRAIN_QUIET_MS found no byte) or after DRAIN_BOUND_MS; both only while the client takes
     * output (credit), so a slow reader loses nothing the shell printed. */
    if (shell_ended && (pty.master < 0 || master_hup || (credit > 0 && (drain_quiet || now_ms() - ended_at >= DRAIN_BOUND_MS)))) {
      release_probes(1);
      unsigned char exit_frame[3];
      pty_exit_status(shell_status, exit_frame);
      send_frame('X', exit_frame, sizeof exit_frame);
      return 0;
    }
    struct pollfd fds[3];
    int nfds = 0, stdin_at = -1, master_at = -1;
    fds[nfds++] = (struct pollfd){ sfd, POLLIN, 0 };
    if (pending_len < MAX_PENDING_INPUT) { stdin_at = nfds; fds[nfds++] = (struct pollfd){ 0, POLLIN, 0 }; }
    short master_events = (short)((credit > 0 && !master_hup ? POLLIN : 0) | (pending_len > 0 ? POLLOUT : 0));
    if (pty.master >= 0 && master_events != 0) { master_at = nfds; fds[nfds++] = (struct pollfd){ pty.master, master_events, 0 }; }
    int timeout = shell_ended ? DRAIN_QUIET_MS : -1;
    if (held_probe_count > 0) {
      long long left = held_probes[0].due - now_ms();
      if (left < 0) left = 0;
      if (timeout < 0 || left < timeout) timeout = (int)left;
    }
    int ready = poll(fds, (nfds_t)nfds, timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      send_error("poll");
    }
    if (ready == 0 && shell_ended && master_at >= 0 && (master_events & POLLIN)) drain_quiet = 1;

    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo info;
      while (read(sfd, &info, sizeof info) == (ssize_t)sizeof info) {}
      int status;
      pid_t got;
      while ((got = waitpid(-1, &status, WNOHANG)) > 0) {
        if (got == pty.pid && !shell_ended) { shell_status = status; shell_ended = 1; ended_at = now_ms(); }
      }
    }

    if (master_at >= 0 && fds[master_at].revents) {
      short ev = fds[master_at].revents;
      if ((ev & POLLOUT) && pending_len > 0) {
        ssize_t n = write(pty.master, pending_input, pending_len);
        if (n > 0) { memmove(pending_input, pending_input + n, pending_len - (size_t)n); pending_len -= (size_t)n; }
      }
      if ((ev & (POLLIN | POLLHUP | POLLERR)) && credit > 0) relay_output(pty.master, &credit, &master_hup);
    }
    if (held_probe_count > 0) release_probes(0);

    if (stdin_at >= 0 && fds[stdin_at].revents) {
      ssize_t n = read(0, in_buf + in_len, sizeof in_buf - in_len);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        /* The client is gone: hang the terminal up (SIGHUP to the shell's session) and end. */
        if (pty.master >= 0) close(pty.master);
        return 0;
      }
      in_len += (size_t)n;
      size_t at = 0;
      uint64_t accepted_before = input_accepted;
      while (in_len - at >= 5) {
        uint32_t length = get_u32(in_buf + at + 1);
        if (length > MAX_FRAME) { errno = EPROTO; send_error("frame too large"); }
        if (in_len - at < 5 + (size_t)length) break;
        unsigned char type = in_buf[at];
        const unsigned char *payload = in_buf + at + 5;
        if (type == 'W' && pty.pid < 0 && length > 0 && length < 4096) {
          char stem[4096];
          memcpy(stem, payload, length);
          stem[length] = 0;
          /* Never returns to this loop: this process is the relay from here on. */
          size_t rest = at + 5 + (size_t)length;
          exit(hold(stem, in_buf + rest, in_len - rest, &old_mask));
        } else if (type == 'S' && pty.pid < 0 && length >= 8) {
          credit += get_u32(payload + 4);
          char *script = malloc(length - 8 + 1);
          if (script == NULL) _exit(3);
          memcpy(script, payload + 8, length - 8);
          script[length - 8] = 0;
          const char *failed = "";
          if (pty_shell_start(get_u16(payload), get_u16(payload + 2), script, &old_mask, &pty, &failed) < 0) send_error(failed);
          free(script);
          pid_t self = getpid();
          unsigned char started[8];
          put_u32(started, (uint32_t)pty.pid);
          put_u32(started + 4, (uint32_t)self);
          send_frame('P', started, sizeof started);
        } else if (type == 'I' && pty.master >= 0) {
          queue_input(payload, length);
          input_accepted += length;
        } else if (type == 'R' && pty.master >= 0 && length >= 4) {
          struct winsize size = { .ws_row = get_u16(payload), .ws_col = get_u16(payload + 2) };
          ioctl(pty.master, TIOCSWINSZ, &size);
        } else if (type == 'C' && length >= 4) {
          credit += get_u32(payload);
          if (held_probe_count > 0 && (pty.master < 0 || relay_until_empty(pty.master, &credit, &master_hup))) release_probes(1);
        } else if (type == 'K' && length >= 9) {
          unsigned char outcome = 3;
          pid_t group = 0;
          if (pty.master >= 0 && !shell_ended) outcome = (unsigned char)pty_signal_foreground(pty.master, payload[4], (pid_t)get_u32(payload + 5), &group);
          unsigned char reply[9];
          memcpy(reply, payload, 4);
          reply[4] = outcome;
          put_u32(reply + 5, (uint32_t)group);
          send_frame('k', reply, sizeof reply);
        } else if (type == 'F' && length >= 16) {
          probe(payload, master_hup ? -1 : pty.master, pty.master >= 0, pty.slave_dev, pty.slave_ino, &credit, &master_hup);
        }
        at += 5 + (size_t)length;
      }
      memmove(in_buf, in_buf + at, in_len - at);
      in_len -= at;
      if (input_accepted != accepted_before) {
        unsigned char ack[8];
        put_u64(ack, input_accepted);
        send_frame('i', ack, sizeof ack);
      }
    }
  }
}

int main(int argc, char **argv) {
  launched_as("dsh-pty");
  if (argc > 1 && strcmp(argv[1], "--version") == 0) { printf("dsh-pty " PROTOCOL " " ARCH "\n"); return 0; }
  if (argc > 2 && strcmp(argv[1], "--connect") == 0) return relay(argv[2], NULL, 0);
  if (argc > 3 && strcmp(argv[1], "--held") == 0) return hold_inherited(argv[2], argv[3]);
  return attached();
}
