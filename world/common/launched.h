/* What a world tool does first when the client's launcher started it
 * (src/providers/remote/world-tools/launch.ts): the launcher verified the copy through fd 3 and
 * executed that open file (/proc/self/fd/3), so
 *  - the kernel named the process after the file it executed ("3"; comm, proc(5)): the tool
 *    names itself again (prctl(2) PR_SET_NAME), so ps, pgrep -x and doctor see "dsh-pty";
 *  - fd 3 is still open on the tool's own image: closed here when it is that image (same
 *    st_dev and st_ino as /proc/self/exe), so no shell or server the tool starts inherits it.
 *    Any other fd 3 (a socket handed over by number) is left alone.
 * Header-only: every tool includes it and calls launched_as() before anything else. */
#ifndef DSH_WORLD_TOOLS_LAUNCHED_H
#define DSH_WORLD_TOOLS_LAUNCHED_H

#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

static inline void launched_as(const char *name) {
  prctl(PR_SET_NAME, name, 0, 0, 0);
  struct stat fd3, self;
  if (fstat(3, &fd3) == 0 && S_ISREG(fd3.st_mode) && stat("/proc/self/exe", &self) == 0 && fd3.st_dev == self.st_dev && fd3.st_ino == self.st_ino) close(3);
}

#endif
