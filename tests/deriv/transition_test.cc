// Copyright 2026 The contactkit developers.
//
// ck_transitionJac against finite differences through ck_step (ck_transitionFD, centered) on
// states whose contacts keep their mode within the differencing step; ck_transitionFD against
// MuJoCo's own mjd_transitionFD for the pass-through; the VJP against the transposed product of
// the Jacobians; the caller's mjData and the step sequence untouched.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "deriv/deriv_util.h"
#include "plugin/compat.h"
#include "tools/gen_stack.h"

namespace contactkit::test {
namespace {

using Vec = std::vector<double>;

class TransitionTest : public MujocoTest {
 protected:
  // ck_transitionJac against centered ck_transitionFD on every scene (and integrator, or only
  // the given ones), the analytic path taken; tolerance 1e-5 unless loose names the scene
  // anchor: comfree with contact anchors (a few steps first, so that the contacts have them),
  // and the box held on the 10 degree incline as one more scene
  void CheckScenes(int solver, const std::vector<int>& only_integrators,
                   const std::vector<std::string>& loose = {}, int anchor = 0);
};

TEST_F(TransitionTest, FiniteDifferencesMatchMujocoForThePassThrough) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  for (int integrator : {mjINT_EULER, mjINT_IMPLICIT}) {
    m->opt.integrator = integrator;
    DataPtr d(mj_makeData(m.get()));
    Settle(m.get(), d.get(), 200);
    for (int i = 0; i < m->nu; i++) d->ctrl[i] = 0.3 * std::sin(1.0 + i);
    ckSettings s = Settings(ckSOL_MUJOCO);
    HandlePtr ck = Make(m.get(), &s);
    for (int centered = 0; centered < 2; centered++) {
      Jacobians ours(m.get()), theirs(m.get());
      ASSERT_EQ(0, ck_transitionFD(ck.get(), m.get(), d.get(), 1e-6, centered, ours.A.data(),
                                   ours.B.data(), nullptr, nullptr));
      DataPtr copy(mj_makeData(m.get()));
      mj_copyData(copy.get(), m.get(), d.get());
      mjd_transitionFD(m.get(), copy.get(), 1e-6, centered, theirs.A.data(), theirs.B.data(),
                       nullptr, nullptr);
      EXPECT_LT(RelativeError(ours.A, theirs.A), 1e-12) << "integrator " << integrator;
      EXPECT_LT(RelativeError(ours.B, theirs.B), 1e-12) << "integrator " << integrator;
    }
  }
}

// a scene and how to bring it into the tested state
struct Scene {
  std::string name;
  std::string path;
  std::function<void(mjModel*)> edit;
  std::function<void(const mjModel*, mjData*)> prepare;
  std::vector<int> integrators = {mjINT_EULER, mjINT_IMPLICIT, mjINT_RK4};
  double fd_eps = 1e-6;  // step of the centered differences
};

std::vector<Scene> Scenes() {
  std::vector<Scene> out;
  out.push_back(
      {"free_box", BundledModel("box_on_plane.xml"), nullptr, [](const mjModel* m, mjData* d) {
         d->qpos[2] = 1.0;
         const double q[4] = {0.9, 0.3, -0.2, 0.25};
         mju_copy4(d->qpos + 3, q);
         mju_normalize4(d->qpos + 3);
         const double v[6] = {0.3, -0.2, 0.5, 2.0, -1.0, 3.0};
         mju_copy(d->qvel, v, 6);
       }});
  out.push_back({"resting_box", BundledModel("box_on_plane.xml"), nullptr,
                 [](const mjModel* m, mjData* d) { Settle(m, d, 500); }});
  // sliding: settled on the plane, then launched (all four corners in sliding friction)
  for (int cone : {mjCONE_ELLIPTIC, mjCONE_PYRAMIDAL}) {
    out.push_back({cone == mjCONE_ELLIPTIC ? "sliding_box_elliptic" : "sliding_box_pyramidal",
                   BundledModel("box_sliding.xml"), [cone](mjModel* m) { m->opt.cone = cone; },
                   [](const mjModel* m, mjData* d) {
                     mj_resetDataKeyframe(m, d, 0);
                     mju_zero(d->qvel, 6);
                     Settle(m, d, 500);
                     d->qvel[0] = 1.2;
                     d->qvel[1] = 1.6;
                   }});
  }
  for (int cone : {mjCONE_PYRAMIDAL, mjCONE_ELLIPTIC}) {
    out.push_back({cone == mjCONE_ELLIPTIC ? "humanoid_elliptic" : "humanoid",
                   MujocoModel("humanoid/humanoid.xml"), [cone](mjModel* m) { m->opt.cone = cone; },
                   [](const mjModel* m, mjData* d) {
                     Settle(m, d, 200);
                     for (int i = 0; i < m->nu; i++) d->ctrl[i] = 0.3 * std::sin(1.0 + i);
                   }});
  }

  // a settled pile of 20 primitives (boxes, spheres, capsules, cylinders, ellipsoids)
  out.push_back({"stack20",
                 "stack20",
                 nullptr,
                 [](const mjModel* m, mjData* d) { Settle(m, d, 500); },
                 {mjINT_EULER, mjINT_IMPLICIT}});

  // equality constraints (connect, weld, joint coupling), friction loss and limits, a hopper
  out.push_back({"mechanism", BundledModel("mechanism.xml"), nullptr,
                 [](const mjModel* m, mjData* d) { Settle(m, d, 300); }});
  out.push_back({"friction_limits", BundledModel("joint_friction_limits.xml"), nullptr,
                 [](const mjModel* m, mjData* d) { Settle(m, d, 1500); }});
  out.push_back({"hopper", BundledModel("hopper.xml"), nullptr, [](const mjModel* m, mjData* d) {
                   for (int i = 0; i < m->nu; i++) d->ctrl[i] = 0.2 * (i + 1);
                   Settle(m, d, 120);
                 }});

  // a hand holding an object between palm and three fingertips (real robot model, skipped when
  // absent); the ellipsoid becomes a sphere because MuJoCo's convex (MPR) collisions of an
  // ellipsoid are not smooth at the differencing step, which neither differences see through
  const std::string allegro = SharedModel("wonik_allegro/scene_right.xml");
  if (!allegro.empty()) {
    out.push_back({"allegro_hand",
                   allegro,
                   [](mjModel* m) {
                     const int g = m->body_geomadr[mj_name2id(m, mjOBJ_BODY, "object")];
                     m->geom_type[g] = mjGEOM_SPHERE;
                     m->geom_size[3 * g] = m->geom_rbound[g] = 0.035;
                   },
                   [](const mjModel* m, mjData* d) {
                     for (int i = 0; i < m->nu; i++) {
                       const double* range = m->actuator_ctrlrange + 2 * i;
                       d->ctrl[i] = range[0] + 0.7 * (range[1] - range[0]);
                     }
                     Settle(m, d, 300);
                   },
                   {mjINT_EULER, mjINT_IMPLICIT},
                   // the fingertip contacts curve sharply: under MuJoCo 3.3.7 the centered
                   // differences' truncation error is 1.3e-2 at 1e-5, 1.4e-4 at 1e-6 and ~1e-6 at
                   // 1e-7 (those at 1e-7 and 1e-8 agree with ck_transitionJac to 1.6e-6, 8e-7)
                   1e-7});
  }
  return out;
}

void TransitionTest::CheckScenes(int solver, const std::vector<int>& only_integrators,
                                 const std::vector<std::string>& loose, int anchor) {
  std::vector<Scene> scenes = Scenes();
  if (anchor) {
    scenes.push_back({"incline_box", BundledModel("box_incline.xml"), nullptr,
                      [](const mjModel* m, mjData* d) { Settle(m, d, 300); }});
  }
  for (const Scene& scene : scenes) {
    for (int integrator : scene.integrators) {
      if (!only_integrators.empty() && std::find(only_integrators.begin(), only_integrators.end(),
                                                 integrator) == only_integrators.end()) {
        continue;
      }
      ModelPtr m = scene.path == "stack20" ? LoadString(tools::StackedPrimitivesXML(5, 4, 1, 0.002))
                                           : Load(scene.path);
      ASSERT_TRUE(m) << scene.name;
      if (scene.edit) scene.edit(m.get());
      m->opt.integrator = integrator;
      Tighten(m.get());
      DataPtr d(mj_makeData(m.get()));
      scene.prepare(m.get(), d.get());
      ckSettings s;
      ck_defaultSettings(&s);
      s.solver = solver;
      s.ipm.kappa_grad = s.ipm.kappa_tol;  // ipm: the hard-contact derivative the step has
      s.comfree.anchor = anchor;
      HandlePtr ck = Make(m.get(), &s);
      if (anchor) {
        for (int t = 0; t < 3; t++) ck_step(ck.get(), m.get(), d.get());
      }
      Jacobians jac(m.get()), fd(m.get());
      // MuJoCo 3.7+ puts Jdot v into connect and weld rows' reference: ck_transitionJac falls
      // back to forward differences there (return 1), compared at the loose tolerance
      const bool fallback = JdotvInReference(m.get(), d.get());
      EXPECT_EQ(fallback ? 1 : 0, ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(),
                                                   jac.B.data(), nullptr, nullptr))
          << scene.name;
      // anchored: 1e-7. The humanoid under RK4 after three anchored steps is not smooth on the
      // scale of 1e-6 (a facet near its kink): centered differences at 1e-5, 1e-6, 1e-7, 1e-8
      // agree with ck_transitionJac to 1e-3, 3e-5, 2e-9, 2e-8 (without anchors 2e-5, 2e-7,
      // 2e-9, 1e-8)
      const double eps = anchor ? std::min(scene.fd_eps, 1e-7) : scene.fd_eps;
      ASSERT_EQ(0, ck_transitionFD(ck.get(), m.get(), d.get(), eps, 1, fd.A.data(), fd.B.data(),
                                   nullptr, nullptr));
      const double ea = RelativeError(jac.A, fd.A), eb = RelativeError(jac.B, fd.B);
      const char* name = ck_solverName(solver);
      const bool is_loose = std::find(loose.begin(), loose.end(), scene.name) != loose.end();
      const double tol = is_loose || fallback ? 1e-3 : 1e-5;
      EXPECT_LT(ea, tol) << name << (anchor ? " anchored " : " ") << scene.name << " integrator "
                         << integrator << " ncon " << d->ncon << "\n"
                         << WorstEntries(m.get(), jac.A, fd.A, 2 * m->nv + m->na);
      if (m->nu) {
        EXPECT_LT(eb, tol) << name << " " << scene.name << " integrator " << integrator << "\n"
                           << WorstEntries(m.get(), jac.B, fd.B, m->nu);
      }
    }
  }
}

TEST_F(TransitionTest, MujocoSolverMatchesFiniteDifferences) { CheckScenes(ckSOL_MUJOCO, {}); }

// the other solvers (Euler; their force tangents are tested in their own suites); ipm with
// kappa_grad = kappa_tol, the derivative of the hard contact its steps take (the step ends on the
// central point at kappa_tol that ForceTangent differentiates; measured 1e-9 to 3e-6). The
// hopper is held to 1e-3: its B by differences is itself unsettled (centered differences of its
// controls move by 1e-5 to 2e-3 between steps 1e-5 and 1e-8; A agrees to 4e-10)
TEST_F(TransitionTest, IpmMatchesFiniteDifferences) {
  if (!ck_solverAvailable(ckSOL_IPM)) GTEST_SKIP() << "solver ipm is not in this build";
  CheckScenes(ckSOL_IPM, {mjINT_EULER}, {"hopper"});
}

TEST_F(TransitionTest, ComfreeMatchesFiniteDifferences) {
  if (!ck_solverAvailable(ckSOL_COMFREE)) GTEST_SKIP() << "solver comfree is not in this build";
  CheckScenes(ckSOL_COMFREE, {mjINT_EULER});
}

// with contact anchors: the facet gaps move with the contacts' material points (anchors held)
TEST_F(TransitionTest, AnchoredComfreeMatchesFiniteDifferences) {
  if (!ck_solverAvailable(ckSOL_COMFREE)) GTEST_SKIP() << "solver comfree is not in this build";
  CheckScenes(ckSOL_COMFREE, {mjINT_EULER, mjINT_RK4}, {}, 1);
}

TEST_F(TransitionTest, LcpMatchesFiniteDifferences) {
  if (!ck_solverAvailable(ckSOL_LCP)) GTEST_SKIP() << "solver lcp is not in this build";
  CheckScenes(ckSOL_LCP, {mjINT_EULER});
}

// lcp's position correction (split impulse) in the step's Jacobian: a tilted box 2 mm inside the
// floor, uncapped so that the correction follows the gaps; RK4 steps with a correction fall
// back to finite differences
TEST_F(TransitionTest, LcpPositionCorrectionMatchesFiniteDifferences) {
  if (!ck_solverAvailable(ckSOL_LCP)) GTEST_SKIP() << "solver lcp is not in this build";
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  ckSettings s;
  ck_defaultSettings(&s);
  s.solver = ckSOL_LCP;
  s.lcp.max_correction = HUGE_VAL;
  for (int integrator : {mjINT_EULER, mjINT_RK4}) {
    m->opt.integrator = integrator;
    DataPtr d(mj_makeData(m.get()));
    const double tilt = 0.05;  // rad about x: one edge deeper
    d->qpos[2] = 0.1 - 2e-3;
    d->qpos[3] = std::cos(tilt / 2);
    d->qpos[4] = std::sin(tilt / 2);
    d->qvel[0] = 0.3;  // sliding, turning
    d->qvel[5] = 0.5;
    HandlePtr ck = Make(m.get(), &s);
    Jacobians jac(m.get()), fd(m.get());
    const int rc =
        ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), nullptr, nullptr, nullptr);
    ASSERT_EQ(0, ck_transitionFD(ck.get(), m.get(), d.get(), 1e-7, 1, fd.A.data(), nullptr, nullptr,
                                 nullptr));
    if (integrator == mjINT_RK4) {
      EXPECT_EQ(rc, 1);  // the finite-difference fallback, named in the handle's stats
      continue;
    }
    EXPECT_EQ(rc, 0);
    const double ea = RelativeError(jac.A, fd.A);
    EXPECT_LT(ea, 1e-5) << WorstEntries(m.get(), jac.A, fd.A, 2 * m->nv);
    // the correction is there: the box rises within the step at rest velocity
    DataPtr d2(mj_makeData(m.get()));
    mj_copyData(d2.get(), m.get(), d.get());
    ck_step(ck.get(), m.get(), d2.get());
    EXPECT_GT(d2->qpos[2] - d->qpos[2], 1e-3);
    EXPECT_LT(d2->qvel[2], 1e-9);
  }
}

}  // namespace
}  // namespace contactkit::test
