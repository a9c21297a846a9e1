/* SHA-256 (FIPS 180-4) of a small buffer: the held shell's secret is kept only as its digest. */
#ifndef DSH_PTY_SHA256_H
#define DSH_PTY_SHA256_H
#include <stddef.h>
void sha256(const unsigned char *data, size_t length, unsigned char digest[32]);
#endif
