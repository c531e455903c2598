// Copyright 2026 The contactkit developers.
//
// The integrator tangent: the integrator's matrix (M, M + h D, M - h qDeriv) factored and solved,
// the tangent of the position update q (+) h w, and of the activation update.
#include "plugin/deriv/integrator_tangent.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "plugin/step/compat.h"
#include "plugin/step/integrator.h"
#include "solvers/common/dense.h"

namespace contactkit {
namespace {

// rotation matrix of exp(phi) (rotation vector phi), row-major
void RotationOf(const double phi[3], double R[9]) {
  double quat[4] = {1, 0, 0, 0}, axis[3] = {phi[0], phi[1], phi[2]};
  const double angle = mju_normalize3(axis);
  mju_axisAngle2Quat(quat, axis, angle);
  mju_quat2Mat(R, quat);
}

// right Jacobian of the exponential map of SO(3) at phi, row-major
void RightJacobian(const double phi[3], double Jr[9]) {
  const double t2 = phi[0] * phi[0] + phi[1] * phi[1] + phi[2] * phi[2];
  const double t = std::sqrt(t2);
  double a, b;  // Jr = I - a [phi]x + b [phi]x^2
  if (t < 1e-6) {
    a = 0.5 - t2 / 24;
    b = 1.0 / 6 - t2 / 120;
  } else {
    a = (1 - std::cos(t)) / t2;
    b = (t - std::sin(t)) / (t2 * t);
  }
  const double K[9] = {0, -phi[2], phi[1], phi[2], 0, -phi[0], -phi[1], phi[0], 0};
  double K2[9];
  mju_mulMatMat(K2, K, K, 3, 3, 3);
  for (int i = 0; i < 9; i++) Jr[i] = (i % 4 == 0 ? 1 : 0) - a * K[i] + b * K2[i];
}

}  // namespace

void IntegratorTangent::Carve(ArenaCarver& c, const DerivSizes& n, const mjModel* m) {
  const size_t ndx = n.ndx(), ndir = ndx + n.nu, nva = n.nv + n.na;
  qacc = c.Take<double>(n.nv);
  mass.nv = n.nv;
  mass.nM = n.nM;
  mass.parent = m->dof_parentid;
  mass.madr = m->dof_Madr;
  int* col = c.Take<int>(n.nM);  // (the counting pass has no arrays)
  if (col && n.nv > 0) mass.Columns(col);
  mass.col = col && n.nv > 0 ? col : nullptr;
  mass.M = c.Take<double>(n.nM);
  mass.LD = c.Take<double>(n.nM);
  mass.Dinv = c.Take<double>(n.nv);
  lu = c.Take<double>(n.ntreeblock);
  pivots = c.Take<int>(n.nv);
  bias_dof = c.Take<unsigned char>(n.nv);
  step_maps = c.Take<double>(18 * static_cast<size_t>(n.njnt));
  correction_maps = c.Take<double>(18 * static_cast<size_t>(n.njnt));
  qvel_next = c.Take<double>(n.nv);
  position_mid = c.Take<double>(n.nv);
  rk_stage_jac = c.Take<double>(nva * ndir);
  rk_dir_state = c.Take<double>(ndx * ndir);
  rk_dir_sum = c.Take<double>(ndx * ndir);
  rk_state = c.Take<double>(4 * (n.nq + nva));
  rk_rate = c.Take<double>(4 * nva);
}

void IntegratorTangent::Bind(const TreeBlocks* trees, const int* dof_tree, int ntree) {
  trees_ = trees;
  dof_tree_ = dof_tree;
  ntree_ = ntree;
}

void IntegratorTangent::SetKind(const mjModel* m, const mjData* d, bool rk4) {
  implicit = !rk4 && IsImplicit(m);
  fast = implicit && IsImplicitFast(m);
  for (int i = 0; i < m->nv; i++) bias_dof[i] = !fast;
  double A[36];
  for (int j = 0; j < m->njnt && fast; j++) {
    if (!ImplicitFastFreeBlock(m, d, j, A)) continue;
    for (int r = 0; r < 6; r++) bias_dof[m->jnt_dofadr[j] + r] = 1;
  }
  fast_no_bias = fast;
  for (int i = 0; i < m->nv && fast_no_bias; i++) fast_no_bias = !bias_dof[i];
}

void IntegratorTangent::AdoptFactor(const TreeMass& src, bool with_damping) {
  std::memcpy(mass.M, src.M, sizeof(double) * mass.nM);
  std::memcpy(mass.LD, src.LD, sizeof(double) * mass.nM);
  std::memcpy(mass.Dinv, src.Dinv, sizeof(double) * mass.nv);
  adopted_ = true;
  adopted_damping_ = with_damping;
}

bool IntegratorTangent::Prepare(const mjModel* m, const mjData* d, const double* M, bool rk4) {
  const int nv = m->nv;
  const double h = m->opt.timestep;  // (implicit, fast, bias_dof: SetKind's, called before)

  // acceleration the integrator uses: M_int aint = qfrc_smooth + qfrc_constraint, or qacc itself
  // (RK4, Euler without damping)
  damped = !rk4 && !implicit && EulerDampingImplicit(m);
  const bool adopted = adopted_ && adopted_damping_ == damped;  // (AdoptFactor: this call's only)
  adopted_ = false;
  for (int i = 0; i < nv; i++) qacc[i] = d->qfrc_smooth[i] + d->qfrc_constraint[i];
  if (implicit) {
    // dense blocks of M - h qDeriv per tree, LU
    const int* rownnz = DRowNnz(m, d);
    const int* rowadr = DRowAdr(m, d);
    const int* colind = DColInd(m, d);
    for (int i = 0; i < trees_->blockadr[ntree_]; i++) lu[i] = 0;
    for (int i = 0; i < nv; i++) {
      const int t = dof_tree_[i], n = trees_->dofnum[t], b = trees_->dofadr[t];
      double* blk = lu + trees_->blockadr[t];
      for (int k = 0; k < rownnz[i]; k++) {
        const int j = colind[rowadr[i] + k];
        blk[(j - b) * n + (i - b)] -= h * d->qDeriv[rowadr[i] + k];
      }
      blk[(i - b) * n + (i - b)] += M[m->dof_Madr[i]];
      int adr = m->dof_Madr[i] + 1;
      for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
        blk[(j - b) * n + (i - b)] += M[adr];
        blk[(i - b) * n + (j - b)] += M[adr];
      }
    }
    // implicitfast: a standalone free body's block with its gyroscopic terms (column-major)
    double A[36];
    for (int j = 0; j < m->njnt && fast; j++) {
      if (!ImplicitFastFreeBlock(m, d, j, A)) continue;
      const int adr = m->jnt_dofadr[j];
      double* blk = lu + trees_->blockadr[dof_tree_[adr]];
      for (int r = 0; r < 6; r++)
        for (int c = 0; c < 6; c++) blk[c * 6 + r] = A[6 * r + c];
    }
    for (int t = 0; t < ntree_; t++) {
      if (!LuFactor(lu + trees_->blockadr[t], trees_->dofnum[t], pivots + trees_->dofadr[t])) {
        return false;
      }
    }
    Solve(qacc);
  } else {
    // M, plus h diag(damping) for Euler's implicit damping (adopted: the same factor, made from
    // the same d with the same sums)
    if (!adopted) {
      for (int i = 0; i < m->nM; i++) mass.M[i] = M[i];
      if (damped) {
        for (int i = 0; i < nv; i++) mass.M[m->dof_Madr[i]] += h * m->dof_damping[i];
      }
      mass.Factor();
    }
    if (damped) {
      mass.Solve(qacc);
    } else {
      mju_copy(qacc, d->qacc, nv);
    }
  }
  return true;
}

namespace {

// x is zero on [b, b + n): a direction that does not reach the tree (its solve gives zero)
bool Zero(const double* x, int b, int n) {
  for (int i = b; i < b + n; i++) {
    if (x[i] != 0) return false;
  }
  return true;
}

}  // namespace

void IntegratorTangent::Solve(double* x, int* lo, int* hi) const {
  // the trees of x's span (the others are zero: one scan, 32 entries at a time)
  int first = -1, last = -1, l = 0, u = 0;
  if (ntree_ > 0)
    NonzeroSpan(&x, 1, trees_->dofadr[ntree_ - 1] + trees_->dofnum[ntree_ - 1], &l, &u);
  const int t0 = u > l ? dof_tree_[l] : 0, t1 = u > l ? dof_tree_[u - 1] + 1 : 0;
  for (int t = t0; t < t1; t++) {
    const int b = trees_->dofadr[t], n = trees_->dofnum[t];
    if (Zero(x, b, n)) continue;
    first = first < 0 ? b : std::min(first, b);
    last = std::max(last, b + n);
    if (implicit) {
      LuSolve(lu + trees_->blockadr[t], pivots + b, n, x + b);
    } else {
      mass.Solve(x, b, b + n);
    }
  }
  if (lo) {
    *lo = first < 0 ? 0 : first;
    *hi = first < 0 ? 0 : last;
  }
}

void IntegratorTangent::SolveT(double* x) const {
  for (int t = 0; t < ntree_; t++) {
    const int b = trees_->dofadr[t], n = trees_->dofnum[t];
    if (Zero(x, b, n)) continue;
    if (implicit) {
      LuSolveT(lu + trees_->blockadr[t], pivots + b, n, x + b);
    } else {
      mass.Solve(x, b, b + n);
    }
  }
}
void IntegrateMaps(const mjModel* m, const double* w, double h, double* maps) {
  for (int j = 0; j < m->njnt; j++) {
    const int type = m->jnt_type[j];
    if (type != mjJNT_FREE && type != mjJNT_BALL) continue;
    const int v = m->jnt_dofadr[j] + (type == mjJNT_FREE ? 3 : 0);
    const double phi[3] = {h * w[v], h * w[v + 1], h * w[v + 2]};
    RotationOf(phi, maps + 18 * j);
    RightJacobian(phi, maps + 18 * j + 9);
  }
}

void IntegrateTangent(const mjModel* m, const double* maps, double h, const double* dq,
                      const double* dw, double* out, int j0, int j1) {
  if (j1 < 0) j1 = m->njnt;
  for (int j = j0; j < j1; j++) {
    int v = m->jnt_dofadr[j];
    switch (m->jnt_type[j]) {
      case mjJNT_FREE:
        for (int i = 0; i < 3; i++) out[v + i] = dq[v + i] + h * dw[v + i];
        v += 3;
        [[fallthrough]];
      case mjJNT_BALL: {
        // exp(dq+) = exp(phi)^-1 exp(dq) exp(phi + h dw), phi = h w (body frame): R(phi)' dq +
        // Jr(phi) h dw
        const double* R = maps + 18 * j;
        const double* Jr = R + 9;
        for (int i = 0; i < 3; i++) {
          out[v + i] =
              R[i] * dq[v] + R[3 + i] * dq[v + 1] + R[6 + i] * dq[v + 2] +
              h * (Jr[3 * i] * dw[v] + Jr[3 * i + 1] * dw[v + 1] + Jr[3 * i + 2] * dw[v + 2]);
        }
        break;
      }
      default:
        out[v] = dq[v] + h * dw[v];
    }
  }
}

void ActivationTangent(const mjModel* m, const double* act, const double* rate, const double* dact,
                       const double* drate, double h, double* out) {
  const int na = m->na, nu = m->nu;
  for (int i = 0; i < na; i++) {
    const int iu = i + nu - na;
    bool clamped;
    ClipActivation(m, iu, act[i] + h * rate[i], &clamped);
    out[i] = clamped ? 0 : dact[i] + h * drate[i];
  }
}

void IntegrateTangentT(const mjModel* m, const double* maps, double h, const double* a, double* gq,
                       double* gw) {
  for (int j = 0; j < m->njnt; j++) {
    int v = m->jnt_dofadr[j];
    switch (m->jnt_type[j]) {
      case mjJNT_FREE:
        for (int i = 0; i < 3; i++) {
          gq[v + i] = a[v + i];
          gw[v + i] = h * a[v + i];
        }
        v += 3;
        [[fallthrough]];
      case mjJNT_BALL: {
        const double* R = maps + 18 * j;
        const double* Jr = R + 9;
        for (int r = 0; r < 3; r++) {
          gq[v + r] = R[3 * r] * a[v] + R[3 * r + 1] * a[v + 1] + R[3 * r + 2] * a[v + 2];
          gw[v + r] = h * (Jr[r] * a[v] + Jr[3 + r] * a[v + 1] + Jr[6 + r] * a[v + 2]);
        }
        break;
      }
      default:
        gq[v] = a[v];
        gw[v] = h * a[v];
    }
  }
}

void ActivationAdjoint(const mjModel* m, const double* act, const double* rate, double h,
                       const double* a, double* alpha) {
  const int na = m->na, nu = m->nu;
  for (int i = 0; i < na; i++) {
    bool clamped;
    ClipActivation(m, i + nu - na, act[i] + h * rate[i], &clamped);
    alpha[i] = clamped ? 0 : a[i];
  }
}

}  // namespace contactkit
