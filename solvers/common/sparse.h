// Copyright 2026 The contactkit developers.
//
// Row-compressed sparse matrix with fixed capacity (constraint Jacobians).
#ifndef CONTACTKIT_SOLVERS_COMMON_SPARSE_H_
#define CONTACTKIT_SOLVERS_COMMON_SPARSE_H_

#include <cstring>

namespace contactkit {

// nrow x ncol matrix, rows stored one after another; column indices ascending in each row
struct SparseRows {
  int nrow = 0;           // rows in use
  int ncol = 0;           // columns
  int nnz = 0;            // nonzeros in use
  int* rownnz = nullptr;  // nonzeros of each row                    (max_rows)
  int* rowadr = nullptr;  // address of each row's first nonzero     (max_rows)
  int* colind = nullptr;  // column of each nonzero                  (max_nnz)
  double* val = nullptr;  // value of each nonzero                   (max_nnz)

  // rows i and j have the same columns
  bool SamePattern(int i, int j) const {
    const int n = rownnz[i];
    return rownnz[j] == n &&
           std::memcmp(colind + rowadr[i], colind + rowadr[j], n * sizeof(int)) == 0;
  }

  // row i times dense x
  double Dot(int i, const double* x) const {
    const int adr = rowadr[i], n = rownnz[i];
    double s = 0;
    for (int k = 0; k < n; k++) s += val[adr + k] * x[colind[adr + k]];
    return s;
  }

  // y += a * row i (as a dense column vector)
  void AddRowTo(int i, double a, double* y) const {
    const int adr = rowadr[i], n = rownnz[i];
    for (int k = 0; k < n; k++) y[colind[adr + k]] += a * val[adr + k];
  }

  // y = J x (nrow)
  void Mul(const double* x, double* y) const {
    for (int i = 0; i < nrow; i++) y[i] = Dot(i, x);
  }

  // y = J' f (ncol); y is overwritten
  void MulT(const double* f, double* y) const {
    for (int j = 0; j < ncol; j++) y[j] = 0;
    for (int i = 0; i < nrow; i++) {
      if (f[i] != 0) AddRowTo(i, f[i], y);
    }
  }
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_SPARSE_H_
