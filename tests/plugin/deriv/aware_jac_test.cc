// Copyright 2026 The contactkit developers.
//
// ck_transitionJacAware: lcp's complementarity-aware Jacobians (Nimble section IV-D in Jacobian
// form). A box resting on the floor: with a direction that asks it to rise, the Jacobians are the
// free-flight ones (the contacts treated as separating); with one that presses it down, they are
// ck_transitionJac's. Their product with the direction is the complementarity-aware VJP, and the
// call allocates nothing.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "plugin/deriv/derivative.h"
#include "plugin/step/handle.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

// max |a - b|
double MaxDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double e = 0;
  for (size_t i = 0; i < a.size(); i++) e = std::max(e, std::fabs(a[i] - b[i]));
  return e;
}

// the pushed box at rest on the floor (four clamped contacts) under a solver's handle
class RestingBoxTest : public MujocoTest {
 protected:
  // the box settled by 200 of the solver's steps (ipm at kappa_tol if at_tol)
  void Settle(int solver, bool at_tol) {
    if (!ck_solverAvailable(solver)) GTEST_SKIP() << "solver not in this build";
    m_ = Load(BundledModel("pushed_box.xml"));
    ASSERT_TRUE(m_);
    d_.reset(mj_makeData(m_.get()));
    s_ = Settings(solver);
    if (at_tol) s_.ipm.kappa_grad = s_.ipm.kappa_tol;
    ck_ = Make(m_.get(), &s_);
    mj_resetDataKeyframe(m_.get(), d_.get(), 0);
    for (int k = 0; k < 200; k++) ck_step(ck_.get(), m_.get(), d_.get());
    ASSERT_GT(d_->ncon, 0);
    ndx_ = 2 * m_->nv;
  }

  // an adjoint that asks the box to rise (dL/dz < 0 for its height and its vertical velocity)
  std::vector<double> Lift(double sign) const {
    std::vector<double> dx(ndx_, 0.0);
    dx[2] = -sign;
    dx[m_->nv + 2] = -0.1 * sign;
    return dx;
  }

  ModelPtr m_;
  DataPtr d_;
  ckSettings s_;
  HandlePtr ck_;
  int ndx_ = 0;
};

class AwareJacTest : public RestingBoxTest {
 protected:
  void SetUp() override { Settle(ckSOL_LCP, false); }
};

// closed form: with the lift direction B's columns are free flight's, h/m in the vertical velocity
// and h^2/m in the height for the thrust (semi-implicit Euler, the box upright), B is the Jacobian
// of the same state with contacts disabled and A too but for the lever of the step's contact
// impulses; pressing down gives ck_transitionJac's
TEST_F(AwareJacTest, RestingBoxLiftsInFreeFlightOnlyWhenAsked) {
  const int nu = m_->nu, nv = m_->nv;
  const double h = m_->opt.timestep, mass = 1;
  Jacobians plain(m_.get()), up(m_.get()), down(m_.get()), free(m_.get());
  ASSERT_EQ(0, ck_transitionJac(ck_.get(), m_.get(), d_.get(), plain.A.data(), plain.B.data(),
                                nullptr, nullptr));
  std::vector<double> lift = Lift(1), press = Lift(-1);
  ASSERT_EQ(0, ck_transitionJacAware(ck_.get(), m_.get(), d_.get(), lift.data(), up.A.data(),
                                     up.B.data(), nullptr, nullptr));
  EXPECT_TRUE(ck_->deriv->complementarity_applied());
  ASSERT_EQ(0, ck_transitionJacAware(ck_.get(), m_.get(), d_.get(), press.data(), down.A.data(),
                                     down.B.data(), nullptr, nullptr));
  EXPECT_FALSE(ck_->deriv->complementarity_applied());

  // the thrust (control 1) in the box's vertical velocity and height
  EXPECT_NEAR(plain.B[(nv + 2) * nu + 1], 0, 1e-12);  // the floor holds the box
  EXPECT_NEAR(up.B[(nv + 2) * nu + 1], h / mass, 1e-12);
  EXPECT_NEAR(up.B[2 * nu + 1], h * h / mass, 1e-14);
  EXPECT_EQ(down.A, plain.A);
  EXPECT_EQ(down.B, plain.B);

  // free flight: the same state without contacts
  ModelPtr nc(mj_copyModel(nullptr, m_.get()));
  nc->opt.disableflags |= mjDSBL_CONTACT;
  ckSettings s = Settings(ckSOL_LCP);
  HandlePtr ckf = Make(nc.get(), &s);
  ASSERT_EQ(0, ck_transitionJac(ckf.get(), nc.get(), d_.get(), free.A.data(), free.B.data(),
                                nullptr, nullptr));
  // the step keeps its contact impulses (m g in all), only their tangent is that of separation:
  // tilting the box about x or y by dth moves their points of application, a torque change of
  // m g a dth (a = 0.1 m, half the side), so the tilt columns gain h m g a / I = h 1.5 g / a in
  // their angular velocity rows (I = 2/3 m a^2) and h times that in the angles
  const double g = -m_->opt.gravity[2], a = 0.1, tilt = h * 1.5 * g / a;
  std::vector<double> expect = free.A;
  for (int j : {3, 4}) {
    expect[(nv + j) * ndx_ + j] += tilt;
    expect[j * ndx_ + j] += h * tilt;
  }
  EXPECT_LT(MaxDiff(up.A, expect), 1e-9);  // the resting impulses are m g h to 5e-10 (rel.)
  EXPECT_LT(MaxDiff(up.B, free.B), 1e-12);
  EXPECT_GT(MaxDiff(plain.B, free.B), 1e-3);  // the plain one is not free flight
}

// NULL direction: ck_transitionJac exactly; a direction that is not finite: -1
TEST_F(AwareJacTest, WithoutDirectionItIsTheJacobian) {
  Jacobians plain(m_.get()), aware(m_.get());
  ck_transitionJac(ck_.get(), m_.get(), d_.get(), plain.A.data(), plain.B.data(), nullptr, nullptr);
  ASSERT_EQ(0, ck_transitionJacAware(ck_.get(), m_.get(), d_.get(), nullptr, aware.A.data(),
                                     aware.B.data(), nullptr, nullptr));
  EXPECT_EQ(plain.A, aware.A);
  EXPECT_EQ(plain.B, aware.B);
  std::vector<double> lift = Lift(1);
  lift[3] = NAN;
  EXPECT_EQ(-1, ck_transitionJacAware(ck_.get(), m_.get(), d_.get(), lift.data(), aware.A.data(),
                                      nullptr, nullptr, nullptr));
  EXPECT_NE(std::string(ck_lastError(ck_.get())).find("dx[3]"), std::string::npos)
      << ck_lastError(ck_.get());
}

// comfree: a contact the direction pulls apart keeps its force fixed in the tangent, so that the
// resting box lifts in free flight when asked, and the product with the direction is comfree's
// complementarity-aware VJP
using AwareJacComfreeTest = MujocoTest;

TEST_F(AwareJacComfreeTest, RestingBoxLiftsInFreeFlightOnlyWhenAsked) {
  ModelPtr m = Load(BundledModel("pushed_box.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  for (int anchor : {0, 1}) {
    ckSettings s = Settings(ckSOL_COMFREE);
    s.comfree.anchor = anchor;
    HandlePtr ck = Make(m.get(), &s);
    mj_resetDataKeyframe(m.get(), d.get(), 0);
    for (int k = 0; k < 200; k++) ck_step(ck.get(), m.get(), d.get());
    ASSERT_GT(d->ncon, 0);
    const int nu = m->nu, nv = m->nv, ndx = 2 * nv;
    const double h = m->opt.timestep;
    Jacobians plain(m.get()), up(m.get()), down(m.get());
    std::vector<double> lift(ndx, 0.0), press(ndx, 0.0);
    lift[2] = -1;
    lift[nv + 2] = -0.1;
    press[2] = 1;
    press[nv + 2] = 0.1;
    ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), plain.A.data(), plain.B.data(),
                                  nullptr, nullptr));
    ASSERT_EQ(0, ck_transitionJacAware(ck.get(), m.get(), d.get(), lift.data(), up.A.data(),
                                       up.B.data(), nullptr, nullptr));
    EXPECT_TRUE(ck->deriv->complementarity_applied()) << "anchor " << anchor;
    ASSERT_EQ(0, ck_transitionJacAware(ck.get(), m.get(), d.get(), press.data(), down.A.data(),
                                       down.B.data(), nullptr, nullptr));
    EXPECT_FALSE(ck->deriv->complementarity_applied()) << "anchor " << anchor;
    // the thrust in the vertical velocity: partly taken by the compliant floor (0.89 h here),
    // free flight (h / m, m = 1 kg) when lifted
    EXPECT_LT(plain.B[(nv + 2) * nu + 1], 0.95 * h) << "anchor " << anchor;
    EXPECT_NEAR(up.B[(nv + 2) * nu + 1], h, 1e-12) << "anchor " << anchor;
    EXPECT_EQ(down.B, plain.B);
    // the product with the direction is the aware VJP
    ckSettings aware = s;
    aware.deriv.complementarity_aware = 1;
    ASSERT_EQ(0, ck_setSettings(ck.get(), m.get(), &aware, nullptr, 0));
    std::vector<double> gx(ndx), gu(nu);
    ASSERT_EQ(0, ck_transitionVJP(ck.get(), m.get(), d.get(), lift.data(), nullptr, gx.data(),
                                  gu.data()));
    for (int j = 0; j < nu; j++) {
      double p = 0;
      for (int i = 0; i < ndx; i++) p += lift[i] * up.B[i * nu + j];
      EXPECT_NEAR(p, gu[j], 1e-12 * std::max(1.0, std::fabs(p)))
          << "anchor " << anchor << " u " << j;
    }
  }
}

// ipm (at its default kappa_grad and at kappa_tol, the hard-contact step's own derivative) and
// the mujoco solver: a contact the direction pulls apart leaves the tangent (ipm: its impulse held
// fixed; mujoco: its rows leave the active set), so the resting box lifts in free flight when
// asked; pressing, the contacts the tangent already holds closed keep their terms and the
// Jacobians are ck_transitionJac's; the product with the direction is the aware VJP; no allocation
struct AwareCase {
  int solver;
  bool at_tol;  // ipm: kappa_grad = kappa_tol
  const char* name;
};

class AwareJacSolverTest : public RestingBoxTest, public ::testing::WithParamInterface<AwareCase> {
 protected:
  void SetUp() override { Settle(GetParam().solver, GetParam().at_tol); }
};

TEST_P(AwareJacSolverTest, RestingBoxLiftsInFreeFlightOnlyWhenAsked) {
  const int nu = m_->nu, nv = m_->nv;
  const double h = m_->opt.timestep, mass = 1;
  Jacobians plain(m_.get()), up(m_.get()), down(m_.get());
  ASSERT_EQ(0, ck_transitionJac(ck_.get(), m_.get(), d_.get(), plain.A.data(), plain.B.data(),
                                nullptr, nullptr));
  std::vector<double> lift = Lift(1), press = Lift(-1);
  ASSERT_EQ(0, ck_transitionJacAware(ck_.get(), m_.get(), d_.get(), lift.data(), up.A.data(),
                                     up.B.data(), nullptr, nullptr));
  EXPECT_TRUE(ck_->deriv->complementarity_applied());
  ASSERT_EQ(0, ck_transitionJacAware(ck_.get(), m_.get(), d_.get(), press.data(), down.A.data(),
                                     down.B.data(), nullptr, nullptr));
  EXPECT_FALSE(ck_->deriv->complementarity_applied());
  // the thrust (control 1) in the vertical velocity: held by the floor in the plain Jacobian,
  // free flight h / m (m = 1 kg) and h^2 / m in the height when lifted
  EXPECT_LT(plain.B[(nv + 2) * nu + 1], 0.5 * h);
  EXPECT_NEAR(up.B[(nv + 2) * nu + 1], h / mass, 1e-9);
  EXPECT_NEAR(up.B[2 * nu + 1], h * h / mass, 1e-11);
  EXPECT_EQ(down.A, plain.A);
  EXPECT_EQ(down.B, plain.B);

  // B is free flight's: the same state without contacts
  ModelPtr nc(mj_copyModel(nullptr, m_.get()));
  nc->opt.disableflags |= mjDSBL_CONTACT;
  HandlePtr ckf = Make(nc.get(), &s_);
  Jacobians free(m_.get());
  ASSERT_EQ(0, ck_transitionJac(ckf.get(), nc.get(), d_.get(), free.A.data(), free.B.data(),
                                nullptr, nullptr));
  EXPECT_LT(MaxDiff(up.B, free.B), 1e-9);
}

// ipm, mode 1: the box at rest under a thrust above its weight lifts off (the step leaves its
// contacts open, plain B is free flight's); a direction that presses it down clamps their normal
// velocities, so the thrust no longer moves the box vertically (B[vz][thrust] = 0 but for the
// clamp's regularizer 1e-10); a lifting direction leaves the Jacobians as they are (mode 0 acts on
// contacts the step holds closed)
// ipm only: mode 1 clamps contacts the step left open
class AwareJacIpmTest : public AwareJacSolverTest {};

TEST_P(AwareJacIpmTest, LiftingBoxIsClampedWhenPressed) {
  const int nu = m_->nu, nv = m_->nv;
  const double h = m_->opt.timestep;
  d_->ctrl[1] = 15;  // thrust above the weight (9.81 N)
  Jacobians plain(m_.get()), down(m_.get()), up(m_.get());
  ASSERT_EQ(0, ck_transitionJac(ck_.get(), m_.get(), d_.get(), plain.A.data(), plain.B.data(),
                                nullptr, nullptr));
  std::vector<double> lift = Lift(1), press = Lift(-1);
  ASSERT_EQ(0, ck_transitionJacAware(ck_.get(), m_.get(), d_.get(), press.data(), down.A.data(),
                                     down.B.data(), nullptr, nullptr));
  EXPECT_TRUE(ck_->deriv->complementarity_applied());
  ASSERT_EQ(0, ck_transitionJacAware(ck_.get(), m_.get(), d_.get(), lift.data(), up.A.data(),
                                     up.B.data(), nullptr, nullptr));
  EXPECT_FALSE(ck_->deriv->complementarity_applied());
  // open: the thrust moves the box (0.63 h at kappa_grad, smoothed; free flight at kappa_tol)
  EXPECT_GT(plain.B[(nv + 2) * nu + 1], 0.5 * h);
  if (GetParam().at_tol) {
    EXPECT_NEAR(plain.B[(nv + 2) * nu + 1], h, 1e-3 * h);
  }
  EXPECT_LT(std::fabs(down.B[(nv + 2) * nu + 1]), 1e-6 * h);
  EXPECT_EQ(up.A, plain.A);
  EXPECT_EQ(up.B, plain.B);
}

TEST_P(AwareJacSolverTest, ProductWithTheDirectionIsTheAwareVjp) {
  ckSettings s = s_;
  s.deriv.complementarity_aware = 1;
  HandlePtr vjp = Make(m_.get(), &s);
  const int nu = m_->nu;
  std::vector<std::vector<double>> dirs = {Lift(1), Lift(-1)};
  std::vector<double> mixed(ndx_);
  for (int i = 0; i < ndx_; i++) mixed[i] = std::sin(1.7 * i + 0.3);
  dirs.push_back(mixed);
  int applied = 0;
  for (int pose = 0; pose < 2; pose++) {
    if (pose == 1) {
      d_->ctrl[0] = 8;  // sliding sideways under a push, pressed by a thrust below its weight
      d_->ctrl[1] = 4;
      for (int k = 0; k < 20; k++) ck_step(ck_.get(), m_.get(), d_.get());
    }
    for (const std::vector<double>& dx : dirs) {
      Jacobians j(m_.get());
      ASSERT_EQ(0, ck_transitionJacAware(ck_.get(), m_.get(), d_.get(), dx.data(), j.A.data(),
                                         j.B.data(), nullptr, nullptr));
      applied += ck_->deriv->complementarity_applied();
      std::vector<double> gx(ndx_), gu(nu);
      ASSERT_EQ(0, ck_transitionVJP(vjp.get(), m_.get(), d_.get(), dx.data(), nullptr, gx.data(),
                                    gu.data()));
      double scale = 0;
      for (double g : gx) scale = std::max(scale, std::fabs(g));
      for (double g : gu) scale = std::max(scale, std::fabs(g));
      for (int c = 0; c < ndx_ + nu; c++) {
        double p = 0;
        for (int i = 0; i < ndx_; i++) {
          p += dx[i] * (c < ndx_ ? j.A[i * ndx_ + c] : j.B[i * nu + c - ndx_]);
        }
        const double g = c < ndx_ ? gx[c] : gu[c - ndx_];
        EXPECT_NEAR(p, g, 1e-12 * std::max(1.0, scale)) << "pose " << pose << " column " << c;
      }
    }
  }
  EXPECT_GE(applied, 1);  // the lift direction on the resting box took the aware branch
}

TEST_P(AwareJacSolverTest, DoesNotAllocate) {
  if (!AllocationCounter::Available()) GTEST_SKIP() << "malloc is owned by the sanitizer";
  ckSettings s = s_;
  s.deriv.complementarity_aware = 1;
  HandlePtr vjp = Make(m_.get(), &s);
  Jacobians j(m_.get());
  std::vector<double> lift = Lift(1), press = Lift(-1), gx(ndx_), gu(m_->nu);
  ck_transitionJacAware(ck_.get(), m_.get(), d_.get(), lift.data(), j.A.data(), j.B.data(), nullptr,
                        nullptr);
  ck_transitionVJP(vjp.get(), m_.get(), d_.get(), lift.data(), nullptr, gx.data(), gu.data());
  AllocationCounter counter;
  counter.Start();
  ck_transitionJacAware(ck_.get(), m_.get(), d_.get(), lift.data(), j.A.data(), j.B.data(), nullptr,
                        nullptr);
  ck_transitionJacAware(ck_.get(), m_.get(), d_.get(), press.data(), j.A.data(), j.B.data(),
                        nullptr, nullptr);
  ck_transitionVJP(vjp.get(), m_.get(), d_.get(), lift.data(), nullptr, gx.data(), gu.data());
  EXPECT_EQ(counter.Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(Ipm, AwareJacIpmTest,
                         ::testing::Values(AwareCase{ckSOL_IPM, false, "ipm"},
                                           AwareCase{ckSOL_IPM, true, "ipm_at_kappa_tol"}),
                         [](const ::testing::TestParamInfo<AwareCase>& i) {
                           return std::string(i.param.name);
                         });

INSTANTIATE_TEST_SUITE_P(Solvers, AwareJacSolverTest,
                         ::testing::Values(AwareCase{ckSOL_LCP, false, "lcp"},
                                           AwareCase{ckSOL_IPM, false, "ipm"},
                                           AwareCase{ckSOL_IPM, true, "ipm_at_kappa_tol"},
                                           AwareCase{ckSOL_MUJOCO, false, "mujoco"}),
                         [](const ::testing::TestParamInfo<AwareCase>& i) {
                           return std::string(i.param.name);
                         });

}  // namespace
}  // namespace contactkit::test
