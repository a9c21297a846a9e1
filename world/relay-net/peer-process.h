/*
 * Which process of the world holds the other end of a connection the relay accepted
 * (peer-process.c): for the egress log's `process` (issue 34: "process where known").
 */
#ifndef DSH_RELAY_PEER_PROCESS_H
#define DSH_RELAY_PEER_PROCESS_H
#include <stddef.h>
#include <sys/socket.h>

/*
 * The pid (in the relay's pid namespace) and comm of a process holding the socket at `peer`
 * (the address accept(2) gave) connected to `local` (the accepted socket's own address), or 0
 * when none can be told: not IPv4, no such socket (sock_diag), or no process whose fds the
 * relay may read holds it (another user's, a non-dumpable one). `comm` gets the name, "" if
 * unknown. Reads at most MAX_PEER_LINKS fd links.
 */
long peer_process(const struct sockaddr_storage *peer, const struct sockaddr_storage *local, char *comm, size_t comm_size);

#endif
