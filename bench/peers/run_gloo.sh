#!/bin/bash
# Gloo C++ all-reduce benchmark: world sizes 2 and 4 on 127.0.0.1 (tcp device,
# FileStore rendezvous), in place and (gloo::allreduce(), "-oop") out of place. Each
# algorithm gets a fresh set of processes.
# usage: bench/peers/run_gloo.sh [min_time_s]   (env: ALGOS, SIZES, NPS to override)
set -euo pipefail
source "$(dirname "$0")/common.sh"
MIN_TIME=${1:-0.5}
ALGOS=${ALGOS:-"ring ring_chunked allreduce_ring allreduce_bcube allreduce_ring-oop allreduce_bcube-oop"}
NPS=${NPS:-"2 4"}
SIZES=${SIZES:-4096,65536,1048576,16777216,67108864}

mkdir -p "$BUILD_DIR"
BIN="$BUILD_DIR/gloo_bench"
SRC="$PEERS_DIR/src/gloo_bench.cc"
if [ ! -x "$BIN" ] || [ "$SRC" -nt "$BIN" ] || [ "$PEERS_DIR/src/bench_common.h" -nt "$BIN" ]; then
  echo "# building $BIN"
  g++ -O2 -std=c++17 -Wall -pthread -o "$BIN" "$SRC" -lgloo
fi

wait_quiet
start_monitor
t_start=$(date +%s)
first=1
status=0
for np in $NPS; do
  for algo in $ALGOS; do
    store=$(mktemp -d /tmp/gloo_store.XXXXXX)
    pids=()
    for ((r = 0; r < np; r++)); do
      timeout 300 "$BIN" "$r" "$np" "$store" "$algo" "$SIZES" "$MIN_TIME" > "$store.out.$r" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || { echo "# ERROR: np=$np algo=$algo rank exited non-zero"; status=1; }; done
    if [ $first = 1 ]; then grep -E '^(#|peer)' "$store.out.0" | grep -v '^# span ' || true; first=0; fi
    grep -E '^(# span |[^#])' "$store.out.0" | grep -v '^peer' || true  # rows, each after its span
    for ((r = 1; r < np; r++)); do grep -v '^$' "$store.out.$r" | sed "s/^/# rank$r: /" || true; done
    rm -rf "$store" "$store".out.*
  done
done
stop_monitor
echo "# total wall time: $(( $(date +%s) - t_start )) s; loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
