/* dsh-pty --connect PATH (relay.c): the pipe between a client's exec and a held shell's socket. */
#ifndef DSH_PTY_RELAY_H
#define DSH_PTY_RELAY_H
#include <stddef.h>
/* Relay stdin to the Unix socket at `path` and the socket to stdout until either ends, the
 * `first_len` bytes at `first` (input read before) ahead of stdin's. Returns the process's exit
 * status; a socket that cannot be reached is an `E` frame on stdout, its text starting with the
 * errno's name (ENOENT, ECONNREFUSED, EACCES, ...). */
int relay(const char *path, const unsigned char *first, size_t first_len);
/* The name of errno value `error` (ENOENT, ...), or "E" followed by its number. */
const char *errno_name(int error);
#endif
