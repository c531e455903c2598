// Copyright 2026 The contactkit developers.
#include "solvers/common/mass.h"

#include <cstddef>

#include "solvers/common/dense.h"

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

void TreeMass::Columns(int* out) const {
  for (int i = 0; i < nv; i++) {
    int adr = madr[i];
    out[adr++] = i;
    for (int j = parent[i]; j >= 0; j = parent[j]) out[adr++] = j;
  }
}

void TreeMass::SolveHalf(double* x, int begin, int end) const {
  if (col) {
    for (int i = end - 1; i >= begin; i--) {
      const double xi = x[i];
      if (xi == 0) continue;
      const int last = i + 1 < nv ? madr[i + 1] : nM;
      for (int adr = madr[i] + 1; adr < last; adr++) x[col[adr]] -= LD[adr] * xi;
    }
    return;
  }
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
  if (col) {
    for (int i = begin; i < end; i++) {
      double s = x[i];
      const int last = i + 1 < nv ? madr[i + 1] : nM;
      for (int adr = madr[i] + 1; adr < last; adr++) s -= LD[adr] * x[col[adr]];
      x[i] = s;
    }
    return;
  }
  for (int i = begin; i < end; i++) {
    double s = x[i];
    int adr = madr[i] + 1;
    for (int j = parent[i]; j >= 0; j = parent[j]) s -= LD[adr++] * x[j];
    x[i] = s;
  }
}

namespace {

// Solve's sweeps on W columns of the row-major block x (stride ld), dofs [begin, end): the values
// of a row stay in registers, the second and third sweeps fused into one pull from the ancestors
template <int W>
CK_ALWAYS_INLINE void SolveColumns(const TreeMass& t, double* x, int ld, int begin, int end) {
  for (int i = end - 1; i >= begin; i--) {
    double xi[W];  // (in registers: the ancestors' rows are written through x, not xi)
    for (int c = 0; c < W; c++) xi[c] = x[static_cast<size_t>(i) * ld + c];
    int adr = t.madr[i] + 1;
    for (int j = t.parent[i]; j >= 0; j = t.parent[j], adr++) {
      double* xj = x + static_cast<size_t>(j) * ld;
      const double l = t.LD[adr];
      double y[W];
      for (int c = 0; c < W; c++) y[c] = xj[c] - l * xi[c];
      for (int c = 0; c < W; c++) xj[c] = y[c];
    }
  }
  for (int i = begin; i < end; i++) {
    double* xi = x + static_cast<size_t>(i) * ld;
    double acc[W];
    for (int c = 0; c < W; c++) acc[c] = xi[c] * t.Dinv[i];
    int adr = t.madr[i] + 1;
    for (int j = t.parent[i]; j >= 0; j = t.parent[j], adr++) {
      const double* xj = x + static_cast<size_t>(j) * ld;
      const double l = t.LD[adr];
      for (int c = 0; c < W; c++) acc[c] -= l * xj[c];
    }
    for (int c = 0; c < W; c++) xi[c] = acc[c];
  }
}

// SolveBlock's chunks of W columns (16 with AVX2, 8 with SSE2), then of 8, of 4, then the rest
// one by one
template <int W>
CK_ALWAYS_INLINE void SolveBlockBody(const TreeMass& t, double* x, int nb, int ld, int begin,
                                     int end) {
  int c = 0;
  for (; c + W <= nb; c += W) SolveColumns<W>(t, x + c, ld, begin, end);
  for (; c + 8 <= nb; c += 8) SolveColumns<8>(t, x + c, ld, begin, end);
  for (; c + 4 <= nb; c += 4) SolveColumns<4>(t, x + c, ld, begin, end);
  for (; c < nb; c++) SolveColumns<1>(t, x + c, ld, begin, end);
}

#if CK_AVX2_CLONES
CK_TARGET_AVX2 void SolveBlockAvx2(const TreeMass& t, double* x, int nb, int ld, int begin,
                                   int end) {
  SolveBlockBody<16>(t, x, nb, ld, begin, end);
}
#endif

}  // namespace

void TreeMass::SolveBlock(double* x, int nb, int begin, int end, int ld) const {
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return SolveBlockAvx2(*this, x, nb, ld, begin, end);
#endif
  SolveBlockBody<8>(*this, x, nb, ld, begin, end);
}

void TreeMass::Mul(const double* x, double* y, int begin, int end) const {
  MulValues(M, x, y, begin, end);
}

void TreeMass::MulValues(const double* V, const double* x, double* y, int begin, int end) const {
  for (int i = begin; i < end; i++) y[i] = V[madr[i]] * x[i];
  if (col) {
    for (int i = begin; i < end; i++) {
      const int last = i + 1 < nv ? madr[i + 1] : nM;
      const double xi = x[i];
      double yi = y[i];
      for (int adr = madr[i] + 1; adr < last; adr++) {
        yi += V[adr] * x[col[adr]];
        y[col[adr]] += V[adr] * xi;
      }
      y[i] = yi;
    }
    return;
  }
  for (int i = begin; i < end; i++) {
    int adr = madr[i] + 1;
    for (int j = parent[i]; j >= 0; j = parent[j], adr++) {
      y[i] += V[adr] * x[j];
      y[j] += V[adr] * x[i];
    }
  }
}

void TreeMass::SubMulValues(const double* V, const double* x, double* y, int begin, int end) const {
  for (int i = begin; i < end; i++) {
    y[i] -= V[madr[i]] * x[i];
    int adr = madr[i] + 1;
    for (int j = parent[i]; j >= 0; j = parent[j], adr++) {
      y[i] -= V[adr] * x[j];
      y[j] -= V[adr] * x[i];
    }
  }
}

double TreeMass::SubQuadValues(const double* V, const double* x, double acc, int begin,
                               int end) const {
  for (int i = begin; i < end; i++) {
    acc -= V[madr[i]] * x[i] * x[i];
    int adr = madr[i] + 1;
    for (int j = parent[i]; j >= 0; j = parent[j]) acc -= 2 * V[adr++] * x[i] * x[j];
  }
  return acc;
}

void TreeMass::AddMulValuesRows(const double* V, const int* rows, int n, const double* x,
                                double* y) const {
  for (int r = 0; r < n; r++) {
    const int i = rows[r];
    if (col) {
      // (the same operations in the same order, y_i in a register)
      const int last = i + 1 < nv ? madr[i + 1] : nM;
      const double xi = x[i];
      double yi = y[i] + V[madr[i]] * xi;
      for (int adr = madr[i] + 1; adr < last; adr++) {
        yi += V[adr] * x[col[adr]];
        y[col[adr]] += V[adr] * xi;
      }
      y[i] = yi;
      continue;
    }
    int adr = madr[i];
    y[i] += V[adr++] * x[i];
    for (int j = parent[i]; j >= 0; j = parent[j], adr++) {
      y[i] += V[adr] * x[j];
      y[j] += V[adr] * x[i];
    }
  }
}

double TreeMass::SubQuadValuesRows(const double* V, const int* rows, int n, const double* x,
                                   double acc) const {
  for (int r = 0; r < n; r++) {
    const int i = rows[r];
    acc -= V[madr[i]] * x[i] * x[i];
    int adr = madr[i] + 1;
    for (int j = parent[i]; j >= 0; j = parent[j]) acc -= 2 * V[adr++] * x[i] * x[j];
  }
  return acc;
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
