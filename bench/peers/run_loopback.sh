#!/bin/bash
# The loopback's own limit, for the TCP all-reduce to be measured against: src/loopback.cc
# streams between np processes on 127.0.0.1 as a ring's connections carry data (np = 2: one
# stream each way, a two-way stream test), with no reduction and no framing. The mean rate of
# its streams is the most busbw a TCP ring over this loopback could reach. Printed as one row
# per size in the peers' format:
#   loopback streams np size unit seconds time_us algbw busbw OK
# time_us is what moving a ring all-reduce's 2(np-1)/np x size bytes per rank takes at that
# rate, busbw the rate itself (GB/s, 1 GB = 1e9 B).
# usage: bench/peers/run_loopback.sh [seconds=2]   (env: SIZES, NPS to override)
set -euo pipefail
source "$(dirname "$0")/common.sh"
SECONDS_PER_TEST=${1:-2}
NPS=${NPS:-"2 4"}
SIZES=${SIZES:-4096,65536,1048576,16777216,67108864}
[[ "$SECONDS_PER_TEST" =~ ^[1-9][0-9]*$ ]] ||
  { echo "run_loopback.sh: seconds must be a whole number >= 1, not '$SECONDS_PER_TEST'" >&2; exit 2; }

mkdir -p "$BUILD_DIR"
BIN="$BUILD_DIR/loopback"
SRC="$PEERS_DIR/src/loopback.cc"
if [ ! -x "$BIN" ] || [ "$SRC" -nt "$BIN" ]; then
  echo "# building $BIN"
  g++ -O2 -std=c++17 -Wall -pthread -o "$BIN" "$SRC"
fi

wait_quiet
echo "# ring streams on 127.0.0.1, blocking send/recv of 1 MiB, ${SECONDS_PER_TEST}s per test"
echo "peer     algo           np     size    iters      time_us   algbw_GB/s   busbw_GB/s check"
status=0
for np in $NPS; do
  span_start=$(date +%s.%N)
  line=$(timeout $((SECONDS_PER_TEST * 3 + 30)) "$BIN" "$np" "$SECONDS_PER_TEST") ||
    { echo "# ERROR: loopback $np $SECONDS_PER_TEST failed"; status=1; continue; }
  span="$span_start $(date +%s.%N)"
  echo "# $line"
  "$PY" - "$np" "$SIZES" "$line" "$SECONDS_PER_TEST" "$span" <<'PY' || status=1
import sys
np_, sizes, line, secs = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(), sys.argv[4]
span = [float(t) for t in sys.argv[5].split()]  # when the streams ran (compare_peers.py)
rate = float(line[line.index("mean_GBps") + 1])
if rate <= 0:
    sys.exit(f"# ERROR: the streams reported no rate ({sys.argv[3]})")
factor = 2 * (np_ - 1) / np_
for size in map(int, sizes.split(",")):
    human = next((f"{size // u} {name}" for u, name in ((1 << 20, "MiB"), (1 << 10, "KiB"))
                  if size >= u and size % u == 0), f"{size} B")
    t = factor * size / (rate * 1e9)
    print(f"# span {span[0]:.3f} {span[1]:.3f}")
    print(f"{'loopback':<8} {'streams':<14} {np_:3d} {human:>8} {secs:>8} {t * 1e6:12.1f} "
          f"{size / t / 1e9:12.3f} {rate:12.3f} OK")
PY
done
exit $status
