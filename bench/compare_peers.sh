#!/bin/bash
# Side-by-side all-reduce comparison: ringlet's all_reduce_perf (tcp and shm) against the peer
# baselines of bench/peers (Gloo, Open MPI shared memory and TCP, torch.distributed gloo) and
# the loopback's own limit (ring streams, run_loopback.sh), interleaved for several rounds on
# the same sizes; prints medians, ratios ours/peer and a verdict on every point
# (bench/compare_peers.py). Float32 sum, in place and out of place (torch and Gloo's legacy ring
# classes: in place only).
#
# usage: bench/compare_peers.sh [rounds=3] [min_time_s=0.5]
# env:   SIZES (bytes per rank, comma list; default 4 KiB,64 KiB,1 MiB,16 MiB,64 MiB)
#        NPS ("2 4"), TRANSPORTS ("tcp shm"), PEERS ("gloo mpi torch loopback"),
#        BUILD_DIR (build), PEERS_DIR (bench/peers), LOG_DIR (a new /tmp dir, kept),
#        NO_INSTALL=1 (skip a missing peer instead of installing it)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS=${1:-3}
MIN_TIME=${2:-0.5}
SIZES=${SIZES:-4096,65536,1048576,16777216,67108864}
NPS=${NPS:-"2 4"}
TRANSPORTS=${TRANSPORTS:-"tcp shm"}
PEERS=${PEERS:-"gloo mpi torch loopback"}
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
PEERS_DIR=${PEERS_DIR:-$ROOT/bench/peers}
LOG_DIR=${LOG_DIR:-$(mktemp -d /tmp/compare_peers.XXXXXX)}
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
mkdir -p "$LOG_DIR"
t_start=$(date +%s)

# --- peers: present, installed on demand, or skipped --------------------------------------
peer_package() {
  case "$1" in
    gloo) echo libgloo-dev ;;
    mpi) echo "openmpi-bin libopenmpi-dev" ;;
    torch) echo python3-torch ;;
    loopback) echo g++ ;;
  esac
}
# openmpi-bin alone (which the tests need) brings mpirun and mpicxx but not mpi.h
# (libopenmpi-dev).
mpi_headers() {
  local dir
  for dir in $(mpicxx --showme:incdirs 2>/dev/null); do
    [ -f "$dir/mpi.h" ] && return 0
  done
  return 1
}
peer_present() {
  case "$1" in
    gloo) [ -f /usr/include/gloo/allreduce_ring.h ] ;;
    mpi) command -v mpirun >/dev/null && command -v mpicxx >/dev/null && mpi_headers ;;
    torch) /usr/bin/python3 -c "import torch" >/dev/null 2>&1 ;;
    loopback) command -v g++ >/dev/null ;;
  esac
}
# Installing needs root: sudo where it is (as scripts/install-deps.sh does), else nothing.
as_root=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null; then as_root=sudo; else as_root=none; fi
fi
active_peers=""
for peer in $PEERS; do
  if [ ! -x "$PEERS_DIR/run_$peer.sh" ]; then
    echo "skipped: $peer (no $PEERS_DIR/run_$peer.sh)"
    continue
  fi
  if ! peer_present "$peer" && [ "${NO_INSTALL:-0}" != 1 ] && [ "$as_root" != none ] &&
      command -v apt-get >/dev/null; then
    pkgs=$(peer_package "$peer")
    echo "# $peer is not installed: installing it with apt-get install -y $pkgs"
    # shellcheck disable=SC2086
    $as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      -o DPkg::Lock::Timeout=600 $pkgs >"$LOG_DIR/install_$peer.log" 2>&1 ||
      echo "# apt-get install $pkgs failed (log: $LOG_DIR/install_$peer.log)"
  fi
  if peer_present "$peer"; then
    active_peers="$active_peers $peer"
  else
    echo "skipped: $peer not installed (apt-get install $(peer_package "$peer"))"
  fi
done

# --- ours -----------------------------------------------------------------------------------
OURS="$BUILD_DIR/bench/all_reduce_perf"
if [ ! -x "$OURS" ]; then
  echo "# building $OURS"
  [ -f "$BUILD_DIR/build.ninja" ] || meson setup "$BUILD_DIR" "$ROOT" >/dev/null || exit 1
  ninja -C "$BUILD_DIR" bench/all_reduce_perf >/dev/null || { echo "build failed"; exit 1; }
fi

# The CPU placement beside every run: bench/core_probe samples how far apart the two CPUs are
# (on a VM the host moves the virtual CPUs, and every implementation's shm and loopback times
# follow it) four times a second into placement.log; each result row carries a "# span" line
# with when it ran, and compare_peers.py compares ours with a peer only in the same placement.
PROBE="$BUILD_DIR/bench/core_probe"
if [ ! -x "$PROBE" ]; then
  ninja -C "$BUILD_DIR" bench/core_probe >/dev/null || { echo "build failed"; exit 1; }
fi
"$PROBE" --every 0.25 --for 86400 >"$LOG_DIR/placement.log" 2>&1 &
probe_pid=$!
trap 'kill "$probe_pid" 2>/dev/null' EXIT

# One all_reduce_perf run per size (so each size gets its own warm-up and iteration count),
# after a "# span" line with when it ran: the whole process (start-up, warm-up, both places),
# where the peers' spans cover their timed loop alone, so ours are "mixed" a little more often.
run_ours() {  # np transport log
  local np=$1 transport=$2 log=$3 size warm start out
  out=$(mktemp)
  for size in ${SIZES//,/ }; do
    warm=10
    [ "$size" -gt 1048576 ] && warm=2
    start=$(date +%s.%N)
    timeout 300 "$OURS" -np "$np" -t "$transport" -b "$size" -e "$size" -n 5 -w "$warm" \
      --min-time "$MIN_TIME" >"$out" 2>>"$log.err" ||
      echo "# ERROR: all_reduce_perf -np $np -t $transport -b $size failed (see $log.err)"
    { echo "# span $start $(date +%s.%N)"; cat "$out"; } >>"$log"
  done
  rm -f "$out"
}

run_peer() {  # peer log
  local arg=$MIN_TIME
  [ "$1" = loopback ] && arg=2  # seconds of streaming
  NPS="$NPS" SIZES="$SIZES" "$PEERS_DIR/run_$1.sh" "$arg" >"$2" 2>&1 ||
    echo "# ERROR: run_$1.sh failed (see $2)"
}

jobs=()
for np in $NPS; do
  for tr in $TRANSPORTS; do jobs+=("ours:$np:$tr"); done
done
for peer in $active_peers; do jobs+=("peer:$peer"); done

echo "# compare_peers: $ROUNDS rounds, sizes $SIZES, np $NPS, min_time ${MIN_TIME}s, logs in $LOG_DIR"
for ((round = 1; round <= ROUNDS; round++)); do
  n=${#jobs[@]}
  for ((k = 0; k < n; k++)); do
    job=${jobs[$(((k + round - 1) % n))]}  # rotate the order each round
    IFS=: read -r kind a b <<<"$job"
    echo "# round $round/$ROUNDS: $kind $a $b ($(($(date +%s) - t_start)) s, loadavg $(cut -d' ' -f1 /proc/loadavg))"
    if [ "$kind" = ours ]; then
      run_ours "$a" "$b" "$LOG_DIR/r$round.ours.np$a.$b.log"
    else
      run_peer "$a" "$LOG_DIR/r$round.peer.$a.log"
    fi
  done
done
echo "# total wall time: $(($(date +%s) - t_start)) s"
kill "$probe_pid" 2>/dev/null
wait "$probe_pid" 2>/dev/null  # its last line complete before the logs are read
"$PY" "$ROOT/bench/compare_peers.py" "$LOG_DIR"
