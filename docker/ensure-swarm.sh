#!/usr/bin/env bash
# Makes sure the project's test swarm runs: three more Docker engines on this machine, one
# manager and two workers joined into one swarm, each holding the project image. Idempotent, and
# fast (< 1 s) when the cluster is already up. Used by the swarm tests (test/helpers/swarm.ts)
# and the swarm bench rows; docs/swarm.md says what it builds and why.
#
#   bash docker/ensure-swarm.sh            start what is missing (engines, swarm, labels, image)
#   bash docker/ensure-swarm.sh kill N     node N dies at once (SIGKILL of its engine, its
#                                          containerd, shims and every process of its tasks):
#                                          a lost node, for the tests; the next run restarts it
#   bash docker/ensure-swarm.sh freeze N   node N stops answering (SIGSTOP of its engine, containerd
#                                          and shims; its tasks' processes run on): a partition
#   bash docker/ensure-swarm.sh thaw N     node N answers again (SIGCONT)
#   bash docker/ensure-swarm.sh stop       stop the three engines (SIGTERM); their state stays
#   bash docker/ensure-swarm.sh reset      stop them and remove their state, mounts and bridges: the
#                                          next run builds the cluster from nothing
#
# Node N (1 manager, 2 and 3 workers):
#  - dockerd with its own --data-root /var/lib/dsh-remote-worlds-swarm/N, --exec-root
#    /run/dsh-swarm/N (short: containerd's socket path lives under it), --pidfile, socket
#    unix:///run/dsh-swarm/N.sock, cgroup parent dsh-swarm-N, log $STATE/swarm-N.log;
#  - advertising and listening on its own loopback address 127.0.0.(N+1), never another
#    address: the gossip port 7946 cannot be moved, so each node needs an address of its own;
#  - its own UTS namespace (unshare --uts) with hostname dsh-swarm-N: swarm names a node by its
#    engine's hostname, and three engines of one machine would otherwise share one;
#  - DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1 in its environment (no registry here: the engine's
#    executor would try to pull a service's image first); the project image is
#    `docker save | docker load`ed into it, and services reference it by ID;
#  - --no-new-privileges: a swarm service (Engine API 1.41) cannot ask for no-new-privileges,
#    so the node sets it for every container; the swarm world proves it in each task;
#  - --bridge=none (no default bridge, so a task without networks has only `lo`: network
#    none, which a 1.41 service cannot ask for either; the swarm world proves it in each task),
#    --iptables=false, --ip6tables=false, --ip-masq=false, --ip-forward=false,
#    --userland-proxy=false: the node changes nothing of the host's network;
#  - the node label dsh-remote-worlds.node=dsh-swarm-N, for placement by label.
#
# Two engine behaviours this works around, both of moby 20.10 (Debian's docker.io):
#  - dockerd --bridge=none deletes the link named docker0 at start (daemon/daemon_unix.go,
#    configureNetworking -> removeDefaultBridgeInterface): that is the MAIN engine's bridge.
#    While node engines start, docker0 is renamed aside (which needs it down for a moment) and
#    renamed back, addresses and attached veths untouched.
#  - swarm init and join create docker_gwbridge (a bridge with a 172.x address on the host) for
#    the ingress routing mesh. Each node gets a docker_gwbridge of its own making first, internal
#    and without a host address (com.docker.network.bridge.inhibit_ipv4), and the ingress network
#    is removed after init: services here use host or no networking only.
#
# Environment: DSH_REMOTE_IMAGE (the image to load, default the project image), DSH_REMOTE_STATE.
set -euo pipefail

IMAGE="${DSH_REMOTE_IMAGE:-dsh-remote-worlds/target:bookworm}"
STATE="${DSH_REMOTE_STATE:-/var/tmp/dsh-remote-worlds}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DATA=/var/lib/dsh-remote-worlds-swarm
RUN=/run/dsh-swarm
NODES=(1 2 3)
HOLD=docker0-dshhold
mkdir -p "$STATE" "$RUN"

log() { printf '[ensure-swarm] %s\n' "$*" >&2; }

sock() { printf 'unix://%s/%s.sock' "$RUN" "$1"; }
addr() { printf '127.0.0.%s' "$(($1 + 1))"; }
name() { printf 'dsh-swarm-%s' "$1"; }
node() { local n=$1; shift; docker -H "$(sock "$n")" "$@"; }
answers() { timeout 5 docker -H "$(sock "$1")" version >/dev/null 2>&1; }
swarm_state() { node "$1" info --format '{{.Swarm.LocalNodeState}}' 2>/dev/null || echo unknown; }

# shellcheck source=docker/apt-install.sh
. "$HERE/apt-install.sh"

# Pids of node N's engine, its containerd and shims (their command lines name its exec root or
# socket), and with `tasks`, of every process of its containers too (cgroup parent dsh-swarm-N).
node_pids() {
  local n=$1 tasks=${2:-} pid cmdline
  for pid in /proc/[0-9]*; do
    pid=${pid#/proc/}
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
    case $cmdline in
      *"$RUN/$n/"*|*"$RUN/$n "*|*"$RUN/$n.sock"*) echo "$pid"; continue ;;
    esac
    if [ -n "$tasks" ] && grep -q ":/dsh-swarm-$n/" "/proc/$pid/cgroup" 2>/dev/null; then echo "$pid"; fi
  done
}

signal_node() {
  local n=$1 signal=$2 pids
  pids=$(node_pids "$n")
  # shellcheck disable=SC2086
  [ -z "$pids" ] || kill "-$signal" $pids 2>/dev/null || true
}

kill_node() {
  local n=$1 pids
  pids=$(node_pids "$n" tasks)
  # shellcheck disable=SC2086
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  log "node $n ($(name "$n")) killed"
}

stop_nodes() {
  local n pid
  for n in "${NODES[@]}"; do
    pid=$(cat "$RUN/$n.pid" 2>/dev/null) || continue
    kill -TERM "$pid" 2>/dev/null || true
  done
  for n in "${NODES[@]}"; do
    for _ in $(seq 1 100); do [ -e "$RUN/$n.pid" ] && kill -0 "$(cat "$RUN/$n.pid" 2>/dev/null)" 2>/dev/null || break; sleep 0.2; done
  done
  log "node engines stopped"
}

# Everything the nodes left on this machine: their mounts (a killed engine leaves its data
# root's bind and its containers' overlays), data and run folders, and their docker_gwbridge links.
reset_nodes() {
  local n mount
  stop_nodes
  awk -v data="$DATA/" -v run="$RUN/" 'index($2, data) == 1 || index($2, run) == 1 { print $2 }' /proc/mounts | sort -r | while read -r mount; do umount -l "$mount" 2>/dev/null || true; done
  rm -rf "$DATA" "$RUN"
  for n in "${NODES[@]}"; do if ip link show "dsh-gw$n" >/dev/null 2>&1; then ip link del "dsh-gw$n"; fi; done
  log "node engines reset: the next run builds the cluster from nothing"
}

# docker0 renamed aside while node engines start (see the header), and back afterwards.
WAS_UP=""
hold_docker0() {
  ip link show docker0 >/dev/null 2>&1 || return 0
  if ip -o link show docker0 | grep -q '<[^>]*\bUP\b'; then WAS_UP=1; fi
  ip link set docker0 down
  ip link set docker0 name "$HOLD" || { ip link set docker0 up; return 1; }
}
release_docker0() {
  ip link show "$HOLD" >/dev/null 2>&1 || return 0
  if ip link show docker0 >/dev/null 2>&1; then log "both docker0 and $HOLD exist: leaving $HOLD as it is"; return 1; fi
  ip link set "$HOLD" name docker0
  if [ -n "$WAS_UP" ]; then ip link set docker0 up; fi
}

# Whether node N's pid file names a running engine of that node: the process lives (a zombie
# counts as gone) and its command line names that pid file. A killed node's pid may since have
# been reused by any other process, which must not keep the file.
pidfile_engine_runs() {
  local n=$1 pid
  pid=$(cat "$RUN/$n.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] || return 1
  awk '$3 != "Z" { found = 1 } END { exit !found }' "/proc/$pid/stat" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--pidfile $RUN/$n.pid"
}

start_node() {
  local n=$1
  mkdir -p "$DATA/$n" "$RUN/$n"
  # A node that was killed leaves its pid file, and a new engine refuses to start while it
  # exists: give an engine of this node that is still exiting up to 10 s, then remove the file
  # unless it names one that runs.
  for _ in $(seq 1 50); do pidfile_engine_runs "$n" || break; sleep 0.2; done
  if [ -f "$RUN/$n.pid" ] && ! pidfile_engine_runs "$n"; then
    rm -f "$RUN/$n.pid"
  fi
  # Its own session (a Ctrl-C of the caller does not reach it) and UTS namespace (its hostname).
  DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1 setsid nohup unshare --uts sh -c 'hostname "$1"; shift; exec "$@"' sh "$(name "$n")" \
    dockerd --data-root "$DATA/$n" --exec-root "$RUN/$n" --pidfile "$RUN/$n.pid" -H "$(sock "$n")" \
      --cgroup-parent "dsh-swarm-$n" --no-new-privileges --bridge=none --iptables=false --ip6tables=false \
      --ip-masq=false --ip-forward=false --userland-proxy=false --live-restore=false \
      --swarm-default-advertise-addr "$(addr "$n")" \
      >"$STATE/swarm-$n.log" 2>&1 </dev/null 9>&- &
}

start_engines() {
  local missing=() n
  for n in "${NODES[@]}"; do answers "$n" || missing+=("$n"); done
  [ ${#missing[@]} -gt 0 ] || return 0
  command -v unshare >/dev/null || apt_install util-linux
  command -v ip >/dev/null || apt_install iproute2
  if ip link show "$HOLD" >/dev/null 2>&1; then release_docker0; fi
  log "starting node engines ${missing[*]} (logs: $STATE/swarm-N.log)"
  hold_docker0
  trap 'release_docker0' EXIT
  for n in "${missing[@]}"; do start_node "$n"; done
  for n in "${missing[@]}"; do
    for _ in $(seq 1 120); do answers "$n" && break; sleep 0.25; done
    answers "$n" || { release_docker0; log "node $n did not answer within 30 s; last log lines:"; tail -n 20 "$STATE/swarm-$n.log" >&2; return 1; }
  done
  release_docker0
  trap - EXIT
}

# docker_gwbridge of the node's own making, before swarm init/join (see the header).
ensure_gwbridge() {
  local n=$1
  node "$n" network inspect docker_gwbridge >/dev/null 2>&1 && return 0
  node "$n" network create --driver bridge --internal \
    -o com.docker.network.bridge.name="dsh-gw$n" \
    -o com.docker.network.bridge.inhibit_ipv4=true \
    -o com.docker.network.bridge.enable_icc=false \
    docker_gwbridge >/dev/null
  # Nor an IPv6 link-local address of the host's.
  if [ -w "/proc/sys/net/ipv6/conf/dsh-gw$n/disable_ipv6" ]; then echo 1 >"/proc/sys/net/ipv6/conf/dsh-gw$n/disable_ipv6"; fi
}

ensure_swarm() {
  local manager=1 n state token manager_id
  state=$(swarm_state "$manager")
  if [ "$state" != active ]; then
    log "initialising the swarm on $(name "$manager") ($(addr "$manager"))"
    ensure_gwbridge "$manager"
    node "$manager" swarm init --advertise-addr "$(addr "$manager")" --listen-addr "$(addr "$manager"):2377" \
      --data-path-addr "$(addr "$manager")" --dispatcher-heartbeat 1s --task-history-limit 1 >/dev/null
  fi
  # No routing mesh: services use host or no networking.
  if node "$manager" network inspect ingress >/dev/null 2>&1; then echo y | node "$manager" network rm ingress >/dev/null; fi
  token=$(node "$manager" swarm join-token -q worker)
  manager_id=$(node "$manager" info --format '{{.Swarm.NodeID}}')
  for n in "${NODES[@]}"; do
    [ "$n" = "$manager" ] && continue
    state=$(swarm_state "$n")
    [ "$state" = active ] && continue
    # A node whose state was lost is still listed by its old id: that entry goes first.
    local stale
    stale=$(node "$manager" node ls --filter "name=$(name "$n")" --format '{{.ID}} {{.Status}}' | awk '$2 != "Ready" { print $1 }')
    # shellcheck disable=SC2086
    [ -z "$stale" ] || node "$manager" node rm --force $stale >/dev/null
    ensure_gwbridge "$n"
    log "joining $(name "$n") ($(addr "$n")) as a worker"
    node "$n" swarm join --advertise-addr "$(addr "$n")" --listen-addr "$(addr "$n"):2377" \
      --data-path-addr "$(addr "$n")" --token "$token" "$(addr "$manager"):2377" >/dev/null
  done
  # Every node Ready (a restarted node rejoins by itself), and labelled.
  for _ in $(seq 1 240); do
    [ "$(node "$manager" node ls --format '{{.Status}}' | grep -c '^Ready$')" -ge ${#NODES[@]} ] && break
    sleep 0.25
  done
  local ids
  for n in "${NODES[@]}"; do
    ids=$(node "$manager" node ls --filter "name=$(name "$n")" --format '{{.ID}} {{.Status}}' | awk '$2 == "Ready" { print $1 }')
    [ -n "$ids" ] || { log "$(name "$n") is not Ready in the swarm:"; node "$manager" node ls >&2; return 1; }
    for id in $ids; do
      if [ "$(node "$manager" node inspect --format '{{ index .Spec.Labels "dsh-remote-worlds.node" }}' "$id")" != "$(name "$n")" ]; then
        node "$manager" node update --label-add "dsh-remote-worlds.node=$(name "$n")" "$id" >/dev/null
      fi
    done
  done
  : "$manager_id"
}

ensure_images() {
  local id n pids=()
  id=$(docker image inspect --format '{{.Id}}' "$IMAGE")
  for n in "${NODES[@]}"; do
    if [ "$(node "$n" image inspect --format '{{.Id}}' "$id" 2>/dev/null)" != "$id" ]; then
      log "loading $IMAGE ($id) into $(name "$n")"
      (docker save "$IMAGE" | node "$n" load -q >/dev/null) &
      pids+=($!)
    fi
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
}

exec 9>"$STATE/ensure-swarm.lock"
flock 9
case "${1:-up}" in
  kill) kill_node "${2:?node number}" ;;
  freeze) signal_node "${2:?node number}" STOP; log "node $2 ($(name "$2")) frozen" ;;
  thaw) signal_node "${2:?node number}" CONT; log "node $2 ($(name "$2")) thawed" ;;
  stop) stop_nodes ;;
  reset) reset_nodes ;;
  up)
    [ "$(id -u)" = 0 ] || { log "three more Docker engines need root to start"; exit 1; }
    bash "$HERE/ensure-world.sh"
    start_engines
    ensure_swarm
    ensure_images
    ;;
  *) log "usage: ensure-swarm.sh [up | kill N | freeze N | thaw N | stop | reset]"; exit 2 ;;
esac
