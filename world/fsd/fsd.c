/*
 * dsh-fsd: the world file server of dsh-remote-worlds (the filesystem half, ctx.fs).
 *
 * One process per (world, user, confinement), started by the client over a non-PTY exec (Docker)
 * or an exec channel (SSH), inside the same confinement as the world's shells (the container's
 * own mounts; bubblewrap over SSH). It speaks a framed binary protocol on stdin/stdout and
 * answers one request at a time, in order. It holds no state a client needs after it ends: a
 * client that dies closes stdin, and the server unlinks any half-written temporary file and exits.
 *
 * Frames (all integers little-endian): u32 payload length, u32 request id, u8 code, payload.
 * A payload of "fields" is a sequence of (u32 length, bytes). Codes of requests:
 *   p ping | r resolve(base, path) | s stat(path, follow) | o read(path, max) | f open(path)
 *   g pread(handle, offset, length) | c close(handle) | l list(path) | w write(...) + content
 *   q quit
 * Replies: K ok, A absent, D data (part of a longer reply), S size (of the data to come, as
 * decimal digits), E error(code, message). No frame this server sends has a payload over
 * MAX_REPLY (1 MiB): the largest are D frames and pread replies of one DATA_CHUNK (256 KiB), a
 * listing's D frames (a chunk plus one entry) and a resolve reply (a key and at most a chunk of
 * prefetched content). The client refuses a longer frame as not this protocol
 * (src/files/protocol.ts MAX_REPLY_FRAME_BYTES). Requests are at most MAX_REQUEST; a write's
 * content follows its frame raw.
 * The first frame the server sends is H (hello): fields "dsh-fsd", protocol, uid, gid, pid,
 * arch, umask. The protocol is PROTOCOL below (2), bumped with any frame change.
 *
 * The client half: src/files/protocol.ts (the frames; its PROTOCOL_VERSION is this PROTOCOL, and
 * a hello naming another is refused) and src/files/server-channel.ts (one server's channel).
 * Built by world/build.sh from this folder and world/common/ (static, x86_64 and aarch64) into
 * dist/world-tools/linux-ARCH/dsh-fsd; the client copies it into a world's cache by content hash
 * and runs it only once verified (src/providers/remote/world-tools/install.ts, launch.ts).
 *
 * Facts this file relies on, with their sources:
 * - flock(2) on a directory fd locks that directory's open file description across every
 *   process of the kernel, whatever the uid; it is released when the holder exits.
 * - rename(2) within one directory replaces the target atomically; link(2) fails with EEXIST
 *   when the new name exists (a no-replace publication).
 * - open(2) of a FIFO without O_NONBLOCK blocks until a writer appears: every open for reading
 *   uses O_NONBLOCK, and fstat decides before any read. Some regular files of the kernel's own
 *   filesystems block a read until they have data (/proc/kmsg; tracefs' trace_pipe): on those
 *   (pseudo_fs) O_NONBLOCK stays set, so such a read fails with EAGAIN at once, and resolve
 *   never prefetches them.
 * - /proc/self/fd/N names the path of an open directory (proc(5)); it is the containment check
 *   of a write's directory, taken on the fd the rename uses, so a swapped symlink cannot move it.
 *   The kernel renders that path into one page (d_path); a longer one makes readlink(2) fail
 *   with ENAMETOOLONG. The check is never made again by name then (a realpath of the name may
 *   see another directory than the one opened: one swapped back meanwhile): the write is
 *   refused as unproven.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define PROTOCOL "2"
#define MAX_REQUEST (64u * 1024u * 1024u)
#define MAX_REPLY (1u << 20)
#define DATA_CHUNK (256u * 1024u)
#define MAX_HANDLES 64
#define MAX_ROOTS 64
#define LOCK_WAIT_MS 10000

#include "errno-text.h"
#include "world-arch.h"
#include "launched.h"
#include "sha256.h"

/* ---------- output ---------- */

static void put32(unsigned char *p, uint32_t v) {
  p[0] = v & 255; p[1] = (v >> 8) & 255; p[2] = (v >> 16) & 255; p[3] = (v >> 24) & 255;
}

static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Write all of iov to stdout; a client that is gone (EPIPE, EBADF) ends the server. */
static void write_all(struct iovec *iov, int count) {
  while (count > 0) {
    ssize_t n = writev(1, iov, count);
    if (n < 0) {
      if (errno == EINTR) continue;
      _exit(0);
    }
    while (count > 0 && (size_t)n >= iov->iov_len) { n -= (ssize_t)iov->iov_len; iov++; count--; }
    if (count > 0) { iov->iov_base = (char *)iov->iov_base + n; iov->iov_len -= (size_t)n; }
  }
}

static void send_frame(uint32_t id, char code, const void *payload, size_t length) {
  /* Never reached by construction (see the head comment); a frame the client would refuse as
   * not this protocol ends the server instead. */
  if (length > MAX_REPLY) _exit(4);
  unsigned char header[9];
  put32(header, (uint32_t)length);
  put32(header + 4, id);
  header[8] = (unsigned char)code;
  struct iovec iov[2] = { { header, 9 }, { (void *)payload, length } };
  write_all(iov, length > 0 ? 2 : 1);
}

/* A growable buffer of fields. */
typedef struct { unsigned char *data; size_t length, capacity; } buf_t;

static void buf_reserve(buf_t *b, size_t more) {
  if (b->length + more <= b->capacity) return;
  size_t capacity = b->capacity < 4096 ? 4096 : b->capacity;
  while (capacity < b->length + more) capacity *= 2;
  unsigned char *data = realloc(b->data, capacity);
  if (data == NULL) _exit(3);
  b->data = data; b->capacity = capacity;
}

static void buf_field(buf_t *b, const void *bytes, size_t length) {
  buf_reserve(b, 4 + length);
  put32(b->data + b->length, (uint32_t)length);
  if (length > 0) memcpy(b->data + b->length + 4, bytes, length);
  b->length += 4 + length;
}

static void buf_str(buf_t *b, const char *text) { buf_field(b, text, strlen(text)); }

static void buf_num(buf_t *b, unsigned long long value) {
  char text[32];
  snprintf(text, sizeof text, "%llu", value);
  buf_str(b, text);
}

static void buf_free(buf_t *b) { free(b->data); b->data = NULL; b->length = b->capacity = 0; }

static void send_buf(uint32_t id, char code, buf_t *b) { send_frame(id, code, b->data, b->length); }

static const char *errno_name(int error) {
  switch (error) {
    case ENOENT: return "ENOENT";
    case ENOTDIR: return "ENOTDIR";
    case EISDIR: return "EISDIR";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EROFS: return "EROFS";
    case ELOOP: return "ELOOP";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case ENOSPC: return "ENOSPC";
    case EDQUOT: return "EDQUOT";
    case EEXIST: return "EEXIST";
    case EXDEV: return "EXDEV";
    case EBUSY: return "EBUSY";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case EIO: return "EIO";
    case EINVAL: return "EINVAL";
    case ETXTBSY: return "ETXTBSY";
    case EAGAIN: return "EAGAIN";
    default: return "EOTHER";
  }
}

/* E reply: a code (an errno name, or one of STALE EXISTS NOTREG TOOLARGE OUTSIDE UNPROVEN LOCKED
 * BADREQ BADHANDLE) and a message naming what failed. */
static void send_error(uint32_t id, const char *code, const char *what, const char *path) {
  buf_t b = { 0 };
  char message[PATH_MAX + 256];
  snprintf(message, sizeof message, "%s%s%s", what, path != NULL ? ": " : "", path != NULL ? path : "");
  buf_str(&b, code);
  buf_str(&b, message);
  send_buf(id, 'E', &b);
  buf_free(&b);
}

static void send_errno(uint32_t id, int error, const char *what, const char *path) {
  char text[256];
  snprintf(text, sizeof text, "%s (%s)", what, errno_text(error));
  send_error(id, errno_name(error), text, path);
}

/* ---------- input ---------- */

static unsigned char inbuf[256 * 1024];
static size_t in_start, in_end;

/* Read exactly `length` bytes of stdin into dst (NULL: discard). Returns 0 at EOF. */
static int read_exact(void *dst, size_t length) {
  unsigned char *out = dst;
  while (length > 0) {
    if (in_start == in_end) {
      ssize_t n = read(0, inbuf, sizeof inbuf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return 0;
      in_start = 0; in_end = (size_t)n;
    }
    size_t take = in_end - in_start < length ? in_end - in_start : length;
    if (out != NULL) { memcpy(out, inbuf + in_start, take); out += take; }
    in_start += take; length -= take;
  }
  return 1;
}

/* Fields of one request payload, each NUL-terminated in place (paths hold no NUL). */
typedef struct { unsigned char *payload; size_t length, offset; int bad; } fields_t;

static char *next_field(fields_t *f, size_t *length_out) {
  if (f->offset + 4 > f->length) { f->bad = 1; return NULL; }
  uint32_t length = get32(f->payload + f->offset);
  if (f->offset + 4 + length > f->length) { f->bad = 1; return NULL; }
  /* Shift the field 4 bytes left onto its own length and terminate it: one byte of room
   * is needed for the NUL, so the field moves onto its length prefix. */
  unsigned char *start = f->payload + f->offset;
  memmove(start, start + 4, length);
  start[length] = '\0';
  f->offset += 4 + length;
  if (length_out != NULL) *length_out = length;
  if (memchr(start, '\0', length) != NULL) { f->bad = 1; return NULL; }
  return (char *)start;
}

static long long field_number(fields_t *f) {
  char *text = next_field(f, NULL);
  if (text == NULL || *text == '\0') { f->bad = 1; return -1; }
  char *end;
  errno = 0;
  long long value = strtoll(text, &end, 10);
  if (*end != '\0' || errno != 0 || value < 0) { f->bad = 1; return -1; }
  return value;
}

/* ---------- stat records ---------- */

static char type_of(mode_t mode) {
  if (S_ISREG(mode)) return 'f';
  if (S_ISDIR(mode)) return 'd';
  if (S_ISLNK(mode)) return 'l';
  return 'o';
}

/* The version token: device, inode, size, mtime and ctime in ns. It changes when the content
 * is replaced (a new inode) or written in place (mtime, ctime and usually size). */
static void version_of(const struct stat *st, char *out, size_t size) {
  snprintf(out, size, "%llu:%llu:%lld:%lld.%09ld:%lld.%09ld",
    (unsigned long long)st->st_dev, (unsigned long long)st->st_ino, (long long)st->st_size,
    (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
}

/* Record fields: type, mode (octal permission bits), uid, gid, size, version. */
static void buf_record(buf_t *b, const struct stat *st) {
  char type[2] = { type_of(st->st_mode), 0 };
  char mode[16];
  char version[128];
  snprintf(mode, sizeof mode, "%o", (unsigned)(st->st_mode & 07777));
  version_of(st, version, sizeof version);
  buf_str(b, type);
  buf_str(b, mode);
  buf_num(b, st->st_uid);
  buf_num(b, st->st_gid);
  buf_num(b, (unsigned long long)st->st_size);
  buf_str(b, version);
}

/* ---------- resolve ---------- */

/* Join base and path: path when absolute, else base/path (no lexical clean-up: the kernel's
 * own component walk, symlinks before "..", is what realpath(3) applies). */
static int join_path(const char *base, const char *path, char *out, size_t size) {
  int n = path[0] == '/' ? snprintf(out, size, "%s", path) : snprintf(out, size, "%s/%s", base, path);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* Append the missing components (a reversed list, "." and ".." applied lexically: nothing below
 * them exists yet) to an existing canonical directory. */
static int append_missing(char *key, size_t size, char **missing, int count) {
  for (int i = count - 1; i >= 0; i--) {
    const char *part = missing[i];
    if (strcmp(part, ".") == 0 || part[0] == '\0') continue;
    if (strcmp(part, "..") == 0) {
      char *slash = strrchr(key, '/');
      if (slash == key) key[1] = '\0'; else if (slash != NULL) *slash = '\0';
      continue;
    }
    size_t length = strlen(key);
    int n = snprintf(key + length, size - length, "%s%s", length > 0 && key[length - 1] == '/' ? "" : "/", part);
    if (n < 0 || (size_t)n >= size - length) return -1;
  }
  return 0;
}

/* The canonical key of base+path: realpath of the file itself, or, when it does not exist, of
 * its deepest existing ancestor followed by the missing components. Returns 0, or an errno. */
static int canonical(const char *base, const char *path, char *key, size_t size, int *exists) {
  char joined[PATH_MAX * 2];
  if (join_path(base, path, joined, sizeof joined) != 0) return ENAMETOOLONG;
  /* Stripped components, copied out (the root case rewrites `joined` in place). */
  static char store[PATH_MAX * 2];
  char *missing[PATH_MAX / 2];
  size_t used = 0;
  int count = 0;
  for (;;) {
    char *real = realpath(joined, NULL);
    if (real != NULL) {
      int n = snprintf(key, size, "%s", real);
      free(real);
      if (n < 0 || (size_t)n >= size) return ENAMETOOLONG;
      *exists = count == 0;
      return append_missing(key, size, missing, count) == 0 ? 0 : ENAMETOOLONG;
    }
    if (errno != ENOENT) return errno;
    /* Strip the last component (and trailing slashes) into the missing list. */
    size_t length = strlen(joined);
    while (length > 1 && joined[length - 1] == '/') joined[--length] = '\0';
    char *slash = strrchr(joined, '/');
    if (slash == NULL || count >= (int)(sizeof missing / sizeof missing[0])) return ENOENT;
    size_t part = strlen(slash + 1);
    if (used + part + 1 > sizeof store) return ENAMETOOLONG;
    memcpy(store + used, slash + 1, part + 1);
    missing[count++] = store + used;
    used += part + 1;
    if (slash == joined) joined[1] = '\0'; else *slash = '\0';
  }
}

static int open_regular(const char *path, struct stat *st, const char **code);

/* Whether a filesystem is one of the kernel's own (statfs(2) f_type; the magic numbers of
 * include/uapi/linux/magic.h): its regular files are the kernel's interfaces, not stored data,
 * and a read of one may block until the kernel has something to say (/proc/kmsg). */
static int pseudo_fs(long type) {
  switch ((unsigned long)type & 0xffffffffUL) {
    case 0x9fa0UL:      /* PROC_SUPER_MAGIC */
    case 0x62656572UL:  /* SYSFS_MAGIC */
    case 0x64626720UL:  /* DEBUGFS_MAGIC */
    case 0x74726163UL:  /* TRACEFS_MAGIC */
    case 0x73636673UL:  /* SECURITYFS_MAGIC */
    case 0x62656570UL:  /* CONFIGFS_MAGIC */
    case 0xcafe4a11UL:  /* BPF_FS_MAGIC */
    case 0x27e0ebUL:    /* CGROUP_SUPER_MAGIC */
    case 0x63677270UL:  /* CGROUP2_SUPER_MAGIC */
    case 0x6165676cUL:  /* PSTOREFS_MAGIC */
    case 0xde5e81e4UL:  /* EFIVARFS_MAGIC */
    case 0x65735543UL:  /* FUSE_CTL_SUPER_MAGIC */
    case 0x42494e4dUL:  /* BINFMTFS_MAGIC */
    case 0xf97cff8cUL:  /* SELINUX_MAGIC */
    case 0x43415d53UL:  /* SMACK_MAGIC */
    case 0x6e736673UL:  /* NSFS_MAGIC */
      return 1;
    default:
      return 0;
  }
}

static int path_on_pseudo_fs(const char *path) {
  struct statfs fs;
  return statfs(path, &fs) == 0 && pseudo_fs(fs.f_type);
}

/* resolve(base, path[, prefetch]): K with the canonical key, "1" and the target's record (or
 * "0" when it does not exist), and, when `prefetch` is given and the target is a regular file
 * of at most that many bytes, "1" and its content (else "0"). The content and the record then
 * come from one open descriptor: what a read of the target right now would return, with its
 * version. A tool's read is resolve, stat, read; this answers all three in one round trip. */
static void op_resolve(uint32_t id, fields_t *f) {
  char *base = next_field(f, NULL);
  char *path = next_field(f, NULL);
  if (f->bad) { send_error(id, "BADREQ", "bad resolve request", NULL); return; }
  long long prefetch = f->offset < f->length ? field_number(f) : -1;
  if (f->bad) { send_error(id, "BADREQ", "bad resolve request", NULL); return; }
  /* At most one chunk, so the reply fits MAX_REPLY. */
  if (prefetch > (long long)DATA_CHUNK) prefetch = DATA_CHUNK;
  static char key[PATH_MAX * 2];
  int exists = 0;
  int error = canonical(base, path, key, sizeof key, &exists);
  if (error != 0) { send_errno(id, error, "cannot resolve", path); return; }
  buf_t b = { 0 };
  buf_str(&b, key);
  struct stat st;
  int fd = -1;
  const char *code;
  /* Present when the canonical key names a file now (also for `missing/../file`, whose key is
   * an existing file's: what a stat of the key, which every later call uses, says). */
  (void)exists;
  int present = stat(key, &st) == 0;
  /* Only a regular file is opened (stat first: opening a device can have effects of its own),
   * and never one of the kernel's (a read of /proc/kmsg waits for the kernel's next message). */
  if (present && prefetch >= 0 && S_ISREG(st.st_mode) && st.st_size <= prefetch && !path_on_pseudo_fs(key)) {
    struct stat opened;
    fd = open_regular(key, &opened, &code);
    struct statfs fs;
    /* Judged again on what was opened (the name may lead elsewhere by now). */
    if (fd >= 0 && (opened.st_size > prefetch || fstatfs(fd, &fs) != 0 || pseudo_fs(fs.f_type))) { close(fd); fd = -1; }
    if (fd >= 0) st = opened;
  }
  if (present) {
    buf_str(&b, "1");
    buf_record(&b, &st);
  } else {
    buf_str(&b, "0");
  }
  if (fd >= 0) {
    /* One byte past the record's size shows a file that grew meanwhile: then no content. */
    size_t room = (size_t)st.st_size + 1, total = 0;
    unsigned char *content = malloc(room);
    int failed = content == NULL;
    while (!failed && total < room) {
      ssize_t n = read(fd, content + total, room - total);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) failed = 1;
      if (n <= 0) break;
      total += (size_t)n;
    }
    close(fd);
    if (!failed && total == (size_t)st.st_size) { buf_str(&b, "1"); buf_field(&b, content, total); }
    else buf_str(&b, "0");
    free(content);
  } else if (prefetch >= 0) {
    buf_str(&b, "0");
  }
  send_buf(id, 'K', &b);
  buf_free(&b);
}

static void op_stat(uint32_t id, fields_t *f) {
  char *path = next_field(f, NULL);
  char *follow = next_field(f, NULL);
  if (f->bad) { send_error(id, "BADREQ", "bad stat request", NULL); return; }
  struct stat st;
  int rc = strcmp(follow, "1") == 0 ? stat(path, &st) : lstat(path, &st);
  if (rc != 0) {
    if (errno == ENOENT || errno == ENOTDIR) { send_frame(id, 'A', NULL, 0); return; }
    send_errno(id, errno, "cannot stat", path);
    return;
  }
  buf_t b = { 0 };
  buf_record(&b, &st);
  send_buf(id, 'K', &b);
  buf_free(&b);
}

/* ---------- reading ---------- */

/* Open a regular file for reading without blocking on a FIFO or a device (it is stat'ed first,
 * and the opened descriptor fstat'ed again: a file swapped meanwhile is judged as it is).
 * Returns the fd, or -1 with *code and errno set (code NOTREG for a directory or special file). */
static int open_regular(const char *path, struct stat *st, const char **code) {
  *code = NULL;
  /* stat first: opening a device (a tty, a tape) can have effects of its own, or fail with its
   * own errno (ENXIO for /dev/tty without a terminal) before the type is known. */
  if (stat(path, st) != 0) return -1;
  if (!S_ISREG(st->st_mode)) { *code = "NOTREG"; errno = 0; return -1; }
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return -1;
  if (fstat(fd, st) != 0) { int e = errno; close(fd); errno = e; return -1; }
  if (!S_ISREG(st->st_mode)) { close(fd); *code = "NOTREG"; errno = 0; return -1; }
  /* Blocking again only on a filesystem that stores data (where O_NONBLOCK changes nothing for
   * a regular file anyway); on the kernel's own it stays, so no read can wait (see pseudo_fs). */
  struct statfs fs;
  if (fstatfs(fd, &fs) == 0 && !pseudo_fs(fs.f_type)) {
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  }
  return fd;
}

static void send_open_error(uint32_t id, const char *code, const char *path) {
  if (code != NULL) send_error(id, code, "not a regular file", path);
  else send_errno(id, errno, "cannot open", path);
}

static unsigned char chunk[DATA_CHUNK];

/* The client is gone: its end of stdin closed (POLLHUP), as a client's death or a closed
 * channel does. Checked between the data frames of a long reply, so a server never streams on
 * for nobody (a container runtime drains its stdout whether a client listens or not). */
static int client_gone(void) {
  /* POLLHUP for a pipe whose writer closed; POLLRDHUP for a socket whose peer shut down. */
  struct pollfd in = { 0, POLLIN | POLLRDHUP, 0 };
  return poll(&in, 1, 0) > 0 && (in.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) != 0;
}

/* read(path, max): S with the opened file's size, D frames of the content, then K with its
 * record. A file over max (known from fstat, or found while reading: it grew, or a /proc file
 * whose size reads 0) is TOOLARGE; nothing past the bound is ever sent, and at most one chunk
 * past it is read. Every read asks for a whole chunk, never the few bytes left to the bound:
 * some files refuse a read of another size (/proc/PID/pagemap takes multiples of 8 bytes only,
 * EINVAL otherwise; fs/proc/task_mmu.c pagemap_read), which would end an over-long read as an
 * I/O error instead of TOOLARGE. */
static void op_read(uint32_t id, fields_t *f) {
  char *path = next_field(f, NULL);
  char *max_text = next_field(f, NULL);
  if (f->bad) { send_error(id, "BADREQ", "bad read request", NULL); return; }
  long long max = max_text[0] == '\0' ? -1 : atoll(max_text);
  struct stat st;
  const char *code;
  int fd = open_regular(path, &st, &code);
  if (fd < 0) { send_open_error(id, code, path); return; }
  if (max >= 0 && st.st_size > max) {
    close(fd);
    char text[128];
    snprintf(text, sizeof text, "%lld bytes exceeds the %lld-byte limit", (long long)st.st_size, max);
    send_error(id, "TOOLARGE", text, NULL);
    return;
  }
  /* S: the size the content has now, so the client can hold it in one buffer from the start. */
  char size_text[32];
  int size_length = snprintf(size_text, sizeof size_text, "%lld", (long long)st.st_size);
  send_frame(id, 'S', size_text, (size_t)size_length);
  long long total = 0;
  for (;;) {
    ssize_t n = read(fd, chunk, DATA_CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) { close(fd); send_error(id, "EAGAIN", "cannot read it without waiting (a kernel file that blocks a read until it has data)", path); return; }
    if (n < 0) { int e = errno; close(fd); send_errno(id, e, "cannot read", path); return; }
    if (n == 0) break;
    total += n;
    if (max >= 0 && total > max) {
      close(fd);
      char text[128];
      snprintf(text, sizeof text, "content exceeds the %lld-byte limit", max);
      send_error(id, "TOOLARGE", text, NULL);
      return;
    }
    send_frame(id, 'D', chunk, (size_t)n);
    if (client_gone()) _exit(0);
  }
  close(fd);
  buf_t b = { 0 };
  buf_record(&b, &st);
  send_buf(id, 'K', &b);
  buf_free(&b);
}

static int handles[MAX_HANDLES];

static void op_open(uint32_t id, fields_t *f) {
  char *path = next_field(f, NULL);
  if (f->bad) { send_error(id, "BADREQ", "bad open request", NULL); return; }
  int slot = -1;
  for (int i = 0; i < MAX_HANDLES; i++) if (handles[i] < 0) { slot = i; break; }
  if (slot < 0) { send_error(id, "EMFILE", "too many open streams", path); return; }
  struct stat st;
  const char *code;
  int fd = open_regular(path, &st, &code);
  if (fd < 0) { send_open_error(id, code, path); return; }
  handles[slot] = fd;
  buf_t b = { 0 };
  buf_num(&b, (unsigned long long)slot);
  buf_record(&b, &st);
  send_buf(id, 'K', &b);
  buf_free(&b);
}

static int handle_fd(fields_t *f) {
  long long slot = field_number(f);
  if (f->bad || slot >= MAX_HANDLES || handles[slot] < 0) return -1;
  return (int)slot;
}

static void op_pread(uint32_t id, fields_t *f) {
  int slot = handle_fd(f);
  long long offset = field_number(f);
  long long length = field_number(f);
  if (slot < 0 || f->bad) { send_error(id, "BADHANDLE", "no such open stream", NULL); return; }
  if (length > DATA_CHUNK) length = DATA_CHUNK;
  ssize_t n;
  do n = pread(handles[slot], chunk, (size_t)length, (off_t)offset); while (n < 0 && errno == EINTR);
  if (n < 0) { send_errno(id, errno, "cannot read", NULL); return; }
  send_frame(id, 'K', chunk, (size_t)n);
}

static void op_close(uint32_t id, fields_t *f) {
  int slot = handle_fd(f);
  if (slot >= 0) { close(handles[slot]); handles[slot] = -1; }
  send_frame(id, 'K', NULL, 0);
}

/* ---------- listing ---------- */

/* list(path[, max entries, max bytes]): D frames of entries (fields: name, type after following
 * symlinks or "-" when the child vanished or is a broken link, size, version, and the realpath
 * of a symlink or ""), then K with the listed directory's own record. A directory of more
 * entries than the bound, or whose entries take more bytes, is TOOLARGE once that many were
 * read: the listing stops there (the client bounds what it holds by them). */
/* A listing past one of its bounds: the directory and what was gathered are let go, and the
 * request is refused as TOOLARGE with `why` (a format taking the bound) filled in. */
static void list_too_large(uint32_t id, DIR *dir, buf_t *b, const char *why, long long bound) {
  closedir(dir);
  buf_free(b);
  char text[128];
  snprintf(text, sizeof text, why, bound);
  send_error(id, "TOOLARGE", text, NULL);
}

static void op_list(uint32_t id, fields_t *f) {
  char *path = next_field(f, NULL);
  if (f->bad) { send_error(id, "BADREQ", "bad list request", NULL); return; }
  long long max_entries = f->offset < f->length ? field_number(f) : -1;
  long long max_bytes = f->offset < f->length ? field_number(f) : -1;
  if (f->bad) { send_error(id, "BADREQ", "bad list request", NULL); return; }
  long long entries = 0, sent = 0;
  int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
  if (dfd < 0) { send_errno(id, errno, "cannot list", path); return; }
  struct stat self;
  if (fstat(dfd, &self) != 0) { int e = errno; close(dfd); send_errno(id, e, "cannot list", path); return; }
  DIR *dir = fdopendir(dfd);
  if (dir == NULL) { int e = errno; close(dfd); send_errno(id, e, "cannot list", path); return; }
  buf_t b = { 0 };
  for (;;) {
    errno = 0;
    struct dirent *entry = readdir(dir);
    if (entry == NULL) {
      if (errno != 0) { int e = errno; closedir(dir); buf_free(&b); send_errno(id, e, "cannot list", path); return; }
      break;
    }
    const char *name = entry->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    if (max_entries >= 0 && ++entries > max_entries) {
      list_too_large(id, dir, &b, "the directory has more than %lld entries (the most a listing returns)", max_entries);
      return;
    }
    struct stat st;
    int linked = entry->d_type == DT_LNK;
    if (entry->d_type == DT_UNKNOWN && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) linked = S_ISLNK(st.st_mode);
    buf_str(&b, name);
    if (fstatat(dfd, name, &st, 0) == 0) {
      char type[2] = { type_of(st.st_mode), 0 };
      char version[128];
      version_of(&st, version, sizeof version);
      buf_str(&b, type);
      buf_num(&b, (unsigned long long)st.st_size);
      buf_str(&b, version);
    } else if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) {
      buf_str(&b, "-"); buf_str(&b, ""); buf_str(&b, "");
    } else {
      int e = errno;
      closedir(dir);
      buf_free(&b);
      char child[PATH_MAX + NAME_MAX + 2];
      snprintf(child, sizeof child, "%s/%s", path, name);
      send_errno(id, e, "cannot list", child);
      return;
    }
    char *real = NULL;
    if (linked) {
      char child[PATH_MAX + NAME_MAX + 2];
      snprintf(child, sizeof child, "%s/%s", path, name);
      real = realpath(child, NULL);
    }
    buf_str(&b, real != NULL ? real : "");
    free(real);
    if (max_bytes >= 0 && sent + (long long)b.length > max_bytes) {
      list_too_large(id, dir, &b, "the records of its entries take more than %lld bytes (the most a listing holds)", max_bytes);
      return;
    }
    if (b.length >= DATA_CHUNK) { sent += (long long)b.length; send_buf(id, 'D', &b); b.length = 0; if (client_gone()) _exit(0); }
  }
  closedir(dir);
  if (b.length > 0) send_buf(id, 'D', &b);
  b.length = 0;
  buf_record(&b, &self);
  send_buf(id, 'K', &b);
  buf_free(&b);
}

/* ---------- SHA-256 (world/common/sha256.c), for the edit guard's content check ---------- */

static void sha256_hex(sha256_t *s, char out[65]) {
  unsigned char digest[32];
  sha256_final(s, digest);
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

/* ---------- writing ---------- */

/* Drain the rest of a write's content from stdin (a refused write still consumes its bytes,
 * so the next request starts where the client put it). Returns 0 at EOF. */
static int drain(unsigned long long remaining) {
  while (remaining > 0) {
    size_t take = remaining > sizeof chunk ? sizeof chunk : (size_t)remaining;
    if (!read_exact(NULL, take)) return 0;
    remaining -= take;
  }
  return 1;
}

static int under_root(const char *path, char **roots, int count) {
  if (count == 0) return 1;
  for (int i = 0; i < count; i++) {
    size_t length = strlen(roots[i]);
    if (strcmp(roots[i], "/") == 0) return 1;
    if (strncmp(path, roots[i], length) == 0 && (path[length] == '\0' || path[length] == '/')) return 1;
  }
  return 0;
}

/* The path of an open directory, from /proc/self/fd/N only: never resolved again by name (see
 * the head comment). Returns 0, or the errno why it cannot be read whole: ENAMETOOLONG for a
 * path longer than the kernel renders (or than `out`), ENOENT without /proc, EINVAL for one
 * that is not absolute (outside this process's root). */
static int fd_path(int fd, char *out, size_t size) {
  char link[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, out, size);
  if (n < 0) return errno;
  if ((size_t)n >= size) return ENAMETOOLONG;
  out[n] = '\0';
  return n > 0 && out[0] == '/' ? 0 : EINVAL;
}

/* Whether the directory open as `fd` lies under a root: 0 yes, EXDEV no, else the errno why its
 * path cannot be read (fd_path). Unfenced (no roots): yes, nothing read. */
static int fd_under_root(int fd, char **roots, int nroots) {
  if (nroots == 0) return 0;
  char real[PATH_MAX];
  int error = fd_path(fd, real, sizeof real);
  if (error != 0) return error;
  return under_root(real, roots, nroots) ? 0 : EXDEV;
}

/* Why a write's directory is refused by the fence: EXDEV outside the roots, else the errno why
 * its path could not be read. */
static void send_fence_error(uint32_t id, int error, const char *dir) {
  if (error == EXDEV) { send_error(id, "OUTSIDE", "the directory lies outside the writable roots", dir); return; }
  char text[256];
  snprintf(text, sizeof text, "the directory's path cannot be read whole from /proc/self/fd (%s), so it cannot be checked against the writable roots", errno_text(error));
  send_error(id, "UNPROVEN", text, dir);
}

/* The directories open_parent made for the write in progress, so that a write that fails
 * removes them again (remove_made): its components below their deepest existing ancestor,
 * shallowest first, which of them it made, and that ancestor's fd (kept open: the removal walks
 * down from it with O_NOFOLLOW, never by a path from the root). */
static struct {
  int ancestor;
  int count;
  char *parts[PATH_MAX / 2];
  unsigned char made[PATH_MAX / 2];
  char names[PATH_MAX];
} made = { -1, 0, { 0 }, { 0 }, { 0 } };

/* The write published (or made nothing): what it made stays. */
static void keep_made(void) {
  if (made.ancestor >= 0) close(made.ancestor);
  made.ancestor = -1;
  made.count = 0;
}

/* The write failed: remove the directories it made, deepest first, each only while it is empty
 * (rmdir: one that someone filled meanwhile stays, and so do the ones above it). */
static void remove_made(void) {
  for (int i = made.count - 1; made.ancestor >= 0 && i >= 0; i--) {
    if (!made.made[i]) continue;
    int fd = made.ancestor, reached = 1;
    for (int j = 0; j < i && reached; j++) {
      int next = openat(fd, made.parts[j], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd != made.ancestor) close(fd);
      fd = next;
      reached = next >= 0;
    }
    int removed = reached && unlinkat(fd, made.parts[i], AT_REMOVEDIR) == 0;
    if (reached && fd != made.ancestor) close(fd);
    if (!removed) break;
  }
  keep_made();
}

/* Open the directory `dir`, creating missing components (mode 0777 less the umask; recorded in
 * `made`, for remove_made). Before creating anything, the deepest existing ancestor must lie
 * under a root, so no directory is made outside the fence. Returns the fd or -1 with errno
 * (and nothing left made); *fence is then the fence's refusal of the ancestor (fd_under_root),
 * else 0. */
static int open_parent(const char *dir, char **roots, int nroots, int *fence) {
  *fence = 0;
  keep_made();
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0 || errno != ENOENT) return fd;
  char *ancestor = made.names;
  snprintf(ancestor, sizeof made.names, "%s", dir);
  char *parts[PATH_MAX / 2];
  int count = 0;
  for (;;) {
    char *slash = strrchr(ancestor, '/');
    if (slash == NULL || count >= (int)(sizeof parts / sizeof parts[0])) { errno = ENOENT; return -1; }
    parts[count++] = slash + 1;
    if (slash == ancestor) { fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC); *slash = '\0'; break; }
    *slash = '\0';
    fd = open(ancestor, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) break;
    if (errno != ENOENT) return -1;
  }
  if (fd < 0) return -1;
  *fence = fd_under_root(fd, roots, nroots);
  if (*fence != 0) { close(fd); errno = EXDEV; return -1; }
  made.ancestor = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  for (int i = count - 1; i >= 0; i--) {
    if (parts[i][0] == '\0') continue;
    int k = made.count++;
    made.parts[k] = parts[i];
    made.made[k] = mkdirat(fd, parts[i], 0777) == 0;
    if (!made.made[k] && errno != EEXIST) { int e = errno; close(fd); remove_made(); errno = e; return -1; }
    int next = openat(fd, parts[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(fd);
    if (next < 0) { remove_made(); errno = e; return -1; }
    fd = next;
  }
  return fd;
}

static int lock_dir(int dfd) {
  for (int waited = 0; ; waited += 2) {
    if (flock(dfd, LOCK_EX | LOCK_NB) == 0) return 0;
    if (errno != EWOULDBLOCK && errno != EINTR) return -1;
    if (waited >= LOCK_WAIT_MS) { errno = EWOULDBLOCK; return -1; }
    struct timespec pause = { 0, 2 * 1000 * 1000 };
    nanosleep(&pause, NULL);
  }
}

/* SHA-256 of the file `name` in dfd as lower-case hex; -1 when it cannot be read. */
static int hash_file(int dfd, const char *name, char out[65]) {
  int fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return -1;
  sha256_t s;
  sha256_init(&s);
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) { close(fd); return -1; }
    if (n == 0) break;
    sha256_update(&s, chunk, (size_t)n);
  }
  close(fd);
  sha256_hex(&s, out);
  return 0;
}

/* Read less than `limit` bytes of `name` into b (raw); 0 when read whole. */
static int read_before(int dfd, const char *name, long long limit, buf_t *b) {
  int fd = openat(dfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t at = b->length;
  long long total = 0;
  for (;;) {
    buf_reserve(b, DATA_CHUNK);
    ssize_t n = read(fd, b->data + b->length, DATA_CHUNK);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) { close(fd); b->length = at; return -1; }
    if (n == 0) break;
    b->length += (size_t)n;
    total += n;
    if (total >= limit) { close(fd); b->length = at; return -1; }
  }
  close(fd);
  return 0;
}

static unsigned temp_counter;

/* Now, to the nanosecond, and later than the last time this server took (so two publications
 * by one server never share an mtime). The kernel stamps writes with a coarse clock (one tick,
 * ~4 ms here), so two replacements of a file within one tick, whose new inode may reuse the old
 * one's number, could otherwise carry the same version. */
static struct timespec unique_now(void) {
  static struct timespec last;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  if (now.tv_sec < last.tv_sec || (now.tv_sec == last.tv_sec && now.tv_nsec <= last.tv_nsec)) {
    now = last;
    if (++now.tv_nsec >= 1000000000L) { now.tv_nsec = 0; now.tv_sec++; }
  }
  last = now;
  return now;
}

/* /proc/self/fd names open files (proc(5)): what linkat needs to name an O_TMPFILE file
 * without CAP_DAC_READ_SEARCH (linkat(2), "AT_SYMLINK_FOLLOW"). Checked once at start. */
static int proc_fds;

/* A hidden temporary name beside `name`: `.NAME.dsh-PID-N.tmp`. */
static void name_temp(char *out, size_t size, const char *name) {
  snprintf(out, size, ".%.180s.dsh-%d-%u.tmp", name, (int)getpid(), temp_counter++);
}

/* Give the content file the name `to` in dfd: link the unnamed file through /proc/self/fd, or
 * the named temporary file `from`. Fails with EEXIST when `to` exists. */
static int publish_link(int tfd, int anonymous, int dfd, const char *from, const char *to) {
  if (!anonymous) return linkat(dfd, from, dfd, to, 0);
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", tfd);
  return linkat(AT_FDCWD, proc, dfd, to, AT_SYMLINK_FOLLOW);
}

/* ---------- extended attributes (xattr(7)), kept across a replacement ---------- */

/* A list of names is at most XATTR_LIST_MAX (64 KiB) and a value at most XATTR_SIZE_MAX (64 KiB)
 * (include/uapi/linux/limits.h). An access ACL is the attribute system.posix_acl_access
 * (acl(5)), so copying the attributes copies the ACL; setting it also sets the group bits of the
 * mode to its mask (posix_acl_update_mode), which is what the old file's mode holds. */
static char old_names[65536], new_names[65536];
static unsigned char old_value[65536], new_value[65536];

/* The replaced file's attributes: through /proc/self/fd/N of its O_PATH descriptor (the inode
 * that was stat'ed), else by its path (not a symlink: checked under the lock). */
static ssize_t old_xattrs(int ofd, const char *path, char *names, size_t size) {
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", ofd);
  return proc_fds ? listxattr(proc, names, size) : llistxattr(path, names, size);
}

static ssize_t old_xattr(int ofd, const char *path, const char *name, void *value, size_t size) {
  char proc[64];
  snprintf(proc, sizeof proc, "/proc/self/fd/%d", ofd);
  return proc_fds ? getxattr(proc, name, value, size) : lgetxattr(path, name, value, size);
}

static int listed(const char *names, ssize_t length, const char *name) {
  for (const char *at = names; at < names + length; at += strlen(at) + 1) if (strcmp(at, name) == 0) return 1;
  return 0;
}

/* Before the owner and mode are set: drop what the new file got that the old one has not (an
 * ACL inherited from the directory's default ACL). Returns 0, or an errno with `text` set. */
static int drop_new_xattrs(int tfd, int ofd, const char *path, char *text, size_t size) {
  ssize_t olds = old_xattrs(ofd, path, old_names, sizeof old_names);
  if (olds < 0 && (errno == ENOTSUP || errno == ENOSYS)) olds = 0;
  if (olds < 0) { int e = errno; snprintf(text, size, "cannot read the file's extended attributes"); return e; }
  ssize_t news = flistxattr(tfd, new_names, sizeof new_names);
  if (news < 0) return errno == ENOTSUP || errno == ENOSYS ? 0 : (snprintf(text, size, "cannot read the new file's extended attributes"), errno);
  for (const char *name = new_names; name < new_names + news; name += strlen(name) + 1) {
    if (listed(old_names, olds, name)) continue;
    if (fremovexattr(tfd, name) != 0 && errno != ENODATA) {
      int e = errno;
      snprintf(text, size, "cannot replace the file without giving it the extended attribute %.255s (the new file got it from its directory)", name);
      return e;
    }
  }
  return 0;
}

/* After the owner and mode: give the new file every attribute of the old one (the names read by
 * drop_new_xattrs), skipping those it has already with the same value. One that cannot be set
 * (a security.* or trusted.* one without the privilege it needs) refuses the write, naming it:
 * never a replacement that silently loses it. Returns 0, or an errno with `text` set. */
static int copy_old_xattrs(int tfd, int ofd, const char *path, char *text, size_t size) {
  ssize_t olds = old_xattrs(ofd, path, old_names, sizeof old_names);
  if (olds < 0 && (errno == ENOTSUP || errno == ENOSYS)) olds = 0;
  if (olds < 0) { int e = errno; snprintf(text, size, "cannot read the file's extended attributes"); return e; }
  for (const char *name = old_names; name < old_names + olds; name += strlen(name) + 1) {
    ssize_t length = old_xattr(ofd, path, name, old_value, sizeof old_value);
    if (length < 0 && errno == ENODATA) continue;
    if (length < 0) { int e = errno; snprintf(text, size, "cannot read the file's extended attribute %.255s", name); return e; }
    ssize_t now = fgetxattr(tfd, name, new_value, sizeof new_value);
    if (now == length && memcmp(new_value, old_value, (size_t)length) == 0) continue;
    if (fsetxattr(tfd, name, old_value, (size_t)length, 0) != 0) {
      int e = errno;
      snprintf(text, size, "cannot replace the file and keep its extended attribute %.255s", name);
      return e;
    }
  }
  return 0;
}

/*
 * write: fields path, guard (n unconditional | c createIfAbsent | v replaceIfVersion |
 * h replaceIfVersion and the content's SHA-256; followed by `f` to fsync), expected version, expected hash, before limit
 * (bytes; the old content is returned when it is a regular file smaller than this), root count,
 * the roots (canonical; none = unfenced), content length; then the content's raw bytes.
 *
 * The content goes to a new file in the target's directory (unnamed where the filesystem allows,
 * else a hidden name; created 0600, written, and fsync'ed outside the lock); then, holding the
 * directory's flock, the guard is checked, the old file's owner and mode are copied onto the new
 * one, and it is published by rename (or by link, which never replaces, for createIfAbsent).
 * Replies: the old content as D frames (when it is returned), then K: operation, the new
 * record, "1" when the D frames carried the old content, else "0", and the replaced file's link
 * count ("0" for a create): its other hard links keep the old content, since the rename gives
 * the name a new inode.
 */
static void op_write(uint32_t id, fields_t *f) {
  char *path = next_field(f, NULL);
  char *guard = next_field(f, NULL);
  char *expected_version = next_field(f, NULL);
  char *expected_hash = next_field(f, NULL);
  long long before_limit = field_number(f);
  long long nroots = field_number(f);
  char *roots[MAX_ROOTS];
  for (long long i = 0; !f->bad && i < nroots && i < MAX_ROOTS; i++) roots[i] = next_field(f, NULL);
  long long length = field_number(f);
  if (f->bad || nroots > MAX_ROOTS || path[0] != '/') {
    if (length > 0 && !drain((unsigned long long)length)) _exit(0);
    send_error(id, "BADREQ", "bad write request", NULL);
    return;
  }
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  const char *name = slash + 1;
  if (*name == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || (size_t)(slash - path) >= sizeof dir) {
    if (!drain((unsigned long long)length)) _exit(0);
    send_error(id, "EISDIR", "not a file path", path);
    return;
  }
  if (slash == path) snprintf(dir, sizeof dir, "/"); else { memcpy(dir, path, (size_t)(slash - path)); dir[slash - path] = '\0'; }

  int fence = 0;
  int dfd = open_parent(dir, roots, (int)nroots, &fence);
  if (dfd < 0) {
    int e = errno;
    if (!drain((unsigned long long)length)) _exit(0);
    if (fence != 0) send_fence_error(id, fence, dir);
    else send_errno(id, e, "cannot open the directory", dir);
    return;
  }
  /* The fence, on the descriptor the publication uses (the name may lead elsewhere by now). */
  fence = fd_under_root(dfd, roots, (int)nroots);
  if (fence != 0) {
    close(dfd);
    remove_made();
    if (!drain((unsigned long long)length)) _exit(0);
    send_fence_error(id, fence, dir);
    return;
  }
  /* A directory or a special file there is refused before anything is made (the answer does
   * not then depend on whether a temporary file could be made beside it). */
  struct stat present;
  if (fstatat(dfd, name, &present, 0) == 0 && !S_ISREG(present.st_mode)) {
    close(dfd);
    remove_made();
    if (!drain((unsigned long long)length)) _exit(0);
    send_error(id, "NOTREG", "not a regular file", path);
    return;
  }
  /* The content goes to an unnamed file (O_TMPFILE): whatever kills this server, nothing of it
   * stays in the user's folder. It gets a name only at publication. Where the filesystem has no
   * O_TMPFILE (or /proc, which names the file's fd for linkat), a hidden named one is used. */
  char temp[NAME_MAX + 1] = "";
  int tfd = -1;
  /* Made as any new file is (0666 less the umask, or as the directory's default ACL says): an
   * unnamed file no one else can open. A replacement then takes the old file's mode. */
  if (proc_fds) tfd = openat(dfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  int anonymous = tfd >= 0;
  for (int attempt = 0; attempt < 100 && tfd < 0; attempt++) {
    name_temp(temp, sizeof temp, name);
    tfd = openat(dfd, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (tfd < 0 && errno != EEXIST) break;
  }
  if (tfd < 0) {
    int e = errno;
    close(dfd);
    remove_made();
    if (!drain((unsigned long long)length)) _exit(0);
    send_errno(id, e, "cannot create a temporary file in", dir);
    return;
  }
  /* The content: straight from stdin into the temporary file. */
  unsigned long long remaining = (unsigned long long)length;
  int write_error = 0;
  while (remaining > 0) {
    size_t take = remaining > sizeof chunk ? sizeof chunk : (size_t)remaining;
    if (!read_exact(chunk, take)) { if (!anonymous) unlinkat(dfd, temp, 0); close(tfd); close(dfd); remove_made(); _exit(0); }
    remaining -= take;
    size_t done = 0;
    while (write_error == 0 && done < take) {
      ssize_t n = write(tfd, chunk + done, take - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) { write_error = errno; break; }
      done += (size_t)n;
    }
  }
  /* The content reaches the disk before the rename publishes it, so a crash of the world's host
   * leaves the old file or the new one, never a new name without its data (journaling
   * filesystems order the rename after the data written here). A plain write waits for its own
   * pages only (sync_file_range(2)); with the flag `f` (durability 'flushed') the file is
   * fsync'ed too, flushing the device's cache: the new content then survives a power loss at
   * once, for ~2-5 ms more on a virtual disk. */
  if (write_error == 0) {
    int flushed = guard[1] == 'f';
    int rc = flushed ? fsync(tfd) : sync_file_range(tfd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
    if (rc != 0 && !flushed && errno == ENOSYS) rc = fsync(tfd);
    if (rc != 0) write_error = errno;
  }
  if (write_error != 0) {
    close(tfd); if (!anonymous) unlinkat(dfd, temp, 0); close(dfd);
    remove_made();
    send_errno(id, write_error, "cannot write", path);
    return;
  }
  const char *fail_code = NULL;
  char fail_text[512] = "";
  int fail_errno = 0;
  buf_t b = { 0 };
  if (lock_dir(dfd) != 0) {
    fail_code = "LOCKED";
    snprintf(fail_text, sizeof fail_text, "the directory stayed locked by another writer for %d ms", LOCK_WAIT_MS);
  }
  struct stat old;
  int exists = 0;
  /* The replaced file, opened as a path (no access needed): its stat and its attributes are one
   * inode's. */
  int ofd = -1;
  /* The name is a symbolic link now: the key it was given is canonical (no link in it), so one
   * was swapped in. It is replaced, never followed: nothing of its target (owner, mode, old
   * text) is taken, a guarded write is stale, and a create refuses it as upstream does. */
  int linked = 0;
  if (fail_code == NULL) {
    ofd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (ofd >= 0 && fstat(ofd, &old) == 0) {
      linked = S_ISLNK(old.st_mode);
      exists = !linked;
    } else if (ofd >= 0 || errno != ENOENT) { fail_errno = errno; snprintf(fail_text, sizeof fail_text, "cannot stat"); }
  }
  if (fail_code == NULL && fail_errno == 0 && linked && guard[0] != 'n') {
    fail_code = guard[0] == 'c' ? "NOTREG" : "STALE";
    snprintf(fail_text, sizeof fail_text, guard[0] == 'c' ? "a symbolic link, not a regular file" : "the file was replaced by a symbolic link");
  }
  if (fail_code == NULL && fail_errno == 0) {
    if (exists && !S_ISREG(old.st_mode)) { fail_code = "NOTREG"; snprintf(fail_text, sizeof fail_text, "not a regular file"); }
    else if (guard[0] == 'c' && exists) { fail_code = "EXISTS"; snprintf(fail_text, sizeof fail_text, "the file exists"); }
    else if ((guard[0] == 'v' || guard[0] == 'h') && !exists) { fail_code = "STALE"; snprintf(fail_text, sizeof fail_text, "the file no longer exists"); }
    else if (guard[0] == 'v' || guard[0] == 'h') {
      char version[128];
      version_of(&old, version, sizeof version);
      char hash[65];
      if (strcmp(version, expected_version) != 0) { fail_code = "STALE"; snprintf(fail_text, sizeof fail_text, "the file changed since it was read"); }
      else if (guard[0] == 'h' && (hash_file(dfd, name, hash) != 0 || strcmp(hash, expected_hash) != 0)) { fail_code = "STALE"; snprintf(fail_text, sizeof fail_text, "the file's content changed since it was read"); }
    }
  }
  if (fail_code == NULL && fail_errno == 0 && exists) {
    /* Keep the attributes, the owner, then the mode (chown clears set-id bits and file
     * capabilities, so the mode and the attributes come after it; an ACL set last makes the
     * group bits its mask, as they are on the old file). */
    if ((fail_errno = drop_new_xattrs(tfd, ofd, path, fail_text, sizeof fail_text)) != 0) {
      /* fail_text names it */
    } else if ((old.st_uid != geteuid() || old.st_gid != getegid()) && fchown(tfd, old.st_uid, old.st_gid) != 0) {
      fail_errno = errno;
      snprintf(fail_text, sizeof fail_text, "cannot replace the file and keep its owner %u:%u (this user is %u:%u)", (unsigned)old.st_uid, (unsigned)old.st_gid, (unsigned)geteuid(), (unsigned)getegid());
    } else if (fchmod(tfd, old.st_mode & 07777) != 0) {
      fail_errno = errno; snprintf(fail_text, sizeof fail_text, "cannot keep the file's mode");
    } else {
      fail_errno = copy_old_xattrs(tfd, ofd, path, fail_text, sizeof fail_text);
    }
  } else if (fail_code == NULL && fail_errno == 0 && (!anonymous || fgetxattr(dfd, "system.posix_acl_default", NULL, 0) <= 0)) {
    /* A new file's mode, 0666 less the umask: a named temporary file was made 0600 (it has a
     * name others could open), and before Linux 6.0 an unnamed one on a filesystem without
     * ACLs did not get the umask (vfs_tmpfile; commit ac6800e279a2). Under a directory's
     * default ACL the unnamed one already has what any new file there gets (acl(5): the umask
     * is not applied then), which a chmod would change. */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(tfd, 0666 & ~mask) != 0) { fail_errno = errno; snprintf(fail_text, sizeof fail_text, "cannot set the new file's mode"); }
  }
  if (ofd >= 0) close(ofd);
  if (fail_code == NULL && fail_errno == 0) {
    struct timespec stamp[2] = { unique_now(), { 0, UTIME_OMIT } };
    stamp[1] = stamp[0];
    futimens(tfd, stamp);
  }
  if (fail_code == NULL && fail_errno == 0) {
    buf_str(&b, exists ? "update" : "create");
    if (guard[0] == 'c') {
      /* No replace: link(2) fails with EEXIST when the name exists, whoever made it meanwhile. */
      if (publish_link(tfd, anonymous, dfd, temp, name) != 0) {
        if (errno == EEXIST) { fail_code = "EXISTS"; snprintf(fail_text, sizeof fail_text, "the file exists"); }
        else { fail_errno = errno; snprintf(fail_text, sizeof fail_text, "cannot create"); }
      } else if (!anonymous) {
        /* Now, not after the stat below: dropping the link changes the file's ctime, so its version. */
        unlinkat(dfd, temp, 0);
        temp[0] = '\0';
      }
    } else if (anonymous) {
      /* rename(2) replaces atomically but needs a name: the unnamed file gets one first. */
      int linked = -1;
      for (int attempt = 0; attempt < 100 && linked != 0; attempt++) {
        name_temp(temp, sizeof temp, name);
        linked = publish_link(tfd, 1, dfd, temp, temp);
        if (linked != 0 && errno != EEXIST) break;
      }
      if (linked != 0) { temp[0] = '\0'; fail_errno = errno; snprintf(fail_text, sizeof fail_text, "cannot name the new content"); }
    }
    buf_t before = { 0 };
    int have_before = 0;
    if (fail_code == NULL && fail_errno == 0 && exists && old.st_size < before_limit) have_before = read_before(dfd, name, before_limit, &before) == 0;
    if (fail_code == NULL && fail_errno == 0 && guard[0] != 'c' && renameat(dfd, temp, dfd, name) != 0) {
      fail_errno = errno;
      snprintf(fail_text, sizeof fail_text, fail_errno == EBUSY ? "cannot replace it: it is a mount point (a bind-mounted file cannot be replaced atomically; write it from the shell)" : "cannot replace");
    }
    if (fail_code == NULL && fail_errno == 0) {
      struct stat now;
      if (fstatat(dfd, name, &now, 0) != 0) fstat(tfd, &now);
      buf_record(&b, &now);
      buf_str(&b, have_before ? "1" : "0");
      buf_num(&b, exists ? (unsigned long long)old.st_nlink : 0);
      /* Published: the old content goes first, in chunks (each frame within MAX_REPLY). */
      for (size_t at = 0; have_before && at < before.length; at += DATA_CHUNK) send_frame(id, 'D', before.data + at, before.length - at < DATA_CHUNK ? before.length - at : DATA_CHUNK);
    }
    buf_free(&before);
  }
  /* A failure leaves a named temporary file behind (renamed files and unnamed ones do not). */
  if ((fail_code != NULL || fail_errno != 0) && temp[0] != '\0') unlinkat(dfd, temp, 0);
  close(tfd);
  close(dfd);
  /* A failed write removes the directories it made; a published one keeps them. */
  if (fail_code != NULL || fail_errno != 0) remove_made(); else keep_made();
  if (fail_code != NULL) { buf_free(&b); send_error(id, fail_code, fail_text, path); return; }
  if (fail_errno != 0) { buf_free(&b); send_errno(id, fail_errno, fail_text, path); return; }
  send_buf(id, 'K', &b);
  buf_free(&b);
}

/* ---------- main loop ---------- */

int main(int argc, char **argv) {
  launched_as("dsh-fsd");
  if (argc > 1 && strcmp(argv[1], "--version") == 0) { printf("dsh-fsd " PROTOCOL " " ARCH "\n"); return 0; }
  signal(SIGPIPE, SIG_IGN);
  for (int i = 0; i < MAX_HANDLES; i++) handles[i] = -1;
  /* Fds the server does not use are closed: a pipe inherited by accident must not keep a
   * client's transport open after the server ends. */
  for (int fd = 3; fd < 64; fd++) close(fd);
  proc_fds = access("/proc/self/fd", F_OK) == 0;
  /* A larger pipe to whoever reads stdout (sshd, the container runtime): a 256 KiB data frame
   * then crosses in one write instead of four 64 KiB ones (fcntl(2) F_SETPIPE_SZ; bounded by
   * /proc/sys/fs/pipe-max-size, 1 MiB by default; a refusal changes nothing). */
  fcntl(1, F_SETPIPE_SZ, 1 << 20);
  mode_t mask = umask(0);
  umask(mask);
  buf_t hello = { 0 };
  buf_str(&hello, "dsh-fsd");
  buf_str(&hello, PROTOCOL);
  buf_num(&hello, geteuid());
  buf_num(&hello, getegid());
  buf_num(&hello, (unsigned long long)getpid());
  buf_str(&hello, ARCH);
  char umask_text[8];
  snprintf(umask_text, sizeof umask_text, "%03o", (unsigned)mask);
  buf_str(&hello, umask_text);
  send_buf(0, 'H', &hello);
  buf_free(&hello);

  unsigned char *payload = NULL;
  size_t capacity = 0;
  for (;;) {
    unsigned char header[9];
    if (!read_exact(header, 9)) return 0;
    uint32_t length = get32(header);
    uint32_t id = get32(header + 4);
    char code = (char)header[8];
    if (length > MAX_REQUEST) return 2;
    if (length + 1 > capacity) {
      capacity = length + 1;
      unsigned char *grown = realloc(payload, capacity);
      if (grown == NULL) return 3;
      payload = grown;
    }
    if (!read_exact(payload, length)) return 0;
    fields_t f = { payload, length, 0, 0 };
    switch (code) {
      case 'p': send_frame(id, 'K', NULL, 0); break;
      case 'r': op_resolve(id, &f); break;
      case 's': op_stat(id, &f); break;
      case 'o': op_read(id, &f); break;
      case 'f': op_open(id, &f); break;
      case 'g': op_pread(id, &f); break;
      case 'c': op_close(id, &f); break;
      case 'l': op_list(id, &f); break;
      case 'w': op_write(id, &f); break;
      case 'q': send_frame(id, 'K', NULL, 0); return 0;
      default: send_error(id, "BADREQ", "unknown request", NULL); break;
    }
  }
}
