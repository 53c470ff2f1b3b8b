#!/usr/bin/env bash
# gpuorch exporter next to nvidia-smi on a GPU host, and NVIDIA's Grafana dashboard's queries
# against its scrape (docs/telemetry.md, "On the H200").
#
#   bash scripts/hw/exporter-vs-smi.sh BINARY OUTDIR
#
# BINARY: the gpuorch program (scripts/hw/bundle's DIR/bin/gpuorch). OUTDIR gets (flat):
#   metrics_idle.txt  a scrape before any load (GPM ratios need two readings: taken after 3 s)
#   metrics_load.txt  a scrape ~12 s into a bf16 matmul load on every GPU
#   smi_load.csv      nvidia-smi --query-gpu right after that scrape (and remapped rows)
#   compare.tsv       metric, gpu, ours, nvidia-smi, tolerance, within (yes/no)
#   dashboard.tsv     each PromQL query of grafana/dcgm-exporter-dashboard.json, its metric,
#                     series found in the load scrape (with a gpu label), found (yes/no)
#   run.log           the exporter's log, /health and /healthz answers, the load's log
# Needs python3 and nvidia-smi; PyTorch for the load (without it the load is skipped and said so).
set -uo pipefail
BIN="${1:?usage: exporter-vs-smi.sh BINARY OUTDIR}"
OUT="${2:?usage: exporter-vs-smi.sh BINARY OUTDIR}"
mkdir -p "$OUT"
PORT="${PORT:-9400}"
HERE="$(cd "$(dirname "$0")" && pwd)"
status=0

"$BIN" exporter -a "127.0.0.1:$PORT" -c 1000 --duration 60 >"$OUT/.exporter.log" 2>&1 &
exp_pid=$!
sleep 3
curl -sS "http://127.0.0.1:$PORT/metrics" >"$OUT/metrics_idle.txt" || status=1

# A bf16 matmul loop on every GPU for 20 s (tensor cores busy), started in the background.
python3 - >"$OUT/.load.log" 2>&1 <<'PY' &
import threading, time
try:
    import torch
except ImportError:
    print("load: no PyTorch here; the load scrape is an idle one"); raise SystemExit(0)
def run(dev):
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    end, n = time.time() + 20, 0
    while time.time() < end:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize(dev)
        n += 20
    print(f"load: {dev}: {n} bf16 8192^3 matmuls in 20 s ({n * 2 * 8192**3 / 20 / 1e12:.0f} TFLOP/s)")
print(f"load: starting at {time.strftime('%H:%M:%S')} on {torch.cuda.device_count()} GPU(s)")
ts = [threading.Thread(target=run, args=(f"cuda:{i}",)) for i in range(torch.cuda.device_count())]
[t.start() for t in ts]; [t.join() for t in ts]
PY
load_pid=$!
sleep 12
curl -sS "http://127.0.0.1:$PORT/metrics" >"$OUT/metrics_load.txt" || status=1
nvidia-smi --query-gpu=index,uuid,driver_version,temperature.gpu,temperature.memory,power.draw,clocks.sm,clocks.mem,utilization.gpu,utilization.memory,utilization.encoder,utilization.decoder,memory.used,memory.free,memory.reserved \
  --format=csv,noheader,nounits >"$OUT/smi_load.csv" 2>&1 || status=1
nvidia-smi --query-remapped-rows=gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.failure \
  --format=csv,noheader,nounits >"$OUT/.smi_rows.csv" 2>&1
wait "$load_pid"
{
  echo "# /health: $(curl -sS -w ' (HTTP %{http_code})' "http://127.0.0.1:$PORT/health")"
  echo "# /healthz: $(curl -sS -w ' (HTTP %{http_code})' "http://127.0.0.1:$PORT/healthz")"
} >"$OUT/run.log" 2>&1
kill "$exp_pid" 2>/dev/null; wait "$exp_pid" 2>/dev/null
{ echo "# exporter log:"; cat "$OUT/.exporter.log"; echo "# load log:"; cat "$OUT/.load.log"; \
  echo "# nvidia-smi remapped rows:"; cat "$OUT/.smi_rows.csv"; } >>"$OUT/run.log"
rm -f "$OUT/.exporter.log" "$OUT/.load.log"

python3 "$HERE/exporter_vs_smi.py" "$OUT/metrics_idle.txt" "$OUT/metrics_load.txt" \
  "$OUT/smi_load.csv" "$OUT/.smi_rows.csv" "$OUT/compare.tsv" "$OUT/dashboard.tsv" || status=1
rm -f "$OUT/.smi_rows.csv"
cat "$OUT/compare.tsv" "$OUT/dashboard.tsv"
cat "$OUT/run.log" | head -20
exit $status
