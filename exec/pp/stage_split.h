#pragma once
// How the layers of a model are cut into pipeline stages.
//
// With pp ranks and v chunks per rank there are S = pp·v virtual stages; stage s
// lives on rank s mod pp as its chunk s / pp (core::Schedule's convention).  Blocks
// are split as evenly as possible, earlier stages taking the remainder; the embedding
// goes with block 0 (first stage), the final norm and head with the last block.
#include <vector>

namespace quintnet::exec {

struct BlockRange {
  int first = 0, end = 0;  // blocks [first, end)
};

// Block ranges of all S = pp * chunks virtual stages.
std::vector<BlockRange> split_blocks(int blocks, int pp, int chunks);

}  // namespace quintnet::exec
