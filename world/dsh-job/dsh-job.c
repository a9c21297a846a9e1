/*
 * dsh-job: the world-side holder of a background job that outlives its client (issue 35).
 *
 * A job (DSH's `bash` tool with run_in_background, through ctx.jobs) runs a program whose output
 * a client reads later, maybe after the client that started it died. dsh-job keeps the program,
 * its exit status and its output in the world, keyed by a name the client chose, so a later
 * client of the same DSH session finds it again (src/jobs/: the client half).
 *
 * Two verbs, each run by the client over a plain non-PTY exec (Docker) or exec channel (SSH):
 *
 *   dsh-job run DIR KEY TTL_S LOG_BYTES NONCE META SCRIPT
 *     Starts `/bin/sh -c SCRIPT` (the client's process wrapper of nonce NONCE: it publishes the
 *     program's pid and start time on stdout and its wait status on stderr as its last line,
 *     src/providers/remote/process-wrapper.ts)
 *     under a HOLDER that belongs to no client: a daemon (a session of its own, SIGHUP ignored,
 *     stdio on /dev/null, without the client's session tag DSH_REMOTE_SESSION, so no reaper of
 *     a dead client takes it). The program's stdin is /dev/null; its stdout and stderr go to two
 *     output rings, DIR/KEY.out and DIR/KEY.err (ring.h), LOG_BYTES each, read whatever happens
 *     to the client, so a job never blocks on a client that is gone.
 *     Before the job starts it writes META (the client's record of the job, one line) as
 *     DIR/KEY.meta, so a client killed at any instant after this exec began leaves a job that
 *     a later client finds. Once the program runs it sends the frame `S` (below) and goes on as
 *     `tail DIR KEY 0 0` on the same stdout: one exec starts a job and reads it.
 *     DIR must be a private directory of this uid (0700, not a symlink); it is made if missing.
 *     KEY is [A-Za-z0-9._-]{1,64} and must be new.
 *     The holder writes DIR/KEY.state (replaced atomically): `running HOLDER_PID CHILD_PID`, then
 *     `exited CODE HOLDER_PID` or `killed SIGNAL HOLDER_PID` when the script's process ended
 *     (the wrapper's own status), then `ended exited CODE` / `ended killed SIGNAL` (the job's
 *     status, from the wrapper's exit trailer; the wrapper's where none came) once its output is
 *     complete (every writer of the two pipes closed them: background children of the job keep
 *     them open), nothing of the job runs any more, and the holder is about to exit.
 *     Once the wrapper's start marker (`\nDSHB<NONCE>:...\n`) went by on stdout, the holder writes
 *     DIR/KEY.start: the stdout offset where the program's own bytes begin, and a newline, so a
 *     reader whose ring dropped the marker counts only the program's bytes as dropped.
 *     The holder is the child subreaper of the job (prctl(2) PR_SET_CHILD_SUBREAPER): whatever
 *     the job starts stays its descendant, whichever session it moves to and whoever its parent
 *     was. Ending the job is SIGTERM to every descendant, SIGKILL to those left 2 s later. It
 *     happens after TTL_S seconds (0: never) in which nobody touched DIR/KEY.touch (a reader
 *     does, see tail), at once on SIGTERM to the holder, and to what is left when the script's
 *     process ended and the output is complete (a `cmd &` writing elsewhere, a process that
 *     ignores SIGTERM): once the holder is gone, nothing could find or end it.
 *
 *   dsh-job tail DIR KEY OUT_OFFSET ERR_OFFSET
 *     Sends the job's output from those offsets, as it comes, then its end, as frames on stdout
 *     (u8 type, u32 payload length, payload; little-endian):
 *       O  u64 offset, bytes: stdout from that offset. A gap from the offset asked for (or the
 *          last frame's end) is output the ring no longer kept (dropped).
 *       E  the same, stderr.
 *       X  the final state line (`ended exited CODE` | `ended killed SIGNAL`), after all output:
 *          the last frame, then dsh-job exits 0.
 *       e  text: why it cannot tail (no such job, not a ring), or (run) why the job did not
 *          start (`ECODE: reason`); then it exits 1.
 *       S  text `started HOLDER_PID` (run only): the first frame, once the program runs.
 *       C  text `OUT ERR` (or `error TEXT`): the answer to a `c` request, below.
 *       Y  empty: the answer to an `s` request, below.
 *     It reads lines on stdin: `c OUT ERR` records how far the reader has read (decimal
 *     offsets) as DIR/KEY.cursor, `OUT ERR` and a newline, replaced atomically, so a later
 *     reader resumes there; `s` asks for a `Y` once every byte the rings held when it arrived
 *     was sent (a reader's "caught up"; the job's end answers it too, with its `X`); other lines
 *     are ignored. Each `c` is answered, in order, once the file is replaced (or with why not).
 *     It touches DIR/KEY.touch when it starts and every 60 s, and ends at its stdin's EOF (the
 *     client is gone). It waits for output with inotify on DIR (inotify(7)), and polls every
 *     second where that is refused.
 *
 * The protocol version is PROTOCOL, said by `--version`. The client half:
 * src/jobs/job-holder.ts. Built by world/build.sh from this folder and world/common/ (static,
 * x86_64 and aarch64) into dist/world-tools/linux-ARCH/dsh-job; the client copies it into a
 * world by content hash and runs it only once verified (src/providers/remote/world-tools/).
 * Nothing here depends on the client: a client killed at any instant leaves a job that runs on,
 * logs on, and ends by itself at its TTL.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "errno-text.h"
#include "launched.h"
#include "ring.h"
#include "world-arch.h"

#define PROTOCOL "3"
/* The session tag variable of ownership.ts (SESSION_TAG_VARIABLE), which the holder must not carry. */
#define TAG_VARIABLE "DSH_REMOTE_SESSION"
/* Bounds of LOG_BYTES (bytes). */
#define LOG_MIN (64u * 1024u)
#define LOG_MAX (1u << 30)
/* Output frames carry at most this (bytes). */
#define CHUNK (64u * 1024u)
/* After the TTL's SIGTERM, how long the job's session may take before SIGKILL (ms). */
#define KILL_GRACE_MS 2000
/* How often a tail touches KEY.touch (s). */
#define TOUCH_EVERY_S 60

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int valid_key(const char *key) {
  size_t n = strlen(key);
  if (n == 0 || n > 64 || key[0] == '.') return 0;
  for (size_t i = 0; i < n; i++) {
    char c = key[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-')) return 0;
  }
  return 1;
}

/* DIR made if missing, and trusted only when it is a private directory of this uid. */
static int private_dir(const char *dir) {
  mkdir(dir, 0700);
  struct stat st;
  return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() && (st.st_mode & 077) == 0 ? 0 : -1;
}

static void path_of(char *out, size_t size, const char *dir, const char *key, const char *suffix) {
  snprintf(out, size, "%s/%s.%s", dir, key, suffix);
}

/* Replace DIR/KEY.SUFFIX with `text` (a temporary file renamed over it): 0, or -1 with errno. */
static int replace_file(const char *dir, const char *key, const char *suffix, const char *text) {
  char path[PATH_MAX], temporary[PATH_MAX + 24];
  path_of(path, sizeof path, dir, key, suffix);
  snprintf(temporary, sizeof temporary, "%s.%ld", path, (long)getpid());
  int fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return -1;
  size_t length = strlen(text);
  int ok = write(fd, text, length) == (ssize_t)length;
  int saved = errno;
  close(fd);
  if (!ok || rename(temporary, path) < 0) { if (ok) saved = errno; unlink(temporary); errno = saved; return -1; }
  return 0;
}

static void write_state(const char *dir, const char *key, const char *text) {
  replace_file(dir, key, "state", text);
}

static void touch(const char *dir, const char *key) {
  char path[PATH_MAX];
  path_of(path, sizeof path, dir, key, "touch");
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd >= 0) { futimens(fd, NULL); close(fd); }
}

static void send_frame(char type, const void *head, size_t head_length, const void *payload, size_t length);
static int tail(const char *dir, const char *key, const char *out_text, const char *err_text);

/* Report why the job cannot start, as an `e` frame. */
static int refuse(const char *format, ...) __attribute__((format(printf, 1, 2)));
static int refuse(const char *format, ...) {
  char text[PATH_MAX + 256];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  send_frame('e', text, strlen(text), NULL, 0);
  return 1;
}

/* Write `text` and a newline as DIR/KEY.meta (the client's record of the job: job-records.ts). */
static int write_meta(const char *dir, const char *key, const char *text) {
  char *line;
  if (asprintf(&line, "%s\n", text) < 0) return -1;
  int result = replace_file(dir, key, "meta", line);
  free(line);
  return result;
}

/* ---------- run ---------- */

/* Field `wanted` (proc(5) numbering, >= 3) of /proc/PID/stat, or -1. */
static long long stat_field(pid_t pid, int wanted) {
  char path[64], text[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return -1;
  text[n] = 0;
  char *rest = NULL;
  for (char *at = strstr(text, ") "); at != NULL; at = strstr(at + 1, ") ")) rest = at + 2;
  if (rest == NULL) return -1;
  int field = 3;
  for (char *p = rest; *p; p++) {
    if (field == wanted) return strtoll(p, NULL, 10);
    if (*p == ' ') field++;
  }
  return -1;
}

/* Send `signo` (0: only count) to every process of the job: every descendant of the holder.
 * The holder is the child subreaper of its job (PR_SET_CHILD_SUBREAPER, prctl(2)), so what the
 * job started stays its descendant when its parent ends, a session of its own (the program's:
 * the wrapper starts it with setsid) and a double fork included. Returns how many processes it
 * found (at most MAX_JOB_PROCS are looked at). */
#define MAX_JOB_PROCS 4096
static int signal_descendants(int signo) {
  static pid_t pids[MAX_JOB_PROCS], parents[MAX_JOB_PROCS];
  static char mine[MAX_JOB_PROCS];
  pid_t self = getpid();
  int count = 0;
  DIR *proc = opendir("/proc");
  if (proc == NULL) return 0;
  for (struct dirent *entry; count < MAX_JOB_PROCS && (entry = readdir(proc)) != NULL;) {
    char *end;
    long pid = strtol(entry->d_name, &end, 10);
    if (*end != 0 || pid <= 0 || pid == self) continue;
    pids[count] = (pid_t)pid;
    parents[count] = (pid_t)stat_field((pid_t)pid, 4);
    mine[count] = parents[count] == self;
    count++;
  }
  closedir(proc);
  /* To a fixed point: a parent may come after its child in /proc. */
  for (int changed = 1; changed;) {
    changed = 0;
    for (int i = 0; i < count; i++) {
      if (mine[i]) continue;
      for (int j = 0; j < count; j++) if (mine[j] && pids[j] == parents[i]) { mine[i] = 1; changed = 1; break; }
    }
  }
  int found = 0;
  for (int i = 0; i < count; i++) if (mine[i]) { found++; kill(pids[i], signo); }
  return found;
}

static void status_text(char *out, size_t size, int status) {
  if (WIFSIGNALED(status)) snprintf(out, size, "killed %d", WTERMSIG(status));
  else snprintf(out, size, "exited %d", WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

/* The last bytes of the job's stderr kept, where the wrapper's exit trailer ends up. */
#define TRAILER_ROOM 256

/* The job's own status from the wrapper's exit trailer `DSHE<nonce>:STATUS:REPORT\n`, the
 * last line of `tail` (src/providers/remote/process-wrapper.ts), as its client reads it
 * (process.ts outcomeOfTrailer): STATUS up to 128 is the exit code; above, with a REPORT (the
 * shell's description of a signal death), death by signal STATUS-128; else the exit code.
 * Writes `exited CODE` / `killed SIGNAL` and returns 1, or returns 0 when no trailer ends it. */
static int trailer_status(char *out, size_t size, const char *nonce, const unsigned char *tail, size_t length) {
  char tag[80];
  snprintf(tag, sizeof tag, "DSHE%s:", nonce);
  if (length == 0 || tail[length - 1] != '\n') return 0;
  const unsigned char *found = NULL;
  size_t tag_length = strlen(tag);
  for (size_t at = 0; at + tag_length <= length; at++) if (memcmp(tail + at, tag, tag_length) == 0) found = tail + at;
  if (found == NULL) return 0;
  const char *fields = (const char *)found + tag_length;
  char *end;
  long status = strtol(fields, &end, 10);
  if (end == fields || *end != ':' || status < 0 || status > 255) return 0;
  int reported = end[1] != '\n' && end[1] != 0;
  if (status > 128 && reported) snprintf(out, size, "killed %ld", status - 128);
  else snprintf(out, size, "exited %ld", status);
  return 1;
}

/* Where the start marker must have ended, if anywhere (bytes of stdout looked at). */
#define MARKER_ROOM 512

/* Look for the end of the wrapper's start marker `DSHB<nonce>:...\n` in the first bytes of
 * stdout (`head`, `length` of them); write DIR/KEY.start and return 1 once found. */
static int note_program_start(const char *dir, const char *key, const char *nonce, const unsigned char *head, size_t length) {
  char tag[80];
  snprintf(tag, sizeof tag, "DSHB%s:", nonce);
  size_t tag_length = strlen(tag);
  for (size_t at = 0; at + tag_length <= length; at++) {
    if (memcmp(head + at, tag, tag_length) != 0) continue;
    const unsigned char *end = memchr(head + at + tag_length, '\n', length - at - tag_length);
    if (end == NULL) return 0;
    char text[32];
    snprintf(text, sizeof text, "%zu\n", (size_t)(end + 1 - head));
    replace_file(dir, key, "start", text);
    return 1;
  }
  return 0;
}

/* Reap every ended child of the holder (its job's orphans come to it); returns 1 when `child`
 * was among them, with its wait status. */
static int reap(pid_t child, int *status) {
  int got, found = 0;
  for (pid_t pid; (pid = waitpid(-1, &got, WNOHANG)) > 0;) if (pid == child) { *status = got; found = 1; }
  return found;
}

/* The holder's life (see the top): relay the two pipes into the rings until both ended and the
 * script's process was reaped; end the job at its TTL or at SIGTERM; then end what the job left
 * behind (SIGTERM, SIGKILL after the grace), and record its end. */
static int holder(const char *dir, const char *key, const char *nonce, unsigned ttl, uint64_t capacity, int out_ring, int err_ring, int out_pipe, int err_pipe, pid_t child) {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGTERM);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  uint64_t heads[2] = { 0, 0 };
  int rings[2] = { out_ring, err_ring };
  int pipes[2] = { out_pipe, err_pipe };
  int reaped = 0, status = 0, ending = 0;
  long long kill_at = -1;
  char line[128];
  static unsigned char buffer[CHUNK];
  static unsigned char last[TRAILER_ROOM];
  size_t kept = 0;
  static unsigned char head[MARKER_ROOM];
  size_t seen = 0;
  int looking = 1;
  for (;;) {
    if (reaped && pipes[0] < 0 && pipes[1] < 0) break;
    struct pollfd fds[3] = { { sfd, POLLIN, 0 }, { pipes[0], POLLIN, 0 }, { pipes[1], POLLIN, 0 } };
    int timeout = kill_at >= 0 ? (int)(kill_at - now_ms() > 0 ? kill_at - now_ms() : 0) : ttl > 0 ? 30000 : -1;
    int ready = poll(fds, 3, timeout);
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; i++) {
      if (pipes[i] < 0 || !(fds[1 + i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(pipes[i], buffer, sizeof buffer);
      if (n > 0) {
        ring_append(rings[i], capacity, &heads[i], buffer, (size_t)n);
        if (i == 0 && looking) {
          size_t take = (size_t)n < MARKER_ROOM - seen ? (size_t)n : MARKER_ROOM - seen;
          memcpy(head + seen, buffer, take);
          seen += take;
          if (note_program_start(dir, key, nonce, head, seen) || seen == MARKER_ROOM) looking = 0;
        }
        if (i == 1) {
          size_t take = (size_t)n < TRAILER_ROOM ? (size_t)n : TRAILER_ROOM;
          if (kept + take > TRAILER_ROOM) { memmove(last, last + (kept + take - TRAILER_ROOM), TRAILER_ROOM - take); kept = TRAILER_ROOM - take; }
          memcpy(last + kept, buffer + (size_t)n - take, take);
          kept += take;
        }
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) { close(pipes[i]); pipes[i] = -1; }
    }
    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo info;
      while (read(sfd, &info, sizeof info) == (ssize_t)sizeof info) {
        if (info.ssi_signo == SIGTERM && !ending) { ending = 1; signal_descendants(SIGTERM); kill_at = now_ms() + KILL_GRACE_MS; }
      }
      if (reap(child, &status) && !reaped) {
        reaped = 1;
        char text[32];
        status_text(text, sizeof text, status);
        snprintf(line, sizeof line, "%s %ld\n", text, (long)getpid());
        write_state(dir, key, line);
      }
    }
    if (kill_at >= 0 && now_ms() >= kill_at) { signal_descendants(SIGKILL); kill_at = -1; }
    if (ttl > 0 && !ending) {
      char path[PATH_MAX];
      struct stat st;
      path_of(path, sizeof path, dir, key, "touch");
      if (stat(path, &st) == 0 && time(NULL) - st.st_mtime > (time_t)ttl) {
        ending = 1;
        signal_descendants(SIGTERM);
        kill_at = now_ms() + KILL_GRACE_MS;
      }
    }
  }
  /* The job ended, but what it started may run on (a `cmd &` with its output elsewhere, a
   * process that ignored SIGTERM): nobody could find or end it once the holder is gone. Ended
   * orphans are reaped first, so a zombie does not count as left. */
  reap(child, &status);
  if (signal_descendants(SIGTERM) > 0) {
    long long deadline = now_ms() + KILL_GRACE_MS;
    while (now_ms() < deadline && signal_descendants(0) > 0) {
      struct pollfd fds[1] = { { sfd, POLLIN, 0 } };
      poll(fds, 1, 50);
      struct signalfd_siginfo info;
      while (read(sfd, &info, sizeof info) == (ssize_t)sizeof info) {}
      reap(child, &status);
    }
    signal_descendants(SIGKILL);
    for (int tries = 0; tries < 40 && signal_descendants(0) > 0; tries++) {
      struct pollfd fds[1] = { { sfd, POLLIN, 0 } };
      poll(fds, 1, 25);
      struct signalfd_siginfo info;
      while (read(sfd, &info, sizeof info) == (ssize_t)sizeof info) {}
      reap(child, &status);
    }
  }
  char text[32];
  if (!trailer_status(text, sizeof text, nonce, last, kept)) status_text(text, sizeof text, status);
  snprintf(line, sizeof line, "ended %s\n", text);
  write_state(dir, key, line);
  return 0;
}

/* `run` (see the top). */
/* A wrapper nonce: [0-9a-f]{1,64}. */
static int valid_nonce(const char *nonce) {
  size_t n = strlen(nonce);
  if (n == 0 || n > 64) return 0;
  for (size_t i = 0; i < n; i++) if (!((nonce[i] >= '0' && nonce[i] <= '9') || (nonce[i] >= 'a' && nonce[i] <= 'f'))) return 0;
  return 1;
}

static int run(const char *dir, const char *key, const char *ttl_text, const char *log_text, const char *nonce, const char *meta, const char *script) {
  char *end;
  unsigned long ttl = strtoul(ttl_text, &end, 10);
  unsigned long long capacity = strtoull(log_text, &end, 10);
  if (!valid_key(key)) return refuse("EINVAL: the job key %s is not [A-Za-z0-9._-]{1,64}", key);
  if (!valid_nonce(nonce)) return refuse("EINVAL: the wrapper nonce %s is not [0-9a-f]{1,64}", nonce);
  if (capacity < LOG_MIN || capacity > LOG_MAX) return refuse("EINVAL: LOG_BYTES must be %u to %u", LOG_MIN, LOG_MAX);
  if (private_dir(dir) < 0) return refuse("EACCES: the jobs directory %s is not a private directory of uid %u", dir, (unsigned)getuid());
  char path[PATH_MAX];
  path_of(path, sizeof path, dir, key, "out");
  int out_ring = ring_create(path, capacity);
  if (out_ring < 0) return refuse("%s: %s: %s", errno == EEXIST ? "EEXIST" : "EIO", path, errno_text(errno));
  path_of(path, sizeof path, dir, key, "err");
  int err_ring = ring_create(path, capacity);
  if (err_ring < 0) return refuse("EIO: %s: %s", path, errno_text(errno));
  if (write_meta(dir, key, meta) < 0) return refuse("EIO: the record of job %s cannot be written: %s", key, errno_text(errno));
  touch(dir, key);
  int out_pipe[2], err_pipe[2], ready[2];
  if (pipe2(out_pipe, O_CLOEXEC) < 0 || pipe2(err_pipe, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0) return refuse("EIO: pipe: %s", errno_text(errno));
  fflush(stdout);
  pid_t daemon = fork();
  if (daemon < 0) return refuse("EAGAIN: fork: %s", errno_text(errno));
  if (daemon > 0) {
    /* The exec's own process: says where the holder is once the script runs, then follows the
     * job's output. */
    close(ready[1]);
    close(out_pipe[0]); close(out_pipe[1]); close(err_pipe[0]); close(err_pipe[1]);
    close(out_ring); close(err_ring);
    char said[256];
    ssize_t n = read(ready[0], said, sizeof said - 1);
    close(ready[0]);
    if (n <= 0) return refuse("EIO: the holder ended before the job started");
    said[n] = 0;
    said[strcspn(said, "\n")] = 0;
    if (strncmp(said, "started ", 8) != 0) return refuse("%s", strncmp(said, "error ", 6) == 0 ? said + 6 : said);
    send_frame('S', said, strlen(said), NULL, 0);
    return tail(dir, key, "0", "0");
  }
  /* The holder. */
  setsid();
  prctl(PR_SET_NAME, "dsh-job", 0, 0, 0);
  /* Orphans of the job become the holder's children, so it can always find and end them. */
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  unsetenv(TAG_VARIABLE);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGTERM);
  sigset_t old;
  sigprocmask(SIG_BLOCK, &mask, &old);
  pid_t child = fork();
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &old, NULL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, 0) < 0 || dup2(out_pipe[1], 1) < 0 || dup2(err_pipe[1], 2) < 0) _exit(126);
    execl("/bin/sh", "sh", "-c", script, (char *)NULL);
    dprintf(2, "dsh-job: /bin/sh: %s\n", errno_text(errno));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  char said[64];
  if (child < 0) snprintf(said, sizeof said, "error EAGAIN: fork: %s\n", errno_text(errno));
  else {
    /* The state names the holder before anyone is told the job runs. */
    snprintf(said, sizeof said, "running %ld %ld\n", (long)getpid(), (long)child);
    write_state(dir, key, said);
    snprintf(said, sizeof said, "started %ld\n", (long)getpid());
  }
  ssize_t ignored = write(ready[1], said, strlen(said));
  (void)ignored;
  close(ready[1]);
  close(ready[0]);
  if (child < 0) _exit(1);
  /* Nothing of the exec stays open: its stream ends with the first process. */
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) { dup2(null, 0); dup2(null, 1); dup2(null, 2); }
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  _exit(holder(dir, key, nonce, (unsigned)ttl, capacity, out_ring, err_ring, out_pipe[0], err_pipe[0], child));
}

/* ---------- tail ---------- */

static void send_frame(char type, const void *head, size_t head_length, const void *payload, size_t length) {
  unsigned char header[5] = { (unsigned char)type };
  uint32_t total = (uint32_t)(head_length + length);
  for (int i = 0; i < 4; i++) header[1 + i] = (unsigned char)(total >> (8 * i));
  const unsigned char *parts[3] = { header, head, payload };
  size_t sizes[3] = { sizeof header, head_length, length };
  for (int p = 0; p < 3; p++) {
    const unsigned char *at = parts[p];
    size_t left = sizes[p];
    while (left > 0) {
      ssize_t n = write(1, at, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(0);
      at += n;
      left -= (size_t)n;
    }
  }
}

static void fail(const char *text) {
  send_frame('e', text, strlen(text), NULL, 0);
  _exit(1);
}

/* Send what ring `fd` holds from *offset on, as `type` frames. Returns 1 when it sent any. */
static int send_new(int fd, char type, uint64_t *offset) {
  static unsigned char buffer[CHUNK];
  int sent = 0;
  for (;;) {
    struct ring_read got;
    if (ring_read(fd, *offset, buffer, sizeof buffer, &got) < 0) fail("the job's output log cannot be read");
    if (got.length == 0) return sent;
    unsigned char where[8];
    for (int i = 0; i < 8; i++) where[i] = (unsigned char)(got.offset >> (8 * i));
    send_frame(type, where, 8, buffer, got.length);
    *offset = got.offset + got.length;
    sent = 1;
  }
}

static void read_state(const char *dir, const char *key, char *out, size_t size) {
  char path[PATH_MAX];
  path_of(path, sizeof path, dir, key, "state");
  out[0] = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = read(fd, out, size - 1);
  close(fd);
  out[n > 0 ? n : 0] = 0;
  out[strcspn(out, "\n")] = 0;
}

/* One request line of a tail's reader (see the top): `c OUT ERR` records its offsets; `s`
 * counts one more sync to answer after the next pass over the rings. */
static void answer(const char *dir, const char *key, const char *line, unsigned *syncs) {
  unsigned long long out, err;
  char text[64], end;
  if (strcmp(line, "s") == 0) { (*syncs)++; return; }
  if (sscanf(line, "c %llu %llu%c", &out, &err, &end) != 2) return;
  snprintf(text, sizeof text, "%llu %llu\n", out, err);
  if (replace_file(dir, key, "cursor", text) == 0) send_frame('C', text, strlen(text) - 1, NULL, 0);
  else {
    snprintf(text, sizeof text, "error %s", errno_text(errno));
    send_frame('C', text, strlen(text), NULL, 0);
  }
}

static int tail(const char *dir, const char *key, const char *out_text, const char *err_text) {
  signal(SIGPIPE, SIG_IGN);
  if (!valid_key(key)) fail("EINVAL: not a job key");
  char path[PATH_MAX];
  path_of(path, sizeof path, dir, key, "out");
  int out_ring = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  path_of(path, sizeof path, dir, key, "err");
  int err_ring = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (out_ring < 0 || err_ring < 0) fail("ENOENT: no such job");
  uint64_t offsets[2] = { strtoull(out_text, NULL, 10), strtoull(err_text, NULL, 10) };
  int watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (watch >= 0 && inotify_add_watch(watch, dir, IN_MODIFY | IN_MOVED_TO | IN_CLOSE_WRITE) < 0) { close(watch); watch = -1; }
  touch(dir, key);
  long long touched = now_ms();
  char state[128];
  char request[128];
  size_t requested = 0;
  unsigned syncs = 0;
  for (;;) {
    /* The state first: output read after an `ended` state is all there will be. */
    read_state(dir, key, state, sizeof state);
    send_new(out_ring, 'O', &offsets[0]);
    send_new(err_ring, 'E', &offsets[1]);
    if (strncmp(state, "ended ", 6) == 0) {
      send_frame('X', state, strlen(state), NULL, 0);
      return 0;
    }
    /* Asked before this pass began: every byte held then has been sent. */
    for (; syncs > 0; syncs--) send_frame('Y', "", 0, NULL, 0);
    if (now_ms() - touched >= TOUCH_EVERY_S * 1000LL) { touch(dir, key); touched = now_ms(); }
    struct pollfd fds[2] = { { 0, POLLIN, 0 }, { watch, POLLIN, 0 } };
    int ready = poll(fds, 2, watch >= 0 ? 10000 : 1000);
    if (ready < 0 && errno != EINTR) return 1;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t n = read(0, request + requested, sizeof request - 1 - requested);
      if (n <= 0) return 0;
      requested += (size_t)n;
      char *line_end;
      while ((line_end = memchr(request, '\n', requested)) != NULL) {
        *line_end = 0;
        answer(dir, key, request, &syncs);
        size_t used = (size_t)(line_end + 1 - request);
        memmove(request, line_end + 1, requested - used);
        requested -= used;
      }
      /* A line longer than any request is no request: dropped. */
      if (requested == sizeof request - 1) requested = 0;
    }
    if (watch >= 0 && (fds[1].revents & POLLIN)) {
      char events[4096];
      while (read(watch, events, sizeof events) > 0) {}
    }
  }
}

int main(int argc, char **argv) {
  launched_as("dsh-job");
  if (argc > 1 && strcmp(argv[1], "--version") == 0) { printf("dsh-job " PROTOCOL " " ARCH "\n"); return 0; }
  if (argc == 9 && strcmp(argv[1], "run") == 0) {
    signal(SIGPIPE, SIG_IGN);
    return run(argv[2], argv[3], argv[4], argv[5], argv[6], argv[7], argv[8]);
  }
  if (argc == 6 && strcmp(argv[1], "tail") == 0) return tail(argv[2], argv[3], argv[4], argv[5]);
  fprintf(stderr, "usage: dsh-job run DIR KEY TTL_S LOG_BYTES NONCE META SCRIPT | dsh-job tail DIR KEY OUT_OFFSET ERR_OFFSET\n");
  return 2;
}
