// Copyright 2026 The contactkit developers.
//
// The adaptive integrators (plugin/step/adaptive.h): closed-form motion, the pairs' orders, the
// manifold, impact-localized step shrinking, rollouts that choose their own steps, the limits and
// the settings' refusals.
#include <cmath>
#include <string>
#include <vector>

#include "support/fixture.h"

namespace contactkit::test {
namespace {

using AdaptiveTest = MujocoTest;

// a ball of radius 0.1 above a floor with DiffMJX's stiff contact (solref 0.005 1)
std::string BallXml(double timestep) {
  return R"(
<mujoco>
  <option timestep=")" +
         std::to_string(timestep) + R"("/>
  <worldbody>
    <geom type="plane" size="2 2 0.1" solref="0.005 1" solimp="0 0.95 0.001 0.5 2"/>
    <body pos="0 0 0.5">
      <freejoint/>
      <geom type="sphere" size="0.1" mass="1" solref="0.005 1" solimp="0 0.95 0.001 0.5 2"/>
    </body>
  </worldbody>
</mujoco>)";
}

ckSettings Adaptive(int integrator, double rtol, double atol) {
  ckSettings s;
  ck_defaultSettings(&s);
  s.integrator = integrator;
  s.adaptive.rtol = rtol;
  s.adaptive.atol = atol;
  return s;
}

// the slider's position error against 0.1 cos(10 t) after 1 s
double OscillatorError(const mjModel* m, const ckSettings& s, int* steps) {
  DataPtr d(mj_makeData(m));
  d->qpos[0] = 0.1;
  HandlePtr ck(ck_make(m, &s, nullptr, 0));
  const int n = static_cast<int>(std::lround(1 / m->opt.timestep));
  *steps = 0;
  for (int t = 0; t < n; t++) {
    ck_step(ck.get(), m, d.get());
    *steps += ck_stepInfo(ck.get())->accepted + ck_stepInfo(ck.get())->rejected;
  }
  EXPECT_NEAR(d->time, 1.0, 1e-12);
  return std::fabs(d->qpos[0] - 0.1 * std::cos(10 * d->time));
}

TEST_F(AdaptiveTest, OscillatorMatchesItsClosedFormToTheTolerance) {
  ModelPtr m = LoadString(OscillatorXml());
  ASSERT_TRUE(m);
  for (int integrator : {ckINT_TSIT5, ckINT_DOPRI5}) {
    int loose_steps, tight_steps;
    const double loose = OscillatorError(m.get(), Adaptive(integrator, 1e-4, 1e-4), &loose_steps);
    const double tight = OscillatorError(m.get(), Adaptive(integrator, 1e-10, 1e-10), &tight_steps);
    EXPECT_LT(tight, 1e-9) << integrator;
    EXPECT_LT(loose, 1e-3) << integrator;
    // the tighter run is more accurate and takes more steps
    EXPECT_LT(tight, 0.1 * loose) << integrator;
    EXPECT_GT(tight_steps, 2 * loose_steps) << integrator;
  }
}

// with tolerances that accept everything each internal step is the whole timestep: a fixed-step
// fifth-order method, whose global error falls 32-fold when h halves, and whose embedded error
// estimate (local, fifth order in h) does the same
TEST_F(AdaptiveTest, PairsAreFifthOrderWithAFifthOrderErrorEstimate) {
  ModelPtr m = LoadString(OscillatorXml());
  ASSERT_TRUE(m);
  for (int integrator : {ckINT_TSIT5, ckINT_DOPRI5}) {
    const ckSettings s = Adaptive(integrator, 0, 1e6);
    double error[2], estimate[2];
    for (int k = 0; k < 2; k++) {
      m->opt.timestep = k == 0 ? 0.02 : 0.01;
      int steps;
      error[k] = OscillatorError(m.get(), s, &steps);
      EXPECT_EQ(steps, static_cast<int>(std::lround(1 / m->opt.timestep))) << "one per step";
      // one step from the same state, its error estimate in state units (atol 1, rtol 0)
      const ckSettings unit = Adaptive(integrator, 0, 1);
      DataPtr d(mj_makeData(m.get()));
      d->qpos[0] = 0.1;
      HandlePtr ck = Make(m.get(), &unit);
      ck_step(ck.get(), m.get(), d.get());
      estimate[k] = ck_stepInfo(ck.get())->error;
    }
    EXPECT_GT(error[0] / error[1], 24) << integrator << ": " << error[0] << " " << error[1];
    EXPECT_LT(error[0] / error[1], 40) << integrator;
    EXPECT_GT(estimate[0] / estimate[1], 24)
        << integrator << ": " << estimate[0] << " " << estimate[1];
    EXPECT_LT(estimate[0] / estimate[1], 40) << integrator;
  }
}

// free flight is a parabola, which the fifth-order pair integrates exactly: one internal step per
// timestep and the closed form to roundoff
TEST_F(AdaptiveTest, FreeFlightIsExactInOneInternalStep) {
  ModelPtr m = LoadString(BallXml(0.01));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  d->qpos[2] = 1.5;
  d->qvel[0] = 1;
  d->qvel[2] = 2;
  const ckSettings s = Adaptive(ckINT_TSIT5, 1e-8, 1e-8);
  HandlePtr ck = Make(m.get(), &s);
  for (int t = 0; t < 50; t++) {
    ck_step(ck.get(), m.get(), d.get());
    if (t > 0) {
      EXPECT_EQ(ck_stepInfo(ck.get())->accepted, 1) << "step " << t;
    }
    EXPECT_EQ(ck_stepInfo(ck.get())->rejected, 0) << "step " << t;
  }
  const double g = -m->opt.gravity[2], t = d->time;
  EXPECT_NEAR(d->qpos[0], t, 1e-12);
  EXPECT_NEAR(d->qpos[2], 1.5 + 2 * t - 0.5 * g * t * t, 1e-12);
  EXPECT_NEAR(d->qvel[2], 2 - g * t, 1e-12);
  ExpectNoDataWarnings(d.get());
}

// a box tumbling about its intermediate axis (torque-free): the quaternion stays a unit one and
// angular momentum (world frame) and energy are kept at tight tolerances
TEST_F(AdaptiveTest, TumblingBodyKeepsItsMomentumOnTheManifold) {
  ModelPtr m = LoadString(R"(
<mujoco>
  <option timestep="0.01" gravity="0 0 0"/>
  <worldbody>
    <body>
      <freejoint/>
      <inertial pos="0 0 0" mass="1" diaginertia="1 2 3"/>
      <geom type="box" size="0.1 0.2 0.3" contype="0" conaffinity="0" mass="0"/>
    </body>
  </worldbody>
</mujoco>)");
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  d->qvel[3] = 0.05;
  d->qvel[4] = 4;
  d->qvel[5] = 0.05;
  const ckSettings s = Adaptive(ckINT_TSIT5, 1e-10, 1e-10);
  HandlePtr ck = Make(m.get(), &s);
  const double inertia[3] = {1, 2, 3};
  // world-frame angular momentum R I omega (omega in the body frame) and kinetic energy
  auto momentum = [&](double L[3], double* energy) {
    double local[3], mat[9];
    *energy = 0;
    for (int i = 0; i < 3; i++) {
      local[i] = inertia[i] * d->qvel[3 + i];
      *energy += 0.5 * inertia[i] * d->qvel[3 + i] * d->qvel[3 + i];
    }
    mju_quat2Mat(mat, d->qpos + 3);
    mju_mulMatVec(L, mat, local, 3, 3);
  };
  double L0[3], E0, L1[3], E1;
  momentum(L0, &E0);
  for (int t = 0; t < 200; t++) {
    ck_step(ck.get(), m.get(), d.get());
    EXPECT_NEAR(mju_norm(d->qpos + 3, 4), 1, 1e-12) << "step " << t;
  }
  momentum(L1, &E1);
  for (int i = 0; i < 3; i++) EXPECT_NEAR(L1[i], L0[i], 1e-7 * mju_norm3(L0)) << i;
  EXPECT_NEAR(E1, E0, 1e-7 * E0);
  // it tumbled: the intermediate axis is unstable, the spin has moved to other axes
  EXPECT_LT(std::fabs(d->qvel[4]), 3.9);
}

// a dropped ball: internal steps shrink only around the impact (the stiff contact), not in flight
TEST_F(AdaptiveTest, StepsShrinkOnlyNearTheImpact) {
  ModelPtr m = LoadString(BallXml(0.01));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  const ckSettings s = Adaptive(ckINT_TSIT5, 1e-5, 1e-5);
  HandlePtr ck = Make(m.get(), &s);
  // impact at sqrt(2 0.4 / g) = 0.286 s, step 28
  int most_in_flight = 0, most_at_impact = 0;
  double smallest_at_impact = HUGE_VAL;
  for (int t = 0; t < 40; t++) {
    ck_step(ck.get(), m.get(), d.get());
    const ckStepInfo* info = ck_stepInfo(ck.get());
    ASSERT_EQ(info->status, ckADAPT_OK);
    const int n = info->accepted + info->rejected;
    if (t < 25) {
      most_in_flight = std::max(most_in_flight, n);
    } else {
      most_at_impact = std::max(most_at_impact, n);
      smallest_at_impact = std::min(smallest_at_impact, info->min_step);
    }
  }
  EXPECT_LE(most_in_flight, 2);
  EXPECT_GE(most_at_impact, 8);
  EXPECT_LT(smallest_at_impact, 0.1 * m->opt.timestep);
  EXPECT_GT(d->qvel[2], 0) << "the ball bounced";
  ExpectNoDataWarnings(d.get());
}

#if mjVERSION_HEADER >= 300
// a batch of rollouts: each starts afresh (ck_reset) and chooses its own steps, so a rollout in
// the batch equals the same rollout run alone
TEST_F(AdaptiveTest, RolloutsInABatchChooseTheirOwnSteps) {
  ModelPtr m = LoadString(BallXml(0.01));
  ASSERT_TRUE(m);
  const ckSettings s = Adaptive(ckINT_DOPRI5, 1e-6, 1e-6);
  const int nstate = mj_stateSize(m.get(), mjSTATE_FULLPHYSICS), nstep = 60, nroll = 2;
  DataPtr d(mj_makeData(m.get()));
  std::vector<double> state0(nroll * nstate);
  for (int r = 0; r < nroll; r++) {
    mj_resetData(m.get(), d.get());
    d->qpos[2] = r == 0 ? 0.5 : 0.3;
    mj_getState(m.get(), d.get(), state0.data() + r * nstate, mjSTATE_FULLPHYSICS);
  }
  HandlePtr ck = Make(m.get(), &s);
  ckHandle* handles[1] = {ck.get()};
  mjData* datas[1] = {d.get()};
  std::vector<double> states(nroll * nstep * nstate);
  char err[256];
  ASSERT_EQ(0, ck_rollout(m.get(), handles, datas, 1, nroll, nstep, 0, state0.data(), nullptr,
                          nullptr, states.data(), nullptr, err, sizeof(err)))
      << err;
  for (int r = 0; r < nroll; r++) {
    DataPtr alone(mj_makeData(m.get()));
    mj_setState(m.get(), alone.get(), state0.data() + r * nstate, mjSTATE_FULLPHYSICS);
    HandlePtr own = Make(m.get(), &s);
    std::vector<double> x(nstate);
    for (int t = 0; t < nstep; t++) {
      ck_step(own.get(), m.get(), alone.get());
      mj_getState(m.get(), alone.get(), x.data(), mjSTATE_FULLPHYSICS);
      const double* batch = states.data() + (r * nstep + t) * nstate;
      for (int i = 0; i < nstate; i++)
        ASSERT_EQ(batch[i], x[i]) << "rollout " << r << " step " << t;
    }
  }
}

#endif

// a step that cannot reach its end within max_steps leaves the state at its start, says why and
// raises a warning
TEST_F(AdaptiveTest, AStepOverItsBudgetLeavesTheStateAtItsStart) {
  ModelPtr m = LoadString(BallXml(0.01));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  ckSettings s = Adaptive(ckINT_TSIT5, 1e-10, 1e-10);
  s.adaptive.max_steps = 4;
  HandlePtr ck = Make(m.get(), &s);
  bool failed = false;
  for (int t = 0; t < 40 && !failed; t++) {
    const double time = d->time, z = d->qpos[2], vz = d->qvel[2];
    ck_step(ck.get(), m.get(), d.get());
    if (ck_stepInfo(ck.get())->status == ckADAPT_MAX_STEPS) {
      failed = true;
      EXPECT_EQ(d->time, time);
      EXPECT_EQ(d->qpos[2], z);
      EXPECT_EQ(d->qvel[2], vz);
      EXPECT_NE(
          std::string(ck_lastError(ck.get())).find("max_steps internal steps were not enough"),
          std::string::npos)
          << ck_lastError(ck.get());
    }
  }
  EXPECT_TRUE(failed) << "the impact needs more than 4 internal steps at 1e-10";
  EXPECT_EQ(TakeWarnings("did not reach its end"), 1);
}

TEST_F(AdaptiveTest, VelocityImpulseSolversAndUnknownNamesAreRefused) {
  char err[512];
  ckSettings s = Adaptive(ckINT_TSIT5, 1e-5, 1e-5);
  for (int solver : {ckSOL_IPM, ckSOL_COMFREE, ckSOL_LCP}) {
    s.solver = solver;
    EXPECT_NE(ck_validateSettings(&s, err, sizeof(err)), 0);
    EXPECT_NE(std::string(err).find("allowed: integrator model with every solver, tsit5 or dopri5 "
                                    "with solver mujoco"),
              std::string::npos)
        << err;
  }
  EXPECT_NE(ck_setSetting(&s, "integrator", "rk45", err, sizeof(err)), 0);
  EXPECT_NE(std::string(err).find("allowed: one of: model, tsit5, dopri5"), std::string::npos)
      << err;
  s = Adaptive(ckINT_DOPRI5, 0, 0);
  EXPECT_NE(ck_validateSettings(&s, err, sizeof(err)), 0);
  EXPECT_NE(std::string(err).find("at least one of them > 0"), std::string::npos) << err;
}

// the integrator from a model's <custom> fields; the Jacobian of its step is analytic
TEST_F(AdaptiveTest, ModelFieldsSelectItAndItsJacobianIsAnalytic) {
  ModelPtr m = LoadString(OscillatorXml(R"(
  <custom>
    <text name="contactkit:integrator" data="dopri5"/>
    <numeric name="contactkit:rtol" data="1e-7"/>
  </custom>)"));
  ASSERT_TRUE(m);
  HandlePtr ck = Make(m.get());
  ckSettings s;
  ck_getSettings(ck.get(), &s);
  EXPECT_EQ(s.integrator, ckINT_DOPRI5);
  EXPECT_EQ(s.adaptive.rtol, 1e-7);
  DataPtr d(mj_makeData(m.get()));
  d->qpos[0] = 0.1;
  std::vector<double> A(4);
  EXPECT_EQ(ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), nullptr, nullptr, nullptr), 0);
  EXPECT_EQ(ck_lastFallback(ck.get()), ckFALLBACK_NONE);
  // the oscillator's exact flow over h: [[cos, sin / w], [-w sin, cos]] (w = 10)
  const double h = m->opt.timestep, c = std::cos(10 * h), sn = std::sin(10 * h);
  EXPECT_NEAR(A[0], c, 1e-6);
  EXPECT_NEAR(A[1], sn / 10, 1e-7);
  EXPECT_NEAR(A[2], -10 * sn, 1e-5);
  EXPECT_NEAR(A[3], c, 1e-6);
}

TEST_F(AdaptiveTest, StepDoesNotAllocate) {
  if (!AllocationCounter::Available()) GTEST_SKIP() << "malloc is owned by the sanitizer";
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  const ckSettings s = Adaptive(ckINT_TSIT5, 1e-4, 1e-4);
  HandlePtr ck = Make(m.get(), &s);
  for (int t = 0; t < 20; t++) ck_step(ck.get(), m.get(), d.get());
  AllocationCounter counter;
  counter.Start();
  for (int t = 0; t < 50; t++) ck_step(ck.get(), m.get(), d.get());
  EXPECT_EQ(counter.Stop(), 0);
  EXPECT_GT(d->ncon, 0);
}

}  // namespace
}  // namespace contactkit::test
