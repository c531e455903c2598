// Copyright 2026 The contactkit developers.
//
// The interior-point solver's algebra against finite differences: the reduced Newton direction
// is the Newton direction of the full residual (dynamics, row definitions, equality rows and the
// cone complementarity), and ForceTangent is the derivative of the central-path force at
// kappa_grad along perturbations of v_free, the gaps, the Jacobian and the mass matrix.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "solvers/ipm/ipm_solver.h"
#include "support/fixture.h"
#include "tests/solvers/ipm/ipm_support.h"

namespace contactkit::test {
namespace {

struct Scene {
  std::string name;
  std::string path;
  int steps;        // MuJoCo steps before the problem is taken
  const char* key;  // keyframe (null: default pose)
};

std::vector<Scene> Scenes() {
  return {{"box_on_plane", BundledModel("box_on_plane.xml"), 300, nullptr},
          {"box_sliding", BundledModel("box_sliding.xml"), 30, "slide"},
          {"sphere_spinning", BundledModel("sphere_spinning.xml"), 20, "spin"},
          {"sphere_rolling", BundledModel("sphere_rolling.xml"), 20, "roll"},
          {"humanoid", MujocoModel("humanoid/humanoid.xml"), 200, nullptr},
          {"mechanism", BundledModel("mechanism.xml"), 100, nullptr},
          {"joint_friction_limits", BundledModel("joint_friction_limits.xml"), 1500, nullptr},
          {"stacked_primitives", BundledModel("stacked_primitives.xml"), 300, nullptr}};
}

class IpmAlgebra : public MujocoTest, public ::testing::WithParamInterface<Scene> {
 protected:
  // the scene's problem after its steps (at_), and solver_ set up for it with these settings
  void Prepare(const ckSettings& settings) {
    const Scene& s = GetParam();
    ModelPtr m = Load(s.path);
    ASSERT_TRUE(m);
    at_ = std::make_unique<SteppedProblem>(std::move(m), s.steps, s.key);
    std::string err;
    ASSERT_TRUE(solver_.Setup(at_->dims(), settings, &err)) << err;
  }
  // ipm with gradients at kappa_grad; MuJoCo's soft penetrations stay within the uncapped range
  static ckSettings TangentSettings(double kappa_grad) {
    ckSettings settings = Settings(ckSOL_IPM);
    settings.ipm.kappa_grad = kappa_grad;
    settings.ipm.recovery_speed = 1e3;
    return settings;
  }
  // the problem at kappa_grad = kappa_tol, and a direction of dv_free alone (0.1 of uniform
  // [-1, 1] per dof from seed) in dvf
  ProblemTangent HardFreeVelocityDirection(unsigned seed, std::vector<double>* dvf) {
    Prepare(TangentSettings(Settings(ckSOL_IPM).ipm.kappa_tol));
    ProblemTangent dir;
    if (!at_) return dir;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> uni(-1, 1);
    dvf->resize(at_->p().nv);
    for (double& x : *dvf) x = 0.1 * uni(rng);
    dir.v_free = dvf->data();
    return dir;
  }
  std::unique_ptr<SteppedProblem> at_;
  ipm::IpmSolver solver_;
};

// along the reduced Newton direction, every residual changes at the rate -residual (the
// complementarity at the rate -(x o z - kappa e)): central differences of the full residual
TEST_P(IpmAlgebra, NewtonDirectionSolvesTheFullLinearization) {
  const Scene& s = GetParam();
  const ckSettings settings = Settings(ckSOL_IPM);
  ASSERT_NO_FATAL_FAILURE(Prepare(settings));
  Problem& p = at_->p();
  ASSERT_GT(p.islands.nisland, 0);
  ipm::IpmSolver& solver = solver_;

  const int nv = p.nv, nr = p.nrow;
  std::vector<double> dv(nv), dl(nr);
  std::vector<double> rv0(nv), rz0(nr), c0(nr), q0(nr), rvp(nv), rzp(nr), cp(nr), qp(nr), rvm(nv),
      rzm(nr), cm(nr), qm(nr);
  const double kappa = 1e-3, eps = 1e-6;
  for (int k = 0; k < p.islands.nisland; k++) {
    ASSERT_TRUE(solver.NewtonAtColdStart(p, k, kappa, dv.data(), dl.data())) << s.name;
    solver.ResidualAlong(p, k, 0, kappa, rv0.data(), rz0.data(), c0.data(), q0.data());
    solver.ResidualAlong(p, k, eps, kappa, rvp.data(), rzp.data(), cp.data(), qp.data());
    solver.ResidualAlong(p, k, -eps, kappa, rvm.data(), rzm.data(), cm.data(), qm.data());
    // rounding floor of the central differences: the size of the terms the residuals are made of
    double terms = 1;
    for (int j = 0; j < nv; j++) terms = std::max(terms, std::fabs(p.v_free[j]));
    for (int j = 0; j < nv; j++) terms = std::max(terms, std::fabs(dv[j]));
    double mmax = 0;
    for (int j = 0; j < nv; j++) mmax = std::max(mmax, p.mass.M[p.mass.madr[j]]);
    double lmax = 0;
    for (int i = 0; i < nr; i++) lmax = std::max(lmax, std::fabs(dl[i]));
    // entries of island k only: dofs for the dynamics, rows for the rest
    std::vector<uint8_t> in_dof(nv, 0), in_row(nr, 0);
    for (int a = 0; a < p.islands.ndofs[k]; a++)
      in_dof[p.islands.dofs[p.islands.dofadr[k] + a]] = 1;
    for (int i = 0; i < nr; i++) in_row[i] = p.islands.row_island[i] == k;
    auto check = [&](const std::vector<double>& r0, const std::vector<double>& rp,
                     const std::vector<double>& rm, double floor, const char* what) {
      const std::vector<uint8_t>& in = r0.size() == static_cast<size_t>(nv) ? in_dof : in_row;
      double scale = 0;
      for (size_t i = 0; i < r0.size(); i++) scale = std::max(scale, in[i] ? std::fabs(r0[i]) : 0);
      for (size_t i = 0; i < r0.size(); i++) {
        if (!in[i]) continue;
        const double rate = (rp[i] - rm[i]) / (2 * eps);
        EXPECT_NEAR(rate, -r0[i], 1e-5 * scale + floor) << s.name << " " << what << " " << i;
      }
    };
    const double noise = 1e-16 / eps * 1e3;  // rounding of a term, amplified by the difference
    // hard equality rows enter the reduced matrix M + J' W J with W = 1 / (1e-10 diag_approx)
    // (the solver's kEqualityReg): dv, and with it the dynamics change M dv - J' dlam, carry the
    // rounding of a system of condition ~1e10, independent of eps (measured 1.0e-7 relative on
    // the mechanism under MuJoCo 3.3.7, just above the difference floor): 3 eps_mach / 1e-10
    const bool hard_equality = !settings.ipm.soft_equality;
    bool has_equality = false;
    for (int i = 0; i < nr; i++) has_equality |= in_row[i] && p.kind[i] == kRowEquality;
    const double solve_noise = hard_equality && has_equality ? 3 * 2.2e-16 / 1e-10 : 0;
    check(rv0, rvp, rvm, std::max(noise, solve_noise) * (terms * mmax + lmax), "dynamics");
    check(rz0, rzp, rzm, noise * terms, "rows");
    check(c0, cp, cm, 0, "complementarity");
    check(q0, qp, qm, 0, "complementarity (first entries)");
  }
}

// ForceTangent against central differences of the central-path force at kappa_grad
TEST_P(IpmAlgebra, ForceTangentMatchesFiniteDifferences) {
  const Scene& s = GetParam();
  ASSERT_NO_FATAL_FAILURE(Prepare(TangentSettings(1e-3)));
  Problem& p = at_->p();
  Solution& sol = at_->sol();
  ipm::IpmSolver& solver = solver_;

  const int nv = p.nv, nr = p.nrow, nnz = p.J.nnz, nM = p.mass.nM;
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> uni(-1, 1);
  std::vector<double> dvf(nv), dpos(nr), dJ(nnz), dM(nM);
  for (double& x : dvf) x = uni(rng);
  for (double& x : dpos) x = 1e-3 * uni(rng);
  for (double& x : dJ) x = 0.1 * uni(rng);
  for (int i = 0; i < nv; i++) {
    // symmetric perturbation that keeps M positive definite: scale the diagonal
    dM[p.mass.madr[i]] = 0.05 * p.mass.M[p.mass.madr[i]] * (1 + uni(rng));
  }

  // the tangent at the unperturbed problem
  solver.Solve(p, &sol);
  ASSERT_NE(solver.CentralForce(p), nullptr) << s.name;
  std::vector<double> base(solver.CentralForce(p), solver.CentralForce(p) + nr);
  double fscale = 1e-9;
  for (double f : base) fscale = std::max(fscale, std::fabs(f));

  // perturb the problem's data in place by t along one of the directions
  std::vector<double> vf0(p.v_free, p.v_free + nv), pos0(p.pos, p.pos + nr),
      J0(p.J.val, p.J.val + nnz), M0(p.mass.M, p.mass.M + nM);
  auto apply = [&](int which, double t) {
    for (int j = 0; j < nv; j++) p.v_free[j] = vf0[j] + (which == 0 ? t * dvf[j] : 0);
    for (int i = 0; i < nr; i++) p.pos[i] = pos0[i] + (which == 1 ? t * dpos[i] : 0);
    for (int i = 0; i < nnz; i++) p.J.val[i] = J0[i] + (which == 2 ? t * dJ[i] : 0);
    for (int i = 0; i < nM; i++) p.mass.M[i] = M0[i] + (which == 3 ? t * dM[i] : 0);
    p.mass.Factor();
  };
  const char* names[4] = {"v_free", "pos", "J", "M"};
  for (int which = 0; which < 4; which++) {
    ProblemTangent dir;
    if (which == 0) dir.v_free = dvf.data();
    if (which == 1) dir.pos = dpos.data();
    if (which == 2) dir.J = dJ.data();
    if (which == 3) dir.M = dM.data();
    apply(-1, 0);
    solver.Solve(p, &sol);
    std::vector<double> df(nr);
    AllocationCounter counter;
    if (AllocationCounter::Available()) counter.Start();
    ASSERT_TRUE(solver.ForceTangent(p, sol, dir, df.data())) << s.name << " " << names[which];
    if (AllocationCounter::Available()) {
      EXPECT_EQ(counter.Stop(), 0) << s.name;
    }

    const double eps = 1e-6;
    std::vector<double> fp(nr), fm(nr);
    apply(which, eps);
    solver.Solve(p, &sol);
    const double* c = solver.CentralForce(p);
    ASSERT_NE(c, nullptr);
    std::copy(c, c + nr, fp.begin());
    apply(which, -eps);
    solver.Solve(p, &sol);
    c = solver.CentralForce(p);
    ASSERT_NE(c, nullptr);
    std::copy(c, c + nr, fm.begin());
    double dscale = 0;
    for (int i = 0; i < nr; i++) dscale = std::max(dscale, std::fabs(df[i]));
    // every direction moves the force, except gaps when no row depends on them
    bool gaps = false;
    for (int i = 0; i < nr; i++) gaps = gaps || p.kind[i] != kRowFriction;
    if (which != 1 || gaps) {
      EXPECT_GT(dscale, 1e-6 * fscale) << s.name << " " << names[which];
    }
    for (int i = 0; i < nr; i++) {
      const double fd = (fp[i] - fm[i]) / (2 * eps);
      EXPECT_NEAR(df[i], fd, 1e-4 * (dscale + fscale))
          << s.name << " " << names[which] << " row " << i << " kind " << p.kind[i];
    }
  }
  apply(-1, 0);
}

// kappa_grad = kappa_tol, the hard-contact derivative: ForceTangent against central differences
// of the force the solve itself returns (it ends on the central point at kappa_tol)
TEST_P(IpmAlgebra, HardContactTangentIsTheSolvesDerivative) {
  const Scene& s = GetParam();
  ASSERT_NO_FATAL_FAILURE(Prepare(TangentSettings(Settings(ckSOL_IPM).ipm.kappa_tol)));
  Problem& p = at_->p();
  Solution& sol = at_->sol();
  ipm::IpmSolver& solver = solver_;

  const int nv = p.nv, nr = p.nrow;
  std::mt19937 rng(13);
  std::uniform_real_distribution<double> uni(-1, 1);
  std::vector<double> dvf(nv), vf0(p.v_free, p.v_free + nv);
  for (double& x : dvf) x = 0.1 * uni(rng);
  auto apply = [&](double t) {
    for (int j = 0; j < nv; j++) p.v_free[j] = vf0[j] + t * dvf[j];
  };
  apply(0);
  solver.Solve(p, &sol);
  ASSERT_EQ(sol.status, ckSTATUS_SOLVED) << s.name;
  ProblemTangent dir;
  dir.v_free = dvf.data();
  std::vector<double> df(nr), fp(nr), fm(nr), fdiff(nr);
  ASSERT_TRUE(solver.ForceTangent(p, sol, dir, df.data())) << s.name;
  // the solve's force carries rounding of ~1e-12 relative (60-contact pile): a step of 1e-5
  // keeps the differences' noise near 1e-7 (at 1e-7 it reaches 2e-5 there)
  const double eps = 1e-5;
  apply(eps);
  solver.Solve(p, &sol);
  std::copy(sol.force, sol.force + nr, fp.begin());
  apply(-eps);
  solver.Solve(p, &sol);
  std::copy(sol.force, sol.force + nr, fm.begin());
  apply(0);
  // generalized forces J' f: the split of a contact set's force among its rows is
  // indeterminate for hard contact (fixed only through kappa, so rounding moves it by 1e-6
  // relative and differences of it are noise); J' f is what the dynamics sees
  for (int i = 0; i < nr; i++) fdiff[i] = (fp[i] - fm[i]) / (2 * eps);
  std::vector<double> gt(nv), gd(nv), g0(nv);
  p.J.MulT(df.data(), gt.data());
  p.J.MulT(fdiff.data(), gd.data());
  p.J.MulT(fp.data(), g0.data());
  double gscale = 1e-9, dscale = 0;
  for (int j = 0; j < nv; j++) {
    gscale = std::max(gscale, std::fabs(g0[j]));
    dscale = std::max(dscale, std::fabs(gt[j]));
  }
  EXPECT_GT(dscale, 1e-6 * gscale) << s.name;
  for (int j = 0; j < nv; j++) {
    EXPECT_NEAR(gt[j], gd[j], 1e-6 * (dscale + gscale)) << s.name << " dof " << j;
  }
}

// the reverse mode: PrepareAdjoint's transposed solve with weights y, then AdjointDot along a
// direction, equals y' ForceTangent along it (each perturbation alone and all at once), without
// allocating and without a force tangent solve
TEST_P(IpmAlgebra, AdjointDotIsTheForceTangentsProduct) {
  const Scene& s = GetParam();
  for (int soft = 0; soft < 2; soft++) {
    ckSettings settings = TangentSettings(1e-3);
    settings.ipm.soft_equality = soft;  // (the equality rows' terms of both kinds)
    ASSERT_NO_FATAL_FAILURE(Prepare(settings));
    Problem& p = at_->p();
    Solution& sol = at_->sol();
    ipm::IpmSolver& solver = solver_;
    const int nv = p.nv, nr = p.nrow, nnz = p.J.nnz, nM = p.mass.nM;
    std::mt19937 rng(17);
    std::uniform_real_distribution<double> uni(-1, 1);
    std::vector<double> y(nr), dvf(nv), dpos(nr), dJ(nnz), dM(nM), drow(nr);
    for (double& x : y) x = uni(rng);
    for (double& x : dvf) x = uni(rng);
    for (double& x : dpos) x = 1e-3 * uni(rng);
    for (double& x : dJ) x = 0.1 * uni(rng);
    for (double& x : drow) x = uni(rng);
    for (int i = 0; i < nv; i++) dM[p.mass.madr[i]] = 0.05 * p.mass.M[p.mass.madr[i]] * uni(rng);
    for (int i = 0; i < nv; i++) {
      if (p.mass.parent[i] >= 0) dM[p.mass.madr[i] + 1] = 0.01 * uni(rng);  // (off the diagonal)
    }
    solver.Solve(p, &sol);
    AllocationCounter counter;
    if (AllocationCounter::Available()) counter.Start();
    ASSERT_TRUE(solver.PrepareAdjoint(p, sol, y.data(), nullptr)) << s.name;
    if (AllocationCounter::Available()) {
      EXPECT_EQ(counter.Stop(), 0) << s.name;
    }
    EXPECT_EQ(solver.stats().adjoint_islands, p.islands.nisland);
    const char* names[7] = {"v_free", "pos", "J", "M", "aref", "R", "all"};
    std::vector<double> df(nr);
    for (int which = 0; which < 7; which++) {
      ProblemTangent dir;
      const bool all = which == 6;
      if (which == 0 || all) dir.v_free = dvf.data();
      if (which == 1 || all) dir.pos = dpos.data();
      if (which == 2 || all) dir.J = dJ.data();
      if (which == 3 || all) dir.M = dM.data();
      if (which == 4 || all) dir.aref = drow.data(), dir.vel = drow.data();
      if (which == 5 || all) dir.R = drow.data(), dir.diag_approx = drow.data();
      const int tangents = solver.stats().tangent_islands;
      if (AllocationCounter::Available()) counter.Start();
      const double adjoint = solver.AdjointDot(p, sol, dir);
      if (AllocationCounter::Available()) {
        EXPECT_EQ(counter.Stop(), 0) << s.name;
      }
      EXPECT_EQ(solver.stats().tangent_islands, tangents) << s.name;
      ASSERT_TRUE(solver.ForceTangent(p, sol, dir, df.data())) << s.name << " " << names[which];
      double forward = 0, scale = 0;
      for (int i = 0; i < nr; i++) {
        forward += y[i] * df[i];
        scale += std::fabs(y[i] * df[i]);
      }
      EXPECT_NEAR(adjoint, forward, 1e-10 * scale + 1e-300)
          << s.name << " " << names[which] << " soft equality " << soft;
    }
  }
}

// The blocked force tangents (QueueTangent, FlushTangents: the solves, rows, refinement defects
// and M dv_free of all slots at once) are ForceTangent's within rounding (M dv_free is summed
// apart from the other terms of drv; measured 3e-13 of the column on the humanoid), with the
// directions' arrays overwritten with NaN between the queue and the flush: 11 random directions
// (chunks of 8, 2 and 1 columns), v_free, gaps, J and M in turns, one perturbing nothing; on the
// scenes whose problem is one island (the others decline the blocked path)
TEST_P(IpmAlgebra, BlockedTangentsAreForceTangents) {
  const Scene& s = GetParam();
  ASSERT_NO_FATAL_FAILURE(Prepare(TangentSettings(1e-3)));
  Problem& p = at_->p();
  Solution& sol = at_->sol();
  ipm::IpmSolver& solver = solver_;
  // the blocked path serves one island only; on the others every direction takes ForceTangent
  if (p.islands.nisland != 1) {
    EXPECT_EQ(solver.TangentSlots(p), 0) << s.name;
    return;
  }
  ASSERT_EQ(solver.TangentSlots(p), ipm::IpmSolver::kTangentSlots) << s.name;
  const int n = 11, nv = p.nv, nr = p.nrow, nnz = p.J.nnz, nM = p.mass.nM;
  std::mt19937 rng(29);
  std::uniform_real_distribution<double> uni(-1, 1);
  std::vector<std::vector<double>> dvf(n, std::vector<double>(nv)),
      dpos(n, std::vector<double>(nr)), dJ(n, std::vector<double>(nnz)),
      dM(n, std::vector<double>(nM));
  std::vector<ProblemTangent> dirs(n);
  for (int k = 0; k < n; k++) {
    for (double& x : dvf[k]) x = uni(rng);
    for (double& x : dpos[k]) x = 1e-3 * uni(rng);
    for (double& x : dJ[k]) x = 0.1 * uni(rng);
    for (int i = 0; i < nv; i++) dM[k][p.mass.madr[i]] = 0.05 * p.mass.M[p.mass.madr[i]] * uni(rng);
    if (k == 7) continue;  // (nothing)
    if (k % 3 != 1 || k == 4) dirs[k].v_free = dvf[k].data();
    if (k % 4 == 0) dirs[k].pos = dpos[k].data();
    if (k % 2 == 1) dirs[k].J = dJ[k].data();
    if (k % 3 == 2 || k == 10) dirs[k].M = dM[k].data();
  }
  solver.Solve(p, &sol);
  for (int k = 0; k < n; k++) ASSERT_TRUE(solver.QueueTangent(p, dirs[k], k)) << s.name;
  std::vector<std::vector<double>> kept;
  for (auto* set : {&dvf, &dpos, &dJ, &dM}) {
    for (auto& v : *set) {
      kept.push_back(v);
      std::fill(v.begin(), v.end(), std::nan(""));
    }
  }
  std::vector<double> blocked(static_cast<size_t>(n) * nr), one(nr);
  ASSERT_TRUE(solver.FlushTangents(p, n, blocked.data())) << s.name;
  size_t at = 0;  // (back into the same buffers: the tangents point into them)
  for (auto* set : {&dvf, &dpos, &dJ, &dM}) {
    for (auto& v : *set) std::copy(kept[at].begin(), kept[at].end(), v.begin()), at++;
  }
  for (int k = 0; k < n; k++) {
    ASSERT_TRUE(solver.ForceTangent(p, sol, dirs[k], one.data())) << s.name;
    double err = 0, scale = 0;
    for (int i = 0; i < nr; i++) {
      err = std::max(err, std::fabs(blocked[static_cast<size_t>(k) * nr + i] - one[i]));
      scale = std::max(scale, std::fabs(one[i]));
    }
    EXPECT_EQ(scale > 0, k != 7) << s.name << " direction " << k;
    EXPECT_LE(err, 1e-11 * scale) << s.name << " direction " << k;
  }
}

// Center's fallback (AnswerPoint, forced by the test hook on one island at a time) takes only an
// answer complementary to rounding (a pattern's, the polish's): a regular solve's answer, x o z ~
// kappa_tol, is declined wherever the island has cones (ForceTangent fails: differences, of the
// island's own solve unless they are off), and an island without (equality rows only) gives the
// central point's tangent
TEST_P(IpmAlgebra, AnswerPointTakesOnlyAPatternsAnswer) {
  const Scene& s = GetParam();
  std::vector<double> dvf;
  ProblemTangent dir;
  ASSERT_NO_FATAL_FAILURE(dir = HardFreeVelocityDirection(23, &dvf));
  Problem& p = at_->p();
  Solution& sol = at_->sol();
  ipm::IpmSolver& solver = solver_;
  const int nv = p.nv, nr = p.nrow;
  std::vector<double> df(nr), g0(nv), g(nv);
  solver.Solve(p, &sol);
  ASSERT_EQ(sol.status, ckSTATUS_SOLVED) << s.name;
  ASSERT_TRUE(solver.ForceTangent(p, sol, dir, df.data())) << s.name;
  EXPECT_EQ(solver.stats().answer_centered, 0) << s.name;
  p.J.MulT(df.data(), g0.data());
  double scale = 1e-9;
  for (double x : g0) scale = std::max(scale, std::fabs(x));
  for (int k = 0; k < p.islands.nisland; k++) {
    bool cones = false;
    for (int i = 0; i < nr; i++) cones |= p.islands.row_island[i] == k && p.kind[i] != kRowEquality;
    ipm::IpmSolver::center_stall_island_ = k;
    ipm::IpmSolver::island_difference_off_ = true;  // (Center's decision alone)
    solver.Solve(p, &sol);
    const bool ok = solver.ForceTangent(p, sol, dir, df.data());
    // a declined island's tangent by differences of its own solve (IslandDifference)
    ipm::IpmSolver::island_difference_off_ = false;
    EXPECT_TRUE(solver.ForceTangent(p, sol, dir, df.data())) << s.name << " island " << k;
    EXPECT_EQ(solver.stats().island_diffs, ok ? 0 : 1) << s.name << " island " << k;
    ipm::IpmSolver::center_stall_island_ = -1;
    EXPECT_EQ(ok, !cones) << s.name << " island " << k;
    EXPECT_EQ(solver.stats().answer_centered, ok ? 1 : 0) << s.name;
    if (!ok) continue;
    p.J.MulT(df.data(), g.data());
    double err = 0;
    for (int j = 0; j < nv; j++) err = std::max(err, std::fabs(g[j] - g0[j]));
    EXPECT_LT(err, 1e-9 * scale) << s.name << " island " << k;
  }
}

// IslandDifference on an island Center fails on (test hook), at a step of zero (hook
// island_nudge_ 0: the impulses' change itself): its replay of the attempt the step kept, or its
// solve as the step's, gives the step's answer bit for bit, so every change is exactly zero; and
// it leaves the step's state as it was (the other islands' tangents, the next call's, unchanged)
TEST_P(IpmAlgebra, IslandDifferenceAtZeroIsTheStepsAnswer) {
  const Scene& s = GetParam();
  std::vector<double> dvf;
  ProblemTangent dir;
  ASSERT_NO_FATAL_FAILURE(dir = HardFreeVelocityDirection(29, &dvf));
  const Problem& p = at_->p();
  const int nr = p.nrow;
  Solution& sol = at_->sol();
  std::vector<double> df0(nr), df(nr), lam0(nr);
  for (int k = 0; k < p.islands.nisland; k++) {
    ipm::IpmSolver::center_fail_island_ = k;
    solver_.Solve(p, &sol);
    for (int i = 0; i < nr; i++) lam0[i] = sol.force[i];
    ipm::IpmSolver::island_nudge_ = 0;
    const bool ok0 = solver_.ForceTangent(p, sol, dir, df0.data());
    ipm::IpmSolver::island_nudge_ = 1e-6;
    const bool ok = solver_.ForceTangent(p, sol, dir, df.data());
    EXPECT_EQ(solver_.stats().island_diffs, 2) << s.name << " island " << k;
    solver_.Solve(p, &sol);  // (the solve after them, as before them)
    ipm::IpmSolver::center_fail_island_ = -1;
    for (int i = 0; i < nr; i++) EXPECT_EQ(sol.force[i], lam0[i]) << s.name << " row " << i;
    EXPECT_TRUE(ok0 && ok) << s.name << " island " << k;
    if (!(ok0 && ok)) continue;
    double other = 0;
    for (int i = 0; i < nr; i++) {
      if (p.islands.row_island[i] == k) {
        EXPECT_EQ(df0[i], 0) << s.name << " island " << k << " row " << i;
      } else {
        other = std::max(other, std::fabs(df0[i] - df[i]));
      }
    }
    EXPECT_EQ(other, 0) << s.name << " island " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Scenes, IpmAlgebra, ::testing::ValuesIn(Scenes()),
                         [](const ::testing::TestParamInfo<Scene>& info) {
                           return info.param.name;
                         });

// a box rocking on four contacts, captured from humanoid100 (MuJoCo 2.2.2, the physics test's
// BoxOnFourContactsIsPolished): every attempt stalls and the polish solves it, so the stored
// iterate lies far from the central point, where Newton's steps are cut to nothing by the cones'
// boundaries. With kappa_grad = kappa_tol Center takes the polished answer's limit point
// (AnswerPoint), and ForceTangent is the solve's derivative: central differences of its force
// along v_free and a change of M (J' f, as in HardContactTangentIsTheSolvesDerivative; along the
// gaps the differences cross to regular solves, whose answers lie 1e-4 away), without allocating
class IpmPolishedIsland : public MujocoTest {};

constexpr char kBox[] = R"(<mujoco><option timestep="0.00501"/>
    <default><geom solimp=".9 .9 .01"/></default>
    <worldbody><geom type="plane" size="3 3 .5"/>
      <body><freejoint/><geom type="box" size="0.15 0.1 0.05"/></body>
    </worldbody></mujoco>)";
constexpr double kBoxQpos[7] = {
    0.22362275952154859,   0.47454330494889241,     0.049686663935294806, 0.031926225294017299,
    0.0009446604841090643, -3.0174318345731286e-05, 0.99948978126069699};
constexpr double kBoxQvel[6] = {0.034156271391545541,  0.0034888717145757399,
                                -0.033254508516348411, 0.11279133116641815,
                                -0.67685425455365644,  -7.4362214371508084e-05};

TEST_F(IpmPolishedIsland, TangentIsTheSolvesDerivative) {
  ModelPtr m = LoadString(kBox);
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  std::copy(kBoxQpos, kBoxQpos + 7, d->qpos);
  std::copy(kBoxQvel, kBoxQvel + 6, d->qvel);
  mj_forward(m.get(), d.get());
  ExtractedProblem e(m.get());
  ASSERT_TRUE(e.ok);
  e.Extract(m.get(), d.get());
  Problem& p = e.problem();
  Solution& sol = e.solution();
  ASSERT_EQ(p.islands.nisland, 1);
  ckSettings settings = Settings(ckSOL_IPM);
  settings.ipm.kappa_grad = settings.ipm.kappa_tol;
  ipm::IpmSolver solver;
  std::string err;
  ASSERT_TRUE(solver.Setup(e.ex.dims(), settings, &err)) << err;

  const int nv = p.nv, nr = p.nrow;
  std::mt19937 rng(19);
  std::uniform_real_distribution<double> uni(-1, 1);
  const int nM = p.mass.nM;
  std::vector<double> dvf(nv), dM(nM), vf0(p.v_free, p.v_free + nv), M0(p.mass.M, p.mass.M + nM);
  for (double& x : dvf) x = 0.1 * uni(rng);
  for (int i = 0; i < nv; i++) dM[p.mass.madr[i]] = 0.05 * p.mass.M[p.mass.madr[i]] * uni(rng);
  auto apply = [&](int which, double t) {
    for (int j = 0; j < nv; j++) p.v_free[j] = vf0[j] + (which == 0 ? t * dvf[j] : 0);
    for (int i = 0; i < nM; i++) p.mass.M[i] = M0[i] + (which == 1 ? t * dM[i] : 0);
    p.mass.Factor();
  };
  const char* names[2] = {"v_free", "M"};
  for (int which = 0; which < 2; which++) {
    apply(-1, 0);
    solver.Solve(p, &sol);
    ASSERT_EQ(sol.status, ckSTATUS_SOLVED);
    EXPECT_EQ(solver.stats().polished, 1);
    EXPECT_EQ(solver.stats().answer_centered, 1);
    ProblemTangent dir;
    if (which == 0) dir.v_free = dvf.data();
    if (which == 1) dir.M = dM.data();
    std::vector<double> df(nr), fp(nr), fm(nr), fdiff(nr);
    AllocationCounter counter;
    if (AllocationCounter::Available()) counter.Start();
    ASSERT_TRUE(solver.ForceTangent(p, sol, dir, df.data())) << names[which];
    if (AllocationCounter::Available()) {
      EXPECT_EQ(counter.Stop(), 0) << names[which];
    }
    const double eps = 1e-5;
    apply(which, eps);
    solver.Solve(p, &sol);
    ASSERT_EQ(sol.status, ckSTATUS_SOLVED);
    ASSERT_EQ(solver.stats().polished, 1);  // the same branch of the step
    std::copy(sol.force, sol.force + nr, fp.begin());
    apply(which, -eps);
    solver.Solve(p, &sol);
    ASSERT_EQ(sol.status, ckSTATUS_SOLVED);
    ASSERT_EQ(solver.stats().polished, 1);
    std::copy(sol.force, sol.force + nr, fm.begin());
    for (int i = 0; i < nr; i++) fdiff[i] = (fp[i] - fm[i]) / (2 * eps);
    std::vector<double> gt(nv), gd(nv), g0(nv);
    p.J.MulT(df.data(), gt.data());
    p.J.MulT(fdiff.data(), gd.data());
    p.J.MulT(fp.data(), g0.data());
    double gscale = 1e-9, dscale = 0;
    for (int j = 0; j < nv; j++) {
      gscale = std::max(gscale, std::fabs(g0[j]));
      dscale = std::max(dscale, std::fabs(gt[j]));
    }
    EXPECT_GT(dscale, 1e-6 * gscale) << names[which];
    for (int j = 0; j < nv; j++) {
      EXPECT_NEAR(gt[j], gd[j], 1e-6 * (dscale + gscale)) << names[which] << " dof " << j;
    }
  }
}

// the same state through ck_transitionJac (kappa_grad = kappa_tol): every column analytic (the
// call returns 0; before, the island's 12 columns were differences and it returned 1), and dv+ /
// dv agrees with central differences of the step
TEST_F(IpmPolishedIsland, TransitionJacobianIsAnalytic) {
  if (!ck_solverAvailable(ckSOL_IPM)) GTEST_SKIP() << "solver ipm is not in this build";
  ModelPtr m = LoadString(kBox);
  ASSERT_TRUE(m);
  ckSettings s = Settings(ckSOL_IPM);
  s.ipm.kappa_grad = s.ipm.kappa_tol;
  s.deriv.enabled = 1;
  HandlePtr ck = Make(m.get(), &s);
  DataPtr d(mj_makeData(m.get()));
  std::copy(kBoxQpos, kBoxQpos + 7, d->qpos);
  std::copy(kBoxQvel, kBoxQvel + 6, d->qvel);
  const int nv = m->nv, ndx = 2 * nv;
  std::vector<double> A(ndx * ndx), Afd(ndx * ndx);
  ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), nullptr, nullptr, nullptr))
      << ck_lastError(ck.get());
  ASSERT_EQ(0, ck_transitionFD(ck.get(), m.get(), d.get(), 1e-7, 1, Afd.data(), nullptr, nullptr,
                               nullptr));
  // dv+ / dv (the velocity columns move v_free alone: the position columns' differences cross
  // between the polished step and regular solves, whose answers differ by 1e-4, the physics
  // test's): each column within 1e-3 of the largest entry (measured 5e-5)
  double scale = 0;
  for (int r = nv; r < ndx; r++) {
    for (int c = nv; c < ndx; c++) scale = std::max(scale, std::fabs(Afd[r * ndx + c]));
  }
  EXPECT_GT(scale, 0);
  for (int r = nv; r < ndx; r++) {
    for (int c = nv; c < ndx; c++) {
      EXPECT_NEAR(A[r * ndx + c], Afd[r * ndx + c], 1e-3 * scale) << "row " << r << " column " << c;
    }
  }
}

}  // namespace
}  // namespace contactkit::test
