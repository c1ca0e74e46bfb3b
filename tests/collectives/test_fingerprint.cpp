// collectives/fingerprint: the printed form and the one check every carrier of a fingerprint
// uses (the neighbour exchange, recursive doubling's messages, the exchange rounds).
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "collectives/fingerprint.h"
#include "core/error.h"

using namespace ringlet::collectives;

namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

Fingerprint all_reduce_fp(std::uint64_t count, std::uint64_t seq) {
  Fingerprint f;
  f.count = count;
  f.seq = seq;
  return f;
}

// [fingerprint | payload bytes]
std::vector<char> message(const Fingerprint& f, std::size_t payload) {
  std::vector<char> m(sizeof f + payload, 'x');
  std::memcpy(m.data(), &f, sizeof f);
  return m;
}

}  // namespace

TEST_CASE("fingerprints print every field that can differ") {
  Fingerprint f;
  f.op = OpKind::all_reduce;
  f.count = 10;
  f.seq = 3;
  CHECK(to_string(f) == "all_reduce(count=10, f32, sum, seq=3)");
  Fingerprint g = f;
  g.op = OpKind::broadcast;
  g.root = 2;
  g.dtype = DType::bf16;
  CHECK(to_string(g) == "broadcast(count=10, bf16, sum, root=2, seq=3)");
  // Codes from a corrupt message are shown as numbers, not trusted as names.
  Fingerprint bad = f;
  bad.op = static_cast<OpKind>(77);
  bad.dtype = static_cast<DType>(66);
  bad.redop = static_cast<ReduceOp>(55);
  bad.reserved = 1;
  CHECK(to_string(bad) == "op#77(count=10, dtype#66, redop#55, reserved=1, seq=3)");
}

TEST_CASE("check_message: the expected size and fingerprint pass; anything else names both ops") {
  const Fingerprint mine = all_reduce_fp(10, 3);
  const auto ok = message(mine, 40);
  CHECK_NOTHROW(check_message(ok.data(), ok.size(), ok.size(), true, 1, mine, 0));

  // Another collective of the same size: both fingerprints are named.
  Fingerprint theirs = mine;
  theirs.op = OpKind::broadcast;
  theirs.root = 0;
  const auto other = message(theirs, 40);
  CHECK_THROWS_AS(check_message(other.data(), other.size(), other.size(), true, 1, mine, 0),
                  ringlet::core::CollectiveError);
  const std::string text =
      error_of([&] { check_message(other.data(), other.size(), other.size(), true, 1, mine, 0); });
  CHECK(text.find("fingerprint mismatch: rank 0 issued broadcast(count=10, f32, sum, root=0, "
                  "seq=3) while rank 1 issued all_reduce(count=10, f32, sum, seq=3)") !=
        std::string::npos);

  // The same fingerprint with a longer payload (a larger op): still a mismatch, with theirs.
  const auto longer = message(mine, 80);
  CHECK(error_of([&] {
          check_message(longer.data(), longer.size(), ok.size(), true, 1, mine, 0);
        }).find("rank 0 issued all_reduce(count=10") != std::string::npos);

  // Too short to hold a fingerprint: "something else".
  CHECK(error_of([&] {
          check_message(ok.data(), 3, ok.size(), true, 1, mine, 0);
        }).find("rank 0 issued something else") != std::string::npos);

  // A later round checks the size only: its message need not start with the fingerprint.
  const std::vector<char> token(8, 'y');
  CHECK_NOTHROW(check_message(token.data(), token.size(), 8, false, 1, mine, 0));
  CHECK(error_of([&] {
          check_message(token.data(), 4, 8, false, 1, mine, 2);
        }).find("rank 2 issued something else while rank 1 issued all_reduce") !=
        std::string::npos);
}

TEST_CASE("read_fingerprint: only from a message that holds one") {
  const Fingerprint f = all_reduce_fp(7, 9);
  const auto m = message(f, 0);
  CHECK(read_fingerprint(m.data(), m.size()) == f);
  CHECK_FALSE(read_fingerprint(m.data(), m.size() - 1).has_value());
}
