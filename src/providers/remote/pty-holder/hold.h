/* dsh-pty --hold STEM (hold.c): a shell that outlives its client and its transport. */
#ifndef DSH_PTY_HOLD_H
#define DSH_PTY_HOLD_H
/* Start a holder listening on STEM.sock (a daemon: its own session, SIGHUP ignored), then relay
 * this process's stdin/stdout to it (relay.c). Returns the process's exit status. */
int hold(const char *stem);
#endif
