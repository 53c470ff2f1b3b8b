#!/usr/bin/env bash
# Runs `gpuorch bench` for every collective on a GPU host (one process driving -g GPUs) and, if
# present, nccl-tests on the same sizes; writes every output under $OUT/ (at most 8 files, flat).
# Run from the repository root:
#   OUT=/some/dir bash scripts/hw/bench-on-device.sh
# Uses the portable build (scripts/build-portable -> build/portable/dist, carried to the host) or
# $GPUORCH. NCCL: the host's libnccl.so.2, else the one PyTorch ships (nvidia-nccl wheel).
# Files: sweep.txt (all_reduce, -b 8 -e 8G -f 2)  bench-1G.txt  bench-8G.txt (every collective)
#        bench.json (all_reduce 8G --json)  nccl-tests.txt  env.txt  summary.txt
set -uo pipefail
export NCCL_NVLS_ENABLE=0
OUT="${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
G="${NGPUS:-2}"
GPUORCH="${GPUORCH:-build/portable/dist/bin/gpuorch}"
if ! "$GPUORCH" --version >/dev/null 2>&1; then
  echo "bench-on-device: $GPUORCH does not run here; build it with scripts/build-portable and carry build/portable/dist" >&2
  exit 2
fi
NCCL_LIB="${NCCL_LIB:-}"
if [ -z "$NCCL_LIB" ]; then
  NCCL_LIB=$(ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" {print $NF; exit}')
fi
if [ -z "$NCCL_LIB" ]; then
  NCCL_LIB=$(python3 - 2>/dev/null <<'PY'
import glob, os
try:
    import nvidia.nccl as m
    roots = list(m.__path__)
except Exception:
    import torch
    roots = [os.path.dirname(torch.__file__) + "/.."]
for r in roots:
    for p in glob.glob(r + "/**/libnccl.so.2", recursive=True):
        print(os.path.realpath(p)); raise SystemExit
PY
)
fi
{
  echo "# $(date -u) gpuorch $("$GPUORCH" --version)"
  echo "# NCCL library: ${NCCL_LIB:-not found}"
  echo "# NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv 2>&1
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())" 2>&1
} >"$OUT/env.txt"
status=0
B=("$GPUORCH" bench --nccl-library "${NCCL_LIB:-libnccl.so.2}")
COLLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv"

# 1. the full sweep for all_reduce, as nccl-tests users run it
"${B[@]}" all_reduce -b 8 -e 8G -f 2 -g "$G" >"$OUT/sweep.txt" 2>&1 || status=1
# 2-3. every collective at 1 GiB and at 8 GiB
for size in 1G 8G; do
  for c in $COLLS; do
    echo "## gpuorch bench $c -b $size -e $size -g $G"
    "${B[@]}" "$c" -b "$size" -e "$size" -g "$G" 2>&1 || status=1
    echo
  done >"$OUT/bench-$size.txt"
done
# 4. JSON
"${B[@]}" all_reduce -b 1G -e 8G -f 8 -g "$G" --json >"$OUT/bench.json" 2>&1 || status=1
# 5. nccl-tests on the same sizes, if installed
NT=""
for d in "${NCCL_TESTS:-}" /usr/local/bin /opt/nccl-tests/build /usr/bin "$HOME/nccl-tests/build"; do
  if [ -n "$d" ] && [ -x "$d/all_reduce_perf" ]; then NT="$d"; break; fi
done
if [ -n "$NT" ]; then
  for size in 1G 8G; do
    for c in $COLLS; do
      echo "## nccl-tests ${c}_perf -b $size -e $size -g $G"
      "$NT/${c}_perf" -b "$size" -e "$size" -g "$G" 2>&1
    done
  done >"$OUT/nccl-tests.txt"
else
  echo "nccl-tests is not installed on this host (looked for all_reduce_perf in \$NCCL_TESTS, /usr/local/bin, /opt/nccl-tests/build, /usr/bin, ~/nccl-tests/build)" >"$OUT/nccl-tests.txt"
fi
# 6. summary: out-of-place busbw and #wrong per collective and size
{
  for size in 1G 8G; do
    awk -v s="$size" '/^## gpuorch bench/ {c=$4} /^ +[0-9]+ +[0-9]+ / {printf "%-15s %s  out-of-place busbw %s GB/s  #wrong %s\n", c, s, $8, $9}' "$OUT/bench-$size.txt"
  done
  grep -h "Avg bus bandwidth" "$OUT/sweep.txt"
} >"$OUT/summary.txt"
cat "$OUT/summary.txt"; head -3 "$OUT/nccl-tests.txt"
ls -la "$OUT"
exit $status
