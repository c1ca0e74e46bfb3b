# Shared helpers for the peer runner scripts (source this file): paths, the quiet-check and
# the foreign-activity monitor.
PEERS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"  # bench/peers
REPO_DIR="$(cd "$PEERS_DIR/../.." && pwd)"                  # the ringlet checkout
# Peer binaries (gloo_bench, mpi_bench, membw), rebuilt when a source is newer; build-*/ is
# ignored by git, and the directory is not meson's.
BUILD_DIR="${PEERS_BUILD_DIR:-$REPO_DIR/build-peers}"
PY=/usr/bin/python3   # Debian's python with python3-torch; NOT another python3 first on PATH

# Percentage of idle CPU over a short window, from /proc/stat.
cpu_idle_pct() {
  local a b
  read -r _ u1 n1 s1 i1 w1 x1 y1 z1 _ < /proc/stat
  sleep "${1:-3}"
  read -r _ u2 n2 s2 i2 w2 x2 y2 z2 _ < /proc/stat
  local busy=$(( (u2-u1)+(n2-n1)+(s2-s1)+(x2-x1)+(y2-y1)+(z2-z1) ))
  local idle=$(( (i2-i1)+(w2-w1) ))
  echo $(( 100 * idle / (busy + idle + 1) ))
}

# Wait until the machine is quiet: >= 90% idle CPU over 3 s (the 1-min load
# average lags, so it is only recorded, not used as the gate). Gives up
# after ~5 minutes and proceeds, saying so.
wait_quiet() {
  local tries=0 idle
  while :; do
    idle=$(cpu_idle_pct 3)
    echo "# quiet-check: $(date -u +%FT%TZ) idle=${idle}% loadavg=$(cut -d' ' -f1-3 /proc/loadavg)"
    [ "$idle" -ge 90 ] && return 0
    tries=$((tries+1))
    if [ $tries -ge 15 ]; then echo "# WARNING: machine not quiet, proceeding anyway"; return 0; fi
    sleep 20
  done
}

# Background sampler: once a second, note running (R-state) processes that
# belong to other jobs sharing this 2-core machine.
# Kernel threads (sid 0) and our own process group are ignored.
start_monitor() {
  MON_LOG=$(mktemp /tmp/peers_mon.XXXXXX)
  local mysid
  mysid=$(ps -o sid= -p $$ | tr -d ' ')
  ( while :; do
      ps -eo sid=,stat=,comm= | awk -v s="$mysid" '$1!=s && $1!=0 && $2 ~ /^R/ {print $3}' | sort -u | tr '\n' ' '
      echo
      sleep 1
    done > "$MON_LOG" ) &
  MON_PID=$!
}

stop_monitor() {
  kill "$MON_PID" 2>/dev/null; wait "$MON_PID" 2>/dev/null || true
  local total busy top
  total=$(wc -l < "$MON_LOG")
  busy=$(grep -c '[[:alnum:]]' "$MON_LOG" || true)
  top=$( (tr ' ' '\n' < "$MON_LOG" | grep . || true) | sort | uniq -c | sort -rn | head -5 | awk '{printf "%s(%s) ", $2, $1}') || true
  echo "# foreign-activity: ${busy}/${total} one-second samples saw other jobs' processes running ${top}"
  rm -f "$MON_LOG"
}
