#pragma once
// core::Mesh — an N-dimensional device mesh with named axes.
//
// The mesh is described the way the original QuintNet configs do it, e.g.
// mesh_dim: [2, 2, 2], mesh_name: ['dp', 'tp', 'pp'].  The *order of the names*
// does not decide which ranks are neighbours; the rank layout does:
//
//   rank order (innermost = contiguous ranks first): tp, then cp where the mesh has
//   it, then the other axes in reverse list order, with pp outermost.  For [dp, tp, pp]
//   that is tp, dp, pp: rank = tp + TP * (dp + DP * pp)   (Megatron-LM's default
//   "tp-dp-pp"; with cp its "tp-cp-dp-pp").
//
// Why: tensor parallelism all-reduces activations in every layer, so its groups
// must be consecutive ranks, which launchers place on one node (NVLink); context
// parallelism's ring passes key/value blocks in every layer too, so it comes next.  Data
// parallelism all-reduces gradients once a step (overlapped), pipeline parallelism
// only sends activations between neighbouring stages: both tolerate the slower
// inter-node fabric, pp the most.
#include <string>
#include <vector>

#include "core/run_options.h"

namespace quintnet::core {

class Mesh {
 public:
  // dims and names have the same length; names are unique and non-empty; dims >= 1.
  // rank_order lists axis names innermost first; empty means the default above.
  Mesh(std::vector<int> dims, std::vector<std::string> names,
       std::vector<std::string> rank_order = {});
  // QuintNet's meshes: axes out of dp, tp, pp (a plan's mesh_name).  A function, not a
  // constructor: {"a", "b"} would convert to either list.
  static Mesh from_axes(std::vector<int> dims, const std::vector<Axis>& axes);

  int world_size() const { return world_size_; }
  int ndim() const { return static_cast<int>(dims_.size()); }
  const std::vector<int>& dims() const { return dims_; }
  const std::vector<std::string>& names() const { return names_; }
  // Axis names innermost (contiguous) first.
  std::vector<std::string> rank_order() const;

  bool has_axis(const std::string& name) const;
  int axis_index(const std::string& name) const;  // throws MeshError naming the axes
  // Size of the named axis; 1 for an axis the mesh does not have (a 2-D dp×tp mesh
  // has pp size 1), so callers can ask for dp/tp/pp uniformly.
  int size(const std::string& name) const;

  std::vector<int> coords(int rank) const;  // in names() order
  int coord(int rank, const std::string& axis) const;  // 0 for an absent axis
  int rank(const std::vector<int>& coords) const;

  // Ranks that differ from `rank` only along `axis`, ordered by that coordinate.
  std::vector<int> group(int rank, const std::string& axis) const;
  // Ranks that differ from `rank` only along any of `axes`, in rank order.
  std::vector<int> group(int rank, const std::vector<std::string>& axes) const;
  // All groups along `axis`: a partition of the world, each ordered by coordinate.
  std::vector<std::vector<int>> groups(const std::string& axis) const;

  // The same, for QuintNet's axes.
  int size(Axis axis) const { return size(name_of(axis)); }
  int coord(int rank, Axis axis) const { return coord(rank, name_of(axis)); }
  std::vector<int> group(int rank, Axis axis) const { return group(rank, name_of(axis)); }
  std::vector<int> group(int rank, const std::vector<Axis>& axes) const;
  std::vector<std::vector<int>> groups(Axis axis) const { return groups(name_of(axis)); }

  // Throws MeshError when the launcher's world size differs from the mesh product.
  void check_world_size(int world_size) const;

  std::string describe(int rank) const;  // "dp0 tp1 pp1"
  std::string shape_string() const;      // "dp=2 x tp=2 x pp=2"

 private:
  void check_rank(int rank) const;

  std::vector<int> dims_;
  std::vector<std::string> names_;
  std::vector<int> order_;   // axis indices, innermost first
  std::vector<int> stride_;  // per axis (names() order)
  int world_size_ = 1;
};

}  // namespace quintnet::core
