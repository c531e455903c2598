// Copyright 2026 The contactkit developers.
//
// Helpers of the derivative tests: Jacobian storage, relative errors, tightened solvers.
#ifndef CONTACTKIT_TESTS_PLUGIN_DERIV_DERIV_UTIL_H_
#define CONTACTKIT_TESTS_PLUGIN_DERIV_DERIV_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdio>
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

}  // namespace contactkit::test

#endif  // CONTACTKIT_TESTS_PLUGIN_DERIV_DERIV_UTIL_H_
