#!/usr/bin/env bash
# gpuorch bench's output on a GPU read by scripts/nccl-tests-log (a parser written from nccl-tests'
# print formats), with nccl-tests flags, on one GPU (docs/nccl-tests.md). NVLink multicast off.
#   bash scripts/hw/nccl-format-check.sh BINARY OUTDIR
# BINARY: the release gpuorch (e.g. from scripts/hw/bundle); OUTDIR: every log, -J document and
# parser verdict, plus summary.txt (one line per run: ok / FAIL and the command). Exit 1 when any
# run fails. NCCL_LIB=/path/libnccl.so.2 overrides the library found by ldconfig.
set -uo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: $0 BINARY OUTDIR" >&2
  exit 2
fi
BIN="$1"
OUT="$2"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PARSER="$HERE/../nccl-tests-log"
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
NCCL_LIB="${NCCL_LIB:-$( (ldconfig -p || /sbin/ldconfig -p) 2>/dev/null | awk '$1 == "libnccl.so.2" && !p {p = $NF} END {print p}')}"
B=("$BIN" bench --nccl-library "${NCCL_LIB:-libnccl.so.2}")
status=0
n=0
: >"$OUT/summary.txt"
note() { echo "$*" | tee -a "$OUT/summary.txt"; }

{
  echo "# $(date -u) $(uname -n) gpuorch $("$BIN" --version 2>&1)"
  echo "# NCCL library: ${NCCL_LIB:-not found}; NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  nvidia-smi -L 2>&1
} >"$OUT/env.txt"

# check NAME TEST EXPECTED_EXIT ARGS...: runs gpuorch bench ARGS, parses its log (and -J file).
check() {
  local name="$1" test="$2" want="$3"
  shift 3
  n=$((n + 1))
  local log="$OUT/$n-$name.log" json="$OUT/$n-$name.json"
  "${B[@]}" "$@" -J "$json" >"$log" 2>"$OUT/$n-$name.err"
  local code=$?
  if [[ $code -ne $want ]]; then
    note "FAIL $n-$name: exit $code, expected $want: gpuorch bench $*"
    status=1
    return
  fi
  if python3 "$PARSER" "$log" --json "$json" --expect-ranks 1 --expect-test "$test" \
      >"$OUT/$n-$name.parsed" 2>&1; then
    note "ok   $n-$name: $(cat "$OUT/$n-$name.parsed"): gpuorch bench $*"
  else
    note "FAIL $n-$name: $(cat "$OUT/$n-$name.parsed"): gpuorch bench $*"
    status=1
  fi
}

check sweep all_reduce_perf 0 all_reduce_perf -b 8 -e 128M -f 2 -g 1
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  check "$c" "${c}_perf" 0 "$c" -b 1K -e 64M -f 8
done
check agg-blocking-nocheck all_reduce_perf 0 all_reduce -b 1M -e 4M -i 1M -m 4 -z 1 -c 0 -w 5 -n 10
check threads-timeout-average reduce_scatter_perf 0 reduce_scatter_perf -t 1 -g 1 -T 60 -a 2 -b 64K -e 1M -f 4
check types-ops all_reduce_perf 0 all_reduce -d double -o max -b 8K -e 8M -f 32
check root broadcast_perf 0 broadcast -r 0 -z 3 -b 1M -e 16M -f 4
# NCCL_TESTS_MIN_BW far above any GPU: the run must say FAILED and exit 1, as nccl-tests.
n=$((n + 1))
NCCL_TESTS_MIN_BW=1000000 "${B[@]}" all_reduce -b 1M -e 1M >"$OUT/$n-min-bw.log" 2>&1
code=$?
if [[ $code -eq 1 ]] && grep -q "^# Avg bus bandwidth    : .* FAILED$" "$OUT/$n-min-bw.log"; then
  note "ok   $n-min-bw: NCCL_TESTS_MIN_BW=1000000 fails the run (exit 1, FAILED)"
else
  note "FAIL $n-min-bw: exit $code with NCCL_TESTS_MIN_BW=1000000"
  status=1
fi
n=$((n + 1))
"${B[@]}" all_reduce -G 1 >"$OUT/$n-graph.log" 2>&1
code=$?
if [[ $code -eq 2 ]]; then
  note "ok   $n-graph: -G 1 refused with exit 2: $(head -1 "$OUT/$n-graph.log")"
else
  note "FAIL $n-graph: -G 1 gave exit $code"
  status=1
fi
exit $status
