/*
 * A held shell, one that outlives its client and its transport (issue 22).
 *
 * A dsh-pty waiting for its first frame (dsh-pty.c) that gets `W STEM` instead of a spawn binds a
 * Unix socket at STEM.sock, forks the HOLDER (a daemon: a session of its own, SIGHUP ignored,
 * stdio on /dev/null, no client's session tag: it runs itself again as `dsh-pty --held STEM FD`
 * when the process it forked from carried one) and then relays its own stdin/stdout to that
 * socket (relay.c); later clients reach the same holder through `dsh-pty --connect STEM.sock`.
 * The holder is the shell's parent, as in the attached mode (dsh-pty.c): it owns the PTY, reaps
 * the shell, answers probes and signals. What it adds:
 *
 * - A bounded output log: every byte read from the PTY is kept in a ring of LOG bytes (default
 *   8 MiB) addressed by its absolute offset since the shell started. With a controller attached
 *   the PTY is read only as far as the controller's credit (the program blocks, as in the
 *   attached mode); with none, the PTY is read whenever it has output and the oldest bytes are
 *   dropped, so a detached shell never blocks. A controller attaches at the offset it last
 *   received; bytes already dropped are reported by the offsets themselves (start > resume).
 * - Input exactly once: `J` frames carry the offset of their first byte in the shell's input;
 *   the holder applies only what lies beyond what it accepted, and says what it accepted (`i`),
 *   so a client resends what was unacknowledged after a reconnect and nothing twice.
 * - One controller at a time. A second attach gets `busy`, unless it is the same controller
 *   again (a reconnect) or a takeover of a controller whose client is gone: no live control
 *   program of that client is registered (the session-ownership registry of ownership.ts, which
 *   this holder reads as control.sh writes it). A takeover closes the old controller's
 *   connection, so its late writes and signals are never read.
 * - A secret: the client that created the shell gave SHA-256(secret); an attach presents the
 *   secret, compared with the digest in constant time. It is on no argv and in no environment.
 *   A connection whose first frame did not come within PENDING_BOUND_MS is closed, and one that
 *   finds the MAX_PENDING places taken closes the oldest: idle connections keep no attach out.
 * - A life of its own: registered in the ownership registry under an owner id of its own (the
 *   shell's session tag names it), so no client's reaper ends the shell while the holder lives;
 *   after TTL seconds without a controller it hangs the shell up and ends. A shell that ended
 *   while detached keeps its status and its log until a controller collected them (`Q`).
 * - A description for listings (`doctor`, reattach lookups), STEM.meta, one line rewritten on
 *   every change of state (see write_meta).
 *
 * Frames over the socket (u8 type, u32 length, payload; little-endian), in addition to the
 * attached mode's R, C, K, F (client) and H, P, O, X, E, i, k, f (holder):
 * Client to holder:
 *   D spawn   first frame to a fresh holder: u16 rows, u16 cols, u32 credit, u32 log bytes,
 *             u32 ttl seconds (0: none), u8[32] SHA-256 of the secret, then four u16-length-prefixed
 *             strings: owner id (the shell's tag names it), controller id, key, label; then the
 *             script for `/bin/sh -c`. Answered by P (the creator is the controller).
 *   A attach  u8[32] secret, u8 takeover, u64 resume offset (top bit set: the rest counts bytes
 *             back from the log's head), u32 credit, then the controller id (u16-prefixed).
 *   J input   u64 offset of the first byte in the shell's input, then the bytes.
 *   Q release the client is done with the shell: it collected the exit, or (a shell still
 *             running, whose start failed on the client's side) the holder hangs it up; the
 *             holder ends.
 * Holder to client:
 *   a attach reply  u8 status (0 attached, 1 busy, 2 denied: wrong secret, 3 invalid: no shell
 *             yet or a resume offset beyond the log), u32 holder pid, u32 shell pid, u64 log
 *             tail (oldest offset kept), u64 head, u64 start (where output resumes), u64 input
 *             accepted, u8 shell ended, u8[3] exit status, u64 holder start time (clock ticks),
 *             then text "BOOT_ID PIDNS CONTROLLER" (CONTROLLER: the one that holds it, or "-").
 *             Output frames from `start` follow; then X once the shell ended and all was sent.
 *   K signal replies are remembered (the last 8 per controller) so a request the client resends
 *   after a reconnect is answered, not delivered twice.
 *   f probe replies follow every byte of the log up to its head when the facts were read: for a
 *   controller that resumed behind the head, a reply waits (at most PROBE_DELIVERY_BOUND_MS)
 *   until it was sent that far, so later frames (i, k) may pass it; probe replies keep their
 *   order.
 */
#define _GNU_SOURCE
#include "errno-text.h"
#include "hold.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include "foreground.h"
#include "pty-shell.h"
#include "relay.h"
#include "sha256.h"
#include "wire.h"
#include "world-arch.h"

/* Connections accepted and not yet the controller (their first frame, D or A, not yet read), at
 * most. A connection when all are taken closes the oldest of them: the socket is its user's, and
 * connections of that user that never speak (a stuck relay, a stray program) must not keep a
 * reattach out (issue 32). */
#define MAX_PENDING 4
/* A pending connection whose first frame did not come within this is closed (ms). A relay sends
 * the attach frame its client wrote as soon as it is connected (relay.c); a spawn's frame came
 * with the hold frame that made the holder. */
#define PENDING_BOUND_MS 5000
/* A connection whose queued output exceeds this is dropped (bytes): a controller that stopped
 * reading must not make the holder hold unbounded memory; output frames wait for credit. */
#define MAX_QUEUED (4u << 20)
/* Output frames are queued only while the controller's queue is below this (bytes). */
#define QUEUE_LOW (256u * 1024u)
/* Input accepted and not yet written to the PTY, above which a controller is not read (bytes). */
#define MAX_PENDING_INPUT (1u << 20)
/* After the shell ended: quiet window and bound of the PTY's drain (ms), as in the attached mode. */
#define DRAIN_QUIET_MS 20
#define DRAIN_BOUND_MS 200
/* After a hangup at the end of the TTL or at SIGTERM: how long the shell may take to end before
 * its process group is killed (ms). */
#define HANGUP_GRACE_MS 2000
/* The log's size when the spawn names none, and its bounds (bytes). */
#define LOG_DEFAULT (8u << 20)
#define LOG_MIN (64u * 1024u)
#define LOG_MAX (1u << 30)
/* A holder whose spawn frame did not come within this ends (ms). */
#define SPAWN_BOUND_MS 60000
/* The session tag variable of ownership.ts (SESSION_TAG_VARIABLE), which the holder must not carry. */
#define TAG_VARIABLE "DSH_REMOTE_SESSION"
/* Signal replies remembered for resent requests. */
#define SIGNAL_MEMORY 8
/* Probe replies held back, at most: a probe beyond them lets the oldest go at once. A client
 * probes one at a time (terminal-bash polls serially) and resends those unanswered after a
 * reconnect. */
#define PROBE_MEMORY 8
/* The longest a probe reply waits for the controller to be sent the log up to where its head was
 * when the facts were read (ms; see probe_request), as the client's own wait for what its
 * transport buffered (terminal.ts PROBE_DELIVERY_BOUND_MS): then the facts go as they are. */
#define PROBE_DELIVERY_BOUND_MS 2000
/* The most a probe takes from the PTY into the log before its facts go (bytes; see
 * probe_request): above the line discipline's 4 KiB and the PTY's flip buffers (64 KiB each way,
 * drivers/tty/tty_buffer.c TTYB_DEFAULT_MEM_LIMIT). */
#define PROBE_PULL_MAX (256u * 1024u)
/* Longest id strings (bytes). */
#define ID_MAX 64
#define TEXT_MAX 4096

struct conn {
  int fd;
  unsigned char *in;
  size_t in_len;
  unsigned char *out;
  size_t out_len, out_cap;
  /* When it was accepted (now_ms), for a pending connection's bound. */
  long long accepted_at;
};

static struct {
  char sock_path[108];
  char meta_path[PATH_MAX];
  char owner_path[PATH_MAX];
  int listen_fd, signal_fd;
  struct conn pending[MAX_PENDING];
  struct conn controller;
  char controller_id[ID_MAX + 1];
  uint64_t credit, sent;
  /* The log: LOG bytes of ring, `head` the offset of the next byte. */
  unsigned char *ring;
  uint64_t cap, head;
  struct pty_shell pty;
  int started, ended, status, master_hup, drained, exit_sent;
  long long ended_at, detached_at;
  unsigned char *input;
  size_t input_len, input_cap;
  uint64_t accepted;
  unsigned char secret_digest[32];
  char owner[ID_MAX + 1], key[TEXT_MAX + 1], label[TEXT_MAX + 1];
  uint32_t ttl;
  time_t created;
  unsigned long long self_start;
  char boot_id[64], pidns[64];
  struct { uint32_t id; unsigned char reply[9]; } signals[SIGNAL_MEMORY];
  int signal_count;
  /* Probe replies not yet sent, oldest first: each goes once `sent` reached `head` (the log's
   * head when its facts were read), or at `due`. */
  struct { unsigned char reply[14 + FG_CALL_MAX]; uint32_t length; uint64_t head; long long due; } probes[PROBE_MEMORY];
  int probe_count;
  sigset_t shell_mask;
} H;

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void close_conn(struct conn *c) {
  if (c->fd >= 0) close(c->fd);
  free(c->in);
  free(c->out);
  *c = (struct conn){ -1, NULL, 0, NULL, 0, 0, 0 };
}

/* Queue a frame on `c` (written as the socket takes it). Returns -1 (and closes `c`) when the
 * connection holds too much unsent. */
static int queue_frame(struct conn *c, char type, const void *payload, uint32_t length) {
  if (c->fd < 0) return -1;
  size_t need = c->out_len + 5 + length;
  if (need > MAX_QUEUED) { close_conn(c); return -1; }
  if (need > c->out_cap) {
    size_t cap = c->out_cap == 0 ? 65536 : c->out_cap;
    while (cap < need) cap *= 2;
    unsigned char *grown = realloc(c->out, cap);
    if (grown == NULL) { close_conn(c); return -1; }
    c->out = grown;
    c->out_cap = cap;
  }
  c->out[c->out_len] = (unsigned char)type;
  put_u32(c->out + c->out_len + 1, length);
  if (length > 0) memcpy(c->out + c->out_len + 5, payload, length);
  c->out_len = need;
  return 0;
}

/* Write what `c` has queued, as far as the socket takes it. */
static void flush_conn(struct conn *c) {
  while (c->fd >= 0 && c->out_len > 0) {
    ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) close_conn(c);
      return;
    }
    memmove(c->out, c->out + n, c->out_len - (size_t)n);
    c->out_len -= (size_t)n;
  }
}

static void hello(struct conn *c) {
  static const char text[] = "dsh-pty " PROTOCOL " " ARCH;
  queue_frame(c, 'H', text, sizeof text - 1);
}

static uint64_t log_tail(void) { return H.head > H.cap ? H.head - H.cap : 0; }

/* Keep `data` in the log; the oldest bytes beyond its size are dropped. */
static void log_append(const unsigned char *data, size_t length) {
  if (length >= H.cap) { data += length - H.cap; H.head += length - H.cap; length = (size_t)H.cap; }
  size_t at = (size_t)(H.head % H.cap);
  size_t first = length < H.cap - at ? length : (size_t)(H.cap - at);
  memcpy(H.ring + at, data, first);
  memcpy(H.ring, data + first, length - first);
  H.head += length;
}

/* Queue the held probe replies that may go now (all of them with `all`), oldest first: those
 * whose output was sent, and those past their bound. */
static void release_probes(int all) {
  long long now = now_ms();
  int released = 0;
  while (released < H.probe_count && (all || H.probes[released].head <= H.sent || now >= H.probes[released].due)) {
    queue_frame(&H.controller, 'f', H.probes[released].reply, H.probes[released].length);
    released++;
  }
  memmove(H.probes, H.probes + released, sizeof H.probes[0] * (size_t)(H.probe_count - released));
  H.probe_count -= released;
}

/* Send the controller what the log holds beyond what it was sent, as far as its credit goes,
 * and the probe replies that waited for it; then the exit frame, once the shell ended, its
 * output drained and all of it was sent (the last frame: no reply follows it). */
static void pump(void) {
  struct conn *c = &H.controller;
  while (c->fd >= 0 && H.sent < H.head && H.credit > 0 && c->out_len < QUEUE_LOW) {
    if (H.sent < log_tail()) H.sent = log_tail();
    uint64_t length = H.head - H.sent;
    size_t at = (size_t)(H.sent % H.cap);
    if (length > H.cap - at) length = H.cap - at;
    if (length > H.credit) length = H.credit;
    if (length > MAX_OUTPUT) length = MAX_OUTPUT;
    if (queue_frame(c, 'O', H.ring + at, (uint32_t)length) < 0) return;
    H.sent += length;
    H.credit -= length;
  }
  if (H.probe_count > 0) release_probes(0);
  if (c->fd >= 0 && H.ended && H.drained && H.sent == H.head && !H.exit_sent) {
    unsigned char status[3];
    pty_exit_status(H.status, status);
    if (queue_frame(c, 'X', status, sizeof status) == 0) H.exit_sent = 1;
  }
}

static void hex(const char *text, size_t length, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < length; i++) { out[2 * i] = digits[(unsigned char)text[i] >> 4]; out[2 * i + 1] = digits[(unsigned char)text[i] & 15]; }
  out[2 * length] = 0;
}

/*
 * STEM.meta, one line of NAME=VALUE words (hex for free text), written whole (rename(2)):
 * dsh-held 1 holder=PID start=TICKS shell=PID owner=ID created=EPOCH ttl=S detached=EPOCH|0
 * controller=ID|- ended=KIND:CODE|- log=TAIL:HEAD key=HEX label=HEX
 */
static void write_meta(void) {
  static char key_hex[2 * TEXT_MAX + 1], label_hex[2 * TEXT_MAX + 1], line[5 * TEXT_MAX];
  hex(H.key, strlen(H.key), key_hex);
  hex(H.label, strlen(H.label), label_hex);
  char ended[32] = "-";
  if (H.ended) {
    unsigned char status[3];
    pty_exit_status(H.status, status);
    snprintf(ended, sizeof ended, "%d:%d", status[0], status[1]);
  }
  long long detached = H.controller.fd >= 0 ? 0 : (long long)time(NULL) - (now_ms() - H.detached_at) / 1000;
  int n = snprintf(line, sizeof line, "dsh-held 1 holder=%d start=%llu shell=%d owner=%s created=%lld ttl=%u detached=%lld controller=%s ended=%s log=%llu:%llu key=%s label=%s\n",
    (int)getpid(), H.self_start, (int)H.pty.pid, H.owner, (long long)H.created, H.ttl, detached,
    H.controller.fd >= 0 && H.controller_id[0] ? H.controller_id : "-", ended,
    (unsigned long long)log_tail(), (unsigned long long)H.head, key_hex, label_hex);
  char temporary[PATH_MAX + 8];
  snprintf(temporary, sizeof temporary, "%s.tmp", H.meta_path);
  int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return;
  ssize_t written = write(fd, line, (size_t)n);
  close(fd);
  if (written == n) rename(temporary, H.meta_path);
  else unlink(temporary);
}

/* The start time of a process (stat field 22), 0 when it is gone or a zombie. */
static unsigned long long start_of(pid_t pid) {
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return 0;
  text[n] = 0;
  char *rest = NULL;
  for (char *at = strstr(text, ") "); at != NULL; at = strstr(at + 1, ") ")) rest = at + 2;
  if (rest == NULL || rest[0] == 'Z' || rest[0] == 'X') return 0;
  int field = 3;
  for (char *p = rest; *p; p++) {
    if (*p == ' ' && ++field == 22) return strtoull(p + 1, NULL, 10);
  }
  return 0;
}

/* The ownership registry of this uid (ownership.ts; control.sh `owndir`): trusted only when it
 * is a directory of ours and not a symlink. Returns its path, or NULL. */
static const char *owners_dir(void) {
  static char dir[64];
  snprintf(dir, sizeof dir, "/tmp/dsh-remote-owners-%u", (unsigned)getuid());
  mkdir(dir, 0700);
  struct stat st;
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) return NULL;
  return dir;
}

/* Whether client `id` has a live control program registered (CLIENT.PID.START, its program
 * running with that start time). */
static int client_alive(const char *id) {
  const char *dir = owners_dir();
  if (dir == NULL || id[0] == 0) return 0;
  DIR *entries = opendir(dir);
  if (entries == NULL) return 0;
  size_t length = strlen(id);
  int alive = 0;
  for (struct dirent *entry; !alive && (entry = readdir(entries)) != NULL;) {
    if (strncmp(entry->d_name, id, length) != 0 || entry->d_name[length] != '.') continue;
    char *end;
    long pid = strtol(entry->d_name + length + 1, &end, 10);
    if (*end != '.' || pid <= 0) continue;
    unsigned long long start = strtoull(end + 1, NULL, 10);
    alive = start != 0 && start_of((pid_t)pid) == start;
  }
  closedir(entries);
  return alive;
}

static void read_line(const char *path, char *out, size_t size) {
  out[0] = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, size - 1);
  close(fd);
  if (n < 0) n = 0;
  out[n] = 0;
  out[strcspn(out, "\n")] = 0;
}

/* Remove what names this holder (socket, description, registration) and end. */
static void finish(int status) {
  unlink(H.sock_path);
  unlink(H.meta_path);
  if (H.owner_path[0]) unlink(H.owner_path);
  _exit(status);
}

/* Hang the shell up (close the master: SIGHUP to its session, as sshd's closing of a pty does),
 * kill its process group if it has not ended within HANGUP_GRACE_MS, and finish. */
static void hang_up(void) {
  if (H.started && !H.ended) {
    if (H.pty.master >= 0) close(H.pty.master);
    H.pty.master = -1;
    long long deadline = now_ms() + HANGUP_GRACE_MS;
    while (now_ms() < deadline) {
      int status;
      if (waitpid(H.pty.pid, &status, WNOHANG) == H.pty.pid) { H.ended = 1; break; }
      struct timespec pause = { 0, 20 * 1000000 };
      nanosleep(&pause, NULL);
    }
    if (!H.ended) { kill(-H.pty.pid, SIGKILL); waitpid(H.pty.pid, NULL, 0); }
  }
  finish(0);
}

static void queue_input(const unsigned char *data, size_t length) {
  if (H.input_len + length > H.input_cap) {
    size_t cap = H.input_cap == 0 ? 65536 : H.input_cap;
    while (cap < H.input_len + length) cap *= 2;
    unsigned char *grown = realloc(H.input, cap);
    if (grown == NULL) _exit(3);
    H.input = grown;
    H.input_cap = cap;
  }
  memcpy(H.input + H.input_len, data, length);
  H.input_len += length;
}

/* Read a u16-length-prefixed string at *at (of `end`) into `out` (NUL-terminated). */
static int take_string(const unsigned char **at, const unsigned char *end, char *out, size_t max) {
  if (end - *at < 2) return -1;
  uint16_t length = get_u16(*at);
  *at += 2;
  if (length > max || end - *at < length) return -1;
  memcpy(out, *at, length);
  out[length] = 0;
  *at += length;
  return 0;
}

/* The controller left (its connection ended or broke): the shell goes on, detached. */
static void detach(void) {
  close_conn(&H.controller);
  H.probe_count = 0;
  H.detached_at = now_ms();
  write_meta();
}

/* Make pending connection `c` the controller (closing any other). */
static void make_controller(struct conn *c, const char *id) {
  if (H.controller.fd >= 0) close_conn(&H.controller);
  /* The replies held for the old connection: the client asks again on the new one. */
  H.probe_count = 0;
  H.controller = *c;
  *c = (struct conn){ -1, NULL, 0, NULL, 0, 0, 0 };
  if (strcmp(id, H.controller_id) != 0) H.signal_count = 0;
  snprintf(H.controller_id, sizeof H.controller_id, "%s", id);
}

static void spawn(struct conn *c, const unsigned char *p, uint32_t length) {
  const unsigned char *end = p + length;
  if (length < 48) { close_conn(c); return; }
  unsigned rows = get_u16(p), cols = get_u16(p + 2);
  uint32_t credit = get_u32(p + 4), log = get_u32(p + 8);
  H.ttl = get_u32(p + 12);
  memcpy(H.secret_digest, p + 16, 32);
  const unsigned char *at = p + 48;
  char controller[ID_MAX + 1];
  if (take_string(&at, end, H.owner, ID_MAX) < 0 || take_string(&at, end, controller, ID_MAX) < 0 ||
      take_string(&at, end, H.key, TEXT_MAX) < 0 || take_string(&at, end, H.label, TEXT_MAX) < 0) { close_conn(c); return; }
  H.cap = log == 0 ? LOG_DEFAULT : log < LOG_MIN ? LOG_MIN : log > LOG_MAX ? LOG_MAX : log;
  H.ring = malloc((size_t)H.cap);
  char *script = malloc((size_t)(end - at) + 1);
  if (H.ring == NULL || script == NULL) _exit(3);
  memcpy(script, at, (size_t)(end - at));
  script[end - at] = 0;
  const char *failed = "";
  if (pty_shell_start(rows, cols, script, &H.shell_mask, &H.pty, &failed) < 0) {
    char text[512];
    int n = snprintf(text, sizeof text, "%s: %s", failed, errno_text(errno));
    queue_frame(c, 'E', text, (uint32_t)(n < 0 ? 0 : n));
    flush_conn(c);
    finish(1);
  }
  free(script);
  H.started = 1;
  H.created = time(NULL);
  /* Registered as a live "client" of the ownership registry: the shell's session tag names this
   * owner, so no client's reaper ends the shell while the holder lives (ownership.ts). */
  const char *dir = owners_dir();
  if (dir != NULL && H.owner[0] != 0) {
    snprintf(H.owner_path, sizeof H.owner_path, "%s/%s.%d.%llu", dir, H.owner, (int)getpid(), H.self_start);
    int fd = open(H.owner_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) close(fd);
    else H.owner_path[0] = 0;
  }
  make_controller(c, controller);
  H.credit = credit;
  H.sent = 0;
  unsigned char started[8];
  put_u32(started, (uint32_t)H.pty.pid);
  put_u32(started + 4, (uint32_t)getpid());
  queue_frame(&H.controller, 'P', started, sizeof started);
  write_meta();
}

static void attach(struct conn *c, const unsigned char *p, uint32_t length) {
  if (length < 47) { close_conn(c); return; }
  char id[ID_MAX + 1];
  const unsigned char *at = p + 45;
  if (take_string(&at, p + length, id, ID_MAX) < 0) { close_conn(c); return; }
  unsigned char digest[32], differ = 0;
  sha256_t hash;
  sha256_init(&hash);
  sha256_update(&hash, p, 32);
  sha256_final(&hash, digest);
  for (int i = 0; i < 32; i++) differ |= (unsigned char)(digest[i] ^ H.secret_digest[i]);
  int takeover = p[32];
  uint64_t resume = get_u64(p + 33);
  /* The top bit: the rest counts bytes back from the log's head (a client that never read it). */
  if (resume >> 63) {
    uint64_t back = resume & ~(1ULL << 63);
    resume = H.head > back ? H.head - back : 0;
    if (resume < log_tail()) resume = log_tail();
  }
  uint32_t credit = get_u32(p + 41);
  /* Peer credentials (unix(7) SO_PEERCRED): only this uid attaches, whoever reaches the socket. */
  struct ucred peer;
  socklen_t peer_length = sizeof peer;
  int other_uid = getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_length) != 0 || peer.uid != getuid();
  unsigned char status = 0;
  if (!H.started || resume > H.head) status = 3;
  else if (differ != 0 || other_uid) status = 2;
  else if (H.controller.fd >= 0 && strcmp(id, H.controller_id) != 0 && (!takeover || client_alive(H.controller_id))) status = 1;
  unsigned char reply[64 + 3 * 64 + ID_MAX];
  memset(reply, 0, sizeof reply);
  reply[0] = status;
  put_u32(reply + 1, (uint32_t)getpid());
  put_u32(reply + 5, (uint32_t)H.pty.pid);
  put_u64(reply + 9, log_tail());
  put_u64(reply + 17, H.head);
  uint64_t start = resume < log_tail() ? log_tail() : resume;
  put_u64(reply + 25, start);
  put_u64(reply + 33, H.accepted);
  reply[41] = (unsigned char)H.ended;
  if (H.ended) pty_exit_status(H.status, reply + 42);
  put_u64(reply + 45, H.self_start);
  int n = snprintf((char *)reply + 53, sizeof reply - 53, "%s %s %s", H.boot_id, H.pidns, H.controller.fd >= 0 && H.controller_id[0] ? H.controller_id : "-");
  queue_frame(c, 'a', reply, 53 + (uint32_t)(n < 0 ? 0 : n));
  if (status != 0) { flush_conn(c); close_conn(c); return; }
  make_controller(c, id);
  H.credit = credit;
  H.sent = start;
  H.exit_sent = 0;
  write_meta();
  pump();
}

/* A signal request from the controller: answered once; a resent one gets the same answer. */
static void signal_request(const unsigned char *p) {
  uint32_t id = get_u32(p);
  for (int i = 0; i < H.signal_count; i++)
    if (H.signals[i].id == id) { queue_frame(&H.controller, 'k', H.signals[i].reply, 9); return; }
  unsigned char outcome = 3;
  pid_t group = 0;
  if (H.pty.master >= 0 && !H.ended) outcome = (unsigned char)pty_signal_foreground(H.pty.master, p[4], (pid_t)get_u32(p + 5), &group);
  unsigned char reply[9];
  memcpy(reply, p, 4);
  reply[4] = outcome;
  put_u32(reply + 5, (uint32_t)group);
  if (H.signal_count == SIGNAL_MEMORY) { memmove(H.signals, H.signals + 1, sizeof H.signals[0] * (SIGNAL_MEMORY - 1)); H.signal_count--; }
  H.signals[H.signal_count].id = id;
  memcpy(H.signals[H.signal_count].reply, reply, 9);
  H.signal_count++;
  queue_frame(&H.controller, 'k', reply, sizeof reply);
}

/* Read what the PTY master holds into the log, at most `want` bytes (a PTY read returns what the
 * line discipline holds, a few KiB: read on while more is there). Returns the bytes read; sets
 * master_hup on EOF or EIO (nothing holds the slave side any more). */
static size_t log_from_master(size_t want) {
  static unsigned char buffer[MAX_OUTPUT];
  if (want > sizeof buffer) want = sizeof buffer;
  size_t have = 0;
  while (have < want) {
    ssize_t n = read(H.pty.master, buffer + have, want - have);
    if (n > 0) { have += (size_t)n; continue; }
    if (have == 0 && (n == 0 || (errno != EAGAIN && errno != EINTR))) H.master_hup = 1;
    break;
  }
  if (have > 0) log_append(buffer, have);
  return have;
}

/* A probe from the controller. Its facts are read now; its reply goes once the controller was
 * sent the log up to its head of now (a client that resumed behind the head is sent the log at
 * its credit's pace), so the answer never overtakes what the program printed before it read, and
 * terminal-bash never settles a send without it. The facts are never changed instead: a made-up
 * "not waiting" would let terminal-bash accept the shell's prompt wait before the shell read the
 * send (docs/how-it-works.md). After PROBE_DELIVERY_BOUND_MS the facts go as they are; replies
 * go in the order the probes came. */
static void probe_request(const unsigned char *p) {
  if (H.probe_count == PROBE_MEMORY) {
    queue_frame(&H.controller, 'f', H.probes[0].reply, H.probes[0].length);
    memmove(H.probes, H.probes + 1, sizeof H.probes[0] * (PROBE_MEMORY - 1));
    H.probe_count--;
  }
  int at = H.probe_count++;
  H.probes[at].length = fg_reply(H.pty.master >= 0 && !H.ended, H.pty.slave_dev, H.pty.slave_ino, p, H.probes[at].reply);
  /* A program proven blocked reading wrote what it printed before the read to the slave; the
   * loop may not have read it from the master yet (it reads only as far as the credit goes, and
   * the probe frame may come in the same turn). Take it into the log now, whatever the credit,
   * so the head the reply waits for covers it. A read of the master sees every byte written to
   * the slave before it: n_tty_read flushes the pending flip-buffer work first
   * (tty_buffer_flush_work, drivers/tty/n_tty.c). The reader writes nothing more, but another
   * member of its session may flood: the pull stops at what the PTY can hold (PROBE_PULL_MAX)
   * and at half the log, so it never drops unsent output. */
  if (fg_reply_waiting(H.probes[at].reply, H.probes[at].length) && H.started && H.pty.master >= 0) {
    uint64_t pulled = 0, bound = H.cap / 2 < PROBE_PULL_MAX ? H.cap / 2 : PROBE_PULL_MAX;
    while (!H.master_hup && pulled < bound) {
      size_t n = log_from_master(bound - pulled < MAX_OUTPUT ? (size_t)(bound - pulled) : MAX_OUTPUT);
      pulled += n;
      if (n < MAX_OUTPUT) break;
    }
  }
  H.probes[at].head = H.head;
  H.probes[at].due = now_ms() + PROBE_DELIVERY_BOUND_MS;
  release_probes(H.exit_sent);
}

/* Frames of the controller. Returns -1 when the controller was dropped. */
static int controller_frame(unsigned char type, const unsigned char *p, uint32_t length) {
  if (type == 'J' && length >= 8) {
    uint64_t offset = get_u64(p);
    uint64_t count = length - 8;
    /* A gap means the client lost track: its later input cannot be placed. */
    if (offset > H.accepted) { detach(); return -1; }
    uint64_t skip = H.accepted - offset;
    if (skip < count && H.pty.master >= 0 && !H.ended) { queue_input(p + 8 + skip, (size_t)(count - skip)); H.accepted += count - skip; }
    else if (skip < count) H.accepted += count - skip;
  } else if (type == 'R' && length >= 4 && H.pty.master >= 0) {
    struct winsize size = { .ws_row = get_u16(p), .ws_col = get_u16(p + 2) };
    ioctl(H.pty.master, TIOCSWINSZ, &size);
  } else if (type == 'C' && length >= 4) {
    H.credit += get_u32(p);
  } else if (type == 'K' && length >= 9) {
    signal_request(p);
  } else if (type == 'F' && length >= 16) {
    probe_request(p);
  } else if (type == 'Q') {
    /* A shell still running is one whose start failed on the client's side: nobody will take
     * it back, so it must not live out its TTL. */
    if (H.ended) { flush_conn(&H.controller); finish(0); }
    else hang_up();
  }
  return 0;
}

/* Read what connection `c` sent and act on its complete frames. A pending connection's first
 * frame (D or A) decides what it is; frames behind it, once it became the controller, are the
 * controller's. */
static void receive(struct conn *c, int is_controller) {
  if (c->in == NULL && (c->in = malloc(MAX_FRAME + 5)) == NULL) _exit(3);
  ssize_t n = recv(c->fd, c->in + c->in_len, MAX_FRAME + 5 - c->in_len, MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    if (is_controller) detach();
    else close_conn(c);
    return;
  }
  c->in_len += (size_t)n;
  size_t at = 0;
  uint64_t accepted_before = H.accepted;
  while (c->fd >= 0 && c->in_len - at >= 5) {
    uint32_t length = get_u32(c->in + at + 1);
    if (length > MAX_FRAME) { if (is_controller) detach(); else close_conn(c); return; }
    if (c->in_len - at < 5 + (size_t)length) break;
    unsigned char type = c->in[at];
    const unsigned char *payload = c->in + at + 5;
    at += 5 + (size_t)length;
    if (is_controller) {
      if (controller_frame(type, payload, length) < 0) return;
      continue;
    }
    unsigned char *buffer = c->in;
    if (type == 'D' && !H.started) spawn(c, payload, length);
    else if (type == 'A') attach(c, payload, length);
    else close_conn(c);
    /* Attached or spawned: the connection (its buffer with it) is the controller now. */
    if (H.controller.fd < 0 || H.controller.in != buffer) return;
    c = &H.controller;
    is_controller = 1;
  }
  if (c->fd >= 0) {
    memmove(c->in, c->in + at, c->in_len - at);
    c->in_len -= at;
  }
  if (is_controller && H.controller.fd >= 0 && H.accepted != accepted_before) {
    unsigned char ack[8];
    put_u64(ack, H.accepted);
    queue_frame(&H.controller, 'i', ack, sizeof ack);
  }
}

/* The shell ended and the PTY holds nothing more (or the drain's bound passed): close the master
 * (as the attached mode does at its end), so nothing follows the exit frame. */
static void drain_done(void) {
  H.drained = 1;
  if (H.pty.master >= 0) close(H.pty.master);
  H.pty.master = -1;
  write_meta();
}

/* The daemon's loop. */
static void serve(void) {
  for (;;) {
    long long now = now_ms();
    /* Without a controller for the TTL (0: none), or never spoken to within SPAWN_BOUND_MS. */
    if (H.started && H.controller.fd < 0 && H.ttl > 0 && now - H.detached_at >= (long long)H.ttl * 1000) hang_up();
    if (!H.started && now - H.detached_at >= SPAWN_BOUND_MS) finish(1);
    int attached_now = H.controller.fd >= 0;
    if (H.ended && !H.drained && (H.master_hup || ((!attached_now || H.credit > 0) && now - H.ended_at >= DRAIN_BOUND_MS))) drain_done();
    /* Every turn ends here with what it made sent: output the log holds, the exit frame, replies.
     * pump() queues at most QUEUE_LOW; when the socket takes all of it, no POLLOUT is asked and
     * nothing else may wake this loop (an idle shell: no PTY output), so pump again until the
     * socket is full or the log or the credit has no more. Without this, a client resuming far
     * behind the head of an idle shell's log got 256 to 512 KiB and then nothing. */
    for (;;) {
      uint64_t sent = H.sent;
      pump();
      flush_conn(&H.controller);
      if (H.controller.fd < 0 || H.controller.out_len > 0 || H.sent == sent) break;
    }
    for (int i = 0; i < MAX_PENDING; i++) flush_conn(&H.pending[i]);
    struct pollfd fds[4 + MAX_PENDING];
    int count = 0, master_at = -1, controller_at = -1, pending_at[MAX_PENDING];
    fds[count++] = (struct pollfd){ H.signal_fd, POLLIN, 0 };
    /* Pending connections past their bound are closed; a new one takes a free slot, or the
     * oldest pending connection's. */
    int free_slot = -1;
    long long pending_due = -1;
    for (int i = 0; i < MAX_PENDING; i++) {
      if (H.pending[i].fd >= 0 && now - H.pending[i].accepted_at >= PENDING_BOUND_MS) close_conn(&H.pending[i]);
      if (H.pending[i].fd < 0) free_slot = i;
      else if (pending_due < 0 || H.pending[i].accepted_at + PENDING_BOUND_MS < pending_due) pending_due = H.pending[i].accepted_at + PENDING_BOUND_MS;
    }
    if (free_slot < 0) {
      free_slot = 0;
      for (int i = 1; i < MAX_PENDING; i++) if (H.pending[i].accepted_at < H.pending[free_slot].accepted_at) free_slot = i;
    }
    fds[count++] = (struct pollfd){ H.listen_fd, POLLIN, 0 };
    if (H.controller.fd >= 0) {
      controller_at = count;
      fds[count++] = (struct pollfd){ H.controller.fd, (short)((H.input_len < MAX_PENDING_INPUT ? POLLIN : 0) | (H.controller.out_len > 0 ? POLLOUT : 0)), 0 };
    }
    int attached = H.controller.fd >= 0;
    int may_read = H.started && H.pty.master >= 0 && !H.master_hup && (!attached || (H.credit > 0 && H.sent == H.head && H.controller.out_len < QUEUE_LOW));
    short master_events = (short)((may_read ? POLLIN : 0) | (H.input_len > 0 ? POLLOUT : 0));
    if (H.pty.master >= 0 && master_events != 0) { master_at = count; fds[count++] = (struct pollfd){ H.pty.master, master_events, 0 }; }
    for (int i = 0; i < MAX_PENDING; i++) {
      pending_at[i] = -1;
      if (H.pending[i].fd >= 0) { pending_at[i] = count; fds[count++] = (struct pollfd){ H.pending[i].fd, (short)(POLLIN | (H.pending[i].out_len > 0 ? POLLOUT : 0)), 0 }; }
    }
    int timeout = -1;
    if (H.ended && !H.drained) timeout = DRAIN_QUIET_MS;
    else if (!H.started) timeout = SPAWN_BOUND_MS;
    else if (!attached && H.ttl > 0) {
      long long left = (long long)H.ttl * 1000 - (now - H.detached_at);
      timeout = left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
    }
    /* The next pending connection's bound, or the oldest held probe reply's. */
    long long wake = pending_due;
    if (H.probe_count > 0 && (wake < 0 || H.probes[0].due < wake)) wake = H.probes[0].due;
    if (wake >= 0) {
      long long left = wake - now;
      if (left < 0) left = 0;
      if (timeout < 0 || left < timeout) timeout = (int)left;
    }
    int ready = poll(fds, (nfds_t)count, timeout);
    if (ready < 0) {
      if (errno == EINTR) continue;
      finish(2);
    }
    if (ready == 0 && H.ended && !H.drained && master_at >= 0 && (master_events & POLLIN)) { drain_done(); continue; }

    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo info;
      int terminate = 0;
      while (read(H.signal_fd, &info, sizeof info) == (ssize_t)sizeof info) if (info.ssi_signo == SIGTERM) terminate = 1;
      int status;
      pid_t got;
      while ((got = waitpid(-1, &status, WNOHANG)) > 0) {
        if (got == H.pty.pid && !H.ended) { H.status = status; H.ended = 1; H.ended_at = now_ms(); write_meta(); }
      }
      if (terminate) hang_up();
    }
    if (master_at >= 0 && fds[master_at].revents) {
      short events = fds[master_at].revents;
      if ((events & POLLOUT) && H.input_len > 0) {
        ssize_t n = write(H.pty.master, H.input, H.input_len);
        if (n > 0) { memmove(H.input, H.input + n, H.input_len - (size_t)n); H.input_len -= (size_t)n; }
      }
      if ((events & (POLLIN | POLLHUP | POLLERR)) && may_read) log_from_master(attached ? (H.credit < MAX_OUTPUT ? (size_t)H.credit : MAX_OUTPUT) : MAX_OUTPUT);
    }
    if (controller_at >= 0 && H.controller.fd >= 0 && fds[controller_at].revents) {
      if (fds[controller_at].revents & (POLLIN | POLLHUP | POLLERR)) receive(&H.controller, 1);
    }
    for (int i = 0; i < MAX_PENDING; i++)
      if (pending_at[i] >= 0 && H.pending[i].fd >= 0 && (fds[pending_at[i]].revents & (POLLIN | POLLHUP | POLLERR))) receive(&H.pending[i], 0);
    if (fds[1].revents & POLLIN) {
      int fd = accept4(H.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        /* No slot free: the oldest pending connection makes room (it had the longest to send
         * its first frame). */
        close_conn(&H.pending[free_slot]);
        H.pending[free_slot] = (struct conn){ fd, NULL, 0, NULL, 0, 0, now_ms() };
        hello(&H.pending[free_slot]);
      }
    }
  }
}

/* Report `error` (text) as an `E` frame on stdout: the client's pipe, before any relay ran. */
static void report_start_error(const char *error) {
  unsigned char header[5] = { 'E' };
  put_u32(header + 1, (uint32_t)strlen(error));
  if (write(1, header, 5) == 5 && write(1, error, strlen(error)) < 0) return;
}

/* Set the socket and description paths of STEM. Returns -1 (with `error` set) when too long. */
static int name_paths(const char *stem, char *error, size_t size) {
  if (strlen(stem) + 6 > sizeof H.sock_path) {
    snprintf(error, size, "ENAMETOOLONG: held-shell socket path %s.sock is longer than %zu bytes", stem, sizeof H.sock_path - 1);
    return -1;
  }
  snprintf(H.sock_path, sizeof H.sock_path, "%s.sock", stem);
  snprintf(H.meta_path, sizeof H.meta_path, "%s.meta", stem);
  return 0;
}

/* Bind and listen on STEM.sock in a private directory of this uid. Returns the listening socket,
 * or -1 with `error` set (its text starts with the errno's name, as held-terminal.ts reads it). */
static int listen_at(const char *stem, char *error, size_t size) {
  char dir_path[PATH_MAX];
  snprintf(dir_path, sizeof dir_path, "%s", stem);
  const char *dir = dirname(dir_path);
  if (name_paths(stem, error, size) < 0) return -1;
  mkdir(dir, 0700);
  struct stat st;
  if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
    snprintf(error, size, "EACCES: the held-shell directory %s is not a private directory of uid %u", dir, (unsigned)getuid());
    return -1;
  }
  int listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct sockaddr_un address = { .sun_family = AF_UNIX };
  strcpy(address.sun_path, H.sock_path);
  mode_t old = umask(077);
  if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&address, sizeof address) < 0 || listen(listen_fd, 8) < 0) {
    snprintf(error, size, "%s: listen on %s: %s", errno_name(errno), H.sock_path, errno_text(errno));
    if (listen_fd >= 0) close(listen_fd);
    listen_fd = -1;
  }
  umask(old);
  return listen_fd;
}

/* The holder's life on `listen_fd`, once nothing of the client is in its initial environment. */
static int held(int listen_fd) {
  /* The holder: a session of its own (no controlling tty, no client's process group), stdio on
   * /dev/null. */
  setsid();
  /* Its own name (comm, proc(5)): `dsh-held`, told apart from the relays (`dsh-pty`) in listings. */
  prctl(PR_SET_NAME, "dsh-held", 0, 0, 0);
  if (chdir("/") < 0) _exit(1);
  int null = open("/dev/null", O_RDWR);
  if (null >= 0) { dup2(null, 0); dup2(null, 1); dup2(null, 2); if (null > 2) close(null); }
  /* Nothing the exec inherited stays open in a process that may live for a day. */
  DIR *open_fds = opendir("/proc/self/fd");
  if (open_fds != NULL) {
    int listed = dirfd(open_fds);
    for (struct dirent *entry; (entry = readdir(open_fds)) != NULL;) {
      int fd = atoi(entry->d_name);
      if (fd > 2 && fd != listed && fd != listen_fd) close(fd);
    }
    closedir(open_fds);
  }
  fcntl(listen_fd, F_SETFD, FD_CLOEXEC);
  signal(SIGHUP, SIG_IGN);
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  sigaddset(&handled, SIGTERM);
  sigprocmask(SIG_BLOCK, &handled, &H.shell_mask);
  H.signal_fd = signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  if (H.signal_fd < 0) finish(1);
  H.listen_fd = listen_fd;
  H.pty = (struct pty_shell){ -1, -1, 0, 0 };
  H.controller = (struct conn){ -1, NULL, 0, NULL, 0, 0, 0 };
  for (int i = 0; i < MAX_PENDING; i++) H.pending[i] = (struct conn){ -1, NULL, 0, NULL, 0, 0, 0 };
  H.self_start = start_of(getpid());
  H.detached_at = now_ms();
  read_line("/proc/sys/kernel/random/boot_id", H.boot_id, sizeof H.boot_id);
  struct stat ns;
  snprintf(H.pidns, sizeof H.pidns, "%llu", stat("/proc/self/ns/pid", &ns) == 0 ? (unsigned long long)ns.st_ino : 0ULL);
  H.started = 0;
  serve();
  return 0;
}

int hold(const char *stem, const unsigned char *first, size_t first_len, const sigset_t *mask) {
  signal(SIGPIPE, SIG_IGN);
  char error[512] = "";
  int listen_fd = listen_at(stem, error, sizeof error);
  if (listen_fd < 0) {
    report_start_error(error);
    return 1;
  }
  pid_t daemon = fork();
  if (daemon < 0) {
    snprintf(error, sizeof error, "%s: fork: %s", errno_name(errno), errno_text(errno));
    report_start_error(error);
    unlink(H.sock_path);
    return 1;
  }
  if (daemon > 0) {
    close(listen_fd);
    return relay(H.sock_path, first, first_len);
  }
  /* The holder must carry no client's session tag (ownership.ts): the next client's reaper ends
   * the processes whose /proc/PID/environ names a dead client, and that file keeps the
   * environment of the process's last execve(2) whatever is unset later. So a holder forked from
   * a tagged process (a pooled exec, an exec channel) runs itself again without the tag; the
   * listening socket goes along as an inherited fd. */
  sigprocmask(SIG_SETMASK, mask, NULL);
  if (getenv(TAG_VARIABLE) == NULL) return held(listen_fd);
  unsetenv(TAG_VARIABLE);
  fcntl(listen_fd, F_SETFD, 0);
  char fd_text[16];
  snprintf(fd_text, sizeof fd_text, "%d", listen_fd);
  execl("/proc/self/exe", "dsh-pty", "--held", stem, fd_text, (char *)NULL);
  /* Without /proc the holder cannot shed the tag: refuse rather than hold a shell the next
   * client's reaper would end. The relay sees the socket close and ends too. */
  snprintf(error, sizeof error, "%s: exec /proc/self/exe (the holder running itself without the client's session tag): %s", errno_name(errno), errno_text(errno));
  report_start_error(error);
  unlink(H.sock_path);
  _exit(1);
}

int hold_inherited(const char *stem, const char *fd_text) {
  char error[512] = "";
  char *end;
  long fd = strtol(fd_text, &end, 10);
  if (*end != 0 || fd < 3 || fd > 1024 || name_paths(stem, error, sizeof error) < 0) return 2;
  signal(SIGPIPE, SIG_IGN);
  return held((int)fd);
}
