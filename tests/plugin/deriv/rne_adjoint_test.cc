// Copyright 2026 The contactkit developers.
//
// The "mujoco" reverse mode's Newton-Euler terms from the smooth stage's reverse pass
// (SmoothTangent::PrepareRneAdjoint, smooth_adjoint.cc) instead of each direction's tangent
// vectors: the VJP is the one of the tangents (SmoothTangent::reverse_rne_ off) and dx' [A B] of
// ck_transitionJac, on a scene of free, ball, hinge and slide joints in contact (springs, a motor,
// limits, friction loss: MixedJointScene), on the humanoid and on humanoid100, under Euler with
// and without joint damping.
#include <cmath>
#include <string>
#include <vector>

#include "plugin/deriv/smooth_tangent.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

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
      ckSettings s = Settings(ckSOL_MUJOCO);
      HandlePtr ck = Make(m, &s);
      SettleAndNudge(ck.get(), m, d.get(), steps);
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
      std::vector<double> ex, eu;
      TransposedProducts(m, jac, dx, {}, &ex, &eu);
      EXPECT_LT(RelativeError(gx[0], gx[1]), 1e-10) << what;
      EXPECT_LT(RelativeError(gu[0], gu[1]), 1e-10) << what;
      EXPECT_LT(RelativeError(gx[0], ex), 1e-10) << what;
      EXPECT_LT(RelativeError(gu[0], eu), 1e-10) << what;
    }
    for (int i = 0; i < m->nv; i++) m->dof_damping[i] = damping[i];
  }
};

TEST_F(RneAdjointTest, ReversePassIsTheTangentsVjp) {
  ModelPtr m = LoadString(MixedJointScene());
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
