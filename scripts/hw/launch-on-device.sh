#!/usr/bin/env bash
# gpuorch launch on the lent 2 x H200 machine (docs/hardware/h200-x2-launch/): the binding plan,
# the DDP test script with NCCL (one rank per GPU, --bind cores) under gpuorch launch and under
# torchrun in the same run, iteration time and launch overhead of both. Outputs under $OUT.
# Run from the repository root with the portable build carried (build/portable/dist).
set -uo pipefail
OUT=${OUT:-/tmp/launch-out}
mkdir -p "$OUT"
# The portable build (scripts/build-portable); GPUORCH overrides it.
G=${GPUORCH:-build/portable/dist/bin/gpuorch}
PY=$(command -v python3)
TRAIN=tests/fixtures/launch/ddp_train.py
export NCCL_NVLS_ENABLE=0
{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
  command -v torchrun
  nproc
} >"$OUT/machine.txt" 2>&1
nvidia-smi topo -m >"$OUT/nvidia-smi-topo.txt" 2>&1
"$G" topo >"$OUT/gpuorch-topo.txt" 2>&1
"$G" launch --nproc-per-node gpu --bind cores --dry-run >"$OUT/plan.txt" 2>&1
"$G" launch --nproc-per-node gpu --bind cores --dry-run --json >"$OUT/plan.json" 2>&1
cat "$OUT/plan.txt"

# The same training under both launchers, alternating, three times each.
ARGS=(--features 1024 --hidden 8192 --batch 512 --steps 300 --warmup 50 --lr 0.001)
# wall FILE CMD...: runs CMD, writes its wall seconds to FILE (no /usr/bin/time on the image).
wall() {
  local file=$1 start end
  shift
  start=$(date +%s.%N)
  timeout 90 "$@"
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f\n", b - a }' >"$file"
}
for i in 1 2 3; do
  wall "$OUT/gpuorch-train-$i.wall" "$G" launch --standalone --nproc-per-node 2 --bind cores \
    --summary-json "$OUT/gpuorch-summary-$i.json" -- "$PY" "$TRAIN" "${ARGS[@]}" \
    --out "$OUT/gpuorch-train-$i.json" >"$OUT/gpuorch-train-$i.log" 2>&1
  wall "$OUT/torchrun-train-$i.wall" torchrun --standalone --nproc-per-node 2 \
    "$TRAIN" "${ARGS[@]}" --out "$OUT/torchrun-train-$i.json" >"$OUT/torchrun-train-$i.log" 2>&1
done
"$PY" - "$OUT" <<'PY' | tee "$OUT/iteration-time.txt"
import json, statistics, sys, glob
out = sys.argv[1]
for name in ("gpuorch", "torchrun"):
    runs = [json.load(open(f)) for f in sorted(glob.glob(f"{out}/{name}-train-*.json"))]
    ms = [r["iteration_ms"] for r in runs]
    if ms:
        print(f"{name:<9} iteration ms per run: {', '.join(f'{m:.3f}' for m in ms)}; median "
              f"{statistics.median(ms):.3f}; loss {runs[0]['first_loss']:.4f} -> {runs[0]['last_loss']:.4f}; "
              f"identical weights: {all(r['identical'] for r in runs)}; backend {runs[0]['backend']}")
    else:
        print(f"{name}: no result (see {name}-train-*.log)")
PY

# Launch overhead: launcher start to every rank past its first barrier (NCCL, 2 ranks).
timeout 150 "$PY" scripts/launch-overhead --gpuorch "$G" --python "$PY" --nproc 2 --repeats 5 --bare \
  --torchrun --json "$OUT/overhead.json" 2>&1 | tee "$OUT/overhead.txt"
