#!/bin/bash
# PyTorch 1.13 (Debian python3-torch) torch.distributed backend=gloo
# all-reduce benchmark on 127.0.0.1, world sizes 2 and 4, 1 thread per rank.
# usage: bench/peers/run_torch.sh [min_time_s]   (env: SIZES, NPS to override)
set -euo pipefail
source "$(dirname "$0")/common.sh"
MIN_TIME=${1:-0.5}
NPS=${NPS:-"2 4"}
SIZES=${SIZES:-4096,65536,1048576,16777216,67108864}
export GLOO_SOCKET_IFNAME=lo OMP_NUM_THREADS=1

wait_quiet
start_monitor
t_start=$(date +%s)
first=1
status=0
for np in $NPS; do
  out=$(mktemp /tmp/torch_out.XXXXXX)
  timeout 400 "$PY" "$PEERS_DIR/src/torch_bench.py" "$np" "$SIZES" "$MIN_TIME" > "$out" 2>&1 || { echo "# ERROR: np=$np failed"; cat "$out"; status=1; }
  if [ $first = 1 ]; then grep -E '^(#|peer)' "$out" | grep -v '^# span ' || true; first=0; fi
  grep -E '^(# span |[^#])' "$out" | grep -v '^peer' || true  # rows, each after its span
  rm -f "$out"
done
stop_monitor
echo "# total wall time: $(( $(date +%s) - t_start )) s; loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
