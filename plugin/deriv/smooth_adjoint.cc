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

#include <cstring>

#include "plugin/deriv/smooth_tangent.h"
#include "plugin/deriv/spatial.h"
#include "plugin/step/compat.h"

namespace contactkit {

using namespace spatial;  // NOLINT(build/namespaces)

void RneAdjointWork::Carve(ArenaCarver& c, const DerivSizes& n) {
  const size_t nv = n.nv, nbody = n.nbody;
  carried_crb = c.Take<double>(12 * nv);
  carried_bsub = c.Take<double>(6 * nv);
  chain = c.Take<double>(12 * nv);
  child = c.Take<double>(24 * nbody);
}

bool SmoothTangent::PrepareRneAdjoint(const mjModel* m, const double* x, const double* xz) {
  radj_.ready = reverse_rne_ && analytic_ && stage_.batch && !integrator_.implicit;
  radj_.damped = xz != nullptr && integrator_.damped;
  adj_lo_ = 0;  // (dqfrc_smooth and dJ_force: whatever the last direction wrote)
  adj_hi_ = nv_;
  adj_force_island_ = -2;
  if (!radj_.ready) return false;
  reverse_rne_calls_++;
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
  return true;
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

bool SmoothTangent::AdjointUnitTangent(const mjModel* m, int kind, int index) {
  // UnitTangent's position and velocity directions without their Newton-Euler terms: dqfrc_smooth
  // holds the springs, the damping and the joint actuators only, on the direction's tree (zero
  // elsewhere: the span the last such direction wrote is zeroed, not nv), and dqderiv_qacc stays
  // zero (Euler's damped pass is RnePositionAdjoint's second sum)
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
  // (UnitTangent's rows of the direction's tree's island; stage_.batch)
  const Problem& p = *stage_.problem;
  row_island_ = -2;
  if (stage_.has_rows) {
    const int island = p.islands.tree_island[p.dof_tree[index]];
    row_island_ = island >= 0 ? island : -1;
    ZeroRowsBut(row_island_);
  }

  mju_zero(tan_.dqfrc_smooth + adj_lo_, adj_hi_ - adj_lo_);
  const int t = extractor_.dof_tree()[index];
  adj_lo_ = trees_.dofadr[t];
  adj_hi_ = adj_lo_ + trees_.dofnum[t];
  mju_zero(tan_.dact_dot, na_);
  if (kind == kVel) {
    tan_.dv[index] = 1;
    VelocityLocalForces(m, index);
    if (stage_.has_rows) {
      tan_.has_dvel = true;
      VelocityRows(index);
    }
    return true;
  }
  tan_.dq[index] = 1;
  tan_.has_dM = false;
  PositionLocalForces(m, index);
  if (stage_.has_rows) PositionRows(m, index);
  return true;
}

}  // namespace contactkit
