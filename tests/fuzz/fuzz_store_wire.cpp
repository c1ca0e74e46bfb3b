// The TcpStore wire protocol (transport/store_wire.h) read as the server reads a request and as
// a client reads a reply: the 24-byte header is checked before any body byte is read (so a
// claimed length cannot drive an allocation past the op's bound), then the body is split into
// its length-prefixed strings. An accepted request encodes back to the same bytes.
#include <cstdint>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "transport/store_wire.h"

namespace {

using namespace ringlet::transport::store_wire;

void request(const Header& h, const std::uint8_t* data, std::size_t size) {
  if (!check_request_header(h).empty()) return;
  const auto op = static_cast<Op>(h.code);
  std::size_t bound = 0;
  for (std::size_t i = 0; i < h.count; ++i) bound += 4 + arg_limit(op, i);
  FUZZ_CHECK(h.body_bytes <= bound && h.body_bytes <= kMaxBodyBytes);
  // The server reads exactly body_bytes; a shorter stream is a client that left.
  if (size - kHeaderBytes < h.body_bytes) return;
  const std::vector<unsigned char> body(data + kHeaderBytes, data + kHeaderBytes + h.body_bytes);
  Args args;
  if (!parse_body(
          body, h.count, [op](std::size_t i) { return arg_limit(op, i); }, args))
    return;
  FUZZ_CHECK(args.size() == h.count);
  std::vector<std::string_view> views;
  for (std::size_t i = 0; i < args.size(); ++i) {
    FUZZ_CHECK(args[i].size() <= arg_limit(op, i));
    views.emplace_back(args[i]);
  }
  const std::string again = encode_frame(h.code, views, h.timeout_ms);
  FUZZ_CHECK(again ==
             std::string_view(reinterpret_cast<const char*>(data), kHeaderBytes + h.body_bytes));
}

void reply(const Header& h, const std::uint8_t* data, std::size_t size) {
  if (!check_reply_header(h).empty()) return;
  if (size - kHeaderBytes < h.body_bytes) return;
  const std::vector<unsigned char> body(data + kHeaderBytes, data + kHeaderBytes + h.body_bytes);
  Args args;
  if (!parse_body(
          body, h.count, [](std::size_t) { return kMaxValueBytes; }, args))
    return;
  // An accepted reply encodes back to the same bytes.
  const std::vector<std::string_view> views(args.begin(), args.end());
  const std::string again = encode_frame(h.code, views, h.timeout_ms);
  FUZZ_CHECK(again ==
             std::string_view(reinterpret_cast<const char*>(data), kHeaderBytes + h.body_bytes));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < kHeaderBytes) return 0;
  const Header h = decode_header(data);
  request(h, data, size);
  reply(h, data, size);
  return 0;
}
