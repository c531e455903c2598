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

class SolverAdjointTest : public ReversePathTest {
 protected:
  void TearDown() override {
    SmoothTangent::reverse_solver_rne_ = true;
    MujocoTest::TearDown();
  }

  // the VJP with and without the reverse pass: undamped, damped, damped with lcp's split impulse
  // toggled (comfree, ipm: as damped)
  void Check(mjModel* m, int solver, int steps, const std::string& name) {
    if (!ck_solverAvailable(solver)) GTEST_SKIP() << "solver not in this build";
    CompareReverse(
        m, solver, steps, name, 3, [](bool on) { SmoothTangent::reverse_solver_rne_ = on; },
        [] { return SmoothTangent::reverse_solver_calls_; });
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
