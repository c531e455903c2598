// Copyright 2026 The contactkit developers.
//
// The robot suite in CI: every Menagerie robot and MuJoCo example model present, with every
// solver, at its own timestep and 5x it, from its keyframe and from a drop, with held and random
// controls: no divergence, no drift at rest, penetration within the solver's bound, and the
// analytic Jacobian against centered finite differences. `ck-bench robots` runs the same cases
// longer and times them (tools/common/robot_suite.h holds the cases and the bounds).
#include "tools/common/robot_suite.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>

#include "support/fixture.h"

namespace contactkit::test {
namespace {

using tools::SuiteCase;
using tools::SuiteControl;
using tools::SuiteStart;

// a case kept out of CI because of an open defect; ck-bench robots shows it failing
struct Known {
  const char* model;
  int solver;
  int timestep_scale;  // 1 or 5; 0: both
  int control;         // kControlHeld or kControlRandom; -1: both (runs only)
};

// runs that diverge or break a bound
const Known kKnownRuns[] = {
    // MuJoCo's own solver: the Allegro's and LEAP's fingers blow up at 5h (|qvel| 1035, 1070)
    {"allegro", ckSOL_MUJOCO, 5, tools::kControlRandom},
    {"leap", ckSOL_MUJOCO, 5, tools::kControlRandom},
#if mjVERSION_HEADER < 300
    // on 2.2.2 at 5h with random controls: LEAP's fingers blow up under comfree and ipm (|qvel|
    // 1.55e3, 1.24e3), and under lcp press 54 mm into the cube until its variant's 100 contacts
    // overflow (MuJoCo's warning); all three hold on 3.17, and lcp at h on both versions. comfree
    // at h overflows them too since its coupled relaxation bound (31 mm deep, 26 before): the
    // bound caps the fingers' rows (solimp 0.999: every row binds) 1.8x harder than the trees'
    // sums, and the fingers, swung at up to 118 rad/s, press into each other's boxes (40-100
    // contacts over seeds 1-8 against 21-63); every looser bound tried broke LEAP at 5h or the
    // X2's landing (docs/solvers.md, comfree, "LEAP on 2.2.2 and the humanoid's landing")
    {"leap", ckSOL_COMFREE, 0, tools::kControlRandom},
    {"leap", ckSOL_IPM, 5, tools::kControlRandom},
    {"leap", ckSOL_LCP, 5, tools::kControlRandom},
#endif
    // comfree at 5h does not hold the Shadow hand's object after its drop (3.17, 2.2.2: 18, 16
    // mm; the object is knocked off the hand on landing); its keyframe at h and 5h and its drop at
    // h hold since the dry rolling stop (3.17: 0.28, 0.45, 0.24 mm; before 1.0, 1.1, 91). Drops
    // 0.4-2 mm higher or lower at h pass 8 (3.17) and 7 (2.2.2) of 11. docs/solvers.md (comfree,
    // "A dry rolling stop", "Rolling stops that share a turn") has the measurements
    {"shadow", ckSOL_COMFREE, 5, tools::kControlHeld},
    // comfree at 5h: the humanoid's drop lands 196 mm deep (bound 150; keyframe 154 mm; both
    // versions; MuJoCo's solver 63, 65 mm, the depth at detection): each foot lands on four
    // capsule ends whose forces, one row at a time, turn the foot about its soft ankle, so one
    // end digs in ahead of the body (with relax_limit 8 the pelvis stops in the landing step and
    // the foot still reaches 157 mm; docs/solvers.md, comfree, "the humanoid's landing"). Before
    // the coupled relaxation bound it sank 174, 241 mm and lay 147-169 mm deep, now 61-133 mm;
    // the X2 (275 mm, hopping) rests
    {"humanoid", ckSOL_COMFREE, 5, tools::kControlHeld},
};

// Jacobians that disagree with centered differences (relative error of A unless B is named)
const Known kKnownJacobians[] = {
    // LEAP under ipm at 5h without contacts: B 1.1e-4
    {"leap", ckSOL_IPM, 5, -1},
    // ipm with contacts at kappa_grad = kappa_tol: A1 0.0077, Shadow 0.036 (3.17). Kinks at the
    // reference's step, which ipm's step (the central point at kappa_tol) rounds off within 1e-8:
    // one-sided differences disagree at 1e-5, 1e-6 and 1e-7. Shadow: joint 17 rests at its limit
    // and a nudge away leaves the limit slack within the step (dv17/dq17 forward -0.66, -6.3, -46,
    // backward -500, -496, -458; analytic -161, between). A1: its legs' and base's columns bend
    // within 1e-6 (forward/backward -372/-464, -161/-295, -157/-153; centered at 1e-8 -154.386,
    // analytic -154.380)
    {"a1", ckSOL_IPM, 0, -1},
    {"shadow", ckSOL_IPM, 0, -1},
    // lcp on the A1 and the mug: their contacts rest exactly at the slop, a kink of the step, and
    // a tilt moves them to both sides of it at once, so that no one-sided difference matches the
    // analytic derivative's branch (A1 A 0.34, mug 0.69; a kink met in one direction alone is
    // checked against the one-sided difference and passes)
    {"a1", ckSOL_LCP, 0, -1},
    {"mug", ckSOL_LCP, 0, -1},
#if mjVERSION_HEADER < 300
    // ipm on MuJoCo 2.2.2's mug (A 3.3e-4 at h, 2.3e-4 at 5h): the mug rests flat, where the
    // plane-cylinder collider's distance bends within 1e-6 of tilt, so that the reference (centered
    // differences at 1e-6) is off: the worst column (tilt) agrees with differences at 1e-5 to 4e-7
    // and with those at 1e-6 to 5.5e-4
    {"mug", ckSOL_IPM, 0, -1},
    // on MuJoCo 2.2.2's contacts at h: the Allegro's cube (A 0.053, a kink met both ways) and the
    // Shadow hand (B 3.5e-4, cause not found); both pass on 3.x and at 5h
    {"allegro", ckSOL_LCP, 1, -1},
    {"shadow", ckSOL_LCP, 1, -1},
    // comfree on 2.2.2's Allegro at h: the state at 0.2 s (2 contacts) lies on a kink met both
    // ways (A 8.4e-4, one column one-sided; at 0.202 s 1.0e-3), the states 4 ms either side agree
    // to 2e-6 (0.196, 0.198, 0.204, 0.21 s)
    {"allegro", ckSOL_COMFREE, 1, -1},
#endif
};

template <size_t N>
bool IsKnown(const Known (&list)[N], const std::string& model, int solver, int scale, int control) {
  for (const Known& k : list) {
    if (model == k.model && solver == k.solver &&
        (!k.timestep_scale || k.timestep_scale == scale) &&
        (k.control < 0 || k.control == control)) {
      return true;
    }
  }
  return false;
}

class RobotSuiteTest : public MujocoTest,
                       public ::testing::WithParamInterface<std::tuple<std::string, int>> {};

TEST_P(RobotSuiteTest, StableAtRestWithinBoundsAndDifferentiable) {
  const std::string key = std::get<0>(GetParam());
  const int solver = std::get<1>(GetParam());
  if (!ck_solverAvailable(solver)) GTEST_SKIP() << ck_solverName(solver) << " is not built";
  std::vector<std::string> absent;
  tools::SuiteModel model;
  for (const tools::SuiteModel& s :
       tools::SuiteModels(CK_SHARED_MODELS, CK_MUJOCO_MODELS, &absent)) {
    if (s.key == key) model = s;
  }
  if (model.path.empty()) GTEST_SKIP() << key << " is absent on this machine";
  ModelPtr m = Load(model.path);
  ASSERT_TRUE(m);

  // the sanitizer leg (CK_TEST_QUICK) shortens random controls to 0.5 s; held ones need 2 s to
  // come to rest
  const bool quick = std::getenv("CK_TEST_QUICK") != nullptr;
  for (int scale : {1, 5}) {
    for (SuiteStart start : {tools::kStartKeyframe, tools::kStartDrop}) {
      for (SuiteControl control : {tools::kControlHeld, tools::kControlRandom}) {
        const std::string what = model.name + " " + ck_solverName(solver) + " h x" +
                                 std::to_string(scale) + " " + tools::SuiteStartName(start) + " " +
                                 tools::SuiteControlName(control);
        if (IsKnown(kKnownRuns, key, solver, scale, control)) continue;
        if (start == tools::kStartDrop && !tools::HasFreeBody(m.get()))
          continue;  // nothing to drop
        SuiteCase c;
        c.solver = solver;
        c.timestep_scale = scale;
        c.start = start;
        c.control = control;
        c.duration = quick && control == tools::kControlRandom ? 0.5 : 2;
        c.rest_window = 0.5;
        const tools::SuiteResult r = tools::RunSuiteCase(m.get(), model, c);
        ASSERT_TRUE(r.error.empty()) << what << ": " << r.error;
        // solves that end short of their tolerances warn; counted (r.inexact), not failures here
        TakeWarnings("iteration limit");
        EXPECT_EQ("", tools::SuiteFailure(r))
            << what << " (max |qvel| " << r.max_qvel << ", penetration " << r.max_penetration
            << " m, drift " << r.rest_drift << " m)";
        // held controls on a model that rests (but a hovering drone) measure a rest
        if (model.rests && control == tools::kControlHeld &&
            !(model.hovers && start == tools::kStartKeyframe)) {
          EXPECT_GE(r.rest_drift, 0) << what;
        }
        std::printf("%s: max |qvel| %.3g, penetration %.3g mm, drift %.3g mm, %d inexact\n",
                    what.c_str(), r.max_qvel, 1e3 * r.max_penetration, 1e3 * r.rest_drift,
                    r.inexact);
      }
    }
    if (IsKnown(kKnownJacobians, key, solver, scale, -1)) continue;
    const tools::SuiteJacobian j =
        tools::CheckSuiteJacobian(m.get(), solver, scale, tools::kSuiteJacobianSettle);
    const std::string what = model.name + " " + ck_solverName(solver) + " Jacobian at h x" +
                             std::to_string(scale) + ", " + std::to_string(j.ncon) + " contacts";
    ASSERT_TRUE(j.error.empty()) << what << ": " << j.error;
    std::printf("%s: error A %.3g, B %.3g (%d columns one-sided)\n", what.c_str(), j.error_A,
                j.error_B, j.onesided);
    EXPECT_EQ(0, j.method) << what << ": the analytic path fell back to differences";
    EXPECT_LT(j.error_A, tools::SuiteJacobianBound(solver)) << what;
    EXPECT_LT(j.error_B, tools::SuiteJacobianBound(solver)) << what;
  }
}

std::string Name(const ::testing::TestParamInfo<RobotSuiteTest::ParamType>& info) {
  return std::get<0>(info.param) + "_" + ck_solverName(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Robots, RobotSuiteTest,
                         ::testing::Combine(::testing::ValuesIn(tools::SuiteModelKeys()),
                                            ::testing::Values(ckSOL_MUJOCO, ckSOL_IPM,
                                                              ckSOL_COMFREE, ckSOL_LCP)),
                         Name);

}  // namespace
}  // namespace contactkit::test
