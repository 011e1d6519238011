#include "exec/comm/shm_segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace quintnet::exec {

// The header's first cache line holds the counter every barrier waits on; then one entry
// per member.  Both live in shared memory: only lock-free atomics, which are address-free.
struct ShmSegment::Header {
  std::atomic<std::uint32_t> arrived;  // arrivals at barriers, all members together, wrapping
  std::uint32_t members;
  std::uint64_t nonce;  // member 0's random number: the segment is the one it published
  char pad[48];
};
struct ShmSegment::Member {
  std::atomic<std::uint32_t> passed;  // barriers this member has reached
  std::int32_t pid;
  std::uint64_t pid_namespace;        // pids are comparable only within one namespace
  // By the parity of the barrier announced for: a member may announce for its next
  // barrier while another still reads what it announced for this one.
  std::atomic<std::int64_t> announced[2];
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free && std::atomic<std::int64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t), "futex needs a plain 32-bit word");

namespace {

using Clock = std::chrono::steady_clock;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

std::uint64_t namespace_of(const char* kind) {
  struct stat s {};
  return ::stat((std::string("/proc/self/ns/") + kind).c_str(), &s) == 0 ? static_cast<std::uint64_t>(s.st_ino) : 0;
}

std::uint64_t pid_namespace() { return namespace_of("pid"); }

// Whether `pid` has ended: gone, or a zombie its parent has not reaped yet.
bool has_ended(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto paren = line.rfind(')');  // "pid (comm) S ...": comm may hold spaces
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t seen, std::chrono::microseconds most) {
  const timespec ts{static_cast<time_t>(most.count() / 1000000), static_cast<long>(most.count() % 1000000) * 1000};
  // Not FUTEX_PRIVATE: the word is shared between processes.
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// Counters wrap: "at or past" is a signed difference.
bool reached(std::uint32_t value, std::uint32_t target) { return static_cast<std::int32_t>(value - target) >= 0; }

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

std::string text(const std::vector<std::uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<std::uint8_t> as_bytes(const std::string& s) { return std::vector<std::uint8_t>(s.begin(), s.end()); }

}  // namespace

ShmSegment::ShmSegment(int member, std::vector<int> ranks, std::size_t bytes, std::chrono::milliseconds timeout,
                       bool spin)
    : member_(member),
      ranks_(std::move(ranks)),
      bytes_(round_up(bytes, 4096)),
      header_bytes_(round_up(sizeof(Header) + sizeof(Member) * ranks_.size(), 4096)),
      timeout_(timeout),
      spin_(spin) {}

ShmSegment::~ShmSegment() {
  if (map_) ::munmap(map_, mapped_bytes_);
}

ShmSegment::Header& ShmSegment::header() const { return *static_cast<Header*>(map_); }
ShmSegment::Member& ShmSegment::member(int m) const {
  return reinterpret_cast<Member*>(static_cast<std::byte*>(map_) + sizeof(Header))[m];
}

bool ShmSegment::create(const std::string& name, std::uint64_t nonce) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return false;
  const std::size_t total = header_bytes_ + bytes_;
  const bool sized = ::ftruncate(fd, static_cast<off_t>(total)) == 0 && ::posix_fallocate(fd, 0, static_cast<off_t>(total)) == 0;
  void* p = sized ? ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    return false;
  }
  map_ = p, mapped_bytes_ = total;
  data_ = static_cast<std::byte*>(map_) + header_bytes_;
  Header& h = *new (map_) Header{};  // the file starts zeroed; placement-new makes the atomics objects
  h.members = static_cast<std::uint32_t>(ranks_.size());
  h.nonce = nonce;
  for (size_t m = 0; m < ranks_.size(); ++m) new (&member(static_cast<int>(m))) Member{};
  return true;
}

bool ShmSegment::attach(const std::string& name, std::uint64_t nonce) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return false;
  const std::size_t total = header_bytes_ + bytes_;
  struct stat s {};
  const bool right_size = ::fstat(fd, &s) == 0 && static_cast<std::size_t>(s.st_size) == total;
  void* p = right_size ? ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (p == MAP_FAILED) return false;
  map_ = p, mapped_bytes_ = total;
  data_ = static_cast<std::byte*>(map_) + header_bytes_;
  return header().nonce == nonce && header().members == ranks_.size();
}

void ShmSegment::join() {
  Member& me = member(member_);
  me.pid = static_cast<std::int32_t>(::getpid());
  me.pid_namespace = pid_namespace();
}

std::unique_ptr<ShmSegment> ShmSegment::open(c10d::Store& store, int member, const std::vector<int>& ranks,
                                             std::size_t bytes, std::chrono::milliseconds timeout, bool spin) {
  std::unique_ptr<ShmSegment> segment(new ShmSegment(member, ranks, bytes, timeout, spin));
  std::string name;
  bool mapped = false;
  if (member == 0) {
    static std::atomic<int> made{0};
    name = "/quintnet-" + std::to_string(::getpid()) + "-" + std::to_string(made++);
    const std::uint64_t nonce = std::random_device{}() * 4294967296ull + std::random_device{}();
    mapped = segment->create(name, nonce);
    // Ranks in other network namespaces count as other hosts even where they could map
    // it (containers, or the multi-node tests' namespaces sharing one /dev/shm): their
    // bytes go through the network they were given.
    store.set("shm/name", as_bytes(mapped ? name + " " + std::to_string(nonce) + " " + std::to_string(namespace_of("net"))
                                          : std::string()));
  } else {
    std::istringstream published(text(store.get("shm/name")));
    std::uint64_t nonce = 0, network = 0;
    mapped = static_cast<bool>(published >> name >> nonce >> network) && network == namespace_of("net") &&
             segment->attach(name, nonce);
  }
  if (mapped) segment->join();
  store.set("shm/mapped/" + std::to_string(member), as_bytes(mapped ? "1" : "0"));
  bool all = true;
  for (size_t m = 0; m < ranks.size(); ++m) all = text(store.get("shm/mapped/" + std::to_string(m))) == "1" && all;
  if (member == 0 && mapped) ::shm_unlink(name.c_str());  // everyone has answered: the name has served
  return all ? std::move(segment) : nullptr;
}

void ShmSegment::announce(std::int64_t value) {
  member(member_).announced[(passed_ + 1) % 2].store(value, std::memory_order_relaxed);
}

std::int64_t ShmSegment::announced(int m) const {
  return member(m).announced[passed_ % 2].load(std::memory_order_relaxed);
}

void ShmSegment::barrier() {
  ++passed_;
  member(member_).passed.store(passed_, std::memory_order_relaxed);
  const std::uint32_t target = passed_ * static_cast<std::uint32_t>(ranks_.size());
  const std::uint32_t now = header().arrived.fetch_add(1, std::memory_order_acq_rel) + 1;
  if (now == target) {
    futex_wake_all(header().arrived);
    return;
  }
  wait_for(target);
}

void ShmSegment::wait_for(std::uint32_t target) {
  std::atomic<std::uint32_t>& arrived = header().arrived;
  if (spin_)  // a few microseconds: the others are often almost there
    for (int i = 0; i < 4000; ++i) {
      if (reached(arrived.load(std::memory_order_acquire), target)) return;
      cpu_relax();
    }
  const auto start = Clock::now();
  auto next_check = start + std::chrono::milliseconds(100);
  for (;;) {
    const std::uint32_t seen = arrived.load(std::memory_order_acquire);
    if (reached(seen, target)) return;
    futex_wait(arrived, seen, std::chrono::milliseconds(50));  // the last to arrive wakes everyone
    const auto now = Clock::now();
    if (now < next_check) continue;
    next_check = now + std::chrono::milliseconds(100);
    if (reached(arrived.load(std::memory_order_acquire), target)) return;
    check_members_alive();
    if (now - start > timeout_)
      throw std::runtime_error("shared-memory collective: " + missing() + " did not arrive within " +
                               std::to_string(timeout_.count() / 1000) + " s");
  }
}

void ShmSegment::wake(std::atomic<std::uint32_t>& word) {
  word.fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(word);
}

void ShmSegment::wait_until(std::atomic<std::uint32_t>& word, const std::function<bool()>& ready, int peer,
                            const std::string& what) const {
  if (spin_)
    for (int i = 0; i < 4000; ++i) {
      if (ready()) return;
      cpu_relax();
    }
  const auto start = Clock::now();
  auto next_check = start + std::chrono::milliseconds(100);
  const Member& other = member(peer);
  for (;;) {
    // Read the word before looking: a wake between the look and the sleep changes it,
    // and the sleep then returns at once.
    const std::uint32_t seen = word.load(std::memory_order_acquire);
    if (ready()) return;
    futex_wait(word, seen, std::chrono::milliseconds(50));
    const auto now = Clock::now();
    if (now < next_check) continue;
    next_check = now + std::chrono::milliseconds(100);
    if (ready()) return;
    if (other.pid_namespace == pid_namespace() && has_ended(other.pid))
      throw std::runtime_error(what + ": rank " + std::to_string(ranks_[peer]) + " (pid " + std::to_string(other.pid) +
                               ") has ended");
    if (now - start > timeout_)
      throw std::runtime_error(what + ": nothing from rank " + std::to_string(ranks_[peer]) + " within " +
                               std::to_string(timeout_.count() / 1000) + " s");
  }
}

std::string ShmSegment::missing() const {
  std::string who;
  for (size_t m = 0; m < ranks_.size(); ++m)
    if (!reached(member(static_cast<int>(m)).passed.load(std::memory_order_relaxed), passed_))
      who += (who.empty() ? "rank " : ", rank ") + std::to_string(ranks_[m]);
  return who.empty() ? "a member" : who;
}

void ShmSegment::check_members_alive() const {
  const std::uint64_t mine = pid_namespace();
  for (size_t m = 0; m < ranks_.size(); ++m) {
    const Member& other = member(static_cast<int>(m));
    if (reached(other.passed.load(std::memory_order_relaxed), passed_) || other.pid_namespace != mine) continue;
    if (has_ended(other.pid))
      throw std::runtime_error("shared-memory collective: rank " + std::to_string(ranks_[m]) + " (pid " +
                               std::to_string(other.pid) + ") has ended");
  }
}

}  // namespace quintnet::exec
