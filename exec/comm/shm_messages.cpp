#include "exec/comm/shm_messages.h"

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>

namespace quintnet::exec {

// A slot's header; the sender writes it, then sets `full` (release); the receiver reads it
// after seeing `full` (acquire) and clears `full` once it has copied the message out.
struct ShmMessages::Slot {
  std::atomic<std::uint32_t> full;
  std::int32_t tag;
  std::int64_t bytes;
  std::uint64_t seq;  // the sender's count: the receiver takes them in this order
  char pad[40];
};

namespace {

constexpr std::size_t kLine = 64;  // each doorbell, and each slot's header, on its own cache line

int mailboxes(int members) { return members == 2 ? 2 : 2 * members; }

std::size_t mailbox_bytes() { return ShmMessages::kSlots * (kLine + ShmMessages::kSlotBytes); }

}  // namespace

// The region: one doorbell per member, then the mailboxes, each its slot headers and
// then its slots' data.
std::size_t ShmMessages::bytes(int members) {
  static_assert(sizeof(Slot) == kLine);
  return static_cast<std::size_t>(members) * kLine + static_cast<std::size_t>(mailboxes(members)) * mailbox_bytes();
}

ShmMessages::ShmMessages(ShmSegment& segment, std::byte* region, int member, int members)
    : segment_(segment), region_(region), member_(member), members_(members), sent_(members, 0), received_(members, 0) {}

int ShmMessages::mailbox(int from, int to) const {
  if (members_ == 2) return from != to ? from : -1;
  if (to == (from + 1) % members_) return 2 * from;
  if (to == (from + members_ - 1) % members_) return 2 * from + 1;
  return -1;
}

std::atomic<std::uint32_t>& ShmMessages::doorbell(int member) const {
  return *reinterpret_cast<std::atomic<std::uint32_t>*>(region_ + member * kLine);
}

ShmMessages::Slot& ShmMessages::slot(int box, int i) const {
  std::byte* start = region_ + members_ * kLine + box * mailbox_bytes();
  return reinterpret_cast<Slot*>(start)[i];
}

std::byte* ShmMessages::data(int box, int i) const {
  return region_ + members_ * kLine + box * mailbox_bytes() + kSlots * kLine + i * kSlotBytes;
}

bool ShmMessages::carries(int peer, std::int64_t bytes) const {
  return mailbox(member_, peer) >= 0 && bytes <= static_cast<std::int64_t>(kSlotBytes);
}

void ShmMessages::send(const at::Tensor& t, int peer, int tag) {
  torch::NoGradGuard no_grad;
  const int box = mailbox(member_, peer);
  const std::int64_t bytes = t.numel() * t.element_size();
  int free = -1;
  const auto find_free = [&] {
    for (int i = 0; i < kSlots && free < 0; ++i)
      if (slot(box, i).full.load(std::memory_order_acquire) == 0) free = i;
    return free >= 0;
  };
  if (!find_free())  // the peer has not taken kSlots messages yet: set its to us aside meanwhile
    segment_.wait_until(
        doorbell(member_),
        [&] {
          for (int i; (i = next_in_order(peer)) >= 0;) set_aside(peer, i);
          return find_free();
        },
        peer, "shared-memory send to a full mailbox");
  Slot& s = slot(box, free);
  torch::from_blob(data(box, free), t.sizes(), t.options()).copy_(t);
  s.tag = tag;
  s.bytes = bytes;
  s.seq = sent_[peer]++;
  s.full.store(1, std::memory_order_release);
  ShmSegment::wake(doorbell(peer));
}

void ShmMessages::recv(at::Tensor& t, int peer, int tag) {
  torch::NoGradGuard no_grad;
  const std::int64_t bytes = t.numel() * t.element_size();
  const auto check_size = [&](std::int64_t sent) {
    if (sent != bytes)
      throw std::runtime_error("shared-memory receive: the message with tag " + std::to_string(tag) + " has " +
                               std::to_string(sent) + " bytes, the receive buffer " + std::to_string(bytes) +
                               " (ranks disagree on a message's shape)");
  };
  const auto from_early = [&] {  // a message this rank set aside while waiting in an earlier send or receive
    const auto early = early_.find({peer, tag});
    if (early == early_.end()) return false;
    at::Tensor message = std::move(early->second.front());
    early->second.pop_front();
    if (early->second.empty()) early_.erase(early);
    check_size(message.numel());
    t.copy_(torch::from_blob(message.data_ptr(), t.sizes(), t.options()));
    return true;
  };
  // Only this rank's own waits set messages aside, so the wanted one is either there
  // already or still to come through the mailbox.
  if (from_early()) return;
  const int box = mailbox(peer, member_);
  const auto take = [&] {
    // The peer's messages in the order it sent them: the wanted one straight into `t`,
    // those before it aside (their own receives find them in early_).
    for (int i; (i = next_in_order(peer)) >= 0;) {
      Slot& s = slot(box, i);
      if (s.tag != tag) {
        set_aside(peer, i);
        continue;
      }
      check_size(s.bytes);
      t.copy_(torch::from_blob(data(box, i), t.sizes(), t.options()));
      free_slot(peer, i);
      return true;
    }
    return false;
  };
  segment_.wait_until(doorbell(member_), take, peer, "shared-memory receive");
}

int ShmMessages::next_in_order(int peer) const {
  const int box = mailbox(peer, member_);
  for (int i = 0; i < kSlots; ++i) {
    const Slot& s = slot(box, i);
    if (s.full.load(std::memory_order_acquire) == 1 && s.seq == received_[peer]) return i;
  }
  return -1;  // not sent yet (or not visible yet: slots fill in any order)
}

void ShmMessages::set_aside(int peer, int i) {
  const Slot& s = slot(mailbox(peer, member_), i);
  at::Tensor copy = torch::empty({s.bytes}, torch::kUInt8);
  std::memcpy(copy.data_ptr(), data(mailbox(peer, member_), i), static_cast<std::size_t>(s.bytes));
  early_[{peer, s.tag}].push_back(std::move(copy));
  free_slot(peer, i);
}

void ShmMessages::free_slot(int peer, int i) {
  slot(mailbox(peer, member_), i).full.store(0, std::memory_order_release);
  ++received_[peer];
  ShmSegment::wake(doorbell(peer));
}

}  // namespace quintnet::exec
