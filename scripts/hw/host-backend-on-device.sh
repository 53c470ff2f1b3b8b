#!/usr/bin/env bash
# The host (Gloo) backend of `gpuorch bench` on a machine with idle cores, next to PyTorch's own
# Gloo, and gpuorch's store client against the PyTorch release installed there (torchrun's agent
# store). Every output under $OUT/ (flat), packed into $OUT/host-outputs.tar.gz at the end:
#   OUT=/some/dir bash scripts/hw/host-backend-on-device.sh
# Files: env.txt  store-*.txt (two bench ranks against PyTorch's TCPStore server)
#        gpuorch-npN.txt and torch-npN.txt (all_reduce 8 B .. 64 MiB, N = 2 and 4)  errors.txt
set -uo pipefail
OUT="${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
GPUORCH="${GPUORCH:-build/portable/dist/bin/gpuorch}"
PY="${PYTHON:-python3}"
if ! "$GPUORCH" --version >/dev/null 2>&1; then
  echo "host-backend-on-device: $GPUORCH does not run here (scripts/build-portable, carry build/portable/dist)" >&2
  exit 2
fi
status=0
{
  "$GPUORCH" --version
  "$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
  nproc
  uptime
} >"$OUT/env.txt" 2>&1

# 1. PyTorch's TCPStore server (libuv in torch >= 2.4), two gpuorch bench ranks as its clients.
"$PY" tests/fixtures/comm/torch_store_server.py "$OUT/port" 2 120 >"$OUT/store-server.txt" 2>&1 &
server=$!
for _ in $(seq 100); do [ -s "$OUT/port" ] && break; sleep 0.1; done
port=$(cat "$OUT/port" 2>/dev/null)
for coll in all_reduce sendrecv; do
  pids=()
  for r in 1 0; do
    env RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
      TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RUN_ID="interop-$coll" \
      timeout -s KILL 60 "$GPUORCH" bench "$coll" --backend host -b 1K -e 1M -f 32 -n 5 --timeout 20 \
      >"$OUT/store-$coll-rank$r.txt" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  grep -q "Out of bounds values : 0 OK" "$OUT/store-$coll-rank0.txt" ||
    { echo "store interop $coll failed" >>"$OUT/errors.txt"; status=1; }
done
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null

# 2. all_reduce through gpuorch's host backend and through PyTorch's Gloo, same sizes and counts.
for np in 2 4; do
  timeout 300 "$GPUORCH" bench all_reduce --backend host --np "$np" -b 8 -e 64M -f 4 -n 20 -w 5 \
    >"$OUT/gpuorch-np$np.txt" 2>&1 || { echo "gpuorch np=$np exit $?" >>"$OUT/errors.txt"; status=1; }
  timeout 300 "$PY" -m torch.distributed.run --nproc_per_node "$np" --master_port $((29600 + np)) \
    scripts/hw/gloo_allreduce.py 8 67108864 4 20 5 >"$OUT/torch-np$np.txt" 2>&1 ||
    { echo "torch np=$np exit $?" >>"$OUT/errors.txt"; status=1; }
done

# 3. More GPUs asked for than the machine has: one line, exit 2.
n=$(nvidia-smi -L 2>/dev/null | wc -l)
"$GPUORCH" bench all_reduce -g $((n + 1)) -b 8 -e 8 >"$OUT/too-many-gpus.txt" 2>&1
echo "exit $?" >>"$OUT/too-many-gpus.txt"

(cd "$OUT" && tar czf host-outputs.tar.gz --exclude host-outputs.tar.gz -- *)
exit $status
