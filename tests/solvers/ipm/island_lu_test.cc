// Copyright 2026 The contactkit developers.
//
// The island factorization (solvers/ipm/island_lu.h) against a dense LU of the same matrix
// M + J' W J, with random nonsymmetric contact blocks W, on real problems: a humanoid on the
// floor (tree-sparse layout), stacked primitives (many trees, block-sparse with fill) and
// 22 humanoids (several multi-tree islands).
#include "solvers/ipm/island_lu.h"

#include <Eigen/Dense>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "support/fixture.h"
#include "tests/solvers/ipm/ipm_support.h"

namespace contactkit::test {
namespace {

struct LuCase {
  std::string model;
  int steps;
  bool expect_tree_sparse;
};

class IslandLUTest : public MujocoTest, public ::testing::WithParamInterface<LuCase> {};

TEST_P(IslandLUTest, SolvesMatchDenseLU) {
  const LuCase& c = GetParam();
  ModelPtr m = Load(c.model);
  ASSERT_TRUE(m);
  SteppedProblem at(std::move(m), c.steps);
  ASSERT_EQ(at.dropped(), 0);
  Problem& p = at.p();
  ASSERT_GT(p.islands.nisland, 0);

  IslandLU lu;
  std::string err;
  ASSERT_TRUE(lu.Allocate(at.dims(), 1 << 22, &err)) << err;
  std::vector<uint8_t> chain(p.nrow);
  for (int i = 0; i < p.nrow; i++) {
    chain[i] = RowIsChain(p.J.colind + p.J.rowadr[i], p.J.rownnz[i], p.mass.parent);
  }
  std::vector<int> row_con(p.nrow, -1);
  for (int k = 0; k < p.ncon; k++) {
    for (int r = 0; r < p.con[k].dim; r++) row_con[p.con[k].row + r] = k;
  }

  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uni(-1, 1);
  int tree_sparse = 0, multi_tree = 0, cspace = 0;
  const int ni = p.islands.nisland;
  for (int k = 0; k < 3 * ni; k++) {
    // every island in the layout Analyze picks, in dof space, and in constraint space
    const IslandLU::Space space = k < ni       ? IslandLU::kAuto
                                  : k < 2 * ni ? IslandLU::kDofSpace
                                               : IslandLU::kConstraintSpace;
    const int island = k % ni;
    if (space == IslandLU::kConstraintSpace && p.islands.nrows[island] > 64) continue;
    ASSERT_TRUE(lu.Analyze(p, island, chain.data(), space));
    if (space != IslandLU::kAuto) {
      EXPECT_EQ(lu.constraint_space(), space == IslandLU::kConstraintSpace);
    }
    cspace += lu.constraint_space();
    tree_sparse += lu.tree_sparse();
    multi_tree += lu.ntrees() > 1 && !lu.tree_sparse();
    lu.SetMass(p);

    // dense copy in island order
    const int nd = p.islands.ndofs[island];
    const int* dofs = p.islands.dofs + p.islands.dofadr[island];
    std::vector<int> local(p.nv, -1);
    for (int a = 0; a < nd; a++) local[dofs[a]] = a;
    Eigen::MatrixXd A = Eigen::MatrixXd::Zero(nd, nd);
    for (int t = 0; t < p.islands.ntrees[island]; t++) {
      const int tree = p.islands.trees[p.islands.treeadr[island] + t];
      const int b = p.islands.tree_dofadr[tree], n = p.islands.tree_dofnum[tree];
      std::vector<double> blk(n * n);
      p.mass.Dense(b, b + n, blk.data(), n);
      for (int r = 0; r < n; r++) {
        for (int s = 0; s < n; s++) A(local[b + r], local[b + s]) = blk[r + s * n];
      }
    }

    // random contributions: one block per contact, a weight per other row
    const int* rows = p.islands.rows + p.islands.rowadr[island];
    for (int a = 0; a < p.islands.nrows[island]; a++) {
      const int i = rows[a];
      int dim = 1;
      if (row_con[i] >= 0) {
        if (p.con[row_con[i]].row != i) continue;
        dim = p.con[row_con[i]].dim;
      }
      const int n = p.J.rownnz[i];
      const int* cols = p.J.colind + p.J.rowadr[i];
      std::vector<double> W(dim * dim), Jc(dim * n), T(dim * n, 0);
      for (int r = 0; r < dim; r++) {
        for (int s = 0; s < dim; s++) W[r * dim + s] = (r == s ? 5 + 2 * uni(rng) : 0.5 * uni(rng));
        for (int b = 0; b < n; b++) Jc[r * n + b] = p.J.val[p.J.rowadr[i + r] + b];
      }
      for (int r = 0; r < dim; r++) {
        for (int s = 0; s < dim; s++) {
          for (int b = 0; b < n; b++) T[r * n + b] += W[r * dim + s] * Jc[s * n + b];
        }
      }
      if (lu.constraint_space()) {
        lu.AddW(i, dim, W.data());
      } else {
        lu.AddJtT(cols, n, dim, Jc.data(), T.data());
      }
      for (int x = 0; x < n; x++) {
        for (int y = 0; y < n; y++) {
          double v = 0;
          for (int r = 0; r < dim; r++) v += Jc[r * n + x] * T[r * n + y];
          A(local[cols[x]], local[cols[y]]) += v;
        }
      }
    }

    double mn, mx;
    ASSERT_TRUE(lu.Factor(&mn, &mx));
    EXPECT_GT(mn, 0);
    EXPECT_GE(mx, mn);

    // A x = b and A' x = b against the dense LU
    std::vector<double> x(p.nv, 0), xt(p.nv, 0);
    Eigen::VectorXd b(nd);
    for (int a = 0; a < nd; a++) b[a] = x[dofs[a]] = xt[dofs[a]] = uni(rng);
    lu.Solve(x.data());
    lu.SolveTranspose(xt.data());
    const Eigen::PartialPivLU<Eigen::MatrixXd> dense(A);
    const Eigen::VectorXd ref = dense.solve(b);
    const Eigen::VectorXd reft = dense.transpose().solve(b);
    for (int a = 0; a < nd; a++) {
      EXPECT_NEAR(x[dofs[a]], ref[a], 1e-8 * (1 + ref.cwiseAbs().maxCoeff()))
          << "island " << island << " cspace " << lu.constraint_space();
      EXPECT_NEAR(xt[dofs[a]], reft[a], 1e-8 * (1 + reft.cwiseAbs().maxCoeff()))
          << "island " << island << " cspace " << lu.constraint_space();
    }

    // 15 columns at once (stride 17: the tree-sparse sweeps' chunks of 8, 4, 2 and 1), the first
    // b: each column as Solve gives it, to the bit, and against the dense LU
    constexpr int kCols = 15, kStride = 17;
    std::vector<double> X(static_cast<size_t>(p.nv) * kStride, 0);
    Eigen::MatrixXd B(nd, kCols);
    for (int a = 0; a < nd; a++) {
      for (int col = 0; col < kCols; col++) {
        B(a, col) = col == 0 ? b[a] : uni(rng);
        X[static_cast<size_t>(dofs[a]) * kStride + col] = B(a, col);
      }
    }
    lu.SolveColumns(X.data(), kCols, kStride);
    const Eigen::MatrixXd refs = dense.solve(B);
    std::vector<double> one(p.nv, 0);
    for (int col = 0; col < kCols; col++) {
      for (int a = 0; a < nd; a++) one[dofs[a]] = B(a, col);
      lu.Solve(one.data());
      for (int a = 0; a < nd; a++) {
        const double got = X[static_cast<size_t>(dofs[a]) * kStride + col];
        EXPECT_EQ(got, one[dofs[a]]) << "island " << island << " column " << col;
        EXPECT_NEAR(got, refs(a, col), 1e-8 * (1 + refs.col(col).cwiseAbs().maxCoeff()))
            << "island " << island << " cspace " << lu.constraint_space();
      }
    }
  }
  if (c.expect_tree_sparse) {
    EXPECT_GT(tree_sparse, 0);
  } else {
    EXPECT_GT(multi_tree, 0);
  }
  EXPECT_GT(cspace, 0);
}

// blocks of rows on the same columns (a geom pair's contacts) added in one call give every entry
// the sums the calls block by block give, to the bit (Linearize groups them so), with rows that
// are zero on some columns (a block's fewer nonzero rows) and every block count up to kMaxGroup
TEST_P(IslandLUTest, GroupedBlocksGiveTheSingleCallsSums) {
  const LuCase& c = GetParam();
  ModelPtr m = Load(c.model);
  ASSERT_TRUE(m);
  SteppedProblem at(std::move(m), c.steps);
  Problem& p = at.p();
  IslandLU one, grouped;
  std::string err;
  ASSERT_TRUE(one.Allocate(at.dims(), 1 << 22, &err)) << err;
  ASSERT_TRUE(grouped.Allocate(at.dims(), 1 << 22, &err)) << err;
  std::vector<uint8_t> chain(p.nrow, 0);
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> uni(-1, 1);
  int groups = 0;
  for (int island = 0; island < p.islands.nisland; island++) {
    ASSERT_TRUE(one.Analyze(p, island, chain.data(), IslandLU::kDofSpace));
    ASSERT_TRUE(grouped.Analyze(p, island, chain.data(), IslandLU::kDofSpace));
    one.SetMass(p);
    grouped.SetMass(p);
    for (int k = 0; k < p.ncon; k++) {
      const int i = p.con[k].row, dim = p.con[k].dim, n = p.J.rownnz[i];
      if (p.islands.row_island[i] != island) continue;
      const int* cols = p.J.colind + p.J.rowadr[i];
      const int mg = 1 + (k % IslandLU::kMaxGroup);
      std::vector<double> Jc(mg * dim * n), T(mg * dim * n);
      for (int g = 0; g < mg; g++) {
        for (int r = 0; r < dim; r++) {
          for (int b = 0; b < n; b++) {
            const int e = (g * dim + r) * n + b;
            Jc[e] = (g + r + b) % 5 == 4 ? 0 : p.J.val[p.J.rowadr[i + r] + b] + 0.1 * uni(rng);
            T[e] = uni(rng);
          }
        }
        one.AddJtT(cols, n, dim, Jc.data() + g * dim * n, T.data() + g * dim * n);
      }
      grouped.AddJtT(cols, n, dim, Jc.data(), T.data(), mg);
      groups += mg > 1 && !grouped.tree_sparse();
    }
    double mn, mx;
    ASSERT_TRUE(one.Factor(&mn, &mx));
    ASSERT_TRUE(grouped.Factor(&mn, &mx));
    std::vector<double> x(p.nv, 0), y(p.nv, 0);
    const int* dofs = p.islands.dofs + p.islands.dofadr[island];
    for (int a = 0; a < p.islands.ndofs[island]; a++) x[dofs[a]] = y[dofs[a]] = uni(rng);
    one.Solve(x.data());
    grouped.Solve(y.data());
    for (int a = 0; a < p.islands.ndofs[island]; a++) {
      EXPECT_EQ(x[dofs[a]], y[dofs[a]]) << "island " << island << " dof " << dofs[a];
    }
  }
  if (!c.expect_tree_sparse) {
    EXPECT_GT(groups, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, IslandLUTest,
    ::testing::Values(LuCase{MujocoModel("humanoid/humanoid.xml"), 150, true},
                      LuCase{BundledModel("stacked_primitives.xml"), 400, false},
                      LuCase{MujocoModel("humanoid/22_humanoids.xml"), 1000, false}),
    [](const ::testing::TestParamInfo<LuCase>& info) {
      return std::string(info.index == 0   ? "humanoid"
                         : info.index == 1 ? "stacked"
                                           : "humanoids22");
    });

}  // namespace
}  // namespace contactkit::test
