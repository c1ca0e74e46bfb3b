// Choosing the network interface and address to listen on, with NCCL's RINGLET_SOCKET_IFNAME
// syntax: a comma list of name prefixes ("eth,ib"), "^" to exclude them ("^lo,docker"), "="
// for exact names ("=eth0"). Without a spec: loopback when the store lives on a loopback
// address (a single-host job), otherwise the first interface that is neither lo nor docker.
#pragma once

#include <string>
#include <vector>

namespace ringlet::transport::tcp {

struct Interface {
  std::string name;     // "eth0"
  std::string address;  // numeric, "10.0.0.2" or "fe80::1%eth0"
  bool ipv6 = false;
  bool loopback = false;
};

struct IfnameSpec {
  bool exclude = false;  // "^..."
  bool exact = false;    // "=..."
  std::vector<std::string> names;
  bool matches(const std::string& name) const;
};

IfnameSpec parse_ifname_spec(const std::string& spec);  // ValueError on an empty list
std::vector<Interface> list_interfaces();               // up, with an address, IPv4 first
// Picks the interface for this rank; throws ValueError naming the spec and what was found.
Interface select_interface(const std::string& spec, const std::string& store_host);
// Whether a store host names this machine's loopback: "localhost", "::1" or "[::1]", 127.x.y.z.
// Decides the interface above and where the store is bound (transport/rendezvous.h).
bool is_loopback_host(const std::string& host);

}  // namespace ringlet::transport::tcp
