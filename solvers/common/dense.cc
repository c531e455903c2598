// Copyright 2026 The contactkit developers.
#include "solvers/common/dense.h"

#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "solvers/common/columns.h"
#include "solvers/common/sparse.h"

namespace contactkit {
namespace {

constexpr double kTinyPivot = 1e-300;

// y[s] -= a x[s] for s in [s0, s1), two entries at a time (each as alone)
inline void SubScaled(double a, const double* x, int s0, int s1, double* y) {
  const columns::Pair a2 = {a, a};
  int s = s0;
  for (; s + 1 < s1; s += 2) {
    columns::Store<2>(y + s, columns::Load<2>(y + s) - a2 * columns::Load<2>(x + s));
  }
  if (s < s1) y[s] -= a * x[s];
}

// CholSolve on W columns of the row-major block y (stride ld), both sweeps pulling into registers
template <int W>
CK_ALWAYS_INLINE void CholSolveColumns(const double* L, int n, double* y, int ld) {
  for (int i = 0; i < n; i++) {
    double* yi = y + static_cast<size_t>(i) * ld;
    double acc[W];
    for (int c = 0; c < W; c++) acc[c] = yi[c];
    for (int q = 0; q < i; q++) {
      const double l = L[q * n + i];
      if (l == 0) continue;
      const double* yq = y + static_cast<size_t>(q) * ld;
      for (int c = 0; c < W; c++) acc[c] -= l * yq[c];
    }
    const double inv = 1 / L[i * n + i];
    for (int c = 0; c < W; c++) yi[c] = acc[c] * inv;
  }
  for (int i = n - 1; i >= 0; i--) {
    double* yi = y + static_cast<size_t>(i) * ld;
    const double* Li = L + i * n;
    double acc[W];
    for (int c = 0; c < W; c++) acc[c] = yi[c];
    for (int q = i + 1; q < n; q++) {
      const double l = Li[q];
      if (l == 0) continue;
      const double* yq = y + static_cast<size_t>(q) * ld;
      for (int c = 0; c < W; c++) acc[c] -= l * yq[c];
    }
    const double inv = 1 / Li[i];
    for (int c = 0; c < W; c++) yi[c] = acc[c] * inv;
  }
}

// CholSolveBlock's chunks of W columns (W = 16 holds AVX2's, 8 SSE2's accumulators in registers),
// then of 8, then the rest one by one
template <int W>
CK_ALWAYS_INLINE void CholSolveBlockBody(const double* L, int n, double* y, int nb, int ld) {
  int c = 0;
  for (; c + W <= nb; c += W) CholSolveColumns<W>(L, n, y + c, ld);
  for (; c + 8 <= nb; c += 8) CholSolveColumns<8>(L, n, y + c, ld);
  for (; c < nb; c++) CholSolveColumns<1>(L, n, y + c, ld);
}

// LuFactor's operations (the portable code and its AVX2 clone)
CK_ALWAYS_INLINE bool LuFactorBody(double* lu, int k, int* piv) {
  for (int j = 0; j < k; j++) {
    double* cj = lu + static_cast<size_t>(j) * k;
    int p = j;
    for (int i = j + 1; i < k; i++) {
      if (std::fabs(cj[i]) > std::fabs(cj[p])) p = i;
    }
    piv[j] = p;
    if (!(std::fabs(cj[p]) > 0) || !std::isfinite(cj[p])) return false;
    if (p != j) {
      for (int c = 0; c < k; c++)
        std::swap(lu[j + static_cast<size_t>(c) * k], lu[p + static_cast<size_t>(c) * k]);
    }
    const double inv = 1 / cj[j];
    for (int i = j + 1; i < k; i++) cj[i] *= inv;
    // rank-1 update of the trailing block, column by column (contiguous)
    for (int c = j + 1; c < k; c++) {
      double* cc = lu + static_cast<size_t>(c) * k;
      const double f = cc[j];
      if (f == 0) continue;
      for (int i = j + 1; i < k; i++) cc[i] -= cj[i] * f;
    }
  }
  return true;
}

// AddTransposeBlock's operations (the portable code and its AVX2 clone)
CK_ALWAYS_INLINE void AddTransposeBody(const SparseRows& J, const int* group, const double* F,
                                       size_t ldf, int n, double* X, int ldx) {
  double f[columns::kMaxGroup][kTransposeBlock];
  for (int i = 0; i < J.nrow;) {
    // (a group of rows with one pattern whose every row has a coefficient: at once)
    const int g = group && group[i] > 1 && group[i] <= columns::kMaxGroup ? group[i] : 1;
    bool any[columns::kMaxGroup];
    int nany = 0;
    for (int r = 0; r < g; r++) {
      any[r] = false;
      for (int s = 0; s < n; s++) {
        f[r][s] = F[s * ldf + i + r];
        any[r] |= f[r][s] != 0;
      }
      nany += any[r];
    }
    if (g > 1 && nany == g) {
      if (g == 4) {
        columns::AddGroupT<4, kTransposeBlock>(J, f, i, g, n, X, ldx);
      } else if (g == 3) {
        columns::AddGroupT<3, kTransposeBlock>(J, f, i, g, n, X, ldx);
      } else {
        columns::AddGroupT<0, kTransposeBlock>(J, f, i, g, n, X, ldx);
      }
      i += g;
      continue;
    }
    for (int r = 0; r < g; r++, i++) {
      if (!any[r]) continue;
      for (int q = J.rowadr[i]; q < J.rowadr[i] + J.rownnz[i]; q++) {
        double* x = X + static_cast<size_t>(J.colind[q]) * ldx;
        const double v = J.val[q];
        for (int s = 0; s < n; s++) x[s] += v * f[r][s];
      }
    }
  }
}

#if CK_AVX2_CLONES
CK_TARGET_AVX2 void AddTransposeAvx2(const SparseRows& J, const int* group, const double* F,
                                     size_t ldf, int n, double* X, int ldx) {
  AddTransposeBody(J, group, F, ldf, n, X, ldx);
}

CK_TARGET_AVX2 void CholSolveBlockAvx2(const double* L, int n, double* y, int nb, int ld) {
  CholSolveBlockBody<16>(L, n, y, nb, ld);
}

CK_TARGET_AVX2 bool LuFactorAvx2(double* lu, int k, int* piv) { return LuFactorBody(lu, k, piv); }

typedef double Quad __attribute__((vector_size(32)));

// columns::RowTimes on W columns (a multiple of 4) in quads: each column's sum the same
template <int W>
CK_ALWAYS_INLINE void RowTimesQuads(const double* val, const int* col, int n, const double* X,
                                    size_t ld, double* u) {
  constexpr int H = W / 4;
  Quad acc[H] = {};
  for (int k = 0; k < n; k++) {
    const Quad v = {val[k], val[k], val[k], val[k]};
    const double* x = X + static_cast<size_t>(col ? col[k] : k) * ld;
    for (int h = 0; h < H; h++) {
      Quad xv;
      std::memcpy(&xv, x + 4 * h, sizeof(xv));
      acc[h] += v * xv;
    }
  }
  for (int h = 0; h < H; h++) std::memcpy(u + 4 * h, &acc[h], sizeof(Quad));
}

// RowsTimes on W columns (a multiple of 4) of R rows in quads, u[r] + c the rows' chunk
template <int W, int R>
CK_ALWAYS_INLINE void RowsTimesQuads(const double* const* val, const int* col, int n,
                                     const double* X, size_t ld, double* const* u, int c) {
  constexpr int H = W / 4;
  Quad acc[R][H] = {};
  for (int k = 0; k < n; k++) {
    const double* x = X + static_cast<size_t>(col ? col[k] : k) * ld;
    Quad xv[H];
    for (int h = 0; h < H; h++) std::memcpy(&xv[h], x + 4 * h, sizeof(Quad));
    for (int r = 0; r < R; r++) {
      const Quad v = {val[r][k], val[r][k], val[r][k], val[r][k]};
      for (int h = 0; h < H; h++) acc[r][h] += v * xv[h];
    }
  }
  for (int r = 0; r < R; r++) {
    for (int h = 0; h < H; h++) std::memcpy(u[r] + c + 4 * h, &acc[r][h], sizeof(Quad));
  }
}

template <int R>
CK_TARGET_AVX2 void RowsTimesAvx2(const double* const* val, const int* col, int n, const double* X,
                                  size_t ld, int ncol, double* const* u) {
  int c = 0;
  for (; c + 8 <= ncol; c += 8) RowsTimesQuads<8, R>(val, col, n, X + c, ld, u, c);
  for (; c + 4 <= ncol; c += 4) RowsTimesQuads<4, R>(val, col, n, X + c, ld, u, c);
  if (c == ncol) return;
  double* uc[R];  // (the last columns, fewer than four, in pairs)
  for (int r = 0; r < R; r++) uc[r] = u[r] + c;
  columns::RowsTimesAll<R>(val, col, n, X + c, ld, ncol - c, uc);
}

CK_TARGET_AVX2 void RowTimesAvx2(const double* val, const int* col, int n, const double* X,
                                 size_t ld, int ncol, double* u) {
  int c = 0;
  for (; c + 16 <= ncol; c += 16) RowTimesQuads<16>(val, col, n, X + c, ld, u + c);
  for (; c + 8 <= ncol; c += 8) RowTimesQuads<8>(val, col, n, X + c, ld, u + c);
  for (; c + 4 <= ncol; c += 4) RowTimesQuads<4>(val, col, n, X + c, ld, u + c);
  for (; c + 2 <= ncol; c += 2) columns::RowTimes<2>(val, col, n, X + c, ld, u + c);
  for (; c < ncol; c++) columns::RowTimes<1>(val, col, n, X + c, ld, u + c);
}
#endif

}  // namespace

bool Avx2Kernels::On() {
#if CK_AVX2_CLONES
  static const bool cpu = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0 && !std::getenv("CK_NO_AVX2");
  }();
  return allowed_ && cpu;
#else
  return false;
#endif
}

//---------------------------------- column-major ------------------------------------------------

bool LuFactor(double* lu, int k, int* piv) {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return LuFactorAvx2(lu, k, piv);
#endif
  return LuFactorBody(lu, k, piv);
}

void LuSolve(const double* lu, const int* piv, int k, double* b) {
  for (int j = 0; j < k; j++) {
    if (piv[j] != j) std::swap(b[j], b[piv[j]]);
  }
  for (int j = 0; j < k; j++) {
    const double* cj = lu + static_cast<size_t>(j) * k;
    const double bj = b[j];
    if (bj == 0) continue;
    for (int i = j + 1; i < k; i++) b[i] -= cj[i] * bj;
  }
  for (int j = k - 1; j >= 0; j--) {
    const double* cj = lu + static_cast<size_t>(j) * k;
    b[j] /= cj[j];
    const double bj = b[j];
    if (bj == 0) continue;
    for (int i = 0; i < j; i++) b[i] -= cj[i] * bj;
  }
}

void LuSolveT(const double* lu, const int* piv, int n, double* x) {
  for (int j = 0; j < n; j++) {
    const double* cj = lu + static_cast<size_t>(j) * n;
    double s = x[j];
    for (int i = 0; i < j; i++) s -= cj[i] * x[i];
    x[j] = s / cj[j];
  }
  for (int j = n - 1; j >= 0; j--) {
    const double* cj = lu + static_cast<size_t>(j) * n;
    double s = x[j];
    for (int i = j + 1; i < n; i++) s -= cj[i] * x[i];
    x[j] = s;
  }
  for (int k = n - 1; k >= 0; k--) std::swap(x[k], x[piv[k]]);
}

bool CholFactor(double* a, int n) {
  for (int j = 0; j < n; j++) {
    double* __restrict cj = a + j * n;
    // row j's entries j.. less the finished rows' products, k ascending for every entry (the
    // same sums as one entry at a time; contiguous in i); a zero factor's products are zeros
    // (a tree's Hessian: only ancestors couple)
    for (int k = 0; k < j; k++) {
      const double* __restrict ak = a + k * n;
      const double f = ak[j];
      if (f == 0) continue;
      for (int i = j; i < n; i++) cj[i] -= ak[i] * f;
    }
    double d = cj[j];
    if (!(d > 0)) return false;
    d = std::sqrt(d);
    cj[j] = d;
    for (int i = j + 1; i < n; i++) cj[i] = cj[i] / d;
  }
  return true;
}

void CholSolve(const double* L, int n, double* x) {
  for (int i = 0; i < n; i++) {
    double s = x[i];
    for (int k = 0; k < i; k++) s -= L[k * n + i] * x[k];
    x[i] = s / L[i * n + i];
  }
  for (int i = n - 1; i >= 0; i--) {
    const double* ci = L + i * n;
    double s = x[i];
    for (int k = i + 1; k < n; k++) s -= ci[k] * x[k];
    x[i] = s / ci[i];
  }
}

void CholSolveBlock(const double* L, int n, double* y, int nb, int ld) {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return CholSolveBlockAvx2(L, n, y, nb, ld);
#endif
  CholSolveBlockBody<8>(L, n, y, nb, ld);
}

//---------------------------------- row-major ---------------------------------------------------

bool LuFactorRows(double* a, int n, int* piv, double* mn, double* mx) {
  for (int c = 0; c < n; c++) {
    if (piv) {
      int best = c;
      for (int r = c + 1; r < n; r++) {
        if (std::fabs(a[r * n + c]) > std::fabs(a[best * n + c])) best = r;
      }
      piv[c] = best;
      if (best != c) {
        for (int k = 0; k < n; k++) std::swap(a[c * n + k], a[best * n + k]);
      }
    }
    const double p = a[c * n + c];
    const double ap = std::fabs(p);
    if (!(ap > kTinyPivot) || !std::isfinite(p)) return false;
    *mn = std::fmin(*mn, ap);
    *mx = std::fmax(*mx, ap);
    const double ip = 1 / p;
    const double* rowc = a + c * n;
    for (int r = c + 1; r < n; r++) {
      double* rowr = a + r * n;
      const double l = rowr[c] * ip;
      rowr[c] = l;
      if (l != 0) SubScaled(l, rowc, c + 1, n, rowr);
    }
  }
  return true;
}

void PermuteRows(const int* piv, int n, double* x) {
  for (int c = 0; c < n; c++) {
    if (piv[c] != c) std::swap(x[c], x[piv[c]]);
  }
}

void PermuteRowsT(const int* piv, int n, double* x) {
  for (int c = n - 1; c >= 0; c--) {
    if (piv[c] != c) std::swap(x[c], x[piv[c]]);
  }
}

void LowerSolveRows(const double* lu, int n, double* B, int m) {
  for (int r = 1; r < n; r++) {
    double* br = B + r * m;
    for (int c = 0; c < r; c++) {
      const double l = lu[r * n + c];
      if (l == 0) continue;
      SubScaled(l, B + c * m, 0, m, br);
    }
  }
}

void UpperSolveRows(const double* lu, int n, double* x) {
  for (int r = n - 1; r >= 0; r--) {
    double s = x[r];
    for (int c = r + 1; c < n; c++) s -= lu[r * n + c] * x[c];
    x[r] = s / lu[r * n + r];
  }
}

void UpperSolveRowsT(const double* lu, int n, double* x) {
  for (int r = 0; r < n; r++) {
    double s = x[r];
    for (int c = 0; c < r; c++) s -= lu[c * n + r] * x[c];
    x[r] = s / lu[r * n + r];
  }
}

void LowerSolveRowsT(const double* lu, int n, double* x) {
  for (int r = n - 1; r >= 0; r--) {
    double s = x[r];
    for (int c = r + 1; c < n; c++) s -= lu[c * n + r] * x[c];
    x[r] = s;
  }
}

void UpperSolveRight(const double* lu, int n, double* B, int m) {
  // (rows of B two at a time, each as alone)
  int r = 0;
  for (; r + 1 < m; r += 2) {
    double* b0 = B + r * n;
    double* b1 = b0 + n;
    for (int c = 0; c < n; c++) {
      columns::Pair s = {b0[c], b1[c]};
      for (int k = 0; k < c; k++) s -= columns::Pair{b0[k], b1[k]} * lu[k * n + c];
      s /= lu[c * n + c];
      b0[c] = s[0];
      b1[c] = s[1];
    }
  }
  for (; r < m; r++) {
    double* b = B + r * n;
    for (int c = 0; c < n; c++) {
      double s = b[c];
      for (int k = 0; k < c; k++) s -= b[k] * lu[k * n + c];
      b[c] = s / lu[c * n + c];
    }
  }
}

void GemmSub(double* C, const double* A, const double* B, int m, int k, int n) {
  for (int i = 0; i < m; i++) {
    double* ci = C + i * n;
    const double* ai = A + i * k;
    for (int l = 0; l < k; l++) {
      const double a = ai[l];
      if (a == 0) continue;
      SubScaled(a, B + l * n, 0, n, ci);
    }
  }
}

void GemvSub(double* y, const double* A, const double* x, int m, int n) {
  for (int i = 0; i < m; i++) {
    double s = 0;
    const double* ai = A + i * n;
    for (int j = 0; j < n; j++) s += ai[j] * x[j];
    y[i] -= s;
  }
}

void GemvTSub(double* y, const double* A, const double* x, int m, int n) {
  for (int i = 0; i < m; i++) {
    const double xi = x[i];
    if (xi == 0) continue;
    const double* ai = A + i * n;
    for (int j = 0; j < n; j++) y[j] -= ai[j] * xi;
  }
}

void AddTransposeBlock(const SparseRows& J, const double* F, size_t ldf, int n, double* X, int ldx,
                       const int* group) {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return AddTransposeAvx2(J, group, F, ldf, n, X, ldx);
#endif
  AddTransposeBody(J, group, F, ldf, n, X, ldx);
}

namespace columns {

void RowTimesWide(const double* val, const int* col, int n, const double* X, size_t ld, int ncol,
                  double* u) {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return RowTimesAvx2(val, col, n, X, ld, ncol, u);
#endif
  RowTimesAll(val, col, n, X, ld, ncol, u);
}

template <int R>
void RowsTimesWide(const double* const* val, const int* col, int n, const double* X, size_t ld,
                   int ncol, double* const* u) {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return RowsTimesAvx2<R>(val, col, n, X, ld, ncol, u);
#endif
  RowsTimesAll<R>(val, col, n, X, ld, ncol, u);
}

template void RowsTimesWide<2>(const double* const*, const int*, int, const double*, size_t, int,
                               double* const*);
template void RowsTimesWide<3>(const double* const*, const int*, int, const double*, size_t, int,
                               double* const*);
template void RowsTimesWide<4>(const double* const*, const int*, int, const double*, size_t, int,
                               double* const*);

}  // namespace columns

}  // namespace contactkit
