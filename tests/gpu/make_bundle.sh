#!/bin/bash
# Makes a self-contained copy of drun for a machine that is not Debian 12 (the lent GPU
# machine: another distribution, no Debian packages, nothing to download). See docs/gpu.md.
#
#   tests/gpu/make_bundle.sh [--build DIR] [--out DIR] [--data DIR | --no-data] [--fast]
#
# Defaults: --build build, --out gpu-bundle (ignored by git; the `run` call carries it),
# --data /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist). --fast: the
# least xz compression (the ctest's bundle; 2-3 times larger).
#
# The bundle, $OUT:
#   programs.tar.xz       bin/ and lib/ below, packed (23 MiB unpacked, about 6 packed);
#                         run_gpu_checks.sh unpacks it into a temporary folder
#   data/fashion-mnist/   the four IDX files (gzipped, 30 MiB) for the seeds' trainer
#   MANIFEST.json         the commit, this machine's glibc, the newest GLIBC_ symbol
#                         version any bundled file needs (glibc_required), each file's
#                         size and the Debian package it came from
#   GLIBC_REQUIRED        glibc_required alone, for shell scripts
# and in programs.tar.xz:
#   bin/     drun, drun-net, drun_store_server (tests/store's tool), eu-stack (elfutils:
#            drun stacks' native frames; the device image has no gdb or eu-stack), stripped,
#            each with RUNPATH $ORIGIN/../lib
#   lib/     every shared library they load that is not glibc's (gRPC's and protobuf's
#            are static in drun; libssh, yaml-cpp, OpenSSL, zlib, libstdc++, libgcc_s, the
#            elfutils libraries...), stripped, RUNPATH $ORIGIN. glibc (libc6's files) is
#            the one thing taken from the machine that runs it.
#
# Needs patchelf (Debian: apt-get install patchelf), strip, readelf and dpkg. RUNPATH, not
# LD_LIBRARY_PATH: the workers drun starts inherit its environment, and a worker loading
# Debian 12's libstdc++ or OpenSSL instead of its own would break torch.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$REPO/build
OUT=$REPO/gpu-bundle
DATA=/usr/share/datasets/fashion-mnist
XZ_LEVEL=6

die() { echo "make_bundle: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --no-data) DATA=; shift ;;
    --fast) XZ_LEVEL=0; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

for tool in patchelf strip readelf dpkg xz; do
  command -v $tool >/dev/null || die "$tool not found (Debian: apt-get install patchelf binutils)"
done

PROGRAMS=("$BUILD/launcher/drun" "$BUILD/launcher/drun-net")
for p in "${PROGRAMS[@]}"; do
  [ -x "$p" ] || die "$p missing: cmake --build $BUILD --target drun drun-net"
done
STORE_SERVER=$BUILD/rendezvous/drun_store_server
[ -x "$STORE_SERVER" ] && PROGRAMS+=("$STORE_SERVER") \
  || echo "make_bundle: $STORE_SERVER missing (target drun_store_server): the store checks will skip" >&2
EU_STACK=$(command -v eu-stack || true)
[ -n "$EU_STACK" ] && PROGRAMS+=("$EU_STACK") \
  || echo "make_bundle: eu-stack not found (Debian: elfutils): drun stacks will show no native frames there" >&2

# A fresh folder each time; refuse to empty a folder that is not a bundle.
if [ -e "$OUT" ]; then
  [ -f "$OUT/MANIFEST.json" ] || die "$OUT exists and is not a bundle; not replacing it"
  rm -rf "$OUT"
fi
mkdir -p "$OUT"
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/drun-bundle.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/lib"

# The Debian package a file belongs to ("libc6", "libssh-4", ...), or "-" (built here).
package_of() {
  local real; real=$(readlink -f "$1")
  { dpkg -S "$real" 2>/dev/null || dpkg -S "${real/#\/usr\/lib/\/lib}" 2>/dev/null; } \
    | head -1 | cut -d: -f1 || true
}

# Libraries a program loads, as "SONAME PATH" lines, resolved by this machine's loader.
libraries_of() {
  ldd "$1" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }
                  $2 == "=>" && $3 == "not" { print "MISSING", $1 }'
}

declare -A PACKAGE=()
for p in "${PROGRAMS[@]}"; do
  name=$(basename "$p")
  cp "$p" "$STAGE/bin/$name"
  PACKAGE[bin/$name]=$(package_of "$p")
  [ -n "${PACKAGE[bin/$name]}" ] || PACKAGE[bin/$name]="built here"
  while read -r soname path; do
    [ "$soname" != MISSING ] || die "$p needs $path, which this machine does not have"
    pkg=$(package_of "$path")
    [ "$pkg" != libc6 ] || continue          # glibc: the running machine's own
    [ -e "$STAGE/lib/$soname" ] && continue
    cp -L "$path" "$STAGE/lib/$soname"
    PACKAGE[lib/$soname]=${pkg:-unknown}
  done < <(libraries_of "$p")
done

chmod u+w "$STAGE"/bin/* "$STAGE"/lib/*
for f in "$STAGE"/bin/*; do
  strip --strip-all "$f"
  patchelf --set-rpath '$ORIGIN/../lib' "$f"
done
for f in "$STAGE"/lib/*; do
  strip --strip-unneeded "$f"
  patchelf --set-rpath '$ORIGIN' "$f"
done

if [ -n "$DATA" ]; then
  mkdir -p "$OUT/data/fashion-mnist"
  for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
           t10k-labels-idx1-ubyte; do
    src=$DATA/$f.gz; [ -f "$src" ] || src=$DATA/$f
    [ -f "$src" ] || die "$DATA has no $f[.gz] (Debian: apt-get install dataset-fashion-mnist, or --no-data)"
    cp "$src" "$OUT/data/fashion-mnist/"
  done
fi

# The newest GLIBC_x.y any bundled file asks for: the oldest glibc that can run the bundle.
glibc_required=$(for f in "$STAGE"/bin/* "$STAGE"/lib/*; do readelf -V -W "$f"; done \
  | grep -o 'Name: GLIBC_[0-9.]*' | sed 's/Name: GLIBC_//' | sort -t. -k1,1n -k2,2n -u | tail -1)
glibc_here=$(getconf GNU_LIBC_VERSION | awk '{print $2}')
echo "$glibc_required" > "$OUT/GLIBC_REQUIRED"
tar -C "$STAGE" -cf - bin lib | xz -$XZ_LEVEL -T2 > "$OUT/programs.tar.xz"

{
  echo "{"
  echo "  \"commit\": \"$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)\","
  echo "  \"made_on\": \"$(. /etc/os-release; echo "$PRETTY_NAME")\","
  echo "  \"glibc_here\": \"$glibc_here\","
  echo "  \"glibc_required\": \"$glibc_required\","
  echo "  \"files\": {"
  first=1
  for f in $(cd "$STAGE" && find bin lib -type f | sort) \
           $(cd "$OUT" && find data -type f 2>/dev/null | sort); do
    [ $first = 1 ] || echo ","
    first=0
    size=$(stat -c %s "$STAGE/$f" 2>/dev/null || stat -c %s "$OUT/$f")
    printf '    "%s": {"bytes": %d, "package": "%s"}' "$f" "$size" "${PACKAGE[$f]:-data}"
  done
  echo
  echo "  },"
  echo "  \"programs_unpacked_bytes\": $(du -sb "$STAGE" | cut -f1),"
  echo "  \"programs_packed_bytes\": $(stat -c %s "$OUT/programs.tar.xz"),"
  echo "  \"total_bytes\": $(du -sb "$OUT" | cut -f1)"
  echo "}"
} > "$OUT/MANIFEST.json"

total=$(du -sb "$OUT" | cut -f1)
echo "make_bundle: $OUT: $(ls "$STAGE/bin" | wc -l) programs, $(ls "$STAGE/lib" | wc -l) libraries" \
     "($(($(du -sb "$STAGE" | cut -f1) / 1024)) KiB, packed $(($(stat -c %s "$OUT/programs.tar.xz") / 1024)) KiB)," \
     "$((total / 1024)) KiB in all (the data $( [ -d "$OUT/data" ] && du -sk "$OUT/data" | cut -f1 || echo 0) KiB);" \
     "needs glibc >= $glibc_required (this machine: $glibc_here)"
[ "$total" -lt $((48 * 1024 * 1024)) ] || die "the bundle is $((total / 1048576)) MiB: over 48 MiB, too close to the 64 MiB a run call carries"
exit 0
