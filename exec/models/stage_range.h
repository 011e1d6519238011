#pragma once

namespace quintnet::exec {

// Which transformer blocks a model instance holds (a pipeline stage): the embedding
// lives on the stage with block 0, the head on the stage with the last block.
struct StageRange {
  int first_block = 0;
  int end_block = -1;  // one past the last block; -1 = all
  bool has_embedding() const { return first_block == 0; }
};

}  // namespace quintnet::exec
