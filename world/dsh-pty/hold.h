/* A held shell (hold.c): a shell that outlives its client and its transport. */
#ifndef DSH_PTY_HOLD_H
#define DSH_PTY_HOLD_H
#include <signal.h>
#include <stddef.h>
/* Start a holder listening on STEM.sock (a daemon: its own session, SIGHUP ignored, no client's
 * session tag), then relay this process's stdin/stdout to it (relay.c), the `first_len` bytes at
 * `first` (read from stdin already) ahead of the rest. `mask`: the signal mask the holder and its
 * shell start with. Returns the process's exit status; a holder that cannot start is an `E`
 * frame on stdout. */
int hold(const char *stem, const unsigned char *first, size_t first_len, const sigset_t *mask);
/* `dsh-pty --held STEM FD`: the holder `hold` forked, run again without the client's session
 * tag, listening on the inherited socket FD. Returns the process's exit status. */
int hold_inherited(const char *stem, const char *fd_text);
#endif
