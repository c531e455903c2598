// Copyright 2026 The contactkit developers.
//
// ck_transitionJac against centered ck_transitionFD with actuators inside, at and beyond their
// force limits and beyond their control limits: a clamped force depends neither on the velocity
// nor on the control, so the actuator's kv damping and gain must leave A and B there.
#include <cmath>
#include <string>
#include <vector>

#include "plugin/step/compat.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

// hinges with position servos (force and control limits; one through a filter's activation)
// and a box resting on the floor
constexpr char kServoXML[] = R"(
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <body pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
    </body>
    <body pos="0 0.5 1">
      <joint name="hinge2" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.03" mass="0.5"/>
    </body>
    <body pos="1 0 0.1">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
    </body>
  </worldbody>
  <actuator>
    <general joint="hinge" biastype="affine" gainprm="100" biasprm="0 -100 -10" forcelimited="true"
             forcerange="-2 2"
             ctrllimited="true" ctrlrange="-1 1"/>
    <general joint="hinge2" dyntype="filter" dynprm="0.05" biastype="affine" gainprm="50"
             biasprm="0 -50 -5" forcelimited="true" forcerange="-1 1" ctrllimited="true"
             ctrlrange="-1 1"/>
  </actuator>
</mujoco>)";

// where each actuator's force is put
enum Mode { kInside, kAtLimit, kBeyondLimit, kBeyondCtrl, kAtCtrl };
const char* const kModeName[] = {"inside", "at the force limit (1e-3 beyond)",
                                 "beyond the force limit", "beyond the control range",
                                 "at the control range's bound"};

// Euler and implicit, and implicitfast on 3.x (the Menagerie arms' and hands' own integrator)
#if CK_MJ3
const std::vector<int> kServoIntegrators = {mjINT_EULER, mjINT_IMPLICIT, mjINT_IMPLICITFAST};
#else
const std::vector<int> kServoIntegrators = {mjINT_EULER, mjINT_IMPLICIT};
#endif
const std::vector<int>& kPandaIntegrators = kServoIntegrators;

class ActuatorLimitTransitionTest : public MujocoTest {
 protected:
  // ck_transitionJac against centered differences for each mode, integrator and solver
  void Check(const std::string& name, mjModel* m, int nsettle, const std::vector<int>& integrators);
};

// velocities, and controls that ask each servo for a force in the mode (signs alternate)
void Prepare(const mjModel* m, mjData* d, Mode mode) {
  for (int i = 0; i < m->nv; i++) {
    if (m->jnt_type[m->dof_jntid[i]] != mjJNT_FREE) d->qvel[i] = 0.3 * std::sin(1.7 * i + 0.4);
  }
  mj_forward(m, d);
  for (int i = 0; i < m->nu; i++) {
    const double sign = i % 2 ? -1 : 1;
    const double* range = m->actuator_ctrlrange + 2 * i;
    if (mode == kBeyondCtrl) {
      d->ctrl[i] = sign > 0 ? range[1] + 0.2 * (range[1] - range[0] + 1)
                            : range[0] - 0.2 * (range[1] - range[0] + 1);
      continue;
    }
    if (mode == kAtCtrl) {
      d->ctrl[i] = range[sign > 0];
      continue;
    }
    const double limit = m->actuator_forcerange[2 * i + (sign > 0)];
    const double scale[] = {0.3, 1 + 1e-3, 3};
    const double force = std::fabs(limit) * sign * scale[mode];
    const double* g = m->actuator_gainprm + mjNGAIN * i;
    const double* b = m->actuator_biasprm + mjNBIAS * i;
    const double bias = b[0] + b[1] * d->actuator_length[i] + b[2] * d->actuator_velocity[i];
    d->ctrl[i] = (force - bias) / g[0];
    if (m->actuator_ctrllimited[i]) {
      d->ctrl[i] = std::fmin(range[1], std::fmax(range[0], d->ctrl[i]));
    }
    // a filter's force follows its activation: the same input there
    if (m->actuator_dyntype[i] != mjDYN_NONE) d->act[i - (m->nu - m->na)] = d->ctrl[i];
  }
  mj_forward(m, d);
}

void ActuatorLimitTransitionTest::Check(const std::string& name, mjModel* m, int nsettle,
                                        const std::vector<int>& integrators) {
  Tighten(m);
  const int n = 2 * m->nv + m->na;
  bool forcelimited = false;
  for (int i = 0; i < m->nu; i++) forcelimited = forcelimited || m->actuator_forcelimited[i];
  for (int integrator : integrators) {
    m->opt.integrator = integrator;
    for (int solver : {ckSOL_MUJOCO, ckSOL_IPM, ckSOL_COMFREE, ckSOL_LCP}) {
      if (!ck_solverAvailable(solver)) continue;
      for (Mode mode : {kInside, kAtLimit, kBeyondLimit, kBeyondCtrl, kAtCtrl}) {
        // force modes need a force limit (the hands of Allegro and LEAP and the X2 have none)
        if ((mode == kAtLimit || mode == kBeyondLimit) && !forcelimited) continue;
        DataPtr d(mj_makeData(m));
        if (m->nkey) mj_resetDataKeyframe(m, d.get(), 0);
        Settle(m, d.get(), nsettle);
        // joints off their limits (the Panda's fingers are open to their limit in its keyframe)
        for (int j = 0; j < m->njnt; j++) {
          const double* r = m->jnt_range + 2 * j;
          if (!m->jnt_limited[j] || m->jnt_type[j] == mjJNT_FREE || m->jnt_type[j] == mjJNT_BALL) {
            continue;
          }
          double& q = d->qpos[m->jnt_qposadr[j]];
          q = std::fmin(r[1] - 0.1 * (r[1] - r[0]), std::fmax(r[0] + 0.1 * (r[1] - r[0]), q));
        }
        Prepare(m, d.get(), mode);

        // the mode is what it says: some force clamped at and beyond the limit, none inside
        int clamped = 0;
        for (int i = 0; i < m->nu; i++) {
          const double* range = m->actuator_forcerange + 2 * i;
          const double f = d->actuator_force[i];
          clamped += m->actuator_forcelimited[i] && (f <= range[0] || f >= range[1]);
        }
        if (mode == kInside) {
          EXPECT_EQ(0, clamped) << name;
        } else if (mode == kAtLimit || mode == kBeyondLimit) {
          EXPECT_GT(clamped, 0) << name;
        }

        ckSettings s;
        ck_defaultSettings(&s);
        s.solver = solver;
        s.ipm.kappa_grad = s.ipm.kappa_tol;  // ipm: the hard-contact derivative the step has
        HandlePtr ck = Make(m, &s);
        Jacobians jac(m), fd(m);
        // fluid drag under the implicit integrators: differences through ck_step (the X2)
        const bool fluid = IsImplicit(m) && (m->opt.density > 0 || m->opt.viscosity > 0);
        EXPECT_EQ(fluid ? 1 : 0, ck_transitionJac(ck.get(), m, d.get(), jac.A.data(), jac.B.data(),
                                                  nullptr, nullptr));
        ASSERT_EQ(0, ck_transitionFD(ck.get(), m, d.get(), 1e-6, 1, fd.A.data(), fd.B.data(),
                                     nullptr, nullptr));
        const std::string what = name + " " + ck_solverName(solver) + " integrator " +
                                 std::to_string(integrator) + " " + kModeName[mode] + " ncon " +
                                 std::to_string(d->ncon);
        // the fallback's forward differences straddle the quadratic drag's kink at rest: 7e-5
        const double bound = fluid ? 1e-4 : 1e-5;
        EXPECT_LT(RelativeError(jac.A, fd.A), bound) << what << "\n"
                                                     << WorstEntries(m, jac.A, fd.A, n);
        // every force clamped: B is zero, and differences see round-off (1e-14) in it
        EXPECT_LT(RelativeError(jac.B, fd.B, 1e-8), bound) << what << "\n"
                                                           << WorstEntries(m, jac.B, fd.B, m->nu);
      }
    }
  }
}

TEST_F(ActuatorLimitTransitionTest, ServoMatchesFiniteDifferences) {
  ModelPtr m = LoadString(kServoXML);
  ASSERT_TRUE(m);
  Check("servo", m.get(), 100, kServoIntegrators);
}

// the Franka Panda of Menagerie (its 2.2.2 variant there), from its home keyframe
TEST_F(ActuatorLimitTransitionTest, PandaMatchesFiniteDifferences) {
  const std::string path =
      SharedModel(CK_MJ3 ? "franka_emika_panda/scene.xml" : "franka_emika_panda/scene_mj222.xml");
  if (path.empty()) GTEST_SKIP() << "the Menagerie Panda is absent";
  ModelPtr m = Load(path);
  ASSERT_TRUE(m);
  Check("panda", m.get(), 0, kPandaIntegrators);
}

// every other Menagerie robot present (the originals on 3.x, the _mj222 variants on 2.2.2; the
// A1's variant on both), from its keyframe or default pose
struct Robot {
  const char* mj3;    // file on MuJoCo 3.x
  const char* mj222;  // file on MuJoCo 2.2.2
};
class MenagerieLimitTest : public ActuatorLimitTransitionTest,
                           public ::testing::WithParamInterface<Robot> {};

TEST_P(MenagerieLimitTest, MatchesFiniteDifferences) {
  const std::string rel = CK_MJ3 ? GetParam().mj3 : GetParam().mj222;
  const std::string path = SharedModel(rel);
  if (path.empty()) GTEST_SKIP() << rel << " is absent";
  ModelPtr m = Load(path);
  ASSERT_TRUE(m);
  Check(rel, m.get(), 0, kPandaIntegrators);
}

INSTANTIATE_TEST_SUITE_P(
    Robots, MenagerieLimitTest,
    ::testing::Values(Robot{"unitree_a1/scene_mj222.xml", "unitree_a1/scene_mj222.xml"},
                      Robot{"wonik_allegro/scene_right.xml", "wonik_allegro/scene_right.xml"},
                      Robot{"leap_hand/scene_right.xml", "leap_hand/scene_right_mj222.xml"},
                      Robot{"shadow_hand/scene_right.xml", "shadow_hand/scene_right.xml"},
                      Robot{"skydio_x2/scene.xml", "skydio_x2/scene_mj222.xml"}),
    [](const ::testing::TestParamInfo<Robot>& info) {
      const std::string s = info.param.mj3;
      return s.substr(0, s.find('/'));
    });

}  // namespace
}  // namespace contactkit::test
