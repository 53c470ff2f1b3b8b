#!/usr/bin/env bash
# gpuorch tune nccl's per-setting curves on a GPU host, and doctor pricing a forced NCCL_ALGO /
# NCCL_PROTO from them on a real NCCL log of the same host. Run from the repository root with a
# bundle of the release build carried along (scripts/hw/bundle build/hw/gpuorch-hw.tar.xz
# build/release/gpuorch):
#   OUT=/some/dir bash scripts/hw/tune-settings-on-device.sh
# Files under $OUT: env.txt, tune.txt (the table), tune.json, calibration.json, nccl.env,
# forced.log (NCCL_DEBUG=INFO bench with NCCL_ALGO=Tree NCCL_PROTO=LL), doctor.txt, doctor.json.
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0 for everything.
set -uo pipefail
export NCCL_NVLS_ENABLE=0
OUT="${OUT:?set OUT to the output folder}"
G="${NGPUS:-2}"
mkdir -p "$OUT" /tmp/gpuorch-hw
tar -xJf "${BUNDLE:-build/hw/gpuorch-hw.tar.xz}" -C /tmp/gpuorch-hw || exit 2
GPUORCH=/tmp/gpuorch-hw/gpuorch-hw/bin/gpuorch
"$GPUORCH" --version >/dev/null || exit 2
NCCL_LIB="$( (ldconfig -p || /sbin/ldconfig -p) 2>/dev/null | awk '$1 == "libnccl.so.2" && !p {p = $NF} END {print p}')"
t0=$SECONDS
{
  echo "# $(date -u) $(uname -n) $("$GPUORCH" --version | head -2 | paste -sd " ")"
  echo "# NCCL library: ${NCCL_LIB:-not found}; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  grep -h PRETTY_NAME /etc/os-release
  nvidia-smi --query-gpu=index,name,driver_version --format=csv 2>&1
  nvidia-smi topo -m 2>&1
} >"$OUT/env.txt"
status=0
# 1. every setting (NCCL's choice, each algorithm and protocol alone, each pair), 3 repeats
timeout 420 "$GPUORCH" tune nccl --nccl-library "${NCCL_LIB:-libnccl.so.2}" -b 64K -e 1G -f 4 \
  -g "$G" --repeats 3 --output "$OUT/nccl.env" --calibration "$OUT/calibration.json" \
  >"$OUT/tune.txt" 2>&1 || status=1
echo "# [$((SECONDS - t0)) s] tune done" >&2
# 2. a real NCCL log with both variables forced, as a tuning guide would set them
NCCL_DEBUG=INFO NCCL_ALGO=Tree NCCL_PROTO=LL timeout 120 "$GPUORCH" bench \
  --nccl-library "${NCCL_LIB:-libnccl.so.2}" all_reduce -b 64K -e 1G -f 4 -g "$G" -c 1 \
  >"$OUT/forced.log" 2>&1 || status=1
# 3. doctor reads that log with the calibration measured above
"$GPUORCH" doctor nccl-log "$OUT/forced.log" --calibration "$OUT/calibration.json" \
  >"$OUT/doctor.txt" 2>&1
"$GPUORCH" doctor nccl-log "$OUT/forced.log" --calibration "$OUT/calibration.json" --json \
  >"$OUT/doctor.json" 2>&1
echo "# [$((SECONDS - t0)) s] done, status $status" >&2
exit $status
