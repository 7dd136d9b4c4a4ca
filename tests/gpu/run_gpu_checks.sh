#!/bin/bash
# drun on a GPU machine with the newest PyTorch, in one bounded run (issue 25; docs/gpu.md).
#
#   tests/gpu/run_gpu_checks.sh [--dry-run] [--python PY] [--bundle DIR] [--data DIR]
#                               [--out DIR] [--budget SECONDS] [--only GROUPS] [--quick]
#                               [--with-placement] [--placement-full]
#
# On the GPU machine (the `run` call of docs/gpu.md): the workers' Python is
# /opt/torch/.venv/bin/python3 when it exists, the report goes to $OUT. --dry-run is the
# same script on a CPU machine with /usr/bin/python3 (Debian's torch 1.13): every GPU case
# says "skipped: no GPU", everything else runs (gloo stand-ins, the bundle under env -i).
# --bundle is tests/gpu/make_bundle.sh's folder (default gpu-bundle): its programs are
# unpacked into a temporary folder and run from there; --data defaults to its
# data/fashion-mnist.
#
# Cases, each bounded by a timeout and all by --budget (default 480 s):
#   0 the machine's versions (GPU, driver, torch, CUDA, NCCL, Python, glibc); the bundle
#     self-contained under env -i, and this glibc new enough for it
#   1 --nproc-per-node gpu and gpu:0 (NCCL all_reduce, a DDP step, CUDA_VISIBLE_DEVICES,
#     TORCH_NCCL_ASYNC_ERROR_HANDLING, exit codes); gloo stand-ins
#   2 several gloo ranks and one GPU rank; --virtual-local-rank where drun has it
#   3 the seeds' programs, every TCPStore op of this torch against drun's store,
#     tests/store, two nodes typed by hand on loopback, the Fashion-MNIST DDP trainer
#   4 Lightning Trainer(strategy="ddp") and accelerate's Accelerator() under drun
#   5 drun stacks and --hang-timeout on a rank stuck in an NCCL collective
#   6 bench/placement_bench.py, when the tree has it (3 repetitions unless --placement-full)
# Writes report.json, report.md and stacks.txt to --out (default: $OUT, else
# build/gpu-report). Exit 0 when no case failed, 1 when one did (a glibc too old for the
# bundle fails case "bundle" and skips the rest), 3 when there is no bundle.
set -uo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
DRY=0
PY=
BUNDLE=$REPO/gpu-bundle
REPORT=${OUT:-$REPO/build/gpu-report}
DATA=
PASS_ON=()

while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1; shift ;;
    --python) PY=$2; shift 2 ;;
    --bundle) BUNDLE=$2; shift 2 ;;
    --out) REPORT=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --budget|--only) PASS_ON+=("$1" "$2"); shift 2 ;;
    --quick|--with-placement|--placement-full) PASS_ON+=("$1"); shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "run_gpu_checks: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [ -z "$PY" ]; then
  if [ $DRY = 1 ]; then PY=/usr/bin/python3
  elif [ -x /opt/torch/.venv/bin/python3 ]; then PY=/opt/torch/.venv/bin/python3
  else PY=$(command -v python3); fi
fi
[ $DRY = 1 ] && PASS_ON+=(--dry-run)

echo "run_gpu_checks: $(date -u '+%F %T UTC') on $(hostname), $(nproc) CPUs," \
     "$(getconf GNU_LIBC_VERSION), python $PY"
if [ ! -f "$BUNDLE/MANIFEST.json" ] || [ ! -f "$BUNDLE/programs.tar.xz" ]; then
  echo "run_gpu_checks: no bundle in $BUNDLE: run tests/gpu/make_bundle.sh where drun was built" >&2
  exit 3
fi
[ -n "$DATA" ] || DATA=$BUNDLE/data/fashion-mnist
UNPACKED=$(mktemp -d "${TMPDIR:-/tmp}/drun-gpu-bundle.XXXXXX") || exit 3
trap 'rm -rf "$UNPACKED"' EXIT
# Python's tarfile: the machine may have no xz.
"$PY" -c 'import sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    t.extractall(sys.argv[2], **({"filter": "tar"} if hasattr(tarfile, "data_filter") else {}))
' "$BUNDLE/programs.tar.xz" "$UNPACKED" || { echo "run_gpu_checks: cannot unpack $BUNDLE/programs.tar.xz" >&2; exit 3; }
cp "$BUNDLE/MANIFEST.json" "$BUNDLE/GLIBC_REQUIRED" "$UNPACKED/"
# The glibc check is the Python driver's (case "bundle"), which records it; this line is for
# a reader of the console.
echo "run_gpu_checks: the bundle needs glibc >= $(cat "$BUNDLE/GLIBC_REQUIRED")" \
     "(made on $(grep -o '"glibc_here": "[^"]*"' "$BUNDLE/MANIFEST.json" | cut -d'"' -f4))"
command -v nvidia-smi >/dev/null && nvidia-smi -L

mkdir -p "$REPORT"
# The driver bounds every case itself; this outer bound only catches a driver that hangs.
budget=480
for ((i = 0; i < ${#PASS_ON[@]}; i++)); do
  [ "${PASS_ON[$i]}" = --budget ] && budget=${PASS_ON[$((i + 1))]%.*}
done
timeout -k 10 $((budget + 60)) "$PY" -u "$REPO/tests/gpu/gpu_checks.py" --python "$PY" \
  --bundle "$UNPACKED" --data "$DATA" --out "$REPORT" "${PASS_ON[@]}"
rc=$?
if [ -f "$REPORT/report.md" ]; then
  echo "run_gpu_checks: $REPORT/report.md:"
  sed -n '/^| group |/,/^$/p' "$REPORT/report.md"
fi
if [ $rc = 0 ] || [ $rc = 1 ]; then exit $rc; fi
echo "run_gpu_checks: the driver ended with status $rc" >&2
exit 1
