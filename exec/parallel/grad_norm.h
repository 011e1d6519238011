#pragma once
// Sums of squared gradients over ranges of a flat buffer, for the global gradient norm.
//
// Why not square the buffer: the step used to square an fp64 copy of the whole gradient
// buffer (2× its size written, then read) and multiply it by a mask as large again; on
// a GPU that is several passes over hundreds of megabytes per step.  Here the ranges
// are squared and summed in fp32, 4M elements at a time (a 16 MB scratch tensor; sum()
// adds pairwise, so fp32 loses nothing that matters: 3e-8 relative on 3M elements),
// and the pieces' sums are added up in fp64.  Not LibTorch's fp32 vector norm: on
// the CPU it adds one element after another (1e-4 relative off on 3M, measured).
// The result stays on the device: nothing here waits for the GPU.
#include <torch/torch.h>

#include <vector>

#include "exec/dp/flat_parameters.h"

namespace quintnet::exec {

// Σ x² over `ranges` of `flat` (1-D): a 0-dim float64 tensor on flat's device; 0 for no ranges.
torch::Tensor sum_of_squares(const torch::Tensor& flat, const std::vector<FlatRange>& ranges);

// The elements in both lists (each sorted by offset, ranges not overlapping within a list).
std::vector<FlatRange> intersect(const std::vector<FlatRange>& a, const std::vector<FlatRange>& b);

}  // namespace quintnet::exec
