# Sourced by docker/ensure-world.sh and docker/ensure-swarm.sh (which define `log` and STATE):
# install Debian packages when running as root with apt, `apt-get update` once per state folder.
apt_install() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "missing: $* (install them, or run as root on Debian)"; return 1
  fi
  if [ ! -f "$STATE/apt-updated" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 && touch "$STATE/apt-updated"
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}
