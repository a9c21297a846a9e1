/*
 * dsh-relay: the world-side network relay of dsh-remote-worlds (issue 34).
 *
 * One process per (world, user, confinement), started by the client over a non-PTY exec (Docker)
 * or an exec channel (SSH), inside the same confinement as the world's shells. It listens on the
 * world's addresses and connects to them for the client, and carries each TCP connection's bytes
 * over its own stdin/stdout: the client decides what to listen on and what to dial; the relay
 * resolves no names and chooses nothing. It holds nothing a client needs after it ends: at stdin
 * EOF (the client is gone) it closes every socket and listener and exits 0.
 *
 * Frames (all integers little-endian): u32 payload length, u32 id, u8 code (ASCII), payload.
 * No payload is over MAX_FRAME (1 MiB) in either direction: the relay refuses a longer one from
 * the client (a message on stderr, exit status 2), and sends none (its largest are D frames of
 * DATA_CHUNK, 64 KiB). A payload of "fields" is a sequence of (u32 length, bytes).
 *
 * Relay -> client, first frame: H id 0, fields "dsh-relay", PROTOCOL ("3"), ARCH (uname -m), PID
 *   (its pid where it was started, decimal), NETNS and USERNS (readlink of /proc/self/ns/net and
 *   /ns/user, `net:[INODE]`; empty when unreadable): the network namespace its listeners and
 *   connects live in, which programs join to reach them (an SSH world's confined programs, by
 *   nsenter(1) to PID: src/sandbox/bwrap.ts), and the user namespace that owns it. Version 2
 *   added PID, NETNS and USERNS; version 3 widened WINDOW from 256 KiB to 4 MiB.
 * Client -> relay:
 *   L id=LISTENER (1..0x7fffffff) fields HOST (an IPv4 or IPv6 literal), PORT (decimal, 0 = any)
 *     -> K id=LISTENER fields BOUND_PORT, or E id=LISTENER fields ERRNO_NAME, MESSAGE
 *   U id=LISTENER: stop listening (no reply; accepted streams live on)
 *   C id=STREAM (1..0x7fffffff) fields HOST literal, PORT: a non-blocking connect in the world
 *     -> K id=STREAM once connected, or E id=STREAM fields ERRNO_NAME, MESSAGE
 *   D id=STREAM payload raw bytes | F id=STREAM: no more from the client (shutdown(SHUT_WR) once
 *   the buffered bytes are written) | X id=STREAM: abort (SO_LINGER 0, a reset; no reply) |
 *   W id=STREAM payload u32 credit (bytes)
 * Relay -> client:
 *   A id=STREAM (0x80000000|n, chosen here) fields LISTENER (decimal), PEER_HOST, PEER_PORT: a
 *     connection accepted on a listener
 *   P id=STREAM fields PID, COMM: the world's process at the other end of a connection it
 *     accepted, right after its A, where the relay can tell (peer-process.c); none when not.
 *     Version 2 added P.
 *   K / E replies above; D; F (the socket's peer ended its sending: read returned 0);
 *   X id=STREAM fields ERRNO_NAME, MESSAGE (a socket error or reset; the stream is gone); W.
 * Flow control: each direction of each stream has a window of WINDOW (4 MiB), full at the
 * start. A sender has at most the window of D bytes not yet credited; the receiver credits (W)
 * what it delivered (here: written to the socket), CREDIT_BATCH (256 KiB) or more at once: the
 * window is 16 batches, so a sender out of credit faces a batch delivered or a stalled reader.
 * The relay reads a socket only while its window toward the client is open and its output
 * queue is under OUT_SOFT; it buffers at most the window per stream from the client
 * (a client past its window breaks the protocol: exit 2). So its memory is bounded whatever the
 * peers and the client's reader do. A stream ends when both sides sent F, or either sent X.
 * Frames for a stream or listener the relay no longer knows are dropped (they crossed its X).
 * Unknown codes, malformed fields of D/W, and ids out of range are protocol faults (exit 2).
 *
 * The client half: src/network/relay/protocol.ts (the frames; RELAY_PROTOCOL_VERSION is this
 * PROTOCOL) and src/network/relay/relay-channel.ts (RelayChannel, RelayStream).
 * Built by world/build.sh from this folder and world/common/ (static, x86_64 and aarch64) into
 * dist/world-tools/linux-ARCH/dsh-relay; the client copies it into a world's cache by content
 * hash and runs it only once verified (src/providers/remote/world-tools/install.ts, launch.ts).
 *
 * Shape: one thread, one poll(2) loop; sockets and stdout non-blocking; stdin read only after
 * poll said it is readable (a pipe or socket then returns what is there without blocking).
 * SIGPIPE is ignored: a write to a reset socket fails with EPIPE and becomes an X.
 * Facts relied on: a non-blocking connect(2) returns EINPROGRESS and reports its result through
 * POLLOUT and getsockopt SO_ERROR (connect(2)); close(2) with SO_LINGER {1, 0} sends a reset
 * (socket(7)); poll(2) reports POLLHUP and POLLERR whatever was asked, so a socket nobody can
 * serve now is left out of the poll set (fd -1) rather than spun on.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "errno-text.h"
#include "launched.h"
#include "world-arch.h"
#include "peer-process.h"

#define PROTOCOL "3"
#define MAX_FRAME (1u << 20)
/* 4 MiB: a window must outlast the credit's round trip through the transport, or the stream
 * waits on it; at 256 KiB a Docker stream carried 58-66 MB/s, at 4 MiB 129-134 MB/s (bench
 * `forwarded port 100 MB`, `egress 100 MB download`, 2 cores). A stream's buffer grows toward it
 * only while its socket is slower than the client. */
#define WINDOW (4096u * 1024u)
#define DATA_CHUNK (64u * 1024u)
/* A sixteenth of the window: credits stay few (each is a frame and a transport packet) while the
 * window never runs dry. */
#define CREDIT_BATCH (256u * 1024u)
/* A stream's first buffer for the client's bytes; doubled as needed up to WINDOW. */
#define BUFFER_START (64u * 1024u)
/* Sockets are read only while the output queue holds less than this (bytes). */
#define OUT_SOFT (256u * 1024u)
/* Stdin is read only while the output queue holds less than this (bytes): replies and credits
 * the client's frames cause are bounded too. */
#define OUT_HARD (1024u * 1024u)
/* Stdin is read in pieces of at most this (bytes); the buffer holds a whole frame besides. */
#define IN_CHUNK (64u * 1024u)
#define IN_CAPACITY (MAX_FRAME + 9u + IN_CHUNK)
#define TOP_BIT 0x80000000u

/* ---------- small helpers ---------- */

static void put32(unsigned char *p, uint32_t v) {
  p[0] = v & 255; p[1] = (v >> 8) & 255; p[2] = (v >> 16) & 255; p[3] = (v >> 24) & 255;
}

static uint32_t get32(const unsigned char *p) {
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* A protocol fault or a failure the relay cannot carry on from: a line on stderr, then exit. */
__attribute__((format(printf, 2, 3), noreturn)) static void die(int status, const char *format, ...) {
  char text[512];
  int n = snprintf(text, sizeof text, "dsh-relay: ");
  va_list args;
  va_start(args, format);
  n += vsnprintf(text + n, sizeof text - (size_t)n, format, args);
  va_end(args);
  if (n > (int)sizeof text - 2) n = (int)sizeof text - 2;
  text[n++] = '\n';
  const char *p = text;
  while (n > 0) {
    ssize_t w = write(2, p, (size_t)n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) { struct pollfd o = { 2, POLLOUT, 0 }; poll(&o, 1, 1000); continue; }
    if (w <= 0) break;
    p += w; n -= (int)w;
  }
  _exit(status);
}

static const char *errno_name(int error) {
  switch (error) {
    case ECONNREFUSED: return "ECONNREFUSED";
    case ECONNRESET: return "ECONNRESET";
    case ECONNABORTED: return "ECONNABORTED";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EHOSTUNREACH: return "EHOSTUNREACH";
    case ENETUNREACH: return "ENETUNREACH";
    case ENETDOWN: return "ENETDOWN";
    case EADDRINUSE: return "EADDRINUSE";
    case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EPIPE: return "EPIPE";
    case EINVAL: return "EINVAL";
    case EEXIST: return "EEXIST";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case ENOBUFS: return "ENOBUFS";
    case ENOMEM: return "ENOMEM";
    case EIO: return "EIO";
    default: {
      static char name[16];
      snprintf(name, sizeof name, "E%d", error);
      return name;
    }
  }
}

/* ---------- the output queue (stdout, non-blocking) ---------- */

static unsigned char *out;
static size_t out_start, out_end, out_capacity;

static size_t out_pending(void) { return out_end - out_start; }

/* Room for `more` bytes at out + out_end. */
static void out_reserve(size_t more) {
  if (out_end + more <= out_capacity) return;
  if (out_start > 0) {
    memmove(out, out + out_start, out_end - out_start);
    out_end -= out_start;
    out_start = 0;
    if (out_end + more <= out_capacity) return;
  }
  size_t capacity = out_capacity < 65536 ? 65536 : out_capacity;
  while (capacity < out_end + more) capacity *= 2;
  unsigned char *grown = realloc(out, capacity);
  if (grown == NULL) die(3, "out of memory for the output queue (%zu bytes)", capacity);
  out = grown;
  out_capacity = capacity;
}

static void header_at(unsigned char *at, uint32_t length, uint32_t id, char code) {
  put32(at, length);
  put32(at + 4, id);
  at[8] = (unsigned char)code;
}

static void send_frame(uint32_t id, char code, const void *payload, size_t length) {
  out_reserve(9 + length);
  header_at(out + out_end, (uint32_t)length, id, code);
  if (length > 0) memcpy(out + out_end + 9, payload, length);
  out_end += 9 + length;
}

/* A frame of up to three string fields (NULL ends them early). */
/* A frame of `count` fields (the first NULL one ends them). */
static void send_field_list(uint32_t id, char code, const char *const *fields, int count) {
  size_t length = 0;
  for (int i = 0; i < count && fields[i] != NULL; i++) length += 4 + strlen(fields[i]);
  out_reserve(9 + length);
  unsigned char *at = out + out_end;
  header_at(at, (uint32_t)length, id, code);
  at += 9;
  for (int i = 0; i < count && fields[i] != NULL; i++) {
    size_t n = strlen(fields[i]);
    put32(at, (uint32_t)n);
    memcpy(at + 4, fields[i], n);
    at += 4 + n;
  }
  out_end += 9 + length;
}

static void send_fields(uint32_t id, char code, const char *a, const char *b, const char *c) {
  const char *fields[3] = { a, b, c };
  send_field_list(id, code, fields, 3);
}

/* The hello: who this is, and the namespaces its sockets live in (see the top). */
static void send_hello(void) {
  char pid[24], net[64] = "", user[64] = "";
  snprintf(pid, sizeof pid, "%ld", (long)getpid());
  ssize_t n = readlink("/proc/self/ns/net", net, sizeof net - 1);
  net[n > 0 ? n : 0] = 0;
  n = readlink("/proc/self/ns/user", user, sizeof user - 1);
  user[n > 0 ? n : 0] = 0;
  const char *fields[6] = { "dsh-relay", PROTOCOL, ARCH, pid, net, user };
  send_field_list(0, 'H', fields, 6);
}

static void send_credit(uint32_t id, uint32_t bytes) {
  unsigned char payload[4];
  put32(payload, bytes);
  send_frame(id, 'W', payload, 4);
}

static void send_errno(uint32_t id, char code, int error, const char *what) {
  char message[256];
  snprintf(message, sizeof message, "%s: %s", what, errno_text(error));
  send_fields(id, code, errno_name(error), message, NULL);
}

/* Write what the queue holds, as far as stdout takes it. A client that is gone ends the relay. */
static void out_flush(void) {
  while (out_pending() > 0) {
    ssize_t n = write(1, out + out_start, out_pending());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      _exit(0);
    }
    out_start += (size_t)n;
  }
  out_start = out_end = 0;
}

/* ---------- streams and listeners ---------- */

enum { CONNECTING, OPEN };

typedef struct {
  uint32_t id;
  int fd;
  int state;
  /* Bytes from the client not yet written to the socket: buffer[start, end) (at most WINDOW). */
  unsigned char *buffer;
  size_t start, end, capacity;
  /* Bytes written to the socket and not yet credited to the client. */
  uint32_t uncredited;
  /* D bytes the relay may still send the client. */
  uint32_t credit;
  int client_fin;   /* the client sent F */
  int write_shut;   /* shutdown(SHUT_WR) done */
  int peer_eof;     /* read returned 0; F sent */
} stream_t;

typedef struct {
  uint32_t id;
  int fd;
} listener_t;

static stream_t **streams;
static size_t stream_count, stream_capacity;
static listener_t *listeners;
static size_t listener_count, listener_capacity;
static uint32_t next_accepted = 1;
/* accept(2) ran out of descriptors: listeners wait until a socket is closed. */
static int accept_paused;

static stream_t *find_stream(uint32_t id) {
  for (size_t i = 0; i < stream_count; i++) if (streams[i]->id == id) return streams[i];
  return NULL;
}

static listener_t *find_listener(uint32_t id) {
  for (size_t i = 0; i < listener_count; i++) if (listeners[i].id == id) return &listeners[i];
  return NULL;
}

static stream_t *add_stream(uint32_t id, int fd, int state) {
  stream_t *s = calloc(1, sizeof *s);
  if (s == NULL) die(3, "out of memory for a stream");
  if (stream_count == stream_capacity) {
    size_t capacity = stream_capacity == 0 ? 16 : stream_capacity * 2;
    stream_t **grown = realloc(streams, capacity * sizeof *grown);
    if (grown == NULL) die(3, "out of memory for the stream table (%zu entries)", capacity);
    streams = grown;
    stream_capacity = capacity;
  }
  s->id = id;
  s->fd = fd;
  s->state = state;
  s->credit = WINDOW;
  streams[stream_count++] = s;
  return s;
}

/* Forget a stream and close its socket (abort: with a reset). */
static void drop_stream(stream_t *s, int abort) {
  if (abort) {
    struct linger linger = { 1, 0 };
    setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &linger, sizeof linger);
  }
  close(s->fd);
  accept_paused = 0;
  for (size_t i = 0; i < stream_count; i++) {
    if (streams[i] == s) { streams[i] = streams[--stream_count]; break; }
  }
  free(s->buffer);
  free(s);
}

/* The stream ended both ways (both sides sent F, and the client's bytes are written). */
/* Returns 1 when it did (the stream is gone). */
static int maybe_finish(stream_t *s) {
  if (!(s->client_fin && s->write_shut && s->peer_eof)) return 0;
  drop_stream(s, 0);
  return 1;
}

/*
 * Write `length` bytes of the client's to the socket, as many as it takes now, and credit what
 * it took. Returns how many it took, or -1 when the stream is gone (its X sent).
 */
static ssize_t socket_write(stream_t *s, const unsigned char *bytes, size_t length) {
  size_t done = 0;
  while (done < length) {
    ssize_t n = write(s->fd, bytes + done, length - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      send_errno(s->id, 'X', errno, "write to the socket");
      drop_stream(s, 1);
      return -1;
    }
    done += (size_t)n;
  }
  s->uncredited += (uint32_t)done;
  /* A batch or more, never less: the window is many batches (see RelayStream.giveCredit). */
  if (s->uncredited >= CREDIT_BATCH) {
    send_credit(s->id, s->uncredited);
    s->uncredited = 0;
  }
  return (ssize_t)done;
}

/* Write the client's buffered bytes to the socket. Returns 0, or -1 when the stream is gone. */
static int stream_write(stream_t *s) {
  if (s->start < s->end) {
    ssize_t n = socket_write(s, s->buffer + s->start, s->end - s->start);
    if (n < 0) return -1;
    s->start += (size_t)n;
  }
  int drained = s->start == s->end;
  if (drained) s->start = s->end = 0;
  if (drained && s->client_fin && !s->write_shut && s->state == OPEN) {
    shutdown(s->fd, SHUT_WR);
    s->write_shut = 1;
    return maybe_finish(s) ? -1 : 0;
  }
  return 0;
}

/* Read the socket into a D frame (at most the credit and DATA_CHUNK). Returns 0, or -1 when the stream is gone. */
static int stream_read(stream_t *s) {
  size_t want = s->credit < DATA_CHUNK ? s->credit : DATA_CHUNK;
  if (want == 0) return 0;
  out_reserve(9 + want);
  ssize_t n;
  do n = read(s->fd, out + out_end + 9, want); while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == EAGAIN) return 0;
    send_errno(s->id, 'X', errno, "read from the socket");
    drop_stream(s, 1);
    return -1;
  }
  if (n == 0) {
    s->peer_eof = 1;
    send_frame(s->id, 'F', NULL, 0);
    return maybe_finish(s) ? -1 : 0;
  }
  header_at(out + out_end, (uint32_t)n, s->id, 'D');
  out_end += 9 + (size_t)n;
  s->credit -= (uint32_t)n;
  return 0;
}

/* The result of a non-blocking connect. */
static void stream_connected(stream_t *s) {
  int error = 0;
  socklen_t length = sizeof error;
  if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &error, &length) < 0) error = errno;
  if (error != 0) {
    send_errno(s->id, 'E', error, "connect");
    drop_stream(s, 0);
    return;
  }
  s->state = OPEN;
  int one = 1;
  setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  send_frame(s->id, 'K', NULL, 0);
  /* Bytes or an F the client sent before the K (allowed: they wait here). */
  stream_write(s);
}

/* ---------- addresses ---------- */

/* HOST (an IPv4 or IPv6 literal, brackets allowed) and PORT (decimal) into an address.
 * Returns 0, or an errno (EINVAL). */
static int parse_address(const unsigned char *host, size_t host_len, const unsigned char *port, size_t port_len, struct sockaddr_storage *address, socklen_t *length) {
  char text[64];
  if (host_len == 0 || host_len >= sizeof text) return EINVAL;
  memcpy(text, host, host_len);
  text[host_len] = 0;
  char *literal = text;
  if (literal[0] == '[' && host_len > 2 && literal[host_len - 1] == ']') { literal[host_len - 1] = 0; literal++; }
  if (port_len == 0 || port_len > 5) return EINVAL;
  unsigned long number = 0;
  for (size_t i = 0; i < port_len; i++) {
    if (port[i] < '0' || port[i] > '9') return EINVAL;
    number = number * 10 + (unsigned long)(port[i] - '0');
  }
  if (number > 65535) return EINVAL;
  memset(address, 0, sizeof *address);
  struct sockaddr_in *v4 = (struct sockaddr_in *)address;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)address;
  if (inet_pton(AF_INET, literal, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)number);
    *length = sizeof *v4;
    return 0;
  }
  if (inet_pton(AF_INET6, literal, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)number);
    *length = sizeof *v6;
    return 0;
  }
  return EINVAL;
}

static void address_text(const struct sockaddr_storage *address, char *host, size_t host_size, char *port, size_t port_size) {
  if (address->ss_family == AF_INET6) {
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)address;
    inet_ntop(AF_INET6, &v6->sin6_addr, host, (socklen_t)host_size);
    snprintf(port, port_size, "%u", (unsigned)ntohs(v6->sin6_port));
  } else {
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)address;
    inet_ntop(AF_INET, &v4->sin_addr, host, (socklen_t)host_size);
    snprintf(port, port_size, "%u", (unsigned)ntohs(v4->sin_port));
  }
}

/* ---------- the client's frames ---------- */

/* The first two fields of a payload (HOST, PORT). Returns 0 when malformed. */
static int two_fields(const unsigned char *payload, size_t length, const unsigned char **a, size_t *a_len, const unsigned char **b, size_t *b_len) {
  if (length < 4) return 0;
  *a_len = get32(payload);
  if (*a_len > length - 4) return 0;
  *a = payload + 4;
  size_t offset = 4 + *a_len;
  if (length - offset < 4) return 0;
  *b_len = get32(payload + offset);
  if (*b_len > length - offset - 4) return 0;
  *b = payload + offset + 4;
  return 1;
}

static void do_listen(uint32_t id, const unsigned char *payload, size_t length) {
  if (find_listener(id) != NULL) { send_fields(id, 'E', "EEXIST", "listener id in use", NULL); return; }
  const unsigned char *host, *port;
  size_t host_len, port_len;
  struct sockaddr_storage address;
  socklen_t address_len;
  if (!two_fields(payload, length, &host, &host_len, &port, &port_len) || parse_address(host, host_len, port, port_len, &address, &address_len) != 0) {
    send_fields(id, 'E', "EINVAL", "listen: HOST must be an IPv4 or IPv6 literal and PORT a decimal number up to 65535", NULL);
    return;
  }
  int fd = socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) { send_errno(id, 'E', errno, "socket"); return; }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&address, address_len) < 0) { int error = errno; close(fd); send_errno(id, 'E', error, "bind"); return; }
  if (listen(fd, 128) < 0) { int error = errno; close(fd); send_errno(id, 'E', error, "listen"); return; }
  struct sockaddr_storage bound;
  socklen_t bound_len = sizeof bound;
  char host_text[INET6_ADDRSTRLEN], port_text[8];
  if (getsockname(fd, (struct sockaddr *)&bound, &bound_len) < 0) { int error = errno; close(fd); send_errno(id, 'E', error, "getsockname"); return; }
  address_text(&bound, host_text, sizeof host_text, port_text, sizeof port_text);
  if (listener_count == listener_capacity) {
    size_t capacity = listener_capacity == 0 ? 8 : listener_capacity * 2;
    listener_t *grown = realloc(listeners, capacity * sizeof *grown);
    if (grown == NULL) die(3, "out of memory for the listener table (%zu entries)", capacity);
    listeners = grown;
    listener_capacity = capacity;
  }
  listeners[listener_count++] = (listener_t){ id, fd };
  send_fields(id, 'K', port_text, NULL, NULL);
}

static void do_connect(uint32_t id, const unsigned char *payload, size_t length) {
  if (find_stream(id) != NULL) { send_fields(id, 'E', "EEXIST", "stream id in use", NULL); return; }
  const unsigned char *host, *port;
  size_t host_len, port_len;
  struct sockaddr_storage address;
  socklen_t address_len;
  if (!two_fields(payload, length, &host, &host_len, &port, &port_len) || parse_address(host, host_len, port, port_len, &address, &address_len) != 0) {
    send_fields(id, 'E', "EINVAL", "connect: HOST must be an IPv4 or IPv6 literal and PORT a decimal number up to 65535", NULL);
    return;
  }
  int fd = socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) { send_errno(id, 'E', errno, "socket"); return; }
  int result;
  do result = connect(fd, (struct sockaddr *)&address, address_len); while (result < 0 && errno == EINTR);
  if (result < 0 && errno != EINPROGRESS) { int error = errno; close(fd); send_errno(id, 'E', error, "connect"); return; }
  stream_t *s = add_stream(id, fd, CONNECTING);
  if (result == 0) stream_connected(s);
}

static void do_unlisten(uint32_t id) {
  for (size_t i = 0; i < listener_count; i++) {
    if (listeners[i].id == id) {
      close(listeners[i].fd);
      listeners[i] = listeners[--listener_count];
      accept_paused = 0;
      return;
    }
  }
}

static void do_data(uint32_t id, const unsigned char *payload, size_t length) {
  stream_t *s = find_stream(id);
  if (s == NULL || length == 0) return;
  if (s->client_fin) die(2, "protocol fault: D after F on stream %u", (unsigned)id);
  if (s->end - s->start + length > WINDOW) die(2, "protocol fault: the client sent past its window on stream %u", (unsigned)id);
  /* Nothing waits before these bytes: straight from stdin's buffer to the socket, never copied;
     only what the socket does not take now is kept (POLLOUT writes it). */
  if (s->start == s->end && s->state == OPEN) {
    ssize_t n = socket_write(s, payload, length);
    if (n < 0) return;
    payload += n;
    length -= (size_t)n;
    if (length == 0) return;
  }
  if (s->end + length > s->capacity && s->start > 0) {
    memmove(s->buffer, s->buffer + s->start, s->end - s->start);
    s->end -= s->start;
    s->start = 0;
  }
  if (s->end + length > s->capacity) {
    size_t capacity = s->capacity == 0 ? BUFFER_START : s->capacity;
    while (capacity < s->end + length) capacity *= 2;
    if (capacity > WINDOW) capacity = WINDOW;
    unsigned char *grown = realloc(s->buffer, capacity);
    if (grown == NULL) die(3, "out of memory for a stream's buffer (%zu bytes)", capacity);
    s->buffer = grown;
    s->capacity = capacity;
  }
  memcpy(s->buffer + s->end, payload, length);
  s->end += length;
}

static void do_fin(uint32_t id) {
  stream_t *s = find_stream(id);
  if (s == NULL || s->client_fin) return;
  s->client_fin = 1;
  if (s->state == OPEN) stream_write(s);
}

static void do_credit(uint32_t id, const unsigned char *payload, size_t length) {
  if (length != 4) die(2, "protocol fault: a W frame of %zu bytes (4 expected)", length);
  stream_t *s = find_stream(id);
  if (s == NULL) return;
  uint32_t bytes = get32(payload);
  if ((uint64_t)s->credit + bytes > WINDOW) die(2, "protocol fault: credit past the window on stream %u", (unsigned)id);
  s->credit += bytes;
}

static void handle_frame(uint32_t id, char code, const unsigned char *payload, size_t length) {
  int client_id = id >= 1 && id <= 0x7fffffffu;
  switch (code) {
    case 'L': if (!client_id) die(2, "protocol fault: listener id %u out of range", (unsigned)id); do_listen(id, payload, length); break;
    case 'U': do_unlisten(id); break;
    case 'C': if (!client_id) die(2, "protocol fault: stream id %u out of range", (unsigned)id); do_connect(id, payload, length); break;
    case 'D': do_data(id, payload, length); break;
    case 'F': do_fin(id); break;
    case 'X': { stream_t *s = find_stream(id); if (s != NULL) drop_stream(s, 1); break; }
    case 'W': do_credit(id, payload, length); break;
    default: {
      die(2, "protocol fault: unknown frame code %d (id %u)", (int)(unsigned char)code, (unsigned)id);
    }
  }
}

/* ---------- stdin ---------- */

static unsigned char *in;
static size_t in_start, in_end;

/* Read what stdin has and handle every complete frame. Returns 0 at EOF. */
static int read_stdin(void) {
  if (in_start > 0 && IN_CAPACITY - in_end < IN_CHUNK) {
    memmove(in, in + in_start, in_end - in_start);
    in_end -= in_start;
    in_start = 0;
  }
  ssize_t n;
  do n = read(0, in + in_end, IN_CAPACITY - in_end < IN_CHUNK ? IN_CAPACITY - in_end : IN_CHUNK); while (n < 0 && errno == EINTR);
  if (n < 0 && errno == EAGAIN) return 1;
  if (n <= 0) return 0;
  in_end += (size_t)n;
  while (in_end - in_start >= 9) {
    const unsigned char *header = in + in_start;
    uint32_t length = get32(header);
    if (length > MAX_FRAME) {
      die(2, "protocol fault: a frame of code %d announced %u bytes (at most %u)", (int)header[8], (unsigned)length, MAX_FRAME);
    }
    if (in_end - in_start < 9 + (size_t)length) break;
    in_start += 9 + (size_t)length;
    handle_frame(get32(header + 4), (char)header[8], header + 9, length);
  }
  if (in_start == in_end) in_start = in_end = 0;
  return 1;
}

/* ---------- accepting ---------- */

static void accept_on(listener_t *l) {
  struct sockaddr_storage peer;
  socklen_t peer_len = sizeof peer;
  int fd = accept4(l->fd, (struct sockaddr *)&peer, &peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) accept_paused = 1;
    return;
  }
  uint32_t id;
  do {
    id = TOP_BIT | next_accepted;
    next_accepted = next_accepted >= 0x7fffffffu ? 1 : next_accepted + 1;
  } while (find_stream(id) != NULL);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  add_stream(id, fd, OPEN);
  char listener_text[16], host[INET6_ADDRSTRLEN], port[8];
  snprintf(listener_text, sizeof listener_text, "%u", (unsigned)l->id);
  address_text(&peer, host, sizeof host, port, sizeof port);
  send_fields(id, 'A', listener_text, host, port);
  /* Who connected, after the A: the client judges and dials meanwhile. */
  out_flush();
  struct sockaddr_storage local;
  socklen_t local_len = sizeof local;
  char pid_text[24], comm[64] = "";
  long pid = getsockname(fd, (struct sockaddr *)&local, &local_len) == 0 ? peer_process(&peer, &local, comm, sizeof comm) : 0;
  if (pid <= 0) return;
  snprintf(pid_text, sizeof pid_text, "%ld", pid);
  send_fields(id, 'P', pid_text, comm, NULL);
}

/* ---------- the loop ---------- */

int main(int argc, char **argv) {
  launched_as("dsh-relay");
  if (argc > 1 && strcmp(argv[1], "--version") == 0) { printf("dsh-relay " PROTOCOL "\n"); return 0; }
  signal(SIGPIPE, SIG_IGN);
  /* Fds the relay does not use are closed: a pipe inherited by accident must not keep a
   * client's transport open after the relay ends. */
  for (int fd = 3; fd < 64; fd++) close(fd);
  int flags = fcntl(1, F_GETFL);
  if (flags >= 0) fcntl(1, F_SETFL, flags | O_NONBLOCK);
  /* A larger pipe to whoever reads stdout (fsd.c does the same; a refusal changes nothing). */
  fcntl(1, F_SETPIPE_SZ, 1 << 20);
  in = malloc(IN_CAPACITY);
  if (in == NULL) die(3, "out of memory for the input buffer");
  send_hello();

  struct pollfd *fds = NULL;
  size_t fds_capacity = 0;
  for (;;) {
    out_flush();
    /* stdin (or stdout alone, while the queue is over OUT_HARD), stdout while bytes wait for it,
     * the listeners, the streams. */
    size_t count = 2 + listener_count + stream_count;
    if (count > fds_capacity) {
      fds_capacity = count * 2;
      struct pollfd *grown = realloc(fds, fds_capacity * sizeof *grown);
      if (grown == NULL) die(3, "out of memory for the poll set (%zu entries)", fds_capacity);
      fds = grown;
    }
    int out_full = out_pending() >= OUT_SOFT;
    int stdin_held = out_pending() >= OUT_HARD;
    fds[0] = (struct pollfd){ stdin_held ? -1 : 0, POLLIN, 0 };
    fds[1] = (struct pollfd){ out_pending() > 0 ? 1 : -1, POLLOUT, 0 };
    size_t at = 2;
    for (size_t i = 0; i < listener_count; i++, at++) fds[at] = (struct pollfd){ out_full || accept_paused ? -1 : listeners[i].fd, POLLIN, 0 };
    for (size_t i = 0; i < stream_count; i++, at++) {
      stream_t *s = streams[i];
      short events = 0;
      if (s->state == CONNECTING) events = POLLOUT;
      else {
        if (s->start < s->end) events |= POLLOUT;
        if (!s->peer_eof && s->credit > 0 && !out_full) events |= POLLIN;
      }
      fds[at] = (struct pollfd){ events == 0 ? -1 : s->fd, events, 0 };
    }
    if (poll(fds, (nfds_t)at, -1) < 0) {
      if (errno == EINTR) continue;
      die(3, "poll failed: %s", errno_text(errno));
    }
    /* Positions in fds match the tables until stdin is read: a stream's handlers drop at most
     * that stream (drop_stream moves the last one into its place, already served when the walk
     * goes backwards), and accepting only appends. */
    size_t polled_listeners = listener_count;
    for (size_t i = stream_count; i-- > 0;) {
      short revents = fds[2 + polled_listeners + i].revents;
      if (revents == 0) continue;
      stream_t *s = streams[i];
      if (s->state == CONNECTING) { stream_connected(s); continue; }
      if ((revents & (POLLOUT | POLLERR | POLLHUP)) && s->start < s->end && stream_write(s) < 0) continue;
      if ((revents & (POLLIN | POLLERR | POLLHUP)) && !s->peer_eof && s->credit > 0 && out_pending() < OUT_SOFT) stream_read(s);
    }
    /* One accept per listener per round: the output queue is checked between them. */
    for (size_t i = 0; i < polled_listeners; i++) {
      if (fds[2 + i].revents != 0 && out_pending() < OUT_SOFT) accept_on(&listeners[i]);
    }
    short stdin_revents = fds[0].revents;
    if (stdin_revents != 0 && !read_stdin()) return 0;
  }
}
