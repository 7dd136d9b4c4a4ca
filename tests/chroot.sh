#!/usr/bin/env bash
# Another Debian release for the opt-in suites (tests/compat): a chroot made from the archive
# this machine's apt uses (debootstrap and mounts in tests/chroot_lib.sh). As root.
#   tests/chroot.sh setup RELEASE DIR [PKG...]  debootstrap RELEASE into DIR if missing, then
#                                               apt-get install PKG... (unmodified packages)
#   tests/chroot.sh run DIR CMD...              CMD inside DIR, sharing this machine's network,
#                                               /tmp, process tree and environment, so a drun on
#                                               the host supervises it (PYTHON_EXEC a wrapper)
# Mounts stay for later `run`s (several may run at once: mounted once, under a lock).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/chroot_lib.sh"
share() {
  ( flock 9
    chroot_mount "$1"
    mountpoint -q "$1/tmp" || mount --bind /tmp "$1/tmp"
  ) 9>"$1/.mounts.lock"
}
cmd=${1:-}; shift || true
case "$cmd" in
setup)
  release=${1:?usage: chroot.sh setup RELEASE DIR [PKG...]}; dir=${2:?DIR}; shift 2
  chroot_create "$release" "$dir"
  share "$dir"
  if [ $# -gt 0 ]; then
    chroot "$dir" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"' sh "$@" >/dev/null
  fi
  ;;
run)
  dir=${1:?usage: chroot.sh run DIR CMD...}; shift
  share "$dir"
  exec chroot "$dir" /usr/bin/env PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
  ;;
*) sed -n '2,9p' "$0" >&2; exit 2 ;;
esac
