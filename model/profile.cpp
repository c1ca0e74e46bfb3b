// Profiles: defaults, JSON in and out, checked field by field.
#include "model/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "collectives/algorithm_choice.h"
#include "collectives/json_file.h"
#include "core/error.h"

namespace ringlet::model {

double LinkCost::seconds(std::size_t bytes) const {
  return latency_us * 1e-6 + static_cast<double>(bytes) / (bandwidth_GBps * 1e9);
}

namespace {

// One of by_size's times at `bytes`, us: interpolated between the sizes around it, extended
// along the last two past the largest, the smallest's below it.
double at_size(const std::vector<SizeTimes>& sizes, double SizeTimes::*us, std::size_t bytes) {
  if (bytes <= sizes.front().bytes) return sizes.front().*us;
  std::size_t k = 1;
  while (k + 1 < sizes.size() && sizes[k].bytes < bytes) ++k;
  const SizeTimes &a = sizes[k - 1], &b = sizes[k];
  const double along = (static_cast<double>(bytes) - static_cast<double>(a.bytes)) /
                       (static_cast<double>(b.bytes) - static_cast<double>(a.bytes));
  return a.*us + along * (b.*us - a.*us);
}

}  // namespace

double Profile::op_seconds(const std::string& algorithm) const {
  const auto it = op_us.find(algorithm);
  return it == op_us.end() ? 0 : it->second * 1e-6;
}

double LinkCost::cached_wire_seconds(std::size_t bytes) const {
  if (by_size.empty()) return 0;
  return std::max(0.0, at_size(by_size, &SizeTimes::one_way_us, bytes) - latency_us) * 1e-6;
}

double LinkCost::cached_cpu_seconds(std::size_t bytes) const {
  if (by_size.empty()) return 0;
  return std::max(0.0, at_size(by_size, &SizeTimes::exchange_us, bytes) -
                           at_size(by_size, &SizeTimes::one_way_us, bytes)) *
         1e-6;
}

double LinkCost::cached_end_seconds(std::size_t bytes) const {
  if (by_size.empty()) return 0;
  return std::max(0.0, at_size(by_size, &SizeTimes::exchange_us, bytes) - latency_us) / 2 * 1e-6;
}

double LinkCost::one_cpu_time_us(int sharing, bool across_cores) const {
  const double two = across_cores && two_cpus_four_us > 0 ? two_cpus_four_us : one_cpu_us;
  if (one_cpu_four_us <= 0 || sharing <= 2) return two;
  if (sharing >= 4 || two <= 0) return one_cpu_four_us;
  return two + (one_cpu_four_us - two) * (sharing - 2) / 2;
}

double LinkCost::cached_copy_seconds(std::size_t bytes) const {
  // The sizes whose exchanges the waiting threads moved, as the collectives' messages are.
  const auto from = std::find_if(by_size.begin(), by_size.end(),
                                 [](const SizeTimes& s) { return s.bytes >= kCopyRateBytes; });
  if (from == by_size.end()) return cached_end_seconds(bytes);
  auto to = from;
  while (std::next(to) != by_size.end() &&
         (waiter_bytes == 0 || std::next(to)->bytes <= waiter_bytes)) {
    ++to;
  }
  // Outside them, at the nearest one's rate.
  const std::size_t nearest = std::clamp(bytes, from->bytes, to->bytes);
  return cached_end_seconds(nearest) * static_cast<double>(bytes) / static_cast<double>(nearest);
}

double LinkCost::fastest_wire_seconds(std::size_t bytes) const {
  const double line = static_cast<double>(bytes) / (bandwidth_GBps * 1e9);
  return by_size.empty() ? line : std::min(line, cached_wire_seconds(bytes));
}

std::string Profile::summary() const {
  std::ostringstream out;
  const auto moved_by = [](const LinkCost& link) {
    const std::string sizes = link.by_size.empty() ? std::string()
                                                   : core::str(" (within the cache, its times at ",
                                                               link.by_size.size(), " sizes)");
    if (!link.copies) return sizes;
    if (link.cpu_GBps > 0) return core::str(" (CPU copies at ", link.cpu_GBps, " GB/s)", sizes);
    if (link.in_place_bytes > 0) {
      const std::string own = link.waiter_bytes > 0 ? core::str(", up to ", link.waiter_bytes,
                                                                " read by their receiver")
                                                    : std::string();
      return core::str(" (CPU copies; messages up to ", link.in_place_bytes,
                       " bytes used where they lie", own, ")", sizes);
    }
    return " (CPU copies)" + sizes;
  };
  out << "intra-host " << intra.latency_us << " us, " << intra.bandwidth_GBps << " GB/s"
      << moved_by(intra) << "; inter-host " << inter.latency_us << " us, " << inter.bandwidth_GBps
      << " GB/s" << moved_by(inter) << "; " << nics_per_host
      << (nics_per_host == 1 ? " NIC" : " NICs") << " per host at " << nic_GBps << " GB/s; "
      << (cores_per_host > 0 ? std::to_string(cores_per_host) + " cores per host"
                             : std::string("a core per rank"))
      << (cores_per_host > 0 && wakeup_us > 0 ? core::str(", a wake-up ", wakeup_us, " us")
                                              : std::string())
      << "; reduce " << reduce_GBps << " GB/s"
      << (reduce_in_place_GBps > 0 ? core::str(", in place ", reduce_in_place_GBps, " GB/s")
                                   : std::string())
      << "; copy " << copy_GBps << " GB/s"
      << (peer_read_GBps > 0 ? core::str("; peer reads ", peer_read_GBps, " GB/s") : std::string())
      << "; slices of " << slice_bytes << " bytes"
      << (memory_GBps > 0 && cache_bytes > 0
              ? core::str("; past ", cache_bytes >> 20, " MiB of cache, memory at ", memory_GBps,
                          " GB/s a host")
              : std::string())
      << (last_level_bytes > 0 && past_last_level_GBps > 0
              ? core::str("; past a last level of ", last_level_bytes >> 20,
                          " MiB, copies slice by slice at ", past_last_level_GBps, " GB/s a host")
              : std::string())
      << (core_cache_bytes > 0 && cached_copy_GBps > 0 && cached_reduce_GBps > 0
              ? core::str("; within a core's ", core_cache_bytes >> 10, " KiB, copy ",
                          cached_copy_GBps, " GB/s, reduce ", cached_reduce_GBps, " GB/s")
              : std::string())
      << (shared_write_GBps > 0 && shared_read_GBps > 0
              ? core::str("; a peer's cached lines written at ", shared_write_GBps,
                          " GB/s, read at ", shared_read_GBps, " GB/s")
              : std::string())
      << (shared_write_past_GBps > 0
              ? core::str(", past a core's cache written at ", shared_write_past_GBps, " GB/s")
              : std::string());
  for (const auto& [algorithm, us] : op_us) {
    out << (algorithm == op_us.begin()->first ? "; per op: " : ", ") << algorithm << " " << us
        << " us";
  }
  return out.str();
}

Profile default_profile() {
  Profile p;
  p.name =
      "defaults (a 2-core VM's links and rates: shm within a host, tcp loopback between hosts; a "
      "core per rank)";
  p.source =
      "round figures of `ringlet model fit` on a 2-vCPU Intel Xeon VM (bench/RESULTS.md, "
      "2026-12-02)";
  p.intra = {0.6, 6.7, true};
  p.intra.one_cpu_us = 1.8;
  p.intra.in_place_bytes = std::size_t{1} << 20;
  p.intra.waiter_bytes = std::size_t{256} << 10;
  p.inter = {5.0, 3.2, true, 4.2, 4.7};
  p.nic_GBps = 3.2;
  // Hosts with a core per rank, as a cluster's hosts give their ranks (or their GPUs): the VM's
  // own 2 cores, which its ranks take turns on, are what `ringlet model fit` records of it, and
  // what the built-in algorithm tables were chosen for (`--cores-per-host 2`).
  p.cores_per_host = 0;
  p.wakeup_us = 1.2;
  p.reduce_GBps = 3.9;
  p.copy_GBps = 5.2;
  p.peer_read_GBps = 4.2;
  p.core_cache_bytes = std::size_t{1280} << 10;
  p.cached_copy_GBps = 30.0;
  p.cached_reduce_GBps = 17.0;
  p.shared_write_GBps = 16.0;
  p.shared_read_GBps = 11.0;
  p.shared_write_past_GBps = 6.4;
  p.op_us = {{"ring", 2.3}, {"rd", 1.0},     {"rabenseifner", 1.3},
             {"tree", 1.0}, {"window", 2.7}, {"direct", 6.4}};
  return p;
}

namespace {

double positive(const nlohmann::json& value, const std::string& path, const std::string& field) {
  RINGLET_CHECK(value.is_number(), ValueError, "profile ", path, ": ", field,
                " must be a number, not ", value.dump());
  const double x = value.get<double>();
  RINGLET_CHECK(std::isfinite(x) && x > 0, ValueError, "profile ", path, ": ", field,
                " must be positive, not ", value.dump());
  return x;
}

// A figure where 0 means "none" (profile.h says what each one's 0 stands for).
double at_least_zero(const nlohmann::json& value, const std::string& path,
                     const std::string& field) {
  RINGLET_CHECK(value.is_number() && std::isfinite(value.get<double>()) && value.get<double>() >= 0,
                ValueError, "profile ", path, ": ", field, " must be a number >= 0, not ",
                value.dump());
  return value.get<double>();
}

// The profile's positive figures read and written by name: rates and sizes.
const std::map<std::string, double Profile::*> kRates = {
    {"reduce_GBps", &Profile::reduce_GBps},
    {"reduce_in_place_GBps", &Profile::reduce_in_place_GBps},
    {"copy_GBps", &Profile::copy_GBps},
    {"peer_read_GBps", &Profile::peer_read_GBps},
    {"memory_GBps", &Profile::memory_GBps},
    {"past_last_level_GBps", &Profile::past_last_level_GBps},
    {"cached_copy_GBps", &Profile::cached_copy_GBps},
    {"cached_reduce_GBps", &Profile::cached_reduce_GBps},
    {"shared_write_GBps", &Profile::shared_write_GBps},
    {"shared_read_GBps", &Profile::shared_read_GBps},
    {"shared_write_past_GBps", &Profile::shared_write_past_GBps}};
const std::map<std::string, std::size_t Profile::*> kSizes = {
    {"slice_bytes", &Profile::slice_bytes},
    {"cache_bytes", &Profile::cache_bytes},
    {"last_level_bytes", &Profile::last_level_bytes},
    {"core_cache_bytes", &Profile::core_cache_bytes}};

// A link's times by size: at least two {"bytes", "one_way_us", "exchange_us"}, the sizes
// ascending.
std::vector<SizeTimes> read_by_size(const nlohmann::json& list, const std::string& path,
                                    const std::string& field) {
  RINGLET_CHECK(list.is_array() && list.size() >= 2, ValueError, "profile ", path, ": ", field,
                " must be a list of at least two {\"bytes\": .., \"one_way_us\": .., "
                "\"exchange_us\": ..}");
  std::vector<SizeTimes> sizes;
  for (std::size_t k = 0; k < list.size(); ++k) {
    const std::string at = core::str(field, "[", k, "]");
    const nlohmann::json& item = list[k];
    RINGLET_CHECK(item.is_object() && item.size() == 3 && item.contains("bytes") &&
                      item.contains("one_way_us") && item.contains("exchange_us"),
                  ValueError, "profile ", path, ": ", at,
                  " must be {\"bytes\": .., \"one_way_us\": .., \"exchange_us\": ..}, not ",
                  item.dump());
    RINGLET_CHECK(item["bytes"].is_number_integer(), ValueError, "profile ", path, ": ", at,
                  ".bytes must be a whole number, not ", item["bytes"].dump());
    SizeTimes s;
    s.bytes = static_cast<std::size_t>(positive(item["bytes"], path, at + ".bytes"));
    s.one_way_us = positive(item["one_way_us"], path, at + ".one_way_us");
    s.exchange_us = positive(item["exchange_us"], path, at + ".exchange_us");
    RINGLET_CHECK(sizes.empty() || s.bytes > sizes.back().bytes, ValueError, "profile ", path, ": ",
                  at, ".bytes (", s.bytes, ") must be larger than the size before it (",
                  sizes.empty() ? 0 : sizes.back().bytes, ")");
    sizes.push_back(s);
  }
  return sizes;
}

void read_link(const nlohmann::json& link, const std::string& path, const std::string& field,
               LinkCost& cost) {
  RINGLET_CHECK(link.is_object(), ValueError, "profile ", path, ": ", field,
                " must be an object {\"latency_us\": .., \"bandwidth_GBps\": ..}");
  for (const auto& [key, value] : link.items()) {
    if (key == "latency_us") {
      cost.latency_us = positive(value, path, field + ".latency_us");
    } else if (key == "bandwidth_GBps") {
      cost.bandwidth_GBps = positive(value, path, field + ".bandwidth_GBps");
    } else if (key == "copies") {
      RINGLET_CHECK(value.is_boolean(), ValueError, "profile ", path, ": ", field,
                    ".copies must be true or false, not ", value.dump());
      cost.copies = value.get<bool>();
    } else if (key == "cpu_GBps") {
      cost.cpu_GBps = at_least_zero(value, path, field + ".cpu_GBps");
    } else if (key == "one_cpu_us") {
      cost.one_cpu_us = at_least_zero(value, path, field + ".one_cpu_us");
    } else if (key == "one_cpu_four_us") {
      cost.one_cpu_four_us = at_least_zero(value, path, field + ".one_cpu_four_us");
    } else if (key == "two_cpus_four_us") {
      cost.two_cpus_four_us = at_least_zero(value, path, field + ".two_cpus_four_us");
    } else if (key == "by_size") {
      cost.by_size = read_by_size(value, path, field + ".by_size");
    } else if (key == "in_place_bytes" || key == "waiter_bytes") {
      RINGLET_CHECK(value.is_number_integer() && value.get<std::int64_t>() >= 0, ValueError,
                    "profile ", path, ": ", field, ".", key,
                    " must be a whole number of bytes >= 0, not ", value.dump());
      (key == "in_place_bytes" ? cost.in_place_bytes : cost.waiter_bytes) =
          value.get<std::size_t>();
    } else {
      RINGLET_THROW(ValueError, "profile ", path, ": unknown field ", field, ".", key,
                    " (latency_us, bandwidth_GBps, copies, cpu_GBps, one_cpu_us, one_cpu_four_us, "
                    "two_cpus_four_us, by_size, in_place_bytes, waiter_bytes)");
    }
  }
}

// The communicator's work per op: {"ring": us, "rd": us, ...}, each an algorithm's name.
std::map<std::string, double> read_op_us(const nlohmann::json& ops, const std::string& path) {
  RINGLET_CHECK(ops.is_object(), ValueError, "profile ", path,
                ": op_us must be an object {\"ring\": us, \"rd\": us, ..}, not ", ops.dump());
  std::map<std::string, double> op_us;
  for (const auto& [algorithm, value] : ops.items()) {
    RINGLET_CHECK(collectives::is_algorithm_name(algorithm), ValueError, "profile ", path,
                  ": op_us.", algorithm, " is not an algorithm (ring, rd, rabenseifner, tree, ",
                  "direct, window, bruck, halving, doubling)");
    RINGLET_CHECK(
        value.is_number() && std::isfinite(value.get<double>()) && value.get<double>() >= 0,
        ValueError, "profile ", path, ": op_us.", algorithm,
        " must be a number of microseconds >= 0, not ", value.dump());
    op_us[algorithm] = value.get<double>();
  }
  return op_us;
}

}  // namespace

Profile read_profile(const std::string& path) {
  const nlohmann::json doc = collectives::read_json_file(path, "profile");
  RINGLET_CHECK(doc.is_object(), ValueError, "profile ", path, ": must be a JSON object");
  Profile p = default_profile();
  p.source = path;
  for (const auto& [key, value] : doc.items()) {
    if (key == "name" || key == "source") {
      RINGLET_CHECK(value.is_string(), ValueError, "profile ", path, ": ", key,
                    " must be a string");
      (key == "name" ? p.name : p.source) = value.get<std::string>();
    } else if (key == "intra" || key == "inter") {
      read_link(value, path, key, key == "intra" ? p.intra : p.inter);
    } else if (key == "nic_GBps") {
      p.nic_GBps = positive(value, path, key);
    } else if (key == "nics_per_host") {
      const double k = positive(value, path, key);
      RINGLET_CHECK(k == static_cast<int>(k) && k <= 1024, ValueError, "profile ", path,
                    ": nics_per_host must be a whole number from 1 to 1024, not ", value.dump());
      p.nics_per_host = static_cast<int>(k);
    } else if (key == "cores_per_host") {
      RINGLET_CHECK(value.is_number_integer() && value.get<int>() >= 0 && value.get<int>() <= 4096,
                    ValueError, "profile ", path,
                    ": cores_per_host must be a whole number from 0 (a core per rank) to 4096, "
                    "not ",
                    value.dump());
      p.cores_per_host = value.get<int>();
    } else if (key == "wakeup_us") {
      RINGLET_CHECK(
          value.is_number() && std::isfinite(value.get<double>()) && value.get<double>() >= 0,
          ValueError, "profile ", path, ": wakeup_us must be a number of microseconds >= 0, not ",
          value.dump());
      p.wakeup_us = value.get<double>();
    } else if (key == "op_us") {
      p.op_us = read_op_us(value, path);
    } else if (const auto rate = kRates.find(key); rate != kRates.end()) {
      p.*(rate->second) = positive(value, path, key);
    } else if (const auto size = kSizes.find(key); size != kSizes.end()) {
      p.*(size->second) = static_cast<std::size_t>(positive(value, path, key));
    } else {
      RINGLET_THROW(
          ValueError, "profile ", path, ": unknown field ", key,
          " (name, source, intra, inter, nic_GBps, nics_per_host, cores_per_host, "
          "wakeup_us, reduce_GBps, reduce_in_place_GBps, copy_GBps, peer_read_GBps, slice_bytes, "
          "cache_bytes, "
          "memory_GBps, last_level_bytes, past_last_level_GBps, core_cache_bytes, "
          "cached_copy_GBps, cached_reduce_GBps, "
          "shared_write_GBps, shared_read_GBps, shared_write_past_GBps, op_us)");
    }
  }
  return p;
}

namespace {

nlohmann::json link_json(const LinkCost& link) {
  nlohmann::json j = {{"latency_us", link.latency_us},
                      {"bandwidth_GBps", link.bandwidth_GBps},
                      {"copies", link.copies}};
  // Every field, 0 too: a field left out would read back as the default profile's.
  j["cpu_GBps"] = link.cpu_GBps;
  j["one_cpu_us"] = link.one_cpu_us;
  j["one_cpu_four_us"] = link.one_cpu_four_us;
  j["two_cpus_four_us"] = link.two_cpus_four_us;
  j["in_place_bytes"] = link.in_place_bytes;
  j["waiter_bytes"] = link.waiter_bytes;
  for (const SizeTimes& s : link.by_size) {
    j["by_size"].push_back(
        {{"bytes", s.bytes}, {"one_way_us", s.one_way_us}, {"exchange_us", s.exchange_us}});
  }
  return j;
}

}  // namespace

std::string profile_json(const Profile& p) {
  nlohmann::json doc = {{"name", p.name},
                        {"source", p.source},
                        {"intra", link_json(p.intra)},
                        {"inter", link_json(p.inter)},
                        {"nic_GBps", p.nic_GBps},
                        {"nics_per_host", p.nics_per_host},
                        {"cores_per_host", p.cores_per_host},
                        {"wakeup_us", p.wakeup_us}};
  // The rates and sizes where set (0: left out; a profile read back has them all positive).
  for (const auto& [key, field] : kRates) {
    if (p.*field > 0) doc[key] = p.*field;
  }
  for (const auto& [key, field] : kSizes) {
    if (p.*field > 0) doc[key] = p.*field;
  }
  doc["op_us"] = nlohmann::json::object();  // none is {}, not the default's
  for (const auto& [algorithm, us] : p.op_us) doc["op_us"][algorithm] = us;
  return doc.dump(2) + "\n";
}

void write_profile(const std::string& path, const Profile& profile) {
  std::ofstream out(path);
  out << profile_json(profile);
  RINGLET_CHECK(out.good(), ValueError, "profile ", path, ": cannot write it");
}

}  // namespace ringlet::model
