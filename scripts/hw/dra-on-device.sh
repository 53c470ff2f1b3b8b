#!/usr/bin/env bash
# gpuorch dra-driver on a GPU machine: the ResourceSlice it would publish for the live host
# (hwloc, sysfs, NVML through dlopen) next to what nvidia-smi says, so the attributes can be checked
# against the hardware (docs/dra.md). Run from the repository root with a bundle of the release
# build (scripts/hw/bundle build/hw/gpuorch-hw.tar.xz build/release/gpuorch):
#   OUT=/some/dir bash scripts/hw/dra-on-device.sh
# Files under $OUT: host.txt, nvidia-smi-query.csv, nvidia-smi-topo.txt, sysfs-numa.txt,
# topo.json, slice.json (dra-driver --dry-run), slice.stderr, dev.txt (the device nodes a CDI spec
# would name).
set -uo pipefail
OUT="${OUT:?set OUT to the output folder}"
mkdir -p "$OUT" /tmp/gpuorch-hw
tar -xJf "${BUNDLE:-build/hw/gpuorch-hw.tar.xz}" -C /tmp/gpuorch-hw || exit 2
bin=/tmp/gpuorch-hw/gpuorch-hw/bin/gpuorch
{ date -u; uname -a; "$bin" --version; nvidia-smi -L; } >"$OUT/host.txt" 2>&1
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,driver_version,compute_cap \
  --format=csv >"$OUT/nvidia-smi-query.csv" 2>&1
nvidia-smi topo -m >"$OUT/nvidia-smi-topo.txt" 2>&1
for a in /sys/bus/pci/devices/*; do
  [ "$(cat "$a/vendor" 2>/dev/null)" = 0x10de ] && [ "$(cat "$a/class")" = 0x030200 ] &&
    echo "$(basename "$a") numa_node=$(cat "$a/numa_node")"
done >"$OUT/sysfs-numa.txt"
ls -l /dev/nvidia* >"$OUT/dev.txt" 2>&1
"$bin" topo --json >"$OUT/topo.json" 2>"$OUT/topo.stderr"
status=0
"$bin" dra-driver --dry-run --node-name h200-node >"$OUT/slice.json" 2>"$OUT/slice.stderr" ||
  status=1
echo "dra-driver --dry-run exit $status" >>"$OUT/host.txt"
exit $status
