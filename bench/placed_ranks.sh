#!/usr/bin/env bash
# One all_reduce_perf row with its ranks placed on CPUs: where the operating system puts ranks
# that outnumber the cores moves small messages' times (bench/RESULTS.md, 2026-12-06 "A host's
# cores"). Starts `all_reduce_perf -np NP -t TRANSPORT -b SIZE -e SIZE` (the ring, a warm-up of
# 1 s, then loops of at least 1 s, no check), and once all NP ranks are up, within the warm-up,
# pins every thread of rank r (taskset -a) to
#   free       nothing: where the scheduler puts it
#   alternate  CPU r mod C: each rank's ring neighbours on other CPUs
#   halves     CPU r / ceil(NP / C): neighbours on one CPU, but at the halves' edges
# of the first C CPUs the process may use. Prints "PLACEMENT SIZE: out-of-place us, in-place us"
# and, counted over half a second of the timed loops (/proc's counts of each rank's threads), the
# context switches per all-reduce per rank: voluntary (the thread slept) and involuntary (it was
# still runnable: a yield that ran another thread, or a preemption).
# usage: bench/placed_ranks.sh PLACEMENT SIZE [NP=8] [C=2] [TRANSPORT=shm]
# env:   BUILD_DIR (build), RINGLET_ALGO (ring)
set -euo pipefail
placement=${1:?usage: placed_ranks.sh free|alternate|halves SIZE [NP] [C] [TRANSPORT]}
size=${2:?usage: placed_ranks.sh free|alternate|halves SIZE [NP] [C] [TRANSPORT]}
np=${3:-8}
cores=${4:-2}
transport=${5:-shm}
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build=${BUILD_DIR:-$root/build}
case $placement in
  free | alternate | halves) ;;
  *) echo "placed_ranks.sh: '$placement' is not a placement (free, alternate, halves)" >&2; exit 2 ;;
esac
mapfile -t cpus < <(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' |
  awk -F- '{for (c = $1; c <= ($2 == "" ? $1 : $2); ++c) print c}')
if [ "${#cpus[@]}" -lt "$cores" ]; then
  echo "placed_ranks.sh: $cores CPUs asked for, this process may use ${#cpus[@]}" >&2
  exit 2
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
RINGLET_ALGO=${RINGLET_ALGO:-ring} "$build/bench/all_reduce_perf" -np "$np" -t "$transport" \
  -b "$size" -e "$size" --warmup-time 1 --min-time 1 -c 0 > "$out" 2>&1 &
top=$!

# The ranks' pids by rank: rank 0 is the process started, rank r a child with --child-rank r.
ranks_up() {
  pids=([0]=$top)
  local child rank
  for child in $(pgrep -P "$top" || true); do
    rank=$({ tr '\0' '\n' < "/proc/$child/cmdline"; } 2> /dev/null | grep -A1 -- '--child-rank' |
      tail -n 1) || continue
    [ -n "$rank" ] && pids[rank]=$child
  done
  [ "${#pids[@]}" -eq "$np" ]
}

per_cpu=$(((np + cores - 1) / cores))
for _ in $(seq 50); do
  ranks_up && break
  sleep 0.02
done
if ! ranks_up; then
  wait "$top" || true
  echo "placed_ranks.sh: the $np ranks did not all start:" >&2
  cat "$out" >&2
  exit 1
fi
for rank in "${!pids[@]}"; do
  case $placement in
    alternate) taskset -apc "${cpus[rank % cores]}" "${pids[rank]}" > /dev/null ;;
    halves) taskset -apc "${cpus[rank / per_cpu]}" "${pids[rank]}" > /dev/null ;;
  esac
done
# The switches of all ranks' threads so far: "voluntary involuntary".
switches() {
  local pid
  for pid in "${pids[@]}"; do
    cat "/proc/$pid"/task/*/status 2> /dev/null || true
  done | awk '/^voluntary_ctxt_switches/ {v += $2} /^nonvoluntary_ctxt_switches/ {n += $2}
    END {print v + 0, n + 0}'
}
sleep 1.2 # past the warm-up
read -r vol0 inv0 < <(switches)
t0=$(date +%s%N)
sleep 0.5
read -r vol1 inv1 < <(switches)
t1=$(date +%s%N)
counted=yes
kill -0 "$top" 2> /dev/null || counted=no # the ranks ended within the window: their counts are gone
if ! wait "$top"; then
  cat "$out" >&2
  exit 1
fi
row=$(grep -E '^ +[0-9]+ ' "$out" | awk '{print $6 " us, " $10 " us"}')
if [ "$counted" = no ]; then
  echo "$placement $size: $row; switches not counted (the run ended within the window)"
  exit 0
fi
# Per all-reduce (the two columns' mean time) per rank, from the counts over the window.
per_op=$(grep -E '^ +[0-9]+ ' "$out" | awk -v dv=$((vol1 - vol0)) -v di=$((inv1 - inv0)) \
  -v np="$np" -v window=$((t1 - t0)) '{op = ($6 + $10) / 2e6; k = op / (window / 1e9) / np
    printf "%.2f voluntary, %.2f involuntary switches per op per rank", dv * k, di * k}')
echo "$placement $size: $row; $per_op"
