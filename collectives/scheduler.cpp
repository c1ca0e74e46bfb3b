// Scheduler: per-channel progress threads, issue order, inline runs.
#include "collectives/scheduler.h"

#include "core/thread_name.h"

namespace ringlet::collectives {

void Gate::open(bool matched) {
  {
    std::lock_guard lock(mutex_);
    state_ = matched ? 1 : -1;
  }
  cv_.notify_all();
}

bool Gate::wait(core::Deadline deadline) {
  std::unique_lock lock(mutex_);
  core::wait_until(cv_, lock, deadline, [this] { return state_ != 0; });
  return state_ == 1;
}

Scheduler::Scheduler(int rank, int size, Execute execute)
    : rank_(rank), size_(size), execute_(std::move(execute)) {}

Scheduler::~Scheduler() { stop(); }

ChannelConfig& Scheduler::add_channel(std::unique_ptr<transport::Mesh> mesh) {
  auto ch = std::make_unique<Channel>();
  ch->mesh = std::move(mesh);
  ch->config.mesh = ch->mesh.get();
  ch->config.channel = static_cast<int>(channels_.size());
  channels_.push_back(std::move(ch));
  return channels_.back()->config;
}

// The channel's whole ring as the view its task runs on.
void Scheduler::execute(Channel& ch, Task& task) {
  ChannelContext ctx(ch.config, ch.op, ch.states, rank_, size_);
  execute_(ctx, task);
}

void Scheduler::start() {
  for (auto& ch : channels_)
    ch->thread = std::thread([this, c = ch.get()] {
      core::name_this_thread("rl-channel");
      loop(*c);
    });
}

void Scheduler::stop() {
  for (auto& ch : channels_) {
    {
      std::lock_guard lock(ch->mutex);
      ch->stopping = true;
    }
    ch->cv.notify_all();
  }
  for (auto& ch : channels_) {
    if (ch->thread.joinable()) ch->thread.join();
  }
}

void Scheduler::loop(Channel& ch) {
  while (true) {
    Task task;
    {
      std::unique_lock lock(ch.mutex);
      ch.cv.wait(lock, [&] { return !ch.running_inline && (ch.stopping || !ch.queue.empty()); });
      if (ch.queue.empty()) return;
      task = std::move(ch.queue.front());
      ch.queue.pop_front();
      ch.busy = true;
    }
    execute(ch, task);
    std::lock_guard lock(ch.mutex);
    ch.busy = false;
  }
}

bool Scheduler::run_inline(int channel, Task& task) {
  Channel& ch = *channels_[channel];
  {
    std::lock_guard lock(ch.mutex);
    if (!ch.queue.empty() || ch.busy || ch.running_inline) return false;
    ch.running_inline = true;
  }
  execute(ch, task);
  bool queued;
  {
    std::lock_guard lock(ch.mutex);
    ch.running_inline = false;
    queued = !ch.queue.empty();
  }
  if (queued) ch.cv.notify_all();  // ops issued meanwhile by other threads
  return true;
}

void Scheduler::enqueue(int channel, Task task) {
  Channel& ch = *channels_[channel];
  {
    std::lock_guard lock(ch.mutex);
    ch.queue.push_back(std::move(task));
  }
  ch.cv.notify_one();
}

}  // namespace ringlet::collectives
