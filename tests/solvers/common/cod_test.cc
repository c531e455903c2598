// Copyright 2026 The contactkit developers.
//
// The complete orthogonal decomposition: minimum-norm least-squares solutions, the transposed
// pseudo-inverse, the null-space projector and basis against Eigen's SVD, the derivative of the
// minimum-norm solution (Golub-Pereyra) built from them against central differences, the block
// solve (SolveBlock, with its AVX2 clone and without) against Solve bit for bit, and no
// allocation after Bind.
#include "solvers/common/cod.h"

#include <Eigen/Dense>
#include <cmath>
#include <random>
#include <vector>

#include "solvers/common/dense.h"
#include "support/fixture.h"

namespace contactkit::test {
namespace {

using Eigen::MatrixXd;
using Eigen::VectorXd;

// a random n x n matrix of rank r; symmetric positive semidefinite G G' or general G H'
MatrixXd RankDeficient(int n, int r, bool symmetric, std::mt19937* rng) {
  std::normal_distribution<double> g;
  MatrixXd G(n, r), H(n, r);
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < r; j++) {
      G(i, j) = g(*rng);
      H(i, j) = g(*rng);
    }
  }
  return symmetric ? MatrixXd(G * G.transpose()) : MatrixXd(G * H.transpose());
}

MatrixXd Pinv(const MatrixXd& A) {
  Eigen::JacobiSVD<MatrixXd> svd(A, Eigen::ComputeFullU | Eigen::ComputeFullV);
  VectorXd s = svd.singularValues();
  for (int i = 0; i < s.size(); i++) s(i) = s(i) > 1e-10 * s(0) ? 1 / s(i) : 0;
  return svd.matrixV() * s.asDiagonal() * svd.matrixU().transpose();
}

struct CodHolder {
  std::vector<double> d;
  std::vector<int> i;
  Cod cod;
  explicit CodHolder(int nmax) : d(Cod::Doubles(nmax)), i(Cod::Ints(nmax)) {
    cod.Bind(d.data(), i.data(), nmax);
  }
};

TEST(CodTest, MatchesThePseudoInverse) {
  std::mt19937 rng(3);
  CodHolder h(12);
  for (bool symmetric : {true, false}) {
    for (int r : {12, 9, 5, 1}) {
      const MatrixXd A = RankDeficient(12, r, symmetric, &rng);
      const MatrixXd P = Pinv(A);
      EXPECT_EQ(h.cod.Factor(A.data(), 12, 12, 1e-12), r);
      VectorXd c = VectorXd::Random(12), x(12), xt(12), z(12);
      h.cod.Solve(c.data(), x.data());
      h.cod.SolveT(c.data(), xt.data());
      h.cod.NullProject(c.data(), z.data());
      const double scale = P.norm() * c.norm();
      EXPECT_LE((x - P * c).norm(), 1e-10 * scale) << "rank " << r;
      EXPECT_LE((xt - P.transpose() * c).norm(), 1e-10 * scale) << "rank " << r;
      EXPECT_LE((z - (c - P * (A * c))).norm(), 1e-10 * c.norm()) << "rank " << r;
      // the null-space basis: orthonormal rows V with A V' = 0 and V' V = I - A^+ A
      MatrixXd V(12, 12 - r);  // column i: basis vector i
      h.cod.NullBasis(V.data());
      const MatrixXd I = MatrixXd::Identity(12 - r, 12 - r);
      EXPECT_LE((V.transpose() * V - I).norm(), 1e-13) << "rank " << r;
      EXPECT_LE((A * V).norm(), 1e-10 * A.norm()) << "rank " << r;
      EXPECT_LE((V * (V.transpose() * c) - z).norm(), 1e-10 * c.norm()) << "rank " << r;
      // aliasing is allowed
      VectorXd y = c;
      h.cod.Solve(y.data(), y.data());
      EXPECT_LE((y - x).norm(), 1e-14 * x.norm());
    }
  }
}

TEST(CodTest, MinimumNormSolutionOfAConsistentSystem) {
  // two identical columns (a box's two corners on one edge): equal shares
  MatrixXd A(3, 3);
  A << 2, 2, 1, 2, 2, 1, 1, 1, 3;
  CodHolder h(3);
  EXPECT_EQ(h.cod.Factor(A.data(), 3, 3, 1e-12), 2);
  const VectorXd want = (VectorXd(3) << 0.5, 0.5, 1).finished();
  const VectorXd c = A * want;
  VectorXd x(3);
  h.cod.Solve(c.data(), x.data());
  EXPECT_NEAR(x(0), x(1), 1e-14);
  EXPECT_LE((A * x - c).norm(), 1e-13);
  EXPECT_LE((x - want).norm(), 1e-13);
}

// d/dt of x = K(t)^+ c(t) with constant rank and c in the range of K:
// dx = K^+ (dc - dK x) + (I - K^+ K) dK' K^+' x
TEST(CodTest, GolubPereyraDerivativeOfTheMinimumNormSolution) {
  std::mt19937 rng(11);
  std::normal_distribution<double> g;
  const int n = 8, r = 5;
  CodHolder h(n);
  for (bool symmetric : {true, false}) {
    MatrixXd G0(n, r), G1(n, r), H0(n, r), H1(n, r);
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < r; j++) {
        G0(i, j) = g(rng);
        G1(i, j) = g(rng);
        H0(i, j) = g(rng);
        H1(i, j) = g(rng);
      }
    }
    VectorXd z0 = VectorXd::Random(r), z1 = VectorXd::Random(r);
    auto K = [&](double t) {
      const MatrixXd G = G0 + t * G1;
      const MatrixXd H = symmetric ? G : MatrixXd(H0 + t * H1);
      return MatrixXd(G * H.transpose());
    };
    auto c = [&](double t) { return VectorXd((G0 + t * G1) * (z0 + t * z1)); };  // in range(K)
    auto solve = [&](double t) {
      const MatrixXd k = K(t);
      VectorXd x(n);
      const VectorXd ct = c(t);
      EXPECT_EQ(h.cod.Factor(k.data(), n, n, 1e-12), r);
      h.cod.Solve(ct.data(), x.data());
      return x;
    };
    const double eps = 1e-6;
    const VectorXd fd = (solve(eps) - solve(-eps)) / (2 * eps);
    const MatrixXd dK = (K(eps) - K(-eps)) / (2 * eps);
    const VectorXd dc = (c(eps) - c(-eps)) / (2 * eps);
    const VectorXd x = solve(0);
    VectorXd a = dc - dK * x, dx(n), y(n), q(n);
    h.cod.Solve(a.data(), dx.data());
    h.cod.SolveT(x.data(), y.data());
    q = dK.transpose() * y;
    h.cod.NullProject(q.data(), q.data());
    EXPECT_GT(q.norm(), 1e-3 * dx.norm()) << "the null-space term matters here";
    dx += q;
    EXPECT_LE((dx - fd).norm(), 1e-6 * fd.norm()) << (symmetric ? "symmetric" : "general");
  }
}

TEST(CodTest, BlockSolveIsTheColumnSolves) {
  std::mt19937 rng(7);
  const int n = 21;  // (the reflectors' dots: four partial sums and tails of every length)
  CodHolder h(n);
  for (bool symmetric : {true, false}) {
    for (int r : {n, 17, 6}) {
      const MatrixXd A = RankDeficient(n, r, symmetric, &rng);
      ASSERT_EQ(h.cod.Factor(A.data(), n, n, 1e-12), r);
      std::vector<double> scratch(Cod::BlockDoubles(n));
      for (int nb = 1; nb <= Cod::kBlock; nb++) {
        const int ld = nb + 2;  // (Y's stride wider than the block)
        std::vector<double> Y0(static_cast<size_t>(n) * ld);
        for (size_t e = 0; e < Y0.size(); e++) Y0[e] = std::sin(0.7 * e + r);
        std::vector<double> Y[2] = {Y0, Y0};
        for (int pass = 0; pass < 2; pass++) {
          Avx2Kernels::allowed_ = pass == 0;
          h.cod.SolveBlock(Y[pass].data(), ld, nb, scratch.data());
        }
        Avx2Kernels::allowed_ = true;
        std::vector<double> c(n), x(n);
        for (int k = 0; k < ld; k++) {
          for (int i = 0; i < n; i++) c[i] = Y0[i * ld + k];
          h.cod.Solve(c.data(), x.data());
          for (int i = 0; i < n; i++) {
            const double want = k < nb ? x[i] : Y0[i * ld + k];  // (the others untouched)
            EXPECT_EQ(Y[1][i * ld + k], want) << "rank " << r << ", nb " << nb << ", col " << k;
            EXPECT_EQ(Y[0][i * ld + k], want) << "AVX2: rank " << r << ", nb " << nb;
          }
        }
      }
    }
  }
}

TEST(CodTest, FactorAndSolveDoNotAllocate) {
  if (!AllocationCounter::Available()) GTEST_SKIP() << "malloc is owned by the sanitizer";
  std::mt19937 rng(5);
  CodHolder h(10);
  const MatrixXd A = RankDeficient(10, 6, false, &rng);
  std::vector<double> c(10, 1.0), x(10), v(10 * 4), scratch(Cod::BlockDoubles(10));
  AllocationCounter counter;
  counter.Start();
  h.cod.Factor(A.data(), 10, 10, 1e-12);
  h.cod.Solve(c.data(), x.data());
  h.cod.SolveT(c.data(), x.data());
  h.cod.NullProject(c.data(), x.data());
  h.cod.NullBasis(v.data());
  h.cod.SolveBlock(v.data(), 4, 4, scratch.data());
  EXPECT_EQ(counter.Stop(), 0);
}

}  // namespace
}  // namespace contactkit::test
