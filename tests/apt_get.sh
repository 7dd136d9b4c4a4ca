#!/usr/bin/env bash
# apt-get that waits for another apt to finish instead of failing at once: a fresh
# machine's unattended-upgrades often holds apt's locks for minutes after boot.
#   tests/apt_get.sh update | install PKG...     (as root, or through sudo)
# `install` waits for dpkg's lock (APT's DPkg::Lock::Timeout); `update` is tried again
# every 5 s while it fails, since apt-get does not wait for the package lists' lock.
set -uo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
APT=($SUDO apt-get -q -o DPkg::Lock::Timeout=600)
if [ "${1:-}" != update ]; then
  exec "${APT[@]}" "$@"
fi
for attempt in $(seq 1 60); do
  "${APT[@]}" update && exit 0
  echo "apt_get.sh: apt-get update failed (another apt holding its lock? attempt $attempt of 60); trying again in 5 s" >&2
  sleep 5
done
echo "apt_get.sh: apt-get update failed for 5 minutes; see the errors above" >&2
exit 1
