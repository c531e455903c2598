// Copyright 2026 The contactkit developers.
//
// ck_rolloutGrad: the reverse-mode gradient of a rollout's loss against centered differences of
// the same loss (initial state and every control), for every solver; its value and final state
// equal those of plain steps; the tape is reused without allocation; bad input is refused.
// ck_rolloutGradParam: dL/dp against centered differences of the loss in each model parameter.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

// L = sum_t 0.5 |qvel_t|^2 + w . (positions of slide and hinge joints, a free joint's translation)
// (+ 0.5 sensor |s_t|^2 with the sensors' weight sensor)
struct Loss {
  std::vector<double> w;  // weight of each dof's position (zero for rotations of free and ball)
  double sensor = 0;      // weight of the sensors' squares
  static mjtNum Eval(void* user, int, const mjModel* m, const mjData* d, mjtNum* dx, mjtNum* ds) {
    const Loss& l = *static_cast<const Loss*>(user);
    double value = 0;
    for (int i = 0; l.sensor && i < m->nsensordata; i++) {
      value += 0.5 * l.sensor * d->sensordata[i] * d->sensordata[i];
      ds[i] = l.sensor * d->sensordata[i];
    }
    for (int j = 0; j < m->njnt; j++) {
      const int q = m->jnt_qposadr[j], v = m->jnt_dofadr[j];
      const int n = m->jnt_type[j] == mjJNT_FREE ? 3 : m->jnt_type[j] == mjJNT_BALL ? 0 : 1;
      for (int i = 0; i < n; i++) {
        value += l.w[v + i] * d->qpos[q + i];
        dx[v + i] = l.w[v + i];
      }
    }
    for (int i = 0; i < m->nv; i++) {
      value += 0.5 * d->qvel[i] * d->qvel[i];
      dx[m->nv + i] = d->qvel[i];
    }
    return value;
  }
};

// the loss of nstep plain steps from d0 with controls ctrl, the handle reset first
double Rollout(ckHandle* ck, const mjModel* m, const mjData* d0, mjData* d,
               const std::vector<double>& ctrl, Loss* loss, int nstep) {
  mj_copyData(d, m, d0);
  ck_reset(ck);
  std::vector<double> dx(2 * m->nv + m->na), ds(m->nsensordata + 1);
  double value = 0;
  for (int t = 0; t < nstep; t++) {
    mju_copy(d->ctrl, ctrl.data() + t * m->nu, m->nu);
    ck_step(ck, m, d);
    value += Loss::Eval(loss, t, m, d, dx.data(), ds.data());
  }
  return value;
}

// a scene, its solvers' settings and the tolerance of the gradient against differences
struct Scene {
  const char* model;
  const char* key;  // keyframe (null: qpos0)
  int settle;       // mj_steps from it with the rollout's first controls before the rollout
  int nstep;
};

std::vector<int> Solvers() {
  std::vector<int> out;
  for (int s = 0; s < ckNSOLVER; s++) {
    if (ck_solverAvailable(s)) out.push_back(s);
  }
  return out;
}

class RolloutGradTest : public MujocoTest {
 protected:
  // the reverse-mode gradient against centered differences of the loss, for x0 and every control
  // (integrator: ck_step's, adaptive ones at a tolerance below the differences' resolution)
  void CheckAgainstDifferences(const Scene& scene, int solver, double tol,
                               int integrator = ckINT_MODEL);
  // dL/dp of ck_rolloutGradParam against centered differences of the loss in each parameter
  void CheckParams(const Scene& scene, int solver, const std::vector<std::string>& names,
                   const std::vector<int>& expect, double tol);
};

void RolloutGradTest::CheckAgainstDifferences(const Scene& scene, int solver, double tol,
                                              int integrator) {
  ModelPtr m = Load(BundledModel(scene.model));
  ASSERT_TRUE(m);
  const int nv = m->nv, nu = m->nu, ndx = 2 * nv + m->na, T = scene.nstep;
  DataPtr d0(mj_makeData(m.get())), d(mj_makeData(m.get()));
  if (scene.key) mj_resetDataKeyframe(m.get(), d0.get(), mj_name2id(m.get(), mjOBJ_KEY, scene.key));
  for (int i = 0; i < nu; i++) {
    const double lo = m->actuator_ctrlrange[2 * i], hi = m->actuator_ctrlrange[2 * i + 1];
    d0->ctrl[i] = lo + (hi - lo) * (0.5 + 0.3 * std::sin(i));
  }
  Settle(m.get(), d0.get(), scene.settle);
  mj_forward(m.get(), d0.get());
  ckSettings s = Settings(solver);
  s.ipm.kappa_grad = s.ipm.kappa_tol;  // the exact derivative of ipm's step
  s.comfree.anchor = 0;                // anchors are refused (their history is not differentiated)
  s.integrator = integrator;
  s.adaptive.rtol = s.adaptive.atol = 1e-10;
  HandlePtr ck = Make(m.get(), &s);
  ASSERT_TRUE(ck);
  Loss loss;
  for (int i = 0; i < nv; i++) loss.w.push_back(std::cos(1.0 + 2 * i));
  std::vector<double> ctrl(T * nu);
  for (int t = 0; t < T; t++) {
    for (int i = 0; i < nu; i++) {
      const double lo = m->actuator_ctrlrange[2 * i], hi = m->actuator_ctrlrange[2 * i + 1];
      ctrl[t * nu + i] = lo + (hi - lo) * (0.5 + 0.3 * std::sin(0.1 * t + i));
    }
  }

  // the gradient, its value and its final state against plain steps
  std::vector<double> gx(ndx), gu(T * nu);
  double value = 0;
  mj_copyData(d.get(), m.get(), d0.get());
  ck_reset(ck.get());
  const int ret = ck_rolloutGrad(ck.get(), m.get(), d.get(), T, ctrl.data(), &Loss::Eval, &loss,
                                 &value, gx.data(), gu.data());
  ASSERT_EQ(0, ret) << ck_lastError(ck.get());
  std::vector<double> qpos(d->qpos, d->qpos + m->nq);
  const double plain = Rollout(ck.get(), m.get(), d0.get(), d.get(), ctrl, &loss, T);
  EXPECT_EQ(plain, value) << ck_solverName(solver);
  EXPECT_EQ(0, std::memcmp(qpos.data(), d->qpos, sizeof(double) * m->nq)) << ck_solverName(solver);

  // centered differences: controls, then the initial state in the tangent space
  const double eps = 1e-6;
  std::vector<double> fu(T * nu), fx(ndx);
  for (int k = 0; k < T * nu; k++) {
    std::vector<double> c = ctrl;
    c[k] = ctrl[k] + eps;
    const double lp = Rollout(ck.get(), m.get(), d0.get(), d.get(), c, &loss, T);
    c[k] = ctrl[k] - eps;
    const double lm = Rollout(ck.get(), m.get(), d0.get(), d.get(), c, &loss, T);
    fu[k] = (lp - lm) / (2 * eps);
  }
  DataPtr x0(mj_makeData(m.get()));
  for (int k = 0; k < ndx; k++) {
    double l[2];
    for (int side = 0; side < 2; side++) {
      mj_copyData(x0.get(), m.get(), d0.get());
      const double e = side ? -eps : eps;
      if (k < nv) {
        std::vector<double> dq(nv, 0.0);
        dq[k] = 1;
        mj_integratePos(m.get(), x0->qpos, dq.data(), e);
      } else if (k < 2 * nv) {
        x0->qvel[k - nv] += e;
      } else {
        x0->act[k - 2 * nv] += e;
      }
      l[side] = Rollout(ck.get(), m.get(), x0.get(), d.get(), ctrl, &loss, T);
    }
    fx[k] = (l[0] - l[1]) / (2 * eps);
  }
  // ipm's own step Jacobian in contact is off by up to 1e-2 (docs/derivatives.md); the sweep
  // itself is checked against the chained Jacobians below
  const double tol_x = solver == ckSOL_IPM ? HUGE_VAL : tol;
  if (solver == ckSOL_IPM) tol = 1e-2;
  EXPECT_LT(RelativeError(gu, fu), tol) << scene.model << " " << ck_solverName(solver) << " dL/du\n"
                                        << WorstEntries(m.get(), gu, fu, nu);
  EXPECT_LT(RelativeError(gx, fx), tol_x)
      << scene.model << " " << ck_solverName(solver) << " dL/dx0\n"
      << WorstEntries(m.get(), gx, fx, ndx);
  std::printf("%s %s: relative error dL/du %.2e, dL/dx0 %.2e\n", scene.model, ck_solverName(solver),
              RelativeError(gu, fu), RelativeError(gx, fx));
}

// the gradient of the sweep against the chained transposed Jacobians of ck_transitionJac at the
// same states: the sweep's algebra, whatever the accuracy of each step's Jacobian
TEST_F(RolloutGradTest, SweepEqualsChainedJacobians) {
  ModelPtr m = Load(BundledModel("hopper.xml"));
  ASSERT_TRUE(m);
  const int nv = m->nv, nu = m->nu, ndx = 2 * nv + m->na, T = 30;
  for (int solver : Solvers()) {
    ckSettings s = Settings(solver);
    s.comfree.anchor = 0;
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d0(mj_makeData(m.get())), d(mj_makeData(m.get()));
    Settle(m.get(), d0.get(), 50);
    Loss loss;
    for (int i = 0; i < nv; i++) loss.w.push_back(std::sin(0.5 + i));
    std::vector<double> ctrl(T * nu);
    for (int k = 0; k < T * nu; k++) ctrl[k] = 0.4 * std::cos(0.3 * k);

    // the states of the rollout, each step's Jacobians and the loss's gradient after it
    mj_copyData(d.get(), m.get(), d0.get());
    ck_reset(ck.get());
    std::vector<Jacobians> jac(T, Jacobians(m.get()));
    std::vector<double> dx(T * ndx), ds(m->nsensordata + 1);
    for (int t = 0; t < T; t++) {
      mju_copy(d->ctrl, ctrl.data() + t * nu, nu);
      ASSERT_GE(ck_transitionJac(ck.get(), m.get(), d.get(), jac[t].A.data(), jac[t].B.data(),
                                 nullptr, nullptr),
                0);
      ck_step(ck.get(), m.get(), d.get());
      Loss::Eval(&loss, t, m.get(), d.get(), dx.data() + t * ndx, ds.data());
    }
    std::vector<double> a(ndx, 0.0), next(ndx), cu(T * nu);
    for (int t = T - 1; t >= 0; t--) {
      for (int i = 0; i < ndx; i++) a[i] += dx[t * ndx + i];
      for (int j = 0; j < nu; j++) {
        cu[t * nu + j] = 0;
        for (int i = 0; i < ndx; i++) cu[t * nu + j] += jac[t].B[i * nu + j] * a[i];
      }
      for (int j = 0; j < ndx; j++) {
        next[j] = 0;
        for (int i = 0; i < ndx; i++) next[j] += jac[t].A[i * ndx + j] * a[i];
      }
      a = next;
    }

    std::vector<double> gx(ndx), gu(T * nu);
    mj_copyData(d.get(), m.get(), d0.get());
    ck_reset(ck.get());
    ASSERT_GE(ck_rolloutGrad(ck.get(), m.get(), d.get(), T, ctrl.data(), &Loss::Eval, &loss,
                             nullptr, gx.data(), gu.data()),
              0)
        << ck_lastError(ck.get());
    EXPECT_LT(RelativeError(gu, cu), 1e-9) << ck_solverName(solver);
    EXPECT_LT(RelativeError(gx, a), 1e-9) << ck_solverName(solver);
  }
}

TEST_F(RolloutGradTest, RefusesBadInputAndKeepsTheState) {
  ModelPtr m = Load(BundledModel("pushed_box.xml"));
  ASSERT_TRUE(m);
  ckSettings s = Settings(ckSOL_MUJOCO);
  HandlePtr ck = Make(m.get(), &s);
  DataPtr d(mj_makeData(m.get()));
  Loss loss;
  loss.w.assign(m->nv, 1.0);
  std::vector<double> ctrl(10 * m->nu, 1.0), gx(2 * m->nv), gu(10 * m->nu);
  const std::vector<double> qpos(d->qpos, d->qpos + m->nq);
  auto call = [&](int nstep, const double* c, ckStepLoss l) {
    return ck_rolloutGrad(ck.get(), m.get(), d.get(), nstep, c, l, &loss, nullptr, gx.data(),
                          gu.data());
  };
  EXPECT_EQ(-1, call(-1, ctrl.data(), &Loss::Eval));
  EXPECT_NE(std::string(ck_lastError(ck.get())).find("nstep = -1"), std::string::npos)
      << ck_lastError(ck.get());
  EXPECT_EQ(-1, call(10, ctrl.data(), nullptr));
  EXPECT_NE(std::string(ck_lastError(ck.get())).find("loss NULL"), std::string::npos);
  ctrl[7] = NAN;
  EXPECT_EQ(-1, call(10, ctrl.data(), &Loss::Eval));
  EXPECT_NE(std::string(ck_lastError(ck.get())).find("ctrl[7]"), std::string::npos);
  EXPECT_EQ(0, std::memcmp(qpos.data(), d->qpos, sizeof(double) * m->nq));
  ctrl[7] = 1;
  auto nan_loss = [](void*, int t, const mjModel*, const mjData*, mjtNum* dx, mjtNum*) -> mjtNum {
    return t == 3 ? NAN : 0.0;
  };
  EXPECT_EQ(-1, call(10, ctrl.data(), nan_loss));
  EXPECT_NE(std::string(ck_lastError(ck.get())).find("step 3"), std::string::npos)
      << ck_lastError(ck.get());

  // comfree's anchors carry history the sweep does not differentiate
  ckSettings c = Settings(ckSOL_COMFREE);
  c.comfree.anchor = 1;
  if (ck_solverAvailable(ckSOL_COMFREE)) {
    HandlePtr anchored = Make(m.get(), &c);
    EXPECT_EQ(-1, ck_rolloutGrad(anchored.get(), m.get(), d.get(), 10, ctrl.data(), &Loss::Eval,
                                 &loss, nullptr, gx.data(), gu.data()));
    EXPECT_NE(std::string(ck_lastError(anchored.get())).find("anchor = 0"), std::string::npos);
  }
}

TEST_F(RolloutGradTest, SecondCallOfTheSameLengthDoesNotAllocate) {
  if (!AllocationCounter::Available()) GTEST_SKIP() << "malloc is owned by the sanitizer";
  ModelPtr m = Load(BundledModel("hopper.xml"));
  ASSERT_TRUE(m);
  for (int solver : Solvers()) {
    ckSettings s = Settings(solver);
    s.comfree.anchor = 0;
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    Loss loss;
    loss.w.assign(m->nv, 0.5);
    std::vector<double> ctrl(40 * m->nu, 0.3), gx(2 * m->nv + m->na), gu(40 * m->nu);
    ASSERT_GE(ck_rolloutGrad(ck.get(), m.get(), d.get(), 40, ctrl.data(), &Loss::Eval, &loss,
                             nullptr, gx.data(), gu.data()),
              0);
    AllocationCounter counter;
    counter.Start();
    const int ret = ck_rolloutGrad(ck.get(), m.get(), d.get(), 40, ctrl.data(), &Loss::Eval, &loss,
                                   nullptr, gx.data(), gu.data());
    const long n = counter.Stop();
    EXPECT_GE(ret, 0);
    EXPECT_EQ(0, n) << ck_solverName(solver);
  }
}

// Dojo's "box up" with lcp: a thrust below the weight leaves a resting box where it is, so the
// plain gradient of its final height is exactly zero; the complementarity-aware sweep (Nimble
// IV-D, per step) lets the contact separate where the loss asks for it, and gradient descent on
// the thrust lifts the box
TEST_F(RolloutGradTest, ComplementarityAwareSweepLiftsARestingBox) {
  if (!ck_solverAvailable(ckSOL_LCP)) GTEST_SKIP() << "solver lcp is not in this build";
  ModelPtr m = Load(BundledModel("pushed_box.xml"));
  ASSERT_TRUE(m);
  const int T = 100, nu = m->nu;
  DataPtr d0(mj_makeData(m.get())), d(mj_makeData(m.get()));
  mj_resetDataKeyframe(m.get(), d0.get(), mj_name2id(m.get(), mjOBJ_KEY, "rest"));
  mj_forward(m.get(), d0.get());
  // L = 0.5 (z_T - 0.15)^2 on the last state only
  struct Height {
    int last;
    static mjtNum Eval(void* user, int t, const mjModel*, const mjData* d, mjtNum* dx, mjtNum*) {
      if (t != static_cast<const Height*>(user)->last) return 0;
      dx[2] = d->qpos[2] - 0.15;
      return 0.5 * dx[2] * dx[2];
    }
  } height{T - 1};
  for (int aware = 0; aware < 2; aware++) {
    ckSettings s = Settings(ckSOL_LCP);
    s.deriv.complementarity_aware = aware;
    HandlePtr ck = Make(m.get(), &s);
    double thrust = 5;  // N, below the weight of 9.81 N
    std::vector<double> ctrl(T * nu), gx(2 * m->nv), gu(T * nu);
    double first = 0, loss = 0;
    for (int iter = 0; iter < 40; iter++) {
      for (int t = 0; t < T; t++) ctrl[t * nu + 1] = thrust;
      mj_copyData(d.get(), m.get(), d0.get());
      ck_reset(ck.get());
      ASSERT_GE(ck_rolloutGrad(ck.get(), m.get(), d.get(), T, ctrl.data(), &Height::Eval, &height,
                               &loss, gx.data(), gu.data()),
                0)
          << ck_lastError(ck.get());
      double g = 0;  // one thrust held over the rollout
      for (int t = 0; t < T; t++) g += gu[t * nu + 1];
      if (iter == 0) {
        first = loss;
        if (!aware) {
          EXPECT_LT(std::fabs(g), 1e-12)
              << "a resting box's height does not change with a thrust below its weight";
          break;
        }
        EXPECT_LT(g, 0) << "more thrust lifts the box";
      }
      thrust = std::min(30.0, std::max(0.0, thrust - 1000 * g));
    }
    if (aware) {
      EXPECT_LT(loss, 1e-2 * first) << "thrust " << thrust;
      EXPECT_GT(thrust, 9.81);
    }
  }
}

TEST_F(RolloutGradTest, SlidingBoxMatchesDifferences) {
  for (int solver : Solvers()) {
    CheckAgainstDifferences({"pushed_box.xml", "slide", 0, 100}, solver, 1e-5);
  }
}

TEST_F(RolloutGradTest, HopperMatchesDifferences) {
  for (int solver : Solvers()) {
    CheckAgainstDifferences({"hopper.xml", "stand", 50, 60}, solver, 1e-5);
  }
}

// the sweep through adaptive steps (tsit5): each step's Jacobian at its internal steps as taken
TEST_F(RolloutGradTest, AdaptiveStepsMatchDifferences) {
  CheckAgainstDifferences({"pushed_box.xml", "slide", 0, 30}, ckSOL_MUJOCO, 1e-5, ckINT_TSIT5);
}

// dL/dp of ck_rolloutGradParam against centered differences of the rollout's loss in each
// parameter (the model's field moved, the rollout rerun); expect[k]: the ckParamHow of column k;
// the model's bytes are unchanged by the call
void RolloutGradTest::CheckParams(const Scene& scene, int solver,
                                  const std::vector<std::string>& names,
                                  const std::vector<int>& expect, double tol) {
  // a bundled model, or MJCF text
  ModelPtr m = scene.model[0] == '<' ? LoadString(scene.model) : Load(BundledModel(scene.model));
  ASSERT_TRUE(m);
  const int nu = m->nu, T = scene.nstep, np = names.size();
  std::vector<ckParam> params(np);
  char error[512];
  for (int k = 0; k < np; k++) {
    ASSERT_EQ(0, ck_parseParam(m.get(), names[k].c_str(), &params[k], error, sizeof(error)))
        << error;
  }
  DataPtr d0(mj_makeData(m.get())), d(mj_makeData(m.get()));
  if (scene.key) mj_resetDataKeyframe(m.get(), d0.get(), mj_name2id(m.get(), mjOBJ_KEY, scene.key));
  std::vector<double> ctrl(T * nu);  // the keyframe's controls and a sinusoid of 5% of the range
  for (int t = 0; t < T; t++) {
    for (int i = 0; i < nu; i++) {
      const double lo = m->actuator_ctrlrange[2 * i], hi = m->actuator_ctrlrange[2 * i + 1];
      ctrl[t * nu + i] = d0->ctrl[i] + 0.05 * (hi - lo) * std::sin(0.1 * t + i);
    }
  }
  mju_copy(d0->ctrl, ctrl.data(), nu);
  Settle(m.get(), d0.get(), scene.settle);
  mj_forward(m.get(), d0.get());
  ckSettings s = Settings(solver);
  s.ipm.kappa_grad = s.ipm.kappa_tol;
  s.comfree.anchor = 0;
  HandlePtr ck = Make(m.get(), &s);
  ASSERT_TRUE(ck);
  Loss loss;
  for (int i = 0; i < m->nv; i++) loss.w.push_back(std::cos(1.0 + 2 * i));
  loss.sensor = m->nsensordata ? 0.3 : 0;

  const std::vector<char> bytes(static_cast<char*>(m->buffer),
                                static_cast<char*>(m->buffer) + m->nbuffer);
  const mjOption opt = m->opt;
  std::vector<double> gp(np), gu(T * nu), gx(2 * m->nv + m->na);
  std::vector<int> how(np, -1);
  double value = 0;
  mj_copyData(d.get(), m.get(), d0.get());
  ck_reset(ck.get());
  const int ret =
      ck_rolloutGradParam(ck.get(), m.get(), d.get(), T, ctrl.data(), &Loss::Eval, &loss,
                          params.data(), np, &value, gx.data(), gu.data(), gp.data(), how.data());
  ASSERT_GE(ret, 0) << ck_lastError(ck.get());
  EXPECT_EQ(0, std::memcmp(bytes.data(), m->buffer, bytes.size())) << "the model changed";
  EXPECT_EQ(0, std::memcmp(&opt, &m->opt, sizeof(opt))) << "the model's options changed";
  EXPECT_EQ(value, Rollout(ck.get(), m.get(), d0.get(), d.get(), ctrl, &loss, T));
  int any_fd = 0;
  for (int k = 0; k < np; k++) {
    EXPECT_EQ(expect[k], how[k]) << names[k];
    any_fd |= how[k] == ckPARAM_FINITE_DIFF;
  }
  EXPECT_EQ(any_fd, ret) << "1 exactly when some column used differences";

  // centered differences of the loss in each parameter, and the plain gradients unchanged
  std::vector<double> fp(np), gu0(T * nu);
  for (int k = 0; k < np; k++) {
    const double p = *ParamFieldOf(m.get(), params[k]), eps = 1e-6 * (1 + std::fabs(p));
    SetParamValue(m.get(), params[k], p + eps);
    const double lp = Rollout(ck.get(), m.get(), d0.get(), d.get(), ctrl, &loss, T);
    SetParamValue(m.get(), params[k], p - eps);
    const double lm = Rollout(ck.get(), m.get(), d0.get(), d.get(), ctrl, &loss, T);
    SetParamValue(m.get(), params[k], p);
    fp[k] = (lp - lm) / (2 * eps);
    const double err = std::fabs(gp[k] - fp[k]) / std::max(std::fabs(fp[k]), 1e-12);
    EXPECT_LT(err, tol) << scene.model << " " << ck_solverName(solver) << " " << names[k]
                        << ": reverse " << gp[k] << ", differences " << fp[k];
    std::printf("%s %s %s: dL/dp %.9g, differences %.9g, relative error %.2e\n",
                scene.model[0] == '<' ? "(MJCF text)" : scene.model, ck_solverName(solver),
                names[k].c_str(), gp[k], fp[k], err);
  }
  mj_copyData(d.get(), m.get(), d0.get());
  ck_reset(ck.get());
  ASSERT_GE(ck_rolloutGrad(ck.get(), m.get(), d.get(), T, ctrl.data(), &Loss::Eval, &loss, nullptr,
                           nullptr, gu0.data()),
            0);
  EXPECT_EQ(0, std::memcmp(gu0.data(), gu.data(), sizeof(double) * T * nu))
      << "dL/du with parameters differs from ck_rolloutGrad's";
}

// the solvers of the parameter tests: MuJoCo's own and one other (comfree, else lcp)
std::vector<int> ParamSolvers() {
  std::vector<int> out = {ckSOL_MUJOCO};
  if (ck_solverAvailable(ckSOL_COMFREE)) {
    out.push_back(ckSOL_COMFREE);
  } else if (ck_solverAvailable(ckSOL_LCP)) {
    out.push_back(ckSOL_LCP);
  }
  return out;
}

TEST_F(RolloutGradTest, SlidingBoxParametersMatchDifferences) {
  for (int solver : ParamSolvers()) {
    // in contact a mass also moves the rows' regularizer (invweight0); friction by differences
    CheckParams({"pushed_box.xml", "slide", 0, 60}, solver,
                {"body:box:mass", "gravity:2", "geom:box_geom:friction:0"},
                {ckPARAM_ANALYTIC, ckPARAM_ANALYTIC, ckPARAM_FINITE_DIFF}, 1e-5);
  }
}

TEST_F(RolloutGradTest, HopperParametersMatchDifferences) {
  for (int solver : ParamSolvers()) {
    CheckParams({"hopper.xml", "stand", 50, 40}, solver,
                {"joint:thigh_joint:damping", "joint:foot_joint:damping",
                 "actuator:thigh_motor:gainprm:0", "actuator:foot_motor:gainprm:0"},
                {ckPARAM_ANALYTIC, ckPARAM_ANALYTIC, ckPARAM_ANALYTIC, ckPARAM_ANALYTIC}, 1e-5);
  }
}

// a spring-loaded slider with a motor whose sensors (actuator force, acceleration) the loss weighs:
// the sensors' part DsDp' ds of each step
TEST_F(RolloutGradTest, SensorLossParametersMatchDifferences) {
  const char* xml = R"(<mujoco>
  <option timestep="0.01" gravity="0 0 0"/>
  <worldbody>
    <body name="slider">
      <joint name="slide" type="slide" axis="1 0 0" stiffness="100" damping="0.5"/>
      <geom type="sphere" size="0.1" mass="1" contype="0" conaffinity="0"/>
      <site name="center"/>
    </body>
  </worldbody>
  <actuator>
    <motor name="push" joint="slide" gear="2" ctrllimited="true" ctrlrange="-1 1"/>
  </actuator>
  <sensor>
    <actuatorfrc actuator="push"/>
    <accelerometer site="center"/>
  </sensor>
  <keyframe><key name="start" qpos="0.1"/></keyframe>
</mujoco>)";
  for (int solver : ParamSolvers()) {
    CheckParams({xml, "start", 0, 50}, solver,
                {"joint:slide:stiffness", "joint:slide:damping", "actuator:push:gainprm:0"},
                {ckPARAM_ANALYTIC, ckPARAM_ANALYTIC, ckPARAM_ANALYTIC}, 1e-5);
  }
}

TEST_F(RolloutGradTest, ParametersRefuseBadInput) {
  ModelPtr m = Load(BundledModel("pushed_box.xml"));
  ASSERT_TRUE(m);
  ckSettings s = Settings(ckSOL_MUJOCO);
  HandlePtr ck = Make(m.get(), &s);
  DataPtr d(mj_makeData(m.get()));
  Loss loss;
  loss.w.assign(m->nv, 1.0);
  std::vector<double> ctrl(10 * m->nu, 1.0), gp(2);
  const std::vector<double> qpos(d->qpos, d->qpos + m->nq);
  auto call = [&](const ckParam* p, int np) {
    return ck_rolloutGradParam(ck.get(), m.get(), d.get(), 10, ctrl.data(), &Loss::Eval, &loss, p,
                               np, nullptr, nullptr, nullptr, gp.data(), nullptr);
  };
  auto said = [&](const char* what) {
    return std::string(ck_lastError(ck.get())).find(what) != std::string::npos;
  };
  const ckParam good[2] = {{ckPARAM_BODY_MASS, 1, 0}, {ckPARAM_GRAVITY, 0, 2}};
  EXPECT_EQ(-1, call(good, 0));
  EXPECT_TRUE(said("np = 0")) << ck_lastError(ck.get());
  EXPECT_EQ(-1, call(good, -2));
  EXPECT_TRUE(said("np = -2")) << ck_lastError(ck.get());
  EXPECT_EQ(-1, call(nullptr, 2));
  EXPECT_TRUE(said("params is NULL")) << ck_lastError(ck.get());
  const ckParam unknown[2] = {{ckPARAM_BODY_MASS, 1, 0}, {ckNPARAMKIND + 3, 0, 0}};
  EXPECT_EQ(-1, call(unknown, 2));
  EXPECT_TRUE(said("params[1]")) << ck_lastError(ck.get());
  const ckParam far[1] = {{ckPARAM_BODY_MASS, 99, 0}};
  EXPECT_EQ(-1, call(far, 1));
  EXPECT_TRUE(said("out of range")) << ck_lastError(ck.get());
  EXPECT_EQ(0, std::memcmp(qpos.data(), d->qpos, sizeof(double) * m->nq)) << "refused, yet stepped";
  // analytic columns return 0, a column by differences (friction) 1
  EXPECT_EQ(0, call(good, 2)) << ck_lastError(ck.get());
  ckParam friction[1];
  char error[256];
  ASSERT_EQ(0, ck_parseParam(m.get(), "geom:box_geom:friction:0", friction, error, sizeof(error)));
  EXPECT_EQ(1, call(friction, 1)) << ck_lastError(ck.get());
}

TEST_F(RolloutGradTest, ParametersSecondCallDoesNotAllocate) {
  if (!AllocationCounter::Available()) GTEST_SKIP() << "malloc is owned by the sanitizer";
  ModelPtr m = Load(BundledModel("hopper.xml"));
  ASSERT_TRUE(m);
  ckParam p[3];
  char error[512];
  ASSERT_EQ(0, ck_parseParam(m.get(), "joint:thigh_joint:damping", p, error, sizeof(error)));
  ASSERT_EQ(0, ck_parseParam(m.get(), "actuator:leg_motor:gainprm:0", p + 1, error, 512));
  ASSERT_EQ(0, ck_parseParam(m.get(), "body:torso:mass", p + 2, error, 512)) << error;
  for (int solver : ParamSolvers()) {
    ckSettings s = Settings(solver);
    s.comfree.anchor = 0;
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    Loss loss;
    loss.w.assign(m->nv, 0.5);
    std::vector<double> ctrl(30 * m->nu, 0.3), gu(30 * m->nu), gp(3);
    int how[3];
    auto call = [&]() {
      return ck_rolloutGradParam(ck.get(), m.get(), d.get(), 30, ctrl.data(), &Loss::Eval, &loss, p,
                                 3, nullptr, nullptr, gu.data(), gp.data(), how);
    };
    ASSERT_GE(call(), 0) << ck_lastError(ck.get());
    AllocationCounter counter;
    counter.Start();
    const int ret = call();
    const long n = counter.Stop();
    EXPECT_GE(ret, 0);
    EXPECT_EQ(0, n) << ck_solverName(solver);
  }
}

}  // namespace
}  // namespace contactkit::test
