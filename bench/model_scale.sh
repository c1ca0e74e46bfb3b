#!/usr/bin/env bash
# The scale study (bench/RESULTS.md): `ringlet model predict --grid` for 8, 64, 512 and 4096
# ranks, flat (a host each) and 8 per host, 8 B - 1 GiB all-reduce, under one profile (default:
# the hand-written H100 + InfiniBand one); each shape's table, crossovers and simulation time.
# usage: bench/model_scale.sh [PROFILE] [BUILD_DIR]
set -euo pipefail
profile=${1:-model/profiles/h100-nvlink-ib.json}
build=${2:-build}
for ranks in 8 64 512 4096; do
  for per_host in 1 8; do
    echo "### $ranks ranks, $per_host per host"
    "$build/trainer/ringlet" model predict --ranks "$ranks" --per-host "$per_host" --size 1G \
      --grid --profile "$profile"
    echo
  done
done
