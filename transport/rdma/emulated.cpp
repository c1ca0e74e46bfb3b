// The emulated verbs provider: device "emu0", usable by the processes (and threads) of one
// host. Memory regions peers write live in shared mappings (emulated_layout.h); an RDMA write
// is a copy, by the posting thread, into the peer's mapping; a write with immediate takes a
// receive the peer posted and pushes the completion into the peer's shared ring. QP states and
// error completions follow the verbs specification (verbs.h). Faults to inject, per QP, from
// RINGLET_IB_EMU_FAULT: "drop_after=N" (after N writes the peer stops answering:
// retry_exceeded) or "qp_error_after=N" (the QP moves to error at its N+1-th write).
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "core/env.h"
#include "core/error.h"
#include "core/random.h"
#include "transport/rdma/emulated_layout.h"
#include "transport/rdma/shared_object.h"
#include "transport/rdma/verbs.h"
#include "transport/shared_objects.h"
#include "transport/shm/futex.h"
#include "transport/shm/process_watch.h"

namespace ringlet::transport::rdma {
namespace {

using emu::InboundCompletion;
using emu::kMaxWr;
using emu::QpShared;
using emu::RegionTable;

// How long a write with immediate waits for the peer to post a receive (the RNR retries).
constexpr auto kRnrWait = std::chrono::seconds(2);

std::string object_name(std::int32_t pid, std::uint32_t context, const std::string& what) {
  return shared_object_name(kRdmaEmuKind, pid, core::str(context, "-", what));
}

// The GID of an emulated context: fe80::/64 with the owner's pid and context number.
Gid make_gid(std::int32_t pid, std::uint32_t context) {
  Gid gid{};
  gid[0] = 0xfe;
  gid[1] = 0x80;
  for (int i = 0; i < 4; ++i) {
    gid[8 + i] = static_cast<std::uint8_t>(static_cast<std::uint32_t>(pid) >> (24 - 8 * i));
    gid[12 + i] = static_cast<std::uint8_t>(context >> (24 - 8 * i));
  }
  return gid;
}

std::pair<std::int32_t, std::uint32_t> owner_of(const Gid& gid) {
  std::uint32_t pid = 0, context = 0;
  for (int i = 0; i < 4; ++i) {
    pid = (pid << 8) | gid[8 + i];
    context = (context << 8) | gid[12 + i];
  }
  RINGLET_CHECK(gid[0] == 0xfe && gid[1] == 0x80 && pid > 0, ValueError,
                "rdma (emulated): the peer's GID is not an emulated device's");
  return {static_cast<std::int32_t>(pid), context};
}

struct Fault {
  enum class Kind { none, drop, qp_error } kind = Kind::none;
  std::uint64_t after = 0;
};

Fault parse_fault() {
  const auto text = core::env_string("RINGLET_IB_EMU_FAULT");
  if (!text || text->empty()) return {};
  const std::size_t eq = text->find('=');
  const std::string key = text->substr(0, eq);
  Fault fault;
  if (key == "drop_after") fault.kind = Fault::Kind::drop;
  if (key == "qp_error_after") fault.kind = Fault::Kind::qp_error;
  std::size_t used = 0;
  const std::string number = eq == std::string::npos ? "" : text->substr(eq + 1);
  try {
    fault.after = std::stoull(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  RINGLET_CHECK(fault.kind != Fault::Kind::none && !number.empty() && used == number.size() &&
                    number[0] != '-',
                ValueError, "RINGLET_IB_EMU_FAULT='", *text,
                "' is not drop_after=N or qp_error_after=N");
  return fault;
}

class EmuContext;
class EmuQp;

class EmuRegion : public MemoryRegion {
 public:
  EmuRegion(EmuContext& context, void* addr, std::size_t bytes, std::uint32_t lkey,
            std::optional<std::uint32_t> remote_index, std::uint32_t rkey)
      : context_(context),
        addr_(addr),
        bytes_(bytes),
        lkey_(lkey),
        remote_index_(remote_index),
        rkey_(rkey) {}
  ~EmuRegion() override;
  void* addr() const override { return addr_; }
  std::size_t bytes() const override { return bytes_; }
  std::uint32_t lkey() const override { return lkey_; }
  std::uint32_t rkey() const override { return rkey_; }

 private:
  EmuContext& context_;
  void* addr_;
  std::size_t bytes_;
  std::uint32_t lkey_;
  std::optional<std::uint32_t> remote_index_;
  std::uint32_t rkey_;
};

class EmuCq : public CompletionQueue {
 public:
  int poll(WorkCompletion* out, int max) override;
  void wait(std::chrono::microseconds max_wait) override;

  void push(WorkCompletion completion) {
    std::lock_guard lock(mutex_);
    local_.push_back(std::move(completion));
  }
  void attach(EmuQp* qp) {
    std::lock_guard lock(mutex_);
    sources_.push_back(qp);
  }
  void detach(EmuQp* qp) {
    std::lock_guard lock(mutex_);
    std::erase(sources_, qp);
  }

 private:
  std::mutex mutex_;
  std::deque<WorkCompletion> local_;  // send completions and flushed receives
  std::vector<EmuQp*> sources_;       // QPs whose inbound completions this CQ receives
};

// What a connected QP sees of its peer: the peer's QP, region table and allocations.
struct RemoteView {
  SharedObject qp_object;
  QpShared* qp = nullptr;
  SharedObject table_object;
  RegionTable* table = nullptr;
  std::map<std::uint32_t, SharedObject> allocations;
  std::unique_ptr<ProcessWatch> owner;
  std::int32_t pid = 0;
  std::uint32_t context = 0;
};

class EmuContext : public Context {
 public:
  explicit EmuContext(int port);
  ~EmuContext() override;

  std::string device_name() const override { return "emu0"; }
  bool emulated() const override { return true; }
  int port() const override { return port_; }
  PortInfo port_info() const override { return PortInfo{true, LinkLayer::ethernet, 0, 4096}; }
  Gid gid(int index) const override {
    RINGLET_CHECK(index == 0, ValueError, "rdma: the emulated device has one GID (index 0), not ",
                  index);
    return make_gid(pid_, number_);
  }
  int default_gid_index() const override { return 0; }
  void* allocate(std::size_t bytes) override;
  void release(void* memory) override;
  std::unique_ptr<MemoryRegion> register_memory(void* addr, std::size_t bytes,
                                                bool remote_write) override;
  std::unique_ptr<CompletionQueue> create_cq(int /*depth*/) override {
    return std::make_unique<EmuCq>();
  }
  std::unique_ptr<QueuePair> create_qp(CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                       const QpCaps& caps) override;

  // For regions and queue pairs.
  bool local_range_ok(std::uint32_t lkey, const void* addr, std::size_t bytes);
  void deregister(std::uint32_t lkey, std::optional<std::uint32_t> remote_index);
  std::string name_of(const std::string& what) const { return object_name(pid_, number_, what); }
  const Fault& fault() const { return fault_; }

 private:
  struct Allocation {
    SharedObject object;
    std::uint32_t index = 0;
  };
  struct LocalRegion {
    std::uintptr_t addr = 0;
    std::size_t bytes = 0;
  };

  int port_;
  std::int32_t pid_;
  std::uint32_t number_;
  Fault fault_;
  SharedObject table_object_;
  RegionTable* table_ = nullptr;
  std::mutex mutex_;
  std::map<std::uintptr_t, Allocation> allocations_;  // by start address
  std::uint32_t next_allocation_ = 0;
  std::map<std::uint32_t, LocalRegion> local_;  // by lkey
  std::uint32_t next_lkey_ = 1;
  std::uint32_t next_qp_ = 1;
};

class EmuQp : public QueuePair {
 public:
  EmuQp(EmuContext& context, EmuCq& send_cq, EmuCq& recv_cq, std::uint32_t qp_num);
  ~EmuQp() override;

  std::uint32_t qp_num() const override { return qp_num_; }
  QpState state() const override {
    return static_cast<QpState>(shared_->state.load(std::memory_order_acquire));
  }
  void to_init() override;
  void to_rtr(const QpEndpoint& remote) override;
  void to_rts(std::uint32_t local_psn) override;
  void to_error() override;
  void post_write(const WriteRequest& request) override;
  void post_recv(std::uint64_t wr_id) override;

  // For the receive CQ: moves inbound completions into `out`; how many.
  int take_inbound(WorkCompletion* out, int max);
  bool has_inbound() const {
    return shared_->cq_head.load(std::memory_order_acquire) >
           shared_->cq_tail.load(std::memory_order_relaxed);
  }
  std::atomic<std::uint32_t>& inbound_seq() { return shared_->cq_seq; }
  std::atomic<std::uint32_t>& inbound_sleeping() { return shared_->cq_sleeping; }

 private:
  void set_state(QpState state) {
    shared_->state.store(static_cast<std::uint32_t>(state), std::memory_order_release);
  }
  void require_state(QpState expected, const char* transition) const;
  // Fails the request and moves this QP to error (the verbs rule for a failed request).
  void fail(const WriteRequest& request, WcStatus status, const std::string& detail);
  // Why a write to the peer cannot be delivered now, or empty.
  std::string peer_unreachable() const;
  std::byte* remote_target(const WriteRequest& request, std::string& why);
  std::optional<std::uint64_t> take_remote_receive();
  void deliver_inbound(std::uint64_t wr_id, std::uint32_t bytes, std::uint32_t imm);

  EmuContext& context_;
  EmuCq& send_cq_;
  EmuCq& recv_cq_;
  std::uint32_t qp_num_;
  SharedObject object_;
  QpShared* shared_;
  std::mutex post_mutex_;
  std::optional<RemoteView> remote_;
  std::uint64_t writes_ = 0;
  bool dropped_ = false;
};

// --- EmuRegion ---------------------------------------------------------------------------------

EmuRegion::~EmuRegion() { context_.deregister(lkey_, remote_index_); }

// --- EmuCq -------------------------------------------------------------------------------------

int EmuCq::poll(WorkCompletion* out, int max) {
  std::lock_guard lock(mutex_);
  int n = 0;
  while (n < max && !local_.empty()) {
    out[n++] = std::move(local_.front());
    local_.pop_front();
  }
  for (EmuQp* qp : sources_) {
    if (n == max) break;
    n += qp->take_inbound(out + n, max - n);
  }
  return n;
}

void EmuCq::wait(std::chrono::microseconds max_wait) {
  EmuQp* source = nullptr;
  {
    std::lock_guard lock(mutex_);
    if (!local_.empty()) return;
    if (sources_.size() == 1) source = sources_.front();
  }
  if (source == nullptr) {  // nothing to sleep on: a short pause
    std::this_thread::sleep_for(std::min(max_wait, std::chrono::microseconds(50)));
    return;
  }
  wait_until_ready([&] { return source->has_inbound(); }, source->inbound_seq(),
                   source->inbound_sleeping(), max_wait);
}

// --- EmuContext ----------------------------------------------------------------------------------

EmuContext::EmuContext(int port)
    : port_(port),
      pid_(static_cast<std::int32_t>(getpid())),
      // Random, not counted: a killed job's leftovers under a recycled pid cannot collide.
      number_(static_cast<std::uint32_t>(core::random_u64())),
      fault_(parse_fault()) {
  RINGLET_CHECK(port == 1, ValueError, "rdma: the emulated device has one port (1), not ", port);
  sweep_shared_objects(kRdmaEmuKind, [](pid_t pid, const auto&) { return process_gone(pid); });
  table_object_ = SharedObject::create(name_of("mrs"), sizeof(RegionTable));
  table_ = new (table_object_.data()) RegionTable{};
  table_->version = emu::kLayoutVersion;
  table_->owner_pid = pid_;
  std::atomic_ref<std::uint64_t>(table_->magic).store(emu::kMrMagic, std::memory_order_release);
}

EmuContext::~EmuContext() = default;

void* EmuContext::allocate(std::size_t bytes) {
  RINGLET_CHECK(bytes > 0, ValueError, "rdma: allocate(0)");
  std::lock_guard lock(mutex_);
  const std::uint32_t index = next_allocation_++;
  SharedObject object = SharedObject::create(name_of(core::str("buf", index)), bytes);
  void* data = object.data();
  allocations_[reinterpret_cast<std::uintptr_t>(data)] = Allocation{std::move(object), index};
  return data;
}

void EmuContext::release(void* memory) {
  std::lock_guard lock(mutex_);
  allocations_.erase(reinterpret_cast<std::uintptr_t>(memory));
}

std::unique_ptr<MemoryRegion> EmuContext::register_memory(void* addr, std::size_t bytes,
                                                          bool remote_write) {
  RINGLET_CHECK(addr != nullptr && bytes > 0, ValueError, "rdma: registering an empty region");
  const auto start = reinterpret_cast<std::uintptr_t>(addr);
  std::lock_guard lock(mutex_);
  const std::uint32_t lkey = next_lkey_++;
  local_[lkey] = LocalRegion{start, bytes};
  if (!remote_write) return std::make_unique<EmuRegion>(*this, addr, bytes, lkey, std::nullopt, 0);

  auto it = allocations_.upper_bound(start);
  const bool inside =
      it != allocations_.begin() && (--it, start + bytes <= it->first + it->second.object.bytes());
  if (!inside) {
    local_.erase(lkey);
    RINGLET_THROW(ValueError,
                  "rdma (emulated): a region peers write into must lie in memory "
                  "from Context::allocate (the emulation shares only that)");
  }
  for (std::uint32_t index = 0; index < emu::kMaxRegions; ++index) {
    emu::RegionEntry& entry = table_->regions[index];
    const std::uint32_t generation = entry.generation.load(std::memory_order_relaxed);
    if (generation % 2 == 1) continue;
    entry.allocation = it->second.index;
    entry.offset = start - it->first;
    entry.addr = start;
    entry.bytes = bytes;
    entry.generation.store((generation + 1) & 0xffff, std::memory_order_release);
    const std::uint32_t rkey = emu::make_rkey(index, (generation + 1) & 0xffff);
    return std::make_unique<EmuRegion>(*this, addr, bytes, lkey, index, rkey);
  }
  local_.erase(lkey);
  RINGLET_THROW(ValueError, "rdma (emulated): more than ", emu::kMaxRegions,
                " regions registered for remote writes");
}

void EmuContext::deregister(std::uint32_t lkey, std::optional<std::uint32_t> remote_index) {
  std::lock_guard lock(mutex_);
  local_.erase(lkey);
  if (!remote_index) return;
  auto& generation = table_->regions[*remote_index].generation;
  generation.store((generation.load(std::memory_order_relaxed) + 1) & 0xffff,
                   std::memory_order_release);
}

bool EmuContext::local_range_ok(std::uint32_t lkey, const void* addr, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  const auto it = local_.find(lkey);
  if (it == local_.end()) return false;
  const auto start = reinterpret_cast<std::uintptr_t>(addr);
  return start >= it->second.addr && start - it->second.addr <= it->second.bytes &&
         bytes <= it->second.bytes - (start - it->second.addr);
}

std::unique_ptr<QueuePair> EmuContext::create_qp(CompletionQueue& send_cq, CompletionQueue& recv_cq,
                                                 const QpCaps& caps) {
  RINGLET_CHECK(
      caps.max_recv_wr > 0 && caps.max_recv_wr <= static_cast<int>(kMaxWr) && caps.max_send_wr > 0,
      ValueError, "rdma (emulated): queue sizes must be 1..", kMaxWr);
  auto* send = dynamic_cast<EmuCq*>(&send_cq);
  auto* recv = dynamic_cast<EmuCq*>(&recv_cq);
  RINGLET_CHECK(send != nullptr && recv != nullptr, ValueError,
                "rdma: a queue pair needs completion queues of its own device");
  std::uint32_t number = 0;
  {
    std::lock_guard lock(mutex_);
    number = next_qp_++;
  }
  return std::make_unique<EmuQp>(*this, *send, *recv, number);
}

// --- EmuQp -------------------------------------------------------------------------------------

EmuQp::EmuQp(EmuContext& context, EmuCq& send_cq, EmuCq& recv_cq, std::uint32_t qp_num)
    : context_(context),
      send_cq_(send_cq),
      recv_cq_(recv_cq),
      qp_num_(qp_num),
      object_(SharedObject::create(context.name_of(core::str("qp", qp_num)), sizeof(QpShared))),
      shared_(new (object_.data()) QpShared{}) {
  shared_->version = emu::kLayoutVersion;
  shared_->owner_pid = static_cast<std::int32_t>(getpid());
  shared_->qp_num = qp_num;
  set_state(QpState::reset);
  std::atomic_ref<std::uint64_t>(shared_->magic).store(emu::kQpMagic, std::memory_order_release);
  recv_cq_.attach(this);
}

EmuQp::~EmuQp() {
  set_state(QpState::error);  // a peer still writing sees a QP that no longer answers
  recv_cq_.detach(this);
}

void EmuQp::require_state(QpState expected, const char* transition) const {
  const QpState now = state();
  RINGLET_CHECK(now == expected, Error, "rdma (emulated): QP ", qp_num_, " cannot go to ",
                transition, " from ", qp_state_name(now), " (needs ", qp_state_name(expected), ")");
}

void EmuQp::to_init() {
  require_state(QpState::reset, "INIT");
  set_state(QpState::init);
}

void EmuQp::to_rtr(const QpEndpoint& remote) {
  require_state(QpState::init, "RTR");
  const auto [pid, number] = owner_of(remote.gid);
  RemoteView view;
  view.pid = pid;
  view.context = number;
  view.qp_object = SharedObject::open(object_name(pid, number, core::str("qp", remote.qp_num)));
  view.qp = static_cast<QpShared*>(view.qp_object.data());
  view.table_object = SharedObject::open(object_name(pid, number, "mrs"));
  view.table = static_cast<RegionTable*>(view.table_object.data());
  RINGLET_CHECK(view.qp_object.bytes() >= sizeof(QpShared) &&
                    std::atomic_ref<std::uint64_t>(view.qp->magic).load() == emu::kQpMagic &&
                    view.qp->version == emu::kLayoutVersion &&
                    view.table_object.bytes() >= sizeof(RegionTable) &&
                    std::atomic_ref<std::uint64_t>(view.table->magic).load() == emu::kMrMagic,
                Error, "rdma (emulated): QP ", remote.qp_num, " of process ", pid,
                " is not an emulated queue pair of this version");
  view.owner = std::make_unique<ProcessWatch>(static_cast<pid_t>(pid));
  std::lock_guard lock(post_mutex_);
  remote_ = std::move(view);
  set_state(QpState::rtr);
}

void EmuQp::to_rts(std::uint32_t /*local_psn*/) {
  require_state(QpState::rtr, "RTS");
  set_state(QpState::rts);
}

void EmuQp::to_error() {
  set_state(QpState::error);
  // Flush the receives nobody consumed; a peer's write may take one concurrently, so each is
  // claimed with a compare-and-swap on the tail.
  std::uint64_t tail = shared_->rq_tail.load(std::memory_order_acquire);
  while (tail < shared_->rq_head.load(std::memory_order_acquire)) {
    const std::uint64_t wr_id = shared_->rq[tail % kMaxWr];
    if (shared_->rq_tail.compare_exchange_weak(tail, tail + 1, std::memory_order_acq_rel)) {
      recv_cq_.push(WorkCompletion{wr_id, WcStatus::flushed, WcOpcode::recv_rdma_with_imm, 0, 0,
                                   "flushed: the QP moved to the error state"});
      ++tail;
    }
  }
}

void EmuQp::post_recv(std::uint64_t wr_id) {
  const QpState now = state();
  RINGLET_CHECK(now != QpState::reset, Error, "rdma (emulated): post_recv on QP ", qp_num_,
                " in RESET");
  if (now == QpState::error) {
    recv_cq_.push(WorkCompletion{wr_id, WcStatus::flushed, WcOpcode::recv_rdma_with_imm, 0, 0,
                                 "flushed: the QP is in the error state"});
    return;
  }
  const std::uint64_t head = shared_->rq_head.load(std::memory_order_relaxed);
  // Bounded by the completions not yet polled too: each taken receive becomes one.
  RINGLET_CHECK(head - shared_->cq_tail.load(std::memory_order_acquire) < kMaxWr, Error,
                "rdma (emulated): the receive queue of QP ", qp_num_, " is full (", kMaxWr, ")");
  shared_->rq[head % kMaxWr] = wr_id;
  shared_->rq_head.store(head + 1, std::memory_order_release);
}

int EmuQp::take_inbound(WorkCompletion* out, int max) {
  std::uint64_t tail = shared_->cq_tail.load(std::memory_order_relaxed);
  const std::uint64_t head = shared_->cq_head.load(std::memory_order_acquire);
  int n = 0;
  for (; n < max && tail < head; ++n, ++tail) {
    const InboundCompletion& c = shared_->cq[tail % kMaxWr];
    out[n] = WorkCompletion{
        c.wr_id, WcStatus::success, WcOpcode::recv_rdma_with_imm, c.byte_len, c.imm, ""};
  }
  shared_->cq_tail.store(tail, std::memory_order_release);
  return n;
}

void EmuQp::fail(const WriteRequest& request, WcStatus status, const std::string& detail) {
  send_cq_.push(WorkCompletion{request.wr_id, status, WcOpcode::rdma_write, 0, 0, detail});
  to_error();
}

std::string EmuQp::peer_unreachable() const {
  if (dropped_) return "the peer stopped answering (injected: RINGLET_IB_EMU_FAULT)";
  if (remote_->owner->exited()) {
    return core::str("the peer's process ", remote_->pid, " is gone");
  }
  const auto peer_state = static_cast<QpState>(remote_->qp->state.load(std::memory_order_acquire));
  if (peer_state != QpState::rtr && peer_state != QpState::rts) {
    return core::str("the peer's QP ", remote_->qp->qp_num, " is in ", qp_state_name(peer_state));
  }
  return "";
}

std::byte* EmuQp::remote_target(const WriteRequest& request, std::string& why) {
  const std::uint32_t index = request.rkey & 0xffff;
  const std::uint32_t generation = request.rkey >> 16;
  if (index >= emu::kMaxRegions) {
    why = core::str("rkey ", request.rkey, " names no region");
    return nullptr;
  }
  const emu::RegionEntry& entry = remote_->table->regions[index];
  if (entry.generation.load(std::memory_order_acquire) != generation || generation % 2 == 0) {
    why = core::str("rkey ", request.rkey, " is not registered at the peer");
    return nullptr;
  }
  const std::uint64_t region_addr = entry.addr;
  const std::uint64_t region_bytes = entry.bytes;
  const std::uint64_t region_offset = entry.offset;
  const std::uint32_t allocation = entry.allocation;
  std::atomic_thread_fence(std::memory_order_acquire);
  if (entry.generation.load(std::memory_order_relaxed) != generation) {  // changed meanwhile
    why = core::str("rkey ", request.rkey, " was deregistered at the peer");
    return nullptr;
  }
  const std::uint64_t offset = request.remote_addr - region_addr;
  if (request.remote_addr < region_addr || offset > region_bytes ||
      request.bytes > region_bytes - offset) {
    why = core::str("bytes [", request.remote_addr, ", +", request.bytes,
                    ") are outside the peer's region of rkey ", request.rkey);
    return nullptr;
  }
  auto it = remote_->allocations.find(allocation);
  if (it == remote_->allocations.end()) {
    SharedObject object = SharedObject::open(
        object_name(remote_->pid, remote_->context, core::str("buf", allocation)));
    it = remote_->allocations.emplace(allocation, std::move(object)).first;
  }
  if (region_offset + offset + request.bytes > it->second.bytes()) {
    why = "the peer's region table is inconsistent with its memory";
    return nullptr;
  }
  return static_cast<std::byte*>(it->second.data()) + region_offset + offset;
}

std::optional<std::uint64_t> EmuQp::take_remote_receive() {
  QpShared& peer = *remote_->qp;
  const auto deadline = std::chrono::steady_clock::now() + kRnrWait;
  while (true) {
    std::uint64_t tail = peer.rq_tail.load(std::memory_order_acquire);
    if (tail < peer.rq_head.load(std::memory_order_acquire)) {
      const std::uint64_t wr_id = peer.rq[tail % kMaxWr];
      if (peer.rq_tail.compare_exchange_strong(tail, tail + 1, std::memory_order_acq_rel)) {
        return wr_id;
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline || !peer_unreachable().empty()) {
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

void EmuQp::deliver_inbound(std::uint64_t wr_id, std::uint32_t bytes, std::uint32_t imm) {
  QpShared& peer = *remote_->qp;
  const std::uint64_t head = peer.cq_head.load(std::memory_order_relaxed);
  peer.cq[head % kMaxWr] = InboundCompletion{wr_id, bytes, imm};
  peer.cq_head.store(head + 1, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (peer.cq_sleeping.load(std::memory_order_relaxed) != 0) {
    peer.cq_seq.fetch_add(1, std::memory_order_release);
    futex_wake_all(&peer.cq_seq);
  }
}

void EmuQp::post_write(const WriteRequest& request) {
  std::lock_guard lock(post_mutex_);
  const QpState now = state();
  if (now == QpState::error) {
    send_cq_.push(WorkCompletion{request.wr_id, WcStatus::flushed, WcOpcode::rdma_write, 0, 0,
                                 "flushed: the QP is in the error state"});
    return;
  }
  RINGLET_CHECK(now == QpState::rts, Error, "rdma (emulated): post_write on QP ", qp_num_, " in ",
                qp_state_name(now), " (needs RTS)");
  RINGLET_CHECK(request.bytes <= 0xffffffffu, ValueError, "rdma: one write carries at most 4 GiB");
  const Fault& fault = context_.fault();
  if (fault.kind == Fault::Kind::qp_error && writes_ >= fault.after) {
    to_error();
    send_cq_.push(WorkCompletion{request.wr_id, WcStatus::flushed, WcOpcode::rdma_write, 0, 0,
                                 "flushed: the QP was moved to error (RINGLET_IB_EMU_FAULT)"});
    return;
  }
  if (fault.kind == Fault::Kind::drop && writes_ >= fault.after) dropped_ = true;
  ++writes_;
  if (request.bytes > 0 && !context_.local_range_ok(request.lkey, request.local, request.bytes)) {
    return fail(request, WcStatus::local_protection,
                core::str("the local buffer is not inside the region of lkey ", request.lkey));
  }
  if (const std::string why = peer_unreachable(); !why.empty()) {
    return fail(request, WcStatus::retry_exceeded, why);
  }
  if (request.bytes > 0) {
    std::string why;
    std::byte* target = remote_target(request, why);
    if (target == nullptr) return fail(request, WcStatus::remote_access, why);
    std::memcpy(target, request.local, request.bytes);
  }
  if (request.with_imm) {
    const auto wr_id = take_remote_receive();
    if (!wr_id) {
      const std::string why = peer_unreachable();
      return fail(request, why.empty() ? WcStatus::rnr_exceeded : WcStatus::retry_exceeded,
                  why.empty() ? "the peer posted no receive in time" : why);
    }
    deliver_inbound(*wr_id, static_cast<std::uint32_t>(request.bytes), request.imm);
  }
  if (request.signaled) {
    send_cq_.push(WorkCompletion{request.wr_id, WcStatus::success, WcOpcode::rdma_write,
                                 static_cast<std::uint32_t>(request.bytes), 0, ""});
  }
}

class EmuProvider : public Provider {
 public:
  const char* name() const override { return "emulated"; }
  std::vector<std::string> devices() override { return {"emu0"}; }
  std::unique_ptr<Context> open(const std::string& device, int port) override {
    RINGLET_CHECK(device == "emu0", ValueError,
                  "rdma: the emulated provider has device emu0, not '", device, "'");
    return std::make_unique<EmuContext>(port);
  }
};

}  // namespace

Provider& emulated_provider() {
  static EmuProvider provider;
  return provider;
}

}  // namespace ringlet::transport::rdma
