// Copyright 2026 The contactkit developers.
//
// The pipeline: with the "mujoco" pass-through, ck_step reproduces mj_step bit for bit for every
// integrator, Jacobian storage and MuJoCo solver; ck_forward matches mj_forward.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <tuple>

#include "plugin/step/compat.h"
#include "support/fixture.h"
#include "support/grid_scene.h"

namespace contactkit::test {
namespace {

using PipelineTest = MujocoTest;

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

// model, integrator, jacobian, solver, steps
using Case = std::tuple<std::string, int, int, int, int>;

class PassThroughTest : public MujocoTest, public ::testing::WithParamInterface<Case> {};

TEST_P(PassThroughTest, BitExactOverManySteps) {
  const auto& [model, integrator, jacobian, solver, nstep] = GetParam();
  // "grid_pinned" is grid2pin.xml's composite in plain MJCF (3.x has no grid composite)
  ModelPtr m = model == "grid_pinned" ? LoadString(GridPinnedXML()) : Load(MujocoModel(model));
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
  // CK_BITEXACT_STEPS overrides the step count (the full 1000-step matrix, run by hand)
  const char* env = std::getenv("CK_BITEXACT_STEPS");
  const int steps = env ? std::atoi(env) : TestSteps(nstep);
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
  if (steps >= 100) {
    EXPECT_GT(max_ncon, 0) << "the comparison should include contacts";
  }
  ExpectNoDataWarnings(d2.get());
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const auto& [model, integrator, jacobian, solver, nstep] = info.param;
  std::string name = model.substr(model.rfind('/') + 1);
  name = name.substr(0, name.find('.'));
  const char* integ[] = {"euler", "rk4", "implicit"};
  const char* jac[] = {"dense", "sparse"};
  const char* sol[] = {"pgs", "cg", "newton"};
  std::string out = name + "_" + integ[integrator] + "_" + jac[jacobian] + "_" + sol[solver] + "_" +
                    std::to_string(nstep);
  for (char& c : out) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return out;
}

// every integrator, Jacobian and MuJoCo solver on the humanoid (1000 steps) and a pinned grid of
// tendons (300 steps: RK4 on its 300 tendons costs ~30 ms a step)
const auto kIntegrators = ::testing::Values(mjINT_EULER, mjINT_RK4, mjINT_IMPLICIT);
const auto kJacobians = ::testing::Values(mjJAC_DENSE, mjJAC_SPARSE);
const auto kSolvers = ::testing::Values(mjSOL_PGS, mjSOL_CG, mjSOL_NEWTON);
INSTANTIATE_TEST_SUITE_P(SmallModels, PassThroughTest,
                         ::testing::Combine(::testing::Values("humanoid/humanoid.xml"),
                                            kIntegrators, kJacobians, kSolvers,
                                            ::testing::Values(1000)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(TendonGrid, PassThroughTest,
                         ::testing::Combine(::testing::Values("grid_pinned"), kIntegrators,
                                            kJacobians, kSolvers, ::testing::Values(300)),
                         CaseName);

// the large scenes: 300 steps with MuJoCo's own choice for them (sparse, Newton) in every
// integrator, and every other combination over 100 steps (dense PGS on 600 dofs costs ~30 ms
// a step; CK_BITEXACT_STEPS=1000 runs the full matrix by hand)
const auto kLarge = ::testing::Values("humanoid100/humanoid100.xml", "humanoid/22_humanoids.xml");
INSTANTIATE_TEST_SUITE_P(LargeModelsDefault, PassThroughTest,
                         ::testing::Combine(kLarge, kIntegrators, ::testing::Values(mjJAC_SPARSE),
                                            ::testing::Values(mjSOL_NEWTON),
                                            ::testing::Values(300)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(LargeModelsAll, PassThroughTest,
                         ::testing::Combine(kLarge, kIntegrators, kJacobians, kSolvers,
                                            ::testing::Values(100)),
                         CaseName);

// ck_forward leaves the same data as mj_forward
TEST_F(PipelineTest, ForwardMatchesMujoco) {
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

// ckTotals counts every solve and what was inexact, and keeps counting through ck_reset;
// ckSolverInfo describes the solver of the last solve (lcp: its guess, on a box at rest)
TEST_F(PipelineTest, TotalsCountAndSolverInfoDescribesTheLastSolve) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  ckSettings s = Settings(ckSOL_LCP);
  HandlePtr ck = Make(m.get(), &s);
  ckSolverInfo info;
  ASSERT_EQ(ck_solverInfo(ck.get(), &info), 0);
  EXPECT_EQ(info.solver, ckSOL_LCP);
  EXPECT_EQ(info.lcp_guess_tried, 0);
  EXPECT_EQ(ck_totals(ck.get())->solves, 0);
  for (int t = 0; t < 300; t++) ck_step(ck.get(), m.get(), d.get());
  const ckTotals* tot = ck_totals(ck.get());
  EXPECT_EQ(tot->solves, 300);
  EXPECT_EQ(tot->inexact, 0);
  EXPECT_EQ(tot->nwarning, 0);
  // the box lands and rests: from the second solve with contacts on, a guess is tried, and at
  // rest it is accepted
  EXPECT_GT(tot->guess_tries, 200);
  EXPECT_GT(tot->guess_hits, 150);
  ASSERT_EQ(ck_solverInfo(ck.get(), &info), 0);
  EXPECT_EQ(info.lcp_guess_tried, 1);
  EXPECT_EQ(info.lcp_guess_hit, 1);
  EXPECT_EQ(info.lcp_pivots, 0);
  EXPECT_EQ(info.ipm_retries + info.comfree_facets, 0);
  ck_reset(ck.get());
  ck_step(ck.get(), m.get(), d.get());
  EXPECT_EQ(ck_totals(ck.get())->solves, 301);
  // another solver: its own fields
  s = Settings(ckSOL_COMFREE);
  ASSERT_EQ(ck_setSettings(ck.get(), m.get(), &s, nullptr, 0), 0);
  ck_step(ck.get(), m.get(), d.get());
  ASSERT_EQ(ck_solverInfo(ck.get(), &info), 0);
  EXPECT_EQ(info.solver, ckSOL_COMFREE);
  EXPECT_GT(info.comfree_facets, 0);
  EXPECT_EQ(info.lcp_pivots + info.lcp_guess_tried, 0);
  EXPECT_EQ(ck_solverInfo(nullptr, &info), -1);
  EXPECT_EQ(ck_solverInfo(ck.get(), nullptr), -1);
  EXPECT_EQ(ck_totals(nullptr), nullptr);
}

// Acceleration-stage sensors (accelerometer, force, torque, touch) follow every step exactly as
// under mj_step: MuJoCo 3.5+ evaluates their post-constraint quantities lazily, once per forward
// pass, so a pipeline that does not clear that flag would keep the first step's readings
TEST_F(PipelineTest, AccelerationSensorsFollowEveryStep) {
  ModelPtr m = LoadString(R"(
<mujoco>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <body pos="0 0 0.3">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
      <site name="imu" pos="0.05 0 0"/>
      <site name="bottom" pos="0 0 -0.1" size="0.15 0.15 0.02" type="box"/>
      <body name="arm" pos="0 0 0.1">
        <joint name="arm" type="hinge" axis="0 1 0" damping="0.05"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.2"/>
        <site name="hinge" pos="0 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="arm" gear="2"/>
  </actuator>
  <sensor>
    <accelerometer site="imu"/>
    <force site="hinge"/>
    <torque site="hinge"/>
    <touch site="bottom"/>
  </sensor>
</mujoco>)");
  ASSERT_TRUE(m);
  DataPtr d1(mj_makeData(m.get())), d2(mj_makeData(m.get()));
  HandlePtr ck = Make(m.get());
  double first = 0, changed = 0;
  for (int t = 0; t < 300; t++) {
    d1->ctrl[0] = d2->ctrl[0] = 0.2 * std::sin(0.05 * t);
    mj_step(m.get(), d1.get());
    ck_step(ck.get(), m.get(), d2.get());
    ASSERT_TRUE(SameBits(d1->sensordata, d2->sensordata, m->nsensordata)) << "step " << t;
    if (t == 0) first = d2->sensordata[2];
    changed = std::max(changed, std::fabs(d2->sensordata[2] - first));
  }
  EXPECT_GT(changed, 1.0);  // the box lands: the accelerometer's z reading moves
}

// Our solvers do not need efc_AR, which MuJoCo 2.x's position stage computes for PGS and noslip
// models (mj_projectConstraint): ck_step leaves it out there and otherwise runs the same position
// stage, so a PGS model steps exactly as the same model with Newton
TEST_F(PipelineTest, OurSolversSkipTheProjectionOnlyPgsNeeds) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  for (int solver = ckSOL_IPM; solver < ckNSOLVER; solver++) {
    if (!ck_solverAvailable(solver)) continue;
    ckSettings s;
    ck_defaultSettings(&s);
    s.solver = solver;
    DataPtr d[2] = {DataPtr(mj_makeData(m.get())), DataPtr(mj_makeData(m.get()))};
    for (int k = 0; k < 2; k++) {
      m->opt.solver = k == 0 ? mjSOL_NEWTON : mjSOL_PGS;
      HandlePtr ck = Make(m.get(), &s);
      for (int t = 0; t < 100; t++) ck_step(ck.get(), m.get(), d[k].get());
    }
    const char* name = ck_solverName(solver);
    EXPECT_TRUE(SameBits(d[0]->qpos, d[1]->qpos, m->nq)) << name;
    EXPECT_TRUE(SameBits(d[0]->qvel, d[1]->qvel, m->nv)) << name;
    EXPECT_TRUE(SameBits(d[0]->xpos, d[1]->xpos, 3 * m->nbody)) << name;
    EXPECT_TRUE(SameBits(d[0]->cam_xpos, d[1]->cam_xpos, 3 * m->ncam)) << name;
    EXPECT_TRUE(SameBits(d[0]->light_xpos, d[1]->light_xpos, 3 * m->nlight)) << name;
    EXPECT_TRUE(SameBits(d[0]->ten_length, d[1]->ten_length, m->ntendon)) << name;
    EXPECT_TRUE(SameBits(d[0]->actuator_length, d[1]->actuator_length, m->nu)) << name;
    std::vector<mjtNum> M0(m->nM), M1(m->nM);
    CopyLegacyM(m.get(), d[0].get(), M0.data());
    CopyLegacyM(m.get(), d[1].get(), M1.data());
    EXPECT_TRUE(SameBits(M0.data(), M1.data(), m->nM)) << name;
    EXPECT_TRUE(SameBits(d[0]->qLD, d[1]->qLD, InertiaFactorSize(m.get()))) << name;
    EXPECT_EQ(d[0]->ncon, d[1]->ncon) << name;
    EXPECT_EQ(d[0]->nefc, d[1]->nefc) << name;
#if mjVERSION_HEADER < 300
    EXPECT_EQ(d[1]->timer[mjTIMER_POS_PROJECT].number, 0) << name;
    for (int timer : {mjTIMER_POSITION, mjTIMER_POS_KINEMATICS, mjTIMER_POS_INERTIA,
                      mjTIMER_POS_COLLISION, mjTIMER_POS_MAKE}) {
      EXPECT_EQ(d[1]->timer[timer].number, d[0]->timer[timer].number) << timer;
    }
#endif
  }

  // the pass-through keeps MuJoCo's stage (its PGS needs efc_AR)
  m->opt.solver = mjSOL_PGS;
  HandlePtr ck = Make(m.get());
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 10; t++) ck_step(ck.get(), m.get(), d.get());
  EXPECT_GT(d->timer[mjTIMER_POS_PROJECT].number, 0);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// ckStats.iterations of the pass-through means one solve's iterations on every version: a box on
// a plane and the same scene with a second, identical box 1 m away (two islands, which MuJoCo 3.x
// solves one by one) report the same count at every step (3.x summed the islands' counts before)
TEST_F(PipelineTest, PassThroughIterationsAreTheSlowestIslands) {
  const std::string one = ReadFile(BundledModel("box_on_plane.xml"));
  const size_t begin = one.find("<body name=\"box\""), end = one.find("</body>", begin) + 7;
  ASSERT_NE(begin, std::string::npos);
  std::string box2 = one.substr(begin, end - begin);
  for (const char* name : {"box", "box_free", "box_geom"}) {
    const std::string attr = std::string("name=\"") + name + "\"";
    box2.replace(box2.find(attr), attr.size(), std::string("name=\"") + name + "2\"");
  }
  box2.replace(box2.find("pos=\"0 0 "), 9, "pos=\"1 0 ");
  const std::string two = one.substr(0, end) + "\n" + box2 + one.substr(end);
  for (int solver : {mjSOL_PGS, mjSOL_NEWTON}) {
    ModelPtr m1 = LoadString(one), m2 = LoadString(two);
    ASSERT_TRUE(m1 && m2);
    ASSERT_EQ(m2->nv, 2 * m1->nv);
    m1->opt.solver = m2->opt.solver = solver;
    HandlePtr ck1 = Make(m1.get()), ck2 = Make(m2.get());
    DataPtr d1(mj_makeData(m1.get())), d2(mj_makeData(m2.get()));
    int most = 0;
    for (int t = 0; t < 300; t++) {
      ck_step(ck1.get(), m1.get(), d1.get());
      ck_step(ck2.get(), m2.get(), d2.get());
      ASSERT_EQ(ck_stats(ck2.get())->iterations, ck_stats(ck1.get())->iterations)
          << "solver " << solver << " step " << t;
      most = std::max(most, ck_stats(ck1.get())->iterations);
    }
    EXPECT_GT(most, 0) << "solver " << solver;
  }
}

}  // namespace
}  // namespace contactkit::test
