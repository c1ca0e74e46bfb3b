#!/usr/bin/env bash
# bench/gpu_check.sh: every GPU test and benchmark of ringlet in one run, for a GPU machine lent
# for minutes (about 6 of them on an H100; each command has its own time limit, the whole at most
# 8 minutes), with the build copied from a machine without a GPU. In order:
#   0. versions: the GPU, its driver, PyTorch; the CUDA runtime, cuBLAS, cuDNN and NCCL found on
#      the machine (its /usr/local/cuda, else PyTorch's nvidia wheels), put on LD_LIBRARY_PATH;
#   1. tests: test_cuda (the device op suite, the caching allocator, the collectives' kernels),
#      the CUDA cases of test_device_collectives and test_ddp_device;
#   2. the training step: fmnist_cnn (batch 64) and resnet20 on CIFAR-shaped input (batch 128),
#      ringlet's train_bench next to PyTorch's step_forms_gpu.py, in three forms each: eager
#      (f32), tuned (bf16 autocast; PyTorch with channels-last and cudnn.benchmark, ringlet's
#      step also graphed, its best form) and graphed (f32, the whole step captured and
#      replayed); both timed the same way: blocks of steps between two host synchronizations,
#      medians over the blocks;
#      then ringlet train --device cuda --epochs 3 (fmnist_cnn; its test accuracy);
#   3. collectives: all_reduce_perf -g 1 -np 2 and -np 4 over ipc (8 B - 256 MiB), -np 2 with
#      the ranks as threads (one context), with host waits and messages per op; ring, recursive
#      doubling, Rabenseifner's and the tree each forced at 4 ranks as threads; the
#      device-to-device copy (reduce_kernel_bench), NCCL's one-rank table beside ringlet's;
#   4. DDP on the one GPU: train_bench --nproc 2 beside one rank and beside PyTorch DDP over gloo
#      (NCCL refuses two ranks on one GPU: its refusal is printed);
#   5. the table of everything, last; every raw line is in $OUT (with where the threads of any
#      command that reached its limit were: their names, states and backtraces).
# usage: bench/gpu_check.sh [BUILD_DIR]      (default build; OUT=dir keeps the logs, results)
# Without a GPU (or with GPU_CHECK_DRY=1) it runs its CPU-side part: the same pipeline on the
# emulated device with a few steps, PyTorch's and NCCL's runs skipped (saying so), and the table.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
out=${OUT:-$(mktemp -d /tmp/gpu_check.XXXXXX)}
mkdir -p "$out"
started=$SECONDS

say() { printf '\n=== %s (%ds)\n' "$*" $((SECONDS - started)); }
# thread_states PID...: each thread of each process: its name (ringlet's are rl-<role>), state,
# user and system CPU ticks, where in the kernel it waits and its system call ("running": none).
thread_states() {
  local pid task
  for pid in "$@"; do
    echo "=== process $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
    for task in /proc/"$pid"/task/*; do
      printf '  %s %-16s state,utime,stime %s wchan %s syscall %s\n' "${task##*/}" \
        "$(cat "$task/comm" 2>/dev/null)" "$(sed 's/.*) //' "$task/stat" 2>/dev/null |
          cut -d' ' -f1,12,13)" "$(cat "$task/wchan" 2>/dev/null)" \
        "$(cut -d' ' -f1 "$task/syscall" 2>/dev/null)"
    done
  done
}

# backtraces NAME RUNNER LIMIT_S: where a command still running 15 s before its limit waits,
# in $out/NAME.backtraces: every thread of it and of its children (ranks), twice 2 s apart
# (which threads spin, which sleep), then each process read by cuda-gdb where it is installed
# (it also reads programs with no GPU code; one that does not answer in 10 s is skipped).
backtraces() {
  local name=$1 runner=$2 limit=$3
  [ "$limit" -gt 30 ] || return 0
  sleep $((limit - 15))
  kill -0 "$runner" 2>/dev/null || return 0
  local command_pid pids
  command_pid=$(pgrep -P "$runner" | head -n 1)
  pids="$command_pid $(pgrep -P "${command_pid:-0}" | tr '\n' ' ')"
  {
    thread_states $pids
    sleep 2
    echo "--- 2 s later"
    thread_states $pids
    if command -v cuda-gdb >/dev/null 2>&1; then
      for pid in $pids; do
        echo "=== process $pid, cuda-gdb"
        timeout -s KILL 10 cuda-gdb -p "$pid" -batch -ex "thread apply all bt 25" 2>&1 |
          grep -v "^\[New"
      done
    fi
  } >"$out/$name.backtraces" 2>&1
}

# run NAME LIMIT_S COMMAND...: the command's output in $out/NAME.log, shown, its status noted;
# stopped at its limit, with its backtraces taken first.
run() {
  local name=$1 limit=$2
  shift 2
  echo "+ $*"
  timeout "$limit" "$@" >"$out/$name.log" 2>&1 &
  local runner=$!
  backtraces "$name" "$runner" "$limit" 2>/dev/null &  # its sleep, when stopped, unreported
  local watcher=$!
  wait "$runner"
  local status=$?
  pkill -P "$watcher" 2>/dev/null  # its sleep: it then finds the command gone and returns
  wait "$watcher" 2>/dev/null
  tail -n 25 "$out/$name.log"
  echo "$name $status" >>"$out/status.txt"
  if [ "$status" -eq 124 ]; then
    echo "gpu_check: $name ran past its ${limit} s and was stopped (where it waited:" \
      "$name.backtraces, where cuda-gdb is installed)"
  fi
  return 0
}

say "0. versions"
gpu=0
if [ "${GPU_CHECK_DRY:-0}" != 1 ] && command -v nvidia-smi >/dev/null 2>&1 &&
  nvidia-smi -L >/dev/null 2>&1; then
  gpu=1
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
fi
torch_py=$(command -v python3)
# The GPU machine's own CUDA libraries (its toolkit's, else PyTorch's nvidia wheels), never the
# build machine's: each one ringlet loads, put on LD_LIBRARY_PATH and printed.
wheels=$("$torch_py" -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))" 2>/dev/null)
for lib in libcudart.so.13 libcublas.so.13 libcudnn.so.9 libnccl.so.2; do
  found=$(find /usr/local/cuda/lib64/ /usr/local/cuda/lib/ ${wheels:+"$wheels/nvidia/"} \
    -name "$lib" 2>/dev/null | head -n 1)
  echo "$lib: ${found:-not found}"
  [ -n "$found" ] && export LD_LIBRARY_PATH="$(dirname "$found"):${LD_LIBRARY_PATH:-}"
done
ldd "$build/libringlet-cuda.so" 2>/dev/null | grep -E "cudart|cublas|not found" ||
  echo "(no CUDA plugin in $build)"
"$torch_py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'cudnn', torch.backends.cudnn.version(), 'gpu', torch.cuda.is_available())" 2>/dev/null ||
  echo "(no PyTorch: its runs are skipped)"
if [ "$gpu" = 1 ]; then
  device=cuda steps=100 block=20 warmup=10 big_batch=128 max_bytes=256M algo_bytes=64M
else
  echo "no GPU here (or GPU_CHECK_DRY=1): the CPU-side part, on the emulated device"
  device=emu steps=2 block=1 warmup=1 big_batch=8 max_bytes=64K algo_bytes=64K
fi

say "1. tests"
run test_cuda 150 "$build/tests/tensor/test_cuda"
if [ "$gpu" = 1 ]; then
  # A failing case shows its ranks' logs: at debug level they say what the device watchdog did.
  run device_collectives_cuda 300 env RINGLET_LOG=debug "$build/tests/test_device_collectives" \
    -tc='*CUDA GPU*'
  run ddp_cuda 120 "$build/tests/test_ddp_device" -tc='*CUDA GPU*'
fi

say "2. the training step"
bench=("$build/bench/train_bench" --device "$device" --steps "$steps" --block "$block"
  --warmup "$warmup")
for model in fmnist_cnn:64 "resnet20:$big_batch"; do
  m=${model%%:*} b=${model##*:}
  run "step_${m}_eager" 120 "${bench[@]}" --model "$m" --batch "$b"
  run "step_${m}_tuned" 120 "${bench[@]}" --model "$m" --batch "$b" --precision bf16 \
    --cuda_graph on
  run "step_${m}_graphed" 120 "${bench[@]}" --model "$m" --batch "$b" --cuda_graph on
  for form in eager tuned graphed; do
    if [ "$gpu" = 1 ]; then
      run "torch_${m}_${form}" 120 "$torch_py" "$here/peers/src/step_forms_gpu.py" \
        --model "$m" --batch "$b" --form "$form" --steps "$steps" --block "$block"
    else
      echo "skipped: PyTorch's $m $form step (no GPU)"
    fi
  done
done

# Which kernels the tuned step ran: with NVIDIA's profiler on the machine, their names, and how
# many are tensor-core kernels (cuBLAS's and cuDNN's name theirs xmma, hmma, tensorop, tf32...).
if [ "$gpu" = 1 ] && command -v nsys >/dev/null 2>&1; then
  run kernels_tuned 150 nsys profile --stats=true --force-overwrite true -o "$out/tuned" \
    "${bench[@]}" --model resnet20 --batch "$big_batch" --precision bf16 --steps 20
  grep -iE "xmma|hmma|tensorop|tf32|bf16|s16816|s1688|gmma|wgmma" "$out/kernels_tuned.log" |
    head -n 10 >"$out/tensor_core_kernels.txt"
  echo "tensor-core kernels seen: $(wc -l <"$out/tensor_core_kernels.txt") (names in tensor_core_kernels.txt)"
else
  echo "skipped: the kernels' names (no GPU, or no nsys on this machine): tensor cores not verified"
fi

# The issue's accuracy bar: fmnist_cnn trained 3 epochs on the GPU (the dataset's files from
# FMNIST_DIR, by default Debian's dataset-fashion-mnist; a GPU machine without them skips).
data=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
if [ -e "$data/train-images-idx3-ubyte.gz" ] || [ -e "$data/train-images-idx3-ubyte" ]; then
  if [ "$gpu" = 1 ]; then
    train=(--epochs 3)
  else
    train=(--epochs 1 --limit_train 256 --limit_test 256)
  fi
  run train_device 240 "$build/trainer/ringlet" train --device "$device" "${train[@]}" \
    --data_dir "$data" --out "$out/train_device" --reset true
else
  echo "skipped: ringlet train on the device (no Fashion-MNIST in $data; set FMNIST_DIR)"
fi

say "3. collectives"
for np in 2 4; do
  run "all_reduce_np$np" 150 "$build/bench/all_reduce_perf" -np "$np" -g 1 -t ipc -b 8 \
    -e "$max_bytes" -f 4
done
run all_reduce_np2_threads 150 "$build/bench/all_reduce_perf" -np 2 --threads -g 1 -t ipc \
  -b 8 -e "$max_bytes" -f 4
run all_reduce_np1 60 "$build/bench/all_reduce_perf" -np 1 -g 1 -b 8 -e "$max_bytes" -f 4
# The algorithms past the ring on device buffers: 4 ranks as threads (one context), each forced.
for algo in ring rd rabenseifner tree; do
  run "all_reduce_np4_$algo" 40 env RINGLET_ALGO="$algo" "$build/bench/all_reduce_perf" -np 4 \
    --threads -g 1 -t ipc -b 8 -e "$algo_bytes" -f 8
done
if [ "$gpu" = 1 ]; then
  run copy_bandwidth 60 "$build/bench/reduce_kernel_bench" --sizes 64M,256M
  if [ -x "$build/bench/nccl_all_reduce_perf" ]; then
    run nccl_np1 60 "$build/bench/nccl_all_reduce_perf" -np 1 -b 8 -e "$max_bytes" -f 4
  else
    echo "skipped: NCCL's table (this build has no nccl_all_reduce_perf)"
  fi
else
  echo "skipped: the device-to-device copy and NCCL's table (no GPU)"
fi

say "4. DDP on one GPU"
run ddp_np2 180 "${bench[@]}" --model fmnist_cnn --batch 64 --nproc 2
if [ "$gpu" = 1 ]; then
  run torch_ddp_gloo 180 "$torch_py" "$here/peers/src/train_step_gpu.py" --nproc 2 \
    --backend gloo
  run torch_ddp_nccl 120 "$torch_py" "$here/peers/src/train_step_gpu.py" --nproc 2 \
    --backend nccl
else
  echo "skipped: PyTorch DDP (no GPU)"
fi

say "5. the table"
GPU_CHECK_GPU=$gpu "$torch_py" "$here/gpu_check_table.py" "$out" | tee "$out/table.txt"
echo "gpu_check: done in $((SECONDS - started)) s; logs and results.json in $out"
