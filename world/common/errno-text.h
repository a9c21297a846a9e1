/* errno_text(): an errno's text in glibc's words in every build (errno-text.c). */
#ifndef DSH_WORLD_TOOLS_ERRNO_TEXT_H
#define DSH_WORLD_TOOLS_ERRNO_TEXT_H

/* The text of `error`, as glibc's strerror(3) gives it; never NULL. */
const char *errno_text(int error);

#endif
