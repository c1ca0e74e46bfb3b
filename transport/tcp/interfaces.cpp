// Interface enumeration (getifaddrs) and NCCL-style selection.
#include "transport/tcp/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace ringlet::transport::tcp {

bool IfnameSpec::matches(const std::string& name) const {
  const bool hit = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
    return exact ? name == n : name.rfind(n, 0) == 0;
  });
  return exclude ? !hit : hit;
}

IfnameSpec parse_ifname_spec(const std::string& spec) {
  IfnameSpec out;
  std::string rest = spec;
  if (!rest.empty() && rest[0] == '^') {
    out.exclude = true;
    rest.erase(0, 1);
  }
  if (!rest.empty() && rest[0] == '=') {
    out.exact = true;
    rest.erase(0, 1);
  }
  std::stringstream items(rest);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (!item.empty()) out.names.push_back(item);
  }
  RINGLET_CHECK(!out.names.empty(), ValueError, "RINGLET_SOCKET_IFNAME='", spec,
                "' names no interface (examples: eth, ^lo,docker, =eth0)");
  return out;
}

std::vector<Interface> list_interfaces() {
  std::vector<Interface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || (it->ifa_flags & IFF_UP) == 0) continue;
    const int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw =
        family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(it->ifa_addr)->sin6_addr);
    inet_ntop(family, raw, text, sizeof text);
    Interface iface{it->ifa_name, text, family == AF_INET6, (it->ifa_flags & IFF_LOOPBACK) != 0};
    if (iface.ipv6 && iface.address.rfind("fe80", 0) == 0) {
      iface.address += "%" + iface.name;  // link-local needs the scope
    }
    out.push_back(std::move(iface));
  }
  freeifaddrs(list);
  std::stable_sort(out.begin(), out.end(),
                   [](const Interface& a, const Interface& b) { return !a.ipv6 && b.ipv6; });
  return out;
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

Interface select_interface(const std::string& spec, const std::string& store_host) {
  const std::vector<Interface> all = list_interfaces();
  std::string seen;
  for (const auto& i : all) seen += (seen.empty() ? "" : ", ") + i.name + "=" + i.address;
  if (!spec.empty()) {
    const IfnameSpec parsed = parse_ifname_spec(spec);
    for (const auto& i : all) {
      if (parsed.matches(i.name)) return i;
    }
    RINGLET_THROW(ValueError, "RINGLET_SOCKET_IFNAME='", spec,
                  "' matches no interface that is up (found: ", seen, ")");
  }
  const bool want_loopback = store_host.empty() || is_loopback_host(store_host);
  for (const auto& i : all) {
    if (want_loopback ? i.loopback : (!i.loopback && i.name.rfind("docker", 0) != 0 && !i.ipv6)) {
      return i;
    }
  }
  for (const auto& i : all) {
    if (!i.loopback) return i;
  }
  RINGLET_CHECK(!all.empty(), ValueError, "no network interface is up");
  return all.front();
}

}  // namespace ringlet::transport::tcp
