#!/usr/bin/env bash
# Fixture of the compat suite's torch 2.14 half: builds Debian sid in a chroot (by
# tests/chroot.sh) with
# python3-torch 2.14 and python3-accelerate, unmodified, when it is missing; then checks it
# imports torch 2.14 and accelerate.
#   setup_sid.sh          # root: $DRUN_SID_ROOT, default /var/lib/drun-sid
# Building takes minutes (debootstrap + python3-torch, ~2 GiB) and needs root and the Debian
# archive; a built tree is reused (point DRUN_SID_ROOT at one you have). Exit 77 (ctest:
# skipped) when not root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tool=${DRUN_SID_CHROOT_TOOL:-$repo/tests/chroot.sh}
root=${DRUN_SID_ROOT:-/var/lib/drun-sid}
if [ "$(id -u)" != 0 ]; then
  echo "setup_sid.sh: chroot needs root; run the compat suite as root" >&2
  exit 77
fi
if [ ! -x "$tool" ]; then
  echo "setup_sid.sh: $tool not found or not executable (DRUN_SID_CHROOT_TOOL names another)" >&2
  exit 1
fi
probe() {
  [ -x "$root/usr/bin/python3" ] &&
    "$tool" run "$root" python3 -c 'import torch, torch.distributed, accelerate; print(torch.__version__, accelerate.__version__)'
}
mkdir -p "$(dirname "$root")"
exec 9>"$root.setup.lock"
flock 9
if versions=$(probe 2>/dev/null) && [ -n "$versions" ]; then
  echo "torch, accelerate $versions in $root (already built)"
else
  echo "building the sid chroot in $root (takes minutes)"
  start=$(date +%s)
  "$tool" setup sid "$root" python3-torch python3-accelerate python3-numpy python3.15 python3.14-dbg
  echo "built in $(( $(date +%s) - start )) s"
  versions=$(probe)
fi
case "$versions" in
  2.14*) echo "torch, accelerate $versions: ok" ;;
  *) echo "setup_sid.sh: $root has torch, accelerate $versions, expected torch 2.14" >&2; exit 1 ;;
esac
