// Copyright 2026 The contactkit developers.
#include "solvers/lcp/lemke.h"

#include <algorithm>
#include <cmath>

#include "solvers/common/dense.h"

namespace contactkit {
namespace {

constexpr double kPivotTol = 1e-9;      // smallest usable pivot, relative to the column's largest
constexpr int kRefactor = 64;           // fewest pivots between periodic refactorizations
constexpr double kWeakPivot = 1e-1;     // pivots below this fraction of the column refactor soon
constexpr double kTieTol = 1e-12;       // relative tolerance for ties in the ratio test
constexpr double kResidualTol = 1e-13;  // relative residual of the basic solution kept
constexpr double kWarmPivot = 1e-10;    // smallest pivot of a warm basis, relative to its entries
constexpr double kWarmZero = 1e-13;     // basic values of a warm basis taken as 0, relative to q
constexpr int kWarmPivots = 8;          // pivots of a warm run: this many, plus
constexpr int kWarmPerRow = 4;          // ... this many per row of negative basic value

enum Role { kRoleX = 0, kRoleP, kRoleM, kRoleS };
enum Kind { kUnilateral = 0, kBilateral, kBox };

// inverse of the k x k row-major matrix a in place by Gauss-Jordan elimination with partial
// pivoting (perm: k row interchanges); false if a pivot is at most tol times the largest entry
CK_ALWAYS_INLINE bool InvertInPlace(double* a, int k, int* perm, double tol) {
  double amax = 0;
  for (size_t i = 0; i < static_cast<size_t>(k) * k; i++) amax = std::max(amax, std::fabs(a[i]));
  const double small = tol * amax;
  for (int c = 0; c < k; c++) {
    int p = c;
    for (int i = c + 1; i < k; i++) {
      if (std::fabs(a[static_cast<size_t>(i) * k + c]) >
          std::fabs(a[static_cast<size_t>(p) * k + c]))
        p = i;
    }
    perm[c] = p;
    if (!(std::fabs(a[static_cast<size_t>(p) * k + c]) > small)) return false;
    if (p != c) {
      for (int j = 0; j < k; j++)
        std::swap(a[static_cast<size_t>(c) * k + j], a[static_cast<size_t>(p) * k + j]);
    }
    double* ac = a + static_cast<size_t>(c) * k;
    const double inv = 1 / ac[c];
    ac[c] = 1;
    for (int j = 0; j < k; j++) ac[j] *= inv;
    for (int i = 0; i < k; i++) {
      if (i == c) continue;
      double* ai = a + static_cast<size_t>(i) * k;
      const double f = ai[c];
      if (f == 0) continue;
      ai[c] = 0;
      for (int j = 0; j < k; j++) ai[j] -= f * ac[j];
    }
  }
  // undo the row interchanges as column interchanges of the inverse
  for (int c = k - 1; c >= 0; c--) {
    if (perm[c] == c) continue;
    for (int i = 0; i < k; i++)
      std::swap(a[static_cast<size_t>(i) * k + c], a[static_cast<size_t>(i) * k + perm[c]]);
  }
  return true;
}

// row i -= c_i row r of the row-major block bu (stride ld, first nu columns) and x_i -= c_i x_r,
// on the rows i != r (of N) with c_i != 0: a pivot's update of the basis inverse
CK_ALWAYS_INLINE void EliminateBody(double* bu, size_t ld, int N, int nu, const double* c, int r,
                                    double* x) {
  const double* br = bu + r * ld;
  for (int i = 0; i < N; i++) {
    if (i == r || c[i] == 0) continue;
    double* bi = bu + i * ld;
    const double f = c[i];
    for (int q = 0; q < nu; q++) bi[q] -= f * br[q];
    x[i] -= f * x[r];
  }
}

// out_i = (basic_i < N ? a[basic_i] : 0) + bu_i . au (nu columns): a column in basis coordinates
CK_ALWAYS_INLINE void BasisProductBody(const double* bu, size_t ld, int N, int nu, const double* au,
                                       const double* a, const int* basic, double* out) {
  for (int i = 0; i < N; i++) {
    out[i] = (basic[i] < N ? a[basic[i]] : 0) + Dot(bu + i * ld, au, nu);
  }
}

#if CK_AVX2_CLONES
CK_TARGET_AVX2 void EliminateAvx2(double* bu, size_t ld, int N, int nu, const double* c, int r,
                                  double* x) {
  EliminateBody(bu, ld, N, nu, c, r, x);
}
CK_TARGET_AVX2 void BasisProductAvx2(const double* bu, size_t ld, int N, int nu, const double* au,
                                     const double* a, const int* basic, double* out) {
  BasisProductBody(bu, ld, N, nu, au, a, basic, out);
}
#endif

// EliminateBody and BasisProductBody, AVX2 where it runs (the same bits: solvers/common/dense.h)
void Eliminate(double* bu, size_t ld, int N, int nu, const double* c, int r, double* x) {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return EliminateAvx2(bu, ld, N, nu, c, r, x);
#endif
  EliminateBody(bu, ld, N, nu, c, r, x);
}
void BasisProduct(const double* bu, size_t ld, int N, int nu, const double* au, const double* a,
                  const int* basic, double* out) {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return BasisProductAvx2(bu, ld, N, nu, au, a, basic, out);
#endif
  BasisProductBody(bu, ld, N, nu, au, a, basic, out);
}

}  // namespace

void Lemke::Allocate(int nmax) {
  const size_t rows = std::max(nmax, 1), N = 3 * rows;
  nmax_ = static_cast<int>(N);
  kind_.assign(rows, 0);
  var_.assign(rows, 0);
  row_.assign(N, 0);
  role_.assign(N, 0);
  bu_.Allocate(N * N);  // (pages written as large problems use them)
  xB_.assign(N, 0);
  q_.assign(N, 0);
  d_.assign(N, 1);
  basic_.assign(N, 0);
  where_.assign(2 * N + 1, -1);
  col_.assign(N, 0);
  tmp_.assign(2 * N, 0);
  z_.assign(2 * N + 1, 0);
  cand_.assign(N, 0);
  ucol_.assign(N, 0);
  upos_.assign(N, -1);
  rowpos_.assign(N, 0);
  perm_.assign(N, 0);
  g_.Allocate(N * N);
}

void Lemke::Column(const DenseLcp& lcp, int v, double* col) const {
  const int N = N_;
  if (v < N) {
    std::fill(col, col + N, 0.0);
    col[v] = 1;
    return;
  }
  if (v == 2 * N) {
    for (int i = 0; i < N; i++) col[i] = -d_[i];
    return;
  }

  // M e for the z variable e, then negated
  const int e = v - N, r = row_[e], role = role_[e];
  std::fill(col, col + N, 0.0);
  const double sign = role == kRoleM ? -1 : role == kRoleS ? 0 : 1;
  if (sign != 0) {
    const double* a = lcp.A + static_cast<size_t>(r) * lcp.ld;
    for (int i = 0; i < lcp.n; i++) {
      const double y = sign * a[i];
      const int vi = var_[i];
      col[vi] += y;
      if (kind_[i] != kUnilateral) col[vi + 1] -= y;
    }
  }
  if (role == kRoleS) {
    col[var_[r]] += 1;
    col[var_[r] + 1] += 1;
  } else if (role == kRoleP || role == kRoleM) {
    if (kind_[r] == kBox) col[var_[r] + 2] -= 1;
  } else {
    // a normal force widens the friction boxes that scale with it
    for (int j = 0; j < lcp.n; j++) {
      if (lcp.findex[j] == r) col[var_[j] + 2] += lcp.mu[j];
    }
  }
  for (int i = 0; i < N; i++) col[i] = -col[i];
}

CK_ALWAYS_INLINE bool Lemke::RefactorBody(const DenseLcp& lcp, double pivot_tol) {
  // the basis has identity columns e_j for its basic slacks w_j (rows J) and k structural
  // columns S (z and z0) whose rows R are the rows no slack covers: B x = y gives
  // S_R x_T = y_R and x_J = y_J - S_J x_T, so only the k x k block S_R is inverted. The
  // inverse's columns R (the uncovered ones) go to BU, in the order of R
  const int N = N_;
  double* col = tmp_.data();  // one structural column                 (N)
  int* spos = cand_.data();   // row of the basis of each structural column
  std::fill(where_.begin(), where_.begin() + N, -1);
  for (int r = 0; r < N; r++) {
    if (basic_[r] < N) where_[basic_[r]] = r;
  }
  int k = 0;
  for (int j = 0; j < N; j++) {
    upos_[j] = -1;
    if (where_[j] < 0) {
      ucol_[k] = j;
      upos_[j] = k++;
    }
  }
  // S_R (row-major) into G
  double* G = g_.data();
  int t = 0;
  for (int r = 0; r < N; r++) {
    if (basic_[r] < N) continue;
    if (t == k) return false;
    Column(lcp, basic_[r], col);
    spos[t] = r;
    for (int a = 0; a < k; a++) G[static_cast<size_t>(a) * k + t] = col[ucol_[a]];
    t++;
  }
  if (t != k || !InvertInPlace(G, k, perm_.data(), pivot_tol)) return false;

  // slack rows: e_j' - S_j G (the unit part implicit), one structural column at a time (formed
  // again rather than stored); structural rows: G's rows
  double* BU = bu_.data();
  for (int r = 0; r < N; r++) {
    if (basic_[r] < N)
      std::fill(BU + static_cast<size_t>(r) * N, BU + static_cast<size_t>(r) * N + k, 0.0);
  }
  for (int s = 0; s < k; s++) {
    Column(lcp, basic_[spos[s]], col);
    const double* gs = G + static_cast<size_t>(s) * k;
    for (int r = 0; r < N; r++) {
      const int j = basic_[r];
      if (j >= N || col[j] == 0) continue;
      const double c = col[j];
      double* br = BU + static_cast<size_t>(r) * N;
      for (int a = 0; a < k; a++) br[a] -= c * gs[a];
    }
  }
  for (int s = 0; s < k; s++) {
    std::copy(G + static_cast<size_t>(s) * k, G + static_cast<size_t>(s + 1) * k,
              BU + static_cast<size_t>(spos[s]) * N);
  }
  nu_ = k;
  for (int j = 0; j < N; j++) where_[j] = -1;
  for (int r = 0; r < N; r++) where_[basic_[r]] = r;
  // basic solution B^-1 q
  double* qu = tmp_.data();
  for (int a = 0; a < k; a++) qu[a] = q_[ucol_[a]];
  for (int r = 0; r < N; r++) {
    const double* br = BU + static_cast<size_t>(r) * N;
    double v = basic_[r] < N ? q_[basic_[r]] : 0;
    for (int a = 0; a < k; a++) v += br[a] * qu[a];
    xB_[r] = v;
  }
  return true;
}

bool Lemke::Refactor(const DenseLcp& lcp, double pivot_tol) {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return RefactorAvx2(lcp, pivot_tol);
#endif
  return RefactorBody(lcp, pivot_tol);
}

#if CK_AVX2_CLONES
CK_TARGET_AVX2 bool Lemke::RefactorAvx2(const DenseLcp& lcp, double pivot_tol) {
  return RefactorBody(lcp, pivot_tol);
}
#endif

void Lemke::Refine(const DenseLcp& lcp) {
  // r = q - B xB (into tmp_), then xB += B^-1 r, the inverse applied as in Refactor
  Residual(lcp);
  const int N = N_, k = nu_;
  const double* r = tmp_.data();
  double* ru = tmp_.data() + N;  // r on the columns of BU
  for (int a = 0; a < k; a++) ru[a] = r[ucol_[a]];
  for (int i = 0; i < N; i++) {
    const double* bi = bu_.data() + static_cast<size_t>(i) * N;
    double v = basic_[i] < N ? r[basic_[i]] : 0;
    for (int a = 0; a < k; a++) v += bi[a] * ru[a];
    col_[i] = v;
  }
  for (int i = 0; i < N; i++) xB_[i] += col_[i];
}

double Lemke::Residual(const DenseLcp& lcp) {
  // r = q - B xB over the basic columns: slacks are unit columns, structural ones are computed
  const int N = N_;
  double* r = tmp_.data();
  double* col = tmp_.data() + N;
  double scale = 1;
  for (int i = 0; i < N; i++) {
    r[i] = q_[i];
    scale = std::max(scale, std::fabs(q_[i]));
  }
  for (int i = 0; i < N; i++) {
    const int v = basic_[i];
    if (v < N) {
      r[v] -= xB_[i];
      continue;
    }
    Column(lcp, v, col);
    for (int j = 0; j < N; j++) r[j] -= col[j] * xB_[i];
  }
  double res = 0;
  for (int i = 0; i < N; i++) res = std::max(res, std::fabs(r[i]));
  return res / scale;
}

bool Lemke::WarmBasis(const DenseLcp& lcp, const signed char* state, const double* x) {
  // per row, the basic member of each complementary pair (w_j or z_j, z_j = j + N):
  //   unilateral: clamped z, else w; bilateral: p and w_m (x >= 0), else w_p and m;
  //   box (p, m, s): clamped p, w_m, w_s (x >= 0) or w_p, m, w_s; upper p, w_m, s; lower w_p, m, s
  //   a friction row whose normal is not clamped (its bounds collapsed to 0): at the bound its
  //   velocity w = (A x + b)_i at x pushes against (lower if w >= 0), whatever state says
  const int N = N_;
  for (int i = 0; i < lcp.n; i++) {
    const int v = var_[i], f = lcp.findex[i];
    signed char si = state[i];
    if (f >= 0 && state[f] != kLcpClamped) {
      double wi = lcp.b[i];
      for (int j = 0; j < lcp.n; j++) wi += lcp.A[i + static_cast<size_t>(j) * lcp.ld] * x[j];
      si = wi < 0 ? kLcpUpper : kLcpLower;
    }
    const bool up = si == kLcpUpper || (si == kLcpClamped && !(x[i] < 0));
    if (kind_[i] == kUnilateral) {
      basic_[v] = state[i] == kLcpClamped ? v + N : v;
      continue;
    }
    basic_[v] = up ? v + N : v;
    basic_[v + 1] = up ? v + 1 : v + 1 + N;
    if (kind_[i] == kBox) basic_[v + 2] = si == kLcpClamped ? v + 2 : v + 2 + N;
  }
  std::fill(where_.begin(), where_.begin() + 2 * N + 1, -1);
  for (int r = 0; r < N; r++) where_[basic_[r]] = r;
  if (!Refactor(lcp, kWarmPivot)) return false;
  // (basic values within rounding of zero, as degenerate rows of an exact basis have, are zero)
  double scale = 1;
  for (int r = 0; r < N; r++) scale = std::max(scale, std::fabs(q_[r]));
  for (int r = 0; r < N; r++) {
    if (!std::isfinite(xB_[r])) return false;
    if (xB_[r] < 0 && xB_[r] >= -kWarmZero * scale) xB_[r] = 0;
  }
  // d = B e': the basic columns of the rows with a negative basic value, summed
  double* col = tmp_.data();
  std::fill(d_.begin(), d_.begin() + N, 0.0);
  nneg_ = 0;
  for (int r = 0; r < N; r++) {
    if (!(xB_[r] < 0)) continue;
    nneg_++;
    Column(lcp, basic_[r], col);
    for (int i = 0; i < N; i++) d_[i] += col[i];
  }
  return true;
}

bool Lemke::Solve(const DenseLcp& lcp, int max_pivots, double* x, signed char* state, int* pivots,
                  bool warm) {
  const int n = lcp.n;
  *pivots = 0;
  warm_ok_ = false;

  // standard variables
  int N = 0;
  for (int i = 0; i < n; i++) {
    const double lo = lcp.lo[i], hi = lcp.hi[i];
    int kind;
    if (lcp.findex[i] >= 0) {
      kind = kBox;
    } else if (std::isinf(lo) && std::isinf(hi)) {
      kind = kBilateral;
    } else if (lo == 0 && std::isinf(hi)) {
      kind = kUnilateral;
    } else if (lo == -hi && hi > 0 && !std::isinf(hi)) {
      kind = kBox;
    } else {
      return false;
    }
    const int nvar = kind == kUnilateral ? 1 : kind == kBilateral ? 2 : 3;
    if (N + nvar > nmax_) return false;
    kind_[i] = kind;
    var_[i] = N;
    for (int k = 0; k < nvar; k++) {
      row_[N + k] = i;
      role_[N + k] = kind == kUnilateral ? kRoleX : k + 1;
    }
    N += nvar;
  }
  for (int i = 0; i < n; i++) {
    const int f = lcp.findex[i];
    if (f >= 0 && kind_[f] != kUnilateral) return false;
  }
  N_ = N;

  // q and the all-slack basis
  double* xB = xB_.data();
  for (int i = 0; i < n; i++) {
    const int v = var_[i];
    xB[v] = lcp.b[i];
    if (kind_[i] != kUnilateral) xB[v + 1] = -lcp.b[i];
    if (kind_[i] == kBox) xB[v + 2] = lcp.findex[i] >= 0 ? 0 : lcp.hi[i];
  }
  std::copy(xB, xB + N, q_.begin());
  warm_ok_ = warm && WarmBasis(lcp, state, x);
  if (warm && !warm_ok_) return false;
  // (a guess wrong in a few rows takes a few pivots; one that takes many is no better a start
  // than the slacks, and its budget is left to the other methods)
  if (warm_ok_) max_pivots = std::min(max_pivots, kWarmPivots + kWarmPerRow * nneg_);
  if (!warm_ok_) {
    std::fill(d_.begin(), d_.begin() + N, 1.0);
    for (int r = 0; r < N; r++) basic_[r] = r;  // Binv = I (held by BU below: no column)
    std::fill(where_.begin(), where_.begin() + 2 * N + 1, -1);
    for (int r = 0; r < N; r++) where_[r] = r;
  }

  // The basis inverse is dense only in the columns U of the nonbasic slacks: the column of a
  // basic slack w_j is the unit vector of its row. Those columns are kept packed, row by row, in
  // BU (N x |U|, row stride N), so that products and updates cost O(N |U|) per pivot
  double* BU = bu_.data();
  int* ucol = ucol_.data();  // column of the inverse held in BU's column q
  int* upos = upos_.data();  // BU's column of the inverse's column j, -1 for a basic slack
  int& nu = nu_;
  if (!warm_ok_) {
    nu = 0;
    std::fill(upos, upos + N, -1);
  }
  auto binv = [&](int i, int j) {  // entry (i, j) of the basis inverse
    return upos[j] >= 0 ? BU[static_cast<size_t>(i) * N + upos[j]] : where_[j] == i ? 1.0 : 0.0;
  };

  // pivot on row r with the entering column col_ (in basis coordinates)
  auto pivot = [&](int r, int entering) {
    const double* c = col_.data();
    const int own = basic_[r] < N ? basic_[r] : -1;  // the leaving slack's column
    if (own >= 0) {
      // nonbasic from now on: its column (the unit vector of row r) joins BU
      for (int i = 0; i < N; i++) BU[static_cast<size_t>(i) * N + nu] = i == r ? 1 : 0;
      ucol[nu] = own;
      upos[own] = nu++;
    }
    double* br = BU + static_cast<size_t>(r) * N;
    const double inv = 1 / c[r];
    for (int q = 0; q < nu; q++) br[q] *= inv;
    xB[r] *= inv;
    Eliminate(BU, N, N, nu, c, r, xB);
    where_[basic_[r]] = -1;
    basic_[r] = entering;
    where_[entering] = r;
    if (entering < N) {
      // a basic slack: its column is the unit vector of row r, no longer kept in BU
      const int q = upos[entering], last = --nu;
      if (q != last) {
        for (int i = 0; i < N; i++) {
          BU[static_cast<size_t>(i) * N + q] = BU[static_cast<size_t>(i) * N + last];
        }
        ucol[q] = ucol[last];
        upos[ucol[q]] = q;
      }
      upos[entering] = -1;
    }
  };

  // entering column in basis coordinates: col_ = Binv [I, -M, -d]_v
  auto enter = [&](int v) {
    if (v < N) {
      // a nonbasic slack: the basis inverse's column v
      for (int i = 0; i < N; i++) col_[i] = BU[static_cast<size_t>(i) * N + upos[v]];
      return;
    }
    double* a = tmp_.data();
    double* au = a + N;  // a on the columns of BU
    Column(lcp, v, a);
    for (int q = 0; q < nu; q++) au[q] = a[ucol[q]];
    BasisProduct(BU, N, N, nu, au, a, basic_.data(), col_.data());
  };

  bool solved = true;
  int qmin = -1;
  for (int r = 0; r < N; r++) {
    if (xB[r] < 0 && (qmin < 0 || xB[r] <= xB[qmin])) qmin = r;
  }
  if (qmin >= 0) {
    // z0 enters at the most negative q (lexicographic ties: the largest index)
    const int z0 = 2 * N;
    enter(z0);
    int leaving = basic_[qmin];  // (w_qmin from scratch)
    pivot(qmin, z0);
    int since = 0;  // pivots since the last refactorization
    solved = false;
    while (*pivots < max_pivots) {
      const int entering = leaving < N ? leaving + N : leaving - N;
      enter(entering);
      double cmax = 0;
      for (int i = 0; i < N; i++) cmax = std::max(cmax, std::fabs(col_[i]));
      const double eps = kPivotTol * std::max(cmax, 1e-300);

      // lexicographic minimum ratio
      int m = 0;
      double best = HUGE_VAL;
      for (int i = 0; i < N; i++) {
        if (col_[i] > eps) best = std::min(best, xB[i] / col_[i]);
      }
      for (int i = 0; i < N; i++) {
        if (col_[i] > eps && xB[i] / col_[i] <= best + kTieTol * (1 + std::fabs(best))) {
          cand_[m++] = i;
        }
      }
      if (m == 0) break;  // secondary ray
      int r = -1;
      for (int q = 0; q < m && r < 0; q++) {
        if (basic_[cand_[q]] == z0) r = cand_[q];  // z0 leaving ends the path
      }
      for (int j = 0; j < N && m > 1 && r < 0; j++) {
        double lo = HUGE_VAL;
        for (int q = 0; q < m; q++) {
          lo = std::min(lo, binv(cand_[q], j) / col_[cand_[q]]);
        }
        int keep = 0;
        for (int q = 0; q < m; q++) {
          const double t = binv(cand_[q], j) / col_[cand_[q]];
          if (t <= lo + kTieTol * (1 + std::fabs(lo))) cand_[keep++] = cand_[q];
        }
        m = keep;
      }
      if (r < 0) r = cand_[0];
      leaving = basic_[r];
      const bool weak = col_[r] < kWeakPivot * cmax;
      pivot(r, entering);
      ++*pivots;
      // the updated inverse loses accuracy on weak pivots and slowly on every pivot: checked
      // now and then by the basic solution's residual (O(N k)), refactored (O(k^3)) when lost
      if (++since >= (weak ? std::max(1, N / 16) : std::max(kRefactor, N / 2))) {
        if (Residual(lcp) > kResidualTol && !Refactor(lcp)) return false;
        since = 0;
      }
      if (leaving == z0) {
        solved = true;
        break;
      }
    }
  }
  // (a warm run of a few pivots keeps its updated inverse unless the basic solution lost accuracy)
  const bool refactor = *pivots > 0 && (!warm_ok_ || Residual(lcp) > kResidualTol);
  if (!solved || (refactor && !Refactor(lcp))) return false;
  if (*pivots > 0 || warm_ok_) Refine(lcp);

  // solution and classification from the basis
  double* z = z_.data();
  std::fill(z, z + 2 * N + 1, 0.0);
  for (int r = 0; r < N; r++) z[basic_[r]] = std::max(xB[r], 0.0);
  auto isbasic = [&](int var) { return where_[N + var] >= 0; };
  for (int i = 0; i < n; i++) {
    const int v = var_[i];
    if (kind_[i] == kUnilateral) {
      x[i] = z[N + v];
      state[i] = isbasic(v) ? kLcpClamped : kLcpLower;
    } else {
      x[i] = z[N + v] - z[N + v + 1];
      state[i] = kLcpClamped;
      if (kind_[i] == kBox && isbasic(v + 2)) {
        state[i] = isbasic(v) ? kLcpUpper : kLcpLower;
      }
    }
  }
  for (int i = 0; i < n; i++) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

}  // namespace contactkit
