// Copyright 2026 The contactkit developers.
//
// The constraint problem: extracted rows reproduce MuJoCo's own efc_J, efc_pos, efc_R and
// efc_aref (elliptic cone, dense and sparse), the mass matrix operations agree with MuJoCo's,
// islands separate non-interacting trees, and the write-back is consistent for pyramidal cones.
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "plugin/step/compat.h"
#include "plugin/step/extract.h"
#include "support/extracted.h"
#include "support/fixture.h"

namespace contactkit::test {
namespace {

std::vector<double> OurRow(const Problem& p, int i) {
  std::vector<double> row(p.nv, 0.0);
  for (int k = 0; k < p.J.rownnz[i]; k++) {
    row[p.J.colind[p.J.rowadr[i] + k]] = p.J.val[p.J.rowadr[i] + k];
  }
  return row;
}

using RowCase = std::tuple<std::string, int>;  // model, jacobian
class RowsTest : public MujocoTest, public ::testing::WithParamInterface<RowCase> {};

TEST_P(RowsTest, ReproduceMujocoEllipticRows) {
  const auto& [model, jacobian] = GetParam();
  ModelPtr m = Load(MujocoModel(model));
  ASSERT_TRUE(m);
  m->opt.cone = mjCONE_ELLIPTIC;
  m->opt.jacobian = jacobian;
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 100; t++) mj_step(m.get(), d.get());
  mj_forward(m.get(), d.get());
  ASSERT_GT(d->ncon, 0);

  Extracted e(m.get());
  Problem& p = e.storage.problem();
  ASSERT_EQ(e.ex.Extract(m.get(), d.get(), &p), 0);

  // elliptic: one row per efc row, same order
  ASSERT_EQ(p.nrow, d->nefc);
  int ncontact_rows = 0;
  for (int i = 0; i < p.nrow; i++) {
    const std::vector<double> a = EfcRow(m.get(), d.get(), i), b = OurRow(p, i);
    for (int k = 0; k < m->nv; k++) {
      ASSERT_NEAR(a[k], b[k], 1e-12) << "row " << i << " col " << k << " type " << d->efc_type[i];
    }
    EXPECT_NEAR(p.pos[i], d->efc_pos[i], 1e-12) << "row " << i;
    EXPECT_NEAR(p.margin[i], d->efc_margin[i], 1e-12) << "row " << i;
    EXPECT_NEAR(p.R[i], d->efc_R[i], 1e-12 * std::max(1.0, std::fabs(d->efc_R[i]))) << "row " << i;
    EXPECT_NEAR(p.aref[i], d->efc_aref[i], 1e-9 * std::max(1.0, std::fabs(d->efc_aref[i])))
        << "row " << i;
    ncontact_rows += p.kind[i] >= kRowContactNormal;
  }
  EXPECT_GT(ncontact_rows, 0);

  // contacts carry MuJoCo's distances, frames and friction
  int included = 0;
  for (int i = 0; i < d->ncon; i++) included += d->contact[i].efc_address >= 0;
  ASSERT_EQ(p.ncon, included);
  for (int c = 0; c < p.ncon; c++) {
    const mjContact& mc = d->contact[p.con[c].mj_index];
    EXPECT_EQ(p.con[c].dist, mc.dist);
    EXPECT_EQ(p.con[c].dim, mc.dim);
    EXPECT_EQ(p.con[c].efc_address, mc.efc_address);
    EXPECT_EQ(p.con[c].mu[0], mc.friction[0]);
  }

  // J v matches MuJoCo's efc_vel
  for (int i = 0; i < p.nrow; i++) EXPECT_NEAR(p.vel[i], d->efc_vel[i], 1e-10);
}

INSTANTIATE_TEST_SUITE_P(Models, RowsTest,
                         ::testing::Combine(::testing::Values("humanoid/humanoid.xml",
                                                              "humanoid/22_humanoids.xml",
                                                              "humanoid100/humanoid100.xml"),
                                            ::testing::Values(mjJAC_DENSE, mjJAC_SPARSE)));

// pyramidal models get frame rows too; their write-back reproduces the frame force exactly
TEST_F(MujocoTest, PyramidalWriteBackReproducesFrameForces) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  m->opt.cone = mjCONE_PYRAMIDAL;
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 300; t++) mj_step(m.get(), d.get());
  mj_forward(m.get(), d.get());
  Extracted e(m.get());
  Problem& p = e.storage.problem();
  Solution& sol = e.storage.solution();
  ASSERT_EQ(e.ex.Extract(m.get(), d.get(), &p), 0);
  ASSERT_GT(p.ncon, 0);

  // an arbitrary force in the frame rows, inside the cone
  for (int i = 0; i < p.nrow; i++) sol.force[i] = 0.1 * (i % 5) - 0.15;
  for (int c = 0; c < p.ncon; c++) sol.force[p.con[c].row] = 10 + c;
  VelocityFromForce(p, sol.force, sol.v_next, nullptr);
  e.ex.WriteBack(m.get(), d.get(), p, sol);

  // MuJoCo's own reconstruction of each contact's frame force
  for (int c = 0; c < p.ncon; c++) {
    mjtNum f6[6];
    mj_contactForce(m.get(), d.get(), p.con[c].mj_index, f6);
    for (int r = 0; r < p.con[c].dim; r++) {
      EXPECT_NEAR(f6[r], sol.force[p.con[c].row + r], 1e-10) << "contact " << c << " dim " << r;
    }
  }

  // efc_J' efc_force equals J' f
  std::vector<double> a(m->nv), b(m->nv);
  mj_mulJacTVec(m.get(), d.get(), a.data(), d->efc_force);
  p.J.MulT(sol.force, b.data());
  for (int k = 0; k < m->nv; k++) EXPECT_NEAR(a[k], b[k], 1e-9);
  for (int k = 0; k < m->nv; k++) EXPECT_NEAR(d->qfrc_constraint[k], b[k], 1e-9);
}

// tree-sparse mass matrix: product, solve and dense block agree with MuJoCo
TEST_F(MujocoTest, TreeMassAgreesWithMujoco) {
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

// islands: each humanoid standing on the floor is its own island
TEST_F(MujocoTest, IslandsSeparateTrees) {
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
