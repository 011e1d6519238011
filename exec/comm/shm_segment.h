#pragma once
// ShmSegment — a shared-memory region mapped by the members of one process group that
// run on one host, with a barrier for them in its header.
//
// Set-up goes through the group's store: member 0 creates the segment under a name of its
// own, the others open it by that name and check its nonce (a member on another host finds
// no such name; one in another network namespace does not try), every member says whether
// it mapped it, and member 0 removes the name once all have answered — nothing stays in
// /dev/shm, not even after a crash.  The memory is reserved up front (posix_fallocate), so
// a full /dev/shm is a refusal at set-up rather than a SIGBUS mid-run.  open() returns
// null on every member unless every member mapped it: a group decides as one.
//
// The barrier spins briefly, then sleeps on a futex in the header (ranks may outnumber
// cores); wait_until() does the same on any word of the segment, for waits between two
// members (exec/comm/shm_messages.h).  A member that has not arrived within the timeout,
// or whose process has ended, is an error naming its rank, never a hang.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace quintnet::exec {

class ShmSegment {
 public:
  // `ranks`: the group's global ranks (for messages), this process being ranks[member].
  // `spin`: whether a waiting member may spin before it sleeps (not when ranks outnumber cores).
  static std::unique_ptr<ShmSegment> open(c10d::Store& store, int member, const std::vector<int>& ranks,
                                          std::size_t bytes, std::chrono::milliseconds timeout, bool spin);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  std::byte* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

  // Returns once every member has called it as often as this one.  Throws
  // std::runtime_error naming the ranks that did not arrive.
  void barrier();

  // Returns once ready() holds; meanwhile sleeps on `word`, which whoever makes ready()
  // true bumps and wakes (wake()).  Throws std::runtime_error, starting with `what`, when
  // member `peer`'s process has ended or the timeout passes first.  ready() may act (e.g.
  // take a message); it runs in this thread only.
  void wait_until(std::atomic<std::uint32_t>& word, const std::function<bool()>& ready, int peer,
                  const std::string& what) const;
  static void wake(std::atomic<std::uint32_t>& word);

  // A number every member announces before a barrier and reads back after it (e.g. a
  // collective's element count): what each member announced for the last barrier passed,
  // readable until the next one (a member may already announce for that one meanwhile).
  void announce(std::int64_t value);
  std::int64_t announced(int member) const;

 private:
  struct Header;
  struct Member;
  ShmSegment(int member, std::vector<int> ranks, std::size_t bytes, std::chrono::milliseconds timeout, bool spin);
  bool create(const std::string& name, std::uint64_t nonce);
  bool attach(const std::string& name, std::uint64_t nonce);
  void join();  // publishes this member's process, for the others' liveness checks
  Header& header() const;
  Member& member(int m) const;
  void wait_for(std::uint32_t target);
  void check_members_alive() const;  // throws where a member that has not arrived has ended
  std::string missing() const;       // the ranks that have not reached this member's barrier

  int member_;
  std::vector<int> ranks_;
  std::size_t bytes_, mapped_bytes_ = 0, header_bytes_;
  std::chrono::milliseconds timeout_;
  bool spin_;
  void* map_ = nullptr;
  std::byte* data_ = nullptr;
  std::uint32_t passed_ = 0;  // barriers this member has passed
};

}  // namespace quintnet::exec
