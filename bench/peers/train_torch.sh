#!/bin/bash
# FMNIST-CNN training baseline with Debian's PyTorch 1.13 on CPU:
#   1. per-step anchor: fwd+bwd at batch 64, 1 thread, median of 50 steps
#   2. single process, 2 threads, EPOCHS epochs (images/s per epoch, test acc)
#   3. DDP, 2 processes x 1 thread, gloo on 127.0.0.1, EPOCHS epochs
# usage: bench/peers/train_torch.sh [epochs=3] [parts="step single ddp"]
set -euo pipefail
source "$(dirname "$0")/common.sh"
EPOCHS=${1:-3}
PARTS=${2:-"step single ddp"}
export GLOO_SOCKET_IFNAME=lo
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || { echo "apt-get install dataset-fashion-mnist first"; exit 1; }

status=0
for part in $PARTS; do
  wait_quiet
  start_monitor
  t_start=$(date +%s)
  if [ "$part" = step ]; then
    OMP_NUM_THREADS=1 "$PY" "$PEERS_DIR/src/train_fmnist.py" step || status=1
  else
    "$PY" "$PEERS_DIR/src/train_fmnist.py" "$part" "$EPOCHS" || status=1
  fi
  stop_monitor
  echo "# $part wall time: $(( $(date +%s) - t_start )) s; loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)"
done
exit $status
