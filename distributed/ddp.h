// DistributedDataParallel: gradient averaging across ranks in the style of PyTorch DDP.
// - At construction every parameter and buffer is broadcast from rank 0.
// - Gradients are grouped into buckets in reverse parameter order; a bucket closes once it
//   holds at least its cap (first_bucket_mb for the first, bucket_cap_mb after), PyTorch's
//   assignment. Each parameter's gradient hook copies its gradient, divided by the world
//   size (as PyTorch's reducer does), into its bucket; a complete bucket's all-reduce (sum)
//   starts at once, in bucket order, on the communicator's progress thread, overlapping the
//   rest of backward.
// - Backward finishes the reduction, as PyTorch's does: the first gradient hook of a backward
//   pass queues a callback that runs when the pass ends (tensor::queue_backward_callback); once
//   every parameter's gradient is in, it waits for every bucket and copies the averages back
//   into each parameter's .grad. So `loss.backward(); optimizer.step()` is a correct DDP step.
//   A backward that left some parameters without a gradient leaves the step open (a second
//   backward of the same step may bring them); the next forward() refuses an open step, naming
//   them, as PyTorch's "Expected to have finished reduction in the prior iteration".
//   finish_gradient_sync() finishes an open step explicitly (and is a no-op after a backward
//   that finished it).
// - With gradient_as_bucket_view (PyTorch's option of that name) there is no copy: the hook
//   makes each .grad a view of its slot in the bucket, so it holds the average once the
//   bucket's all-reduce is done. Such a .grad is overwritten by the next backward; keep a clone
//   to hold on to it.
// - A parameter that got no gradient is an error naming it, unless find_unused_parameters
//   (then it contributes zeros). no_sync() skips the all-reduce for gradient accumulation.
// - On a device (options.device_space): parameters, buckets and buffers stay on the device.
//   A gradient enters its bucket by a device op on the current stream; a complete bucket's
//   all-reduce is issued at once (ordered after that stream by an event) and runs on the
//   space's communication stream; the end of backward makes the current stream wait for
//   every bucket (wait_on_stream), so the optimizer's kernels queue behind the all-reduces and
//   the host never waits. Buffers are broadcast the same way.
// - forward() first broadcasts the buffers (BatchNorm running stats) from rank 0, as PyTorch
//   does by default (broadcast_buffers), coalesced into one broadcast of all their bytes.
// - A communication hook (PyTorch's fp16_compress_hook / bf16_compress_hook): each complete
//   bucket, already divided by the world size, is rounded to f16 or bf16 into a wire buffer of
//   half the bytes, that buffer is all-reduced (summed in that precision), and the step's
//   finish widens the sums back into the f32 bucket. Half the bytes on the wire, at the cost of
//   rounding each gradient (f16 also flushes values below 6e-8 to zero and overflows above 65504;
//   bf16 keeps f32's range with 8 bits of mantissa).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "nn/module.h"

namespace ringlet::distributed {

// How a bucket travels: as it is, or compressed to half precision for the all-reduce.
enum class CommHook { none, fp16_compress, bf16_compress };
// "none" | "fp16_compress" | "bf16_compress"; anything else is a ValueError listing them.
CommHook parse_comm_hook(const std::string& name);

struct DDPOptions {
  // The device's space (collectives/device_space.h) when the module is on a device: buckets
  // live there, all-reduces run on the device and the caller's stream waits for them
  // (wait_on_stream: with device flags no host wait at all; host-driven ops on CUDA make the
  // host wait). Null for a module on the host.
  collectives::BufferSpace* device_space = nullptr;
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1;
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;
  bool gradient_as_bucket_view = false;
  CommHook comm_hook = CommHook::none;
};

class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<nn::Module> module, collectives::Communicator& comm,
                          DDPOptions options = {});
  // Logs a warning when a step's reduction was left open.
  ~DistributedDataParallel();

  // Refuses to start a step while the previous one's reduction is open (see above).
  tensor::Tensor forward(const tensor::Tensor& input);
  // Finishes an open step's reduction now; a no-op when backward finished it.
  void finish_gradient_sync();
  // How long the last finished reduction waited for its buckets after backward's last
  // gradient (the trace's "gradient sync wait").
  std::chrono::steady_clock::duration last_sync_wait() const;

  // While a NoSync lives, backward passes accumulate gradients locally without all-reduce.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
  };
  NoSync no_sync() { return NoSync(*this); }

  nn::Module& module() { return *module_; }
  std::size_t num_buckets() const;
  // Bucket sizes in elements, bucket 0 first (the one holding the last parameters).
  std::vector<std::size_t> bucket_sizes() const;

  struct State;

 private:
  // Throws the open step's error, the step given up (forward() calls it first).
  void check_step_finished();

  std::shared_ptr<nn::Module> module_;
  collectives::Communicator& comm_;
  std::shared_ptr<State> state_;
};

}  // namespace ringlet::distributed
