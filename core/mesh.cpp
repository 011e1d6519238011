#include "core/mesh.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace quintnet::core {
namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

// tp innermost, then cp (context parallelism passes key/value blocks in every layer:
// next to tp, inside the node), pp outermost, any other axis in between in reverse list
// order (so a mesh without tp/cp/pp is plain row-major: the last axis is contiguous).
std::vector<int> default_order(const std::vector<std::string>& names) {
  std::vector<int> order;
  auto push_named = [&](const std::string& name) {
    for (int i = 0; i < static_cast<int>(names.size()); ++i)
      if (names[i] == name) order.push_back(i);
  };
  push_named("tp");
  push_named("cp");
  for (int i = static_cast<int>(names.size()) - 1; i >= 0; --i)
    if (names[i] != "tp" && names[i] != "cp" && names[i] != "pp") order.push_back(i);
  push_named("pp");
  return order;
}

}  // namespace

Mesh::Mesh(std::vector<int> dims, std::vector<std::string> names,
           std::vector<std::string> rank_order)
    : dims_(std::move(dims)), names_(std::move(names)) {
  if (dims_.empty()) throw MeshError("mesh: mesh_dim is empty; give at least one axis, e.g. [2]");
  if (dims_.size() != names_.size()) {
    std::ostringstream msg;
    msg << "mesh: mesh_dim has " << dims_.size() << " entries but mesh_name has "
        << names_.size() << " (" << join(names_) << "); give one name per dimension";
    throw MeshError(msg.str());
  }
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (dims_[i] < 1)
      throw MeshError("mesh: axis '" + names_[i] + "' has size " + std::to_string(dims_[i]) +
                      "; every mesh dimension must be at least 1");
    if (names_[i].empty()) throw MeshError("mesh: axis " + std::to_string(i) + " has an empty name");
    for (size_t j = 0; j < i; ++j)
      if (names_[i] == names_[j])
        throw MeshError("mesh: axis name '" + names_[i] + "' appears twice in mesh_name");
    if (world_size_ > (1 << 24) / dims_[i])
      throw MeshError("mesh: " + shape_string() + " has more than 16777216 ranks");
    world_size_ *= dims_[i];
  }

  if (rank_order.empty()) {
    order_ = default_order(names_);
  } else {
    if (rank_order.size() != names_.size())
      throw MeshError("mesh: rank order [" + join(rank_order) + "] must list every axis of [" +
                      join(names_) + "] once");
    for (const auto& name : rank_order) order_.push_back(axis_index(name));
    std::vector<int> sorted = order_;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      throw MeshError("mesh: rank order [" + join(rank_order) + "] names an axis twice");
  }
  stride_.assign(dims_.size(), 1);
  int stride = 1;
  for (int axis : order_) {
    stride_[axis] = stride;
    stride *= dims_[axis];
  }
}

Mesh Mesh::from_axes(std::vector<int> dims, const std::vector<Axis>& axes) {
  std::vector<std::string> names;
  for (Axis a : axes) names.push_back(name_of(a));
  return Mesh(std::move(dims), std::move(names));
}

std::vector<std::string> Mesh::rank_order() const {
  std::vector<std::string> out;
  for (int axis : order_) out.push_back(names_[axis]);
  return out;
}

bool Mesh::has_axis(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

int Mesh::axis_index(const std::string& name) const {
  auto it = std::find(names_.begin(), names_.end(), name);
  if (it == names_.end())
    throw MeshError("mesh: no axis named '" + name + "'; the mesh has [" + join(names_) + "]");
  return static_cast<int>(it - names_.begin());
}

int Mesh::size(const std::string& name) const {
  return has_axis(name) ? dims_[axis_index(name)] : 1;
}

void Mesh::check_rank(int rank) const {
  if (rank < 0 || rank >= world_size_)
    throw MeshError("mesh: rank " + std::to_string(rank) + " is outside the mesh " +
                    shape_string() + " (ranks 0.." + std::to_string(world_size_ - 1) + ")");
}

std::vector<int> Mesh::coords(int rank) const {
  check_rank(rank);
  std::vector<int> out(dims_.size());
  for (size_t i = 0; i < dims_.size(); ++i) out[i] = (rank / stride_[i]) % dims_[i];
  return out;
}

int Mesh::coord(int rank, const std::string& axis) const {
  check_rank(rank);
  if (!has_axis(axis)) return 0;
  int i = axis_index(axis);
  return (rank / stride_[i]) % dims_[i];
}

int Mesh::rank(const std::vector<int>& coords) const {
  if (coords.size() != dims_.size())
    throw MeshError("mesh: expected " + std::to_string(dims_.size()) + " coordinates, got " +
                    std::to_string(coords.size()));
  int rank = 0;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (coords[i] < 0 || coords[i] >= dims_[i])
      throw MeshError("mesh: coordinate " + std::to_string(coords[i]) + " is outside axis '" +
                      names_[i] + "' of size " + std::to_string(dims_[i]));
    rank += coords[i] * stride_[i];
  }
  return rank;
}

std::vector<int> Mesh::group(int rank, const std::string& axis) const {
  std::vector<int> c = coords(rank);
  if (!has_axis(axis)) return {rank};
  int i = axis_index(axis);
  std::vector<int> out;
  for (int k = 0; k < dims_[i]; ++k) {
    c[i] = k;
    out.push_back(this->rank(c));
  }
  return out;
}

std::vector<int> Mesh::group(int rank, const std::vector<std::string>& axes) const {
  std::vector<int> mine = coords(rank);
  std::vector<bool> free_axis(dims_.size(), false);
  for (const auto& name : axes)
    if (has_axis(name)) free_axis[axis_index(name)] = true;
  std::vector<int> out;
  for (int r = 0; r < world_size_; ++r) {
    std::vector<int> c = coords(r);
    bool same = true;
    for (size_t i = 0; i < dims_.size() && same; ++i) same = free_axis[i] || c[i] == mine[i];
    if (same) out.push_back(r);
  }
  return out;
}

std::vector<std::vector<int>> Mesh::groups(const std::string& axis) const {
  std::vector<std::vector<int>> out;
  for (int r = 0; r < world_size_; ++r)
    if (coord(r, axis) == 0) out.push_back(group(r, axis));
  return out;
}

void Mesh::check_world_size(int world_size) const {
  if (world_size != world_size_) {
    std::ostringstream msg;
    msg << "mesh_dim: " << shape_string() << " needs " << world_size_ << " ranks but the world size is "
        << world_size << "; launch " << world_size_ << " ranks (quintnet launch --nproc " << world_size_
        << ") or change mesh_dim so its product is " << world_size;
    throw MeshError(msg.str());
  }
}

std::string Mesh::describe(int rank) const {
  std::vector<int> c = coords(rank);
  std::string out;
  for (size_t i = 0; i < c.size(); ++i) out += (i ? " " : "") + names_[i] + std::to_string(c[i]);
  return out;
}

std::string Mesh::shape_string() const {
  std::string out;
  for (size_t i = 0; i < dims_.size(); ++i)
    out += (i ? " x " : "") + names_[i] + "=" + std::to_string(dims_[i]);
  return out;
}

std::vector<int> Mesh::group(int rank, const std::vector<Axis>& axes) const {
  std::vector<std::string> names;
  for (Axis a : axes) names.push_back(name_of(a));
  return group(rank, names);
}

}  // namespace quintnet::core
