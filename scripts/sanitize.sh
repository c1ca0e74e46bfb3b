#!/usr/bin/env bash
# The sanitizer runs (`make sanitize`; .ci/run runs `all`):
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer: every program and every test but the
#         longest end-to-end runs of the binary and drills (asan_excluded, said so; the code
#         they run is under ASan in shorter tests), in the clang build the fuzz targets use
#         (build-fuzz, scripts/clang_asan.sh; installs clang when it is missing). The first
#         report stops its program (halt_on_error=1), failing it.
#   tsan  ThreadSanitizer (GCC, build-tsan): the tests of the threaded layers (store, transport,
#         collectives, data loader, DDP, launcher, the model's sweep on threads). Left out, and
#         said so: the tests that fork a process after starting threads, which TSan's runtime
#         cannot follow.
#   all   asan, then tsan (default).
# Each run ends with its `N passed, N failed` line (scripts/test_summary.py); the exit status
# is non-zero when a build failed or a test failed.
set -uo pipefail
cd "$(dirname "$0")/.."

stage="${1:-all}"
MESON="${MESON:-meson}"
PYTHON="${PYTHON:-python3}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp"
# shellcheck source=scripts/clang_asan.sh
source scripts/clang_asan.sh

# Tests that run the ringlet binary.
binary_tests=" test_launch test_multihost test_run_dir test_trace test_train "
# Left out of the ASan run, which runs every other test: the lr schedule x resume matrix, the
# binary's longest end-to-end runs, and drills that repeat, for minutes, paths the shorter tests
# already run under ASan (each 1-4 minutes under ASan on 2 cores).
asan_excluded=(test_resume_matrix chaos_drill slurm gpu_check_dry flight_recorder_drill
               test_train test_run_dir test_eval_command kill_drill)
# TSan cannot run these: each forks children after its threads started.
tsan_excluded=(test_faults test_collectives_faults test_device_collectives)
tsan_tests=(test_store test_discovery test_tcp test_shm test_shm_ring test_p2p test_fingerprint
            test_algorithm_choice test_collectives test_hierarchical test_collectives_procs
            test_trace test_rdma test_data_loader test_ddp test_ddp_device test_ddp_backward
            test_launch test_status_board test_default_tables)

# run DIR NAME [--build-all] TEST...: builds DIR (only TEST..., and the ringlet binary for those
# that run it; with --build-all or no TEST, every program and test), runs TEST... (no TEST: every
# test) and prints the summary line.
run() {
  local dir=$1 name=$2
  shift 2
  local build_all=false
  if [ "${1:-}" = --build-all ]; then
    build_all=true
    shift
  fi
  local targets=()
  local t
  for t in "$@"; do
    [[ $t == --* ]] && continue
    $build_all && continue
    targets+=("tests/$t")
    case "$binary_tests" in *" $t "*) targets+=(trainer/ringlet) ;; esac
  done
  # Regenerate first when a meson.build changed: meson compile looks targets up beforehand.
  if ! ninja -C "$dir" build.ninja >/dev/null || ! "$MESON" compile -C "$dir" "${targets[@]}"; then
    echo "sanitize: the $name build in $dir failed"
    echo "0 passed, 1 failed"
    return 1
  fi
  rm -f "$dir/meson-logs/testlog.json"
  "$MESON" test -C "$dir" --no-rebuild --print-errorlogs --timeout-multiplier 3 "$@"
  echo "--- $name summary ($dir/meson-logs/testlog.json)"
  "$PYTHON" scripts/test_summary.py "$dir"
}

asan() {
  echo "=== sanitize: ASan + UBSan in $clang_asan_dir (halt on the first report): ${*:-every test}"
  if ! ensure_clang_asan; then
    echo "sanitize: the ASan run needs clang and its runtimes (scripts/install-deps.sh --fuzz)"
    echo "0 passed, 1 failed"
    return 1
  fi
  configure_clang_asan || return 1
  local tests=("$@") all=()
  if [ ${#tests[@]} -eq 0 ]; then
    all=(--build-all)
    ninja -C "$clang_asan_dir" build.ninja >/dev/null || return 1
    mapfile -t tests < <("$MESON" test -C "$clang_asan_dir" --list 2>/dev/null |
      sed -n 's|^.* / ||p' | grep -vxF -f <(printf '%s\n' "${asan_excluded[@]}"))
    echo "=== sanitize: not run under ASan (runs of the binary: 30 two-rank jobs, and the training,"
    echo "    run-directory and eval runs, whose checkpoint, schedule, loop and DDP code runs under"
    echo "    ASan in test_checkpoint, test_resume, test_progress, test_ddp and test_train_golden; the"
    echo "    chaos and kill drills' kills and restarts, which test_launch and test_faults make under"
    echo "    ASan; training under Slurm; the GPU script's dry run of programs bench_programs runs"
    echo "    under ASan; the flight recorder's stopped and killed jobs, whose recorder and analysis"
    echo "    test_flight_recorder runs under ASan): ${asan_excluded[*]}"
  fi
  run "$clang_asan_dir" "ASan + UBSan" "${all[@]}" "${tests[@]}"
}

tsan() {
  echo "=== sanitize: TSan in build-tsan: $*"
  echo "=== sanitize: not run under TSan (they fork after starting threads): ${tsan_excluded[*]}"
  # GCC's -Wtsan rejects Asio's atomic_thread_fence, which TSan does not model: a warning here.
  # -O1 compiles in 0.84 of -O2's time and the tests take as long (bench/RESULTS.md, 2026-12-04
  # "CI time"); clang 14's TSan runtime crashes on test_default_tables, so GCC it is.
  if [ ! -f build-tsan/build.ninja ]; then
    rm -rf build-tsan
    # Line tables compressed, as in build-fuzz (scripts/clang_asan.sh); TSan needs PIE.
    "$MESON" setup build-tsan -Db_sanitize=thread -Dcpp_args=-Wno-error=tsan -Dcuda=disabled \
      -Db_lundef=false -Doptimization=1 -Ddebug=false \
      -Dcpp_link_args=-Wl,--compress-debug-sections=zlib >/dev/null || return 1
  fi
  echo "=== sanitize: not run under TSan (a 3-epoch training run, ~10x slower under TSan, passes"
  echo "    its 60 s limit): test_launch's \"kill -9 of a worker mid-epoch restarts and resumes\";"
  echo "    test_collectives' matrices over the emulated rdma device and its all-gather and"
  echo "    reduce-scatter matrices (the same progress thread and transports as the other matrices"
  echo "    and test_rdma, minutes under TSan)"
  echo "=== sanitize: not run under TSan: test_ddp_device's DDP on the emulated device without"
  echo "    device flags over shm (ranks as threads): its rounds' messages cross a shm ring that each"
  echo "    rank maps at an address of its own, where TSan cannot see an atomic order two threads;"
  echo "    the same case over tcp runs (TSan sees sockets order the staging copy before the reduce)"
  # meson splits --test-args at spaces: '?' stands for each space in a test case's name.
  run build-tsan "TSan" "$@" \
    "--test-args=-tce=*restarts?and?resumes*,*matrix:*over?rdma*,*all_gather?matrix*,*reduce_scatter?matrix*,*without?device?flags??over?shm*"
}

status=0
case "$stage" in
  asan) asan || status=1 ;;
  tsan) tsan "${tsan_tests[@]}" || status=1 ;;
  all)
    asan || status=1
    tsan "${tsan_tests[@]}" || status=1
    ;;
  *)
    echo "usage: scripts/sanitize.sh [asan|tsan|all]"
    exit 2
    ;;
esac
exit $status
