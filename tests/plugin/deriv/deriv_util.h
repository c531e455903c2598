// Copyright 2026 The contactkit developers.
//
// Helpers of the derivative tests: Jacobian storage, relative errors, tightened solvers.
#ifndef CONTACTKIT_TESTS_PLUGIN_DERIV_DERIV_UTIL_H_
#define CONTACTKIT_TESTS_PLUGIN_DERIV_DERIV_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/fixture.h"

namespace contactkit::test {

// A, B, C, D of one step, row-major as mjd_transitionFD
struct Jacobians {
  std::vector<double> A, B, C, D;
  explicit Jacobians(const mjModel* m)
      : A((2 * m->nv + m->na) * (2 * m->nv + m->na)),
        B((2 * m->nv + m->na) * std::max(static_cast<int>(m->nu), 1)),
        C(std::max(static_cast<int>(m->nsensordata), 1) * (2 * m->nv + m->na)),
        D(std::max(static_cast<int>(m->nsensordata), 1) * std::max(static_cast<int>(m->nu), 1)) {}
};

// ||a - b||_F / max(||b||_F, floor)
inline double RelativeError(const std::vector<double>& a, const std::vector<double>& b,
                            double floor = 1e-150) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); i++) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, floor * floor));
}

// the largest differences of a row-major matrix with ncol columns, for failure messages
inline std::string WorstEntries(const mjModel* m, const std::vector<double>& a,
                                const std::vector<double>& b, int ncol, int count = 6) {
  std::vector<int> idx(a.size());
  for (size_t i = 0; i < a.size(); i++) idx[i] = static_cast<int>(i);
  std::partial_sort(idx.begin(), idx.begin() + std::min<size_t>(count, idx.size()), idx.end(),
                    [&](int x, int y) { return std::fabs(a[x] - b[x]) > std::fabs(a[y] - b[y]); });
  std::string out;
  for (int k = 0; k < std::min<int>(count, static_cast<int>(idx.size())); k++) {
    char buf[160];
    const int i = idx[k];
    std::snprintf(buf, sizeof(buf), "  (%d, %d): %.9g vs %.9g\n", i / ncol, i % ncol, a[i], b[i]);
    out += buf;
  }
  return out;
}

// the VJP the Jacobians give: gx = dx' A (+ ds' C), gu = dx' B (+ ds' D) (ds: nsensordata, or
// empty)
inline void TransposedProducts(const mjModel* m, const Jacobians& jac,
                               const std::vector<double>& dx, const std::vector<double>& ds,
                               std::vector<double>* gx, std::vector<double>* gu) {
  const int ndx = 2 * m->nv + m->na, nu = m->nu, ns = static_cast<int>(ds.size());
  gx->assign(ndx, 0.0);
  gu->assign(nu, 0.0);
  for (int j = 0; j < ndx; j++) {
    for (int i = 0; i < ndx; i++) (*gx)[j] += jac.A[i * ndx + j] * dx[i];
    for (int i = 0; i < ns; i++) (*gx)[j] += jac.C[i * ndx + j] * ds[i];
  }
  for (int j = 0; j < nu; j++) {
    for (int i = 0; i < ndx; i++) (*gu)[j] += jac.B[i * nu + j] * dx[i];
    for (int i = 0; i < ns; i++) (*gu)[j] += jac.D[i * nu + j] * ds[i];
  }
}

// dx' [A B] of ck's ck_transitionJac at d (no sensors)
inline void JacobianProducts(ckHandle* ck, const mjModel* m, mjData* d,
                             const std::vector<double>& dx, std::vector<double>* gx,
                             std::vector<double>* gu) {
  Jacobians jac(m);
  ASSERT_EQ(0, ck_transitionJac(ck, m, d, jac.A.data(), jac.B.data(), nullptr, nullptr))
      << ck_lastError(ck);
  TransposedProducts(m, jac, dx, {}, gx, gu);
}

// free, hinge, ball and slide joints in contact: a box on the floor; an arm whose shoulder (a
// spring and a motor) rests on its limit and whose tip (a ball joint with friction loss) presses
// on a second box; a torso on a free joint with a limited, hinged limb and a slid sphere (a spring
// and friction loss) lying on the floor. Without limits (limits false: no limit and no friction
// loss) the motors move their joints under hard solvers too, so that B is not zero
inline std::string MixedJointScene(const std::string& cone = "pyramidal", bool limits = true) {
  const std::string shoulder = limits ? R"( limited="true" range="-10 -2")" : "";
  const std::string ball = limits ? R"( frictionloss="0.01")" : "";
  const std::string knee = limits ? R"( limited="true" range="-5 5")" : "";
  const std::string slide = limits ? R"( frictionloss="0.05")" : "";
  return R"(
<mujoco>
  <option timestep="0.005" cone=")" +
         cone + R"("/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="1 0 0.4">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.2" stiffness="3")" +
         shoulder + R"(/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body pos="0.3 0 0">
        <joint type="ball" damping="0.1")" +
         ball + R"(/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.15" size="0.03"/>
      </body>
    </body>
    <body pos="1.3 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="-1 0 0.15">
      <freejoint/>
      <geom type="box" size="0.2 0.1 0.05" mass="2"/>
      <body pos="0.2 0 0">
        <joint name="knee" type="hinge" axis="0 1 0" damping="0.3")" +
         knee + R"(/>
        <geom type="capsule" fromto="0 0 0 0.2 0 -0.1" size="0.04" mass="0.5"/>
        <body pos="0.2 0 -0.1">
          <joint type="slide" axis="1 0 0" damping="0.4" stiffness="5")" +
         slide + R"(/>
          <geom type="sphere" size="0.05" mass="0.3"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="shoulder" gear="2"/>
    <motor joint="knee" gear="1"/>
  </actuator>
</mujoco>)";
}

// steps of ck from d with controls held at 0.2 (i % 3) - 0.1, then the velocities nudged by
// 0.1 sin(0.7 i): a state in contact off the solver's fixed points, for the reverse-mode tests
inline void SettleAndNudge(ckHandle* ck, const mjModel* m, mjData* d, int steps) {
  for (int i = 0; i < m->nu; i++) d->ctrl[i] = 0.2 * (i % 3) - 0.1;
  for (int t = 0; t < steps; t++) ck_step(ck, m, d);
  for (int i = 0; i < m->nv; i++) d->qvel[i] += 0.1 * std::sin(0.7 * i);
}

// step with MuJoCo's pipeline
inline void Settle(const mjModel* m, mjData* d, int steps) {
  for (int t = 0; t < steps; t++) mj_step(m, d);
}

// MuJoCo's solver to (near) exact convergence, so that differences see its exact solution. From
// MuJoCo 3.11 Newton also stops once the Newton decrement 0.5 g'H^-1 g is below the tolerance,
// which with stiff elliptic friction (the hand's impratio 10) happens at a gradient of 3e-9:
// tolerance 0 there runs it until a line search makes no progress
inline void Tighten(mjModel* m) {
  const bool decrement = mjVERSION_HEADER >= 3011000 && m->opt.cone == mjCONE_ELLIPTIC;
  m->opt.tolerance = decrement ? 0 : 1e-14;
  m->opt.iterations = 200;
}

// a test of a path of the reverse mode against the VJP with the path off and dx' [A B]
class ReversePathTest : public MujocoTest {
 protected:
  std::function<void(ckSettings*)> tweak_;  // applied to each handle's settings (nullable)

  // m under solver after SettleAndNudge, in `variants` of 0: no joint damping, 1: m's, 2: m's and
  // lcp's split impulse toggled: the VJP of a fixed adjoint with set(true), which runs the path
  // once (calls() grows by one), and with set(false), and dx' [A B] of ck_transitionJac, within
  // 1e-10 of each other
  template <class Set, class Calls>
  void CompareReverse(mjModel* m, int solver, int steps, const std::string& name, int variants,
                      Set set, Calls calls) {
    const std::vector<double> damping(m->dof_damping, m->dof_damping + m->nv);
    const int ndx = 2 * m->nv + m->na, nu = m->nu;
    for (int variant = 0; variant < variants; variant++) {
      for (int i = 0; i < m->nv; i++) m->dof_damping[i] = variant ? damping[i] : 0;
      const std::string what = name + " variant " + std::to_string(variant);
      DataPtr d(mj_makeData(m));
      ckSettings s = Settings(solver);
      if (variant == 2) s.lcp.split_impulse = !s.lcp.split_impulse;
      if (tweak_) tweak_(&s);
      HandlePtr ck = Make(m, &s);
      SettleAndNudge(ck.get(), m, d.get(), steps);
      ASSERT_GT(d->ncon, 0) << what;

      std::vector<double> dx(ndx), gx[2], gu[2];
      for (int i = 0; i < ndx; i++) dx[i] = std::sin(1.0 + i);
      for (int pass = 0; pass < 2; pass++) {
        set(pass == 0);
        const int before = calls();
        gx[pass].assign(ndx, 0);
        gu[pass].assign(nu, 0);
        ASSERT_EQ(0, ck_transitionVJP(ck.get(), m, d.get(), dx.data(), nullptr, gx[pass].data(),
                                      gu[pass].data()))
            << what << ": " << ck_lastError(ck.get());
        EXPECT_EQ(pass == 0 ? before + 1 : before, calls()) << what;
      }
      set(true);
      Jacobians jac(m);
      ASSERT_EQ(
          0, ck_transitionJac(ck.get(), m, d.get(), jac.A.data(), jac.B.data(), nullptr, nullptr))
          << what;
      std::vector<double> ex, eu;
      TransposedProducts(m, jac, dx, {}, &ex, &eu);
      const double e[4] = {RelativeError(gx[0], gx[1]), RelativeError(gu[0], gu[1]),
                           RelativeError(gx[0], ex), RelativeError(gu[0], eu)};
      std::printf("  %s: path/off %.1e %.1e, path/Jacobian %.1e %.1e\n", what.c_str(), e[0], e[1],
                  e[2], e[3]);
      for (double v : e) EXPECT_LT(v, 1e-10) << what;
    }
    for (int i = 0; i < m->nv; i++) m->dof_damping[i] = damping[i];
  }
};

// a test comparing a solver's Jacobians (by default the `mujoco` solver's) with one path of the
// module on and off
class PathToggleTest : public MujocoTest {
 protected:
  std::function<void(ckSettings*)> tweak_;  // applied to CompareOnHumanoid's settings (nullable)
  std::function<void(const mjModel*, mjData*)> tweak_state_;  // ... and to its state (nullable)

  // A and B with set(true) into on and with set(false) into off, then set(true) again; false
  // (the failure recorded) if a Jacobian fails
  template <class Set>
  bool OnOff(const mjModel* m, mjData* d, ckHandle* ck, Set set, Jacobians* on, Jacobians* off,
             const std::string& what) {
    bool ok = true;
    for (int pass = 0; pass < 2 && ok; pass++) {
      set(pass == 0);
      Jacobians& jac = pass == 0 ? *on : *off;
      const int rc = ck_transitionJac(ck, m, d, jac.A.data(), jac.B.data(), nullptr, nullptr);
      EXPECT_EQ(0, rc) << what << ": " << ck_lastError(ck);
      ok = rc == 0;
    }
    set(true);
    return ok;
  }

  // the humanoid in contact in three variants (pyramidal, elliptic, pyramidal with joint damping:
  // Euler's damped solve), each after 150 steps of solver with the velocities nudged; A and B
  // with set(true) and with set(false), then check(m, d, on, off, what) with set(true) restored.
  // A within tol of each other (0: bit for bit), B bit for bit (control columns: no row, no dJ,
  // no dv)
  template <class Set, class Check>
  void CompareOnHumanoid(Set set, Check check, int solver = ckSOL_MUJOCO, double tol = 1e-13,
                         double tol_b = 0) {
    ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
    ASSERT_TRUE(m);
    const int ndx = 2 * m->nv + m->na, nv = m->nv;
    for (int variant = 0; variant < 3; variant++) {
      m->opt.cone = variant == 1 ? mjCONE_ELLIPTIC : mjCONE_PYRAMIDAL;
      if (variant == 2) {
        for (int i = 6; i < nv; i++) m->dof_damping[i] = 0.5;
      }
      ckSettings s = Settings(solver);
      if (tweak_) tweak_(&s);
      HandlePtr ck = Make(m.get(), &s);
      DataPtr d(mj_makeData(m.get()));
      for (int t = 0; t < 150; t++) ck_step(ck.get(), m.get(), d.get());
      for (int i = 0; i < nv; i++) d->qvel[i] += 0.1 * std::sin(1.0 + i);
      if (tweak_state_) tweak_state_(m.get(), d.get());
      const std::string what =
          std::string(ck_solverName(solver)) + ", variant " + std::to_string(variant);
      ASSERT_GE(d->ncon, 2) << what;
      Jacobians on(m.get()), off(m.get());
      ASSERT_TRUE(OnOff(m.get(), d.get(), ck.get(), set, &on, &off, what));
      if (tol > 0) {
        EXPECT_LT(RelativeError(on.A, off.A), tol) << what << "\n"
                                                   << WorstEntries(m.get(), on.A, off.A, ndx);
      } else {
        EXPECT_EQ(0, std::memcmp(on.A.data(), off.A.data(), on.A.size() * sizeof(double)))
            << what << "\n"
            << WorstEntries(m.get(), on.A, off.A, ndx);
      }
      EXPECT_LE(RelativeError(on.B, off.B), tol_b) << what;  // (0: bit for bit)
      check(m.get(), d.get(), on, off, what);
    }
  }
};

}  // namespace contactkit::test

#endif  // CONTACTKIT_TESTS_PLUGIN_DERIV_DERIV_UTIL_H_
