#pragma once
// Heartbeat — tells a stalled peer from a slow one when an operation fails.
//
// Gloo's timeout says only "Operation timed out!": with four ranks in a ring, which one
// stopped?  Every rank of a run runs a background thread that posts "<step> <beat>" on
// a board every half second and whenever its step changes.  When a collective or
// message fails, diagnose() reads every other rank's post twice, a few beats apart: a
// rank whose beat did not move is stopped (SIGSTOP), hung in the kernel or dead, and the
// message names it with the step it was in.
//
// The board is a file per rank in the launcher's private folder on one node (a
// FileStore would grow by a record per beat, and a stopped rank could hold its lock),
// and a key per rank of the TCP store otherwise.  That store may itself be stuck (rank
// 0's process serves it), so no board call can hold up the caller: posts happen on the
// heartbeat thread, and the reads on a thread of their own, waited for with a deadline.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "exec/comm/c10d_compat.h"

namespace quintnet::exec {

// Where the beats are posted and read; rank -> "<step> <beat>".
class BeatBoard {
 public:
  virtual ~BeatBoard() = default;
  virtual void post(int rank, const std::string& beat) = 0;
  virtual std::optional<std::string> read(int rank) = 0;  // nullopt: never posted
};
std::shared_ptr<BeatBoard> beat_board_in_folder(const std::string& dir);
std::shared_ptr<BeatBoard> beat_board_in_store(c10::intrusive_ptr<c10d::Store> store);

class Heartbeat {
 public:
  Heartbeat(std::shared_ptr<BeatBoard> board, int rank, int world_size);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // The step this rank is in (1-based, as messages count steps); sent with each beat.
  void set_step(std::int64_t step);

  // One sentence for a failure message: which ranks stopped beating and at which step,
  // or that all of them still beat (then a peer is slow or waits elsewhere).
  std::string diagnose() const;

  static constexpr std::chrono::milliseconds kInterval{500};
  static constexpr std::chrono::milliseconds kMinGap{20};  // between two posts, however fast steps are

  struct State;  // defined in heartbeat.cpp; shared with the threads

 private:
  std::shared_ptr<State> state_;  // shared with the threads, which may outlive a stuck store call
  std::thread thread_;
};

}  // namespace quintnet::exec
