// Whether this machine has an IPv6 loopback address (::1), for the tests that need one: they are
// registered with doctest::skip(!has_ipv6_loopback()), so a machine without it reports them as
// skipped, with the reason, instead of passing them.
#pragma once

#include <algorithm>

#include "transport/tcp/interfaces.h"

inline bool has_ipv6_loopback() {
  const auto all = ringlet::transport::tcp::list_interfaces();
  return std::any_of(all.begin(), all.end(), [](const auto& i) { return i.loopback && i.ipv6; });
}
