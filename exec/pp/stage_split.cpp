#include "exec/pp/stage_split.h"

#include "core/error.h"

namespace quintnet::exec {

std::vector<BlockRange> split_blocks(int blocks, int pp, int chunks) {
  const int stages = pp * chunks;
  if (blocks < stages)
    throw core::UserError(std::to_string(blocks) + " layers cannot fill " + std::to_string(stages) +
                          " pipeline stages; reduce pp or virtual_stages");
  std::vector<BlockRange> out(stages);
  int next = 0;
  for (int s = 0; s < stages; ++s) {
    const int size = blocks / stages + (s < blocks % stages ? 1 : 0);
    out[s] = {next, next + size};
    next += size;
  }
  return out;
}

}  // namespace quintnet::exec
