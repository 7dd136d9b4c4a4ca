#!/usr/bin/env bash
# The test command: installs every dependency (Debian packages), builds drun
# and its tests, and runs the whole suite with ctest (the lock annotations'
# check with clang included: the test thread_safety, tests/thread_safety.sh).
#   tests/run.sh            # everything
#   tests/run.sh -R cli     # extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install_deps.sh
BUILD=${DRUN_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$BUILD" -j"$(nproc)"
cd "$BUILD"
ctest --output-on-failure -j"$(nproc)" --timeout 600 "$@"
