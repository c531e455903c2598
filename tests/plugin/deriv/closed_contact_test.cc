// Copyright 2026 The contactkit developers.
//
// The contacts of a plane with spheres, capsules and boxes take their point, frame and depth
// tangents in closed form (SmoothTangent::ClosedTangent) instead of two re-collisions per position
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

// boxes on the floor: one flat (four corners), one on an edge (two), one on a hinged arm resting
// on a corner; a tilted ellipsoid and one on a hinged arm (their support points roll)
constexpr char kBoxes[] = R"(
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.2 0.1 0.1"/></body>
    <body pos="1 0 0.15" euler="40 0 10"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="0 1 0.3">
      <joint type="hinge" axis="1 0.2 0" damping="0.1"/>
      <geom type="box" pos="0.05 0.1 -0.15" euler="30 20 10" size="0.05 0.08 0.1"/>
    </body>
    <body pos="2 0 0.1" euler="20 30 0"><freejoint/>
      <geom type="ellipsoid" size="0.2 0.1 0.06"/></body>
    <body pos="2 1 0.3">
      <joint type="hinge" axis="1 0.2 0" damping="0.1"/>
      <geom type="ellipsoid" pos="0.05 0.1 -0.18" euler="30 20 10" size="0.05 0.08 0.13"/>
    </body>
  </worldbody>
</mujoco>)";

// cylinders on the floor: one lying on its side (two rim points), one leaning on its rim, one
// nearly flat and pressed in (a rim point and the two side points), one on a hinged arm dragging
// its rim (mjc_PlaneCylinder's points slide along the rim as the axis tilts)
constexpr char kCylinders[] = R"(
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.1" euler="90 10 0"><freejoint/>
      <geom type="cylinder" size="0.1 0.2"/></body>
    <body pos="1 0 0.2" euler="35 20 0"><freejoint/>
      <geom type="cylinder" size="0.1 0.15"/></body>
    <body pos="-1 0 0.05" euler="1.5 1 0"><freejoint/>
      <geom type="cylinder" size="0.15 0.05"/></body>
    <body pos="0 1 0.3">
      <joint type="hinge" axis="1 0.2 0" damping="0.1"/>
      <geom type="cylinder" pos="0.05 0.1 -0.2" euler="30 20 10" size="0.06 0.1"/>
    </body>
  </worldbody>
</mujoco>)";

class ClosedContactJacTest : public MujocoTest {
 protected:
  void TearDown() override {
    SmoothTangent::closed_form_ = true;
    MujocoTest::TearDown();
  }

  long closed_calls_ = 0;  // re-collisions in the Jacobians with the closed forms

  // m after 100 steps of each solver (but ipm, which reaches its iteration limit on these
  // scenes), nudge(m, d) applied, then check(m, d, what) and A and B with the closed forms and
  // with the re-collisions: within their rounding, not bit-equal, against centred differences at
  // least as close as the re-collisions (and within 1e-5 but for lcp, whose sliding contacts
  // switch within the differences' steps)
  template <class Nudge, class Check>
  void CompareWithRecollisions(mjModel* m, Nudge nudge, Check check) {
    const mjOption opt = m->opt;
    const int ndx = 2 * m->nv + m->na;
    for (int solver = 0; solver < ckNSOLVER; solver++) {
      if (!ck_solverAvailable(solver) || solver == ckSOL_IPM) continue;
      m->opt = opt;
      if (solver == ckSOL_MUJOCO) Tighten(m);  // (differences see its exact solution)
      ckSettings s = Settings(solver);
      HandlePtr ck = Make(m, &s);
      DataPtr d(mj_makeData(m));
      for (int t = 0; t < 100; t++) ck_step(ck.get(), m, d.get());
      nudge(m, d.get());
      const std::string what = ck_solverName(solver);
      check(m, d.get(), what);

      Jacobians closed(m), recollided(m), fd(m);
      for (int pass = 0; pass < 2; pass++) {
        SmoothTangent::closed_form_ = pass == 0;
        Jacobians& jac = pass == 0 ? closed : recollided;
        const long calls = SmoothTangent::recollisions_;
        ASSERT_EQ(
            0, ck_transitionJac(ck.get(), m, d.get(), jac.A.data(), jac.B.data(), nullptr, nullptr))
            << what << ": " << ck_lastError(ck.get());
        if (pass == 0) closed_calls_ += SmoothTangent::recollisions_ - calls;
      }
      SmoothTangent::closed_form_ = true;
      ck_transitionFD(ck.get(), m, d.get(), 1e-6, 1, fd.A.data(), fd.B.data(), nullptr, nullptr);

      // the same tangents up to the re-collisions' rounding (their differences at 1e-7), and not
      // the same bits (the closed form was taken)
      EXPECT_LT(RelativeError(closed.A, recollided.A), 1e-7)
          << what << "\n"
          << WorstEntries(m, closed.A, recollided.A, ndx);
      EXPECT_LT(RelativeError(closed.B, recollided.B), 1e-7) << what;
      EXPECT_NE(0, std::memcmp(closed.A.data(), recollided.A.data(), sizeof(double) * ndx * ndx))
          << what;
      const double err = RelativeError(closed.A, fd.A), before = RelativeError(recollided.A, fd.A);
      EXPECT_LE(err, 1.01 * before + 1e-12) << what;
      if (solver != ckSOL_LCP) {
        EXPECT_LT(err, 1e-5) << what;
      }
    }
  }
};

TEST_F(ClosedContactJacTest, PlaneCapsuleAndSphereJacobiansMatchTheRecollisions) {
  ModelPtr m = LoadString(kCapsules);
  ASSERT_TRUE(m);
  auto nudge = [](const mjModel* m, mjData* d) {
    d->qvel[0] = 0.3;           // the lying capsule slides
    d->qvel[m->nv - 1] = -0.5;  // the arm's end drags on the floor
  };
  // not trivially: capsule contacts whose frame turns with the axis (off the normal)
  auto tilted = [](const mjModel* m, const mjData* d, const std::string& what) {
    int n = 0;
    for (int c = 0; c < d->ncon; c++) {
      const mjContact& con = d->contact[c];
      const int g2 = ContactGeom(&con, 1);
      if (m->geom_type[g2] != mjGEOM_CAPSULE) continue;
      const double* R = d->geom_xmat + 9 * g2;
      const double* n0 = con.frame;
      const double s0 = R[5] * n0[2] - R[8] * n0[1], s1 = R[8] * n0[0] - R[2] * n0[2],
                   s2 = R[2] * n0[1] - R[5] * n0[0];
      n += std::sqrt(s0 * s0 + s1 * s1 + s2 * s2) > 1e-3;
    }
    ASSERT_GE(n, 3) << what;
  };
  CompareWithRecollisions(m.get(), nudge, tilted);
}

TEST_F(ClosedContactJacTest, PlaneBoxAndEllipsoidJacobiansMatchTheRecollisions) {
  ModelPtr m = LoadString(kBoxes);
  ASSERT_TRUE(m);
  auto nudge = [](const mjModel* m, mjData* d) {
    d->qvel[0] = 0.3;          // the flat box slides
    d->qvel[11] = 0.4;         // the edge one rolls
    d->qvel[12] = -0.5;        // the arm's corner drags on the floor
    d->qvel[16] = 0.3;         // the free ellipsoid rolls
    d->qvel[m->nv - 1] = 0.5;  // the other arm's ellipsoid rolls and drags
  };
  // every box and ellipsoid touches, each contact a closed one (no re-collision left)
  auto touching = [](const mjModel* m, const mjData* d, const std::string& what) {
    int boxes = 0, ellipsoids = 0;
    for (int c = 0; c < d->ncon; c++) {
      const int type = m->geom_type[ContactGeom(d->contact + c, 1)];
      boxes += type == mjGEOM_BOX;
      ellipsoids += type == mjGEOM_ELLIPSOID;
    }
    ASSERT_GE(boxes, 6) << what;
    ASSERT_EQ(2, ellipsoids) << what;
  };
  CompareWithRecollisions(m.get(), nudge, touching);
  EXPECT_EQ(0, closed_calls_);
}

// kCylinders' state: the free ones sliding and rolling, the flat one tilted by 0.02 about x
// and pressed 6 mm in (its side points touch), the arm's cylinder dragging its rim
void NudgeCylinders(const mjModel* m, mjData* d) {
  d->qvel[0] = 0.3;
  d->qvel[9] = 0.4;
  const double tilt = 0.02, r = 0.15, half = 0.05;
  d->qpos[16] = half * std::cos(tilt) + r * std::sin(tilt) - 0.006;
  d->qpos[17] = std::cos(tilt / 2);
  d->qpos[18] = std::sin(tilt / 2);
  d->qpos[19] = d->qpos[20] = 0;
  d->qvel[15] = 0.2;
  d->qvel[m->nv - 1] = 0.5;
}

TEST_F(ClosedContactJacTest, PlaneCylinderJacobiansMatchTheRecollisions) {
  ModelPtr m = LoadString(kCylinders);
  ASSERT_TRUE(m);
  // every cylinder touches, the flat one at three points, each contact a closed one
  auto touching = [](const mjModel* m, const mjData* d, const std::string& what) {
    int n = 0, flat = 0;
    for (int c = 0; c < d->ncon; c++) {
      const int g = ContactGeom(d->contact + c, 1);
      n += m->geom_type[g] == mjGEOM_CYLINDER;
      flat += g == 3;
    }
    ASSERT_GE(n, 7) << what;
    ASSERT_EQ(3, flat) << what;
  };
  CompareWithRecollisions(m.get(), NudgeCylinders, touching);
  EXPECT_EQ(0, closed_calls_);
}

// the "mujoco" VJP takes the cylinders' contacts in reverse (ClosedContactGradient through
// ClosedTangent's six unit twists) and every solver's VJP stays dx' [A B]
TEST_F(ClosedContactJacTest, PlaneCylinderVjpEqualsTheTransposedJacobians) {
  ModelPtr m = LoadString(kCylinders);
  ASSERT_TRUE(m);
  const int ndx = 2 * m->nv + m->na;
  for (int solver = 0; solver < ckNSOLVER; solver++) {
    if (!ck_solverAvailable(solver) || solver == ckSOL_IPM) continue;
    ckSettings s = Settings(solver);
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    for (int t = 0; t < 100; t++) ck_step(ck.get(), m.get(), d.get());
    NudgeCylinders(m.get(), d.get());
    const std::string what = ck_solverName(solver);
    std::vector<double> dx(ndx), gx(ndx), gu(m->nu);
    for (int i = 0; i < ndx; i++) dx[i] = std::sin(1.0 + i);
    const int reversed = SmoothTangent::reversed_contacts_;
    ASSERT_EQ(
        0, ck_transitionVJP(ck.get(), m.get(), d.get(), dx.data(), nullptr, gx.data(), gu.data()))
        << what << ": " << ck_lastError(ck.get());
    if (solver == ckSOL_MUJOCO) {
      EXPECT_GE(SmoothTangent::reversed_contacts_ - reversed, 7) << what;
    }
    std::vector<double> ex, eu;
    JacobianProducts(ck.get(), m.get(), d.get(), dx, &ex, &eu);
    EXPECT_LT(RelativeError(gx, ex), 1e-10) << what;
  }
}

}  // namespace
}  // namespace contactkit::test
