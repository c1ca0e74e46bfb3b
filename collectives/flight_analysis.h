// Reading the flight recorder's dumps back (flight_recorder.h) and telling the job's story from
// them, first what went wrong and who, then the details: which rank never joined op #S and which
// joined but stalled (where, waiting on whom, after how many bytes), which issued a different op
// (desync), which left no dump (dead, or stopped), and how far apart the ranks arrived at the
// last ops. `ringlet diagnose DIR` prints it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringlet::collectives {

struct FlightEntry {
  std::uint64_t seq = 0;
  bool collective = true;
  std::string op;     // "all_reduce"
  std::string dtype;  // "f32"
  std::uint64_t count = 0, bytes = 0;
  std::string algorithm, transport;
  std::string state;  // scheduled, started, completed, failed
  std::int64_t created_ns = 0, finished_ns = 0;
  std::string error;  // a failed one's
  bool timed_out = false;
  int waiting_on = -1;
  std::uint64_t bytes_done = 0;
};

struct FlightDump {
  std::string file;
  int rank = 0, world_size = 0;
  std::string name, host, reason;
  std::int64_t pid = 0;
  std::vector<FlightEntry> entries;  // oldest first
};

// Every dump in `dir` (rank<R>.json, rank<R>.<communicator>.json), by communicator and rank. A
// file that is not a dump is a ValueError naming it and what is wrong; no dump at all is a
// ValueError naming the directory.
std::vector<FlightDump> read_flight_dumps(const std::string& dir);
FlightDump parse_flight_dump(const std::string& text, const std::string& file);

// The story of one communicator's dumps, one line each, the verdict first.
std::vector<std::string> diagnose_flight(const std::vector<FlightDump>& dumps);

}  // namespace ringlet::collectives
