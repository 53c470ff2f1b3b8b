#!/usr/bin/env bash
# gpuorch bench, its multi-process mode and gpuorch tune nccl on a GPU host; every output under
# $OUT/ (flat). Run from the repository root with the portable build carried along:
#   OUT=/some/dir bash scripts/hw/bench-on-device.sh
# Files: env.txt (nvidia-smi, NCCL, torch)  sweep.txt (all_reduce -b 8 -e 8G -f 2)
#        collectives.txt (all seven at 1 GiB and 8 GiB)  bench.json  mp-rank0.txt mp-rank1.txt
#        (one process per GPU)  peer-*.txt (a rank that never comes, a rank killed mid-run)
#        tune.txt nccl.env calibration.json  torch.txt  nccl-tests.txt  summary.txt
# PARTS (default "sweep collectives mp tune peers torch") picks what runs. The device tool returns
# at most 8 files, so everything is also packed into $OUT/bench-outputs.tar.gz at the end.
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0 for everything.
set -uo pipefail
PARTS=" ${PARTS:-sweep collectives mp tune peers torch} "
want() { [[ "$PARTS" == *" $1 "* ]]; }
export NCCL_NVLS_ENABLE=0
OUT="${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
G="${NGPUS:-2}"
GPUORCH="${GPUORCH:-build/portable/dist/bin/gpuorch}"
if ! "$GPUORCH" --version >/dev/null 2>&1; then
  echo "bench-on-device: $GPUORCH does not run here; build it with scripts/build-portable and carry build/portable/dist" >&2
  exit 2
fi
NCCL_LIB="${NCCL_LIB:-$( (ldconfig -p || /sbin/ldconfig -p) 2>/dev/null | awk '$1 == "libnccl.so.2" && !p {p = $NF} END {print p}')}"
B=("$GPUORCH" bench --nccl-library "${NCCL_LIB:-libnccl.so.2}")
COLLS="all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv"
status=0
t0=$SECONDS
stamp() { echo "# [$((SECONDS - t0)) s] $*" >&2; }

{
  echo "# $(date -u) $(uname -n) $("$GPUORCH" --version | head -2 | paste -sd " ")"
  echo "# NCCL library: ${NCCL_LIB:-not found}; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  grep -h PRETTY_NAME /etc/os-release
  ldd --version | head -1
  nvidia-smi 2>&1
  nvidia-smi topo -m 2>&1
  timeout 60 python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'nccl', torch.cuda.nccl.version())" 2>&1
} >"$OUT/env.txt"

# 1. the full all_reduce sweep, as nccl-tests users run it, with the check (#wrong)
if want sweep; then
  timeout 200 "${B[@]}" all_reduce -b 8 -e 8G -f 2 -g "$G" -c 1 >"$OUT/sweep.txt" 2>&1 || status=1
fi
# 2. every collective at 1 GiB and 8 GiB
want collectives && for c in $COLLS; do
  echo "## gpuorch bench $c -b 1G -e 8G -f 8 -g $G -c 1"
  timeout 100 "${B[@]}" "$c" -b 1G -e 8G -f 8 -g "$G" -c 1 2>&1 || status=1
  echo
done >"$OUT/collectives.txt"
if want collectives; then
  timeout 60 "${B[@]}" all_reduce -b 1G -e 1G -g "$G" -c 1 --json >"$OUT/bench.json" 2>&1 || status=1
fi

# 3. one process per GPU, started by a plain shell loop with torchrun's variables
want mp && for r in $(seq 0 $((G - 1))); do
  RANK=$r WORLD_SIZE=$G LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 \
    timeout 120 "${B[@]}" all_reduce -b 1G -e 8G -f 8 -g 1 -c 1 >"$OUT/mp-rank$r.txt" 2>&1 &
done
wait || status=1
# 4. NCCL_ALGO x NCCL_PROTO against the default, 3 repeats; env file and calibration file
if want tune; then
  timeout 240 "$GPUORCH" tune nccl -b 64K -e 1G -f 4 -g "$G" --repeats 3 --nccl-library "${NCCL_LIB:-libnccl.so.2}" \
    --output "$OUT/nccl.env" --calibration "$OUT/calibration.json" >"$OUT/tune.txt" 2>&1 || status=1
fi

# 5. bounded waits: a rank that never comes; a rank killed while NCCL runs
want peers && {
  echo "## RANK=0 WORLD_SIZE=2 GPUORCH_PEER_TIMEOUT=5, rank 1 never started"
  start=$SECONDS
  RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29534 GPUORCH_PEER_TIMEOUT=5 \
    timeout 60 "${B[@]}" all_reduce -g 1 2>&1
  echo "exit code $? after $((SECONDS - start)) s"
} >"$OUT/peer-never.txt" 2>&1
want peers && {
  echo "## 2 ranks, -b 8G -e 8G -n 400; rank 1 killed (SIGKILL) after 12 s"
  start=$SECONDS
  # No `timeout` wrapper here: $! must be gpuorch itself (the wrapper script execs it), or the
  # kill only hits `timeout` and gpuorch runs on (what the first recording did).
  for r in 0 1; do
    (exec env RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29535 \
      GPUORCH_PEER_TIMEOUT=30 "${B[@]}" all_reduce -b 8G -e 8G -n 400 -c 0 -g 1 \
      >"$OUT/peer-killed-rank$r.out" 2>&1) &
    eval "pid$r=$!"
  done
  sleep 12
  kill -9 "$pid1"
  wait "$pid0"
  echo "rank 0 exit code $? after $((SECONDS - start)) s (rank 1 killed at 12 s)"
  cat "$OUT/peer-killed-rank0.out"
  rm -f "$OUT/peer-killed-rank0.out" "$OUT/peer-killed-rank1.out"
} >"$OUT/peer-killed.txt" 2>&1

# 6. reference: torch.distributed all_reduce (NCCL, 2 processes) at 1 GiB and 8 GiB, if torch is here
want torch && cat >"$OUT/torch_allreduce.py" <<'PY'
import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl")
r = dist.get_rank(); n = dist.get_world_size()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
for size in (1 << 30, 8 << 30):
    x = torch.ones(size // 4, dtype=torch.float32, device="cuda")
    for _ in range(5): dist.all_reduce(x)
    torch.cuda.synchronize(); dist.barrier(); t = time.perf_counter()
    for _ in range(20): dist.all_reduce(x)
    torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 20
    if r == 0:
        algbw = size / dt / 1e9
        print(f"torch {torch.__version__} nccl {torch.cuda.nccl.version()} all_reduce {size} B: "
              f"{dt*1e6:.0f} us algbw {algbw:.2f} busbw {algbw*2*(n-1)/n:.2f} GB/s")
    del x
dist.destroy_process_group()
PY
if ! want torch; then
  :
elif timeout 20 python3 -c "import torch" 2>/dev/null; then
  timeout 120 torchrun --standalone --nproc-per-node "$G" "$OUT/torch_allreduce.py" >"$OUT/torch.txt" 2>&1
else
  echo "torch is not installed here" >"$OUT/torch.txt"
fi

# 7. nccl-tests on the same sizes, if installed
NT=""
for d in "${NCCL_TESTS:-}" /usr/local/bin /opt/nccl-tests/build /usr/bin "$HOME/nccl-tests/build"; do
  if [ -n "$d" ] && [ -x "$d/all_reduce_perf" ]; then NT="$d"; break; fi
done
if [ -n "$NT" ]; then
  for c in $COLLS; do timeout 100 "$NT/${c}_perf" -b 1G -e 8G -f 8 -g "$G" 2>&1; done >"$OUT/nccl-tests.txt"
else
  echo "nccl-tests is not installed on this host" >"$OUT/nccl-tests.txt"
fi

# 8. summary: out-of-place busbw and #wrong per collective and size
{
  [ -f "$OUT/collectives.txt" ] && awk '/^## gpuorch bench/ {c=$4} /^ +[0-9]+ +[0-9]+ / {printf "%-15s %11s B  busbw %7s GB/s  #wrong %s\n", c, $1, $8, $9}' "$OUT/collectives.txt"
  echo "sweep:"; [ -f "$OUT/sweep.txt" ] && grep -h "Avg bus bandwidth\|Out of bounds" "$OUT/sweep.txt"
  echo "multi-process (rank 0):"; [ -f "$OUT/mp-rank0.txt" ] && awk '/^ +[0-9]+ +[0-9]+ / {printf "all_reduce %11s B  busbw %7s GB/s  #wrong %s\n", $1, $8, $9}' "$OUT/mp-rank0.txt"
  grep -h "verdict" "$OUT/tune.txt" 2>/dev/null
  grep -h "^torch" "$OUT/torch.txt" 2>/dev/null
  echo "total $((SECONDS - t0)) s, status $status"
} >"$OUT/summary.txt"
cat "$OUT/summary.txt"
(cd "$OUT" && tar czf bench-outputs.tar.gz --exclude bench-outputs.tar.gz ./*)
exit $status
