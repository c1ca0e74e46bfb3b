// SimConnection: a transport::Connection over the simulated network: what a collective sends
// and receives on it costs virtual time (network.h) and moves no bytes; the buffers are never
// read or written. Used with a DryRun op (collectives/dry_run.h). As tcp and shm do, it sends a
// head and a body as one message, so an algorithm that joins them (recursive doubling's
// fingerprint and data) is not charged a copy into one buffer first.
#pragma once

#include <atomic>
#include <string>

#include "model/network.h"
#include "transport/connection.h"

namespace ringlet::model {

class SimConnection final : public transport::Connection {
 public:
  // placeholder: an address the receiver's program is handed for a message it uses where it
  // lies (never read: its data steps are dry).
  SimConnection(VirtualNetwork& network, int rank, int peer, const std::byte* placeholder)
      : network_(network), rank_(rank), peer_(peer), placeholder_(placeholder) {}

  transport::RequestPtr send(transport::ConstBuffer buffer) override;
  transport::RequestPtr recv(transport::Buffer buffer) override;
  // A joined message is the collectives' [fingerprint | body], which its receiver takes where
  // it lies where the link lets it (ChannelContext::receive_fingerprinted, swap_fingerprinted):
  // VirtualNetwork::send_joined.
  transport::RequestPtr try_send_joined(transport::ConstBuffer head,
                                        transport::ConstBuffer body) override;
  bool receives_in_place(std::size_t bytes) const override;
  // Waits for the next message in virtual time and hands it to `use`
  // (VirtualNetwork::take_in_place). A failure: false on an aborted connection, else the
  // receive's error (a message longer than max_bytes), thrown at once.
  bool recv_in_place(const InPlace& use, std::size_t max_bytes, core::Deadline deadline) override;
  // Later sends and receives fail with the reason (pending ones complete as the network says).
  void abort(const std::string& reason) override;

  int local_rank() const override { return rank_; }
  int peer_rank() const override { return peer_; }
  const char* transport() const override { return "sim"; }
  std::uint64_t bytes_sent() const override { return sent_; }
  std::uint64_t bytes_received() const override { return received_; }
  std::size_t preferred_slice_bytes() const override { return network_.profile().slice_bytes; }
  // Ranks of one host whose CPUs copy (shared memory) read each other's memory; a read costs
  // the reader a copy.
  bool can_read_peer() const override;
  void read_peer(void* dst, std::uintptr_t remote, std::size_t bytes) override;

 private:
  transport::RequestPtr failed(transport::RequestLabel::Kind kind, std::size_t bytes) const;

  VirtualNetwork& network_;
  int rank_, peer_;
  const std::byte* placeholder_;
  std::uint64_t sent_ = 0, received_ = 0;
  std::string aborted_;
};

}  // namespace ringlet::model
