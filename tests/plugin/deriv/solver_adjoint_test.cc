// Copyright 2026 The contactkit developers.
//
// A solver's reverse mode (Derivative::SolverAdjointDirections) with its Newton-Euler terms and its
// weight of dv_free transposed (PrepareSolverRne, SmoothTangent::PrepareSolverRneAdjoint) instead
// of each direction's dqfrc_smooth and dv_free: the VJP is the streamed one
// (SmoothTangent::reverse_solver_rne_ off) and dx' [A B] of ck_transitionJac, on a scene of free,
// ball, hinge (with a spring and a motor) and slide joints in contact, on the humanoid and on
// humanoid100, under Euler with and without joint damping, with and without lcp's split impulse.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "plugin/deriv/smooth_tangent.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

// a box sliding on the floor; an arm (hinge with a spring and a motor, then a ball) whose tip
// rests on a second box; a torso on a free joint with a hinged and a slid limb lying on the floor
constexpr char kScene[] = R"(
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="1 0 0.4">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.2" stiffness="3"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body pos="0.3 0 0">
        <joint type="ball" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.15" size="0.03"/>
      </body>
    </body>
    <body pos="1.3 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="-1 0 0.15">
      <freejoint/>
      <geom type="box" size="0.2 0.1 0.05" mass="2"/>
      <body pos="0.2 0 0">
        <joint name="knee" type="hinge" axis="0 1 0" damping="0.3"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 -0.1" size="0.04" mass="0.5"/>
        <body pos="0.2 0 -0.1">
          <joint type="slide" axis="1 0 0" damping="0.4" stiffness="5"/>
          <geom type="sphere" size="0.05" mass="0.3"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="shoulder" gear="2"/>
    <motor joint="knee" gear="1"/>
  </actuator>
</mujoco>)";

class SolverAdjointTest : public MujocoTest {
 protected:
  void TearDown() override {
    SmoothTangent::reverse_solver_rne_ = true;
    MujocoTest::TearDown();
  }

  // the VJP with and without the reverse pass and dx' [A B] at a settled state
  void Check(mjModel* m, int solver, int steps, const std::string& name) {
    if (!ck_solverAvailable(solver)) GTEST_SKIP() << "solver not in this build";
    const std::vector<double> damping(m->dof_damping, m->dof_damping + m->nv);
    const int ndx = 2 * m->nv + m->na, nu = m->nu;
    for (int variant = 0; variant < 3; variant++) {
      // 0: undamped, 1: damped, 2: damped with lcp's split impulse toggled (comfree, ipm: as 1)
      for (int i = 0; i < m->nv; i++) m->dof_damping[i] = variant ? damping[i] : 0;
      const std::string what = name + " variant " + std::to_string(variant);
      DataPtr d(mj_makeData(m));
      for (int i = 0; i < nu; i++) d->ctrl[i] = 0.2 * (i % 3) - 0.1;
      ckSettings s = Settings(solver);
      if (variant == 2) s.lcp.split_impulse = !s.lcp.split_impulse;
      HandlePtr ck = Make(m, &s);
      for (int t = 0; t < steps; t++) ck_step(ck.get(), m, d.get());
      for (int i = 0; i < m->nv; i++) d->qvel[i] += 0.1 * std::sin(0.7 * i);
      ASSERT_GT(d->ncon, 0) << what;

      std::vector<double> dx(ndx), gx[2], gu[2];
      for (int i = 0; i < ndx; i++) dx[i] = std::sin(1.0 + i);
      for (int pass = 0; pass < 2; pass++) {
        SmoothTangent::reverse_solver_rne_ = pass == 0;
        const int calls = SmoothTangent::reverse_solver_calls_;
        gx[pass].assign(ndx, 0);
        gu[pass].assign(nu, 0);
        ASSERT_EQ(0, ck_transitionVJP(ck.get(), m, d.get(), dx.data(), nullptr, gx[pass].data(),
                                      gu[pass].data()))
            << what << ": " << ck_lastError(ck.get());
        // (the reverse pass ran in the first VJP only)
        EXPECT_EQ(pass == 0 ? calls + 1 : calls, SmoothTangent::reverse_solver_calls_) << what;
      }
      SmoothTangent::reverse_solver_rne_ = true;
      Jacobians jac(m);
      ASSERT_EQ(
          0, ck_transitionJac(ck.get(), m, d.get(), jac.A.data(), jac.B.data(), nullptr, nullptr))
          << what;
      std::vector<double> ex(ndx, 0.0), eu(nu, 0.0);
      for (int j = 0; j < ndx; j++) {
        for (int i = 0; i < ndx; i++) ex[j] += jac.A[i * ndx + j] * dx[i];
      }
      for (int j = 0; j < nu; j++) {
        for (int i = 0; i < ndx; i++) eu[j] += jac.B[i * nu + j] * dx[i];
      }
      const double e[4] = {RelativeError(gx[0], gx[1]), RelativeError(gu[0], gu[1]),
                           RelativeError(gx[0], ex), RelativeError(gu[0], eu)};
      std::printf("  %s: new/streamed %.1e %.1e, new/Jacobian %.1e %.1e\n", what.c_str(), e[0],
                  e[1], e[2], e[3]);
      for (double v : e) EXPECT_LT(v, 1e-10) << what;
    }
    for (int i = 0; i < m->nv; i++) m->dof_damping[i] = damping[i];
  }
};

TEST_F(SolverAdjointTest, LcpReversePassIsTheStreamedVjp) {
  ModelPtr m = LoadString(kScene);
  ASSERT_TRUE(m);
  Check(m.get(), ckSOL_LCP, 60, "scene");
}

TEST_F(SolverAdjointTest, LcpReversePassIsTheStreamedVjpOnTheHumanoid) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  Check(m.get(), ckSOL_LCP, 300, "humanoid");
}

TEST_F(SolverAdjointTest, LcpReversePassIsTheStreamedVjpOnHumanoid100) {
  // (a hundred trees and islands: dv_free's weight transposed once, a direction reads its tree)
  ModelPtr m = Load(MujocoModel("humanoid100/humanoid100.xml"));
  ASSERT_TRUE(m);
  Check(m.get(), ckSOL_LCP, 100, "humanoid100");
}

TEST_F(SolverAdjointTest, ComfreeReversePassIsTheStreamedVjp) {
  ModelPtr m = LoadString(kScene);
  ASSERT_TRUE(m);
  Check(m.get(), ckSOL_COMFREE, 60, "scene");
}

TEST_F(SolverAdjointTest, ComfreeReversePassIsTheStreamedVjpOnTheHumanoid) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  Check(m.get(), ckSOL_COMFREE, 300, "humanoid");
}

TEST_F(SolverAdjointTest, ComfreeReversePassIsTheStreamedVjpOnHumanoid100) {
  ModelPtr m = Load(MujocoModel("humanoid100/humanoid100.xml"));
  ASSERT_TRUE(m);
  Check(m.get(), ckSOL_COMFREE, 100, "humanoid100");
}

TEST_F(SolverAdjointTest, IpmReversePassIsTheStreamedVjp) {
  ModelPtr m = LoadString(kScene);
  ASSERT_TRUE(m);
  Check(m.get(), ckSOL_IPM, 60, "scene");
}

TEST_F(SolverAdjointTest, IpmReversePassIsTheStreamedVjpOnTheHumanoid) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  Check(m.get(), ckSOL_IPM, 300, "humanoid");
}

TEST_F(SolverAdjointTest, IpmReversePassIsTheStreamedVjpOnHumanoid100) {
  ModelPtr m = Load(MujocoModel("humanoid100/humanoid100.xml"));
  ASSERT_TRUE(m);
  Check(m.get(), ckSOL_IPM, 100, "humanoid100");
}

}  // namespace
}  // namespace contactkit::test
