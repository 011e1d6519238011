#include <gtest/gtest.h>

#include "core/error.h"
#include "core/mesh.h"

using quintnet::core::Mesh;
using quintnet::core::MeshError;

TEST(Mesh, TpIsContiguousThenDpThenPp) {
  Mesh m({2, 2, 2}, {"dp", "tp", "pp"});
  EXPECT_EQ(m.world_size(), 8);
  EXPECT_EQ(m.rank_order(), (std::vector<std::string>{"tp", "dp", "pp"}));
  // rank = tp + 2*dp + 4*pp
  EXPECT_EQ(m.coords(5), (std::vector<int>{0, 1, 1}));  // dp0 tp1 pp1
  EXPECT_EQ(m.rank({1, 1, 0}), 3);
  EXPECT_EQ(m.group(0, "tp"), (std::vector<int>{0, 1}));
  EXPECT_EQ(m.group(0, "dp"), (std::vector<int>{0, 2}));
  EXPECT_EQ(m.group(0, "pp"), (std::vector<int>{0, 4}));
  EXPECT_EQ(m.group(3, std::vector<std::string>{"tp", "dp"}), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(m.describe(5), "dp0 tp1 pp1");
}

TEST(Mesh, RankCoordsRoundTripAndGroupsPartitionTheWorld) {
  Mesh m({3, 2, 4}, {"dp", "tp", "pp"});
  for (int r = 0; r < m.world_size(); ++r) EXPECT_EQ(m.rank(m.coords(r)), r);
  for (const char* axis : {"dp", "tp", "pp"}) {
    std::vector<int> seen(m.world_size(), 0);
    for (const auto& g : m.groups(axis)) {
      EXPECT_EQ(static_cast<int>(g.size()), m.size(axis));
      for (size_t i = 0; i < g.size(); ++i) {
        ++seen[g[i]];
        EXPECT_EQ(m.coord(g[i], axis), static_cast<int>(i));
      }
    }
    for (int s : seen) EXPECT_EQ(s, 1) << axis;
  }
}

TEST(Mesh, AbsentAxisHasSizeOne) {
  Mesh m({4}, {"dp"});
  EXPECT_EQ(m.size("tp"), 1);
  EXPECT_EQ(m.coord(3, "pp"), 0);
  EXPECT_EQ(m.group(2, "tp"), (std::vector<int>{2}));
}

TEST(Mesh, ExplicitRankOrderAndPlainRowMajorForOtherNames) {
  Mesh rm({2, 3}, {"a", "b"});  // no tp/pp: row-major, last axis contiguous
  EXPECT_EQ(rm.coords(1), (std::vector<int>{0, 1}));
  Mesh pp_inner({2, 2, 2}, {"dp", "tp", "pp"}, {"pp", "tp", "dp"});
  EXPECT_EQ(pp_inner.group(0, "pp"), (std::vector<int>{0, 1}));
}

TEST(Mesh, WorldSizeMismatchNamesBothNumbersAndTheFix) {
  Mesh m({2, 2, 2}, {"dp", "tp", "pp"});
  try {
    m.check_world_size(4);
    FAIL() << "expected MeshError";
  } catch (const MeshError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("needs 8 ranks"), std::string::npos) << msg;
    EXPECT_NE(msg.find("world size is 4"), std::string::npos) << msg;
  }
}

TEST(Mesh, RejectsBadShapes) {
  EXPECT_THROW(Mesh({2, 0}, {"dp", "tp"}), MeshError);
  EXPECT_THROW(Mesh({2, 2}, {"dp"}), MeshError);
  EXPECT_THROW(Mesh({2, 2}, {"dp", "dp"}), MeshError);
  EXPECT_THROW(Mesh({}, {}), MeshError);
  EXPECT_THROW(Mesh({65536, 65536}, {"dp", "tp"}), MeshError);
  Mesh m({2}, {"dp"});
  EXPECT_THROW(m.coords(2), MeshError);
  EXPECT_THROW(m.axis_index("tp"), MeshError);
}

// Context parallelism's axis comes right after tp, wherever mesh_name lists it.
TEST(Mesh, CpComesRightAfterTp) {
  for (const auto& names : {std::vector<std::string>{"dp", "cp", "tp", "pp"}, std::vector<std::string>{"cp", "dp", "tp", "pp"},
                            std::vector<std::string>{"dp", "tp", "pp", "cp"}}) {
    Mesh m({2, 2, 2, 2}, names);
    EXPECT_EQ(m.rank_order(), (std::vector<std::string>{"tp", "cp", "dp", "pp"}));
    EXPECT_EQ(m.group(0, "cp"), (std::vector<int>{0, 2}));
  }
}
