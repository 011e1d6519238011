// The shared-memory all-reduce (exec/comm/shm_backend.h) and its segment: members are
// threads of this process, each with its own store client and mapping, as ranks would be;
// the backend they wrap is the store backend (no Gloo needed).  The whole training runs
// through it in the equivalence suite.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "exec/comm/c10d_compat.h"
#include "exec/comm/shm_backend.h"
#include "exec/comm/shm_segment.h"
#include "exec/comm/store_backend.h"

namespace {

using namespace quintnet::exec;
using std::chrono::milliseconds;

// A fresh file store for one test's group of `size` members.
std::string store_path(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/shm_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove(path);
  return path;
}

// Runs body(member) on `size` threads, one per member; rethrows nothing (bodies record).
void on_members(int size, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int m = 0; m < size; ++m) threads.emplace_back(body, m);
  for (auto& t : threads) t.join();
}

c10::intrusive_ptr<CommBackend> shm_group(const std::string& path, int size, int member, milliseconds timeout) {
  auto store = make_file_store(path, size);
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(10 + r);  // global ranks other than member indices
  auto inner = make_store_backend(make_prefix_store("inner", store), member, size, timeout);
  return with_shared_memory(inner, *store, ranks, member, timeout, /*spin=*/true);
}

// What member m contributes: fixed values per member, dtype and size (a formula, not a
// draw: the members are threads, and LibTorch's default generator is shared).
torch::Tensor contribution(int member, int64_t n, torch::ScalarType dtype) {
  torch::Tensor x = torch::sin(torch::arange(n, torch::kFloat64) * (0.37 * (member + 1)) + member) * 100;
  return dtype == torch::kInt64 ? x.round().to(dtype) : x.to(dtype);
}

// Sizes: empty, one element, odd, and several pieces (a three-member group's piece is
// 4 MiB / 8 = 512 KiB: 131,072 floats).
TEST(ShmBackend, AllReducesEqualTheSumInMemberOrderOnEveryMember) {
  const int size = 3;
  const std::string path = store_path("sum");
  std::vector<std::string> failures(size);
  on_members(size, [&](int member) {
    auto group = shm_group(path, size, member, milliseconds(60000));
    if (group->getBackendName() != kShmBackendName) return void(failures[member] = "not " + std::string(kShmBackendName));
    for (torch::ScalarType dtype : {torch::kFloat32, torch::kFloat64, torch::kInt64})
      for (int64_t n : {0, 1, 7, 300001})
        for (auto op : {c10d::ReduceOp::SUM, c10d::ReduceOp::MAX}) {
          std::vector<at::Tensor> t{contribution(member, n, dtype)};
          c10d::AllreduceOptions opts;
          opts.reduceOp = op;
          group->allreduce(t, opts)->wait();
          // The same additions in the same order: the same bits.
          torch::Tensor expected = contribution(0, n, dtype);
          for (int k = 1; k < size; ++k)
            expected = op == c10d::ReduceOp::SUM ? expected + contribution(k, n, dtype)
                                                 : torch::maximum(expected, contribution(k, n, dtype));
          if (!torch::equal(t[0], expected))
            failures[member] += std::string(c10::toString(dtype)) + " n=" + std::to_string(n) +
                                (op == c10d::ReduceOp::SUM ? " sum" : " max") + " differs; ";
        }
  });
  for (int m = 0; m < size; ++m) EXPECT_EQ(failures[m], "") << "member " << m;
}

// Small all-reduces take one barrier each, so a member may start the next call while
// another still reads this one's slots: back-to-back calls of changing values and sizes
// (small, small, two-barrier, small ...), each checked, would catch a slot overwritten
// too early.  Four members, so that several threads are often between barriers at once.
TEST(ShmBackend, BackToBackSmallAndLargeAllReducesKeepEveryCallsValues) {
  const int size = 4;
  const std::string path = store_path("back_to_back");
  std::vector<std::string> failures(size);
  on_members(size, [&](int member) {
    auto group = shm_group(path, size, member, milliseconds(60000));
    for (int call = 0; call < 300; ++call) {
      const int64_t n = call % 3 == 2 ? 100000 : 1000 + call % 7;  // 400 KB: over the one-barrier bound
      std::vector<at::Tensor> t{contribution(member, n, torch::kFloat32) + call};
      group->allreduce(t)->wait();
      torch::Tensor expected = contribution(0, n, torch::kFloat32) + call;
      for (int k = 1; k < size; ++k) expected = expected + (contribution(k, n, torch::kFloat32) + call);
      if (!torch::equal(t[0], expected)) failures[member] += "call " + std::to_string(call) + " differs; ";
    }
  });
  for (int m = 0; m < size; ++m) EXPECT_EQ(failures[m], "") << "member " << m;
}

TEST(ShmBackend, MembersThatDisagreeOnTheSizeAllStopWithTheReason) {
  const std::string path = store_path("disagree");
  std::vector<std::string> errors(2);
  on_members(2, [&](int member) {
    auto group = shm_group(path, 2, member, milliseconds(60000));
    std::vector<at::Tensor> t{torch::ones({member == 0 ? 10 : 20})};
    try {
      group->allreduce(t)->wait();
    } catch (const std::exception& e) {
      errors[member] = e.what();
    }
  });
  for (const std::string& e : errors) EXPECT_NE(e.find("ranks disagree on a tensor's shape"), std::string::npos) << e;
}

TEST(ShmSegment, AMemberThatNeverArrivesIsNamedAtTheTimeout) {
  const std::string path = store_path("late");
  std::string error;
  std::atomic<bool> done{false};
  on_members(2, [&](int member) {
    auto store = make_file_store(path, 2);
    auto segment = ShmSegment::open(*store, member, {4, 7}, 4096, milliseconds(500), /*spin=*/true);
    ASSERT_TRUE(segment);
    if (member == 1) {  // alive, mapped, never at the barrier
      while (!done) std::this_thread::sleep_for(milliseconds(10));
      return;
    }
    try {
      segment->barrier();
    } catch (const std::exception& e) {
      error = e.what();
    }
    done = true;
  });
  EXPECT_NE(error.find("rank 7 did not arrive within"), std::string::npos) << error;
}

// A rank that crashed is named at once (its process has ended), not after the timeout.
TEST(ShmSegment, AMemberWhoseProcessEndedIsNamedBeforeTheTimeout) {
  const std::string path = store_path("ended");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // member 1: maps the segment, then dies without a word
    auto store = make_file_store(path, 2);
    auto segment = ShmSegment::open(*store, 1, {0, 1}, 4096, milliseconds(600000), true);
    ::_exit(segment ? 0 : 3);
  }
  auto store = make_file_store(path, 2);
  auto segment = ShmSegment::open(*store, 0, {0, 1}, 4096, milliseconds(600000), true);
  ASSERT_TRUE(segment);
  std::string error;
  try {
    segment->barrier();  // the child is a zombie until waited for: ended all the same
  } catch (const std::exception& e) {
    error = e.what();
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(error.find("rank 1 (pid " + std::to_string(child) + ") has ended"), std::string::npos) << error;
}

// A member that cannot map the segment (here: it expects another size, as a member on
// another host finds no segment at all) leaves every member without one — and the
// segment's name is gone from /dev/shm either way.
TEST(ShmSegment, AMemberThatCannotMapItLeavesTheWholeGroupWithout) {
  const std::string path = store_path("refused");
  std::vector<int> got(2, -1);
  on_members(2, [&](int member) {
    auto store = make_file_store(path, 2);
    got[member] = ShmSegment::open(*store, member, {0, 1}, member == 0 ? 4096 : 8192, milliseconds(60000), true) != nullptr;
  });
  EXPECT_EQ(got, (std::vector<int>{0, 0}));
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
    EXPECT_EQ(entry.path().filename().string().rfind("quintnet-" + std::to_string(::getpid()) + "-", 0), std::string::npos)
        << entry.path();
}

}  // namespace
