// Copyright 2026 The contactkit developers.
//
// The extracted problem: its rows reproduce MuJoCo's own efc_J, efc_pos, efc_R and efc_aref
// (elliptic cone, dense and sparse), and the write-back is consistent for pyramidal cones.
#include "plugin/step/extract.h"

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "plugin/step/compat.h"
#include "support/extracted.h"
#include "support/fixture.h"

namespace contactkit::test {
namespace {

using ExtractTest = MujocoTest;

std::vector<double> OurRow(const Problem& p, int i) {
  std::vector<double> row(p.nv, 0.0);
  for (int k = 0; k < p.J.rownnz[i]; k++) {
    row[p.J.colind[p.J.rowadr[i] + k]] = p.J.val[p.J.rowadr[i] + k];
  }
  return row;
}

using RowCase = std::tuple<std::string, int>;  // model, jacobian
class ExtractRowsTest : public MujocoTest, public ::testing::WithParamInterface<RowCase> {};

TEST_P(ExtractRowsTest, ReproduceMujocoEllipticRows) {
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

INSTANTIATE_TEST_SUITE_P(Models, ExtractRowsTest,
                         ::testing::Combine(::testing::Values("humanoid/humanoid.xml",
                                                              "humanoid/22_humanoids.xml",
                                                              "humanoid100/humanoid100.xml"),
                                            ::testing::Values(mjJAC_DENSE, mjJAC_SPARSE)));

// pyramidal models get frame rows too; their write-back reproduces the frame force exactly
TEST_F(ExtractTest, PyramidalWriteBackReproducesFrameForces) {
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

}  // namespace
}  // namespace contactkit::test
