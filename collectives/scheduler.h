// The communicator's scheduler: its channels (each a ring over its own mesh, with one progress
// thread and a queue) and the order ops run in. Ops run in issue order on each channel; a task
// queued on every channel carries a Gate, which channel 0 opens once the op's fingerprint
// matched. A small op issued while its channel is idle may run on the calling thread instead
// (run_inline), saving two thread hand-offs; the progress thread holds back meanwhile.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/context.h"
#include "collectives/fingerprint.h"
#include "collectives/work.h"
#include "core/deadline.h"
#include "transport/mesh.h"

namespace ringlet::collectives {

// Channels > 0 start a collective only after channel 0 checked the fingerprint.
class Gate {
 public:
  void open(bool matched);
  bool wait(core::Deadline deadline);  // true once opened as matched; false if failed or late

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int state_ = 0;  // 0 pending, 1 ok, -1 failed
};

// One channel's part of an op.
struct Task {
  std::function<void(ChannelContext&)> run;
  WorkPtr work;
  OpKind kind = OpKind::all_reduce;
  std::uint64_t seq = 0;
  bool collective = false;     // carries a fingerprint
  bool self_checked = false;   // its algorithm sends the fingerprint with its own messages
  Fingerprint fingerprint;     // checked by channel 0
  std::shared_ptr<Gate> gate;  // null for single-channel ops
  std::uint64_t record = 0;    // its flight recorder record (0: none)
};

class Scheduler {
 public:
  // How a channel runs a task (the communicator's: fingerprint, algorithm, failure handling).
  using Execute = std::function<void(ChannelContext&, Task&)>;
  // `rank` of `size`: the ring every channel's ops run over.
  Scheduler(int rank, int size, Execute execute);
  ~Scheduler();  // stop()

  // Before start(): adds a channel over `mesh`; returns its configuration for the caller to
  // fill in.
  ChannelConfig& add_channel(std::unique_ptr<transport::Mesh> mesh);
  void start();  // one progress thread per channel
  void stop();   // runs what is queued (the communicator fails it once aborted), joins

  int channels() const { return static_cast<int>(channels_.size()); }
  transport::Mesh& mesh(int channel) { return *channels_[channel]->mesh; }

  // Executes `task` on this thread if channel `channel` is idle (nothing queued, nothing
  // running). Returns false, the task untouched, otherwise.
  bool run_inline(int channel, Task& task);
  // Queues `task` on channel `channel`'s progress thread.
  void enqueue(int channel, Task task);

 private:
  struct Channel {
    ChannelConfig config;
    OpState op;
    AlgorithmStates states;
    std::unique_ptr<transport::Mesh> mesh;
    std::thread thread;
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Task> queue;
    bool busy = false;            // the progress thread is executing an op
    bool running_inline = false;  // a caller thread is executing an op of this channel
    bool stopping = false;
  };
  void loop(Channel& ch);
  void execute(Channel& ch, Task& task);

  int rank_, size_;
  Execute execute_;
  std::vector<std::unique_ptr<Channel>> channels_;
};

}  // namespace ringlet::collectives
