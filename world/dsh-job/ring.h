/*
 * The output log of a held job (ring.c): one file per stream, a bounded ring addressed by the
 * absolute offset of each byte since the job started, so a reader that comes back later (a new
 * client) resumes where it stopped and learns how much was dropped in between.
 *
 * File layout (little-endian): u64 head (bytes written in all), u64 capacity, then `capacity`
 * bytes of data; the byte at offset O is at 16 + O % capacity while O >= head - capacity.
 * Only the holder writes (data first, then the head); readers re-read the head after copying,
 * so bytes overwritten during a read are reported as dropped, never returned.
 */
#ifndef DSH_JOB_RING_H
#define DSH_JOB_RING_H
#include <stddef.h>
#include <stdint.h>

#define RING_HEADER 16

/* Create `path` (O_EXCL, 0600) as an empty ring of `capacity` bytes. Returns its fd or -1. */
int ring_create(const char *path, uint64_t capacity);

/* Append `length` bytes at the head (the oldest beyond the capacity are dropped). *head is the
 * holder's own count, updated. Returns 0, or -1 on a write error. */
int ring_append(int fd, uint64_t capacity, uint64_t *head, const unsigned char *data, size_t length);

/* What a read found: `length` bytes of `out` from `offset` (after `dropped` bytes that were no
 * longer kept), and the head then. */
struct ring_read {
  uint64_t offset, dropped, head;
  size_t length;
};

/* Read at most `room` bytes from `from` into `out`. Returns 0, or -1 when the file cannot be read
 * or is not a ring. */
int ring_read(int fd, uint64_t from, unsigned char *out, size_t room, struct ring_read *result);

#endif
