// Copyright 2026 The contactkit developers.
//
// A solver's reverse mode (Derivative::SolverAdjointDirections) with its Newton-Euler terms and its
// weight of dv_free transposed (PrepareSolverRne, SmoothTangent::PrepareSolverRneAdjoint) instead
// of each direction's dqfrc_smooth and dv_free: the VJP is the streamed one
// (SmoothTangent::reverse_solver_rne_ off) and dx' [A B] of ck_transitionJac, on a scene of free,
// ball, hinge and slide joints in contact (MixedJointScene without limits, whose hard rows would
// hold the motors' joints: B zero), on the humanoid and on humanoid100,
// under Euler with and without joint damping, with and without lcp's split impulse.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "plugin/deriv/smooth_tangent.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

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
      ckSettings s = Settings(solver);
      if (variant == 2) s.lcp.split_impulse = !s.lcp.split_impulse;
      HandlePtr ck = Make(m, &s);
      SettleAndNudge(ck.get(), m, d.get(), steps);
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
      std::vector<double> ex, eu;
      TransposedProducts(m, jac, dx, {}, &ex, &eu);
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
  ModelPtr m = LoadString(MixedJointScene("pyramidal", false));
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
  ModelPtr m = LoadString(MixedJointScene("pyramidal", false));
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
  ModelPtr m = LoadString(MixedJointScene("pyramidal", false));
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
