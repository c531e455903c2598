// Copyright 2026 The contactkit developers.
//
// Islands of an extracted problem separate non-interacting trees.
#include "plugin/step/extract.h"
#include "support/extracted.h"
#include "support/fixture.h"

namespace contactkit::test {
namespace {

using IslandsTest = MujocoTest;

// islands: each humanoid standing on the floor is its own island
TEST_F(IslandsTest, IslandsSeparateTrees) {
  ModelPtr m = Load(MujocoModel("humanoid/22_humanoids.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 100; t++) mj_step(m.get(), d.get());
  mj_forward(m.get(), d.get());
  Extracted e(m.get());
  Problem& p = e.storage.problem();
  e.ex.Extract(m.get(), d.get(), &p);
  const Islands& is = p.islands;
  ASSERT_GT(is.nisland, 1);
  EXPECT_EQ(e.ex.ntree(), 22);

  // every row's dofs lie in its island's trees; every tree of an island has rows through it
  for (int i = 0; i < p.nrow; i++) {
    const int k = is.row_island[i];
    ASSERT_GE(k, 0);
    for (int n = 0; n < p.J.rownnz[i]; n++) {
      EXPECT_EQ(is.tree_island[p.dof_tree[p.J.colind[p.J.rowadr[i] + n]]], k);
    }
  }
  int rows = 0, dofs = 0;
  for (int k = 0; k < is.nisland; k++) {
    rows += is.nrows[k];
    dofs += is.ndofs[k];
    for (int j = 1; j < is.ndofs[k]; j++)
      EXPECT_LT(is.dofs[is.dofadr[k] + j - 1], is.dofs[is.dofadr[k] + j]);
  }
  EXPECT_EQ(rows, p.nrow);
  EXPECT_LE(dofs, m->nv);
}

}  // namespace
}  // namespace contactkit::test
