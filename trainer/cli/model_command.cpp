// `ringlet model predict`: options, the simulations (model/predict.h) and the table.
#include "trainer/cli/model_command.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>

#include "collectives/algorithm_choice.h"
#include "collectives/algorithm_table.h"
#include "core/error.h"
#include "model/fit.h"
#include "model/predict.h"
#include "trainer/cli/usage.h"

namespace ringlet::trainer::cli {

const char* const kModelSummary =
    "model predict --ranks N --size S  each algorithm's time on a simulated network, the\n"
    "                                fastest, and the sizes where that changes\n"
    "  model fit [--out FILE]        this machine's profile: shm, tcp, reduction, copy\n"
    "  model table --ranks N,..      the algorithm by size auto takes (RINGLET_ALGO_TABLE)";

namespace {

constexpr const char* kHelp =
    "usage: ringlet model predict --ranks N --size S [options]\n"
    "\n"
    "Runs each algorithm of a collective (ring, double binary tree, Rabenseifner's, recursive\n"
    "doubling, and on one host with shared memory cross-memory attach and the shm window; for\n"
    "all_gather ring, Bruck's, recursive doubling; for reduce_scatter ring, recursive halving)\n"
    "on a simulated network of N ranks, with the same code that runs over\n"
    "tcp, shm and rdma but no data, and prints each one's time and bus bandwidth (as nccl-tests\n"
    "counts it), its messages, how many times a rank's core passed to another rank waiting for\n"
    "it (turns/rank, where a host's ranks outnumber its cores; bench/placed_ranks.sh counts\n"
    "the machine's), the fastest, and, at every power of two from --from to S, which\n"
    "is fastest at which size and where the tree stops beating the ring. Costs come from a\n"
    "profile (latency and bandwidth within a host and between hosts, whether CPUs copy the\n"
    "bytes, NICs and cores per host shared by its ranks, reduction and copy rates, the cache\n"
    "and the memory's bandwidth past it).\n"
    "\n"
    "options:\n"
    "  --ranks N            ranks (1 .. 65536)\n"
    "  --size S             bytes, float32: 8, 4K, 64M, 1G (K, M, G: powers of 1024)\n"
    "  --per-host P         ranks per host, the hosts' NICs shared by their ranks (default: all\n"
    "                       on one host)\n"
    "  --profile FILE       the costs: a JSON profile (model/profiles/, written by hand or by\n"
    "                       ringlet model fit); default: round figures of a 2-core VM's\n"
    "                       links and rates, on hosts with a core per rank\n"
    "  --cores-per-host C   each host's cores, which its ranks take turns on when they are\n"
    "                       more (0: a core per rank; default: the profile's)\n"
    "  --collective C       all_reduce (default), all_gather or reduce_scatter\n"
    "  --from S             the smallest size of the search for where the fastest changes\n"
    "                       (default 8)\n"
    "  --no-sweep           the table at --size only\n"
    "  --out-of-place       an all-reduce's result into another buffer than its input\n"
    "                       (nccl-tests' out-of-place column; default: in place)\n"
    "  --grid               first, each algorithm's time at every 16th power of two from\n"
    "                       --from to --size (one row per size, the fastest last)\n"
    "  -h, --help           show this help\n";

constexpr const char* kTableHelp =
    "usage: ringlet model table --ranks N[,N...] [--per-host P] [--profile FILE] [--up-to S]\n"
    "                           [--cores-per-host C] [--out FILE]\n"
    "\n"
    "For each world size, the fastest all-reduce algorithm by size (the sweep `model\n"
    "predict` prints, 8 B to --up-to, default 1G) as a table a communicator reads from\n"
    "RINGLET_ALGO_TABLE=FILE: `auto` on host buffers then takes the model's choice under that\n"
    "profile. It chooses among the algorithms `auto` picks on its own (ring, rd; direct and\n"
    "window on one host with shared memory), or those --algorithms names (the tree and\n"
    "Rabenseifner's too). The built-in tables, which `auto` takes when RINGLET_ALGO_TABLE is\n"
    "unset, are this command's for 2-8 ranks under the default profile on hosts of 2 cores\n"
    "(--cores-per-host 2: the VM its figures come from).\n"
    "\n"
    "options:\n"
    "  --ranks N,...      world sizes (each 2 .. 4096)\n"
    "  --per-host P       ranks per host (default: all on one host)\n"
    "  --profile FILE     the costs (default: round figures of a 2-core VM's links and\n"
    "                     rates, a core per rank)\n"
    "  --cores-per-host C each host's cores (0: a core per rank; default: the profile's)\n"
    "  --up-to S          the largest size searched (default 1G)\n"
    "  --algorithms A,..  the candidates among ring, rd, tree, rabenseifner, direct, window\n"
    "                     (default: ring, rd, direct, window)\n"
    "  --out FILE         write the tables there (default: print them)\n"
    "  -h, --help         show this help\n";

constexpr const char* kFitHelp =
    "usage: ringlet model fit [--out FILE] [--quick] [--between-ranks]\n"
    "\n"
    "Measures this machine into a profile for `ringlet model predict --profile`: the one-way\n"
    "time of messages of 8 B to 16 MiB over shm and over tcp loopback (the mean of\n"
    "ping-pongs between two ranks, threads of this process with their own meshes), fitted as\n"
    "latency + bytes / bandwidth (the latency is the 8-byte time, the bandwidth the slope from\n"
    "256 KiB up), the float32 reduction and copy rates of one thread out of cache, and the\n"
    "caches and the memory (every core copying at once: one memcpy of a large buffer, and\n"
    "slice by slice over growing ones). shm becomes the profile's link within a host, tcp its\n"
    "link and NIC between hosts. A shm ping-pong with both ranks on one CPU, and a token\n"
    "around four ranks on one CPU and on two, give the wake-up a rank pays when its host\n"
    "runs more ranks than cores. Last, the communicator's own work per op (op_us): an\n"
    "8-byte all-reduce of each algorithm through two ranks' communicators, less its\n"
    "simulation. Where the round trip of a cache line between its two CPUs moves\n"
    "while it runs (a VM's host moved them), it fits again, three fits at most, and says so.\n"
    "Takes about forty seconds on an idle machine (--quick ten); a busy one measures itself\n"
    "busy.\n"
    "\n"
    "options:\n"
    "  --out FILE        write the profile there (default: print it)\n"
    "  --quick           fewer repetitions (seconds less, noisier)\n"
    "  --between-ranks   run as a job of two ranks on two hosts (ringlet launch --nnodes 2\n"
    "                    --nproc-per-node 1 -- ringlet model fit --between-ranks): the link\n"
    "                    between hosts is the tcp connection between the two ranks instead of\n"
    "                    tcp loopback; rank 0 measures the rest and writes the profile\n"
    "  -h, --help        show this help\n";

std::size_t parse_size(const std::string& flag, const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  std::string unit = text.substr(digits);
  if (unit.size() > 1 && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() > 1 && unit.back() == 'i') unit.pop_back();
  int shift = -1;
  if (unit.empty()) shift = 0;
  if (unit == "K" || unit == "k") shift = 10;
  if (unit == "M" || unit == "m") shift = 20;
  if (unit == "G" || unit == "g") shift = 30;
  if (digits == 0 || digits > 12 || shift < 0) {
    throw UsageError(flag + ": '" + text + "' is not a size (8, 4K, 64M, 1G)");
  }
  const std::size_t bytes = std::stoull(text.substr(0, digits)) << shift;
  if (bytes == 0 || bytes > (std::size_t{16} << 30)) {
    throw UsageError(flag + ": " + text + " is out of range (1 byte .. 16 GiB)");
  }
  return bytes;
}

int parse_count(const std::string& flag, const std::string& text, int low, int high) {
  std::size_t used = 0;
  long value = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < low || value > high) {
    throw UsageError(flag + ": '" + text + "' is not a whole number from " + std::to_string(low) +
                     " to " + std::to_string(high));
  }
  return static_cast<int>(value);
}

// The profile a command's flags name (the default without --profile), with --cores-per-host's
// cores where given.
model::Profile chosen_profile(const std::optional<std::string>& path,
                              const std::optional<int>& cores_per_host) {
  model::Profile profile = path ? model::read_profile(*path) : model::default_profile();
  if (cores_per_host) profile.cores_per_host = *cores_per_host;
  return profile;
}

struct PredictOptions {
  int ranks = 0, per_host = 0;
  std::optional<int> cores_per_host;
  std::size_t size = 0, from = 8;
  std::optional<std::string> profile;
  model::Collective collective = model::Collective::all_reduce;
  bool sweep = true;
  bool grid = false;
  bool in_place = true;
};

PredictOptions parse_predict(const std::vector<std::string>& args) {
  PredictOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (auto v = flag_value(args, i, "--ranks")) {
      o.ranks = parse_count("--ranks", *v, 1, 65536);
    } else if (auto v = flag_value(args, i, "--per-host")) {
      o.per_host = parse_count("--per-host", *v, 1, 65536);
    } else if (auto v = flag_value(args, i, "--size")) {
      o.size = parse_size("--size", *v);
    } else if (auto v = flag_value(args, i, "--from")) {
      o.from = parse_size("--from", *v);
    } else if (auto v = flag_value(args, i, "--profile")) {
      o.profile = *v;
    } else if (auto v = flag_value(args, i, "--cores-per-host")) {
      o.cores_per_host = parse_count("--cores-per-host", *v, 0, 4096);
    } else if (auto v = flag_value(args, i, "--collective")) {
      try {
        o.collective = model::parse_collective(*v);
      } catch (const core::ValueError& e) {
        throw UsageError(std::string("--collective: ") + e.what());
      }
    } else if (args[i] == "--no-sweep") {
      o.sweep = false;
    } else if (args[i] == "--grid") {
      o.grid = true;
    } else if (args[i] == "--out-of-place") {
      o.in_place = false;
    } else {
      throw_unknown("model predict", "option", args[i],
                    {"--ranks", "--size", "--per-host", "--profile", "--cores-per-host",
                     "--collective", "--from", "--no-sweep", "--out-of-place", "--grid", "--help"});
    }
  }
  if (o.ranks == 0) throw UsageError("model predict: --ranks is required");
  if (!o.in_place && o.collective != model::Collective::all_reduce) {
    throw UsageError(std::string("model predict: --out-of-place is for all_reduce (the ") +
                     model::collective_name(o.collective) + " runs on one buffer either way)");
  }
  if (o.size == 0) throw UsageError("model predict: --size is required");
  if (o.per_host > o.ranks) {
    throw UsageError("model predict: --per-host " + std::to_string(o.per_host) +
                     " is more than --ranks " + std::to_string(o.ranks));
  }
  if (o.from > o.size) o.from = o.size;
  return o;
}

void print_header(const PredictOptions& o, const model::Profile& profile, std::ostream& out) {
  const model::NetworkShape shape{o.ranks, o.per_host};
  out << "# " << model::collective_name(o.collective) << " of " << model::size_text(o.size)
      << " (float32" << (o.in_place ? "" : ", out of place") << ") over " << o.ranks << " ranks, ";
  if (o.per_host > 0) {
    out << o.per_host << " per host (" << shape.hosts() << " hosts)\n";
  } else {
    out << "all on one host\n";
  }
  out << "# profile: " << profile.name << "\n#   " << profile.summary() << "\n#   from "
      << profile.source << "\n";
  const int ranks_on_host = shape.ranks_on_host(0);
  if (profile.cores_per_host > 0 && ranks_on_host > profile.cores_per_host) {
    out << (o.per_host > 0 ? "# each host's " : "# the host's ") << ranks_on_host
        << " ranks take turns on its " << profile.cores_per_host
        << " cores (--cores-per-host 0: a core per rank)\n";
  }
  out << "# each algorithm's own code (collectives/) run on a simulated network, no data moved\n";
}

// Sizes from, 16 from, 256 from, ... up to size (and size itself).
void print_grid(model::Predictor& predictor, const PredictOptions& o, std::ostream& out) {
  out << "# time_us by size (bytes); the fastest last\n#" << std::string(13, ' ');
  for (const auto a : predictor.algorithms()) {
    char cell[32];
    std::snprintf(cell, sizeof cell, " %14s", collectives::algorithm_name(a));
    out << cell;
  }
  out << "  fastest\n";
  for (std::size_t s = o.from;; s = std::min(s * 16, o.size)) {
    char cell[32];
    std::snprintf(cell, sizeof cell, " %13zu", s);
    out << cell;
    for (const auto a : predictor.algorithms()) {
      std::snprintf(cell, sizeof cell, " %14.2f", predictor.at(a, s).result.seconds * 1e6);
      out << cell;
    }
    out << "  " << collectives::algorithm_name(predictor.fastest(s)) << "\n";
    if (s == o.size) break;
  }
}

void print_table(model::Predictor& predictor, std::size_t size, std::ostream& out) {
  char line[160];
  std::snprintf(line, sizeof line, "#%-15s %14s %12s %12s %11s %10s\n", " algorithm", "time_us",
                "busbw_GB/s", "messages", "turns/rank", "wall_s");
  out << line;
  for (const model::Prediction& p : predictor.all(size)) {
    const double turns = static_cast<double>(p.result.turns_passed) / predictor.ranks();
    std::snprintf(line, sizeof line, " %-15s %14.2f %12.3f %12llu %11.1f %10.2f\n",
                  collectives::algorithm_name(p.algorithm), p.result.seconds * 1e6, p.bus_GBps,
                  static_cast<unsigned long long>(p.result.messages), turns, p.result.wall_seconds);
    out << line;
  }
  out << "# fastest at " << model::size_text(size) << ": "
      << collectives::algorithm_name(predictor.fastest(size)) << "\n";
}

void print_sweep(model::Predictor& predictor, const PredictOptions& o,
                 const std::vector<model::SizeRange>& ranges, std::ostream& out) {
  out << "# fastest by size (every power of two, " << model::size_text(o.from) << " .. "
      << model::size_text(o.size) << "):\n";
  for (const model::SizeRange& r : ranges) {
    out << "#   " << model::size_text(r.first);
    if (r.last != r.first) out << " .. " << model::size_text(r.last);
    out << ": " << collectives::algorithm_name(r.fastest) << "\n";
  }
  using collectives::Algorithm;
  if (o.collective != model::Collective::all_reduce || o.ranks < 2) return;
  const auto tree_ring = predictor.crossover(Algorithm::tree, Algorithm::ring, o.from, o.size);
  if (tree_ring) {
    out << "# tree against ring: the tree is faster below " << model::size_text(*tree_ring)
        << ", the ring from " << model::size_text(*tree_ring) << "\n";
  } else {
    const bool tree = predictor.at(Algorithm::tree, o.size).result.seconds <
                      predictor.at(Algorithm::ring, o.size).result.seconds;
    out << "# tree against ring: no crossover between " << model::size_text(o.from) << " and "
        << model::size_text(o.size) << " (at " << model::size_text(o.size) << " the "
        << (tree ? "tree" : "ring") << " is faster)\n";
  }
}

int predict_command(const std::vector<std::string>& args, std::ostream& out) {
  for (const std::string& arg : args) {
    if (arg == "-h" || arg == "--help") {
      out << kHelp;
      return 0;
    }
  }
  const PredictOptions o = parse_predict(args);
  const model::Profile profile = chosen_profile(o.profile, o.cores_per_host);
  const auto start = std::chrono::steady_clock::now();
  print_header(o, profile, out);
  model::Predictor predictor(o.collective, {o.ranks, o.per_host}, profile, {}, o.in_place);
  if (o.grid) print_grid(predictor, o, out);
  // The sweep is simulated first: its sizes run on the machine's cores side by side, --size among
  // them, so the table finds its simulations done instead of running them on one core alone.
  std::vector<model::SizeRange> ranges;
  if (o.sweep) ranges = predictor.fastest_by_size(o.from, o.size);
  print_table(predictor, o.size, out);
  if (o.sweep) print_sweep(predictor, o, ranges, out);
  // The sweep's sizes run on threads side by side: the wall time, then the simulations' own.
  const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
  char line[128];
  std::snprintf(line, sizeof line, "# simulated in %.2f s (the simulations, added up: %.2f s)\n",
                wall.count(), predictor.wall_seconds());
  out << line;
  return 0;
}

int fit_command(const std::vector<std::string>& args, std::ostream& out) {
  std::optional<std::string> path;
  model::FitOptions options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      out << kFitHelp;
      return 0;
    }
    if (auto v = flag_value(args, i, "--out")) {
      path = *v;
    } else if (args[i] == "--quick") {
      options.quick = true;
    } else if (args[i] == "--between-ranks") {
      options.between_ranks = true;
    } else {
      throw_unknown("model fit", "option", args[i],
                    {"--out", "--quick", "--between-ranks", "--help"});
    }
  }
  const model::MachineFit fit = model::fit_machine(options);
  if (fit.rank != 0) {
    out << "# rank " << fit.rank << ": measured the link with rank 0, which writes the profile\n";
    return 0;
  }
  out << model::fit_report(fit);
  if (path) {
    model::write_profile(*path, fit.profile);
    out << "# profile written to " << *path << "\n";
  } else {
    out << model::profile_json(fit.profile);
  }
  return 0;
}

std::vector<int> parse_ranks(const std::string& text) {
  std::vector<int> ranks;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    ranks.push_back(parse_count("--ranks", text.substr(start, comma - start), 2, 4096));
    start = comma + 1;
  }
  return ranks;
}

// --algorithms: all-reduce algorithms the model simulates, by name ("ring,rd,tree").
std::vector<collectives::Algorithm> parse_algorithms(const std::string& text) {
  const std::vector<collectives::Algorithm> known = {
      collectives::Algorithm::ring,   collectives::Algorithm::recursive_doubling,
      collectives::Algorithm::tree,   collectives::Algorithm::rabenseifner,
      collectives::Algorithm::direct, collectives::Algorithm::window};
  std::vector<collectives::Algorithm> algorithms;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    const auto it = std::find_if(known.begin(), known.end(), [&](collectives::Algorithm a) {
      return name == collectives::algorithm_name(a);
    });
    if (it == known.end()) {
      throw UsageError("model table: --algorithms: '" + name +
                       "' is not an all-reduce algorithm the model simulates (ring, rd, tree, "
                       "rabenseifner, direct, window)");
    }
    algorithms.push_back(*it);
    start = comma + 1;
  }
  return algorithms;
}

// The algorithms a world size's table chooses among: those named that the simulator runs on
// its network (direct and window on one host with shared memory), else table_algorithms.
std::vector<collectives::Algorithm> candidates(
    const std::optional<std::vector<collectives::Algorithm>>& named,
    const model::NetworkShape& shape, const model::Profile& profile) {
  if (!named) return model::table_algorithms(shape, profile);
  std::vector<collectives::Algorithm> algorithms =
      model::simulated_algorithms(model::Collective::all_reduce, shape, profile);
  std::erase_if(algorithms, [&](collectives::Algorithm a) {
    return std::find(named->begin(), named->end(), a) == named->end();
  });
  if (algorithms.empty()) {
    throw UsageError("model table: --algorithms names none the model simulates for " +
                     std::to_string(shape.ranks) + " ranks on this network");
  }
  return algorithms;
}

int table_command(const std::vector<std::string>& args, std::ostream& out) {
  std::vector<int> ranks;
  int per_host = 0;
  std::size_t up_to = std::size_t{1} << 30;
  std::optional<int> cores_per_host;
  std::optional<std::string> profile_path, path;
  std::optional<std::vector<collectives::Algorithm>> named;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      out << kTableHelp;
      return 0;
    }
    if (auto v = flag_value(args, i, "--ranks")) {
      ranks = parse_ranks(*v);
    } else if (auto v = flag_value(args, i, "--per-host")) {
      per_host = parse_count("--per-host", *v, 1, 4096);
    } else if (auto v = flag_value(args, i, "--profile")) {
      profile_path = *v;
    } else if (auto v = flag_value(args, i, "--cores-per-host")) {
      cores_per_host = parse_count("--cores-per-host", *v, 0, 4096);
    } else if (auto v = flag_value(args, i, "--up-to")) {
      up_to = parse_size("--up-to", *v);
    } else if (auto v = flag_value(args, i, "--out")) {
      path = *v;
    } else if (auto v = flag_value(args, i, "--algorithms")) {
      named = parse_algorithms(*v);
    } else {
      throw_unknown("model table", "option", args[i],
                    {"--ranks", "--per-host", "--profile", "--cores-per-host", "--up-to",
                     "--algorithms", "--out", "--help"});
    }
  }
  if (ranks.empty()) throw UsageError("model table: --ranks is required");
  const model::Profile profile = chosen_profile(profile_path, cores_per_host);
  collectives::AlgorithmTables tables;
  tables.source = "ringlet model table, profile: " + profile.name;
  for (const int n : ranks) {
    const model::NetworkShape shape{n, per_host};
    model::Predictor predictor(model::Collective::all_reduce, shape, profile,
                               candidates(named, shape, profile));
    tables.all_reduce[n] = predictor.table(8, up_to);
  }
  const std::string json = collectives::algorithm_tables_json(tables);
  if (!path) {
    out << json;
    return 0;
  }
  std::ofstream file(*path);
  file << json;
  if (!file.good()) throw core::ValueError("model table: cannot write " + *path);
  out << "# algorithm tables for " << ranks.size() << " world size(s) written to " << *path
      << " (RINGLET_ALGO_TABLE=" << *path << ")\n";
  return 0;
}

}  // namespace

int model_command(const std::vector<std::string>& args, std::ostream& out) {
  if (args.empty()) throw UsageError("model: missing a subcommand (predict, fit, table)");
  if (args[0] == "-h" || args[0] == "--help") {
    out << kHelp;
    return 0;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "predict") return predict_command(rest, out);
  if (args[0] == "fit") return fit_command(rest, out);
  if (args[0] == "table") return table_command(rest, out);
  throw_unknown("model", "subcommand", args[0], {"predict", "fit", "table"});
}

}  // namespace ringlet::trainer::cli
