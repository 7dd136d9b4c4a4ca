#!/usr/bin/env bash
# The main job: installs the dependencies (Debian packages), builds drun, and
# trains the seeds' DDP model on Fashion-MNIST with 4 local workers under drun.
# The dataset is unpacked once by --node-setup before any worker starts.
#   examples/run_demo.sh [--epochs N]     # arguments go to mnist_ddp.py
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/install_deps.sh
BUILD=${DRUN_BUILD_DIR:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD" --target drun -j"$(nproc)"
# Debian's PyTorch belongs to Debian's interpreter, whatever python3 is first on PATH.
export PYTHON_EXEC=/usr/bin/python3
DATA=${DRUN_DEMO_DATA:-${TMPDIR:-/tmp}/drun-fashion-mnist}
exec "$BUILD/launcher/drun" --standalone --nproc-per-node 4 \
  --node-setup "$PYTHON_EXEC examples/prepare_fashion_mnist.py $DATA" \
  examples/mnist_ddp.py --data-dir "$DATA" "$@"
