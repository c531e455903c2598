// Copyright 2026 The contactkit developers.
//
// The smooth-dynamics tangent along a model parameter (ck_paramJac): central differences of
// MuJoCo's position, velocity and actuation stages on a model copy whose one field moves, at the
// nominal state. The constraint rows are held (the parameters differentiated here leave the
// Jacobian, gaps and impedance alone); dM, dqfrc_smooth, dact_dot and the implicit integrator's
// d(qDeriv) aint carry the parameter into the solver's force tangent and the integrator.
#include <algorithm>
#include <cmath>

#include "plugin/deriv/smooth_tangent.h"
#include "plugin/step/compat.h"
#include "solvers/common/impedance.h"

namespace contactkit {
namespace {

constexpr double kParamStep = 1e-5;  // central-difference step, relative to 1 + |p|
// (solref / solimp: smaller, for the impedance's width and midpoint of 1e-3 and below; their
// pass re-collides, it has no stage whose rounding a small step would show)
constexpr double kImpedanceStep = 1e-8;

}  // namespace

void SetParam(mjModel* mp, const ParamSlot& slot, mjtNum value, mjData* scratch) {
  *slot.field = value;
  if (!slot.derived) return;
  if (value == *slot.base_field) {
    slot.cache->Sync(mp, slot.base);  // every derived constant back, bit for bit
  } else if (!slot.cache->Load(mp, slot.field, value)) {
    mj_setConst(mp, scratch);
    slot.cache->Store(mp, slot.field, value);
  }
}

bool SmoothTangent::ParamTangent(const mjModel* m, mjModel* mp, const ParamSlot& slot,
                                 int damping_dof, bool fold_damping) {
  const double h = m->opt.timestep;
  ClearTangent();

  // both sides, then the field back bit for bit; a derived parameter (invweight0) also moves
  // the rows' regularizer and diag_approx
  const mjtNum value = *slot.field;
  const double eps = (slot.impedance ? kImpedanceStep : kParamStep) * (1 + std::fabs(value));
  SetParam(mp, slot, value + eps, pass_data_);
  bool ok = ParamPass(mp, 1, eps, slot);
  SetParam(mp, slot, value - eps, pass_data_);
  ok = ParamPass(mp, -1, eps, slot) && ok;
  SetParam(mp, slot, value, pass_data_);
  tan_.has_drows = (slot.derived || slot.impedance) && stage_.has_rows;
  tan_.has_dM = true;
  tan_.dM_begin = 0;
  tan_.dM_end = nv_;
  tan_.AllRows();

  // damping enters the integrator's matrix (Euler: M + h D; implicit: -h qDeriv, whose change the
  // passes' velocity products hold) and, where the problem folds it in, M_eff
  if (damping_dof >= 0) {
    if (integrator_.damped) tan_.dqderiv_qacc[damping_dof] -= h * integrator_.qacc[damping_dof];
    if (fold_damping) {
      mju_copy(tan_.dM_problem, tan_.dM, nM_);
      tan_.dM_problem[m->dof_Madr[damping_dof]] += h;
      tan_.has_dM_problem = true;
    }
  }
  FreeVelocityTangent(m);
  return ok;
}

bool SmoothTangent::ParamPass(mjModel* mp, int sign, double eps, const ParamSlot& slot) {
  mjData* d = pass_data_;
  const int nv = nv_;
  mju_copy(d->qpos, nominal_.qpos, nq_);
  mju_copy(d->qvel, nominal_.qvel, nv);

  // position stage without collision and constraints: M (tan_.dM_problem holds the minus side)
  mj_kinematics(mp, d);
  mj_comPos(mp, d);
  mj_tendon(mp, d);
  MassMatrix(mp, d);
  mj_transmission(mp, d);
  const double scale = 1 / (2 * eps);
  if (sign > 0) {
    CopyLegacyM(mp, d, tan_.dM);
  } else {
    CopyLegacyM(mp, d, tan_.dM_problem);
    for (int i = 0; i < nM_; i++) tan_.dM[i] = (tan_.dM[i] - tan_.dM_problem[i]) * scale;
  }
  bool ok = true;
  if (stage_.has_rows && slot.derived) ok = WeightPass(mp, d, sign, scale);
  if (stage_.has_rows && slot.impedance) ok = ImpedancePass(mp, d, sign, scale);

  // velocity and actuation stages, smooth force and activation rates
  d->nefc = 0;
  mj_fwdVelocity(mp, d);
  mj_fwdActuation(mp, d);
  mj_fwdAcceleration(mp, d);
  if (sign > 0) {
    mju_copy(tan_.dqfrc_smooth, d->qfrc_smooth, nv);
    mju_copy(tan_.dact_dot, d->act_dot, na_);
  } else {
    for (int i = 0; i < nv; i++)
      tan_.dqfrc_smooth[i] = (tan_.dqfrc_smooth[i] - d->qfrc_smooth[i]) * scale;
    for (int i = 0; i < na_; i++) tan_.dact_dot[i] = (tan_.dact_dot[i] - d->act_dot[i]) * scale;
  }

  // implicit: h d(qDeriv aint)/dp from the velocity products of the polynomial terms
  if (integrator_.implicit) {
    double* x = scratch_.a;
    SmoothVelocityProduct(mp, d, x);
    const double h = mp->opt.timestep;
    for (int i = 0; i < nv; i++) {
      tan_.dqderiv_qacc[i] = sign > 0 ? x[i] : h * (tan_.dqderiv_qacc[i] - x[i]) * scale;
    }
  }
  return ok;
}

bool SmoothTangent::WeightPass(mjModel* mp, mjData* d, int sign, double scale) {
  const Problem& p = *stage_.problem;
  const int nplain = p.ne + p.nf + p.nl;
  double* diag = tan_.ddiag;  // (the plus side until the minus side differences it)
  double* R = tan_.dR;
  auto take = [&](int i, double diag_i, double R_i) {
    diag[i] = sign > 0 ? diag_i : (diag[i] - diag_i) * scale;
    R[i] = sign > 0 ? R_i : (R[i] - R_i) * scale;
    tan_.daref[i] = 0;  // (aref reads no weight)
  };

  // plain rows: MuJoCo's own, in the same order (they do not depend on masses)
  bool ok = true;
  if (nplain) {
    mj_collision(mp, d);
    mj_makeConstraint(mp, d);
    for (int i = 0; i < nplain; i++) {
      ok = ok && i < d->nefc && d->efc_type[i] == p.mj_type[i] && d->efc_id[i] == p.mj_id[i];
      take(i, ok ? EfcDiagApprox(d, i) : 0, ok ? d->efc_R[i] : 0);
    }
  }

  // contacts: every row's R is proportional to the translational weight of the two bodies
  // (Extractor::AddContact), unless held at its floor
  const mjtNum* w = mp->body_invweight0;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const double tran = w[2 * con.body[0]] + w[2 * con.body[1]];
    const double rot = w[2 * con.body[0] + 1] + w[2 * con.body[1] + 1];
    const double ratio = tran / p.diag_approx[con.row];
    for (int r = 0; r < con.dim; r++) {
      const int i = con.row + r;
      take(i, r < 3 ? tran : rot, p.R[i] > mjMINVAL ? p.R[i] * ratio : p.R[i]);
    }
  }
  return ok;
}

bool SmoothTangent::ImpedancePass(mjModel* mp, mjData* d, int sign, double scale) {
  const Problem& p = *stage_.problem;
  const double h = mp->opt.timestep;
  const bool refsafe = !(mp->opt.disableflags & mjDSBL_REFSAFE);
  double* R = tan_.dR;  // (the plus side until the minus side differences it)
  double* aref = tan_.daref;
  auto take = [&](int i, double R_i, double aref_i) {
    tan_.ddiag[i] = 0;
    R[i] = sign > 0 ? R_i : (R[i] - R_i) * scale;
    aref[i] = sign > 0 ? aref_i : (aref[i] - aref_i) * scale;
  };
  for (int i = 0; i < p.ne + p.nf + p.nl; i++) take(i, p.R[i], p.aref[i]);

  // contacts as MuJoCo mixes them, rows as Extractor::AddContact forms them
  mj_collision(mp, d);
  bool ok = d->ncon == stage_data_->ncon;
  for (int c = 0; c < p.ncon && ok; c++) {
    const Contact& con = p.con[c];
    const mjContact* mc = d->contact + con.mj_index;
    ok = ContactGeom(mc, 0) == con.geom[0] && ContactGeom(mc, 1) == con.geom[1];
    double solref[2] = {mc->solref[0], mc->solref[1]}, imp, K, B;
    double solimp[5] = {mc->solimp[0], mc->solimp[1], mc->solimp[2], mc->solimp[3], mc->solimp[4]};
    ContactSoftness(h, refsafe, con.dist, con.margin, solref, solimp, &imp, &K, &B);
    const int row = con.row;
    double Rr[6];
    ContactRegularizers(imp, p.diag_approx[row], mp->opt.impratio, con.mu, con.dim, Rr);
    for (int r = 0; r < con.dim; r++) {
      double a = -B * p.vel[row + r];
      if (r == 0) a -= K * imp * (p.pos[row] - p.margin[row]);
      take(row + r, Rr[r], a);
    }
  }
  return ok;
}

}  // namespace contactkit
