/*
 * The terminal's PTY and its shell: posix_openpt(3), then a child that becomes the leader of a
 * new session (setsid(2)) and takes the PTY as its controlling tty (TIOCSCTTY, tty_ioctl(4)),
 * so the shell is what it is on a PTY the engine or sshd allocates.
 */
#define _GNU_SOURCE
#include "pty-shell.h"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* The child: a new session whose controlling tty is the PTY, then `/bin/sh -c SCRIPT`. */
static void exec_shell(int slave, const char *script, const sigset_t *mask) {
  if (setsid() < 0) _exit(126);
  /* TIOCSCTTY on the inherited slave fd: a session leader without a controlling tty takes this
   * one (arg 0: never steal it from another session; tty_ioctl(4)). */
  if (ioctl(slave, TIOCSCTTY, 0) < 0) _exit(126);
  if (dup2(slave, 0) < 0 || dup2(slave, 1) < 0 || dup2(slave, 2) < 0) _exit(126);
  if (slave > 2) close(slave);
  /* The holder's session tag is its own (the client's reaper ends a holder a dead client left);
   * the shell gets the terminal's, from the start wrapper. */
  unsetenv("DSH_REMOTE_SESSION");
  /* Ignored signals and the mask survive execve(2): give the shell the defaults. */
  signal(SIGPIPE, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  sigprocmask(SIG_SETMASK, mask, NULL);
  execl("/bin/sh", "sh", "-c", script, (char *)NULL);
  _exit(127);
}

int pty_shell_start(unsigned rows, unsigned cols, const char *script, const sigset_t *shell_mask, struct pty_shell *out, const char **failed) {
  int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) { *failed = "posix_openpt"; return -1; }
  char slave_name[128];
  if (grantpt(master) < 0) { *failed = "grantpt"; goto fail; }
  if (unlockpt(master) < 0) { *failed = "unlockpt"; goto fail; }
  if (ptsname_r(master, slave_name, sizeof slave_name) != 0) { *failed = "ptsname"; goto fail; }
  if (rows > 0 && cols > 0) {
    struct winsize size = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
    ioctl(master, TIOCSWINSZ, &size);
  }
  /* Opened here, not in the child: the slave side is never closed between the fork and the
   * shell's exec, so the master reports a hangup only when the terminal really has no user left. */
  int slave = open(slave_name, O_RDWR | O_NOCTTY);
  if (slave < 0) { *failed = "open the PTY slave"; goto fail; }
  struct stat slave_file;
  if (fstat(slave, &slave_file) < 0) { *failed = "fstat the PTY slave"; close(slave); goto fail; }
  pid_t pid = fork();
  if (pid < 0) { *failed = "fork"; close(slave); goto fail; }
  if (pid == 0) exec_shell(slave, script, shell_mask);
  close(slave);
  fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
  out->master = master;
  out->pid = pid;
  out->slave_dev = slave_file.st_dev;
  out->slave_ino = slave_file.st_ino;
  return 0;
fail: {
    int saved = errno;
    close(master);
    errno = saved;
    return -1;
  }
}

int pty_signal_foreground(int master, int signo, pid_t program, pid_t *group) {
  pid_t foreground = tcgetpgrp(master);
  *group = foreground < 0 ? 0 : foreground;
  if (foreground <= 0) return 2;
  if (signo == SIGKILL && getpgid(program) == foreground) return 1;
  return kill(-foreground, signo) == 0 ? 0 : 2;
}

void pty_exit_status(int status, unsigned char out[3]) {
  if (WIFSIGNALED(status)) { out[0] = 1; out[1] = (unsigned char)WTERMSIG(status); out[2] = WCOREDUMP(status) ? 1 : 0; }
  else { out[0] = 0; out[1] = (unsigned char)WEXITSTATUS(status); out[2] = 0; }
}
