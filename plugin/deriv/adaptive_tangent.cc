// Copyright 2026 The contactkit developers.
//
// Jacobians of an adaptive step (integrator tsit5 / dopri5; plugin/step/adaptive.h), as DiffMJX
// differentiates its adaptive solver (discretize-then-optimize): the step is first taken as
// ck_step would take it from the caller's state (the owner's step-size controller), which fixes
// its accepted internal steps' sizes; then each internal step is an explicit Runge-Kutta map of
// fixed size, and its tangent chains through its stages:
//   X_i = y (+) s sum_j a_ij k_j,  k_i = f(X_i) (rotations through dexp^-1 at their offset),
//   y+ = X_last (the pair's last row is b; first same as last),
// with each stage's rate Jacobian G_i = d(qacc, act_dot)/d(q, v, act, u) from the same stage
// machinery as RK4 (PrepareStage, Directions). Memory: per direction the state tangent and six
// stage-rate tangents, (ndx + nu)(7 ndx) values, whatever the number of internal steps.
#include <mujoco/mujoco.h>

#include <algorithm>
#include <cstddef>

#include "plugin/deriv/derivative.h"
#include "plugin/step/adaptive.h"
#include "plugin/step/handle.h"

namespace contactkit {
namespace {

constexpr int kMaxStages = 7;  // stages of the 5(4) pairs

}  // namespace

void Derivative::SizeAdaptive(const ckSettings& s) {
  if (s.integrator == ckINT_MODEL || !ad_.y.empty()) return;
  const size_t nk = 2 * nv_ + na_, ndir = nk + nu_;
  ad_.y.assign(nq_ + nv_ + na_, 0.0);
  ad_.k.assign(kMaxStages * nk, 0.0);
  ad_.omega.assign(nk, 0.0);
  ad_.dx.assign(nk, 0.0);
  ad_.dy.assign(ndir * nk, 0.0);
  ad_.dk.assign(ndir * (kMaxStages - 1) * nk, 0.0);
  ad_.ddx.assign(nk, 0.0);
  ad_.dX.assign(nk, 0.0);
  ad_.gp.assign(ndir * (nv_ + na_), 0.0);
}

bool Derivative::Adaptive(const mjModel* m, const mjData* d) {
  const int nq = nq_, nv = nv_, na = na_, ndx = 2 * nv + na, ndir = ndx + nu_;
  const ButcherPair& pair = PairOf(settings_.integrator);
  if (ad_.y.empty() || pair.stages > kMaxStages || pair.b[pair.stages - 1] != 0) return false;

  // the step as ck_step takes it from d: its accepted internal steps
  AdaptiveIntegrator& shadow = shadow_->adaptive;
  ResetShadow();
  CopyStepInputs(m, d, stage_data_);
  StepSkip(shadow_, m, stage_data_, mjSTAGE_NONE, 1);
  const int ntaken = shadow.ntaken();
  if (shadow.info().status != ckADAPT_OK || ntaken > AdaptiveIntegrator::kMaxTaken) return false;
  if (param_.run) return AdaptiveParams(m, d, ntaken);

  // directions to chain (as RK4): state columns, control columns
  const bool state_out = sink_.A || (sink_.gx && sink_.dx);
  const bool ctrl_out = sink_.B || (sink_.gu && sink_.dx);
  const int first = state_out ? 0 : ndx, last = ctrl_out ? ndir : ndx;
  for (int kd = first; kd < last; kd++) {
    double* dy = ad_.dy.data() + static_cast<size_t>(kd) * ndx;
    for (int i = 0; i < ndx; i++) dy[i] = i == kd ? 1 : 0;
  }
  CopyStepInputs(m, d, stage_data_);
  mju_copy(ad_.y.data(), d->qpos, nq);
  mju_copy(ad_.y.data() + nq, d->qvel, nv);
  mju_copy(ad_.y.data() + nq + nv, d->act, na);
  elastic_.Prepare(settings_, nullptr, nullptr);

  double t = d->time;
  for (int n = 0; n < ntaken; n++) {
    const double step = shadow.taken()[n];
    if (!AdaptiveInternalStep(m, t, step, n == 0, first, last)) return false;
    t += step;
  }
  for (int kd = first; kd < last; kd++)
    EmitState(kd, ad_.dy.data() + static_cast<size_t>(kd) * ndx);
  return true;
}

bool Derivative::AdaptiveParams(const mjModel* m, const mjData* d, int ntaken) {
  const int nq = nq_, nv = nv_, na = na_, ndx = 2 * nv + na, ndir = ndx + nu_;
  const AdaptiveIntegrator& shadow = shadow_->adaptive;
  bool ok = true;
  for (int begin = 0; begin < param_.np && ok; begin += ndir) {
    const int nslot = std::min(ndir, param_.np - begin);
    ad_.param_begin = begin;
    mju_zero(ad_.dy.data(), static_cast<size_t>(nslot) * ndx);
    CopyStepInputs(m, d, stage_data_);
    mju_copy(ad_.y.data(), d->qpos, nq);
    mju_copy(ad_.y.data() + nq, d->qvel, nv);
    mju_copy(ad_.y.data() + nq + nv, d->act, na);
    double t = d->time;
    for (int n = 0; n < ntaken && ok; n++) {
      const double step = shadow.taken()[n];
      ok = AdaptiveInternalStep(m, t, step, n == 0, 0, nslot);
      t += step;
    }
    for (int s = 0; s < nslot && ok && param_.dx; s++) {
      const double* dy = ad_.dy.data() + static_cast<size_t>(s) * ndx;
      for (int i = 0; i < ndx; i++)
        param_.dx[static_cast<size_t>(i) * param_.np + begin + s] = dy[i];
    }
  }
  ad_.param_begin = -1;
  return ok;
}

bool Derivative::AdaptiveInternalStep(const mjModel* m, double t, double step, bool first_step,
                                      int first, int last) {
  const int nq = nq_, nv = nv_, na = na_, ndx = 2 * nv + na;
  const ButcherPair& pair = PairOf(settings_.integrator);
  const std::vector<int>& rot = shadow_->adaptive.rotations();
  const int nrot = static_cast<int>(rot.size());
  const bool sensor_out = sink_.C || sink_.D || (sink_.ds && (sink_.gx || sink_.gu));
  const double* y = ad_.y.data();
  double* k = ad_.k.data();
  double* dx = ad_.dx.data();

  // stages 0 .. S-2 evaluate the rate; row S-1 (= b) combines them into the step's end
  for (int i = 0; i < pair.stages; i++) {
    const double* a = pair.a + i * pair.stages;
    const bool end = i == pair.stages - 1;
    mju_zero(dx, ndx);
    for (int j = 0; j < i; j++) {
      if (a[j] != 0) mju_addToScl(dx, k + j * ndx, a[j], ndx);
    }

    // the nominal state X_i = y (+) step dx, at its time
    mju_copy(stage_data_->qpos, y, nq);
    mj_integratePos(m, stage_data_->qpos, dx, step);
    for (int r = 0; r < nv; r++) stage_data_->qvel[r] = y[nq + r] + step * dx[nv + r];
    for (int r = 0; r < na; r++) stage_data_->act[r] = y[nq + nv + r] + step * dx[2 * nv + r];
    stage_data_->time = t + pair.c[i] * step;

    // the stage's rate k_i and its Jacobian G (nv+na x ndir); the first gives the sensors'
    if (!end) {
      stage_.sensors = first_step && i == 0 && (sensor_out || (param_.run && param_.ds));
      if (!PrepareStage(m, true)) return false;
      double* ki = k + i * ndx;
      mju_copy(ki, stage_data_->qvel, nv);
      mju_copy(ki + nv, integrator_.qacc, nv);
      mju_copy(ki + 2 * nv, nominal_.act_dot, na);
      mju_copy(ad_.omega.data(), ki, ndx);
      if (i > 0) RotationRate(rot.data(), nrot, step, dx, ki);
      if (!StageJacobian(m)) return false;
      if (ad_.param_begin >= 0 && !AdaptiveParamRates(m)) return false;
    }
    IntegrateMaps(m, dx, step, integrator_.step_maps);
    for (int kd = first; kd < last; kd++) AdaptiveStageTangent(m, i, step, kd);
    if (end) {
      ClipActivations(m, stage_data_);
      mju_copy(ad_.y.data(), stage_data_->qpos, nq);
      mju_copy(ad_.y.data() + nq, stage_data_->qvel, nv);
      mju_copy(ad_.y.data() + nq + nv, stage_data_->act, na);
    }
  }
  return true;
}

void Derivative::AdaptiveStageTangent(const mjModel* m, int i, double step, int kd) {
  const int nv = nv_, na = na_, nq = nq_, ndx = 2 * nv + na, nva = nv + na;
  const ButcherPair& pair = PairOf(settings_.integrator);
  const double* a = pair.a + i * pair.stages;
  const bool end = i == pair.stages - 1;
  double* dy = ad_.dy.data() + static_cast<size_t>(kd) * ndx;
  double* dk = ad_.dk.data() + static_cast<size_t>(kd) * (kMaxStages - 1) * ndx;
  double* ddx = ad_.ddx.data();
  double* dX = ad_.dX.data();

  // dX_i = d(y (+) step dx) along dy and ddx = sum_j a_ij dk_j
  mju_zero(ddx, ndx);
  for (int j = 0; j < i; j++) {
    if (a[j] != 0) mju_addToScl(ddx, dk + j * ndx, a[j], ndx);
  }
  IntegrateTangent(m, integrator_.step_maps, step, dy, ddx, dX);
  for (int r = 0; r < nv; r++) dX[nv + r] = dy[nv + r] + step * ddx[nv + r];
  if (end) {
    // the step's end, with the activations clipped as the forward step clips them
    const double* y = ad_.y.data();
    ActivationTangent(m, y + nq + nv, ad_.dx.data() + 2 * nv, dy + 2 * nv, ddx + 2 * nv, step,
                      dX + 2 * nv);
    mju_copy(dy, dX, ndx);
    return;
  }
  for (int r = 0; r < na; r++) dX[2 * nv + r] = dy[2 * nv + r] + step * ddx[2 * nv + r];

  // dk_i = (dv_i, G [dX_i; du]), rotations corrected as the rate is
  // (a control's own column of G, or a parameter's G_p)
  const double* G = integrator_.rk_stage_jac;
  const double* own = ad_.param_begin >= 0 ? ad_.gp.data() + static_cast<size_t>(kd) * nva
                      : kd >= ndx          ? G + static_cast<size_t>(kd) * nva
                                           : nullptr;
  double* dki = dk + i * ndx;
  mju_copy(dki, dX + nv, nv);
  for (int r = 0; r < nva; r++) {
    double sum = own ? own[r] : 0;
    for (int c = 0; c < ndx; c++) sum += G[static_cast<size_t>(c) * nva + r] * dX[c];
    dki[nv + r] = sum;
  }
  if (i > 0) {
    const std::vector<int>& rot = shadow_->adaptive.rotations();
    RotationRateTangent(rot.data(), static_cast<int>(rot.size()), step, ad_.dx.data(),
                        ad_.omega.data(), ddx, dki);
  }
}

}  // namespace contactkit
