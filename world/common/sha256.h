/*
 * SHA-256 (FIPS 180-4) for the world tools: the file server's edit guard hashes file contents
 * (world/fsd/fsd.c), dsh-pty's holder the secret an attach presents (world/dsh-pty/hold.c).
 */
#ifndef DSH_WORLD_SHA256_H
#define DSH_WORLD_SHA256_H
#include <stddef.h>
#include <stdint.h>

typedef struct { uint32_t h[8]; uint64_t bytes; unsigned char block[64]; size_t fill; } sha256_t;

void sha256_init(sha256_t *s);
void sha256_update(sha256_t *s, const unsigned char *p, size_t n);
/* The digest of what was given (the state is spent). */
void sha256_final(sha256_t *s, unsigned char digest[32]);
#endif
