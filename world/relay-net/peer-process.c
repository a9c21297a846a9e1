/*
 * The process at the other end of an accepted loopback connection (peer-process.h).
 *
 * The peer's socket is found by an exact sock_diag lookup (NETLINK_SOCK_DIAG, sock_diag(7)):
 * one SOCK_DIAG_BY_FAMILY request naming the connection (the socket whose own address is the
 * peer's and whose remote is the accepted socket's), answered with its inode. Not
 * /proc/net/tcp: reading it walks the kernel's whole TCP hash table (5 ms here for a namespace
 * holding one socket), which would sit in every connect of the world. The inode names the socket
 * in every holder's /proc/PID/fd as `socket:[INODE]` (proc(5)). The structures are the kernel's
 * uapi (linux/netlink.h, linux/inet_diag.h), spelled here because musl's headers carry no
 * linux/ ones; ports and addresses in them are in network byte order.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "peer-process.h"

/* fd links read at most per lookup: a world of thousands of open files costs a bounded pause. */
#define MAX_PEER_LINKS 20000

/* linux/netlink.h, linux/sock_diag.h, linux/inet_diag.h (uapi). */
#define DIAG_NETLINK_SOCK_DIAG 4
#define DIAG_SOCK_DIAG_BY_FAMILY 20
#define DIAG_NLM_F_REQUEST 1
#define DIAG_NO_COOKIE 0xffffffffu
struct diag_nlmsghdr { uint32_t len; uint16_t type, flags; uint32_t seq, pid; };
struct diag_sockid { uint16_t sport, dport; uint32_t src[4], dst[4]; uint32_t ifindex; uint32_t cookie[2]; };
struct diag_req_v2 { uint8_t family, protocol, ext, pad; uint32_t states; struct diag_sockid id; };
struct diag_msg { uint8_t family, state, timer, retrans; struct diag_sockid id; uint32_t expires, rqueue, wqueue, uid, inode; };

/* The same from /proc/net/tcp (`sl: LOCAL REMOTE ... inode`, each address `%08X:%04X`: the
 * kernel's __be32 printed as a number, so equal to s_addr read in this host's byte order, and the
 * port in host order): slow, so only where sock_diag is not there (qemu-user passes no
 * NETLINK_SOCK_DIAG; some sandboxes refuse netlink). */
static unsigned long socket_inode_from_table(const struct sockaddr_in *peer, const struct sockaddr_in *local) {
  FILE *table = fopen("/proc/net/tcp", "re");
  if (table == NULL) return 0;
  char line[512];
  unsigned long found = 0;
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

/* The inode of the TCP socket whose own address is `peer` and whose remote is `local` (both IPv4), or 0. */
static unsigned long socket_inode(const struct sockaddr_in *peer, const struct sockaddr_in *local) {
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, DIAG_NETLINK_SOCK_DIAG);
  if (fd < 0) return socket_inode_from_table(peer, local);
  /* Bounded: the kernel answers at once, but a lookup must never stall the relay. */
  struct timeval bound = { 0, 200 * 1000 };
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  struct { struct diag_nlmsghdr head; struct diag_req_v2 req; } request;
  memset(&request, 0, sizeof request);
  request.head.len = sizeof request;
  request.head.type = DIAG_SOCK_DIAG_BY_FAMILY;
  request.head.flags = DIAG_NLM_F_REQUEST;
  request.req.family = AF_INET;
  request.req.protocol = IPPROTO_TCP;
  request.req.states = 0xffffffffu;
  request.req.id.sport = peer->sin_port;
  request.req.id.dport = local->sin_port;
  request.req.id.src[0] = peer->sin_addr.s_addr;
  request.req.id.dst[0] = local->sin_addr.s_addr;
  request.req.id.cookie[0] = request.req.id.cookie[1] = DIAG_NO_COOKIE;
  struct sockaddr_nl_like { uint16_t family, pad; uint32_t pid, groups; } kernel = { AF_NETLINK, 0, 0, 0 };
  unsigned long inode = 0;
  if (sendto(fd, &request, sizeof request, 0, (struct sockaddr *)&kernel, sizeof kernel) == (ssize_t)sizeof request) {
    union { struct diag_nlmsghdr head; unsigned char bytes[1024]; } reply;
    ssize_t n = recv(fd, &reply, sizeof reply, 0);
    if (n >= (ssize_t)(sizeof reply.head + sizeof(struct diag_msg)) && reply.head.type == DIAG_SOCK_DIAG_BY_FAMILY) {
      struct diag_msg message;
      memcpy(&message, reply.bytes + sizeof reply.head, sizeof message);
      inode = message.inode;
    }
  }
  close(fd);
  return inode;
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
