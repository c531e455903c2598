// Copyright 2026 The contactkit developers.
//
// Solver "lcp" in MuJoCo scenes: exact boxed complementarity on random scenes, the symmetric
// minimum-norm answer on redundant contacts (by pivoting and by the warm-start guess), restitution,
// agreement with ipm on frictionless scenes, the guess hit rate at rest, Coulomb's closed forms
// along the friction box's axes and the sideways drift between them, inclines, equality, limit
// and friction-loss rows, the stabilization's closed form, the failure policy, the memory of
// the dense workspace, and the warm start of a pair's contacts matched by their points.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "tests/solvers/lcp/lcp_util.h"

namespace contactkit::test {
namespace {

class LcpTest : public MujocoTest {
 protected:
  struct Lowered {
    ModelPtr m;
    DataPtr d;
    HandlePtr ck;
    std::unique_ptr<Extracted> e;  // the problem at d
  };
  // the humanoid after 300 steps on the floor under s, lowered 3 mm (penetrations for the
  // position pass), and its problem there (more than six rows)
  void LowerHumanoid(const ckSettings& s, Lowered* h) {
    h->m = Load(MujocoModel("humanoid/humanoid.xml"));
    ASSERT_TRUE(h->m);
    h->d.reset(mj_makeData(h->m.get()));
    h->ck = Make(h->m.get(), &s);
    for (int t = 0; t < 300; t++) ck_step(h->ck.get(), h->m.get(), h->d.get());
    h->d->qpos[2] -= 3e-3;
    h->e = std::make_unique<Extracted>(h->m.get());
    h->e->Extract(h->m.get(), h->d.get());
    ASSERT_GT(h->e->p().nrow, 6);
  }
};

constexpr double kG = 9.81;

// a scene of free bodies of several shapes and condims dropped onto a plane in two columns
std::string RandomScene(int seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const char* types[] = {"box", "sphere", "capsule", "cylinder", "ellipsoid"};
  const int condims[] = {1, 3, 4, 6};
  std::string xml =
      "<mujoco><option timestep='0.002'/><size nconmax='200' njmax='1000'/><worldbody>"
      "<geom type='plane' size='2 2 0.1' condim='3' friction='0.6 0.01 0.001'/>";
  char buf[512];
  for (int k = 0; k < 6; k++) {
    const char* type = types[(seed + k) % 5];
    const double x = 0.15 * (k % 2) + 0.03 * (u(rng) - 0.5), y = 0.03 * (u(rng) - 0.5);
    const double z = 0.12 + 0.16 * (k / 2), a = 40 * (u(rng) - 0.5);
    std::snprintf(buf, sizeof(buf),
                  "<body pos='%g %g %g' euler='%g %g 0'><freejoint/><geom type='%s' "
                  "size='0.05 0.04 0.035' mass='%g' condim='%d' friction='%g 0.01 0.002'/></body>",
                  x, y, z, a, 0.5 * a, type, 0.3 + u(rng), condims[(seed + 2 * k) % 4],
                  0.3 + 0.6 * u(rng));
    xml += buf;
  }
  return xml + "</worldbody></mujoco>";
}

TEST_F(LcpTest, RandomScenesAreExactlyComplementary) {
  ckSettings s = LcpSettings();
  int checked = 0;
  for (int seed = 0; seed < 4; seed++) {
    ModelPtr m = LoadString(RandomScene(seed));
    ASSERT_TRUE(m);
    DataPtr d(mj_makeData(m.get()));
    HandlePtr ck = Make(m.get(), &s);
    Extracted e(m.get());
    auto solver = MakeLcp(e, s);
    for (int t = 0; t < 100; t++) ck_step(ck.get(), m.get(), d.get());  // into contact
    const int steps = TestSteps(300);
    for (int t = 0; t < steps; t++) {
      ck_step(ck.get(), m.get(), d.get());
      if (t % std::max(1, steps / 8) != 0) continue;
      e.Extract(m.get(), d.get());
      if (e.p().nrow == 0) continue;
      for (int warm = 0; warm < 2; warm++) {
        if (!warm) solver->Reset();
        solver->Solve(e.p(), &e.sol());
        EXPECT_EQ(e.sol().status, ckSTATUS_SOLVED) << "seed " << seed << " step " << t;
        EXPECT_LE(BoxedResidual(e.p(), e.sol(), *solver, s.lcp), 1e-10)
            << "seed " << seed << " step " << t << " warm " << warm;
        EXPECT_LE(e.sol().residual, 1e-10);
        checked++;
      }
    }
  }
  EXPECT_GE(checked, 40);
}

// a box resting flat on four corners: 4 normals of rank 3; the stabilized answer shares the
// load equally, whether pivoting found the classification or the previous step's guess did
TEST_F(LcpTest, BoxOnFourCornersSharesTheLoadEqually) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  d->qpos[2] = 0.1 - 2e-4;  // flat, 0.2 mm into the plane
  Extracted e(m.get());
  e.Extract(m.get(), d.get());
  Problem& p = e.p();
  ASSERT_EQ(p.ncon, 4);
  ckSettings s = LcpSettings();
  auto solver = MakeLcp(e, s);
  std::vector<double> first;
  for (int pass = 0; pass < 2; pass++) {
    solver->Solve(p, &e.sol());
    ASSERT_EQ(e.sol().status, ckSTATUS_SOLVED);
    const LcpStats* st = LcpSolverStats(solver.get());
    ASSERT_NE(st, nullptr);
    EXPECT_EQ(st->guess_tried, pass);  // pass 0: pivoting; pass 1: the guess
    EXPECT_EQ(st->guess_tried && st->guess_all_hit, pass);
    std::vector<double> fn;
    for (int c = 0; c < p.ncon; c++) fn.push_back(e.sol().force[p.con[c].row]);
    for (int c = 1; c < 4; c++) EXPECT_NEAR(fn[c], fn[0], 1e-9 * fn[0]) << "pass " << pass;
    EXPECT_GT(fn[0], 0);
    // the four carry the box: its velocity stops at zero, and the penetration beyond 1.5 slop is
    // the position pass's, straight up (split impulse: no push in the velocity)
    const double h = p.h, total = fn[0] + fn[1] + fn[2] + fn[3];
    EXPECT_NEAR(total, -p.v_free[2] / h, 1e-9 * total);
    ASSERT_NE(e.sol().position_correction, nullptr);
    const double* u = e.sol().position_correction;
    EXPECT_NEAR(u[2], s.lcp.erp * (2e-4 - 1.5 * s.lcp.slop) / h, 1e-12);
    for (int i : {0, 1, 3, 4, 5}) EXPECT_NEAR(u[i], 0, 1e-12) << i;
    if (pass == 0) first = fn;
    for (int c = 0; c < 4; c++) EXPECT_NEAR(fn[c], first[c], 1e-12 * first[c]);
  }
  // all rows clamped; the clamped system has rank 6 of 12
  for (int i = 0; i < p.nrow; i++) EXPECT_EQ(solver->classification()[i], kLcpClamped);
  ASSERT_NE(solver->factorization(0), nullptr);
  EXPECT_EQ(solver->factorization(0)->n(), 12);
  EXPECT_EQ(solver->factorization(0)->rank(), 6);
}

// match_points: a geom pair's contacts take the warm start of the previous step's contacts at
// their points, not at their places in the pair's list. A box tipped by a torque rests on its two
// +x corners while the -x corners separate; with the points of a loaded and a separating corner
// exchanged, the guess taken by points is the other corner's and misses, the one taken by place
// hits; with every point moved by 1 mm the guess taken by points still hits
TEST_F(LcpTest, MatchedPointsCarryTheGuessOfThePreviousContactThere) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  d->qpos[2] = 0.1 - 2e-4;
  d->qfrc_applied[4] = 3;  // about y: the +x corners press, the -x corners lift
  for (int swap = 0; swap < 2; swap++) {
    for (int points = 0; points < 2; points++) {
      const std::string what =
          std::string(swap ? "swapped" : "moved") + (points ? " by points" : " by place");
      Extracted e(m.get());
      e.Extract(m.get(), d.get());
      Problem& p = e.p();
      ASSERT_EQ(p.ncon, 4);
      ckSettings s = LcpSettings();
      s.lcp.match_points = points;
      auto solver = MakeLcp(e, s);
      solver->Solve(p, &e.sol());
      ASSERT_EQ(e.sol().status, ckSTATUS_SOLVED);
      int loaded = -1, lifted = -1;
      for (int c = 0; c < 4; c++) (p.con[c].pos[0] > 0 ? loaded : lifted) = c;
      ASSERT_GT(e.sol().force[p.con[loaded].row], 0) << what;
      ASSERT_EQ(e.sol().force[p.con[lifted].row], 0) << what;
      ASSERT_NE(solver->classification()[p.con[loaded].row],
                solver->classification()[p.con[lifted].row]);
      if (swap) {
        for (int k = 0; k < 3; k++) std::swap(p.con[loaded].pos[k], p.con[lifted].pos[k]);
      } else {
        for (int c = 0; c < 4; c++) p.con[c].pos[0] += 1e-3;
      }
      solver->Solve(p, &e.sol());
      ASSERT_EQ(e.sol().status, ckSTATUS_SOLVED) << what;
      const LcpStats* st = LcpSolverStats(solver.get());
      ASSERT_NE(st, nullptr);
      EXPECT_TRUE(st->guess_tried) << what;
      EXPECT_EQ(st->guess_all_hit, !(swap && points)) << what;
      EXPECT_GT(e.sol().force[p.con[loaded].row], 0) << what;
    }
  }
}

// drop the ball; the step whose solve sees the contact first is the impact
struct Bounce {
  double v_in = 0, v_out = 0, max_z_after = -1;
  bool contact_kept = true;
};
Bounce DropBall(const mjModel* m, ckHandle* ck, int after_steps) {
  DataPtr d(mj_makeData(m));
  Bounce b;
  int impact = -1;
  for (int t = 0; t < 600; t++) {
    const double vz = d->qvel[2];
    ck_step(ck, m, d.get());
    if (impact < 0 && ck_stats(ck)->ncon > 0) {
      impact = t;
      b.v_in = vz;
      b.v_out = d->qvel[2];
    } else if (impact >= 0 && t <= impact + after_steps) {
      b.max_z_after = std::max(b.max_z_after, d->qpos[2]);
      b.contact_kept = b.contact_kept && ck_stats(ck)->ncon > 0;
    }
  }
  EXPECT_GE(impact, 0);
  return b;
}

TEST_F(LcpTest, BallReboundsWithSigmaTimesItsImpactSpeed) {
  ModelPtr m = Load(BundledModel("ball_bounce.xml"));
  ASSERT_TRUE(m);
  for (double sigma : {0.3, 0.6, 0.9}) {
    ckSettings s = LcpSettings();
    s.lcp.restitution = sigma;
    HandlePtr ck = Make(m.get(), &s);
    const Bounce b = DropBall(m.get(), ck.get(), 10);
    EXPECT_LT(b.v_in, -2.5);
    EXPECT_NEAR(b.v_out, -sigma * b.v_in, 1e-6) << "sigma " << sigma;
  }

  // sigma = 0: the ball stops on the floor and stays there (contact kept, never above rest)
  ckSettings s = LcpSettings();
  HandlePtr ck = Make(m.get(), &s);
  const Bounce b = DropBall(m.get(), ck.get(), 250);
  EXPECT_LT(b.v_out, 0.05 * -b.v_in);
  EXPECT_TRUE(b.contact_kept);
  EXPECT_LE(b.max_z_after, 0.05);

  // below the threshold nothing bounces
  s.lcp.restitution = 0.9;
  s.lcp.restitution_threshold = 5;
  ck = Make(m.get(), &s);
  const Bounce slow = DropBall(m.get(), ck.get(), 250);
  EXPECT_LT(slow.v_out, 0.05 * -slow.v_in);
  EXPECT_TRUE(slow.contact_kept);
}

// erp = 1 with split impulse (the defaults): the first contact step's penetration is removed by the
// position pass, not by velocity, so a sigma = 0 ball never rises above its resting height,
// whatever depth its drop height gives the first contact; the velocity-level correction at erp 1
// turns the same depth into an outward speed of depth / h and the ball hops
TEST_F(LcpTest, SplitImpulseRemovesPenetrationWithoutAHop) {
  ModelPtr m = Load(BundledModel("ball_bounce.xml"));
  ASSERT_TRUE(m);
  const double radius = m->geom_size[3 * 1];
  ckSettings split = LcpSettings();
  ckSettings velocity = LcpSettings();
  velocity.lcp.split_impulse = 0;
  velocity.lcp.max_correction = HUGE_VAL;
  double rise_split = 0, rise_velocity = 0;
  for (int k = 0; k < TestSteps(40); k++) {
    const double z0 = 0.5 + 3e-4 * k;
    for (int variant = 0; variant < 2; variant++) {
      ckSettings s = variant ? velocity : split;
      HandlePtr ck = Make(m.get(), &s);
      DataPtr d(mj_makeData(m.get()));
      d->qpos[2] = z0;
      int impact = -1;
      double rise = 0;
      for (int t = 0; t < 400; t++) {
        ck_step(ck.get(), m.get(), d.get());
        if (impact < 0 && ck_stats(ck.get())->ncon > 0) impact = t;
        if (impact >= 0 && t > impact) rise = std::max(rise, d->qpos[2] - radius);
        if (variant == 0 && impact >= 0) {
          ASSERT_LE(d->qvel[2], 1e-9) << "z0 " << z0 << " step " << t;  // never moving up
        }
      }
      ASSERT_GE(impact, 0);
      (variant ? rise_velocity : rise_split) = std::max(variant ? rise_velocity : rise_split, rise);
    }
  }
  std::printf("largest rise after impact: split impulse %.3g m, velocity-level erp 1 %.3g m\n",
              rise_split, rise_velocity);
  EXPECT_LE(rise_split, 0);        // at or below touching: resting inside the slop band
  EXPECT_GT(rise_velocity, 1e-3);  // the hop this replaces
}

// a box started 5 mm inside the floor: the penetration is removed by positions alone, the box's
// velocity staying at rest: within one step by default (erp 1), at max_correction (m/s) when
// that is set
TEST_F(LcpTest, DeepPenetrationLeavesWithoutVelocity) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  const double depth = 5e-3, h = m->opt.timestep;
  for (double cap : {HUGE_VAL, 0.1}) {
    DataPtr d(mj_makeData(m.get()));
    d->qpos[2] = 0.1 - depth;
    ckSettings s = LcpSettings();
    s.lcp.max_correction = cap;
    HandlePtr ck = Make(m.get(), &s);
    double z = d->qpos[2];
    int steps = 0;
    while (d->qpos[2] < 0.1 - 2 * s.lcp.slop && steps < 1000) {
      ck_step(ck.get(), m.get(), d.get());
      steps++;
      EXPECT_NEAR(d->qvel[2], 0, 1e-9) << "step " << steps;
      EXPECT_LE(d->qpos[2] - z, cap * h * (1 + 1e-9)) << "step " << steps;
      z = d->qpos[2];
    }
    const double expected = std::isinf(cap) ? 1 : std::ceil((depth - 1.5 * s.lcp.slop) / (cap * h));
    EXPECT_NEAR(steps, expected, 1) << "cap " << cap;
    // resting in the band: one more second changes nothing
    for (int t = 0; t < 500; t++) ck_step(ck.get(), m.get(), d.get());
    EXPECT_NEAR(d->qpos[2], 0.1 - 1.5 * s.lcp.slop, 0.5 * s.lcp.slop) << "cap " << cap;
    EXPECT_LT(std::fabs(d->qvel[2]), 1e-9);
  }
}

// frictionless scenes: lcp (erp 1, no slop, no restitution: the gap at the end of the step) and
// ipm at a small central-path value solve the same complementarity problem
TEST_F(LcpTest, FrictionlessLcpMatchesIpm) {
  if (!ck_solverAvailable(ckSOL_IPM)) GTEST_SKIP() << "ipm is not in this build";
  const std::string xml =
      "<mujoco><option timestep='0.002'/><worldbody>"
      "<geom type='plane' size='2 2 0.1' condim='1'/>"
      "<body pos='0 0 0.06'><freejoint/><geom type='sphere' size='0.05' condim='1'/></body>"
      "<body pos='0.02 0.01 0.2'><freejoint/><geom type='sphere' size='0.06' condim='1'/></body>"
      "<body pos='0.4 0 0.1' euler='0 90 10'><freejoint/>"
      "<geom type='capsule' size='0.04 0.1' condim='1'/></body>"
      "</worldbody></mujoco>";
  ModelPtr m = LoadString(xml);
  ASSERT_TRUE(m);
  ckSettings sl = LcpSettings();
  sl.lcp.erp = 1;
  sl.lcp.split_impulse = 0;  // the gap at the end of the step in the velocity problem, as ipm's
  sl.lcp.slop = 0;
  sl.lcp.max_correction = HUGE_VAL;  // ipm's recovery_speed is lifted below: no speed cap either
  ckSettings si = Settings(ckSOL_IPM);
  si.ipm.kappa_tol = 1e-14;
  si.ipm.kappa_grad = 1e-14;
  si.ipm.residual_tol = 1e-12;
  si.ipm.rest_depth = 0;        // the same gap term as lcp's erp = 1, slop = 0:
  si.ipm.recovery_speed = 1e6;  // s = pos/h + J_n v+ without ipm's resting depth or speed cap
  HandlePtr lcp = Make(m.get(), &sl), ipm = Make(m.get(), &si);
  DataPtr d(mj_makeData(m.get())), di(mj_makeData(m.get()));
  // all 300 steps even in a quick run: the bodies touch down only after about 20 (0.05 s)
  int compared = 0;
  for (int t = 0; t < 300; t++) {
    ck_step(lcp.get(), m.get(), d.get());
    mj_copyData(di.get(), m.get(), d.get());
    ck_forward(lcp.get(), m.get(), d.get());
    ck_forward(ipm.get(), m.get(), di.get());
    ASSERT_EQ(d->nefc, di->nefc);
    for (int i = 0; i < d->nefc; i++) {
      EXPECT_NEAR(d->efc_force[i], di->efc_force[i], 1e-6) << "step " << t << " row " << i;
    }
    compared += d->nefc > 0;
  }
  EXPECT_GT(compared, 150);
}

// fraction of steps whose classification guess was accepted, over steps [from, from + n)
double HitRate(const mjModel* m, mjData* d, ckHandle* ck, int from, int n) {
  for (int t = 0; t < from; t++) ck_step(ck, m, d);
  const long long h0 = ck_totals(ck)->guess_hits, t0 = ck_totals(ck)->guess_tries;
  for (int t = 0; t < n; t++) ck_step(ck, m, d);
  const long long tries = ck_totals(ck)->guess_tries - t0;
  EXPECT_GE(tries, n * 9 / 10);
  return tries ? static_cast<double>(ck_totals(ck)->guess_hits - h0) / static_cast<double>(tries)
               : 0;
}

TEST_F(LcpTest, GuessHitRateOnARestingBoxStack) {
  const std::string xml =
      "<mujoco><option timestep='0.002'/><worldbody>"
      "<geom type='plane' size='2 2 0.1' condim='3' friction='0.6'/>"
      "<body pos='0 0 0.101'><freejoint/><geom type='box' size='0.1 0.1 0.1' mass='1'/></body>"
      "<body pos='0.01 0 0.303'><freejoint/><geom type='box' size='0.1 0.1 0.1' mass='1'/></body>"
      "<body pos='0 0.01 0.505'><freejoint/><geom type='box' size='0.08 0.08 0.1' mass='0.5'/>"
      "</body></worldbody></mujoco>";
  ModelPtr m = LoadString(xml);
  ASSERT_TRUE(m);
  ckSettings s = LcpSettings();
  HandlePtr ck = Make(m.get(), &s);
  DataPtr d(mj_makeData(m.get()));
  const double rate = HitRate(m.get(), d.get(), ck.get(), 500, TestSteps(1000));
  EXPECT_GE(rate, 0.95);
  EXPECT_GE(ck_stats(ck.get())->ncon, 12);
  EXPECT_EQ(ck_stats(ck.get())->status, ckSTATUS_SOLVED);
  std::printf("box stack guess hit rate %.4f\n", rate);
}

TEST_F(LcpTest, IslandMatrixFromBlockSolvesStepsAsRowByRow) {
  // BuildA's block solves (LcpSolver::block_rows_on_) on islands of several trees and more rows
  // than a block (the stacked primitives, a random scene of six free bodies): every step's state
  // bit for bit that of one solve per row
  ModelPtr models[2] = {Load(BundledModel("stacked_primitives.xml")), LoadString(RandomScene(3))};
  for (int k = 0; k < 2; k++) {
    const mjModel* m = models[k].get();
    ASSERT_TRUE(m);
    ckSettings s = LcpSettings();
    std::vector<double> state[2];
    int maxrows = 0;
    for (int pass = 0; pass < 2; pass++) {
      LcpSolver::block_rows_on_ = pass == 0;
      HandlePtr ck = Make(m, &s);
      DataPtr d(mj_makeData(m));
      for (int t = 0; t < 300; t++) {
        ck_step(ck.get(), m, d.get());
        maxrows = std::max(maxrows, d->nefc);
      }
      state[pass].assign(d->qpos, d->qpos + m->nq);
      state[pass].insert(state[pass].end(), d->qvel, d->qvel + m->nv);
    }
    LcpSolver::block_rows_on_ = true;
    EXPECT_GT(maxrows, 16) << "model " << k;  // (more than one block)
    EXPECT_EQ(state[0], state[1]) << "model " << k;
  }
}

TEST_F(LcpTest, GuessHitRateOnAHumanoidLyingOnTheFloor) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  ckSettings s = LcpSettings();
  HandlePtr ck = Make(m.get(), &s);
  DataPtr d(mj_makeData(m.get()));
  const double rate = HitRate(m.get(), d.get(), ck.get(), 600, TestSteps(400));  // after 3 s
  EXPECT_GE(rate, 0.95);
  EXPECT_GE(ck_stats(ck.get())->ncon, 4);
  std::printf("humanoid guess hit rate %.4f\n", rate);
}

// slide the box from v0 until it stops; returns the final displacement
std::vector<double> Slide(const mjModel* m, ckHandle* ck, double vx, double vy) {
  DataPtr d(mj_makeData(m));
  mj_resetDataKeyframe(m, d.get(), 0);
  d->qvel[0] = vx;
  d->qvel[1] = vy;
  const double x0 = d->qpos[0], y0 = d->qpos[1];
  for (int t = 0; t < 600; t++) ck_step(ck, m, d.get());
  EXPECT_LT(std::hypot(d->qvel[0], d->qvel[1]), 1e-6);
  EXPECT_LT(std::fabs(d->qpos[2] - 0.1), 1e-3);  // still upright on its face
  return {d->qpos[0] - x0, d->qpos[1] - y0};
}

// the friction box is exact along its axes (MuJoCo's frame for a +z normal: t1 = y, t2 = -x)
TEST_F(LcpTest, SlidingAlongATangentAxisStopsAtCoulombsDistance) {
  ModelPtr m = Load(BundledModel("box_sliding.xml"));
  ASSERT_TRUE(m);
  ckSettings s = LcpSettings();
  HandlePtr ck = Make(m.get(), &s);
  const double mu = 0.3, v0 = 2, want = v0 * v0 / (2 * mu * kG);
  for (int axis = 0; axis < 2; axis++) {
    const std::vector<double> dx = Slide(m.get(), ck.get(), axis == 0 ? v0 : 0, axis == 1 ? v0 : 0);
    EXPECT_NEAR(dx[axis], want, 0.01 * want) << "axis " << axis;
    EXPECT_LT(std::fabs(dx[1 - axis]), 1e-9) << "axis " << axis;
  }
}

// Between the axes the box brakes each tangent component at mu g separately (the friction force
// is mu f_n along each axis while both slide: a pyramid aligned with the contact frame, not a
// cone), so the slide bends toward the faster component and stops short of Coulomb's
// v0^2 / (2 mu g): the drift that motivates the ipm and comfree solvers.
TEST_F(LcpTest, SlidingBetweenTheAxesDriftsSideways) {
  ModelPtr m = Load(BundledModel("box_sliding.xml"));
  ASSERT_TRUE(m);
  ckSettings s = LcpSettings();
  HandlePtr ck = Make(m.get(), &s);
  const double mu = 0.3, vx = 1.2, vy = 1.6;
  const std::vector<double> dx = Slide(m.get(), ck.get(), vx, vy);
  // each component stops on its own: v^2 / (2 mu g)
  EXPECT_NEAR(dx[0], vx * vx / (2 * mu * kG), 0.02 * vx * vx / (2 * mu * kG));
  EXPECT_NEAR(dx[1], vy * vy / (2 * mu * kG), 0.02 * vy * vy / (2 * mu * kG));
  const double drift = std::atan2(dx[1], dx[0]) - std::atan2(vy, vx);
  EXPECT_GT(drift * 180 / M_PI, 5);
  const double coulomb = (vx * vx + vy * vy) / (2 * mu * kG);
  EXPECT_LT(std::hypot(dx[0], dx[1]), 0.9 * coulomb);
}

// box on an incline below its friction angle does not creep; above it accelerates at
// g (sin(theta) - mu cos(theta)) along the slope
TEST_F(LcpTest, InclineSticksBelowAndSlidesAboveTheFrictionAngle) {
  ckSettings s = LcpSettings();
  {
    ModelPtr m = Load(BundledModel("box_incline.xml"));
    ASSERT_TRUE(m);
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    for (int t = 0; t < 250; t++) ck_step(ck.get(), m.get(), d.get());  // land and settle
    const std::vector<double> q0(d->qpos, d->qpos + 3);
    for (int t = 0; t < TestSteps(2500); t++) ck_step(ck.get(), m.get(), d.get());
    const double creep = std::hypot(d->qpos[0] - q0[0], d->qpos[1] - q0[1], d->qpos[2] - q0[2]);
    EXPECT_LT(creep, 1e-8);
    EXPECT_GE(ck_stats(ck.get())->ncon, 4);
  }
  {
    ModelPtr m = Load(BundledModel("box_incline_steep.xml"));
    ASSERT_TRUE(m);
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    const double th = 35 * M_PI / 180, mu = 0.3;
    const double t[3] = {std::cos(th), 0, -std::sin(th)};  // downhill
    auto speed = [&] { return d->qvel[0] * t[0] + d->qvel[1] * t[1] + d->qvel[2] * t[2]; };
    for (int k = 0; k < 150; k++) ck_step(ck.get(), m.get(), d.get());  // land
    const double v1 = speed(), t1 = d->time;
    for (int k = 0; k < 300; k++) ck_step(ck.get(), m.get(), d.get());
    const double a = (speed() - v1) / (d->time - t1);
    const double want = kG * (std::sin(th) - mu * std::cos(th));
    EXPECT_NEAR(a, want, 0.01 * want);
  }
}

// equality rows (connect, weld, joint coupling), joint and tendon limits, friction loss
TEST_F(LcpTest, EqualityLimitAndFrictionLossRows) {
  ckSettings s = LcpSettings();
  {
    ModelPtr m = Load(BundledModel("mechanism.xml"));
    ASSERT_TRUE(m);
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    const int a = mj_name2id(m.get(), mjOBJ_JOINT, "gear_a_hinge");
    const int b = mj_name2id(m.get(), mjOBJ_JOINT, "gear_b_hinge");
    double worst = 0;
    for (int t = 0; t < TestSteps(1000); t++) {
      ck_step(ck.get(), m.get(), d.get());
      ASSERT_EQ(ck_stats(ck.get())->status, ckSTATUS_SOLVED) << t;
      worst =
          std::max(worst, std::fabs(d->qpos[m->jnt_qposadr[b]] - 0.5 * d->qpos[m->jnt_qposadr[a]]));
    }
    EXPECT_LT(worst, 1e-4);
  }
  {
    ModelPtr m = Load(BundledModel("joint_friction_limits.xml"));
    ASSERT_TRUE(m);
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    Extracted e(m.get());
    auto solver = MakeLcp(e, s);
    for (int t = 0; t < TestSteps(2000); t++) {
      ck_step(ck.get(), m.get(), d.get());
      ASSERT_EQ(ck_stats(ck.get())->status, ckSTATUS_SOLVED) << t;
      for (int i = 0; i < d->nefc; i++) {
        if (d->efc_type[i] == mjCNSTR_FRICTION_DOF || d->efc_type[i] == mjCNSTR_FRICTION_TENDON) {
          EXPECT_LE(std::fabs(d->efc_force[i]), d->efc_frictionloss[i] * (1 + 1e-12));
        }
      }
      if (t % 200 == 0) {
        e.Extract(m.get(), d.get());
        solver->Solve(e.p(), &e.sol());
        EXPECT_LE(BoxedResidual(e.p(), e.sol(), *solver, s.lcp), 1e-10) << t;
      }
    }
    // the arm rests on its 60 degree limit and the slider on its 0.3 m limit (slop inside)
    const int hinge = mj_name2id(m.get(), mjOBJ_JOINT, "hinge");
    const int slide = mj_name2id(m.get(), mjOBJ_JOINT, "slide");
    EXPECT_NEAR(d->qpos[m->jnt_qposadr[hinge]], M_PI / 3, 2 * s.lcp.slop);
    EXPECT_NEAR(d->qpos[m->jnt_qposadr[slide]], 0.3, 2 * s.lcp.slop);
  }
}

// one frictionless contact: x = -(b0 + erp (pos + slop) / h) / (A + cfm) in closed form
TEST_F(LcpTest, StabilizationAndCfmClosedForm) {
  const std::string xml =
      "<mujoco><option timestep='0.002'/><worldbody><geom type='plane' size='1 1 0.1' condim='1'/>"
      "<body pos='0 0 0.049'><freejoint/><geom type='sphere' size='0.05' mass='2' condim='1'/>"
      "</body></worldbody></mujoco>";
  ModelPtr m = LoadString(xml);
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  Extracted e(m.get());
  e.Extract(m.get(), d.get());
  ASSERT_EQ(e.p().nrow, 1);
  for (double erp : {0.2, 0.5, 1.0}) {
    for (double cfm : {0.0, 0.1}) {
      ckSettings s = LcpSettings();
      s.lcp.erp = erp;
      s.lcp.split_impulse = 0;  // the velocity-level correction's closed form
      s.lcp.cfm = cfm;
      s.lcp.slop = 2e-4;
      s.lcp.max_correction = HUGE_VAL;  // the closed form has no cap (erp 1 asks for 0.4 m/s here)
      auto solver = MakeLcp(e, s);
      solver->Solve(e.p(), &e.sol());
      const double h = e.p().h, pos = -1e-3;
      const double b = e.p().v_free[2] + erp * (pos + 2e-4) / h;
      const double x = -b / (1.0 / 2 + cfm);
      EXPECT_NEAR(e.p().pos[0], pos, 1e-12);
      EXPECT_NEAR(h * e.sol().force[0], x, 1e-12) << "erp " << erp << " cfm " << cfm;
      EXPECT_NEAR(e.sol().v_next[2], e.p().v_free[2] + x / 2, 1e-12);
    }
  }
  // the correction speed is capped: in the velocity (split_impulse = 0), or in the position
  // correction, which leaves the velocity at rest (split impulse, the default)
  ckSettings s = LcpSettings();
  s.lcp.erp = 1;
  s.lcp.slop = 0;
  s.lcp.max_correction = 0.1;
  s.lcp.split_impulse = 0;
  auto solver = MakeLcp(e, s);
  solver->Solve(e.p(), &e.sol());
  EXPECT_NEAR(e.sol().v_next[2], 0.1, 1e-12);
  EXPECT_EQ(e.sol().position_correction, nullptr);
  s.lcp.split_impulse = 1;
  solver = MakeLcp(e, s);
  solver->Solve(e.p(), &e.sol());
  EXPECT_NEAR(e.sol().v_next[2], 0, 1e-12);
  ASSERT_NE(e.sol().position_correction, nullptr);
  EXPECT_NEAR(e.sol().position_correction[2], 0.1, 1e-12);
}

// no exact answer within the limits: the best answer is kept, the status says so, the pipeline
// warns once, nothing is NaN. Single contacts per convex pair, as on every MuJoCo before 3.8:
// with MuJoCo 3.12's multi-contact patches (a resting cylinder gets 5 points at one depth,
// 1 from 3.13) the crippled solver gains energy until MuJoCo resets the state (see docs/solvers.md)
TEST_F(LcpTest, FailureKeepsTheBestAnswerAndWarns) {
  ModelPtr m = Load(BundledModel("stacked_primitives.xml"));
  ASSERT_TRUE(m);
#if mjVERSION_HEADER >= 3008000
  m->opt.disableflags |= mjDSBL_MULTICCD;
#endif
  ckSettings s = LcpSettings();
  s.lcp.max_pivots = 1;
  s.lcp.pgs_iter = 2;
  HandlePtr ck = Make(m.get(), &s);
  DataPtr d(mj_makeData(m.get()));
  int failed = 0;
  for (int t = 0; t < 300; t++) {
    ck_step(ck.get(), m.get(), d.get());
    failed += ck_stats(ck.get())->status != ckSTATUS_SOLVED;
  }
  EXPECT_GT(failed, 0);
  for (int i = 0; i < m->nv; i++) ASSERT_TRUE(std::isfinite(d->qvel[i]));
  EXPECT_EQ(TakeWarnings("best iterate kept"), 1);
}

// A mat of 12 hinged boxes (one tree, so one island of over 100 rows: four contacts of three
// rows per box) dropped flat: the large-island path (Gauss-Seidel from the previous impulses, an
// exact solve of its classification, pivots within the work budget) keeps every solve exactly
// complementary, or says that the budget ran out; with a budget too small for the pivots, the
// inexact solves say so too, and the state stays finite
TEST_F(LcpTest, LargeIslandIsExactOrReportsItsBudget) {
  std::string xml =
      "<mujoco><option timestep='0.002'/><size nconmax='200' njmax='1000'/><worldbody>"
      "<geom type='plane' size='3 3 0.1' condim='3' friction='0.7'/>"
      "<body pos='0 0 0.03' euler='3 2 0'><freejoint/>"
      "<geom type='box' size='0.05 0.05 0.02' mass='0.2'/>";
  char buf[256];
  for (int k = 1; k < 12; k++) {
    std::snprintf(buf, sizeof(buf),
                  "<body pos='0.1 0 0'><joint type='hinge' axis='0 1 0' pos='-0.05 0 0' "
                  "damping='0.01'/><geom type='box' size='0.05 0.05 0.02' mass='%g'/>",
                  0.1 + 0.02 * k);
    xml += buf;
  }
  for (int k = 0; k < 12; k++) xml += "</body>";
  xml += "</worldbody></mujoco>";
  ModelPtr m = LoadString(xml);
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  auto run = [&](const ckSettings& s, int steps, int* large, int* solved) {
    HandlePtr ck = Make(m.get(), &s);
    *large = *solved = 0;
    for (int t = 0; t < steps; t++) {
      ck_step(ck.get(), m.get(), d.get());
      const ckStats* st = ck_stats(ck.get());
      if (st->nisland != 1 || st->nrow <= 100) continue;
      ckSolverInfo info;
      ASSERT_EQ(ck_solverInfo(ck.get(), &info), 0);
      (*large)++;
      if (st->status == ckSTATUS_SOLVED) {
        (*solved)++;
        EXPECT_LE(st->residual, 1e-9) << "step " << t;
      } else {
        EXPECT_GT(info.lcp_budget_spent, 0) << "step " << t << ": inexact, budget not reported";
      }
    }
    for (int i = 0; i < m->nv; i++) ASSERT_TRUE(std::isfinite(d->qvel[i]));
  };
  ckSettings s = LcpSettings();
  int large, solved;
  // all 400 steps even in quick runs: the first tens, while the mat lands, are the hard ones (36
  // large solves of a quick run under the sanitizers: 21 exact)
  run(s, 400, &large, &solved);
  std::printf("mat: %d solves of one island over 100 rows, %d exact\n", large, solved);
  EXPECT_GT(large, 200);
  EXPECT_GE(solved, 0.9 * large);

  // no guess and a budget of a few sweeps: inexact, and said so (from the start again: the
  // mat at rest after 400 steps can be exact within it, as on 2.2.2 since lcp18's path)
  mj_resetData(m.get(), d.get());
  s.warmstart = 0;
  s.lcp.max_work = 0.5;
  run(s, 20, &large, &solved);
  std::printf("budget of a few sweeps: %d large solves, %d exact\n", large, solved);
  EXPECT_GT(large, 10);
  EXPECT_LT(solved, large);
  EXPECT_GE(TakeWarnings("best iterate kept"), 1);
}

// an island whose answer is not exact is factored only when a tangent asks (the forward step
// skips that decomposition): none before, one of its clamped set after, and the same tangent
// from it on every later call
TEST_F(LcpTest, InexactIslandIsFactoredWhenATangentAsks) {
  ckSettings s = LcpSettings();
  Lowered h;
  LowerHumanoid(s, &h);
  ASSERT_TRUE(h.e);
  Extracted& e = *h.e;
  // no guess and almost no budget: inexact
  s.warmstart = 0;
  s.lcp.max_work = 1e-6;
  auto solver = MakeLcp(e, s);
  solver->Solve(e.p(), &e.sol());
  ASSERT_NE(e.sol().status, ckSTATUS_SOLVED) << "exact anyway: the test does not test it";
  TakeWarnings("best iterate kept");
  const Islands& is = e.p().islands;
  for (int k = 0; k < is.nisland; k++) EXPECT_EQ(solver->factorization(k), nullptr) << k;

  const int nv = h.m->nv, nrow = e.p().nrow;
  std::vector<double> dv(nv), df1(nrow), df2(nrow);
  for (int i = 0; i < nv; i++) dv[i] = std::sin(1.0 + i);
  ProblemTangent dir;
  dir.v_free = dv.data();
  ASSERT_TRUE(solver->ForceTangent(e.p(), e.sol(), dir, df1.data()));
  double scale = 0;
  for (int i = 0; i < nrow; i++) {
    ASSERT_TRUE(std::isfinite(df1[i])) << "row " << i;
    scale = std::max(scale, std::fabs(df1[i]));
  }
  EXPECT_GT(scale, 0);
  for (int k = 0; k < is.nisland; k++) {
    ASSERT_NE(solver->factorization(k), nullptr) << k;
    int clamped = 0;  // the order of the reduced system: the island's clamped rows
    for (int j = 0; j < is.nrows[k]; j++) {
      clamped += solver->classification()[is.rows[is.rowadr[k] + j]] == kLcpClamped;
    }
    EXPECT_EQ(solver->factorization(k)->n(), clamped) << k;
  }
  ASSERT_TRUE(solver->ForceTangent(e.p(), e.sol(), dir, df2.data()));
  for (int i = 0; i < nrow; i++) EXPECT_EQ(df1[i], df2[i]) << "row " << i;
}

// islands above max_island_rows are solved by Gauss-Seidel on velocities, within the bounds
TEST_F(LcpTest, IslandsAboveTheDenseLimitGetGaussSeidel) {
  ckSettings s = LcpSettings();
  Lowered h;
  LowerHumanoid(s, &h);
  ASSERT_TRUE(h.e);
  Extracted& e = *h.e;
  s.lcp.max_island_rows = 4;
  s.lcp.pgs_iter = 2000;

  auto small = MakeLcp(e, s);
  small->Solve(e.p(), &e.sol());
  EXPECT_NE(e.sol().status, ckSTATUS_SOLVED);
  EXPECT_EQ(small->factorization(0), nullptr);
  std::vector<double> dummy(e.p().nrow);
  EXPECT_FALSE(small->ForceTangent(e.p(), e.sol(), ProblemTangent(), dummy.data()));
  // close to the exact answer of the dense solver: the velocity after the step (unique; the
  // forces of redundant contacts are not) and the position correction
  const int nv = h.m->nv;
  std::vector<double> v(e.sol().v_next, e.sol().v_next + nv);
  ASSERT_NE(e.sol().position_correction, nullptr);
  std::vector<double> u(e.sol().position_correction, e.sol().position_correction + nv);
  s.lcp.max_island_rows = 400;
  auto dense = MakeLcp(e, s);
  dense->Solve(e.p(), &e.sol());
  ASSERT_EQ(e.sol().status, ckSTATUS_SOLVED);
  ASSERT_NE(e.sol().position_correction, nullptr);
  double err = 0, scale = 0, uerr = 0, uscale = 0;
  for (int i = 0; i < nv; i++) {
    err = std::max(err, std::fabs(v[i] - e.sol().v_next[i]));
    scale = std::max(scale, std::fabs(e.sol().v_next[i] - e.p().v_free[i]));
    uerr = std::max(uerr, std::fabs(u[i] - e.sol().position_correction[i]));
    uscale = std::max(uscale, std::fabs(e.sol().position_correction[i]));
  }
  std::printf(
      "Gauss-Seidel against the dense solve: velocity %.3g of %.3g, position %.3g of %.3g\n", err,
      scale, uerr, uscale);
  EXPECT_LT(err, 0.05 * scale);
  EXPECT_LT(uerr, 0.05 * uscale);
}

// A chain of 12 spheres joined by ball joints (equality connects: 33 bilateral rows) dropped
// onto a plane: once they touch, one island of 60-69 rows, solved through the Schur complement
// of its bilateral rows (schur_rows). Every such step is exactly complementary and follows the
// direct solve (schur_rows 0), and the transition Jacobian, from the island's factorization made
// on request, is the direct path's
TEST_F(LcpTest, SchurComplementOfEqualityRowsMatchesTheDirectSolve) {
  std::string xml =
      "<mujoco><option timestep='0.002'/><size nconmax='100' njmax='500'/><worldbody>"
      "<geom type='plane' size='3 3 0.1' condim='3' friction='0.8'/>";
  char buf[256];
  for (int k = 0; k < 12; k++) {
    std::snprintf(buf, sizeof(buf),
                  "<body name='s%d' pos='%g 0 %g'><freejoint/><geom type='sphere' size='0.04' "
                  "mass='%g'/></body>",
                  k, 0.1 * k, 0.045 + 0.002 * (k % 3), 0.1 + 0.01 * k);
    xml += buf;
  }
  xml += "</worldbody><equality>";
  for (int k = 0; k + 1 < 12; k++) {
    std::snprintf(buf, sizeof(buf), "<connect body1='s%d' body2='s%d' anchor='0.05 0 0'/>", k,
                  k + 1);
    xml += buf;
  }
  xml += "</equality></mujoco>";
  ModelPtr m = LoadString(xml);
  ASSERT_TRUE(m);
  ckSettings s = LcpSettings();
  ckSettings plain = s;
  plain.lcp.schur_rows = 0;
  ASSERT_GT(s.lcp.schur_rows, 0);
  HandlePtr ck = Make(m.get(), &s), ck0 = Make(m.get(), &plain);
  DataPtr d(mj_makeData(m.get())), d0(mj_makeData(m.get()));
  int large = 0, exact = 0;
  double drift = 0;
  for (int t = 0; t < 300; t++) {
    ck_step(ck.get(), m.get(), d.get());
    ck_step(ck0.get(), m.get(), d0.get());
    const ckStats* st = ck_stats(ck.get());
    for (int i = 0; i < m->nq; i++) drift = std::max(drift, std::fabs(d->qpos[i] - d0->qpos[i]));
    if (st->nrow < 60) continue;
    large++;
    if (st->status == ckSTATUS_SOLVED) {
      exact++;
      EXPECT_LE(st->residual, 1e-9) << "step " << t;
    }
  }
  std::printf(
      "sphere chain: %d steps with an island of 60 rows or more, %d exact; largest |dq| %.1e\n",
      large, exact, drift);
  EXPECT_GT(large, 200) << "the chain never rested: the test does not test the Schur path";
  EXPECT_EQ(exact, large);
  EXPECT_LE(drift, 1e-8);

  const int nx = 2 * m->nv + m->na, nu = m->nu;
  std::vector<mjtNum> A(nx * nx), A0(nx * nx), B(nx * std::max(nu, 1)), B0(B.size());
  // (on MuJoCo 3.x some columns are taken by differences, 1: the same on both paths)
  const int ret =
      ck_transitionJac(ck.get(), m.get(), d.get(), A.data(), B.data(), nullptr, nullptr);
  const int ret0 =
      ck_transitionJac(ck0.get(), m.get(), d.get(), A0.data(), B0.data(), nullptr, nullptr);
  ASSERT_GE(ret, 0);
  EXPECT_EQ(ret, ret0);
  double scale = 0, diff = 0;
  for (int i = 0; i < nx * nx; i++) {
    scale = std::max(scale, std::fabs(A0[i]));
    diff = std::max(diff, std::fabs(A[i] - A0[i]));
  }
  EXPECT_GT(scale, 0);
  // (a lifted sphere's friction rows, collapsed at zero, may sit at either bound: 1e-5 measured)
  EXPECT_LE(diff, 1e-4 * scale);
}

// a grid of nx x ny point masses (three slides each, damped) held by spatial tendons of fixed
// length to their neighbours, pinned at its four corners: MuJoCo's composite hammock without the
// humanoid (no contacts). The grid starts flat and taut, so its tendons are redundant around the
// pinned corners and their drifts under gravity conflict
std::string TendonGrid(int nx, int ny) {
  std::string xml = "<mujoco><option timestep='0.005'/><size njmax='500' nconmax='10'/><worldbody>";
  std::string tendons, equality;
  char buf[512];
  for (int i = 0; i < nx; i++) {
    for (int j = 0; j < ny; j++) {
      const bool pin = (i == 0 || i == nx - 1) && (j == 0 || j == ny - 1);
      std::snprintf(buf, sizeof(buf), "<body pos='%g %g 0'>", 0.2 * i, 0.2 * j);
      xml += buf;
      if (!pin) {
        for (const char* axis : {"1 0 0", "0 1 0", "0 0 1"}) {
          xml += std::string("<joint type='slide' damping='10' axis='") + axis + "'/>";
        }
      }
      std::snprintf(buf, sizeof(buf),
                    "<geom type='sphere' size='0.045' mass='0.1' contype='0' conaffinity='0'/>"
                    "<site name='s%d_%d'/></body>",
                    i, j);
      xml += buf;
      for (int d = 0; d < 2; d++) {
        const int i1 = i + (d == 0), j1 = j + (d == 1);
        if (i1 == nx || j1 == ny) continue;
        std::snprintf(buf, sizeof(buf),
                      "<spatial name='t%d_%d_%d'><site site='s%d_%d'/><site site='s%d_%d'/>"
                      "</spatial>",
                      i, j, d, i, j, i1, j1);
        tendons += buf;
        std::snprintf(buf, sizeof(buf), "<tendon tendon1='t%d_%d_%d'/>", i, j, d);
        equality += buf;
      }
    }
  }
  return xml + "</worldbody><tendon>" + tendons + "</tendon><equality>" + equality +
         "</equality></mujoco>";
}

// Equality rows do no work: the exact answers with their Baumgarte correction (erp pos / h) must
// not pump energy into the damped tendon grid, whose redundant rows ask conflicting correction
// speeds (before: +4 to +8 J over 600 steps at these timesteps, as the hammock's that diverged)
TEST_F(LcpTest, RedundantEqualityRowsAddNoEnergy) {
  ModelPtr m = LoadString(TendonGrid(7, 6));
  ASSERT_TRUE(m);
  ASSERT_EQ(m->neq, 71);  // (above sweep_rows: the Schur path, without other rows)
  m->opt.enableflags |= mjENBL_ENERGY;
  const int nv = m->nv;
  DataPtr e(mj_makeData(m.get()));
  // kinetic energy and potential of gravity of a state (MuJoCo's energy, on a scratch mjData)
  auto energy = [&](const mjData* d) {
    mju_copy(e->qpos, d->qpos, m->nq);
    mju_copy(e->qvel, d->qvel, nv);
    mj_forward(m.get(), e.get());
    return e->energy[0] + e->energy[1];
  };
  for (int k = 0; k < 6; k++) {
    const double h = 0.0049 + 0.0001 * (k % 3);
    ckSettings s = LcpSettings();
    if (k >= 3) s.lcp.schur_rows = 0;  // the direct path
    SCOPED_TRACE(testing::Message() << "h " << h << " schur_rows " << s.lcp.schur_rows);
    m->opt.timestep = h;
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    const double e0 = energy(d.get());
    std::vector<mjtNum> v0(nv);
    // drift: energy beyond the start's plus the damping's work (each step's passive force times
    // its mean velocity), largest over the run; stretch: largest tendon length error
    double work = 0, drift = 0, stretch = 0, lowest = 0;
    for (int t = 0; t < 600; t++) {
      mju_copy(v0.data(), d->qvel, nv);
      ck_step(ck.get(), m.get(), d.get());
      for (int i = 0; i < nv; i++) work += h * d->qfrc_passive[i] * 0.5 * (v0[i] + d->qvel[i]);
      drift = std::max(drift, energy(d.get()) - e0 - work);
      for (int k = 0; k < m->ntendon; k++) {
        stretch = std::max(stretch, std::fabs(e->ten_length[k] - m->tendon_length0[k]));
      }
      for (int b = 1; b < m->nbody; b++) lowest = std::min(lowest, e->xpos[3 * b + 2]);
      ASSERT_EQ(ck_stats(ck.get())->status, ckSTATUS_SOLVED) << "step " << t;
    }
    std::printf(
        "h = %g, schur_rows %d: energy drift %.3g J, largest stretch %.3g m, lowest point %.3g m\n",
        h, s.lcp.schur_rows, drift, stretch, lowest);
    EXPECT_LE(drift, 0.01);
    // the drift is still corrected: the grid hangs by its tendons, stretched a little
    EXPECT_LE(stretch, 1e-3);
    EXPECT_GE(lowest, -0.2);
  }
}

// The dense workspace is sized at ck_make for the largest island (max_island_rows = 400: about
// 39 400^2 doubles, 50 MB, of which Lemke's tableau 18 400^2), but holds memory only for the
// islands solved: eight boxes resting apart (islands of 12 rows) must not cost those 50 MB
TEST_F(LcpTest, DenseWorkspaceHoldsMemoryOnlyForTheIslandsSolved) {
  std::string xml =
      "<mujoco><option timestep='0.002'/><size nconmax='400' njmax='2400'/><worldbody>"
      "<geom type='plane' size='5 5 0.1' condim='3' friction='0.6'/>";
  for (int k = 0; k < 8; k++) {
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "<body pos='%g 0 0.12'><freejoint/><geom type='box' size='0.1 0.1 0.1' "
                  "mass='1'/></body>",
                  0.5 * k);
    xml += buf;
  }
  ModelPtr m = LoadString(xml + "</worldbody></mujoco>");
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  ckSettings s = LcpSettings();
  ASSERT_EQ(s.lcp.max_island_rows, 400);
  const long before = ResidentBytes();
  ASSERT_GT(before, 0);
  HandlePtr ck = Make(m.get(), &s);
  for (int t = 0; t < 100; t++) ck_step(ck.get(), m.get(), d.get());
  const long grown = ResidentBytes() - before;
  EXPECT_EQ(ck_stats(ck.get())->status, ckSTATUS_SOLVED);
  EXPECT_GE(ck_stats(ck.get())->ncon, 32);  // every box on its four corners
  std::printf("resident memory of the lcp handle after 100 steps: %.1f MB\n", grown / 1048576.0);
  EXPECT_LT(grown, 8l << 20);
}

}  // namespace
}  // namespace contactkit::test
