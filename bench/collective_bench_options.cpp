// Command line of the collective benchmarks: nccl-tests' flags (-b -e -i -f -g -n -w -c -d -o
// -r -z -T -a, short or long, "-b 8", "-b8", "--minbytes 8" or "--minbytes=8"; sizes take
// nccl-tests' K/M/G suffixes, 1024-based), plus -t transport, -np ranks, --min-time and
// --warmup-time.
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>

#include "bench/collective_bench.h"
#include "core/env.h"
#include "core/error.h"
#include "core/rank_limits.h"

namespace ringlet::bench {
namespace {

using core::DType;

// nccl-tests' parsesize(): a number with an optional K, M or G suffix (powers of 1024).
std::size_t parse_size(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  double unit = 1;
  const std::string suffix = end;
  if (suffix == "K" || suffix == "k") {
    unit = 1024.0;
  } else if (suffix == "M" || suffix == "m") {
    unit = 1024.0 * 1024;
  } else if (suffix == "G" || suffix == "g") {
    unit = 1024.0 * 1024 * 1024;
  } else {
    RINGLET_CHECK(suffix.empty(), ValueError, flag, " '", text,
                  "' is not a size (a number with an optional K, M or G suffix)");
  }
  RINGLET_CHECK(end != text.c_str() && value >= 0 && std::isfinite(value), ValueError, flag, " '",
                text, "' is not a size (a number with an optional K, M or G suffix)");
  return static_cast<std::size_t>(value * unit);
}

int parse_count(const std::string& flag, const std::string& text, int min_value) {
  const auto v = core::parse_int(text, flag);
  RINGLET_CHECK(v >= min_value && v <= (1 << 30), ValueError, flag, " '", text,
                "' is out of range (at least ", min_value, ")");
  return static_cast<int>(v);
}

std::vector<DType> parse_types(const std::string& text) {
  static const std::map<std::string, DType> kTypes{{"float", DType::f32}, {"double", DType::f64},
                                                   {"half", DType::f16},  {"bfloat16", DType::bf16},
                                                   {"int32", DType::i32}, {"int64", DType::i64}};
  if (text == "all") {
    return {DType::i32, DType::i64, DType::f16, DType::f32, DType::f64, DType::bf16};
  }
  const auto it = kTypes.find(text);
  RINGLET_CHECK(it != kTypes.end(), ValueError, "-d '", text,
                "' is not a supported datatype (float, double, half, bfloat16, int32, int64, "
                "all; nccl-tests' int8, uint8, uint32 and uint64 are not supported)");
  return {it->second};
}

std::vector<collectives::ReduceOp> parse_ops(const std::string& text) {
  using collectives::ReduceOp;
  if (text == "all") {
    return {ReduceOp::sum, ReduceOp::prod, ReduceOp::max, ReduceOp::min, ReduceOp::avg};
  }
  RINGLET_CHECK(text != "mulsum", ValueError, "-o mulsum (pre-multiplied sum) is not supported");
  return {collectives::parse_reduce_op(text)};
}

// Long names (nccl-tests' getopt_long table) to the short flag.
const std::map<std::string, std::string> kLongNames{{"minbytes", "b"},
                                                    {"maxbytes", "e"},
                                                    {"stepbytes", "i"},
                                                    {"stepfactor", "f"},
                                                    {"ngpus", "g"},
                                                    {"iters", "n"},
                                                    {"warmup_iters", "w"},
                                                    {"check", "c"},
                                                    {"datatype", "d"},
                                                    {"op", "o"},
                                                    {"root", "r"},
                                                    {"blocking", "z"},
                                                    {"timeout", "T"},
                                                    {"average", "a"},
                                                    {"transport", "t"},
                                                    {"help", "h"},
                                                    {"np", "np"},
                                                    {"min-time", "min-time"},
                                                    {"warmup-time", "warmup-time"},
                                                    {"child-rank", "child-rank"},
                                                    {"store-port", "store-port"},
                                                    {"parent-pid", "parent-pid"},
                                                    {"corrupt", "corrupt"},
                                                    {"threads", "threads"},
                                                    {"device", "device"},
                                                    {"model", "model"}};

const std::map<std::string, std::string> kUnsupported{
    {"m", "agg_iters"}, {"p", "parallel_init"},  {"y", "stream_null"},
    {"G", "cudagraph"}, {"C", "report_cputime"}, {"F", "output_file"}};

}  // namespace

std::string usage(const std::string& program) {
  return core::str(
      "usage: ", program,
      " [-np N] [-t tcp|shm|rdma|auto] [-b minbytes] [-e maxbytes] [-f stepfactor | -i stepbytes]\n"
      "       [-n iters] [-w warmup_iters] [-c 0|1] [-d "
      "float|double|half|bfloat16|int32|int64|all]\n"
      "       [-o sum|prod|min|max|avg|all] [-r root] [-z 0|1] [-a 0|1|2|3] [-T timeout_s] [-g 1]\n"
      "       [--min-time seconds] [--warmup-time seconds] [--corrupt] [--threads]\n"
      "       [--model PROFILE|default]\n"
      "  -np N        spawn N local ranks (processes); without it, a launcher's RANK/WORLD_SIZE/\n"
      "               MASTER_ADDR/MASTER_PORT make this process one rank (else 1 rank)\n"
      "  --threads    the -np ranks as threads of this process (ranks sharing a device then\n"
      "               share its context), each with its own communicator and stream\n"
      "  -t           transport between ranks: tcp, shm, rdma (RINGLET_IB_DEVICE picks the\n"
      "               device; emu0 is the emulated one), ipc (device buffers: device windows\n"
      "               shared over IPC), auto (default: RINGLET_TRANSPORT or auto)\n"
      "  -g 1         device buffers (on cuda when a GPU is there, else the emulated device)\n"
      "  --device D   cpu (host buffers), emu or cuda: where the buffers live\n"
      "  -a           time across ranks: 0 rank 0, 1 mean, 2 min, 3 max (default 3)\n"
      "  --min-time   grow iters per size until the timed loop lasts at least this long\n"
      "  --warmup-time  before the first size, run the smallest one for this long (the ranks\n"
      "               settle onto their CPUs: two started on one share it for about 0.1 s)\n"
      "  --corrupt    negative control: spoil one result element on the last rank per check\n"
      "               (the run must then report #wrong > 0 and exit 1)\n"
      "  --model P    a column more: the bus bandwidth the model expects of each row (the\n"
      "               algorithm that ran, simulated under profile P: a `ringlet model fit` file,\n"
      "               model/profiles/, or `default`); '*' marks a row more than 30% off\n"
      "  sizes take K, M, G suffixes (1024-based), as in nccl-tests\n");
}

namespace {

// One command-line argument: the short flag it means ("b" for -b, -b8 and --minbytes=8) and
// the value it carries inline, if any.
struct FlagArgument {
  std::string flag;
  std::optional<std::string> value;
};

FlagArgument split_flag(const std::string& arg, const std::string& program) {
  RINGLET_CHECK(arg.size() >= 2 && arg[0] == '-', ValueError, "unexpected argument '", arg, "'\n",
                usage(program));
  FlagArgument out;
  if (arg.rfind("--", 0) == 0) {
    std::string name = arg.substr(2);
    if (const auto eq = name.find('='); eq != std::string::npos) {
      out.value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const auto it = kLongNames.find(name);
    RINGLET_CHECK(it != kLongNames.end(), ValueError, "unknown flag '", arg, "'\n", usage(program));
    out.flag = it->second;
  } else if (arg == "-np") {
    out.flag = "np";
  } else {
    out.flag = arg.substr(1, 1);
    if (arg.size() > 2) out.value = arg.substr(2);  // getopt style: -b8
  }
  return out;
}

// Applies flag (short name) with value v; arg is the argument as given, for errors.
void set_option(BenchOptions& o, const std::string& flag, const std::string& v,
                const std::string& arg, const std::string& program) {
  const std::string name = "-" + flag;
  if (flag == "b") {
    o.min_bytes = parse_size(name, v);
  } else if (flag == "e") {
    o.max_bytes = parse_size(name, v);
  } else if (flag == "i") {
    o.step_bytes = parse_size(name, v);
  } else if (flag == "f") {
    o.step_factor = static_cast<std::size_t>(parse_count(name, v, 1));
  } else if (flag == "g") {
    o.ngpus = parse_count(name, v, 1);
    RINGLET_CHECK(o.ngpus == 1, ValueError, "-g ", v,
                  ": each process runs one rank on one device, so only -g 1 is accepted (use -np "
                  "N for more ranks; several may share a device)");
    o.gpu_flag = true;
  } else if (flag == "device") {
    RINGLET_CHECK(v == "cpu" || v == "emu" || v == "cuda", ValueError, "--device '", v,
                  "' is not cpu, emu or cuda");
    o.device = v;
  } else if (flag == "n") {
    o.iters = parse_count(name, v, 1);
  } else if (flag == "w") {
    o.warmup = parse_count(name, v, 0);
  } else if (flag == "c") {
    o.check = parse_count(name, v, 0);
  } else if (flag == "z") {
    o.blocking = parse_count(name, v, 0);
  } else if (flag == "a") {
    o.average = parse_count(name, v, 0);
    RINGLET_CHECK(o.average <= 3, ValueError, "-a ", v, ": 0 rank 0, 1 mean, 2 min or 3 max");
  } else if (flag == "T") {
    o.timeout_s = parse_count(name, v, 0);
  } else if (flag == "d") {
    o.types = parse_types(v);
  } else if (flag == "o") {
    o.ops = parse_ops(v);
  } else if (flag == "r") {
    o.root = parse_count(name, v, 0);
  } else if (flag == "t") {
    RINGLET_CHECK(
        v == "tcp" || v == "shm" || v == "rdma" || v == "auto" || v == "ipc", ValueError, "-t '", v,
        "' is not a transport (tcp, shm, rdma, ipc, auto); note that -t selects the transport "
        "here, not nccl-tests' thread count");
    // ipc: device windows shared between the processes, small messages over shm.
    o.transport = v == "ipc" ? "shm" : v;
    o.link = v == "ipc" ? "ipc" : v == "auto" ? "auto" : "staged";
  } else if (flag == "np") {
    o.np = parse_count(name, v, 1);
    RINGLET_CHECK(o.np <= core::kMaxLocalRanks, ValueError, "-np ", v, " is more ranks than the ",
                  core::kMaxLocalRanks, " one host may run");
  } else if (flag == "min-time") {
    char* end = nullptr;
    o.min_time_s = std::strtod(v.c_str(), &end);
    RINGLET_CHECK(*end == '\0' && o.min_time_s >= 0 && o.min_time_s < 3600, ValueError,
                  "--min-time '", v, "' is not a number of seconds");
  } else if (flag == "warmup-time") {
    char* end = nullptr;
    o.warmup_time_s = std::strtod(v.c_str(), &end);
    RINGLET_CHECK(*end == '\0' && o.warmup_time_s >= 0 && o.warmup_time_s < 3600, ValueError,
                  "--warmup-time '", v, "' is not a number of seconds");
  } else if (flag == "model") {
    RINGLET_CHECK(!v.empty(), ValueError, "--model needs a profile file or `default`");
    o.model = v;
  } else if (flag == "child-rank") {
    o.child_rank = parse_count(name, v, 1);
  } else if (flag == "store-port") {
    o.store_port = parse_count(name, v, 1);
  } else if (flag == "parent-pid") {
    o.parent_pid = parse_count(name, v, 1);
  } else {
    RINGLET_THROW(ValueError, "unknown flag '", arg, "'\n", usage(program));
  }
}

// What no single flag can check: the size range grows, --child-rank comes with -np.
void check_combination(const BenchOptions& o) {
  RINGLET_CHECK(o.min_bytes <= o.max_bytes, ValueError, "invalid sizes for 'minbytes' and ",
                "'maxbytes': ", o.min_bytes, " > ", o.max_bytes);
  RINGLET_CHECK(o.step_factor > 1 ? o.min_bytes > 0 : o.step_bytes > 0, ValueError,
                o.step_factor > 1 ? "-b 0 with -f > 1 never grows: start at -b 1 or more"
                                  : "-i 0 never grows: give a step of at least 1 byte");
  RINGLET_CHECK(
      o.child_rank < 0 || (o.np > o.child_rank && o.store_port > 0 && o.parent_pid > 0), ValueError,
      "--child-rank is for ranks spawned by -np (needs -np, --store-port and --parent-pid)");
  RINGLET_CHECK(!o.threads || (o.np > 0 && o.child_rank < 0), ValueError,
                "--threads runs the ranks -np N asks for: add -np");
}

}  // namespace

BenchOptions parse_bench_options(const std::string& program, int argc, char** argv) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i) o.args.emplace_back(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    FlagArgument parsed = split_flag(arg, program);
    const std::string& flag = parsed.flag;
    if (flag == "corrupt" || flag == "threads") {
      (flag == "corrupt" ? o.corrupt : o.threads) = true;
      continue;
    }
    if (flag == "h") {
      o.np = -1;  // the caller prints usage
      return o;
    }
    if (const auto it = kUnsupported.find(flag); it != kUnsupported.end()) {
      RINGLET_THROW(ValueError, "-", flag, " (", it->second,
                    ") is an nccl-tests flag that ringlet's benchmarks do not support");
    }
    if (!parsed.value) {
      RINGLET_CHECK(i + 1 < argc, ValueError, arg, " needs a value\n", usage(program));
      parsed.value = argv[++i];
    }
    set_option(o, flag, *parsed.value, arg, program);
  }
  check_combination(o);
  return o;
}

}  // namespace ringlet::bench
