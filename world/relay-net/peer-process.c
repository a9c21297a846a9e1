/*
 * The process at the other end of an accepted loopback connection (peer-process.h).
 *
 * Facts relied on (proc(5)): /proc/net/tcp lists the TCP sockets of the reader's network
 * namespace, one per line: `sl: LOCAL REMOTE st tx:rx tr:when retrnsmt uid timeout inode ...`,
 * each address `%08X:%04X`, the IPv4 address as the kernel's __be32 printed as a number (so the
 * value in this host's byte order equals sin_addr.s_addr read as a uint32_t) and the port in host
 * order. The peer's socket is the line whose LOCAL is the peer's address and REMOTE the accepted
 * socket's own. Its inode names it in every holder's /proc/PID/fd as `socket:[INODE]`.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "peer-process.h"

/* fd links read at most per lookup: a world of thousands of open files costs a bounded pause. */
#define MAX_PEER_LINKS 20000

/* The inode of the TCP socket from `peer` to `local` (both IPv4), or 0. */
static unsigned long socket_inode(const struct sockaddr_in *peer, const struct sockaddr_in *local) {
  FILE *table = fopen("/proc/net/tcp", "re");
  if (table == NULL) return 0;
  char line[512];
  unsigned long found = 0;
  if (fgets(line, sizeof line, table) == NULL) { fclose(table); return 0; }
  while (found == 0 && fgets(line, sizeof line, table) != NULL) {
    unsigned int local_ip, local_port, remote_ip, remote_port;
    unsigned long inode;
    if (sscanf(line, " %*d: %8X:%4X %8X:%4X %*X %*X:%*X %*X:%*X %*X %*u %*u %lu", &local_ip, &local_port, &remote_ip, &remote_port, &inode) != 5) continue;
    if (local_ip == (uint32_t)peer->sin_addr.s_addr && local_port == ntohs(peer->sin_port)
        && remote_ip == (uint32_t)local->sin_addr.s_addr && remote_port == ntohs(local->sin_port)) found = inode;
  }
  fclose(table);
  return found;
}

long peer_process(const struct sockaddr_storage *peer, const struct sockaddr_storage *local, char *comm, size_t comm_size) {
  comm[0] = 0;
  if (peer->ss_family != AF_INET || local->ss_family != AF_INET) return 0;
  unsigned long inode = socket_inode((const struct sockaddr_in *)peer, (const struct sockaddr_in *)local);
  if (inode == 0) return 0;
  char wanted[48];
  snprintf(wanted, sizeof wanted, "socket:[%lu]", inode);
  DIR *proc = opendir("/proc");
  if (proc == NULL) return 0;
  long holder = 0;
  long self = (long)getpid();
  int budget = MAX_PEER_LINKS;
  for (struct dirent *entry; holder == 0 && budget > 0 && (entry = readdir(proc)) != NULL;) {
    char *end;
    long pid = strtol(entry->d_name, &end, 10);
    if (*end != 0 || pid <= 0 || pid == self) continue;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/fd", pid);
    DIR *fds = opendir(path);
    if (fds == NULL) continue;
    for (struct dirent *fd; holder == 0 && budget > 0 && (fd = readdir(fds)) != NULL;) {
      if (fd->d_name[0] == '.') continue;
      budget--;
      char target[64];
      ssize_t n = readlinkat(dirfd(fds), fd->d_name, target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = 0;
      if (strcmp(target, wanted) == 0) holder = pid;
    }
    closedir(fds);
  }
  closedir(proc);
  if (holder == 0) return 0;
  char path[64];
  snprintf(path, sizeof path, "/proc/%ld/comm", holder);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = read(fd, comm, comm_size - 1);
    close(fd);
    if (n < 0) n = 0;
    comm[n] = 0;
    comm[strcspn(comm, "\n")] = 0;
  }
  return holder;
}
