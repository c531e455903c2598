// Copyright 2026 The contactkit developers.
//
// The tree-sparse mass matrix of an extracted problem: product, solve and dense block agree
// with MuJoCo's.
#include <algorithm>
#include <cmath>
#include <vector>

#include "plugin/step/compat.h"
#include "plugin/step/extract.h"
#include "support/extracted.h"
#include "support/fixture.h"

namespace contactkit::test {
namespace {

using MassTest = MujocoTest;

// tree-sparse mass matrix: product, solve and dense block agree with MuJoCo
TEST_F(MassTest, TreeMassAgreesWithMujoco) {
  ModelPtr m = Load(MujocoModel("humanoid/22_humanoids.xml"));
  ASSERT_TRUE(m);
  for (int i = 0; i < m->nv; i++) m->dof_damping[i] = 0;  // M_eff = M without implicit damping
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 20; t++) mj_step(m.get(), d.get());
  mj_forward(m.get(), d.get());
  Extracted e(m.get());
  Problem& p = e.storage.problem();
  e.ex.Extract(m.get(), d.get(), &p);
  const int nv = m->nv;
  std::vector<double> x(nv), y1(nv), y2(nv);
  for (int i = 0; i < nv; i++) x[i] = std::sin(0.37 * i + 1);
  mj_mulM(m.get(), d.get(), y1.data(), x.data());
  p.mass.Mul(x.data(), y2.data());
  for (int i = 0; i < nv; i++) EXPECT_NEAR(y1[i], y2[i], 1e-10);
  mj_solveM(m.get(), d.get(), y1.data(), x.data(), 1);
  y2 = x;
  p.mass.Solve(y2.data());
  for (int i = 0; i < nv; i++) EXPECT_NEAR(y1[i], y2[i], 1e-9 * std::max(1.0, std::fabs(y1[i])));

  // dense block of the first tree against mj_fullM
  std::vector<double> full(nv * nv), block(nv * nv);
  FullInertia(m.get(), d.get(), full.data());
  const int n = p.islands.tree_dofnum[0];
  p.mass.Dense(0, n, block.data(), n);
  for (int r = 0; r < n; r++) {
    for (int c = 0; c < n; c++) EXPECT_EQ(block[r + c * n], full[r * nv + c]);
  }
}

}  // namespace
}  // namespace contactkit::test
