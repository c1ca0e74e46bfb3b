// discover(): turns an init method plus the launcher's environment into an InitInfo. Every
// value is parsed in full and range-checked; an error is a core::ValueError naming the variable
// (or InitOptions field, or init_method) and the exact text seen, so a misconfigured launch
// says what to fix. Launchers nest (torchrun or mpirun inside a Slurm allocation), so the
// innermost one's variables win: torchrun, then Open MPI, then Slurm.
#include "transport/discovery.h"

#include <charconv>
#include <cstdlib>

#include "core/error.h"

namespace ringlet::transport {
namespace {

constexpr int kSlurmBasePort = 29500;  // MASTER_PORT under Slurm = 29500 + job id % 1000

// A value and where it came from ("RANK", "InitOptions::rank"), for error messages.
struct Setting {
  std::int64_t value = 0;
  std::string name;
  std::string text;
};

class Env {
 public:
  explicit Env(const EnvLookup& lookup) : lookup_(lookup) {}

  std::optional<std::string> text(const std::string& name) const { return lookup_(name); }
  bool has(const std::string& name) const { return lookup_(name).has_value(); }

  std::string required_text(const std::string& name, const std::string& why) const {
    const auto t = lookup_(name);
    RINGLET_CHECK(t.has_value(), ValueError, "missing environment variable ", name, " (", why, ")");
    return *t;
  }
  std::optional<Setting> integer(const std::string& name) const {
    const auto t = lookup_(name);
    if (!t) return std::nullopt;
    return parse(name, *t);
  }
  Setting required_integer(const std::string& name, const std::string& why) const {
    return parse(name, required_text(name, why));
  }

  static Setting parse(const std::string& name, const std::string& text) {
    Setting s{0, name, text};
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, s.value);
    RINGLET_CHECK(!text.empty() && ec == std::errc() && ptr == end, ValueError, name, "='", text,
                  "' is not an integer");
    return s;
  }

 private:
  const EnvLookup& lookup_;
};

Setting from_option(const std::optional<int>& value, const char* name) {
  return Setting{*value, name, std::to_string(*value)};
}

// Explicit InitOptions win over the environment.
Setting pick(const std::optional<int>& option, const char* option_name,
             const std::optional<Setting>& env_value) {
  return option ? from_option(option, option_name) : *env_value;
}

// Checks ranges and fills rank, world and local fields.
void fill_ranks(InitInfo& info, const Setting& rank, const Setting& world,
                const std::optional<Setting>& local_rank,
                const std::optional<Setting>& local_world) {
  RINGLET_CHECK(world.value >= 1 && world.value <= (1 << 24), ValueError, world.name, "='",
                world.text, "' is out of range: the world size must be in [1, 2^24]");
  RINGLET_CHECK(rank.value >= 0 && rank.value < world.value, ValueError, rank.name, "='", rank.text,
                "' is out of range: the rank must be in [0, ", world.value, ") (", world.name, "=",
                world.value, ")");
  info.rank = static_cast<int>(rank.value);
  info.world_size = static_cast<int>(world.value);
  // Without local variables: rank 0 of 1 on this host; with a local rank only, the world size
  // is the bound for the local world.
  info.local_rank = local_rank ? static_cast<int>(local_rank->value) : 0;
  const std::int64_t local_size = local_world ? local_world->value : (local_rank ? world.value : 1);
  if (local_world) {
    RINGLET_CHECK(local_size >= 1 && local_size <= world.value, ValueError, local_world->name, "='",
                  local_world->text, "' is out of range [1, ", world.value, "] (", world.name, "=",
                  world.value, ")");
  }
  if (local_rank) {
    RINGLET_CHECK(
        local_rank->value >= 0 && local_rank->value < local_size, ValueError, local_rank->name,
        "='", local_rank->text, "' is out of range: the local rank must be in [0, ", local_size,
        ")",
        local_world ? core::str(" (", local_world->name, "=", local_size, ")") : std::string());
  }
  info.local_world_size = static_cast<int>(local_size);
}

int parse_port(const std::string& name, const std::string& text) {
  const Setting port = Env::parse(name, text);
  RINGLET_CHECK(port.value >= 1 && port.value <= 65535, ValueError, name, "='", text,
                "' is out of range: a port must be in [1, 65535]");
  return static_cast<int>(port.value);
}

std::string parse_host(const std::string& name, std::string host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  RINGLET_CHECK(!host.empty() && host.find_first_of(" \t/[]") == std::string::npos, ValueError,
                name, "='", host, "' is not a host name or address");
  return host;
}

void master_from_env(InitInfo& info, const Env& env, const std::string& why) {
  info.master_addr = parse_host("MASTER_ADDR", env.required_text("MASTER_ADDR", why));
  info.master_port = parse_port("MASTER_PORT", env.required_text("MASTER_PORT", why));
}

InitInfo from_torchrun(const InitOptions& o, const Env& env) {
  const std::string why = "env:// init reads MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE";
  InitInfo info;
  info.source = "env";
  const auto rank =
      o.rank ? from_option(o.rank, "InitOptions::rank") : env.required_integer("RANK", why);
  const auto world = o.world_size ? from_option(o.world_size, "InitOptions::world_size")
                                  : env.required_integer("WORLD_SIZE", why);
  fill_ranks(info, rank, world, env.integer("LOCAL_RANK"), env.integer("LOCAL_WORLD_SIZE"));
  // `ringlet launch` hosts ringlet's store on its own port and leaves MASTER_PORT to the job.
  if (env.has("RINGLET_STORE_PORT")) {
    const std::string launch = "ringlet launch sets RINGLET_STORE_ADDR with RINGLET_STORE_PORT";
    info.master_addr =
        parse_host("RINGLET_STORE_ADDR", env.required_text("RINGLET_STORE_ADDR", launch));
    info.master_port = parse_port("RINGLET_STORE_PORT", *env.text("RINGLET_STORE_PORT"));
    return info;
  }
  master_from_env(info, env, why);
  return info;
}

InitInfo from_ompi(const InitOptions& o, const Env& env) {
  const std::string why = "Open MPI launch";
  InitInfo info;
  info.source = "ompi";
  const auto world = env.required_integer("OMPI_COMM_WORLD_SIZE", why);
  fill_ranks(info, pick(o.rank, "InitOptions::rank", env.integer("OMPI_COMM_WORLD_RANK")),
             pick(o.world_size, "InitOptions::world_size", world),
             env.integer("OMPI_COMM_WORLD_LOCAL_RANK"), env.integer("OMPI_COMM_WORLD_LOCAL_SIZE"));
  // mpirun exports no master host; when every rank is on this host, loopback is it.
  if (!env.has("MASTER_ADDR") && info.local_world_size == info.world_size &&
      env.has("OMPI_COMM_WORLD_LOCAL_SIZE")) {
    info.master_addr = "127.0.0.1";
    info.master_port = parse_port(
        "MASTER_PORT", env.required_text("MASTER_PORT", "Open MPI launch: the store port"));
    return info;
  }
  master_from_env(info, env, "Open MPI launch across hosts: set MASTER_ADDR to rank 0's host");
  return info;
}

// SLURM_TASKS_PER_NODE="2(x3),1" lists tasks per node; returns the entry of node `node`.
std::optional<std::int64_t> slurm_tasks_on_node(const std::string& spec, std::int64_t node) {
  std::size_t at = 0;
  while (at < spec.size() && node >= 0) {
    std::size_t end = spec.find(',', at);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(at, end - at);
    const auto paren = item.find("(x");
    const Setting tasks = Env::parse("SLURM_TASKS_PER_NODE", item.substr(0, paren));
    std::int64_t repeat = 1;
    if (paren != std::string::npos) {
      RINGLET_CHECK(item.back() == ')', ValueError, "SLURM_TASKS_PER_NODE='", spec,
                    "' is malformed");
      repeat =
          Env::parse("SLURM_TASKS_PER_NODE", item.substr(paren + 2, item.size() - paren - 3)).value;
    }
    if (node < repeat) return tasks.value;
    node -= repeat;
    at = end + 1;
  }
  return std::nullopt;
}

InitInfo from_slurm(const InitOptions& o, const Env& env) {
  const std::string why = "Slurm launch";
  InitInfo info;
  info.source = "slurm";
  const auto world = env.required_integer("SLURM_NTASKS", why);
  auto local_world = env.integer("SLURM_NTASKS_PER_NODE");
  if (!local_world) {
    const auto spec = env.text("SLURM_TASKS_PER_NODE");
    const auto node = env.integer("SLURM_NODEID");
    if (spec && node) {
      if (const auto n = slurm_tasks_on_node(*spec, node->value)) {
        local_world = Setting{*n, "SLURM_TASKS_PER_NODE", *spec};
      }
    }
  }
  fill_ranks(info, pick(o.rank, "InitOptions::rank", env.integer("SLURM_PROCID")),
             pick(o.world_size, "InitOptions::world_size", world), env.integer("SLURM_LOCALID"),
             local_world);
  if (const auto addr = env.text("MASTER_ADDR")) {
    info.master_addr = parse_host("MASTER_ADDR", *addr);
  } else {
    const auto list =
        env.text("SLURM_NODELIST") ? env.text("SLURM_NODELIST") : env.text("SLURM_JOB_NODELIST");
    RINGLET_CHECK(list.has_value(), ValueError,
                  "missing environment variable SLURM_NODELIST (Slurm launch: the first host "
                  "is the store host unless MASTER_ADDR is set)");
    info.master_addr = slurm_first_host(*list);
  }
  if (const auto port = env.text("MASTER_PORT")) {
    info.master_port = parse_port("MASTER_PORT", *port);
  } else {
    // Every rank derives the same port from the job id; distinct jobs on a node rarely collide.
    const auto job = env.required_integer(
        "SLURM_JOB_ID", "Slurm launch without MASTER_PORT: the store port derives from it");
    RINGLET_CHECK(job.value >= 0, ValueError, "SLURM_JOB_ID='", job.text, "' is negative");
    info.master_port = kSlurmBasePort + static_cast<int>(job.value % 1000);
  }
  return info;
}

// tcp:// and file:// take rank and world size from InitOptions, else RANK / WORLD_SIZE.
void explicit_ranks(InitInfo& info, const InitOptions& o, const Env& env) {
  const std::string why = core::str("init_method '", o.init_method,
                                    "' needs a rank and a world size: pass InitOptions::rank "
                                    "and ::world_size or set RANK and WORLD_SIZE");
  const auto rank =
      o.rank ? from_option(o.rank, "InitOptions::rank") : env.required_integer("RANK", why);
  const auto world = o.world_size ? from_option(o.world_size, "InitOptions::world_size")
                                  : env.required_integer("WORLD_SIZE", why);
  fill_ranks(info, rank, world, env.integer("LOCAL_RANK"), env.integer("LOCAL_WORLD_SIZE"));
}

InitInfo from_tcp_url(const InitOptions& o, const Env& env) {
  const std::string& url = o.init_method;
  const std::string rest = url.substr(6);  // after "tcp://"
  std::string host, port;
  if (!rest.empty() && rest[0] == '[') {  // [v6 address]:port
    const auto close = rest.find(']');
    RINGLET_CHECK(close != std::string::npos && close + 1 < rest.size() && rest[close + 1] == ':',
                  ValueError, "init_method='", url,
                  "' is malformed: expected tcp://[v6 address]:port");
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    const auto colon = rest.rfind(':');
    RINGLET_CHECK(colon != std::string::npos, ValueError, "init_method='", url,
                  "' has no port: expected tcp://host:port");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    RINGLET_CHECK(host.find(':') == std::string::npos, ValueError, "init_method='", url,
                  "' is ambiguous: write an IPv6 address in brackets, tcp://[::1]:29500");
  }
  InitInfo info;
  info.source = "tcp";
  info.master_addr = parse_host(core::str("init_method='", url, "': host"), host);
  info.master_port = parse_port(core::str("init_method='", url, "': port"), port);
  explicit_ranks(info, o, env);
  return info;
}

InitInfo from_file_url(const InitOptions& o, const Env& env) {
  InitInfo info;
  info.source = "file";
  info.file_path = o.init_method.substr(7);  // after "file://"
  RINGLET_CHECK(!info.file_path.empty() && info.file_path[0] == '/', ValueError, "init_method='",
                o.init_method, "' needs an absolute path: file:///shared/dir/store");
  explicit_ranks(info, o, env);
  return info;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

InitInfo discover(const InitOptions& options, const EnvLookup& lookup) {
  const Env env(lookup);
  const std::string& m = options.init_method;
  if (starts_with(m, "tcp://")) return from_tcp_url(options, env);
  if (starts_with(m, "file://")) return from_file_url(options, env);
  RINGLET_CHECK(m.empty() || m == "env://", ValueError, "init_method='", m,
                "' is not supported: expected env://, tcp://host:port or file:///path");
  if (env.has("RANK") || env.has("WORLD_SIZE")) return from_torchrun(options, env);
  if (env.has("OMPI_COMM_WORLD_RANK")) return from_ompi(options, env);
  if (env.has("SLURM_PROCID")) return from_slurm(options, env);
  if (options.rank && options.world_size) return from_torchrun(options, env);
  RINGLET_THROW(ValueError,
                "missing environment variable RANK: no launcher found (torchrun sets "
                "MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE; Slurm sets SLURM_PROCID; Open MPI "
                "sets OMPI_COMM_WORLD_RANK)");
}

std::string slurm_first_host(const std::string& nodelist) {
  const auto bad = [&](const char* why) {
    RINGLET_THROW(ValueError, "SLURM_NODELIST='", nodelist, "' is malformed: ", why);
  };
  if (nodelist.empty()) bad("empty");
  // The first top-level item ends at a comma outside brackets: "node[01-03,07],gpu5".
  std::string host;
  bool in_bracket = false;
  bool took_first = false;  // inside a bracket: the first element has been copied
  int digits = 0;           // digits copied from the current bracket
  for (const char c : nodelist) {
    if (!in_bracket && c == ',') break;
    if (c == '[') {
      if (in_bracket) bad("nested '['");
      in_bracket = true;
      took_first = false;
      digits = 0;
    } else if (c == ']') {
      if (!in_bracket) bad("unmatched ']'");
      if (digits == 0) bad("empty range");
      in_bracket = false;
    } else if (in_bracket) {
      // Copy the digits of the first range's start: "01" of "[01-03,07]".
      if (c == ',' || c == '-') {
        took_first = true;
      } else if (!took_first) {
        if (c < '0' || c > '9') bad("non-digit inside brackets");
        host.push_back(c);
        ++digits;
      }
    } else {
      host.push_back(c);
    }
  }
  if (in_bracket) bad("unmatched '['");
  if (host.empty()) bad("empty first host");
  return host;
}

bool launched_as_rank(const EnvLookup& env) {
  if (env("RANK") || env("WORLD_SIZE") || env("OMPI_COMM_WORLD_SIZE")) return true;
  const auto ntasks = env("SLURM_NTASKS");
  return env("SLURM_PROCID").has_value() && ntasks.has_value() && *ntasks != "1";
}

}  // namespace ringlet::transport
