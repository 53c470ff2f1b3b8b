#!/usr/bin/env bash
# gpuorch device-plugin on a GPU machine against the real NVML, with `gpuorch kubelet-harness` as
# the kubelet in a temporary device plugin directory (docs/device-plugin.md). Everything it sees
# goes under $OUT (copied to docs/hardware/h200-x2-device-plugin/ afterwards).
#   OUT=/tmp/out scripts/hw/device-plugin-on-device.sh
# Uses the portable build (scripts/build-portable -> build/portable/dist; GPUORCH_DIST=DIR for
# another copy of it).
set -uo pipefail
cd "$(dirname "$0")/../.."
# The lent machine returns only a few files per call: everything is written to $OUT/run and packed
# into one $OUT/device-plugin-run.tar.gz at the end (steps.txt stays beside it).
final=${OUT:-/tmp/gpuorch-device-plugin-out}
out=$final/run
mkdir -p "$out"
bin=${GPUORCH_DIST:-build/portable/dist}/bin/gpuorch
log() { echo "== $*" | tee -a "$out/steps.txt"; }

{ date -u; uname -a; nvidia-smi -L; } >"$out/host.txt" 2>&1
nvidia-smi topo -m >"$out/nvidia-smi-topo.txt" 2>&1
nvidia-smi --query-gpu=index,uuid,pci.bus_id,memory.total,mig.mode.current --format=csv \
  >"$out/nvidia-smi-query.csv" 2>&1
for a in /sys/bus/pci/devices/*; do
  [ "$(cat "$a/vendor" 2>/dev/null)" = 0x10de ] && [ "$(cat "$a/class")" = 0x030200 ] &&
    echo "$(basename "$a") numa_node=$(cat "$a/numa_node")"
done >"$out/sysfs-numa.txt"
"$bin" topo --json >"$out/topo.json" 2>"$out/topo.stderr"

# One round: the harness serves kubelet.sock, the plugin registers, the harness lists, asks for
# a preferred allocation of --size devices, allocates them and exits; then SIGTERM to the plugin.
round() {
  local name=$1 size=$2 first=$3
  shift 3
  local dir
  dir=$(mktemp -d /tmp/gpuorch-dp-XXXXXX)
  log "round $name: plugin $* (harness size $size, $first first)"
  if [ "$first" = plugin ]; then
    "$bin" device-plugin --device-plugin-path "$dir/" "$@" >"$out/$name.plugin.log" 2>&1 &
    local ppid=$!
    sleep 2  # the kubelet is not there yet: the plugin says so and retries
    "$bin" kubelet-harness --dir "$dir" --size "$size" --timeout-s 30 \
      >"$out/$name.harness.json" 2>"$out/$name.harness.log"
  else
    "$bin" kubelet-harness --dir "$dir" --size "$size" --timeout-s 30 \
      >"$out/$name.harness.json" 2>"$out/$name.harness.log" &
    local hpid=$!
    sleep 0.5
    "$bin" device-plugin --device-plugin-path "$dir/" "$@" >"$out/$name.plugin.log" 2>&1 &
    local ppid=$!
    wait "$hpid"
  fi
  log "round $name: harness exit $?"
  local t0 t1
  t0=$(date +%s.%N)
  kill -TERM "$ppid"
  wait "$ppid"
  local rc=$?
  t1=$(date +%s.%N)
  log "round $name: plugin exit $rc after SIGTERM in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}') s"
  ls -la "$dir" >"$out/$name.dir-after-stop.txt"
  rm -rf "$dir"
}

"$bin" device-plugin --dry-run >"$out/dry-run.json" 2>"$out/dry-run.log"
log "dry run exit $?"
round plain 2 harness
printf 'sharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n' \
  >"$out/time-slicing.yaml"
round time-slicing 2 harness --config-file "$out/time-slicing.yaml" --device-id-strategy index
round late-kubelet 1 plugin --device-list-strategy volume-mounts
printf 'sharing:\n  mps:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n' >"$out/mps.yaml"
round mps 1 harness --config-file "$out/mps.yaml"
log done
cp "$out/steps.txt" "$final/steps.txt"
tar -czf "$final/device-plugin-run.tar.gz" -C "$out" . && rm -rf "$out"
