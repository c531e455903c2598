// Copyright 2026 The contactkit developers.
//
// ck_transitionFD: mjd_transitionFD's finite differences (perturbation order, tangent-space
// positions, clamped controls, forward or centered, restored warm start, skipped stages) with
// every step taken by ck_step's pipeline on a scratch mjData and the shadow handle. Differences
// from MuJoCo 2.2.2: time is restored before every step (MuJoCo lets it advance), and RK4 steps
// never skip stages (MuJoCo's RK4 stages overwrite the position results its skips reuse).
#include <cstring>

#include "plugin/deriv/derivative.h"
#include "plugin/step/compat.h"
#include "plugin/step/handle.h"

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

void Derivative::FdStep(const mjModel* m, int skipstage, int skipsensor, double* next,
                        double* sensor) {
  ResetShadow();
  StepSkip(shadow_, m, d0_, skipstage, skipsensor);
  mju_copy(next, d0_->qpos, nq_);
  mju_copy(next + nq_, d0_->qvel, nv_);
  mju_copy(next + nq_ + nv_, d0_->act, na_);
  if (sensor) mju_copy(sensor, d0_->sensordata, ns_);
}

void Derivative::FiniteDiff(const mjModel* m, const mjData* d, mjtNum eps, int centered, mjtNum* A,
                            mjtNum* B, mjtNum* C, mjtNum* D) {
  sink_ = Sink();
  sink_.A = A;
  sink_.B = B;
  sink_.C = C;
  sink_.D = D;
  FiniteDiffSink(m, d, eps, centered);
}

void Derivative::FiniteDiffSink(const mjModel* m, const mjData* d, double eps, int centered) {
  const int nv = nv_, na = na_, nu = nu_, ns = ns_, ndx = 2 * nv + na;
  const bool sensors = sink_.C || sink_.D || (sink_.ds && (sink_.gx || sink_.gu));
  const int skipsensor = !sensors;
  const bool rk4 = m->opt.integrator == mjINT_RK4;
  const int skip_vel = rk4 ? mjSTAGE_NONE : mjSTAGE_VEL;
  const int skip_pos = rk4 ? mjSTAGE_NONE : mjSTAGE_POS;
  double* next = fd_.next;
  double* plus = fd_.next_plus;
  double* minus = fd_.next_minus;
  double* sens = skipsensor ? nullptr : fd_.sensor;
  double* splus = skipsensor ? nullptr : fd_.sensor_plus;
  double* sminus = skipsensor ? nullptr : fd_.sensor_minus;
  double* col = fd_.column;

  // nominal step; its position and velocity results stay in d0_ for the skips below
  LoadState(m, d, d0_);
  FdStep(m, mjSTAGE_NONE, skipsensor, next, sens);

  // controls: skip position and velocity, respect ctrlrange
  if (sink_.WantsCtrl()) {
    for (int i = 0; i < nu; i++) {
      const double ui = d->ctrl[i];
      const int limited = m->actuator_ctrllimited[i];
      const double* range = m->actuator_ctrlrange + 2 * i;
      const bool fwd = !limited || InRange(ui, ui + eps, range);
      const bool back = (centered || !fwd) && (!limited || InRange(ui - eps, ui, range));
      if (fwd) {
        LoadState(m, d, d0_);
        d0_->ctrl[i] = ui + eps;
        FdStep(m, skip_vel, skipsensor, plus, splus);
      }
      if (back) {
        LoadState(m, d, d0_);
        d0_->ctrl[i] = ui - eps;
        FdStep(m, skip_vel, skipsensor, minus, sminus);
      }
      ClampedStateDiff(m, col, next, fwd ? plus : nullptr, back ? minus : nullptr, eps);
      EmitState(ndx + i, col);
      if (sensors) {
        ClampedDiff(col, sens, fwd ? splus : nullptr, back ? sminus : nullptr, eps, ns);
        EmitSensor(ndx + i, col);
      }
    }
  }

  // activations, velocities (skip position), positions (tangent space)
  if (sink_.WantsState()) {
    for (int kind = 0; kind < 3; kind++) {
      const int n = kind == 0 ? na : nv;
      const int offset = kind == 0 ? 2 * nv : kind == 1 ? nv : 0;
      const int skip = kind == 0 ? skip_vel : kind == 1 ? skip_pos : mjSTAGE_NONE;
      for (int i = 0; i < n; i++) {
        for (int side = 0; side < (centered ? 2 : 1); side++) {
          const double e = side == 0 ? eps : -eps;
          LoadState(m, d, d0_);
          if (kind == 0) {
            d0_->act[i] += e;
          } else if (kind == 1) {
            d0_->qvel[i] += e;
          } else {
            mju_zero(col, nv);
            col[i] = 1;
            mj_integratePos(m, d0_->qpos, col, e);
          }
          FdStep(m, skip, skipsensor, side == 0 ? plus : minus, side == 0 ? splus : sminus);
        }
        ClampedStateDiff(m, col, next, plus, centered ? minus : nullptr, eps);
        EmitState(offset + i, col);
        if (sensors) {
          ClampedDiff(col, sens, splus, centered ? sminus : nullptr, eps, ns);
          EmitSensor(offset + i, col);
        }
      }
    }
  }
}

}  // namespace contactkit
