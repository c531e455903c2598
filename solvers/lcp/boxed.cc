// Copyright 2026 The contactkit developers.
#include "solvers/lcp/boxed.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace contactkit {
namespace {

constexpr int kBlockTries = 3;  // non-improving block flips before single pivots

bool Bilateral(const DenseLcp& lcp, int i) {
  return lcp.findex[i] < 0 && std::isinf(lcp.lo[i]) && std::isinf(lcp.hi[i]);
}

// bounds of row i at x
void BoundsAt(const DenseLcp& lcp, const double* x, int i, double* l, double* u) {
  const int f = lcp.findex[i];
  if (f >= 0) {
    const double m = lcp.mu[i] * std::max(x[f], 0.0);
    *l = -m;
    *u = m;
  } else {
    *l = lcp.lo[i];
    *u = lcp.hi[i];
  }
}

// diagonal used to turn x into velocity units
double Diag(const DenseLcp& lcp, int i) {
  const double d = lcp.A[i + static_cast<size_t>(i) * lcp.ld];
  return d > 0 ? d : 1;
}

// a friction row whose normal is not clamped: fixed at zero
bool Collapsed(const DenseLcp& lcp, const signed char* state, int i) {
  const int f = lcp.findex[i];
  return f >= 0 && state[f] != kLcpClamped;
}

// consistent classification: bilateral rows clamped, friction of unclamped normals at a bound,
// no upper state without an upper bound
void Normalize(const DenseLcp& lcp, signed char* state) {
  for (int i = 0; i < lcp.n; i++) {
    if (Bilateral(lcp, i)) {
      state[i] = kLcpClamped;
    } else if (lcp.findex[i] < 0 && state[i] == kLcpUpper && std::isinf(lcp.hi[i])) {
      state[i] = kLcpLower;
    } else if (lcp.findex[i] < 0 && state[i] == kLcpLower && std::isinf(lcp.lo[i])) {
      state[i] = kLcpUpper;
    }
  }
  for (int i = 0; i < lcp.n; i++) {
    if (Collapsed(lcp, state, i) && state[i] == kLcpClamped) state[i] = kLcpLower;
  }
}

// a row entering C brings the friction rows of its contact along (sticking first)
void EnterClamped(const DenseLcp& lcp, signed char* state, int i) {
  state[i] = kLcpClamped;
  for (int j = 0; j < lcp.n; j++) {
    if (lcp.findex[j] == i) state[j] = kLcpClamped;
  }
}

}  // namespace

void BoxedLcpSolver::Allocate(int nmax) {
  nmax_ = nmax;
  const size_t n = std::max(nmax, 1);
  K_.assign(n * n, 0);
  c_.assign(n, 0);
  y_.assign(2 * n, 0);
  xb_.assign(n, 0);
  wb_.assign(n, 0);
  xs_.assign(n, 0);
  ws_.assign(n, 0);
  cidx_.assign(n, 0);
  pos_.assign(n, 0);
  list_.assign(n, 0);
  target_.assign(n, 0);
  s2_.assign(n, 0);
  coddmem_.assign(Cod::Doubles(static_cast<int>(n)), 0);
  codimem_.assign(Cod::Ints(static_cast<int>(n)), 0);
  cod_.Bind(coddmem_.data(), codimem_.data(), static_cast<int>(n));
}

int BoxedLcpSolver::ClampedSet(const DenseLcp& lcp, const signed char* state, int* cidx,
                               int* pos) {
  int k = 0;
  for (int i = 0; i < lcp.n; i++) {
    if (state[i] == kLcpClamped) {
      pos[i] = k;
      cidx[k++] = i;
    } else {
      pos[i] = -1;
    }
  }
  return k;
}

void BoxedLcpSolver::BoundValue(const DenseLcp& lcp, const signed char* state, int i,
                                double* coef, double* g) {
  const int f = lcp.findex[i];
  *coef = 0;
  *g = 0;
  if (f < 0) {
    *g = state[i] == kLcpUpper ? lcp.hi[i] : lcp.lo[i];
    return;
  }
  const double sign = state[i] == kLcpUpper ? 1 : -1;
  if (state[f] == kLcpClamped) {
    *coef = sign * lcp.mu[i];
  } else {
    // the normal sits at a constant bound (0 for contacts)
    double cf, gf;
    BoundValue(lcp, state, f, &cf, &gf);
    *g = sign * lcp.mu[i] * std::max(gf, 0.0);
  }
}

bool BoxedLcpSolver::Reduced(const DenseLcp& lcp, const signed char* state, double ridge,
                             double rtol, Cod* cod, double* x, double* w) {
  const int n = lcp.n;
  const size_t ld = lcp.ld;
  const double* A = lcp.A;
  int* cidx = cidx_.data();
  int* pos = pos_.data();
  const int k = ClampedSet(lcp, state, cidx, pos);
  double* K = K_.data();
  double* c = c_.data();

  // K = A_CC + A_CB E + ridge I, c = -(b_C + A_CB g)
  for (int b = 0; b < k; b++) {
    const double* col = A + cidx[b] * ld;
    for (int a = 0; a < k; a++) K[a + b * k] = col[cidx[a]];
    K[b + b * k] += ridge;
  }
  for (int a = 0; a < k; a++) c[a] = -lcp.b[cidx[a]];
  for (int j = 0; j < n; j++) {
    if (pos[j] >= 0) continue;
    double coef, g;
    BoundValue(lcp, state, j, &coef, &g);
    const double* col = A + j * ld;
    if (coef != 0) {
      double* kc = K + pos[lcp.findex[j]] * k;
      for (int a = 0; a < k; a++) kc[a] += coef * col[cidx[a]];
    }
    if (g != 0) {
      for (int a = 0; a < k; a++) c[a] -= g * col[cidx[a]];
    }
  }

  // minimum-norm solution with one step of iterative refinement
  double* y = y_.data();
  double* r = y + nmax_;
  if (k > 0) {
    cod->Factor(K, k, k, rtol);
    cod->Solve(c, y);
    for (int a = 0; a < k; a++) {
      double s = c[a];
      for (int b = 0; b < k; b++) s -= K[a + b * k] * y[b];
      r[a] = s;
    }
    cod->Solve(r, r);
    for (int a = 0; a < k; a++) y[a] += r[a];
  } else {
    cod->Factor(K, 1, 0, rtol);
  }

  // x and w = A x + b
  for (int a = 0; a < k; a++) x[cidx[a]] = y[a];
  for (int j = 0; j < n; j++) {
    if (pos[j] >= 0) continue;
    double coef, g;
    BoundValue(lcp, state, j, &coef, &g);
    x[j] = g + (coef != 0 ? coef * y[pos[lcp.findex[j]]] : 0);
  }
  for (int i = 0; i < n; i++) w[i] = lcp.b[i];
  for (int j = 0; j < n; j++) {
    const double xj = x[j];
    if (xj == 0) continue;
    const double* col = A + j * ld;
    for (int i = 0; i < n; i++) w[i] += col[i] * xj;
  }
  for (int i = 0; i < n; i++) {
    if (!std::isfinite(x[i]) || !std::isfinite(w[i])) return false;
  }
  return true;
}

double BoxedLcpSolver::Residual(const DenseLcp& lcp, const double* x, const double* w,
                                double* kappa) {
  double res = 0, kap = 0;
  for (int i = 0; i < lcp.n; i++) {
    double l, u;
    BoundsAt(lcp, x, i, &l, &u);
    const double d = Diag(lcp, i);
    const double t = std::min(std::max(x[i] - w[i] / d, l), u);
    res = std::max(res, std::fabs(x[i] - t) * d);
    const double gap = std::min(x[i] - l, u - x[i]);
    if (std::isfinite(gap)) kap = std::max(kap, std::fabs(w[i]) * std::max(gap, 0.0));
  }
  if (kappa) *kappa = kap;
  return res;
}

int BoxedLcpSolver::Pgs(const DenseLcp& lcp, int sweeps, double tol, double* x) {
  const int n = lcp.n;
  const size_t ld = lcp.ld;
  int it = 0;
  for (; it < sweeps; it++) {
    double change = 0;
    for (int i = 0; i < n; i++) {
      const double d = lcp.A[i + i * ld];
      if (!(d > 0)) continue;
      double r = lcp.b[i];
      for (int j = 0; j < n; j++) r += lcp.A[i + j * ld] * x[j];
      double l, u;
      BoundsAt(lcp, x, i, &l, &u);
      const double xi = std::min(std::max(x[i] - r / d, l), u);
      change = std::max(change, std::fabs(xi - x[i]) * d);
      x[i] = xi;
    }
    if (change <= tol) break;
  }
  return it;
}

void BoxedLcpSolver::Classify(const DenseLcp& lcp, const double* x, const double* w, double tol,
                              signed char* state) {
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < lcp.n; i++) {
      if ((lcp.findex[i] >= 0) != (pass == 1)) continue;
      if (Bilateral(lcp, i)) {
        state[i] = kLcpClamped;
        continue;
      }
      double l, u;
      BoundsAt(lcp, x, i, &l, &u);
      const double d = Diag(lcp, i);
      if ((x[i] - l) * d <= tol && w[i] >= -tol) {
        state[i] = kLcpLower;
      } else if ((u - x[i]) * d <= tol && w[i] <= tol) {
        state[i] = kLcpUpper;
      } else {
        state[i] = kLcpClamped;
      }
    }
  }
  Normalize(lcp, state);
}

void BoxedLcpSolver::ColdState(const DenseLcp& lcp, signed char* state) {
  for (int i = 0; i < lcp.n; i++) {
    if (lcp.findex[i] >= 0 || std::isinf(lcp.lo[i]) || !std::isinf(lcp.hi[i])) {
      state[i] = kLcpClamped;  // bilateral, friction, friction loss
    } else {
      state[i] = lcp.b[i] < 0 ? kLcpClamped : kLcpLower;  // unilateral
    }
  }
  Normalize(lcp, state);
}

int BoxedLcpSolver::Infeasible(const DenseLcp& lcp, const signed char* state, const double* x,
                               const double* w, double tol, int* list,
                               signed char* target) const {
  int m = 0;
  for (int i = 0; i < lcp.n; i++) {
    if (Bilateral(lcp, i) || Collapsed(lcp, state, i)) continue;
    double l, u;
    BoundsAt(lcp, x, i, &l, &u);
    const double d = Diag(lcp, i);
    signed char to = state[i];
    if (state[i] == kLcpClamped) {
      if ((l - x[i]) * d > tol) {
        to = kLcpLower;
      } else if ((x[i] - u) * d > tol) {
        to = kLcpUpper;
      }
    } else if (state[i] == kLcpLower) {
      if (w[i] < -tol && u > l) to = kLcpClamped;
    } else if (w[i] > tol && u > l) {
      to = kLcpClamped;
    }
    if (to != state[i]) {
      list[m] = i;
      target[m++] = to;
    }
  }
  return m;
}

bool BoxedLcpSolver::Pivot(const DenseLcp& lcp, const BoxedOptions& opt, double ridge,
                           signed char* state, double* x, double* w, BoxedStats* stats) {
  Normalize(lcp, state);
  int best = INT_MAX, tries = kBlockTries, pivots = 0;
  int* list = list_.data();
  signed char* target = target_.data();
  while (true) {
    stats->iterations++;
    if (!Reduced(lcp, state, ridge, opt.rtol, &cod_, x, w)) return false;
    const int m = Infeasible(lcp, state, x, w, opt.tol, list, target);
    if (m == 0) return true;

    // Judice-Pires: block flips while the infeasible count falls (a few more tries allowed),
    // then Murty's single pivot on the largest infeasible index
    int first = 0;
    if (m < best) {
      best = m;
      tries = kBlockTries;
    } else if (tries > 0) {
      tries--;
    } else {
      first = m - 1;
    }
    for (int q = first; q < m; q++) {
      if (target[q] == kLcpClamped) {
        EnterClamped(lcp, state, list[q]);
      } else {
        state[list[q]] = target[q];
      }
    }
    Normalize(lcp, state);
    pivots += m - first;
    stats->pivots += m - first;
    if (pivots > opt.max_pivots) return false;
  }
}

bool BoxedLcpSolver::Exact(const DenseLcp& lcp, const BoxedOptions& opt, const signed char* state,
                           Cod* cod, double* x, double* w, BoxedStats* stats) {
  stats->iterations++;
  if (!Reduced(lcp, state, 0, opt.rtol, cod, x, w)) return false;
  const double res = Residual(lcp, x, w, nullptr);
  if (res < best_res_) {
    best_res_ = res;
    std::copy(x, x + lcp.n, xb_.begin());
    std::copy(w, w + lcp.n, wb_.begin());
  }
  return res <= opt.tol;
}

void BoxedLcpSolver::Stabilize(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state,
                               Cod* cod, double* x, double* w, BoxedStats* stats) {
  // tied rows: at a bound with w = 0
  const int n = lcp.n;
  signed char* s2 = s2_.data();
  int ties = 0;
  for (int i = 0; i < n; i++) {
    s2[i] = state[i];
    if (state[i] == kLcpClamped || Bilateral(lcp, i) || Collapsed(lcp, state, i)) continue;
    if (std::fabs(w[i]) <= opt.tol) ties++;
  }
  if (ties == 0) return;
  for (int i = 0; i < n; i++) {
    if (state[i] == kLcpClamped || Bilateral(lcp, i) || Collapsed(lcp, state, i)) continue;
    if (std::fabs(w[i]) > opt.tol) continue;
    s2[i] = kLcpClamped;
    // friction rows of a normal that enters C: by the sign of their velocity
    for (int j = 0; j < n; j++) {
      if (lcp.findex[j] != i) continue;
      s2[j] = std::fabs(w[j]) <= opt.tol ? kLcpClamped : w[j] > 0 ? kLcpLower : kLcpUpper;
    }
  }
  Normalize(lcp, s2);
  double* xs = xs_.data();
  double* ws = ws_.data();
  if (Exact(lcp, opt, s2, cod, xs, ws, stats)) {
    std::copy(s2, s2 + n, state);
    std::copy(xs, xs + n, x);
    std::copy(ws, ws + n, w);
  } else {
    Exact(lcp, opt, state, cod, x, w, stats);  // restore the factorization of state
  }
}

bool BoxedLcpSolver::Solve(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state,
                           double* x, double* w, Cod* cod, BoxedStats* stats) {
  const int n = lcp.n;
  *stats = BoxedStats();
  best_res_ = HUGE_VAL;
  if (n == 0) {
    cod->Factor(K_.data(), 1, 0, opt.rtol);
    return true;
  }
  double maxdiag = 0;
  for (int i = 0; i < n; i++) maxdiag = std::max(maxdiag, lcp.A[i + i * static_cast<size_t>(lcp.ld)]);
  const double ridge = opt.ridge * (maxdiag > 0 ? maxdiag : 1);
  auto finish = [&](bool exact) {
    if (exact) Stabilize(lcp, opt, state, cod, x, w, stats);
    stats->residual = Residual(lcp, x, w, &stats->kappa);
    return exact;
  };

  // 1. the guessed classification
  if (opt.use_guess) {
    Normalize(lcp, state);
    if (Exact(lcp, opt, state, cod, x, w, stats)) {
      stats->guess_hit = true;
      return finish(true);
    }
  } else {
    ColdState(lcp, state);
  }

  // 2. pivoting on the regularized problem, 3. exact recomputation (pivoting again without the
  // ridge if a tie was misjudged)
  for (double r : {ridge, 0.0}) {
    if (Pivot(lcp, opt, r, state, x, w, stats) && Exact(lcp, opt, state, cod, x, w, stats)) {
      stats->pivot_ok = true;
      return finish(true);
    }
  }

  // 4. Gauss-Seidel from the best answer so far, projected into the bounds; its classification
  // seeds one more pivoting run
  stats->used_pgs = true;
  double* xs = xs_.data();
  double* ws = ws_.data();
  for (int i = 0; i < n; i++) xs[i] = std::isfinite(best_res_) ? xb_[i] : 0;
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < n; i++) {
      if ((lcp.findex[i] >= 0) != (pass == 1)) continue;
      double l, u;
      BoundsAt(lcp, xs, i, &l, &u);
      xs[i] = std::min(std::max(xs[i], l), u);
    }
  }
  Pgs(lcp, opt.pgs_iter, opt.tol, xs);
  for (int i = 0; i < n; i++) {
    ws[i] = lcp.b[i];
    for (int j = 0; j < n; j++) ws[i] += lcp.A[i + static_cast<size_t>(j) * lcp.ld] * xs[j];
  }
  const double pgs_res = Residual(lcp, xs, ws, nullptr);
  Classify(lcp, xs, ws, std::max(opt.tol, 1e-3 * pgs_res), state);
  if (Pivot(lcp, opt, ridge, state, x, w, stats) && Exact(lcp, opt, state, cod, x, w, stats)) {
    stats->pivot_ok = true;
    return finish(true);
  }

  // no exact answer: keep the Gauss-Seidel one unless an exact solve came closer; factor the
  // classification of what is returned
  if (best_res_ < pgs_res) {
    std::copy(xb_.begin(), xb_.begin() + n, xs);
    std::copy(wb_.begin(), wb_.begin() + n, ws);
  }
  std::copy(xs, xs + n, x);
  std::copy(ws, ws + n, w);
  Classify(lcp, x, w, std::max(opt.tol, 1e-3 * pgs_res), state);
  Reduced(lcp, state, 0, opt.rtol, cod, xs, ws);
  return finish(false);
}

}  // namespace contactkit
