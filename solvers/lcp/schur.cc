// Copyright 2026 The contactkit developers.
#include "solvers/lcp/schur.h"

#include <algorithm>
#include <cmath>

#include "solvers/common/dense.h"

namespace contactkit {
namespace {

// w = A x + b (A symmetric: row i read as column i)
void Velocity(const DenseLcp& lcp, const double* x, double* w) {
  for (int i = 0; i < lcp.n; i++) {
    w[i] = lcp.b[i] + Dot(lcp.A + static_cast<size_t>(i) * lcp.ld, x, lcp.n);
  }
}

}  // namespace

void BilateralSchur::Allocate(int nmax) {
  const size_t n = std::max(nmax, 1);
  nmax_ = static_cast<int>(n);
  eidx_.assign(n, 0);
  ridx_.assign(n, 0);
  rpos_.assign(n, 0);
  L_.Allocate(n * n);
  G_.Allocate(n * n);
  S_.Allocate(n * n);
  s_.assign(n, 0);
  lo_.assign(n, 0);
  hi_.assign(n, 0);
  mu_.assign(n, 0);
  findex_.assign(n, -1);
  ge_.assign(n, 0);
  t_.assign(n, 0);
}

void BilateralSchur::Lower(double* y) const {
  const int e = ne_;
  const double* L = L_.data();
  for (int k = 0; k < e; k++) {
    const double* lk = L + static_cast<size_t>(k) * e;
    const double yk = y[k] / lk[k];
    y[k] = yk;
    for (int i = k + 1; i < e; i++) y[i] -= lk[i] * yk;
  }
}

void BilateralSchur::LowerT(double* y) const {
  const int e = ne_;
  const double* L = L_.data();
  for (int i = e - 1; i >= 0; i--) {
    const double* li = L + static_cast<size_t>(i) * e;
    y[i] = (y[i] - Dot(li + i + 1, y + i + 1, e - i - 1)) / li[i];
  }
}

bool BilateralSchur::Reduce(const DenseLcp& lcp, int min_rows, double rcond) {
  const int n = lcp.n;
  const size_t ld = lcp.ld;
  work_ = 0;
  if (n > nmax_ || !lcp.symmetric) return false;
  int e = 0, m = 0;
  for (int i = 0; i < n; i++) {
    const bool bilateral = lcp.findex[i] < 0 && std::isinf(lcp.lo[i]) && std::isinf(lcp.hi[i]);
    if (bilateral) {
      rpos_[i] = -1;
      eidx_[e++] = i;
    } else {
      rpos_[i] = m;
      ridx_[m++] = i;
    }
  }
  if (e < min_rows) return false;
  for (int a = 0; a < m; a++) {
    const int i = ridx_[a], f = lcp.findex[i];
    if (f >= 0 && rpos_[f] < 0) return false;  // bounds scaled by a bilateral row
    findex_[a] = f >= 0 ? rpos_[f] : -1;
    lo_[a] = lcp.lo[i];
    hi_[a] = lcp.hi[i];
    mu_[a] = lcp.mu[i];
  }

  // L L' = A_EE, accepted when its smallest pivot is not lost in rounding
  ne_ = e;
  const size_t es = e, ms = m;
  double* L = L_.data();
  double maxdiag = 0;
  for (int c = 0; c < e; c++) {
    const double* col = lcp.A + eidx_[c] * ld;
    for (int r = 0; r < e; r++) L[r + c * es] = col[eidx_[r]];
    maxdiag = std::max(maxdiag, L[c + c * es]);
  }
  const double de = e, dm = m;
  work_ = de * de * de / 3 + de * de * dm + de * dm * dm;
  if (!CholFactor(L, e)) return false;
  for (int c = 0; c < e; c++) {
    if (!(L[c + c * es] * L[c + c * es] > rcond * maxdiag)) return false;
  }

  // G = L^-1 A_ER, S = A_RR - G'G (symmetric), s = b_R - G' L^-1 b_E
  double* G = G_.data();
  for (int a = 0; a < m; a++) {
    double* g = G + a * es;
    const double* col = lcp.A + ridx_[a] * ld;
    for (int r = 0; r < e; r++) g[r] = col[eidx_[r]];
    Lower(g);
  }
  double* ge = ge_.data();
  for (int r = 0; r < e; r++) ge[r] = lcp.b[eidx_[r]];
  Lower(ge);
  double* S = S_.data();
  for (int b = 0; b < m; b++) {
    const double* gb = G + b * es;
    const double* col = lcp.A + ridx_[b] * ld;
    for (int a = 0; a <= b; a++) {
      const double v = col[ridx_[a]] - Dot(G + a * es, gb, e);
      S[a + b * ms] = v;
      S[b + a * ms] = v;
    }
    s_[b] = lcp.b[ridx_[b]] - Dot(gb, ge, e);
  }
  full_ = &lcp;
  red_ = DenseLcp{m, m, S, s_.data(), lo_.data(), hi_.data(), findex_.data(), mu_.data(), true};
  return true;
}

void BilateralSchur::Gather(const double* v, double* vr) const {
  for (int a = 0; a < red_.n; a++) vr[a] = v[ridx_[a]];
}

void BilateralSchur::Expand(const double* xr, double* x, double* w) {
  const DenseLcp& lcp = *full_;
  const int e = ne_, m = red_.n;
  const size_t es = e;
  double* t = t_.data();
  // x_E = -L^-T (L^-1 b_E + G x_R)
  for (int a = 0; a < m; a++) x[ridx_[a]] = xr[a];
  std::copy(ge_.begin(), ge_.begin() + e, t);
  for (int a = 0; a < m; a++) {
    const double* g = G_.data() + a * es;
    const double xa = xr[a];
    if (xa == 0) continue;
    for (int r = 0; r < e; r++) t[r] += g[r] * xa;
  }
  LowerT(t);
  for (int r = 0; r < e; r++) x[eidx_[r]] = -t[r];
  // one step of iterative refinement: x_E -= A_EE^-1 w_E
  Velocity(lcp, x, w);
  for (int r = 0; r < e; r++) t[r] = w[eidx_[r]];
  Lower(t);
  LowerT(t);
  for (int r = 0; r < e; r++) x[eidx_[r]] -= t[r];
  Velocity(lcp, x, w);
}

void BilateralSchur::Rebase(const double* b) {
  const int e = ne_, m = red_.n;
  const size_t es = e;
  double* ge = ge_.data();
  for (int r = 0; r < e; r++) ge[r] = b[eidx_[r]];
  Lower(ge);
  for (int a = 0; a < m; a++) s_[a] = b[ridx_[a]] - Dot(G_.data() + a * es, ge, e);
}

}  // namespace contactkit
