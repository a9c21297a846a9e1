/*
 * The foreground probe of dsh-pty: which process group is in the foreground of the terminal, and
 * whether a member of it is PROVEN blocked reading the terminal. The facts and the rules are the
 * control program's (control.sh `fg`, `fgwait`, `waits`, `isterm`); here the shell's own parent
 * reads them in C, per terminal:
 * - a probe forks nothing and runs no interpreter (a few /proc reads, ~20 us), where control.sh
 *   spends ~2 ms of shell per probe on the ONE control channel every terminal of a world and user
 *   shares: under 20 output floods its probes queued behind each other for over a second;
 * - the holder is the ancestor of every process of the terminal's session, so reading their
 *   /proc/PID/syscall and /proc/PID/mem (ptrace-attach access: same uid, dumpable) also holds
 *   under Yama ptrace_scope=1, which admits only ancestors (Documentation/admin-guide/LSM/Yama.rst).
 *
 * Sources: proc(5) for stat (fields 3-8 and 22), task/TID/syscall ("NR ARG0 ARG1 ..." in hex,
 * "running", or "-1 ..." when blocked outside a system call), task/TID/schedstat (field 3: times
 * scheduled), task/TID/children, fd/, fdinfo/ ("tfd: FD events: HEX" per watched fd of an epoll
 * instance) and mem; the kernel's syscall tables (arch/x86/entry/syscalls/syscall_64.tbl,
 * include/uapi/asm-generic/unistd.h: aarch64 has no plain select, poll or epoll_wait).
 * Anything unreadable or ambiguous reads as not waiting, never as waiting.
 */
#define _GNU_SOURCE
#include "foreground.h"
#include "wire.h"
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__)
enum { SYS_READ_NR = 0, SYS_SELECT_NR = 23, SYS_PSELECT_NR = 270, SYS_POLL_NR = 7, SYS_PPOLL_NR = 271, SYS_EPWAIT_NR = 232, SYS_EPPWAIT_NR = 281 };
#elif defined(__aarch64__)
enum { SYS_READ_NR = 63, SYS_SELECT_NR = -2, SYS_PSELECT_NR = 72, SYS_POLL_NR = -2, SYS_PPOLL_NR = 73, SYS_EPWAIT_NR = -2, SYS_EPPWAIT_NR = 22 };
#else
enum { SYS_READ_NR = -2, SYS_SELECT_NR = -2, SYS_PSELECT_NR = -2, SYS_POLL_NR = -2, SYS_PPOLL_NR = -2, SYS_EPWAIT_NR = -2, SYS_EPPWAIT_NR = -2 };
#endif

/* Processes of the terminal's session visited per probe at most (control.sh: 1024). */
#define MAX_WALK 1024
/* select(2) waits on at most FD_SETSIZE descriptors; poll entries read at most (control.sh: 64). */
#define MAX_SELECT_FDS 1024
#define MAX_POLL_FDS 64

struct proc_stat {
  char state;
  long pgrp, tty_nr, tpgid;
  unsigned long long start;
};

/* The terminal: its PTY slave's file, and the tty number the program's stat names. */
struct term {
  dev_t dev;
  ino_t ino;
  long tty_nr;
};

/* Read a whole small file (at most size - 1 bytes) and NUL-terminate it; -1 when unreadable. */
static ssize_t read_small(const char *path, char *buffer, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t have = 0;
  while (have < size - 1) {
    ssize_t n = read(fd, buffer + have, size - 1 - have);
    if (n <= 0) break;
    have += (size_t)n;
  }
  close(fd);
  buffer[have] = 0;
  return have == 0 ? -1 : (ssize_t)have;
}

/* Parse /proc/PID/stat. comm (field 2) may hold spaces, ") " and newlines: fields 3.. start
 * after the LAST ") " of the file. */
static int read_stat(pid_t pid, struct proc_stat *out) {
  char path[64], text[4096];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  if (read_small(path, text, sizeof text) < 0) return -1;
  char *rest = NULL;
  for (char *at = strstr(text, ") "); at != NULL; at = strstr(at + 1, ") ")) rest = at + 2;
  if (rest == NULL) return -1;
  char *field[20];
  int count = 0;
  char *save = NULL;
  for (char *token = strtok_r(rest, " \n", &save); token != NULL && count < 20; token = strtok_r(NULL, " \n", &save)) field[count++] = token;
  if (count < 20) return -1;
  out->state = field[0][0];
  out->pgrp = atol(field[2]);
  out->tty_nr = atol(field[4]);
  out->tpgid = atol(field[5]);
  out->start = strtoull(field[19], NULL, 10);
  return 0;
}

/* PID's descriptor FD is the terminal: the PTY slave itself, or /dev/tty (as PID's own root sees
 * it: a sandbox may mount another /dev) while PID's controlling tty is the terminal (tty(4)). A
 * pipe, a socket or another tty never is. */
static int is_term(pid_t pid, long fd, const struct term *term, long ctty) {
  if (fd < 0 || fd > INT_MAX) return 0;
  char path[320];
  struct stat file, tty;
  snprintf(path, sizeof path, "/proc/%d/fd/%ld", (int)pid, fd);
  if (stat(path, &file) != 0) return 0;
  if (file.st_dev == term->dev && file.st_ino == term->ino) return 1;
  if (term->tty_nr == 0 || ctty != term->tty_nr) return 0;
  snprintf(path, sizeof path, "/proc/%d/root/dev/tty", (int)pid);
  return stat(path, &tty) == 0 && tty.st_dev == file.st_dev && tty.st_ino == file.st_ino;
}

/* `length` bytes of PID's memory at `address` (ptrace-attach access); 0 on success. */
static int read_memory(pid_t pid, unsigned long long address, void *buffer, size_t length) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = address > (unsigned long long)LLONG_MAX ? -1 : pread(fd, buffer, length, (off_t)address);
  close(fd);
  return n == (ssize_t)length ? 0 : -1;
}

/* select/pselect6(nfds, readfds, ...): one of the read set's descriptors is the terminal. */
static int select_waits(pid_t pid, unsigned long long nfds, unsigned long long readfds, const struct term *term, long ctty) {
  if (nfds < 1 || readfds == 0) return 0;
  if (nfds > MAX_SELECT_FDS) nfds = MAX_SELECT_FDS;
  unsigned char set[MAX_SELECT_FDS / 8];
  if (read_memory(pid, readfds, set, (size_t)(nfds + 7) / 8) != 0) return 0;
  for (unsigned long long fd = 0; fd < nfds; fd++)
    if (set[fd / 8] & (1u << (fd % 8)) && is_term(pid, (long)fd, term, ctty)) return 1;
  return 0;
}

/* poll/ppoll(fds, nfds, ...): an entry asking POLLIN is the terminal (negative fds are ignored
 * by the kernel). */
static int poll_waits(pid_t pid, unsigned long long fds, unsigned long long nfds, const struct term *term, long ctty) {
  if (nfds < 1 || fds == 0) return 0;
  if (nfds > MAX_POLL_FDS) nfds = MAX_POLL_FDS;
  struct pollfd entries[MAX_POLL_FDS];
  if (read_memory(pid, fds, entries, (size_t)nfds * sizeof entries[0]) != 0) return 0;
  for (unsigned long long i = 0; i < nfds; i++)
    if (entries[i].fd >= 0 && (entries[i].events & POLLIN) && is_term(pid, entries[i].fd, term, ctty)) return 1;
  return 0;
}

/* epoll_wait/epoll_pwait(epfd, ...): the instance watches the terminal for EPOLLIN (1). */
static int epoll_waits(pid_t pid, unsigned long long epfd, const struct term *term, long ctty) {
  char path[320], text[8192];
  if (epfd > INT_MAX) return 0;
  snprintf(path, sizeof path, "/proc/%d/fdinfo/%llu", (int)pid, epfd);
  if (read_small(path, text, sizeof text) < 0) return 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
    long fd;
    unsigned int events;
    if (sscanf(line, "tfd: %ld events: %x", &fd, &events) == 2 && (events & 1) && is_term(pid, fd, term, ctty)) return 1;
  }
  return 0;
}

/* Some thread of PID (whose controlling tty is `ctty`) is blocked reading the terminal. `call`
 * gets that thread's wait, TID:NR:A0:A1:RUNS (A0, A1 as the kernel prints them; RUNS its times
 * scheduled: a blocked thread does not run, so another value on a later probe means it left its
 * wait and waited again in between). */
static int waits(pid_t pid, const struct term *term, long ctty, char *call) {
  char path[320];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *tasks = opendir(path);
  if (tasks == NULL) return 0;
  int found = 0;
  for (struct dirent *task; !found && (task = readdir(tasks)) != NULL;) {
    if (task->d_name[0] < '0' || task->d_name[0] > '9') continue;
    char line[512];
    snprintf(path, sizeof path, "/proc/%d/task/%s/syscall", (int)pid, task->d_name);
    if (read_small(path, line, sizeof line) < 0) continue;
    char *save = NULL;
    char *nr = strtok_r(line, " \n", &save), *a0 = strtok_r(NULL, " \n", &save), *a1 = strtok_r(NULL, " \n", &save);
    if (nr == NULL || a0 == NULL || a1 == NULL || nr[0] == '-') continue;
    char *end;
    long number = strtol(nr, &end, 10);
    if (*end != 0) continue;
    unsigned long long arg0 = strtoull(a0, NULL, 16), arg1 = strtoull(a1, NULL, 16), runs = 0, cpu, wait;
    char sched[128];
    snprintf(path, sizeof path, "/proc/%d/task/%s/schedstat", (int)pid, task->d_name);
    if (read_small(path, sched, sizeof sched) < 0 || sscanf(sched, "%llu %llu %llu", &cpu, &wait, &runs) != 3) runs = 0;
    if (number == SYS_READ_NR) found = arg0 <= INT_MAX && is_term(pid, (long)arg0, term, ctty);
    else if (number == SYS_SELECT_NR || number == SYS_PSELECT_NR) found = select_waits(pid, arg0, arg1, term, ctty);
    else if (number == SYS_POLL_NR || number == SYS_PPOLL_NR) found = poll_waits(pid, arg0, arg1, term, ctty);
    else if (number == SYS_EPWAIT_NR || number == SYS_EPPWAIT_NR) found = epoll_waits(pid, arg0, term, ctty);
    if (found) snprintf(call, FG_CALL_MAX + 1, "%.10s:%.20s:%.40s:%.40s:%llu", task->d_name, nr, a0, a1, runs);
  }
  closedir(tasks);
  return found;
}

/* Append the children of every thread of PID to the walk (task/TID/children, proc(5)). */
static void add_children(pid_t pid, pid_t *walk, int *tail) {
  char path[320], text[8192];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *tasks = opendir(path);
  if (tasks == NULL) return;
  for (struct dirent *task; *tail < MAX_WALK && (task = readdir(tasks)) != NULL;) {
    if (task->d_name[0] < '0' || task->d_name[0] > '9') continue;
    snprintf(path, sizeof path, "/proc/%d/task/%s/children", (int)pid, task->d_name);
    if (read_small(path, text, sizeof text) < 0) continue;
    char *save = NULL;
    for (char *child = strtok_r(text, " \n", &save); child != NULL && *tail < MAX_WALK; child = strtok_r(NULL, " \n", &save)) walk[(*tail)++] = (pid_t)atol(child);
  }
  closedir(tasks);
}

/* A member of process group `group` waits reading the terminal: the group's leader first, then
 * the program's descendants (bounded by MAX_WALK), as control.sh `fgwait`. */
static int group_waits(pid_t program, long group, const struct term *term, char *call) {
  struct proc_stat member;
  if (read_stat((pid_t)group, &member) == 0 && member.pgrp == group && waits((pid_t)group, term, member.tty_nr, call)) return 1;
  static pid_t walk[MAX_WALK];
  int head = 0, tail = 0;
  walk[tail++] = program;
  while (head < tail) {
    pid_t pid = walk[head++];
    if (pid != group && read_stat(pid, &member) == 0 && member.pgrp == group && waits(pid, term, member.tty_nr, call)) return 1;
    add_children(pid, walk, &tail);
  }
  return 0;
}

int fg_probe(pid_t program, unsigned long long starttime, dev_t tty_dev, ino_t tty_ino, struct fg_facts *out) {
  struct proc_stat stat;
  if (read_stat(program, &stat) != 0 || stat.start != starttime) return -1;
  if (stat.state == 'Z' || stat.state == 'X' || stat.state == 'x') return -1;
  out->tpgid = stat.tpgid;
  out->program_pgrp = stat.pgrp;
  out->waiting = 0;
  out->call[0] = 0;
  struct term term = { tty_dev, tty_ino, stat.tty_nr };
  if (stat.tpgid > 0) out->waiting = group_waits(program, stat.tpgid, &term, out->call);
  if (!out->waiting) out->call[0] = 0;
  return 0;
}

unsigned int fg_reply(int have_pty, dev_t tty_dev, ino_t tty_ino, const unsigned char *request, unsigned char *reply) {
  struct fg_facts facts;
  int gone = !have_pty || fg_probe((pid_t)get_u32(request + 4), (unsigned long long)get_u64(request + 8), tty_dev, tty_ino, &facts) != 0;
  memcpy(reply, request, 4);
  reply[4] = gone ? 1 : 0;
  if (gone) return 5;
  put_u32(reply + 5, (uint32_t)(int32_t)facts.tpgid);
  put_u32(reply + 9, (uint32_t)(int32_t)facts.program_pgrp);
  reply[13] = facts.waiting ? 1 : 0;
  size_t call = strlen(facts.call);
  memcpy(reply + 14, facts.call, call);
  return 14 + (unsigned int)call;
}

int fg_reply_waiting(const unsigned char *reply, unsigned int length) {
  return length >= 14 && reply[4] == 0 && reply[13] == 1;
}
