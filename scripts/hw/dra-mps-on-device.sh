#!/usr/bin/env bash
# gpuorch dra-driver's sharing on a GPU machine (docs/dra.md, "Sharing a GPU"): the code path the
# kubelet's NodePrepareResources runs, through `dra-driver --prepare-file` on claims allocated
# GPU 0 of this host: an MPS claim (the real nvidia-cuda-mps-control starts, its default active
# thread percentage reads back, a CUDA process in the claim's CDI edits, i.e. the pipe folder and
# /dev/shm mounted as a container would get them, runs through it), Prepare again (no second
# daemon), Unprepare (the daemon quits, the folders go, the compute mode returns to Default); then
# a TimeSlicing claim (nvidia-smi compute-policy). Run from the repository root with a bundle of
# the release build (scripts/hw/bundle build/hw/gpuorch-hw.tar.xz build/release/gpuorch):
#   OUT=/some/dir bash scripts/hw/dra-mps-on-device.sh
# Files under $OUT: run.txt (every step, its command and output), cdi-mps.json, checkpoint-mps.json,
# mps-control.log (the daemon's own log), cdi-timeslice.json. docs/hardware/h200-dra-mps has a run.
set -uo pipefail
OUT="${OUT:?set OUT to the output folder}"
mkdir -p "$OUT" /tmp/gpuorch-hw
tar -xJf "${BUNDLE:-build/hw/gpuorch-hw.tar.xz}" -C /tmp/gpuorch-hw || exit 2
bin=/tmp/gpuorch-hw/gpuorch-hw/bin/gpuorch
work=/tmp/dra-mps
rm -rf "$work"
mkdir -p "$work/cdi" /tmp/nvidia-mps
log="$OUT/run.txt"
step() {
  echo "\$ $*" >>"$log"
  "$@" >>"$log" 2>&1
  echo "[exit $?]" >>"$log"
}
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0)
mps_uid=9a1f0c2e-0000-4a5b-8c6d-000000000001
ts_uid=9a1f0c2e-0000-4a5b-8c6d-000000000002
claim() { # uid name parameters
  cat <<EOF
{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
 "metadata": {"namespace": "default", "name": "$2", "uid": "$1"},
 "status": {"allocation": {"devices": {
   "results": [{"request": "gpu", "driver": "gpu.gpuorch.io", "pool": "h200-node", "device": "gpu-0"}],
   "config": [{"source": "FromClaim", "requests": ["gpu"],
               "opaque": {"driver": "gpu.gpuorch.io", "parameters": $3}}]}}}}
EOF
}
claim "$mps_uid" shared-mps '{"apiVersion": "gpu.gpuorch.io/v1beta1", "kind": "GpuConfig",
  "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 40,
  "defaultPinnedDeviceMemoryLimit": "8Gi"}}}' >"$work/mps-claim.json"
claim "$ts_uid" shared-ts '{"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
  "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}}' \
  >"$work/ts-claim.json"
driver=("$bin" dra-driver --node-name h200-node --plugin-dir "$work/plugin" --cdi-dir "$work/cdi")
pipe="$work/plugin/mps/$mps_uid/pipe"
shm="$work/plugin/mps/$mps_uid/shm"
mps_ask() { echo "$1" | CUDA_MPS_PIPE_DIRECTORY="$pipe" timeout 20 nvidia-cuda-mps-control; }

{ date -u; uname -r; "$bin" --version; nvidia-smi -L; } >>"$log" 2>&1
echo "== MPS claim: Prepare" >>"$log"
step nvidia-smi --query-gpu=compute_mode --format=csv
step "${driver[@]}" --prepare-file "$work/mps-claim.json"
cp "$work/cdi/gpu.gpuorch.io-claim_$mps_uid.json" "$OUT/cdi-mps.json"
cp "$work/plugin/checkpoint.json" "$OUT/checkpoint-mps.json"
step nvidia-smi --query-gpu=compute_mode --format=csv
step pgrep -a nvidia-cuda-mps
step mps_ask get_default_active_thread_percentage
echo "== a CUDA process with the claim's CDI edits (pipe folder at /tmp/nvidia-mps, /dev/shm)" >>"$log"
cat >"$work/client.py" <<'EOF'
import os, time, torch
x = torch.ones(1 << 24, device="cuda")
p = torch.cuda.get_device_properties(0)
print("device", p.name, "multiProcessorCount", p.multi_processor_count, "sum", float(x.sum()),
      "CUDA_MPS_PIPE_DIRECTORY", os.environ.get("CUDA_MPS_PIPE_DIRECTORY"), flush=True)
open("/tmp/dra-mps/client.ready", "w").close()
for _ in range(600):
    if os.path.exists("/tmp/dra-mps/client.done"):
        break
    time.sleep(0.1)
EOF
if command -v unshare >/dev/null; then
  unshare -m sh -c "mount --bind '$pipe' /tmp/nvidia-mps && mount --bind '$shm' /dev/shm &&
    CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps exec python3 '$work/client.py'" >>"$log" 2>&1 &
else
  echo "(no unshare here: the client runs in the host's mount namespace)" >>"$log"
  CUDA_MPS_PIPE_DIRECTORY="$pipe" python3 "$work/client.py" >>"$log" 2>&1 &
fi
client=$!
for _ in $(seq 1 900); do
  [ -e "$work/client.ready" ] && break
  kill -0 $client 2>/dev/null || break
  sleep 0.1
done
step nvidia-smi
step mps_ask get_server_list
touch "$work/client.done"
wait $client
echo "[client exit $?]" >>"$log"
echo "== Prepare again (the kubelet's retry): no second daemon" >>"$log"
step "${driver[@]}" --prepare-file "$work/mps-claim.json"
step pgrep -c -f "nvidia-cuda-mps-control -f"
# -d logs to control.log; -f (what the driver runs) to its standard output, the driver's start.out.
cat "$work/plugin/mps/$mps_uid/log/control.log" "$work/plugin/mps/$mps_uid/log/start.out" \
  >"$OUT/mps-control.log" 2>/dev/null
echo "== Unprepare" >>"$log"
step "${driver[@]}" --unprepare-file "$work/mps-claim.json"
step pgrep -a nvidia-cuda-mps
step ls "$work/plugin/mps"
step nvidia-smi --query-gpu=compute_mode --format=csv
step mps_ask get_server_list
echo "== TimeSlicing claim (NVIDIA's apiVersion), interval Long" >>"$log"
step nvidia-smi compute-policy -l
step "${driver[@]}" --prepare-file "$work/ts-claim.json"
cp "$work/cdi/gpu.gpuorch.io-claim_$ts_uid.json" "$OUT/cdi-timeslice.json" 2>/dev/null
step nvidia-smi compute-policy -l
step "${driver[@]}" --unprepare-file "$work/ts-claim.json"
step nvidia-smi compute-policy -l
echo "== a bad GpuConfig: one line, exit 2" >>"$log"
claim 9a1f0c2e-0000-4a5b-8c6d-000000000003 bad '{"apiVersion": "gpu.gpuorch.io/v1beta1",
  "kind": "GpuConfig", "sharing": {"strategy": "MPS", "mpsConfig":
  {"defaultActiveThreadPercentage": 150}}}' >"$work/bad-claim.json"
step "${driver[@]}" --prepare-file "$work/bad-claim.json"
# Whatever happened above, leave the GPU as it was found.
echo quit | CUDA_MPS_PIPE_DIRECTORY="$pipe" timeout 10 nvidia-cuda-mps-control >/dev/null 2>&1
nvidia-smi -i "$uuid" -c DEFAULT >/dev/null 2>&1
nvidia-smi compute-policy -i "$uuid" --set-timeslice 0 >/dev/null 2>&1
exit 0
