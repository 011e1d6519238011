// The shared-memory collectives and messages (exec/comm/shm_backend.h, shm_messages.h)
// and their segment: members are threads of this process, each with its own store client
// and mapping, as ranks would be; the backend they wrap is the store backend (no Gloo
// needed).  The whole training runs
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
#include "exec/comm/shm_messages.h"
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
  return with_shared_memory(inner, *store, ranks, member, timeout, /*spin=*/true, /*messages=*/true);
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

// Broadcasts from two roots and all-gathers, empty to several pieces, in a 4-, 8- and
// 2-byte dtype: every member ends with the root's bits, or every member's.
TEST(ShmBackend, BroadcastsAndAllGathersGiveEveryMemberTheSameBits) {
  const int size = 3;
  const std::string path = store_path("broadcast");
  std::vector<std::string> failures(size);
  on_members(size, [&](int member) {
    auto group = shm_group(path, size, member, milliseconds(60000));
    for (torch::ScalarType dtype : {torch::kFloat32, torch::kInt64, torch::kBFloat16})
      for (int64_t n : {0, 7, 300001}) {
        const std::string what = std::string(c10::toString(dtype)) + " n=" + std::to_string(n);
        for (int root : {0, 2}) {
          std::vector<at::Tensor> t{contribution(member, n, dtype)};
          c10d::BroadcastOptions opts;
          opts.rootRank = root;
          group->broadcast(t, opts)->wait();
          if (!torch::equal(t[0], contribution(root, n, dtype)))
            failures[member] += "broadcast from " + std::to_string(root) + " " + what + " differs; ";
        }
        std::vector<at::Tensor> input{contribution(member, n, dtype)};
        std::vector<std::vector<at::Tensor>> outputs(1);
        for (int k = 0; k < size; ++k) outputs[0].push_back(torch::full({n}, -1, dtype));
        group->allgather(outputs, input)->wait();
        for (int k = 0; k < size; ++k)
          if (!torch::equal(outputs[0][k], contribution(k, n, dtype)))
            failures[member] += "all-gather of member " + std::to_string(k) + " " + what + " differs; ";
      }
  });
  for (int m = 0; m < size; ++m) EXPECT_EQ(failures[m], "") << "member " << m;
}

// Reduce-scatters, empty to several pieces: member m's output is part m summed over the
// members in member order — the same bits as part m of the all-reduce.
TEST(ShmBackend, ReduceScattersGiveEachMemberItsPartOfTheSumInMemberOrder) {
  const int size = 3;
  const std::string path = store_path("reduce_scatter");
  std::vector<std::string> failures(size);
  on_members(size, [&](int member) {
    auto group = shm_group(path, size, member, milliseconds(60000));
    for (torch::ScalarType dtype : {torch::kFloat32, torch::kFloat64})
      for (int64_t n : {0, 7, 300001}) {
        std::vector<at::Tensor> outputs{torch::full({n}, -1, dtype)};
        std::vector<std::vector<at::Tensor>> inputs{contribution(member, size * n, dtype).chunk(size)};
        group->reduce_scatter(outputs, inputs)->wait();
        torch::Tensor expected = contribution(0, size * n, dtype);
        for (int k = 1; k < size; ++k) expected = expected + contribution(k, size * n, dtype);
        if (!torch::equal(outputs[0], expected.chunk(size)[member]))
          failures[member] += std::string(c10::toString(dtype)) + " n=" + std::to_string(n) + " differs; ";
      }
  });
  for (int m = 0; m < size; ++m) EXPECT_EQ(failures[m], "") << "member " << m;
}

// Four members: each sends to both ring neighbours (through the mailboxes, or through
// the wrapped backend when larger than a slot) and to the member across the ring (not a
// neighbour: the wrapped backend), then receives them all.
TEST(ShmMessages, RingNeighboursExchangeMessagesOfEverySize) {
  const int size = 4;
  const std::string path = store_path("ring");
  std::vector<std::string> failures(size);
  const std::vector<int64_t> sizes{0, 7, 60000, 70000};  // floats: 240 KB fits a 256 KiB slot, 280 KB does not
  const auto message = [](int from, int to, int64_t n) { return contribution(from, n, torch::kFloat32) + 1000 * to; };
  on_members(size, [&](int member) {
    auto group = shm_group(path, size, member, milliseconds(60000));
    const std::vector<int> peers{(member + 1) % size, (member + size - 1) % size, (member + 2) % size};
    std::vector<c10::intrusive_ptr<c10d::Work>> sends;
    for (int to : peers)
      for (size_t i = 0; i < sizes.size(); ++i) {
        std::vector<at::Tensor> t{message(member, to, sizes[i])};
        sends.push_back(group->send(t, to, static_cast<int>(i)));
      }
    for (int from : peers)
      for (size_t i = sizes.size(); i-- > 0;) {  // in the opposite order
        std::vector<at::Tensor> t{torch::empty({sizes[i]})};
        group->recv(t, from, static_cast<int>(i))->wait();
        if (!torch::equal(t[0], message(from, member, sizes[i])))
          failures[member] += "from " + std::to_string(from) + " n=" + std::to_string(sizes[i]) + " differs; ";
      }
    for (auto& w : sends) w->wait();
  });
  for (int m = 0; m < size; ++m) EXPECT_EQ(failures[m], "") << "member " << m;
}

// Both members send three mailboxes' worth before receiving anything, and receive in
// the opposite order: each, waiting for a free slot, moves the other's messages out of
// its way, so neither waits for the other.  Two messages with one tag arrive in order.
TEST(ShmMessages, MoreMessagesThanSlotsBothWaysArriveInAnyOrder) {
  const std::string path = store_path("overflow");
  const int count = 3 * ShmMessages::kSlots;
  std::vector<std::string> failures(2);
  on_members(2, [&](int member) {
    auto group = shm_group(path, 2, member, milliseconds(60000));
    const int peer = 1 - member;
    for (int tag = 0; tag < count; ++tag) {
      std::vector<at::Tensor> t{contribution(member, 1000, torch::kFloat32) + tag};
      group->send(t, peer, tag)->wait();
    }
    for (int v : {1, 2}) {
      std::vector<at::Tensor> t{torch::full({5}, v + 10.0 * member)};
      group->send(t, peer, 500)->wait();
    }
    for (int tag = count; tag-- > 0;) {
      std::vector<at::Tensor> t{torch::empty({1000})};
      group->recv(t, peer, tag)->wait();
      if (!torch::equal(t[0], contribution(peer, 1000, torch::kFloat32) + tag))
        failures[member] += "tag " + std::to_string(tag) + " differs; ";
    }
    for (int v : {1, 2}) {
      std::vector<at::Tensor> t{torch::empty({5})};
      group->recv(t, peer, 500)->wait();
      if (!torch::equal(t[0], torch::full({5}, v + 10.0 * peer))) failures[member] += "tag 500 out of order; ";
    }
  });
  for (int m = 0; m < 2; ++m) EXPECT_EQ(failures[m], "") << "member " << m;
}

TEST(ShmMessages, ASizeDisagreementIsNamed) {
  const std::string path = store_path("message_size");
  std::string error;
  on_members(2, [&](int member) {
    auto group = shm_group(path, 2, member, milliseconds(60000));
    std::vector<at::Tensor> t{torch::ones({member == 0 ? 10 : 12})};
    if (member == 0) return void(group->send(t, 1, 3)->wait());
    try {
      group->recv(t, 0, 3)->wait();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  EXPECT_NE(error.find("the message with tag 3 has 40 bytes, the receive buffer 48"), std::string::npos) << error;
}

TEST(ShmMessages, ASilentSenderIsNamedAtTheTimeout) {
  const std::string path = store_path("silent");
  std::string error;
  std::atomic<bool> done{false};
  on_members(2, [&](int member) {
    auto group = shm_group(path, 2, member, milliseconds(500));
    if (member == 0) {  // alive, never sends
      while (!done) std::this_thread::sleep_for(milliseconds(10));
      return;
    }
    std::vector<at::Tensor> t{torch::empty({4})};
    try {
      group->recv(t, 0, 1)->wait();
    } catch (const std::exception& e) {
      error = e.what();
    }
    done = true;
  });
  EXPECT_NE(error.find("shared-memory receive: nothing from rank 10 within"), std::string::npos) << error;
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
