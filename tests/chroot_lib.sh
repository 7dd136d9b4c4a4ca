# Sourced by tests/chroot_build.sh and packaging/test_release.sh (as root):
#   chroot_create RELEASE DIR [PKG,...]  debootstrap RELEASE (bullseye, bookworm, trixie, sid)
#                                        into DIR from the archive apt uses on this machine,
#                                        unless DIR already holds a system (then reused as is)
#   chroot_mount DIR                     bind-mounts proc, sys, dev, dev/pts; localhost and this
#                                        host's name in /etc/hosts; /tmp for every user
#   chroot_unmount                       unmounts only what chroot_mount mounted (another user
#                                        of the chroot may hold the rest)
chroot_create() {
  local release=$1 dir=$2 include=${3:-ca-certificates} mirror
  [ -x "$dir/usr/bin/apt-get" ] && return 0
  command -v debootstrap >/dev/null ||
    bash "$(dirname "${BASH_SOURCE[0]}")/apt_get.sh" install -y -q debootstrap
  mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1=="deb"{print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  mkdir -p "$(dirname "$dir")"
  debootstrap --variant=minbase --include="$include" "$release" "$dir" "$mirror"
  # A snapshot archive's Release file may be past its Valid-Until date.
  echo 'Acquire::Check-Valid-Until "false";' > "$dir/etc/apt/apt.conf.d/99no-valid-until"
}

chroot_mounted=()
chroot_unmount() {
  local i
  for ((i = ${#chroot_mounted[@]} - 1; i >= 0; i--)); do umount "${chroot_mounted[i]}" || true; done
}
chroot_mount() {
  local d=$1 m
  for m in proc sys dev dev/pts; do
    if ! mountpoint -q "$d/$m"; then mount --bind "/$m" "$d/$m"; chroot_mounted+=("$d/$m"); fi
  done
  chmod 1777 "$d/tmp"
  grep -qw localhost "$d/etc/hosts" 2>/dev/null ||
    printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >> "$d/etc/hosts"
  grep -qw "$(hostname)" "$d/etc/hosts" || echo "127.0.1.1 $(hostname)" >> "$d/etc/hosts"
  cp /etc/resolv.conf "$d/etc/" 2>/dev/null || true
}
