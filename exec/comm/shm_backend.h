#pragma once
// ShmBackend — a CPU process group's all-reduces through shared memory where all its
// members run on one host; everything else (broadcast, all-gather, reduce-scatter,
// point-to-point messages) through the Gloo group it wraps.
//
// Why: Gloo sends every byte through TCP, loopback included.  Two ranks all-reducing the
// ViT's 1.6 MB gradient bucket on an idle 2-vCPU host: 2.9 ms, 1.9 ms of each rank's CPU
// (measured, docs/PERFORMANCE.md "Shared-memory all-reduce") — on the two cores that also
// compute the step.  Through shared memory each rank copies its tensor in once, sums its
// share of everybody's copies, and copies the sums out.
//
// The tensor goes in pieces of at most slot_bytes().  Per piece, with the segment's
// barrier (exec/comm/shm_segment.h):
//   1. every member copies its piece into its own slot;                          barrier
//   2. member m sums part m of the piece over the slots, in member order, into
//      part m of the result area;                                                barrier
//   3. every member copies the whole result area into its tensor.
// A small tensor (up to 256 KiB: tensor-parallel activations) skips steps 2 and 3's
// barrier: after step 1 every member sums the whole piece over the slots, in member
// order, into its own tensor.  Pieces alternate between two sets of slots, so neither
// step 3 nor the small tensor's sum needs a barrier of its own (a member writes that set
// again only after everyone has passed step 1 of the next piece, which each reaches once
// it has read this one).  Every element is summed in member order, once or by every
// member alike, so every member holds the same bits: replicas stay bitwise equal.  A call completes before it returns (the calling thread does the
// copies — on a busy host its cores are the ones computing anyway).
//
// Handled here: contiguous CPU tensors, SUM and MAX, numeric dtypes; anything else goes
// to Gloo, chosen alike on every member since it depends only on the call.
#include <chrono>
#include <vector>

#include "exec/comm/c10d_compat.h"

namespace quintnet::exec {

// `gloo` itself where the members cannot share a segment (another host, /dev/shm full);
// every member gets the same kind.  `spin`: see ShmSegment::open.
c10::intrusive_ptr<CommBackend> with_shared_memory(c10::intrusive_ptr<CommBackend> gloo, c10d::Store& store,
                                                   const std::vector<int>& ranks, int member,
                                                   std::chrono::milliseconds timeout, bool spin);

// The backend name of a group whose all-reduces go through shared memory.
inline constexpr const char* kShmBackendName = "shm+gloo";

}  // namespace quintnet::exec
