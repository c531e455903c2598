// Copyright 2026 The contactkit developers.
//
// ck_paramJac against central finite differences of ck_step in each parameter (the model's field
// moved by +-eps, the step taken by a fresh handle state) on a box resting on the floor, a box
// sliding (friction), a box tossed onto the floor one step before and after impact, with every
// solver and the single-stage integrators; the analytic columns are the parameters'
// ck_paramJac's documentation lists. Also: a Menagerie arm (Panda), bad input, m and d untouched
// to the last byte, no allocation in the call.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "plugin/step/compat.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

// the single-stage integrators: Euler, implicit, and implicitfast on 3.x
#if CK_MJ3
const int kSingleStage[] = {mjINT_EULER, mjINT_IMPLICIT, mjINT_IMPLICITFAST};
#else
const int kSingleStage[] = {mjINT_EULER, mjINT_IMPLICIT};
#endif

using Vec = std::vector<double>;

// a box on a floor, and a damped, sprung hinge driven by a motor and a position servo (its dof
// friction gives the problem rows in every state); sensors of position, velocity, force and
// acceleration
constexpr char kBoxXml[] = R"(
<mujoco model="param_box">
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.05" friction="0.3 0.005 0.0001"/>
    <body name="box" pos="0 0 0.06">
      <freejoint name="box_free"/>
      <geom name="box" type="box" size="0.1 0.08 0.06" mass="1" friction="0.5 0.01 0.001"/>
      <site name="imu" pos="0.02 0.01 0"/>
    </body>
    <body name="arm" pos="1 1 0.5">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.3" armature="0.02" stiffness="2"
             frictionloss="0.05"/>
      <geom name="rod" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.5"
            contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="motor" joint="hinge" gear="1"/>
    <position name="servo" joint="hinge" kp="5"/>
  </actuator>
  <sensor>
    <framepos objtype="body" objname="box"/>
    <jointpos joint="hinge"/>
    <jointvel joint="hinge"/>
    <actuatorfrc actuator="servo"/>
    <accelerometer site="imu"/>
  </sensor>
</mujoco>)";

// every kind, on the box and the hinge
const std::vector<std::string> kBoxParams = {"body:box:mass",
                                             "body:box:ipos:0",
                                             "body:box:ipos:2",
                                             "body:box:inertia:0",
                                             "body:arm:mass",
                                             "body:arm:inertia:1",
                                             "geom:box:friction:0",
                                             "geom:box:friction:1",
                                             "geom:box:size:0",
                                             "geom:box:size:2",
                                             "geom:box:pos:0",
                                             "geom:box:pos:2",
                                             "geom:box:solref:0",
                                             "geom:box:solref:1",
                                             "geom:box:solimp:0",
                                             "geom:box:solimp:2",
                                             "dof:2:damping",
                                             "joint:hinge:damping",
                                             "joint:hinge:armature",
                                             "joint:hinge:stiffness",
                                             "joint:hinge:frictionloss",
                                             "actuator:motor:gainprm:0",
                                             "actuator:servo:gainprm:0",
                                             "actuator:servo:biasprm:1",
                                             "gravity:0",
                                             "gravity:2"};

std::vector<int> Solvers() {
  std::vector<int> out;
  for (int s = 0; s < ckNSOLVER; s++) {
    if (ck_solverAvailable(s)) out.push_back(s);
  }
  return out;
}

class ParamJacTest : public MujocoTest {
 protected:
  std::vector<ckParam> Parse(const mjModel* m, const std::vector<std::string>& names) {
    std::vector<ckParam> out(names.size());
    char error[512];
    for (size_t k = 0; k < names.size(); k++) {
      EXPECT_EQ(0, ck_parseParam(m, names[k].c_str(), &out[k], error, sizeof(error)))
          << names[k] << ": " << error;
    }
    return out;
  }

  // central differences of ck_step in each parameter (eps relative to 1 + |p|): dx (ndx x np),
  // ds (ns x np), row-major
  void FiniteDiff(ckHandle* ck, mjModel* m, const mjData* d, const std::vector<ckParam>& params,
                  Vec* dx, Vec* ds) {
    const int nv = m->nv, na = m->na, ns = m->nsensordata, np = params.size();
    const int ndx = 2 * nv + na;
    dx->assign(static_cast<size_t>(ndx) * np, 0);
    ds->assign(static_cast<size_t>(ns) * np, 0);
    DataPtr e(mj_makeData(m));
    Vec next[2], sens[2], dq(nv);
    for (int k = 0; k < np; k++) {
      const mjtNum value = *ParamFieldOf(m, params[k]);
      const double eps = 1e-6 * (1 + std::fabs(value));
      for (int side = 0; side < 2; side++) {
        SetParamValue(m, params[k], side == 0 ? value + eps : value - eps);
        mj_copyData(e.get(), m, d);
        ck_reset(ck);
        ck_step(ck, m, e.get());
        next[side].assign(e->qpos, e->qpos + m->nq);
        next[side].insert(next[side].end(), e->qvel, e->qvel + nv);
        next[side].insert(next[side].end(), e->act, e->act + na);
        sens[side].assign(e->sensordata, e->sensordata + ns);
      }
      SetParamValue(m, params[k], value);
      mj_differentiatePos(m, dq.data(), 2 * eps, next[1].data(), next[0].data());
      for (int i = 0; i < nv; i++) (*dx)[i * np + k] = dq[i];
      for (int i = 0; i < nv + na; i++) {
        (*dx)[(nv + i) * np + k] = (next[0][m->nq + i] - next[1][m->nq + i]) / (2 * eps);
      }
      for (int i = 0; i < ns; i++) (*ds)[i * np + k] = (sens[0][i] - sens[1][i]) / (2 * eps);
    }
  }

  // ck_paramJac against FiniteDiff column by column: |a_k - b_k| / max(|b_k|, floor) < tol with
  // floor 1e-3 of the largest column (a parameter that does not act: both near zero)
  void Check(ckHandle* ck, mjModel* m, mjData* d, const std::vector<std::string>& names, double tol,
             const std::string& what) {
    const std::vector<ckParam> params = Parse(m, names);
    const int np = params.size(), ndx = 2 * m->nv + m->na, ns = m->nsensordata;
    Vec dx(static_cast<size_t>(ndx) * np), ds(static_cast<size_t>(ns) * np), fx, fs;
    std::vector<int> how(np, -1);
    const int ret = ck_paramJac(ck, m, d, params.data(), np, dx.data(), ds.data(), how.data());
    ASSERT_GE(ret, 0) << what << ": " << ck_lastError(ck);
    bool any_fd = false;
    // a mass, inertia or armature moves invweight0 (mj_setConst), and so the rows' regularizer:
    // analytic, except under MuJoCo's own pyramids of condim 4 and 6
    DataPtr e(mj_makeData(m));
    mj_copyData(e.get(), m, d);
    mj_forward(m, e.get());
    ckSettings settings;
    ck_getSettings(ck, &settings);
    bool wide_pyramid = false;
    for (int c = 0; c < e->ncon; c++) {
      wide_pyramid |= settings.solver == ckSOL_MUJOCO && m->opt.cone == mjCONE_PYRAMIDAL &&
                      e->contact[c].dim > 3;
    }
    for (int k = 0; k < np; k++) {
      const int kind = params[k].kind;
      const bool derived =
          kind == ckPARAM_BODY_MASS || kind == ckPARAM_BODY_INERTIA || kind == ckPARAM_DOF_ARMATURE;
      const bool analytic =
          m->opt.integrator != mjINT_RK4 && ParamAnalyticKind(kind) && !(derived && wide_pyramid);
      EXPECT_EQ(analytic ? ckPARAM_ANALYTIC : ckPARAM_FINITE_DIFF, how[k])
          << what << " " << names[k];
      any_fd |= how[k] != ckPARAM_ANALYTIC;
    }
    EXPECT_EQ(any_fd ? 1 : 0, ret) << what;

    // the blocked "mujoco" path (no sensors) gives the same state columns
    Vec dx2(dx.size());
    ASSERT_GE(ck_paramJac(ck, m, d, params.data(), np, dx2.data(), nullptr, nullptr), 0);
    EXPECT_LT(RelativeError(dx2, dx), 1e-8) << what;

    FiniteDiff(ck, m, d, params, &fx, &fs);
    for (const auto& [a, b, nrow, label] :
         {std::make_tuple(&dx, &fx, ndx, "DxDp"), std::make_tuple(&ds, &fs, ns, "DsDp")}) {
      if (nrow == 0) continue;
      double scale = 0;
      for (int k = 0; k < np; k++) {
        double nb = 0;
        for (int i = 0; i < nrow; i++) nb += (*b)[i * np + k] * (*b)[i * np + k];
        scale = std::max(scale, std::sqrt(nb));
      }
      for (int k = 0; k < np; k++) {
        double num = 0, den = 0;
        for (int i = 0; i < nrow; i++) {
          const double x = (*a)[i * np + k], y = (*b)[i * np + k];
          num += (x - y) * (x - y);
          den += y * y;
        }
        const double err = std::sqrt(num) / std::max({std::sqrt(den), 1e-3 * scale, 1e-12});
        std::string rows;
        for (int i = 0; i < nrow; i++) {
          rows += " " + std::to_string((*a)[i * np + k]) + "/" + std::to_string((*b)[i * np + k]);
        }
        EXPECT_LT(err, tol) << what << " " << label << " " << names[k] << " how " << how[k] << ":"
                            << rows;
      }
    }
  }

  static bool ParamAnalyticKind(int kind) {
    return kind != ckPARAM_GEOM_FRICTION && kind != ckPARAM_GEOM_SIZE && kind != ckPARAM_GEOM_POS &&
           kind != ckPARAM_DOF_FRICTIONLOSS;
  }

  HandlePtr MakeFor(const mjModel* m, int solver) {
    ckSettings s = Settings(solver);
    s.ipm.kappa_grad = s.ipm.kappa_tol;  // ipm: the derivative of the step it takes
    s.comfree.anchor = 0;  // the reference's fresh handle state (ck_reset) has no anchors
    s.deriv.enabled = 1;
    return Make(m, &s);
  }
};

// the scenes: resting, sliding, tossed one step before and after the impact
struct BoxScene {
  const char* name;
  std::function<void(ckHandle*, const mjModel*, mjData*)> prepare;
};

std::vector<BoxScene> BoxScenes() {
  return {
      {"resting",
       [](ckHandle* ck, const mjModel* m, mjData* d) {
         for (int t = 0; t < 200; t++) ck_step(ck, m, d);
       }},
      {"sliding",
       [](ckHandle* ck, const mjModel* m, mjData* d) {
         for (int t = 0; t < 100; t++) ck_step(ck, m, d);
         d->qvel[0] = 1.2;
         d->qvel[1] = 1.6;
         // MuJoCo's pyramids with soft contact hop the box at first: the first state in contact
         // after 5 steps
         for (int t = 0; t < 100; t++) {
           ck_step(ck, m, d);
           ck_forward(ck, m, d);
           if (t >= 5 && d->ncon >= 2) break;
         }
       }},
      {"tossed_before",
       [](ckHandle* ck, const mjModel* m, mjData* d) {
         d->qpos[2] = 0.2;
         d->qvel[0] = 0.5;
         d->qvel[2] = -1;
         d->qvel[3] = 2;
         DataPtr e(mj_makeData(m));
         for (int t = 0; t < 500; t++) {
           mj_copyData(e.get(), m, d);
           ck_forward(ck, m, e.get());
           if (e->ncon > 0) break;
           mj_copyData(e.get(), m, d);
           ck_step(ck, m, e.get());
           ck_forward(ck, m, e.get());
           if (e->ncon > 0) break;  // d: one step before the impact
           ck_step(ck, m, d);
         }
       }},
      {"tossed_after",
       [](ckHandle* ck, const mjModel* m, mjData* d) {
         d->qpos[2] = 0.2;
         d->qvel[0] = 0.5;
         d->qvel[2] = -1;
         d->qvel[3] = 2;
         for (int t = 0; t < 500; t++) {
           ck_forward(ck, m, d);
           if (d->ncon > 0) break;  // d: the first state in contact
           ck_step(ck, m, d);
         }
       }},
  };
}

TEST_F(ParamJacTest, EveryKindMatchesFiniteDifferencesOnTheBox) {
  ModelPtr m = LoadString(kBoxXml);
  ASSERT_TRUE(m);
  Tighten(m.get());
  for (int integrator : kSingleStage) {
    m->opt.integrator = integrator;
    for (int solver : Solvers()) {
      for (const BoxScene& scene : BoxScenes()) {
        HandlePtr ck = MakeFor(m.get(), solver);
        DataPtr d(mj_makeData(m.get()));
        d->ctrl[0] = 0.3;
        d->ctrl[1] = 0.4;
        scene.prepare(ck.get(), m.get(), d.get());
        if (std::string(scene.name) != "tossed_before") {
          ck_forward(ck.get(), m.get(), d.get());
          EXPECT_GT(d->ncon, 0) << ck_solverName(solver) << " " << scene.name;
        }
        const std::string what = std::string(ck_solverName(solver)) + " " + scene.name +
                                 " integrator " + std::to_string(integrator) + " ncon " +
                                 std::to_string(d->ncon);
        Check(ck.get(), m.get(), d.get(), kBoxParams, 1e-5, what);
      }
    }
  }
}

// RK4: every column by central differences (how = 1), still the derivative of the step
TEST_F(ParamJacTest, RungeKuttaFallsBackToFiniteDifferences) {
  ModelPtr m = LoadString(kBoxXml);
  ASSERT_TRUE(m);
  Tighten(m.get());
  m->opt.integrator = mjINT_RK4;
  HandlePtr ck = MakeFor(m.get(), ckSOL_MUJOCO);
  DataPtr d(mj_makeData(m.get()));
  BoxScenes()[1].prepare(ck.get(), m.get(), d.get());
  Check(ck.get(), m.get(), d.get(), {"body:box:mass", "geom:box:friction:0", "gravity:2"}, 1e-5,
        "rk4");
}

// the adaptive pairs: the step as taken, its internal steps' sizes held (as the state
// Jacobian); on the spring slider (x(h) = x0 cos(w h), w = sqrt(k / m)) against the closed form
// dx/dk = -x0 h sin(w h) / (2 m w)
TEST_F(ParamJacTest, AdaptiveStepIsDifferentiatedAsTaken) {
  ModelPtr m = LoadString(OscillatorXml());
  ASSERT_TRUE(m);
  for (int integrator : {ckINT_TSIT5, ckINT_DOPRI5}) {
    ckSettings s;
    ck_defaultSettings(&s);
    s.integrator = integrator;
    s.adaptive.rtol = s.adaptive.atol = 1e-12;
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    d->qpos[0] = 0.1;
    ckParam p;
    char error[300];
    ASSERT_EQ(0, ck_parseParam(m.get(), "joint:0:stiffness", &p, error, sizeof(error))) << error;
    std::vector<double> dx(2);
    int how = -1;
    EXPECT_EQ(0, ck_paramJac(ck.get(), m.get(), d.get(), &p, 1, dx.data(), nullptr, &how));
    EXPECT_EQ(how, ckPARAM_ANALYTIC);
    const double h = m->opt.timestep, w = 10;
    EXPECT_NEAR(dx[0], -0.1 * h * std::sin(w * h) / (2 * w), 1e-10);
  }
}

// the adaptive pairs at a tight tolerance against differences of ck_step (whose controller
// chooses its internal steps anew on each side; both from a reset controller): the box resting
// (one internal step) and in flight beside the driven hinge, and a ball pressed into a stiff
// floor (several internal steps through the contact's force law); contact parameters by
// differences of the adaptive step (Check asserts which). A box sliding under MuJoCo's soft
// friction is left out: its acceleration-level force law is not smooth in the state, the
// controller takes ~100 internal steps and rejects as many, and differences of the re-adapted
// step scatter by the tolerance over the nudge
TEST_F(ParamJacTest, AdaptiveStepMatchesDifferences) {
  ModelPtr box = LoadString(kBoxXml);
  ModelPtr ball = LoadString(R"(
    <mujoco>
      <option timestep="0.01"/>
      <worldbody>
        <geom name="floor" type="plane" size="2 2 0.1" solref="0.005 1"
              solimp="0 0.95 0.001 0.5 2"/>
        <body name="ball" pos="0 0 0.098">
          <freejoint/>
          <geom name="ball" type="sphere" size="0.1" mass="1" solref="0.005 1"
                solimp="0 0.95 0.001 0.5 2"/>
        </body>
      </worldbody>
    </mujoco>)");
  ASSERT_TRUE(box && ball);
  Tighten(box.get());
  Tighten(ball.get());
  const std::vector<std::string> box_names = {"body:box:mass",
                                              "body:box:inertia:0",
                                              "body:arm:mass",
                                              "joint:hinge:damping",
                                              "joint:hinge:armature",
                                              "joint:hinge:stiffness",
                                              "actuator:motor:gainprm:0",
                                              "actuator:servo:biasprm:1",
                                              "geom:box:friction:0",
                                              "gravity:2"};
  const std::vector<std::string> ball_names = {"body:ball:mass", "body:ball:inertia:0",
                                               "geom:ball:solref:0", "gravity:2"};
  for (int integrator : {ckINT_TSIT5, ckINT_DOPRI5}) {
    ckSettings s = Settings(ckSOL_MUJOCO);
    s.integrator = integrator;
    s.adaptive.rtol = s.adaptive.atol = 1e-10;
    s.deriv.enabled = 1;
    const std::string pair = integrator == ckINT_TSIT5 ? "tsit5 " : "dopri5 ";
    for (const char* scene : {"resting", "flight"}) {
      HandlePtr ck = Make(box.get(), &s);
      DataPtr d(mj_makeData(box.get()));
      d->ctrl[0] = 0.3;
      d->ctrl[1] = 0.4;
      if (scene[0] == 'r') {
        BoxScenes()[0].prepare(ck.get(), box.get(), d.get());
      } else {
        d->qpos[2] = 1;
        d->qpos[7] = 0.4;  // the hinge off its servo's target
        d->qvel[0] = 0.5;
        d->qvel[3] = 2;
        d->qvel[6] = 1;
      }
      ck_reset(ck.get());
      Check(ck.get(), box.get(), d.get(), box_names, 1e-5, pair + scene);
    }
    HandlePtr ck = Make(ball.get(), &s);
    DataPtr d(mj_makeData(ball.get()));
    d->qvel[0] = 0.2;
    d->qvel[2] = -0.3;
    ck_step(ck.get(), ball.get(), d.get());
    ASSERT_GT(ck_stepInfo(ck.get())->accepted, 4) << "the contact should take internal steps";
    ck_reset(ck.get());
    Check(ck.get(), ball.get(), d.get(), ball_names, 1e-5, pair + "ball in stiff contact");
  }
}

// a body's mass moves its subtree masses with it, as a recompiled model's would: in free flight
// a body falls the same whatever its mass (before the fix the step, and so the column, fell
// faster with more mass), and a pendulum's link mass changes its swing (differences of a model
// whose subtree masses follow)
TEST_F(ParamJacTest, MassMovesTheSubtreeMassesLikeACompiledModel) {
  ModelPtr m = LoadString(R"(
    <mujoco><worldbody>
      <body name="ball" pos="0 0 1"><freejoint/><geom type="sphere" size="0.1" mass="0.5"/></body>
      <body name="link" pos="1 0 1"><joint type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.7"/>
        <body name="tip" pos="0.3 0 0"><joint type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.4"/></body></body>
    </worldbody></mujoco>)");
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  d->qvel[3] = 2;  // a tumbling ball
  d->qvel[6] = 1;
  for (int solver : {ckSOL_MUJOCO, ckSOL_IPM}) {
    HandlePtr ck = MakeFor(m.get(), solver);
    const std::vector<ckParam> params = Parse(m.get(), {"body:ball:mass", "body:link:mass"});
    const int ndx = 2 * m->nv;
    Vec dx(static_cast<size_t>(ndx) * 2);
    ASSERT_EQ(
        0, ck_paramJac(ck.get(), m.get(), d.get(), params.data(), 2, dx.data(), nullptr, nullptr));
    for (int i = 0; i < ndx; i++) {
      if (i % m->nv < 6) {
        EXPECT_NEAR(0, dx[2 * i], 1e-9) << ck_solverName(solver) << " ball's mass, row " << i;
      } else if (i >= m->nv) {
        EXPECT_GT(std::fabs(dx[2 * i + 1]), 1e-4) << ck_solverName(solver) << " link's mass " << i;
      }
    }
    Check(ck.get(), m.get(), d.get(), {"body:ball:mass", "body:link:mass", "body:tip:mass"}, 1e-5,
          "subtree masses");
  }
}

// mj_setConst's results are kept between calls while the model's values stay: a handle's second
// call, and its call after the caller changed a mass (mj_setConst on m), equal a fresh handle's to
// the last bit; with the old values back, the first answer again
TEST_F(ParamJacTest, RepeatedCallsFollowTheModelsValues) {
  ModelPtr m = LoadString(kBoxXml);
  ASSERT_TRUE(m);
  const std::vector<ckParam> params =
      Parse(m.get(), {"body:box:mass", "body:arm:inertia:1", "joint:hinge:armature"});
  const int np = params.size(), ndx = 2 * m->nv + m->na, ns = m->nsensordata;
  for (int solver : Solvers()) {
    HandlePtr ck = MakeFor(m.get(), solver);
    DataPtr d(mj_makeData(m.get()));
    BoxScenes()[1].prepare(ck.get(), m.get(), d.get());
    auto jac = [&](ckHandle* h) {
      Vec out(static_cast<size_t>(ndx + ns) * np);
      ck_paramJac(h, m.get(), d.get(), params.data(), np, out.data(), out.data() + ndx * np,
                  nullptr);
      return out;
    };
    auto fresh = [&]() {
      HandlePtr other = MakeFor(m.get(), solver);
      return jac(other.get());
    };
    const Vec first = jac(ck.get());
    EXPECT_EQ(first, jac(ck.get())) << ck_solverName(solver) << ": the second call";
    EXPECT_EQ(first, fresh()) << ck_solverName(solver);
    const double mass = m->body_mass[1], armature = m->dof_armature[6];
    m->body_mass[1] = 1.3 * mass;
    m->dof_armature[6] = 2 * armature;
    DataPtr scratch(mj_makeData(m.get()));
    mj_setConst(m.get(), scratch.get());
    const Vec moved = jac(ck.get());
    EXPECT_EQ(moved, fresh()) << ck_solverName(solver) << ": after the model changed";
    double change = 0, size = 0;
    for (size_t i = 0; i < moved.size(); i++) {
      change = std::max(change, std::fabs(moved[i] - first[i]));
      size = std::max(size, std::fabs(first[i]));
    }
    EXPECT_GT(change, 1e-3 * size) << ck_solverName(solver) << ": the change shows";
    m->body_mass[1] = mass;
    m->dof_armature[6] = armature;
    mj_setConst(m.get(), scratch.get());
    EXPECT_EQ(first, jac(ck.get())) << ck_solverName(solver) << ": the old values back";
  }
}

// condim 6 contacts: their torsional and rolling rows' weights are rotational; the solvers whose
// contacts read R and diag_approx ("mujoco", comfree; ipm and lcp hold hard contacts, whose
// sliding box moves the same whatever its mass): under MuJoCo's elliptic cones the mass and
// inertia columns are analytic, under its pyramids the "mujoco" solver's by differences (Check
// asserts which); both match differences of the step (2e-5: the accelerometer's column, a forward
// difference of the sensor stages, is 1.2e-5 off under the elliptic cones)
TEST_F(ParamJacTest, WideContactsMassAndInertia) {
  ModelPtr m = LoadString(kBoxXml);
  ASSERT_TRUE(m);
  Tighten(m.get());
  for (int g = 0; g < m->ngeom; g++) m->geom_condim[g] = 6;
  for (int cone : {mjCONE_ELLIPTIC, mjCONE_PYRAMIDAL}) {
    m->opt.cone = cone;
    for (int solver : {ckSOL_MUJOCO, ckSOL_COMFREE}) {
      if (!ck_solverAvailable(solver)) continue;
      HandlePtr ck = MakeFor(m.get(), solver);
      DataPtr d(mj_makeData(m.get()));
      BoxScenes()[1].prepare(ck.get(), m.get(), d.get());  // sliding
      ck_forward(ck.get(), m.get(), d.get());
      ASSERT_GT(d->ncon, 0);
      ASSERT_EQ(6, d->contact[0].dim);
      Check(ck.get(), m.get(), d.get(), {"body:box:mass", "body:box:inertia:2", "gravity:2"}, 2e-5,
            std::string("condim 6 ") + ck_solverName(solver) + " cone " + std::to_string(cone));
    }
  }
}

TEST_F(ParamJacTest, PandaDampingArmatureGain) {
  const std::string path =
      SharedModel(CK_MJ3 ? "franka_emika_panda/scene.xml" : "franka_emika_panda/scene_mj222.xml");
  if (path.empty()) GTEST_SKIP() << "Menagerie's Panda is absent";
  ModelPtr m = Load(path);
  ASSERT_TRUE(m);
  Tighten(m.get());
  std::vector<std::string> names;
  for (const char* j : {"joint1", "joint2", "joint4", "joint6"}) {
    names.push_back(std::string("joint:") + j + ":damping");
    names.push_back(std::string("joint:") + j + ":armature");
  }
  names.push_back("actuator:actuator1:gainprm:0");
  names.push_back("actuator:actuator4:biasprm:1");
  names.push_back("body:link5:mass");
  for (int integrator : kSingleStage) {
    m->opt.integrator = integrator;
    for (int solver : Solvers()) {
      HandlePtr ck = MakeFor(m.get(), solver);
      DataPtr d(mj_makeData(m.get()));
      if (m->nkey) mj_resetDataKeyframe(m.get(), d.get(), 0);
      for (int i = 0; i < m->nu; i++) d->ctrl[i] = d->qpos[i] + 0.1 * std::sin(i + 1.0);
      for (int t = 0; t < 50; t++) ck_step(ck.get(), m.get(), d.get());
      Check(ck.get(), m.get(), d.get(), names, 1e-5,
            std::string("panda ") + ck_solverName(solver) + " integrator " +
                std::to_string(integrator));
    }
  }
}

TEST_F(ParamJacTest, BadInputIsRefusedWithAMessage) {
  ModelPtr m = LoadString(kBoxXml);
  ASSERT_TRUE(m);
  char error[1024];
  ckParam p;
  EXPECT_EQ(-1, ck_parseParam(m.get(), "geom:box:colour:0", &p, error, sizeof(error)));
  EXPECT_NE(std::string(error).find("supported: body:NAME:mass"), std::string::npos) << error;
  EXPECT_EQ(-1, ck_parseParam(m.get(), "geom:nothere:friction:0", &p, error, sizeof(error)));
  EXPECT_NE(std::string(error).find("no geom named 'nothere' (ids 0..2)"), std::string::npos)
      << error;
  EXPECT_EQ(-1, ck_parseParam(m.get(), "geom:box:friction:3", &p, error, sizeof(error)));
  EXPECT_NE(std::string(error).find("index 3 out of range 0..2"), std::string::npos) << error;
  EXPECT_EQ(-1, ck_parseParam(m.get(), "body:9:mass", &p, error, sizeof(error)));
  EXPECT_NE(std::string(error).find("id 9 out of range 1..2"), std::string::npos) << error;
  EXPECT_EQ(-1, ck_parseParam(m.get(), "joint:hinge:damping:1", &p, error, sizeof(error)));
  EXPECT_NE(std::string(error).find("has dofs 0..0"), std::string::npos) << error;
  ASSERT_EQ(0, ck_parseParam(m.get(), "joint:box_free:damping:4", &p, error, sizeof(error)));
  EXPECT_EQ(ckPARAM_DOF_DAMPING, p.kind);
  EXPECT_EQ(4, p.id);
  ASSERT_EQ(0, ck_parseParam(m.get(), "gravity:2", &p, error, sizeof(error)));
  EXPECT_EQ(ckPARAM_GRAVITY, p.kind);
  EXPECT_EQ(2, p.index);
  EXPECT_STREQ("geom:friction", ck_paramKindName(ckPARAM_GEOM_FRICTION));
  EXPECT_EQ(nullptr, ck_paramKindName(ckNPARAMKIND));

  HandlePtr ck = MakeFor(m.get(), ckSOL_MUJOCO);
  DataPtr d(mj_makeData(m.get()));
  const int ndx = 2 * m->nv + m->na;
  Vec dx(ndx * 2);
  const ckParam good{ckPARAM_BODY_MASS, 1, 0};
  EXPECT_EQ(-1, ck_paramJac(ck.get(), m.get(), d.get(), &good, 0, dx.data(), nullptr, nullptr));
  EXPECT_NE(std::string(ck_lastError(ck.get())).find("np = 0"), std::string::npos);
  EXPECT_EQ(-1, ck_paramJac(ck.get(), m.get(), d.get(), nullptr, 1, dx.data(), nullptr, nullptr));
  for (const ckParam& bad : {ckParam{ckNPARAMKIND, 0, 0}, ckParam{ckPARAM_GEOM_SIZE, 7, 0},
                             ckParam{ckPARAM_GEOM_SOLIMP, 1, 5}, ckParam{ckPARAM_BODY_MASS, 0, 0},
                             ckParam{ckPARAM_GRAVITY, 0, 3}}) {
    const ckParam two[2] = {good, bad};
    EXPECT_EQ(-1, ck_paramJac(ck.get(), m.get(), d.get(), two, 2, dx.data(), nullptr, nullptr))
        << bad.kind << " " << bad.id << " " << bad.index;
    EXPECT_NE(std::string(ck_lastError(ck.get())).find("params[1]: "), std::string::npos)
        << ck_lastError(ck.get());
  }
  // no derivative workspace
  ckSettings s = Settings(ckSOL_MUJOCO);
  s.deriv.enabled = 0;
  HandlePtr plain = Make(m.get(), &s);
  EXPECT_EQ(-1, ck_paramJac(plain.get(), m.get(), d.get(), &good, 1, dx.data(), nullptr, nullptr));
}

// every byte of m and d before and after; no allocation in the call
TEST_F(ParamJacTest, LeavesModelAndDataUntouchedAndDoesNotAllocate) {
  ModelPtr m = LoadString(kBoxXml);
  ASSERT_TRUE(m);
  const std::vector<ckParam> params = Parse(m.get(), kBoxParams);
  const int np = params.size(), ndx = 2 * m->nv + m->na, ns = m->nsensordata;
  for (int integrator : {mjINT_EULER, mjINT_IMPLICIT, mjINT_RK4}) {
    m->opt.integrator = integrator;
    for (int solver : Solvers()) {
      HandlePtr ck = MakeFor(m.get(), solver);
      DataPtr d(mj_makeData(m.get()));
      BoxScenes()[1].prepare(ck.get(), m.get(), d.get());
      Vec dx(static_cast<size_t>(ndx) * np), ds(static_cast<size_t>(ns) * np);
      std::vector<int> how(np);
      ck_paramJac(ck.get(), m.get(), d.get(), params.data(), np, dx.data(), ds.data(),
                  how.data());  // warm
      const std::vector<unsigned char> mhead(
          reinterpret_cast<unsigned char*>(m.get()),
          reinterpret_cast<unsigned char*>(m.get()) + sizeof(mjModel));
      const std::vector<unsigned char> mbuf(static_cast<unsigned char*>(m->buffer),
                                            static_cast<unsigned char*>(m->buffer) + m->nbuffer);
      const std::vector<unsigned char> dbuf(static_cast<unsigned char*>(d->buffer),
                                            static_cast<unsigned char*>(d->buffer) + d->nbuffer);
      AllocationCounter counter;
      if (AllocationCounter::Available()) counter.Start();
      const int ret = ck_paramJac(ck.get(), m.get(), d.get(), params.data(), np, dx.data(),
                                  ds.data(), how.data());
      const long n = AllocationCounter::Available() ? counter.Stop() : 0;
      EXPECT_EQ(1, ret) << ck_lastError(ck.get());
      EXPECT_EQ(n, 0) << ck_solverName(solver) << " allocated " << n << " times, integrator "
                      << integrator;
      EXPECT_EQ(0, std::memcmp(mhead.data(), m.get(), sizeof(mjModel)));
      EXPECT_EQ(0, std::memcmp(mbuf.data(), m->buffer, m->nbuffer));
      EXPECT_EQ(0, std::memcmp(dbuf.data(), d->buffer, d->nbuffer));
    }
  }
}

}  // namespace
}  // namespace contactkit::test
