#!/usr/bin/env bash
# The release: drun for any x86_64 Linux with glibc 2.28 or later, installed without root.
#   packaging/make_release.sh OUTDIR
# writes
#   OUTDIR/drun-<version>-linux-x86_64.tar.gz               one folder drun-<version>/ with
#       bin/drun, lib/drun/drun-net, share/man/man1/drun.1.gz, share/bash-completion/completions/drun,
#       share/doc/drun/ (docs, configs,
#       examples): unpack anywhere, run drun-<version>/bin/drun
#   OUTDIR/drun-<version>-py3-none-manylinux_2_28_x86_64.whl the same files as a wheel:
#       pip install --no-index drun-*.whl (packaging/make_wheel.py)
# Built on Debian 12 with its packages (tests/install_deps.sh) in build-release/
# (DRUN_RELEASE_BUILD_DIR), with -DDRUN_PORTABLE=ON (packaging/portable.cmake): every library
# but glibc linked in, and no glibc symbol newer than 2.28 imported. Both outputs are checked
# with packaging/check_glibc_floor.py (as auditwheel checks a manylinux wheel); a failure
# stops here. docs/install.md says how it is built and where it was run.
set -euo pipefail
out=${1:?usage: packaging/make_release.sh OUTDIR}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=${DRUN_RELEASE_BUILD_DIR:-$repo/build-release}
version=$(sed -n 's/^project(drun VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")

cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDRUN_PORTABLE=ON \
  -DDRUN_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target drun drun-net drun_man_page drun_completion

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
tree="$stage/drun-$version"
cmake --install "$build" --prefix "$tree" >/dev/null
rm -f "$build/install_manifest.txt"
strip --strip-unneeded "$tree/bin/drun" "$tree/lib/drun/drun-net"
echo "release tarball" > "$tree/lib/drun/drun-build"
python3 "$repo/packaging/check_glibc_floor.py" "$tree"

tarball="$out/drun-$version-linux-x86_64.tar.gz"
tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$tarball" "drun-$version"
wheel=$(python3 "$repo/packaging/make_wheel.py" --version "$version" --tree "$tree" --out "$out")
python3 "$repo/packaging/check_glibc_floor.py" "$tarball" "$wheel" | tail -n 1
echo "$tarball"
echo "$wheel"
