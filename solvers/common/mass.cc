// Copyright 2026 The contactkit developers.
#include "solvers/common/mass.h"

namespace contactkit {

int TreeMass::Factor(int begin, int end) {
  int nclamp = 0;
  for (int i = madr[begin], last = (end < nv ? madr[end] : nM); i < last; i++) LD[i] = M[i];

  // backward pass over dofs: eliminate k from its ancestors
  for (int k = end - 1; k >= begin; k--) {
    const int kk = madr[k];
    if (!(LD[kk] > 1e-15)) {
      LD[kk] = 1e-15;
      nclamp++;
    }
    int ki = kk + 1;
    for (int i = parent[k]; i >= 0; i = parent[i], ki++) {
      const double tmp = LD[ki] / LD[kk];
      // row i holds i and its ancestors, exactly the ancestors of k from i upward
      const int cnt = (i + 1 < nv ? madr[i + 1] : nM) - madr[i];
      double* rowi = LD + madr[i];
      const double* rowk = LD + ki;
      for (int c = 0; c < cnt; c++) rowi[c] -= rowk[c] * tmp;
      LD[ki] = tmp;
    }
  }
  for (int k = begin; k < end; k++) Dinv[k] = 1 / LD[madr[k]];
  return nclamp;
}

void TreeMass::SolveHalf(double* x, int begin, int end) const {
  for (int i = end - 1; i >= begin; i--) {
    const double xi = x[i];
    if (xi == 0) continue;
    int adr = madr[i] + 1;
    for (int j = parent[i]; j >= 0; j = parent[j]) x[j] -= LD[adr++] * xi;
  }
}

void TreeMass::Solve(double* x, int begin, int end) const {
  // x <- L'^-1 x
  SolveHalf(x, begin, end);

  // x <- D^-1 x
  for (int i = begin; i < end; i++) x[i] *= Dinv[i];

  // x <- L^-1 x
  for (int i = begin; i < end; i++) {
    double s = x[i];
    int adr = madr[i] + 1;
    for (int j = parent[i]; j >= 0; j = parent[j]) s -= LD[adr++] * x[j];
    x[i] = s;
  }
}

void TreeMass::Mul(const double* x, double* y, int begin, int end) const {
  for (int i = begin; i < end; i++) y[i] = M[madr[i]] * x[i];
  for (int i = begin; i < end; i++) {
    int adr = madr[i] + 1;
    for (int j = parent[i]; j >= 0; j = parent[j], adr++) {
      y[i] += M[adr] * x[j];
      y[j] += M[adr] * x[i];
    }
  }
}

void TreeMass::Dense(int begin, int end, double* out, int ld) const {
  const int n = end - begin;
  for (int c = 0; c < n; c++) {
    for (int r = 0; r < n; r++) out[r + c * ld] = 0;
  }
  for (int i = begin; i < end; i++) {
    out[(i - begin) * (ld + 1)] = M[madr[i]];
    int adr = madr[i] + 1;
    for (int j = parent[i]; j >= 0; j = parent[j], adr++) {
      out[(i - begin) + (j - begin) * ld] = M[adr];
      out[(j - begin) + (i - begin) * ld] = M[adr];
    }
  }
}

}  // namespace contactkit
