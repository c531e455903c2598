// Copyright 2026 The contactkit developers.
//
// Analytic position tangents of the smooth data for the blocked "mujoco" path. Perturbing dof k
// moves the bodies of its subtree rigidly by the motion S = cdof_k (expressed, like everything in
// MuJoCo's com-based frame, at the subtree center of mass of its tree, held fixed), so that
//   - the motion axes the perturbation carries change by S x cdof_j, inertias by
//     dI x = S x* (I x) - I (S x x), and MuJoCo's recursive Newton-Euler pass (mj_rne, with the
//     cdof_dot convention of mj_comVel) is differentiated in one sweep over the subtree and its
//     ancestors: d(M a + bias)/dq_k, and d(M w)/dq_k for Euler's implicit damping;
//   - geom poses change by the same rigid motion, so MuJoCo's collision functions run again only
//     for the contact pairs the subtree touches, on poses perturbed by a tiny step (the contact
//     point, frame and distance are differenced; the contact rows are differentiated from them
//     and the carried axes);
//   - joint springs of hinges and slides and joint-transmission actuators (their lengths move
//     with q, differenced through mj_fwdActuation) give the rest.
// Models outside this scope (tendons, other transmissions, ball and free joint springs, fluid
// forces, applied Cartesian forces, equality constraints and limits whose Jacobian changes, the
// implicit integrator, sensors, callbacks) use the position passes of derivative_smooth.cc.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "plugin/compat.h"
#include "plugin/derivative.h"
#include "plugin/handle.h"

namespace contactkit {
namespace {

constexpr double kPoseStep = 1e-7;  // step of the perturbed geom poses

// small inline vector helpers for the per-direction loops (MuJoCo's are library calls)
inline double Dot3(const double* a, const double* b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

inline double Dot6(const double* a, const double* b) { return Dot3(a, b) + Dot3(a + 3, b + 3); }

inline void Cross3(double* res, const double* a, const double* b) {
  res[0] = a[1] * b[2] - a[2] * b[1];
  res[1] = a[2] * b[0] - a[0] * b[2];
  res[2] = a[0] * b[1] - a[1] * b[0];
}

inline void Copy6(double* y, const double* x) {
  for (int k = 0; k < 6; k++) y[k] = x[k];
}

inline void Zero6(double* y) {
  for (int k = 0; k < 6; k++) y[k] = 0;
}

// MuJoCo's spatial algebra (engine_util_spatial.c, not exported by 2.2.2)
void CrossMotion(double res[6], const double v[6], const double x[6]) {
  res[0] = -v[2] * x[1] + v[1] * x[2];
  res[1] = v[2] * x[0] - v[0] * x[2];
  res[2] = -v[1] * x[0] + v[0] * x[1];
  res[3] = -v[2] * x[4] + v[1] * x[5] - v[5] * x[1] + v[4] * x[2];
  res[4] = v[2] * x[3] - v[0] * x[5] + v[5] * x[0] - v[3] * x[2];
  res[5] = -v[1] * x[3] + v[0] * x[4] - v[4] * x[0] + v[3] * x[1];
}

void CrossForce(double res[6], const double v[6], const double f[6]) {
  res[0] = -v[2] * f[1] + v[1] * f[2] - v[5] * f[4] + v[4] * f[5];
  res[1] = v[2] * f[0] - v[0] * f[2] + v[5] * f[3] - v[3] * f[5];
  res[2] = -v[1] * f[0] + v[0] * f[1] - v[4] * f[3] + v[3] * f[4];
  res[3] = -v[2] * f[4] + v[1] * f[5];
  res[4] = v[2] * f[3] - v[0] * f[5];
  res[5] = -v[1] * f[3] + v[0] * f[4];
}

void MulInert(double res[6], const double* i, const double v[6]) {
  res[0] = i[0] * v[0] + i[3] * v[1] + i[4] * v[2] - i[8] * v[4] + i[7] * v[5];
  res[1] = i[3] * v[0] + i[1] * v[1] + i[5] * v[2] + i[8] * v[3] - i[6] * v[5];
  res[2] = i[4] * v[0] + i[5] * v[1] + i[2] * v[2] - i[7] * v[3] + i[6] * v[4];
  res[3] = i[8] * v[1] - i[7] * v[2] + i[9] * v[3];
  res[4] = i[6] * v[2] - i[8] * v[0] + i[9] * v[4];
  res[5] = i[7] * v[0] - i[6] * v[1] + i[9] * v[5];
}

void AddScl6(double* y, const double* x, double a) {
  for (int k = 0; k < 6; k++) y[k] += a * x[k];
}

}  // namespace

bool Derivative::AnalyticScope(const mjModel* m) const {
  // what the analytic position tangents cover (everything else: position passes)
  if (m->ntendon || mjcb_passive || mjcb_control || mjcb_act_dyn || mjcb_act_gain ||
      mjcb_act_bias || mjcb_contactfilter || m->opt.density > 0 || m->opt.viscosity > 0) {
    return false;
  }
  for (int j = 0; j < m->njnt; j++) {
    const int type = m->jnt_type[j];
    if ((type == mjJNT_BALL || type == mjJNT_FREE) && m->jnt_stiffness[j] != 0) return false;
  }
  for (int i = 0; i < m->nu; i++) {
    if (m->actuator_trntype[i] != mjTRN_JOINT) return false;
    const int type = m->jnt_type[m->actuator_trnid[2 * i]];
    if (type != mjJNT_HINGE && type != mjJNT_SLIDE) return false;
  }
#if CK_MJ3
  for (int b = 0; b < m->nbody; b++) {
    if (m->body_gravcomp[b] != 0) return false;
  }
  if (m->nflex) return false;
#endif
  return subtree_contiguous_;
}

void Derivative::DecideAnalytic(const mjModel* m) {
  analytic_ = !sensors_ && (batch_ || !has_rows_) && !implicit_ && !(has_rows_ && plain_varying_) &&
              AnalyticScope(m);
  for (int i = 0; i < 6 * m->nbody && analytic_; i++) analytic_ = d0_->xfrc_applied[i] == 0;
}

void Derivative::PrepareAnalytic(const mjModel* m) {
  const mjData* d = d0_;
  const int nbody = m->nbody;
  const double* cdof = d->cdof;
  const double* cvel = d->cvel;

  // velocity each dof's cdof_dot was computed with (mj_comVel's convention)
  for (int b = 1; b < nbody; b++) {
    double run[6];
    Copy6(run, cvel + 6 * m->body_parentid[b]);
    const int bda = m->body_dofadr[b];
    for (int j = bda; j < bda + m->body_dofnum[b];) {
      const int type = m->jnt_type[m->dof_jntid[j]];
      if (type == mjJNT_FREE) {
        for (int q = 0; q < 3; q++) {
          mju_copy(rne_pre_.data() + 6 * (j + q), run, 6);
          AddScl6(run, cdof + 6 * (j + q), v0_[j + q]);
        }
        j += 3;
      }
      if (type == mjJNT_FREE || type == mjJNT_BALL) {
        for (int q = 0; q < 3; q++) mju_copy(rne_pre_.data() + 6 * (j + q), run, 6);
        for (int q = 0; q < 3; q++) AddScl6(run, cdof + 6 * (j + q), v0_[j + q]);
        j += 3;
      } else {
        mju_copy(rne_pre_.data() + 6 * j, run, 6);
        AddScl6(run, cdof + 6 * j, v0_[j]);
        j++;
      }
    }
  }

  // Newton-Euler at (v, a, gravity) and, for Euler's implicit damping, at (0, a - aint, 0):
  // accelerations, body forces, subtree forces
  const double* a = d->qacc;
  for (int pass = 0; pass < (damped_ ? 2 : 1); pass++) {
    double* cacc = rne_cacc_.data() + pass * 6 * nbody;
    double* cfrc = rne_cfrc_.data() + pass * 6 * nbody;
    Zero6(cacc);
    if (pass == 0 && !mjDISABLED(mjDSBL_GRAVITY)) mju_scl3(cacc + 3, m->opt.gravity, -1);
    for (int b = 1; b < nbody; b++) {
      double* cb = cacc + 6 * b;
      Copy6(cb, cacc + 6 * m->body_parentid[b]);
      for (int j = m->body_dofadr[b]; j < m->body_dofadr[b] + m->body_dofnum[b]; j++) {
        if (pass == 0) {
          AddScl6(cb, d->cdof_dot + 6 * j, v0_[j]);
          AddScl6(cb, cdof + 6 * j, a[j]);
        } else {
          AddScl6(cb, cdof + 6 * j, a[j] - aint_[j]);
        }
      }
      double* fb = cfrc + 6 * b;
      MulInert(fb, d->cinert + 10 * b, cb);
      mju_copy(rne_icacc_.data() + pass * 6 * nbody + 6 * b, fb, 6);
      if (pass == 0) {
        double* iv = rne_icvel_.data() + 6 * b;
        double t[6];
        MulInert(iv, d->cinert + 10 * b, cvel + 6 * b);
        CrossForce(t, cvel + 6 * b, iv);
        for (int q = 0; q < 6; q++) fb[q] += t[q];
      }
    }
    for (int b = nbody - 1; b > 0; b--) {
      if (m->body_parentid[b]) AddScl6(cfrc + 6 * m->body_parentid[b], cfrc + 6 * b, 1);
    }
  }
}

bool Derivative::Carried(const mjModel* m, int k, int j) const {
  // does perturbing dof k rotate or move the axis of dof j (j in the subtree of k's body)?
  const int bk = m->dof_bodyid[k], bj = m->dof_bodyid[j];
  if (bj != bk) return true;
  const int jk = m->dof_jntid[k], jj = m->dof_jntid[j];
  if (jj != jk) return jj > jk;
  if (m->jnt_type[jk] == mjJNT_FREE) return j - m->jnt_dofadr[jj] >= 3;  // the rotations
  return true;
}

void Derivative::RneTangent(const mjModel* m, int k, double* dtau, double* dtau2) {
  const mjData* d = d0_;
  const int nv = nv_, nbody = m->nbody;
  const double* cdof = d->cdof;
  const double* cvel = d->cvel;
  const double* S = cdof + 6 * k;
  const int b0 = m->dof_bodyid[k], last = subtree_last_[b0];
  const double* cacc = rne_cacc_.data();
  const double* cfrc = rne_cfrc_.data();
  const double* cacc2 = rne_cacc_.data() + 6 * nbody;
  const double* cfrc2 = rne_cfrc_.data() + 6 * nbody;
  const double* a = d->qacc;
  double* dvel = rne_dvel_.data();
  double* dacc = rne_dacc_.data();
  double* dfrc = rne_dfrc_.data();
  double* dacc2 = rne_dacc2_.data();
  double* dfrc2 = rne_dfrc2_.data();
  double* dcdof = rne_dcdof_.data();

  // forward over the subtree: tangents of the carried axes, cvel, cacc and the body forces
  for (int b = b0; b <= last; b++) {
    double run[6], racc[6], racc2[6];
    const int parent = m->body_parentid[b];
    if (b == b0) {
      Zero6(run);
      Zero6(racc);
      Zero6(racc2);
    } else {
      Copy6(run, dvel + 6 * parent);
      Copy6(racc, dacc + 6 * parent);
      Copy6(racc2, dacc2 + 6 * parent);
    }
    const int bda = m->body_dofadr[b];
    for (int j = bda; j < bda + m->body_dofnum[b];) {
      const int type = m->jnt_type[m->dof_jntid[j]];
      const int n = type == mjJNT_FREE ? 6 : type == mjJNT_BALL ? 3 : 1;

      // the velocity tangent MuJoCo's cdof_dot of this joint's dofs sees: before the joint, or
      // for a free joint's rotations after its translations
      double pre[6], pre_rot[6];
      Copy6(pre, run);
      for (int q = 0; q < n; q++) {
        const int dof = j + q;
        double* dc = dcdof + 6 * dof;
        if (Carried(m, k, dof)) {
          CrossMotion(dc, S, cdof + 6 * dof);
        } else {
          Zero6(dc);
        }
        AddScl6(racc, dc, a[dof]);
        if (dtau2) AddScl6(racc2, dc, a[dof] - aint_[dof]);

        // d cdof_dot = d pre x cdof + pre x d cdof (free translations: cdof_dot = 0)
        if (type == mjJNT_FREE && q == 3) Copy6(pre_rot, run);
        if (!(type == mjJNT_FREE && q < 3)) {
          const double* dp = type == mjJNT_FREE ? pre_rot : pre;
          double t1[6], t2[6];
          CrossMotion(t1, dp, cdof + 6 * dof);
          CrossMotion(t2, rne_pre_.data() + 6 * dof, dc);
          for (int r = 0; r < 6; r++) racc[r] += v0_[dof] * (t1[r] + t2[r]);
        }
        AddScl6(run, dc, v0_[dof]);
        if (type != mjJNT_FREE && type != mjJNT_BALL) Copy6(pre, run);
      }
      j += n;
    }
    Copy6(dvel + 6 * b, run);
    Copy6(dacc + 6 * b, racc);

    // d cfrc_body = dI cacc + I dcacc + dcvel x* I cvel + cvel x* (dI cvel + I dcvel), with
    // dI x = S x* (I x) - I (S x x) and the products I cacc, I cvel of the nominal pass
    const double* inert = d->cinert + 10 * b;
    const double* icv = rne_icvel_.data() + 6 * b;
    double* f = dfrc + 6 * b;
    double t[6], u[6], w[6];
    CrossMotion(t, S, cacc + 6 * b);
    for (int r = 0; r < 6; r++) u[r] = racc[r] - t[r];
    MulInert(f, inert, u);  // I (dcacc - S x cacc)
    CrossForce(t, S, rne_icacc_.data() + 6 * b);
    for (int r = 0; r < 6; r++) f[r] += t[r];
    CrossForce(t, run, icv);
    for (int r = 0; r < 6; r++) f[r] += t[r];
    CrossMotion(t, S, cvel + 6 * b);
    for (int r = 0; r < 6; r++) u[r] = run[r] - t[r];
    MulInert(w, inert, u);  // I (dcvel - S x cvel)
    CrossForce(t, S, icv);
    for (int r = 0; r < 6; r++) w[r] += t[r];
    CrossForce(t, cvel + 6 * b, w);
    for (int r = 0; r < 6; r++) f[r] += t[r];

    // the second pass (no velocity, no gravity): d cfrc_body = dI cacc2 + I dcacc2
    if (dtau2) {
      Copy6(dacc2 + 6 * b, racc2);
      double* f2 = dfrc2 + 6 * b;
      CrossMotion(t, S, cacc2 + 6 * b);
      for (int r = 0; r < 6; r++) u[r] = racc2[r] - t[r];
      MulInert(f2, inert, u);
      CrossForce(t, S, rne_icacc_.data() + 6 * nbody + 6 * b);
      for (int r = 0; r < 6; r++) f2[r] += t[r];
    }
  }

  // backward over the subtree: subtree force tangents; ancestors see the subtree's total
  for (int b = last; b > b0; b--) {
    AddScl6(dfrc + 6 * m->body_parentid[b], dfrc + 6 * b, 1);
    if (dtau2) AddScl6(dfrc2 + 6 * m->body_parentid[b], dfrc2 + 6 * b, 1);
  }

  // dtau_j = dcdof_j . cfrc_sub + cdof_j . dcfrc_sub for the subtree's dofs and the ancestors'
  mju_zero(dtau, nv);
  if (dtau2) mju_zero(dtau2, nv);
  for (int b = b0; b <= last; b++) {
    for (int j = m->body_dofadr[b]; j < m->body_dofadr[b] + m->body_dofnum[b]; j++) {
      const double* dc = dcdof + 6 * j;
      dtau[j] = Dot6(dc, cfrc + 6 * b) + Dot6(cdof + 6 * j, dfrc + 6 * b);
      if (dtau2) {
        dtau2[j] = Dot6(dc, cfrc2 + 6 * b) + Dot6(cdof + 6 * j, dfrc2 + 6 * b);
      }
    }
  }
  for (int b = m->body_parentid[b0]; b > 0; b = m->body_parentid[b]) {
    for (int j = m->body_dofadr[b]; j < m->body_dofadr[b] + m->body_dofnum[b]; j++) {
      dtau[j] = Dot6(cdof + 6 * j, dfrc + 6 * b0);
      if (dtau2) dtau2[j] = Dot6(cdof + 6 * j, dfrc2 + 6 * b0);
    }
  }
}

void Derivative::RneVelTangent(const mjModel* m, int k, double* dtau) {
  const mjData* d = d0_;
  const int nv = nv_;
  const double* cdof = d->cdof;
  const double* cvel = d->cvel;
  const int b0 = m->dof_bodyid[k], last = subtree_last_[b0];
  double* dvel = rne_dvel_.data();
  double* dacc = rne_dacc_.data();
  double* dfrc = rne_dfrc_.data();

  // forward over the subtree: cvel changes by cdof_k after dof k, cdof_dot through its velocity
  for (int b = b0; b <= last; b++) {
    double run[6], racc[6];
    if (b == b0) {
      Zero6(run);
      Zero6(racc);
    } else {
      Copy6(run, dvel + 6 * m->body_parentid[b]);
      Copy6(racc, dacc + 6 * m->body_parentid[b]);
    }
    const int bda = m->body_dofadr[b];
    for (int j = bda; j < bda + m->body_dofnum[b];) {
      const int type = m->jnt_type[m->dof_jntid[j]];
      const int n = type == mjJNT_FREE ? 6 : type == mjJNT_BALL ? 3 : 1;
      double pre[6];
      Copy6(pre, run);
      for (int q = 0; q < n; q++) {
        const int dof = j + q;
        if (type == mjJNT_FREE && q == 3) Copy6(pre, run);
        if (!(type == mjJNT_FREE && q < 3)) {
          double t[6];
          CrossMotion(t, pre, cdof + 6 * dof);
          AddScl6(racc, t, v0_[dof]);
        }
        if (dof == k) {
          AddScl6(racc, d->cdof_dot + 6 * dof, 1);
          AddScl6(run, cdof + 6 * dof, 1);
        }
        if (type != mjJNT_FREE && type != mjJNT_BALL) Copy6(pre, run);
      }
      j += n;
    }
    Copy6(dvel + 6 * b, run);
    Copy6(dacc + 6 * b, racc);

    // d cfrc_body = I dcacc + dcvel x* I cvel + cvel x* I dcvel
    const double* inert = d->cinert + 10 * b;
    double* f = dfrc + 6 * b;
    double iv[6], t[6];
    MulInert(f, inert, racc);
    CrossForce(t, run, rne_icvel_.data() + 6 * b);
    for (int r = 0; r < 6; r++) f[r] += t[r];
    MulInert(iv, inert, run);
    CrossForce(t, cvel + 6 * b, iv);
    for (int r = 0; r < 6; r++) f[r] += t[r];
  }
  for (int b = last; b > b0; b--) AddScl6(dfrc + 6 * m->body_parentid[b], dfrc + 6 * b, 1);

  // dtau_j = cdof_j . dcfrc_sub over the subtree and the ancestors
  mju_zero(dtau, nv);
  for (int b = b0; b <= last; b++) {
    for (int j = m->body_dofadr[b]; j < m->body_dofadr[b] + m->body_dofnum[b]; j++) {
      dtau[j] = Dot6(cdof + 6 * j, dfrc + 6 * b);
    }
  }
  for (int b = m->body_parentid[b0]; b > 0; b = m->body_parentid[b]) {
    for (int j = m->body_dofadr[b]; j < m->body_dofadr[b] + m->body_dofnum[b]; j++) {
      dtau[j] = Dot6(cdof + 6 * j, dfrc + 6 * b0);
    }
  }
}

void Derivative::AnalyticVelocity(const mjModel* m, int k) {
  mjData* d = d0_;
  const int nv = nv_, na = na_;

  // -dbias/dv_k, joint damping, and the actuators on this dof (through their velocity)
  double* dtau = tmp2_.data();
  RneVelTangent(m, k, dtau);
  for (int i = 0; i < nv; i++) dfs_[i] = -dtau[i];
  mju_zero(dactdot_.data(), na);
  if (!DampersDisabled(m)) dfs_[k] -= m->dof_damping[k];
  if (dof_act_vel_[k]) {
    const double e = 1e-6;
    for (int q = 0; q < dof_act_count_[k]; q++) {
      const int i = dof_act_[dof_act_adr_[k] + q];
      d->actuator_velocity[i] += e * m->actuator_gear[6 * i];
    }
    mj_fwdActuation(m, d);
    for (int q = 0; q < dof_act_count_[k]; q++) {
      const int i = dof_act_[dof_act_adr_[k] + q];
      d->actuator_velocity[i] -= e * m->actuator_gear[6 * i];
    }
    for (int i = 0; i < nv; i++) dfs_[i] += (d->qfrc_actuator[i] - qfrc_act0_[i]) / e;
    for (int i = 0; i < na; i++) dactdot_[i] = (d->act_dot[i] - actdot0_[i]) / e;
    RestoreActuation();
  }
}

void Derivative::AnalyticPosition(const mjModel* m, int k) {
  mjData* d = d0_;
  const int nv = nv_, na = na_;
  const int b0 = m->dof_bodyid[k], last = subtree_last_[b0];

  // smooth forces: -d(M a + bias) + springs + actuators (dM a folded in: no dM tangent)
  double* dtau = tmp2_.data();
  RneTangent(m, k, dtau, damped_ ? dqderiv_a_.data() : nullptr);  // with dM (a - aint), for P
  for (int i = 0; i < nv; i++) dfs_[i] = -dtau[i];
  mju_zero(dactdot_.data(), na);
  const int jnt = m->dof_jntid[k];
  if (!SpringsDisabled(m) && (m->jnt_type[jnt] == mjJNT_HINGE || m->jnt_type[jnt] == mjJNT_SLIDE)) {
    dfs_[k] -= m->jnt_stiffness[jnt];
  }
  if (dof_act_len_[k]) {
    // joint-transmission lengths move with the dof: difference mj_fwdActuation
    const double e = 1e-6;
    for (int q = 0; q < dof_act_count_[k]; q++) {
      const int i = dof_act_[dof_act_adr_[k] + q];
      d->actuator_length[i] += e * m->actuator_gear[6 * i];
    }
    mj_fwdActuation(m, d);
    for (int q = 0; q < dof_act_count_[k]; q++) {
      const int i = dof_act_[dof_act_adr_[k] + q];
      d->actuator_length[i] -= e * m->actuator_gear[6 * i];
    }
    for (int i = 0; i < nv; i++) dfs_[i] += (d->qfrc_actuator[i] - qfrc_act0_[i]) / e;
    for (int i = 0; i < na; i++) dactdot_[i] = (d->act_dot[i] - actdot0_[i]) / e;
    RestoreActuation();
  }
  has_dM_ = false;
  if (!has_rows_) return;

  // contact pairs the subtree touches: collision on rigidly moved geom poses
  const double* S = d->cdof + 6 * k;
  const double* com = d->subtree_com + 3 * m->body_rootid[b0];
  for (int b = 0; b < m->nbody; b++) body_moved_[b] = b >= b0 && b <= last;
  for (int q = 0; q < npair_; q++) {
    Pair& pr = pairs_[q];
    if (!body_moved_[pr.body1] && !body_moved_[pr.body2]) continue;
    double saved[2][12];
    for (int g = 0; g < 2; g++) {
      const int geom = g == 0 ? pr.g1 : pr.g2;
      if (!body_moved_[m->geom_bodyid[geom]]) continue;
      double* pos = d->geom_xpos + 3 * geom;
      double* mat = d->geom_xmat + 9 * geom;
      mju_copy3(saved[g], pos);
      mju_copy(saved[g] + 3, mat, 9);

      // x += eps (w x (x - c) + v), R += eps [w]x R
      double r[3], wr[3];
      mju_sub3(r, pos, com);
      Cross3(wr, S, r);
      for (int i = 0; i < 3; i++) pos[i] += kPoseStep * (wr[i] + S[3 + i]);
      double col[3], wc[3];
      for (int c = 0; c < 3; c++) {
        for (int i = 0; i < 3; i++) col[i] = saved[g][3 + 3 * i + c];
        Cross3(wc, S, col);
        for (int i = 0; i < 3; i++) mat[3 * i + c] += kPoseStep * wc[i];
      }
    }
    if (!RecollidePair(m, d, q)) mode_changes_++;
    for (int g = 0; g < 2; g++) {
      const int geom = g == 0 ? pr.g1 : pr.g2;
      if (!body_moved_[m->geom_bodyid[geom]]) continue;
      mju_copy3(d->geom_xpos + 3 * geom, saved[g]);
      mju_copy(d->geom_xmat + 9 * geom, saved[g] + 3, 9);
    }
  }

  // contact rows: frame and point from the collision, axes carried by the subtree
  const Problem& p = *p_;
  const SparseRows& J = p.J;
  double* dense = jrows_.data();  // dim x nv
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const int adr0 = J.rowadr[con.row], n0 = J.rownnz[con.row];
    if (!body_moved_[con.body[0]] && !body_moved_[con.body[1]]) {
      for (int r = 0; r < con.dim; r++) {
        for (int q = 0; q < n0; q++) dJ_[J.rowadr[con.row + r] + q] = 0;
      }
      for (int r = 0; r < con.dim; r++) dpos_[con.row + r] = 0;
      continue;
    }
    const mjContact& g0 = con0_[con.mj_index];
    const mjContact& g1 = con1_[con.mj_index];
    double dp[3], dF[9];
    for (int i = 0; i < 3; i++) dp[i] = (g1.pos[i] - g0.pos[i]) / kPoseStep;
    for (int i = 0; i < 9; i++) dF[i] = (g1.frame[i] - g0.frame[i]) / kPoseStep;
    dpos_[con.row] = (g1.dist - g0.dist) / kPoseStep;
    for (int r = 1; r < con.dim; r++) dpos_[con.row + r] = 0;

    // the two sides' chains, dense: -side 1 + side 2 (dofs on both cancel)
    for (int side = 0; side < 2; side++) {
      int body = con.body[side];
      while (body > 0 && m->body_dofnum[body] == 0) body = m->body_parentid[body];
      if (body <= 0) continue;
      for (int j = m->body_dofadr[body] + m->body_dofnum[body] - 1; j >= 0;
           j = m->dof_parentid[j]) {
        for (int r = 0; r < con.dim; r++) dense[r * nv + j] = 0;
      }
    }
    (void)adr0;
    (void)n0;
    for (int side = 0; side < 2; side++) {
      int body = con.body[side];
      while (body > 0 && m->body_dofnum[body] == 0) body = m->body_parentid[body];
      if (body <= 0) continue;
      const double sign = side == 0 ? -1 : 1;
      const double* cc = d->subtree_com + 3 * m->body_rootid[body];
      double off[3];
      mju_sub3(off, g0.pos, cc);
      const bool moved = body_moved_[body];
      for (int j = m->body_dofadr[body] + m->body_dofnum[body] - 1; j >= 0;
           j = m->dof_parentid[j]) {
        const double* cd = d->cdof + 6 * j;
        const double zero[6] = {0, 0, 0, 0, 0, 0};
        const bool carried = moved && m->dof_bodyid[j] >= b0 && m->dof_bodyid[j] <= last;
        const double* dc = carried ? rne_dcdof_.data() + 6 * j : zero;  // from RneTangent
        // translation rows: lin + rot x off; their tangent with the point and axes moving
        double jp[3], djp[3], t[3];
        Cross3(t, cd, off);
        for (int i = 0; i < 3; i++) jp[i] = cd[3 + i] + t[i];
        Cross3(djp, cd, dp);
        Cross3(t, dc, off);
        for (int i = 0; i < 3; i++) djp[i] += dc[3 + i] + t[i];
        for (int r = 0; r < con.dim; r++) {
          const int ax = r < 3 ? r : r - 3;
          const double* Fr = g0.frame + 3 * ax;
          const double* dFr = dF + 3 * ax;
          const double val = r < 3 ? Dot3(dFr, jp) + Dot3(Fr, djp) : Dot3(dFr, cd) + Dot3(Fr, dc);
          dense[r * nv + j] += sign * val;
        }
      }
    }
    for (int r = 0; r < con.dim; r++) {
      const int adr = J.rowadr[con.row + r];
      for (int q = 0; q < J.rownnz[con.row + r]; q++) {
        dJ_[adr + q] = dense[r * nv + J.colind[adr + q]];
      }
    }
  }

  // rows before the contacts: constant Jacobians (the scope), gaps J dq
  const int nplain = p.ne + p.nf + p.nl;
  for (int i = 0; i < nplain; i++) {
    for (int q = 0; q < J.rownnz[i]; q++) dJ_[J.rowadr[i] + q] = 0;
    dpos_[i] = p.kind[i] == kRowFriction ? 0 : J.Dot(i, dq_.data());
  }
  has_dJ_ = has_dpos_ = has_dvel_ = true;
  RowVelocityTangents(true, nullptr);
}

}  // namespace contactkit
