#!/usr/bin/env bash
# Long libFuzzer runs on a lent machine with many cores (docs/fuzzing.md). That machine has no clang,
# so the targets are built here (`cmake --preset fuzz && cmake --build --preset fuzz`) and packed with the
# Debian libraries they load; the machine's lease outlives one call, so the fuzzers run detached
# (setsid) across calls and a later call collects them.
#
#   scripts/hw/fuzz-on-device.sh pack                       # here: build/fuzz-dist.tar.xz
#   scripts/hw/fuzz-on-device.sh start SECONDS CPUS [WORKERS]   # there: WORKERS processes per target
#   scripts/hw/fuzz-on-device.sh widen CPUS                 # there: move every fuzzer to CPUS
#   scripts/hw/fuzz-on-device.sh status                     # there: one line per target
#   OUT=DIR scripts/hw/fuzz-on-device.sh collect            # there: wait, then $OUT/fuzz-run.tar.gz
#                                                           #   and $OUT/fuzz-summary.txt
# CPUS is a taskset list (4-15): the fuzzers keep off the cores a GPU job beside them measures.
# Options are scripts/fuzz's: -timeout=10 -rss_limit_mb=2048 -max_len=65536; each worker's CPU
# time (user + system) is recorded with bash's `times`, so "N minutes per target" is measured.
set -uo pipefail
cd "$(dirname "$0")/../.."
work=/tmp/gpuorch-fuzz

pack() {
  [ -d build/fuzz/fuzz ] || { echo "fuzz-on-device: build the targets first (cmake --preset fuzz && cmake --build --preset fuzz)" >&2; exit 2; }
  scripts/hw/bundle build/fuzz-dist.tar.xz build/fuzz/fuzz/fuzz_*
}

start() {
  local seconds=${1:?seconds} cpus=${2:?cpus} workers=${3:-1}
  rm -rf "$work"
  mkdir -p "$work"
  tar -C "$work" -xJf build/fuzz-dist.tar.xz
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export GPUORCH_SOURCE_DIR="$PWD"  # fuzz/sysfs_recording.cpp reads a recording from the checkout
  for bin in "$work"/fuzz-dist/bin/fuzz_*; do
    case $bin in *.bin) continue ;; esac  # the wrappers scripts/hw/bundle writes start these
    local t=${bin##*/fuzz_}
    mkdir -p "$work/corpus/$t" "$work/crashes/$t" "$work/log"
    for w in $(seq 1 "$workers"); do
      setsid taskset -c "$cpus" bash -c "
        '$bin' -max_total_time=$seconds -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
          -print_final_stats=1 -artifact_prefix='$work/crashes/$t/' \
          '$work/corpus/$t' 'fuzz/corpus/$t' > '$work/log/$t.$w.log' 2>&1
        echo \"exit \$?\" >> '$work/log/$t.$w.log'
        times > '$work/log/$t.$w.times'" </dev/null >/dev/null 2>&1 &
    done
  done
  date +%s > "$work/started"
  echo "fuzz-on-device: $(ls "$work"/fuzz-dist/bin | grep -vc '[.]bin$') targets x $workers worker(s), ${seconds}s, CPUs $cpus"
}

widen() {
  local cpus=${1:?cpus}
  for p in $(pgrep -f "$work/fuzz-dist/bin/fuzz_.*[.]bin"); do taskset -a -cp "$cpus" "$p" >/dev/null 2>&1; done
  echo "fuzz-on-device: $(pgrep -fc "$work/fuzz-dist/bin/fuzz_.*[.]bin") fuzzer processes now on CPUs $cpus"
}

# CPU seconds of one `times` file: the second line is the children's "user system" (e.g. 12m3.5s).
cpu_seconds() {
  sed -n 2p "$1" | awk '{
    t = 0
    for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); t += a[1] * 60 + a[2] }
    printf "%.0f", t }'
}

status() {
  for log in "$work"/log/*.log; do
    printf '%s: %s\n' "$(basename "$log" .log)" "$(grep -aE '^#[0-9]+' "$log" | tail -1 | cut -c1-100)"
  done
}

collect() {
  local out=${OUT:?set OUT}
  mkdir -p "$out"
  while pgrep -f "$work/fuzz-dist/bin/fuzz_.*[.]bin" >/dev/null; do sleep 5; done
  {
    echo "# target  workers  cpu_s  executions  corpus_files  corpus_kb  crashes  exits"
    for d in "$work"/corpus/*; do
      local t=${d##*/} cpu=0 execs=0 exits=""
      for times in "$work"/log/"$t".*.times; do cpu=$((cpu + $(cpu_seconds "$times"))); done
      for log in "$work"/log/"$t".*.log; do
        execs=$((execs + $(grep -a '^stat::number_of_executed_units' "$log" | awk '{print $2}' | tail -1 || echo 0)))
        exits+="$(tail -1 "$log" | awk '{print $2}'),"
      done
      printf '%s  %s  %s  %s  %s  %s  %s  %s\n' "$t" "$(ls "$work"/log/"$t".*.times | wc -l)" "$cpu" \
        "$execs" "$(ls "$d" | wc -l)" "$(du -sk "$d" | cut -f1)" "$(ls "$work/crashes/$t" | wc -l)" "${exits%,}"
    done
  } | tee "$out/fuzz-summary.txt"
  tar -C "$work" -czf "$out/fuzz-run.tar.gz" log crashes
  # The grown corpora, to seed the next run (too large for the repository as a whole).
  tar -C "$work" -czf "$out/fuzz-corpora.tar.gz" corpus
  ls -l "$out"
}

case "${1:-}" in
  pack) pack ;;
  start) shift; start "$@" ;;
  widen) shift; widen "$@" ;;
  status) status ;;
  collect) collect ;;
  *) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac
