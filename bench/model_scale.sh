#!/usr/bin/env bash
# The scale study (bench/RESULTS.md): `ringlet model predict --grid` for 8, 64, 512 and 4096
# ranks, flat (a host each) and 8 per host, 8 B - 1 GiB all-reduce, under one profile (default:
# the hand-written H100 + InfiniBand one); each shape's table, crossovers and simulation time.
# At 4,096 ranks every size the sweep tries simulates the ring's 33.5 million messages (about two
# minutes each), so there the grid comes without a sweep, and the sweep (the fastest by size,
# where the tree stops beating the ring) searches 16 MiB - 1 GiB only.
# usage: bench/model_scale.sh [PROFILE] [BUILD_DIR]
set -euo pipefail
profile=${1:-model/profiles/h100-nvlink-ib.json}
build=${2:-build}
for ranks in 8 64 512 4096; do
  for per_host in 1 8; do
    echo "### $ranks ranks, $per_host per host"
    predict=("$build/trainer/ringlet" model predict --ranks "$ranks" --per-host "$per_host"
      --size 1G --profile "$profile")
    if [ "$ranks" -lt 4096 ]; then
      "${predict[@]}" --grid
    else
      "${predict[@]}" --grid --no-sweep
      "${predict[@]}" --from 16M
    fi
    echo
  done
done
