#!/usr/bin/env bash
# ctest `thread_safety` (tests/CMakeLists.txt): the lock check of
# thread_safety.cmake. clang's -Wthread-safety -Werror over every source of
# drun's libraries that takes a lock, syntax only, in a build tree of its own
# (configured with clang; nothing generated but the protobuf headers, nothing
# linked); its configure step refuses a bare std::mutex.
#   tests/thread_safety.sh SOURCE_DIR BUILD_DIR [GENERATOR]
# Exit 77 (the test's SKIP_RETURN_CODE), with the reason, where clang is missing.
set -euo pipefail
src=$1
build=$2
generator=${3:-Ninja}
cc=$(command -v clang || true)
cxx=$(command -v clang++ || true)
if [[ -z $cc || -z $cxx ]]; then
  echo "skipped: the lock check needs clang and clang++ (clang's -Wthread-safety), which are not on PATH;" \
       "tests/install_deps.sh installs them"
  exit 77
fi
cmake -S "$src" -B "$build" -G "$generator" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DDRUN_BUILD_TESTS=OFF -DDRUN_THREAD_SAFETY_CHECK=ON
cmake --build "$build" -j"$(nproc)" --target thread_safety_check
