#pragma once
// ShmMessages — point-to-point messages between ring neighbours of a process group
// through its shared-memory segment (exec/comm/shm_segment.h): the pipeline's activations
// and gradients between adjacent stages, context parallelism's key/value blocks.
//
// Why: over Gloo each message is a TCP write, a wake-up of the receiver's transport
// thread and a hand-over to the waiting thread; here it is one copy in, a futex wake and
// one copy out.
//
// Each direction between neighbours (m → m ± 1 around the ring) has a mailbox of kSlots
// slots of kSlotBytes each.  send() copies the tensor into a free slot, marks it with
// its tag and a sequence number, and rings the receiver's doorbell; recv() takes the
// sender's messages in sequence order, the one with its tag into its tensor and any
// before it aside, as Gloo matches tags (first sent, first received).  A message is in
// the mailbox as soon as send() returns, so send() completes on its own, as Gloo's does
// from the caller's view.  A member waiting
// in send() (its mailbox full) or in recv() (its message not there yet) first moves the
// messages waiting for it out of the slots into its own memory: two neighbours sending
// each other more than kSlots messages at once still never wait for each other.
//
// Which messages come here is decided alike by both ends from what both know: the peer
// is a neighbour and the message fits a slot (sender's tensor = receiver's buffer).
// Larger messages (GPT-2 124M's 25 MB activations) go through Gloo.
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "exec/comm/shm_segment.h"

namespace quintnet::exec {

class ShmMessages {
 public:
  static constexpr int kSlots = 8;
  static constexpr std::size_t kSlotBytes = 256u << 10;  // the ViT's 200 KB activations of microbatch 16

  // Bytes of the segment a group of `members` needs for its mailboxes.
  static std::size_t bytes(int members);

  // `region`: bytes(members) of `segment`, zeroed when the segment was made (an empty
  // mailbox is all zeros).
  ShmMessages(ShmSegment& segment, std::byte* region, int member, int members);

  // Whether a message of `bytes` to or from member `peer` goes through shared memory.
  bool carries(int peer, std::int64_t bytes) const;
  // Copies `t` into the mailbox to `peer`; returns once it is there.  Only where carries().
  void send(const at::Tensor& t, int peer, int tag);
  // Waits for the message with `tag` from `peer` and copies it into `t`.  Only where carries().
  void recv(at::Tensor& t, int peer, int tag);

 private:
  struct Slot;
  int mailbox(int from, int to) const;  // index of the mailbox from → to; -1 for non-neighbours
  Slot& slot(int box, int i) const;
  std::byte* data(int box, int i) const;
  std::atomic<std::uint32_t>& doorbell(int member) const;
  // The slot of the next message from `peer` in its sending order, or -1.  Messages are
  // taken in that order only: a scan for "the oldest with this tag" could miss one the
  // peer sent earlier into a slot scanned before it filled, and take a later one.
  int next_in_order(int peer) const;
  void set_aside(int peer, int slot);  // into early_, and frees the slot
  void free_slot(int peer, int slot);  // counts the message taken, wakes the peer

  ShmSegment& segment_;
  std::byte* region_;
  int member_, members_;
  std::vector<std::uint64_t> sent_;      // per peer: messages sent so far (each slot's sequence number)
  std::vector<std::uint64_t> received_;  // per peer: messages taken out of its mailbox so far
  // Messages taken out of the slots before they were asked for, by (peer, tag), oldest first.
  std::map<std::pair<int, int>, std::deque<at::Tensor>> early_;
};

}  // namespace quintnet::exec
