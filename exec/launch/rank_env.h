#pragma once
// Where this process sits in the job, read from the environment a launcher sets:
// torchrun's RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
// (quintnet launch sets the same), or SLURM's SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID, SLURM_NTASKS_PER_NODE.  No variables at all means a single process.
#include <string>

namespace quintnet::exec {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source = "single process";  // or torchrun / OpenMPI / PMI / SLURM environment
  // The rendezvous (docs/HARDENING.md): a private folder for a FileStore when quintnet
  // launch started one node (QN_STORE_DIR; empty: a TCPStore at master_addr), and the
  // run's token that every rank must share (QN_RUN_TOKEN; empty: none).
  std::string store_dir;
  std::string run_token;

  bool single_node() const { return local_world_size == world_size; }
};

// Throws core::UserError for inconsistent or malformed values (RANK >= WORLD_SIZE, ...).
RankEnv read_rank_env();

}  // namespace quintnet::exec
