#!/bin/bash
# OpenMPI MPI_Allreduce benchmark: world sizes 2 and 4, once with default
# transports (pml ob1 + btl vader shared memory) and once forced to TCP over
# loopback (pml ob1, btl tcp,self on lo); in place and out of place (rows "<mode>-oop").
# Before each mode a tiny verbose run prints which pml/btl were actually selected.
# usage: bench/peers/run_mpi.sh [min_time_s]   (env: MODES, PLACES, SIZES, NPS to override)
set -euo pipefail
source "$(dirname "$0")/common.sh"
MIN_TIME=${1:-0.5}
MODES=${MODES:-"default tcp"}
NPS=${NPS:-"2 4"}
PLACES=${PLACES:-"ip oop"}
SIZES=${SIZES:-4096,65536,1048576,16777216,67108864}

mkdir -p "$BUILD_DIR"
BIN="$BUILD_DIR/mpi_bench"
SRC="$PEERS_DIR/src/mpi_bench.cc"
if [ ! -x "$BIN" ] || [ "$SRC" -nt "$BIN" ] || [ "$PEERS_DIR/src/bench_common.h" -nt "$BIN" ]; then
  echo "# building $BIN"
  mpicxx -O2 -std=c++17 -Wall -o "$BIN" "$SRC"
fi

# Keep the runtime (oob) and any tcp btl on loopback only.
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --mca oob_tcp_if_include lo --mca btl_tcp_if_include lo)
mode_args() {
  case "$1" in
    default) echo "" ;;
    tcp) echo "--mca pml ob1 --mca btl tcp,self" ;;
    *) echo "unknown mode $1" >&2; exit 2 ;;
  esac
}

for mode in $MODES; do
  for np in $NPS; do
    # shellcheck disable=SC2046
    "${MPIRUN[@]}" -np "$np" --report-bindings $(mode_args "$mode") --mca pml_base_verbose 10 --mca btl_base_verbose 30 \
        "$BIN" "$mode" 4096 0.01 2>&1 | grep -E "component .* selected|bml: Using|MCW rank" \
      | sed -E 's/^\[[^]]*\] ?//; s/\[\[[0-9]+,1\],/[rank /' | sed "s/^/# [$mode np=$np] /" | sort -u
  done
done

wait_quiet
start_monitor
t_start=$(date +%s)
first=1
status=0
for mode in $MODES; do
  for np in $NPS; do
    for place in $PLACES; do
      out=$(mktemp /tmp/mpi_out.XXXXXX)
      # shellcheck disable=SC2046
      timeout 300 "${MPIRUN[@]}" -np "$np" $(mode_args "$mode") "$BIN" "$mode" "$SIZES" "$MIN_TIME" "$place" > "$out" 2>&1 || { echo "# ERROR: mode=$mode np=$np place=$place failed"; status=1; }
      if [ $first = 1 ]; then grep -E '^(#|peer)' "$out" | grep -v '^# span ' || true; first=0; fi
      grep -E '^(# span |[^#])' "$out" | grep -v '^peer' || true  # rows, each after its span
      rm -f "$out"
    done
  done
done
stop_monitor
echo "# total wall time: $(( $(date +%s) - t_start )) s; loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
