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
    SmoothTangent::reverse_solver_rows_ = true;
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

  // the same with the rows' terms from the solver's row weights and from the row tangents
  void CheckRows(mjModel* m, int solver, int steps, const std::string& name) {
    if (!ck_solverAvailable(solver)) GTEST_SKIP() << "solver not in this build";
    CompareReverse(
        m, solver, steps, name, 3, [](bool on) { SmoothTangent::reverse_solver_rows_ = on; },
        [] { return SmoothTangent::reverse_solver_rows_calls_; });
  }

  // Check (rows: CheckRows) on scene 0, the mixed-joint scene (limits as asked), 1, the humanoid,
  // or 2, humanoid100 (a hundred trees and islands: a direction reads its tree)
  void OnScene(int scene, int solver, bool limits, bool rows) {
    static const char* const kName[3] = {"scene", "humanoid", "humanoid100"};
    static const int kSteps[3] = {60, 300, 100};
    ModelPtr m = scene == 0   ? LoadString(MixedJointScene("pyramidal", limits))
                 : scene == 1 ? Load(MujocoModel("humanoid/humanoid.xml"))
                              : Load(MujocoModel("humanoid100/humanoid100.xml"));
    ASSERT_TRUE(m);
    if (rows) {
      CheckRows(m.get(), solver, kSteps[scene], kName[scene]);
    } else {
      Check(m.get(), solver, kSteps[scene], kName[scene]);
    }
  }
};

TEST_F(SolverAdjointTest, LcpReversePassIsTheStreamedVjp) { OnScene(0, ckSOL_LCP, false, false); }

TEST_F(SolverAdjointTest, LcpReversePassIsTheStreamedVjpOnTheHumanoid) {
  OnScene(1, ckSOL_LCP, false, false);
}

TEST_F(SolverAdjointTest, LcpReversePassIsTheStreamedVjpOnHumanoid100) {
  OnScene(2, ckSOL_LCP, false, false);
}

TEST_F(SolverAdjointTest, ComfreeReversePassIsTheStreamedVjp) {
  OnScene(0, ckSOL_COMFREE, false, false);
}

TEST_F(SolverAdjointTest, ComfreeReversePassIsTheStreamedVjpOnTheHumanoid) {
  OnScene(1, ckSOL_COMFREE, false, false);
}

TEST_F(SolverAdjointTest, ComfreeReversePassIsTheStreamedVjpOnHumanoid100) {
  OnScene(2, ckSOL_COMFREE, false, false);
}

TEST_F(SolverAdjointTest, IpmReversePassIsTheStreamedVjp) { OnScene(0, ckSOL_IPM, false, false); }

TEST_F(SolverAdjointTest, IpmReversePassIsTheStreamedVjpOnTheHumanoid) {
  OnScene(1, ckSOL_IPM, false, false);
}

TEST_F(SolverAdjointTest, IpmReversePassIsTheStreamedVjpOnHumanoid100) {
  OnScene(2, ckSOL_IPM, false, false);
}

// the rows' weights (PrepareSolverRowAdjoint): the plain rows' gaps (limits; friction loss
// has none) and every contact pair's geometry per direction contracted with them, on the scene
// with limits and friction loss (lcp: without), the humanoid and humanoid100
// (plane, capsule, box, ellipsoid and cylinder pairs between trees and within one); comfree's
// anchors read the frame tangents the weights' pass writes
class SolverRowAdjointTest : public SolverAdjointTest {
 protected:
  // (lcp's hard limits hold the motors' joints: B zero, the scene without them)
  void CheckAll(int solver) {
    for (int scene = 0; scene < 3; scene++) OnScene(scene, solver, solver != ckSOL_LCP, true);
  }
};

TEST_F(SolverRowAdjointTest, LcpRowWeightsAreTheRowTangents) { CheckAll(ckSOL_LCP); }

TEST_F(SolverRowAdjointTest, LcpRowWeightsWithSoftAndRestitutionRows) {
  // contacts from distance (MuJoCo's soft rows in the LCP: weights of d vel, d aref and d R)
  // and restitution (d vel's of an approaching contact): the contacts' d vel = d J v folded in
  tweak_ = [](ckSettings* s) {
    s->deriv.cfd_width = 0.1;
    s->lcp.restitution = 0.5;
    s->lcp.restitution_threshold = 0;
  };
  ModelPtr m = LoadString(MixedJointScene("pyramidal", false));
  ASSERT_TRUE(m);
  CheckRows(m.get(), ckSOL_LCP, 60, "scene");
}

TEST_F(SolverRowAdjointTest, ComfreeRowWeightsAreTheRowTangents) { CheckAll(ckSOL_COMFREE); }

TEST_F(SolverRowAdjointTest, IpmRowWeightsAreTheRowTangents) { CheckAll(ckSOL_IPM); }

}  // namespace
}  // namespace contactkit::test
