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

class RneAdjointTest : public ReversePathTest {
 protected:
  void TearDown() override {
    SmoothTangent::reverse_rne_ = true;
    MujocoTest::TearDown();
  }

  // the VJP with and without the reverse pass, with and without joint damping
  void Check(mjModel* m, int steps, const std::string& name) {
    CompareReverse(
        m, ckSOL_MUJOCO, steps, name, 2, [](bool on) { SmoothTangent::reverse_rne_ = on; },
        [] { return SmoothTangent::reverse_rne_calls_; });
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
