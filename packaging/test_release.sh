#!/usr/bin/env bash
# Runs the release (packaging/make_release.sh's OUTDIR) as a plain user on another Debian
# release, inside a chroot: what docs/install.md's "no root" and "venv or conda env" rows
# promise.
#   packaging/test_release.sh RELEASE DIR OUTDIR
# RELEASE: bullseye (glibc 2.31), bookworm, trixie, sid; DIR: its chroot, made with
# debootstrap if missing (tests/chroot_lib.sh), python3 and python3-venv installed in it as
# root. As the user `drun-user` (made if missing), with PYTHON_EXEC unset:
#   1. the tarball unpacked into the home directory: drun --version says "release tarball";
#   2. a 2-rank job;  3. 2 nodes by hand on 127.0.0.1 (two drun processes, gRPC rendezvous);
#   4. an ssh job: sshd of the chroot on 127.0.0.1:$port+1 (started here, ended by its pid),
#      the user's key and known_hosts, host "tarball-host" in ~/.ssh/config; drun -H
#      tarball-host starts `drun agent` there from the unpacked tarball (same home);
#   5. the wheel pip-installed into ~/venv: ~/venv/bin/drun --version says "wheel", and
#      ~/venv/bin/drun (venv not activated) runs its workers with ~/venv/bin/python3;
#   6. where the chroot's python3 has torch: the example reduce.py under ~/venv/bin/drun
#      (a venv with the system's site-packages).
# One line per check (ok/FAIL); exit 1 when one fails. Needs root (chroot).
set -euo pipefail
trap 'echo "test_release: line $LINENO failed: $BASH_COMMAND" >&2' ERR
R=${1:?usage: packaging/test_release.sh RELEASE DIR OUTDIR}
D=${2:?DIR}
OUT=${3:?OUTDIR}
repo=$(cd "$(dirname "$0")/.." && pwd)
tarball=$(ls "$OUT"/drun-*-linux-x86_64.tar.gz)
wheel=$(ls "$OUT"/drun-*-manylinux_2_28_x86_64.whl)
version=$(basename "$tarball" | sed 's/^drun-\(.*\)-linux-x86_64.tar.gz$/\1/')

. "$repo/tests/chroot_lib.sh"
chroot_create "$R" "$D"
trap chroot_unmount EXIT
chroot_mount "$D"
chroot "$D" sh -c 'command -v python3 >/dev/null && python3 -c "import ensurepip" 2>/dev/null &&
  [ -x /usr/sbin/sshd ] && command -v ssh-keyscan >/dev/null ||
  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3 python3-venv openssh-server openssh-client; }' >/dev/null
chroot "$D" id drun-user >/dev/null 2>&1 || chroot "$D" useradd -m -s /bin/sh drun-user
rel=/srv/drun-release
rm -rf "${D:?}$rel" && mkdir -p "$D$rel"
cp "$tarball" "$wheel" "$D$rel/"
chmod -R a+rX "$D$rel"
uid=$(chroot "$D" id -u drun-user)
gid=$(chroot "$D" id -g drun-user)

# as_user SCRIPT: runs SCRIPT with sh as drun-user in a login-like, venv-free environment.
as_user() {
  chroot --userspec="$uid:$gid" "$D" /usr/bin/env -i HOME=/home/drun-user USER=drun-user \
    LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin sh -c "cd ~ && $1"
}
failed=0
# check NAME EXPECTED-REGEX SCRIPT: the output of SCRIPT (stdout and stderr) must match.
check() {
  local got
  got=$(as_user "$3" 2>&1) || true
  if grep -Eq "$2" <<<"$got"; then
    echo "ok   $R: $1"
  else
    echo "FAIL $R: $1: expected /$2/, got:"; sed 's/^/    /' <<<"$got" | tail -n 15
    failed=1
  fi
}

glibc=$(chroot "$D" ldd --version | head -n 1 | awk '{print $NF}')
echo "test_release: $R (glibc $glibc), drun $version, as drun-user"
as_user "rm -rf ~/drun-$version ~/venv; tar -xzf $rel/$(basename "$tarball") -C ~"
check "tarball: drun --version" "^drun $version \(release tarball; gRPC" \
  "~/drun-$version/bin/drun --version"
check "tarball: a 2-rank job" "rank1\]: rank=1 of 2" \
  "~/drun-$version/bin/drun --standalone --nproc-per-node 2 --no-python /bin/sh -c 'echo rank=\$RANK of \$WORLD_SIZE' | sort"
port=$((29700 + $$ % 200))
check "tarball: 2 nodes by hand on 127.0.0.1" "^node1 rank=1 world=2 exit 0 0$" "
  d=~/drun-$version/bin/drun
  \$d --nnodes 2 --node-rank 0 --nproc-per-node 1 --rdzv-endpoint 127.0.0.1:$port --rdzv-id by-hand \
    --no-python /bin/sh -c 'echo node0 rank=\$RANK world=\$WORLD_SIZE' >/dev/null 2>&1 & a=\$!
  b=\$(\$d --nnodes 2 --node-rank 1 --nproc-per-node 1 --rdzv-endpoint 127.0.0.1:$port \
    --rdzv-id by-hand --no-python /bin/sh -c 'echo node1 rank=\$RANK world=\$WORLD_SIZE' 2>/dev/null)
  rb=\$?; wait \$a; echo \"\${b#*: } exit \$? \$rb\""

# 4. ssh: this chroot's sshd on 127.0.0.1 (the chroot shares this machine's network).
sshd_port=$((port + 1))
sshd_pid=""
stop_sshd() { [ -z "$sshd_pid" ] || kill "$sshd_pid" 2>/dev/null || true; }
trap 'stop_sshd; chroot_unmount' EXIT
chroot "$D" sh -c 'ssh-keygen -A >/dev/null; mkdir -p /run/sshd'
chroot "$D" /usr/sbin/sshd -D -p "$sshd_port" -o ListenAddress=127.0.0.1 -o PasswordAuthentication=no \
  -o PidFile=none & sshd_pid=$!
for _ in $(seq 100); do
  chroot "$D" ssh-keyscan -p "$sshd_port" 127.0.0.1 >/dev/null 2>&1 && break
  sleep 0.1  # sshd binding its port: nothing to wait on but the port itself
done
as_user "mkdir -p ~/.ssh && chmod 700 ~/.ssh && rm -f ~/.ssh/id_ed25519 ~/.ssh/id_ed25519.pub &&
  ssh-keygen -q -t ed25519 -N '' -f ~/.ssh/id_ed25519 && cp ~/.ssh/id_ed25519.pub ~/.ssh/authorized_keys &&
  printf 'Host tarball-host\n  HostName 127.0.0.1\n  Port $sshd_port\n' > ~/.ssh/config &&
  # -t ed25519: sid's OpenSSH 10 also offers an ssh-mldsa44-ed25519 host key, whose
  # known_hosts line libssh 0.10 (drun's) cannot parse, and then it knows no key of that host.
  ssh-keyscan -t ed25519 -p $sshd_port 127.0.0.1 > ~/.ssh/known_hosts 2>/dev/null"
check "tarball: an ssh job (drun agent started over ssh from the unpacked tarball)" \
  "tarball-host:rank1\]: ssh rank=1 of 2" \
  "~/drun-$version/bin/drun -H tarball-host --nproc-per-node 2 --no-python /bin/sh -c 'echo ssh rank=\$RANK of \$WORLD_SIZE' | sort"
stop_sshd

site=""
if chroot "$D" python3 -c 'import torch' 2>/dev/null; then site=--system-site-packages; fi
check "wheel: pip install --no-index into a venv" "Successfully installed drun-$version" \
  "python3 -m venv $site ~/venv && ~/venv/bin/pip install --no-index $rel/$(basename "$wheel")"
check "wheel: ~/venv/bin/drun --version" "^drun $version \(wheel; gRPC" "~/venv/bin/drun --version"
printf 'import os, sys\nprint("rank", os.environ["RANK"], "python", sys.executable, flush=True)\n' \
  > "$D/home/drun-user/which_python.py"
chmod 644 "$D/home/drun-user/which_python.py"
check "wheel: the workers run the venv's python (PYTHON_EXEC unset, venv not activated)" \
  "rank1\]: rank 1 python /home/drun-user/venv/bin/python3$" \
  "~/venv/bin/drun --standalone --nproc-per-node 2 which_python.py | sort"
if [ -n "$site" ]; then
  # USE_LIBUV=0: Debian's torch 2.6 and 2.14 are built without libuv, which their TCPStore
  # asks for by default: drun --no-agent-store -x USE_LIBUV=0, as its root-cause hint says.
  check "wheel: the example reduce.py with the venv's torch" "Sum of all messages is 6" \
    "cd ~/venv/share/doc/drun/examples && ~/venv/bin/drun --no-agent-store -x USE_LIBUV=0 --standalone --nproc-per-node 4 reduce.py"
fi
exit "$failed"
