#pragma once
// core::Schedule — the pipeline schedule IR that exec and sim both interpret.
//
// For each pipeline rank, an ordered list of actions.  With v chunks per rank the
// model is cut into S = pp * v *virtual stages*; rank r holds the stages
// r, r + pp, r + 2·pp, … (Megatron's interleaving), so chunk c of rank r is
// stage c·pp + r.  A microbatch passes stages 0 … S-1 forward, then S-1 … 0
// backward.
//
// Semantics (what the validator proves and the interpreters rely on):
//   - SEND_* are asynchronous: posted when reached, completed later;
//   - RECV_* block until the matching send has been posted (and its data arrived);
//   - compute actions run one at a time in list order.
// In SEND/RECV actions `chunk` is the *local* chunk the message belongs to (the one
// that produced an activation / consumes a gradient, and so on) and `peer` is the
// pipeline rank on the other side.
#include <string>
#include <vector>

namespace quintnet::core {

enum class ActionKind {
  Forward,         // F(mb, chunk)
  Backward,        // B(mb, chunk): input- and weight-gradients together
  BackwardInput,   // BI(mb, chunk): input-gradient only (zero-bubble split)
  BackwardWeight,  // BW(mb, chunk): weight-gradient, after BI of the same mb
  SendAct,
  RecvAct,
  SendGrad,
  RecvGrad,
  GradSync,       // DP gradient all-reduce of a chunk's parameters is complete
  OptimizerStep,  // once per step, after every GRAD_SYNC
};

struct Action {
  ActionKind kind;
  int mb = -1;     // microbatch; -1 for GRAD_SYNC / OPTIMIZER_STEP
  int chunk = 0;   // local chunk (virtual stage index on this rank)
  int peer = -1;   // pipeline rank on the other side of a SEND/RECV, else -1

  bool operator==(const Action& o) const {
    return kind == o.kind && mb == o.mb && chunk == o.chunk && peer == o.peer;
  }
};

bool is_compute(ActionKind kind);  // F, B, BI, BW
bool is_p2p(ActionKind kind);      // SEND_*/RECV_*
bool is_send(ActionKind kind);     // SEND_ACT, SEND_GRAD
bool is_recv(ActionKind kind);     // RECV_ACT, RECV_GRAD
const char* action_name(ActionKind kind);  // "F", "B", "BI", "BW", "SEND_ACT", ...
ActionKind parse_action_kind(const std::string& name);  // inverse; throws ScheduleError
// "F(mb 3, chunk 0)", "RECV_GRAD(mb 2, chunk 1, from rank 3)".
std::string to_string(const Action& action);

enum class ScheduleKind { Afab, OneFOneB, Interleaved, ZbH1 };

// Accepts the names of the original configs and common aliases:
// afab|gpipe, 1f1b, interleaved|interleaved-1f1b, zb-h1|zbh1|zero-bubble.
ScheduleKind parse_schedule_kind(const std::string& name);
const char* schedule_kind_name(ScheduleKind kind);  // canonical: afab, 1f1b, interleaved, zb-h1
std::vector<std::string> schedule_kind_names();

struct Schedule {
  std::string name;      // canonical schedule name
  int pp = 1;            // pipeline ranks
  int microbatches = 1;  // per optimizer step
  int chunks = 1;        // virtual stages per rank (v)
  std::vector<std::vector<Action>> ranks;  // ranks[r] = actions of pipeline rank r

  int num_stages() const { return pp * chunks; }
  int stage(int rank, int chunk) const { return chunk * pp + rank; }
  int rank_of_stage(int stage) const { return stage % pp; }
  int chunk_of_stage(int stage) const { return stage / pp; }
};

}  // namespace quintnet::core
