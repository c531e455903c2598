// Copyright 2026 The contactkit developers.
#include "solvers/common/cod.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "solvers/common/dense.h"

namespace contactkit {
namespace {

// Householder reflector H = I - tau v v' with v = [1; x[1:m]] mapping x to [beta; 0]; x[0]
// becomes beta and x[1:m] the tail of v
CK_ALWAYS_INLINE double MakeReflector(double* x, int m) {
  if (m <= 1) return 0;
  const double xnorm2 = Dot(x + 1, x + 1, m - 1);
  if (xnorm2 == 0) return 0;
  const double alpha = x[0];
  const double beta = -std::copysign(std::sqrt(alpha * alpha + xnorm2), alpha);
  const double scale = 1 / (alpha - beta);
  for (int i = 1; i < m; i++) x[i] *= scale;
  x[0] = beta;
  return (beta - alpha) / beta;
}

// y = H y for the reflector with tail v (m - 1 entries) and scale tau
CK_ALWAYS_INLINE void ApplyReflector(const double* v, double tau, int m, double* y) {
  if (tau == 0) return;
  const double s = tau * (y[0] + Dot(v + 1, y + 1, m - 1));
  y[0] -= s;
  for (int i = 1; i < m; i++) y[i] -= s * v[i];
}

// W columns of a row as N = W / L lanes of L doubles: vectors of four where W allows (GCC and
// clang), else single doubles; each lane's operations are the scalar ones element by element.
// (With plain loops over the columns the compiler vectorizes the loops over rows instead,
// transposing W x 4 tiles or reducing in order: several times the instructions.)
#if defined(__GNUC__)
typedef double Vec4 __attribute__((vector_size(32)));
template <int W>
using Lane = std::conditional_t<W % 4 == 0, Vec4, double>;
#else
template <int W>
using Lane = double;
#endif

template <class T>
CK_ALWAYS_INLINE void LoadLane(T* x, const double* p) {
  std::memcpy(x, p, sizeof(T));
}

template <class T>
CK_ALWAYS_INLINE void StoreLane(double* p, const T& x) {
  std::memcpy(p, &x, sizeof(T));
}

// ApplyReflector on W columns stored row-major (y[i ld + c]): each column's dot in Dot's four
// partial sums, the same operations as ApplyReflector on the column alone
template <int W>
CK_ALWAYS_INLINE void ApplyReflectorBlock(const double* v, double tau, int m, double* y,
                                          size_t ld) {
  if (tau == 0) return;
  using T = Lane<W>;
  constexpr int L = sizeof(T) / sizeof(double), N = W / L;
  T s0[N] = {}, s1[N] = {}, s2[N] = {}, s3[N] = {}, s[N], x, x1, x2, x3;
  const double* a = v + 1;
  const double* b = y + ld;
  const int n = m - 1;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const double *b0 = b + i * ld, *b1 = b0 + ld, *b2 = b1 + ld, *b3 = b2 + ld;
    for (int c = 0; c < N; c++) {
      LoadLane(&x, b0 + c * L);
      LoadLane(&x1, b1 + c * L);
      LoadLane(&x2, b2 + c * L);
      LoadLane(&x3, b3 + c * L);
      s0[c] += a[i] * x;
      s1[c] += a[i + 1] * x1;
      s2[c] += a[i + 2] * x2;
      s3[c] += a[i + 3] * x3;
    }
  }
  for (; i < n; i++) {
    for (int c = 0; c < N; c++) {
      LoadLane(&x, b + i * ld + c * L);
      s0[c] += a[i] * x;
    }
  }
  for (int c = 0; c < N; c++) {
    LoadLane(&x, y + c * L);
    s[c] = tau * (x + ((s0[c] + s1[c]) + (s2[c] + s3[c])));
    StoreLane(y + c * L, x - s[c]);
  }
  for (int k = 1; k < m; k++) {
    double* yk = y + k * ld;
    for (int c = 0; c < N; c++) {
      LoadLane(&x, yk + c * L);
      StoreLane(yk + c * L, x - s[c] * v[k]);
    }
  }
}

}  // namespace

void Cod::Bind(double* dmem, int* imem, int nmax) {
  const size_t n = nmax;
  nmax_ = nmax;
  qr_ = dmem;
  qr2_ = qr_ + n * n;
  tau_ = qr2_ + n * n;
  tau2_ = tau_ + n;
  norm_ = tau2_ + n;
  work_ = norm_ + n;
  perm_ = imem;
  n_ = rank_ = 0;
  cond_ = 0;
}

CK_ALWAYS_INLINE int Cod::FactorBody(const double* a, int lda, int n, double rtol) {
  n_ = n;
  const size_t ld = n;  // column stride (n * n can exceed int)
  double* q = qr_;
  for (int c = 0; c < n; c++) {
    for (int r = 0; r < n; r++) q[r + c * ld] = a[r + c * static_cast<size_t>(lda)];
  }

  // column norms (current and at the last exact evaluation)
  double* norm0 = work_;
  for (int c = 0; c < n; c++) {
    norm_[c] = norm0[c] = std::sqrt(Dot(q + c * ld, q + c * ld, n));
    perm_[c] = c;
  }

  // Householder QR with column pivoting, stopped at the numerical rank
  int rank = 0;
  double r00 = 0;
  for (int j = 0; j < n; j++) {
    int p = j;
    for (int c = j + 1; c < n; c++) {
      if (norm_[c] > norm_[p]) p = c;
    }
    if (j == 0) r00 = norm_[p];
    if (!(norm_[p] > rtol * r00) || r00 == 0) break;
    if (p != j) {
      for (int r = 0; r < n; r++) std::swap(q[r + j * ld], q[r + p * ld]);
      std::swap(perm_[j], perm_[p]);
      std::swap(norm_[j], norm_[p]);
      std::swap(norm0[j], norm0[p]);
    }
    double* col = q + j + j * ld;
    tau_[j] = MakeReflector(col, n - j);
    for (int c = j + 1; c < n; c++) ApplyReflector(col, tau_[j], n - j, q + j + c * ld);
    rank = j + 1;

    // downdate the remaining norms; recompute where cancellation makes them unreliable
    for (int c = j + 1; c < n; c++) {
      if (norm_[c] == 0) continue;
      const double ratio = std::fabs(q[j + c * ld]) / norm_[c];
      double t = 1 - ratio * ratio;
      t = t < 0 ? 0 : t;
      const double rel = norm_[c] / norm0[c];
      if (t * rel * rel <= 1e-8) {
        const double* qc = q + j + 1 + c * ld;
        norm_[c] = norm0[c] = std::sqrt(Dot(qc, qc, n - j - 1));
      } else {
        norm_[c] *= std::sqrt(t);
      }
    }
  }
  rank_ = rank;
  cond_ = rank > 0 ? std::fabs(q[0]) / std::fabs(q[(rank - 1) * (ld + 1)]) : 0;

  // rank deficient: QR of [R11 R12]' (n x r) into qr2
  if (rank < n && rank > 0) {
    double* b = qr2_;
    for (int c = 0; c < rank; c++) {
      for (int i = 0; i < n; i++) b[i + c * ld] = i < c ? 0 : q[c + i * ld];
    }
    for (int c = 0; c < rank; c++) {
      double* col = b + c + c * ld;
      tau2_[c] = MakeReflector(col, n - c);
      for (int k = c + 1; k < rank; k++) ApplyReflector(col, tau2_[c], n - c, b + c + k * ld);
    }
  }
  return rank;
}

int Cod::Factor(const double* a, int lda, int n, double rtol) {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return FactorAvx2(a, lda, n, rtol);
#endif
  return FactorBody(a, lda, n, rtol);
}

#if CK_AVX2_CLONES
CK_TARGET_AVX2 int Cod::FactorAvx2(const double* a, int lda, int n, double rtol) {
  return FactorBody(a, lda, n, rtol);
}
#endif

void Cod::CopyFrom(const Cod& o) {
  const size_t n = o.n_;
  n_ = o.n_;
  rank_ = o.rank_;
  cond_ = o.cond_;
  std::copy(o.qr_, o.qr_ + n * n, qr_);
  if (rank_ < n_ && rank_ > 0) std::copy(o.qr2_, o.qr2_ + n * rank_, qr2_);
  std::copy(o.tau_, o.tau_ + n, tau_);
  std::copy(o.tau2_, o.tau2_ + n, tau2_);
  std::copy(o.perm_, o.perm_ + n, perm_);
}

void Cod::ApplyQt(const double* q, const double* tau, int m, double* x) const {
  const int n = n_;
  const size_t ld = n;
  for (int j = 0; j < m; j++) ApplyReflector(q + j + j * ld, tau[j], n - j, x + j);
}

void Cod::ApplyQ(const double* q, const double* tau, int m, double* x) const {
  const int n = n_;
  const size_t ld = n;
  for (int j = m - 1; j >= 0; j--) ApplyReflector(q + j + j * ld, tau[j], n - j, x + j);
}

void Cod::Solve(const double* c, double* x) {
  const int n = n_, r = rank_;
  const size_t ld = n;
  double* y = work_;
  double* xt = work_ + n;
  for (int i = 0; i < n; i++) y[i] = c[i];
  ApplyQt(qr_, tau_, r, y);
  for (int i = 0; i < n; i++) xt[i] = 0;
  if (r == n) {
    // R z = Q' c
    for (int i = n - 1; i >= 0; i--) {
      double s = y[i];
      for (int k = i + 1; k < n; k++) s -= qr_[i + k * ld] * xt[k];
      xt[i] = s / qr_[i + i * ld];
    }
  } else if (r > 0) {
    // S' z = (Q1' c), then W [z; 0]
    for (int i = 0; i < r; i++) {
      double s = y[i];
      for (int k = 0; k < i; k++) s -= qr2_[k + i * ld] * xt[k];
      xt[i] = s / qr2_[i + i * ld];
    }
    ApplyQ(qr2_, tau2_, r, xt);
  }
  for (int j = 0; j < n; j++) x[perm_[j]] = xt[j];
}

template <int W>
CK_ALWAYS_INLINE void Cod::SolveChunk(double* Y, size_t ldy, double* xt) const {
  // Solve's steps on W columns: Q1' y, the triangular solve into xt (n x W), W, then P
  const int n = n_, r = rank_;
  const size_t ld = n;
  for (int j = 0; j < r; j++)
    ApplyReflectorBlock<W>(qr_ + j + j * ld, tau_[j], n - j, Y + j * ldy, ldy);
  for (size_t e = 0; e < ld * W; e++) xt[e] = 0;
  // (the rows' W columns as N lanes: ApplyReflectorBlock's Lane)
  using T = Lane<W>;
  constexpr int L = sizeof(T) / sizeof(double), N = W / L;
  T t[N], x;
  if (r == n) {
    for (int i = n - 1; i >= 0; i--) {
      for (int c = 0; c < N; c++) LoadLane(&t[c], Y + i * ldy + c * L);
      for (int k = i + 1; k < n; k++) {
        const double q = qr_[i + k * ld];
        for (int c = 0; c < N; c++) {
          LoadLane(&x, xt + k * W + c * L);
          t[c] -= q * x;
        }
      }
      for (int c = 0; c < N; c++) StoreLane(xt + i * W + c * L, t[c] / qr_[i + i * ld]);
    }
  } else if (r > 0) {
    for (int i = 0; i < r; i++) {
      for (int c = 0; c < N; c++) LoadLane(&t[c], Y + i * ldy + c * L);
      for (int k = 0; k < i; k++) {
        const double q = qr2_[k + i * ld];
        for (int c = 0; c < N; c++) {
          LoadLane(&x, xt + k * W + c * L);
          t[c] -= q * x;
        }
      }
      for (int c = 0; c < N; c++) StoreLane(xt + i * W + c * L, t[c] / qr2_[i + i * ld]);
    }
    for (int j = r - 1; j >= 0; j--)
      ApplyReflectorBlock<W>(qr2_ + j + j * ld, tau2_[j], n - j, xt + j * W, W);
  }
  for (int j = 0; j < n; j++) {
    for (int c = 0; c < W; c++) Y[perm_[j] * ldy + c] = xt[j * W + c];
  }
}

CK_ALWAYS_INLINE void Cod::SolveBlockBody(double* Y, int ldy, int nb, double* scratch) const {
  // chunks of 8, 4, then single columns
  int c = 0;
  for (; c + 8 <= nb; c += 8) SolveChunk<8>(Y + c, ldy, scratch);
  for (; c + 4 <= nb; c += 4) SolveChunk<4>(Y + c, ldy, scratch);
  for (; c < nb; c++) SolveChunk<1>(Y + c, ldy, scratch);
}

#if CK_AVX2_CLONES
CK_TARGET_AVX2 void Cod::SolveBlockAvx2(double* Y, int ldy, int nb, double* scratch) const {
  SolveBlockBody(Y, ldy, nb, scratch);
}
#endif

void Cod::SolveBlock(double* Y, int ldy, int nb, double* scratch) const {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return SolveBlockAvx2(Y, ldy, nb, scratch);
#endif
  SolveBlockBody(Y, ldy, nb, scratch);
}

void Cod::SolveT(const double* c, double* x) {
  const int n = n_, r = rank_;
  const size_t ld = n;
  double* t = work_;
  double* s = work_ + n;
  for (int j = 0; j < n; j++) t[j] = c[perm_[j]];
  for (int i = 0; i < n; i++) s[i] = 0;
  if (r == n) {
    // R' s = P' c, then Q s
    for (int i = 0; i < n; i++) {
      double v = t[i];
      for (int k = 0; k < i; k++) v -= qr_[k + i * ld] * s[k];
      s[i] = v / qr_[i + i * ld];
    }
  } else if (r > 0) {
    // S s = (W' P' c)[0:r], then Q1 s
    ApplyQt(qr2_, tau2_, r, t);
    for (int i = r - 1; i >= 0; i--) {
      double v = t[i];
      for (int k = i + 1; k < r; k++) v -= qr2_[i + k * ld] * s[k];
      s[i] = v / qr2_[i + i * ld];
    }
  }
  ApplyQ(qr_, tau_, r, s);
  for (int i = 0; i < n; i++) x[i] = s[i];
}

void Cod::NullProject(const double* c, double* x) {
  const int n = n_, r = rank_;
  if (r == n) {
    for (int i = 0; i < n; i++) x[i] = 0;
    return;
  }
  double* t = work_;
  for (int j = 0; j < n; j++) t[j] = c[perm_[j]];
  if (r > 0) {
    ApplyQt(qr2_, tau2_, r, t);
    for (int i = 0; i < r; i++) t[i] = 0;
    ApplyQ(qr2_, tau2_, r, t);
  }
  for (int j = 0; j < n; j++) x[perm_[j]] = t[j];
}

void Cod::NullBasis(double* v) {
  // P W e_i for the columns i >= r of the second QR's W (NullProject is P W [0 0; 0 I] W' P')
  const int n = n_, r = rank_;
  double* t = work_;
  for (int i = r; i < n; i++) {
    for (int j = 0; j < n; j++) t[j] = j == i;
    if (r > 0) ApplyQ(qr2_, tau2_, r, t);
    double* out = v + static_cast<size_t>(i - r) * n;
    for (int j = 0; j < n; j++) out[perm_[j]] = t[j];
  }
}

}  // namespace contactkit
