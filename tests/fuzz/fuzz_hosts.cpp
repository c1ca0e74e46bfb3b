// Host lists for multi-host launches (distributed/launch/hosts.h): a --hosts list and a hostfile.
// Input: the list, a NUL byte, the hostfile. Every host returned is a non-empty name.
#include <cstdint>
#include <string>

#include "core/error.h"
#include "distributed/launch/hosts.h"
#include "tests/fuzz/fuzz_support.h"

using namespace ringlet;

namespace {

void check_hosts(const std::vector<std::string>& hosts) {
  FUZZ_CHECK(!hosts.empty());
  for (const auto& host : hosts) FUZZ_CHECK(!host.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static fuzz::MemoryFile file("hostfile");
  const auto parts = fuzz::split(fuzz::as_text(data, size), '\0', 2);
  try {
    const auto hosts = distributed::parse_host_list(std::string(parts[0]));
    check_hosts(hosts);
    for (const auto& host : hosts) FUZZ_CHECK(host.find(',') == std::string::npos);
  } catch (const core::Error&) {
  }
  if (parts.size() < 2) return 0;
  file.write(parts[1]);
  try {
    const auto hosts = distributed::read_hostfile(file.path());
    check_hosts(hosts);
    for (const auto& host : hosts) {
      FUZZ_CHECK(host.find('\n') == std::string::npos && host.front() != '#');
    }
  } catch (const core::Error&) {
  }
  return 0;
}
