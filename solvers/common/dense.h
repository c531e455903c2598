// Copyright 2026 The contactkit developers.
//
// Dense kernels on caller-provided storage (nothing is allocated). Column-major matrices unless
// a function says row-major; n x n factors are stored in place of the matrix.
#ifndef CONTACTKIT_SOLVERS_COMMON_DENSE_H_
#define CONTACTKIT_SOLVERS_COMMON_DENSE_H_

#include <cstddef>

// AVX2 clones of a few hot kernels (CholSolveBlock, TreeMass::SolveBlock, AddTransposeBlock,
// columns::RowTimesWide; LuFactor, Cod::Factor and the basis inverse's updates of lcp's Lemke
// method), chosen at run time on x86-64 with GCC or Clang: the default build stays portable
// (SSE2). A clone does the same operations in the same order (no FMA: -ffp-contract=off), four
// doubles a vector instead of two, so its results are bit for bit the portable code's.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__AVX2__)
#define CK_AVX2_CLONES 1
#define CK_TARGET_AVX2 __attribute__((target("avx2")))
#define CK_ALWAYS_INLINE __attribute__((always_inline)) inline
#else
#define CK_AVX2_CLONES 0
#define CK_ALWAYS_INLINE inline
#endif

namespace contactkit {

struct SparseRows;

struct Avx2Kernels {
  // test hook: the clones may run (true) or the portable code always runs (false)
  static inline bool allowed_ = true;
  // the clones run: allowed, built (CK_AVX2_CLONES), the CPU has AVX2 and the environment
  // variable CK_NO_AVX2 is not set (read once)
  static bool On();
};

// sum of a[i] b[i] over i < n, in four partial sums (the loop-carried additions of one sum are
// what limit a dot product's speed)
CK_ALWAYS_INLINE double Dot(const double* a, const double* b, int n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; i++) s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

//---------------------------------- column-major ------------------------------------------------

// P A = L U in place of a (n x n), unit L below, row interchanges in piv (n); false if a pivot
// is zero or not finite
bool LuFactor(double* a, int n, int* piv);

// x = A^-1 x (n) with the factor of LuFactor
void LuSolve(const double* lu, const int* piv, int n, double* x);

// x = A^-T x (n) with the factor of LuFactor
void LuSolveT(const double* lu, const int* piv, int n, double* x);

// A = L L' in place of the lower triangle of a (n x n); false if not positive definite
bool CholFactor(double* a, int n);

// x = A^-1 x (n) with the factor of CholFactor
void CholSolve(const double* L, int n, double* x);

// y = A^-1 y for the nb columns of the row-major n x nb block y (row stride ld), factor of
// CholFactor
void CholSolveBlock(const double* L, int n, double* y, int nb, int ld);

//---------------------------------- row-major ---------------------------------------------------

// A = P' L U in place of the row-major a (n x n), unit L below, U on and above; with piv (n)
// partial pivoting (row interchanges), without when null. The pivots' magnitudes widen [*mn, *mx].
// False if a pivot is below 1e-300 in magnitude or not finite.
bool LuFactorRows(double* a, int n, int* piv, double* mn, double* mx);

// x = P x (n), the row interchanges of LuFactorRows, and its inverse
void PermuteRows(const int* piv, int n, double* x);
void PermuteRowsT(const int* piv, int n, double* x);

// B = L^-1 B with L the unit lower part of the row-major lu (n x n), B row-major (n x m)
void LowerSolveRows(const double* lu, int n, double* B, int m);

// x = U^-1 x (n), U the upper part of the row-major lu (n x n)
void UpperSolveRows(const double* lu, int n, double* x);

// x = U^-T x (n), U the upper part of the row-major lu (n x n)
void UpperSolveRowsT(const double* lu, int n, double* x);

// x = L^-T x (n), L the unit lower part of the row-major lu (n x n)
void LowerSolveRowsT(const double* lu, int n, double* x);

// B = B U^-1, U the upper part of the row-major lu (n x n), B row-major (m x n)
void UpperSolveRight(const double* lu, int n, double* B, int m);

// C -= A B with A (m x k), B (k x n), C (m x n), all row-major
void GemmSub(double* C, const double* A, const double* B, int m, int k, int n);

// y -= A x with A row-major (m x n), x (n), y (m)
void GemvSub(double* y, const double* A, const double* x, int m, int n);

// y -= A' x with A row-major (m x n), x (m), y (n)
void GemvTSub(double* y, const double* A, const double* x, int m, int n);

// X += J' F for n <= kTransposeBlock columns (the blocked tangents' J' df): X row-major with
// stride ldx (X[j ldx + s] for J's column j), column s of F at F[s ldf + i] for J's row i; a
// row whose n values are all zero adds nothing; each entry's terms in J's row order, as n
// products J' f would add them. With group (SharedRowGroups: a group's size at its first row), a
// group of rows with one pattern, each with a value, at once (X loaded once for them; the same
// sums).
constexpr int kTransposeBlock = 32;
void AddTransposeBlock(const SparseRows& J, const double* F, size_t ldf, int n, double* X, int ldx,
                       const int* group = nullptr);

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_DENSE_H_
