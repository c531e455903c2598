// Copyright 2026 The contactkit developers.
//
// The derivative workspace, the stages of a step, (b) the solver's force tangent, (c) the
// integrators, and the C API.
#include "plugin/deriv/derivative.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <new>
#include <utility>

#include "plugin/step/compat.h"
#include "plugin/step/handle.h"
#include "solvers/common/dense.h"

namespace contactkit {
namespace {

constexpr double kNudge = 1e-6;  // step of the forward differences of part (a)

// MuJoCo's RK4 tableau (as pipeline.cc)
const double kRK4A[3] = {0.5, 0.5, 1};
const double kRK4B[4] = {1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0};

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

//---------------------------------- workspace -----------------------------------------------------

Derivative::~Derivative() {
  if (cfd_model_) mj_deleteModel(cfd_model_);
  if (d1_) mj_deleteData(d1_);
  if (d0_) mj_deleteData(d0_);
  ck_free(shadow_);
}

bool Derivative::Setup(const mjModel* m, const ckSettings& s, std::string* error) {
  nq_ = m->nq;
  nv_ = m->nv;
  na_ = m->na;
  nu_ = m->nu;
  nM_ = m->nM;
  ns_ = m->nsensordata;
  settings_ = s;
  ckSettings inner = s;
  inner.deriv.enabled = 0;
  shadow_ = MakeHandle(m, inner, false, error);
  if (!shadow_) return false;
  shadow_->extractor.set_structural(true);
  d0_ = mj_makeData(m);
  d1_ = mj_makeData(m);
  if (!d0_ || !d1_) {
    *error = "could not allocate the derivative's scratch mjData";
    return false;
  }
  if (!extractor_.Setup(m, 0, error)) return false;
  extractor_.set_structural(true);
  if (!MakeCfdModel(m, s, error)) return false;
  const ProblemDims& dims = extractor_.dims();
  storage_.Allocate(dims, m->dof_parentid, m->dof_Madr, extractor_.dof_tree().data(),
                    extractor_.ntree());
  soft_.Setup(dims);

  const int nv = nv_, nq = nq_, na = na_, nu = nu_, ns = ns_;
  const size_t rows = std::max(dims.max_rows, 1), nnz = std::max(dims.max_nnz, 1);
  const size_t ncon = std::max(dims.max_contacts, 1);
  const size_t nefc = rows + 4 * ncon;
  auto alloc = [](std::vector<double>& v, size_t n) { v.assign(std::max<size_t>(n, 1), 0.0); };
  alloc(q0_, nq);
  alloc(v0_, nv);
  alloc(act0_, na);
  alloc(u0_, nu);
  alloc(M0_, nM_);
  alloc(fs0_, nv);
  alloc(actdot0_, na);
  alloc(qc0_, nv);
  alloc(aint_, nv);
  alloc(mu_, ncon);
  alloc(cfd_r_, ncon);
  modes_.assign(ncon, -1);
  alloc(gsave_, static_cast<size_t>(2 * nv + na + nu));
  alloc(con_slope_, ncon);
  alloc(con_position_, ncon);
  alloc(con_dposition_, ncon);
  alloc(row_dR_, rows);
  jcol_adr_.assign(nv + 1, 0);
  jcol_row_.assign(nnz, 0);
  alloc(jcol_val_, nnz);
  alloc(elastic_J_, static_cast<size_t>(kMaxBounce) * nv);
  alloc(elastic_norm2_, kMaxBounce);
  alloc(elastic_sigma_, kMaxBounce);
  alloc(elastic_s_, 2 * kMaxBounce);
  efc_state_.assign(nefc, 0);
  alloc(efc_jar_, nefc);

  // dense per-tree blocks
  const int ntree = extractor_.ntree();
  tree_adr_.assign(std::max(ntree, 1) + 1, 0);
  tree_begin_.assign(std::max(ntree, 1), 0);
  tree_size_.assign(std::max(ntree, 1), 0);
  {
    const std::vector<int>& dof_tree = extractor_.dof_tree();
    for (int j = nv - 1; j >= 0; j--) {
      tree_begin_[dof_tree[j]] = j;
      tree_size_[dof_tree[j]]++;
    }
    size_t adr = 0;
    for (int t = 0; t < ntree; t++) {
      tree_adr_[t] = static_cast<int>(adr);
      adr += static_cast<size_t>(tree_size_[t]) * tree_size_[t];
    }
    tree_adr_[ntree] = static_cast<int>(adr);
    alloc(qderiv_, adr);
    alloc(qderiv_rne_, adr);
    alloc(lu_, adr);
    alloc(mdense_, adr);
  }
  piv_.assign(std::max(nv, 1), 0);
  alloc(mint_M_, nM_);
  alloc(mint_LD_, nM_);
  alloc(mint_Dinv_, nv);
  mint_.nv = nv;
  mint_.nM = nM_;
  mint_.parent = m->dof_parentid;
  mint_.madr = m->dof_Madr;
  mint_.M = mint_M_.data();
  mint_.LD = mint_LD_.data();
  mint_.Dinv = mint_Dinv_.data();

  // subtrees (MuJoCo orders bodies depth first, so a subtree is a range) and the
  // joint-transmission actuators of each dof
  subtree_last_.assign(std::max(static_cast<int>(m->nbody), 1), 0);
  for (int b = m->nbody - 1; b >= 0; b--) {
    subtree_last_[b] = std::max(subtree_last_[b], b);
    if (b > 0) {
      const int parent = m->body_parentid[b];
      subtree_last_[parent] = std::max(subtree_last_[parent], subtree_last_[b]);
    }
  }
  subtree_contiguous_ = true;
  for (int b = 1; b < m->nbody; b++) {
    const int parent = m->body_parentid[b];
    subtree_contiguous_ &= parent < b && b <= subtree_last_[parent];
  }
  dof_act_count_.assign(std::max(nv, 1), 0);
  dof_act_adr_.assign(std::max(nv, 1), 0);
  dof_act_.assign(std::max(nu, 1), 0);
  for (int i = 0; i < nu; i++) {
    if (m->actuator_trntype[i] == mjTRN_JOINT) {
      dof_act_count_[m->jnt_dofadr[m->actuator_trnid[2 * i]]]++;
    }
  }
  for (int j = 0, adr = 0; j < nv; j++) {
    dof_act_adr_[j] = adr;
    adr += dof_act_count_[j];
    dof_act_count_[j] = 0;
  }
  dof_act_len_.assign(std::max(nv, 1), 0);
  dof_act_vel_.assign(std::max(nv, 1), 0);
  for (int i = 0; i < nu; i++) {
    if (m->actuator_trntype[i] != mjTRN_JOINT) continue;
    const int j = m->jnt_dofadr[m->actuator_trnid[2 * i]];
    dof_act_[dof_act_adr_[j] + dof_act_count_[j]++] = i;

    // does the force (or activation rate) depend on the actuator's length / velocity?
    const int gain = m->actuator_gaintype[i], bias = m->actuator_biastype[i];
    const double* gp = m->actuator_gainprm + mjNGAIN * i;
    const double* bp = m->actuator_biasprm + mjNBIAS * i;
    const bool other = gain == mjGAIN_MUSCLE || gain == mjGAIN_USER || bias == mjBIAS_USER ||
                       m->actuator_dyntype[i] == mjDYN_USER;
    dof_act_len_[j] |= other || bias == mjBIAS_MUSCLE || (gain == mjGAIN_AFFINE && gp[1] != 0) ||
                       (bias == mjBIAS_AFFINE && bp[1] != 0);
    dof_act_vel_[j] |=
        other || (gain == mjGAIN_AFFINE && gp[2] != 0) || (bias == mjBIAS_AFFINE && bp[2] != 0);
  }
  alloc(rne_cacc_, 12 * static_cast<size_t>(m->nbody));
  alloc(rne_cfrc_, 12 * static_cast<size_t>(m->nbody));
  alloc(rne_icvel_, 6 * static_cast<size_t>(m->nbody));
  alloc(rne_vpre_, 6 * static_cast<size_t>(nv));
  alloc(rne_vn_, 6 * static_cast<size_t>(m->nbody));
  alloc(rne_vnpre_, 6 * static_cast<size_t>(nv));
  alloc(rne_apre_, 12 * static_cast<size_t>(nv));
  alloc(rne_p_, 6 * static_cast<size_t>(nv));
  alloc(rne_sc_, 6 * static_cast<size_t>(nv));
  alloc(rne_q_, 6 * static_cast<size_t>(nv));
  alloc(rne_bsub_, 36 * static_cast<size_t>(m->nbody));

  // per dof: where the suffix of its body's dofs starts that a perturbation of its position
  // carries (a free joint's rotations, else its own joint onward), and that sees its velocity in
  // cdof_dot (the joints after it; a free joint's translations: its rotations onward)
  carry_start_.assign(std::max(nv, 1), 0);
  later_start_.assign(std::max(nv, 1), 0);
  for (int k = 0; k < nv; k++) {
    const int jnt = m->dof_jntid[k], adr = m->jnt_dofadr[jnt], type = m->jnt_type[jnt];
    carry_start_[k] = type == mjJNT_FREE ? adr + 3 : adr;
    later_start_[k] = type == mjJNT_FREE   ? (k < adr + 3 ? adr + 3 : adr + 6)
                      : type == mjJNT_BALL ? adr + 3
                                           : k + 1;
  }
  subtree_dofend_.assign(std::max(static_cast<int>(m->nbody), 1), 0);
  for (int b = 0; b < m->nbody; b++) {
    subtree_dofend_[b] = m->body_dofnum[b] ? m->body_dofadr[b] + m->body_dofnum[b] : 0;
  }
  for (int b = m->nbody - 1; b > 0; b--) {
    int& end = subtree_dofend_[m->body_parentid[b]];
    end = std::max(end, subtree_dofend_[b]);
  }
  collide_buf_.assign(mjMAXCONPAIR, mjContact());

  pairs_.assign(ncon, Pair());
  con_pair_.assign(ncon, -1);
  con0_.assign(ncon, mjContact());
  con1_.assign(ncon, mjContact());
  con2_.assign(ncon, mjContact());
  con_sides_.assign(ncon, 0);
  body_moved_.assign(std::max(static_cast<int>(m->nbody), 1), 0);
  eq_type_.assign(std::max(static_cast<int>(m->neq), 1), 0);
  eq_torquescale_.assign(std::max(static_cast<int>(m->neq), 1), 1.0);
  for (int i = 0; i < m->neq; i++) {
    eq_type_[i] = m->eq_type[i];
    eq_torquescale_[i] = m->eq_data[mjNEQDATA * i + 10];
  }

  alloc(dq_, nv);
  alloc(dv_, nv);
  alloc(dact_, na);
  alloc(du_, nu);
  alloc(dM_, nM_);
  alloc(dfs_, nv);
  alloc(dactdot_, na);
  alloc(dJ_, nnz);
  alloc(dJv_, rows);
  alloc(dJf_, nv);
  con_sign_.assign(nnz, 0);
  con_written_.assign(ncon, 0);
  chain_mark_.assign(std::max(nv, 1), 0);
  alloc(dpos_, rows);
  alloc(ddisp_, rows);
  alloc(dframe_, 6 * ncon);
  alloc(dvel_, rows);
  alloc(dimp_, rows);
  alloc(dR_, rows);
  alloc(daref_, rows);
  alloc(dvfree_, nv);
  alloc(df_, rows);
  alloc(dqc_, nv);
  alloc(dacc_, nv);
  alloc(dqderiv_a_, nv);
  alloc(moment_, nv);
  alloc(qderiv_a0_, nv);
  alloc(tmp_, nv + na);
  alloc(tmp2_, nv + na);
  alloc(vplus_, nv);
  alloc(dup_, nv);
  alloc(wpos_, nv);
  alloc(maps_, 18 * static_cast<size_t>(m->njnt));
  alloc(maps_pos_, 18 * static_cast<size_t>(m->njnt));
  alloc(blk_r_, static_cast<size_t>(nv) * SoftTangent::kBlock);
  alloc(blk_p_, static_cast<size_t>(nv) * SoftTangent::kBlock);
  alloc(blk_y_, static_cast<size_t>(nv) * SoftTangent::kBlock);
  alloc(blk_actdot_, static_cast<size_t>(na) * SoftTangent::kBlock);
  blk_kind_.assign(SoftTangent::kBlock, 0);
  blk_index_.assign(SoftTangent::kBlock, 0);
  blk_col_.assign(SoftTangent::kBlock, 0);
  cols_.assign(std::max(nv, 1), 0);
  alloc(jrows_, 6 * static_cast<size_t>(nv));
  alloc(act_force0_, nu);
  alloc(qfrc_act0_, nv);

  // RK4: stage Jacobians and per-direction chains
  const size_t ndx = 2 * nv + na, ndir = ndx + nu;
  alloc(G_, (nv + na) * ndir);
  alloc(K_, ndx * ndir);
  alloc(S_, ndx * ndir);
  alloc(rkX_, 4 * static_cast<size_t>(nq + nv + na));
  alloc(rkF_, 4 * static_cast<size_t>(nv + na));

  const size_t nstate = nq + nv + na;
  alloc(fd_next_, nstate);
  alloc(fd_plus_, nstate);
  alloc(fd_minus_, nstate);
  alloc(fd_sens_, ns);
  alloc(fd_splus_, ns);
  alloc(fd_sminus_, ns);
  alloc(fd_col_, std::max<size_t>(ndx, ns));
  alloc(out_col_, ndx);
  alloc(sens_col_, ns);
  return true;
}

bool Derivative::SetSettings(const mjModel* m, const ckSettings& s, std::string* error) {
  // contacts from distance copy the model: a new width needs it
  const bool width_changed = settings_.deriv.cfd_width != s.deriv.cfd_width;
  if (width_changed && s.deriv.cfd_width > 0 && !m) {
    *error = "changing cfd_width needs the model (m is NULL)";
    return false;
  }
  // the shadow handle only steps: it never holds a derivative workspace of its own (with
  // derivatives on it would make one, nested one level deeper on every call)
  ckSettings inner = s;
  inner.deriv.enabled = 0;
  char buf[512];
  if (ck_setSettings(shadow_, m, &inner, buf, sizeof(buf)) != 0) {
    *error = std::string("derivative workspace: ") + buf;
    return false;
  }
  if (width_changed) {
    if (!MakeCfdModel(m, s, error)) return false;
  } else {
    for (int i = 0; i < 5; i++) cfd_solimp_[i] = s.deriv.cfd_solimp[i];
  }
  settings_ = s;
  return true;
}

void Derivative::LoadState(const mjModel* m, const mjData* src, mjData* dst) {
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

//---------------------------------- stages --------------------------------------------------------

bool Derivative::PrepareMujocoProblem(const mjModel* m) {
  mjData* d = d0_;
  Problem& p = storage_.problem();
  Solution& sol = storage_.solution();
  if (extractor_.Extract(m, d, &p) > 0) {
    fallback_ = ckFALLBACK_ROWS;
    return false;
  }
  if (cfd_) CfdAdjustProblem(m, &p);

  // MuJoCo's solver works with M itself (Extract folds implicit damping in)
  for (int i = 0; i < nM_; i++) p.mass.M[i] = M0_[i];  // d's inertia (PrepareStage)
  p.mass.Factor();
  for (int i = 0; i < nv_; i++) p.v_free[i] = d->qfrc_smooth[i];
  p.mass.Solve(p.v_free);
  for (int i = 0; i < nv_; i++) p.v_free[i] = d->qvel[i] + p.h * p.v_free[i];

  // the solution: v+ of the solver's acceleration, forces in the frame rows
  for (int i = 0; i < nv_; i++) sol.v_next[i] = d->qvel[i] + p.h * d->qacc[i];
  const int nplain = p.ne + p.nf + p.nl;
  for (int i = 0; i < nplain; i++) sol.force[i] = d->efc_force[i];
  const bool elliptic = m->opt.cone == mjCONE_ELLIPTIC;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const double* ef = d->efc_force + con.efc_address;
    double* f = sol.force + con.row;
    if (con.dim == 1 || elliptic) {
      for (int r = 0; r < con.dim; r++) f[r] = ef[r];
    } else {
      f[0] = 0;
      for (int e = 0; e < 2 * (con.dim - 1); e++) f[0] += ef[e];
      for (int j = 1; j < con.dim; j++) f[j] = con.mu[j - 1] * (ef[2 * (j - 1)] - ef[2 * j - 1]);
    }
    mu_[c] = d->contact[con.mj_index].mu;
  }

  // MuJoCo's rows; their states at the solution (MuJoCo 3.x's island solver leaves efc_state
  // unset, so the states come from MuJoCo's own classification of jar = J qacc - aref)
#if CK_MJ3
  mj_mulJacVec(m, d, efc_jar_.data(), d->qacc);
  for (int i = 0; i < d->nefc; i++) efc_jar_[i] -= d->efc_aref[i];
  mj_constraintUpdate(m, d, efc_jar_.data(), nullptr, 0);
#endif
  for (int i = 0; i < d->nefc; i++) efc_state_[i] = d->efc_state[i];
  SoftRows rows;
  rows.elliptic = elliptic;
  rows.nrow = d->nefc;
  rows.state = efc_state_.data();
  rows.force = d->efc_force;
  rows.R = d->efc_R;
  rows.mu = mu_.data();
  if (!soft_.Prepare(p, rows, sol.v_next)) {
    fallback_ = ckFALLBACK_SOFT_HESSIAN;
    return false;
  }
  p_ = &p;
  sol_ = &sol;
  solver_ = nullptr;
  return true;
}

void Derivative::PreparePairs(const mjModel* m) {
  const mjData* d = d0_;
  npair_ = 0;
  for (int c = 0; c < d->ncon; c++) {
    const mjContact* con = d->contact + c;
    const int g1 = ContactGeom(con, 0), g2 = ContactGeom(con, 1);
    if (npair_ > 0 && pairs_[npair_ - 1].g1 == g1 && pairs_[npair_ - 1].g2 == g2) {
      pairs_[npair_ - 1].count++;
      con_pair_[c] = npair_ - 1;
      continue;
    }
    Pair& pr = pairs_[npair_];
    pr.g1 = g1;
    pr.g2 = g2;
    pr.first = c;
    pr.count = 1;
    pr.body1 = m->geom_bodyid[g1];
    pr.body2 = m->geom_bodyid[g2];

    // distance up to which mj_collideGeoms asks the collider for contacts
    pr.margin = GeomPairMargins(m, g1, g2).detect;
    con_pair_[c] = npair_++;
  }
  for (int c = 0; c < d->ncon; c++) con0_[c] = d->contact[c];
}

bool Derivative::PrepareIntegrator(const mjModel* m, bool rk4) {
  const mjData* d = d0_;
  const int nv = nv_;
  const double h = m->opt.timestep;
  implicit_ = !rk4 && IsImplicit(m);

  // acceleration the integrator uses: M_int aint = qfrc_smooth + qfrc_constraint, or qacc itself
  // (RK4, Euler without damping)
  damped_ = !rk4 && !implicit_ && EulerDampingImplicit(m);
  for (int i = 0; i < nv; i++) aint_[i] = d->qfrc_smooth[i] + d->qfrc_constraint[i];
  if (implicit_) {
    // dense blocks of M - h qDeriv per tree, LU
    const int* rownnz = DRowNnz(m, d);
    const int* rowadr = DRowAdr(m, d);
    const int* colind = DColInd(m, d);
    for (size_t i = 0; i < lu_.size(); i++) lu_[i] = 0;
    const std::vector<int>& dof_tree = extractor_.dof_tree();
    for (int i = 0; i < nv; i++) {
      const int t = dof_tree[i], n = tree_size_[t], b = tree_begin_[t];
      double* blk = lu_.data() + tree_adr_[t];
      for (int k = 0; k < rownnz[i]; k++) {
        const int j = colind[rowadr[i] + k];
        blk[(j - b) * n + (i - b)] -= h * d->qDeriv[rowadr[i] + k];
      }
      blk[(i - b) * n + (i - b)] += M0_[m->dof_Madr[i]];
      int adr = m->dof_Madr[i] + 1;
      for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
        blk[(j - b) * n + (i - b)] += M0_[adr];
        blk[(i - b) * n + (j - b)] += M0_[adr];
      }
    }
    for (int t = 0; t < extractor_.ntree(); t++) {
      if (!LuFactor(lu_.data() + tree_adr_[t], tree_size_[t], piv_.data() + tree_begin_[t])) {
        fallback_ = ckFALLBACK_IMPLICIT;
        return false;
      }
    }
    IntegratorSolve(aint_.data());
  } else {
    // M, plus h diag(damping) for Euler's implicit damping
    for (int i = 0; i < nM_; i++) mint_M_[i] = M0_[i];
    if (damped_) {
      for (int i = 0; i < nv; i++) mint_M_[m->dof_Madr[i]] += h * m->dof_damping[i];
    }
    mint_.Factor();
    if (damped_) {
      mint_.Solve(aint_.data());
    } else {
      mju_copy(aint_.data(), d->qacc, nv);
    }
  }
  return true;
}

void Derivative::IntegratorSolve(double* x) const {
  if (implicit_) {
    for (int t = 0; t < extractor_.ntree(); t++) {
      const int b = tree_begin_[t];
      LuSolve(lu_.data() + tree_adr_[t], piv_.data() + b, tree_size_[t], x + b);
    }
  } else {
    mint_.Solve(x);
  }
}

void Derivative::IntegratorSolveT(double* x) const {
  if (implicit_) {
    for (int t = 0; t < extractor_.ntree(); t++) {
      const int b = tree_begin_[t];
      LuSolveT(lu_.data() + tree_adr_[t], piv_.data() + b, tree_size_[t], x + b);
    }
  } else {
    mint_.Solve(x);
  }
}

void Derivative::ResetShadow() {
  if (shadow_->solver) shadow_->solver->Reset();
  if (anchor_source_) {
    shadow_->anchors.CopyFrom(*anchor_source_);
  } else {
    shadow_->anchors.Clear();
  }
}

bool Derivative::PrepareStage(const mjModel* m, bool rk4) {
  mjData* d = d0_;
  const int nv = nv_;

  // nominal forward with the derivative's own handle (cold solver: reproducible, the caller's
  // anchors), on the contacts-from-distance problem if that is on
  ResetShadow();
  cfd_ = cfd_model_ != nullptr;
  if (cfd_) {
    CfdForward(m);
  } else {
    ForwardSkip(shadow_, m, d, mjSTAGE_NONE, !sensors_);
  }

  // state and smooth data
  mju_copy(q0_.data(), d->qpos, nq_);
  mju_copy(v0_.data(), d->qvel, nv);
  mju_copy(act0_.data(), d->act, na_);
  mju_copy(u0_.data(), d->ctrl, nu_);
  CopyLegacyM(m, d, M0_.data());
  mju_copy(fs0_.data(), d->qfrc_smooth, nv);
  mju_copy(actdot0_.data(), d->act_dot, na_);
  mju_copy(qc0_.data(), d->qfrc_constraint, nv);
  mju_copy(act_force0_.data(), d->actuator_force, nu_);
  mju_copy(qfrc_act0_.data(), d->qfrc_actuator, nv);
  mode_changes_ = 0;

  // the solved problem
  has_rows_ = d->nefc > 0;
  if (has_rows_) {
    if (!shadow_->solver) {
      if (!PrepareMujocoProblem(m)) return false;
    } else {
      p_ = &shadow_->storage.problem();
      sol_ = &shadow_->storage.solution();
      solver_ = shadow_->solver.get();
      if (p_->ncon < CountIncluded(d)) {
        fallback_ = ckFALLBACK_ROWS;
        return false;
      }
    }
    plain_varying_ = false;
    for (int i = 0; i < p_->ne + p_->nf + p_->nl; i++) plain_varying_ |= PlainRowVaries(m, i);
    PrepareRowSlopes();
    if (apply_modes_ && solver_) solver_->SetTangentModes(*p_, modes_.data());
  }

  // "mujoco" with constraint rows: directions in blocks; analytic position tangents where the
  // model allows (and the solver's tangent does not need the mass matrix's)
  implicit_ = !rk4 && IsImplicit(m);
  batch_ = !shadow_->solver && has_rows_ && !sensors_;
  DecideAnalytic(m);

  // velocity derivative of the smooth forces, dense per tree (analytic: per direction)
  if (!analytic_) SmoothVelDerivative(m, d);
  // out (+)= sign qDeriv of src in the dense per-tree blocks
  auto dense = [&](const mjData* src, double* out, double sign, bool clear) {
    const int* rownnz = DRowNnz(m, src);
    const int* rowadr = DRowAdr(m, src);
    const int* colind = DColInd(m, src);
    const std::vector<int>& dof_tree = extractor_.dof_tree();
    if (clear) {
      for (int i = 0; i < tree_adr_[extractor_.ntree()]; i++) out[i] = 0;
    }
    for (int i = 0; i < nv; i++) {
      const int t = dof_tree[i], n = tree_size_[t], b = tree_begin_[t];
      for (int k = 0; k < rownnz[i]; k++) {
        const int j = colind[rowadr[i] + k];
        out[tree_adr_[t] + (j - b) * n + (i - b)] += sign * src->qDeriv[rowadr[i] + k];
      }
    }
  };
  if (!analytic_) {
    dense(d, qderiv_.data(), 1, true);
    CorrectActuatorVel(m, d);
  }

  // the blocked path's velocity columns M e_k from the dense per-tree mass matrix
  if (batch_) {
    for (int i = 0; i < nv; i++) {
      const int t = extractor_.dof_tree()[i], n = tree_size_[t], b = tree_begin_[t];
      double* Mt = mdense_.data() + tree_adr_[t];
      int adr = m->dof_Madr[i];
      Mt[(i - b) * n + (i - b)] = M0_[adr++];
      for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
        Mt[(i - b) * n + (j - b)] = Mt[(j - b) * n + (i - b)] = M0_[adr];
      }
    }
  }

  PreparePairs(cfd_ ? cfd_model_ : m);
  if (!PrepareIntegrator(m, rk4)) return false;
  if (analytic_) PrepareAnalytic(m);

  // inputs of the perturbation passes; their base at the nominal positions
  LoadState(m, d, d1_);
  if (implicit_ || sensors_) {
    mj_kinematics(m, d1_);
    mj_comPos(m, d1_);
    if (sensors_) mj_camlight(m, d1_);
    mj_tendon(m, d1_);
    MassMatrix(m, d1_);
    mj_transmission(m, d1_);
    d1_->nefc = 0;
  }
  if (implicit_) {
    // qDeriv aint of the polynomial velocity terms, and the RNE part of qDeriv at velocity aint
    SmoothVelocityProduct(m, d1_, qderiv_a0_.data());
    // (the other terms do not depend on the velocity: the difference at aint and 0)
    for (int side = 0; side < 2; side++) {
      for (int i = 0; i < nv; i++) d1_->qvel[i] = side == 0 ? aint_[i] : 0;
      mj_fwdVelocity(m, d1_);
      mj_fwdActuation(m, d1_);
      // the nominal clamp states on both sides: the actuator terms cancel (piecewise constant)
      mju_copy(d1_->actuator_force, act_force0_.data(), nu_);
      SmoothVelDerivative(m, d1_);
      dense(d1_, qderiv_rne_.data(), side == 0 ? 1 : -1, side == 0);
    }
    mju_copy(d1_->qvel, v0_.data(), nv);
    mj_fwdVelocity(m, d1_);
    mj_fwdActuation(m, d1_);
  }
  return true;
}

int Derivative::CountIncluded(const mjData* d) const {
  int n = 0;
  for (int c = 0; c < d->ncon; c++) n += d->contact[c].efc_address >= 0;
  return n;
}

//---------------------------------- (b) and (c) ---------------------------------------------------

void Derivative::AnchorTangent(const mjModel* m) {
  const Problem& p = *p_;
  const mjData* d = d0_;
  const int nv = nv_;
  bool position = false;
  for (int i = 0; i < nv && !position; i++) position = dq_[i] != 0;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    for (int r = 1; r < con.dim; r++) ddisp_[con.row + r] = 0;
    const double* w = shadow_->anchors.Anchored(c);
    if (!w || !position || con.dim < 3) continue;

    // angular velocity tangent of each body along dq (its ancestors' dofs)
    const double* x = shadow_->anchors.Points(c);
    double dw[2][3] = {{0, 0, 0}, {0, 0, 0}};
    for (int k = 0; k < nv; k++) {
      if (dq_[k] == 0) continue;
      for (int side = 0; side < 2; side++) {
        int b = con.body[side];
        while (b > 0 && b != m->dof_bodyid[k]) b = m->body_parentid[b];
        if (b > 0) {
          for (int i = 0; i < 3; i++) dw[side][i] += dq_[k] * d->cdof[6 * k + i];
        }
      }
    }
    for (int r = 1; r < 3; r++) {
      // J_t dq moves the material points at the contact point; the anchor's points lie off it
      // by o_i = x_i - pos: + dw_2 x o_2 - dw_1 x o_1; and the frame turns under disp
      const double* F = con.frame + 3 * r;
      const double* dF = dframe_.data() + 6 * c + 3 * (r - 1);
      double dd = p.J.Dot(con.row + r, dq_.data()) + mju_dot3(dF, w);
      for (int side = 0; side < 2; side++) {
        double o[3], t[3];
        for (int i = 0; i < 3; i++) o[i] = x[3 * side + i] - con.pos[i];
        mju_cross(t, dw[side], o);
        dd += (side == 1 ? 1 : -1) * mju_dot3(F, t);
      }
      ddisp_[con.row + r] = dd;
    }
  }
}

bool Derivative::SolveTangent(const mjModel* m) {
  const int nv = nv_;

  // (b) force tangent and the constraint force's tangent J' df + dJ' f
  for (int i = 0; i < nv; i++) dqc_[i] = 0;
  has_dup_ = false;
  if (has_rows_) {
    const Problem& p = *p_;
    ProblemTangent dir;
    dir.v_free = dvfree_.data();
    dir.M = has_dM_ ? dM_.data() : nullptr;
    dir.J = has_dJ_ ? dJ_.data() : nullptr;
    dir.pos = has_dpos_ ? dpos_.data() : nullptr;
    dir.vel = has_dvel_ ? dvel_.data() : nullptr;
    dir.R = has_dpos_ ? dR_.data() : nullptr;
    dir.aref = has_dvel_ || has_dpos_ ? daref_.data() : nullptr;
    if (solver_ && p.disp) {
      AnchorTangent(m);
      dir.disp = ddisp_.data();
    }
    if (solver_) {
      if (!solver_->ForceTangent(p, *sol_, dir, df_.data())) {
        fallback_ = ckFALLBACK_NO_TANGENT;
        return false;
      }
      // lcp's split impulse: the tangent of the position correction
      has_dup_ = sol_->position_correction && solver_->PositionTangent(p, dir, dup_.data());
    } else {
      soft_.ForceTangent(p, dir, df_.data(), nullptr);
    }
    p.J.MulT(df_.data(), dqc_.data());
    if (has_dJf_) {
      for (int i = 0; i < nv; i++) dqc_[i] += dJf_[i];
    } else if (has_dJ_) {
      const SparseRows& J = p.J;
      for (int i = 0; i < J.nrow; i++) {
        const double fi = sol_->force[i];
        if (fi == 0) continue;
        const int adr = J.rowadr[i];
        for (int k = 0; k < J.rownnz[i]; k++) dqc_[J.colind[adr + k]] += dJ_[adr + k] * fi;
      }
    }
  }

  // (c) M_int daint = dqfrc_smooth + dqfrc_constraint - dM_int aint
  for (int i = 0; i < nv; i++) dacc_[i] = dfs_[i] + dqc_[i] + dqderiv_a_[i];
  if (has_dM_) {
    for (int i = 0; i < nv; i++) {
      int adr = m->dof_Madr[i];
      dacc_[i] -= dM_[adr++] * aint_[i];
      for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
        dacc_[i] -= dM_[adr] * aint_[j];
        dacc_[j] -= dM_[adr] * aint_[i];
      }
    }
  }
  IntegratorSolve(dacc_.data());
  return true;
}

void Derivative::IntegrateMaps(const mjModel* m, const double* w, double h, double* maps) const {
  for (int j = 0; j < m->njnt; j++) {
    const int type = m->jnt_type[j];
    if (type != mjJNT_FREE && type != mjJNT_BALL) continue;
    const int v = m->jnt_dofadr[j] + (type == mjJNT_FREE ? 3 : 0);
    const double phi[3] = {h * w[v], h * w[v + 1], h * w[v + 2]};
    RotationOf(phi, maps + 18 * j);
    RightJacobian(phi, maps + 18 * j + 9);
  }
}

void Derivative::IntegrateTangent(const mjModel* m, const double* maps, double h, const double* dq,
                                  const double* dw, double* out) const {
  for (int j = 0; j < m->njnt; j++) {
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

//---------------------------------- directions ----------------------------------------------------

template <typename Fn>
bool Derivative::Directions(const mjModel* m, bool state, bool ctrl, Fn&& fn) {
  // "mujoco" with constraint rows (batch_): one blocked solve of MuJoCo's Hessian per kBlock
  // directions
  int nslot = 0;
  for (int kind = kCtrl; kind <= kPos; kind++) {
    if (kind == kCtrl ? !ctrl : !state) continue;
    const int n = kind == kCtrl ? nu_ : kind == kAct ? na_ : nv_;
    for (int index = 0; index < n; index++) {
      const int col = kind == kCtrl  ? 2 * nv_ + na_ + index
                      : kind == kAct ? 2 * nv_ + index
                      : kind == kVel ? nv_ + index
                                     : index;
      UnitTangent(m, kind, index);
      if (batch_) {
        QueueColumn(m, nslot, kind, index, col);
        if (++nslot == SoftTangent::kBlock) {
          FlushColumns(m, nslot, fn);
          nslot = 0;
        }
        continue;
      }
      if (!SolveTangent(m)) return false;
      fn(kind, index, col);
    }
  }
  if (nslot) FlushColumns(m, nslot, fn);
  RestoreActuation();
  return true;
}

void Derivative::QueueColumn(const mjModel* m, int slot, int kind, int index, int col) {
  const Problem& p = *p_;
  const int nv = nv_, nb = SoftTangent::kBlock;
  const double h = p.h;
  double* r = tmp_.data();

  // rhs = M dv + h (dqfrc_smooth - dM a + dJ' f) + J_E' (Phi t - h f rho)
  mju_zero(r, nv);
  if (kind == kVel) {
    const int t = extractor_.dof_tree()[index], n = tree_size_[t], b = tree_begin_[t];
    mju_copy(r + b, mdense_.data() + tree_adr_[t] + (index - b) * n, n);
  }
  for (int i = 0; i < nv; i++) r[i] += h * dfs_[i];
  double* pc = blk_p_.data() + static_cast<size_t>(slot) * nv;
  mju_copy(pc, dqderiv_a_.data(), nv);
  if (has_dM_) {
    // with a = qacc of the solver: r -= h dM a, and P = dM (a - aint) + h dqDeriv aint (a and
    // aint differ only under Euler's implicit damping and the implicit integrator)
    const double* a = d0_->qacc;
    const bool p_term = damped_ || implicit_;
    for (int i = 0; i < nv; i++) {
      int adr = m->dof_Madr[i];
      const double mii = dM_[adr++];
      r[i] -= h * mii * a[i];
      if (p_term) pc[i] += mii * (a[i] - aint_[i]);
      for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
        r[i] -= h * dM_[adr] * a[j];
        r[j] -= h * dM_[adr] * a[i];
        if (p_term) {
          pc[i] += dM_[adr] * (a[j] - aint_[j]);
          pc[j] += dM_[adr] * (a[i] - aint_[i]);
        }
      }
    }
  }
  ProblemTangent dir;
  if (has_dJf_) {
    for (int i = 0; i < nv; i++) r[i] += h * dJf_[i];  // (dJ itself: not written, dJv_ has dJ v+)
  } else if (has_dJ_) {
    const SparseRows& J = p.J;
    for (int i = 0; i < J.nrow; i++) {
      const double fi = h * sol_->force[i];
      if (fi == 0) continue;
      const int adr = J.rowadr[i];
      for (int k = 0; k < J.rownnz[i]; k++) r[J.colind[adr + k]] += dJ_[adr + k] * fi;
    }
    dir.J = dJ_.data();
  }
  dir.vel = has_dvel_ ? dvel_.data() : nullptr;
  dir.R = has_dpos_ ? dR_.data() : nullptr;
  dir.aref = has_dvel_ || has_dpos_ ? daref_.data() : nullptr;
  if (has_dJ_ || has_dvel_ || has_dpos_) soft_.RowRhs(p, dir, r, has_dJf_ ? dJv_.data() : nullptr);
  for (int i = 0; i < nv; i++) blk_r_[static_cast<size_t>(i) * nb + slot] = r[i];

  // what the columns need after the solve
  blk_kind_[slot] = kind;
  blk_index_[slot] = index;
  blk_col_[slot] = col;
  mju_copy(blk_actdot_.data() + static_cast<size_t>(slot) * na_, dactdot_.data(), na_);
}

template <typename Fn>
void Derivative::FlushColumns(const mjModel* m, int nslot, Fn&& fn) {
  const Problem& p = *p_;
  const int nv = nv_;
  const double h = p.h;

  // a partial block: its columns (rounded up to the solves' chunks of 8) packed to that stride
  const int nb = std::min(SoftTangent::kBlock, (nslot + 7) / 8 * 8);
  if (nb < SoftTangent::kBlock) {
    for (int i = 1; i < nv; i++) {
      for (int c = 0; c < nb; c++) {
        blk_r_[static_cast<size_t>(i) * nb + c] =
            blk_r_[static_cast<size_t>(i) * SoftTangent::kBlock + c];
      }
    }
  }
  for (int i = 0; i < nv; i++) {
    for (int c = nslot; c < nb; c++) blk_r_[static_cast<size_t>(i) * nb + c] = 0;
  }
  soft_.SolveBlock(p, blk_r_.data(), nb);

  // M_int dacc = M x / h + P with x = dv+ - dv: dacc = x / h when M_int = M (P = 0), and
  // x / h + M_E^-1 (P - D x) for Euler's M_E = M + h D, all columns in one sweep
  double* Y = blk_y_.data();
  if (damped_) {
    for (int slot = 0; slot < nslot; slot++) {
      const int kind = blk_kind_[slot], index = blk_index_[slot];
      const double* pc = blk_p_.data() + static_cast<size_t>(slot) * nv;
      for (int i = 0; i < nv; i++) {
        const double x =
            blk_r_[static_cast<size_t>(i) * nb + slot] - (kind == kVel && index == i ? 1 : 0);
        Y[static_cast<size_t>(i) * nb + slot] = pc[i] - m->dof_damping[i] * x;
      }
    }
    for (int i = 0; i < nv; i++) {
      for (int c = nslot; c < nb; c++) Y[static_cast<size_t>(i) * nb + c] = 0;
    }
    mint_.SolveBlock(Y, nb);
  }
  for (int slot = 0; slot < nslot; slot++) {
    const int kind = blk_kind_[slot], index = blk_index_[slot];

    // the unit direction again
    mju_zero(dq_.data(), nv);
    mju_zero(dv_.data(), nv);
    mju_zero(dact_.data(), na_);
    mju_zero(du_.data(), nu_);
    (kind == kCtrl ? du_ : kind == kAct ? dact_ : kind == kVel ? dv_ : dq_)[index] = 1;
    mju_copy(dactdot_.data(), blk_actdot_.data() + static_cast<size_t>(slot) * na_, na_);

    double* x = tmp2_.data();
    const double* pc = blk_p_.data() + static_cast<size_t>(slot) * nv;
    for (int i = 0; i < nv; i++) x[i] = blk_r_[static_cast<size_t>(i) * nb + slot] - dv_[i];
    if (implicit_) {
      p.mass.Mul(x, dacc_.data());
      for (int i = 0; i < nv; i++) dacc_[i] = dacc_[i] / h + pc[i];
      IntegratorSolve(dacc_.data());
    } else {
      for (int i = 0; i < nv; i++) {
        dacc_[i] = x[i] / h + (damped_ ? Y[static_cast<size_t>(i) * nb + slot] : 0);
      }
    }
    fn(kind, index, blk_col_[slot]);
  }
}

void Derivative::ActNext(const mjModel* m, const double* act, const double* rate,
                         const double* dact, const double* drate, double h, double* out) const {
  const int na = na_, nu = nu_;
  for (int i = 0; i < na; i++) {
    const int iu = i + nu - na;
    const double next = act[i] + h * rate[i];
    bool clamped = false;
    if (m->actuator_actlimited[iu]) {
      const double* range = m->actuator_actrange + 2 * iu;
      clamped = next < range[0] || next > range[1];
    }
    out[i] = clamped ? 0 : dact[i] + h * drate[i];
  }
}

//---------------------------------- single-stage integrators --------------------------------------

bool Derivative::SingleStage(const mjModel* m) {
  const int nv = nv_;
  const double h = m->opt.timestep;
  sensors_ = sink_.C || sink_.D || (sink_.ds && (sink_.gx || sink_.gu));
  if (!PrepareStage(m, false)) return false;

  // v+ of the step (the velocity the positions integrate), and lcp's position correction u
  // after it (split impulse: q+ = (q (+) h v+) (+) h u)
  double* vplus = vplus_.data();
  for (int i = 0; i < nv; i++) vplus[i] = v0_[i] + h * aint_[i];
  const double* up = has_rows_ && solver_ ? sol_->position_correction : nullptr;
  double* maps = maps_.data();
  IntegrateMaps(m, vplus, h, maps);
  if (up) IntegrateMaps(m, up, h, maps_pos_.data());
  ElasticPrepare(m);
  ElasticSelect(vplus);
  double* out = out_col_.data();
  double* ds = sens_col_.data();
  const bool ok =
      Directions(m, sink_.WantsState(), sink_.WantsCtrl(), [&](int kind, int index, int col) {
        // next state: dv+ = dv + h daint, dq+ through the position update, dact+
        for (int i = 0; i < nv; i++) out[nv + i] = dv_[i] + h * dacc_[i];
        if (up) {
          double* mid = wpos_.data();
          IntegrateTangent(m, maps, h, dq_.data(), out + nv, mid);
          if (!has_dup_) mju_zero(dup_.data(), nv);
          IntegrateTangent(m, maps_pos_.data(), h, mid, dup_.data(), out);
        } else {
          IntegrateTangent(m, maps, h, dq_.data(), out + nv, out);
        }
        ActNext(m, act0_.data(), actdot0_.data(), dact_.data(), dactdot_.data(), h, out + 2 * nv);
        EmitState(col, out);
        if (sensors_) {
          SensorTangent(m, kind, ds);
          EmitSensor(col, ds);
        }
      });
  if (ok) ElasticFinish(h);
  return ok;
}

void Derivative::EmitState(int col, const double* out) {
  const int ndx = 2 * nv_ + na_, nu = nu_;
  if (elastic_n_) ElasticColumn(col, out);
  if (col < ndx) {
    if (sink_.A) {
      for (int i = 0; i < ndx; i++) sink_.A[i * ndx + col] = out[i];
    }
    if (sink_.gx && sink_.dx) sink_.gx[col] += mju_dot(out, sink_.dx, ndx);
  } else {
    if (sink_.B) {
      for (int i = 0; i < ndx; i++) sink_.B[i * nu + (col - ndx)] = out[i];
    }
    if (sink_.gu && sink_.dx) sink_.gu[col - ndx] += mju_dot(out, sink_.dx, ndx);
  }
}

void Derivative::EmitSensor(int col, const double* ds) {
  const int ndx = 2 * nv_ + na_, nu = nu_, ns = ns_;
  if (col < ndx) {
    if (sink_.C) {
      for (int i = 0; i < ns; i++) sink_.C[i * ndx + col] = ds[i];
    }
    if (sink_.gx && sink_.ds) sink_.gx[col] += mju_dot(ds, sink_.ds, ns);
  } else {
    if (sink_.D) {
      for (int i = 0; i < ns; i++) sink_.D[i * nu + (col - ndx)] = ds[i];
    }
    if (sink_.gu && sink_.ds) sink_.gu[col - ndx] += mju_dot(ds, sink_.ds, ns);
  }
}

//---------------------------------- RK4 -----------------------------------------------------------

bool Derivative::RungeKutta(const mjModel* m) {
  const int nq = nq_, nv = nv_, na = na_, nu = nu_, ndx = 2 * nv + na, ndir = ndx + nu;
  const int nva = nv + na;
  const double h = m->opt.timestep, time = d0_->time;
  const double kC[4] = {0, 0.5, 0.5, 1};
  double* G = G_.data();
  double* ds = sens_col_.data();
  double* w = vplus_.data();

  // directions to chain: state columns, control columns
  const bool state_out = sink_.A || (sink_.gx && sink_.dx);
  const bool ctrl_out = sink_.B || (sink_.gu && sink_.dx);
  const bool sensor_out = sink_.C || sink_.D || (sink_.ds && (sink_.gx || sink_.gu));
  const int first = state_out ? 0 : ndx, last = ctrl_out ? ndir : ndx;
  for (int k = first; k < last; k++) {
    double* K = K_.data() + static_cast<size_t>(k) * ndx;
    double* S = S_.data() + static_cast<size_t>(k) * ndx;
    for (int i = 0; i < ndx; i++) K[i] = k < ndx && i == k ? 1 : 0;
    for (int i = 0; i < ndx; i++) S[i] = 0;
  }

  // nominal stages: X_i = X_0 (+) h a_i K_{i-1}; the first also gives the sensor Jacobians
  double* X0 = rkX_.data();
  mju_copy(X0, d0_->qpos, nq);
  mju_copy(X0 + nq, d0_->qvel, nv);
  mju_copy(X0 + nq + nv, d0_->act, na);
  for (int stage = 0; stage < 4; stage++) {
    double* Fi = rkF_.data() + stage * nva;
    if (stage > 0) {
      const double a = kRK4A[stage - 1];
      const double* Fp = rkF_.data() + (stage - 1) * nva;
      const double* vp = rkX_.data() + (stage - 1) * (nq + nv + na) + nq;
      double* Xi = rkX_.data() + stage * (nq + nv + na);
      for (int i = 0; i < nv; i++) w[i] = a * vp[i];
      mju_copy(Xi, X0, nq);
      mj_integratePos(m, Xi, w, h);
      for (int i = 0; i < nv; i++) Xi[nq + i] = X0[nq + i] + h * a * Fp[i];
      for (int i = 0; i < na; i++) Xi[nq + nv + i] = X0[nq + nv + i] + h * a * Fp[nv + i];
      mju_copy(d0_->qpos, Xi, nq);
      mju_copy(d0_->qvel, Xi + nq, nv);
      mju_copy(d0_->act, Xi + nq + nv, na);
    }
    d0_->time = time + kC[stage] * h;
    sensors_ = stage == 0 && sensor_out;
    if (!PrepareStage(m, true)) return false;
    if (stage == 0 && has_rows_ && solver_ && sol_->position_correction) {
      fallback_ = ckFALLBACK_RK4_POSITION;
      return false;
    }
    if (stage == 0) ElasticPrepare(m);
    mju_copy(Fi, aint_.data(), nv);
    mju_copy(Fi + nv, actdot0_.data(), na);

    // stage Jacobian G (nv+na x ndir, column-major) and the sensor Jacobians
    const bool ok = Directions(m, true, true, [&](int kind, int index, int col) {
      double* g = G + static_cast<size_t>(col) * nva;
      mju_copy(g, dacc_.data(), nv);
      mju_copy(g + nv, dactdot_.data(), na);
      if (sensors_) {
        SensorTangent(m, kind, ds);
        EmitSensor(col, ds);
      }
    });
    if (!ok) return false;

    // each direction: dF_i = G [dX_i; du], S += b_i (dv_i, dF_i), dX_{i+1}
    const double* vi = rkX_.data() + stage * (nq + nv + na) + nq;
    if (stage < 3) {
      for (int i = 0; i < nv; i++) w[i] = kRK4A[stage] * vi[i];
      IntegrateMaps(m, w, h, maps_.data());
    }
    for (int k = first; k < last; k++) {
      double* K = K_.data() + static_cast<size_t>(k) * ndx;
      double* S = S_.data() + static_cast<size_t>(k) * ndx;
      double* dF = tmp_.data();
      double* dFact = dact_.data();
      for (int i = 0; i < nv; i++) {
        double s = 0;
        for (int j = 0; j < ndx; j++) s += G[static_cast<size_t>(j) * nva + i] * K[j];
        if (k >= ndx) s += G[static_cast<size_t>(k) * nva + i];
        dF[i] = s;
      }
      for (int i = 0; i < na; i++) {
        double s = 0;
        for (int j = 0; j < ndx; j++) s += G[static_cast<size_t>(j) * nva + nv + i] * K[j];
        if (k >= ndx) s += G[static_cast<size_t>(k) * nva + nv + i];
        dFact[i] = s;
      }
      const double b = kRK4B[stage];
      for (int i = 0; i < nv; i++) {
        S[i] += b * K[nv + i];   // sum b_j dv_j
        S[nv + i] += b * dF[i];  // sum b_j dF_j (velocity rates)
      }
      for (int i = 0; i < na; i++) S[2 * nv + i] += b * dFact[i];
      if (stage < 3) {
        // dX_{i+1} = d(X_0 (+) h a (v_i, F_i)) from the unit dX_0
        const double a = kRK4A[stage];
        double* dw = tmp2_.data();
        for (int i = 0; i < nv; i++) dw[i] = a * K[nv + i];
        double* e = dq_.data();
        mju_zero(e, nv);
        if (k < nv) e[k] = 1;
        IntegrateTangent(m, maps_.data(), h, e, dw, K);
        for (int i = 0; i < nv; i++) K[nv + i] = (k == nv + i ? 1 : 0) + h * a * dF[i];
        for (int i = 0; i < na; i++) K[2 * nv + i] = (k == 2 * nv + i ? 1 : 0) + h * a * dFact[i];
      }
    }
  }

  // next state: v+ = v0 + h sum b F, q+ = q0 (+) h sum b v, act+ = act0 + h sum b F_act
  double* wsum = vplus_.data();
  double* rate = tmp2_.data();
  mju_zero(wsum, nv);
  mju_zero(rate, nv + na);
  for (int stage = 0; stage < 4; stage++) {
    const double* vi = rkX_.data() + stage * (nq + nv + na) + nq;
    const double* Fi = rkF_.data() + stage * nva;
    for (int i = 0; i < nv; i++) wsum[i] += kRK4B[stage] * vi[i];
    for (int i = 0; i < nva; i++) rate[i] += kRK4B[stage] * Fi[i];
  }
  double* out = out_col_.data();
  IntegrateMaps(m, wsum, h, maps_.data());
  double* vnext = dvfree_.data();
  for (int i = 0; i < nv; i++) vnext[i] = X0[nq + i] + h * rate[i];
  ElasticSelect(vnext);
  for (int k = first; k < last; k++) {
    const double* S = S_.data() + static_cast<size_t>(k) * ndx;
    double* e = dq_.data();
    mju_zero(e, nv);
    if (k < nv) e[k] = 1;
    IntegrateTangent(m, maps_.data(), h, e, S, out);
    for (int i = 0; i < nv; i++) out[nv + i] = (k == nv + i ? 1 : 0) + h * S[nv + i];
    double* ea = dact_.data();
    for (int i = 0; i < na; i++) ea[i] = k == 2 * nv + i ? 1 : 0;
    ActNext(m, X0 + nq + nv, rate + nv, ea, S + 2 * nv, h, out + 2 * nv);
    EmitState(k, out);
  }
  ElasticFinish(h);
  return true;
}

int Derivative::Run(const mjModel* m, const mjData* d) {
  fallback_ = ckFALLBACK_NONE;
  bool ok = true;
  if (m->opt.noslip_iterations > 0) {
    fallback_ = ckFALLBACK_NOSLIP;
    ok = false;
  }
  // the implicit integrators' M - h qDeriv holds fluid drag, whose change with q and v the
  // tangents leave out (Skydio X2 under implicit: A 1.3e-3 off)
  if (ok && IsImplicit(m) && (m->opt.density > 0 || m->opt.viscosity > 0)) {
    fallback_ = ckFALLBACK_FLUID_IMPLICIT;
    ok = false;
  }
  if (ok && JdotvInReference(m, d)) {
    fallback_ = ckFALLBACK_JDOTV;
    ok = false;
  }
  if (ok) {
    LoadState(m, d, d0_);
    ok = m->opt.integrator == mjINT_RK4 ? RungeKutta(m) : SingleStage(m);
  }
  return ok ? 0 : 1;
}

int Derivative::Jacobian(const mjModel* m, const mjData* d, mjtNum* A, mjtNum* B, mjtNum* C,
                         mjtNum* D) {
  if (!A && !B && !C && !D) return 0;
  sink_ = Sink();
  sink_.A = A;
  sink_.B = B;
  sink_.C = C;
  sink_.D = D;
  if (Run(m, d) == 0) return 0;
  FiniteDiff(m, d, kNudge, 0, A, B, C, D);
  return 1;
}

int Derivative::Vjp(const mjModel* m, const mjData* d, const mjtNum* dx, const mjtNum* ds,
                    mjtNum* gx, mjtNum* gu) {
  const int ndx = 2 * nv_ + na_;
  if (gx) mju_zero(gx, ndx);
  if (gu) mju_zero(gu, nu_);
  if ((!gx && !gu) || (!dx && !ds)) return 0;
  sink_ = Sink();
  sink_.dx = dx;
  sink_.ds = ds;
  sink_.gx = gx;
  sink_.gu = gu;
  if (Run(m, d) != 0) {
    // fallback: forward differences, one column at a time through the same sink
    if (gx) mju_zero(gx, ndx);
    if (gu) mju_zero(gu, nu_);
    FiniteDiffSink(m, d, kNudge, 0);
    return 1;
  }
  complementarity_applied_ = false;
  if (settings_.deriv.complementarity_aware && dx && m->opt.integrator != mjINT_RK4) {
    ComplementarityAware(m, d);
  }
  return 0;
}

void Derivative::ComplementarityAware(const mjModel* m, const mjData* d) {
  // Nimble section IV-D: reclassify each contact by the sign of the loss's sensitivity to its
  // separation, g_c = J_c M^-1 dL/dv+ (g < 0: the loss wants the contact to open), and keep the
  // classification whose gradient is larger, |dL/dq|^2 + |dL/du|^2 / h
  if (!has_rows_ || !solver_) return;
  const Problem& p = *p_;
  const int nv = nv_, nu = nu_, ndx = 2 * nv + na_;
  const double h = m->opt.timestep;

  // dL/dv+ from the next state's adjoint: dv+ enters the velocities directly and the positions
  // through the position update (transpose of IntegrateTangent's velocity part)
  double* lam = tmp2_.data();
  mju_copy(lam, sink_.dx + nv, nv);
  for (int j = 0; j < m->njnt; j++) {
    int v = m->jnt_dofadr[j];
    const int type = m->jnt_type[j];
    if (type == mjJNT_FREE) {
      for (int i = 0; i < 3; i++) lam[v + i] += h * sink_.dx[v + i];
      v += 3;
    }
    if (type == mjJNT_FREE || type == mjJNT_BALL) {
      const double* Jr = maps_.data() + 18 * j + 9;
      for (int i = 0; i < 3; i++) {
        for (int r = 0; r < 3; r++) lam[v + i] += h * Jr[3 * r + i] * sink_.dx[v + r];
      }
    } else {
      lam[v] += h * sink_.dx[v];
    }
  }
  p.mass.Solve(lam);
  for (int c = 0; c < p.ncon; c++) modes_[c] = p.J.Dot(p.con[c].row, lam) < 0 ? 0 : 1;
  if (!solver_->SetTangentModes(p, modes_.data())) return;
  complementarity_applied_ = true;

  // the gradient with that classification
  double* first = gsave_.data();
  auto score = [&](const double* gx, const double* gu) {
    double s = 0;
    for (int i = 0; i < nv && gx; i++) s += gx[i] * gx[i];
    for (int i = 0; i < nu && gu; i++) s += gu[i] * gu[i] / h;
    return s;
  };
  if (sink_.gx) mju_copy(first, sink_.gx, ndx);
  if (sink_.gu) mju_copy(first + ndx, sink_.gu, nu);
  const double s1 = score(sink_.gx, sink_.gu);
  if (sink_.gx) mju_zero(sink_.gx, ndx);
  if (sink_.gu) mju_zero(sink_.gu, nu);
  apply_modes_ = true;
  const int ok = Run(m, d);
  apply_modes_ = false;
  if (solver_) solver_->SetTangentModes(*p_, nullptr);
  if (ok != 0 || s1 >= score(sink_.gx, sink_.gu)) {
    if (sink_.gx) mju_copy(sink_.gx, first, ndx);
    if (sink_.gu) mju_copy(sink_.gu, first + ndx, nu);
  }
}

}  // namespace contactkit

//---------------------------------- C API ---------------------------------------------------------

namespace contactkit {
namespace {

// the first of n values that MuJoCo's checks would call bad (NaN, inf, or beyond mjMAXVAL), or -1
int FirstBad(const mjtNum* x, int n) {
  for (int i = 0; i < n; i++) {
    if (!(std::fabs(x[i]) <= mjMAXVAL)) return i;
  }
  return -1;
}

// the checks of every derivative entry point: 0, or -1 (bad arguments, another model, no
// derivative workspace) or -2 (a state MuJoCo would reset) with ck_lastError saying why.
// A state MuJoCo would reset is refused here, and StepSkip never reuses stages a reset cleared,
// so no path hands MuJoCo a state on which it reaches mju_error. We chose this over catching
// mju_error with a temporary handler and longjmp: mju_user_error is one process-wide pointer
// (not per thread, and the caller's own handler), and a longjmp across our C++ frames would skip
// their destructors, which is undefined behaviour.
int CheckTransition(ckHandle* ck, const mjModel* m, const mjData* d, const char* fn) {
  if (!CheckEntry(ck, m, d, fn, false)) return -1;
  if (!ck->deriv) {
    SetLastError(ck, fn,
                 "the handle has no derivative workspace (setting 'derivatives' is 0; turn it on "
                 "with ck_setSettings)");
    return -1;
  }
  const struct {
    const char* name;
    const mjtNum* x;
    int n;
  } state[] = {{"qpos", d->qpos, static_cast<int>(m->nq)},
               {"qvel", d->qvel, static_cast<int>(m->nv)},
               {"act", d->act, static_cast<int>(m->na)},
               {"ctrl", d->ctrl, static_cast<int>(m->nu)},
               {"qacc_warmstart", d->qacc_warmstart, static_cast<int>(m->nv)},
               {"qfrc_applied", d->qfrc_applied, static_cast<int>(m->nv)},
               {"xfrc_applied", d->xfrc_applied, 6 * static_cast<int>(m->nbody)},
               {"mocap_pos", d->mocap_pos, 3 * static_cast<int>(m->nmocap)},
               {"mocap_quat", d->mocap_quat, 4 * static_cast<int>(m->nmocap)}};
  for (const auto& s : state) {
    const int i = FirstBad(s.x, s.n);
    if (i >= 0) {
      SetLastError(ck, fn,
                   "d->%s[%d] = %g is not finite or beyond 1e10; MuJoCo would reset such a "
                   "state, which has no Jacobian",
                   s.name, i, static_cast<double>(s.x[i]));
      return -2;
    }
  }
  ck->error[0] = 0;
  return 0;
}

// the result of an evaluation: -2 if MuJoCo reset a scratch mjData in it (the state leaves
// MuJoCo's range within the step) or an output is not finite; otherwise ret (1: ck_lastError
// says why finite differences were used)
int Finish(ckHandle* ck, const char* fn, int ret, int resets,
           std::initializer_list<std::pair<const mjtNum*, size_t>> outputs) {
  if (ck->deriv->ScratchResets() != resets) {
    SetLastError(ck, fn,
                 "MuJoCo reset the state within the step (NaN, inf or beyond 1e10); no Jacobian");
    return -2;
  }
  for (const auto& o : outputs) {
    for (size_t i = 0; o.first && i < o.second; i++) {
      if (!std::isfinite(o.first[i])) {
        SetLastError(ck, fn,
                     "the result is not finite (entry %zu); the step from this state is not", i);
        return -2;
      }
    }
  }
  if (ret == 1) {
    ck->fallback = ck->deriv->fallback();
    SetLastError(ck, fn, "finite differences: %s", ck_fallbackText(ck->fallback));
  }
  return ret;
}

}  // namespace
}  // namespace contactkit

extern "C" {

const char* ck_fallbackText(int reason) {
  static const char* const kText[ckNFALLBACK] = {
      "",
      "more constraint rows than the handle's capacity",
      "the Hessian of MuJoCo's solver is not positive definite",
      "M - h qDeriv is singular",
      "the solver has no analytic force tangent",
      "lcp's position correction (split impulse) is not differentiated under RK4",
      "noslip iterations are not differentiated",
      "fluid forces under the implicit integrators are not differentiated",
      "MuJoCo 3.7+ subtracts Jdot v from connect and weld rows' reference, which the analytic "
      "tangents leave out",
  };
  return reason >= 0 && reason < ckNFALLBACK ? kText[reason] : nullptr;
}

int ck_transitionJac(ckHandle* ck, const mjModel* m, const mjData* d, mjtNum* A, mjtNum* B,
                     mjtNum* C, mjtNum* D) {
  using namespace contactkit;
  InUse guard(ck, "ck_transitionJac");
  if (!guard.ok()) return -1;
  ck->fallback = ckFALLBACK_NONE;
  const int check = CheckTransition(ck, m, d, "ck_transitionJac");
  if (check) return check;
  const size_t ndx = 2 * m->nv + m->na, nu = m->nu, ns = m->nsensordata;
  const int resets = ck->deriv->ScratchResets();
  const int ret = ck->deriv->Jacobian(m, d, A, B, C, D);
  return Finish(ck, "ck_transitionJac", ret, resets,
                {{A, ndx * ndx}, {B, ndx * nu}, {C, ns * ndx}, {D, ns * nu}});
}

int ck_transitionVJP(ckHandle* ck, const mjModel* m, const mjData* d, const mjtNum* dx,
                     const mjtNum* ds, mjtNum* gx, mjtNum* gu) {
  using namespace contactkit;
  InUse guard(ck, "ck_transitionVJP");
  if (!guard.ok()) return -1;
  ck->fallback = ckFALLBACK_NONE;
  const int check = CheckTransition(ck, m, d, "ck_transitionVJP");
  if (check) return check;
  const size_t ndx = 2 * m->nv + m->na, nu = m->nu;
  const int resets = ck->deriv->ScratchResets();
  const int ret = ck->deriv->Vjp(m, d, dx, ds, gx, gu);
  return Finish(ck, "ck_transitionVJP", ret, resets, {{gx, ndx}, {gu, nu}});
}

int ck_transitionFD(ckHandle* ck, const mjModel* m, const mjData* d, mjtNum eps, int centered,
                    mjtNum* A, mjtNum* B, mjtNum* C, mjtNum* D) {
  using namespace contactkit;
  InUse guard(ck, "ck_transitionFD");
  if (!guard.ok()) return -1;
  const int check = CheckTransition(ck, m, d, "ck_transitionFD");
  if (check) return check;
  if (!(eps > 0) || !std::isfinite(eps)) {
    SetLastError(ck, "ck_transitionFD", "eps = %g; allowed: a finite number > 0",
                 static_cast<double>(eps));
    return -1;
  }
  const size_t ndx = 2 * m->nv + m->na, nu = m->nu, ns = m->nsensordata;
  const int resets = ck->deriv->ScratchResets();
  ck->deriv->FiniteDiff(m, d, eps, centered, A, B, C, D);
  return Finish(ck, "ck_transitionFD", 0, resets,
                {{A, ndx * ndx}, {B, ndx * nu}, {C, ns * ndx}, {D, ns * nu}});
}

}  // extern "C"
