// Copyright 2026 The contactkit developers.
//
// Adaptive step-size integration (adaptive.h).
#include "plugin/step/adaptive.h"

#include <algorithm>
#include <cmath>

#include "plugin/step/compat.h"
#include "plugin/step/handle.h"
#include "plugin/step/integrator.h"

namespace contactkit {
namespace {

// Tsitouras 5(4) (2011, table 1): 7 stages, first same as last
constexpr double kTsitA[49] = {0,
                               0,
                               0,
                               0,
                               0,
                               0,
                               0,  //
                               0.161,
                               0,
                               0,
                               0,
                               0,
                               0,
                               0,
                               -0.008480655492356989,
                               0.335480655492357,
                               0,
                               0,
                               0,
                               0,
                               0,
                               2.897153057105493,
                               -6.359448489975075,
                               4.3622954328695815,
                               0,
                               0,
                               0,
                               0,
                               5.325864828439257,
                               -11.748883564062828,
                               7.4955393428898365,
                               -0.09249506636175525,
                               0,
                               0,
                               0,
                               5.86145544294642,
                               -12.92096931784711,
                               8.159367898576159,
                               -0.071584973281401,
                               -0.028269050394068383,
                               0,
                               0,
                               0.09646076681806523,
                               0.01,
                               0.4798896504144996,
                               1.379008574103742,
                               -3.290069515436081,
                               2.324710524099774,
                               0};
constexpr double kTsitB[7] = {
    0.09646076681806523, 0.01, 0.4798896504144996, 1.379008574103742, -3.290069515436081,
    2.324710524099774,   0};
// b - bhat, bhat the embedded fourth-order weights
constexpr double kTsitE[7] = {0.09646076681806523 - 0.09468075576583946,
                              0.01 - 0.009183565540343254,
                              0.4798896504144996 - 0.4877705284247616,
                              1.379008574103742 - 1.234297566930479,
                              -3.290069515436081 + 2.7077123499835256,
                              2.324710524099774 - 1.866628418170587,
                              -1.0 / 66};
constexpr double kTsitC[7] = {0, 0.161, 0.327, 0.9, 0.9800255409045097, 1, 1};

// Dormand and Prince 5(4) (1980, DOPRI5): 7 stages, first same as last
constexpr double kDopriA[49] = {0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,  //
                                1.0 / 5,
                                0,
                                0,
                                0,
                                0,
                                0,
                                0,
                                3.0 / 40,
                                9.0 / 40,
                                0,
                                0,
                                0,
                                0,
                                0,
                                44.0 / 45,
                                -56.0 / 15,
                                32.0 / 9,
                                0,
                                0,
                                0,
                                0,
                                19372.0 / 6561,
                                -25360.0 / 2187,
                                64448.0 / 6561,
                                -212.0 / 729,
                                0,
                                0,
                                0,
                                9017.0 / 3168,
                                -355.0 / 33,
                                46732.0 / 5247,
                                49.0 / 176,
                                -5103.0 / 18656,
                                0,
                                0,
                                35.0 / 384,
                                0,
                                500.0 / 1113,
                                125.0 / 192,
                                -2187.0 / 6784,
                                11.0 / 84,
                                0};
constexpr double kDopriB[7] = {35.0 / 384, 0, 500.0 / 1113, 125.0 / 192, -2187.0 / 6784,
                               11.0 / 84,  0};
constexpr double kDopriE[7] = {71.0 / 57600,      0,          -71.0 / 16695, 71.0 / 1920,
                               -17253.0 / 339200, 22.0 / 525, -1.0 / 40};
constexpr double kDopriC[7] = {0, 1.0 / 5, 3.0 / 10, 4.0 / 5, 8.0 / 9, 1, 1};

constexpr ButcherPair kTsit5 = {7, kTsitA, kTsitB, kTsitE, kTsitC};
constexpr ButcherPair kDopri5 = {7, kDopriA, kDopriB, kDopriE, kDopriC};

constexpr double kSafety = 0.9;     // of the controller's factor
constexpr double kFactorMin = 0.2;  // smallest factor after a rejected step
constexpr double kFactorMax = 10;   // largest factor after an accepted step
constexpr double kErrorOrder = 5;   // local order of the 5(4) pairs' error estimate

bool AllFinite(const double* x, int n) {
  for (int i = 0; i < n; i++) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

}  // namespace

void ClipActivations(const mjModel* m, mjData* d) {
  for (int i = 0; i < m->nu; i++) {
#if CK_MJ3
    const int begin = m->actuator_actadr[i], end = begin + m->actuator_actnum[i];
#else
    const int begin = i - (m->nu - m->na), end = begin >= 0 ? begin + 1 : begin;
#endif
    for (int j = std::max(begin, 0); j < end; j++)
      d->act[j] = ClipActivation(m, i, d->act[j], nullptr);
  }
}

const ButcherPair& PairOf(int integrator) { return integrator == ckINT_DOPRI5 ? kDopri5 : kTsit5; }

void RotationRate(const int* rotations, int nrot, double step, const double* dx, double* k) {
  // q = q0 exp(theta) with theta = step dx (the stage's offset in q0's body frame): theta' =
  // dexp^-1_{-theta}(omega) = omega + theta x omega / 2 + theta x (theta x omega) / 12 (Bernoulli
  // series; its next term is of fifth order in theta, beyond what the 5(4) pairs need)
  for (int r = 0; r < nrot; r++) {
    const int v = rotations[r];
    double theta[3], c1[3], c2[3];
    for (int i = 0; i < 3; i++) theta[i] = step * dx[v + i];
    mju_cross(c1, theta, k + v);
    mju_cross(c2, theta, c1);
    for (int i = 0; i < 3; i++) k[v + i] += 0.5 * c1[i] + c2[i] / 12;
  }
}

void RotationRateTangent(const int* rotations, int nrot, double step, const double* dx,
                         const double* omega, const double* ddx, double* dk) {
  for (int r = 0; r < nrot; r++) {
    const int v = rotations[r];
    double theta[3], dtheta[3], c1[3], dc1[3], a[3], b[3], dc2[3];
    for (int i = 0; i < 3; i++) {
      theta[i] = step * dx[v + i];
      dtheta[i] = step * ddx[v + i];
    }
    // d(theta x w) = dtheta x w + theta x dw; d(theta x c1) = dtheta x c1 + theta x dc1
    mju_cross(c1, theta, omega + v);
    mju_cross(a, dtheta, omega + v);
    mju_cross(b, theta, dk + v);
    for (int i = 0; i < 3; i++) dc1[i] = a[i] + b[i];
    mju_cross(a, dtheta, c1);
    mju_cross(b, theta, dc1);
    for (int i = 0; i < 3; i++) dc2[i] = a[i] + b[i];
    for (int i = 0; i < 3; i++) dk[v + i] += 0.5 * dc1[i] + dc2[i] / 12;
  }
}

void AdaptiveIntegrator::Setup(const mjModel* m) {
  nq_ = m->nq;
  nv_ = m->nv;
  na_ = m->na;
  nk_ = 2 * nv_ + na_;
  y0_.assign(nq_ + nv_ + na_, 0.0);
  start_.assign(nq_ + nv_ + na_, 0.0);
  k_.assign(7 * nk_, 0.0);
  dx_.assign(nk_, 0.0);
  warm_.assign(nv_, 0.0);
  taken_.assign(kMaxTaken, 0.0);
  rotational_.assign(nv_, 0);
  rotations_.clear();
  for (int j = 0; j < m->njnt; j++) {
    const int type = m->jnt_type[j];
    if (type != mjJNT_BALL && type != mjJNT_FREE) continue;
    const int v = m->jnt_dofadr[j] + (type == mjJNT_FREE ? 3 : 0);
    rotational_[v] = rotational_[v + 1] = rotational_[v + 2] = 1;
    rotations_.push_back(v);
  }
  Reset();
}

void AdaptiveIntegrator::Reset() {
  dt_ = 0;
  inv_err1_ = inv_err2_ = 1;
  info_ = ckStepInfo();
  ntaken_ = 0;
}

void AdaptiveIntegrator::SetController(const Controller& c) {
  dt_ = c.dt;
  inv_err1_ = c.inv_err1;
  inv_err2_ = c.inv_err2;
}

void AdaptiveIntegrator::Load(const mjModel* m, mjData* d) const {
  mju_copy(d->qpos, y0_.data(), nq_);
  mju_copy(d->qvel, y0_.data() + nq_, nv_);
  if (na_) mju_copy(d->act, y0_.data() + nq_ + nv_, na_);
}

void AdaptiveIntegrator::Save(const mjModel* m, const mjData* d) {
  mju_copy(y0_.data(), d->qpos, nq_);
  mju_copy(y0_.data() + nq_, d->qvel, nv_);
  if (na_) mju_copy(y0_.data() + nq_ + nv_, d->act, na_);
}

void AdaptiveIntegrator::ReadRate(const mjData* d, double* k) const {
  mju_copy(k, d->qvel, nv_);
  mju_copy(k + nv_, d->qacc, nv_);
  if (na_) mju_copy(k + 2 * nv_, d->act_dot, na_);
}

void AdaptiveIntegrator::Rate(ckHandle* ck, const mjModel* m, mjData* d, double* k) {
  ForwardSkip(ck, m, d, mjSTAGE_NONE, 1);
  ReadRate(d, k);
}

void AdaptiveIntegrator::Rotations(double step, double* k) const {
  RotationRate(rotations_.data(), static_cast<int>(rotations_.size()), step, dx_.data(), k);
}

void AdaptiveIntegrator::Combine(const mjModel* m, mjData* d, const double* w, int n, double dt,
                                 double t) {
  mju_zero(dx_.data(), nk_);
  for (int j = 0; j < n; j++) {
    if (w[j] != 0) mju_addToScl(dx_.data(), k_.data() + j * nk_, w[j], nk_);
  }
  Load(m, d);
  mj_integratePos(m, d->qpos, dx_.data(), dt);
  mju_addToScl(d->qvel, dx_.data() + nv_, dt, nv_);
  if (na_) mju_addToScl(d->act, dx_.data() + 2 * nv_, dt, na_);
  d->time = t;
}

double AdaptiveIntegrator::ErrorNorm(const mjModel* m, const mjData* d, const ButcherPair& pair,
                                     double dt, const ckAdaptiveSettings& s) {
  mju_zero(dx_.data(), nk_);
  for (int j = 0; j < pair.stages; j++) {
    if (pair.e[j] != 0) mju_addToScl(dx_.data(), k_.data() + j * nk_, dt * pair.e[j], nk_);
  }
  double sum = 0;
  for (int i = 0; i < nv_; i++) {
    // a dof's position magnitude: its coordinate (hinge, slide, a free joint's translation), or
    // 1 for a rotation of a ball or free joint
    double y = 1;
    if (!rotational_[i]) {
      const int j = m->dof_jntid[i];
      const int adr = m->jnt_qposadr[j] + (i - m->jnt_dofadr[j]);
      y = std::max(std::fabs(y0_[adr]), std::fabs(d->qpos[adr]));
    }
    const double ep = dx_[i] / (s.atol + s.rtol * y);
    const double yv = std::max(std::fabs(y0_[nq_ + i]), std::fabs(d->qvel[i]));
    const double ev = dx_[nv_ + i] / (s.atol + s.rtol * yv);
    sum += ep * ep + ev * ev;
  }
  for (int i = 0; i < na_; i++) {
    const double ya = std::max(std::fabs(y0_[nq_ + nv_ + i]), std::fabs(d->act[i]));
    const double ea = dx_[2 * nv_ + i] / (s.atol + s.rtol * ya);
    sum += ea * ea;
  }
  return nk_ ? std::sqrt(sum / nk_) : 0;
}

bool AdaptiveIntegrator::Step(ckHandle* ck, const mjModel* m, mjData* d) {
  const ckAdaptiveSettings& s = ck->settings.adaptive;
  const ButcherPair& pair = PairOf(ck->settings.integrator);
  const double h = m->opt.timestep, t_start = d->time;
  const double b1 = (s.pcoeff + s.icoeff + s.dcoeff) / kErrorOrder;
  const double b2 = -(s.pcoeff + 2 * s.dcoeff) / kErrorOrder, b3 = s.dcoeff / kErrorOrder;
  info_ = ckStepInfo();
  ntaken_ = 0;
  info_.integrator = ck->settings.integrator;
  info_.min_step = HUGE_VAL;
  Save(m, d);
  mju_copy(warm_.data(), d->qacc_warmstart, nv_);
  mju_copy(start_.data(), y0_.data(), nq_ + nv_ + na_);
  // elapsed: time into the step (so that one internal step is exactly h)
  double elapsed = 0, dt = dt_ > 0 ? std::min(dt_, h) : h;

  // the first stage's rate at the start (the forward pass has run in StepSkip)
  ReadRate(d, k_.data());

  while (elapsed < h) {
    // the last internal step ends exactly at the step's end
    const double remaining = h - elapsed;
    const bool last = dt >= remaining * (1 - 1e-12);
    const double step = last ? remaining : dt;
    if (info_.accepted + info_.rejected >= s.max_steps) {
      info_.status = ckADAPT_MAX_STEPS;
      break;
    }
    if (step < s.min_step && !last) {
      info_.status = ckADAPT_MIN_STEP;
      break;
    }
    for (int i = 1; i < pair.stages; i++) {
      Combine(m, d, pair.a + i * pair.stages, i, step, t_start + elapsed + pair.c[i] * step);
      Rate(ck, m, d, k_.data() + i * nk_);
      Rotations(step, k_.data() + i * nk_);
    }
    // the last stage was evaluated at the fifth-order solution (first same as last)
    const bool finite = AllFinite(k_.data() + (pair.stages - 1) * nk_, nk_) &&
                        AllFinite(d->qpos, nq_) && AllFinite(d->qvel, nv_);
    const double err = finite ? ErrorNorm(m, d, pair, step, s) : HUGE_VAL;
    const bool accept = err <= 1;
    const double inv = err > 0 ? 1 / err : kFactorMax;
    double factor = kSafety * std::pow(inv, b1) * std::pow(inv_err1_, b2) * std::pow(inv_err2_, b3);
    factor = accept ? std::clamp(factor, 1.0, kFactorMax)
                    : std::clamp(std::isfinite(factor) ? factor : 0.0, kFactorMin, kSafety);
    if (accept) {
      if (ntaken_ < kMaxTaken) taken_[ntaken_] = step;
      ntaken_++;
      info_.accepted++;
      info_.min_step = std::min(info_.min_step, step);
      info_.max_step = std::max(info_.max_step, step);
      info_.error = err;
      inv_err2_ = inv_err1_;
      inv_err1_ = std::isfinite(inv) && inv > 0 ? inv : 1;
      elapsed = last ? h : elapsed + step;
      ClipActivations(m, d);
      Save(m, d);
      // first same as last: the rate at the solution, its rotations at their own frame
      ReadRate(d, k_.data());
      mju_copy(d->qacc_warmstart, d->qacc, nv_);
      // a last step shortened to the end does not shrink the proposal
      dt = last && step < dt ? dt : step * factor;
    } else {
      info_.rejected++;
      dt = step * factor;
    }
  }
  info_.next_step = dt;
  if (info_.status != ckADAPT_OK) {
    // back to the step's start, with its forward pass, and the reason
    mju_copy(y0_.data(), start_.data(), nq_ + nv_ + na_);
    Load(m, d);
    d->time = t_start;
    mju_copy(d->qacc_warmstart, warm_.data(), nv_);
    ForwardSkip(ck, m, d, mjSTAGE_NONE, 0);
    dt_ = 0;
    inv_err1_ = inv_err2_ = 1;
    if (info_.min_step == HUGE_VAL) info_.min_step = 0;
    return false;
  }
  dt_ = dt;
  d->time = t_start + h;
  return true;
}

}  // namespace contactkit
