#pragma once
// Resuming from a checkpoint written on another mesh (or on this mesh with other ZeRO-1
// pieces): this rank's state — the fp32 masters and AdamW's two moments, laid out as its
// flat buffers — filled from the checkpoint's shards one shard at a time.
//
// Each parameter is seen on both sides as tp splits it: the checkpoint's shard i holds
// rows [i·r, (i+1)·r) of the serial tensor along the split dimension (whole, or as ZeRO-1
// pieces of that slice flattened), this rank needs rows [j·r', (j+1)·r').  Every tensor a
// shard holds is cut where it overlaps this rank's slice and copied there; the rest is
// dropped with the shard.  So a rank reads only the shards that overlap its slices and
// holds one of them at a time beside its own state, whatever the two meshes — where
// reassembling each serial tensor first (ShardReader::serial, which `quintnet checkpoint
// export` uses) keeps every shard it touches until the end.
#include <torch/torch.h>

#include <array>

#include "exec/checkpoint/shard_reader.h"
#include "exec/dp/flat_parameters.h"
#include "exec/tp/tp_ops.h"

namespace quintnet::exec {

// Fills `buffers` (masters, exp_avg, exp_avg_sq: zeroed fp32 tensors as long as `flat`'s
// buffer) with this rank's part of the checkpoint's state.  `model` is the chunk whose
// parameters `flat` holds (how tp splits them, the vocabulary's real rows) and `tp` this
// rank's tp group.  A vocabulary's padding rows, on either side, are left zero.  Throws
// core::UserError for a parameter of another shape than this model's, or one whose
// values the shards do not hold in full.
void fill_from_shards(ShardReader& reader, torch::nn::Module& model, const FlatParameters& flat,
                      const TpContext& tp, std::array<torch::Tensor, 3>& buffers);

}  // namespace quintnet::exec
