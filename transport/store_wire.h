// The TcpStore wire protocol: constants, frame encoding and the validation the server applies
// before it reads a body. Header-only and free of Asio so tests can forge frames with it.
// All integers are little-endian.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace ringlet::transport::store_wire {

// Frame = 24-byte header + body. Header: magic u32 | version u16 | op (request) or status
// (response) u8 | reserved u8 (0) | count u32 | body_bytes u32 | timeout_ms u64. Body: `count`
// byte strings, each a u32 length followed by its bytes, body_bytes in total.
inline constexpr std::uint32_t kMagic = 0x31545352;  // "RST1" on the wire
inline constexpr std::uint16_t kVersion = 1;
inline constexpr std::size_t kHeaderBytes = 24;
inline constexpr std::size_t kMaxKeyBytes = 4 * 1024;
inline constexpr std::size_t kMaxValueBytes = 64 * 1024 * 1024;
inline constexpr std::size_t kMaxWaitKeys = 64 * 1024;
// Largest body of any frame (a compare_set carrying two maximal values); the per-op bounds the
// server checks are tighter, and no request body is larger.
inline constexpr std::size_t kMaxBodyBytes = 12 + kMaxKeyBytes + 2 * kMaxValueBytes;
// timeout_ms value meaning "no deadline".
inline constexpr std::uint64_t kNoTimeout = ~std::uint64_t{0};

enum class Op : std::uint8_t {
  set = 1,          // [key, value] -> []
  get = 2,          // [key] -> [value] | timeout [key]
  wait = 3,         // [key...] -> [] | timeout [missing keys...]
  add = 4,          // [key, delta as 8-byte i64] -> [result as 8-byte i64]
  compare_set = 5,  // [key, expected, desired] -> [value after]
  delete_key = 6,   // [key] -> [1 byte: 1 if it existed]
  num_keys = 7,     // [] -> [count as 8-byte i64]
};

enum class Status : std::uint8_t { ok = 0, timeout = 1, error = 2 };

using Args = std::vector<std::string>;

struct Header {
  std::uint32_t magic = 0;
  std::uint16_t version = 0;
  std::uint8_t code = 0;  // Op in a request, Status in a response
  std::uint8_t reserved = 0;
  std::uint32_t count = 0;
  std::uint32_t body_bytes = 0;
  std::uint64_t timeout_ms = 0;
};

template <class T>
inline void put_le(std::string& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}
template <class T>
inline T get_le(const unsigned char* in) {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(T{in[i]} << (8 * i));
  return value;
}

inline std::string encode_frame(std::uint8_t code, const std::vector<std::string_view>& args,
                                std::uint64_t timeout_ms) {
  std::size_t body = 0;
  for (const auto& a : args) body += 4 + a.size();
  std::string out;
  out.reserve(kHeaderBytes + body);
  put_le<std::uint32_t>(out, kMagic);
  put_le<std::uint16_t>(out, kVersion);
  out.push_back(static_cast<char>(code));
  out.push_back(0);
  put_le<std::uint32_t>(out, static_cast<std::uint32_t>(args.size()));
  put_le<std::uint32_t>(out, static_cast<std::uint32_t>(body));
  put_le<std::uint64_t>(out, timeout_ms);
  for (const auto& a : args) {
    put_le<std::uint32_t>(out, static_cast<std::uint32_t>(a.size()));
    out.append(a);
  }
  return out;
}

inline Header decode_header(const unsigned char* in) {
  Header h;
  h.magic = get_le<std::uint32_t>(in);
  h.version = get_le<std::uint16_t>(in + 4);
  h.code = in[6];
  h.reserved = in[7];
  h.count = get_le<std::uint32_t>(in + 8);
  h.body_bytes = get_le<std::uint32_t>(in + 12);
  h.timeout_ms = get_le<std::uint64_t>(in + 16);
  return h;
}

// Largest length argument `index` of a request `op` may have (0 bytes for no such argument).
inline std::size_t arg_limit(Op op, std::size_t index) {
  if (index == 0) return kMaxKeyBytes;
  switch (op) {
    case Op::set: return kMaxValueBytes;
    case Op::wait: return kMaxKeyBytes;
    case Op::add: return 8;
    case Op::compare_set: return kMaxValueBytes;
    default: return 0;
  }
}

// What every frame's header must have: the magic, this version, a zero reserved byte ("" if so).
inline std::string check_frame_header(const Header& h) {
  if (h.magic != kMagic) return core::str("bad magic 0x", std::hex, h.magic);
  if (h.version != kVersion) return core::str("unsupported version ", h.version);
  if (h.reserved != 0) return core::str("reserved byte ", int{h.reserved}, " (must be 0)");
  return "";
}

// Returns "" if the request header is acceptable, else why not.
inline std::string check_request_header(const Header& h) {
  if (std::string bad = check_frame_header(h); !bad.empty()) return bad;
  if (h.code < 1 || h.code > 7) return core::str("unknown op ", int{h.code});
  const auto op = static_cast<Op>(h.code);
  std::size_t lo = 0, hi = 0;
  switch (op) {
    case Op::set: lo = hi = 2; break;
    case Op::get: lo = hi = 1; break;
    case Op::wait: lo = 1, hi = kMaxWaitKeys; break;
    case Op::add: lo = hi = 2; break;
    case Op::compare_set: lo = hi = 3; break;
    case Op::delete_key: lo = hi = 1; break;
    case Op::num_keys: lo = hi = 0; break;
  }
  if (h.count < lo || h.count > hi)
    return core::str("op ", int{h.code}, " with ", h.count, " args");
  std::size_t max_body = 0;
  for (std::size_t i = 0; i < h.count; ++i) max_body += 4 + arg_limit(op, i);
  max_body = std::min(max_body, kMaxBodyBytes);  // a wait of many maximal keys is refused too
  if (h.body_bytes > max_body) {
    return core::str("body of ", h.body_bytes, " bytes exceeds the limit of ", max_body);
  }
  return "";
}

// Returns "" if a reply header is acceptable to a client, else why not. A reply's body is at
// most kMaxBodyBytes, and a reply never carries more strings than a wait has keys.
inline std::string check_reply_header(const Header& h) {
  if (std::string bad = check_frame_header(h); !bad.empty()) return bad;
  if (h.code > 2) return core::str("unknown status ", int{h.code});
  if (h.count > kMaxWaitKeys) return core::str(h.count, " strings");
  if (h.body_bytes > kMaxBodyBytes) {
    return core::str("body of ", h.body_bytes, " bytes exceeds the limit of ", kMaxBodyBytes);
  }
  return "";
}

// Splits a body into `count` length-prefixed strings, each at most limit(i) bytes; returns
// false on any inconsistency (the body must be consumed exactly).
template <class Limit>
inline bool parse_body(const std::vector<unsigned char>& body, std::uint32_t count, Limit limit,
                       Args& args) {
  std::size_t at = 0;
  args.clear();
  for (std::uint32_t i = 0; i < count; ++i) {
    if (body.size() - at < 4) return false;
    const std::size_t len = get_le<std::uint32_t>(body.data() + at);
    at += 4;
    if (len > limit(i) || len > body.size() - at) return false;
    args.emplace_back(reinterpret_cast<const char*>(body.data() + at), len);
    at += len;
  }
  return at == body.size();
}

}  // namespace ringlet::transport::store_wire
