// Copyright 2026 The contactkit developers.
//
// Jacobians of an adaptive step (plugin/deriv/adaptive_tangent.cc): the step as taken, its
// internal steps' sizes held fixed, against the exact flow of an oscillator and against
// centered differences of the same adaptive step at a tight tolerance (where the sizes' own
// dependence on the state is below the differences' resolution).
#include <cmath>
#include <string>
#include <vector>

#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

using AdaptiveJacTest = MujocoTest;

ckSettings AdaptiveSettings(int integrator, double tol) {
  ckSettings s;
  ck_defaultSettings(&s);
  s.integrator = integrator;
  s.adaptive.rtol = tol;
  s.adaptive.atol = tol;
  return s;
}

// analytic Jacobians and centered differences of the same step (sensors included)
void Compare(const mjModel* m, const mjData* d, ckHandle* ck, double tol, const char* what) {
  Jacobians an(m), fd(m);
  ASSERT_EQ(0, ck_transitionJac(ck, m, d, an.A.data(), an.B.data(), an.C.data(), an.D.data()))
      << what << ": " << ck_fallbackText(ck_lastFallback(ck));
  ASSERT_EQ(0,
            ck_transitionFD(ck, m, d, 1e-6, 1, fd.A.data(), fd.B.data(), fd.C.data(), fd.D.data()));
  const int ndx = 2 * m->nv + m->na;
  EXPECT_LT(RelativeError(an.A, fd.A), tol) << what << "\n" << WorstEntries(m, an.A, fd.A, ndx);
  if (m->nu) {
    EXPECT_LT(RelativeError(an.B, fd.B), tol) << what << "\n" << WorstEntries(m, an.B, fd.B, m->nu);
  }
  if (m->nsensordata) {
    EXPECT_LT(RelativeError(an.C, fd.C), tol) << what << "\n" << WorstEntries(m, an.C, fd.C, ndx);
  }
}

// the spring slider (omega = 10 rad/s): the step's flow is exact
TEST_F(AdaptiveJacTest, OscillatorJacobianIsTheExactFlow) {
  ModelPtr m = LoadString(OscillatorXml());
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  d->qpos[0] = 0.1;
  const double h = m->opt.timestep, c = std::cos(10 * h), sn = std::sin(10 * h);
  for (int integrator : {ckINT_TSIT5, ckINT_DOPRI5}) {
    const ckSettings s = AdaptiveSettings(integrator, 1e-10);
    HandlePtr ck = Make(m.get(), &s);
    std::vector<double> A(4);
    ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), nullptr, nullptr, nullptr));
    EXPECT_EQ(ck_lastFallback(ck.get()), ckFALLBACK_NONE);
    EXPECT_NEAR(A[0], c, 1e-9) << integrator;
    EXPECT_NEAR(A[1], sn / 10, 1e-10) << integrator;
    EXPECT_NEAR(A[2], -10 * sn, 1e-8) << integrator;
    EXPECT_NEAR(A[3], c, 1e-9) << integrator;
  }
}

// a tumbling free body (rotations on the manifold, turning 0.4 rad a step) and a pendulum with
// a filtered actuator (activation, control) and sensors, no contact
TEST_F(AdaptiveJacTest, TumblingBodyAndActuatedPendulumMatchDifferences) {
  ModelPtr m = LoadString(R"(
<mujoco>
  <option timestep="0.05"/>
  <worldbody>
    <body pos="0 0 1">
      <freejoint/>
      <inertial pos="0 0 0" mass="1" diaginertia="1 2 3"/>
      <geom type="box" size="0.1 0.2 0.3" contype="0" conaffinity="0" mass="0"/>
    </body>
    <body pos="1 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0" conaffinity="0"/>
      <site name="tip" pos="0.3 0 0"/>
    </body>
  </worldbody>
  <actuator>
    <general joint="hinge" dyntype="filter" dynprm="0.05" gainprm="2"/>
  </actuator>
  <sensor>
    <jointpos joint="hinge"/>
    <framepos objtype="site" objname="tip"/>
  </sensor>
</mujoco>)");
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  const double qvel[7] = {0.3, -0.2, 0.1, 1, 8, 1.5, 1.5};
  for (int i = 0; i < 7; i++) d->qvel[i] = qvel[i];
  d->qpos[7] = 0.4;
  d->act[0] = 0.3;
  d->ctrl[0] = 0.8;
  for (int integrator : {ckINT_TSIT5, ckINT_DOPRI5}) {
    const ckSettings s = AdaptiveSettings(integrator, 1e-11);
    HandlePtr ck = Make(m.get(), &s);
    // 3e-9 (tsit5) and 1e-8 (dopri5) measured; without the rotations' dexp^-1 in the tangent
    // 2-3e-7
    Compare(m.get(), d.get(), ck.get(), 5e-8, integrator == ckINT_TSIT5 ? "tsit5" : "dopri5");

    // the VJP goes through the same chain
    const int ndx = 2 * m->nv + m->na;
    Jacobians jac(m.get());
    ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr,
                                  nullptr));
    std::vector<double> dx(ndx), gx(ndx), gu(m->nu);
    for (int i = 0; i < ndx; i++) dx[i] = std::sin(1.0 + i);
    ASSERT_EQ(
        0, ck_transitionVJP(ck.get(), m.get(), d.get(), dx.data(), nullptr, gx.data(), gu.data()));
    std::vector<double> ex, eu;
    TransposedProducts(m.get(), jac, dx, {}, &ex, &eu);
    for (int j = 0; j < ndx; j++) EXPECT_NEAR(gx[j], ex[j], 1e-12 * (1 + std::fabs(ex[j]))) << j;
    EXPECT_NEAR(gu[0], eu[0], 1e-12 * (1 + std::fabs(eu[0])));
  }
}

// a ball pressed into the floor's stiff soft contact (solref 0.005 1): many internal steps within
// the timestep, through the contact's force law
TEST_F(AdaptiveJacTest, BallInStiffContactMatchesDifferences) {
  ModelPtr m = LoadString(R"(
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1" solref="0.005 1" solimp="0 0.95 0.001 0.5 2"/>
    <body pos="0 0 0.098">
      <freejoint/>
      <geom type="sphere" size="0.1" mass="1" solref="0.005 1" solimp="0 0.95 0.001 0.5 2"/>
    </body>
  </worldbody>
</mujoco>)");
  ASSERT_TRUE(m);
  Tighten(m.get());
  DataPtr d(mj_makeData(m.get()));
  d->qvel[0] = 0.2;
  d->qvel[2] = -0.3;
  const ckSettings s = AdaptiveSettings(ckINT_TSIT5, 1e-10);
  HandlePtr ck = Make(m.get(), &s);
  DataPtr probe(mj_makeData(m.get()));
  mj_copyData(probe.get(), m.get(), d.get());
  ck_step(ck.get(), m.get(), probe.get());
  const ckStepInfo* info = ck_stepInfo(ck.get());
  ASSERT_GT(info->accepted, 4) << "the contact should need several internal steps";
  ck_reset(ck.get());
  Compare(m.get(), d.get(), ck.get(), 1e-6, "ball in contact");  // 4e-9 measured
}

// complementarity-aware forms chain no stages: under the adaptive pairs the aware Jacobian is
// the Jacobian of the step as taken, bit for bit, whatever the direction
TEST_F(AdaptiveJacTest, AwareJacobianIsThePlainOne) {
  ModelPtr m = LoadString(R"(
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1" mass="1"/></body>
  </worldbody>
</mujoco>)");
  ASSERT_TRUE(m);
  ckSettings s = AdaptiveSettings(ckINT_TSIT5, 1e-6);
  s.deriv.complementarity_aware = 1;
  HandlePtr ck = Make(m.get(), &s);
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 20; t++) ck_step(ck.get(), m.get(), d.get());
  ASSERT_GT(d->ncon, 0);
  const int ndx = 2 * m->nv;
  std::vector<double> dx(ndx, 0.0);
  dx[2] = 1;  // the box's height: a direction that lifts it
  Jacobians plain(m.get()), aware(m.get());
  ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), plain.A.data(), plain.B.data(), nullptr,
                                nullptr));
  ASSERT_EQ(0, ck_transitionJacAware(ck.get(), m.get(), d.get(), dx.data(), aware.A.data(),
                                     aware.B.data(), nullptr, nullptr));
  EXPECT_EQ(plain.A, aware.A);
}

// the analytic path allocates nothing in the call
TEST_F(AdaptiveJacTest, JacobianDoesNotAllocate) {
  if (!AllocationCounter::Available()) GTEST_SKIP() << "malloc is owned by the sanitizer";
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  const ckSettings s = AdaptiveSettings(ckINT_TSIT5, 1e-4);
  HandlePtr ck = Make(m.get(), &s);
  for (int t = 0; t < 150; t++) ck_step(ck.get(), m.get(), d.get());
  ASSERT_GT(d->ncon, 0);
  Jacobians jac(m.get());
  ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr,
                                nullptr));
  AllocationCounter counter;
  counter.Start();
  const int r =
      ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr, nullptr);
  EXPECT_EQ(counter.Stop(), 0);
  EXPECT_EQ(r, 0);
}

}  // namespace
}  // namespace contactkit::test
