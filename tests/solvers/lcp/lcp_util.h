// Copyright 2026 The contactkit developers.
//
// Helpers for the lcp tests: a problem extracted from a MuJoCo state, an lcp solver set up for
// it, and an independent check of the boxed complementarity of a solution.
#ifndef CONTACTKIT_TESTS_SOLVERS_LCP_LCP_UTIL_H_
#define CONTACTKIT_TESTS_SOLVERS_LCP_LCP_UTIL_H_

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "solvers/lcp/lcp.h"
#include "support/extracted.h"
#include "support/fixture.h"

namespace contactkit::test {

// settings of solver "lcp" with defaults
inline ckSettings LcpSettings() {
  ckSettings s;
  ck_defaultSettings(&s);
  s.solver = ckSOL_LCP;
  return s;
}

// a table on four feet of different friction (elliptic cones, its centre of mass at the feet's
// contact height so that friction neither tilts it nor presses a foot): set sliding, the feet's
// friction bounds, coupled to their normals by four different mu, give the normals' null-space
// pattern a generalized force
inline const char* LcpTableScene() {
  return R"(<mujoco><option cone="elliptic"/>
    <worldbody><geom type="plane" size="2 2 .1" friction=".1"/>
      <body pos="0 0 .03"><freejoint/>
        <inertial pos="0 0 -.02" mass="1" diaginertia=".01 .01 .02"/>
        <geom type="sphere" size=".02" pos=".1 .1 0" friction=".3"/>
        <geom type="sphere" size=".02" pos="-.1 .1 0" friction=".5"/>
        <geom type="sphere" size=".02" pos="-.1 -.1 0" friction=".7"/>
        <geom type="sphere" size=".02" pos=".1 -.1 0" friction=".9"/></body>
    </worldbody></mujoco>)";
}

// an lcp solver set up for the problems of e
inline std::unique_ptr<LcpSolver> MakeLcp(const Extracted& e, const ckSettings& s) {
  auto solver = std::make_unique<LcpSolver>();
  std::string err;
  EXPECT_TRUE(solver->Setup(e.storage.dims(), s, &err)) << err;
  return solver;
}

// Boxed complementarity of a solution, checked from scratch: w = J v+ + stabilization + cfm x
// with x = h f, the bounds of each row kind, and the natural-map residual
// max_i d_i |x_i - clamp(x_i - w_i / d_i, lo_i, hi_i)| in velocity units (d_i = J_i M^-1 J_i').
// Rows outside islands must carry no force.
inline double BoxedResidual(const Problem& p, const Solution& sol, const LcpSolver& solver,
                            const ckLcpSettings& s) {
  const double h = p.h;
  std::vector<double> y(p.nv);
  double res = 0;
  for (int i = 0; i < p.nrow; i++) {
    if (p.islands.row_island[i] < 0) {
      res = std::max(res, std::fabs(sol.force[i]));
      continue;
    }
    const double x = h * sol.force[i];
    const double b0 = p.J.Dot(i, p.v_free);
    double dpos, dvel;
    const double w =
        p.J.Dot(i, sol.v_next) + solver.Stabilization(p, i, b0, &dpos, &dvel) + s.cfm * x;
    std::fill(y.begin(), y.end(), 0.0);
    p.J.AddRowTo(i, 1, y.data());
    p.mass.Solve(y.data());
    const double d = p.J.Dot(i, y.data()) + s.cfm;
    double lo = 0, hi = HUGE_VAL;
    switch (p.kind[i]) {
      case kRowEquality:
        lo = -HUGE_VAL;
        break;
      case kRowFriction:
        lo = -h * p.floss[i];
        hi = h * p.floss[i];
        break;
      case kRowContactFriction: {
        int c = 0;
        while (!(p.con[c].row < i && i < p.con[c].row + p.con[c].dim)) c++;
        hi = p.con[c].mu[i - p.con[c].row - 1] * std::max(h * sol.force[p.con[c].row], 0.0);
        lo = -hi;
        break;
      }
      default:
        break;
    }
    const double t = std::min(std::max(x - w / d, lo), hi);
    res = std::max(res, std::fabs(x - t) * d);
  }
  return res;
}

// index of a body by name
inline int BodyId(const mjModel* m, const char* name) { return mj_name2id(m, mjOBJ_BODY, name); }

}  // namespace contactkit::test

#endif  // CONTACTKIT_TESTS_SOLVERS_LCP_LCP_UTIL_H_
