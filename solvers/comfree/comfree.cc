// Copyright 2026 The contactkit developers.
#include "solvers/comfree/comfree.h"

#include <algorithm>
#include <cmath>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace contactkit {
namespace {

// rows whose inverse mass is below this fraction of MuJoCo's estimate cannot move anything
constexpr double kNoEffect = 1e-12;

int ThreadId() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

// unclamped facet force w G (-k (s h + phi) - d s) / h
double FacetArg(double w, double G, double k, double d, double h, double s, double phi) {
  return w * G * (-k * (s * h + phi) - d * s) / h;
}

}  // namespace

int ComfreeFacets(const Contact& con, int ntangent, double* coef, double* weight) {
  const int dim = con.dim;
  int n = 0;
  auto next = [&](double w) {
    double* c = coef + 6 * n;
    if (weight) weight[n] = w;
    n++;
    c[0] = 1;
    for (int r = 1; r < 6; r++) c[r] = 0;
    return c;
  };
  if (dim == 1) {
    next(1);
    return n;
  }

  // tangential: pairs -u, +u at angles pi k / npair; exact axes at right angles
  const int npair = std::clamp(ntangent / 2, 2, (kComfreeMaxFacets - 6) / 2);
  const double w = 2.0 / npair;
  for (int k = 0; k < npair; k++) {
    double cs, sn;
    if ((2 * k) % npair == 0) {
      cs = k == 0 ? 1 : 0;
      sn = 1 - cs;
    } else {
      const double a = M_PI * k / npair;
      cs = std::cos(a);
      sn = std::sin(a);
    }
    for (int sign = -1; sign <= 1; sign += 2) {
      double* c = next(w);
      c[1] = -sign * con.mu[0] * cs;
      c[2] = -sign * con.mu[1] * sn;
    }
  }

  // torsional and rolling: two facets per axis
  for (int r = 3; r < dim; r++) {
    for (int sign = -1; sign <= 1; sign += 2) next(1)[r] = -sign * con.mu[r - 1];
  }
  return n;
}

std::unique_ptr<Solver> MakeComfreeSolver() { return std::make_unique<ComfreeSolver>(); }

const ComfreeStats* ComfreeSolverStats(const Solver* solver) {
  const ComfreeSolver* s = dynamic_cast<const ComfreeSolver*>(solver);
  return s ? &s->stats() : nullptr;
}

bool ComfreeSolver::Setup(const ProblemDims& dims, const ckSettings& settings, std::string* error) {
  dims_ = dims;
  SetSettings(settings);
#ifdef _OPENMP
  nthread_ = std::max(1, omp_get_max_threads());
#else
  nthread_ = 1;
#endif
  const size_t rows = std::max(dims.max_rows, 1), ncon = std::max(dims.max_contacts, 1);
  const size_t nv = std::max(dims.nv, 1), ntree = std::max(dims.ntree, 1);
  gain_.assign(rows, 0.0);
  cap_.assign(rows, 1.0);
  invmass_.assign(rows, 0.0);
  rowinv_.assign(rows, 0.0);
  arow_.assign(rows, 0);
  amul_.assign(rows, 1.0);
  vel_.assign(rows, 0.0);
  arg_.assign(rows, 0.0);
  facet_.assign(ncon * kComfreeMaxFacets, 0.0);
  nfacet_.assign(ncon, 0);
  patch_.assign(ncon, 0);
  edge_.assign(2 * rows, 0.0);
  anchor_.assign(rows, 0.0);
  relax_.assign(ntree, 0.0);
  rrelax_.assign(rows, 0.0);
  rd_.assign(rows, 0.0);
  rgam_.assign(rows, 0.0);
  rgroup_.assign(rows, -1);
  drho_.assign(rows, 0.0);
  dgam_.assign(rows, 0.0);
  ddrel_.assign(rows, 0.0);
  adj_rho_.assign(rows, 0.0);
  adj_gam_.assign(rows, 0.0);
  trow_adr_.assign(ntree + 1, 0);
  trow_.assign(4 * rows, 0);
  rstamp_.assign(rows, -1);
  rcon_.assign(rows, -1);
  rflag_.assign(rows, 0);
  drelax_.assign(ntree, 0.0);
  scratch_.assign(nthread_ * nv, 0.0);
  tangent_.assign(nv, 0.0);
  vafter_.assign(nv, 0.0);
  flg_.assign(nv, 0.0);
  flu_.assign(nv, 0.0);
  flv_.assign(nv, 0.0);
  flw_.assign(nv, 0.0);
  vroll_.assign(nv, 0.0);
  flforce_.assign(rows, 0.0);
  roll_.assign(ncon, 0);
  rscale_.assign(ncon, 1.0);
  rdv_.assign(2 * ncon, 0.0);
  rshare_.assign(2 * ncon, 0.0);
  rsadr_.assign(2 * ncon + 1, 0);
  rpair_.assign(std::min(4 * ncon * ncon, kComfreeTangentPool), 0);
  rpsign_.assign(rpair_.size(), 0.0);
  ruadr_.assign(2 * ncon, 0);
  rupool_.assign(std::min(2 * ncon * nv, kComfreeTangentPool), 0.0);
  rgadr_.assign(2 * ncon + 1, 0);
  rgidx_.assign(std::min(2 * ncon * (2 * ncon + 1) * nv, kComfreeTangentPool), 0);
  rgval_.assign(rgidx_.size(), 0.0);
  rform_.assign(rupool_.size(), 0.0);
  rfscr_.assign(4 * nv, 0.0);
  rforce_.assign(rows, 0.0);
  rvel_.assign(nv, 0.0);
  rcross_.assign(std::min(2 * ncon * rows, kComfreeTangentPool), 0.0);
  adj_y_.assign(rows, 0.0);
  wpool_.assign(std::min(rows * nv, kComfreeTangentPool), 0.0);
  wadr_.assign(rows, -1);
  rsblk_.assign(nv * kRowBlock, 0.0);
  rslist_.assign(rows, 0);
  rsmark_.assign(rows, 0);
  rstadr_.assign(ntree + 1, 0);
  rstrow_.assign(std::max(dims.max_nnz, 1), 0);  // (a row and a tree: one nonzero at least)
  dmtree_.assign(ntree, 0);
  for (auto* v : {&adj_R_, &adj_diag_, &adj_pos_, &adj_disp_, &adj_ratio_, &adj_dvel_, &adj_invm_})
    v->assign(rows, 0.0);
  adj_J_.assign(std::max(dims.max_nnz, 1), 0.0);
  adj_vfree_.assign(nv, 0.0);
  adj_M_.assign(std::max(dims.nM, 1), 0.0);
  adj_relax_.assign(ntree, 0.0);
  adj_patch_.assign(ncon, 0.0);
  fsum_.assign(ncon * kFacetSums, 0.0);
  fshared_.assign(ncon, 0);
  qtadr_.assign(ntree, -1);
  qtnum_.assign(ntree, 0);
  qtx_.assign(ntree, 0);
  qtform_.assign(ntree, 0);
  qtrow_.assign(2 * rows, 0);
  qtused_ = 0;
  qxused_ = 0;
  quadx_.assign(std::min((rows + kQuadSlots) * nv, kComfreeTangentPool), 0.0);  // (padding)
  tstale_ = true;
  quad_.assign(rows, 0.0);
  qset_.assign(rows, 0);
  qrow_.assign(rows, 0);
  nqrow_ = 0;
  wstale_ = true;
  SetupTangentBlocks(dims);
  return true;
}

void ComfreeSolver::SetSettings(const ckSettings& settings) {
  settings_ = settings.comfree;
  tstale_ = true;  // (the facets may change)
}

int ComfreeSolver::FacetForce(int c, double* out) const {
  const double* arg = facet_.data() + static_cast<size_t>(c) * kComfreeMaxFacets;
  for (int j = 0; j < nfacet_[c]; j++) out[j] = std::max(arg[j], 0.0);
  return nfacet_[c];
}

void ComfreeSolver::Measure(const Problem& p, int row, int dim, const Contact* con, double* x) {
  for (int r = 0; r < dim; r++) vel_[row + r] = p.J.Dot(row + r, p.v_free);
  double A = RowInvMass(p, row, x);
  rowinv_[row] = A;
  const double diag = p.diag_approx[row];

  // a contact far lighter along a tangent than along its normal (a finger on its slide joint,
  // pressed by the arm) takes the tangent's inverse mass: its facets' explicit update would
  // otherwise over-correct by their ratio and diverge
  arow_[row] = row;
  amul_[row] = 1;
  for (int r = 1; con && r < std::min(dim, 3); r++) {
    const double mu2 = con->mu[r - 1] * con->mu[r - 1], At = RowInvMass(p, row + r, x);
    rowinv_[row + r] = At;
    if (mu2 * At > kComfreeLightTangent * A) {
      A = mu2 * At / kComfreeLightTangent;
      arow_[row] = row + r;
      amul_[row] = mu2 / kComfreeLightTangent;
    }
  }
  invmass_[row] = A;

  // r / (1 - r) = diag_approx / R (MuJoCo's R = (1 - r) / r diag_approx)
  gain_[row] = diag > 0 && A > kNoEffect * diag ? diag / p.R[row] / A : 0;
}

void ComfreeSolver::SharePatches(const Problem& p) {
  for (int c0 = 0, c1; c0 < p.ncon; c0 = c1) {
    // the patch: the run of contacts of one geom pair (MuJoCo lists a pair's contacts together)
    const Contact& first = p.con[c0];
    c1 = c0 + 1;
    while (c1 < p.ncon && p.con[c1].geom[0] == first.geom[0] &&
           p.con[c1].geom[1] == first.geom[1] && FromDistance(p.con[c1]) == FromDistance(first))
      c1++;
    double amax = 0;
    int n = 0;
    for (int c = c0; c < c1; c++) {
      patch_[c] = c;  // (a contact of a patch that does not share is its own patch)
      const int row = p.con[c].row;
      if (gain_[row] > 0) {
        amax = std::max(amax, invmass_[row]);
        n++;
      }
    }
    if (n < 2 || !first.relocates) continue;
    for (int c = c0; c < c1; c++) patch_[c] = c0;
    // A = (mean of A_i^n)^(1/n), n = kComfreePatchPower, over the contacts that move anything
    double sum = 0;
    for (int c = c0; c < c1; c++) {
      const int row = p.con[c].row;
      if (gain_[row] > 0) sum += std::pow(invmass_[row] / amax, kComfreePatchPower);
    }
    const double A = amax * std::pow(sum / n, 1 / kComfreePatchPower);
    // gain = diag / R / A: the patch's A in place of the contact's own
    for (int c = c0; c < c1; c++) {
      const int row = p.con[c].row;
      if (!(gain_[row] > 0)) continue;
      gain_[row] *= invmass_[row] / A;
      invmass_[row] = A;
    }
  }
}

double ComfreeSolver::CfdDamping(const Problem& p, int row, double* slope) const {
  // (1 - r) B h - k h with 1 - r = R / (diag_approx + R), at least the damping setting
  const double h = p.h, k = settings_.stiffness, B = p.KB[2 * row + 1];
  const double diag = p.diag_approx[row], den = diag + p.R[row];
  const double dc = (B * p.R[row] / den - k) * h;
  if (dc <= settings_.damping) {
    if (slope) *slope = 0;
    return settings_.damping;
  }
  if (slope) *slope = B * h * diag / (den * den);
  return dc;
}

double ComfreeSolver::CapFactor(double relax) const {
  const double limit = settings_.relax_limit;
  return limit > 0 && relax > limit ? limit / relax : 1;
}

bool ComfreeSolver::Relaxes(const Problem& p, int row) const { return rflag_[row]; }

long ComfreeSolver::TreeOffset(const Problem& p, int row, int tree) {
  size_t off = 0;
  long seg = -1;
  ForEachRowTree(p, row, [&](int t, int, int) {
    if (t == tree) seg = static_cast<long>(off);
    off += p.islands.tree_dofnum[t];
  });
  return seg;
}

double ComfreeSolver::CrossInvMass(const Problem& p, const double* val, int i, int j,
                                   const double* wj) const {
  double s = 0;
  const int tj = !wstale_ && wadr_[j] >= 0 ? wtree_[j] : -1;
  if (!coupled_blocks_on_ || tj < 0) {
    ForEachCrossEntry(p, i, j, wj, [&](int e, double w) { s += val[e] * w; });
    return s;
  }
  // row j cached on one tree: its w read from the tree's start without TreeOffset's pass (the
  // same sums in the same order)
  const int adr = p.J.rowadr[i];
  const double* w = wj - p.islands.tree_dofadr[tj];
  if (wadr_[i] >= 0 && wtree_[i] == tj) {
    // (row i on tj alone: all its entries, without the pass that finds its trees)
    for (int k = 0; k < p.J.rownnz[i]; k++) s += val[adr + k] * w[p.J.colind[adr + k]];
    return s;
  }
  ForEachRowTree(p, i, [&](int t, int k0, int k1) {
    for (int k = k0; k < k1 && t == tj; k++) s += val[adr + k] * w[p.J.colind[adr + k]];
  });
  return s;
}

void ComfreeSolver::CoupledRelax(const Problem& p) {
  const int ntree = p.islands.ntree, nrow = p.nrow;
  coupled_ = settings_.relax_limit > 0;
  if (!coupled_) return;

  // the contact of each normal row, the relaxing rows of each tree (counting sort) and their
  // M^-1 J' (BlockRowSolves, else RowSolve)
  for (int i = 0; i < nrow; i++) rcon_[i] = -1;
  for (int c = 0; c < p.ncon; c++) rcon_[p.con[c].row] = c;
  // a row relaxes on a tree whose summed relaxation binds with each row's share counted as the
  // bound counts it, m (1.5 k h + d) instead of k h + d: the Allegro's object, landing on three
  // contacts at 5h on a tree below the limit, kept its uncapped gains and left the hand faster
  // than it came
  const double cs =
      kComfreeCoupledMargin * (kComfreeStableShare * settings_.stiffness * p.h + settings_.damping);
  const double busy = cs / (settings_.stiffness * p.h + settings_.damping);
  for (int i = 0; i < nrow; i++) {
    const int c = rcon_[i];
    bool binds = false;
    ForEachRowTree(p, i,
                   [&](int t, int, int) { binds = binds || CapFactor(busy * relax_[t]) < 1; });
    rflag_[i] =
        binds && gain_[i] > 0 && (i < p.ne + p.nf + p.nl || (c >= 0 && !FromDistance(p.con[c])));
  }
  for (int t = 0; t <= ntree; t++) trow_adr_[t] = 0;
  stamp_ = 0;
  if (coupled_blocks_on_) {
    // (their places in row order, as RowSolve's row by row)
    FreshRowCache(p);
    int n = 0;
    for (int i = 0; i < nrow; i++) {
      if (Relaxes(p, i)) ListRowSolve(p, i, &n);
    }
    BlockRowSolves(p, n);
  }
  for (int i = 0; i < nrow; i++) {
    rstamp_[i] = -1;
    if (!Relaxes(p, i)) continue;
    if (!RowSolve(p, i)) coupled_ = false;
    ForEachRowTree(p, i, [&](int t, int, int) { trow_adr_[t + 1]++; });
  }
  for (int t = 0; t < ntree; t++) trow_adr_[t + 1] += trow_adr_[t];
  if (!coupled_ || trow_adr_[ntree] > static_cast<int>(trow_.size())) {
    coupled_ = false;
    return;
  }
  for (int i = 0; i < nrow; i++) {
    if (!Relaxes(p, i)) continue;
    ForEachRowTree(p, i, [&](int t, int, int) { trow_[trow_adr_[t]++] = i; });
  }
  for (int t = ntree; t > 0; t--) trow_adr_[t] = trow_adr_[t - 1];
  trow_adr_[0] = 0;

  // each row's share D_i = W_i G_i m (1.5 k h + d) with the margin m, then each column's
  // D_j A_j + sum_i D_i |N_ij|
  for (int i = 0; i < nrow; i++) {
    if (!Relaxes(p, i)) continue;
    rd_[i] = (rcon_[i] < 0 ? 1 : WeightSum(p.con[rcon_[i]].dim)) * gain_[i] * cs;
  }
  for (int j = 0; j < nrow; j++) {
    if (!Relaxes(p, j)) continue;
    const double* wj = RowSolve(p, j);
    double sum = rd_[j] * invmass_[j];
    ForEachCoupled(p, j,
                   [&](int i) { sum += rd_[i] * std::fabs(CrossInvMass(p, p.J.val, i, j, wj)); });
    rrelax_[j] = sum;
  }
  GroupRelax(p);
}

void ComfreeSolver::GroupRelax(const Problem& p) {
  // a contact's relaxation: the largest over its bodies of the norm of order kComfreeRelaxPower
  // of the columns of that body's contacts; a plain row's its own column
  for (int j = 0; j < p.nrow; j++) {
    if (!Relaxes(p, j)) continue;
    rgroup_[j] = -1;
    rgam_[j] = rrelax_[j];
    if (rcon_[j] < 0) continue;
    double best = 0;
    for (int side = 0; side < 2; side++) {
      const int b = p.con[rcon_[j]].body[side];
      if (b <= 0) continue;
      double big = 0, sum = 0;
      ForEachGroupRow(p, j, b, [&](int i) { big = std::max(big, rrelax_[i]); });
      if (!(big > 0)) continue;
      ForEachGroupRow(p, j, b,
                      [&](int i) { sum += std::pow(rrelax_[i] / big, kComfreeRelaxPower); });
      const double norm = big * std::pow(sum, 1 / kComfreeRelaxPower);
      if (norm > best) {
        best = norm;
        rgroup_[j] = b;
      }
    }
    rgam_[j] = best;
  }
}

int ComfreeSolver::SolveContact(const Problem& p, int c, Solution* sol) {
  const Contact& con = p.con[c];
  const int dim = con.dim, row = con.row;
  const double h = p.h, k = settings_.stiffness;
  // a contact from distance (derivative pass) takes its softplus position for the gap, so that
  // the clamp opens smoothly before the bodies touch, and its own damping (CfdDamping)
  const double G = gain_[row] * cap_[row];
  const double phi = FromDistance(con) ? con.cfd_pos : p.pos[row] - p.margin[row];
  const double d = FromDistance(con) ? CfdDamping(p, row, nullptr) : settings_.damping;
  const double* s = vel_.data() + row;
  const double* disp = anchored_ && dim >= 3 ? p.disp + row : nullptr;

  // facet forces, summed into frame forces
  double coef[6 * kComfreeMaxFacets], weight[kComfreeMaxFacets];
  const int nf = ComfreeFacets(con, settings_.facets, coef, weight);
  nfacet_[c] = nf;
  double f[6] = {0, 0, 0, 0, 0, 0};
  double* arg = facet_.data() + static_cast<size_t>(c) * kComfreeMaxFacets;
  int nactive = 0;
  for (int j = 0; j < nf; j++) {
    const double* cj = coef + 6 * j;
    double sj = 0;
    for (int r = 0; r < dim; r++) sj += cj[r] * s[r];
    // anchored: the facet's own gap phi_j = phi - mu d_j . disp (cj[r] = -mu d_j, r >= 1)
    double phij = phi;
    for (int r = 1; disp && r < dim; r++) phij += cj[r] * disp[r];
    arg[j] = FacetArg(weight[j], G, k, d, h, sj, phij);
    if (arg[j] > 0) {
      for (int r = 0; r < dim; r++) f[r] += cj[r] * arg[j];
      nactive++;
    }
  }
  for (int r = 0; r < dim; r++) sol->force[row + r] = f[r];

  // the facets are MuJoCo's pyramid edges
  if (settings_.facets == 4) {
    for (int j = 0; j < nf; j++) edge_[2 * row + j] = std::max(arg[j], 0.0);
  }
  return nactive;
}

void ComfreeSolver::SlideAnchor(const Problem& p, int c, const double* v_next) {
  const Contact& con = p.con[c];
  const int row = con.row;
  double* out = anchor_.data() + row;
  if (con.dim < 3) return;

  // displacement and gap predicted at the end of the step, and the slip speed over it
  const double h = p.h, phi = p.pos[row] - p.margin[row] + h * p.J.Dot(row, v_next);
  const double slip[2] = {h * p.J.Dot(row + 1, v_next), h * p.J.Dot(row + 2, v_next)};
  const double x[2] = {p.disp[row + 1] + slip[0], p.disp[row + 2] + slip[1]};
  const double speed = std::hypot(slip[0], slip[1]) / h;

  // largest position-level facet term max_j -mu d_j . y over the tangential facets (>= 0: they
  // come in opposite pairs); y lies inside the cone while that <= -stretch phi, and scale(y) is
  // the factor that brings it back to the edge. At stretch 1 the facet opposite y stops pressing
  // there; beyond, the facet along y alone carries the friction. The edge is where the contact's
  // friction reaches mu/2 of its normal force, whatever its condim (StickStretch)
  double coef[6 * kComfreeMaxFacets];
  const int nf = ComfreeFacets(con, settings_.facets, coef, nullptr);
  const double stretch = StickStretch(con.dim);
  auto scale = [&](const double y[2]) {
    double edge = 0;
    for (int j = 0; j < nf; j++)
      edge = std::max(edge, coef[6 * j + 1] * y[0] + coef[6 * j + 2] * y[1]);
    if (stretch * phi + edge <= 0) return 1.0;
    return phi < 0 && edge > 0 ? std::min(1.0, -stretch * phi / edge) : 0.0;
  };

  // sliding (the state at disp's normal row: the envelope of the slip speed, 0 when sticking):
  // the contact slipped beyond the edge, or did and its slip still decays. The envelope decays at
  // 1 / kComfreeSlideDecay of the viscous rate a / h of the facets, a = 2 mu^2 G A (k h + d), so a
  // steady creep (the stick force kept falls short of the load) sticks again; so does a contact
  // slower than kComfreeStickSpeed
  const double G = gain_[row] * cap_[row], k = settings_.stiffness, dmp = settings_.damping;
  const double a = 2 * con.mu[0] * con.mu[1] * G * invmass_[row] * (k * h + dmp);
  const double s = scale(x), ref = p.disp[row] * std::exp(-a / kComfreeSlideDecay);
  const bool sliding = speed >= kComfreeStickSpeed && (s < 1 || speed < ref);
  out[0] = sliding ? std::max(ref, speed) : 0;

  // a sticking contact keeps its displacement, pulled back to the edge; a sliding one only the
  // displacement whose stick force carries the smooth load u = J_t (v_smooth - v) (none on level
  // ground), so that stopping releases nothing, and never more than it has
  double keep[2] = {s * x[0], s * x[1]};
  if (sliding) {
    // the stick impulse of displacement y on axis r is 2 mu_r^2 G k y_r up to mu_r |y_r| = -phi
    // (stretch 1), where the facet opposite y_r stops pressing, and mu_r G k (mu_r |y_r| - phi)
    // beyond; its velocity change at the contact A_r times that. A_r = min(normal, tangential
    // inverse mass) over-estimates the share a contact must carry rather than under-estimating
    // it (cube, tall and flat boxes, capsule, cylinder), and kComfreeLoadShare lets the more
    // loaded contacts of a body make up for those that reach the edge
    for (int r = 1; r < 3; r++) {
      const double mu = con.mu[r - 1];
      const double A = std::min(rowinv_[row], rowinv_[row + r]);
      const double den = 2 * mu * mu * G * A * k;
      const double u = kComfreeLoadShare * (vel_[row + r] - p.vel[row + r]);
      const double y1 = phi < 0 && mu > 0 ? -phi / mu : 0;  // stretch 1
      keep[r - 1] = !(den > 0)                 ? 0
                    : std::fabs(u) <= den * y1 ? u / den
                                               : std::copysign(2 * std::fabs(u) / den - y1, u);
    }
    // friction must not drive the slip: the stick force (against keep) does no work along it
    const double ks = keep[0] * slip[0] + keep[1] * slip[1];
    if (ks < 0) {
      const double s2 = slip[0] * slip[0] + slip[1] * slip[1];
      keep[0] -= ks / s2 * slip[0];
      keep[1] -= ks / s2 * slip[1];
    }
    // nor store more than the contact's motion left it (x): a longer kept displacement would
    // stretch the stick spring with nothing moving, and a contact whose slip jitters in
    // direction (the projection above then takes its kept displacement on and off) was pumped
    // by it, step after step (the A1's calves at 5h)
    double sk = scale(keep);
    const double nk = sk * std::hypot(keep[0], keep[1]), nx = std::hypot(x[0], x[1]);
    if (nk > nx) sk *= nx / nk;
    keep[0] *= sk;
    keep[1] *= sk;
  }

  // what the contact keeps, at the step's start: the next step adds the slip h J_t v+
  out[1] = keep[0] - slip[0];
  out[2] = keep[1] - slip[1];

  // torsion and rolling, axis by axis (an angle kept at 0 is free): a turn slower than
  // kComfreeStickTurn starts a stick spring, whose angle grows by h J_r v+ up to the edge of its
  // facet pair, mu_r |angle| <= -phi; there a slow turn stays at the edge (static friction at
  // its limit) and a fast one lets go
  for (int r = 3; r < con.dim; r++) {
    const double mu = con.mu[r - 1], w = p.J.Dot(row + r, v_next), y = p.disp[row + r] + h * w;
    const double edge = phi < 0 && mu > 0 ? -phi : 0;
    const bool slow = std::fabs(w) < kComfreeStickTurn;
    out[r] = (p.disp[row + r] == 0 && !slow) ? 0
             : mu * std::fabs(y) <= edge     ? y
             : slow                          ? std::copysign(edge / mu, y)
                                             : 0;
  }
}

void ComfreeSolver::RollRows(const Problem& p) {
  nroll_ = 0;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    if (con.dim == 6 && gain_[con.row] != 0 && (con.mu[3] > 0 || con.mu[4] > 0))
      roll_[nroll_++] = c;
  }
}

void ComfreeSolver::RollShare(const Problem& p) {
  // each rolling row's own inverse mass A_s (rowinv_), then its share A_s + sum_q |N_sq|, N = J
  // M^-1 J', over the other contacts' rolling rows q on its trees (Gershgorin's row sum): every
  // stop is computed from the same v'', and the stops of one body's contacts then end a common
  // turn once together instead of once each (two stops reversed it: the Allegro's object rang)
  for (int k = 0; k < nroll_; k++) {
    const int row = p.con[roll_[k]].row;
    for (int r = 0; r < 2; r++) {
      const int i = row + 4 + r;
      rowinv_[i] = p.con[roll_[k]].mu[3 + r] > 0 ? RowInvMass(p, i, scratch_.data()) : 0;
      rshare_[2 * k + r] = rowinv_[i];
    }
  }
  rshare_on_ = false;
  if (nroll_ < 2) return;
  for (int k = 0; k < nroll_; k++) {
    for (int r = 0; r < 2; r++) {
      const int i = p.con[roll_[k]].row + 4 + r;
      if (rowinv_[i] > 0 && !RowSolve(p, i)) return;  // (the cache is full: own masses)
    }
  }
  // the terms; own masses where the tangent's lists (RollShareLists) would not fit
  rshare_on_ = true;
  rslists_ = false;
  rforms_ = false;
  size_t np = 0, nu = 0;
  rsadr_[0] = 0;
  for (int k = 0; k < nroll_; k++) {
    for (int r = 0; r < 2; r++) {
      const int i = p.con[roll_[k]].row + 4 + r, s = 2 * k + r;
      ForEachRowTree(p, i, [&](int t, int, int) { nu += p.islands.tree_dofnum[t]; });
      ForEachRollCross(p, k, r, [&](int j, const double*, const double*, double n) {
        rshare_[s] += std::fabs(n);
        if (np < rpair_.size()) {
          rpair_[np] = j;
          rpsign_[np] = n > 0 ? 1 : -1;
        }
        np++;
      });
      rsadr_[s + 1] = static_cast<int>(std::min(np, rpair_.size()));
    }
  }
  if (np <= rpair_.size() && nu <= rupool_.size()) return;
  rshare_on_ = false;
  for (int k = 0; k < nroll_; k++) {
    for (int r = 0; r < 2; r++) rshare_[2 * k + r] = rowinv_[p.con[roll_[k]].row + 4 + r];
  }
}

void ComfreeSolver::RollShareLists(const Problem& p) {
  // u_s = sum_q sign(N_sq) w_q on each rolling row's trees (rupool_) over RollShare's pairs
  // (rpair_, rpsign_), once per Solve
  if (rslists_) return;
  rslists_ = true;
  size_t nu = 0;
  for (int k = 0; k < nroll_; k++) {
    for (int r = 0; r < 2; r++) {
      const int i = p.con[roll_[k]].row + 4 + r, s = 2 * k + r;
      size_t size = 0;
      ForEachRowTree(p, i, [&](int t, int, int) { size += p.islands.tree_dofnum[t]; });
      ruadr_[s] = static_cast<int>(nu);
      double* u = rupool_.data() + nu;
      for (size_t q = 0; q < size; q++) u[q] = 0;
      nu += size;
      for (int a = rsadr_[s]; a < rsadr_[s + 1]; a++) {
        const int j = rpair_[a];
        const double* wj = RowSolve(p, j);
        size_t off = 0;
        ForEachRowTree(p, i, [&](int t, int, int) {
          const long sj = TreeOffset(p, j, t);
          const int nt = p.islands.tree_dofnum[t];
          for (int q = 0; sj >= 0 && q < nt; q++) u[off + q] += rpsign_[a] * wj[sj + q];
          off += nt;
        });
      }
    }
  }
  rgather_ = roll_gather_on_ && RollShareGather(p);
}

void ComfreeSolver::RollStop(const Problem& p, int k, Solution* sol) {
  // x_r = f_facets - J_r v'' / (S_r h) (arg_; rshare_ the rolling row's share S_r), scaled by b /
  // n(x) where its norm n passes the budget b
  const int c = roll_[k], row = p.con[c].row;
  for (int r = 0; r < 2; r++) {
    const int i = row + 4 + r;
    const double S = rshare_[2 * k + r];
    arg_[i] = S > 0 ? sol->force[i] - p.J.Dot(i, vroll_.data()) / (S * p.h) : 0;
  }
  const double b = RollBudget(p, c, flforce_.data()), n = RollNorm(p, c, arg_.data());
  rscale_[k] = n > b ? b / n : 1;
  for (int i = row + 4; i < row + 6; i++) sol->force[i] = rscale_[k] * arg_[i];
  if (settings_.facets == 4) RollEdges(p, c, sol->force);
}

void ComfreeSolver::RollEdges(const Problem& p, int c, const double* force) {
  // the pyramid's edge pairs keep their totals n_j = e_j+ + e_j- where they still cover |f_j| /
  // mu_j; what the rolling pair lacks comes from every pair's slack n_j - |f_j| / mu_j, each
  // giving the same share of its own (the pyramid's budget keeps the sum of slacks >= 0)
  const Contact& con = p.con[c];
  double* e = edge_.data() + 2 * con.row;
  double slack[5], pos = 0, neg = 0;
  for (int j = 0; j < 5; j++) {
    const double u = con.mu[j] > 0 ? force[con.row + 1 + j] / con.mu[j] : 0;
    slack[j] = e[2 * j] + e[2 * j + 1] - std::fabs(u);
    (slack[j] > 0 ? pos : neg) += slack[j];
  }
  const double keep = pos > 0 ? std::max(1 + neg / pos, 0.0) : 0;
  for (int j = 0; j < 5; j++) {
    const double u = con.mu[j] > 0 ? force[con.row + 1 + j] / con.mu[j] : 0;
    const double total = std::fabs(u) + (slack[j] > 0 ? keep * slack[j] : 0);
    e[2 * j] = 0.5 * (total + u);
    e[2 * j + 1] = 0.5 * (total - u);
  }
}

void ComfreeSolver::FrictionAfter(const Problem& p, Solution* sol) {
  const int f0 = p.ne, f1 = p.ne + p.nf;
  for (int i = f0; i < f1; i++) sol->force[i] = 0;
  VelocityFromForce(p, sol->force, sol->v_next, nullptr);
  RollRows(p);
  if (p.nf == 0 && nroll_ == 0) return;
  for (int j = 0; j < p.nv; j++) vafter_[j] = sol->v_next[j];
  for (int i = 0; i < p.nrow; i++) flforce_[i] = sol->force[i];  // (what v' saw)
  for (int i = f0; i < f1; i++) {
    const double A = invmass_[i];
    arg_[i] = gain_[i] > 0 ? -p.J.Dot(i, vafter_.data()) / (A * p.h) : 0;
    sol->force[i] = FrictionLossForce(p, i);
  }
  // the rolling stops see the friction-loss rows' forces (v''): computed from v' alongside them,
  // both stopped the same motion (the A1's legs) and the feet's pairs stayed scaled at rest
  if (nroll_ > 0 && p.nf > 0) {
    VelocityFromForce(p, sol->force, vroll_.data(), nullptr);
  } else {
    for (int j = 0; j < p.nv; j++) vroll_[j] = vafter_[j];
  }
  RollShare(p);
  for (int k = 0; k < nroll_; k++) RollStop(p, k, sol);
  stats_.nroll = nroll_;
  for (int k = 0; k < nroll_; k++) stats_.nrolled += !RollSticks(k);
  VelocityFromForce(p, sol->force, sol->v_next, nullptr);
}

void ComfreeSolver::Solve(const Problem& p, Solution* sol) {
  tangent_modes_ = nullptr;  // a new solve: its own tangent until SetTangentModes
  const double h = p.h, k = settings_.stiffness, d = settings_.damping;
  const int nplain = p.ne + p.nf + p.nl, ncon = p.ncon, nv = p.nv;
  anchored_ = settings_.anchor && p.disp;
  wstale_ = true;
  tstale_ = true;
  const bool parallel = ncon > settings_.parallel_min && nthread_ > 1;

  // pass 1: inverse masses, gains and smooth row velocities
  auto measure = [&](int c) {
    Measure(p, p.con[c].row, p.con[c].dim, &p.con[c],
            scratch_.data() + static_cast<size_t>(ThreadId()) * nv);
  };
  if (parallel) {
#pragma omp parallel for schedule(static) num_threads(nthread_)
    for (int c = 0; c < ncon; c++) measure(c);
  } else {
    for (int c = 0; c < ncon; c++) measure(c);
  }
  for (int i = 0; i < nplain; i++) Measure(p, i, 1, nullptr, scratch_.data());
  SharePatches(p);

  // relaxation: each facet's share of a step's full correction along its normal, per tree
  const double cv = k * h + d;
  for (int t = 0; t < p.islands.ntree; t++) relax_[t] = 0;
  for (int i = 0; i < nplain; i++) {
    const double w = gain_[i] * invmass_[i] * cv;
    ForEachRowTree(p, i, [&](int t, int, int) { relax_[t] += w; });
  }
  for (int c = 0; c < ncon; c++) {
    // (contacts from distance do not relax the real ones: the surrogate keeps their gains)
    const Contact& con = p.con[c];
    if (FromDistance(con)) continue;
    const double w = WeightSum(con.dim) * gain_[con.row] * invmass_[con.row] * cv;
    if (con.tree[0] >= 0) relax_[con.tree[0]] += w;
    if (con.tree[1] >= 0) relax_[con.tree[1]] += w;
  }

  CoupledRelax(p);

  // pass 2: facet forces
  // (a serialized OpenMP region would allocate its team on every call: branch instead)
  int nactive = 0;
  auto solve = [&](int c) {
    const Contact& con = p.con[c];
    double w = 0;
    if (con.tree[0] >= 0) w = std::max(w, relax_[con.tree[0]]);
    if (con.tree[1] >= 0) w = std::max(w, relax_[con.tree[1]]);
    if (coupled_ && Relaxes(p, con.row)) w = rgam_[con.row];
    cap_[con.row] = CapFactor(w);
    return SolveContact(p, c, sol);
  };
  if (parallel) {
#pragma omp parallel for schedule(static) num_threads(nthread_) reduction(+ : nactive)
    for (int c = 0; c < ncon; c++) nactive += solve(c);
  } else {
    for (int c = 0; c < ncon; c++) nactive += solve(c);
  }
  for (int i = 0; i < nplain; i++) {
    double w = 0;
    ForEachRowTree(p, i, [&](int t, int, int) { w = std::max(w, relax_[t]); });
    if (coupled_ && Relaxes(p, i)) w = rgam_[i];
    cap_[i] = CapFactor(w);
    const double phi = p.kind[i] == kRowFriction ? 0 : p.pos[i] - p.margin[i];
    arg_[i] = FacetArg(1, gain_[i] * cap_[i], k, d, h, vel_[i], phi);
    double f = arg_[i];
    if (p.kind[i] == kRowLimit) f = std::max(f, 0.0);
    if (p.kind[i] == kRowFriction) f = std::clamp(f, -p.floss[i], p.floss[i]);
    sol->force[i] = f;
  }

  // statistics
  stats_.Reset();
  stats_.nactive = nactive;
  for (int c = 0; c < ncon; c++) {
    stats_.nfacet += nfacet_[c];
    stats_.ncapped += cap_[p.con[c].row] < 1;
  }
  for (int i = 0; i < nplain; i++) stats_.ncapped += cap_[i] < 1;

  // v+ = v_smooth + h M^-1 J' f (eq. 9), friction loss after the other rows
  FrictionAfter(p, sol);
  sol->edge_force = settings_.facets == 4 ? edge_.data() : nullptr;

  // anchors for the next step
  sol->anchor_disp = nullptr;
  if (anchored_) {
    for (int c = 0; c < ncon; c++) SlideAnchor(p, c, sol->v_next);
    sol->anchor_disp = anchor_.data();
  }
  sol->status = 0;  // ckSTATUS_SOLVED: the closed form cannot fail
  sol->iterations = 1;
  sol->residual = 0;
}

}  // namespace contactkit
