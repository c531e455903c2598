// Copyright 2026 The contactkit developers.
//
// ForceTangent of the lcp solver (Nimble's clamping-set derivative, boxed friction through E,
// minimum-norm term for rank-deficient clamping sets) against central finite differences of
// Solve on perturbed problems whose classification does not change.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/solvers/lcp/lcp_util.h"

namespace contactkit::test {
namespace {

// which problem data a direction perturbs
struct Perturb {
  bool v_free = false, pos = false, vel = false, J = false, M = false;
};

// a random direction for the problem (scaled to the data it perturbs)
struct Direction {
  std::vector<double> v_free, pos, vel, J, M;
  ProblemTangent tangent;
  Direction(const Problem& p, const Perturb& which, std::mt19937* rng) {
    std::uniform_real_distribution<double> u(-1, 1);
    auto fill = [&](std::vector<double>* v, int n, double scale, bool on) {
      v->assign(n, 0.0);
      if (!on) return (const double*)nullptr;
      for (double& x : *v) x = scale * u(*rng);
      return static_cast<const double*>(v->data());
    };
    tangent.v_free = fill(&v_free, p.nv, 1.0, which.v_free);
    tangent.pos = fill(&pos, p.nrow, 1e-3, which.pos);
    tangent.vel = fill(&vel, p.nrow, 1.0, which.vel);

    // gaps and velocities of a small motion dq (consistent with the rows' geometry, which keeps
    // rank-deficient clamped systems consistent)
    std::vector<double> dq(p.nv);
    for (double& x : dq) x = u(*rng);
    for (int i = 0; i < p.nrow; i++) {
      if (which.pos) pos[i] = 1e-3 * p.J.Dot(i, dq.data());
      if (which.vel) vel[i] = p.J.Dot(i, dq.data());
    }
    tangent.J = fill(&J, p.J.nnz, 0.1, which.J);
    tangent.M = fill(&M, p.mass.nM, 0.0, which.M);
    if (which.M) {
      // a symmetric perturbation that keeps M positive definite: a fraction of M itself plus
      // small random entries on the stored (lower-triangle) positions
      for (int k = 0; k < p.mass.nM; k++) M[k] = 0.2 * p.mass.M[k] * u(*rng);
    }
  }
};

// p + eps * dir, in place
void Apply(Problem* p, const Direction& d, double eps) {
  for (int j = 0; j < p->nv; j++) p->v_free[j] += eps * d.v_free[j];
  for (int i = 0; i < p->nrow; i++) {
    p->pos[i] += eps * d.pos[i];
    p->vel[i] += eps * d.vel[i];
  }
  for (int k = 0; k < p->J.nnz; k++) p->J.val[k] += eps * d.J[k];
  if (d.tangent.M) {
    for (int k = 0; k < p->mass.nM; k++) p->mass.M[k] += eps * d.M[k];
    p->mass.Factor();
  }
}

// the velocity problem with its gap terms (split_impulse = 0: every gap, penetrating or not, in
// b), so that a perturbation of the gaps moves the forces, and no slop (states settled by
// MuJoCo's soft contact rest less deep than the default slop); the position pass has its own test
inline ckSettings TangentSettings() {
  ckSettings s = LcpSettings();
  s.lcp.split_impulse = 0;
  s.lcp.slop = 0;
  return s;
}

class LcpTangentTest : public MujocoTest {
 protected:
  // compares ForceTangent with central differences of Solve along random directions
  void Check(const mjModel* m, mjData* d, const Perturb& which, int ndir, double tol,
             const ckSettings& s = TangentSettings()) {
    Extracted e(m);
    e.Extract(m, d);
    Problem& p = e.p();
    Solution& sol = e.sol();
    ASSERT_GT(p.nrow, 0);
    auto solver = MakeLcp(e, s);
    solver->Solve(p, &sol);
    ASSERT_EQ(sol.status, ckSTATUS_SOLVED);
    std::vector<signed char> cls(solver->classification(), solver->classification() + p.nrow);
    const int nrow = p.nrow;
    std::vector<double> f0(sol.force, sol.force + nrow), fp(nrow), fm(nrow), df(nrow);
    double fscale = 0;
    for (double f : f0) fscale = std::max(fscale, std::fabs(f));
    std::mt19937 rng(7);
    for (int k = 0; k < ndir; k++) {
      Direction dir(p, which, &rng);
      const double eps = 1e-6;
      Apply(&p, dir, eps);
      solver->Solve(p, &sol);
      fp.assign(sol.force, sol.force + nrow);
      for (int i = 0; i < nrow; i++) ASSERT_EQ(solver->classification()[i], cls[i]) << "row " << i;
      Apply(&p, dir, -2 * eps);
      solver->Solve(p, &sol);
      fm.assign(sol.force, sol.force + nrow);
      for (int i = 0; i < nrow; i++) ASSERT_EQ(solver->classification()[i], cls[i]) << "row " << i;
      Apply(&p, dir, eps);
      solver->Solve(p, &sol);
      ASSERT_TRUE(solver->ForceTangent(p, sol, dir.tangent, df.data()));
      double err = 0, dscale = 0;
      for (int i = 0; i < nrow; i++) {
        const double fd = (fp[i] - fm[i]) / (2 * eps);
        err = std::max(err, std::fabs(fd - df[i]));
        dscale = std::max(dscale, std::fabs(fd));
      }
      EXPECT_GT(dscale, 0) << "direction " << k << " does not change the forces";
      EXPECT_LE(err, tol * std::max(dscale, 1e-3 * fscale)) << "direction " << k;
    }
  }

  // the scenes of the stored and blocked tangent tests: "box" (on four corners), "sliding",
  // "table" (four feet of different friction, elliptic cones, its centre of mass at the feet's
  // contact height so that friction neither tilts it nor presses a foot) and "humanoid"
  ModelPtr Scene(const std::string& name) {
    if (name == "table") return LoadString(LcpTableScene());
    return Load(name == "humanoid"  ? MujocoModel("humanoid/humanoid.xml")
                : name == "sliding" ? BundledModel("box_sliding.xml")
                                    : BundledModel("box_on_plane.xml"));
  }

  // free velocity, gaps and mass, one kind at a time
  void CheckEachKind(const mjModel* m, mjData* d, double tol) {
    for (int k = 0; k < 3; k++) {
      Perturb which;
      which.v_free = k == 0;
      which.pos = k == 1;
      which.M = k == 2;
      SCOPED_TRACE(k);
      Check(m, d, which, 2, tol);
    }
  }
};

// a box resting on four corners: 12 clamped rows of rank 6 (minimum-norm derivative)
TEST_F(LcpTangentTest, BoxOnFourCornersRankDeficient) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 300; t++) mj_step(m.get(), d.get());
  Perturb which;
  which.v_free = which.pos = true;
  Check(m.get(), d.get(), which, 4, 1e-6);
  Perturb mass;
  mass.M = true;
  Check(m.get(), d.get(), mass, 4, 1e-6);
}

// the resting box with one contact point moved within the plane: the Jacobian changes, its rank
// (6 of 12) does not, and the minimum-norm solution moves along the null space of the clamped
// system too (the (I - K^+ K) dK' K^+' x term)
TEST_F(LcpTangentTest, MovedContactNullSpaceTerm) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  // centre of mass off the middle: the corners carry different forces and the clamped system's
  // solution turns the box, which the moved contact point feels
  const int box = BodyId(m.get(), "box");
  m->body_ipos[3 * box] = 0.03;
  m->body_ipos[3 * box + 1] = -0.02;
  DataPtr d(mj_makeData(m.get()));
  for (int t = 0; t < 300; t++) mj_step(m.get(), d.get());
  mj_forward(m.get(), d.get());
  ASSERT_EQ(d->ncon, 4);
  const double eps = 1e-6;
  auto moved = [&](double dx, Extracted* e) {
    const double x0 = d->contact[0].pos[0];
    d->contact[0].pos[0] += dx;
    EXPECT_EQ(e->ex.Extract(m.get(), d.get(), &e->p()), 0);
    d->contact[0].pos[0] = x0;
  };
  Extracted e0(m.get()), ep(m.get()), em(m.get());
  moved(0, &e0);
  moved(eps, &ep);
  moved(-eps, &em);
  Problem& p = e0.p();
  ASSERT_EQ(ep.p().J.nnz, p.J.nnz);
  std::vector<double> dJ(p.J.nnz);
  for (int k = 0; k < p.J.nnz; k++) dJ[k] = (ep.p().J.val[k] - em.p().J.val[k]) / (2 * eps);
  ProblemTangent dir;
  dir.J = dJ.data();
  auto solver = MakeLcp(e0, TangentSettings());
  std::vector<double> df(p.nrow);
  solver->Solve(ep.p(), &ep.sol());
  solver->Solve(em.p(), &em.sol());
  solver->Solve(p, &e0.sol());
  ASSERT_EQ(e0.sol().status, ckSTATUS_SOLVED);
  ASSERT_TRUE(solver->ForceTangent(p, e0.sol(), dir, df.data()));
  ASSERT_NE(solver->factorization(0), nullptr);
  EXPECT_LT(solver->factorization(0)->rank(), solver->factorization(0)->n());
  double err = 0, scale = 0;
  for (int i = 0; i < p.nrow; i++) {
    const double fd = (ep.sol().force[i] - em.sol().force[i]) / (2 * eps);
    err = std::max(err, std::fabs(fd - df[i]));
    scale = std::max(scale, std::fabs(fd));
  }
  EXPECT_GT(scale, 1e-3);
  EXPECT_LE(err, 1e-5 * scale);
}

// a sliding box: friction rows at their bounds couple to the normals through E
TEST_F(LcpTangentTest, SlidingBoxBoundFriction) {
  ModelPtr m = Load(BundledModel("box_sliding.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  mj_resetDataKeyframe(m.get(), d.get(), 0);
  ckSettings s = LcpSettings();
  HandlePtr ck = Make(m.get(), &s);
  for (int t = 0; t < 50; t++) ck_step(ck.get(), m.get(), d.get());
  CheckEachKind(m.get(), d.get(), 1e-6);
}

// a single contact with a changing Jacobian and mass (full rank)
TEST_F(LcpTangentTest, SphereJacobianAndMass) {
  ModelPtr m = Load(BundledModel("sphere_rolling.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  mj_resetDataKeyframe(m.get(), d.get(), 0);
  ckSettings s = LcpSettings();
  HandlePtr ck = Make(m.get(), &s);
  for (int t = 0; t < 20; t++) ck_step(ck.get(), m.get(), d.get());
  Perturb which;
  which.v_free = which.J = which.M = true;
  Check(m.get(), d.get(), which, 4, 1e-6);
}

// articulated: humanoid contacts and joint limits
TEST_F(LcpTangentTest, HumanoidContactsAndLimits) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  ckSettings s = LcpSettings();
  HandlePtr ck = Make(m.get(), &s);
  for (int t = 0; t < 400; t++) ck_step(ck.get(), m.get(), d.get());
  CheckEachKind(m.get(), d.get(), 1e-5);
}

// equality rows (bilateral) and joint friction loss (constant bounds)
TEST_F(LcpTangentTest, EqualityAndFrictionLoss) {
  for (const char* model : {"mechanism.xml", "joint_friction_limits.xml"}) {
    ModelPtr m = Load(BundledModel(model));
    ASSERT_TRUE(m);
    DataPtr d(mj_makeData(m.get()));
    ckSettings s = LcpSettings();
    HandlePtr ck = Make(m.get(), &s);
    for (int t = 0; t < 100; t++) ck_step(ck.get(), m.get(), d.get());
    Perturb which;
    which.v_free = which.pos = which.J = which.M = true;
    SCOPED_TRACE(model);
    Check(m.get(), d.get(), which, 3, 1e-5);
  }
}

// the null-space term from the stored basis V and V S J M^-1 (rank-deficient islands of at most 8
// null-space rows) equals the one with a tree solve per direction, whose agreement with
// differences the tests above check: the box on four corners (12 clamped rows of rank 6), the
// sliding box (4 of rank 3, friction rows at their bounds) and the humanoid's feet (23 of rank
// 17). (In these scenes the velocity part V S J M^-1 r is zero up to rounding: the null-space
// force patterns exert no generalized force, as a sign flipped in it shows.)
TEST_F(LcpTangentTest, StoredNullVelocityEqualsTheSolvePerDirection) {
  for (const char* scene : {"box", "sliding", "table", "humanoid"}) {
    const std::string name = scene;
    SCOPED_TRACE(name);
    ModelPtr m = Scene(name);
    ASSERT_TRUE(m);
    DataPtr d(mj_makeData(m.get()));
    ckSettings s = name == "humanoid" ? LcpSettings() : TangentSettings();
    HandlePtr ck;
    if (name == "box") {
      const int box = BodyId(m.get(), "box");
      m->body_ipos[3 * box] = 0.03;
      m->body_ipos[3 * box + 1] = -0.02;
      for (int t = 0; t < 300; t++) mj_step(m.get(), d.get());
    } else if (name == "table") {
      // the table at rest set sliding: its feet's friction bounds, coupled to their normals by
      // four different mu, give the normals' null-space pattern a generalized force
      for (int t = 0; t < 300; t++) mj_step(m.get(), d.get());
      d->qvel[0] = 0.3;
      d->qvel[1] = 0.1;
      mj_forward(m.get(), d.get());
    } else if (name == "sliding") {
      mj_resetDataKeyframe(m.get(), d.get(), 0);
      ckSettings step = LcpSettings();
      ck = Make(m.get(), &step);
      for (int t = 0; t < 50; t++) ck_step(ck.get(), m.get(), d.get());
    } else {
      // (ck-jac-ratio's state: 23 clamped rows of rank 17 on the feet)
      for (int t = 0; t < 200; t++) mj_step(m.get(), d.get());
    }
    Extracted e(m.get());
    e.Extract(m.get(), d.get());
    Problem& p = e.p();
    auto solver = MakeLcp(e, s);
    solver->Solve(p, &e.sol());
    ASSERT_EQ(e.sol().status, ckSTATUS_SOLVED);
    bool deficient = false;
    for (int k = 0; k < p.islands.nisland; k++) {
      const Cod* cod = solver->factorization(k);
      ASSERT_NE(cod, nullptr);
      deficient |= cod->rank() < cod->n();
    }
    ASSERT_TRUE(deficient) << "no null-space term to compare";
    std::mt19937 rng(5);
    std::vector<double> stored(p.nrow), solved(p.nrow), R(p.nrow);
    for (int k = 0; k < 6; k++) {
      Perturb which;
      which.v_free = which.pos = which.vel = k < 3;
      which.J = true;
      which.M = k % 2 == 0;
      Direction dir(p, which, &rng);
      for (double& r : R) r = 1e-3 * std::uniform_real_distribution<double>(-1, 1)(rng);
      if (k == 5) dir.tangent.R = R.data();
      solver->set_null_store_rows(8);
      ASSERT_TRUE(solver->ForceTangent(p, e.sol(), dir.tangent, stored.data()));
      // (the table takes the stored map's nonzero branch, the others its zero one)
      EXPECT_EQ(solver->null_velocity_nonzero(), name == "table");
      solver->set_null_store_rows(0);
      ASSERT_TRUE(solver->ForceTangent(p, e.sol(), dir.tangent, solved.data()));
      double err = 0, scale = 0;
      for (int i = 0; i < p.nrow; i++) {
        err = std::max(err, std::fabs(stored[i] - solved[i]));
        scale = std::max(scale, std::fabs(solved[i]));
      }
      EXPECT_GT(scale, 0) << "direction " << k;
      EXPECT_LE(err, 1e-11 * scale) << "direction " << k;
    }
  }
}

// The blocked force tangents (QueueTangent, FlushTangents: dv0's tree solves, J_C dv0 and K^+ rc
// of all slots at once) are ForceTangent's bit for bit, with the directions' arrays overwritten
// between the queue and the flush (the queue keeps what it needs): on the scenes above, each
// rank deficient on one island, with the null-space velocity map stored (its weights replayed;
// the table's map nonzero) and solved per direction (its vector kept), 11 directions (the last
// block's chunks of 8 and single columns), one of them perturbing nothing
TEST_F(LcpTangentTest, BlockedTangentsAreForceTangents) {
  for (const char* scene : {"box", "table", "humanoid"}) {
    const std::string name = scene;
    SCOPED_TRACE(name);
    ModelPtr m = Scene(name);
    ASSERT_TRUE(m);
    DataPtr d(mj_makeData(m.get()));
    for (int t = 0; t < (name == "humanoid" ? 200 : 300); t++) mj_step(m.get(), d.get());
    if (name == "table") {
      d->qvel[0] = 0.3;
      d->qvel[1] = 0.1;
      mj_forward(m.get(), d.get());
    }
    Extracted e(m.get());
    e.Extract(m.get(), d.get());
    Problem& p = e.p();
    ASSERT_EQ(p.islands.nisland, 1);
    auto solver = MakeLcp(e, name == "humanoid" ? LcpSettings() : TangentSettings());
    solver->Solve(p, &e.sol());
    ASSERT_EQ(e.sol().status, ckSTATUS_SOLVED);
    ASSERT_LT(solver->factorization(0)->rank(), solver->factorization(0)->n());
    ASSERT_EQ(solver->TangentSlots(p), LcpSolver::kTangentSlots);
    const int n = 11, nrow = p.nrow;
    std::vector<double> R(nrow), blocked(static_cast<size_t>(n) * nrow), one(nrow);
    for (int store : {8, 0}) {
      SCOPED_TRACE(store);
      solver->set_null_store_rows(store);
      std::mt19937 rng(11);
      for (double& r : R) r = 1e-3 * std::uniform_real_distribution<double>(-1, 1)(rng);
      std::vector<Direction> dirs;
      dirs.reserve(n);  // (each tangent points into its own arrays)
      for (int k = 0; k < n; k++) {
        Perturb which;
        which.v_free = k % 3 != 1 || k == 4;
        which.pos = which.vel = k % 4 == 0;
        which.J = k % 2 == 1;
        which.M = k % 3 == 2 || k == 10;
        if (k == 7) which = Perturb();
        dirs.emplace_back(p, which, &rng);
        if (k == 5) dirs[k].tangent.R = R.data();
      }
      for (int k = 0; k < n; k++) ASSERT_TRUE(solver->QueueTangent(p, dirs[k].tangent, k));
      std::vector<std::vector<double>> kept;
      for (Direction& dir : dirs) {
        for (auto* v : {&dir.v_free, &dir.pos, &dir.vel, &dir.J, &dir.M, &R}) {
          kept.push_back(*v);
          std::fill(v->begin(), v->end(), std::nan(""));
        }
      }
      ASSERT_TRUE(solver->FlushTangents(p, n, blocked.data()));
      size_t at = 0;
      for (Direction& dir : dirs) {
        for (auto* v : {&dir.v_free, &dir.pos, &dir.vel, &dir.J, &dir.M, &R}) *v = kept[at++];
      }
      for (int k = 0; k < n; k++) {
        ASSERT_TRUE(solver->ForceTangent(p, e.sol(), dirs[k].tangent, one.data()));
        double scale = 0;
        for (int i = 0; i < nrow; i++) {
          EXPECT_EQ(blocked[static_cast<size_t>(k) * nrow + i], one[i]) << "direction " << k;
          scale = std::max(scale, std::fabs(one[i]));
        }
        EXPECT_EQ(scale > 0, k != 7) << "direction " << k;
      }
    }
  }
}

}  // namespace
}  // namespace contactkit::test
