#!/usr/bin/env bash
# One torchrun node and one `gpuorch launch` node meeting in ONE c10d rendezvous on loopback
# (PyTorch 2.x's torchrun, --rdzv-backend c10d), 1 worker each, Gloo all-reduce of rank+1 (both
# must print SUM=3.0). Two cases, so each side is once node 0 (ranks go by the sorted node
# address: --local-addr 127.0.0.1 sorts before 127.0.0.2):
#   torch-first:   torchrun starts first (its agent serves the rendezvous store), is 127.0.0.1
#   gpuorch-first: gpuorch starts first (serves the store, writes the first state), is 127.0.0.1
#                  (node 0 is gpuorch: its agent serves the workers' store, as 2.x's does)
#   bash scripts/hw/c10d-interop.sh BINARY OUTDIR
# Writes OUTDIR/<case>/{torchrun,gpuorch}.{out,err}, OUTDIR/env.txt and OUTDIR/summary.txt
# (one PASS/FAIL line per case). TORCHRUN overrides the torchrun command.
set -uo pipefail
BIN="${1:?usage: c10d-interop.sh BINARY OUTDIR}"
OUT="${2:?usage: c10d-interop.sh BINARY OUTDIR}"
mkdir -p "$OUT"
TORCHRUN="${TORCHRUN:-python3 -m torch.distributed.run}"
if ! "$BIN" --version >/dev/null 2>&1; then
  echo "c10d-interop: $BIN does not run here" >&2
  exit 2
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/allreduce.py" <<'PY'
import os
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print(f"RANK={os.environ['RANK']} WORLD_SIZE={dist.get_world_size()} "
      f"GROUP_RANK={os.environ['GROUP_RANK']} "
      f"MASTER={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} "
      f"AGENT_STORE={os.environ.get('TORCHELASTIC_USE_AGENT_STORE')} SUM={t.item()}", flush=True)
dist.destroy_process_group()
PY
{
  "$BIN" --version
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)'
} >"$OUT/env.txt" 2>&1

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

run_torchrun() {  # ADDR PORT ID DIR
  timeout 240 $TORCHRUN --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d \
    --rdzv-endpoint "127.0.0.1:$2" --rdzv-id "$3" --local-addr "$1" --max-restarts 0 \
    "$WORK/allreduce.py" >"$4/torchrun.out" 2>"$4/torchrun.err"
}
run_gpuorch() {  # ADDR PORT ID DIR
  timeout 240 "$BIN" launch --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d \
    --rdzv-endpoint "127.0.0.1:$2" --rdzv-id "$3" --local-addr "$1" --max-restarts 0 \
    --bind none --backend gloo "$WORK/allreduce.py" >"$4/gpuorch.out" 2>"$4/gpuorch.err"
}

: >"$OUT/summary.txt"
for case in torch-first gpuorch-first; do
  dir="$OUT/$case"
  mkdir -p "$dir"
  port="$(free_port)"
  if [ "$case" = torch-first ]; then
    run_torchrun 127.0.0.1 "$port" "$case" "$dir" & first=$!
    for _ in $(seq 300); do listening "$port" && break; sleep 0.1; done
    run_gpuorch 127.0.0.2 "$port" "$case" "$dir" & second=$!
  else
    run_gpuorch 127.0.0.1 "$port" "$case" "$dir" & first=$!
    for _ in $(seq 300); do listening "$port" && break; sleep 0.1; done
    run_torchrun 127.0.0.2 "$port" "$case" "$dir" & second=$!
  fi
  wait "$first"; rc1=$?
  wait "$second"; rc2=$?
  sums="$(cat "$dir/torchrun.out" "$dir/gpuorch.out" | grep -c 'SUM=3.0')"
  ranks="$(cat "$dir/torchrun.out" "$dir/gpuorch.out" | grep -o 'RANK=[0-9]* WORLD_SIZE=[0-9]*' | sort | tr '\n' ' ')"
  verdict=FAIL
  [ "$rc1" = 0 ] && [ "$rc2" = 0 ] && [ "$sums" = 2 ] && verdict=PASS
  echo "$case $verdict exit=$rc1/$rc2 all-reduce-lines=$sums ranks: $ranks" | tee -a "$OUT/summary.txt"
done
grep -q FAIL "$OUT/summary.txt" && exit 1
exit 0
