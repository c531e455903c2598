// Copyright 2026 The contactkit developers.
//
// One island without a force tangent (ipm cannot center it) leaves only the columns of the
// directions that touch it to differences: by default differences of that island's own solve
// (IslandDifference), which agree with centered differences of the step as well as its forward
// differences do; with those off, ck_transitionFD's forward columns. The others are the analytic
// columns of the Jacobian without the failure.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "plugin/deriv/derivative.h"
#include "plugin/step/handle.h"
#include "solvers/ipm/ipm_solver.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

// two boxes resting on the floor apart: two islands
constexpr char kTwoBoxes[] = R"(
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="1 0 0.1"><freejoint/><geom type="box" size="0.1 0.15 0.1"/></body>
  </worldbody>
</mujoco>)";

class IslandFallbackTest : public MujocoTest {
 protected:
  void TearDown() override {
    ipm::IpmSolver::center_fail_island_ = -1;
    ipm::IpmSolver::island_difference_off_ = false;
    ck_.reset();
    d_.reset();
    m_.reset();
    MujocoTest::TearDown();
  }
  // the two boxes after 20 steps, the first one sliding
  void Boxes() {
    m_ = LoadString(kTwoBoxes);
    ASSERT_TRUE(m_);
    ckSettings s = Settings(ckSOL_IPM);
    s.ipm.kappa_grad = s.ipm.kappa_tol;  // the derivative of the hard-contact step taken
    ck_ = Make(m_.get(), &s);
    d_.reset(mj_makeData(m_.get()));
    for (int t = 0; t < 20; t++) ck_step(ck_.get(), m_.get(), d_.get());
    d_->qvel[0] = 0.05;
  }
  ModelPtr m_;
  HandlePtr ck_;
  DataPtr d_;
};

// ||a - b||_F / ||b||_F over the columns listed (row-major, ncol columns)
double ColumnsError(const std::vector<double>& a, const std::vector<double>& b, int ncol,
                    const std::vector<int>& cols) {
  double num = 0, den = 0;
  for (size_t r = 0; r < a.size() / ncol; r++) {
    for (int c : cols) {
      const size_t i = r * ncol + c;
      num += (a[i] - b[i]) * (a[i] - b[i]);
      den += b[i] * b[i];
    }
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

TEST_F(IslandFallbackTest, TheIslandsColumnsAreDifferencesOfItsOwnSolve) {
  if (!ck_solverAvailable(ckSOL_IPM)) GTEST_SKIP() << "solver ipm is not in this build";
  ASSERT_NO_FATAL_FAILURE(Boxes());
  const mjModel* m = m_.get();
  ckHandle* ck = ck_.get();
  mjData* d = d_.get();
  const int ndx = 2 * m->nv + m->na;

  Jacobians analytic(m), mixed(m), fwd(m), cen(m);
  ASSERT_EQ(0, ck_transitionJac(ck, m, d, analytic.A.data(), nullptr, nullptr, nullptr));
  int boxes = 0;  // the boxes whose columns changed (bits)
  for (int k = 0; k < 2; k++) {
    // island k fails: its directions' columns from differences of its own solve, every column
    // analytic as far as the call says (no column deferred to the step's differences)
    ipm::IpmSolver::center_fail_island_ = k;
    ASSERT_EQ(0, ck_transitionJac(ck, m, d, mixed.A.data(), nullptr, nullptr, nullptr))
        << ck_lastError(ck);
    EXPECT_EQ(0, ck->deriv->fd_columns());
    if (AllocationCounter::Available()) {
      AllocationCounter counter;
      counter.Start();
      ck_transitionJac(ck, m, d, mixed.A.data(), nullptr, nullptr, nullptr);
      EXPECT_EQ(0, counter.Stop()) << "island " << k;
    }
    ASSERT_EQ(0, ck_transitionFD(ck, m, d, 1e-6, 0, fwd.A.data(), nullptr, nullptr, nullptr));
    ASSERT_EQ(0, ck_transitionFD(ck, m, d, 1e-6, 1, cen.A.data(), nullptr, nullptr, nullptr));

    // the island's columns (those that leave the analytic Jacobian): against the step's
    // centered differences as close as its forward differences are; the others unchanged
    std::vector<int> cols;
    for (int c = 0; c < ndx; c++) {
      double err = 0, scale = 1e-12;
      for (int r = 0; r < ndx; r++) {
        const size_t i = static_cast<size_t>(r) * ndx + c;
        err = std::max(err, std::fabs(mixed.A[i] - analytic.A[i]));
        scale = std::max(scale, std::fabs(analytic.A[i]));
      }
      if (err > 1e-12 * scale) cols.push_back(c);
    }
    // ... all on one box (a free body: dofs [6 b, 6 b + 6)), each box failed once, and every
    // velocity direction of the box among them (a direction whose data tangent is exactly zero,
    // a translation along the floor under the closed-form plane contacts, leaves its column)
    std::vector<int> vel;
    for (int c : cols) {
      const int box = (c < m->nv ? c : c - m->nv) / 6;
      EXPECT_EQ(box, (cols[0] < m->nv ? cols[0] : cols[0] - m->nv) / 6) << "column " << c;
      if (c >= m->nv) vel.push_back(c);
    }
    ASSERT_GT(cols.size(), 0u) << "island " << k;
    EXPECT_EQ(6u, vel.size()) << "island " << k;
    boxes |= 1 << ((cols[0] < m->nv ? cols[0] : cols[0] - m->nv) / 6);
    const double own = ColumnsError(mixed.A, cen.A, ndx, cols);
    const double step = ColumnsError(fwd.A, cen.A, ndx, cols);
    EXPECT_LT(own, 2 * step + 1e-5) << "island " << k << ": forward " << step;
    std::printf("island %d: %zu columns, against centered differences %.2e (forward %.2e)\n", k,
                cols.size(), own, step);
  }
  EXPECT_EQ(3, boxes);
}

TEST_F(IslandFallbackTest, OnlyTheFailedIslandsColumnsAreDifferences) {
  if (!ck_solverAvailable(ckSOL_IPM)) GTEST_SKIP() << "solver ipm is not in this build";
  ipm::IpmSolver::island_difference_off_ = true;  // the step's differences
  ASSERT_NO_FATAL_FAILURE(Boxes());
  const mjModel* m = m_.get();
  ckHandle* ck = ck_.get();
  mjData* d = d_.get();
  const int ndx = 2 * m->nv + m->na;

  Jacobians analytic(m), mixed(m), fd(m);
  ASSERT_EQ(0, ck_transitionJac(ck, m, d, analytic.A.data(), nullptr, nullptr, nullptr));
  ASSERT_EQ(0, ck->deriv->fd_columns());

  // island k fails: the columns of the directions that touch it by differences (each box's
  // directions touch its own island: the two failures cover every column once); the call
  // returns 1 and says how many columns
  int total = 0;
  for (int k = 0; k < 2; k++) {
    ipm::IpmSolver::center_fail_island_ = k;
    ASSERT_EQ(1, ck_transitionJac(ck, m, d, mixed.A.data(), nullptr, nullptr, nullptr));
    EXPECT_EQ(ckFALLBACK_NO_TANGENT, ck_lastFallback(ck));
    EXPECT_NE(std::string(ck_lastError(ck)).find("the others analytic"), std::string::npos)
        << ck_lastError(ck);
    if (AllocationCounter::Available()) {
      // (again: the differences' steps allocate nothing either)
      AllocationCounter counter;
      counter.Start();
      ck_transitionJac(ck, m, d, mixed.A.data(), nullptr, nullptr, nullptr);
      EXPECT_EQ(0, counter.Stop()) << "island " << k;
    }
    const int nfd = ck->deriv->fd_columns();
    EXPECT_GT(nfd, 0);
    EXPECT_LT(nfd, ndx);
    total += nfd;
    ASSERT_EQ(0, ck_transitionFD(ck, m, d, 1e-6, 0, fd.A.data(), nullptr, nullptr, nullptr));

    // every column is either the differences' (exactly) or the analytic one
    int by_fd = 0;
    for (int c = 0; c < ndx; c++) {
      bool same_fd = true;
      double err = 0, scale = 1e-12;
      for (int r = 0; r < ndx; r++) {
        const size_t i = static_cast<size_t>(r) * ndx + c;
        same_fd = same_fd && mixed.A[i] == fd.A[i];
        err = std::max(err, std::fabs(mixed.A[i] - analytic.A[i]));
        scale = std::max(scale, std::fabs(analytic.A[i]));
      }
      if (same_fd) {
        by_fd++;
      } else {
        EXPECT_LT(err, 1e-12 * scale) << "island " << k << ", column " << c;
      }
    }
    EXPECT_EQ(nfd, by_fd) << "island " << k;
    EXPECT_GT(RelativeError(mixed.A, analytic.A), 1e-12) << "island " << k;
  }
  EXPECT_EQ(ndx, total);
}

}  // namespace
}  // namespace contactkit::test
