/*
 * The foreground probe of dsh-pty (foreground.c): the same facts as the control program's `fg`
 * request (control.sh `fgwait`/`waits`), read by the shell's own parent in C.
 */
#ifndef DSH_PTY_FOREGROUND_H
#define DSH_PTY_FOREGROUND_H
#include <sys/types.h>

/* The length of the longest wait token (`TID:NR:A0:A1:RUNS`), NUL excluded. */
#define FG_CALL_MAX 160

struct fg_facts {
  /* The tty's foreground process group (stat field 8, tpgid); -1 when the tty has none. */
  long tpgid;
  /* The program's own process group. */
  long program_pgrp;
  /* A member of the foreground group is proven blocked reading the terminal. */
  int waiting;
  /* The waiting thread's wait, `TID:NR:A0:A1:RUNS` (empty when not waiting). */
  char call[FG_CALL_MAX + 1];
};

/*
 * Probe the terminal of `program` (pid, start time in clock ticks: stat field 22) whose PTY
 * slave is the file (tty_dev, tty_ino). Returns 0 with `out` filled, or -1 when the program is
 * gone (no such process, another start time, or a zombie).
 */
int fg_probe(pid_t program, unsigned long long starttime, dev_t tty_dev, ino_t tty_ino, struct fg_facts *out);

/*
 * Answer the probe request `request` (an `F` frame's payload, at least 16 bytes: u32 id, u32 pid,
 * u64 start time) into `reply` (room for 14 + FG_CALL_MAX bytes): the `f` frame's payload (see
 * dsh-pty.c), "gone" when there is no PTY (`have_pty` 0). Returns the reply's length.
 */
unsigned int fg_reply(int have_pty, dev_t tty_dev, ino_t tty_ino, const unsigned char *request, unsigned char *reply);

/* Whether the `f` reply `reply` of `length` bytes says a member of the foreground group is proven
 * blocked reading the terminal (its outcome is facts and its waiting byte is 1). */
int fg_reply_waiting(const unsigned char *reply, unsigned int length);

#endif
