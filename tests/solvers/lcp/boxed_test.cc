// Copyright 2026 The contactkit developers.
//
// The dense boxed LCP solver on random contact-like problems A = J W J' (rank deficient when
// there are more rows than degrees of freedom): exact complementarity through every path (a
// guessed classification, also nearest to the previous answer, Lemke, the Gauss-Seidel fallback),
// agreement with enumeration on small positive definite problems, and no allocation in Solve.
#include "solvers/lcp/boxed.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "solvers/common/dense.h"
#include "solvers/lcp/lcp.h"
#include "solvers/lcp/schur.h"
#include "support/fixture.h"

namespace contactkit::test {
namespace {

// A random contact problem with the structure of a rigid-body scene: nbody free bodies stacked in
// levels (body k rests on body k-1, body 0 on the ground) with ncon contacts per level at random
// points with normals tilted up to 27 degrees from vertical (rows normal, tangent1, tangent2; the
// friction rows' bounds scale with their normal), nbil bilateral rows (fixed spins) and nbox
// friction-loss rows (slides) on random bodies. b = J v - penetration / h on the normals: lifting
// the levels apart is always possible, so a solution exists (Stewart & Trinkle). A = J W J' is
// rank deficient once a level has more than two contacts.
struct RandomLcp {
  int n = 0;
  std::vector<double> A, b, lo, hi, mu;
  std::vector<int> findex;
  DenseLcp lcp;

  // nlink (< nbody) bilateral pairs of rows join body k to body k-1 (k = 1..nlink): no relative
  // horizontal velocity at a point between them, which lifting the levels apart keeps
  RandomLcp(int nbody, int ncon, int nbil, int nbox, std::mt19937* rng, int nlink = 0) {
    std::uniform_real_distribution<double> u(0, 1), s(-1, 1);
    const int ndof = 6 * nbody;
    n = 3 * ncon * nbody + nbil + nbox + 2 * nlink;
    std::vector<double> J(static_cast<size_t>(n) * ndof, 0.0), Winv(ndof);
    for (int k = 0; k < nbody; k++) {
      const double mass = 0.5 + 1.5 * u(*rng);
      for (int a = 0; a < 3; a++) {
        Winv[6 * k + a] = 1 / mass;
        Winv[6 * k + 3 + a] = 1 / (0.01 + 0.09 * u(*rng));
      }
    }
    int row = 0;
    lo.assign(n, 0);
    hi.assign(n, HUGE_VAL);
    mu.assign(n, 0);
    findex.assign(n, -1);
    for (int k = 0; k < nbil; k++, row++) {
      J[row * ndof + 6 * (k % nbody) + 3 + 2 * (k / nbody % 2)] = 1;  // spin about x or z
      lo[row] = -HUGE_VAL;
    }
    for (int k = 1; k <= nlink; k++) {
      const double r[3] = {0.1 * s(*rng), 0.1 * s(*rng), 0};  // from the joint to body k
      for (int a = 0; a < 2; a++, row++) {
        lo[row] = -HUGE_VAL;
        for (int side = 0; side < 2; side++) {
          // body k's point r + (0, 0, 0.1) above and body k-1's r - (0, 0, 0.1) below its centre
          const double arm[3] = {r[0], r[1], side == 0 ? -0.1 : 0.1};
          const double sign = side == 0 ? 1 : -1;
          double* jr = J.data() + static_cast<size_t>(row) * ndof + 6 * (k - side);
          jr[a] = sign;  // unit axis x or y; the angular part is arm x axis
          jr[3] = sign * (a == 0 ? 0 : -arm[2]);
          jr[4] = sign * (a == 0 ? arm[2] : 0);
          jr[5] = sign * (a == 0 ? -arm[1] : arm[0]);
        }
      }
    }
    for (int k = 0; k < nbox; k++, row++) {
      J[row * ndof + 6 * (k % nbody)] = 1;  // slide along x
      hi[row] = 0.1 + 0.5 * u(*rng);
      lo[row] = -hi[row];
    }
    for (int k = 0; k < nbody; k++) {
      for (int c = 0; c < ncon; c++) {
        // contact frame and lever arms to the centres of body k (above) and k-1 (below)
        double nrm[3] = {0.5 * s(*rng), 0.5 * s(*rng), 1}, t1[3], t2[3];
        const double len = std::sqrt(nrm[0] * nrm[0] + nrm[1] * nrm[1] + 1);
        for (double& x : nrm) x /= len;
        const double ref[3] = {1, 0, 0};
        t1[0] = ref[1] * nrm[2] - ref[2] * nrm[1];
        t1[1] = ref[2] * nrm[0] - ref[0] * nrm[2];
        t1[2] = ref[0] * nrm[1] - ref[1] * nrm[0];
        const double l1 = std::sqrt(t1[0] * t1[0] + t1[1] * t1[1] + t1[2] * t1[2]);
        for (double& x : t1) x /= l1;
        t2[0] = nrm[1] * t1[2] - nrm[2] * t1[1];
        t2[1] = nrm[2] * t1[0] - nrm[0] * t1[2];
        t2[2] = nrm[0] * t1[1] - nrm[1] * t1[0];
        const double up[3] = {0.1 * s(*rng), 0.1 * s(*rng), -0.1};  // from body k's centre
        const double down[3] = {up[0], up[1], 0.1};                 // from body k-1's centre
        const double* axes[3] = {nrm, t1, t2};
        const int normal = row;
        for (int a = 0; a < 3; a++, row++) {
          const double* ax = axes[a];
          for (int side = 0; side < 2; side++) {
            const int body = k - side;
            if (body < 0) continue;
            const double* r = side == 0 ? up : down;
            const double sign = side == 0 ? 1 : -1;
            double* jr = J.data() + static_cast<size_t>(row) * ndof + 6 * body;
            for (int d = 0; d < 3; d++) jr[d] = sign * ax[d];
            jr[3] = sign * (r[1] * ax[2] - r[2] * ax[1]);
            jr[4] = sign * (r[2] * ax[0] - r[0] * ax[2]);
            jr[5] = sign * (r[0] * ax[1] - r[1] * ax[0]);
          }
          if (a > 0) {
            findex[row] = normal;
            mu[row] = 0.2 + u(*rng);
            lo[row] = -HUGE_VAL;
          }
        }
      }
    }

    // A = J W J', b = J v - penetration on the normals
    A.assign(static_cast<size_t>(n) * n, 0);
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) {
        double acc = 0;
        for (int d = 0; d < ndof; d++) acc += J[i * ndof + d] * Winv[d] * J[j * ndof + d];
        A[i + j * n] = acc;
      }
    }
    std::vector<double> v(ndof);
    for (double& x : v) x = s(*rng);
    b.assign(n, 0);
    for (int i = 0; i < n; i++) {
      for (int d = 0; d < ndof; d++) b[i] += J[i * ndof + d] * v[d];
      if (findex[i] < 0 && lo[i] == 0) b[i] -= 0.5 * u(*rng);
    }
    lcp = DenseLcp{n, n, A.data(), b.data(), lo.data(), hi.data(), findex.data(), mu.data()};
  }
};

struct Workspace {
  BoxedLcpSolver solver;
  std::vector<double> dmem, x, w;
  std::vector<int> imem;
  std::vector<signed char> state;
  Cod cod;
  explicit Workspace(int nmax)
      : dmem(Cod::Doubles(nmax)), x(nmax), w(nmax), imem(Cod::Ints(nmax)), state(nmax) {
    solver.Allocate(nmax);
    cod.Bind(dmem.data(), imem.data(), nmax);
  }
  // the solver on lcp into this workspace's state, x and w
  bool Solve(const DenseLcp& lcp, const BoxedOptions& opt, BoxedStats* st) {
    return solver.Solve(lcp, opt, state.data(), x.data(), w.data(), &cod, st);
  }
};

TEST(BoxedLcpTest, RandomProblemsAreSolvedExactly) {
  std::mt19937 rng(1);
  Workspace ws(60);
  int total = 0, exact = 0, states[3] = {0, 0, 0};
  for (int trial = 0; trial < 300; trial++) {
    const int nbody = 1 + trial % 3, ncon = 1 + trial % 6, nbil = trial % 3, nbox = trial % 2;
    RandomLcp p(nbody, ncon, nbil, nbox, &rng);
    BoxedOptions opt;
    BoxedStats st;
    total++;
    const bool ok = ws.Solve(p.lcp, opt, &st);
    exact += ok;
    EXPECT_TRUE(ok) << "trial " << trial << " n " << p.n << " residual " << st.residual;
    if (ok) {
      EXPECT_LE(st.residual, 1e-10) << "trial " << trial;
    }
    for (int i = 0; i < p.n; i++) states[ws.state[i]]++;
    // the reported residual is the natural-map residual of the returned x
    EXPECT_DOUBLE_EQ(st.residual,
                     BoxedLcpSolver::Residual(p.lcp, ws.x.data(), ws.w.data(), nullptr));
  }
  EXPECT_EQ(exact, total);
  // the problems exercise every state: clamped, separating / sliding one way, sliding the other
  EXPECT_GT(states[kLcpClamped], 100);
  EXPECT_GT(states[kLcpLower], 100);
  EXPECT_GT(states[kLcpUpper], 100);
}

TEST(BoxedLcpTest, CorrectGuessIsAcceptedWithOneSolve) {
  std::mt19937 rng(2);
  Workspace ws(40);
  for (int trial = 0; trial < 30; trial++) {
    RandomLcp p(1 + trial % 2, 1 + trial % 5, trial % 2, 0, &rng);
    BoxedOptions opt;
    BoxedStats st;
    ASSERT_TRUE(ws.Solve(p.lcp, opt, &st));
    const std::vector<double> x0(ws.x.begin(), ws.x.begin() + p.n);

    // the same problem again from its own classification: one reduced solve, same answer
    opt.use_guess = true;
    ASSERT_TRUE(ws.Solve(p.lcp, opt, &st));
    EXPECT_TRUE(st.guess_hit);
    EXPECT_EQ(st.pivots, 0);
    for (int i = 0; i < p.n; i++) EXPECT_NEAR(ws.x[i], x0[i], 1e-12 * (1 + std::fabs(x0[i])));
  }
}

TEST(BoxedLcpTest, LemkeAloneFindsTheClassification) {
  std::mt19937 rng(4);
  Workspace ws(60);
  Lemke lemke;
  lemke.Allocate(60);
  for (int trial = 0; trial < 60; trial++) {
    RandomLcp p(1 + trial % 3, 1 + trial % 4, trial % 2, trial % 2, &rng);
    int pivots;
    ASSERT_TRUE(lemke.Solve(p.lcp, 1000, ws.x.data(), ws.state.data(), &pivots)) << trial;
    // the exact solve of Lemke's classification is complementary
    ASSERT_TRUE(
        ws.solver.Reduced(p.lcp, ws.state.data(), 0, 1e-13, &ws.cod, ws.x.data(), ws.w.data()));
    EXPECT_LE(BoxedLcpSolver::Residual(p.lcp, ws.x.data(), ws.w.data(), nullptr), 1e-10)
        << "trial " << trial;
  }
}

// Lemke's method warm-started from a classification wrong in k rows (issue 14 §3): random stacks of
// six bodies on two contacts per level (36 rows on 36 degrees of freedom: A regular, so is the
// reduced system of any classification), the exact classification found from scratch, then k =
// 0..4 of its normals flipped (separating <-> clamped; their friction rows keep their states).
// From that basis (with the impulses of its exact solve) Lemke's answer is complementary and its
// pivots grow with k, not with the rows: from scratch every clamped row costs at least one pivot.
// A warm run can end on a ray (the covering vector is not positive), so half the runs, not all,
// must succeed. The boxed solver with that guess, with and without lemke_warm, is exact on every
// problem; the repair (a few principal pivots) runs first either way, so where the warm run did not
// run (the repair was exact) the two answers are the same, and where it ran it saves pivots
TEST(BoxedLcpTest, WarmLemkePivotsScaleWithTheWrongRows) {
  std::mt19937 rng(14);
  Workspace ws(40);
  Lemke lemke;
  lemke.Allocate(40);
  std::vector<signed char> exact(40), guess(40);
  std::vector<double> w(40);
  int cold_total = 0, runs = 0, sum[5] = {}, count[5] = {}, warm_hits = 0, warm_runs = 0;
  int boxed_pivots[3] = {}, failed_pivots[2] = {};  // lemke_warm 0, 1, 2; where 1's warm run ran
  std::vector<double> answer[3];
  for (int trial = 0; trial < 40; trial++) {
    RandomLcp p(6, 2, 0, 0, &rng);
    const int n = p.n;
    int cold;
    ASSERT_TRUE(lemke.Solve(p.lcp, 1000, ws.x.data(), ws.state.data(), &cold)) << trial;
    ASSERT_FALSE(lemke.warm_ok());
    std::copy(ws.state.begin(), ws.state.begin() + n, exact.begin());
    std::vector<int> normals;
    for (int i = 0; i < n; i++) {
      if (p.findex[i] < 0 && p.lo[i] == 0) normals.push_back(i);
    }
    for (int k = 0; k <= 4; k++) {
      std::copy(exact.begin(), exact.begin() + n, guess.begin());
      std::shuffle(normals.begin(), normals.end(), rng);
      for (int f = 0; f < k; f++) {
        signed char& s = guess[normals[f]];
        s = s == kLcpClamped ? kLcpLower : kLcpClamped;
      }
      std::copy(guess.begin(), guess.begin() + n, ws.state.begin());
      ASSERT_TRUE(
          ws.solver.Reduced(p.lcp, ws.state.data(), 0, 1e-13, &ws.cod, ws.x.data(), ws.w.data()));
      int warm;
      cold_total += cold;
      runs++;
      const bool ok = lemke.Solve(p.lcp, 1000, ws.x.data(), ws.state.data(), &warm, true);
      ASSERT_TRUE(lemke.warm_ok()) << "trial " << trial << " k " << k;  // a regular basis
      if (ok) {
        // Lemke's point is complementary
        for (int i = 0; i < n; i++) {
          w[i] = p.b[i];
          for (int j = 0; j < n; j++) w[i] += p.A[i + j * n] * ws.x[j];
        }
        EXPECT_LE(BoxedLcpSolver::Residual(p.lcp, ws.x.data(), w.data(), nullptr), 1e-10)
            << "trial " << trial << " k " << k;
        if (k == 0) {
          EXPECT_EQ(warm, 0) << trial;  // the exact basis is feasible as it is
        }
        sum[k] += warm;
        count[k]++;
      }
      // the boxed solver from the same guess, without and with lemke_warm
      BoxedStats st[3];
      for (int on = 0; on < 3; on++) {
        std::copy(guess.begin(), guess.begin() + n, ws.state.begin());
        BoxedOptions opt;
        opt.use_guess = true;
        opt.lemke_warm = on;
        opt.dantzig_first = false;  // (the repair and Lemke's runs measured here)
        EXPECT_TRUE(ws.Solve(p.lcp, opt, &st[on])) << "trial " << trial << " k " << k;
        EXPECT_LE(st[on].residual, opt.tol);
        answer[on].assign(ws.x.begin(), ws.x.begin() + n);
        boxed_pivots[on] += st[on].pivots;
      }
      EXPECT_EQ(st[0].warm_pivots, 0);
      EXPECT_FALSE(st[0].warm_hit);
      const bool ran = st[1].warm_pivots > 0 || st[1].warm_hit;
      if (!ran) {
        EXPECT_EQ(answer[0], answer[1]) << "trial " << trial << " k " << k;
        EXPECT_EQ(st[0].pivots, st[1].pivots) << "trial " << trial << " k " << k;
      } else {
        failed_pivots[0] += st[0].pivots;
        failed_pivots[1] += st[1].pivots;
      }
      warm_runs += ran;
      warm_hits += st[1].warm_hit;
    }
  }
  double mean[5];
  for (int k = 0; k <= 4; k++) {
    mean[k] = static_cast<double>(sum[k]) / std::max(count[k], 1);
    std::printf("k %d: warm Lemke %.1f pivots (%d of 40 runs ended on a solution)\n", k, mean[k],
                count[k]);
    EXPECT_GE(count[k], 20) << k;       // at least half (measured 24-35 of 40 for k >= 1)
    EXPECT_LE(mean[k], 15.0 * k) << k;  // (measured 13, 22, 25, 35)
  }
  std::printf(
      "Lemke from scratch %.1f pivots; the boxed solver %.1f, with lemke_warm 1 %.1f, 2 %.1f; "
      "1's warm run ran on %d of %d (exact on %d), there %d pivots without it, %d with it\n",
      static_cast<double>(cold_total) / runs, static_cast<double>(boxed_pivots[0]) / runs,
      static_cast<double>(boxed_pivots[1]) / runs, static_cast<double>(boxed_pivots[2]) / runs,
      warm_runs, runs, warm_hits, failed_pivots[0], failed_pivots[1]);
  EXPECT_LT(mean[1] * 4, static_cast<double>(cold_total) / runs);  // (measured 13 and 65)
  // (measured per solve: 82.3 without the warm run, 69.7 with it after the repair, 38.1 before it;
  // where it ran after the repair, on 99 of 200, exact on 76: 13579 pivots without, 11041 with)
  EXPECT_LT(boxed_pivots[2] * 3, cold_total * 2);
  EXPECT_LT(boxed_pivots[1], boxed_pivots[0]);
  EXPECT_LT(failed_pivots[1], failed_pivots[0]);
  EXPECT_GE(warm_hits * 2, warm_runs);
  EXPECT_GT(warm_runs, 0);
}

// constant bounds and a positive definite A: the solution is unique, so enumeration over all
// classifications finds exactly one, and it is ours
TEST(BoxedLcpTest, UniqueSolutionAgreesWithEnumeration) {
  std::mt19937 rng(9);
  Workspace ws(8);
  std::vector<double> xe(8), we(8);
  std::vector<signed char> s(8);
  for (int trial = 0; trial < 20; trial++) {
    // rebuild as 6 rows on 8 dofs: unilateral, box and bilateral rows with constant bounds
    RandomLcp q(2, 1, 0, 0, &rng);
    for (int i = 0; i < q.n; i++) {
      q.findex[i] = -1;
      q.lo[i] = i % 3 == 0 ? 0 : -0.3;
      q.hi[i] = i % 3 == 0 ? HUGE_VAL : 0.3;
    }
    q.lo[1] = -HUGE_VAL;
    q.hi[1] = HUGE_VAL;
    BoxedOptions opt;
    BoxedStats st;
    ASSERT_TRUE(ws.Solve(q.lcp, opt, &st));
    int found = 0;
    for (int code = 0; code < 729; code++) {
      int c = code;
      for (int i = 0; i < q.n; i++, c /= 3) s[i] = static_cast<signed char>(c % 3);
      bool valid = s[1] == kLcpClamped;
      for (int i = 0; i < q.n; i++) {
        valid = valid && !(s[i] == kLcpUpper && std::isinf(q.hi[i]));
      }
      if (!valid) continue;
      ASSERT_TRUE(ws.solver.Reduced(q.lcp, s.data(), 0, 1e-13, &ws.cod, xe.data(), we.data()));
      if (BoxedLcpSolver::Residual(q.lcp, xe.data(), we.data(), nullptr) > 1e-10) continue;
      found++;
      for (int i = 0; i < q.n; i++) EXPECT_NEAR(xe[i], ws.x[i], 1e-10) << "row " << i;
    }
    EXPECT_EQ(found, 1) << "trial " << trial;
  }
}

// x (p.n) is finite and inside its bounds, the friction bounds at mu times x's normals
void ExpectFiniteInsideBounds(const RandomLcp& p, const double* x) {
  for (int i = 0; i < p.n; i++) {
    ASSERT_TRUE(std::isfinite(x[i])) << "row " << i;
    const int f = p.findex[i];
    const double l = f >= 0 ? -p.mu[i] * std::max(x[f], 0.0) : p.lo[i];
    const double u = f >= 0 ? p.mu[i] * std::max(x[f], 0.0) : p.hi[i];
    EXPECT_GE(x[i], l - 1e-12) << "row " << i;
    EXPECT_LE(x[i], u + 1e-12) << "row " << i;
  }
}

// with pivoting disabled the Gauss-Seidel answer is kept: inside the bounds, finite, close
TEST(BoxedLcpTest, GaussSeidelFallbackKeepsAFeasibleAnswer) {
  std::mt19937 rng(6);
  Workspace ws(40);
  int inexact = 0;
  for (int trial = 0; trial < 20; trial++) {
    RandomLcp p(2, 4, 0, 1, &rng);
    BoxedOptions opt;
    opt.max_pivots = 1;
    opt.pgs_iter = 30;
    BoxedStats st;
    const bool ok = ws.Solve(p.lcp, opt, &st);
    inexact += !ok;
    EXPECT_TRUE(st.used_pgs || ok);
    ExpectFiniteInsideBounds(p, ws.x.data());
    if (!ok) {
      EXPECT_LT(st.residual, 1.0);
    }
  }
  EXPECT_GT(inexact, 0) << "the fallback was never needed: the test does not test it";
}

// pivoting disabled, Gauss-Seidel run to convergence: its classification is solved exactly and
// accepted (the pivoting loops cannot find it again from x = 0), and the answer is Gauss-Seidel's,
// not what the failed loops left in their scratch
TEST(BoxedLcpTest, ConvergedGaussSeidelClassificationIsSolvedExactly) {
  std::mt19937 rng(11);
  Workspace ws(40);
  int used = 0;
  for (int trial = 0; trial < 20; trial++) {
    RandomLcp p(1 + trial % 2, 2, 0, trial % 2, &rng);
    BoxedOptions opt;
    BoxedStats st;
    ASSERT_TRUE(ws.Solve(p.lcp, opt, &st));
    const std::vector<double> x0(ws.x.begin(), ws.x.begin() + p.n);
    opt.max_pivots = 1;
    opt.pgs_iter = 100000;
    const bool ok = ws.Solve(p.lcp, opt, &st);
    if (!st.used_pgs) continue;
    used++;
    EXPECT_TRUE(ok) << "trial " << trial << " residual " << st.residual;
    EXPECT_LE(st.residual, 1e-10) << "trial " << trial;
    for (int i = 0; i < p.n; i++) {
      EXPECT_NEAR(ws.x[i], x0[i], 1e-8 * (1 + std::fabs(x0[i]))) << "trial " << trial;
    }
  }
  EXPECT_GT(used, 5) << "the fallback was rarely needed: the test does not test it";
}

// a work budget caps the factorizations of one solve: problems that need more stop there with
// the best answer found (finite, inside the bounds) and say so; with the budget lifted the same
// problems are solved exactly
TEST(BoxedLcpTest, BudgetCapsTheWorkAndSaysSo) {
  std::mt19937 rng(6);
  Workspace ws(40);
  int capped = 0;
  for (int trial = 0; trial < 40; trial++) {
    RandomLcp p(3, 4, 0, 1, &rng);
    BoxedOptions opt;
    BoxedStats full;
    ASSERT_TRUE(ws.Solve(p.lcp, opt, &full));
    if (full.iterations <= 2) continue;  // the first solve (and its exact one) found it
    opt.budget = 1;
    BoxedStats st;
    const bool ok = ws.Solve(p.lcp, opt, &st);
    if (ok) continue;  // a cheaper path found it within the budget
    capped++;
    EXPECT_GE(st.iterations, opt.budget) << "trial " << trial;  // stopped by the budget
    // the budget, plus the exact solves of the Gauss-Seidel answer and of what is returned
    EXPECT_LE(st.iterations, opt.budget + 3) << "trial " << trial << ": " << full.iterations;
    ExpectFiniteInsideBounds(p, ws.x.data());
  }
  EXPECT_GT(capped, 0) << "no problem needed more than the budget: the test does not test it";
}

// Problems of at least sweep_rows rows whose guess fails (the next "step": b perturbed) start
// from Gauss-Seidel on the previous answer and an exact solve of its classification: the answer
// is exactly complementary, and the sweep itself finds it on some of them (two reduced solves:
// the guess and the polish)
TEST(BoxedLcpTest, LargeProblemsSweepFromThePreviousAnswer) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.02);
  Workspace ws(110);
  int swept = 0, polished = 0;
  for (int trial = 0; trial < 12; trial++) {
    RandomLcp p(4, 6 + trial % 3, 2, 1, &rng);
    ASSERT_GE(p.n, 60);
    BoxedOptions opt;
    BoxedStats st;
    ASSERT_TRUE(ws.Solve(p.lcp, opt, &st));
    const std::vector<double> prev(ws.x.begin(), ws.x.begin() + p.n);
    for (double& b : p.b) b += noise(rng);
    opt.use_guess = true;
    opt.sweep_rows = 60;
    opt.start = prev.data();
    const bool ok = ws.Solve(p.lcp, opt, &st);
    EXPECT_TRUE(ok) << "trial " << trial << " residual " << st.residual;
    EXPECT_LE(st.residual, 1e-10) << "trial " << trial;
    EXPECT_FALSE(st.spent);
    EXPECT_EQ(st.swept, !st.guess_hit) << "trial " << trial;
    swept += st.swept;
    polished += ok && st.swept && st.iterations <= 2;
  }
  std::printf("large problems: %d of 12 swept, %d solved by the sweep and its polish\n", swept,
              polished);
  EXPECT_GT(polished, 0) << "the sweep never found the answer: the test does not test it";
}

// A work budget in operations caps the solve of a large problem: stopped early, it says so
// (spent), has done about the budget's work (plus the last decomposition), and returns a
// finite answer inside the bounds; lifted, the same problem is solved exactly
TEST(BoxedLcpTest, WorkBudgetCapsLargeProblemsAndSaysSo) {
  std::mt19937 rng(8);
  Workspace ws(100);
  int capped = 0;
  for (int trial = 0; trial < 12; trial++) {
    RandomLcp p(4, 8, 0, 0, &rng);
    const double n = p.n;
    BoxedOptions opt;
    BoxedStats full;
    ASSERT_TRUE(ws.Solve(p.lcp, opt, &full));
    EXPECT_FALSE(full.spent);
    EXPECT_GT(full.work, 0);
    opt.max_work = 0.05 * full.work;
    BoxedStats st;
    const bool ok = ws.Solve(p.lcp, opt, &st);
    EXPECT_EQ(st.spent, !ok) << "trial " << trial;
    if (ok) continue;  // a cheaper path found it within the budget
    capped++;
    // the budget, the fallback's sweeps (at least a tenth of it) and a few decompositions
    // (the one that crossed the budget, the exact solves that follow a success, the last one)
    const double one = 2 * n * n * n + 8 * n * n;
    EXPECT_LE(st.work, 1.1 * opt.max_work + 4 * one) << "trial " << trial;
    EXPECT_LT(st.work, full.work) << "trial " << trial;
    ExpectFiniteInsideBounds(p, ws.x.data());
    EXPECT_DOUBLE_EQ(st.residual,
                     BoxedLcpSolver::Residual(p.lcp, ws.x.data(), ws.w.data(), nullptr));
  }
  EXPECT_GT(capped, 0) << "no problem needed more than the budget: the test does not test it";
}

// A 24-row island of the stacked_primitives pile (MuJoCo 3.17) with its guessed classification,
// on which single pivots flip the same rows in and out (coupled friction bounds make A no
// P-matrix): the cycle is detected and Lemke finds the classification, instead of the pivoting
// running on to its pivot limit (50 reduced solves before cycles were detected).
TEST(BoxedLcpTest, PivotingCycleEndsAtOnce) {
  std::ifstream in(std::string(CK_SOURCE_DIR) + "/tests/solvers/lcp/data/pivot_cycle.txt");
  ASSERT_TRUE(in.good());
  std::string line;
  while (in.peek() == '#') std::getline(in, line);
  int n = 0;
  in >> n;
  ASSERT_EQ(n, 24);
  std::vector<double> A(static_cast<size_t>(n) * n), b(n), lo(n), hi(n), mu(n);
  std::vector<int> findex(n);
  Workspace ws(n);
  for (int i = 0; i < n; i++) {
    std::string l, h;
    int guess;
    in >> b[i] >> l >> h >> findex[i] >> mu[i] >> guess;
    lo[i] = std::stod(l);  // "-inf" and "inf" are not read by >>
    hi[i] = std::stod(h);
    ws.state[i] = static_cast<signed char>(guess);
    for (int j = 0; j < n; j++) in >> A[i + static_cast<size_t>(j) * n];
  }
  ASSERT_TRUE(in.good());
  const DenseLcp lcp{n, n, A.data(), b.data(), lo.data(), hi.data(), findex.data(), mu.data()};
  BoxedOptions opt;
  opt.use_guess = true;
  opt.dantzig_first = false;
  BoxedStats st;
  std::vector<signed char> guess(ws.state.begin(), ws.state.begin() + n);
  ASSERT_TRUE(ws.Solve(lcp, opt, &st));
  EXPECT_FALSE(st.guess_hit);
  EXPECT_LE(st.residual, opt.tol);
  EXPECT_LE(st.iterations, 12);
  // no friction-loss row: Dantzig's start from the guess does not run, the same path
  opt.dantzig_first = true;
  std::copy(guess.begin(), guess.end(), ws.state.begin());
  ASSERT_TRUE(ws.Solve(lcp, opt, &st));
  EXPECT_LE(st.residual, opt.tol);
  EXPECT_LE(st.iterations, 12);
}

// max |a_i - b_i| and max |a_i| over the first n entries
double MaxDifference(const std::vector<double>& a, const std::vector<double>& b, int n) {
  double diff = 0;
  for (int i = 0; i < n; i++) diff = std::max(diff, std::fabs(a[i] - b[i]));
  return diff;
}
double MaxAbs(const std::vector<double>& a, int n) {
  double scale = 0;
  for (int i = 0; i < n; i++) scale = std::max(scale, std::fabs(a[i]));
  return scale;
}

// a captured island (tests/solvers/lcp/data): its problem, guess and previous impulses
struct CapturedLcp {
  int n = 0;
  double tol = 0;
  std::vector<double> A, b, lo, hi, mu, start;
  std::vector<int> findex;
  std::vector<signed char> guess;
  DenseLcp lcp;

  // false if the file cannot be read
  bool Read(const std::string& name) {
    std::ifstream in(std::string(CK_SOURCE_DIR) + "/tests/solvers/lcp/data/" + name);
    std::string line;
    while (in.peek() == '#') std::getline(in, line);
    in >> n >> tol;
    if (!in.good() || n <= 0) return false;
    A.resize(static_cast<size_t>(n) * n);
    for (auto* v : {&b, &lo, &hi, &mu, &start}) v->resize(n);
    findex.resize(n);
    guess.resize(n);
    for (int i = 0; i < n; i++) {
      std::string l, h, m, s;
      int g;
      in >> b[i] >> l >> h >> findex[i] >> m >> g >> s;
      lo[i] = std::stod(l);  // "-inf" and "inf" are not read by >>
      hi[i] = std::stod(h);
      mu[i] = std::stod(m);
      start[i] = std::stod(s);
      guess[i] = static_cast<signed char>(g);
      for (int j = 0; j < n; j++) in >> A[i + static_cast<size_t>(j) * n];
    }
    lcp = DenseLcp{n, n, A.data(), b.data(), lo.data(), hi.data(), findex.data(), mu.data(), true};
    return in.good();
  }

  // two exact solves (sweep_rows 60), with set(&options, on) for on = 0, 1, from the guess and
  // the previous impulses when guessed, else cold: their stats and answers
  template <class Set>
  void SolveTwice(bool guessed, Set set, BoxedStats st[2], std::vector<double> answer[2]) {
    Workspace ws(n);
    for (int on = 0; on < 2; on++) {
      BoxedOptions opt;
      if (guessed) {
        std::copy(guess.begin(), guess.end(), ws.state.begin());
        opt.use_guess = true;
        opt.start = start.data();
      }
      opt.tol = tol;
      opt.sweep_rows = 60;
      set(&opt, on);
      ASSERT_TRUE(ws.Solve(lcp, opt, &st[on])) << on;
      EXPECT_LE(st[on].residual, tol) << on;
      if (guessed) {
        EXPECT_FALSE(st[on].guess_hit) << on;
      }
      answer[on].assign(ws.x.begin(), ws.x.begin() + n);
    }
  }
};

// x (n) complementary for the captured island p row by row within tol (velocity units): inside
// its bounds, w = 0 inside them, of the bound's sign at one
void ExpectComplementary(const CapturedLcp& p, const double* answer, double tol) {
  std::vector<double> w(p.n);
  for (int i = 0; i < p.n; i++) {
    w[i] = p.b[i];
    for (int j = 0; j < p.n; j++) w[i] += p.A[i + static_cast<size_t>(j) * p.n] * answer[j];
  }
  for (int i = 0; i < p.n; i++) {
    const int f = p.findex[i];
    const double lo = f >= 0 ? -p.mu[i] * answer[f] : p.lo[i];
    const double hi = f >= 0 ? p.mu[i] * answer[f] : p.hi[i];
    const double x = answer[i], d = p.A[i + static_cast<size_t>(i) * p.n];
    EXPECT_GE((x - lo) * d, -tol) << i;
    EXPECT_GE((hi - x) * d, -tol) << i;
    const bool above = (x - lo) * d > tol, below = (hi - x) * d > tol;
    if (above && below) {
      EXPECT_NEAR(w[i], 0, tol) << i;
    } else if (below) {
      EXPECT_GE(w[i], -tol) << i;  // at the lower bound
    } else if (above) {
      EXPECT_LE(w[i], tol) << i;  // at the upper bound
    }
  }
}

// The A1's stance (issue 18, lcp15): a guess with a regular reduced system wrong in two
// friction-loss rows and a rolling row that stop slipping. Their flips make the reduced system
// nearly singular (impulses ~1e4 times the bounds), so the repair's block flips cycle and Lemke's
// method from scratch took 236 pivots (main's path, dantzig_first off). Dantzig's method from the
// guess's answer drives only the wrong rows, keeping every other row's classification, and
// reaches the same exact answer in a few events
TEST(BoxedLcpTest, QuadrupedStanceIsRepairedFromTheGuessAnswer) {
  CapturedLcp p;
  ASSERT_TRUE(p.Read("a1_stance.txt"));
  ASSERT_EQ(p.n, 36);
  BoxedStats st[2];
  std::vector<double> answer[2];
  ASSERT_NO_FATAL_FAILURE(p.SolveTwice(
      true, [](BoxedOptions* o, int on) { o->dantzig_first = on; }, st, answer));
  std::printf("pivots %d (%d solves) without Dantzig's start, %d (%d) with it\n", st[0].pivots,
              st[0].iterations, st[1].pivots, st[1].iterations);
  EXPECT_GT(st[0].pivots, 100);  // (measured 236: the repair's 75 flips, then Lemke's 161)
  EXPECT_LE(st[1].pivots, 20);   // (measured 5)
  EXPECT_LE(st[1].iterations, 20);
  // the same exact answer (the reduced system of the final classification is regular)
  EXPECT_LE(MaxDifference(answer[0], answer[1], p.n), 1e-9 * MaxAbs(answer[0], p.n));
}

// The A1 solved cold (no guess: ck-bench-step's Jacobian from a new handle): Dantzig's method from
// zero before the repair and Lemke's method, a fraction of their work, the same exact answer
TEST(BoxedLcpTest, ColdQuadrupedIslandStartsWithDantzig) {
  CapturedLcp p;
  ASSERT_TRUE(p.Read("a1_cold.txt"));
  ASSERT_EQ(p.n, 48);
  BoxedStats st[2];
  std::vector<double> answer[2];
  ASSERT_NO_FATAL_FAILURE(p.SolveTwice(
      false, [](BoxedOptions* o, int on) { o->dantzig_first = on; }, st, answer));
  std::printf("work %.3g (%d pivots) without Dantzig's start, %.3g (%d) with it\n", st[0].work,
              st[0].pivots, st[1].work, st[1].pivots);
  EXPECT_LT(st[1].work * 10, st[0].work);  // (measured 2.1e5 against 8.0e6)
  EXPECT_LE(MaxDifference(answer[0], answer[1], p.n), 1e-9 * MaxAbs(answer[0], p.n));
}

// A 69-row island of the stacked pile (issue 14 section 3, lcp16): its guess fails and so does
// the Gauss-Seidel start, whose classification clamps redundant contacts of MuJoCo 3.x patches
// (A_CC singular, so Lemke's warm basis from it was refused). Main's path then repaired and ran
// Lemke's method from scratch (264 pivots). With the clamped rows reduced to a regular block by a
// pivoted Cholesky of A_CC, Lemke's method from that classification finds an exact answer in a
// few pivots
TEST(BoxedLcpTest, PileIslandTakesLemkeFromTheReducedSweepClassification) {
  CapturedLcp p;
  ASSERT_TRUE(p.Read("pile_patch.txt"));
  ASSERT_EQ(p.n, 69);
  BoxedStats st[2];
  std::vector<double> answer[2];
  ASSERT_NO_FATAL_FAILURE(p.SolveTwice(
      true, [](BoxedOptions* o, int on) { o->lemke_sweep = on; }, st, answer));
  EXPECT_TRUE(st[0].swept);
  EXPECT_TRUE(st[1].swept);
  std::printf("pivots %d, work %.3g without the warm run; %d (warm %d), %.3g with it\n",
              st[0].pivots, st[0].work, st[1].pivots, st[1].warm_pivots, st[1].work);
  EXPECT_GT(st[0].pivots, 100);  // (measured 264: Lemke from scratch)
  EXPECT_TRUE(st[1].warm_hit);
  EXPECT_LE(st[1].pivots, 40);            // (measured 14)
  EXPECT_LT(st[1].work * 3, st[0].work);  // (measured 2.2e6 against 1.3e7)
}

// The same pile island (issue 14 section 3, lcp17): with qp_sweep, after the failed Gauss-Seidel
// start, the box QP of the friction bounds frozen at that iterate's normals (projected active-set
// steps on a pivoted Cholesky of the free rows), refrozen at each round's exact solve, finds the
// exact answer without Lemke's method; the same answer, a fraction of the work, and no allocation
// the captured island name solved twice from its guess with set(&options, on), on = 0, 1
// (CapturedLcp::SolveTwice)
template <class Set>
void ReadAndSolveTwice(const char* name, Set set, CapturedLcp* p, BoxedStats st[2],
                       std::vector<double> answer[2]) {
  ASSERT_TRUE(p->Read(name));
  ASSERT_NO_FATAL_FAILURE(p->SolveTwice(true, set, st, answer));
}

// the captured island name solved without and with qp_sweep
void SolveWithoutAndWithQp(const char* name, CapturedLcp* p, BoxedStats st[2],
                           std::vector<double> answer[2]) {
  ASSERT_NO_FATAL_FAILURE(ReadAndSolveTwice(
      name, [](BoxedOptions* o, int on) { o->qp_sweep = on; }, p, st, answer));
  std::printf("work %.3g (%d pivots) without the QP, %.3g (%d pivots, %d rounds) with it\n",
              st[0].work, st[0].pivots, st[1].work, st[1].pivots, st[1].frozen_rounds);
}

TEST(BoxedLcpTest, PileIslandIsSolvedByTheBoxQp) {
  CapturedLcp p;
  BoxedStats st[2];
  std::vector<double> answer[2];
  ASSERT_NO_FATAL_FAILURE(SolveWithoutAndWithQp("pile_patch.txt", &p, st, answer));
  EXPECT_FALSE(st[0].qp_hit);
  EXPECT_TRUE(st[1].qp_hit);
  EXPECT_LT(st[1].work * 3, st[0].work);  // (measured 1.75e6 against 1.32e7)
  EXPECT_LE(MaxDifference(answer[0], answer[1], p.n), 1e-9 * MaxAbs(answer[0], p.n));
  ExpectComplementary(p, answer[1].data(), 1e-9);
  if (!AllocationCounter::Available()) return;
  Workspace ws(p.n);
  BoxedOptions opt;
  std::copy(p.guess.begin(), p.guess.end(), ws.state.begin());
  opt.use_guess = true;
  opt.start = p.start.data();
  opt.tol = p.tol;
  opt.sweep_rows = 60;
  opt.qp_sweep = true;
  BoxedStats s;
  AllocationCounter counter;
  counter.Start();
  ws.Solve(p.lcp, opt, &s);
  EXPECT_EQ(counter.Stop(), 0);
  EXPECT_TRUE(s.qp_hit);
}

// An island of the pile on which the box QP runs out of its work (kQpWork factorizations of the
// island) before an exact answer: the solve falls back to Lemke's method from scratch and ends
// with the same exact answer as without the QP
TEST(BoxedLcpTest, PileIslandFallsBackWhenTheBoxQpFails) {
  CapturedLcp p;
  BoxedStats st[2];
  std::vector<double> answer[2];
  ASSERT_NO_FATAL_FAILURE(SolveWithoutAndWithQp("pile_qp_fallback.txt", &p, st, answer));
  ASSERT_EQ(p.n, 63);
  EXPECT_TRUE(st[1].swept);
  EXPECT_GE(st[1].frozen_rounds, 1);  // the QP ran
  EXPECT_FALSE(st[1].qp_hit);         // and failed
  EXPECT_GT(st[1].pivots, 50);        // Lemke's method followed (measured 180)
  EXPECT_LE(MaxDifference(answer[0], answer[1], p.n), 1e-9 * MaxAbs(answer[0], p.n));
}

// The pile island's whole path (its guess, the Gauss-Seidel start, the repair's LU solves and
// Lemke's method from scratch: decompositions, pivots, the basis inverse's refactorizations) with
// the AVX2 clones of those kernels and without them (Avx2Kernels): the same bits
TEST(BoxedLcpTest, PileIslandTakesTheSameBitsWithTheAvx2Kernels) {
  CapturedLcp p;
  BoxedStats st[2];
  std::vector<double> answer[2];
  ASSERT_NO_FATAL_FAILURE(ReadAndSolveTwice(
      "pile_patch.txt", [](BoxedOptions*, int on) { Avx2Kernels::allowed_ = on; }, &p, st, answer));
  Avx2Kernels::allowed_ = true;
  EXPECT_GT(st[0].pivots, 100);  // Lemke's method ran (measured 264)
  EXPECT_EQ(st[0].pivots, st[1].pivots);
  EXPECT_EQ(st[0].iterations, st[1].iterations);
  EXPECT_EQ(st[0].work, st[1].work);
  for (int i = 0; i < p.n; i++) EXPECT_EQ(answer[0][i], answer[1][i]) << i;
}

// A large island's answer is not stabilized (stabilize_rows): the pile island's answer has rows
// tied at a bound, and the larger system with them clamped is not exact (its minimum-norm solution
// leaves the bounds), so the stabilization costs one decomposition and changes nothing
TEST(BoxedLcpTest, LargeIslandAnswerSkipsTheStabilization) {
  CapturedLcp p;
  BoxedStats st[2];
  std::vector<double> answer[2];
  ASSERT_NO_FATAL_FAILURE(ReadAndSolveTwice(
      "pile_ties.txt", [](BoxedOptions* o, int on) { o->stabilize_rows = on ? 60 : INT_MAX; }, &p,
      st, answer));
  std::printf("solves %d with the stabilization, %d without\n", st[0].iterations, st[1].iterations);
  EXPECT_EQ(st[0].iterations, st[1].iterations + 1);
  EXPECT_EQ(st[0].pivots, st[1].pivots);
  for (int i = 0; i < p.n; i++) EXPECT_EQ(answer[0][i], answer[1][i]) << i;
  // rows at a bound (of the answer's own bounds) with w = 0: the ties
  int ties = 0;
  for (int i = 0; i < p.n; i++) {
    const int f = p.findex[i];
    const double x = answer[1][i];
    const double lo = f >= 0 ? -p.mu[i] * answer[1][f] : p.lo[i];
    const double hi = f >= 0 ? p.mu[i] * answer[1][f] : p.hi[i];
    double w = p.b[i];
    for (int j = 0; j < p.n; j++) w += p.A[i + static_cast<size_t>(j) * p.n] * answer[1][j];
    ties += (x == lo || x == hi) && !(lo == hi) && std::fabs(w) <= p.tol;
  }
  EXPECT_GE(ties, 1);  // (measured 2)
}

TEST(BoxedLcpTest, SolveDoesNotAllocate) {
  if (!AllocationCounter::Available()) GTEST_SKIP() << "malloc is owned by the sanitizer";
  std::mt19937 rng(8);
  Workspace ws(60);
  RandomLcp p(3, 4, 1, 1, &rng);
  BoxedOptions opt;
  BoxedStats st;
  AllocationCounter counter;
  counter.Start();
  ws.Solve(p.lcp, opt, &st);
  opt.use_guess = true;
  ws.Solve(p.lcp, opt, &st);
  EXPECT_EQ(counter.Stop(), 0);
}

// Lemke's method alone from scratch on the captured pile islands (issue 14 section 3, pile20):
// its basis gathers up to a hundred structural columns whose block S_R is nearly singular (a
// patch's redundant contacts), and G, the inverse of S_R, is updated by every pivot (bordered, a
// column replaced, a row and column removed, a row replaced) instead of the whole basis inverse.
// Lemke's own answer is complementary row by row (the exact solve of its classification is what
// the boxed solver's other paths find too: PileIslandIsSolvedByTheBoxQp), without allocation
TEST(BoxedLcpTest, LemkeWithTheUpdatedBlockInverseSolvesPileIslands) {
  for (const char* name : {"pile_patch.txt", "pile_qp_fallback.txt", "pile_ties.txt"}) {
    CapturedLcp p;
    ASSERT_TRUE(p.Read(name)) << name;
    Workspace ws(p.n);
    Lemke lemke;
    lemke.Allocate(p.n);
    int pivots = 0;
    AllocationCounter counter;
    counter.Start();
    const bool ok = lemke.Solve(p.lcp, 1000, ws.x.data(), ws.state.data(), &pivots);
    const auto allocations = counter.Stop();
    ASSERT_TRUE(ok) << name;
    std::printf("%s: %d pivots\n", name, pivots);
    EXPECT_GT(pivots, 50) << name;  // (measured 120, 105, 113)
    if (AllocationCounter::Available()) {
      EXPECT_EQ(allocations, 0) << name;
    }
    ExpectComplementary(p, ws.x.data(), 1e-9);
  }
}

// Where Lemke's run stops short (here at 100 of the 120 pivots it takes on pile_patch's island)
// the solve goes on with Dantzig's method with frozen friction bounds (after the guess, the
// Gauss-Seidel start and the repair have failed, as they do on this island): an exact answer,
// complementary row by row (SolveTwice checks the residual)
TEST(BoxedLcpTest, PileIslandFallsBackWhenLemkeStops) {
  CapturedLcp p;
  BoxedStats st[2];
  std::vector<double> answer[2];
  ASSERT_NO_FATAL_FAILURE(ReadAndSolveTwice(
      "pile_patch.txt", [](BoxedOptions* o, int on) { o->max_pivots = on ? 100 : 1000; }, &p, st,
      answer));
  std::printf("frozen rounds %d with Lemke's whole run, %d with it stopped\n", st[0].frozen_rounds,
              st[1].frozen_rounds);
  EXPECT_EQ(st[0].frozen_rounds, 0);  // Lemke's answer was exact
  EXPECT_GE(st[1].frozen_rounds, 1);  // it stopped: the frozen rounds found the answer
  EXPECT_FALSE(st[1].used_pgs);
  ExpectComplementary(p, answer[1].data(), 1e-9);
}

// An island of the stacked pile's long inexact stretches (3.17, h = 0.00207; docs/solvers.md,
// pile22b) solved with lcp's options and default budget: its guess, from an inexact answer, only
// seeds the Gauss-Seidel start, which fails, and the repair and Lemke's method need about 20
// max_work. With the work credit of 10 max_work Lemke's run stops at its budget and the answer
// is inexact, reported as spent; with LcpSolver::kWorkCredit it is exact, complementary row by row
TEST(BoxedLcpTest, PileStretchIslandIsExactWithinTheWorkCredit) {
  CapturedLcp p;
  ASSERT_TRUE(p.Read("pile_stretch.txt"));
  ckSettings s;
  ck_defaultSettings(&s);
  Workspace ws(p.n);
  for (const double credit : {10.0, LcpSolver::kWorkCredit}) {
    std::copy(p.guess.begin(), p.guess.end(), ws.state.begin());
    BoxedOptions opt;  // as LcpSolver::SolveIsland sets them
    opt.tol = p.tol;
    opt.max_pivots = s.lcp.max_pivots;
    opt.budget = s.lcp.max_solves;
    opt.pgs_iter = s.lcp.pgs_iter;
    opt.max_work = (1 + credit) * 1e6 * s.lcp.max_work;  // a full credit
    opt.sweep_rows = opt.stabilize_rows = s.lcp.sweep_rows;
    opt.factor_inexact = false;
    opt.use_guess = true;
    opt.check_guess = false;  // the previous answer was inexact
    opt.start = p.start.data();
    BoxedStats st;
    const bool exact = ws.Solve(p.lcp, opt, &st);
    std::printf("credit %g: exact %d, work %.3g, solves %d, pivots %d, residual %.3g\n", credit,
                exact, st.work, st.iterations, st.pivots, st.residual);
    EXPECT_TRUE(st.swept);
    if (credit == 10) {
      EXPECT_FALSE(exact);
      EXPECT_TRUE(st.spent);  // and says why
    } else {
      EXPECT_TRUE(exact);
      EXPECT_FALSE(st.spent);
      EXPECT_LE(st.residual, opt.tol);
      ExpectComplementary(p, ws.x.data(), 1e-9);
    }
  }
}

// the problem number trial of the sequence of RandomLcp problems from seed (sizes cycling with
// trial), as a scan of 4,000 of them found it
RandomLcp ScannedProblem(unsigned seed, int trial) {
  std::mt19937 rng(seed);
  for (int t = 0;; t++) {
    RandomLcp p(1 + t % 4, 1 + t % 7, t % 3, t % 2, &rng);
    if (t == trial) return p;
  }
}

// Problems that only the frozen-friction rounds solve (Lemke's classification and the repair
// pivots fail), found by scanning the RandomLcp sequences at a moderate max_pivots. max_pivots is
// documented up to 1e9, where 4 * max_pivots overflowed int and these rounds were skipped
// (Gauss-Seidel ran instead, and ended inexact on some): a huge limit must solve as a moderate one.
TEST(BoxedLcpTest, HugeMaxPivotsKeepsTheFrozenFrictionRounds) {
  Workspace ws(90);  // 3 * 7 * 4 + 2 + 1 rows at most
  int found = 0;
  for (unsigned seed = 0; seed < 40 && found < 4; seed++) {
    for (int trial = 0; trial < 100 && found < 4; trial++) {
      RandomLcp p = ScannedProblem(seed, trial);
      ASSERT_LE(p.n, ws.solver.capacity());
      BoxedOptions opt;
      opt.max_pivots = 1000;
      BoxedStats st;
      if (!ws.Solve(p.lcp, opt, &st) || st.frozen_rounds == 0 || st.used_pgs) {
        continue;
      }
      found++;
      const std::vector<double> x0(ws.x.begin(), ws.x.begin() + p.n);
      const int rounds = st.frozen_rounds;
      const std::string what = "seed " + std::to_string(seed) + " trial " + std::to_string(trial);

      opt.max_pivots = 1000000000;
      const bool ok = ws.Solve(p.lcp, opt, &st);
      EXPECT_TRUE(ok) << what << " residual " << st.residual;
      EXPECT_EQ(st.frozen_rounds, rounds) << what;
      EXPECT_FALSE(st.used_pgs) << what;
      EXPECT_LE(BoxedLcpSolver::Residual(p.lcp, ws.x.data(), ws.w.data(), nullptr), opt.tol);
      for (int i = 0; i < p.n; i++) EXPECT_EQ(ws.x[i], x0[i]) << what << " row " << i;
    }
  }
  EXPECT_GT(found, 0) << "no scanned problem needs the frozen-friction rounds";
}

// An inexact answer whose factorization is deferred (factor_inexact = false, the velocity
// solve of lcp: its island is factored only when a tangent asks) is the same answer, costs one
// decomposition less, and its classification factored afterwards is the decomposition the eager
// solve left in cod
TEST(BoxedLcpTest, InexactAnswerIsFactoredOnRequest) {
  std::mt19937 rng(8);
  Workspace eager(100), lazy(100), later(100);
  int capped = 0;
  for (int trial = 0; trial < 12; trial++) {
    RandomLcp p(4, 8, 0, 0, &rng);
    BoxedOptions opt;
    BoxedStats full;
    ASSERT_TRUE(eager.Solve(p.lcp, opt, &full));
    opt.max_work = 0.05 * full.work;
    BoxedStats st1, st2;
    if (eager.Solve(p.lcp, opt, &st1)) continue;  // a cheaper path found it
    capped++;
    EXPECT_TRUE(st1.factored);
    opt.factor_inexact = false;
    EXPECT_FALSE(lazy.Solve(p.lcp, opt, &st2));
    EXPECT_FALSE(st2.factored) << "trial " << trial;
    EXPECT_TRUE(st2.spent);
    const int n = p.n;
    for (int i = 0; i < n; i++) {
      ASSERT_EQ(lazy.x[i], eager.x[i]) << "trial " << trial << " row " << i;
      ASSERT_EQ(lazy.state[i], eager.state[i]) << "trial " << trial << " row " << i;
    }
    EXPECT_LT(st2.work, st1.work) << "trial " << trial;
    // factored on request: the same decomposition (rank and pseudo-inverse)
    ASSERT_TRUE(later.solver.Reduced(p.lcp, lazy.state.data(), 0, opt.rtol, &later.cod,
                                     later.x.data(), later.w.data()));
    ASSERT_EQ(later.cod.n(), eager.cod.n());
    EXPECT_EQ(later.cod.rank(), eager.cod.rank());
    std::vector<double> c(later.cod.n()), y1(c.size()), y2(c.size());
    for (double& v : c) v = std::uniform_real_distribution<double>(-1, 1)(rng);
    eager.cod.Solve(c.data(), y1.data());
    later.cod.Solve(c.data(), y2.data());
    for (size_t a = 0; a < c.size(); a++) EXPECT_EQ(y1[a], y2[a]) << "trial " << trial;
  }
  EXPECT_GT(capped, 0) << "no problem needed more than the budget: the test does not test it";
}

// A large problem whose guess is not to be checked (check_guess = false: lcp's guess from an
// answer that was not exact) goes straight to the Gauss-Seidel start from the previous answer
// and still ends exact; small problems check their guess regardless
TEST(BoxedLcpTest, UncheckedGuessStartsFromGaussSeidel) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 0.02);
  Workspace ws(110);
  for (int trial = 0; trial < 6; trial++) {
    RandomLcp p(4, 6 + trial % 3, 2, 1, &rng);
    BoxedOptions opt;
    BoxedStats st;
    ASSERT_TRUE(ws.Solve(p.lcp, opt, &st));
    const std::vector<double> prev(ws.x.begin(), ws.x.begin() + p.n);
    const std::vector<signed char> state(ws.state.begin(), ws.state.begin() + p.n);
    for (double& b : p.b) b += 1e-3 * noise(rng);
    opt.use_guess = true;
    opt.start = prev.data();
    opt.check_guess = false;
    opt.sweep_rows = 60;
    EXPECT_TRUE(ws.Solve(p.lcp, opt, &st)) << "trial " << trial << " residual " << st.residual;
    EXPECT_FALSE(st.guess_hit);
    EXPECT_TRUE(st.swept);
    // below sweep_rows the guess is checked
    std::copy(state.begin(), state.end(), ws.state.begin());
    opt.sweep_rows = p.n + 1;
    EXPECT_TRUE(ws.Solve(p.lcp, opt, &st));
    EXPECT_FALSE(st.swept);
  }
}

// A plank resting on 61 supports along x in [-0.5, 0.5] (rows: normal forces, A = J J' of rank 2
// with J_i = (1, x_i): the weight and the moment about the centre), loaded at x = 0.4: the
// minimum-norm forces of "every support clamped" are linear in x and negative at the far end,
// though positive solutions exist (the previous step's). That guess, as a resting degenerate
// island's (MuJoCo's cloth), is accepted with one decomposition, nearest to the start, without
// the Gauss-Seidel start and its second decomposition (before: never, at every resting step)
TEST(BoxedLcpTest, DegenerateGuessIsAcceptedNearestToTheStart) {
  const int n = 61;
  std::vector<double> x(n), A(n * n), b(n), lo(n, 0), hi(n, HUGE_VAL), mu(n, 0);
  std::vector<int> findex(n, -1);
  for (int i = 0; i < n; i++) x[i] = -0.5 + i / 60.0;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) A[i + j * n] = 1 + x[i] * x[j];
  }
  // w = J (J' f - (W, W c)): at rest the forces carry the weight W at c
  const double W = 1, c = 0.4;
  for (int i = 0; i < n; i++) b[i] = -W - x[i] * W * c;
  const DenseLcp lcp{n,         n,   A.data(), b.data(), lo.data(), hi.data(), findex.data(),
                     mu.data(), true};
  // the start: 1e-3 W on every support, the rest on the supports at 0.3 and 0.5
  std::vector<double> f0(n, 1e-3 * W);
  double sum = 0, moment = 0;
  for (int i = 0; i < n; i++) sum += f0[i], moment += f0[i] * x[i];
  const int p = 48, q = 60;  // x = 0.3, 0.5
  const double fq = ((W * c - moment) - x[p] * (W - sum)) / (x[q] - x[p]);
  f0[p] += W - sum - fq;
  f0[q] += fq;
  ASSERT_GT(std::min(f0[p], f0[q]), 0);

  Workspace ws(n);
  BoxedOptions opt;
  opt.use_guess = true;
  opt.sweep_rows = 60;
  opt.start = f0.data();
  std::fill(ws.state.begin(), ws.state.end(), kLcpClamped);
  BoxedStats st;
  ASSERT_TRUE(ws.Solve(lcp, opt, &st)) << "residual " << st.residual;
  EXPECT_TRUE(st.guess_hit);
  EXPECT_FALSE(st.swept);
  EXPECT_EQ(st.iterations, 1);  // one decomposition
  EXPECT_LE(st.residual, 1e-10);
  double least = HUGE_VAL, total = 0, arm = 0;
  for (int i = 0; i < n; i++) {
    least = std::min(least, ws.x[i]);
    total += ws.x[i];
    arm += ws.x[i] * x[i];
  }
  EXPECT_GE(least, -1e-12);
  EXPECT_NEAR(total, W, 1e-10);
  EXPECT_NEAR(arm, W * c, 1e-10);
  // (the minimum-norm forces of the same classification leave the bounds: that check fails)
  ASSERT_TRUE(
      ws.solver.Reduced(lcp, ws.state.data(), 0, opt.rtol, &ws.cod, ws.x.data(), ws.w.data()));
  EXPECT_LT(*std::min_element(ws.x.begin(), ws.x.begin() + n), -0.01);
}

// A box standing on four condim-6 contacts (a quadruped's stance: normal, two sliding, torsional
// and two rolling rows each, the A1's feet's friction 0.8 0.02 0.01; 24 rows, A = J W J' of rank
// 6), its load off-centre: the minimum-norm impulses of the previous classification (every row
// clamped) carry the moment on the rolling rows, beyond their bounds, while the previous step's
// impulses (on the normals only) plus the nearest correction for the next step's load are inside
// them. Below sweep_rows that guess is now accepted with its one decomposition, nearest to the
// start, without a pivot (before: Lemke's pivots at about a quarter of the A1's stance steps)
TEST(BoxedLcpTest, RankDeficientSmallIslandTakesTheNearestExactGuess) {
  const int n = 24, ndof = 6;
  const double a = 0.1, depth = 0.1, mus[5] = {0.8, 0.8, 0.02, 0.01, 0.01};
  const double winv[ndof] = {1, 1, 1, 150, 150, 150};  // 1 kg, 0.2 m cube
  std::vector<double> J(n * ndof, 0.0), A(n * n, 0.0), b(n, 0.0), lo(n, 0), hi(n, HUGE_VAL);
  std::vector<double> mu(n, 0);
  std::vector<int> findex(n, -1);
  for (int k = 0; k < 4; k++) {
    const double r[3] = {(k & 1 ? 1 : -1) * a, (k & 2 ? 1 : -1) * a, -depth};  // corner
    double* jr = J.data() + 6 * k * ndof;
    // rows: normal z, friction x and y at the corner (angular part r x axis), torsion, rolling
    const double axes[3][3] = {{0, 0, 1}, {1, 0, 0}, {0, 1, 0}};
    for (int t = 0; t < 3; t++, jr += ndof) {
      const double* d = axes[t];
      for (int c = 0; c < 3; c++) jr[c] = d[c];
      jr[3] = r[1] * d[2] - r[2] * d[1];
      jr[4] = r[2] * d[0] - r[0] * d[2];
      jr[5] = r[0] * d[1] - r[1] * d[0];
    }
    jr[5] = 1, jr[ndof + 3] = 1, jr[2 * ndof + 4] = 1;  // torsion about z, rolling about x, y
    for (int t = 1; t < 6; t++) {
      findex[6 * k + t] = 6 * k;
      mu[6 * k + t] = mus[t - 1];
      lo[6 * k + t] = -HUGE_VAL;
    }
  }
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) {
      for (int d = 0; d < ndof; d++) A[i + j * n] += J[i * ndof + d] * winv[d] * J[j * ndof + d];
    }
  }
  // the previous impulses: the weight W at (0.03, 0.02) on the normals (bilinear shares); the next
  // step's load F: that wrench J' f0 with 1% more weight and a small push
  const double W = 1, cx = 0.03, cy = 0.02;
  std::vector<double> f0(n, 0.0), F(ndof, 0.0);
  for (int k = 0; k < 4; k++) {
    f0[6 * k] =
        W * (0.5 + (k & 1 ? 1 : -1) * cx / (2 * a)) * (0.5 + (k & 2 ? 1 : -1) * cy / (2 * a));
  }
  for (int i = 0; i < n; i++) {
    for (int d = 0; d < ndof; d++) F[d] += J[i * ndof + d] * f0[i];
  }
  F[0] += 1e-3 * W, F[1] += 5e-4 * W, F[2] += 1e-2 * W;
  // w = J W (J' f - F): at rest the impulses carry F
  for (int i = 0; i < n; i++) {
    for (int d = 0; d < ndof; d++) b[i] -= J[i * ndof + d] * winv[d] * F[d];
  }
  const DenseLcp lcp{n,         n,   A.data(), b.data(), lo.data(), hi.data(), findex.data(),
                     mu.data(), true};

  Workspace ws(n);
  BoxedOptions opt;  // (sweep_rows: INT_MAX, as lcp's 60 for these 24 rows)
  opt.use_guess = true;
  opt.start = f0.data();
  std::fill(ws.state.begin(), ws.state.end(), kLcpClamped);
  BoxedStats st;
  ASSERT_TRUE(ws.Solve(lcp, opt, &st)) << "residual " << st.residual;
  EXPECT_TRUE(st.guess_hit);
  EXPECT_FALSE(st.swept);
  EXPECT_EQ(st.pivots, 0);
  EXPECT_EQ(st.iterations, 1);  // one decomposition
  EXPECT_LE(st.residual, opt.tol);
  // the impulses carry the load and stay within their (coupled) bounds
  for (int d = 0; d < ndof; d++) {
    double acc = 0;
    for (int i = 0; i < n; i++) acc += J[i * ndof + d] * ws.x[i];
    EXPECT_NEAR(acc, F[d], 1e-10) << "component " << d;
  }
  for (int i = 0; i < n; i++) {
    const double bound = findex[i] < 0 ? HUGE_VAL : mu[i] * ws.x[findex[i]];
    EXPECT_GE(findex[i] < 0 ? ws.x[i] : bound - std::fabs(ws.x[i]), -1e-12) << "row " << i;
  }
  // (the minimum-norm impulses of the guess leave the rolling rows' bounds: that check fails)
  std::fill(ws.state.begin(), ws.state.end(), kLcpClamped);
  ASSERT_TRUE(
      ws.solver.Reduced(lcp, ws.state.data(), 0, opt.rtol, &ws.cod, ws.x.data(), ws.w.data()));
  EXPECT_GT(BoxedLcpSolver::Residual(lcp, ws.x.data(), ws.w.data(), nullptr), 1e-6);
}

// Gauss-Seidel reads row i of a symmetric A as its column (contiguous): the same sweeps, to the
// last bit, as the strided row of the general case
TEST(BoxedLcpTest, SymmetricRowsGiveTheSameSweeps) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 6; trial++) {
    RandomLcp p(3, 4 + trial % 3, 1, 1, &rng);
    const int n = p.n;
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < i; j++) p.A[j + i * n] = p.A[i + j * n];
    }
    DenseLcp sym = p.lcp;
    sym.symmetric = true;
    std::vector<double> x1(n, 0.0), x2(n, 0.0);
    const int it1 = BoxedLcpSolver::Pgs(p.lcp, 30, 0, x1.data());
    const int it2 = BoxedLcpSolver::Pgs(sym, 30, 0, x2.data());
    EXPECT_EQ(it1, it2);
    for (int i = 0; i < n; i++) ASSERT_EQ(x1[i], x2[i]) << "trial " << trial << " row " << i;
    double moved = 0;
    for (int i = 0; i < n; i++) moved = std::max(moved, std::fabs(x1[i]));
    EXPECT_GT(moved, 0) << "trial " << trial;
  }
}

// A large problem held together by bilateral rows (spins and joints between the bodies) solved
// through the Schur complement of those rows: the reduced problem has only the other rows, its
// answer expanded to every row is exactly complementary on the whole problem (w_E = 0 on the
// bilateral rows to rounding), w_R is the reduced problem's, and the solve is as exact as the
// direct one
TEST(BoxedLcpTest, SchurComplementOfBilateralRowsIsExact) {
  std::mt19937 rng(21);
  const int nmax = 3 * 5 * 5 + 10 + 1 + 8;
  Workspace direct(nmax), reduced(nmax);
  BilateralSchur schur;
  schur.Allocate(nmax);
  std::vector<double> x(nmax), w(nmax);
  int exact_direct = 0, exact_reduced = 0;
  for (int trial = 0; trial < 12; trial++) {
    RandomLcp p(5, 3 + trial % 3, 10, 1, &rng, 4);
    ASSERT_GE(p.n, 60);
    // A exactly symmetric, as the lcp solver builds it
    for (int j = 0; j < p.n; j++) {
      for (int i = j + 1; i < p.n; i++) p.A[j + i * p.n] = p.A[i + j * p.n];
    }
    p.lcp.symmetric = true;
    BoxedOptions opt;
    BoxedStats st;
    exact_direct += direct.Solve(p.lcp, opt, &st);

    ASSERT_TRUE(schur.Reduce(p.lcp, 8, 1e-12)) << "trial " << trial;
    const int m = schur.m();
    EXPECT_EQ(m, p.n - 18) << "the 10 spins and 4 joints' 8 rows are eliminated";
    const bool ok = reduced.Solve(schur.reduced(), opt, &st);
    EXPECT_TRUE(ok) << "trial " << trial << " residual " << st.residual;
    schur.Expand(reduced.x.data(), x.data(), w.data());
    const double res = BoxedLcpSolver::Residual(p.lcp, x.data(), w.data(), nullptr);
    EXPECT_LE(res, 1e-10) << "trial " << trial;
    exact_reduced += ok && res <= 1e-10;
    double wmax = 1;
    for (int i = 0; i < p.n; i++) wmax = std::max(wmax, std::fabs(w[i]));
    for (int a = 0; a < m; a++) {
      const int i = schur.rows()[a];
      EXPECT_EQ(x[i], reduced.x[a]);
      EXPECT_NEAR(w[i], reduced.w[a], 1e-10 * wmax) << "trial " << trial << " row " << i;
    }
    for (int i = 0; i < p.n; i++) {
      if (std::isinf(p.lo[i]) && std::isinf(p.hi[i]) && p.findex[i] < 0) {
        EXPECT_NEAR(w[i], 0, 1e-12 * wmax) << "bilateral row " << i;
      }
    }
  }
  EXPECT_EQ(exact_direct, 12);
  EXPECT_EQ(exact_reduced, 12);
}

// The Schur complement is refused when its rows are too few, or when they are redundant (a
// bilateral row twice: A_EE singular), so that the caller solves the problem directly
TEST(BoxedLcpTest, SchurComplementRefusesFewOrRedundantBilateralRows) {
  std::mt19937 rng(22);
  BilateralSchur schur;
  schur.Allocate(120);
  RandomLcp p(5, 3, 10, 1, &rng, 4);
  p.lcp.symmetric = true;
  EXPECT_TRUE(schur.Reduce(p.lcp, 18, 1e-12));
  EXPECT_FALSE(schur.Reduce(p.lcp, 19, 1e-12));
  // spins 10 and 11 repeat spins 0 and 1
  RandomLcp q(5, 3, 12, 1, &rng, 4);
  q.lcp.symmetric = true;
  EXPECT_FALSE(schur.Reduce(q.lcp, 8, 1e-12));
  // not symmetric: refused
  p.lcp.symmetric = false;
  EXPECT_FALSE(schur.Reduce(p.lcp, 8, 1e-12));
}

}  // namespace
}  // namespace contactkit::test
