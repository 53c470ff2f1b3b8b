#!/usr/bin/env bash
# Runs gpuorch's topology and telemetry checks on a GPU host and writes every output under $OUT/
# (8 files, flat). Run from the repository root:
#   OUT=/some/dir bash scripts/hw/topo-on-device.sh
# The host needs a driver (nvidia-smi, libnvidia-ml.so.1), python3 and, for the load, PyTorch.
# It uses the portable build made on a Debian 12 machine with scripts/build-portable
# (build/portable/dist: bin/gpuorch + lib/), because GPU hosts rarely have hwloc, cpp-httplib,
# fmt, yaml-cpp or CLI11 development packages to build from source.
#
# Files: topo.txt  topo.json  labels.txt  nvidia-smi-topo.txt  compare.txt  dmon.txt
#        metrics.txt  record.tar.gz (a `topo --record` of this host: the real fixture (d))
set -uo pipefail
export NCCL_NVLS_ENABLE=0
OUT="${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
GPUORCH="${GPUORCH:-build/portable/dist/bin/gpuorch}"
if ! "$GPUORCH" --version >/dev/null 2>&1; then
  echo "topo-on-device: $GPUORCH does not run here; build it with scripts/build-portable and carry build/portable/dist" >&2
  ldd "$GPUORCH" 2>&1 | grep -i "not found" >&2
  exit 2
fi
PORT="${PORT:-9401}"
status=0

# 1-3. topology, JSON, labels and node spec
"$GPUORCH" topo >"$OUT/topo.txt" 2>&1 || status=1
"$GPUORCH" topo --json >"$OUT/topo.json" 2>>"$OUT/topo.txt" || status=1
{ "$GPUORCH" topo --labels; echo; "$GPUORCH" topo --node-spec; } >"$OUT/labels.txt" 2>&1 || status=1

# 4-5. nvidia-smi's matrix and the comparison
nvidia-smi topo -m >"$OUT/nvidia-smi-topo.txt" 2>&1 || status=1
{
  echo "# $("$GPUORCH" --version | head -2 | paste -sd " ") vs $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
  python3 scripts/hw/compare_topo.py "$OUT/topo.txt" "$OUT/nvidia-smi-topo.txt"
} >"$OUT/compare.txt" 2>&1 || status=1

# 6. dmon while a matmul loop loads GPU 0: idle samples, ~15 s of load (after PyTorch's start-up),
#    then idle again
"$GPUORCH" dmon --interval 1 --count 36 >"$OUT/dmon.txt" 2>&1 &
dmon_pid=$!
dmon_start=$(date +%H:%M:%S)
sleep 3
python3 - >"$OUT/.load.log" 2>&1 <<'PY'
import time, torch
print(f"load: starting at {time.strftime('%H:%M:%S')}")
a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.float16)
b = torch.randn(8192, 8192, device="cuda:0", dtype=torch.float16)
end, n = time.time() + 15, 0
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
print(f"load: ended at {time.strftime('%H:%M:%S')}: {n} fp16 8192^3 matmuls on cuda:0 in 15 s ({n * 2 * 8192**3 / 15 / 1e12:.0f} TFLOP/s)")
PY
wait "$dmon_pid" || status=1
{ echo; echo "# dmon started at $dmon_start; one row per GPU per second"; cat "$OUT/.load.log"; } >>"$OUT/dmon.txt"
rm -f "$OUT/.load.log"

# 7. exporter: one scrape kept, health, and 8 concurrent curl loops x 100 scrapes timed
"$GPUORCH" exporter --listen "127.0.0.1:$PORT" --interval 1 --duration 40 >"$OUT/.exporter.log" 2>&1 &
exp_pid=$!
sleep 3
{
  curl -sS "http://127.0.0.1:$PORT/metrics"
  echo "# /healthz: $(curl -sS -w ' (HTTP %{http_code})' "http://127.0.0.1:$PORT/healthz")"
  seq 8 | xargs -P8 -I{} sh -c "for i in \$(seq 100); do curl -s -o /dev/null -w '%{http_code} %{time_total}\n' http://127.0.0.1:$PORT/metrics; done" \
    | sort -k2 -n | awk '{n++; if ($1 != 200) e++; t[n]=$2} END {printf "# 8 clients x 100 curl scrapes: %d requests, %d errors, p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", n, e, t[int(n*0.5)]*1000, t[int(n*0.99)]*1000, t[n]*1000}'
  echo "# exporter log:"; cat "$OUT/.exporter.log"
} >"$OUT/metrics.txt" 2>&1 || status=1
kill "$exp_pid" 2>/dev/null; wait "$exp_pid" 2>/dev/null
rm -f "$OUT/.exporter.log"

# 8. a recording of this host, replayable anywhere with `gpuorch topo --sysfs-root`
rec=$(mktemp -d)
if "$GPUORCH" topo --record "$rec/h200-vm" >/dev/null 2>&1; then
  tar -czf "$OUT/record.tar.gz" -C "$rec" h200-vm
fi
rm -rf "$rec"

tail -n 3 "$OUT/compare.txt"
grep -E "^ +0 " "$OUT/dmon.txt" | awk '{print "dmon GPU0 sm%=" $4}' | tr '\n' ' '; echo
grep -c '^DCGM_FI_DEV_GPU_UTIL{' "$OUT/metrics.txt" | sed 's/^/DCGM_FI_DEV_GPU_UTIL series: /'
grep '^# 8 clients' "$OUT/metrics.txt"
ls -la "$OUT"
exit $status
