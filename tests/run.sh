#!/usr/bin/env bash
# The test command: installs every dependency (Debian packages), checks the
# lock annotations with clang, builds drun and its tests, and runs the whole
# suite with ctest.
#   tests/run.sh            # everything
#   tests/run.sh -R cli     # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install_deps.sh
# The locks, checked: clang's -Wthread-safety -Werror over every source that
# takes one, syntax only, in a build directory of its own (thread_safety.cmake;
# about 40 s of CPU, docs/architecture.md "Threads"). A bare std::mutex fails its configure step.
TSA=${DRUN_TSA_BUILD_DIR:-build-tsa}
cmake -S . -B "$TSA" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DDRUN_BUILD_TESTS=OFF -DDRUN_THREAD_SAFETY_CHECK=ON
cmake --build "$TSA" -j"$(nproc)" --target thread_safety_check
BUILD=${DRUN_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD" -j"$(nproc)"
cd "$BUILD"
ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
