#include "exec/launch/rank_env.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace quintnet::exec {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int env_int(const char* name, int fallback, int min, int max) {
  const char* v = env(name);
  if (!v) return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < min || n > max)
    throw core::UserError(std::string("environment variable ") + name + "='" + v +
                          "' is not a whole number from " + std::to_string(min) + " to " + std::to_string(max));
  return static_cast<int>(n);
}

}  // namespace

RankEnv read_rank_env() {
  RankEnv e;
  if (env("RANK") || env("WORLD_SIZE")) {
    e.source = "torchrun environment";
    e.world_size = env_int("WORLD_SIZE", 1, 1, 1 << 20);
    e.rank = env_int("RANK", 0, 0, 1 << 20);
    e.local_rank = env_int("LOCAL_RANK", e.rank, 0, 1 << 20);
    e.local_world_size = env_int("LOCAL_WORLD_SIZE", e.world_size, 1, 1 << 20);
  } else if (env("OMPI_COMM_WORLD_RANK")) {  // OpenMPI's mpirun
    e.source = "OpenMPI environment";
    e.world_size = env_int("OMPI_COMM_WORLD_SIZE", 1, 1, 1 << 20);
    e.rank = env_int("OMPI_COMM_WORLD_RANK", 0, 0, 1 << 20);
    e.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0, 0, 1 << 20);
    e.local_world_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", e.world_size, 1, 1 << 20);
  } else if (env("PMI_RANK")) {  // MPICH / Intel MPI (Hydra's PMI)
    e.source = "PMI environment";
    e.world_size = env_int("PMI_SIZE", 1, 1, 1 << 20);
    e.rank = env_int("PMI_RANK", 0, 0, 1 << 20);
    e.local_rank = env_int("MPI_LOCALRANKID", 0, 0, 1 << 20);
    e.local_world_size = env_int("MPI_LOCALNRANKS", e.world_size, 1, 1 << 20);
  } else if (env("SLURM_PROCID")) {
    e.source = "SLURM";
    e.world_size = env_int("SLURM_NTASKS", 1, 1, 1 << 20);
    e.rank = env_int("SLURM_PROCID", 0, 0, 1 << 20);
    e.local_rank = env_int("SLURM_LOCALID", 0, 0, 1 << 20);
    // "4" or "4(x2)": the leading number is the tasks on this node.
    const char* per_node = env("SLURM_NTASKS_PER_NODE");
    e.local_world_size = per_node ? std::atoi(per_node) : e.world_size;
    if (e.local_world_size < 1) e.local_world_size = e.world_size;
  }
  if (const char* a = env("MASTER_ADDR")) e.master_addr = a;
  e.master_port = env_int("MASTER_PORT", e.master_port, 1, 65535);
  if (const char* d = env("QN_STORE_DIR")) e.store_dir = d;
  if (const char* t = env("QN_RUN_TOKEN")) e.run_token = t;
  if (e.rank >= e.world_size)
    throw core::UserError("rank " + std::to_string(e.rank) + " is not below the world size " +
                          std::to_string(e.world_size) + " (" + e.source + ")");
  if (e.local_rank >= e.local_world_size)
    throw core::UserError("local rank " + std::to_string(e.local_rank) + " is not below the local world size " +
                          std::to_string(e.local_world_size) + " (" + e.source + ")");
  return e;
}

}  // namespace quintnet::exec
