// `ringlet status`: finds the store (a run directory's note, or an address), reads
// each communicator's board and prints the assessment, once or every few seconds (--watch).
#include "trainer/cli/status_command.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <memory>
#include <thread>

#include "collectives/status_board.h"
#include "core/env.h"
#include "core/error.h"
#include "core/file_io.h"
#include "trainer/cli/usage.h"
#include "trainer/run_dir.h"
#include "transport/tcp_store.h"

namespace ringlet::trainer::cli {

const char* const kStatusSummary =
    "status RUN_DIR|HOST:PORT      where every rank of a running job is, who lags and since when";

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kHelp =
    "usage: ringlet status RUN_DIR | HOST:PORT [options]\n"
    "\n"
    "Reads the status board every rank of a running job keeps in the job's store (each rank\n"
    "publishes every RINGLET_STATUS_INTERVAL ms, default 500) and says, lagging ranks first:\n"
    "the op and sequence number each rank is in and for how long, or how long it has been\n"
    "outside collectives, and the last op it finished. A rank that stopped reporting (stopped,\n"
    "or hung outside ringlet) is told apart from one stuck inside a collective and from one\n"
    "busy outside collectives while the others wait (a checkpoint, a slow step).\n"
    "RUN_DIR is a `ringlet train --out` directory while it trains (its file `store`);\n"
    "HOST:PORT a job's TCP store (a file:// store keeps no board).\n"
    "\n"
    "options:\n"
    "  --name NAME          one communicator (default: every one on the board)\n"
    "  --stuck-after SEC    exit 3 when a rank has been silent or inside one op longer\n"
    "                       (default 30)\n"
    "  --watch[=SEC]        print again every SEC seconds (default 2) until interrupted\n"
    "  --count N            with --watch: stop after N prints\n"
    "  --dump               ask every rank to write its flight recorder to RINGLET_FR_DIR\n"
    "  -h, --help           show this help\n"
    "\n"
    "exit status: 0 healthy, 3 a rank stuck longer than --stuck-after, 1 the board could not\n"
    "be read, 2 a usage error.\n";

struct StatusOptions {
  std::string target;
  std::string name;
  std::chrono::milliseconds stuck_after = 30s;
  std::chrono::milliseconds watch = 0ms;
  std::int64_t count = -1;  // -1: once, or forever with --watch
  bool dump = false;
};

std::chrono::milliseconds parse_seconds(const std::string& text, const std::string& flag) {
  double value = NAN;
  try {
    std::size_t used = 0;
    value = std::stod(text, &used);
    if (used != text.size()) value = NAN;
  } catch (const std::exception&) {
  }
  if (!(value > 0 && value <= 86400)) {
    throw UsageError("status: " + flag + " '" + text +
                     "' is not a number of seconds in (0, 86400]");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(value * 1000));
}

StatusOptions parse(const std::vector<std::string>& args) {
  StatusOptions o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (auto v = flag_value(args, i, "--name")) {
      o.name = *v;
    } else if (auto v = flag_value(args, i, "--stuck-after")) {
      o.stuck_after = parse_seconds(*v, "--stuck-after");
    } else if (auto v = flag_value(args, i, "--count")) {
      o.count = core::parse_int(*v, "status: --count");
      if (o.count < 1) throw UsageError("status: --count must be at least 1, got " + *v);
    } else if (arg == "--watch") {
      o.watch = 2s;
    } else if (arg.rfind("--watch=", 0) == 0) {
      o.watch = parse_seconds(arg.substr(8), "--watch");
    } else if (arg == "--dump") {
      o.dump = true;
    } else if (!arg.empty() && arg[0] == '-') {
      throw_unknown("status", "option", arg,
                    {"--name", "--stuck-after", "--watch", "--count", "--dump", "--help"});
    } else if (!o.target.empty()) {
      throw UsageError("status: one job, not '" + o.target + "' and '" + arg + "'");
    } else {
      o.target = arg;
    }
  }
  if (o.target.empty()) throw UsageError("status: missing the job (RUN_DIR or HOST:PORT)");
  if (o.count > 0 && o.watch.count() == 0) throw UsageError("status: --count needs --watch");
  return o;
}

// The store the target names: a run directory's note, or host:port.
std::unique_ptr<transport::Store> open_store(const std::string& target) {
  std::string address = target;
  if (fs::is_directory(target)) {
    const fs::path note = store_note_path(target);
    RINGLET_CHECK(fs::exists(note), Error, "status: ", target,
                  " has no file 'store': it is not a run directory of a job training now "
                  "(rank 0 writes it while the job trains and removes it at the end)");
    address = core::read_file_text(note);
    while (!address.empty() && (address.back() == '\n' || address.back() == ' '))
      address.pop_back();
  }
  const auto colon = address.rfind(':');
  RINGLET_CHECK(colon != std::string::npos && colon + 1 < address.size(), ValueError, "status: '",
                address, "' is neither a directory nor HOST:PORT");
  const int port = static_cast<int>(
      core::parse_int(address.substr(colon + 1), core::str("status: the port of '", address, "'")));
  return std::make_unique<transport::TcpStore>(address.substr(0, colon), port,
                                               core::Deadline::after(5s), 5s);
}

// The communicators the board lists (rank 0 of each adds its name).
std::vector<std::string> board_names(transport::Store& store, const std::string& target) {
  const std::string text = store.compare_set(collectives::kStatusNamesKey, "\n", "\n");
  std::vector<std::string> names;
  std::size_t begin = 0;
  for (std::size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1) {
    if (end > begin) names.push_back(text.substr(begin, end - begin));
  }
  RINGLET_CHECK(!names.empty(), Error, "status: no communicator of ", target,
                " has a status board yet (not started, or RINGLET_STATUS_INTERVAL=0)");
  return names;
}

// Prints one communicator's board; returns whether a rank is stuck.
bool print_board(transport::Store& store, const std::string& name, const StatusOptions& o,
                 std::ostream& out) {
  const std::string world_key = collectives::status_world_key(name);
  const int world = static_cast<int>(
      core::parse_int(store.get(world_key, core::Deadline::after(2s)), "store key " + world_key));
  const auto board = collectives::read_status_board(store, name, world, 300ms);
  const auto a = collectives::assess_status(board, collectives::wall_now_ns(), o.stuck_after);
  out << "communicator " << name << " (" << world << " ranks):\n";
  for (const std::string& line : a.story) out << "  " << line << "\n";
  for (const std::string& line : a.ranks) out << "    " << line << "\n";
  return a.stuck;
}

std::string clock_now() {
  const std::time_t t = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%H:%M:%S", std::localtime(&t));
  return text;
}

}  // namespace

int status_command(const std::vector<std::string>& args, std::ostream& out) {
  for (const std::string& arg : args) {
    if (arg == "-h" || arg == "--help") {
      out << kHelp;
      return 0;
    }
  }
  const StatusOptions o = parse(args);
  const auto store = open_store(o.target);
  const std::vector<std::string> names =
      o.name.empty() ? board_names(*store, o.target) : std::vector<std::string>{o.name};
  if (o.dump) {
    for (const std::string& name : names) store->add(collectives::status_dump_key(name), 1);
    out << "asked every rank of " << core::join(names) << " to dump its flight recorder "
        << "(to its RINGLET_FR_DIR)" << std::endl;
    return 0;
  }
  bool stuck = false;
  for (std::int64_t round = 0; o.count < 0 || round < o.count; ++round) {
    if (round > 0) std::this_thread::sleep_for(o.watch);
    if (o.watch.count() > 0) out << "-- " << clock_now() << "\n";
    stuck = false;
    for (const std::string& name : names) stuck = print_board(*store, name, o, out) || stuck;
    out << std::flush;
    if (o.watch.count() == 0) break;
  }
  return stuck ? kStuckStatus : 0;
}

}  // namespace ringlet::trainer::cli
