/*
 * The terminal's PTY and its shell (pty-shell.c): what dsh-pty does as the shell's parent, in
 * both of its modes (attached, dsh-pty.c; holding, hold.c).
 */
#ifndef DSH_PTY_SHELL_H
#define DSH_PTY_SHELL_H
#include <signal.h>
#include <sys/types.h>

struct pty_shell {
  /* The PTY master (non-blocking, close-on-exec). */
  int master;
  /* The shell: the leader of its own session, the PTY its controlling tty. */
  pid_t pid;
  /* The PTY slave's file: what a descriptor must be to count as the terminal (foreground.c). */
  dev_t slave_dev;
  ino_t slave_ino;
};

/*
 * Open a PTY at rows x cols (0: the kernel's default) and fork `/bin/sh -c script` onto it, with
 * `shell_mask` as its signal mask and default dispositions. Returns 0, or -1 with errno set and
 * `*failed` naming the step that failed (posix_openpt, grantpt, ...).
 */
int pty_shell_start(unsigned rows, unsigned cols, const char *script, const sigset_t *shell_mask, struct pty_shell *out, const char **failed);

/*
 * Deliver `signo` to the PTY's foreground process group (TIOCGPGRP on the master: the kernel's
 * answer for this very tty), refusing SIGKILL when that group is `program`'s own (its prompt).
 * Returns 0 signalled, 1 refused, 2 failed; `*group` is the group (0 when unknown).
 */
int pty_signal_foreground(int master, int signo, pid_t program, pid_t *group);

/* The three bytes of an exit frame for wait status `status`: kind (0 exited, 1 killed by a
 * signal), exit code or signal number, core dumped. */
void pty_exit_status(int status, unsigned char out[3]);
#endif
