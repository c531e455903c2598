// Copyright 2026 The contactkit developers.
#include "solvers/lcp/lemke.h"

#include <algorithm>
#include <cmath>

#include "solvers/common/dense.h"

namespace contactkit {
namespace {

constexpr double kPivotTol = 1e-5;      // smallest usable pivot, relative to the column's largest
                                        // (1e-9 took pivots at rounding level on the pile's
                                        // nearly singular bases: docs/solvers.md, pile20)
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

// G[t] += u_t v (t < k, t != skip) over the first k columns (row-major, stride ld): the rank-one
// part of G's updates
CK_ALWAYS_INLINE void RankOneBody(double* g, size_t ld, int k, const double* u, const double* v,
                                  int skip) {
  for (int t = 0; t < k; t++) {
    if (t == skip || u[t] == 0) continue;
    double* gt = g + t * ld;
    const double f = u[t];
    for (int a = 0; a < k; a++) gt[a] += f * v[a];
  }
}

// out = G y (k x k, row-major, stride ld)
CK_ALWAYS_INLINE void MatVecBody(const double* g, size_t ld, int k, const double* y, double* out) {
  for (int t = 0; t < k; t++) out[t] = Dot(g + t * ld, y, k);
}

// v = sum_t s_t G[t] (k rows of G, stride ld)
CK_ALWAYS_INLINE void VecMatBody(const double* g, size_t ld, int k, const double* s, double* v) {
  std::fill(v, v + k, 0.0);
  for (int t = 0; t < k; t++) {
    const double f = s[t];
    if (f == 0) continue;
    const double* gt = g + t * ld;
    for (int a = 0; a < k; a++) v[a] += f * gt[a];
  }
}

#if CK_AVX2_CLONES
CK_TARGET_AVX2 void RankOneAvx2(double* g, size_t ld, int k, const double* u, const double* v,
                                int skip) {
  RankOneBody(g, ld, k, u, v, skip);
}
CK_TARGET_AVX2 void MatVecAvx2(const double* g, size_t ld, int k, const double* y, double* out) {
  MatVecBody(g, ld, k, y, out);
}
CK_TARGET_AVX2 void VecMatAvx2(const double* g, size_t ld, int k, const double* s, double* v) {
  VecMatBody(g, ld, k, s, v);
}
#endif

// the kernels above, AVX2 where it runs (the same bits: solvers/common/dense.h)
void RankOne(double* g, size_t ld, int k, const double* u, const double* v, int skip) {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return RankOneAvx2(g, ld, k, u, v, skip);
#endif
  RankOneBody(g, ld, k, u, v, skip);
}
void MatVec(const double* g, size_t ld, int k, const double* y, double* out) {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return MatVecAvx2(g, ld, k, y, out);
#endif
  MatVecBody(g, ld, k, y, out);
}
void VecMat(const double* g, size_t ld, int k, const double* s, double* v) {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return VecMatAvx2(g, ld, k, s, v);
#endif
  VecMatBody(g, ld, k, s, v);
}

}  // namespace

void Lemke::Allocate(int nmax) {
  const size_t rows = std::max(nmax, 1), N = 3 * rows;
  nmax_ = static_cast<int>(N);
  kind_.assign(rows, 0);
  var_.assign(rows, 0);
  row_.assign(N, 0);
  role_.assign(N, 0);
  xB_.assign(N, 0);
  q_.assign(N, 0);
  d_.assign(N, 1);
  basic_.assign(N, 0);
  where_.assign(2 * N + 1, -1);
  col_.assign(N, 0);
  tmp_.assign(2 * N, 0);
  z_.assign(2 * N + 1, 0);
  cand_.assign(N, 0);
  tvar_.assign(N, 0);
  tpos_.assign(N + 1, -1);
  req_.assign(N, 0);
  rpos_.assign(N, -1);
  xT_.assign(N, 0);
  rowv_.assign(N, 0);
  srow_.assign(N, 0);
  snn_.assign(N, 0);
  perm_.assign(N, 0);
  g_.Allocate(N * N);  // (pages written as large problems use them)
  s_.Allocate(N * N);
  snz_.Allocate(N * N);
  lex_.Allocate(N * N);
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

void Lemke::StoreColumn(int t, int v, const double* a) {
  const int N = N_;
  const size_t ld = nmax_;
  double* st = s_.data() + t * ld;
  int* nz = snz_.data() + t * ld;
  int m = 0;
  for (int j = 0; j < N; j++) {
    st[j] = a[j];
    if (a[j] != 0) nz[m++] = j;
  }
  snn_[t] = m;
  tvar_[t] = v;
  tpos_[v - N] = t;
}

void Lemke::SetColumn(const DenseLcp& lcp, int t, int v) {
  double* a = tmp_.data() + N_;
  Column(lcp, v, a);
  StoreColumn(t, v, a);
}

void Lemke::RowTimesG(int r, double* v) {
  const size_t ld = nmax_;
  double* sr = srow_.data();
  for (int t = 0; t < k_; t++) sr[t] = s_.data()[t * ld + r];
  VecMat(g_.data(), ld, k_, sr, v);
}

void Lemke::Pivot(int r, int v) {
  const int N = N_, k = k_;
  const size_t ld = nmax_;
  const double* c = col_.data();
  double* xB = xB_.data();
  xB[r] /= c[r];
  for (int i = 0; i < N; i++) {
    if (i != r && c[i] != 0) xB[i] -= c[i] * xB[r];
  }
  const int out = basic_[r];
  double* G = g_.data();
  const double* u = xT_.data();       // G a_R of the entering column (Apply)
  double* h = rowv_.data();           // the rank-one update's row (k + 1)
  const double* a = tmp_.data() + N;  // the entering column (enter)
  if (v >= N && out < N) {
    // a structural column enters, the slack of row out leaves: R gains row out, G is bordered
    RowTimesG(out, h);
    const double inv = 1 / c[r];  // (a_out - S_out u)
    for (int q = 0; q < k; q++) h[q] *= inv;
    RankOne(G, ld, k, u, h, -1);
    for (int t = 0; t < k; t++) G[t * ld + k] = -u[t] * inv;
    double* gk = G + k * ld;
    for (int q = 0; q < k; q++) gk[q] = -h[q];
    gk[k] = inv;
    StoreColumn(k, v, a);
    req_[k] = out;
    rpos_[out] = k;
    k_ = k + 1;
  } else if (v >= N) {
    // a structural column replaces another in S: G's row t divided by the pivot, eliminated
    const int t = tpos_[out - N];
    double* gt = G + t * ld;
    const double inv = 1 / u[t];
    for (int q = 0; q < k; q++) {
      gt[q] *= inv;
      h[q] = -gt[q];
    }
    RankOne(G, ld, k, u, h, t);
    tpos_[out - N] = -1;
    StoreColumn(t, v, a);
  } else if (out >= N) {
    // the slack of row v enters, a structural column leaves: G loses its row t and column p
    const int t = tpos_[out - N], p = rpos_[v], last = k - 1;
    const double* gt = G + t * ld;
    const double inv = -1 / gt[p];
    for (int q = 0; q < k; q++) h[q] = gt[q] * inv;
    RankOne(G, ld, k, u, h, t);
    tpos_[out - N] = -1;
    if (t != last) {
      std::copy(G + last * ld, G + last * ld + k, G + t * ld);
      std::copy(s_.data() + last * ld, s_.data() + last * ld + N, s_.data() + t * ld);
      std::copy(snz_.data() + last * ld, snz_.data() + last * ld + snn_[last],
                snz_.data() + t * ld);
      snn_[t] = snn_[last];
      tvar_[t] = tvar_[last];
      tpos_[tvar_[t] - N] = t;
    }
    if (p != last) {
      for (int q = 0; q < last; q++) G[q * ld + p] = G[q * ld + last];
      req_[p] = req_[last];
      rpos_[req_[p]] = p;
    }
    rpos_[v] = -1;
    k_ = last;
  } else {
    // the slack of row v enters, that of row out leaves: R's row v is replaced by row out
    const int p = rpos_[v];
    RowTimesG(out, h);
    const double inv = -1 / h[p];
    h[p] -= 1;
    for (int q = 0; q < k; q++) h[q] *= inv;
    RankOne(G, ld, k, u, h, -1);
    req_[p] = out;
    rpos_[out] = p;
    rpos_[v] = -1;
  }
  where_[out] = -1;
  basic_[r] = v;
  where_[v] = r;
}

void Lemke::Apply(const double* y, double* out) {
  // x_T = G y_R, then x_J = y_J - S_J x_T (S's nonzero rows)
  const int N = N_, k = k_;
  const size_t ld = nmax_;
  double* yr = rowv_.data();
  for (int a = 0; a < k; a++) yr[a] = y[req_[a]];
  double* xT = xT_.data();
  MatVec(g_.data(), ld, k, yr, xT);
  double* sx = z_.data();  // S x_T by row (N; z_ is free until the answer is read)
  std::fill(sx, sx + N, 0.0);
  for (int t = 0; t < k; t++) {
    const double f = xT[t];
    if (f == 0) continue;
    const double* st = s_.data() + t * ld;
    const int* nz = snz_.data() + t * ld;
    for (int m = 0; m < snn_[t]; m++) sx[nz[m]] += f * st[nz[m]];
  }
  for (int r = 0; r < N; r++) {
    const int v = basic_[r];
    out[r] = v < N ? y[v] - sx[v] : xT[tpos_[v - N]];
  }
}

CK_ALWAYS_INLINE bool Lemke::RefactorBody(const DenseLcp& lcp, double pivot_tol) {
  // T: the structural basic variables in the order of their places; R: the rows no basic slack
  // covers, ascending; G = S_R^-1 (row-major by T, columns by R)
  const int N = N_;
  const size_t ld = nmax_;
  std::fill(where_.begin(), where_.begin() + 2 * N + 1, -1);
  for (int r = 0; r < N; r++) where_[basic_[r]] = r;
  std::fill(tpos_.begin(), tpos_.begin() + N + 1, -1);
  int k = 0;
  for (int r = 0; r < N; r++) {
    if (basic_[r] >= N) SetColumn(lcp, k++, basic_[r]);
  }
  int kr = 0;
  for (int j = 0; j < N; j++) {
    rpos_[j] = -1;
    if (where_[j] < 0) {
      if (kr == k) return false;
      req_[kr] = j;
      rpos_[j] = kr++;
    }
  }
  if (kr != k) return false;
  k_ = k;
  // S_R (row-major by R) inverted in place: its inverse is row-major by T
  double* G = g_.data();
  double* w = lex_.data();  // (k x k scratch)
  for (int a = 0; a < k; a++) {
    for (int t = 0; t < k; t++) w[static_cast<size_t>(a) * k + t] = s_.data()[t * ld + req_[a]];
  }
  if (!InvertInPlace(w, k, perm_.data(), pivot_tol)) return false;
  for (int t = 0; t < k; t++) {
    std::copy(w + static_cast<size_t>(t) * k, w + static_cast<size_t>(t + 1) * k, G + t * ld);
  }
  // basic solution B^-1 q
  Apply(q_.data(), xB_.data());
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
  // r = q - B xB (into tmp_), then xB += B^-1 r
  Residual(lcp);
  Apply(tmp_.data(), col_.data());
  for (int i = 0; i < N_; i++) xB_[i] += col_[i];
}

double Lemke::Residual(const DenseLcp& lcp) {
  // r = q - B xB over the basic columns: slacks are unit columns, structural ones S's
  (void)lcp;
  const int N = N_;
  const size_t ld = nmax_;
  double* r = tmp_.data();
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
    const int t = tpos_[v - N];
    const double* st = s_.data() + t * ld;
    const int* nz = snz_.data() + t * ld;
    for (int m = 0; m < snn_[t]; m++) r[nz[m]] -= st[nz[m]] * xB_[i];
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
    for (int r = 0; r < N; r++) basic_[r] = r;  // B = I: no structural column, G empty
    std::fill(where_.begin(), where_.begin() + 2 * N + 1, -1);
    for (int r = 0; r < N; r++) where_[r] = r;
    std::fill(tpos_.begin(), tpos_.begin() + N + 1, -1);
    std::fill(rpos_.begin(), rpos_.begin() + N, -1);
    k_ = 0;
  }

  // entering column in basis coordinates: col_ = B^-1 [I, -M, -d]_v (the column kept in tmp_'s
  // second half for Pivot)
  auto enter = [&](int v) {
    double* a = tmp_.data() + N;
    Column(lcp, v, a);
    Apply(a, col_.data());
  };
  // entry (i, j) of the basis inverse, after lexrows(...) for the tied places: a structural place's
  // row is G's, a slack's -S_s G on R and its unit vector elsewhere
  const size_t ld = nmax_;
  auto lexrow = [&](int q, int i) {  // the row of place i on R into lex_'s row q
    double* lr = lex_.data() + q * ld;
    const int v = basic_[i];
    if (v >= N) {
      std::copy(g_.data() + tpos_[v - N] * ld, g_.data() + tpos_[v - N] * ld + k_, lr);
      return;
    }
    RowTimesG(v, lr);
    for (int a = 0; a < k_; a++) lr[a] = -lr[a];
  };
  auto binv = [&](int q, int i, int j) {
    const int a = rpos_[j];
    if (a >= 0) return lex_.data()[q * ld + a];
    return basic_[i] == j ? 1.0 : 0.0;
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
    Pivot(qmin, z0);
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
      // (candidates and their rows of the inverse kept side by side: cand_[q], lex_'s row q)
      if (m > 1 && r < 0) {
        for (int q = 0; q < m; q++) lexrow(q, cand_[q]);
      }
      for (int j = 0; j < N && m > 1 && r < 0; j++) {
        double lo = HUGE_VAL;
        for (int q = 0; q < m; q++) {
          lo = std::min(lo, binv(q, cand_[q], j) / col_[cand_[q]]);
        }
        int keep = 0;
        for (int q = 0; q < m; q++) {
          const double t = binv(q, cand_[q], j) / col_[cand_[q]];
          if (t <= lo + kTieTol * (1 + std::fabs(lo))) {
            if (keep != q) {
              std::copy(lex_.data() + q * ld, lex_.data() + q * ld + k_, lex_.data() + keep * ld);
            }
            cand_[keep++] = cand_[q];
          }
        }
        m = keep;
      }
      if (r < 0) r = cand_[0];
      leaving = basic_[r];
      const bool weak = col_[r] < kWeakPivot * cmax;
      Pivot(r, entering);
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
  // (a run keeps its updated G unless the basic solution lost accuracy: from scratch the final
  // refactorization was 7% of the pile's replayed large islands, and changed no count of exact
  // answers, pivots or solves there)
  const bool refactor = *pivots > 0 && Residual(lcp) > kResidualTol;
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
