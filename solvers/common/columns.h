// Copyright 2026 The contactkit developers.
//
// Kernels on blocks of columns stored row-major (x[i * ld + c]: the blocked tangents' layout)
// that apply one matrix entry to a chunk of W columns held in registers as SIMD pairs (GCC/Clang
// vector extension: GCC leaves the scalar form of such chunks unvectorized); each column's sums
// are formed in the order of one column alone, so that a block gives every column bit for bit
// what a product per column gives. Loads and stores through memcpy (unaligned).
#ifndef CONTACTKIT_SOLVERS_COMMON_COLUMNS_H_
#define CONTACTKIT_SOLVERS_COMMON_COLUMNS_H_

#include <cstddef>
#include <cstring>

#include "solvers/common/dense.h"
#include "solvers/common/sparse.h"

namespace contactkit::columns {

typedef double Pair __attribute__((vector_size(16)));

constexpr int kMaxGroup = 6;  // rows of one pattern taken at once by AddGroupT (a contact's)

// the first W (1 or 2) values at p as a pair (W 1: the first lane, the second zero)
template <int W>
inline Pair Load(const double* p) {
  Pair v = {p[0], 0};
  if (W > 1) std::memcpy(&v, p, sizeof(v));
  return v;
}

template <int W>
inline void Store(double* p, Pair v) {
  if (W > 1) {
    std::memcpy(p, &v, sizeof(v));
  } else {
    p[0] = v[0];
  }
}

// u[c] = sum_k val[k] X[col[k] ld + c] for c < W (W 1 or even), the terms in k order; col null:
// col[k] = k (a dense row)
template <int W>
inline void RowTimes(const double* val, const int* col, int n, const double* X, size_t ld,
                     double* u) {
  constexpr int H = (W + 1) / 2;
  Pair acc[H] = {};
  for (int k = 0; k < n; k++) {
    const Pair v = {val[k], val[k]};
    const double* x = X + static_cast<size_t>(col ? col[k] : k) * ld;
    for (int h = 0; h < H; h++) acc[h] += v * Load<W>(x + 2 * h);
  }
  for (int h = 0; h < H; h++) Store<W>(u + 2 * h, acc[h]);
}

// RowTimes on all ncol columns: chunks of 8, 4, 2, then single columns
inline void RowTimesAll(const double* val, const int* col, int n, const double* X, size_t ld,
                        int ncol, double* u) {
  int c = 0;
  for (; c + 8 <= ncol; c += 8) RowTimes<8>(val, col, n, X + c, ld, u + c);
  for (; c + 4 <= ncol; c += 4) RowTimes<4>(val, col, n, X + c, ld, u + c);
  for (; c + 2 <= ncol; c += 2) RowTimes<2>(val, col, n, X + c, ld, u + c);
  for (; c < ncol; c++) RowTimes<1>(val, col, n, X + c, ld, u + c);
}

// RowTimesAll with an AVX2 clone where it runs (Avx2Kernels, solvers/common/dense.h: chunks of
// 16, 8 and 4 columns in vectors of four), each column's sum the same bit for bit
void RowTimesWide(const double* val, const int* col, int n, const double* X, size_t ld, int ncol,
                  double* u);

// RowTimes of R rows that share their pattern col (row r's values val[r], its products into
// u[r]; col null: dense rows): each column of X loaded once for the R rows, each row's sums as
// RowTimes forms them
template <int W, int R>
inline void RowsTimes(const double* const* val, const int* col, int n, const double* X, size_t ld,
                      double* const* u) {
  constexpr int H = (W + 1) / 2;
  Pair acc[R][H] = {};
  for (int k = 0; k < n; k++) {
    const double* x = X + static_cast<size_t>(col ? col[k] : k) * ld;
    Pair xv[H];
    for (int h = 0; h < H; h++) xv[h] = Load<W>(x + 2 * h);
    for (int r = 0; r < R; r++) {
      const Pair v = {val[r][k], val[r][k]};
      for (int h = 0; h < H; h++) acc[r][h] += v * xv[h];
    }
  }
  for (int r = 0; r < R; r++) {
    for (int h = 0; h < H; h++) Store<W>(u[r] + 2 * h, acc[r][h]);
  }
}

// RowsTimes on all ncol columns: chunks of 8, 4, 2, then single columns
template <int R>
inline void RowsTimesAll(const double* const* val, const int* col, int n, const double* X,
                         size_t ld, int ncol, double* const* u) {
  double* uc[R];
  auto at = [&](int c) {
    for (int r = 0; r < R; r++) uc[r] = u[r] + c;
    return uc;
  };
  int c = 0;
  for (; c + 8 <= ncol; c += 8) RowsTimes<8, R>(val, col, n, X + c, ld, at(c));
  for (; c + 4 <= ncol; c += 4) RowsTimes<4, R>(val, col, n, X + c, ld, at(c));
  for (; c + 2 <= ncol; c += 2) RowsTimes<2, R>(val, col, n, X + c, ld, at(c));
  for (; c < ncol; c++) RowsTimes<1, R>(val, col, n, X + c, ld, at(c));
}

// X += J' F for the nr rows i, i + 1, ... of J that share row i's columns (G > 0: nr = G, the
// loops unrolled), f[r][s] row r's coefficient in column s < ns, X row-major (X[j ldx + s] for
// J's column j): each entry of X gets the rows' adds in row order, as row-by-row products add them
template <int G, int B>
CK_ALWAYS_INLINE void AddGroupT(const SparseRows& J, const double (*f)[B], int i, int g, int ns,
                                double* X, int ldx) {
  const int nr = G > 0 ? G : g;
  const int nnz = J.rownnz[i];
  const int* col = J.colind + J.rowadr[i];
  for (int q = 0; q < nnz; q++) {
    double v[kMaxGroup];
    for (int r = 0; r < nr; r++) v[r] = J.val[J.rowadr[i + r] + q];
    double* x = X + static_cast<size_t>(col[q]) * ldx;
    for (int s = 0; s < ns; s++) {
      double a = x[s];
      for (int r = 0; r < nr; r++) a += v[r] * f[r][s];
      x[s] = a;
    }
  }
}

// RowsTimesAll with an AVX2 clone where it runs (chunks of 8 columns in vectors of four), each
// column's sum the same bit for bit (R 2, 3 or 4)
template <int R>
void RowsTimesWide(const double* const* val, const int* col, int n, const double* X, size_t ld,
                   int ncol, double* const* u);

}  // namespace contactkit::columns

#endif  // CONTACTKIT_SOLVERS_COMMON_COLUMNS_H_
