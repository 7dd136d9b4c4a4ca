#!/bin/bash
# ctest gpu.dry_run: tests/gpu/dry_run_test.sh BUILD_DIR [PYTHON]
# The bundle of this build, the GPU checks on the CPU, and the report's verdicts
# (tests/gpu/CMakeLists.txt says why). Exit 77 (skipped) without patchelf, xz or torch.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$1" && pwd)
PY=${2:-/usr/bin/python3}
for tool in patchelf xz; do
  command -v $tool >/dev/null || { echo "$tool missing (tests/install_deps.sh installs it)"; exit 77; }
done
"$PY" -c 'import torch' 2>/dev/null || { echo "$PY has no torch"; exit 77; }

BUNDLE=$BUILD/gpu-bundle-test
REPORT=$BUILD/gpu-dry-run
rm -rf "$REPORT"
"$HERE/make_bundle.sh" --build "$BUILD" --out "$BUNDLE" --no-data --fast || exit 1
"$HERE/run_gpu_checks.sh" --dry-run --python "$PY" --bundle "$BUNDLE" \
  --data /usr/share/datasets/fashion-mnist --out "$REPORT" --quick --budget 600
rc=$?
"$PY" "$HERE/check_dry_run.py" "$REPORT/report.json" || exit 1
exit $rc
