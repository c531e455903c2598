// Copyright 2026 The contactkit developers.
//
// The "mujoco" reverse mode's Newton-Euler terms from the smooth stage's reverse pass
// (SmoothTangent::PrepareRneAdjoint, smooth_adjoint.cc) instead of each direction's tangent
// vectors: the VJP is the one of the tangents (SmoothTangent::reverse_rne_ off) and dx' [A B] of
// ck_transitionJac, on a scene of free, ball, hinge (with a spring and a motor) and slide joints
// in contact, on the humanoid and on humanoid100, under Euler with and without joint damping.
#include <cmath>
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

class RneAdjointTest : public MujocoTest {
 protected:
  void TearDown() override {
    SmoothTangent::reverse_rne_ = true;
    MujocoTest::TearDown();
  }

  // the VJP with and without the reverse pass and dx' [A B] at a settled state
  void Check(mjModel* m, int steps, const std::string& name) {
    const std::vector<double> damping(m->dof_damping, m->dof_damping + m->nv);
    const int ndx = 2 * m->nv + m->na, nu = m->nu;
    for (int damped = 0; damped < 2; damped++) {
      for (int i = 0; i < m->nv; i++) m->dof_damping[i] = damped ? damping[i] : 0;
      const std::string what = name + " damped " + std::to_string(damped);
      DataPtr d(mj_makeData(m));
      for (int i = 0; i < nu; i++) d->ctrl[i] = 0.2 * (i % 3) - 0.1;
      ckSettings s = Settings(ckSOL_MUJOCO);
      HandlePtr ck = Make(m, &s);
      for (int t = 0; t < steps; t++) ck_step(ck.get(), m, d.get());
      for (int i = 0; i < m->nv; i++) d->qvel[i] += 0.1 * std::sin(0.7 * i);
      ASSERT_GT(d->ncon, 0) << what;

      std::vector<double> dx(ndx), gx[2], gu[2];
      for (int i = 0; i < ndx; i++) dx[i] = std::sin(1.0 + i);
      for (int pass = 0; pass < 2; pass++) {
        SmoothTangent::reverse_rne_ = pass == 0;
        const int calls = SmoothTangent::reverse_rne_calls_;
        gx[pass].assign(ndx, 0);
        gu[pass].assign(nu, 0);
        ASSERT_EQ(0, ck_transitionVJP(ck.get(), m, d.get(), dx.data(), nullptr, gx[pass].data(),
                                      gu[pass].data()))
            << what << ": " << ck_lastError(ck.get());
        // (the reverse pass ran in the first VJP only)
        EXPECT_EQ(pass == 0 ? calls + 1 : calls, SmoothTangent::reverse_rne_calls_) << what;
      }
      SmoothTangent::reverse_rne_ = true;
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
      EXPECT_LT(RelativeError(gx[0], gx[1]), 1e-10) << what;
      EXPECT_LT(RelativeError(gu[0], gu[1]), 1e-10) << what;
      EXPECT_LT(RelativeError(gx[0], ex), 1e-10) << what;
      EXPECT_LT(RelativeError(gu[0], eu), 1e-10) << what;
    }
    for (int i = 0; i < m->nv; i++) m->dof_damping[i] = damping[i];
  }
};

TEST_F(RneAdjointTest, ReversePassIsTheTangentsVjp) {
  ModelPtr m = LoadString(kScene);
  ASSERT_TRUE(m);
  Check(m.get(), 60, "scene");
}

TEST_F(RneAdjointTest, ReversePassIsTheTangentsVjpOnTheHumanoid) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  Check(m.get(), 300, "humanoid");
}

TEST_F(RneAdjointTest, ReversePassIsTheTangentsVjpOnHumanoid100) {
  // (a hundred trees and islands: the sums run over every tree, a direction reads its own)
  ModelPtr m = Load(MujocoModel("humanoid100/humanoid100.xml"));
  ASSERT_TRUE(m);
  Check(m.get(), 100, "humanoid100");
}

}  // namespace
}  // namespace contactkit::test
