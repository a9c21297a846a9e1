/* The held job's output ring (ring.h states the layout). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "ring.h"

static void put_u64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static uint64_t get_u64(const unsigned char *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

/* pwrite(2) or pread(2) all of `length` bytes at `at`, through short transfers and EINTR: 0, or -1. */
static int transfer_all(int fd, unsigned char *data, size_t length, off_t at, int writing) {
  while (length > 0) {
    ssize_t n = writing ? pwrite(fd, data, length, at) : pread(fd, data, length, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    data += n;
    length -= (size_t)n;
    at += n;
  }
  return 0;
}

static int pwrite_all(int fd, const unsigned char *data, size_t length, off_t at) { return transfer_all(fd, (unsigned char *)data, length, at, 1); }
static int pread_all(int fd, unsigned char *data, size_t length, off_t at) { return transfer_all(fd, data, length, at, 0); }

int ring_create(const char *path, uint64_t capacity) {
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return -1;
  unsigned char header[RING_HEADER];
  put_u64(header, 0);
  put_u64(header + 8, capacity);
  if (pwrite_all(fd, header, sizeof header, 0) < 0) { close(fd); return -1; }
  return fd;
}

int ring_append(int fd, uint64_t capacity, uint64_t *head, const unsigned char *data, size_t length) {
  uint64_t at = *head;
  if (length > capacity) {
    at += length - capacity;
    data += length - capacity;
    length = (size_t)capacity;
  }
  while (length > 0) {
    uint64_t slot = at % capacity;
    size_t piece = length < capacity - slot ? length : (size_t)(capacity - slot);
    if (pwrite_all(fd, data, piece, (off_t)(RING_HEADER + slot)) < 0) return -1;
    data += piece;
    length -= piece;
    at += piece;
  }
  *head = at;
  unsigned char header[8];
  put_u64(header, at);
  return pwrite_all(fd, header, 8, 0);
}

int ring_read(int fd, uint64_t from, unsigned char *out, size_t room, struct ring_read *result) {
  unsigned char header[RING_HEADER];
  if (pread_all(fd, header, sizeof header, 0) < 0) return -1;
  uint64_t head = get_u64(header), capacity = get_u64(header + 8);
  if (capacity == 0) return -1;
  uint64_t oldest = head > capacity ? head - capacity : 0;
  uint64_t start = from < oldest ? oldest : from;
  if (start > head) start = head;
  uint64_t want = head - start < room ? head - start : room;
  size_t done = 0;
  while (done < want) {
    uint64_t slot = (start + done) % capacity;
    size_t piece = want - done < capacity - slot ? (size_t)(want - done) : (size_t)(capacity - slot);
    if (pread_all(fd, out + done, piece, (off_t)(RING_HEADER + slot)) < 0) return -1;
    done += piece;
  }
  /* Bytes the holder overwrote while they were copied are dropped, not returned. */
  if (pread_all(fd, header, 8, 0) < 0) return -1;
  uint64_t now = get_u64(header);
  uint64_t kept = now > capacity ? now - capacity : 0;
  if (kept > start) {
    uint64_t lost = kept - start < done ? kept - start : done;
    memmove(out, out + lost, done - (size_t)lost);
    done -= (size_t)lost;
    start += lost;
  }
  result->offset = start;
  result->dropped = start > from ? start - from : 0;
  result->head = now;
  result->length = done;
  return 0;
}
