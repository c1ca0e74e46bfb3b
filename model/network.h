// VirtualNetwork: ranks on hosts, the links between them and a clock, in virtual time. It is a
// discrete-event simulation whose processes are real programs: each rank's program (an algorithm
// of collectives/, unchanged) runs on a stack of its own, one at a time, in the order of virtual
// time. A program runs until it waits for a message that has not arrived yet or spends
// time computing; then the next event (a message arriving, a send finished, a computation over)
// resumes whoever it is for. No data moves: a message is its length and its times. The
// programs are fibers (fiber.h) of the thread that calls run(), so a switch costs no system call.
//
// Costs (profile.h): a message of b bytes from rank s to rank d starts when the link s -> d is
// free (and, between hosts, a NIC of each host in its direction), occupies them for b /
// bandwidth (or its link's time by size, profile.h), and arrives latency after its last byte
// left. The send is done when its last byte
// left (the sender may reuse its buffer); the receive, when the message arrived and was posted.
// Links are full duplex: s -> d and d -> s are two links. Ranks r * per_host .. are one host.
// A rank's reductions and copies run on its core (a host's k-th rank on its core k mod
// cores_per_host; a core of its own when the profile gives none per host; where the host's ranks
// outnumber its cores, the core it holds in their turns: core_turns.h), and so do both ends of a
// message on a link whose CPUs move the bytes: there a message also waits for the core at each
// end, and holds it while the CPUs move the bytes (the wire may take longer). One the link sends
// whole (shm, up to its in_place_bytes) is copied in on the sender's core, then out on the
// receiver's: with a core per rank once it is there and received, after the work that core was
// given before; where ranks take turns on the cores, as it arrives. Where the CPUs are the wire
// (tcp within a host), the sender's core moves it out, then the receiver's moves it in once it
// is there. On a host with more ranks than cores, a receive that had to wait ends with a wake-up,
// spent on a core. Where a host's ranks' buffers outgrow its cache, its cores move bytes at most
// at their share of its memory's bandwidth.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "core/deadline.h"
#include "model/core_turns.h"
#include "model/cores.h"
#include "model/fiber.h"
#include "model/pair_table.h"
#include "model/profile.h"
#include "transport/request.h"

namespace ringlet::model {

struct NetworkShape {
  int ranks = 1;
  int per_host = 0;  // ranks per host; 0: all on one host
  int hosts() const { return per_host > 0 ? (ranks + per_host - 1) / per_host : 1; }
  int host_of(int rank) const { return per_host > 0 ? rank / per_host : 0; }
  int first_rank(int host) const { return per_host > 0 ? host * per_host : 0; }
  int local_rank(int rank) const { return per_host > 0 ? rank % per_host : rank; }  // on its host
  int ranks_on_host(int host) const {  // the last host may have fewer
    return per_host > 0 ? std::min(per_host, ranks - first_rank(host)) : ranks;
  }
};

class VirtualNetwork {
 public:
  VirtualNetwork(NetworkShape shape, Profile profile);
  ~VirtualNetwork();
  VirtualNetwork(const VirtualNetwork&) = delete;
  VirtualNetwork& operator=(const VirtualNetwork&) = delete;

  // Runs program(rank) for every rank and returns the virtual seconds until the last one
  // returned. Throws the first error a program threw, or, when programs are left waiting for
  // messages nobody will send (a deadlock), an error naming them and what they wait for.
  double run(const std::function<void(int rank)>& program);

  // --- for the ranks' programs, on their threads while they run ---
  transport::RequestPtr send(int from, int to, std::size_t bytes);
  // A receive's bytes are added to *received (if given) when it completes.
  transport::RequestPtr recv(int at, int from, std::size_t room, std::uint64_t* received = nullptr);
  // Whether the link from -> to lets its receiver use a message of `bytes` where it lies (a
  // copying link within a host, up to its in_place_bytes: profile.h). send_joined: such a
  // message, sent in place where the link is idle (as shm sends at once only with nothing queued
  // before it): the sender copies it in and is done; else sent as any other. take_in_place: the
  // next message from `from`, waited for, then handed to use(bytes); one sent in place with
  // reading_peer set for the rank meanwhile, so its copies and reductions of it read a peer's
  // lines (one sent otherwise was copied out by the link).
  bool receives_in_place(int from, int to, std::size_t bytes) const;
  transport::RequestPtr send_joined(int from, int to, std::size_t bytes);
  void take_in_place(int at, int from, std::size_t room, core::Deadline deadline,
                     const std::function<void(std::size_t bytes)>& use);
  bool reading_peer(int rank) const { return reading_peer_[static_cast<std::size_t>(rank)]; }
  void spend(int rank, double seconds);  // the rank computes for this long
  // Each rank's buffer (the collective's bytes): a rank touches three times it (touched_bytes),
  // and with the host's ranks, whether that fits a core's and the host's caches.
  void set_buffer_bytes(std::size_t bytes) { buffer_bytes_ = bytes; }
  // The rate a core of the rank's host moves bytes at, where it alone would move them at
  // `core_GBps`, with `streams` streams of them to or from memory: a reduction 2 (it reads a
  // buffer and writes one); a copy 1 (the collectives copy between a buffer and a staging area,
  // a window or a link's buffer, which stays in cache).
  // With `cached_GBps` (the rank's own memory): the part of its buffer that fits its share of
  // its core's cache moves at that rate. `own_buffer`: bytes only the rank's core touches (a
  // reduction in place of a slice it holds), which find the whole last level: memory bounds them
  // only past it (profile.h, reduce_in_place_GBps).
  double moving_GBps(int rank, double core_GBps, int streams = 2, double cached_GBps = 0,
                     bool own_buffer = false) const;
  // The rate the rank writes its shm window at, whose lines its peers read (profile.h).
  double shared_write_GBps(int rank) const;
  // How long the rank's core takes to move `bytes` at that rate.
  double moving_seconds(int rank, std::size_t bytes, double core_GBps, int streams = 2,
                        double cached_GBps = 0) const {
    return static_cast<double>(bytes) / (moving_GBps(rank, core_GBps, streams, cached_GBps) * 1e9);
  }
  const NetworkShape& shape() const { return shape_; }
  const Profile& profile() const { return profile_; }

  double now() const { return now_; }  // the virtual clock, seconds
  std::uint64_t messages() const { return messages_; }
  std::uint64_t bytes() const { return bytes_; }
  // Over all hosts, how many times a core passed from one rank to another that waited for it
  // (0 where every rank has a core: core_turns.h).
  std::uint64_t turns_passed() const;

 private:
  // A posted send or receive: its request (one allocation holds both: the request handed out
  // shares the transfer's ownership), its length, and the rank waiting for it.
  struct Transfer {
    explicit Transfer(const transport::RequestLabel& label) : request(label) {}
    transport::Request request;
    std::size_t bytes = 0;  // the send's; the receive's room until it matches a message
    int rank = 0, peer = 0;
    bool receive = false;
    int waiter = -1;
    std::string error;                  // a receive matched with a longer message
    bool in_place = false;              // a receive's message was sent in place
    bool takes_in_place = false;        // a receive that uses its message where it lies
    std::uint64_t* received = nullptr;  // a receive's: bytes added here when it completes
    double taking = 0;  // a receive's: its core's work on the message once it is there
    std::shared_ptr<Transfer> scheduled;  // itself, while an event in the queue completes it
  };
  // The messages from one rank to another, matched in order with the receives posted for them.
  struct Flow {
    struct Message {
      std::size_t bytes;
      double arrival;
      bool in_place;
      double taking = 0;  // on the receiver's core once it is there (cpus_are_wire)
    };
    std::deque<Message> unmatched;
    std::deque<std::shared_ptr<Transfer>> posted;
    double link_free = 0;
  };
  // At `time`: the transfer completes (and its waiter resumes), or, with none, `rank` resumes.
  // Plain data, cheap to move as the queue sorts it: the transfer holds itself meanwhile.
  struct Event {
    double time;
    std::uint64_t seq;
    Transfer* transfer;
    int rank;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  struct Process {
    std::unique_ptr<Fiber> fiber;
    bool finished = false;
    double finished_at = 0;
    std::exception_ptr error;
    const Transfer* waiting = nullptr;
  };

  Flow& flow(int from, int to);
  std::size_t nic_of(int rank) const;
  Cores& cores_of(int rank);
  double book_copies(int from, int to, double start, double& cpu);
  bool cpus_are_wire(int from, int to) const;
  bool copies_are_link(int from, int to) const;
  // A message's times on its link: when its last byte left (the send is done), when its receiver
  // may have it, and what taking it costs the receiver's core then (0: nothing more).
  struct Reserved {
    double left;
    double ready;
    double taking;
  };
  int home_core(int rank) const;
  int run_core(int rank) const;
  void take_turn(int rank);
  void end_turn(int rank);
  bool copied_whole(int from, int to, std::size_t bytes) const;
  double copy_whole_seconds(int rank, std::size_t bytes) const;
  double past_last_level_slowing(int rank) const;
  double copies_missed(int rank, std::size_t bytes) const;
  double step_cache_missed() const;
  double core_cache_missed(int rank) const;
  double last_level_missed(int rank) const;
  double link_cache_missed(int from, int to) const;
  Reserved reserve(int from, int to, std::size_t bytes);
  void deliver(int from, int to, std::size_t bytes, double left, double on_cores, bool in_place,
               double taking = 0);
  double latency_on_cores_seconds(int from, int to) const;
  double book_core(int rank, double from_time, double seconds);
  void match(const std::shared_ptr<Transfer>& recv, const Flow::Message& message);
  bool settle(const std::shared_ptr<Transfer>& t);
  std::shared_ptr<Transfer> post_receive(int at, int from, std::size_t room, bool in_place);
  void schedule(double time, int rank, const std::shared_ptr<Transfer>& transfer);
  std::pair<int, std::shared_ptr<Transfer>> pop_event();
  std::shared_ptr<Transfer> transfer(int rank, transport::RequestLabel::Kind kind, int peer,
                                     std::size_t bytes);
  static transport::RequestPtr request_of(const std::shared_ptr<Transfer>& t);
  void complete(Transfer& t);
  void wait_for(int rank, Transfer& t);
  void wake_up(int rank, int from);
  bool oversubscribed(int rank) const;
  int ranks_on_host(int rank) const;
  int ranks_on_core(int rank) const;
  int busy_cores(int rank) const;
  double past_core_cache_GBps(int rank, double core_GBps, int streams, bool own_buffer) const;
  double cache_missed(int rank) const;
  double core_cache_share(int rank) const;
  double touched_bytes() const;
  void yield(int rank);
  int next_resumed();
  void resume(int rank);
  void start(const std::function<void(int rank)>& program);
  void drain_deadlock();

  NetworkShape shape_;
  Profile profile_;
  double now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  PairTable<Flow> flows_;  // by (from, to)
  std::vector<double> nic_out_free_, nic_in_free_;
  std::vector<Cores> cores_;      // per host (or per rank)
  std::vector<CoreTurns> turns_;  // per host, with cores per host
  std::vector<std::unique_ptr<Process>> processes_;
  Fiber scheduler_;                 // the thread that called run()
  std::string deadlock_;            // set when the waiting processes are released with an error
  std::exception_ptr first_error_;  // the first a program threw
  std::uint64_t messages_ = 0, bytes_ = 0;
  std::size_t buffer_bytes_ = 0;
  std::vector<bool> reading_peer_;  // per rank
};

}  // namespace ringlet::model
