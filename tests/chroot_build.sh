#!/usr/bin/env bash
# Builds a fresh clone of this repository inside a chroot of another Debian release and runs
# its unit tests there: the README's source build as a user of that release meets it
# (tests/install_deps.sh, the CMake build with the LibTorch example, `ctest -L unit`).
#   tests/chroot_build.sh RELEASE [DIR]    RELEASE: bookworm (12), trixie (13), sid
# DIR (default /var/lib/drun-chroots/RELEASE) is made with debootstrap from the archive apt
# uses on this machine when it has no apt-get yet, and reused as it is otherwise (a chroot
# that already holds the build dependencies saves their download). The clone is of this
# repository's HEAD (committed work only), into DIR/var/tmp/drun-<pid>, removed afterwards
# (DRUN_CHROOT_KEEP=1 keeps it). Needs root, debootstrap and git on this machine.
# Exit status: ctest's, or the failing step's; the last line names the release, glibc and
# the unit tests' count. Recorded per release in docs/install.md.
set -euo pipefail
R=${1:?usage: tests/chroot_build.sh RELEASE [DIR]}
D=${2:-/var/lib/drun-chroots/$R}
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)

if [ ! -x "$D/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || bash "$repo/tests/apt_get.sh" install -y -q debootstrap
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  mkdir -p "$(dirname "$D")"
  debootstrap --variant=minbase --include=git,ca-certificates "$R" "$D" "$mirror"
  # A snapshot archive's Release file may be past its Valid-Until date.
  echo 'Acquire::Check-Valid-Until "false";' > "$D/etc/apt/apt.conf.d/99no-valid-until"
fi
grep -qw localhost "$D/etc/hosts" 2>/dev/null ||
  printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >> "$D/etc/hosts"
grep -qw "$(hostname)" "$D/etc/hosts" || echo "127.0.1.1 $(hostname)" >> "$D/etc/hosts"
cp /etc/resolv.conf "$D/etc/" 2>/dev/null || true

# The kernel file systems the build and the tests need; only what this run mounted is
# unmounted at the end (another user of the chroot may have mounted the rest).
mounted=()
work="/var/tmp/drun-$$"
cleanup() {
  [ "${DRUN_CHROOT_KEEP:-0}" = 1 ] || rm -rf "${D:?}$work"
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || true; done
}
trap cleanup EXIT
for m in proc sys dev dev/pts; do
  if ! mountpoint -q "$D/$m"; then mount --bind "/$m" "$D/$m"; mounted+=("$D/$m"); fi
done
chmod 1777 "$D/tmp"

git clone -q --no-hardlinks "$repo" "$D$work"
start=$(date +%s)
set +e
chroot "$D" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive bash -c '
  set -euo pipefail
  cd "$1"
  command -v git >/dev/null || { apt-get update -q; apt-get install -y -q --no-install-recommends git ca-certificates; }
  bash tests/install_deps.sh
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
  cmake --build build -j"$(nproc)"
  test -x build/examples/libtorch/drun_libtorch_train
  cd build
  ctest -L unit --output-on-failure -j"$(nproc)" --timeout 600 | tee ctest.log
  ' sh "$work"
rc=$?
set -e
glibc=$(chroot "$D" ldd --version | head -1 | awk '{print $NF}')
summary=$(grep -E 'tests passed' "$D$work/build/ctest.log" 2>/dev/null || echo 'no test summary')
. "$D/etc/os-release"
echo "chroot_build: $PRETTY_NAME, glibc $glibc: $summary (exit $rc, $(( $(date +%s) - start )) s)"
exit "$rc"
