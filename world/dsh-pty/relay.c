/*
 * The relay: a held shell (hold.c) listens on a Unix socket in the world; a client reaches it
 * through a fresh exec (Docker) or exec channel (SSH) running `dsh-pty --connect PATH`, which
 * copies bytes both ways and knows nothing of the frames. When the client's transport goes, the
 * relay's stdin ends and it closes the socket: the holder sees its controller leave.
 */
#define _GNU_SOURCE
#include "errno-text.h"
#include "relay.h"
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "wire.h"

const char *errno_name(int error) {
  switch (error) {
    case ENOENT: return "ENOENT";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case ECONNREFUSED: return "ECONNREFUSED";
    case ENOTDIR: return "ENOTDIR";
    case ENAMETOOLONG: return "ENAMETOOLONG";
    case EEXIST: return "EEXIST";
    case ENOTSOCK: return "ENOTSOCK";
    default: {
      static char name[16];
      snprintf(name, sizeof name, "E%d", error);
      return name;
    }
  }
}

/* Write all of `data` to `fd` (blocking). Returns 0, or -1 when `fd` is gone. */
static int write_all(int fd, const unsigned char *data, size_t length) {
  while (length > 0) {
    ssize_t n = write(fd, data, length);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) { struct pollfd p = { fd, POLLOUT, 0 }; poll(&p, 1, -1); continue; }
      return -1;
    }
    data += n;
    length -= (size_t)n;
  }
  return 0;
}

int relay(const char *path, const unsigned char *first, size_t first_len) {
  signal(SIGPIPE, SIG_IGN);
  int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un address = { .sun_family = AF_UNIX };
  int failed = sock < 0 ? errno : 0;
  if (failed == 0 && strlen(path) >= sizeof address.sun_path) failed = ENAMETOOLONG;
  if (failed == 0) {
    strcpy(address.sun_path, path);
    if (connect(sock, (struct sockaddr *)&address, sizeof address) < 0) failed = errno;
  }
  if (failed != 0) {
    char text[512];
    int n = snprintf(text, sizeof text, "%s: connect %s: %s", errno_name(failed), path, errno_text(failed));
    uint32_t length = (uint32_t)(n < 0 ? 0 : n < (int)sizeof text ? n : (int)sizeof text - 1);
    unsigned char header[5] = { 'E' };
    put_u32(header + 1, length);
    write_all(1, header, sizeof header);
    write_all(1, (const unsigned char *)text, length);
    return 1;
  }
  /* What the client sent before the relay began (a held shell's spawn after the hold frame). */
  if (first_len > 0 && write_all(sock, first, first_len) < 0) return 0;
  static unsigned char buffer[64 * 1024];
  for (;;) {
    struct pollfd fds[2] = { { 0, POLLIN, 0 }, { sock, POLLIN, 0 } };
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 2;
    }
    if (fds[0].revents) {
      ssize_t n = read(0, buffer, sizeof buffer);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      /* The client's transport ended: the holder sees its controller leave. */
      if (n <= 0 || write_all(sock, buffer, (size_t)n) < 0) return 0;
    }
    if (fds[1].revents) {
      ssize_t n = read(sock, buffer, sizeof buffer);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0 || write_all(1, buffer, (size_t)n) < 0) return 0;
    }
  }
}
