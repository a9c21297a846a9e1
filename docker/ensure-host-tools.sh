#!/usr/bin/env bash
# The host commands `npm test` runs besides node and docker (.ci/host-commands.txt names each
# with what installs it): installed here when missing, as root on Debian, so the README's
# `npm test` needs no other step on a fresh machine. Elsewhere it says what is missing and the
# cases that need it fail naming the command.
#   qemu-aarch64-static (qemu-user-static)  runs the aarch64 world tools in test/unit/*-builds
#   ip (iproute2), unshare and flock (util-linux)  docker/ensure-swarm.sh's node engines
#   git                                     test/helpers/built-package.ts keys the packed tarball
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=/var/tmp/dsh-remote-worlds
mkdir -p "$STATE"
log() { echo "[host-tools] $*" >&2; }
. docker/apt-install.sh
missing=()
command -v qemu-aarch64-static >/dev/null || missing+=(qemu-user-static)
command -v ip >/dev/null || missing+=(iproute2)
{ command -v unshare >/dev/null && command -v flock >/dev/null; } || missing+=(util-linux)
command -v git >/dev/null || missing+=(git)
[ ${#missing[@]} -eq 0 ] && exit 0
log "installing ${missing[*]}"
apt_install "${missing[@]}" || log "could not install ${missing[*]}: the cases that run them will fail"
