// Copyright 2026 The contactkit developers.
//
// tools::RunIlqr: the minimum-effort transfer of a mass (closed form), and a box pushed 1 m on the
// floor with contactkit's Jacobians and with MuJoCo's finite differences.
#include "tools/common/ilqr.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "support/fixture.h"

namespace contactkit::test {
namespace {

class IlqrTest : public MujocoTest {};

const char kSlider[] = R"(
<mujoco>
  <option timestep="0.01" gravity="0 0 0"/>
  <worldbody>
    <body>
      <joint name="x" type="slide" axis="1 0 0"/>
      <geom type="sphere" size="0.1" mass="2"/>
    </body>
  </worldbody>
  <actuator><motor joint="x"/></actuator>
</mujoco>)";

// a 2 kg mass from rest at 0 to rest at 1 m in 1 s with least sum of 0.5 r u^2: with MuJoCo's
// semi-implicit Euler v_T = h/m sum u_t and x_T = h^2/m sum (T - t) u_t, so the optimum is
// u = G' (G G')^-1 (1, 0) for the two rows of G
TEST_F(IlqrTest, MinimumEffortTransferMatchesClosedForm) {
  ModelPtr m = LoadString(kSlider);
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  const int T = 100;
  const double h = 0.01, mass = 2, r = 0.01;
  tools::IlqrTask task;
  task.horizon = T;
  task.goal_qpos = {1};
  task.goal_qvel = {0};
  task.q = {0, 0};
  task.r = {r};
  task.constrained = {0, 1};
  tools::IlqrOptions options;
  options.violation_tol = 1e-6;
  const tools::IlqrResult res =
      tools::RunIlqr(m.get(), d.get(), nullptr, tools::kIlqrMujocoFD, task, options);
  ASSERT_TRUE(res.error.empty()) << res.error;
  EXPECT_LT(res.violation, 1e-6);

  // closed form
  double g[2][T];
  for (int t = 0; t < T; t++) {
    g[0][t] = h * h / mass * (T - t);
    g[1][t] = h / mass;
  }
  double gg[2][2] = {};
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 2; b++)
      for (int t = 0; t < T; t++) gg[a][b] += g[a][t] * g[b][t];
  const double det = gg[0][0] * gg[1][1] - gg[0][1] * gg[1][0];
  const double y[2] = {gg[1][1] / det, -gg[1][0] / det};  // (G G')^-1 (1, 0)
  double cost = 0;
  for (int t = 0; t < T; t++) {
    const double u = g[0][t] * y[0] + g[1][t] * y[1];
    EXPECT_NEAR(res.ctrl[t], u, 1e-4 * std::fabs(u) + 1e-6) << "step " << t;
    cost += 0.5 * r * u * u;
  }
  EXPECT_NEAR(res.cost, cost, 1e-4 * cost);
}

// pushed_box.xml from rest to rest at (x, 0, z) in 1 s, the effort weighted 1e-2
tools::IlqrTask BoxTask(double x, double z) {
  tools::IlqrTask task;
  task.goal_qpos = {x, 0, z, 1, 0, 0, 0};
  task.goal_qvel.assign(6, 0.0);
  task.q.assign(12, 0.0);
  task.r = {1e-2, 1e-2};
  task.constrained = {0, 1, 2, 6, 7, 8};
  return task;
}

// Dojo's "box right": a 1 kg box resting on the floor (mu 0.5) pushed to rest 1 m away in 1 s
TEST_F(IlqrTest, BoxRightReachesItsGoal) {
  ModelPtr m = Load(BundledModel("pushed_box.xml"));
  ASSERT_TRUE(m);
  m->opt.timestep = 0.01;
  DataPtr d(mj_makeData(m.get()));
  mj_forward(m.get(), d.get());
  const tools::IlqrTask task = BoxTask(1, 0.1);
  // hard contact (Dojo's setting): the box slides under a push above mu m g
  const int solver = ck_solverAvailable(ckSOL_LCP) ? ckSOL_LCP : ckSOL_MUJOCO;
  ckSettings s = Settings(solver);
  HandlePtr ck = Make(m.get(), &s);
  const tools::IlqrResult res = tools::RunIlqr(m.get(), d.get(), ck.get(), tools::kIlqrContactkit,
                                               task, tools::IlqrOptions());
  EXPECT_TRUE(res.error.empty()) << res.error;
  EXPECT_LT(res.violation, 3e-3) << ck_solverName(solver);
  EXPECT_GT(res.iterations, 0);
  // the plan is what it claims: replayed with ck_step it ends at the goal
  DataPtr e(mj_makeData(m.get()));
  mj_copyData(e.get(), m.get(), d.get());
  ck_reset(ck.get());
  for (int t = 0; t < task.horizon; t++) {
    mju_copy(e->ctrl, res.ctrl.data() + t * m->nu, m->nu);
    ck_step(ck.get(), m.get(), e.get());
  }
  EXPECT_NEAR(e->qpos[0], 1, 3e-3);
  EXPECT_NEAR(e->qvel[0], 0, 3e-3);
}

// Dojo's "box up" by Adam on lcp's reverse-mode gradients: plain, a thrust below the weight leaves
// the resting box where it is and the gradient is zero, so nothing moves; complementarity-aware,
// the contact may open where the loss asks, and the box reaches its goal 1 m up
TEST_F(IlqrTest, ComplementarityAwareAdamLiftsTheBox) {
  if (!ck_solverAvailable(ckSOL_LCP)) GTEST_SKIP() << "solver lcp is not in this build";
  ModelPtr m = Load(BundledModel("pushed_box.xml"));
  ASSERT_TRUE(m);
  m->opt.timestep = 0.01;
  DataPtr d(mj_makeData(m.get()));
  mj_forward(m.get(), d.get());
  const tools::IlqrTask task = BoxTask(0, 1.1);
  tools::IlqrOptions options;
  options.max_iterations = 300;
  options.max_outer = 5;
  for (int aware = 0; aware < 2; aware++) {
    ckSettings s = Settings(ckSOL_LCP);
    s.deriv.complementarity_aware = aware;
    HandlePtr ck = Make(m.get(), &s);
    const tools::IlqrResult res = tools::RunAdam(m.get(), d.get(), ck.get(), task, options);
    ASSERT_TRUE(res.error.empty()) << res.error;
    if (aware) {
      EXPECT_LT(res.violation, options.violation_tol);
    } else {
      // the box never left the floor (resting 0.15 mm deep, at lcp's slop); Adam's normalized
      // steps follow the gradient's rounding (1e-17) no further than 1e-3 N
      EXPECT_NEAR(res.violation, 1.0, 1e-3);
      double most = 0;
      for (double u : res.ctrl) most = std::max(most, std::fabs(u));
      EXPECT_LT(most, 1e-3);
    }
  }
}

// Dojo's "box up" by iLQR on lcp's Jacobians: plain, the resting box's thrust column is zero (the
// contacts clamp) and the plan stays on the floor; with ck_transitionJacAware and the cost-to-go
// gradient as its direction, the contacts that the goal pulls apart are treated as separating,
// and the box reaches its goal 1 m up; so does comfree's aware form (its plain Jacobians leave
// the box 0.98 m short: docs/benchmarks.md), ipm's (at kappa_grad: impulses of the contacts pulled
// apart held fixed) and the mujoco solver's (their rows leave the soft tangent's active set)
TEST_F(IlqrTest, ComplementarityAwareIlqrLiftsTheBox) {
  if (!ck_solverAvailable(ckSOL_LCP)) GTEST_SKIP() << "solver lcp is not in this build";
  ModelPtr m = Load(BundledModel("pushed_box.xml"));
  ASSERT_TRUE(m);
  m->opt.timestep = 0.01;
  DataPtr d(mj_makeData(m.get()));
  mj_forward(m.get(), d.get());
  const tools::IlqrTask task = BoxTask(0, 1.1);
  // lcp plain and aware; comfree (without anchors) aware: a contact the cost-to-go pulls apart
  // keeps its force in the tangent
  struct Case {
    int solver;
    tools::IlqrSource source;
  };
  for (const Case& c :
       {Case{ckSOL_LCP, tools::kIlqrContactkit}, Case{ckSOL_LCP, tools::kIlqrContactkitAware},
        Case{ckSOL_COMFREE, tools::kIlqrContactkitAware},
        Case{ckSOL_IPM, tools::kIlqrContactkitAware},
        Case{ckSOL_MUJOCO, tools::kIlqrContactkitAware}}) {
    if (!ck_solverAvailable(c.solver)) continue;
    const tools::IlqrSource source = c.source;
    ckSettings s = Settings(c.solver);
    s.comfree.anchor = 0;
    HandlePtr ck = Make(m.get(), &s);
    const tools::IlqrResult res =
        tools::RunIlqr(m.get(), d.get(), ck.get(), source, task, tools::IlqrOptions());
    ASSERT_TRUE(res.error.empty()) << res.error;
    std::printf("iLQR box up, %s%s: violation %.3g after %d iterations\n", ck_solverName(c.solver),
                source == tools::kIlqrContactkitAware ? " aware" : "", res.violation,
                res.iterations);
    if (source == tools::kIlqrContactkitAware) {
      EXPECT_LT(res.violation, tools::IlqrOptions().violation_tol);
      // the plan is what it claims: replayed with ck_step it ends 1 m up
      DataPtr e(mj_makeData(m.get()));
      mj_copyData(e.get(), m.get(), d.get());
      ck_reset(ck.get());
      for (int t = 0; t < task.horizon; t++) {
        mju_copy(e->ctrl, res.ctrl.data() + t * m->nu, m->nu);
        ck_step(ck.get(), m.get(), e.get());
      }
      EXPECT_NEAR(e->qpos[2], 1.1, 3e-3);
    } else {
      EXPECT_NEAR(res.violation, 1.0, 1e-3);  // never left the floor
    }
  }
}

}  // namespace
}  // namespace contactkit::test
