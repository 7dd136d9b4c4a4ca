#!/usr/bin/env bash
# Installs every build, test and demo dependency of drun from Debian's archive: Debian 12,
# 13 and sid (so Ubuntu 22.04/24.04); names that exist on each (libpython3-dev and
# libclang-rt-dev install libpython3.11-dev and libclang-rt-14-dev on Debian 12).
# Idempotent and non-interactive: packages already present are skipped by apt-get.
set -euo pipefail
PKGS=(
  # build
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libssh-dev libssl-dev libyaml-cpp-dev libgtest-dev libgmock-dev
  # end-to-end tests and the demo: Debian's PyTorch 1.13, LibTorch, Fashion-MNIST
  python3 python3-torch python3-torchvision dataset-fashion-mnist libtorch-dev
  libgloo-dev  # ProcessGroupGloo.hpp's headers, for the LibTorch trainer example
  # drun stacks: the default CPython's internal headers (the built-in reader's generated
  # offsets are checked against them), eu-stack and gdb for native frames
  libpython3-dev elfutils gdb
  # multi-host and cluster testbeds, fuzzing, pseudo-terminal checks
  iproute2 procps psmisc openssh-server openssh-client
  tcpdump  # the job token and -x values never cross the rendezvous wire (tests/e2e/test_token_wire.py)
  openssl  # --rdzv-tls tests make their CA and certificates at test time (tests/make_tls_certs.sh)
  patchelf xz-utils  # the GPU checks' bundle (tests/gpu/make_bundle.sh; ctest gpu.dry_run)
  python3-venv  # the release's wheel installed into a venv (ctest release.make_release)
  slurmctld slurmd slurm-client munge
  clang libclang-rt-dev tmux util-linux  # clang: fuzzing and the lock check (ctest thread_safety)
  # man page and package checks
  man-db groff-base bsdextrautils file dpkg-dev
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
# Both wait for another apt (a fresh machine's unattended-upgrades) to finish.
bash "$(dirname "$0")/apt_get.sh" update
bash "$(dirname "$0")/apt_get.sh" install -y --no-install-recommends "${missing[@]}"
