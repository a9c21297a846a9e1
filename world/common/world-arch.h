/*
 * The architecture name a world tool reports in its --version line and hello (control.sh and
 * src/providers/remote/world-tools/manifest.ts name builds by `uname -m`: x86_64, aarch64).
 */
#ifndef DSH_WORLD_ARCH_H
#define DSH_WORLD_ARCH_H
#if defined(__x86_64__)
#define ARCH "x86_64"
#elif defined(__aarch64__)
#define ARCH "aarch64"
#else
#define ARCH "unknown"
#endif
#endif
