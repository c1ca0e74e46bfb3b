#!/usr/bin/env bash
# The libFuzzer targets of tests/fuzz (`make fuzz`; .ci/run runs them for a bounded time).
#   scripts/fuzz.sh [--time SECONDS] [--jobs N] [--seeds] [TARGET...]
# Builds build-fuzz (clang, ASan + UBSan, the parsing libraries instrumented for coverage:
# scripts/clang_asan.sh; installs clang and libclang-rt-14-dev when missing), then runs each
# target (default: all; names as in tests/fuzz/meson.build without `fuzz_`) for --time seconds
# (default 20), --jobs at once (default 2). Each run starts from the committed seeds (tests/fuzz/corpus/TARGET) plus what
# earlier runs here found (build-fuzz/fuzz-corpus/TARGET, never committed); a crash, a
# sanitizer report, a broken invariant, a leak, a 10 s input or one allocation over 256 MiB
# fails the target and leaves the input in build-fuzz/fuzz-findings/. Prints a table of
# executions per target and ends with `N passed, N failed`.
#   --seeds   rewrite tests/fuzz/corpus with tests/fuzz/make_fuzz_seeds (after a format change)
# A longer run (about 10M executions of the slowest targets, one core each):
#   scripts/fuzz.sh --time 1800
set -uo pipefail
cd "$(dirname "$0")/.."

MESON="${MESON:-meson}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
# shellcheck source=scripts/clang_asan.sh
source scripts/clang_asan.sh
dir=$clang_asan_dir
all_targets=(store_wire tcp_handshake shm_segment env checkpoint idx cifar config hosts)

seconds=20 jobs=2 seeds=0 targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) seconds=${2:?--time needs seconds}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --seeds) seeds=1; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *)
      [[ " ${all_targets[*]} " == *" $1 "* ]] ||
        { echo "fuzz: unknown target '$1' (one of: ${all_targets[*]})" >&2; exit 2; }
      targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
[[ $seconds =~ ^[1-9][0-9]*$ && $jobs =~ ^[1-9][0-9]*$ ]] ||
  { echo "fuzz: --time and --jobs take positive integers" >&2; exit 2; }

# Inputs up to this many bytes (a shm segment is 12 KiB at its smallest; CIFAR records 3 KiB).
max_len() {
  case "$1" in
    shm_segment) echo 16384 ;;
    cifar) echo 10000 ;;
    *) echo 4096 ;;
  esac
}

setup() {
  if ! ensure_clang_asan; then
    echo "skipped: no clang with libFuzzer here (scripts/install-deps.sh --fuzz installs it)"
    echo "0 passed, 0 failed, ${#targets[@]} skipped"
    exit 0
  fi
  configure_clang_asan || return 1
  local t names=(tests/fuzz/make_fuzz_seeds)
  for t in "${targets[@]}"; do names+=("tests/fuzz/fuzz_$t"); done
  "$MESON" compile -C "$dir" "${names[@]}"
}

# fuzz_one TARGET: runs it; its log is $dir/fuzz-logs/TARGET.log.
fuzz_one() {
  local t=$1
  mkdir -p "$dir/fuzz-corpus/$t" "$dir/fuzz-findings" "$dir/fuzz-logs"
  "$dir/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -max_len="$(max_len "$t")" \
    -timeout=10 -malloc_limit_mb=256 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$dir/fuzz-findings/$t-" \
    "$dir/fuzz-corpus/$t" "tests/fuzz/corpus/$t" >"$dir/fuzz-logs/$t.log" 2>&1
  echo $? >"$dir/fuzz-logs/$t.status"
}

report() {
  local t passed=0 failed=0 status execs rate corpus
  printf '%-14s %12s %10s %8s  %s\n' target executions exec/s corpus result
  for t in "${targets[@]}"; do
    status=$(cat "$dir/fuzz-logs/$t.status" 2>/dev/null || echo 1)
    execs=$(awk '/stat::number_of_executed_units/ { print $2 }' "$dir/fuzz-logs/$t.log")
    rate=$(awk '/stat::average_exec_per_sec/ { print $2 }' "$dir/fuzz-logs/$t.log")
    corpus=$(find "$dir/fuzz-corpus/$t" -type f | wc -l)
    if [ "$status" -eq 0 ]; then
      passed=$((passed + 1))
      printf '%-14s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$corpus" ok
    else
      failed=$((failed + 1))
      printf '%-14s %12s %10s %8s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$corpus" \
        "FAILED (status $status; $dir/fuzz-logs/$t.log)"
      grep -E "ERROR|invariant broken|runtime error|Test unit written" "$dir/fuzz-logs/$t.log" |
        head -n 5 | sed 's/^/    /'
    fi
  done
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

echo "=== fuzz: building $dir"
if ! setup; then
  echo "fuzz: the build in $dir failed"
  echo "0 passed, 1 failed"
  exit 1
fi
if [ "$seeds" -eq 1 ]; then
  rm -rf tests/fuzz/corpus
  "$dir/tests/fuzz/make_fuzz_seeds" tests/fuzz/corpus . || exit 1
fi
echo "=== fuzz: ${targets[*]}: ${seconds}s each, $jobs at once"
running=0
for t in "${targets[@]}"; do
  rm -f "$dir/fuzz-logs/$t.status"
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
report
