#pragma once
// ShmBackend — a CPU process group's collectives and messages through shared memory where
// all its members run on one host: all-reduces (SUM, MAX), reduce-scatters (SUM),
// broadcasts, all-gathers and, in groups that send messages, point-to-point messages
// between ring neighbours (exec/comm/shm_messages.h).  Everything else — messages too
// large for a mailbox slot, tensors that are not contiguous CPU tensors — goes through
// the Gloo group it wraps, chosen alike on every member since it depends only on the call.
//
// Why: Gloo sends every byte through TCP, loopback included.  Two ranks all-reducing the
// ViT's 1.6 MB gradient bucket on an idle 2-vCPU host: 2.9 ms, 1.9 ms of each rank's CPU
// (measured, docs/PERFORMANCE.md "Shared-memory all-reduce") — on the two cores that also
// compute the step.  Through shared memory each rank copies its tensor in once, sums its
// share of everybody's copies, and copies the sums out.
//
// A collective goes in pieces of at most one slot.  An all-reduce, per piece, with the
// segment's barrier (exec/comm/shm_segment.h):
//   1. every member copies its piece into its own slot;                          barrier
//   2. member m sums part m of the piece over the slots, in member order, into
//      part m of the result area;                                                barrier
//   3. every member copies the whole result area into its tensor.
// A small tensor (up to 256 KiB: tensor-parallel activations) skips steps 2 and 3's
// barrier: after step 1 every member sums the whole piece over the slots, in member
// order, into its own tensor.  A broadcast is the root's step 1 and everyone's copy out;
// an all-gather every member's step 1 and everyone's copies out of every slot; a
// reduce-scatter every member's step 1 with all its parts and member m's sum of part m
// over the slots into its output: one barrier per piece.  Pieces alternate between two
// sets of slots, so no copy out needs a barrier after it (a member writes that set again
// only after everyone has passed the next piece's barrier, which each reaches once it has
// read this one).  Every element is summed in member order, once or by every member
// alike, so every member holds the same bits: replicas stay bitwise equal.  A call
// completes before it returns (the calling thread does the copies — on a busy host its
// cores are the ones computing).
#include <chrono>
#include <vector>

#include "exec/comm/c10d_compat.h"

namespace quintnet::exec {

// `gloo` itself where the members cannot share a segment (another host, /dev/shm full);
// every member gets the same kind.  `spin`: see ShmSegment::open.  `messages`: the group
// sends point-to-point messages (the pipeline's, context parallelism's ring), so its
// segment also holds a mailbox each way between ring neighbours (4 MiB for two members).
c10::intrusive_ptr<CommBackend> with_shared_memory(c10::intrusive_ptr<CommBackend> gloo, c10d::Store& store,
                                                   const std::vector<int>& ranks, int member,
                                                   std::chrono::milliseconds timeout, bool spin, bool messages);

// The backend name of a group whose collectives go through shared memory.
inline constexpr const char* kShmBackendName = "shm+gloo";

}  // namespace quintnet::exec
