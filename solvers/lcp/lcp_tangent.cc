// Copyright 2026 The contactkit developers.
//
// Derivative of the lcp solution along a perturbation of the problem data (Nimble section IV and
// appendix A): with the classification of the last solve held fixed, the clamped impulses solve
// K x_C = c with K = A_CC + A_CB E and c = -(b_C + A_CB g), the bound rows follow x_B = E x_C + g
// and separating rows stay zero. For the minimum-norm solution x_C = K^+ c (Golub-Pereyra, the
// rank of K locally constant, c in the range of K):
//   dx_C = K^+ (dc - dK x_C) + (I - K^+ K) dK' K^+' x_C,
// where dc - dK x_C = -(dJ_C v+ + J_C dv0 + dstab_C) is the change of the clamped rows' velocity
// at fixed impulses (dv0 from VelocityTangent with zero force change), and dK' y folds dA y~
// (y~ = y on C, zero elsewhere) over the bound rows through E'.
#include <algorithm>

#include "solvers/lcp/lcp.h"

namespace contactkit {
namespace {

// d(J_i) . x for the perturbed Jacobian values (0 if they do not change)
double DJDot(const Problem& p, const ProblemTangent& dir, int i, const double* x) {
  if (!dir.J) return 0;
  const SparseRows& J = p.J;
  double s = 0;
  for (int k = 0; k < J.rownnz[i]; k++) s += dir.J[J.rowadr[i] + k] * x[J.colind[J.rowadr[i] + k]];
  return s;
}

}  // namespace

bool LcpSolver::ForceTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                             double* dforce) {
  const Islands& is = p.islands;
  const int nrow = p.nrow, nv = p.nv;
  const double h = p.h;
  if (nisland_ != is.nisland) return false;
  for (int k = 0; k < nisland_; k++) {
    if (!factors_[k].stored) return false;
  }
  for (int i = 0; i < nrow; i++) {
    dforce[i] = 0;
    ytil_[i] = 0;
  }

  // coupling of a bound row to its clamped normal: x_j = coef x_normal (0: none)
  auto coupling = [&](int g, int* normal) {
    *normal = -1;
    if (p.kind[g] != kRowContactFriction || state_[g] == kLcpClamped) return 0.0;
    const Contact& con = p.con[con_of_row_[g]];
    if (state_[con.row] != kLcpClamped || FromDistance(con)) return 0.0;
    *normal = con.row;
    return (state_[g] == kLcpUpper ? 1 : -1) * con.mu[g - con.row - 1];
  };

  // velocity change at fixed impulses
  VelocityTangent(p, sol, dir, zero_.data(), dv0_.data(), tmp_.data());

  // dx_C = K^+ (dc - dK x_C), island by island
  bool deficient = false;
  for (int k = 0; k < nisland_; k++) {
    const int n = is.nrows[k];
    const int* rows = is.rows + is.rowadr[k];
    Cod& cod = factors_[k].cod;
    int m = 0;
    for (int j = 0; j < n; j++) {
      const int g = rows[j];
      if (state_[g] != kLcpClamped) continue;
      double dpos, dvel;
      const double b0 = p.J.Dot(g, p.v_free);
      Stabilization(p, g, b0, &dpos, &dvel);
      double dstab = (dir.pos ? dpos * dir.pos[g] : 0) + (dir.vel ? dvel * dir.vel[g] : 0);
      if (SoftRow(p, g)) {
        // a contact from distance: its soft target -vel - h aref and regularizer R x
        if (dir.aref) dstab -= h * dir.aref[g];
        if (dir.R) dstab += dir.R[g] * h * sol.force[g];
      }
      rc_[m] = -(DJDot(p, dir, g, sol.v_next) + p.J.Dot(g, dv0_.data()) + dstab);
      cidx_[m++] = g;
    }
    if (m != cod.n()) return false;
    cod.Solve(rc_.data(), dy_.data());
    for (int a = 0; a < m; a++) dforce[cidx_[a]] = dy_[a];
    if (cod.rank() < m) {
      deficient = true;
      for (int a = 0; a < m; a++) tq_[a] = h * sol.force[cidx_[a]];
      cod.SolveT(tq_.data(), tq_.data());
      for (int a = 0; a < m; a++) ytil_[cidx_[a]] = tq_[a];
    }
  }

  // rank deficient islands: + (I - K^+ K) dK' K^+' x_C
  if (deficient) {
    // q = M^-1 J' y~ and dvp = h M^-1 (dJ' y~ - dM q), so that dA y~ = dJ q + J dvp / h
    VelocityFromForce(p, ytil_.data(), vfake_.data(), nullptr);
    Solution fake = sol;
    fake.force = ytil_.data();
    fake.v_next = vfake_.data();
    ProblemTangent d2 = dir;
    d2.v_free = nullptr;
    VelocityTangent(p, fake, d2, zero_.data(), dvp_.data(), tmp_.data());
    for (int j = 0; j < nv; j++) {
      vfake_[j] = (vfake_[j] - p.v_free[j]) / h;
      dvp_[j] /= h;
    }
    auto dAy = [&](int g) {
      const double dR = dir.R && SoftRow(p, g) ? dir.R[g] * ytil_[g] : 0;
      return DJDot(p, dir, g, vfake_.data()) + p.J.Dot(g, dvp_.data()) + dR;
    };
    for (int k = 0; k < nisland_; k++) {
      Cod& cod = factors_[k].cod;
      if (cod.rank() == cod.n()) continue;
      const int n = is.nrows[k];
      const int* rows = is.rows + is.rowadr[k];
      int m = 0;
      for (int j = 0; j < n; j++) {
        const int g = rows[j];
        if (state_[g] == kLcpClamped) {
          pos_[j] = m;
          cidx_[m] = g;
          tq_[m++] = dAy(g);
        } else {
          pos_[j] = -1;
        }
      }
      for (int j = 0; j < n; j++) {
        int normal;
        const double coef = coupling(rows[j], &normal);
        if (coef != 0) tq_[pos_[local_[normal]]] += coef * dAy(rows[j]);
      }
      cod.NullProject(tq_.data(), tq_.data());
      for (int a = 0; a < m; a++) dforce[cidx_[a]] += tq_[a];
    }
  }

  // bound rows follow their normals; impulses to forces
  for (int k = 0; k < nisland_; k++) {
    const int n = is.nrows[k];
    const int* rows = is.rows + is.rowadr[k];
    for (int j = 0; j < n; j++) {
      int normal;
      const double coef = coupling(rows[j], &normal);
      if (coef != 0) dforce[rows[j]] = coef * dforce[normal];
    }
  }
  for (int i = 0; i < nrow; i++) dforce[i] /= h;
  return true;
}

bool LcpSolver::Refactor(const Problem& p, int island) {
  const Islands& is = p.islands;
  const int n = is.nrows[island];
  const int* rows = is.rows + is.rowadr[island];
  if (!factors_[island].stored) return false;
  BuildIsland(p, island);
  const DenseLcp lcp{n,          n,          A_.data(),      b_.data(),
                     lo_.data(), hi_.data(), findex_.data(), mu_.data()};
  for (int j = 0; j < n; j++) lstate_[j] = state_[rows[j]];
  BoxedOptions opt;
  return boxed_.Reduced(lcp, lstate_.data(), 0, opt.rtol, &factors_[island].cod, x_.data(),
                        w_.data());
}

bool LcpSolver::SetTangentModes(const Problem& p, const signed char* mode) {
  const Islands& is = p.islands;
  if (nisland_ != is.nisland) return false;
  if (!mode) {
    // the solve's own classification and factorizations
    if (!modes_set_) return true;
    for (int i = 0; i < p.nrow; i++) state_[i] = saved_state_[i];
    bool ok = true;
    for (int k = 0; k < nisland_; k++) {
      if (changed_[k]) ok = Refactor(p, k) && ok;
      changed_[k] = 0;
    }
    modes_set_ = false;
    return ok;
  }
  if (!modes_set_) {
    for (int i = 0; i < p.nrow; i++) saved_state_[i] = state_[i];
    modes_set_ = true;
  }
  for (int i = 0; i < p.nrow; i++) state_[i] = saved_state_[i];
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    if (mode[c] < 0) continue;
    const bool clamped = saved_state_[con.row] == kLcpClamped;
    if (mode[c] == 1 && !clamped) {
      // touching: the normal clamped, friction sticking
      for (int r = 0; r < con.dim; r++) state_[con.row + r] = kLcpClamped;
    } else if (mode[c] == 0 && clamped) {
      // separating: no impulse in any row of the contact
      for (int r = 0; r < con.dim; r++) state_[con.row + r] = kLcpLower;
    }
  }
  bool ok = true;
  for (int k = 0; k < nisland_; k++) {
    const int* rows = is.rows + is.rowadr[k];
    bool differs = false;
    for (int j = 0; j < is.nrows[k]; j++) differs |= state_[rows[j]] != saved_state_[rows[j]];
    if (differs || changed_[k]) {
      ok = Refactor(p, k) && ok;
      changed_[k] = differs;
    }
  }
  return ok;
}

}  // namespace contactkit
