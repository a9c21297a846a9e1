#!/usr/bin/env bash
# Makes sure the project's test world exists: a running Docker engine and the target image
# `dsh-remote-worlds/target:bookworm`. Idempotent, and fast (< 1 s) when both are already there.
#
#  - Engine: when no engine answers on the default socket, installs Debian's docker.io (when
#    running as root with apt) and starts `dockerd` in the background, logging to
#    $DSH_REMOTE_STATE/dockerd.log.
#  - Image: no registry is reachable on the machines this project is built on, so the image is
#    made from a debootstrap minbase of Debian bookworm (mirror read from this machine's apt
#    sources), customised in a chroot, and `docker import`ed (DESIGN.md section 7). Users who can
#    pull may instead build docker/Dockerfile, which describes the same image.
#
# The image carries the hash of its recipe (image-packages.txt and customize-image.sh) as the
# label dsh-remote-worlds.recipe; an image built from another recipe is rebuilt, so a machine
# that kept an older image gets a package the suite now needs (vim-tiny, say).
#
#  - PowerShell image `dsh-remote-worlds/target-pwsh:bookworm` (issue 13), when `dotnet` is on
#    PATH: the project image plus the .NET runtime of this machine's SDK, the PowerShell global
#    tool (dotnet tool install from NuGet) and Debian's libicu72 (apt-get download), installed by
#    docker/install-pwsh.sh in a container (no registry, no network) and committed; PowerShell's
#    assemblies are first compiled ReadyToRun on the host (docker/ready-to-run.sh, crossgen2 from
#    NuGet). Its label dsh-remote-worlds.pwsh-recipe names the base image, the PowerShell version
#    and the hash of both scripts; any change rebuilds it. Without dotnet it is not built, and the pwsh tests
#    say so (they refuse to skip under CI=true). docker/Dockerfile.pwsh is the registry route.
#
# Environment: DSH_REMOTE_IMAGE overrides the tag; DSH_REMOTE_REBUILD=1 forces a rebuild.
set -euo pipefail

IMAGE="${DSH_REMOTE_IMAGE:-dsh-remote-worlds/target:bookworm}"
STATE="${DSH_REMOTE_STATE:-/var/tmp/dsh-remote-worlds}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$STATE"

PWSH_IMAGE="${DSH_REMOTE_PWSH_IMAGE:-dsh-remote-worlds/target-pwsh:bookworm}"
POWERSHELL_VERSION=7.6.9
RECIPE="$(cat "$HERE/image-packages.txt" "$HERE/customize-image.sh" | sha256sum | cut -c1-16)"

log() { printf '[ensure-world] %s\n' "$*" >&2; }

engine_answers() { timeout 5 docker info >/dev/null 2>&1; }

# shellcheck source=docker/apt-install.sh
. "$HERE/apt-install.sh"

ensure_engine() {
  if engine_answers; then return 0; fi
  if ! command -v dockerd >/dev/null; then
    log "no Docker engine answers and dockerd is not installed: installing docker.io"
    apt_install docker.io
  fi
  if ! command -v docker >/dev/null; then apt_install docker.io; fi
  if ! engine_answers; then
    if [ "$(id -u)" != 0 ]; then
      log "no Docker engine answers on the default socket and dockerd needs root to start"; return 1
    fi
    # A dockerd that was killed (SIGKILL, OOM, power loss) leaves its pid file, and a new one
    # refuses to start while it exists; remove it only when no such process runs.
    # (A zombie counts as gone: its parent may be a session that no longer reaps.)
    if [ -f /var/run/docker.pid ] && ! awk '$3 != "Z" { found = 1 } END { exit !found }' "/proc/$(cat /var/run/docker.pid)/stat" 2>/dev/null; then
      log "removing the stale /var/run/docker.pid of a dockerd that is gone"
      rm -f /var/run/docker.pid
    fi
    log "starting dockerd (log: $STATE/dockerd.log)"
    # Its own session: a Ctrl-C (SIGINT to the caller's process group) or the caller's end must
    # not take the engine down with it.
    setsid nohup dockerd >"$STATE/dockerd.log" 2>&1 </dev/null &
    for _ in $(seq 1 120); do
      if engine_answers; then log "engine up"; return 0; fi
      sleep 0.5
    done
    log "dockerd did not answer within 60 s; last log lines:"; tail -n 20 "$STATE/dockerd.log" >&2
    return 1
  fi
}

apt_mirror() {
  # The first Debian (not -security) URI of this machine's apt sources, deb822 or one-line form.
  local uri=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    uri=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1 == "deb" && $2 !~ /security/ && $2 ~ /^http/ { print $2; exit }' /etc/apt/sources.list)
  fi
  [ -n "$uri" ] || { log "cannot find a Debian mirror in /etc/apt/sources*"; return 1; }
  printf '%s\n' "$uri"
}

build_image() {
  command -v debootstrap >/dev/null || apt_install debootstrap
  local root="$STATE/rootfs.$$"
  rm -rf "$root"
  local mirror; mirror=$(apt_mirror)
  log "debootstrap bookworm minbase from the machine's apt mirror into $root"
  debootstrap --variant=minbase \
    --include="$(tr '\n' ',' <"$HERE/image-packages.txt" | sed 's/,$//')" \
    bookworm "$root" "$mirror" >"$STATE/debootstrap.log" 2>&1 || {
      log "debootstrap failed; last log lines:"; tail -n 30 "$STATE/debootstrap.log" >&2; return 1; }
  # The same customisation the Dockerfile runs, in a chroot.
  cp "$HERE/customize-image.sh" "$root/tmp/customize-image.sh"
  chroot "$root" /bin/sh /tmp/customize-image.sh
  rm -f "$root/tmp/customize-image.sh"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  log "importing as $IMAGE"
  tar -C "$root" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'WORKDIR /root' \
    --change 'CMD ["sleep", "infinity"]' \
    --change "LABEL dsh-remote-worlds.recipe=$RECIPE" \
    - "$IMAGE" >/dev/null
  rm -rf "$root"
  log "image $IMAGE ready"
}

ensure_image() {
  if [ "${DSH_REMOTE_REBUILD:-0}" != 1 ]; then
    local built
    built=$(docker image inspect --format '{{ index .Config.Labels "dsh-remote-worlds.recipe" }}' "$IMAGE" 2>/dev/null) || built=absent
    if [ "$built" = "$RECIPE" ]; then return 0; fi
    if [ "$built" != absent ]; then log "image $IMAGE was built from another recipe (${built:-unlabelled}, now $RECIPE): rebuilding"; fi
  fi
  build_image
}

# The .NET runtime directory of this machine's dotnet (its `dotnet` host, host/fxr, shared/).
dotnet_root() { dirname "$(readlink -f "$(command -v dotnet)")"; }

build_pwsh_image() {
  local recipe=$1 ctx="$STATE/pwsh-context.$$"
  rm -rf "$ctx"
  mkdir -p "$ctx/dotnet/shared/Microsoft.NETCore.App"
  log "installing PowerShell $POWERSHELL_VERSION (dotnet tool install, from NuGet)"
  dotnet tool install --tool-path "$ctx/tool" PowerShell --version "$POWERSHELL_VERSION" >"$STATE/pwsh-tool.log" 2>&1 || {
    log "dotnet tool install failed; last log lines:"; tail -n 20 "$STATE/pwsh-tool.log" >&2; return 1; }
  local payload
  payload=$(find "$ctx/tool/.store" -path '*/tools/*/any/unix' -type d | head -n 1)
  [ -n "$payload" ] && [ -f "$payload/pwsh.dll" ] || { log "the PowerShell tool has no unix payload (pwsh.dll) under $ctx/tool/.store"; return 1; }
  cp -a "$payload" "$ctx/powershell"
  # The runtime PowerShell's runtimeconfig asks for (Microsoft.NETCore.App of its major version).
  local root framework runtime
  root=$(dotnet_root)
  framework=$(sed -n 's/.*"version": *"\([0-9]*\)\..*/\1/p' "$ctx/powershell/pwsh.runtimeconfig.json" | head -n 1)
  runtime=$(ls "$root/shared/Microsoft.NETCore.App" | grep "^$framework\." | sort -V | tail -n 1)
  [ -n "$runtime" ] || { log "this machine's dotnet ($root) has no Microsoft.NETCore.App $framework.x runtime for PowerShell $POWERSHELL_VERSION"; return 1; }
  cp -a "$root/dotnet" "$root/host" "$ctx/dotnet/"
  cp -a "$root/shared/Microsoft.NETCore.App/$runtime" "$ctx/dotnet/shared/Microsoft.NETCore.App/"
  log "compiling PowerShell ReadyToRun for .NET $runtime (crossgen2, from NuGet; about a minute)"
  sh "$HERE/ready-to-run.sh" "$ctx/powershell" "$ctx/dotnet/shared/Microsoft.NETCore.App/$runtime" "$ctx/ready-to-run" || {
    rm -rf "$ctx"; log "compiling PowerShell ReadyToRun failed (above)"; return 1; }
  rm -rf "$ctx/ready-to-run"
  (cd "$ctx" && apt-get download libicu72 >"$STATE/pwsh-icu.log" 2>&1) || {
    if [ ! -f "$STATE/apt-updated" ]; then apt-get update -qq >&2 && touch "$STATE/apt-updated"; fi
    (cd "$ctx" && apt-get download libicu72 >"$STATE/pwsh-icu.log" 2>&1) || {
      log "apt-get download libicu72 failed:"; tail -n 5 "$STATE/pwsh-icu.log" >&2; return 1; }
  }
  mv "$ctx"/libicu72_*.deb "$ctx/libicu.deb"
  cp "$HERE/install-pwsh.sh" "$ctx/"
  log "building $PWSH_IMAGE from $IMAGE (.NET $runtime, PowerShell $POWERSHELL_VERSION)"
  local container
  container=$(docker create --network none -u 0 -v "$ctx:/ctx:ro" "$IMAGE" /bin/sh /ctx/install-pwsh.sh /ctx)
  if ! docker start -a "$container" >&2; then
    docker rm -f "$container" >/dev/null; rm -rf "$ctx"; log "installing PowerShell in the image failed"; return 1
  fi
  docker commit --change "LABEL dsh-remote-worlds.pwsh-recipe=$recipe" --change 'CMD ["sleep", "infinity"]' "$container" "$PWSH_IMAGE" >/dev/null
  docker rm "$container" >/dev/null
  rm -rf "$ctx"
  log "image $PWSH_IMAGE ready"
}

ensure_pwsh_image() {
  if ! command -v dotnet >/dev/null; then
    log "dotnet is not on PATH: $PWSH_IMAGE is not built (the pwsh tests report why they skip)"
    return 0
  fi
  local recipe built
  recipe="$(docker image inspect --format '{{.Id}}' "$IMAGE" | cut -c8-19)-$POWERSHELL_VERSION-$(cat "$HERE/install-pwsh.sh" "$HERE/ready-to-run.sh" | sha256sum | cut -c1-12)"
  built=$(docker image inspect --format '{{ index .Config.Labels "dsh-remote-worlds.pwsh-recipe" }}' "$PWSH_IMAGE" 2>/dev/null) || built=absent
  if [ "${DSH_REMOTE_REBUILD:-0}" != 1 ] && [ "$built" = "$recipe" ]; then return 0; fi
  # Outside CI a failed PowerShell build leaves the bash world usable (the pwsh tests then say
  # why they skip); under CI=true the pwsh tests must run, so it fails here.
  build_pwsh_image "$recipe" || {
    if [ "${CI:-}" = true ]; then return 1; fi
    log "warning: $PWSH_IMAGE was not built (above); the pwsh tests will skip"
  }
}

ensure_engine
ensure_image
ensure_pwsh_image
