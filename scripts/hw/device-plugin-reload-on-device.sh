#!/usr/bin/env bash
# gpuorch device-plugin's NVIDIA compatibility on a GPU machine (docs/device-plugin.md, "Compared
# with NVIDIA's k8s-device-plugin"): every config of tests/fixtures/nvidia-plugin-configs dry-run
# against the real GPUs, NVIDIA's flags and variables with live discovery, --fail-on-init-error=false
# staying up, and a SIGHUP reload (time-slicing replicas 2 -> 4, then a broken config) with
# `gpuorch kubelet-harness` as the kubelet.
#   scripts/hw/device-plugin-reload-on-device.sh /path/to/gpuorch OUTDIR
# Run from the checkout's root (the fixtures are read from tests/fixtures). GPUORCH_DP_ARGS adds
# arguments to every device-plugin run (a local try: "--topology tests/fixtures/topo/t4x2/...").
set -uo pipefail
read -r -a extra <<<"${GPUORCH_DP_ARGS:-}"
bin=${1:?usage: $0 GPUORCH_BINARY OUTDIR}
out=${2:?usage: $0 GPUORCH_BINARY OUTDIR}
mkdir -p "$out"
log() { echo "== $*" | tee -a "$out/steps.txt"; }

{ date -u; uname -a; nvidia-smi -L; } >"$out/host.txt" 2>&1

# "nvidia.com/gpu=8,...": what a dry run's JSON advertises ("-" when it is no JSON).
advertised() {
  python3 - "$1" <<'PY'
import json, sys
try:
    print(",".join("%s=%d" % (r["resource"], len(r["devices"])) for r in json.load(open(sys.argv[1]))))
except Exception:
    print("-")
PY
}

# 1. NVIDIA's example and test configs on this host: exit code and what would be advertised.
for f in tests/fixtures/nvidia-plugin-configs/*.yaml; do
  name=$(basename "$f" .yaml)
  "$bin" device-plugin "${extra[@]}" --config-file "$f" --dry-run >"$out/fixture-$name.json" \
    2>"$out/fixture-$name.stderr"
  rc=$?
  verdict=$(sed -n 's/^# nvidia: //p' "$f")
  echo "$name nvidia=$verdict gpuorch_exit=$rc $(advertised "$out/fixture-$name.json")" \
    >>"$out/fixtures.txt"
done
log "fixtures: $(grep -c . "$out/fixtures.txt") configs (fixtures.txt)"

# 2. Flags and variables with live discovery.
MIG_STRATEGY=mixed PASS_DEVICE_SPECS=true GDRCOPY_ENABLED=1 "$bin" device-plugin "${extra[@]}" --dry-run \
  --fail-on-init-error=false --mps-root /run/nvidia/mps --nvidia-ctk-path /usr/bin/nvidia-ctk \
  --device-discovery-strategy nvml >"$out/flags.json" 2>"$out/flags.stderr"
log "flags and variables: exit $?"

# 3. --fail-on-init-error=false with nothing to serve (no AMD GPU here): up and idle.
dir=$(mktemp -d /tmp/gpuorch-dp-XXXXXX)
"$bin" device-plugin "${extra[@]}" --vendor amd --fail-on-init-error=false --device-plugin-path "$dir/" \
  >"$out/idle.log" 2>&1 &
ppid=$!
sleep 2
if kill -0 "$ppid" 2>/dev/null; then log "idle: running after 2 s"; else log "idle: EXITED"; fi
kill -TERM "$ppid"
wait "$ppid"
log "idle: exit $? after SIGTERM"
rm -rf "$dir"

# 4. SIGHUP: replicas 2 -> 4 seen by the kubelet as a second registration; a broken config keeps
#    the running one.
dir=$(mktemp -d /tmp/gpuorch-dp-XXXXXX)
cfg=$out/reload.yaml
printf 'version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n' >"$cfg"
"$bin" kubelet-harness --dir "$dir" --registrations 2 --size 1 --timeout-s 60 \
  >"$out/reload.harness.json" 2>"$out/reload.harness.log" &
hpid=$!
sleep 0.5
"$bin" device-plugin "${extra[@]}" --device-plugin-path "$dir/" --config-file "$cfg" >"$out/reload.plugin.log" 2>&1 &
ppid=$!
sleep 3
cp "$cfg" "$out/reload-before.yaml"
sed -i 's/replicas: 2/replicas: 4/' "$cfg"
kill -HUP "$ppid"
wait "$hpid"
log "reload: harness exit $? (2 registrations expected)"
sed -i 's/replicas: 4/replicas: 1/' "$cfg"
kill -HUP "$ppid"
sleep 2
if kill -0 "$ppid" 2>/dev/null; then log "reload: running after a broken config"; else log "reload: EXITED"; fi
kill -TERM "$ppid"
wait "$ppid"
log "reload: plugin exit $? after SIGTERM"
rm -rf "$dir"
python3 - "$out/reload.harness.json" <<'PY' | tee -a "$out/steps.txt"
import json, sys
j = json.load(open(sys.argv[1]))
for r in j["resources"]:
    print("registration", r["resource"], "devices", len(r["list_and_watch"]["devices"]))
PY
log done
