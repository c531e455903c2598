// Copyright 2026 The contactkit developers.
#include "solvers/lcp/boxed.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "solvers/common/dense.h"

namespace contactkit {
namespace {

constexpr int kBlockTries = 3;          // non-improving block flips before single pivots
constexpr int kSeen = 16;               // classifications remembered to detect a pivoting cycle
constexpr int kFreezes = 12;            // rounds of frozen friction bounds per loop
constexpr int kRepairSolves = 100;      // reduced solves of a repair before Lemke takes over
constexpr double kRegularPivot = 1e-9;  // least Cholesky pivot^2 of a warm start's clamped rows,
                                        // relative to their largest diagonal entry of A
constexpr double kKeepBest = 1e4;       // after a sweep start, the best answer is kept within this
                                        // many tolerances (else Gauss-Seidel's answer is returned)
constexpr int kSweepRounds = 2;         // rounds of opt.sweeps before the exact solve of SweepStart
constexpr int kQpSteps = 40;            // active-set steps of one BoxQp
constexpr double kFacePivot = 1e-6;     // least Cholesky pivot^2 of BoxQp's free rows, relative
constexpr int kQpHalvings = 3;          // halvings of BoxQp's projected step
constexpr double kQpStall = 1e4;        // BoxQp's answer where the objective stops falling goes
                                        // to the exact test within this many tolerances
constexpr int kQpPivotSolves = 8;       // reduced solves of coupled pivots after each QP round
constexpr double kQpWork = 10;          // work of the Tresca rounds after a sweep start, in
                                        // factorizations of the whole problem (n^3 / 1.5 each)

// FNV-1a hash of a classification (n)
uint64_t Hash(const signed char* state, int n) {
  uint64_t h = 1469598103934665603ull;
  for (int i = 0; i < n; i++) h = (h ^ static_cast<unsigned char>(state[i])) * 1099511628211ull;
  return h;
}

bool Bilateral(const DenseLcp& lcp, int i) {
  return lcp.findex[i] < 0 && std::isinf(lcp.lo[i]) && std::isinf(lcp.hi[i]);
}

// diagonal used to turn x into velocity units
double Diag(const DenseLcp& lcp, int i) {
  const double d = lcp.A[i + static_cast<size_t>(i) * lcp.ld];
  return d > 0 ? d : 1;
}

// bounds of row i at x; fix (nullable) holds frozen friction bounds
void BoundsAt(const DenseLcp& lcp, const double* fix, const double* x, int i, double* l,
              double* u) {
  const int f = lcp.findex[i];
  if (f >= 0) {
    const double m = fix ? fix[i] : lcp.mu[i] * std::max(x[f], 0.0);
    *l = -m;
    *u = m;
  } else {
    *l = lcp.lo[i];
    *u = lcp.hi[i];
  }
}

// a friction row fixed at zero: its normal is not clamped (or its frozen bound is zero)
bool Collapsed(const DenseLcp& lcp, const double* fix, const signed char* state, int i) {
  const int f = lcp.findex[i];
  if (f < 0) return false;
  return fix ? !(fix[i] > 0) : state[f] != kLcpClamped;
}

// consistent classification: bilateral rows clamped, collapsed rows at a bound, no state at an
// infinite bound
void Normalize(const DenseLcp& lcp, const double* fix, signed char* state) {
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
    if (state[i] == kLcpClamped && Collapsed(lcp, fix, state, i)) state[i] = kLcpLower;
  }
}

// x projected into its (coupled) bounds, normals first
void Project(const DenseLcp& lcp, double* x) {
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < lcp.n; i++) {
      if ((lcp.findex[i] >= 0) != (pass == 1)) continue;
      double l, u;
      BoundsAt(lcp, nullptr, x, i, &l, &u);
      x[i] = std::min(std::max(x[i], l), u);
    }
  }
}

// sum of a[j stride] x[j] over j < n in four partial sums (a contiguous row, stride 1, is read
// at the memory's speed; the loop-carried additions of one sum would limit it)
double RowDot(const double* a, size_t stride, const double* x, int n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    s0 += a[j * stride] * x[j];
    s1 += a[(j + 1) * stride] * x[j + 1];
    s2 += a[(j + 2) * stride] * x[j + 2];
    s3 += a[(j + 3) * stride] * x[j + 3];
  }
  for (; j < n; j++) s0 += a[j * stride] * x[j];
  return (s0 + s1) + (s2 + s3);
}

// x within its (coupled) bounds at x, to tol in velocity units
bool WithinBounds(const DenseLcp& lcp, const double* x, double tol) {
  for (int i = 0; i < lcp.n; i++) {
    double l, u;
    BoundsAt(lcp, nullptr, x, i, &l, &u);
    const double d = Diag(lcp, i);
    if (!std::isfinite(x[i]) || (l - x[i]) * d > tol || (x[i] - u) * d > tol) return false;
  }
  return true;
}

// some row has constant finite bounds on both sides (friction loss)
bool HasBoxRow(const DenseLcp& lcp) {
  for (int i = 0; i < lcp.n; i++) {
    if (lcp.findex[i] < 0 && std::isfinite(lcp.lo[i]) && std::isfinite(lcp.hi[i])) return true;
  }
  return false;
}

// w = A x + b
void Velocity(const DenseLcp& lcp, const double* x, double* w) {
  for (int i = 0; i < lcp.n; i++) w[i] = lcp.b[i];
  for (int j = 0; j < lcp.n; j++) {
    if (x[j] == 0) continue;
    const double* col = lcp.A + static_cast<size_t>(j) * lcp.ld;
    for (int i = 0; i < lcp.n; i++) w[i] += col[i] * x[j];
  }
}

// pivoted Cholesky of A's block on the k rows c (symmetric positive semidefinite) into L (k x k,
// column-major): c is permuted so that its first r rows, whose pivots stay above rel times the
// largest diagonal entry, are independent; L's first r columns hold the factor of their block
// (rows below r: the dependent rows' part). Returns r. O(k^3 / 3) multiply-adds
int PivotedCholesky(const DenseLcp& lcp, int* c, int k, double rel, double* L) {
  const size_t ld = lcp.ld, ks = k;
  double dmax = 0;
  for (int b = 0; b < k; b++) {
    const double* col = lcp.A + c[b] * ld;
    for (int a = b; a < k; a++) L[a + b * ks] = col[c[a]];
    dmax = std::max(dmax, L[b + b * ks]);
  }
  // (the lower triangle only; a symmetric interchange of rows and columns p > r moves its
  // entries across the diagonal)
  auto at = [&](int a, int b) -> double& { return L[a + b * ks]; };
  int r = 0;
  for (; r < k; r++) {
    int p = r;  // the largest remaining pivot
    for (int a = r + 1; a < k; a++) p = at(a, a) > at(p, p) ? a : p;
    if (!(at(p, p) > rel * dmax)) break;
    if (p != r) {
      std::swap(c[p], c[r]);
      for (int j = 0; j < r; j++) std::swap(at(r, j), at(p, j));
      std::swap(at(r, r), at(p, p));
      for (int a = r + 1; a < p; a++) std::swap(at(a, r), at(p, a));
      for (int a = p + 1; a < k; a++) std::swap(at(a, r), at(a, p));
    }
    const double d = std::sqrt(at(r, r));
    at(r, r) = d;
    double* lr = L + r * ks;
    for (int a = r + 1; a < k; a++) lr[a] /= d;
    for (int b = r + 1; b < k; b++) {
      double* col = L + b * ks;
      const double f = lr[b];
      for (int a = b; a < k; a++) col[a] -= lr[a] * f;
    }
  }
  return r;
}

// x'Ax/2 + b'x from x and w = A x + b (n)
double Objective(const DenseLcp& lcp, const double* x, const double* w) {
  double q = 0;
  for (int i = 0; i < lcp.n; i++) q += x[i] * (w[i] + lcp.b[i]);
  return 0.5 * q;
}

}  // namespace

void BoxedLcpSolver::Allocate(int nmax) {
  nmax_ = nmax;
  const size_t n = std::max(nmax, 1);
  K_.Allocate(n * n);
  lu_.Allocate(n * n);
  piv_.assign(n, 0);
  c_.assign(n, 0);
  rhs_.assign(n, 0);
  y_.assign(2 * n, 0);
  for (auto* v : {&xb_, &wb_, &xs_, &ws_, &xl_, &xg_, &xw_, &xd_, &xt_, &wt_, &fixv_})
    v->assign(n, 0);
  cidx_.assign(n, 0);
  pos_.assign(n, 0);
  list_.assign(n, 0);
  target_.assign(n, 0);
  s2_.assign(n, 0);
  sw_.assign(n, 0);
  sd_.assign(n, 0);
  lemke_.Allocate(static_cast<int>(n));
  coddmem_.Allocate(Cod::Doubles(static_cast<int>(n)));
  codimem_.assign(Cod::Ints(static_cast<int>(n)), 0);
  cod_.Bind(coddmem_.data(), codimem_.data(), static_cast<int>(n));
}

int BoxedLcpSolver::ClampedSet(const DenseLcp& lcp, const signed char* state, int* cidx, int* pos) {
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

void BoxedLcpSolver::BoundValue(const DenseLcp& lcp, const signed char* state, int i, double* coef,
                                double* g) {
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

void BoxedLcpSolver::Value(const DenseLcp& lcp, const signed char* state, int i, double* coef,
                           double* g) const {
  if (fix_ && lcp.findex[i] >= 0) {
    *coef = 0;
    *g = state[i] == kLcpUpper ? fix_[i] : -fix_[i];
  } else {
    BoundValue(lcp, state, i, coef, g);
  }
}

bool BoxedLcpSolver::Reduced(const DenseLcp& lcp, const signed char* state, double ridge,
                             double rtol, Cod* cod, double* x, double* w, const double* x0) {
  const int n = lcp.n;
  const size_t ld = lcp.ld;
  const double* A = lcp.A;
  int* cidx = cidx_.data();
  int* pos = pos_.data();
  const int k = ClampedSet(lcp, state, cidx, pos);
  const size_t ks = k;  // column stride of K (k * k can exceed int)
  double* K = K_.data();
  double* c = c_.data();

  // K = A_CC + A_CB E + ridge I, c = -(b_C + A_CB g)
  for (int b = 0; b < k; b++) {
    const double* col = A + cidx[b] * ld;
    for (int a = 0; a < k; a++) K[a + b * ks] = col[cidx[a]];
    K[b + b * ks] += ridge;
  }
  for (int a = 0; a < k; a++) c[a] = -lcp.b[cidx[a]];
  for (int j = 0; j < n; j++) {
    if (pos[j] >= 0) continue;
    double coef, g;
    Value(lcp, state, j, &coef, &g);
    const double* col = A + j * ld;
    if (coef != 0) {
      double* kc = K + pos[lcp.findex[j]] * ks;
      for (int a = 0; a < k; a++) kc[a] += coef * col[cidx[a]];
    }
    if (g != 0) {
      for (int a = 0; a < k; a++) c[a] -= g * col[cidx[a]];
    }
  }

  // pivoting systems (ridge > 0, regular): LU, about a third of the decomposition's work (the
  // clamped sets of MuJoCo 3.x patch contacts are large); else, or if LU breaks down, the
  // minimum-norm solution. Either with one step of iterative refinement
  bool lu = ridge > 0 && k > 0;
  if (lu) {
    std::copy(K, K + static_cast<size_t>(k) * k, lu_.data());
    lu = LuFactor(lu_.data(), k, piv_.data());
  }
  const double kd = k;
  work_ += (lu ? kd / 1.5 : 2 * kd) * kd * kd + 2.0 * n * (n + kd);
  if (!lu) cod->Factor(K, std::max(k, 1), k, rtol);
  kept_k_ = k;
  return SolveKept(lcp, state, lu, cod, x, w, x0);
}

bool BoxedLcpSolver::SolveKept(const DenseLcp& lcp, const signed char* state, bool lu, Cod* cod,
                               double* x, double* w, const double* x0) {
  const int n = lcp.n, k = kept_k_;
  const size_t ks = k;
  const int* cidx = cidx_.data();
  const int* pos = pos_.data();
  const double* K = K_.data();
  double* c = rhs_.data();
  std::copy(c_.begin(), c_.begin() + k, c);

  // from x0: K (y - x0_C) = c - K x0_C
  if (x0) {
    for (int b = 0; b < k; b++) {
      const double xb = x0[cidx[b]];
      for (int a = 0; a < k; a++) c[a] -= K[a + b * ks] * xb;
    }
  }
  double* y = y_.data();
  double* r = y + nmax_;
  if (k > 0) {
    if (lu) {
      std::copy(c, c + k, y);
      LuSolve(lu_.data(), piv_.data(), k, y);
    } else {
      cod->Solve(c, y);
    }
    for (int a = 0; a < k; a++) {
      double s = c[a];
      for (int b = 0; b < k; b++) s -= K[a + b * ks] * y[b];
      r[a] = s;
    }
    if (lu) {
      LuSolve(lu_.data(), piv_.data(), k, r);
    } else {
      cod->Solve(r, r);
    }
    for (int a = 0; a < k; a++) y[a] += r[a];
  }

  // x and w
  if (x0) {
    for (int a = 0; a < k; a++) y[a] += x0[cidx[a]];
  }
  for (int a = 0; a < k; a++) x[cidx[a]] = y[a];
  for (int j = 0; j < n; j++) {
    if (pos[j] >= 0) continue;
    double coef, g;
    Value(lcp, state, j, &coef, &g);
    x[j] = g + (coef != 0 ? coef * y[pos[lcp.findex[j]]] : 0);
  }
  Velocity(lcp, x, w);
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
    BoundsAt(lcp, nullptr, x, i, &l, &u);
    const double d = Diag(lcp, i);
    const double t = std::min(std::max(x[i] - w[i] / d, l), u);
    res = std::max(res, std::fabs(x[i] - t) * d);
    const double gap = std::min(x[i] - l, u - x[i]);
    if (std::isfinite(gap)) kap = std::max(kap, std::fabs(w[i]) * std::max(gap, 0.0));
  }
  if (kappa) *kappa = kap;
  return res;
}

int BoxedLcpSolver::Pgs(const DenseLcp& lcp, int sweeps, double tol, double* x, const double* fix) {
  const int n = lcp.n;
  const size_t ld = lcp.ld;
  int it = 0;
  for (; it < sweeps; it++) {
    double change = 0;
    for (int i = 0; i < n; i++) {
      const double d = lcp.A[i + i * ld];
      if (!(d > 0)) continue;
      // row i of A, read as column i when A is symmetric (contiguous)
      const double r = lcp.b[i] + (lcp.symmetric ? RowDot(lcp.A + i * ld, 1, x, n)
                                                 : RowDot(lcp.A + i, ld, x, n));
      double l, u;
      BoundsAt(lcp, fix, x, i, &l, &u);
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
  for (int i = 0; i < lcp.n; i++) {
    double l, u;
    BoundsAt(lcp, nullptr, x, i, &l, &u);
    const double d = Diag(lcp, i);
    if (Bilateral(lcp, i)) {
      state[i] = kLcpClamped;
    } else if ((x[i] - l) * d <= tol && w[i] >= -tol) {
      state[i] = kLcpLower;
    } else if ((u - x[i]) * d <= tol && w[i] <= tol) {
      state[i] = kLcpUpper;
    } else {
      state[i] = kLcpClamped;
    }
  }
  Normalize(lcp, nullptr, state);
}

void BoxedLcpSolver::ColdState(const DenseLcp& lcp, signed char* state) {
  for (int i = 0; i < lcp.n; i++) {
    if (lcp.findex[i] >= 0 || std::isinf(lcp.lo[i]) || !std::isinf(lcp.hi[i])) {
      state[i] = kLcpClamped;  // bilateral, friction, friction loss
    } else {
      state[i] = lcp.b[i] < 0 ? kLcpClamped : kLcpLower;  // unilateral
    }
  }
  Normalize(lcp, nullptr, state);
}

int BoxedLcpSolver::Infeasible(const DenseLcp& lcp, const signed char* state, const double* x,
                               const double* w, double tol, int* list, signed char* target) const {
  int m = 0;
  for (int i = 0; i < lcp.n; i++) {
    if (Bilateral(lcp, i) || Collapsed(lcp, fix_, state, i)) continue;
    double l, u;
    BoundsAt(lcp, fix_, x, i, &l, &u);
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
  Normalize(lcp, fix_, state);
  int best = INT_MAX, tries = kBlockTries, pivots = 0;
  bool single = false;
  int* list = list_.data();
  signed char* target = target_.data();
  uint64_t seen[kSeen];  // hashes of the last kSeen classifications
  int nseen = 0;
  while (true) {
    if (Spent(opt, *stats)) return false;
    stats->iterations++;
    if (!Reduced(lcp, state, ridge, opt.rtol, &cod_, x, w)) return false;
    const int m = Infeasible(lcp, state, x, w, opt.tol, list, target);
    if (m == 0) return true;
    seen[nseen++ % kSeen] = Hash(state, lcp.n);

    // Judice-Pires: block flips while the infeasible count falls (a few more tries allowed),
    // then Murty's single pivot on the largest infeasible index
    if (!single && m < best) {
      best = m;
      tries = kBlockTries;
    } else if (!single && tries > 0) {
      tries--;
    } else {
      single = true;
    }
    const int first = single ? m - 1 : 0;
    for (int q = first; q < m; q++) {
      state[list[q]] = target[q];
      // with coupled bounds a normal that enters C releases its friction rows (sticking first)
      if (!fix_ && target[q] == kLcpClamped) {
        for (int j = 0; j < lcp.n; j++) {
          if (lcp.findex[j] == list[q]) state[j] = kLcpClamped;
        }
      }
    }
    Normalize(lcp, fix_, state);
    pivots += m - first;
    stats->pivots += m - first;
    if (pivots > opt.max_pivots) return false;

    // a classification seen before: block flips give way to single pivots, and single pivots
    // that cycle (coupled friction makes A no P-matrix) end the run
    const uint64_t h = Hash(state, lcp.n);
    if (std::find(seen, seen + std::min(nseen, kSeen), h) != seen + std::min(nseen, kSeen)) {
      if (single) return false;
      single = true;
    }
  }
}

bool BoxedLcpSolver::DantzigStart(const DenseLcp& lcp, const BoxedOptions& opt,
                                  const signed char* state, const double* x, double* w,
                                  signed char* done) const {
  // x must lie within the frozen bounds (Dantzig's rows not yet entered keep their x); the rows
  // that already meet their classification count as entered
  const int n = lcp.n;
  for (int i = 0; i < n; i++) {
    double l, u;
    BoundsAt(lcp, fix_, x, i, &l, &u);
    const double d = Diag(lcp, i);
    if ((l - x[i]) * d > opt.tol || (x[i] - u) * d > opt.tol || !std::isfinite(x[i])) return false;
  }
  Velocity(lcp, x, w);
  for (int i = 0; i < n; i++) {
    double l, u;
    BoundsAt(lcp, fix_, x, i, &l, &u);
    const double d = Diag(lcp, i);
    if (!(u > l)) {
      done[i] = 0;  // fixed at zero: entered at once
    } else if (state[i] == kLcpClamped) {
      done[i] = std::fabs(w[i]) <= opt.tol;
    } else if (state[i] == kLcpLower) {
      done[i] = (x[i] - l) * d <= opt.tol && w[i] >= -opt.tol;
    } else {
      done[i] = (u - x[i]) * d <= opt.tol && w[i] <= opt.tol;
    }
  }
  return true;
}

bool BoxedLcpSolver::Dantzig(const DenseLcp& lcp, const BoxedOptions& opt, double ridge,
                             signed char* state, double* x, double* w, BoxedStats* stats,
                             bool warm) {
  const int n = lcp.n;
  const size_t ld = lcp.ld;
  const double* A = lcp.A;
  signed char* done = s2_.data();
  int* cidx = cidx_.data();
  double* K = K_.data();
  double* dx = y_.data();    // direction on C, then scratch
  double* dw = c_.data();    // change of w on every row
  double* col = xs_.data();  // -A_Ci dir
  if (!(warm && DantzigStart(lcp, opt, state, x, w, done))) {
    std::fill(x, x + n, 0.0);
    std::copy(lcp.b, lcp.b + n, w);
    std::fill(done, done + n, 0);
  }
  int events = 0;

  // rows with constant bounds first, friction rows once their normals are settled
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < n; i++) {
      if ((lcp.findex[i] >= 0) != (pass == 1) || done[i]) continue;
      double li, ui;
      BoundsAt(lcp, fix_, x, i, &li, &ui);
      done[i] = 1;
      state[i] = kLcpLower;
      if (!(ui > li)) continue;  // fixed at zero
      while (true) {
        if (++events > opt.max_pivots) return false;
        if (std::fabs(w[i]) <= opt.tol) {
          state[i] = x[i] <= li ? kLcpLower : x[i] >= ui ? kLcpUpper : kLcpClamped;
          break;
        }
        const double dir = w[i] < 0 ? 1 : -1;
        if ((dir > 0 && x[i] >= ui) || (dir < 0 && x[i] <= li)) {
          state[i] = dir > 0 ? kLcpUpper : kLcpLower;
          break;
        }

        // direction: x_i moves by dir, the clamped rows keep w = 0
        int k = 0;
        for (int j = 0; j < n; j++) {
          if (done[j] && j != i && state[j] == kLcpClamped) cidx[k++] = j;
        }
        const size_t ks = k;  // column stride of K
        for (int b = 0; b < k; b++) {
          const double* cb = A + cidx[b] * ld;
          for (int a = 0; a < k; a++) K[a + b * ks] = cb[cidx[a]];
          K[b + b * ks] += ridge;
          col[b] = -dir * A[cidx[b] + i * ld];
        }
        if (Spent(opt, *stats)) return false;
        stats->iterations++;
        work_ += (k / 1.5 + 2.0) * k * k + 2.0 * n * (k + 1);
        // with the ridge the system is regular: LU (a third of the decomposition's work), the
        // decomposition only if LU breaks down
        bool lu = ridge > 0 && k > 0;
        if (lu) {
          std::copy(K, K + ks * ks, lu_.data());
          lu = LuFactor(lu_.data(), k, piv_.data());
        }
        if (lu) {
          std::copy(col, col + k, dx);
          LuSolve(lu_.data(), piv_.data(), k, dx);
        } else {
          cod_.Factor(K, std::max(k, 1), k, opt.rtol);
          if (k > 0) cod_.Solve(col, dx);
        }
        for (int r = 0; r < n; r++) dw[r] = dir * A[r + i * ld];
        for (int a = 0; a < k; a++) {
          const double* ca = A + cidx[a] * ld;
          for (int r = 0; r < n; r++) dw[r] += dx[a] * ca[r];
        }

        // largest step before an event
        double step = HUGE_VAL;
        int who = -1;
        auto consider = [&](double s, int j) {
          if (s < step) {
            step = std::max(s, 0.0);
            who = j;
          }
        };
        consider(dir > 0 ? ui - x[i] : x[i] - li, i);
        if (dw[i] * dir > 0) consider(-w[i] / dw[i], n + i);
        for (int a = 0; a < k; a++) {
          const int j = cidx[a];
          double lj, uj;
          BoundsAt(lcp, fix_, x, j, &lj, &uj);
          if (dx[a] < 0) consider((x[j] - lj) / -dx[a], j);
          if (dx[a] > 0) consider((uj - x[j]) / dx[a], j);
        }
        for (int j = 0; j < n; j++) {
          if (!done[j] || j == i || state[j] == kLcpClamped) continue;
          double lj, uj;
          BoundsAt(lcp, fix_, x, j, &lj, &uj);
          if (!(uj > lj)) continue;
          if (state[j] == kLcpLower && dw[j] < 0) consider(w[j] / -dw[j], j);
          if (state[j] == kLcpUpper && dw[j] > 0) consider(-w[j] / dw[j], j);
        }
        if (who < 0 || !std::isfinite(step)) return false;  // unbounded: inconsistent rows

        // advance and transfer
        x[i] += step * dir;
        for (int a = 0; a < k; a++) x[cidx[a]] += step * dx[a];
        for (int r = 0; r < n; r++) w[r] += step * dw[r];
        if (who == i) {
          x[i] = dir > 0 ? ui : li;
          state[i] = dir > 0 ? kLcpUpper : kLcpLower;
          break;
        }
        if (who == n + i) {
          w[i] = 0;
          state[i] = kLcpClamped;
          break;
        }
        if (state[who] == kLcpClamped) {
          double lj, uj;
          BoundsAt(lcp, fix_, x, who, &lj, &uj);
          const bool lower = std::fabs(x[who] - lj) <= std::fabs(x[who] - uj);
          x[who] = lower ? lj : uj;
          state[who] = lower ? kLcpLower : kLcpUpper;
        } else {
          w[who] = 0;
          state[who] = kLcpClamped;
        }
        stats->pivots++;
      }
    }
  }
  return true;
}

void BoxedLcpSolver::FaceStep(const DenseLcp& lcp, const BoxedOptions& opt,
                              const signed char* state, const double* x, const double* w,
                              double* y) {
  const int n = lcp.n;
  const size_t ld = lcp.ld;
  int* c = cidx_.data();
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (state[i] == kLcpClamped) c[k++] = i;
  }
  const size_t ks = k;
  double* L = lu_.data();
  const int r = PivotedCholesky(lcp, c, k, kFacePivot, L);
  work_ += static_cast<double>(k) * k * k / 3 + 4.0 * n * n;
  auto forward = [&](double* t) {  // t = L_II^-1 t (r)
    for (int a = 0; a < r; a++) {
      t[a] /= L[a + a * ks];
      for (int b = a + 1; b < r; b++) t[b] -= L[b + a * ks] * t[a];
    }
  };
  auto backward = [&](double* t) {  // t = L_II^-T t (r)
    for (int a = r - 1; a >= 0; a--) {
      for (int b = a + 1; b < r; b++) t[a] -= L[b + a * ks] * t[b];
      t[a] /= L[a + a * ks];
    }
  };

  // the independent free rows solved for w = 0, the dependent ones kept
  double* d = y_.data();
  for (int a = 0; a < r; a++) d[a] = -w[c[a]];
  forward(d);
  backward(d);
  std::copy(x, x + n, y);
  for (int a = 0; a < r; a++) y[c[a]] += d[a];
  // (one step of iterative refinement: the block's condition reaches 1 / kFacePivot)
  double* wr = wt_.data();
  Velocity(lcp, y, wr);
  for (int a = 0; a < r; a++) d[a] = -wr[c[a]];
  forward(d);
  backward(d);
  for (int a = 0; a < r; a++) y[c[a]] += d[a];
  Velocity(lcp, y, wr);

  // where the dependent rows' w is left (a singular, inconsistent block: redundant contacts at
  // different depths), the objective falls linearly along v, -w on them and the independent rows
  // following in the block's null space: y moves along it to the minimum or the first bound
  double* v = xt_.data();
  double* av = ws_.data();
  std::fill(v, v + n, 0.0);
  double big = 0;
  for (int a = r; a < k; a++) {
    v[c[a]] = -wr[c[a]];
    big = std::max(big, std::fabs(wr[c[a]]));
  }
  if (!(big > opt.tol)) return;
  double* t = d + nmax_;
  for (int b = 0; b < r; b++) {
    double s = 0;
    for (int a = r; a < k; a++) s += L[a + b * ks] * v[c[a]];
    t[b] = -s;
  }
  backward(t);
  for (int b = 0; b < r; b++) v[c[b]] = t[b];
  double slope = 0;
  for (int i = 0; i < n; i++) slope += wr[i] * v[i];
  std::fill(av, av + n, 0.0);
  for (int j = 0; j < n; j++) {
    if (v[j] == 0) continue;
    const double* col = lcp.A + j * ld;
    for (int i = 0; i < n; i++) av[i] += col[i] * v[j];
  }
  work_ += 4.0 * n * n;
  double curv = 0;
  for (int i = 0; i < n; i++) curv += v[i] * av[i];
  double step = curv > 0 ? -slope / curv : HUGE_VAL;
  for (int i = 0; i < n; i++) {
    if (v[i] == 0) continue;
    double l, u;
    BoundsAt(lcp, fix_, y, i, &l, &u);
    step = std::min(step, v[i] < 0 ? (y[i] - l) / -v[i] : (u - y[i]) / v[i]);
  }
  if (!std::isfinite(step) || !(step > 0) || !(slope < 0)) return;
  for (int i = 0; i < n; i++) y[i] += step * v[i];
}

bool BoxedLcpSolver::BoxQp(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state,
                           double* x, double* w, BoxedStats* stats) {
  const int n = lcp.n;
  const double matvec = 2.0 * n * n;
  double* y = xs_.data();   // the free rows' solution, the others at their bounds
  double* xt = xt_.data();  // the trial point
  double* wt = wt_.data();
  for (int i = 0; i < n; i++) {
    double l, u;
    BoundsAt(lcp, fix_, x, i, &l, &u);
    x[i] = std::min(std::max(x[i], l), u);
  }
  for (int step = 0; step < kQpSteps && !Spent(opt, *stats); step++) {
    // a row at a bound that its w holds there stays; the others are free (w = 0 sought)
    Velocity(lcp, x, w);
    work_ += matvec;
    double maxw = 0;  // largest |w| of a free row
    for (int i = 0; i < n; i++) {
      double l, u;
      BoundsAt(lcp, fix_, x, i, &l, &u);
      const double d = Diag(lcp, i);
      if (Bilateral(lcp, i)) {
        state[i] = kLcpClamped;
      } else if (!(u > l) || ((x[i] - l) * d <= opt.tol && w[i] >= -opt.tol)) {
        state[i] = kLcpLower;
      } else if ((u - x[i]) * d <= opt.tol && w[i] <= opt.tol) {
        state[i] = kLcpUpper;
      } else {
        state[i] = kLcpClamped;
      }
      if (state[i] == kLcpClamped) maxw = std::max(maxw, std::fabs(w[i]));
    }
    if (maxw <= opt.tol) return true;

    // a sweep of Gauss-Seidel (it lowers the objective and frees the rows held wrongly at a
    // bound), then the rows it leaves at a bound stay there and the others are solved for
    Pgs(lcp, 1, 0, x, fix_);
    Velocity(lcp, x, w);
    work_ += 2 * matvec;
    const double q = Objective(lcp, x, w);
    for (int i = 0; i < n; i++) {
      double l, u;
      BoundsAt(lcp, fix_, x, i, &l, &u);
      state[i] = Bilateral(lcp, i) || (x[i] > l && x[i] < u) ? kLcpClamped
                 : x[i] < u                                  ? kLcpLower
                                                             : kLcpUpper;
    }
    stats->iterations++;
    FaceStep(lcp, opt, state, x, w, y);

    // the step to y projected into the bounds, halved a few times until it lowers the
    // objective; else the step along the segment to the first bound it meets (along which the
    // objective falls: y is its minimum on the free rows' face), which adds a bound row
    double reach = 1;
    for (int i = 0; i < n; i++) {
      double l, u;
      BoundsAt(lcp, fix_, x, i, &l, &u);
      if (y[i] < l) reach = std::min(reach, (x[i] - l) / (x[i] - y[i]));
      if (y[i] > u) reach = std::min(reach, (u - x[i]) / (y[i] - x[i]));
    }
    auto lowers = [&](double t) {  // x + t (y - x) projected into xt: true if q falls there
      for (int i = 0; i < n; i++) {
        double l, u;
        BoundsAt(lcp, fix_, x, i, &l, &u);
        xt[i] = std::min(std::max(x[i] + t * (y[i] - x[i]), l), u);
      }
      Velocity(lcp, xt, wt);
      work_ += matvec;
      return Objective(lcp, xt, wt) < q;
    };
    bool lower = false;
    for (int half = 0; half <= kQpHalvings && !lower && std::ldexp(1.0, -half) > reach; half++) {
      lower = lowers(std::ldexp(1.0, -half));
    }
    // (no descent left: the answer, within rounding of the QP's when nearly so, goes to the
    // exact test)
    if (!lower && !lowers(reach)) return maxw <= kQpStall * opt.tol;
    std::copy(xt, xt + n, x);
  }
  return false;
}

bool BoxedLcpSolver::FrozenLoop(const DenseLcp& lcp, const BoxedOptions& opt, double ridge,
                                signed char* state, Cod* cod, double* x, double* w,
                                BoxedStats* stats, bool warm, bool qp) {
  const int n = lcp.n;
  double* fix = fixv_.data();
  for (int round = 0;
       round < kFreezes && stats->pivots <= 4LL * opt.max_pivots && !Spent(opt, *stats); round++) {
    // freeze the friction bounds at the current normal forces (averaged with the previous
    // round's after the first rounds, which damps alternating classifications) and pivot
    for (int i = 0; i < n; i++) {
      const int f = lcp.findex[i];
      const double m = f >= 0 ? lcp.mu[i] * std::max(x[f], 0.0) : 0;
      fix[i] = round >= 2 ? 0.5 * (fix[i] + m) : m;
    }
    fix_ = fix;
    stats->frozen_rounds++;
    const bool ok = qp ? BoxQp(lcp, opt, state, x, w, stats)
                       : Dantzig(lcp, opt, ridge, state, x, w, stats, warm);
    fix_ = nullptr;
    if (!ok) return false;

    // friction rows frozen at zero whose normal now carries force: by the sign of w
    for (int i = 0; i < n; i++) {
      const int f = lcp.findex[i];
      if (f < 0 || fix[i] > 0 || state[f] != kLcpClamped) continue;
      state[i] = std::fabs(w[i]) <= opt.tol ? kLcpClamped : w[i] > 0 ? kLcpLower : kLcpUpper;
    }
    Normalize(lcp, nullptr, state);

    // after the QP: its answer when exact with the bounds coupled, else its classification's
    // exact solve, else a few coupled pivots from it; else the next round freezes the bounds at
    // that exact solve's normals, projected (where the classification is right they are the
    // fixed point of these rounds, which alone converge linearly: 0.93 a round on the pile)
    if (qp) {
      if (AcceptAnswer(lcp, opt, state, cod, x, w, stats)) return true;
      if (Exact(lcp, opt, state, cod, x, w, stats)) return true;
      std::copy(state, state + n, s2_.begin());
      std::copy(x, x + n, xt_.begin());
      BoxedOptions few = opt;
      few.budget = std::min(opt.budget, stats->iterations + kQpPivotSolves);
      few.max_pivots = std::min(opt.max_pivots, 2 * n);
      if (Pivot(lcp, few, ridge, state, x, w, stats) && Exact(lcp, opt, state, cod, x, w, stats)) {
        return true;
      }
      std::copy(s2_.begin(), s2_.begin() + n, state);
      std::copy(xt_.begin(), xt_.begin() + n, x);
      Project(lcp, x);
      continue;
    }

    // the classification with the bounds coupled to the normals; near a stick-slip boundary the
    // frozen rounds can alternate, so a few coupled pivots polish the classification first
    if (Exact(lcp, opt, state, cod, x, w, stats)) return true;
    BoxedOptions polish = opt;
    polish.max_pivots = std::min(opt.max_pivots, 2 * n);
    std::copy(state, state + n, s2_.begin());
    std::copy(x, x + n, xs_.begin());
    if (Pivot(lcp, polish, ridge, state, x, w, stats) && Exact(lcp, opt, state, cod, x, w, stats)) {
      return true;
    }
    std::copy(s2_.begin(), s2_.begin() + n, state);
    std::copy(xs_.begin(), xs_.begin() + n, x);
  }
  return false;
}

void BoxedLcpSolver::KeepBest(int n, double res, const double* x, const double* w) {
  if (!(res < best_res_)) return;
  best_res_ = res;
  std::copy(x, x + n, xb_.begin());
  std::copy(w, w + n, wb_.begin());
}

bool BoxedLcpSolver::Exact(const DenseLcp& lcp, const BoxedOptions& opt, const signed char* state,
                           Cod* cod, double* x, double* w, BoxedStats* stats) {
  stats->iterations++;
  if (!Reduced(lcp, state, 0, opt.rtol, cod, x, w)) return false;
  const double res = Residual(lcp, x, w, nullptr);
  KeepBest(lcp.n, res, x, w);
  return res <= opt.tol;
}

bool BoxedLcpSolver::ExactFrom(const DenseLcp& lcp, const BoxedOptions& opt,
                               const signed char* state, const double* x0, Cod* cod, double* x,
                               double* w) {
  const int n = lcp.n;
  const double kd = kept_k_;
  if (cod->rank() >= kept_k_) return false;  // regular: the same solution
  work_ += 4 * kd * kd + 2.0 * n * (n + kd);
  if (!SolveKept(lcp, state, false, cod, x, w, x0)) return false;
  const double res = Residual(lcp, x, w, nullptr);
  KeepBest(n, res, x, w);
  return res <= opt.tol;
}

bool BoxedLcpSolver::AcceptAnswer(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state,
                                  Cod* cod, double* x, double* w, BoxedStats* stats) {
  Velocity(lcp, x, w);
  const double res = Residual(lcp, x, w, nullptr);
  if (!(res <= opt.tol)) return false;
  Classify(lcp, x, w, opt.tol, state);
  stats->iterations++;
  Reduced(lcp, state, 0, opt.rtol, cod, xs_.data(), ws_.data());
  KeepBest(lcp.n, res, x, w);
  return true;
}

void BoxedLcpSolver::Stabilize(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state,
                               Cod* cod, double* x, double* w, BoxedStats* stats) {
  // tied rows: at a bound with w = 0; they join C with the friction rows of a tied normal
  const int n = lcp.n;
  signed char* s2 = s2_.data();
  int ties = 0;
  std::copy(state, state + n, s2);
  for (int i = 0; i < n; i++) {
    if (state[i] == kLcpClamped || Bilateral(lcp, i) || Collapsed(lcp, nullptr, state, i)) continue;
    if (std::fabs(w[i]) > opt.tol) continue;
    ties++;
    s2[i] = kLcpClamped;
    for (int j = 0; j < n; j++) {
      if (lcp.findex[j] != i) continue;
      s2[j] = std::fabs(w[j]) <= opt.tol ? kLcpClamped : w[j] > 0 ? kLcpLower : kLcpUpper;
    }
  }
  if (ties == 0) return;
  Normalize(lcp, nullptr, s2);
  double* xs = xs_.data();
  double* ws = ws_.data();
  // the larger system is factored into the scratch, so that cod keeps state's factorization
  // when it is rejected
  if (Exact(lcp, opt, s2, &cod_, xs, ws, stats)) {
    std::copy(s2, s2 + n, state);
    std::copy(xs, xs + n, x);
    std::copy(ws, ws + n, w);
    cod->CopyFrom(cod_);
  }
}

bool BoxedLcpSolver::Polish(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state,
                            const double* x0, Cod* cod, double* x, double* w, BoxedStats* stats) {
  const int n = lcp.n;
  stats->iterations++;
  if (!Reduced(lcp, state, 0, opt.rtol, cod, x, w, x0)) return false;
  const double res = Residual(lcp, x, w, nullptr);
  KeepBest(n, res, x, w);
  return res <= opt.tol;
}

int BoxedLcpSolver::RegularClamped(const DenseLcp& lcp, signed char* state, double* x) {
  // pivoted Cholesky of A_CC (lu_ as scratch): the rows whose pivot stays above kRegularPivot
  // times the largest diagonal entry are independent
  int* c = cidx_.data();
  const int k = ClampedSet(lcp, state, c, pos_.data());
  const int r = PivotedCholesky(lcp, c, k, kRegularPivot, lu_.data());
  work_ += static_cast<double>(k) * k * k / 3;
  // the dependent ones leave C: a normal or limit to its lower bound (x = 0), a friction or other
  // box row to the bound of its sign (bilateral rows stay)
  for (int a = r; a < k; a++) {
    const int i = c[a];
    if (lcp.findex[i] < 0 && lcp.lo[i] == 0) {
      state[i] = kLcpLower;
      x[i] = 0;
    } else if (lcp.findex[i] >= 0 || std::isfinite(lcp.hi[i])) {
      state[i] = x[i] < 0 ? kLcpLower : kLcpUpper;
    }
  }
  return r;
}

bool BoxedLcpSolver::SweepStart(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state,
                                Cod* cod, double* x, double* w, BoxedStats* stats) {
  const int n = lcp.n;
  const double sweep = 2.0 * n * n;  // operations of one sweep or one product with A
  double* xs = xs_.data();
  double* ws = ws_.data();
  stats->swept = true;
  for (int i = 0; i < n; i++) {
    xs[i] = opt.start ? opt.start[i] : opt.use_guess && std::isfinite(x[i]) ? x[i] : 0;
  }
  Project(lcp, xs);
  uint64_t last = 0;
  for (int done = 0, round = 1; done < opt.pgs_iter && !Spent(opt, *stats); round++) {
    const int it = std::min(Pgs(lcp, opt.sweeps, opt.tol, xs) + 1, opt.sweeps);
    done += it;
    Velocity(lcp, xs, ws);
    work_ += sweep * (it + 1);
    const double res = Residual(lcp, xs, ws, nullptr);
    KeepBest(n, res, xs, ws);
    // the classification of the iterate, rows within its residual of a bound at the bound;
    // once it stops changing (or the iterate has converged), its exact solve
    Classify(lcp, xs, ws, std::max(opt.tol, res), state);
    std::copy(xs, xs + n, xg_.begin());
    const uint64_t h = Hash(state, n);
    if (h == last || res <= opt.tol || round >= kSweepRounds) {
      return Polish(lcp, opt, state, xs, cod, x, w, stats);
    }
    last = h;
  }
  return false;
}

bool BoxedLcpSolver::Fallback(const DenseLcp& lcp, const BoxedOptions& opt, double ridge,
                              signed char* state, Cod* cod, double* x, double* w,
                              BoxedStats* stats) {
  // Gauss-Seidel from the best answer so far, projected into the bounds (as many sweeps as the
  // work budget leaves); its classification and forces seed the frozen loop once more
  // After SweepStart an inexact answer is these sweeps' unless the best one is nearly exact
  // (residual within kKeepBest tol): the best residual can be an exact solve of a wrong
  // classification, projected, which on large islands (cloth, hammock) injected energy
  const int n = lcp.n;
  const bool swept = stats->swept && !(best_res_ <= kKeepBest * opt.tol);
  stats->used_pgs = true;
  double* xs = xs_.data();
  double* ws = ws_.data();
  for (int i = 0; i < n; i++) xs[i] = std::isfinite(best_res_) ? xb_[i] : 0;
  Project(lcp, xs);
  // (at least a tenth of the work budget: the answer returned comes from these sweeps)
  const double sweep = 2.0 * n * n;
  const double left = std::max(opt.max_work - work_, 0.1 * opt.max_work) / sweep;
  const int sweeps = static_cast<int>(std::min<double>(opt.pgs_iter, left));
  work_ += sweep * (std::min(Pgs(lcp, sweeps, opt.tol, xs) + 1, sweeps) + 1);
  Velocity(lcp, xs, ws);
  const double pgs_res = Residual(lcp, xs, ws, nullptr);
  const double loose = std::max(opt.tol, 1e-3 * pgs_res);
  Classify(lcp, xs, ws, loose, state);
  std::copy(xs, xs + n, xg_.begin());
  // the Gauss-Seidel answer is kept as the best one if it is (xs_ is scratch of the loops below,
  // which overwrote it before)
  KeepBest(n, pgs_res, xs, ws);
  // its classification solved exactly, else the frozen loop from it (Dantzig starts from x = 0
  // and may not find it again); the exact solve is skipped once the work budget is spent
  std::copy(xs, xs + n, x);
  if ((work_ < opt.max_work && Exact(lcp, opt, state, cod, x, w, stats)) ||
      FrozenLoop(lcp, opt, ridge, state, cod, x, w, stats)) {
    return true;
  }

  // no exact answer: keep the best one (Gauss-Seidel's or an exact solve's), and factor the
  // classification of what is returned
  if (swept) {
    std::copy(xg_.begin(), xg_.begin() + n, x);
  } else if (std::isfinite(best_res_)) {
    std::copy(xb_.begin(), xb_.begin() + n, x);
  }
  Project(lcp, x);
  Velocity(lcp, x, w);
  Classify(lcp, x, w, loose, state);
  if (opt.factor_inexact) {
    Reduced(lcp, state, 0, opt.rtol, cod, xs, ws);
  } else {
    stats->factored = false;
  }
  return false;
}

bool BoxedLcpSolver::LemkeAnswer(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state,
                                 Cod* cod, double* x, double* w, BoxedStats* stats) {
  // the exact solve of its classification (minimum-norm: redundant rows share), else Lemke's
  // own answer when it is complementary (on a degenerate basis the minimum-norm solution of
  // the classification can leave the bounds)
  const int n = lcp.n;
  std::copy(x, x + n, xl_.begin());
  Normalize(lcp, nullptr, state);
  if (Exact(lcp, opt, state, cod, x, w, stats)) return true;
  std::copy(xl_.begin(), xl_.begin() + n, x);
  return AcceptAnswer(lcp, opt, state, cod, x, w, stats);
}

bool BoxedLcpSolver::Solve(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state,
                           double* x, double* w, Cod* cod, BoxedStats* stats) {
  const int n = lcp.n;
  *stats = BoxedStats();
  best_res_ = HUGE_VAL;
  work_ = 0;
  fix_ = nullptr;
  double maxdiag = 0;
  for (int i = 0; i < n; i++)
    maxdiag = std::max(maxdiag, lcp.A[i + i * static_cast<size_t>(lcp.ld)]);
  const double ridge = opt.ridge * (maxdiag > 0 ? maxdiag : 1);
  bool nearest = false;        // the answer is the guess's nearest to opt.start (ExactFrom)
  bool warm = false;           // Lemke starts from the guess (sw_, xw_)
  double warm_k = 0;           // its clamped rows (Lemke's warm basis inverts about as many, k^3)
  bool dantzig_start = false;  // sd_, xd_ hold the guess's classification and answer
  auto finish = [&](bool exact) {
    if (exact) {
      stats->pivot_ok = !stats->guess_hit;
      // (not after ExactFrom: where the minimum-norm solution of the guess left the bounds, that
      // of the larger system did too: 164 of 164 steps of the resting cloth, one decomposition
      // each; nor on problems of opt.stabilize_rows rows: the stacked pile's islands of 60-250
      // rows joined their ties on 8-26 of 1000-1400 tries a run on 3.17, 0-325 of 960-2013 on
      // 2.2.2, one decomposition of the larger system each: docs/solvers.md, lcp18)
      if (!nearest && n < opt.stabilize_rows) Stabilize(lcp, opt, state, cod, x, w, stats);
    }
    stats->residual = Residual(lcp, x, w, &stats->kappa);
    stats->work = work_;
    stats->spent = !exact && Spent(opt, *stats);
    return exact;
  };

  // a few coupled pivots from a classification, then its exact solve
  BoxedOptions local = opt;
  local.max_pivots = std::min(opt.max_pivots, 2 * n + 2);
  auto repair = [&]() {
    local.budget = std::min(opt.budget, stats->iterations + kRepairSolves);
    return Pivot(lcp, local, ridge, state, x, w, stats) && Exact(lcp, opt, state, cod, x, w, stats);
  };

  // 1. the guessed classification (or a cold one), repaired by a few pivots when nearly right;
  // large problems first sweep from the guess's answer to a better classification
  if (opt.use_guess) {
    Normalize(lcp, nullptr, state);
    const bool check = opt.check_guess || n < opt.sweep_rows;
    if (check && Exact(lcp, opt, state, cod, x, w, stats)) {
      stats->guess_hit = true;
      return finish(true);
    }
    // a regular reduced system of a problem below sweep_rows: its complementary basis is Lemke's
    // warm start (kept in sw_, xw_). (Larger problems start from Gauss-Seidel instead; there a
    // warm run's pivots, 20 n^2 operations each, would take the work budget the others need)
    warm = opt.lemke_warm > 0 && check && n < opt.sweep_rows && cod->rank() >= kept_k_;
    warm_k = kept_k_;
    if (warm) {
      std::copy(state, state + n, sw_.begin());
      std::copy(x, x + n, xw_.begin());
    }
    // (on a rank-deficient reduced system, whatever the size, the guess also nearest to the
    // previous impulses, where the sweeps start: a quadruped's stance, 24 rows of rank 18)
    if (check && opt.start && ExactFrom(lcp, opt, state, opt.start, cod, x, w)) {
      stats->guess_hit = nearest = true;
      return finish(true);
    }
    // (the guess's answer, nearest to the previous impulses if that was solved, starts Dantzig's
    // method below)
    dantzig_start = check && n < opt.sweep_rows;
    if (dantzig_start) {
      std::copy(state, state + n, sd_.begin());
      std::copy(x, x + n, xd_.begin());
    }
  } else {
    ColdState(lcp, state);
  }
  if (n >= opt.sweep_rows && SweepStart(lcp, opt, state, cod, x, w, stats)) {
    return finish(true);
  }
  // (a large problem: the box QP of its friction bounds frozen at the Gauss-Seidel iterate's
  // normals, refrozen until exact, within kQpWork factorizations of the problem; where that
  // fails, Lemke's method from scratch follows without the repair, whose coupled pivots those
  // rounds made: docs/solvers.md, lcp17)
  const bool qp_tried = opt.qp_sweep && stats->swept;
  if (qp_tried) {
    std::copy(state, state + n, sd_.begin());
    std::copy(x, x + n, xd_.begin());
    std::copy(xg_.begin(), xg_.begin() + n, x);
    BoxedOptions qp = opt;
    qp.max_work = std::min(opt.max_work, work_ + kQpWork * n * n * n / 1.5);
    stats->qp_hit = FrozenLoop(lcp, qp, ridge, state, cod, x, w, stats, false, true);
    if (stats->qp_hit) return finish(true);
    std::copy(sd_.begin(), sd_.begin() + n, state);
    std::copy(xd_.begin(), xd_.begin() + n, x);
  }
  // (a large problem: its Gauss-Seidel classification, its clamped rows reduced to a regular
  // block, is Lemke's warm start, before the repair)
  const bool warm_sweep = opt.lemke_sweep && n >= opt.sweep_rows;
  if (warm_sweep) {
    std::copy(state, state + n, sw_.begin());
    std::copy(x, x + n, xw_.begin());
    warm_k = RegularClamped(lcp, sw_.data(), xw_.data());
    warm = true;
  }
  // 2. Lemke's method on the coupled problem (each run counted as one solve of the budget; its
  // pivots, about 20 n^2 operations each, within the work budget), then the exact solve of its
  // classification (else a repair from it). With opt.lemke_warm, when the guess's reduced system
  // is regular, first from its complementary basis (sw_, xw_: its pivots grow with the rows the
  // guess gets wrong), after the repair fails (1) or before it (2); then from scratch. (Either way
  // the stacked pile takes another path than without: docs/solvers.md, lcp14b)
  const double pivot_work = 20.0 * n * n;
  bool lemke_ok = false;
  auto lemke = [&](bool from_guess) {
    const int lemke_max = static_cast<int>(
        std::min<double>(opt.max_pivots, std::max(opt.max_work - work_, 0.0) / pivot_work));
    if (from_guess) {
      // (the current classification and answer kept in sw_, xw_, back if the run fails)
      std::swap_ranges(state, state + n, sw_.begin());
      std::swap_ranges(x, x + n, xw_.begin());
    }
    int lemke_pivots = 0;
    lemke_ok = !Spent(opt, *stats) && lemke_max > 0 &&
               lemke_.Solve(lcp, lemke_max, x, state, &lemke_pivots, from_guess);
    if (from_guess && !lemke_ok) {
      std::copy(sw_.begin(), sw_.begin() + n, state);
      std::copy(xw_.begin(), xw_.begin() + n, x);
    }
    if (from_guess && !lemke_.warm_ok()) return false;  // a singular basis: no pivot
    stats->pivots += lemke_pivots;
    stats->iterations++;
    work_ += pivot_work * lemke_pivots;
    if (from_guess) {
      stats->warm_pivots = lemke_pivots;
      work_ += warm_k * warm_k * warm_k;
    }
    if (lemke_ok && LemkeAnswer(lcp, opt, state, cod, x, w, stats)) {
      stats->warm_hit = from_guess;
      return true;
    }
    return lemke_ok && repair();
  };
  // Dantzig's method with frozen friction bounds, from the guess's answer (its rows that meet
  // their classification stay; a few events per wrong row; at most n solves, as where it fails
  // the repair and Lemke follow) or from zero (at most 4n: it enters every row). Only on islands
  // with friction-loss rows (a legged robot's joints): elsewhere the exact answers it finds on
  // degenerate islands differ from Lemke's, and the stacked pile's and the random scenes' chaotic
  // paths then part from main's (docs/solvers.md, lcp15)
  auto dantzig = [&]() {
    const bool from_guess = opt.use_guess && dantzig_start;
    if (from_guess && !WithinBounds(lcp, xd_.data(), opt.tol)) return false;  // far from it
    if (from_guess) {
      std::copy(xd_.begin(), xd_.begin() + n, x);
    } else {
      ColdState(lcp, state);
      std::fill(x, x + n, 0.0);
    }
    BoxedOptions frozen = opt;
    frozen.budget = std::min(opt.budget, stats->iterations + (from_guess ? n : 4 * n));
    if (FrozenLoop(lcp, frozen, ridge, state, cod, x, w, stats, from_guess)) return true;
    // (the repair then starts where it would have: the guess, or the cold classification)
    if (from_guess) {
      std::copy(sd_.begin(), sd_.begin() + n, state);
    } else {
      ColdState(lcp, state);
    }
    return false;
  };
  if (n < opt.sweep_rows && opt.dantzig_first && HasBoxRow(lcp) && dantzig()) return finish(true);
  const bool warm_first = warm && (opt.lemke_warm == 2 || warm_sweep);
  if (warm_first && lemke(true)) return finish(true);
  if (!(warm_first && lemke_ok) && !qp_tried && repair()) return finish(true);
  if (warm && !warm_first && lemke(true)) return finish(true);
  if (lemke(false)) return finish(true);

  // Dantzig's method with frozen friction bounds, refrozen until consistent
  if (!opt.use_guess && !lemke_ok) {
    ColdState(lcp, state);
    std::fill(x, x + n, 0.0);
  }
  Project(lcp, x);
  if (FrozenLoop(lcp, opt, ridge, state, cod, x, w, stats)) return finish(true);

  // 4. Gauss-Seidel, its classification, else the best answer found
  return finish(Fallback(lcp, opt, ridge, state, cod, x, w, stats));
}

}  // namespace contactkit
