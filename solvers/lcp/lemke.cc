// Copyright 2026 The contactkit developers.
#include "solvers/lcp/lemke.h"

#include <algorithm>
#include <cmath>

namespace contactkit {
namespace {

constexpr double kPivotTol = 1e-9;   // smallest usable pivot, relative to the column's largest
constexpr int kRefactor = 64;        // fewest pivots between periodic refactorizations
constexpr double kWeakPivot = 1e-1;  // pivots below this fraction of the column refactor soon
constexpr double kTieTol = 1e-12;    // relative tolerance for ties in the ratio test

enum Role { kRoleX = 0, kRoleP, kRoleM, kRoleS };
enum Kind { kUnilateral = 0, kBilateral, kBox };

}  // namespace

void Lemke::Allocate(int nmax) {
  const size_t rows = std::max(nmax, 1), N = 3 * rows;
  nmax_ = static_cast<int>(N);
  kind_.assign(rows, 0);
  var_.assign(rows, 0);
  row_.assign(N, 0);
  role_.assign(N, 0);
  Binv_.assign(N * N, 0);
  xB_.assign(N, 0);
  q_.assign(N, 0);
  basic_.assign(N, 0);
  where_.assign(2 * N + 1, -1);
  col_.assign(N, 0);
  tmp_.assign(N, 0);
  z_.assign(2 * N + 1, 0);
  cand_.assign(N, 0);
}

void Lemke::Column(const DenseLcp& lcp, int v, double* col) const {
  const int N = N_;
  if (v < N) {
    std::fill(col, col + N, 0.0);
    col[v] = 1;
    return;
  }
  if (v == 2 * N) {
    std::fill(col, col + N, -1.0);
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

bool Lemke::Refactor(const DenseLcp& lcp) {
  // B (row-major in Binv_) from the basic columns, inverted in place by Gauss-Jordan elimination
  // with partial pivoting, then xB = B^-1 q
  const int N = N_;
  double* B = Binv_.data();
  double* c = tmp_.data();
  for (int r = 0; r < N; r++) {
    Column(lcp, basic_[r], c);
    for (int i = 0; i < N; i++) B[static_cast<size_t>(i) * N + r] = c[i];
  }
  int* perm = cand_.data();
  for (int k = 0; k < N; k++) {
    int p = k;
    for (int i = k + 1; i < N; i++) {
      if (std::fabs(B[static_cast<size_t>(i) * N + k]) >
          std::fabs(B[static_cast<size_t>(p) * N + k]))
        p = i;
    }
    perm[k] = p;
    if (!(std::fabs(B[static_cast<size_t>(p) * N + k]) > 0)) return false;
    if (p != k) {
      for (int j = 0; j < N; j++)
        std::swap(B[static_cast<size_t>(k) * N + j], B[static_cast<size_t>(p) * N + j]);
    }
    double* bk = B + static_cast<size_t>(k) * N;
    const double inv = 1 / bk[k];
    bk[k] = 1;
    for (int j = 0; j < N; j++) bk[j] *= inv;
    for (int i = 0; i < N; i++) {
      if (i == k) continue;
      double* bi = B + static_cast<size_t>(i) * N;
      const double f = bi[k];
      if (f == 0) continue;
      bi[k] = 0;
      for (int j = 0; j < N; j++) bi[j] -= f * bk[j];
    }
  }
  // undo the row interchanges as column interchanges of the inverse
  for (int k = N - 1; k >= 0; k--) {
    if (perm[k] == k) continue;
    for (int i = 0; i < N; i++)
      std::swap(B[static_cast<size_t>(i) * N + k], B[static_cast<size_t>(i) * N + perm[k]]);
  }
  for (int i = 0; i < N; i++) {
    const double* bi = B + static_cast<size_t>(i) * N;
    double s = 0;
    for (int j = 0; j < N; j++) s += bi[j] * q_[j];
    xB_[i] = s;
  }
  return true;
}

bool Lemke::Solve(const DenseLcp& lcp, int max_pivots, double* x, signed char* state, int* pivots) {
  const int n = lcp.n;
  *pivots = 0;

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
  double* Binv = Binv_.data();
  for (int i = 0; i < n; i++) {
    const int v = var_[i];
    xB[v] = lcp.b[i];
    if (kind_[i] != kUnilateral) xB[v + 1] = -lcp.b[i];
    if (kind_[i] == kBox) xB[v + 2] = lcp.findex[i] >= 0 ? 0 : lcp.hi[i];
  }
  std::copy(xB, xB + N, q_.begin());
  std::fill(Binv, Binv + static_cast<size_t>(N) * N, 0.0);
  for (int r = 0; r < N; r++) {
    Binv[static_cast<size_t>(r) * N + r] = 1;
    basic_[r] = r;
  }
  std::fill(where_.begin(), where_.begin() + 2 * N + 1, -1);
  for (int r = 0; r < N; r++) where_[r] = r;

  // pivot on row r with the entering column col_ (in basis coordinates)
  auto pivot = [&](int r, int entering) {
    const double* c = col_.data();
    double* br = Binv + static_cast<size_t>(r) * N;
    const double inv = 1 / c[r];
    for (int j = 0; j < N; j++) br[j] *= inv;
    xB[r] *= inv;
    for (int i = 0; i < N; i++) {
      if (i == r || c[i] == 0) continue;
      double* bi = Binv + static_cast<size_t>(i) * N;
      const double f = c[i];
      for (int j = 0; j < N; j++) bi[j] -= f * br[j];
      xB[i] -= f * xB[r];
    }
    where_[basic_[r]] = -1;
    basic_[r] = entering;
    where_[entering] = r;
  };

  // entering column in basis coordinates: col_ = Binv [I, -M, -d]_v
  auto enter = [&](int v) {
    if (v < N) {
      // a slack column: the basis inverse's column v
      for (int i = 0; i < N; i++) col_[i] = Binv[static_cast<size_t>(i) * N + v];
      return;
    }
    double* a = tmp_.data();
    Column(lcp, v, a);
    for (int i = 0; i < N; i++) {
      const double* bi = Binv + static_cast<size_t>(i) * N;
      double s = 0;
      for (int j = 0; j < N; j++) s += bi[j] * a[j];
      col_[i] = s;
    }
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
    pivot(qmin, z0);
    int leaving = qmin;  // w_qmin left
    int since = 0;       // pivots since the last refactorization
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
          lo = std::min(lo, Binv[static_cast<size_t>(cand_[q]) * N + j] / col_[cand_[q]]);
        }
        int keep = 0;
        for (int q = 0; q < m; q++) {
          const double t = Binv[static_cast<size_t>(cand_[q]) * N + j] / col_[cand_[q]];
          if (t <= lo + kTieTol * (1 + std::fabs(lo))) cand_[keep++] = cand_[q];
        }
        m = keep;
      }
      if (r < 0) r = cand_[0];
      leaving = basic_[r];
      const bool weak = col_[r] < kWeakPivot * cmax;
      pivot(r, entering);
      ++*pivots;
      // the updated inverse loses accuracy on weak pivots and slowly on every pivot
      if (++since >= (weak ? std::max(1, N / 16) : std::max(kRefactor, N / 2))) {
        if (!Refactor(lcp)) return false;
        since = 0;
      }
      if (leaving == z0) {
        solved = true;
        break;
      }
    }
  }
  if (!solved || (*pivots > 0 && !Refactor(lcp))) return false;

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
