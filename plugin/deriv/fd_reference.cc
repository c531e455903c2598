// Copyright 2026 The contactkit developers.
//
// ck_transitionFD: mjd_transitionFD's finite differences (perturbation order, tangent-space
// positions, clamped controls, forward or centered, restored warm start, skipped stages) with
// every step taken by ck_step's pipeline on a scratch mjData and the shadow handle. Differences
// from MuJoCo 2.2.2: time is restored before every step (MuJoCo lets it advance), and RK4 steps
// never skip stages (MuJoCo's RK4 stages overwrite the position results its skips reuse).
#include "plugin/deriv/fd_reference.h"

#include <algorithm>
#include <cstring>

#include "plugin/step/compat.h"

namespace contactkit {
namespace {

// ds = (s2 - s1) / h over [qpos, qvel, act], positions in the tangent space
void StateDiff(const mjModel* m, double* ds, const double* s1, const double* s2, double h) {
  const int nq = m->nq, nv = m->nv, na = m->na;
  mj_differentiatePos(m, ds, h, s1, s2);
  for (int i = 0; i < nv + na; i++) ds[nv + i] = (s2[nq + i] - s1[nq + i]) / h;
}

// forward, backward or centered difference of two optional perturbed states
void ClampedStateDiff(const mjModel* m, double* ds, const double* s, const double* plus,
                      const double* minus, double h) {
  if (plus && minus) {
    StateDiff(m, ds, minus, plus, 2 * h);
  } else if (plus) {
    StateDiff(m, ds, s, plus, h);
  } else if (minus) {
    StateDiff(m, ds, minus, s, h);
  } else {
    for (int i = 0; i < 2 * m->nv + m->na; i++) ds[i] = 0;
  }
}

void ClampedDiff(double* dx, const double* x, const double* plus, const double* minus, double h,
                 int n) {
  for (int i = 0; i < n; i++) {
    dx[i] = plus && minus ? (plus[i] - minus[i]) / (2 * h)
            : plus        ? (plus[i] - x[i]) / h
            : minus       ? (x[i] - minus[i]) / h
                          : 0;
  }
}

bool InRange(double x1, double x2, const double* range) {
  return x1 >= range[0] && x1 <= range[1] && x2 >= range[0] && x2 <= range[1];
}

}  // namespace

void CopyStepInputs(const mjModel* m, const mjData* src, mjData* dst) {
  mju_copy(dst->qpos, src->qpos, m->nq);
  mju_copy(dst->qvel, src->qvel, m->nv);
  mju_copy(dst->act, src->act, m->na);
  mju_copy(dst->ctrl, src->ctrl, m->nu);
  mju_copy(dst->qacc_warmstart, src->qacc_warmstart, m->nv);
  mju_copy(dst->qfrc_applied, src->qfrc_applied, m->nv);
  mju_copy(dst->xfrc_applied, src->xfrc_applied, 6 * m->nbody);
  mju_copy(dst->mocap_pos, src->mocap_pos, 3 * m->nmocap);
  mju_copy(dst->mocap_quat, src->mocap_quat, 4 * m->nmocap);
  mju_copy(dst->userdata, src->userdata, m->nuserdata);
#if CK_MJ3
  if (m->neq) std::memcpy(dst->eq_active, src->eq_active, m->neq * sizeof(mjtByte));
  mju_copy(dst->plugin_state, src->plugin_state, m->npluginstate);
#endif
  dst->time = src->time;
}

void FdReference::Carve(ArenaCarver& c, const DerivSizes& n) {
  const size_t nstate = n.nq + n.nv + n.na;
  next_ = c.Take<double>(nstate);
  next_plus_ = c.Take<double>(nstate);
  next_minus_ = c.Take<double>(nstate);
  sensor_ = c.Take<double>(n.ns);
  sensor_plus_ = c.Take<double>(n.ns);
  sensor_minus_ = c.Take<double>(n.ns);
  column_ = c.Take<double>(std::max<size_t>(n.ndx(), n.ns));
}

void FdReference::Run(const mjModel* m, const mjData* d, mjData* scratch, double eps, int centered,
                      bool state, bool ctrl, bool sensors, FdTarget* target,
                      const unsigned char* only) {
  const int nv = m->nv, na = m->na, nu = m->nu, ns = m->nsensordata, ndx = 2 * nv + na;
  const int skipsensor = !sensors;
  const bool rk4 = m->opt.integrator == mjINT_RK4;
  const int skip_vel = rk4 ? mjSTAGE_NONE : mjSTAGE_VEL;
  const int skip_pos = rk4 ? mjSTAGE_NONE : mjSTAGE_POS;
  double* next = next_;
  double* plus = next_plus_;
  double* minus = next_minus_;
  double* sens = skipsensor ? nullptr : sensor_;
  double* splus = skipsensor ? nullptr : sensor_plus_;
  double* sminus = skipsensor ? nullptr : sensor_minus_;
  double* col = column_;

  // nominal step; its position and velocity results stay in stage_data_ for the skips below
  CopyStepInputs(m, d, scratch);
  target->Step(m, mjSTAGE_NONE, skipsensor, next, sens);

  // controls: skip position and velocity, respect ctrlrange
  if (ctrl) {
    for (int i = 0; i < nu; i++) {
      if (only && !only[ndx + i]) continue;
      const double ui = d->ctrl[i];
      const int limited = m->actuator_ctrllimited[i];
      const double* range = m->actuator_ctrlrange + 2 * i;
      const bool fwd = !limited || InRange(ui, ui + eps, range);
      const bool back = (centered || !fwd) && (!limited || InRange(ui - eps, ui, range));
      if (fwd) {
        CopyStepInputs(m, d, scratch);
        scratch->ctrl[i] = ui + eps;
        target->Step(m, skip_vel, skipsensor, plus, splus);
      }
      if (back) {
        CopyStepInputs(m, d, scratch);
        scratch->ctrl[i] = ui - eps;
        target->Step(m, skip_vel, skipsensor, minus, sminus);
      }
      ClampedStateDiff(m, col, next, fwd ? plus : nullptr, back ? minus : nullptr, eps);
      target->EmitState(ndx + i, col);
      if (sensors) {
        ClampedDiff(col, sens, fwd ? splus : nullptr, back ? sminus : nullptr, eps, ns);
        target->EmitSensor(ndx + i, col);
      }
    }
  }

  // activations, velocities (skip position), positions (tangent space)
  if (state) {
    for (int kind = 0; kind < 3; kind++) {
      const int n = kind == 0 ? na : nv;
      const int offset = kind == 0 ? 2 * nv : kind == 1 ? nv : 0;
      const int skip = kind == 0 ? skip_vel : kind == 1 ? skip_pos : mjSTAGE_NONE;
      for (int i = 0; i < n; i++) {
        if (only && !only[offset + i]) continue;
        for (int side = 0; side < (centered ? 2 : 1); side++) {
          const double e = side == 0 ? eps : -eps;
          CopyStepInputs(m, d, scratch);
          if (kind == 0) {
            scratch->act[i] += e;
          } else if (kind == 1) {
            scratch->qvel[i] += e;
          } else {
            mju_zero(col, nv);
            col[i] = 1;
            mj_integratePos(m, scratch->qpos, col, e);
          }
          target->Step(m, skip, skipsensor, side == 0 ? plus : minus, side == 0 ? splus : sminus);
        }
        ClampedStateDiff(m, col, next, plus, centered ? minus : nullptr, eps);
        target->EmitState(offset + i, col);
        if (sensors) {
          ClampedDiff(col, sens, splus, centered ? sminus : nullptr, eps, ns);
          target->EmitSensor(offset + i, col);
        }
      }
    }
  }
}

}  // namespace contactkit
