/*
 * Little-endian integers of dsh-pty's frames (dsh-pty.c states the protocol): u8 type, u32
 * payload length, payload.
 */
#ifndef DSH_PTY_WIRE_H
#define DSH_PTY_WIRE_H
#include <stdint.h>

static inline uint16_t get_u16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t get_u32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static inline uint64_t get_u64(const unsigned char *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }
static inline void put_u16(unsigned char *p, uint16_t v) { p[0] = v & 0xff; p[1] = v >> 8 & 0xff; }
static inline void put_u32(unsigned char *p, uint32_t v) { p[0] = v & 0xff; p[1] = v >> 8 & 0xff; p[2] = v >> 16 & 0xff; p[3] = v >> 24 & 0xff; }
static inline void put_u64(unsigned char *p, uint64_t v) { put_u32(p, (uint32_t)v); put_u32(p + 4, (uint32_t)(v >> 32)); }

/* The protocol version both modes say in their hello (`H`) and `--version`: bumped with any frame
 * change (4: the attached mode's `W` hold frame). */
#define PROTOCOL "4"

/* The largest frame either side accepts (bytes of payload): a spawn carries the start wrapper
 * (<= 128 KiB). */
#define MAX_FRAME (1u << 20)
/* The largest output frame (bytes). */
#define MAX_OUTPUT (64u * 1024u)
#endif
