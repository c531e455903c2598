// Copyright 2026 The contactkit developers.
//
// Reverse mode over an open-loop rollout (ck_rolloutGrad): a forward pass that keeps each step's
// state and the loss's gradients, then one backward sweep of vector-Jacobian products,
//   a_T = 0,   a_t = dL/dx_t + A_t' a_{t+1} + C_t' ds_t ... in the order of the steps:
//   for t = T-1 .. 0:  (a, g_u[t]) = VJP_t(dx[t] + a, ds[t]),   dL/dx_0 = a
// where dx[t] is the loss's gradient at the state after step t. Each VJP re-solves its step from
// the kept state with the derivative's own solver (as ck_transitionVJP does; lcp from the
// handle's warm start, a guess that changes no unique solution). With
// parameters (ck_rolloutGradParam), each step adds DxDp_t' a + DsDp_t' ds[t] to dL/dp, its
// parameter Jacobian (ck_paramJac's) formed at the same kept state.
#include "plugin/deriv/rollout_grad.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "plugin/deriv/derivative.h"
#include "plugin/deriv/fd_reference.h"
#include "plugin/step/compat.h"
#include "plugin/step/handle.h"

namespace contactkit {

RolloutTape::~RolloutTape() {
  if (data_) mj_deleteData(data_);
}

namespace {

// the arrays of d kept for each step, in the tape's order (time follows them)
constexpr int kFields = CK_MJ3 ? 6 : 5;
std::array<std::pair<double*, int>, kFields> Fields(const mjModel* m, const mjData* d) {
  return {{{d->qpos, m->nq},
           {d->qvel, m->nv},
           {d->act, m->na},
           {d->ctrl, m->nu},
           {d->qacc_warmstart, m->nv},
#if CK_MJ3
           {d->plugin_state, static_cast<int>(m->npluginstate)}
#endif
  }};
}

}  // namespace

bool RolloutTape::Reserve(const mjModel* m, int nstep) {
  if (!data_) data_ = mj_makeData(m);
  if (!data_) return false;
  nstate_ = 1;  // time
  for (const auto& f : Fields(m, data_)) nstate_ += f.second;
  ndx_ = 2 * m->nv + m->na;
  ns_ = m->nsensordata;
  if (nstep > nstep_) {
    nstep_ = nstep;
    state_.resize(static_cast<size_t>(nstep) * nstate_);
    dx_.resize(static_cast<size_t>(nstep) * ndx_);
    ds_.resize(static_cast<size_t>(nstep) * std::max(ns_, 1));
    controller_.resize(nstep);
  }
  adjoint_.resize(ndx_);
  gx_.resize(ndx_);
  return true;
}

void RolloutTape::ReserveParams(int np) {
  const size_t n = static_cast<size_t>(std::max(np, 1));
  if (dxdp_.size() < n * ndx_) dxdp_.resize(n * ndx_);
  if (dsdp_.size() < n * ns_) dsdp_.resize(n * ns_);
  if (how_.size() < n) how_.resize(n);
}

void RolloutTape::Save(int t, const mjModel* m, const mjData* d,
                       const AdaptiveIntegrator::Controller& c) {
  controller_[t] = c;
  double* s = state_.data() + static_cast<size_t>(t) * nstate_;
  for (const auto& [x, n] : Fields(m, d)) {
    mju_copy(s, x, n);
    s += n;
  }
  *s = d->time;
}

mjData* RolloutTape::Load(int t, const mjModel* m, const mjData* held) {
  CopyStepInputs(m, held, data_);
  const double* s = state_.data() + static_cast<size_t>(t) * nstate_;
  for (const auto& [x, n] : Fields(m, data_)) {
    mju_copy(x, s, n);
    s += n;
  }
  data_->time = *s;
  return data_;
}

RolloutTape& Derivative::tape() {
  if (!tape_) tape_ = std::make_unique<RolloutTape>();
  return *tape_;
}

namespace {

// the forward pass: nstep steps from d, each step's start on the tape, the loss summed; 0, or
// -1 / -2 with ck_lastError set
int Forward(ckHandle* ck, const mjModel* m, mjData* d, int nstep, const mjtNum* ctrl,
            ckStepLoss loss, void* user, RolloutTape* tape, mjtNum* value, const char* fn) {
  const int ndx = 2 * m->nv + m->na, ns = m->nsensordata;
  double total = 0;
  for (int t = 0; t < nstep; t++) {
    if (ctrl) mju_copy(d->ctrl, ctrl + static_cast<size_t>(t) * m->nu, m->nu);
    tape->Save(t, m, d, ck->adaptive.controller());
    const int resets = Resets(d);
    StepSkip(ck, m, d, mjSTAGE_NONE, 0);
    if (Resets(d) != resets) {
      SetLastError(ck, fn,
                   "step %d diverged (MuJoCo reset the state: NaN, inf or beyond 1e10); no "
                   "gradient",
                   t);
      return -2;
    }
    mju_zero(tape->dx(t), ndx);
    if (ns) mju_zero(tape->ds(t), ns);
    const double l = loss(user, t, m, d, tape->dx(t), ns ? tape->ds(t) : nullptr);
    if (!std::isfinite(l) || FirstBad(tape->dx(t), ndx) >= 0 ||
        (ns && FirstBad(tape->ds(t), ns) >= 0)) {
      SetLastError(ck, fn,
                   "the loss at step %d or its gradient is not finite (value %g); allowed: "
                   "finite values",
                   t, l);
      return -1;
    }
    total += l;
  }
  if (value) *value = total;
  return 0;
}

// the parameters' part of step t of the sweep: gp += DxDp_t' a + DsDp_t' ds_t at the kept state
// dt, how[k] = 1 where a column used differences; 0, 1 (some column by differences), or -2 with
// ck_lastError set
int ParamStep(ckHandle* ck, const mjModel* m, const mjData* dt, int t, const ckParam* params,
              int np, const double* a, const double* ds, mjtNum* gp, int* how, const char* fn) {
  Derivative& deriv = *ck->deriv;
  RolloutTape& tape = deriv.tape();
  const int ndx = 2 * m->nv + m->na, ns = m->nsensordata;
  double *dxdp = tape.dxdp(), *dsdp = ns ? tape.dsdp() : nullptr;
  const int resets = deriv.ScratchResets();
  const int r = deriv.ParamJacobian(m, dt, params, np, dxdp, dsdp, tape.how());
  const int bad = std::max(FirstBad(dxdp, ndx * np), dsdp ? FirstBad(dsdp, ns * np) : -1);
  if (deriv.ScratchResets() != resets || deriv.refused() || bad >= 0) {
    SetLastError(ck, fn, "the parameter Jacobian of step %d is not finite", t);
    return -2;
  }
  for (int k = 0; k < np; k++) {
    double g = 0;
    for (int i = 0; i < ndx; i++) g += dxdp[static_cast<size_t>(i) * np + k] * a[i];
    for (int i = 0; dsdp && i < ns; i++) g += dsdp[static_cast<size_t>(i) * np + k] * ds[i];
    if (gp) gp[k] += g;
    if (how && tape.how()[k] == ckPARAM_FINITE_DIFF) how[k] = ckPARAM_FINITE_DIFF;
  }
  return r == 1 ? 1 : 0;
}

// the message of a step whose gradient is not finite, or exploded (v beyond mjMAXVAL)
void SweepError(ckHandle* ck, const char* fn, int t, mjtNum v) {
  // a value beyond mjMAXVAL that is still a number: the adjoint grew through the steps after
  // this one (stiff or chaotic dynamics), which is not the same as a NaN
  if (std::isfinite(v) && v != 0) {
    SetLastError(ck, fn,
                 "the gradient of step %d exploded (%g beyond mjMAXVAL = %g): the adjoint grew "
                 "through the later steps; shorten the horizon or smooth the contact",
                 t, static_cast<double>(v), mjMAXVAL);
  } else {
    SetLastError(ck, fn, "the gradient of step %d is not finite", t);
  }
}

// the backward sweep from the last step, each step's VJP (and parameter Jacobian if np > 0) at
// its kept state; 0, 1 (some step by differences) or -2 with ck_lastError set
int Backward(ckHandle* ck, const mjModel* m, const mjData* d, int nstep, const ckParam* params,
             int np, mjtNum* gx0, mjtNum* gu, mjtNum* gp, int* how, const char* fn) {
  Derivative& deriv = *ck->deriv;
  RolloutTape& tape = deriv.tape();
  const int ndx = 2 * m->nv + m->na, nu = m->nu, ns = m->nsensordata;
  double* a = tape.adjoint();
  mju_zero(a, ndx);
  int ret = 0;
  for (int t = nstep - 1; t >= 0; t--) {
    mju_addTo(a, tape.dx(t), ndx);
    mjData* dt = tape.Load(t, m, d);
    const int resets = deriv.ScratchResets();
    deriv.set_controller(tape.controller(t));  // an adaptive step's sizes as they were taken
    mjtNum* gut = gu ? gu + static_cast<size_t>(t) * nu : nullptr;
    const int r = deriv.Vjp(m, dt, a, ns ? tape.ds(t) : nullptr, tape.gx(), gut);
    const int badx = FirstBad(tape.gx(), ndx), badu = gut ? FirstBad(gut, nu) : -1;
    if (deriv.ScratchResets() != resets || deriv.refused() || badx >= 0 || badu >= 0) {
      deriv.set_controller(nullptr);
      SweepError(ck, fn, t, badx >= 0 ? tape.gx()[badx] : badu >= 0 ? gut[badu] : 0);
      return -2;
    }
    if (r == 1 && ret == 0) {
      ck->fallback = deriv.fallback();
      SetLastError(ck, fn, "finite differences at step %d: %s", t, ck_fallbackText(ck->fallback));
      ret = 1;
    }
    const int rp = np ? ParamStep(ck, m, dt, t, params, np, a, tape.ds(t), gp, how, fn) : 0;
    deriv.set_controller(nullptr);
    if (rp < 0) return rp;
    if (rp == 1 && ret == 0) {
      SetLastError(ck, fn, "finite differences for some parameters (how[k] = 1) at step %d", t);
      ret = 1;
    }
    mju_copy(a, tape.gx(), ndx);
  }
  if (gx0) mju_copy(gx0, a, ndx);
  return ret;
}

// ck_rolloutGrad and ck_rolloutGradParam (np = 0: no parameters)
int RolloutGrad(ckHandle* ck, const mjModel* m, mjData* d, int nstep, const mjtNum* ctrl,
                ckStepLoss loss, void* user, const ckParam* params, int np, mjtNum* value,
                mjtNum* gx0, mjtNum* gu, mjtNum* gp, int* how, const char* fn) {
  ck->fallback = ckFALLBACK_NONE;
  const int check = CheckTransition(ck, m, d, fn);
  if (check) return check;
  if (nstep < 0 || !loss) {
    SetLastError(ck, fn, "nstep = %d, loss %s; allowed: nstep >= 0 and a loss", nstep,
                 loss ? "given" : "NULL");
    return -1;
  }
  const int bad = ctrl ? FirstBad(ctrl, nstep * m->nu) : -1;
  if (bad >= 0) {
    SetLastError(ck, fn, "ctrl[%d] = %g is not finite; allowed: finite controls", bad,
                 static_cast<double>(ctrl[bad]));
    return -1;
  }
  if (np > 0 && CheckParams(ck, m, params, np, fn)) return -1;
  RolloutTape& tape = ck->deriv->tape();
  if (UsesAnchors(ck)) {
    SetLastError(ck, fn,
                 "comfree's contact anchors (setting 'anchor' = 1) carry state from step to step "
                 "that the rollout gradient does not differentiate; allowed: anchor = 0");
    return -1;
  }
  if (!tape.Reserve(m, nstep)) {
    SetLastError(ck, fn, "could not allocate the rollout's scratch mjData");
    return -1;
  }
  if (np) tape.ReserveParams(np);
  if (gp) mju_zero(gp, np);
  for (int k = 0; how && k < np; k++) how[k] = ckPARAM_ANALYTIC;
  const int fwd = Forward(ck, m, d, nstep, ctrl, loss, user, &tape, value, fn);
  if (fwd) return fwd;
  return Backward(ck, m, d, nstep, params, np, gx0, gu, gp, how, fn);
}

}  // namespace
}  // namespace contactkit

extern "C" {

int ck_rolloutGrad(ckHandle* ck, const mjModel* m, mjData* d, int nstep, const mjtNum* ctrl,
                   ckStepLoss loss, void* user, mjtNum* value, mjtNum* gx0, mjtNum* gu) {
  using namespace contactkit;
  InUse guard(ck, "ck_rolloutGrad");
  if (!guard.ok()) return -1;
  return RolloutGrad(ck, m, d, nstep, ctrl, loss, user, nullptr, 0, value, gx0, gu, nullptr,
                     nullptr, "ck_rolloutGrad");
}

int ck_rolloutGradParam(ckHandle* ck, const mjModel* m, mjData* d, int nstep, const mjtNum* ctrl,
                        ckStepLoss loss, void* user, const ckParam* params, int np, mjtNum* value,
                        mjtNum* gx0, mjtNum* gu, mjtNum* gp, int* how) {
  using namespace contactkit;
  const char* fn = "ck_rolloutGradParam";
  InUse guard(ck, fn);
  if (!guard.ok()) return -1;
  if (!params || np <= 0) {
    ck->fallback = ckFALLBACK_NONE;
    CheckParams(ck, m, params, np, fn);
    return -1;
  }
  return RolloutGrad(ck, m, d, nstep, ctrl, loss, user, params, np, value, gx0, gu, gp, how, fn);
}

}  // extern "C"
