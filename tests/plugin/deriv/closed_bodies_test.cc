// Copyright 2026 The contactkit developers.
//
// The contacts of two spheres or capsules (sphere-sphere, sphere-capsule, capsule-capsule) on
// moving bodies take their point, frame and depth tangents in closed form
// (SmoothTangent::BodyPairTangent) instead of two re-collisions per position direction: every
// solver's Jacobians equal those of the re-collisions (SmoothTangent::closed_bodies_ = false) to
// their rounding and match centred differences at least as well, near-parallel capsules are
// re-collided, and the VJP equals dx' [A B].
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "plugin/deriv/smooth_tangent.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

// no gravity: the pairs overlap from the start and keep touching for the few steps taken
constexpr char kHead[] = R"(
<mujoco>
  <option timestep="0.002" gravity="0 0 0"/>
  <worldbody>)";
constexpr char kTail[] = R"(
  </worldbody>
</mujoco>)";

// two free spheres; a sphere on a hinged arm against a free sphere (turning about the hinge)
constexpr char kSpheres[] = R"(
    <body pos="0 0 1"><freejoint/><geom type="sphere" size="0.1"/></body>
    <body pos="0.15 0.05 1.03"><freejoint/><geom type="sphere" size="0.08"/></body>
    <body pos="2 0 1">
      <joint type="hinge" axis="0.2 1 0" damping="0.1"/>
      <geom type="sphere" pos="0.3 0 0.1" size="0.06"/>
    </body>
    <body pos="2.38 0.02 1.12"><freejoint/><geom type="sphere" size="0.05"/></body>)";

// a free capsule with a sphere on its side (free parameter) and one at its end (clipped); a
// hinged capsule's side against a free sphere
constexpr char kSphereCapsule[] = R"(
    <body pos="0 0 1" euler="10 20 30"><freejoint/>
      <geom type="capsule" fromto="-0.2 0 0 0.2 0 0" size="0.05"/></body>
    <body pos="0.02 0.1 1.04"><freejoint/><geom type="sphere" size="0.08"/></body>
    <body pos="-0.244 -0.143 1.0615"><freejoint/><geom type="sphere" size="0.07"/></body>
    <body pos="2 0 1">
      <joint type="hinge" axis="1 0.3 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.1 0.3 0" size="0.04"/>
    </body>
    <body pos="2.05 0.2 0.93"><freejoint/><geom type="sphere" size="0.05"/></body>)";

// crossing capsules (both parameters free), an end on a side (one clipped), ends on ends (both)
constexpr char kCapsules[] = R"(
    <body pos="0 0 1"><freejoint/>
      <geom type="capsule" fromto="-0.2 0 0 0.2 0 0" size="0.05"/></body>
    <body pos="0.05 0 1.08" euler="0 10 80"><freejoint/>
      <geom type="capsule" fromto="-0.2 0 0 0.2 0 0" size="0.05"/></body>
    <body pos="-0.12 -0.05 1.27" euler="15 10 0"><freejoint/>
      <geom type="capsule" fromto="0 0 -0.2 0 0 0.2" size="0.04"/></body>
    <body pos="2 0 1" euler="0 0 20"><freejoint/>
      <geom type="capsule" fromto="-0.2 0 0 0.2 0 0" size="0.05"/></body>
    <body pos="2.218 0.2812 1.17" euler="30 40 0"><freejoint/>
      <geom type="capsule" fromto="0 -0.2 0 0 0.2 0" size="0.05"/></body>)";

// capsules 1e-4 rad off parallel (re-collided) and 0.1 rad off (closed form)
constexpr char kNearParallel[] = R"(
    <body pos="0 0 1"><freejoint/>
      <geom type="capsule" fromto="-0.2 0 0 0.2 0 0" size="0.05"/></body>
    <body pos="0.1 0.02 1.09" euler="0 0 0.0057"><freejoint/>
      <geom type="capsule" fromto="-0.2 0 0 0.2 0 0" size="0.05"/></body>
    <body pos="2 0 1"><freejoint/>
      <geom type="capsule" fromto="-0.2 0 0 0.2 0 0" size="0.05"/></body>
    <body pos="2.1 0.02 1.09" euler="0 3 5.7"><freejoint/>
      <geom type="capsule" fromto="-0.2 0 0 0.2 0 0" size="0.05"/></body>)";

// two free boxes, a face on a face (a patch of clipped points); a capsule on a free box
constexpr char kBoxes[] = R"(
    <body pos="0 0 1"><freejoint/><geom type="box" size="0.2 0.15 0.1"/></body>
    <body pos="0.05 0.02 1.195" euler="0 0 25"><freejoint/><geom type="box" size="0.1 0.1 0.1"/>
    </body>
    <body pos="2 0 1"><freejoint/><geom type="box" size="0.2 0.2 0.1"/></body>
    <body pos="2.05 0 1.145" euler="0 8 30"><freejoint/>
      <geom type="capsule" fromto="-0.15 0 0 0.15 0 0" size="0.05"/></body>)";

// MuJoCo's convex collider (3.x: GJK and EPA; 2.2.2: libccd's MPR): two ellipsoids, two crossed
// cylinders, a cylinder's rim on a box
constexpr char kConvex[] = R"(
    <body pos="0 0 1"><freejoint/><geom type="ellipsoid" size="0.2 0.1 0.08"/></body>
    <body pos="0.05 0.03 1.15" euler="20 10 0"><freejoint/>
      <geom type="ellipsoid" size="0.1 0.12 0.08"/></body>
    <body pos="2 0 1" euler="90 0 0"><freejoint/><geom type="cylinder" size="0.08 0.2"/></body>
    <body pos="2.02 0 1.155" euler="0 90 20"><freejoint/><geom type="cylinder" size="0.08 0.2"/>
    </body>
    <body pos="4 0 1"><freejoint/><geom type="box" size="0.2 0.2 0.1"/></body>
    <body pos="4.03 0 1.18" euler="20 10 0"><freejoint/><geom type="cylinder" size="0.1 0.05"/>
    </body>)";

// hinged limbs (SmoothTangent::TwistTangent's twists): a free torso's two-link arm, its capsule
// tip on a static box (the tip's nine dofs against unit twists of the tip), the same arm on a
// box at the end of a two-hinge arm (nine and two dofs), a two-hinge arm's ellipsoid under a
// free ellipsoid (the free body's six dofs its twists, the hinges' dofs asking first)
constexpr char kLimbs[] = R"(
    <geom type="box" pos="0 0 0.37" size="0.2 0.2 0.05"/>
    <body pos="0 0 1"><freejoint/><geom type="sphere" size="0.1"/>
      <body><joint type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
        <body pos="0 0 -0.3"><joint type="hinge" axis="0 1 0"/><joint type="hinge" axis="1 0 0"/>
          <geom type="capsule" fromto="0 0 0 0.05 0 -0.25" size="0.04"/></body></body></body>
    <body pos="2 0 1"><freejoint/><geom type="sphere" size="0.1"/>
      <body><joint type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
        <body pos="0 0 -0.3"><joint type="hinge" axis="0 1 0"/><joint type="hinge" axis="1 0 0"/>
          <geom type="capsule" fromto="0 0 0 0.05 0 -0.25" size="0.04"/></body></body></body>
    <body pos="2 0 0.3"><joint type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02"/>
      <body><joint type="hinge" axis="1 0 0"/>
        <geom type="box" pos="0.02 0 0.08" size="0.1 0.1 0.05" euler="5 3 0"/></body></body>
    <body pos="4 0 0.3"><joint type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02"/>
      <body><joint type="hinge" axis="1 0 0"/>
        <geom type="ellipsoid" pos="0 0 0.1" size="0.1 0.08 0.06"/></body></body>
    <body pos="4.02 0.01 0.51" euler="10 5 0"><freejoint/>
      <geom type="ellipsoid" size="0.1 0.08 0.06"/></body>)";

struct Scene {
  const char* name;
  const char* bodies;
  int contacts;   // least contacts at the Jacobian's state
  bool fallback;  // a pair is re-collided with the closed forms on
  bool* hook;     // the closed forms' switch
};
constexpr Scene kScenes[] = {
    {"spheres", kSpheres, 2, false, &SmoothTangent::closed_bodies_},
    {"sphere-capsule", kSphereCapsule, 3, false, &SmoothTangent::closed_bodies_},
    {"capsules", kCapsules, 3, false, &SmoothTangent::closed_bodies_},
    {"near-parallel", kNearParallel, 2, true, &SmoothTangent::closed_bodies_}};
// pairs re-collided along one side's six twists, every direction's tangents from them and the
// common motion (SmoothTangent::relative_pairs_: re-collisions remain, fewer)
constexpr Scene kRelativeScenes[] = {{"boxes", kBoxes, 5, true, &SmoothTangent::relative_pairs_},
                                     {"convex", kConvex, 3, true, &SmoothTangent::relative_pairs_},
                                     {"limbs", kLimbs, 3, true, &SmoothTangent::relative_pairs_}};

// how close A and B with the closed forms are to the re-collisions'
double Agreement(const Scene& scene) {
  return scene.hook == &SmoothTangent::relative_pairs_ ? 1e-6 : 1e-7;
}

class ClosedBodiesTest : public MujocoTest {
 protected:
  void TearDown() override {
    SmoothTangent::closed_bodies_ = SmoothTangent::relative_pairs_ = true;
    SmoothTangent::reverse_twists_ = true;
    MujocoTest::TearDown();
  }

  // the scene after a few steps of solver, velocities set (every body moves and turns), forward
  ModelPtr Prepare(const Scene& scene, int solver, HandlePtr* ck, DataPtr* d) {
    ModelPtr m = LoadString(std::string(kHead) + scene.bodies + kTail);
    if (!m) return m;
    if (solver == ckSOL_MUJOCO) Tighten(m.get());  // (differences see its exact solution)
    ckSettings s = Settings(solver);
    *ck = Make(m.get(), &s);
    d->reset(mj_makeData(m.get()));
    for (int i = 0; i < m->nv; i++) (*d)->qvel[i] = 0.05 * std::sin(1.0 + 1.7 * i);
    // (lcp's impulses part the pairs in a step: its state is the overlapping one)
    const int steps = solver == ckSOL_LCP ? 0 : 5;
    for (int t = 0; t < steps; t++) ck_step(ck->get(), m.get(), d->get());
    mj_forward(m.get(), d->get());
    return m;
  }

  // A and B with the closed forms and with the re-collisions, and centred differences
  void CheckJacobians(const Scene& scene) {
    for (int solver = 0; solver < ckNSOLVER; solver++) {
      if (!ck_solverAvailable(solver)) continue;
      const std::string what = std::string(scene.name) + ", " + ck_solverName(solver);
      HandlePtr ck;
      DataPtr d;
      ModelPtr m = Prepare(scene, solver, &ck, &d);
      ASSERT_TRUE(m) << what;
      ASSERT_GE(d->ncon, scene.contacts) << what;
      const int ndx = 2 * m->nv + m->na;

      Jacobians closed(m.get()), recollided(m.get()), fd(m.get());
      long calls[2];
      for (int pass = 0; pass < 2; pass++) {
        *scene.hook = pass == 0;
        Jacobians& jac = pass == 0 ? closed : recollided;
        const long before = SmoothTangent::recollisions_;
        ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(),
                                      nullptr, nullptr))
            << what << ": " << ck_lastError(ck.get());
        calls[pass] = SmoothTangent::recollisions_ - before;
      }
      *scene.hook = true;
      ck_transitionFD(ck.get(), m.get(), d.get(), 1e-6, 1, fd.A.data(), fd.B.data(), nullptr,
                      nullptr);

      // the closed forms taken (no re-collision but the near-parallel pair's), not the same bits
      EXPECT_GT(calls[1], 0) << what;
      if (scene.fallback) {
        EXPECT_GT(calls[0], 0) << what;
        EXPECT_LT(calls[0], calls[1]) << what;
      } else {
        EXPECT_EQ(0, calls[0]) << what;
      }
      EXPECT_NE(0, std::memcmp(closed.A.data(), recollided.A.data(), sizeof(double) * ndx * ndx))
          << what;
      // the same tangents up to the re-collisions' rounding (their differences at 1e-7; the
      // relative pairs' to RelativeCheck's 1e-6 of the tangent, MuJoCo's convex colliders)
      const double agree = Agreement(scene);
      EXPECT_LT(RelativeError(closed.A, recollided.A), agree)
          << what << "\n"
          << WorstEntries(m.get(), closed.A, recollided.A, ndx);
      EXPECT_LT(RelativeError(closed.B, recollided.B), agree) << what;
      // against centred differences at least as close as the re-collisions (ipm: not at its
      // tolerance here; the relative pairs' combination is differences as well, at the
      // re-collisions' rounding)
      if (solver == ckSOL_IPM) continue;
      const double err = RelativeError(closed.A, fd.A), before = RelativeError(recollided.A, fd.A);
      std::printf("  %s: closed/recollided %.1e, closed/fd %.1e, recollided/fd %.1e\n",
                  what.c_str(), RelativeError(closed.A, recollided.A), err, before);
      if (scene.hook == &SmoothTangent::closed_bodies_) {
        EXPECT_LE(err, 1.01 * before + 1e-12) << what;
      }
      if (solver == ckSOL_MUJOCO || solver == ckSOL_COMFREE) {
        EXPECT_LT(err, 1e-5) << what << "\n" << WorstEntries(m.get(), closed.A, fd.A, ndx);
      }
    }
  }

  // the VJP with the closed forms against dx' [A B] and the re-collisions' VJP (hook off: scene's
  // switch by default; only: one solver; reversed: least contacts PrepareContactAdjoint takes
  // more with the hook on)
  void CheckVjp(const Scene& scene, bool* hook = nullptr, int only = -1, int reversed = 0) {
    if (!hook) hook = scene.hook;
    const double agree = hook == scene.hook ? Agreement(scene) : 1e-10;
    for (int solver = 0; solver < ckNSOLVER; solver++) {
      if (!ck_solverAvailable(solver) || (only >= 0 && solver != only)) continue;
      const std::string what = std::string(scene.name) + ", " + ck_solverName(solver);
      HandlePtr ck;
      DataPtr d;
      ModelPtr m = Prepare(scene, solver, &ck, &d);
      ASSERT_TRUE(m) << what;
      const int ndx = 2 * m->nv + m->na, nu = m->nu;
      std::vector<double> dx(ndx), gx[2], gu[2];
      for (int i = 0; i < ndx; i++) dx[i] = std::sin(1.0 + i);
      int taken[2];
      for (int pass = 0; pass < 2; pass++) {
        *hook = pass == 0;
        const int before = SmoothTangent::reversed_contacts_;
        gx[pass].assign(ndx, 0);
        gu[pass].assign(nu, 0);
        ASSERT_EQ(0, ck_transitionVJP(ck.get(), m.get(), d.get(), dx.data(), nullptr,
                                      gx[pass].data(), gu[pass].data()))
            << what << ": " << ck_lastError(ck.get());
        taken[pass] = SmoothTangent::reversed_contacts_ - before;
      }
      *hook = true;
      std::vector<double> ex, eu;
      JacobianProducts(ck.get(), m.get(), d.get(), dx, &ex, &eu);
      // dx' [A B] of the closed forms to rounding; the re-collisions' VJP to theirs
      EXPECT_LT(RelativeError(gx[0], ex), 1e-10) << what;
      EXPECT_LT(RelativeError(gx[0], gx[1]), agree) << what;
      EXPECT_NE(0, std::memcmp(gx[0].data(), gx[1].data(), sizeof(double) * ndx)) << what;
      if (reversed > 0) {
        EXPECT_GE(taken[0] - taken[1], reversed) << what;
      }
    }
  }
};

TEST_F(ClosedBodiesTest, JacobiansMatchTheRecollisionsAndCentredDifferences) {
  for (const Scene& scene : kScenes) CheckJacobians(scene);
}

TEST_F(ClosedBodiesTest, VjpEqualsTheTransposedJacobians) {
  for (const Scene& scene : kScenes) CheckVjp(scene);
}

TEST_F(ClosedBodiesTest, RelativePairsMatchTheRecollisionsAndCentredDifferences) {
  for (const Scene& scene : kRelativeScenes) CheckJacobians(scene);
}

TEST_F(ClosedBodiesTest, RelativePairsVjpEqualsTheTransposedJacobians) {
  for (const Scene& scene : kRelativeScenes) CheckVjp(scene);
}

// the `mujoco` VJP takes the twist pairs' contacts in reverse (TwistContactGradient: their
// gradients on each moving side's twist once per adjoint, no rows per direction), equal to dx'
// [A B] and to the VJP with their rows formed per direction (SmoothTangent::reverse_twists_)
TEST_F(ClosedBodiesTest, RelativePairsVjpInReverse) {
  // (each scene's twist pairs: at least three contacts)
  for (const Scene& scene : kRelativeScenes) {
    CheckVjp(scene, &SmoothTangent::reverse_twists_, ckSOL_MUJOCO, 3);
  }
}

}  // namespace
}  // namespace contactkit::test
