// Copyright 2026 The contactkit developers.
//
// Contacts from distance (DiffMJX, section 4): the Jacobian of a step is taken from a problem in
// which geom pairs closer than the width w_c also carry contacts, found by MuJoCo's collision with
// every margin enlarged by w_c at the same state. Such a contact at distance r >= 0 beyond its
// margin gets the impedance continued to positive distance (cfd_solimp = (d_c, d_0, width,
// midpoint, power): MuJoCo's spline from d_0 at r = 0 to d_c at r = width; d_0 <= 0 continues
// the contact's own impedance at r = 0, width <= 0 takes w_c) and a reference acceleration whose
// position term uses softplus instead of the signed distance, -K d(r) s(r) with
// s(r) = -tau log(1 + exp(-r / tau)), tau = width / 4. Contacts that MuJoCo includes keep their
// own impedance and reference. The step itself never changes (straight-through): only the
// derivative's own forward pass solves this problem.
#include <algorithm>
#include <cmath>

#include "plugin/deriv/smooth_tangent.h"
#include "plugin/step/compat.h"
#include "plugin/step/handle.h"
#include "solvers/common/impedance.h"

namespace contactkit {
namespace {

constexpr double kMinVal = 1e-15;  // mjMINVAL

}  // namespace

bool SmoothTangent::MakeCfdModel(const mjModel* m, const ckSettings& s, std::string* error) {
  if (cfd_model_) mj_deleteModel(cfd_model_);
  cfd_model_ = nullptr;
  cfd_width_ = s.deriv.cfd_width;
  for (int i = 0; i < 5; i++) cfd_solimp_[i] = s.deriv.cfd_solimp[i];
  if (!(cfd_width_ > 0)) return true;
  cfd_model_ = mj_copyModel(nullptr, m);
  if (!cfd_model_) {
    *error = "could not copy the model for contacts from distance";
    return false;
  }

  // every pair's margin (from its geoms, explicit pairs, the override) enlarged by w_c; gaps
  // unchanged, so MuJoCo includes every pair closer than its own inclusion margin plus w_c
  WidenPairMargins(cfd_model_, cfd_width_);
  return true;
}

double SmoothTangent::CfdImpedance(const double solimp[5], double r, double* slope) const {
  const double width = cfd_solimp_[2] > 0 ? cfd_solimp_[2] : cfd_width_;
  double spline[5] = {cfd_solimp_[1] > 0 ? cfd_solimp_[1] : solimp[0], cfd_solimp_[0], width,
                      cfd_solimp_[3], cfd_solimp_[4]};
  double solref[2] = {0.02, 1};
  ClampSolParams(0, false, solref, spline);
  return Impedance(spline, r, 0, slope);
}

double SmoothTangent::CfdSoftplus(double r, double* slope) const {
  const double width = cfd_solimp_[2] > 0 ? cfd_solimp_[2] : cfd_width_;
  const double tau = 0.25 * width, x = -r / tau;

  // s = -tau log(1 + e^x), ds/dr = 1 / (1 + e^-x), stable for either sign of x
  const double log1pexp = x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  if (slope) *slope = x > 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
  return -tau * log1pexp;
}

void SmoothTangent::CfdAdjustProblem(const mjModel* m, Problem* p) {
  const mjData* d = stage_data_;
  for (int c = 0; c < p->ncon; c++) {
    Contact& con = p->con[c];
    const mjContact& mc = d->contact[con.mj_index];

    // MuJoCo's own inclusion margin; contacts beyond it are the ones from distance
    con.margin = mc.includemargin - cfd_width_;
    const double r = con.dist - con.margin;
    rows_.cfd_distance[c] = r;
    const double imp =
        r < 0 ? Impedance(con.solimp, con.dist, con.margin) : CfdImpedance(con.solimp, r, nullptr);
    const int row = con.row;
    p->margin[row] = con.margin;
    for (int k = 0; k < con.dim; k++) p->imp[row + k] = imp;
    ContactRegularizers(imp, p->diag_approx[row], m->opt.impratio, con.mu, con.dim, p->R + row);
    double slope = 0;
    const double position = r < 0 ? con.dist - con.margin : CfdSoftplus(r, &slope);
    // the solvers' own laws for contacts from distance read the softplus position and its slope
    con.cfd_pos = r < 0 ? 0 : position;
    con.cfd_slope = r < 0 ? 0 : slope;
    for (int k = 0; k < con.dim; k++) {
      const int i = row + k;
      p->aref[i] = -p->KB[2 * i + 1] * p->vel[i] - (k == 0 ? p->KB[2 * i] * imp * position : 0);
    }
  }
}

void SmoothTangent::CfdAdjustRows(mjData* d) {
  // MuJoCo's rows of every contact: inclusion margin, impedance and R as CfdAdjustProblem
  for (int c = 0; c < d->ncon; c++) {
    const mjContact& mc = d->contact[c];
    if (mc.efc_address < 0) continue;
    const int adr = mc.efc_address;
    const double margin = mc.includemargin - cfd_width_, r = mc.dist - margin;
    double slope;
    const double imp =
        r < 0 ? Impedance(mc.solimp, mc.dist, margin, &slope) : CfdImpedance(mc.solimp, r, &slope);
    const double old = d->efc_KBIP[4 * adr + 2];
    const double scale = ((1 - imp) / imp) / ((1 - old) / old);
    const int nrow =
        mc.dim == 1 || d->efc_type[adr] == mjCNSTR_CONTACT_ELLIPTIC ? mc.dim : 2 * (mc.dim - 1);
    for (int k = 0; k < nrow; k++) {
      const int i = adr + k;
      d->efc_R[i] = std::max(kMinVal, d->efc_R[i] * scale);
      d->efc_D[i] = 1 / d->efc_R[i];
      d->efc_KBIP[4 * i + 2] = imp;
      d->efc_KBIP[4 * i + 3] = slope;
      if (d->efc_type[adr] != mjCNSTR_CONTACT_ELLIPTIC || k == 0) d->efc_margin[i] = margin;
    }
  }
}

void SmoothTangent::CfdAdjustAref(mjData* d) {
  // softplus position term of the contacts from distance
  for (int c = 0; c < d->ncon; c++) {
    const mjContact& mc = d->contact[c];
    if (mc.efc_address < 0) continue;
    const int adr = mc.efc_address;
    const double r = mc.dist - (mc.includemargin - cfd_width_);
    if (r < 0) continue;
    const double s = CfdSoftplus(r, nullptr);
    const bool elliptic = d->efc_type[adr] == mjCNSTR_CONTACT_ELLIPTIC;
    const int nrow = mc.dim == 1 || elliptic ? mc.dim : 2 * (mc.dim - 1);
    for (int k = 0; k < nrow; k++) {
      const int i = adr + k;
      const double* kbip = d->efc_KBIP + 4 * i;
      d->efc_aref[i] = -kbip[1] * d->efc_vel[i] - (elliptic && k > 0 ? 0 : kbip[0] * kbip[2] * s);
    }
  }
}

void SmoothTangent::CfdForward(const mjModel* m) {
  mjData* d = stage_data_;

  // position stage with every margin enlarged, then MuJoCo's rows adjusted
  mj_fwdPosition(cfd_model_, d);
  CfdAdjustRows(d);
#if CK_MJ3
  mj_island(m, d);  // the island solver's copies of R and D
#endif
  mj_projectConstraint(m, d);
  if (stage_.sensors) mj_sensorPos(m, d);

  // velocity stage, softplus references, actuation, smooth acceleration
  mj_fwdVelocity(m, d);
  CfdAdjustAref(d);
  if (stage_.sensors) mj_sensorVel(m, d);
  if (mjcb_control) mjcb_control(m, d);
  mj_fwdActuation(m, d);
  mj_fwdAcceleration(m, d);

  // the constraint stage on this problem: MuJoCo's solver, or ours on the adjusted problem
  if (!shadow_->solver) {
    mj_fwdConstraint(m, d);
  } else if (d->nefc == 0) {
    mju_copy(d->qacc, d->qacc_smooth, m->nv);
    mju_zero(d->qfrc_constraint, m->nv);
  } else {
    Problem& p = shadow_->storage.problem();
    Solution& sol = shadow_->storage.solution();
    shadow_->extractor.Extract(m, d, &p);
    CfdAdjustProblem(m, &p);
    p.disp = UsesAnchors(shadow_) ? shadow_->anchors.Displacements(d, p) : nullptr;
    sol.Reset();
    shadow_->solver->Solve(p, &sol);
    shadow_->extractor.WriteBack(m, d, p, sol);
  }
  if (stage_.sensors) SensorAcc(m, d);
}

void SmoothTangent::SetCfdSolimp(const ckSettings& s) {
  for (int i = 0; i < 5; i++) cfd_solimp_[i] = s.deriv.cfd_solimp[i];
}

}  // namespace contactkit
