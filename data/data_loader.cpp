// DataLoader workers share one claim counter: a worker takes the next batch number only while
// fewer than `capacity` batches are claimed but not yet delivered, builds it outside the lock,
// and files it under its number. next() waits (with a deadline) for exactly the number it is
// due to return, so the order never depends on which worker was faster. Augmentation is
// seeded per example from (seed, epoch, dataset index), so content does not either.
#include "data/data_loader.h"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "core/deadline.h"
#include "core/error.h"
#include "core/log.h"
#include "tensor/ops/creation.h"

namespace ringlet::data {

using tensor::Tensor;

struct EpochIterator::State {
  // Fixed before the workers start.
  std::shared_ptr<const Dataset> dataset;
  std::shared_ptr<const Transform> transform;
  std::vector<std::int64_t> indices;
  DataLoaderOptions options;
  std::int64_t epoch = 0;
  std::int64_t num_batches = 0;
  std::int64_t capacity = 0;         // batches claimed but not yet delivered, at most
  std::vector<std::thread> threads;  // touched by the consumer thread only

  struct Slot {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };
  std::mutex mu;
  std::condition_variable ready_cv;   // a batch was filed, or a worker exited
  std::condition_variable space_cv;   // a batch was delivered, or stop / failure
  std::int64_t next_claim = 0;        // guarded by mu
  std::int64_t next_deliver = 0;      // guarded by mu
  std::map<std::int64_t, Slot> done;  // guarded by mu
  bool failed = false;                // a worker threw: nothing more is claimed
  int live_workers = 0;
  std::vector<char> exited;       // per worker, guarded by mu
  std::atomic<bool> stop{false};  // read between examples so shutdown is prompt

  std::exception_ptr delivered_error;  // consumer thread only: rethrown by every next()
};

namespace {

using State = EpochIterator::State;

// Builds batch `number`; nullopt when asked to stop part-way.
std::optional<Batch> build_batch(const State& s, std::int64_t number) {
  const std::int64_t n = static_cast<std::int64_t>(s.indices.size());
  const std::int64_t begin = number * s.options.batch_size;
  const std::int64_t end = std::min(begin + s.options.batch_size, n);
  std::vector<Example> examples;
  examples.reserve(static_cast<std::size_t>(end - begin));
  for (std::int64_t j = begin; j < end; ++j) {
    if (s.stop.load(std::memory_order_relaxed)) return std::nullopt;
    const std::int64_t index = s.indices[static_cast<std::size_t>(j)];
    Example ex = s.dataset->get(index);
    if (s.transform) {
      SampleRng rng(s.options.seed, s.epoch, index);
      ex.image = s.transform->apply(ex.image, rng);
    }
    examples.push_back(std::move(ex));
  }
  Batch batch = collate(examples);
  batch.indices.assign(s.indices.begin() + begin, s.indices.begin() + end);
  batch.number = number;
  return batch;
}

void worker_loop(std::shared_ptr<State> state, std::size_t id) {
  State& s = *state;
  std::unique_lock lock(s.mu);
  while (true) {
    // Unbounded by design: a worker waits for the consumer to take a batch, which may be
    // slow for good reasons (a long evaluation); destroying the iterator sets `stop` and
    // wakes it, so this wait never outlives its iterator. next() has the deadline.
    s.space_cv.wait(lock, [&] {
      return s.stop || s.failed || s.next_claim >= s.num_batches ||
             s.next_claim < s.next_deliver + s.capacity;
    });
    if (s.stop || s.failed || s.next_claim >= s.num_batches) break;
    const std::int64_t number = s.next_claim++;
    lock.unlock();
    State::Slot slot;
    try {
      slot.batch = build_batch(s, number);
    } catch (...) {
      slot.error = std::current_exception();
    }
    lock.lock();
    if (!slot.batch && !slot.error) break;  // stopped part-way
    if (slot.error) {
      s.failed = true;
      s.space_cv.notify_all();  // let idle workers exit
    }
    s.done.emplace(number, std::move(slot));
    s.ready_cv.notify_all();
  }
  s.exited[id] = 1;
  --s.live_workers;
  s.ready_cv.notify_all();
}

// rows[i] of one shape and dtype, stacked into [rows.size(), ...] (what: "input", "target").
Tensor stack_rows(const std::vector<Tensor>& rows, const char* what) {
  const Tensor& first = rows.front();
  tensor::Shape shape{static_cast<std::int64_t>(rows.size())};
  shape.insert(shape.end(), first.shape().begin(), first.shape().end());
  Tensor out = Tensor::empty(shape, first.dtype());
  const std::size_t bytes = first.nbytes();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    RINGLET_CHECK(rows[i].defined(), ValueError, "collate: example ", i, " has no ", what,
                  ", example 0 has one");
    RINGLET_CHECK(rows[i].shape() == first.shape(), ShapeError, "collate: ", what, " ", i,
                  " has shape ", tensor::shape_str(rows[i].shape()), ", ", what, " 0 has ",
                  tensor::shape_str(first.shape()));
    RINGLET_CHECK(rows[i].dtype() == first.dtype(), DTypeError, "collate: ", what, " ", i,
                  " has dtype ", rows[i].dtype(), ", ", what, " 0 has ", first.dtype());
    const Tensor src = rows[i].contiguous();
    std::memcpy(static_cast<char*>(out.raw_data()) + i * bytes, src.raw_data(), bytes);
  }
  return out;
}

// Examples with targets: inputs and targets of any shape and dtype, each stacked.
Batch collate_targets(const std::vector<Example>& examples) {
  std::vector<Tensor> inputs, targets;
  for (const Example& ex : examples) {
    inputs.push_back(ex.image);
    targets.push_back(ex.target);
  }
  Batch batch;
  batch.images = stack_rows(inputs, "input");
  batch.labels = stack_rows(targets, "target");
  return batch;
}

}  // namespace

Batch collate(const std::vector<Example>& examples) {
  RINGLET_CHECK(!examples.empty(), ValueError, "collate: no examples");
  if (examples.front().target.defined()) return collate_targets(examples);
  const tensor::Shape& shape = examples.front().image.shape();
  RINGLET_CHECK(shape.size() == 3, ShapeError, "collate: expected images [C, H, W], got ",
                tensor::shape_str(shape));
  const auto b = static_cast<std::int64_t>(examples.size());
  Batch batch;
  batch.images = Tensor::empty({b, shape[0], shape[1], shape[2]}, core::DType::f32);
  batch.labels = Tensor::empty({b}, core::DType::i64);
  const std::int64_t per_image = tensor::shape_numel(shape);
  float* out = batch.images.data<float>();
  std::int64_t* labels = batch.labels.data<std::int64_t>();
  for (std::int64_t i = 0; i < b; ++i) {
    const Example& ex = examples[static_cast<std::size_t>(i)];
    RINGLET_CHECK(!ex.target.defined(), ValueError, "collate: example ", i,
                  " has a target, example 0 has none");
    RINGLET_CHECK(ex.image.dtype() == core::DType::f32, DTypeError, "collate: image ", i,
                  " has dtype ", ex.image.dtype(),
                  ", expected f32 (add ToFloat to the transforms)");
    RINGLET_CHECK(ex.image.shape() == shape, ShapeError, "collate: image ", i, " has shape ",
                  tensor::shape_str(ex.image.shape()), ", image 0 has ", tensor::shape_str(shape));
    const Tensor src = ex.image.contiguous();
    std::copy_n(src.data<float>(), per_image, out + i * per_image);
    labels[i] = ex.label;
  }
  return batch;
}

EpochIterator::EpochIterator(std::shared_ptr<State> state) : state_(std::move(state)) {}
EpochIterator::EpochIterator(EpochIterator&& other) noexcept = default;
EpochIterator& EpochIterator::operator=(EpochIterator&& other) noexcept {
  if (this != &other) {
    shutdown();
    state_ = std::move(other.state_);
  }
  return *this;
}
EpochIterator::~EpochIterator() { shutdown(); }

std::int64_t EpochIterator::num_batches() const { return state_ ? state_->num_batches : 0; }

std::optional<Batch> EpochIterator::next() {
  RINGLET_CHECK(state_ != nullptr, ValueError, "EpochIterator::next() on a moved-from iterator");
  State& s = *state_;
  if (s.delivered_error) std::rethrow_exception(s.delivered_error);
  std::unique_lock lock(s.mu);
  const std::int64_t number = s.next_deliver;
  if (number >= s.num_batches) return std::nullopt;
  if (s.threads.empty()) {  // no workers: build here
    lock.unlock();
    try {
      auto batch = build_batch(s, number);
      ++s.next_deliver;
      return batch;
    } catch (...) {
      s.delivered_error = std::current_exception();
      throw;
    }
  }
  const bool ready = core::wait_until(s.ready_cv, lock, core::Deadline::after(s.options.timeout),
                                      [&] { return s.done.count(number) > 0; });
  if (!ready) {
    throw core::TimeoutError(
        core::str("DataLoader: batch ", number, " of ", s.num_batches, " (epoch ", s.epoch,
                  ") not ready after ", s.options.timeout.count(), " ms with ", s.threads.size(),
                  " workers; a dataset get() or transform is stuck or very slow"));
  }
  auto node = s.done.extract(number);
  ++s.next_deliver;
  lock.unlock();
  s.space_cv.notify_all();
  if (node.mapped().error) {
    s.delivered_error = node.mapped().error;
    std::rethrow_exception(s.delivered_error);
  }
  return std::move(node.mapped().batch);
}

void EpochIterator::shutdown() noexcept {
  if (!state_) return;
  State& s = *state_;
  if (!s.threads.empty()) {
    std::unique_lock lock(s.mu);
    s.stop = true;
    s.space_cv.notify_all();
    // Workers check `stop` between examples, so they exit within one get() + transform; a
    // worker stuck longer than the timeout is detached (it owns a reference to the state).
    const bool all = core::wait_until(s.ready_cv, lock, core::Deadline::after(s.options.timeout),
                                      [&] { return s.live_workers == 0; });
    const std::vector<char> exited = s.exited;
    lock.unlock();
    for (std::size_t w = 0; w < s.threads.size(); ++w) {
      if (exited[w]) {
        s.threads[w].join();
      } else {
        s.threads[w].detach();
      }
    }
    if (!all)
      core::log(core::LogLevel::warn, "DataLoader: detached workers stuck for over ",
                s.options.timeout.count(), " ms at shutdown");
  }
  state_.reset();
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options,
                       std::shared_ptr<const Transform> transform, std::shared_ptr<Sampler> sampler)
    : dataset_(std::move(dataset)),
      options_(options),
      transform_(std::move(transform)),
      sampler_(std::move(sampler)) {
  RINGLET_CHECK(dataset_ != nullptr, ValueError, "DataLoader: null dataset");
  RINGLET_CHECK(options_.batch_size > 0, ValueError, "DataLoader: batch_size must be > 0, got ",
                options_.batch_size);
  RINGLET_CHECK(options_.num_workers >= 0, ValueError, "DataLoader: num_workers must be >= 0, got ",
                options_.num_workers);
  RINGLET_CHECK(options_.prefetch_factor >= 1, ValueError,
                "DataLoader: prefetch_factor must be >= 1, got ", options_.prefetch_factor);
  RINGLET_CHECK(options_.timeout.count() > 0, ValueError, "DataLoader: timeout must be > 0");
  if (!sampler_) sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
}

std::int64_t DataLoader::num_batches() const {
  const std::int64_t n = sampler_->size(), bs = options_.batch_size;
  return options_.drop_last ? n / bs : (n + bs - 1) / bs;
}

EpochIterator DataLoader::begin_epoch(std::int64_t epoch, std::int64_t first_batch) {
  sampler_->set_epoch(epoch);
  auto state = std::make_shared<State>();
  state->dataset = dataset_;
  state->transform = transform_;
  state->indices = sampler_->indices();
  state->options = options_;
  state->epoch = epoch;
  const auto n = static_cast<std::int64_t>(state->indices.size());
  state->num_batches = options_.drop_last ? n / options_.batch_size
                                          : (n + options_.batch_size - 1) / options_.batch_size;
  RINGLET_CHECK(first_batch >= 0 && first_batch <= state->num_batches, ValueError,
                "DataLoader: epoch ", epoch, " has ", state->num_batches,
                " batches; cannot start at batch ", first_batch);
  state->next_claim = state->next_deliver = first_batch;
  state->capacity = static_cast<std::int64_t>(options_.num_workers) * options_.prefetch_factor;
  state->exited.assign(static_cast<std::size_t>(options_.num_workers), 0);
  EpochIterator it(state);  // from here on, its destructor stops whatever was started
  const int workers = static_cast<int>(
      std::min<std::int64_t>(options_.num_workers, state->num_batches - first_batch));
  state->threads.reserve(static_cast<std::size_t>(workers));
  for (int w = 0; w < workers; ++w) {
    {
      std::lock_guard lock(state->mu);
      ++state->live_workers;
    }
    try {
      state->threads.emplace_back(worker_loop, state, static_cast<std::size_t>(w));
    } catch (...) {
      std::lock_guard lock(state->mu);
      --state->live_workers;
      throw;
    }
  }
  return it;
}

}  // namespace ringlet::data
