#!/usr/bin/env bash
# Fixture of the compat suite: builds the PyTorch 2.6 reference (Debian 13 in a chroot, by
# ../shared/tools/torch26-chroot.sh) when it is missing, then checks it imports torch 2.6.
#   setup_torch26.sh                 # root: $DRUN_TORCH26_ROOT, default /var/lib/drun-torch26
# Building takes minutes (debootstrap + python3-torch, ~1.5 GiB) and needs root and the
# Debian archive; a built tree is reused. Exit 77 (ctest: skipped) when not root.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
tool=${TORCH26_CHROOT_TOOL:-$repo/../shared/tools/torch26-chroot.sh}
root=${DRUN_TORCH26_ROOT:-/var/lib/drun-torch26}
if [ "$(id -u)" != 0 ]; then
  echo "setup_torch26.sh: chroot needs root; run the compat suite as root" >&2
  exit 77
fi
if [ ! -x "$tool" ]; then
  echo "setup_torch26.sh: $tool not found (the shared/ tree must sit beside the repository," \
       "or set TORCH26_CHROOT_TOOL)" >&2
  exit 1
fi
probe() { [ -x "$root/usr/bin/python3" ] && "$tool" run "$root" python3 -c 'import torch, torch.distributed; print(torch.__version__)'; }
# One builder at a time (two suites, or a person, may set it up at once).
mkdir -p "$(dirname "$root")"
exec 9>"$root.setup.lock"
flock 9
if version=$(probe 2>/dev/null) && [ -n "$version" ]; then
  echo "torch $version in $root (already built)"
else
  echo "building the torch 2.6 chroot in $root (takes minutes)"
  start=$(date +%s)
  "$tool" setup "$root"
  echo "built in $(( $(date +%s) - start )) s"
  version=$(probe)
fi
# The chroot must resolve this machine's name as the machine does (torchrun's agent store
# and gloo bind to the hostname); debootstrap writes a hosts file without it.
if ! cmp -s /etc/hosts "$root/etc/hosts"; then
  cp /etc/hosts "$root/etc/hosts"
  echo "copied /etc/hosts into $root (resolves $(hostname))"
fi
case "$version" in
  2.6*) echo "torch $version: ok" ;;
  *) echo "setup_torch26.sh: $root has torch $version, expected 2.6" >&2; exit 1 ;;
esac
