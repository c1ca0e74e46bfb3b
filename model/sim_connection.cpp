// Sends and receives as the simulated network's transfers.
#include "model/sim_connection.h"

#include "core/error.h"

namespace ringlet::model {

transport::RequestPtr SimConnection::send(transport::ConstBuffer buffer) {
  if (!aborted_.empty()) return failed(transport::RequestLabel::Kind::send, buffer.bytes);
  count_message();
  sent_ += buffer.bytes;
  return network_.send(rank_, peer_, buffer.bytes);
}

transport::RequestPtr SimConnection::recv(transport::Buffer buffer) {
  if (!aborted_.empty()) return failed(transport::RequestLabel::Kind::recv, buffer.bytes);
  return network_.recv(rank_, peer_, buffer.bytes, &received_);
}

transport::RequestPtr SimConnection::try_send_joined(transport::ConstBuffer head,
                                                     transport::ConstBuffer body) {
  const std::size_t bytes = head.bytes + body.bytes;
  if (!aborted_.empty()) return send(transport::ConstBuffer{nullptr, bytes});
  count_message();
  sent_ += bytes;
  return network_.send_joined(rank_, peer_, bytes);
}

bool SimConnection::receives_in_place(std::size_t bytes) const {
  return network_.receives_in_place(peer_, rank_, bytes);
}

bool SimConnection::recv_in_place(const InPlace& use, std::size_t max_bytes,
                                  core::Deadline deadline) {
  if (!aborted_.empty()) return false;
  network_.take_in_place(rank_, peer_, max_bytes, deadline, [&](std::size_t bytes) {
    received_ += bytes;
    RINGLET_CHECK(use(placeholder_, bytes), Error, "rank ", rank_,
                  ": a simulated message from rank ", peer_, " was declined where it lies");
  });
  return true;
}

bool SimConnection::can_read_peer() const {
  const NetworkShape& shape = network_.shape();
  return network_.profile().intra.copies && shape.host_of(rank_) == shape.host_of(peer_);
}

void SimConnection::read_peer(void* /*dst*/, std::uintptr_t /*remote*/, std::size_t bytes) {
  RINGLET_CHECK(can_read_peer(), Error, "rank ", rank_, ": the sim connection to rank ", peer_,
                " cannot read the peer's memory (another host, or no shared memory)");
  const Profile& p = network_.profile();
  const double rate = p.peer_read_GBps > 0 ? p.peer_read_GBps : p.copy_GBps;
  network_.spend(rank_, network_.moving_seconds(rank_, bytes, rate));
}

void SimConnection::abort(const std::string& reason) {
  if (aborted_.empty()) aborted_ = reason.empty() ? "aborted" : reason;
}

transport::RequestPtr SimConnection::failed(transport::RequestLabel::Kind kind,
                                            std::size_t bytes) const {
  auto request = std::make_shared<transport::Request>(
      transport::RequestLabel{kind, rank_, peer_, bytes, "sim"});
  request->fail(std::make_exception_ptr(core::PeerError(core::str(
      "rank ", rank_, ": the sim connection to rank ", peer_, " was aborted: ", aborted_))));
  return request;
}

}  // namespace ringlet::model
