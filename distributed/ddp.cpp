// DDP reducer: buckets, gradient hooks, in-order bucket launches and the final copy-back.
// Hooks hold the state through a weak_ptr: they stay registered on the parameters (autograd
// hooks cannot be removed) but do nothing once the DDP object is gone.
#include "distributed/ddp.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <mutex>

#include "core/log.h"
#include "collectives/device_space.h"
#include "tensor/autograd.h"
#include "tensor/ops.h"

namespace ringlet::distributed {

struct DistributedDataParallel::State : std::enable_shared_from_this<State> {
  struct Slot {
    std::size_t param;   // index into params
    std::size_t offset;  // in the bucket, elements
    std::size_t numel;
  };
  struct Bucket {
    tensor::Tensor flat;  // 1-D f32, the bucket's memory (views of it may be .grad)
    std::vector<Slot> slots;
    std::size_t size = 0;  // elements
    std::size_t pending = 0;
    collectives::WorkPtr work;
    tensor::Tensor wire;  // with a compression hook: the f16 / bf16 copy that is all-reduced
  };

  collectives::Communicator* comm = nullptr;
  collectives::BufferSpace* space = nullptr;  // the device's, or null on the host
  core::Device device;                        // where parameters and buckets live
  std::vector<std::string> names;
  std::vector<tensor::Tensor> params;
  std::vector<std::pair<std::size_t, std::size_t>> where;  // param -> (bucket, slot)
  std::vector<Bucket> buckets;
  std::vector<bool> ready;
  std::size_t arrived = 0;  // how many of ready are true
  bool end_queued = false;  // the end-of-backward callback is queued
  std::size_t next_launch = 0;
  bool sync = true;
  bool find_unused = false;
  bool broadcast_buffers = true;
  bool grad_as_view = false;
  std::chrono::steady_clock::duration last_wait{};  // the last finish's wait for its buckets
  float scale = 1;  // 1 / world size: the average is taken as each gradient enters its bucket
  std::vector<tensor::Tensor> views;  // param -> its slot of its bucket, shaped like the param
  std::vector<tensor::Tensor> buffers;
  std::vector<std::byte> staging;  // every buffer's bytes, padded to 4-byte words: one broadcast
  tensor::Tensor device_staging;   // the same words in device memory, for buffers on a device
  std::mutex mutex;  // hooks run on the backward thread; keep the bookkeeping simple and safe

  void reset() {
    for (auto& b : buckets) {
      b.pending = b.slots.size();
      b.work = nullptr;
    }
    std::fill(ready.begin(), ready.end(), false);
    arrived = 0;
    next_launch = 0;
  }

  void launch_ready_buckets() {
    while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
      const std::size_t k = next_launch++;
      Bucket& b = buckets[k];
      tensor::Tensor& sent = b.wire.defined() ? b.wire : b.flat;
      mark_ready(k, sent.nbytes());
      if (b.wire.defined()) tensor::copy_(b.wire, b.flat);  // compress: round to f16 / bf16
      void* data = sent.raw_data();
      b.work = comm->all_reduce(data, data, static_cast<std::size_t>(sent.numel()), sent.dtype(),
                                collectives::ReduceOp::sum, space);
    }
  }

  // Buckets in reverse parameter order (gradients of the last layers are ready first), by
  // PyTorch's rule: a parameter joins the open bucket, and the bucket closes once it holds at
  // least its cap. So a large parameter ends the bucket it joins rather than waiting for the
  // next one, and its all-reduce starts as soon as that bucket's gradients are in.
  void assign_buckets(const DDPOptions& options) {
    const auto cap_of = [&](std::size_t bucket) {
      const double mb = bucket == 0 ? options.first_bucket_mb : options.bucket_cap_mb;
      return static_cast<std::size_t>(mb * 1024 * 1024 / sizeof(float));
    };
    where.resize(params.size());
    ready.assign(params.size(), false);
    bool open = false;
    for (std::size_t k = params.size(); k-- > 0;) {
      const auto numel = static_cast<std::size_t>(params[k].numel());
      if (!open) buckets.emplace_back();
      Bucket& b = buckets.back();
      where[k] = {buckets.size() - 1, b.slots.size()};
      b.slots.push_back({k, b.size, numel});
      b.size += numel;
      open = b.size < cap_of(buckets.size() - 1);
    }
  }

  // Each bucket's memory (and its wire buffer with a compression hook), and each parameter's
  // view of its slot.
  void allocate_buckets(CommHook hook) {
    views.resize(params.size());
    const core::DType wire = hook == CommHook::fp16_compress   ? core::DType::f16
                             : hook == CommHook::bf16_compress ? core::DType::bf16
                                                               : core::DType::f32;
    for (auto& b : buckets) {
      const auto elements = static_cast<std::int64_t>(b.size);
      b.flat = tensor::Tensor::empty({elements}, core::DType::f32, device);
      if (wire != core::DType::f32) {
        b.wire = tensor::Tensor::empty({elements}, wire, device);
      }
      for (const auto& s : b.slots) {
        const tensor::Shape& shape = params[s.param].shape();
        views[s.param] =
            tensor::Tensor::make_view(b.flat.storage(), shape, tensor::contiguous_strides(shape),
                                      static_cast<std::int64_t>(s.offset), core::DType::f32);
      }
    }
  }

  // An instant on the trace's compute row (when tracing): bucket k's all-reduce starts now.
  // bytes: what its all-reduce moves (half the f32 bucket with a compression hook).
  void mark_ready(std::size_t k, std::size_t bytes) {
    collectives::Tracer& tracer = comm->tracer();
    if (!tracer.enabled()) return;
    collectives::TraceSpan span{core::str("bucket ", k, " ready"), "ddp", {}, {},
                                static_cast<std::int64_t>(k),      bytes};
    span.start = span.end = std::chrono::steady_clock::now();
    tracer.record(std::move(span));
  }

  // Rank 0's buffers to every rank in one broadcast of their bytes (BatchNorm's running
  // statistics are f32, its batch counters i64; a broadcast combines nothing, so one buffer of
  // 4-byte words carries both): one synchronization per forward, not one per buffer or dtype.
  void broadcast_buffers_from_rank0(core::Deadline deadline) {
    std::size_t total = 0;
    for (const auto& b : buffers) total += b.nbytes();
    if (total == 0) return;
    const std::size_t words = (total + 3) / 4;
    if (space != nullptr) {
      broadcast_on_device(words, deadline);
      return;
    }
    staging.assign(words * 4, std::byte{0});
    const auto each = [&](auto&& fn) {
      std::size_t offset = 0;
      for (const auto& b : buffers) {
        fn(static_cast<std::byte*>(b.raw_data()), staging.data() + offset, b.nbytes());
        offset += b.nbytes();
      }
    };
    if (comm->rank() == 0)
      each([](std::byte* b, std::byte* at, std::size_t n) { std::memcpy(at, b, n); });
    comm->broadcast(staging.data(), words, core::DType::i32, 0)->wait(deadline);
    if (comm->rank() != 0)
      each([](std::byte* b, std::byte* at, std::size_t n) { std::memcpy(b, at, n); });
  }

  // The same on the device: the buffers copied into one device buffer of words on the caller's
  // stream, broadcast, copied back once the stream has waited for it; the host never waits.
  void broadcast_on_device(std::size_t words, core::Deadline deadline) {
    if (!device_staging.defined() || device_staging.numel() != static_cast<std::int64_t>(words)) {
      device_staging =
          tensor::Tensor::empty({static_cast<std::int64_t>(words)}, tensor::DType::i32, device);
    }
    device::Runtime& rt = device::runtime(device);
    const device::Stream stream = device::current_stream(device);
    auto* flat = static_cast<std::byte*>(device_staging.raw_data());
    const auto copy_each = [&](bool into_flat) {
      std::size_t offset = 0;
      for (const auto& b : buffers) {
        auto* own = static_cast<std::byte*>(b.raw_data());
        rt.copy_async(into_flat ? flat + offset : own, into_flat ? own : flat + offset, b.nbytes(),
                      stream.handle());
        offset += b.nbytes();
      }
    };
    if (comm->rank() == 0) copy_each(true);
    auto work = comm->broadcast(flat, words, core::DType::i32, 0, space);
    collectives::wait_on_stream(work, stream, deadline);
    if (comm->rank() != 0) copy_each(false);
  }

  void on_grad(std::size_t index, const tensor::Tensor& grad) {
    std::lock_guard lock(mutex);
    if (!sync || ready[index]) return;
    const auto [bi, si] = where[index];
    Bucket& b = buckets[bi];
    const Slot& s = b.slots[si];
    const tensor::Tensor g = grad.dtype() == core::DType::f32
                                 ? grad.contiguous()
                                 : grad.to(core::DType::f32).contiguous();
    // Into the bucket already divided by the world size, as PyTorch's reducer does (the sum of
    // the scaled gradients is then the average, with no pass of its own).
    if (space != nullptr) {
      tensor::copy_(views[index], tensor::mul(g, static_cast<double>(scale)));
    } else {
      float* to = b.flat.data<float>() + s.offset;
      const float* from = g.data<float>();
      for (std::size_t i = 0; i < s.numel; ++i) to[i] = from[i] * scale;
    }
    if (grad_as_view) params[index].set_grad(views[index]);
    ready[index] = true;
    ++arrived;
    --b.pending;
    launch_ready_buckets();
    queue_end_of_backward();
  }

  // Once per backward pass, on its first gradient: finish the reduction when the pass ends.
  void queue_end_of_backward() {
    if (end_queued) return;
    end_queued = true;
    tensor::queue_backward_callback([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->end_of_backward();
    });
  }

  // The end of a backward pass that delivered gradients: the reduction finishes now if every
  // parameter's gradient is in (or find_unused_parameters fills the rest with zeros). Otherwise
  // it stays open for a later backward of the same step (several losses); the next forward
  // refuses an open one, naming the parameters without a gradient.
  void end_of_backward() {
    std::lock_guard lock(mutex);
    end_queued = false;
    if (arrived == params.size() || find_unused) finish();
  }

  std::vector<std::string> missing_names() const {
    std::vector<std::string> missing;
    for (std::size_t k = 0; k < params.size(); ++k) {
      if (!ready[k]) missing.push_back(names[k]);
    }
    return missing;
  }

  // Unused parameters (find_unused_parameters): zeros in their slots, and the buckets they
  // held back launched.
  void fill_unused() {
    for (std::size_t k = 0; k < params.size(); ++k) {
      if (ready[k]) continue;
      const auto [bi, si] = where[k];
      auto& b = buckets[bi];
      if (space != nullptr) {
        tensor::copy_(views[k], tensor::zeros({1}, core::DType::f32, device));
      } else {
        std::fill_n(b.flat.data<float>() + b.slots[si].offset, b.slots[si].numel, 0.0f);
      }
      if (grad_as_view) params[k].set_grad(views[k]);
      ready[k] = true;
      --b.pending;
    }
    arrived = params.size();
    launch_ready_buckets();
  }

  // Waits for every bucket (the stream waits, on a device) and puts the averages in each .grad.
  void wait_and_copy_back() {
    const collectives::TraceScope span(comm->tracer().enabled() ? &comm->tracer() : nullptr,
                                       "gradient sync wait", "ddp");
    const auto started = std::chrono::steady_clock::now();
    const auto deadline = core::Deadline::after(comm->timeout());
    for (auto& b : buckets) {
      if (space != nullptr) {  // the stream waits; the host goes on
        collectives::wait_on_stream(b.work, device::current_stream(device), deadline);
      } else {
        b.work->wait(deadline);
      }
      if (b.wire.defined()) tensor::copy_(b.flat, b.wire);  // decompress: widen to f32
      if (grad_as_view) continue;  // every .grad is already a view of its slot
      for (const auto& s : b.slots) copy_back(b, s);
    }
    last_wait = std::chrono::steady_clock::now() - started;
  }

  void copy_back(const Bucket& b, const Slot& s) {
    tensor::Tensor& p = params[s.param];
    tensor::Tensor grad = p.grad();
    if (!grad.defined()) {
      grad = tensor::Tensor::empty(p.shape(), core::DType::f32, device);
      p.set_grad(grad);
    }
    if (space != nullptr) {
      tensor::copy_(grad, views[s.param]);
    } else {
      std::memcpy(grad.data<float>(), b.flat.data<float>() + s.offset, s.numel * sizeof(float));
    }
  }

  // The step's reduction, finished: every gradient in (an error naming the missing ones, or
  // zeros with find_unused_parameters), every bucket waited for, the averages in .grad.
  void finish() {
    if (arrived < params.size()) {
      if (!find_unused) {
        const std::string list = core::join(missing_names(), ", ");
        discard();
        RINGLET_THROW(ValueError, "DDP: rank ", comm->rank(),
                      ": these parameters received no gradient in this backward: ", list,
                      ". Use every parameter in forward, or enable find_unused_parameters");
      }
      fill_unused();
    }
    wait_and_copy_back();
    reset();
  }

  // An unfinished step given up: the launched buckets waited for (their all-reduces write into
  // the buckets the next backward fills), then the bookkeeping reset.
  void discard() {
    const auto deadline = core::Deadline::after(comm->timeout());
    for (std::size_t k = 0; k < next_launch; ++k) buckets[k].work->wait(deadline);
    reset();
  }
};

CommHook parse_comm_hook(const std::string& name) {
  if (name == "none") return CommHook::none;
  if (name == "fp16_compress") return CommHook::fp16_compress;
  if (name == "bf16_compress") return CommHook::bf16_compress;
  RINGLET_THROW(ValueError, "unknown comm_hook '", name,
                "'; valid: none, fp16_compress, bf16_compress");
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 collectives::Communicator& comm,
                                                 DDPOptions options)
    : module_(std::move(module)), comm_(comm), state_(std::make_shared<State>()) {
  State& st = *state_;
  st.comm = &comm;
  st.space = options.device_space;
  st.find_unused = options.find_unused_parameters;
  st.broadcast_buffers = options.broadcast_buffers;
  st.grad_as_view = options.gradient_as_bucket_view;
  st.scale = 1.0f / static_cast<float>(comm.size());
  const auto deadline = [&] { return core::Deadline::after(comm.timeout()); };
  for (const auto& [name, p] : module_->named_parameters()) {
    RINGLET_CHECK(p.dtype() == core::DType::f32 && p.is_contiguous(), DTypeError, "DDP: parameter ",
                  name, " must be a contiguous f32 tensor");
    if (st.names.empty()) st.device = p.device();
    RINGLET_CHECK(p.device() == st.device, DeviceError, "DDP: parameter ", name, " is on ",
                  p.device(), ", the first on ", st.device, ": one device per rank");
    RINGLET_CHECK(st.device.is_cpu() == (st.space == nullptr), DeviceError, "DDP: parameters on ",
                  st.device,
                  st.space == nullptr ? " need the device's space (DDPOptions::device_space)"
                                      : " are on the host, but a device space was given");
    st.names.push_back(name);
    st.params.push_back(p);
  }
  // Same parameters everywhere: start from rank 0's values.
  for (auto& p : st.params) {
    comm.broadcast(p.raw_data(), static_cast<std::size_t>(p.numel()), p.dtype(), 0, st.space)
        ->wait(deadline());
  }
  for (const auto& [name, b] : module_->named_buffers()) {
    RINGLET_CHECK(b.is_contiguous(), ValueError, "DDP: buffer ", name, " must be contiguous");
    st.buffers.push_back(b);
  }
  st.broadcast_buffers_from_rank0(deadline());
  st.assign_buckets(options);
  st.allocate_buckets(options.comm_hook);
  st.reset();
  std::weak_ptr<State> weak = state_;
  for (std::size_t k = 0; k < st.params.size(); ++k) {
    st.params[k].register_hook([weak, k](const tensor::Tensor& grad) {
      if (auto s = weak.lock()) s->on_grad(k, grad);
    });
  }
  core::log(core::LogLevel::debug, "rank ", comm.rank(), ": DDP over ", st.params.size(),
            " parameters in ", st.buckets.size(), " bucket(s)");
}

DistributedDataParallel::~DistributedDataParallel() {
  State& st = *state_;
  std::lock_guard lock(st.mutex);
  if (st.arrived == 0) return;
  core::log(core::LogLevel::warn, "DDP: rank ", comm_.rank(),
            ": destroyed with the last step's gradient reduction unfinished; these parameters "
            "received no gradient: ",
            core::join(st.missing_names(), ", "));
  try {
    st.discard();
  } catch (const std::exception& e) {
    core::log(core::LogLevel::warn, "DDP: rank ", comm_.rank(), ": ", e.what());
  }
}

void DistributedDataParallel::check_step_finished() {
  State& st = *state_;
  std::lock_guard lock(st.mutex);
  if (st.arrived == 0) return;
  const std::string list = core::join(st.missing_names(), ", ");
  st.discard();
  RINGLET_THROW(ValueError, "DDP: rank ", comm_.rank(),
                ": expected the previous step's gradient reduction to have finished before a "
                "new forward; these parameters received no gradient in its backward: ",
                list, ". Use every parameter in forward, or enable find_unused_parameters");
}

tensor::Tensor DistributedDataParallel::forward(const tensor::Tensor& input) {
  check_step_finished();
  if (state_->broadcast_buffers && comm_.size() > 1) {
    state_->broadcast_buffers_from_rank0(core::Deadline::after(comm_.timeout()));
  }
  return module_->forward(input);
}

void DistributedDataParallel::finish_gradient_sync() {
  State& st = *state_;
  std::lock_guard lock(st.mutex);
  if (!st.sync || st.arrived == 0) return;  // nothing open: backward finished it
  st.finish();
}

std::chrono::steady_clock::duration DistributedDataParallel::last_sync_wait() const {
  std::lock_guard lock(state_->mutex);
  return state_->last_wait;
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(ddp) {
  std::lock_guard lock(ddp_.state_->mutex);
  ddp_.state_->sync = false;
}

DistributedDataParallel::NoSync::~NoSync() {
  std::lock_guard lock(ddp_.state_->mutex);
  ddp_.state_->sync = true;
}

std::size_t DistributedDataParallel::num_buckets() const { return state_->buckets.size(); }

std::vector<std::size_t> DistributedDataParallel::bucket_sizes() const {
  std::vector<std::size_t> out;
  for (const auto& b : state_->buckets) out.push_back(b.size);
  return out;
}

}  // namespace ringlet::distributed
