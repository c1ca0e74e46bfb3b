#!/bin/bash
# Single-thread memcpy / float-sum bandwidth anchor (context for all-reduce numbers).
# usage: bench/peers/run_membw.sh [sizes]
set -euo pipefail
source "$(dirname "$0")/common.sh"
mkdir -p "$BUILD_DIR"
BIN="$BUILD_DIR/membw"
SRC="$PEERS_DIR/src/membw.cc"
if [ ! -x "$BIN" ] || [ "$SRC" -nt "$BIN" ] || [ "$PEERS_DIR/src/bench_common.h" -nt "$BIN" ]; then
  echo "# building $BIN"
  g++ -O2 -std=c++17 -Wall -o "$BIN" "$SRC"
fi
wait_quiet
start_monitor
"$BIN" ${1:-4096,65536,1048576,16777216,67108864}
stop_monitor
