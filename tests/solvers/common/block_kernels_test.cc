// Copyright 2026 The contactkit developers.
//
// The Jacobian's block solves (CholSolveBlock: H^-1 on an island, TreeMass::SolveBlock: M^-1 and
// Euler's damped M_E^-1) column by column: each column of a block equals the single-vector solve
// (TreeMass::Solve bit for bit, CholSolve to rounding), and the AVX2 clones (Avx2Kernels) give
// the portable code's results bit for bit, on every chunk width (16, 8, 4 and single columns).
// The row-major dense kernels (LuFactorRows, LowerSolveRows, UpperSolveRight, GemmSub: two
// entries at a time) give each entry the sums of the plain loops, bit for bit, on odd and even
// sizes. AddTransposeBlock (the blocked tangents' J' df of up to 32 columns) gives each column
// the sums of one product J' f, with the AVX2 clone and without; columns::RowTimesWide (lcp's
// blocked J_C dv0 and K^+ rc) each column the plain dot in the row's order, and
// columns::RowsTimesWide (two to four rows of one pattern at once) each row's RowTimesWide;
// AddTransposeBlock with row groups (a contact's rows of one pattern at once) the sums without.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "solvers/common/columns.h"
#include "solvers/common/dense.h"
#include "solvers/common/sparse.h"
#include "support/extracted.h"
#include "support/fixture.h"

namespace contactkit::test {
namespace {

class JacBlockKernelsTest : public MujocoTest {
 protected:
  void TearDown() override {
    Avx2Kernels::allowed_ = true;
    MujocoTest::TearDown();
  }
};

constexpr int kColumns = 45;  // 16 + 16 + 8 + 4 + 1: every chunk width of both kernels

// the block x (n x kColumns, row-major) of distinct columns
std::vector<double> Block(int n) {
  std::vector<double> x(static_cast<size_t>(n) * kColumns);
  for (int i = 0; i < n; i++) {
    for (int c = 0; c < kColumns; c++) x[i * kColumns + c] = std::sin(0.37 * i + 0.91 * c + 1);
  }
  return x;
}

// the SparseRows view of the rows' arrays (ncol columns)
SparseRows RowsOf(int ncol, std::vector<int>& rownnz, std::vector<int>& rowadr,
                  std::vector<int>& colind, std::vector<double>& val) {
  SparseRows J;
  J.nrow = static_cast<int>(rownnz.size());
  J.ncol = ncol;
  J.nnz = static_cast<int>(val.size());
  J.rownnz = rownnz.data();
  J.rowadr = rowadr.data();
  J.colind = colind.data();
  J.val = val.data();
  return J;
}

TEST_F(JacBlockKernelsTest, TreeMassBlockSolveIsTheColumnSolves) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  for (int i = 0; i < m->nq; i++) d->qpos[i] += 0.2 * std::sin(2.0 + i);  // bent: a full M
  Extracted e(m.get());
  e.Extract(m.get(), d.get());
  TreeMass& mass = e.p().mass;
  const int nv = m->nv;
  std::vector<double> blocks[2];
  for (int pass = 0; pass < 2; pass++) {
    Avx2Kernels::allowed_ = pass == 0;
    blocks[pass] = Block(nv);
    mass.SolveBlock(blocks[pass].data(), kColumns);
  }
  const std::vector<double> x = Block(nv);
  std::vector<double> col(nv);
  for (int c = 0; c < kColumns; c++) {
    for (int i = 0; i < nv; i++) col[i] = x[i * kColumns + c];
    mass.Solve(col.data());
    for (int i = 0; i < nv; i++) {
      EXPECT_EQ(blocks[1][i * kColumns + c], col[i]) << "column " << c << ", dof " << i;
      EXPECT_EQ(blocks[0][i * kColumns + c], col[i]) << "AVX2: column " << c << ", dof " << i;
    }
  }
}

TEST_F(JacBlockKernelsTest, CholBlockSolveIsTheColumnSolves) {
  const int n = 27;  // the humanoid's island
  std::vector<double> L(n * n), A(n * n);
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) {
      double s = i == j ? n : 0;
      for (int k = 0; k < n; k++) s += std::sin(1.3 * i + 0.7 * k) * std::sin(1.3 * j + 0.7 * k);
      A[i * n + j] = s;
    }
  }
  L = A;
  ASSERT_TRUE(CholFactor(L.data(), n));
  std::vector<double> blocks[2];
  for (int pass = 0; pass < 2; pass++) {
    Avx2Kernels::allowed_ = pass == 0;
    blocks[pass] = Block(n);
    CholSolveBlock(L.data(), n, blocks[pass].data(), kColumns, kColumns);
  }
  const std::vector<double> x = Block(n);
  std::vector<double> col(n);
  for (int c = 0; c < kColumns; c++) {
    for (int i = 0; i < n; i++) col[i] = x[i * kColumns + c];
    CholSolve(L.data(), n, col.data());
    double residual = 0, scale = 0;  // of A y = x
    for (int i = 0; i < n; i++) {
      double s = 0;
      for (int j = 0; j < n; j++) s += A[i * n + j] * blocks[1][j * kColumns + c];
      residual = std::fmax(residual, std::fabs(s - x[i * kColumns + c]));
      scale = std::fmax(scale, std::fabs(x[i * kColumns + c]));
      EXPECT_NEAR(blocks[1][i * kColumns + c], col[i], 1e-13 * std::fabs(col[i]) + 1e-300)
          << "column " << c << ", row " << i;
      EXPECT_EQ(blocks[0][i * kColumns + c], blocks[1][i * kColumns + c])
          << "AVX2: column " << c << ", row " << i;
    }
    EXPECT_LT(residual, 1e-12 * scale) << "column " << c;
  }
}

TEST_F(JacBlockKernelsTest, TransposeBlockIsTheColumnProducts) {
  // a 6 x 9 J with rows of 1 to 5 entries; its rows' values of n columns, row 2 all zero
  const int nrow = 6, ncol = 9;
  std::vector<int> rownnz = {3, 5, 2, 1, 4, 3}, rowadr(nrow), colind;
  std::vector<double> val;
  for (int i = 0, adr = 0; i < nrow; adr += rownnz[i++]) {
    rowadr[i] = adr;
    for (int k = 0; k < rownnz[i]; k++) {
      colind.push_back((2 * i + 2 * k) % ncol);
      val.push_back(std::cos(0.3 * i + 1.7 * k));
    }
  }
  for (int i = 0; i < nrow; i++)  // (ascending, distinct columns per row)
    std::sort(colind.begin() + rowadr[i], colind.begin() + rowadr[i] + rownnz[i]);
  const SparseRows J = RowsOf(ncol, rownnz, rowadr, colind, val);
  for (int n = 1; n <= kTransposeBlock; n++) {
    const int ld = n + 3;  // (X's stride wider than n)
    std::vector<double> F(static_cast<size_t>(n) * nrow);
    for (int c = 0; c < n; c++) {
      for (int i = 0; i < nrow; i++) F[c * nrow + i] = i == 2 ? 0 : std::sin(0.8 * c + 1.1 * i);
    }
    std::vector<double> X0(static_cast<size_t>(ncol) * ld);
    for (size_t e = 0; e < X0.size(); e++) X0[e] = std::sin(0.41 * e + 2);
    std::vector<double> blocks[2];
    for (int pass = 0; pass < 2; pass++) {
      Avx2Kernels::allowed_ = pass == 0;
      blocks[pass] = X0;
      AddTransposeBlock(J, F.data(), nrow, n, blocks[pass].data(), ld);
    }
    for (int c = 0; c < n; c++) {
      std::vector<double> y(ncol);
      for (int j = 0; j < ncol; j++) y[j] = X0[j * ld + c];
      for (int i = 0; i < nrow; i++) {
        for (int q = rowadr[i]; q < rowadr[i] + rownnz[i]; q++)
          y[colind[q]] += val[q] * F[c * nrow + i];
      }
      for (int j = 0; j < ncol; j++) {
        EXPECT_EQ(blocks[1][j * ld + c], y[j]) << "n " << n << ", column " << c << ", dof " << j;
        EXPECT_EQ(blocks[0][j * ld + c], y[j]) << "AVX2: n " << n << ", column " << c;
      }
    }
    for (int j = 0; j < ncol; j++) {
      for (int c = n; c < ld; c++) EXPECT_EQ(blocks[0][j * ld + c], X0[j * ld + c]);
    }
  }
}

// the plain loops of the row-major kernels (one entry at a time, zero multipliers skipped); the
// LU's row interchanges piv as LuFactorRows chose them (null: none)
void PlainLuFactor(double* a, int n, const int* piv) {
  for (int c = 0; c < n; c++) {
    for (int k = 0; k < n && piv && piv[c] != c; k++) std::swap(a[c * n + k], a[piv[c] * n + k]);
    const double ip = 1 / a[c * n + c];
    for (int r = c + 1; r < n; r++) {
      const double l = a[r * n + c] * ip;
      a[r * n + c] = l;
      for (int s = c + 1; s < n && l != 0; s++) a[r * n + s] -= l * a[c * n + s];
    }
  }
}

TEST(DenseRowKernels, PairedLoopsGiveThePlainLoopsSums) {
  for (int n = 1; n <= 7; n++) {
    // a diagonally dominant matrix with some zero entries (skipped multipliers)
    std::vector<double> a(n * n);
    for (int i = 0; i < n * n; i++) a[i] = (i % 5 == 3) ? 0 : std::sin(1.3 * i + 0.2);
    for (int i = 0; i < n; i++) a[i * n + i] += 4 + i;
    for (const bool pivot : {false, true}) {
      std::vector<double> lu = a, ref = a;
      std::vector<int> piv(n);
      double mn = HUGE_VAL, mx = 0;
      ASSERT_TRUE(LuFactorRows(lu.data(), n, pivot ? piv.data() : nullptr, &mn, &mx));
      PlainLuFactor(ref.data(), n, pivot ? piv.data() : nullptr);
      EXPECT_EQ(lu, ref) << "n " << n;
    }
    std::vector<double> lu = a;
    double mn = HUGE_VAL, mx = 0;
    ASSERT_TRUE(LuFactorRows(lu.data(), n, nullptr, &mn, &mx));
    for (int m = 1; m <= 7; m++) {
      std::vector<double> B(n * m);
      for (int i = 0; i < n * m; i++) B[i] = std::cos(0.7 * i + n);
      // L^-1 B (n x m)
      std::vector<double> x = B, ref = B;
      LowerSolveRows(lu.data(), n, x.data(), m);
      for (int r = 1; r < n; r++) {
        for (int c = 0; c < r; c++) {
          const double l = lu[r * n + c];
          for (int s = 0; s < m && l != 0; s++) ref[r * m + s] -= l * ref[c * m + s];
        }
      }
      EXPECT_EQ(x, ref) << "n " << n << " m " << m;
      // B U^-1 (m x n)
      x = B, ref = B;
      UpperSolveRight(lu.data(), n, x.data(), m);
      for (int r = 0; r < m; r++) {
        for (int c = 0; c < n; c++) {
          double t = ref[r * n + c];
          for (int k = 0; k < c; k++) t -= ref[r * n + k] * lu[k * n + c];
          ref[r * n + c] = t / lu[c * n + c];
        }
      }
      EXPECT_EQ(x, ref) << "n " << n << " m " << m;
      // C -= A B (m x n, A m x n with zeros, B n x n)
      std::vector<double> C(m * n);
      for (int i = 0; i < m * n; i++) C[i] = std::sin(2.1 * i);
      std::vector<double> A = B;
      for (int i = 1; i < m * n; i += 4) A[i] = 0;
      x = C, ref = C;
      GemmSub(x.data(), A.data(), a.data(), m, n, n);
      for (int i = 0; i < m; i++) {
        for (int l = 0; l < n; l++) {
          const double f = A[i * n + l];
          for (int j = 0; j < n && f != 0; j++) ref[i * n + j] -= f * a[l * n + j];
        }
      }
      EXPECT_EQ(x, ref) << "n " << n << " m " << m;
    }
  }
}

template <int R>
void ExpectRowsAreRowTimes(const std::vector<double>& val, const int* col, int nk,
                           const std::vector<double>& X, int ld, int n) {
  // R rows (row r's values: val from r on) against RowTimesWide per row, bit for bit
  std::vector<double> u[R], ref[R];
  const double* v[R];
  double* y[R];
  for (int r = 0; r < R; r++) {
    u[r].assign(n + 1, -7.0);
    ref[r].assign(n + 1, -7.0);
    v[r] = val.data() + r;
    y[r] = u[r].data();
    columns::RowTimesWide(v[r], col, nk, X.data(), ld, n, ref[r].data());
  }
  columns::RowsTimesWide<R>(v, col, nk, X.data(), ld, n, y);
  for (int r = 0; r < R; r++) {
    EXPECT_EQ(u[r], ref[r]) << "R " << R << ", row " << r << ", n " << n << (col ? "" : ", dense")
                            << (Avx2Kernels::allowed_ ? ", AVX2" : "");
  }
}

TEST_F(JacBlockKernelsTest, RowTimesWideIsTheColumnDots) {
  // u = row' X on 1 to 32 columns (every chunk width: 16, 8, 4, 2, 1), a sparse row (9 of 20
  // entries) and a dense one (17), X's stride wider than the columns; each column the plain dot
  // in the row's order, with the AVX2 clone and without; RowsTimesWide's two to four rows of the
  // pattern (row r's values from val + r) each RowTimesWide's
  const int nx = 20, nsparse = 9, ndense = 17;
  std::vector<int> col(nsparse);
  std::vector<double> val(ndense + 3);
  for (int k = 0; k < nsparse; k++) col[k] = (3 * k + 1) % nx;
  std::sort(col.begin(), col.end());
  for (int k = 0; k < ndense + 3; k++) val[k] = std::cos(0.7 * k + 0.2);
  for (int n = 1; n <= 32; n++) {
    const int ld = n + 3;
    std::vector<double> X(static_cast<size_t>(nx) * ld);
    for (size_t e = 0; e < X.size(); e++) X[e] = std::sin(0.53 * e + 1);
    for (const bool dense : {false, true}) {
      const int* c = dense ? nullptr : col.data();
      const int nk = dense ? ndense : nsparse;
      std::vector<double> u[2] = {std::vector<double>(n + 1, -7.0),
                                  std::vector<double>(n + 1, -7.0)};
      for (int pass = 0; pass < 2; pass++) {
        Avx2Kernels::allowed_ = pass == 0;
        columns::RowTimesWide(val.data(), c, nk, X.data(), ld, n, u[pass].data());
      }
      for (int j = 0; j < n; j++) {
        double s = 0;
        for (int k = 0; k < nk; k++) s += val[k] * X[static_cast<size_t>(c ? c[k] : k) * ld + j];
        EXPECT_EQ(u[1][j], s) << "n " << n << ", column " << j << (dense ? ", dense" : "");
        EXPECT_EQ(u[0][j], s) << "AVX2: n " << n << ", column " << j << (dense ? ", dense" : "");
      }
      EXPECT_EQ(u[0][n], -7.0);  // (no column past n written)
      EXPECT_EQ(u[1][n], -7.0);
      for (const bool avx2 : {true, false}) {
        Avx2Kernels::allowed_ = avx2;
        ExpectRowsAreRowTimes<2>(val, c, nk, X, ld, n);
        ExpectRowsAreRowTimes<3>(val, c, nk, X, ld, n);
        ExpectRowsAreRowTimes<4>(val, c, nk, X, ld, n);
      }
    }
  }
}

TEST_F(JacBlockKernelsTest, AddTransposeBlockInRowGroupsIsRowByRow) {
  // rows 0-3 one pattern, 4-6 another with row 5's coefficients zero (its group row by row),
  // 7-8 a third, 9 alone; X += J' F with the groups against without, bit for bit, on 1 to 32
  // columns, with the AVX2 clone and without
  const int nrow = 10, ncol = 11;
  const std::vector<int> group = {4, 0, 0, 0, 3, 0, 0, 2, 0, 1};
  const std::vector<std::vector<int>> pattern = {{0, 2, 3, 7, 10}, {1, 4, 5}, {0, 6, 8, 9}, {2}};
  std::vector<int> rownnz, rowadr, colind;
  std::vector<double> val;
  for (int i = 0, p = -1; i < nrow; i++) {
    if (group[i] > 0) p++;
    rowadr.push_back(static_cast<int>(colind.size()));
    rownnz.push_back(static_cast<int>(pattern[p].size()));
    for (int c : pattern[p]) {
      colind.push_back(c);
      val.push_back(std::cos(0.3 * i + 0.7 * c + 0.1));
    }
  }
  const SparseRows J = RowsOf(ncol, rownnz, rowadr, colind, val);
  for (const bool avx2 : {true, false}) {
    Avx2Kernels::allowed_ = avx2;
    for (int n = 1; n <= kTransposeBlock; n++) {
      const int ld = n + 3;
      std::vector<double> F(static_cast<size_t>(n) * nrow);
      for (int c = 0; c < n; c++) {
        for (int i = 0; i < nrow; i++) F[c * nrow + i] = i == 5 ? 0 : std::sin(0.8 * c + 1.1 * i);
      }
      std::vector<double> X[2];
      for (int pass = 0; pass < 2; pass++) {
        X[pass].resize(static_cast<size_t>(ncol) * ld);
        for (size_t e = 0; e < X[pass].size(); e++) X[pass][e] = std::sin(0.41 * e + 2);
        AddTransposeBlock(J, F.data(), nrow, n, X[pass].data(), ld,
                          pass == 0 ? group.data() : nullptr);
      }
      EXPECT_EQ(X[0], X[1]) << "n " << n << (avx2 ? ", AVX2" : "");
    }
  }
}

}  // namespace
}  // namespace contactkit::test
