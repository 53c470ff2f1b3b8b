#!/usr/bin/env bash
# gpuorch doctor on a GPU host (issue 19; docs/doctor.md, "On a GPU host"):
#   1. `gpuorch doctor` (network + numa) on the live host, and `doctor utilisation` with nothing running
#   2. the conv net of scripts/hw/doctor_train.py under `gpuorch launch --bind none`, `--bind cores`
#      and, where the host has 2 NUMA nodes or more, pinned to a node far from its GPU (numactl, or
#      taskset without it), with `gpuorch doctor numa` while each runs
#   3. a data-starved loop (num_workers=0, pin_memory=False, heavy CPU augmentation) and a fed one
#      (num_workers=8, pin_memory=True) with `gpuorch doctor utilisation --seconds 10 --record`
#   4. an NCCL_DEBUG=INFO all_reduce through torch.distributed (one rank per GPU, at most 2) under
#      gpuorch launch, its log read by `gpuorch doctor nccl-log`; the same for `gpuorch bench`
#   5. `gpuorch doctor data` on a generated 2 GiB file (O_DIRECT) and on /dev/shm
# Run from the repository root with the portable build carried (build/portable/dist):
#   OUT=/some/dir bash scripts/hw/doctor-on-device.sh
# Every step runs under `timeout`; its exit code goes to steps.txt and the script goes on. The
# whole run stays under 7 minutes (steps are skipped once BUDGET seconds, default 360, are used).
# The device returns at most 8 files: everything is written to $OUT/run and packed into
# $OUT/doctor-run.tar.gz at the end; summary.txt stays beside it. NCCL_NVLS_ENABLE=0 throughout.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0
final=${OUT:-/tmp/gpuorch-doctor-out}
out=$final/run
rm -rf "$out"
mkdir -p "$out"
G=${GPUORCH:-build/portable/dist/bin/gpuorch}
PY=${PYTHON:-python3}
TRAIN=scripts/hw/doctor_train.py
DATA_DIR=${DATA_DIR:-/var/tmp}
BUDGET=${BUDGET:-360}
t0=$SECONDS

log() { echo "[$((SECONDS - t0)) s] $*" | tee -a "$out/steps.txt"; }
left() { echo $((BUDGET - (SECONDS - t0))); }
# Packs $out into one file whatever happens (a failed step, a kill by the device's limit).
pack() {
  {
    echo "# doctor-on-device $(date -u +%FT%TZ), $((SECONDS - t0)) s"
    cat "$out/steps.txt" 2>/dev/null
    echo
    for f in "$out"/*.txt; do
      case $(basename "$f") in steps.txt | env.txt | *-log.txt) continue ;; esac
      grep -H -E "^(warning|error) |^doctor |^gpuorch: " "$f" 2>/dev/null
    done
  } >"$final/summary.txt"
  tar -czf "$final/doctor-run.tar.gz" -C "$out" . && rm -rf "$out"
}
trap pack EXIT

# step NAME LIMIT CMD...: CMD under `timeout`, stdout and stderr to NAME.txt, exit code logged.
step() {
  local name=$1 limit=$2
  shift 2
  if [ "$(left)" -le 5 ]; then
    log "$name: skipped (time budget used)"
    return 124
  fi
  [ "$limit" -gt "$(left)" ] && limit=$(left)
  timeout -k 5 "$limit" "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  log "$name: exit $rc ($*)"
  return $rc
}

# start_job NAME LIMIT CMD...: CMD in the background (output to NAME-log.txt) until stop_job; waits
# up to 90 s for doctor_train.py's ready file (written after its warm-up steps; holds its pid).
JOB=
start_job() {
  local name=$1 limit=$2 waited=0
  shift 2
  JOB=
  if [ "$(left)" -le 30 ]; then
    log "$name: skipped (time budget used)"
    return 1
  fi
  [ "$limit" -gt "$(left)" ] && limit=$(left)
  rm -f "$out/$name.ready" "$out/$name.stop"
  timeout -k 10 "$limit" "$@" --ready-file "$out/$name.ready" --stop-file "$out/$name.stop" \
    --out "$out/$name-result.json" >"$out/$name-log.txt" 2>&1 &
  JOB=$!
  while [ ! -s "$out/$name.ready" ] && kill -0 "$JOB" 2>/dev/null && [ $waited -lt 90 ]; do
    sleep 1
    waited=$((waited + 1))
  done
  if [ -s "$out/$name.ready" ]; then
    log "$name: ready after $waited s, pid $(cat "$out/$name.ready") ($*)"
    return 0
  fi
  log "$name: not ready after $waited s ($*); last lines: $(tail -3 "$out/$name-log.txt" | tr '\n' ' ')"
  return 1
}
# stop_job NAME: the stop file, 30 s to act on it, then SIGTERM (timeout passes it on).
stop_job() {
  local name=$1 waited=0
  [ -n "$JOB" ] || return 0
  touch "$out/$name.stop"
  while kill -0 "$JOB" 2>/dev/null && [ $waited -lt 30 ]; do
    sleep 1
    waited=$((waited + 1))
  done
  kill -0 "$JOB" 2>/dev/null && kill -TERM "$JOB" && log "$name: still running 30 s after its stop file, SIGTERM"
  wait "$JOB"
  log "$name: job exit $?"
  JOB=
}
# What the kernel says about the training process: its CPUs, memory nodes, pages per node.
proc_facts() {
  local name=$1 pid
  pid=$(cat "$out/$name.ready" 2>/dev/null) || return 0
  {
    grep -E "Cpus_allowed_list|Mems_allowed_list" "/proc/$pid/status"
    awk '{for (i = 3; i <= NF; i++) if ($i ~ /^N[0-9]+=/) {split($i, a, "="); n[a[1]] += a[2]}}
         END {for (k in n) printf "%s=%d pages\n", k, n[k]}' "/proc/$pid/numa_maps"
  } >"$out/$name-proc.txt" 2>&1
}

# 0. the host
{
  echo "date: $(date -u +%FT%TZ)  host: $(uname -n)  kernel: $(uname -r)"
  "$G" --version
  nvidia-smi 2>&1
  nvidia-smi topo -m 2>&1
  lscpu 2>&1 | grep -E "^(CPU\(s\)|NUMA|Model name)"
  timeout 60 "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())' 2>&1
  command -v numactl taskset
  df -T "$DATA_DIR" /dev/shm 2>&1
} >"$out/env.txt" 2>&1
if ! "$G" --version >/dev/null 2>&1; then
  log "preflight: $G does not run here (build it with scripts/build-portable and carry build/portable/dist)"
fi
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
log "preflight: $NGPU GPU(s); $(nproc) CPUs"

# 1. the host checks, and utilisation with nothing running (every GPU util.idle)
step doctor 60 "$G" doctor
step doctor-json 60 "$G" doctor --json
step util-idle 30 "$G" doctor utilisation --seconds 3 --record "$out/util-idle.json"

# 2. NUMA: the GPU's node and one far from it
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 2>/dev/null | tr 'A-F' 'a-f')
bus=${bus#0000}  # NVML's 8-digit PCI domain, sysfs's 4
gnode=$(cat "/sys/bus/pci/devices/$bus/numa_node" 2>/dev/null || echo -1)
[ "$gnode" -lt 0 ] 2>/dev/null && gnode=0
far=
for n in /sys/devices/system/node/node[0-9]*; do
  [ -d "$n" ] || continue
  id=${n##*node}
  if [ "$id" != "$gnode" ] && [ -z "$far" ]; then far=$id; fi
done
log "numa: GPU0 at $bus on node $gnode; nodes: $(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l); far node: ${far:-none}"
COMPUTE=("$PY" "$TRAIN" --mode compute --max-seconds 120)
numa_case() {
  local name=$1
  shift
  if start_job "$name" 150 "$G" launch --standalone --nproc-per-node 1 "$@"; then
    proc_facts "$name"
    step "$name-doctor" 60 "$G" doctor numa
    step "$name-doctor-json" 60 "$G" doctor numa --json
  fi
  stop_job "$name"
}
numa_case numa-bind-none --bind none -- "${COMPUTE[@]}"
numa_case numa-bind-cores --bind cores -- "${COMPUTE[@]}"
if [ -n "$far" ]; then
  if command -v numactl >/dev/null; then
    numa_case numa-far --bind none -- numactl --cpunodebind="$far" --membind="$far" "${COMPUTE[@]}"
  else
    numa_case numa-far --bind none -- taskset -c "$(cat "/sys/devices/system/node/node$far/cpulist")" "${COMPUTE[@]}"
  fi
else
  log "numa-far: skipped, this host has one NUMA node (no far node to pin to)"
fi

# 3. utilisation: starved vs fed
for mode in starved fed; do
  if start_job "util-$mode" 150 "$PY" "$TRAIN" --mode "$mode" --max-seconds 120; then
    step "util-$mode-doctor" 40 "$G" doctor utilisation --seconds 10 --record "$out/util-$mode.json"
    step "util-$mode-replay-json" 20 "$G" doctor utilisation --json --replay "$out/util-$mode.json"
  fi
  stop_job "util-$mode"
done

# 4. NCCL_DEBUG=INFO: torch.distributed all_reduce, one rank per GPU (at most 2), then gpuorch bench
NR=$((NGPU >= 2 ? 2 : 1))
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,NET,P2P,SHM \
  step nccl-torch-log 120 "$G" launch --standalone --nproc-per-node "$NR" --bind cores -- \
  "$PY" "$TRAIN" --mode allreduce --out "$out/nccl-torch-result.json"
step nccl-torch-doctor 30 "$G" doctor nccl-log "$out/nccl-torch-log.txt"
NCCL_DEBUG=INFO step nccl-bench-log 90 "$G" bench all_reduce -b 8 -e 64M -f 8 -g "$NR"
step nccl-bench-doctor 30 "$G" doctor nccl-log "$out/nccl-bench-log.txt"

# 5. data: a 2 GiB file on disk, read with O_DIRECT against a feasible and an absurd need; /dev/shm
data=$DATA_DIR/gpuorch-doctor-data.bin
step data-make 60 dd if=/dev/urandom of="$data" bs=1M count=2048 conv=fsync
step data-ok 30 "$G" doctor data "$data" --samples-per-second 3000 --sample-bytes 110K --gpus "$((NGPU > 0 ? NGPU : 1))" --seconds 10
step data-absurd 30 "$G" doctor data "$data" --samples-per-second 1000000 --sample-bytes 1G --seconds 5
step data-threads32 30 "$G" doctor data "$data" --threads 32 --seconds 5 --json
rm -f "$data"
step data-shm-make 30 dd if=/dev/zero of=/dev/shm/gpuorch-doctor-data.bin bs=1M count=256
step data-shm 30 "$G" doctor data /dev/shm/gpuorch-doctor-data.bin --seconds 3
rm -f /dev/shm/gpuorch-doctor-data.bin
log "done"
