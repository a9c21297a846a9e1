#!/bin/sh
# Customises the target image; run by the Dockerfile and, in a chroot, by ensure-world.sh.
set -eu
# The non-root agent user (uid 1000) with a home and bash as login shell.
if ! id agent >/dev/null 2>&1; then
  useradd --uid 1000 --create-home --shell /bin/bash agent
fi
# sshd: host keys are generated per test run by the tests, not baked in; the privilege
# separation directory must exist.
rm -f /etc/ssh/ssh_host_*
mkdir -p /run/sshd
