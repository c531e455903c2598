// Copyright 2026 The contactkit developers.
//
// The contacts of a plane with spheres and capsules take their point, frame and depth tangents in
// closed form (SmoothTangent::ClosedTangent) instead of two re-collisions per position
// direction: every solver's Jacobians equal those of the re-collisions
// (SmoothTangent::closed_form_ = false) to their rounding and match centered differences at
// least as well (mujoco and comfree; lcp's sliding here is not smooth at the differences' step).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "plugin/deriv/smooth_tangent.h"
#include "plugin/step/compat.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

// a capsule lying on the floor (both ends touch), one leaning on an end, a sphere, and a hinged
// arm whose capsule's end rests on the floor (its rotation is about the hinge, not a center)
constexpr char kCapsules[] = R"(
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.05"><freejoint/>
      <geom type="capsule" fromto="-0.2 0 0 0.2 0.05 0" size="0.05"/></body>
    <body pos="1 0 0.2" euler="0 40 20"><freejoint/>
      <geom type="capsule" fromto="0 0 -0.2 0 0 0.2" size="0.04"/></body>
    <body pos="-1 0 0.1"><freejoint/><geom type="sphere" size="0.1"/></body>
    <body pos="0 1 0.3">
      <joint type="hinge" axis="1 0.2 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.05 0.2 -0.27" size="0.03"/>
    </body>
  </worldbody>
</mujoco>)";

class ClosedContactJacTest : public MujocoTest {
 protected:
  void TearDown() override {
    SmoothTangent::closed_form_ = true;
    MujocoTest::TearDown();
  }
};

TEST_F(ClosedContactJacTest, PlaneCapsuleAndSphereJacobiansMatchTheRecollisions) {
  ModelPtr m = LoadString(kCapsules);
  ASSERT_TRUE(m);
  const mjOption opt = m->opt;
  const int ndx = 2 * m->nv + m->na;
  for (int solver = 0; solver < ckNSOLVER; solver++) {
    // (ipm reaches its iteration limit on this scene)
    if (!ck_solverAvailable(solver) || solver == ckSOL_IPM) continue;
    m->opt = opt;
    if (solver == ckSOL_MUJOCO) Tighten(m.get());  // (differences see its exact solution)
    ckSettings s = Settings(solver);
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    for (int t = 0; t < 100; t++) ck_step(ck.get(), m.get(), d.get());
    d->qvel[0] = 0.3;           // the lying capsule slides
    d->qvel[m->nv - 1] = -0.5;  // the arm's end drags on the floor
    const std::string what = ck_solverName(solver);

    // not trivially: capsule contacts whose frame turns with the axis (off the normal)
    int tilted = 0;
    for (int c = 0; c < d->ncon; c++) {
      const mjContact& con = d->contact[c];
      const int g2 = ContactGeom(&con, 1);
      if (m->geom_type[g2] != mjGEOM_CAPSULE) continue;
      const double* R = d->geom_xmat + 9 * g2;
      const double* n = con.frame;
      const double s0 = R[5] * n[2] - R[8] * n[1], s1 = R[8] * n[0] - R[2] * n[2],
                   s2 = R[2] * n[1] - R[5] * n[0];
      tilted += std::sqrt(s0 * s0 + s1 * s1 + s2 * s2) > 1e-3;
    }
    ASSERT_GE(tilted, 3) << what;

    Jacobians closed(m.get()), recollided(m.get()), fd(m.get());
    for (int pass = 0; pass < 2; pass++) {
      SmoothTangent::closed_form_ = pass == 0;
      Jacobians& jac = pass == 0 ? closed : recollided;
      ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr,
                                    nullptr))
          << what << ": " << ck_lastError(ck.get());
    }
    ck_transitionFD(ck.get(), m.get(), d.get(), 1e-6, 1, fd.A.data(), fd.B.data(), nullptr,
                    nullptr);

    // the same tangents up to the re-collisions' rounding (their differences at 1e-7), and not
    // the same bits (the closed form was taken)
    EXPECT_LT(RelativeError(closed.A, recollided.A), 1e-7)
        << what << "\n"
        << WorstEntries(m.get(), closed.A, recollided.A, ndx);
    EXPECT_LT(RelativeError(closed.B, recollided.B), 1e-7) << what;
    EXPECT_NE(0, std::memcmp(closed.A.data(), recollided.A.data(), sizeof(double) * ndx * ndx))
        << what;
    // against centered differences at least as close as the re-collisions, where the step is
    // smooth (lcp's sliding contacts switch within the differences' steps)
    const double err = RelativeError(closed.A, fd.A), before = RelativeError(recollided.A, fd.A);
    EXPECT_LE(err, 1.01 * before + 1e-12) << what;
    if (solver != ckSOL_LCP) {
      EXPECT_LT(err, 1e-5) << what;
    }
  }
}

}  // namespace
}  // namespace contactkit::test
