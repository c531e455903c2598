// Copyright 2026 The contactkit developers.
//
// The reverse pass of the smooth stage's Newton-Euler tangents for the "mujoco" reverse mode
// (Derivative::AdjointDirections). RneTangent's d(M a + bias)/dq_k is, with S = cdof_k, s the
// first dof k carries and c, w its two motions,
//   -(crb cdof_j) . c - (Bsub' cdof_j) . w   on the carried dofs j of [s, end of the subtree),
//   cdof_j . dF                              on the dofs j of the chain above s,
// dF = S x* F - crb_0 c - Bsub_0 w (F, crb_0, Bsub_0 of the subtree). Its product with an adjoint x
// is therefore -C_s . c - B_s . w + A_p . dF with the 6-vectors C_s = sum x_j crb cdof_j and
// B_s = sum x_j Bsub' cdof_j over the carried dofs (a sweep from the leaves) and A_p = sum x_j
// cdof_j over p = parent(s) and its ancestors (a sweep from the root): made once per adjoint,
// O(1) per direction, where the tangent was a vector over nv. RneVelTangent's d bias/dv_k likewise.
#include "plugin/deriv/smooth_adjoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "plugin/deriv/smooth_tangent.h"
#include "plugin/deriv/spatial.h"
#include "plugin/step/compat.h"
#include "solvers/common/solver.h"
#include "solvers/mujoco/soft_tangent.h"

namespace contactkit {

using namespace spatial;  // NOLINT(build/namespaces)

void RneAdjointWork::Carve(ArenaCarver& c, const DerivSizes& n) {
  const size_t nv = n.nv, nbody = n.nbody;
  carried_crb = c.Take<double>(12 * nv);
  carried_bsub = c.Take<double>(6 * nv);
  chain = c.Take<double>(12 * nv);
  child = c.Take<double>(24 * nbody);
  row_w = c.Take<double>(3 * n.rows);
  row_y = c.Take<double>(3 * n.rows);
  row_jw = c.Take<double>(nv);
  contact_g = c.Take<double>(6 * nbody);
  contact_p = c.Take<double>(18 * nbody);
  vel_x = c.Take<double>(6 * nbody);
  contact_rev = c.Take<char>(n.ncon);
  solver_w = c.Take<double>(4 * n.rows);
  solver_J = c.Take<double>(n.nnz);
  suffix = c.Take<double>(12 * n.nnz);
  col_pos = c.Take<double>(nv);
  contact_pq = c.Take<double>(24 * n.ncon);
}

bool SmoothTangent::StartRneAdjoint(bool ready, bool damped) {
  radj_.ready = ready;
  radj_.damped = ready && damped;
  adj_lo_ = 0;  // (dqfrc_smooth and dJ_force: whatever the last direction wrote)
  adj_hi_ = nv_;
  adj_force_island_ = -2;
  radj_.rows = radj_.contacts = radj_.solver_rows = false;
  return ready;
}

bool SmoothTangent::PrepareRneAdjoint(const mjModel* m, const double* x, const double* xz) {
  if (!StartRneAdjoint(reverse_rne_ && analytic_ && stage_.batch && !integrator_.implicit,
                       xz != nullptr && integrator_.damped)) {
    return false;
  }
  reverse_rne_calls_++;
  RneAdjointSums(m, x, xz);
  return true;
}

bool SmoothTangent::PrepareSolverRneAdjoint(const mjModel* m, const double* x) {
  // a solver's reverse mode (not blocked, dM formed per direction): pass 0 alone
  if (!StartRneAdjoint(reverse_solver_rne_ && analytic_ && stage_.has_rows && !stage_.batch &&
                           !integrator_.implicit,
                       false)) {
    return false;
  }
  reverse_solver_calls_++;
  RneAdjointSums(m, x, nullptr);
  return true;
}

void SmoothTangent::RneAdjointSums(const mjModel* m, const double* x, const double* xz) {
  const int nv = nv_, nbody = m->nbody;
  const double* cdof = stage_data_->cdof;
  for (int pass = 0; pass < (radj_.damped ? 2 : 1); pass++) {
    const double* w = pass == 0 ? x : xz;
    double* crb = radj_.carried_crb + pass * 6 * nv;
    double* chain = radj_.chain + pass * 6 * nv;
    // from the leaves: a body's carried sums are its children's plus its own dofs', last first
    double* child = radj_.child + pass * 12 * nbody;  // (crb, bsub) per body
    std::memset(child, 0, sizeof(double) * 12 * nbody);
    for (int b = nbody - 1; b > 0; b--) {
      double* sc = child + 12 * b;
      for (int j = m->body_dofadr[b] + m->body_dofnum[b] - 1; j >= m->body_dofadr[b]; j--) {
        AddScl6(sc, rne_.crb_cdof + 6 * j, w[j]);
        std::memcpy(crb + 6 * j, sc, sizeof(double) * 6);
        if (pass == 0) {
          AddScl6(sc + 6, rne_.bsub_cdof + 6 * j, w[j]);
          std::memcpy(radj_.carried_bsub + 6 * j, sc + 6, sizeof(double) * 6);
        }
      }
      const int parent = m->body_parentid[b];
      if (parent > 0) {
        for (int r = 0; r < 12; r++) child[12 * parent + r] += sc[r];
      }
    }
    // from the root: each dof's chain sum
    for (int j = 0; j < nv; j++) {
      const int parent = m->dof_parentid[j];
      for (int r = 0; r < 6; r++) {
        chain[6 * j + r] = w[j] * cdof[6 * j + r] + (parent >= 0 ? chain[6 * parent + r] : 0);
      }
    }
  }
}

double SmoothTangent::RnePositionAdjoint(const mjModel* m, int k, double* dot2) const {
  // RneTangent's out of each pass weighted: pass 0 by x (returned), pass 1 by xz (dot2)
  const mjData* d = stage_data_;
  const int nv = nv_, nbody = m->nbody;
  const double* S = d->cdof + 6 * k;
  const int b0 = m->dof_bodyid[k], s = rne_.dof_carry_start[k], parent = m->dof_parentid[s];
  const double* u = rne_.cvel_before_dof + 6 * s;
  const double* B = rne_.subtree_bsub + 36 * b0;
  double out[2] = {0, 0};
  for (int pass = 0; pass < (radj_.damped ? 2 : 1); pass++) {
    const double* au = rne_.cacc_before_dof + 6 * (pass * nv + s);
    double w[6], c[6];
    CarriedMotions(S, u, au, pass == 0, c, w);
    double v = -Dot6(radj_.carried_crb + pass * 6 * nv + 6 * s, c);
    if (pass == 0) v -= Dot6(radj_.carried_bsub + 6 * s, w);
    if (parent >= 0) {
      double dF[6], t[6];
      CrossForce(dF, S, rne_.cfrc + pass * 6 * nbody + 6 * b0);
      MulInert(t, d->crb + 10 * b0, c);
      for (int r = 0; r < 6; r++) {
        dF[r] -= t[r];
        if (pass == 0) dF[r] -= Dot6(B + 6 * r, w);
      }
      v += Dot6(radj_.chain + pass * 6 * nv + 6 * parent, dF);
    }
    out[pass] = v;
  }
  if (dot2) *dot2 = out[1];
  return out[0];
}

double SmoothTangent::RneVelocityAdjoint(const mjModel* m, int k) const {
  // RneVelTangent's dtau weighted by x
  const mjData* d = stage_data_;
  const double* C = d->cdof + 6 * k;
  const int b0 = m->dof_bodyid[k], l = rne_.dof_cdot_start[k];
  const int first = m->body_dofadr[b0], bend = first + m->body_dofnum[b0];
  const int parent = m->dof_parentid[first];
  const double* U = l < bend ? rne_.cvel_before_dof + 6 * l : d->cvel + 6 * b0;
  double e[6], t[6];
  CrossMotion(t, C, U);
  for (int r = 0; r < 6; r++) e[r] = d->cdof_dot[6 * k + r] - t[r];
  double v = Dot6(radj_.carried_bsub + 6 * first, C) + Dot6(radj_.carried_crb + 6 * first, e);
  if (parent >= 0) {
    const double* B = rne_.subtree_bsub + 36 * b0;
    double dF[6];
    MulInert(dF, d->crb + 10 * b0, e);
    for (int r = 0; r < 6; r++) dF[r] += Dot6(B + 6 * r, C);
    v += Dot6(radj_.chain + 6 * parent, dF);
  }
  return v;
}

bool SmoothTangent::ZeroAdjointForce(double* x) {
  // AnalyticContactRows writes dJ' f on the columns of the island's rows: its dofs
  if (!radj_.ready || row_island_ < 0) {
    adj_force_island_ = -2;
    return false;
  }
  const Islands& is = stage_.problem->islands;
  if (adj_force_island_ == -2) {
    mju_zero(x, nv_);
  } else if (adj_force_island_ >= 0) {
    const int* dofs = is.dofs + is.dofadr[adj_force_island_];
    for (int a = 0; a < is.ndofs[adj_force_island_]; a++) x[dofs[a]] = 0;
  }
  adj_force_island_ = row_island_;
  return true;
}

bool SmoothTangent::PrepareRowAdjoint(SoftTangent& soft, const double* x) {
  // RowTangents transposed: with t_i = dJv_i - dvel_i - h daref_i and rho_i = dR_i / R_i (a
  // group's first row), sum tau_i t_i + sigma_i rho_i as weights of dvel, dJv and dpos. Plain
  // rows: daref = -B dvel - K (dimp (pos - margin) + imp dpos), dR = dR_dimp dimp, dimp = KBIP_3
  // darg (darg: dpos, or a connect / weld residual's norm's rate); contacts: the normal's dpos
  // moves dimp and the position term of the first row and the group's rho
  radj_.rows = radj_.ready && reverse_rows_ && stage_.has_rows;
  if (!radj_.rows) return false;
  reverse_rows_calls_++;
  const Problem& p = *stage_.problem;
  const mjData* d = stage_data_;
  double* y = radj_.row_y;
  double* tau = y + p.nrow;
  double* sigma = tau + p.nrow;
  for (int i = 0; i < p.nrow; i++) y[i] = p.J.Dot(i, x);
  soft.RowAdjoint(p, y, tau, sigma);
  const double h = p.h;
  const int nplain = p.ne + p.nf + p.nl;
  double* w = radj_.row_w;  // (vel, Jv, pos) per row
  for (int i = 0; i < p.nrow; i++) {
    w[3 * i] = tau[i] * (h * p.KB[2 * i + 1] - 1);
    w[3 * i + 1] = tau[i];
    w[3 * i + 2] = 0;
  }
  for (int i = 0; i < nplain;) {
    double g[6], norm;
    const int n = ImpedanceArgument(p, i, g, &norm);
    double warg = 0;  // the weight of darg
    for (int k = i; k < i + n; k++) {
      const double wimp = tau[k] * h * p.KB[2 * k] * (p.pos[k] - p.margin[k]) +
                          sigma[k] * rows_.dR_dimp[k] / p.R[k];
      warg += wimp * d->efc_KBIP[4 * k + 3];
      w[3 * k + 2] = tau[k] * h * p.KB[2 * k] * p.imp[k];
    }
    for (int k = 0; norm > 0 && k < n; k++) w[3 * (i + k) + 2] += warg * g[k] / norm;
    i += n;
  }
  for (int c = 0; c < p.ncon; c++) {
    const int i = p.con[c].row;
    w[3 * i + 2] =
        tau[i] * h * p.KB[2 * i] *
            (rows_.imp_slope[c] * rows_.position[c] + p.imp[i] * rows_.position_slope[c]) +
        sigma[i] * rows_.dR_dimp[i] * rows_.imp_slope[c] / p.R[i];
  }
  // a velocity direction e_k has dvel = J e_k alone: its term is column k of J' w_vel
  const SparseRows& J = p.J;
  mju_zero(radj_.row_jw, nv_);
  for (int i = 0; i < p.nrow; i++) {
    for (int q = J.rowadr[i]; q < J.rowadr[i] + J.rownnz[i]; q++) {
      radj_.row_jw[J.colind[q]] += w[3 * i] * J.val[q];
    }
  }
  return true;
}

void SmoothTangent::TransposeRowTangents(const double* wR, const double* waref, double* wvel,
                                         double* wpos) const {
  // RowTangents' maps: daref = -B dvel on every row; a plain row's dimp = KBIP_3 darg (darg its
  // dpos, or a connect / weld residual's norm's rate), dR = dR_dimp dimp, daref -= K (dimp (pos -
  // margin) + imp dpos); a contact's dimp and its first row's position term from that row's dpos
  const Problem& p = *stage_.problem;
  const mjData* d = stage_data_;
  const int nplain = p.ne + p.nf + p.nl;
  for (int i = 0; i < p.nrow; i++) wvel[i] -= p.KB[2 * i + 1] * waref[i];
  for (int i = 0; i < nplain;) {
    double g[6], norm;
    const int n = ImpedanceArgument(p, i, g, &norm);
    double warg = 0;  // the weight of darg
    for (int k = i; k < i + n; k++) {
      const double K = p.KB[2 * k];
      warg += (wR[k] * rows_.dR_dimp[k] - waref[k] * K * (p.pos[k] - p.margin[k])) *
              d->efc_KBIP[4 * k + 3];
      wpos[k] -= waref[k] * K * p.imp[k];
    }
    for (int k = 0; norm > 0 && k < n; k++) wpos[i + k] += warg * g[k] / norm;
    i += n;
  }
  for (int c = 0; c < p.ncon; c++) {
    const int i = p.con[c].row;
    const double K = p.KB[2 * i];
    double wimp = -waref[i] * K * rows_.position[c];
    for (int r = 0; r < p.con[c].dim; r++) wimp += wR[i + r] * rows_.dR_dimp[i + r];
    wpos[i] += wimp * rows_.imp_slope[c] - waref[i] * K * p.imp[i] * rows_.position_slope[c];
  }
}

bool SmoothTangent::PrepareSolverRowAdjoint(const mjModel* m, const Solver& solver,
                                            const Solution& sol, const double* w) {
  // the solver's weights of the rows' arrays, RowTangents transposed onto d vel and d pos; a
  // velocity direction e_k moves d vel = J e_k (column k of J' w_vel), a position direction the
  // plain rows' d pos = J e_k (but friction loss'), the contacts' d J, d vel = d J v and w' d J' f
  // (weights of d J), and its contacts' gaps (their first rows' d pos)
  radj_.solver_rows = radj_.ready && reverse_solver_rows_ && stage_.has_rows && !stage_.batch;
  const Problem& p = *stage_.problem;
  if (!radj_.solver_rows) return false;
  const SparseRows& J = p.J;
  const int nrow = p.nrow, nplain = p.ne + p.nf + p.nl;
  RowWeights rw;
  rw.pos = radj_.solver_w;
  rw.vel = rw.pos + nrow;
  rw.R = rw.vel + nrow;
  rw.aref = rw.R + nrow;
  rw.J = radj_.solver_J;
  mju_zero(radj_.solver_w, 4 * nrow);
  for (int i = 0; i < nrow; i++) mju_zero(rw.J + J.rowadr[i], J.rownnz[i]);
  if (!solver.AdjointRowWeights(p, sol, &rw)) return radj_.solver_rows = false;
  reverse_solver_rows_calls_++;
  rows_dirty_ = -2;  // (the contacts' frame tangents written below: every row's zeroed after)
  TransposeRowTangents(rw.R, rw.aref, rw.vel, rw.pos);
  const double* qvel = nominal_.qvel;
  mju_zero(radj_.row_jw, nv_);
  mju_zero(radj_.col_pos, nv_);
  for (int i = 0; i < nrow; i++) {
    const bool gap = i < nplain && p.kind[i] != kRowFriction;
    for (int q = J.rowadr[i]; q < J.rowadr[i] + J.rownnz[i]; q++) {
      const int j = J.colind[q];
      radj_.row_jw[j] += rw.vel[i] * J.val[q];
      if (gap) radj_.col_pos[j] += rw.pos[i] * J.val[q];
      if (i >= nplain) rw.J[q] += rw.vel[i] * qvel[j] + sol.force[i] * w[j];
    }
  }
  // d J_rj = sign (d rho_r - [j carried] S x* rho_r) . cdof_j (AnalyticContactRows): per side,
  // the sums W_r of sign w_J cdof_j over a row's entries from each on (its carried ones: the
  // last), and with them d rho_r . W_r over the rows as P . dp + sum_a Q_a . dF_a
  const double* cdof = stage_data_->cdof;
  for (int c = 0; c < p.ncon; c++) {
    const int row = p.con[c].row, adr0 = J.rowadr[row], n = J.rownnz[row];
    for (int r = 0; r < p.con[c].dim; r++) {
      const int adr = J.rowadr[row + r];
      double sum[12] = {0};
      for (int q = n - 1; q >= 0; q--) {
        const int sign = rows_.nonzero_side[adr0 + q];
        AddScl6(sum + 6 * (sign > 0), cdof + 6 * J.colind[adr + q], sign * rw.J[adr + q]);
        std::memcpy(radj_.suffix + 12 * (adr + q), sum, sizeof(sum));
      }
    }
    if (n > 0) ContactWeightPQ(m, c);
  }
  return true;
}

void SmoothTangent::ContactWeightPQ(const mjModel* m, int c) {
  // d rho_r = [dp x F_r + off x dF_r; dF_r] (r < 3), [dF_{r-3}; 0]: with W_r = (t_r, l_r),
  // P = sum_{r<3} F_r x t_r and Q_a = t_a x off + l_a + t_{a+3}
  const Problem& p = *stage_.problem;
  const SparseRows& J = p.J;
  const Contact& con = p.con[c];
  const mjContact& g0 = pairs_.nominal[con.mj_index];
  for (int side = 0; side < 2; side++) {
    double* P = radj_.contact_pq + 24 * c + 12 * side;
    double* Q = P + 3;
    for (int k = 0; k < 12; k++) P[k] = 0;
    const int body = con.body[side];
    if (m->body_weldid[body] == 0) continue;  // (static: no columns)
    const double* com = stage_data_->subtree_com + 3 * m->body_rootid[body];
    const double off[3] = {g0.pos[0] - com[0], g0.pos[1] - com[1], g0.pos[2] - com[2]};
    for (int r = 0; r < con.dim; r++) {
      const double* W = radj_.suffix + 12 * J.rowadr[con.row + r] + 6 * side;
      const int a = r < 3 ? r : r - 3;
      double* Qa = Q + 3 * a;
      if (r >= 3) {
        for (int k = 0; k < 3; k++) Qa[k] += W[k];
        continue;
      }
      double t[3];
      Cross3(t, g0.frame + 3 * r, W);
      for (int k = 0; k < 3; k++) P[k] += t[k];
      Cross3(t, W, off);
      for (int k = 0; k < 3; k++) Qa[k] += t[k] + W[3 + k];
    }
  }
}

double SmoothTangent::SolverRowAdjointDot(const mjModel* m, int kind, int k) {
  // the plain rows' and each moved contact's: w_pos ddist + sum over sides and rows of d rho_r .
  // (its entries' sum) - (S x* rho_r) . (its carried entries' sum); the island's contacts' frame
  // tangents written (the anchors' displacements read them, Derivative::AnchorTangent)
  const Problem& p = *stage_.problem;
  const Islands& is = p.islands;
  const int island = is.tree_island[p.dof_tree[k]];
  if (kind == kVel) return island >= 0 ? radj_.row_jw[k] : 0;
  RecollideRigid(m, k);  // (its bodies marked for AnchorTangent, as PositionRows marks them)
  if (island < 0) return 0;
  const mjData* d = stage_data_;
  const SparseRows& J = p.J;
  const int carry = rne_.dof_carry_start[k];
  const double* S = d->cdof + 6 * k;
  const double* com = d->subtree_com + 3 * m->body_rootid[m->dof_bodyid[k]];
  double v = radj_.col_pos[k];
  const int* rows = is.rows + is.rowadr[island];
  for (int a = 0; a < is.nrows[island]; a++) {
    const int c = rows_.row_contact[rows[a]];
    if (c < 0) continue;
    const Contact& con = p.con[c];
    const int adr0 = J.rowadr[con.row], n = J.rownnz[con.row];
    mju_zero(tan_.dframe + 6 * c, 6);
    if (n == 0 || (!pairs_.body_moved[con.body[0]] && !pairs_.body_moved[con.body[1]])) continue;
    const mjContact& g0 = pairs_.nominal[con.mj_index];
    double dp[3], dF[9], ddist;
    ContactGeometry(m, con.mj_index, S, com, dp, dF, &ddist);
    mju_copy(tan_.dframe + 6 * c, dF + 3, 6);
    v += radj_.solver_w[con.row] * ddist;
    const int qc = static_cast<int>(std::lower_bound(J.colind + adr0, J.colind + adr0 + n, carry) -
                                    (J.colind + adr0));
    for (int side = 0; side < 2; side++) {
      const int body = con.body[side];
      if (m->body_weldid[body] == 0) continue;  // (static: no columns)
      const double* P = radj_.contact_pq + 24 * c + 12 * side;
      v += Dot3(dp, P) + Dot3(dF, P + 3) + Dot3(dF + 3, P + 6) + Dot3(dF + 6, P + 9);
      if (!pairs_.body_moved[body] || qc == n) continue;
      // the carried entries' - (S x* rho_r) . W_r
      const double* bc = stage_data_->subtree_com + 3 * m->body_rootid[body];
      const double off[3] = {g0.pos[0] - bc[0], g0.pos[1] - bc[1], g0.pos[2] - bc[2]};
      for (int r = 0; r < con.dim; r++) {
        const double* F = g0.frame + 3 * (r < 3 ? r : r - 3);
        double rho[6] = {F[0], F[1], F[2], 0, 0, 0}, sr[6];
        if (r < 3) {
          Cross3(rho, off, F);
          for (int k = 0; k < 3; k++) rho[3 + k] = F[k];
        }
        CrossForce(sr, S, rho);
        v -= Dot6(sr, radj_.suffix + 12 * (J.rowadr[con.row + r] + qc) + 6 * side);
      }
    }
  }
  return v;
}

bool SmoothTangent::ClosedContactGradient(const mjModel* m, int c) {
  // a static plane's contact c with a sphere, capsule or box on body B (ClosedTangent: linear in
  // B's twist)
  const Problem& p = *stage_.problem;
  const Contact& con = p.con[c];
  const ContactPair& pr = pairs_.pair[pairs_.contact_pair[con.mj_index]];
  const int B = con.body[1];
  if (!closed_form_ || !pr.closed || m->body_weldid[pr.body1] != 0 || pr.body2 != B ||
      m->body_weldid[con.body[0]] != 0 || m->body_weldid[B] == 0 ||
      p.islands.row_island[con.row] < 0) {
    return false;
  }
  ContactSideGradient(m, c);
  return true;
}

bool SmoothTangent::TwistContactGradient(const mjModel* m, int c) {
  // a re-collided pair's contact whose tangents come from its owner's six twists (TwistTangent:
  // linear in the twist of the one side a direction moves), its pair checked. The rows' term is
  // gam . g (g = dp, dF, ddist; gam as ContactWeightPQ's P and Q with both sides' X_r), dF's
  // tangent axes linear in dn (NormalFrameRate): with the owner's G_j, beta_j = gam . G_j, and
  // along side B's twist S (coefficients a(S)) the term is +-a . beta (+ gam . the rigid motion
  // for the other side) less sg_B (S x* rho_r) . (X_r - Y_r)
  const Problem& p = *stage_.problem;
  const mjData* d = stage_data_;
  const Contact& con = p.con[c];
  const int i = con.mj_index, q = pairs_.contact_pair[i];
  ContactPair& pr = pairs_.pair[q];
  if (!reverse_twists_ || pr.owner < 0 || con.body[0] != pr.body1 || con.body[1] != pr.body2 ||
      p.islands.row_island[con.row] < 0) {
    return false;
  }
  if (pr.relative_check == 0) pr.relative_check = OwnerTwists(m, q) ? 1 : -1;
  if (pr.relative_check < 0 || (pr.owner_mask & 64)) return false;
  const mjContact& g0 = pairs_.nominal[i];
  double rho[2][6][6], X[2][6][6], off[2][3];
  bool cols[2];
  double gam[13] = {0};  // weights of dp, dF, ddist
  gam[12] = radj_.row_w[3 * con.row + 2];
  for (int side = 0; side < 2; side++) {
    cols[side] = ContactSideWeights(m, con, side, ChainDofs(m, con.body[side]) > 0, off[side],
                                    rho[side], X[side]);
    if (!cols[side]) continue;
    const double sg = side ? 1 : -1;
    for (int r = 0; r < con.dim; r++) {
      const double* Xr = X[side][r];
      double* gF = gam + 3 + 3 * (r < 3 ? r : r - 3);
      if (r >= 3) {
        for (int k = 0; k < 3; k++) gF[k] += sg * Xr[k];
        continue;
      }
      double t[3], u[3];
      Cross3(t, g0.frame + 3 * r, Xr);
      Cross3(u, Xr, off[side]);
      for (int k = 0; k < 3; k++) gam[k] += sg * t[k], gF[k] += sg * (u[k] + Xr[3 + k]);
    }
  }
  double gn[3];  // gam's dF folded onto dn
  for (int a = 0; a < 3; a++) {
    double dF[9] = {0, 0, 0};
    dF[a] = 1;
    NormalFrameRate(g0.frame, dF);
    gn[a] = 0;
    for (int k = 0; k < 9; k++) gn[a] += gam[3 + k] * dF[k];
  }
  double beta[6];
  for (int j = 0; j < 6; j++) {
    const double* o = pairs_.owner_tan + 42 * i + 7 * j;
    beta[j] = Dot3(gam, o) + Dot3(gn, o + 3) + gam[12] * o[6];
  }
  const int owner = pr.owner ? pr.body2 : pr.body1;
  for (int side = 0; side < 2; side++) {
    const int B = con.body[side];
    if (ChainDofs(m, B) == 0) continue;
    const double* com = d->subtree_com + 3 * m->body_rootid[B];
    const double sg = side ? 1 : -1;
    double* G = radj_.contact_g + 6 * B;
    for (int e = 0; e < 6; e++) {
      double S[6] = {0, 0, 0, 0, 0, 0}, a[6];
      S[e] = 1;
      TwistCoefficients(m, q, S, com, a);
      double v = (B != owner ? -1 : 1) * (Dot3(a, beta) + Dot3(a + 3, beta + 3));
      if (B != owner) {
        double u[3], dn[3];
        const double r[3] = {g0.pos[0] - com[0], g0.pos[1] - com[1], g0.pos[2] - com[2]};
        Cross3(u, S, r);
        for (int k = 0; k < 3; k++) u[k] += S[3 + k];
        Cross3(dn, S, g0.frame);
        v += Dot3(gam, u) + Dot3(gn, dn);
      }
      for (int r = 0; r < con.dim && cols[side]; r++) {
        double sr[6];
        CrossForce(sr, S, rho[side][r]);
        v -= sg * Dot6(sr, X[side][r]);
      }
      G[e] += v;
    }
  }
  return true;
}

bool SmoothTangent::ContactSideWeights(const mjModel* m, const Contact& con, int side, bool moved,
                                       double off[3], double rho[6][6], double X[6][6]) {
  // side's rho_r and X_r = w_vel V + w_Jv V+ + h f_r V_x of its body's velocities, and where the
  // body moves its force sums P (sg rho_r weighted); false if static (no columns)
  const Problem& p = *stage_.problem;
  const mjData* d = stage_data_;
  const int body = con.body[side];
  if (m->body_weldid[body] == 0) return false;
  const mjContact& g0 = pairs_.nominal[con.mj_index];
  const double sg = side ? 1 : -1;
  const double* bc = d->subtree_com + 3 * m->body_rootid[body];
  for (int k = 0; k < 3; k++) off[k] = g0.pos[k] - bc[k];
  const double* V[3] = {d->cvel + 6 * body, rne_.cvel_next + 6 * body, radj_.vel_x + 6 * body};
  const double* force = stage_.solution->force;
  double* P = radj_.contact_p + 18 * body;
  for (int r = 0; r < con.dim; r++) {
    const double* Fr = g0.frame + 3 * (r < 3 ? r : r - 3);
    double* rr = rho[r];
    if (r < 3) {
      Cross3(rr, off, Fr);
      for (int k = 0; k < 3; k++) rr[3 + k] = Fr[k];
    } else {
      for (int k = 0; k < 3; k++) rr[k] = Fr[k], rr[3 + k] = 0;
    }
    const double* w = radj_.row_w + 3 * (con.row + r);
    const double wt[3] = {w[0], w[1], p.h * force[con.row + r]};
    for (int k = 0; k < 6; k++) X[r][k] = 0;
    for (int t = 0; t < 3; t++) {
      AddScl6(X[r], V[t], wt[t]);
      if (moved) AddScl6(P + 6 * t, rr, sg * wt[t]);
    }
  }
  return true;
}

void SmoothTangent::ContactSideGradient(const mjModel* m, int c) {
  // a static plane's contact c on body B (side 1): its rows' term x' r for a direction moving B
  // with twist S and velocities u, u+, u_x before its carried dofs is (AnalyticContactRows'
  // carried side, RowAdjointDot's weights)
  //   sum_r a_r(S) . X_r - (S x* rho_r) . X_r + (S x* rho_r) . Y_r + w_pos ddist(S)
  // with X_r = w_vel V_B + w_Jv V+_B + h f_r V_x,B and Y_r the same of u, u+, u_x: the first
  // terms G . S (G from the six unit twists), the last three sums of forces (S x* P_t) . u_t
  const mjData* d = stage_data_;
  const Contact& con = stage_.problem->con[c];
  const int i = con.mj_index, B = con.body[1];
  const mjContact& g0 = pairs_.nominal[i];
  const double* com = d->subtree_com + 3 * m->body_rootid[B];
  double rho[6][6], X[6][6], off[3];
  ContactSideWeights(m, con, 1, true, off, rho, X);
  const double wpos = radj_.row_w[3 * con.row + 2];
  double* G = radj_.contact_g + 6 * B;
  for (int e = 0; e < 6; e++) {
    double S[6] = {0, 0, 0, 0, 0, 0};
    S[e] = 1;
    Twist tw;
    for (int k = 0; k < 3; k++) tw.w[k] = S[k], tw.v[k] = S[3 + k], tw.o[k] = com[k];
    double dp[3], dF[9], ddist;
    ClosedTangent(m, i, tw, dp, dF, &ddist);
    double v = wpos * ddist;
    for (int r = 0; r < con.dim; r++) {
      const double* dFr = dF + 3 * (r < 3 ? r : r - 3);
      double a[6], sr[6], t[3], u[3];
      if (r < 3) {
        Cross3(t, dp, g0.frame + 3 * r);
        Cross3(u, off, dFr);
        for (int k = 0; k < 3; k++) a[k] = t[k] + u[k], a[3 + k] = dFr[k];
      } else {
        for (int k = 0; k < 3; k++) a[k] = dFr[k], a[3 + k] = 0;
      }
      CrossForce(sr, S, rho[r]);
      for (int k = 0; k < 6; k++) v += (a[k] - sr[k]) * X[r][k];
    }
    G[e] += v;
  }
}

bool SmoothTangent::PrepareContactAdjoint(const mjModel* m, const double* x) {
  // the closed contacts' gradients on their bodies' twists (ClosedContactGradient), summed over
  // each body's subtree: a position direction's term of them is ContactAdjoint's, O(1)
  radj_.contacts = radj_.rows && reverse_contacts_ && stage_.batch;
  if (!radj_.contacts) return false;
  reverse_contacts_calls_++;
  const Problem& p = *stage_.problem;
  const int nbody = m->nbody;
  const double* cdof = stage_data_->cdof;
  double* vx = radj_.vel_x;
  Zero6(vx);
  for (int b = 1; b < nbody; b++) {
    Copy6(vx + 6 * b, vx + 6 * m->body_parentid[b]);
    for (int j = m->body_dofadr[b]; j < m->body_dofadr[b] + m->body_dofnum[b]; j++) {
      AddScl6(vx + 6 * b, cdof + 6 * j, x[j]);
    }
  }
  mju_zero(radj_.contact_g, 6 * nbody);
  mju_zero(radj_.contact_p, 18 * nbody);
  for (int q = 0; q < pairs_.npair; q++) pairs_.pair[q].reversed = true;
  for (int c = 0; c < p.ncon; c++) {
    radj_.contact_rev[c] = ClosedContactGradient(m, c) || TwistContactGradient(m, c);
    reversed_contacts_ += radj_.contact_rev[c];
    pairs_.pair[pairs_.contact_pair[p.con[c].mj_index]].reversed &= radj_.contact_rev[c];
  }
  for (int b = nbody - 1; b > 0; b--) {
    const int parent = m->body_parentid[b];
    if (parent == 0) continue;
    AddScl6(radj_.contact_g + 6 * parent, radj_.contact_g + 6 * b, 1);
    for (int t = 0; t < 3; t++) {
      AddScl6(radj_.contact_p + 18 * parent + 6 * t, radj_.contact_p + 18 * b + 6 * t, 1);
    }
  }
  return true;
}

double SmoothTangent::ContactAdjoint(const mjModel* m, int k) const {
  // G . S + sum_t (S x* P_t) . u_t over the closed contacts of dof k's subtree (its body's sums)
  if (!radj_.contacts) return 0;
  const double* S = stage_data_->cdof + 6 * k;
  const int b0 = m->dof_bodyid[k], s = rne_.dof_carry_start[k], parent = m->dof_parentid[s];
  const double zero[6] = {0, 0, 0, 0, 0, 0};
  const double* u[3] = {rne_.cvel_before_dof + 6 * s, rne_.cvel_next_before_dof + 6 * s,
                        parent >= 0 ? radj_.chain + 6 * parent : zero};
  double v = Dot6(radj_.contact_g + 6 * b0, S);
  for (int t = 0; t < 3; t++) {
    double sp[6];
    CrossForce(sp, S, radj_.contact_p + 18 * b0 + 6 * t);
    v += Dot6(sp, u[t]);
  }
  return v;
}

double SmoothTangent::RowAdjointDot() const {
  // the direction's rows' term of mu' r from its row tangents on its island's rows
  const Problem& p = *stage_.problem;
  const Islands& is = p.islands;
  const double* w = radj_.row_w;
  const int* rows = is.rows + is.rowadr[row_island_];
  double v = 0;
  for (int a = 0; a < is.nrows[row_island_]; a++) {
    const int i = rows[a];
    if (tan_.has_dvel) v += w[3 * i] * tan_.dvel[i];
    if (tan_.has_dJ_force) v += w[3 * i + 1] * tan_.dJ_qvel_next[i];
    if (tan_.has_dpos) v += w[3 * i + 2] * tan_.dpos[i];
  }
  return v;
}

bool SmoothTangent::BeginAdjointUnit(const mjModel* m, int kind, int index) {
  // other directions, or without the reverse pass: UnitTangent's whole (dqfrc_smooth on nv)
  if (!radj_.ready || (kind != kPos && kind != kVel)) {
    UnitTangent(m, kind, index);
    adj_lo_ = 0;
    adj_hi_ = nv_;
    return false;
  }
  ClearUnit();
  unit_kind_ = kind;
  unit_index_ = index;
  unit_dqderiv_ = false;
  return true;
}

void SmoothTangent::AdjointTreeSpan(int index) {
  // zero what the last such direction wrote of dqfrc_smooth, then take the direction's tree
  mju_zero(tan_.dqfrc_smooth + adj_lo_, adj_hi_ - adj_lo_);
  const int t = extractor_.dof_tree()[index];
  adj_lo_ = trees_.dofadr[t];
  adj_hi_ = adj_lo_ + trees_.dofnum[t];
  mju_zero(tan_.dact_dot, na_);
}

bool SmoothTangent::AdjointUnitTangent(const mjModel* m, int kind, int index) {
  // UnitTangent's position and velocity directions without their Newton-Euler terms: dqfrc_smooth
  // holds the springs, the damping and the joint actuators only, on the direction's tree (zero
  // elsewhere: the span the last such direction wrote is zeroed, not nv), and dqderiv_qacc stays
  // zero (Euler's damped pass is RnePositionAdjoint's second sum)
  if (!BeginAdjointUnit(m, kind, index)) return false;
  // (UnitTangent's rows of the direction's tree's island; stage_.batch)
  const Problem& p = *stage_.problem;
  row_island_ = -2;
  // with the rows' weights (radj_.rows) only a position direction of a tree with rows forms row
  // tangents (the others' rows stay zero as they are, a velocity direction's term is
  // VelocityRowAdjoint's): its island's
  bool rows = false;
  if (stage_.has_rows) {
    const int island = p.islands.tree_island[p.dof_tree[index]];
    row_island_ = island >= 0 ? island : -1;
    rows = !radj_.rows || (kind == kPos && island >= 0);
    if (rows) ZeroRowsBut(row_island_);
  }

  AdjointTreeSpan(index);
  if (kind == kVel) {
    tan_.dv[index] = 1;
    VelocityLocalForces(m, index);
    if (rows) {  // (else VelocityRowAdjoint's)
      tan_.has_dvel = true;
      VelocityRows(index);
    }
    return true;
  }
  tan_.dq[index] = 1;
  tan_.has_dM = false;
  PositionLocalForces(m, index);
  if (rows) PositionRows(m, index, !radj_.rows);  // (without RowTangents: RowAdjointDot's weights)
  return true;
}

bool SmoothTangent::SolverAdjointUnitTangent(const mjModel* m, int kind, int index) {
  // UnitTangent's position and velocity directions for a solver's reverse mode after
  // PrepareSolverRneAdjoint: dqfrc_smooth without the Newton-Euler terms (springs, damping, joint
  // actuators; on the direction's tree, zero elsewhere), dM formed (the solver's and the
  // integrator's products read it), the rows as UnitTangent forms them, and no dv_free (its
  // weight is transposed by the caller)
  if (!BeginAdjointUnit(m, kind, index)) return false;
  row_island_ = -2;
  const bool rows = stage_.has_rows && !radj_.solver_rows;  // (else SolverRowAdjointDot's)
  if (rows) {  // (UnitTangent's, analytic and not blocked)
    const Problem& p = *stage_.problem;
    const int island = p.islands.tree_island[p.dof_tree[index]];
    if (island_rows_) {
      row_island_ = island >= 0 ? island : -3;
      ZeroRowsBut(row_island_);
    } else {
      rows_dirty_ = -2;
    }
  }
  AdjointTreeSpan(index);
  if (kind == kVel) {
    tan_.dv[index] = 1;
    VelocityLocalForces(m, index);
    if (rows) {
      tan_.has_dvel = true;
      if (!velocity_rows_unread_) VelocityRows(index);
    }
    return true;
  }
  tan_.dq[index] = 1;
  tan_.has_dM = true;
  tan_.dM_begin = adj_lo_;
  tan_.dM_end = adj_hi_;
  MassTangent(m, index, tan_.dM);
  PositionLocalForces(m, index);
  if (rows) PositionRows(m, index);
  return true;
}

}  // namespace contactkit
