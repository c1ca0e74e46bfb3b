// Discovery: who am I, how many are we, and where is the store. Sources in order: explicit
// arguments (init_method tcp://host:port or file:///path plus rank and world size), torchrun
// variables (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE; the store
// at RINGLET_STORE_ADDR:RINGLET_STORE_PORT instead when `ringlet launch` set them), Slurm
// (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NODELIST: first host is the master unless
// MASTER_ADDR is set), Open MPI (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE). When
// both Open MPI and Slurm variables are present, Open MPI's win: mpirun inside an sbatch job
// inherits Slurm variables that describe the batch step, not this rank.
// A missing or malformed variable is a ValueError naming the variable and the value seen.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "core/deadline.h"
#include "transport/store.h"

namespace ringlet::transport {

// Reads one environment variable (injectable so tests need not touch the process env).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup process_env();

struct InitInfo {
  std::string source;  // "tcp", "file", "env", "slurm", "ompi"
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;  // store host (tcp)
  int master_port = 0;      // store port (tcp)
  std::string file_path;    // store file (file)
};

struct InitOptions {
  std::string init_method;        // "", "env://", "tcp://host:port", "file:///path"
  std::optional<int> rank;        // explicit rank (required with tcp:// and file://)
  std::optional<int> world_size;  // explicit world size (required with tcp:// and file://)
};

InitInfo discover(const InitOptions& options, const EnvLookup& env = process_env());

// True when a launcher started this process as one rank of a job: torchrun-style RANK or
// WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_SIZE, or a Slurm step of more than one task.
bool launched_as_rank(const EnvLookup& env = process_env());

// Expands a Slurm node list ("node[01-03,07],gpu5") and returns its first host.
std::string slurm_first_host(const std::string& nodelist);

}  // namespace ringlet::transport
