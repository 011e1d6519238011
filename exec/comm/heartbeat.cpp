#include "exec/comm/heartbeat.h"

#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <vector>

namespace quintnet::exec {

struct Heartbeat::State {
  std::shared_ptr<BeatBoard> board;
  int rank = 0;
  int world_size = 1;
  std::atomic<std::int64_t> step{0};
  std::mutex mutex;
  std::condition_variable changed;
  bool stopping = false;
  bool exited = false;
};

namespace {

class FolderBoard : public BeatBoard {
 public:
  explicit FolderBoard(std::string dir) : dir_(std::move(dir)) {}
  void post(int rank, const std::string& beat) override {
    // Written aside and renamed: a reader sees the old post or the new one, never half.
    const std::string path = path_of(rank), temporary = path + ".new";
    std::ofstream(temporary, std::ios::trunc) << beat;
    std::rename(temporary.c_str(), path.c_str());
  }
  std::optional<std::string> read(int rank) override {
    std::ifstream in(path_of(rank));
    std::string beat;
    if (!std::getline(in, beat)) return std::nullopt;
    return beat;
  }

 private:
  std::string path_of(int rank) const { return dir_ + "/heartbeat-" + std::to_string(rank); }
  std::string dir_;
};

class StoreBoard : public BeatBoard {
 public:
  explicit StoreBoard(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void post(int rank, const std::string& beat) override {
    store_->set(key_of(rank), std::vector<std::uint8_t>(beat.begin(), beat.end()));
  }
  std::optional<std::string> read(int rank) override {
    if (!store_->check({key_of(rank)})) return std::nullopt;  // get() would wait for it
    const std::vector<std::uint8_t> v = store_->get(key_of(rank));
    return std::string(v.begin(), v.end());
  }

 private:
  static std::string key_of(int rank) { return "heartbeat/" + std::to_string(rank); }
  c10::intrusive_ptr<c10d::Store> store_;
};

std::vector<std::optional<std::string>> read_beats(BeatBoard& board, int rank, int world_size) {
  std::vector<std::optional<std::string>> beats(world_size);
  for (int r = 0; r < world_size; ++r)
    if (r != rank) beats[r] = board.read(r);
  return beats;
}

std::string step_of(const std::string& beat) { return beat.substr(0, beat.find(' ')); }

// Names the ranks whose beat did not move between two readings.
std::string compare_beats(const std::vector<std::optional<std::string>>& before,
                          const std::vector<std::optional<std::string>>& after, int rank, double seconds) {
  std::vector<std::string> silent;
  for (size_t r = 0; r < after.size(); ++r) {
    if (static_cast<int>(r) == rank) continue;
    if (!after[r]) {
      silent.push_back("rank " + std::to_string(r) + " (never heard from)");
    } else if (before[r] == after[r]) {
      const std::string step = step_of(*after[r]);
      silent.push_back("rank " + std::to_string(r) + (step == "0" ? " (during set-up)" : " (last seen in step " + step + ")"));
    }
  }
  if (silent.empty())
    return "every other rank still has a heartbeat: a peer is slow or waits on another operation (raise --timeout "
           "if steps are this long)";
  std::string names;
  const size_t shown = std::min<size_t>(silent.size(), 8);
  for (size_t i = 0; i < shown; ++i) names += (i ? ", " : "") + silent[i];
  if (silent.size() > shown) names += " and " + std::to_string(silent.size() - shown) + " more";
  char window[32];
  std::snprintf(window, sizeof window, "%.1f", seconds);
  return "no heartbeat for " + std::string(window) + " s from " + names + ": stopped, hung or dead";
}

// Posts a beat every kInterval and soon after every step change, until stopped.
void beat_until_stopped(const std::shared_ptr<Heartbeat::State>& s) {
  std::uint64_t beat = 0;
  std::int64_t posted_step = -1;
  std::unique_lock<std::mutex> lock(s->mutex);
  while (!s->stopping) {
    lock.unlock();
    posted_step = s->step.load();
    try {
      s->board->post(s->rank, std::to_string(posted_step) + " " + std::to_string(++beat));
    } catch (const std::exception&) {
      // A broken board shows up to the others as this rank's missing beat.
    }
    std::this_thread::sleep_for(Heartbeat::kMinGap);
    lock.lock();
    s->changed.wait_for(lock, Heartbeat::kInterval - Heartbeat::kMinGap,
                        [&] { return s->stopping || s->step.load() != posted_step; });
  }
  s->exited = true;
  s->changed.notify_all();
}

}  // namespace

std::shared_ptr<BeatBoard> beat_board_in_folder(const std::string& dir) { return std::make_shared<FolderBoard>(dir); }

std::shared_ptr<BeatBoard> beat_board_in_store(c10::intrusive_ptr<c10d::Store> store) {
  return std::make_shared<StoreBoard>(std::move(store));
}

Heartbeat::Heartbeat(std::shared_ptr<BeatBoard> board, int rank, int world_size) : state_(std::make_shared<State>()) {
  state_->board = std::move(board);
  state_->rank = rank;
  state_->world_size = world_size;
  thread_ = std::thread([s = state_] { beat_until_stopped(s); });
}

Heartbeat::~Heartbeat() {
  std::unique_lock<std::mutex> lock(state_->mutex);
  state_->stopping = true;
  state_->changed.notify_all();
  // A thread stuck in a board call that will not return is left behind (it holds its
  // own reference to the state) rather than hanging the exit.
  const bool exited = state_->changed.wait_for(lock, std::chrono::seconds(2), [&] { return state_->exited; });
  lock.unlock();
  if (exited)
    thread_.join();
  else
    thread_.detach();
}

void Heartbeat::set_step(std::int64_t step) {
  state_->step.store(step);
  state_->changed.notify_one();
}

std::string Heartbeat::diagnose() const {
  struct Probe {
    std::mutex mutex;
    std::condition_variable done_cv;
    bool done = false;
    std::string text;
  };
  auto probe = std::make_shared<Probe>();
  const auto window = 3 * kInterval;
  std::thread([s = state_, probe, window] {
    std::string text;
    try {
      const auto before = read_beats(*s->board, s->rank, s->world_size);
      std::this_thread::sleep_for(window);
      const auto after = read_beats(*s->board, s->rank, s->world_size);
      text = compare_beats(before, after, s->rank, std::chrono::duration<double>(window).count());
    } catch (const std::exception&) {
      text = "the rendezvous store failed too, so the silent rank is unknown (rank 0 serves a TCP store)";
    }
    std::lock_guard<std::mutex> lock(probe->mutex);
    probe->text = text;
    probe->done = true;
    probe->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(probe->mutex);
  if (!probe->done_cv.wait_for(lock, window + std::chrono::seconds(4), [&] { return probe->done; }))
    return "the rendezvous store does not answer either, so the silent rank is unknown (a TCP store is served by "
           "rank 0: it may be rank 0 that stalled)";
  return probe->text;
}

}  // namespace quintnet::exec
