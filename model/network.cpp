// The virtual network's clock, links and scheduler (see network.h).
#include "model/network.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "core/error.h"

namespace ringlet::model {
namespace {

// A rank program's stack: the algorithms' frames, an exception's message and its unwinding.
constexpr std::size_t kStackBytes = 256 * 1024;

// The share of `working` bytes that a cache of `held` bytes does not hold.
double share_past(double working, double held) { return working > held ? 1 - held / working : 0; }

}  // namespace

VirtualNetwork::VirtualNetwork(NetworkShape shape, Profile profile)
    : shape_(shape), profile_(std::move(profile)) {
  RINGLET_CHECK(shape_.ranks >= 1 && shape_.per_host >= 0, ValueError,
                "simulated network: ", shape_.ranks, " ranks, ", shape_.per_host,
                " per host: needs at least one rank and a per-host count >= 0");
  const auto nics = static_cast<std::size_t>(shape_.hosts()) *
                    static_cast<std::size_t>(std::max(1, profile_.nics_per_host));
  nic_out_free_.assign(nics, 0.0);
  reading_peer_.assign(static_cast<std::size_t>(shape_.ranks), false);
  nic_in_free_.assign(nics, 0.0);
  if (profile_.cores_per_host > 0) {
    cores_.assign(static_cast<std::size_t>(shape_.hosts()), Cores(profile_.cores_per_host));
    for (int h = 0; h < shape_.hosts(); ++h) {
      turns_.emplace_back(ranks_on_host(shape_.first_rank(h)), profile_.cores_per_host);
    }
  } else {
    cores_.assign(static_cast<std::size_t>(shape_.ranks), Cores(1));
  }
}

// Events left in the queue (a run that threw) let go of their transfers.
VirtualNetwork::~VirtualNetwork() {
  while (!events_.empty()) pop_event();
}

VirtualNetwork::Flow& VirtualNetwork::flow(int from, int to) { return flows_.at(from, to); }

// The NIC a rank's messages to other hosts pass through: its host's, by its index there.
std::size_t VirtualNetwork::nic_of(int rank) const {
  const int k = std::max(1, profile_.nics_per_host);
  return static_cast<std::size_t>(shape_.host_of(rank)) * static_cast<std::size_t>(k) +
         static_cast<std::size_t>(shape_.local_rank(rank) % k);
}

Cores& VirtualNetwork::cores_of(int rank) {
  const int pool = profile_.cores_per_host > 0 ? shape_.host_of(rank) : rank;
  Cores& cores = cores_[static_cast<std::size_t>(pool)];
  cores.forget_before(now_);
  return cores;
}

// When a copying link's CPUs can move `cpu` seconds' worth of a message from `from` to `to`,
// at the earliest from `start`: the core of each end's rank at once (one core doing both copies
// where the two ranks share it, which takes twice as long). Books them; `cpu` becomes the time
// they take.
double VirtualNetwork::book_copies(int from, int to, double start, double& cpu) {
  Cores &a = cores_of(from), &b = cores_of(to);
  const int ca = run_core(from), cb = run_core(to);
  if (&a == &b && ca == cb) cpu *= 2;
  start = earliest_together(a, ca, b, cb, start, cpu);
  a.book(ca, start, cpu);
  if (&a != &b || ca != cb) b.book(cb, start, cpu);
  return start;
}

// The core of its host a rank starts on: the host's ranks in order, round the cores (a core of its
// own where the profile gives none per host).
int VirtualNetwork::home_core(int rank) const {
  if (profile_.cores_per_host <= 0) return 0;
  return shape_.local_rank(rank) % profile_.cores_per_host;
}

// The core the rank runs on: its own where its host has a core per rank, else the one it holds
// or last held in its host's turns (core_turns.h).
int VirtualNetwork::run_core(int rank) const {
  if (!oversubscribed(rank)) return home_core(rank);
  return turns_[static_cast<std::size_t>(shape_.host_of(rank))].core_of(shape_.local_rank(rank));
}

// Before the rank computes: a core of its host's, held until it waits; where all are held, the
// rank waits its turn (end_turn hands it the first one freed).
void VirtualNetwork::take_turn(int rank) {
  if (!oversubscribed(rank)) return;
  CoreTurns& turns = turns_[static_cast<std::size_t>(shape_.host_of(rank))];
  if (turns.take(shape_.local_rank(rank))) return;
  yield(rank);
  RINGLET_CHECK(turns.holds(shape_.local_rank(rank)), Error, "simulated network: rank ", rank,
                " resumed without a core to run on");
}

// The rank waits (or is done): its core goes to the rank that waited first for one, now.
void VirtualNetwork::end_turn(int rank) {
  if (!oversubscribed(rank)) return;
  const int host = shape_.host_of(rank);
  const int next = turns_[static_cast<std::size_t>(host)].release(shape_.local_rank(rank));
  if (next >= 0) schedule(now_, shape_.first_rank(host) + next, nullptr);
}

std::uint64_t VirtualNetwork::turns_passed() const {
  std::uint64_t passed = 0;
  for (const CoreTurns& t : turns_) passed += t.turns_passed();
  return passed;
}

// A link within a host whose CPUs move the bytes at a rate of their own (tcp loopback): there is
// no wire, the kernel's copies and its stack's work on the cores at the two ends are the link.
bool VirtualNetwork::cpus_are_wire(int from, int to) const {
  const LinkCost& link = profile_.intra;
  return link.copies && link.cpu_GBps > 0 && shape_.host_of(from) == shape_.host_of(to);
}

// A link within a host whose copies are the link (shm): the ranks' CPUs move the bytes at the
// link's own rate.
bool VirtualNetwork::copies_are_link(int from, int to) const {
  const LinkCost& link = profile_.intra;
  return link.copies && link.cpu_GBps <= 0 && shape_.host_of(from) == shape_.host_of(to);
}

// A message its link within a host sends whole (shm: up to in_place_bytes, written at once):
// the sender's core copies it in, then the receiver's copies it out.
bool VirtualNetwork::copied_whole(int from, int to, std::size_t bytes) const {
  return copies_are_link(from, to) && bytes <= profile_.intra.in_place_bytes;
}

// One of such a message's two copies. Within the cache, half the message's time on the link: one
// way, a copy in and then a copy out; a message each way at once costs each core a copy in and a
// copy out, no longer than one way, as the fit's exchanges up to 1 MiB measure. Past it, all of
// it: the two directions' copies take as long as one after the other (its exchanges of 16 MiB).
// Past the last level, longer still (past_last_level_slowing).
double VirtualNetwork::copy_whole_seconds(int rank, std::size_t bytes) const {
  const LinkCost& link = profile_.intra;
  const double line = static_cast<double>(bytes) / (link.bandwidth_GBps * 1e9);
  const double cached = link.by_size.empty() ? line / 2 : link.cached_copy_seconds(bytes);
  const double past = copies_missed(rank, bytes);
  return ((1 - past) * cached + past * line) * past_last_level_slowing(rank);
}

// Past the last level, a copy into or out of the link has its rank's side (a buffer, which the
// ranks' copies pushed out of the level) in memory and the link's (its ring) still in cache: of
// each byte's copy, half at the link's rate and half at a core's share of what all cores copying
// slice by slice (both sides past the level) move there. The factor a message's copies stretch by.
double VirtualNetwork::past_last_level_slowing(int rank) const {
  const double far = last_level_missed(rank);
  if (profile_.past_last_level_GBps <= 0 || far <= 0) return 1;
  const double rate = profile_.intra.bandwidth_GBps;
  const double share = std::min(rate, profile_.past_last_level_GBps / busy_cores(rank));
  return (1 - far) + far * (0.5 + 0.5 * rate / share);
}

// The share of what the rank's host's ranks touch that misses the cache a message's copies share.
// A message the receiving rank's own thread copies out (up to waiter_bytes) goes through the last
// level the ranks' copies find (last_level_bytes; cache_bytes where not given): the sender's core
// writes it, the receiver's reads it. A longer one, copied out by the connection's thread, through
// the cache two ranks' exchanges find (cache_bytes): for ranks with a core each, what they all
// touch; for ranks that take turns on the cores, what a step touches (step_cache_missed). Without
// that cache, the rank's share of a core's own; all of it without either.
double VirtualNetwork::copies_missed(int rank, std::size_t bytes) const {
  const bool own_thread = bytes <= profile_.intra.waiter_bytes;
  if (own_thread && profile_.last_level_bytes > 0) return last_level_missed(rank);
  if (profile_.cache_bytes > 0) {
    return oversubscribed(rank) && !own_thread ? step_cache_missed() : cache_missed(rank);
  }
  return core_cache_share(rank) > 0 ? core_cache_missed(rank) : 1;
}

// The share of what a step of the collective touches on all of a host's ranks that the cache two
// ranks' exchanges find (cache_bytes) does not hold. A ring's step: a chunk in, out and received
// on each rank, what one rank touches in the whole collective (touched_bytes). Ranks that take
// turns on the cores hand a message's lines from one turn to the next within it: the ring of 4
// ranks on 2 CPUs slows past 2 MiB (3 x 2 MiB touched, the 6 MiB a fit finds there), not where
// its messages pass waiter_bytes (bench/RESULTS.md, 2026-12-06 "A step's lines").
double VirtualNetwork::step_cache_missed() const {
  return share_past(touched_bytes(), static_cast<double>(profile_.cache_bytes));
}

// The share of a message on the link from -> to that misses the cache its times by size were
// measured within: what the host's ranks touch past the cache (the last level, where the CPUs
// are the wire: the kernel's copies of a message stay there however much the ranks' copies
// miss a core's); all of it without times by size, none without a cache given. A link whose
// copies are the link (shm) prices by size only the messages it copies whole (copy_whole_seconds).
double VirtualNetwork::link_cache_missed(int from, int to) const {
  const LinkCost& link =
      shape_.host_of(from) == shape_.host_of(to) ? profile_.intra : profile_.inter;
  if (link.by_size.empty() || copies_are_link(from, to)) return 1;
  if (cpus_are_wire(from, to) && profile_.last_level_bytes > 0) return last_level_missed(from);
  return profile_.cache_bytes > 0 ? cache_missed(from) : 0;
}

// Occupies the link (and between hosts, both NICs) for the message, first come first served in
// virtual time.
VirtualNetwork::Reserved VirtualNetwork::reserve(int from, int to, std::size_t bytes) {
  Flow& f = flow(from, to);
  const int hs = shape_.host_of(from), hd = shape_.host_of(to);
  const LinkCost& link = hs == hd ? profile_.intra : profile_.inter;
  double start = std::max(now_, f.link_free);
  if (copied_whole(from, to, bytes)) {
    f.link_free = book_core(from, start, copy_whole_seconds(from, bytes));
    // The receiver's copy out. With a core per rank: on its core once the message is there and
    // its receive posted (settle), after the work the core was given before (its own thread's, up
    // to waiter_bytes, or the connection's, which shares its core). Where the ranks take turns on
    // the cores: as it arrives, in the time the cores' other work leaves (deliver).
    const double taking = oversubscribed(to) ? 0 : copy_whole_seconds(to, bytes);
    return {f.link_free, f.link_free, taking};
  }
  // A link with times by size: those within the cache, the rates past it, in the shares of what
  // the host's ranks touch that fit it and miss it (with no cache given, the times by size).
  const double past = link_cache_missed(from, to);
  double wire = (1 - past) * link.cached_wire_seconds(bytes) +
                past * static_cast<double>(bytes) / (link.bandwidth_GBps * 1e9);
  const std::size_t out = nic_of(from), in = nic_of(to);
  if (hs != hd) {
    start = std::max({start, nic_out_free_[out], nic_in_free_[in]});
    wire = std::max(wire, static_cast<double>(bytes) / (profile_.nic_GBps * 1e9));
  }
  // A copying link: a core at each end (one core doing both copies takes twice as long), for
  // as long as the CPUs take to move the bytes; the wire may take longer.
  // Each end copies between its buffer and the link's (a memory stream at each end).
  // Where the copies are the link (shm), they take the wire's time with the cores busy for part
  // of it: within a core's cache, each end's share moves as fast as a core reads what another
  // one wrote, and the message each way at once fits in the same time on the same cores. Past
  // that cache the cores move the bytes at the link's rate, one direction after the other.
  const double overlapped = copies_are_link(from, to) ? profile_.shared_read_GBps : 0;
  double cpu = link.copies
                   ? std::max(moving_seconds(from, bytes, link.cpu_GBps_or_wire(), 1, overlapped),
                              moving_seconds(to, bytes, link.cpu_GBps_or_wire(), 1, overlapped))
                   : 0;
  // Where the CPUs are the wire, the sender's core moves the bytes out, then the receiver's
  // moves them in once they are there (settle), each for `end`; the two overlap where the
  // message's time on the link is shorter than both together (the kernel hands its segments on
  // as they come).
  if (cpus_are_wire(from, to)) {
    const double end = (1 - past) * link.cached_end_seconds(bytes) + past * cpu;
    f.link_free = book_core(from, start, end);
    const double out_at = f.link_free - end;
    return {f.link_free, out_at + std::max(0.0, wire - end), end};
  }
  if (link.copies && past < 1) cpu = (1 - past) * link.cached_cpu_seconds(bytes) + past * cpu;
  double left = start + wire;
  if (link.copies) {
    const double copying = book_copies(from, to, start, cpu);
    left = overlapped > 0 ? std::max(left, copying + cpu) : copying + std::max(wire, cpu);
  }
  f.link_free = left;
  if (hs != hd) nic_out_free_[out] = nic_in_free_[in] = left;
  return {left, left, 0};
}

std::shared_ptr<VirtualNetwork::Transfer> VirtualNetwork::transfer(
    int rank, transport::RequestLabel::Kind kind, int peer, std::size_t bytes) {
  auto t = std::make_shared<Transfer>(transport::RequestLabel{kind, rank, peer, bytes, "sim"});
  t->bytes = bytes;
  t->rank = rank;
  t->peer = peer;
  t->receive = kind == transport::RequestLabel::Kind::recv;
  // A wait on the request is a wait in virtual time (the request holds its transfer).
  t->request.set_driver([this, raw = t.get()](const core::Deadline* deadline) {
    if (deadline != nullptr) wait_for(raw->rank, *raw);
  });
  return t;
}

// The request handed out: it shares the transfer's ownership.
transport::RequestPtr VirtualNetwork::request_of(const std::shared_ptr<Transfer>& t) {
  return {t, &t->request};
}

// Within a host, a copying link's latency is the work of the CPUs at its ends (system calls, the
// kernel's stack, the ring's bookkeeping, the copy's set-up; there is no wire), which the cores
// must find time for, whether or not the host's ranks take turns on them: half the sender's
// before the bytes move, half on a core of the receiver's host once they are there. 0 where the
// latency is a delay.
double VirtualNetwork::latency_on_cores_seconds(int from, int to) const {
  const LinkCost& link = profile_.intra;
  if (shape_.host_of(from) != shape_.host_of(to) || !link.copies) return 0;
  return link.latency_us * 1e-6;
}

transport::RequestPtr VirtualNetwork::send(int from, int to, std::size_t bytes) {
  // The sender's half of a latency the cores pay: its own work, before the bytes move.
  const double on_cores = latency_on_cores_seconds(from, to);
  spend(from, on_cores / 2);
  auto t = transfer(from, transport::RequestLabel::Kind::send, to, bytes);
  const Reserved r = reserve(from, to, bytes);
  deliver(from, to, bytes, r.ready, on_cores, false, r.taking);
  schedule(r.left, -1, t);
  return request_of(t);
}

bool VirtualNetwork::receives_in_place(int from, int to, std::size_t bytes) const {
  const LinkCost& link = profile_.intra;
  return shape_.host_of(from) == shape_.host_of(to) && link.copies && bytes <= link.in_place_bytes;
}

// Where the link is idle, the sender's thread copies the message into it, the first of the link's
// two copies (half its time per byte), and the send is done when it has. The receiver's copy out
// is what it does with the message where it lies (reading_peer).
transport::RequestPtr VirtualNetwork::send_joined(int from, int to, std::size_t bytes) {
  Flow& f = flow(from, to);  // only this rank sends on it: idle now, idle after its copy
  if (!receives_in_place(from, to, bytes) || f.link_free > now_) return send(from, to, bytes);
  const double on_cores = latency_on_cores_seconds(from, to);
  spend(from, on_cores / 2 + moving_seconds(from, bytes, 2 * profile_.intra.bandwidth_GBps, 1));
  f.link_free = now_;
  auto t = transfer(from, transport::RequestLabel::Kind::send, to, bytes);
  deliver(from, to, bytes, now_, on_cores, true);
  complete(*t);
  return request_of(t);
}

// The message arrives a latency after its last byte left (where the cores pay the latency, the
// receiver's half of it on a core of its host once the bytes are there), for the receive posted
// for it or the next one.
void VirtualNetwork::deliver(int from, int to, std::size_t bytes, double left, double on_cores,
                             bool in_place, double taking) {
  const LinkCost& link =
      shape_.host_of(from) == shape_.host_of(to) ? profile_.intra : profile_.inter;
  const double copy_out =
      taking == 0 && !in_place && copied_whole(from, to, bytes) ? copy_whole_seconds(to, bytes) : 0;
  if (taking > 0) taking += on_cores / 2;  // all of it when the receive takes the message
  const double arrival = taking > 0 ? left
                         : on_cores > 0 || copy_out > 0
                             ? book_core(to, left, on_cores / 2 + copy_out)
                             : left + link.latency_us * 1e-6;
  const Flow::Message message{bytes, arrival, in_place, taking};
  Flow& f = flow(from, to);
  if (!f.posted.empty()) {
    auto receive = std::move(f.posted.front());
    f.posted.pop_front();
    match(receive, message);
  } else {
    f.unmatched.push_back(message);
  }
  ++messages_;
  bytes_ += bytes;
}

transport::RequestPtr VirtualNetwork::recv(int at, int from, std::size_t room,
                                           std::uint64_t* received) {
  const std::shared_ptr<Transfer> t = post_receive(at, from, room, false);
  t->received = received;
  return request_of(t);
}

std::shared_ptr<VirtualNetwork::Transfer> VirtualNetwork::post_receive(int at, int from,
                                                                       std::size_t room,
                                                                       bool in_place) {
  auto t = transfer(at, transport::RequestLabel::Kind::recv, from, room);
  t->takes_in_place = in_place;
  Flow& f = flow(from, at);
  if (!f.unmatched.empty()) {
    const Flow::Message m = f.unmatched.front();
    f.unmatched.pop_front();
    match(t, m);
  } else {
    f.posted.push_back(t);
  }
  return t;
}

void VirtualNetwork::take_in_place(int at, int from, std::size_t room, core::Deadline deadline,
                                   const std::function<void(std::size_t bytes)>& use) {
  const std::shared_ptr<Transfer> t = post_receive(at, from, room, true);
  t->request.wait(deadline);
  struct Reading {
    std::vector<bool>& reading;
    std::size_t rank;
    ~Reading() { reading[rank] = false; }
  } reading{reading_peer_, static_cast<std::size_t>(at)};
  reading_peer_[static_cast<std::size_t>(at)] = t->in_place;
  use(t->request.bytes());
}

// The receive gets the message: complete when it has arrived (it was posted by now). A message
// sent in place that a receive takes the usual way (its own send was queued: an exchange whose
// two links differ) is copied out of the link into it, the link's second copy (half its time per
// byte), on a core of the receiver's host.
void VirtualNetwork::match(const std::shared_ptr<Transfer>& receive, const Flow::Message& message) {
  const std::size_t bytes = message.bytes;
  receive->in_place = message.in_place;
  double arrival = std::max(now_, message.arrival);
  receive->taking = message.taking;
  if (message.in_place && !receive->takes_in_place) {
    arrival = book_core(receive->rank, arrival,
                        moving_seconds(receive->rank, bytes, 2 * profile_.intra.bandwidth_GBps, 1));
  }
  if (bytes > receive->bytes) {
    receive->error =
        core::str("rank ", receive->rank, " posted a receive of up to ", receive->bytes,
                  " bytes from rank ", receive->peer, " (sim), which sent ", bytes);
  }
  receive->bytes = bytes;
  schedule(arrival, -1, receive);
}

void VirtualNetwork::schedule(double time, int rank, const std::shared_ptr<Transfer>& transfer) {
  if (transfer) {
    RINGLET_CHECK(!transfer->scheduled, Error, "simulated network: a transfer scheduled twice");
    transfer->scheduled = transfer;
  }
  events_.push(Event{time, next_seq_++, transfer.get(), rank});
}

// The next event, out of the queue, and the clock at its time: the rank it resumes and its
// transfer, whose hold on itself passes to the caller (it lives while it completes).
std::pair<int, std::shared_ptr<VirtualNetwork::Transfer>> VirtualNetwork::pop_event() {
  const Event e = events_.top();
  events_.pop();
  now_ = e.time;
  if (e.transfer == nullptr) return {e.rank, nullptr};
  return {e.rank, std::move(e.transfer->scheduled)};
}

void VirtualNetwork::complete(Transfer& t) {
  if (!t.error.empty()) {
    t.request.fail(std::make_exception_ptr(core::PeerError(t.error)));
    return;
  }
  if (t.received != nullptr) *t.received += t.bytes;
  t.request.add_bytes(t.bytes);
  t.request.complete();
}

// On the rank's thread, which has the turn: its own completion next, or the turn goes back
// until the event that completes it.
void VirtualNetwork::wait_for(int rank, Transfer& t) {
  if (t.request.done()) return;
  RINGLET_CHECK(deadlock_.empty(), TimeoutError, deadlock_);
  const double since = now_;
  const bool receive = t.receive;
  const int peer = t.peer;
  if (!events_.empty() && events_.top().transfer == &t && settle(pop_event().second)) {
    // this rank's turn goes on
  } else {
    Process& p = *processes_[static_cast<std::size_t>(rank)];
    t.waiter = rank;
    p.waiting = &t;
    // The caller's request holds the transfer while this rank waits, its core free for others.
    end_turn(rank);
    yield(rank);
    p.waiting = nullptr;
    RINGLET_CHECK(t.request.done(), TimeoutError, deadlock_);
  }
  if (receive && now_ > since) wake_up(rank, peer);
}

// A transfer whose time has come: done, or, for a receive that has its message but must still
// take it (where the CPUs are the wire: the kernel's copy into the receiver's buffer), the take
// booked on the receiver's core from now (every earlier turn of its rank is booked by now, so
// the take queues behind them, not ahead) and the transfer done when that ends. True if done.
bool VirtualNetwork::settle(const std::shared_ptr<Transfer>& t) {
  if (t->taking > 0) {
    const double taken = book_core(t->rank, now_, std::exchange(t->taking, 0.0));
    schedule(taken, -1, t);
    return false;
  }
  complete(*t);
  return true;
}

// Work of `seconds` on a core of the rank's host (or its own), from `from_time` at the earliest,
// in the time the core's other bookings leave; returns when it is done.
double VirtualNetwork::book_core(int rank, double from_time, double seconds) {
  return cores_of(rank).fill(run_core(rank), from_time, seconds);
}

// A rank that slept in a receive, on a host with more ranks than cores: the scheduler's wake-up
// (within the host over a copying link, what its one-CPU time with as many ranks on the core as
// on the rank's, and the sender on that core or another, has on top of its latency).
void VirtualNetwork::wake_up(int rank, int from) {
  if (!oversubscribed(rank)) return;
  const LinkCost& link = profile_.intra;
  const bool within = shape_.host_of(from) == shape_.host_of(rank) && link.copies;
  const double one_cpu =
      within ? link.one_cpu_time_us(ranks_on_core(rank), run_core(from) != run_core(rank)) : 0;
  const double us = one_cpu > 0 ? std::max(0.0, one_cpu - link.latency_us) : profile_.wakeup_us;
  spend(rank, us * 1e-6);
}

// The ranks of the rank's host that share its core (as they start: home_core's).
int VirtualNetwork::ranks_on_core(int rank) const {
  const int ranks = ranks_on_host(rank), cores = profile_.cores_per_host;
  if (cores <= 0) return 1;
  return (ranks - home_core(rank) + cores - 1) / cores;
}

int VirtualNetwork::ranks_on_host(int rank) const {
  return shape_.ranks_on_host(shape_.host_of(rank));
}

bool VirtualNetwork::oversubscribed(int rank) const {
  return profile_.cores_per_host > 0 && ranks_on_host(rank) > profile_.cores_per_host;
}

// The host's memory bandwidth split among the cores its ranks keep busy, for the share of the
// bytes that miss the cache (what of the memory the ranks touch does not fit it; for the rank's
// own buffer, the last level), blended with the core's own rate for the rest.
double VirtualNetwork::past_core_cache_GBps(int rank, double core_GBps, int streams,
                                            bool own_buffer) const {
  const int busy = busy_cores(rank);
  double rate = core_GBps;
  const double missed = own_buffer ? last_level_missed(rank) : cache_missed(rank);
  if (profile_.memory_GBps > 0 && missed > 0) {
    const double share = std::min(core_GBps, profile_.memory_GBps * 2 / streams / busy);
    rate = 1 / ((1 - missed) / core_GBps + missed / share);
  }
  // Past the last level the copies' other side (a staging area, a link's buffer) is no longer
  // in cache either: those bytes at a core's share of what all cores copy slice by slice.
  const double past = last_level_missed(rank);
  if (profile_.past_last_level_GBps > 0 && past > 0) {
    const double share = std::min(rate, profile_.past_last_level_GBps / busy);
    rate = 1 / ((1 - past) / rate + past / share);
  }
  return rate;
}

// The cores of the rank's host its ranks keep busy.
int VirtualNetwork::busy_cores(int rank) const {
  const int ranks = ranks_on_host(rank);
  return profile_.cores_per_host > 0 ? std::min(ranks, profile_.cores_per_host) : ranks;
}

// The share of what the rank's host's ranks touch that the last level does not hold (none
// where the profile gives no last level).
double VirtualNetwork::last_level_missed(int rank) const {
  const double working = touched_bytes() * ranks_on_host(rank);
  const auto level = static_cast<double>(profile_.last_level_bytes);
  return level > 0 ? share_past(working, level) : 0;
}

// The share of what the rank's host's ranks touch that its last-level cache does not hold (all
// of it where the profile gives no cache).
double VirtualNetwork::cache_missed(int rank) const {
  return share_past(touched_bytes() * ranks_on_host(rank),
                    static_cast<double>(profile_.cache_bytes));
}

// The memory a rank touches in a collective: its input, its output and what it receives into
// (scratch, the link's ring, its peers' windows), each about the collective's bytes.
double VirtualNetwork::touched_bytes() const { return 3 * static_cast<double>(buffer_bytes_); }

// A rank's share of its core's own cache: the ranks that take turns on a core share it.
double VirtualNetwork::core_cache_share(int rank) const {
  const int ranks = ranks_on_host(rank), cores = profile_.cores_per_host;
  const int per_core = cores > 0 ? (ranks + cores - 1) / cores : 1;
  return static_cast<double>(profile_.core_cache_bytes) / per_core;
}

// The share of the memory the rank touches that its share of its core's own cache does not hold:
// none or all of it. A collective sweeps its buffers in order, again each step, and the ranks
// taking turns on a core each sweep their own between two of one rank's touches of a line; a cache
// that evicts the least recently used line keeps none of a sweep longer than it (each line is gone
// before it comes round again), not the part that would fit.
double VirtualNetwork::core_cache_missed(int rank) const {
  return touched_bytes() > core_cache_share(rank) ? 1 : 0;
}

// The part of the memory the rank touches that fits its share of its core's own cache moves at
// the cached rate, the rest as past that cache.
double VirtualNetwork::moving_GBps(int rank, double core_GBps, int streams, double cached_GBps,
                                   bool own_buffer) const {
  const double past = past_core_cache_GBps(rank, core_GBps, streams, own_buffer);
  if (cached_GBps <= 0 || core_cache_share(rank) <= 0) return past;
  const double cached = std::max(cached_GBps, past), missed = core_cache_missed(rank);
  return 1 / ((1 - missed) / cached + missed / past);
}

// Writing into the rank's window, whose lines its peers read: what a core's cache still holds
// of them (the rank's share of one) at the shared rate, the rest (in the last level only) at the
// rate past a core's cache, and past the last level as any other bytes.
double VirtualNetwork::shared_write_GBps(int rank) const {
  const double held = profile_.shared_write_GBps;
  if (profile_.shared_write_past_GBps <= 0 || core_cache_share(rank) <= 0) {
    return past_core_cache_GBps(rank, held, 1, false);
  }
  const double missed = core_cache_missed(rank);
  if (missed <= 0) return held;
  const double past = past_core_cache_GBps(rank, profile_.shared_write_past_GBps, 1, false);
  return 1 / ((1 - missed) / held + missed / past);
}

void VirtualNetwork::spend(int rank, double seconds) {
  if (seconds <= 0) return;
  take_turn(rank);
  const double until = book_core(rank, now_, seconds);
  if (events_.empty() || events_.top().time > until) {  // nothing happens meanwhile
    now_ = until;
    return;
  }
  schedule(until, rank, nullptr);
  yield(rank);
}

// The rank's turn ends: the next events run here, up to the first that resumes a rank, which
// gets the turn straight from this one (one switch, not two through the scheduler); with none
// left, the scheduler takes it back.
void VirtualNetwork::yield(int rank) {
  Fiber& me = *processes_[static_cast<std::size_t>(rank)]->fiber;
  const int next = next_resumed();
  if (next == rank) return;
  me.switch_to(next >= 0 ? *processes_[static_cast<std::size_t>(next)]->fiber : scheduler_);
}

// Runs events in order up to the first that resumes a rank: that rank, or -1 when none is left.
int VirtualNetwork::next_resumed() {
  while (!events_.empty()) {
    const auto [rank, held] = pop_event();
    int who = rank;
    if (held) {
      if (!settle(held)) continue;
      who = std::exchange(held->waiter, -1);
    }
    if (who >= 0) return who;
  }
  return -1;
}

void VirtualNetwork::resume(int rank) {
  scheduler_.switch_to(*processes_[static_cast<std::size_t>(rank)]->fiber);
}

void VirtualNetwork::start(const std::function<void(int rank)>& program) {
  RINGLET_CHECK(processes_.empty(), Error, "simulated network: run() once per network");
  for (int r = 0; r < shape_.ranks; ++r) processes_.push_back(std::make_unique<Process>());
  for (int r = 0; r < shape_.ranks; ++r) {
    Process& p = *processes_[static_cast<std::size_t>(r)];
    p.fiber = std::make_unique<Fiber>(
        [this, r, &p, &program] {
          try {
            program(r);
          } catch (...) {
            if (!first_error_ && deadlock_.empty()) first_error_ = std::current_exception();
          }
          p.finished = true;
          p.finished_at = now_;
          end_turn(r);
        },
        kStackBytes, scheduler_);
    schedule(0, r, nullptr);
  }
}

double VirtualNetwork::run(const std::function<void(int rank)>& program) {
  start(program);
  // Ranks hand the turn to each other; it comes back here when a rank returns or no event is
  // left.
  for (int who = next_resumed(); who >= 0; who = next_resumed()) resume(who);
  drain_deadlock();
  if (first_error_) std::rethrow_exception(first_error_);
  RINGLET_CHECK(deadlock_.empty(), CollectiveError, deadlock_);
  double last = 0;
  for (const auto& p : processes_) last = std::max(last, p->finished_at);
  return last;
}

// Nothing left to happen, but ranks wait: their waits fail with what everyone waited for.
void VirtualNetwork::drain_deadlock() {
  std::vector<int> stuck;
  for (int r = 0; r < shape_.ranks; ++r) {
    if (!processes_[static_cast<std::size_t>(r)]->finished) stuck.push_back(r);
  }
  if (stuck.empty()) return;
  std::string waits;
  for (std::size_t i = 0; i < std::min<std::size_t>(stuck.size(), 4); ++i) {
    const Transfer* t = processes_[static_cast<std::size_t>(stuck[i])]->waiting;
    waits += core::str(i > 0 ? "; " : "", "rank ", stuck[i], " waits for a ",
                       t != nullptr && t->receive ? "receive from" : "send to", " rank ",
                       t != nullptr ? t->peer : -1);
  }
  deadlock_ = core::str("simulated network: deadlock at ", now_ * 1e6, " us: ", stuck.size(),
                        " of ", shape_.ranks, " ranks wait for messages nobody will send (", waits,
                        stuck.size() > 4 ? "; ..." : "", ")");
  // Each released rank's wait throws; one that catches it and waits again throws again.
  for (int round = 0; round < 8; ++round) {
    bool any = false;
    for (const int r : stuck) {
      if (!processes_[static_cast<std::size_t>(r)]->finished) {
        resume(r);
        any = true;
      }
    }
    if (!any) return;
  }
  std::fprintf(stderr, "ringlet: %s, and a rank keeps waiting after its waits failed\n",
               deadlock_.c_str());
  std::abort();
}

}  // namespace ringlet::model
