// Copyright 2026 The contactkit developers.
//
// The pipeline: with the "mujoco" pass-through, ck_step reproduces mj_step bit for bit for every
// integrator, Jacobian storage and MuJoCo solver; ck_forward matches mj_forward.
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <tuple>

#include "support/fixture.h"

namespace contactkit::test {
namespace {

bool SameBits(const mjtNum* a, const mjtNum* b, int n) {
  return n == 0 || std::memcmp(a, b, sizeof(mjtNum) * n) == 0;
}

// first index where two arrays differ, -1 if bitwise equal
int FirstDifference(const mjtNum* a, const mjtNum* b, int n) {
  for (int i = 0; i < n; i++) {
    if (std::memcmp(a + i, b + i, sizeof(mjtNum)) != 0) return i;
  }
  return -1;
}

using Case = std::tuple<std::string, int, int, int>;  // model, integrator, jacobian, solver

class PassThroughTest : public MujocoTest, public ::testing::WithParamInterface<Case> {};

TEST_P(PassThroughTest, BitExactOverManySteps) {
  const auto& [model, integrator, jacobian, solver] = GetParam();
  ModelPtr m = Load(MujocoModel(model));
  ASSERT_TRUE(m);
  m->opt.integrator = integrator;
  m->opt.jacobian = jacobian;
  m->opt.solver = solver;
  DataPtr d1(mj_makeData(m.get())), d2(mj_makeData(m.get()));
  ckSettings s = Settings(ckSOL_MUJOCO);
  HandlePtr ck = Make(m.get(), &s);
  ASSERT_TRUE(ck);

  // the same random controls on both sides
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  const int steps = TestSteps(1000);
  int max_ncon = 0;
  for (int t = 0; t < steps; t++) {
    for (int i = 0; i < m->nu; i++) d1->ctrl[i] = d2->ctrl[i] = 0.3 * u(rng);
    mj_step(m.get(), d1.get());
    ck_step(ck.get(), m.get(), d2.get());
    ASSERT_TRUE(SameBits(d1->qpos, d2->qpos, m->nq))
        << "qpos differs at step " << t << " index " << FirstDifference(d1->qpos, d2->qpos, m->nq);
    ASSERT_TRUE(SameBits(d1->qvel, d2->qvel, m->nv)) << "qvel differs at step " << t;
    ASSERT_TRUE(SameBits(d1->act, d2->act, m->na)) << "act differs at step " << t;
    ASSERT_TRUE(SameBits(d1->qacc, d2->qacc, m->nv)) << "qacc differs at step " << t;
    ASSERT_TRUE(SameBits(d1->qacc_warmstart, d2->qacc_warmstart, m->nv)) << "step " << t;
    ASSERT_EQ(d1->nefc, d2->nefc);
    ASSERT_TRUE(SameBits(d1->efc_force, d2->efc_force, d1->nefc)) << "step " << t;
    ASSERT_TRUE(SameBits(d1->sensordata, d2->sensordata, m->nsensordata)) << "step " << t;
    ASSERT_EQ(d1->time, d2->time);
    max_ncon = std::max(max_ncon, d1->ncon);
  }
  EXPECT_GT(max_ncon, 0) << "the comparison should include contacts";
  ExpectNoDataWarnings(d2.get());
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const auto& [model, integrator, jacobian, solver] = info.param;
  std::string name = model.substr(model.rfind('/') + 1);
  name = name.substr(0, name.find('.'));
  const char* integ[] = {"euler", "rk4", "implicit"};
  const char* jac[] = {"dense", "sparse"};
  const char* sol[] = {"pgs", "cg", "newton"};
  std::string out = name + "_" + integ[integrator] + "_" + jac[jacobian] + "_" + sol[solver];
  for (char& c : out) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    MujocoModels, PassThroughTest,
    ::testing::Combine(::testing::Values("humanoid/humanoid.xml", "humanoid100/humanoid100.xml",
                                         "humanoid/22_humanoids.xml", "composite/cloth.xml"),
                       ::testing::Values(mjINT_EULER, mjINT_RK4, mjINT_IMPLICIT),
                       ::testing::Values(mjJAC_DENSE, mjJAC_SPARSE),
                       ::testing::Values(mjSOL_PGS, mjSOL_CG, mjSOL_NEWTON)),
    CaseName);

// ck_forward leaves the same data as mj_forward
TEST_F(MujocoTest, ForwardMatchesMujoco) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  DataPtr d1(mj_makeData(m.get())), d2(mj_makeData(m.get()));
  HandlePtr ck = Make(m.get());
  for (int t = 0; t < 50; t++) mj_step(m.get(), d1.get());
  mju_copy(d2->qpos, d1->qpos, m->nq);
  mju_copy(d2->qvel, d1->qvel, m->nv);
  mju_copy(d2->qacc_warmstart, d1->qacc_warmstart, m->nv);
  mj_forward(m.get(), d1.get());
  ck_forward(ck.get(), m.get(), d2.get());
  EXPECT_TRUE(SameBits(d1->qacc, d2->qacc, m->nv));
  EXPECT_TRUE(SameBits(d1->qfrc_constraint, d2->qfrc_constraint, m->nv));
  EXPECT_EQ(ck_stats(ck.get())->solver, ckSOL_MUJOCO);
  EXPECT_EQ(ck_stats(ck.get())->ncon, d1->ncon);
}

}  // namespace
}  // namespace contactkit::test
