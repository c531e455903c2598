// Copyright 2026 The contactkit developers.
//
// The nominal stage: a forward pass on the shadow handle, the solved problem, what the tangents
// reuse; and the solver's force tangent along one direction.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "plugin/deriv/derivative.h"
#include "plugin/step/compat.h"
#include "plugin/step/handle.h"

namespace contactkit {
namespace {

// mju_cross, mju_dot3 and mju_addTo3 inline (the same operations in their order; MuJoCo's are
// library calls, per contact and direction in AnchorTangent)
inline void Cross3(double* res, const double* a, const double* b) {
  const double t[3] = {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                       a[0] * b[1] - a[1] * b[0]};
  res[0] = t[0];
  res[1] = t[1];
  res[2] = t[2];
}

inline double Dot3(const double* a, const double* b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

// J.Dot(i, x) of an x whose only nonzero is x[k] = xk: row i's entry in column k (its columns
// ascend) times xk, the other products being zeros
inline double DotOne(const SparseRows& J, int i, int k, double xk) {
  const int* c = J.colind + J.rowadr[i];
  const int* e = c + J.rownnz[i];
  const int* f = std::lower_bound(c, e, k);
  return f != e && *f == k ? J.val[f - J.colind] * xk : 0.0;
}

// the extraction folds h D into M under Euler's implicit damping and the implicit integrators
// (Extractor::Dynamics, which factors it)
bool ExtractFoldsDamping(const mjModel* m) {
  return (m->opt.integrator == mjINT_EULER && EulerDampingImplicit(m)) || IsImplicit(m);
}

}  // namespace

bool Derivative::PrepareMujocoProblem(const mjModel* m) {
  mjData* d = stage_data_;
  Problem& p = storage_.problem();
  Solution& sol = storage_.solution();
  if (extractor_.Extract(m, d, &p) > 0) {
    fallback_ = ckFALLBACK_ROWS;
    return false;
  }
  if (smooth_.cfd()) smooth_.CfdAdjustProblem(m, &p);

  // MuJoCo's solver works with M itself. Extract factored d's M, with h D folded in under
  // Euler's implicit damping and the implicit integrators: that factor is the integrator's
  // matrix where it is the same (IntegratorTangent::Prepare copies it, Euler and RK4), and M's
  // factor without damping (the same sums as a second factor of M: not repeated)
  const bool adopt = IntegratorTangent::adopt_factors_;
  const bool folded = ExtractFoldsDamping(m);
  if (adopt) integrator_.AdoptFactor(p.mass, folded);
  if (folded || !adopt) {
    for (int i = 0; i < nM_; i++) p.mass.M[i] = nominal_.mass[i];  // d's inertia (PrepareStage)
    p.mass.Factor();
  }
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
    nominal_.contact_mu[c] = d->contact[con.mj_index].mu;
  }

  // MuJoCo's rows; their states at the solution (MuJoCo 3.x's island solver leaves efc_state
  // unset, so the states come from MuJoCo's own classification of jar = J qacc - aref)
#if CK_MJ3
  mj_mulJacVec(m, d, nominal_.efc_jar, d->qacc);
  for (int i = 0; i < d->nefc; i++) nominal_.efc_jar[i] -= d->efc_aref[i];
  mj_constraintUpdate(m, d, nominal_.efc_jar, nullptr, 0);
#endif
  for (int i = 0; i < d->nefc; i++) nominal_.efc_state[i] = d->efc_state[i];
  SoftRows rows;
  rows.elliptic = elliptic;
  rows.nrow = d->nefc;
  rows.state = nominal_.efc_state;
  rows.force = d->efc_force;
  rows.R = d->efc_R;
  rows.mu = nominal_.contact_mu;
  SharedRowGroups(p, nominal_.row_group);
  rows.group = nominal_.row_group;
  soft_.SetModes(apply_modes_ ? out_.contact_modes : nullptr);  // complementarity-aware run
  if (!soft_.Prepare(p, rows, sol.v_next)) {
    fallback_ = ckFALLBACK_SOFT_HESSIAN;
    return false;
  }
  if (apply_modes_) keep_modes_ = soft_.modes_changed();
  stage_.problem = &p;
  stage_.solution = &sol;
  stage_.solver = nullptr;
  return true;
}

void Derivative::ResetShadow() {
  // the solver starts where the owner's would (its warm start: the step ck_step takes), cold
  // without an owner
  if (shadow_->solver &&
      !(owner_ && owner_->solver && shadow_->solver->WarmStartFrom(*owner_->solver)))
    shadow_->solver->Reset();
  if (controller_) shadow_->adaptive.SetController(*controller_);
  if (owner_) {
    if (!controller_) shadow_->adaptive.SetController(owner_->adaptive.controller());
    shadow_->anchors.CopyFrom(owner_->anchors);
  } else {
    shadow_->anchors.Clear();
  }
}

bool Derivative::PrepareStage(const mjModel* m, bool rk4) {
  mjData* d = stage_data_;
  const int nv = nv_;

  // nominal forward with the derivative's own handle (the solver from the caller's warm start:
  // the step ck_step would take; the caller's anchors), on the contacts-from-distance problem if
  // that is on
  ResetShadow();
  smooth_.BeginStage();
  integrator_.ClearAdopted();  // (PrepareMujocoProblem may adopt: for this stage only)
  if (smooth_.cfd()) {
    smooth_.CfdForward(m);
  } else {
    ForwardSkip(shadow_, m, d, mjSTAGE_NONE, !stage_.sensors);
  }

  // state and smooth data
  mju_copy(nominal_.qpos, d->qpos, nq_);
  mju_copy(nominal_.qvel, d->qvel, nv);
  mju_copy(nominal_.act, d->act, na_);
  mju_copy(nominal_.ctrl, d->ctrl, nu_);
  CopyLegacyM(m, d, nominal_.mass);
  mju_copy(nominal_.qfrc_smooth, d->qfrc_smooth, nv);
  mju_copy(nominal_.act_dot, d->act_dot, na_);
  mju_copy(nominal_.qfrc_constraint, d->qfrc_constraint, nv);
  mju_copy(nominal_.actuator_force, d->actuator_force, nu_);
  mju_copy(nominal_.qfrc_actuator, d->qfrc_actuator, nv);

  // the solved problem (its solver none until the rows say: the last stage's may have been
  // replaced by ck_setSettings since)
  stage_.solver = nullptr;
  stage_.has_rows = d->nefc > 0;
  if (stage_.has_rows) {
    if (!shadow_->solver) {
      if (!PrepareMujocoProblem(m)) return false;
    } else {
      stage_.problem = &shadow_->storage.problem();
      stage_.solution = &shadow_->storage.solution();
      stage_.solver = shadow_->solver.get();
      if (stage_.problem->ncon < CountIncluded(d)) {
        fallback_ = ckFALLBACK_ROWS;
        return false;
      }
      // the shadow's step extracted this d's problem (the solvers read its factor, never write
      // it): the integrator's matrix where it is the same (PrepareMujocoProblem)
      if (IntegratorTangent::adopt_factors_)
        integrator_.AdoptFactor(stage_.problem->mass, ExtractFoldsDamping(m));
      if (smooth_.cfd()) UseTangentForce();
    }
    smooth_.PrepareRows(m);
    ddisp_island_ = -2;
    anchor_cross_stale_ = true;
    reach_.Prepare(*stage_.problem);
    if (stage_.solver) SharedRowGroups(*stage_.problem, nominal_.row_group);  // (else: above)
    if (apply_modes_ && stage_.solver)
      stage_.solver->SetTangentModes(*stage_.problem, out_.contact_modes);
  }

  // "mujoco" with constraint rows: directions in blocks; analytic position tangents where the
  // model allows (and the solver's tangent does not need the mass matrix's)
  integrator_.SetKind(m, d, rk4);
  stage_.batch = !shadow_->solver && stage_.has_rows && !stage_.sensors;
  // a solver whose force tangents take blocks of directions (ipm on one island), where the
  // columns need no more than the integrator's acceleration: no sensors, modes or correction
  // (another solver on one island: its force tangents one by one, the integrator's solves of
  // the block at once)
  stage_.slots = 0;
  stage_.own_slots = false;
  if (stage_.solver && stage_.has_rows && !stage_.sensors && !apply_modes_ &&
      !stage_.solution->position_correction) {
    stage_.slots = std::min(stage_.solver->TangentSlots(*stage_.problem), SoftTangent::kBlock);
    if (!stage_.slots && stage_.problem->islands.nisland == 1) {
      stage_.slots = SoftTangent::kBlock;
      stage_.own_slots = true;
    }
  }
  // (FlushTangents' forces are read through J' alone: Derivative::FlushTangents)
  if (stage_.solver) stage_.solver->SetForcesThroughJacobian(stage_.slots && !stage_.own_slots);
  smooth_.DecideAnalytic(m);

  // velocity derivative of the smooth forces, dense per tree (analytic: per direction)
  if (!smooth_.analytic()) SmoothVelDerivative(m, d);
  if (!smooth_.analytic()) {
    smooth_.DenseQDeriv(m, d, trees_.qderiv, 1, true);
    smooth_.CorrectActuatorVel(m, d);
  }

  // the blocked path's velocity columns M e_k from the dense per-tree mass matrix
  if (stage_.batch) {
    for (int i = 0; i < nv; i++) {
      const int t = extractor_.dof_tree()[i], n = trees_.dofnum[t], b = trees_.dofadr[t];
      double* Mt = trees_.mass + trees_.blockadr[t];
      int adr = m->dof_Madr[i];
      Mt[(i - b) * n + (i - b)] = nominal_.mass[adr++];
      for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
        Mt[(i - b) * n + (j - b)] = Mt[(j - b) * n + (i - b)] = nominal_.mass[adr];
      }
    }
  }

  smooth_.PreparePairs(smooth_.contact_model(m));
  // implicitfast factors M - h qDeriv without the bias forces' derivative (trees_.qderiv keeps
  // the smooth forces' whole derivative)
  if (integrator_.fast) ImplicitFastQDeriv(m, d);
  if (!integrator_.Prepare(m, d, nominal_.mass, rk4)) {
    fallback_ = ckFALLBACK_IMPLICIT;
    return false;
  }
  if (smooth_.analytic()) smooth_.PrepareAnalytic(m);

  PreparePasses(m);
  return true;
}

void Derivative::UseTangentForce() {
  // contacts from distance: the dJ' f and dM terms of the surrogate take the force its solver
  // differentiates (ipm: the central point, where they push; the hard solve has no force there)
  const Problem& p = *stage_.problem;
  Solution& sol = *stage_.solution;
  bool from_distance = false;
  for (int c = 0; c < p.ncon; c++) from_distance |= FromDistance(p.con[c]);
  if (!from_distance) return;
  const double* f = stage_.solver->TangentForce(p);
  if (!f) return;
  for (int i = 0; i < p.nrow; i++) sol.force[i] = f[i];
  VelocityFromForce(p, sol.force, sol.v_next, nullptr);
}

int Derivative::CountIncluded(const mjData* d) const {
  int n = 0;
  for (int c = 0; c < d->ncon; c++) n += d->contact[c].efc_address >= 0;
  return n;
}

//---------------------------------- force tangent -------------------------------------------------

bool Derivative::AnchorTangent(const mjModel* m, int unit) {
  const Problem& p = *stage_.problem;
  const Islands& is = p.islands;
  const mjData* d = stage_data_;
  const int nv = nv_;
  // fn(c) for the contacts of an island (-2: every contact), through its rows on an island
  auto contacts = [&](int island, auto&& fn) {
    if (island < 0 || is.nisland == 1) {  // (one island: its contacts are the problem's)
      for (int c = 0; c < p.ncon; c++) {
        if (island == -2 || is.row_island[p.con[c].row] == island) fn(c);
      }
      return;
    }
    const int* rows = is.rows + is.rowadr[island];
    for (int a = 0; a < is.nrows[island]; a++) {
      if (p.kind[rows[a]] != kRowContactNormal) continue;
      const Contact* c = std::lower_bound(p.con, p.con + p.ncon, rows[a],
                                          [](const Contact& x, int row) { return x.row < row; });
      if (c != p.con + p.ncon && c->row == rows[a]) fn(static_cast<int>(c - p.con));
    }
  };
  // the dofs [first, last] that dq moves (one for a unit direction; none: ddisp = 0)
  int first = unit, end = unit + 1;
  if (unit == -1) end = first;
  if (unit < -1) NonzeroSpan(&tan_.dq, 1, nv, &first, &end);
  const int last = end - 1;
  // a unit direction moves the contacts of its tree's island only
  const int island = end == first ? -1 : first == last ? is.tree_island[p.dof_tree[first]] : -2;
  // ddisp zero again where the last direction wrote it (it is zero elsewhere: a unit direction
  // visits its island's contacts only, not every contact), unless this one rewrites that island
  if (ddisp_island_ != -1 && (ddisp_island_ != island || island < 0)) {
    contacts(ddisp_island_, [&](int c) {
      for (int r = 1; r < p.con[c].dim; r++) tan_.ddisp[p.con[c].row + r] = 0;
    });
  }
  ddisp_island_ = -1;
  if (end == first) return false;
  ddisp_island_ = island;
  const bool crosses = anchor_crosses_on_;
  if (crosses && anchor_cross_stale_) AnchorCrosses();
  contacts(island, [&](int c) {
    const Contact& con = p.con[c];
    const double* w = shadow_->anchors.Anchored(c);
    if (!w || con.dim < 3) return;

    // angular velocity tangent of each body along dq (its ancestors' dofs)
    const double* x = shadow_->anchors.Points(c);
    double dw[2][3] = {{0, 0, 0}, {0, 0, 0}};
    bool moved = false;
    for (int k = first; k <= last; k++) {
      if (tan_.dq[k] == 0) continue;
      for (int side = 0; side < 2; side++) {
        const int b = con.body[side];
        // (a unit direction's bodies: those its re-collisions moved, dof k's subtree)
        if (unit >= 0 && !smooth_.body_moved(b)) continue;
        if (b > 0 && smooth_.InSubtree(m, b, m->dof_bodyid[k])) {
          moved = true;
          for (int i = 0; i < 3; i++) dw[side][i] += tan_.dq[k] * d->cdof[6 * k + i];
        }
      }
    }
    // a unit direction that moves neither body: J's column, the frame's tangent and dw are zero,
    // and so is ddisp (written: the island's last direction may have moved it)
    if (first == last && !moved) {
      for (int r = 1; r < con.dim; r++) tan_.ddisp[con.row + r] = 0;
      return;
    }
    for (int r = 1; r < 3; r++) {
      // J_t dq moves the material points at the contact point; the anchor's points lie off it
      // by o_i = x_i - pos: + dw_2 x o_2 - dw_1 x o_1; and the frame turns under disp
      const double* F = con.frame + 3 * r;
      const double* dF = tan_.dframe + 6 * c + 3 * (r - 1);
      const double jdq = first == last ? DotOne(p.J, con.row + r, first, tan_.dq[first])
                                       : p.J.Dot(con.row + r, tan_.dq);
      double dd = jdq + Dot3(dF, w);
      for (int side = 0; side < 2 && crosses; side++) {
        const double* g = tan_.anchor_cross + 12 * c + 6 * side + 3 * (r - 1);
        dd += (side == 1 ? 1 : -1) * Dot3(dw[side], g);
      }
      for (int side = 0; side < 2 && !crosses; side++) {
        double o[3], t[3];
        for (int i = 0; i < 3; i++) o[i] = x[3 * side + i] - con.pos[i];
        Cross3(t, dw[side], o);
        dd += (side == 1 ? 1 : -1) * Dot3(F, t);
      }
      tan_.ddisp[con.row + r] = dd;
    }

    // the angle kept (torsion, rolling) is fixed in the world: only the frame turns under it,
    // the normal by dn = dt1 x t2 + t1 x dt2
    if (con.dim <= 3) return;
    const double* turn = shadow_->anchors.Turn(c);
    const double* dt = tan_.dframe + 6 * c;
    double dn[3], e[3];
    Cross3(dn, dt, con.frame + 6);
    Cross3(e, con.frame + 3, dt + 3);
    for (int i = 0; i < 3; i++) dn[i] += e[i];
    for (int r = 3; r < con.dim; r++) {
      tan_.ddisp[con.row + r] = Dot3(r == 3 ? dn : dt + 3 * (r - 4), turn);
    }
  });
  return true;
}

void Derivative::AnchorCrosses() {
  // o x F_r of each anchored contact's material points o = x_side - pos (AnchorTangent's
  // Dot3(F, dw x o) = Dot3(dw, o x F))
  const Problem& p = *stage_.problem;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    if (!shadow_->anchors.Anchored(c) || con.dim < 3) continue;
    const double* x = shadow_->anchors.Points(c);
    for (int side = 0; side < 2; side++) {
      double o[3];
      for (int i = 0; i < 3; i++) o[i] = x[3 * side + i] - con.pos[i];
      for (int r = 1; r < 3; r++)
        Cross3(tan_.anchor_cross + 12 * c + 6 * side + 3 * (r - 1), o, con.frame + 3 * r);
    }
  }
  anchor_cross_stale_ = false;
}

void Derivative::FormTangent(const mjModel* m, ProblemTangent* out, bool marked, int unit) {
  const Problem& p = *stage_.problem;
  ProblemTangent& dir = *out;
  dir.v_free = tan_.dv_free;
  if (tan_.dv_free_unit >= -1) {
    // (its solve left to the solver's block: SmoothTangent::set_defer_free_velocity)
    dir.v_free = nullptr;
    dir.v_free_rhs = tan_.dv_free;
    dir.v_free_unit = tan_.dv_free_unit;
  }
  dir.M = tan_.has_dM_problem ? tan_.dM_problem : tan_.has_dM ? tan_.dM : nullptr;
  if (dir.M && tan_.dM_one_tree) {
    dir.M_rows = tan_.dM_rows;
    dir.M_nrows = tan_.dM_nrows;
  }
  if (dir.M == tan_.dM && tan_.has_dM && tan_.dM_dof >= 0 && SmoothTangent::mass_forms_) {
    dir.M_forms = &smooth_;  // (MassTangent's dM: its forms in closed form)
    dir.M_dof = tan_.dM_dof;
  }
  if (dir.M == tan_.dM && tan_.dM_lazy) {
    dir.M_lazy = &smooth_;  // (dM unformed: the solver reads it through Mass())
    dir.M_dof = tan_.dM_dof;
  }
  dir.J = tan_.has_dJ ? tan_.dJ : nullptr;
  // (dJ on the solver's rows only, the rest in products: SmoothTangent::set_jacobian_rows)
  const bool rows_only = tan_.has_dJ && tan_.has_dJ_vfree;
  dir.J_vfree = rows_only && smooth_.free_velocity_rows() ? tan_.dJ_vfree : nullptr;
  dir.J_w_rows = dir.J_vfree ? smooth_.row_weights() : nullptr;
  dir.J_w = dir.J_w_rows ? tan_.dJ_w : nullptr;
  if (rows_only && tan_.has_dJ_force && stage_.solver->ReadsJacobianProducts()) {
    // (the solver reads dJ in products only: SmoothTangent::set_jacobian_rows)
    dir.J_vnext = tan_.dJ_qvel_next;
    dir.J_force = tan_.dJ_force;
    dir.J_x = smooth_.product_x() ? tan_.dJ_x : nullptr;
    dir.J_y = smooth_.product_y() ? tan_.dJ_y : nullptr;
  }
  dir.pos = tan_.has_dpos ? tan_.dpos : nullptr;
  dir.vel = tan_.has_dvel ? tan_.dvel : nullptr;
  dir.R = tan_.has_dpos || tan_.has_drows ? tan_.dR : nullptr;
  dir.diag_approx = tan_.has_drows ? tan_.ddiag : nullptr;
  dir.aref = tan_.has_dvel || tan_.has_dpos || tan_.has_drows ? tan_.daref : nullptr;
  if (rows_only && !smooth_.row_impedance()) dir.R = dir.aref = nullptr;  // (unformed)
  // (a position direction's dvel and daref unformed: SmoothTangent::row_reference)
  if (rows_only && tan_.has_dpos && !smooth_.row_reference()) dir.vel = dir.aref = nullptr;
  if (stage_.solver && p.disp) {
    const bool moved = AnchorTangent(m, unit);
    dir.disp = moved || !zero_disp_null_on_ ? tan_.ddisp : nullptr;
  }
  // the islands the direction perturbs: the others have no force tangent (most directions
  // move one tree)
  if (!marked) reach_.Mark(p, dir, tan_.touched);
  dir.touched = tan_.touched;
}

void Derivative::FormUnitTangent(const mjModel* m, ProblemTangent* dir, int kind, int index) {
  // (a control or activation direction moving no row data and no M: dv_free's islands)
  const bool rowless = !tan_.has_dJ && !tan_.has_dpos && !tan_.has_dvel && !tan_.has_drows &&
                       !tan_.has_dM && !tan_.has_dM_problem;
  const bool marked = kind == kPos || kind == kVel || (kind >= 0 && rowless);
  if (marked) MarkUnitTouched(*stage_.problem, kind == kPos || kind == kVel ? index : -1);
  // (a unit direction's dq: e_index for a position direction, else zero)
  FormTangent(m, dir, marked, kind == kPos ? index : kind >= kCtrl && kind <= kVel ? -1 : -2);
  // (a velocity direction's rows left unformed: set_velocity_rows_unread)
  if (kind == kVel && !tan_.has_dvel && !tan_.has_dpos && !tan_.has_drows) dir->vel_unit = index;
}

bool Derivative::SolveTangent(const mjModel* m, int kind, int index) {
  const int nv = nv_;

  // force tangent and the constraint force's tangent J' df + dJ' f
  for (int i = 0; i < nv; i++) tan_.dqfrc_constraint[i] = 0;
  tan_.has_dposition_correction = false;
  if (stage_.has_rows) {
    const Problem& p = *stage_.problem;
    ProblemTangent dir;
    FormUnitTangent(m, &dir, kind, index);
    if (stage_.solver) {
      if (!stage_.solver->ForceTangent(p, *stage_.solution, dir, tan_.dforce)) {
        fallback_ = ckFALLBACK_NO_TANGENT;
        return false;
      }
      // lcp's split impulse: the tangent of the position correction
      tan_.has_dposition_correction =
          stage_.solution->position_correction &&
          stage_.solver->PositionTangent(p, dir, tan_.dposition_correction);
    } else {
      soft_.ForceTangent(p, dir, tan_.dforce, nullptr);
    }
    ConstraintForceTangent(p);
  }
  AccelerationRhs(m);
  integrator_.Solve(tan_.dqacc_int, &acc_lo_, &acc_hi_);
  acc_known_ = true;
  return true;
}

void Derivative::AccelerationRhs(const mjModel* m, double* out) {
  // integrator: M_int daint = dqfrc_smooth + dqfrc_constraint - dM_int aint (into out, else
  // tan_.dqacc_int)
  double* y = out ? out : tan_.dqacc_int;
  for (int i = 0; i < nv_; i++)
    y[i] = tan_.dqfrc_smooth[i] + tan_.dqfrc_constraint[i] + tan_.dqderiv_qacc[i];
  if (tan_.dM_lazy) {
    smooth_.MassVector(tan_.dM_dof, 2, -1, y);
  } else if (tan_.has_dM) {
    for (int r = 0; r < tan_.dM_nrows; r++) {
      const int i = tan_.dM_rows[r];
      int adr = m->dof_Madr[i];
      y[i] -= tan_.dM[adr++] * integrator_.qacc[i];
      for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
        y[i] -= tan_.dM[adr] * integrator_.qacc[j];
        y[j] -= tan_.dM[adr] * integrator_.qacc[i];
      }
    }
  }
}

void Derivative::ConstraintForceTangent(const Problem& p, bool df) {
  // J' df + dJ' f on the rows of the touched islands (df and dJ are zero elsewhere; a column's
  // rows are visited in ascending order, as a pass over all rows would)
  const SparseRows& J = p.J;
  const Islands& is = p.islands;
  const bool dJ = !tan_.has_dJ_force && tan_.has_dJ;
  // (a contact's rows that share their columns in one pass: SharedRowGroups)
  for (int k = 0; k < is.nisland; k++) {
    if (!tan_.touched[k]) continue;
    const int* rows = is.rows + is.rowadr[k];
    if (df) {
      AddRowsT(J, J.val, tan_.dforce, rows, is.nrows[k], nominal_.row_group, tan_.dqfrc_constraint);
    }
    if (dJ) {
      AddRowsT(J, tan_.dJ, stage_.solution->force, rows, is.nrows[k], nominal_.row_group,
               tan_.dqfrc_constraint);
    }
  }
  if (tan_.has_dJ_force) {
    for (int i = 0; i < nv_; i++) tan_.dqfrc_constraint[i] += tan_.dJ_force[i];
  }
}

void Derivative::PreparePasses(const mjModel* m) {
  const mjData* d = stage_data_;
  const int nv = nv_;

  // inputs of the perturbation passes; their base at the nominal positions
  CopyStepInputs(m, d, pass_data_);
  if (integrator_.implicit || stage_.sensors) {
    mj_kinematics(m, pass_data_);
    mj_comPos(m, pass_data_);
    if (stage_.sensors) mj_camlight(m, pass_data_);
    mj_tendon(m, pass_data_);
    MassMatrix(m, pass_data_);
    mj_transmission(m, pass_data_);
    pass_data_->nefc = 0;
  }
  if (integrator_.implicit) {
    // qDeriv aint of the polynomial velocity terms, and the RNE part of qDeriv at velocity aint
    smooth_.SmoothVelocityProduct(m, pass_data_, trees_.qderiv_qacc_poly);
    // (the other terms do not depend on the velocity: the difference at aint and 0)
    for (int side = 0; side < 2; side++) {
      for (int i = 0; i < nv; i++) pass_data_->qvel[i] = side == 0 ? integrator_.qacc[i] : 0;
      mj_fwdVelocity(m, pass_data_);
      mj_fwdActuation(m, pass_data_);
      // the nominal clamp states on both sides: the actuator terms cancel (piecewise constant)
      mju_copy(pass_data_->actuator_force, nominal_.actuator_force, nu_);
      SmoothVelDerivative(m, pass_data_);
      smooth_.DenseQDeriv(m, pass_data_, trees_.qderiv_rne, side == 0 ? 1 : -1, side == 0);
    }
    mju_copy(pass_data_->qvel, nominal_.qvel, nv);
    mj_fwdVelocity(m, pass_data_);
    mj_fwdActuation(m, pass_data_);
    // implicitfast: no RNE part but on the standalone free bodies
    for (int i = 0; i < nv && integrator_.fast; i++) {
      const int t = extractor_.dof_tree()[i];
      if (trees_.dofadr[t] != i || integrator_.bias_dof[i]) continue;
      mju_zero(trees_.qderiv_rne + trees_.blockadr[t], trees_.dofnum[t] * trees_.dofnum[t]);
    }
  }
}

}  // namespace contactkit
