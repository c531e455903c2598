// Copyright 2026 The contactkit developers.
//
// ipm's force tangent: the implicit function theorem at the central-path point kappa_grad.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "solvers/common/columns.h"
#include "solvers/ipm/ipm_solver.h"

namespace contactkit {
namespace ipm {
namespace {

constexpr double kRefineTol = 1e-12;   // relative dynamics defect left unrefined (rounding)
constexpr double kClampReg = 1e-10;    // regularizer of a clamped normal row, x diag_approx
constexpr double kAnswerSlack = 10;    // AnswerPoint: the answer's residual, x residual_tol
constexpr double kAnswerKappa = 1e-4;  // ... its complementarity, x kappa_tol: a pattern's answer
constexpr double kAnswerCone = 1e-6;   // ... and the relative excess of its force over its cone

// w' V x over the stored entries of row i of a matrix V in mass's tree layout (its diagonal and
// its ancestors', each off the diagonal counted for both triangles)
double RowBilinear(const TreeMass& mass, const double* V, int i, const double* w, const double* x) {
  int adr = mass.madr[i];
  double s = V[adr++] * w[i] * x[i];
  for (int j = mass.parent[i]; j >= 0; j = mass.parent[j], adr++) {
    s += V[adr] * (w[i] * x[j] + w[j] * x[i]);
  }
  return s;
}

using columns::Load;
using columns::Pair;
using columns::Store;

// P = M X on dofs [b, e) (whole trees) of W columns (1 or even) of a block of stride S
// (columns.h): row i's diagonal and ancestors' terms accumulated in registers, the ancestors'
// rows pushed to
template <int W>
void MassTimesColumns(const TreeMass& mass, int b, int e, const double* X, size_t S, double* P) {
  constexpr int H = (W + 1) / 2;
  for (int i = b; i < e; i++) {
    Pair v[H], acc[H];
    const double d = mass.M[mass.madr[i]];
    const Pair mii = {d, d};
    for (int h = 0; h < H; h++) {
      v[h] = Load<W>(X + i * S + 2 * h);
      acc[h] = mii * v[h];
    }
    int adr = mass.madr[i] + 1;
    for (int j = mass.parent[i]; j >= 0; j = mass.parent[j], adr++) {
      const Pair mij = {mass.M[adr], mass.M[adr]};
      const double* xj = X + j * S;
      double* pj = P + j * S;
      for (int h = 0; h < H; h++) {
        acc[h] += mij * Load<W>(xj + 2 * h);
        Store<W>(pj + 2 * h, Load<W>(pj + 2 * h) + mij * v[h]);
      }
    }
    for (int h = 0; h < H; h++) Store<W>(P + i * S + 2 * h, acc[h]);
  }
}

constexpr int kRowGroup = 3;  // rows with one pattern taken at once (a contact's)

// rows i and j of G have the same columns
bool SamePattern(const SparseRows& G, int i, int j) {
  const int n = G.rownnz[i];
  return G.rownnz[j] == n &&
         std::memcmp(G.colind + G.rowadr[i], G.colind + G.rowadr[j], n * sizeof(int)) == 0;
}

// P -= G' L for R rows of G that share their columns col (row r's values val[r]), on nslot
// columns of stride S, L[r][s] row r's value in column s: each entry's terms in row order
template <int R>
void SubRowsT(const double* const* val, const int* col, int n,
              const double (*L)[IpmSolver::kTangentSlots], int nslot, size_t S, double* P) {
  for (int c = 0; c < n; c++) {
    double v[R];
    for (int r = 0; r < R; r++) v[r] = val[r][c];
    double* y = P + static_cast<size_t>(col[c]) * S;
    for (int s = 0; s < nslot; s++) {
      double t = y[s];
      for (int r = 0; r < R; r++) t -= v[r] * L[r][s];
      y[s] = t;
    }
  }
}

// y[j * S] += M_ju over the dofs j of u's tree [u, e) and u's ancestors (column u of M)
void AddMassColumn(const TreeMass& mass, int u, int e, double* y, size_t S) {
  int adr = mass.madr[u];
  for (int a = u; a >= 0; a = mass.parent[a]) y[static_cast<size_t>(a) * S] += mass.M[adr++];
  for (int i = u + 1; i < e; i++) {
    int at = mass.madr[i] + 1;
    for (int a = mass.parent[i]; a >= u; a = mass.parent[a], at++) {
      if (a == u) y[static_cast<size_t>(i) * S] += mass.M[at];
    }
  }
}

// P = M X on the trees of island k, nslot columns of a block of stride S
void MassTimesBlock(const Problem& p, int k, int nslot, const double* X, size_t S, double* P) {
  const Islands& is = p.islands;
  for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
    const int b = is.tree_dofadr[is.trees[t]], e = b + is.tree_dofnum[is.trees[t]];
    int s = 0;  // (row i is written before its descendants push to it)
    for (; s + 8 <= nslot; s += 8) MassTimesColumns<8>(p.mass, b, e, X + s, S, P + s);
    for (; s + 4 <= nslot; s += 4) MassTimesColumns<4>(p.mass, b, e, X + s, S, P + s);
    for (; s + 2 <= nslot; s += 2) MassTimesColumns<2>(p.mass, b, e, X + s, S, P + s);
    for (; s < nslot; s++) MassTimesColumns<1>(p.mass, b, e, X + s, S, P + s);
  }
}

}  // namespace

const double* IpmSolver::CentralForce(const Problem& p) {
  for (int i = 0; i < p.nrow; i++) cen_force_[i] = 0;
  for (int k = 0; k < p.islands.nisland; k++) {
    if (!Center(p, k)) return nullptr;
    const int* rows = Rows(p, k);
    for (int a = 0; a < NumRows(p, k); a++) cen_force_[rows[a]] = cen_.lam[rows[a]] / p.h;
  }
  return cen_force_.data();
}

void IpmSolver::TangentResiduals(const Problem& p, int k, const ProblemTangent& dir, const State& s,
                                 bool free_term) {
  // derivative of the residual along the data perturbation at fixed unknowns
  const SparseRows& J = p.J;
  const Islands& is = p.islands;
  const IslandLists& L = lists_[k];
  const double h = p.h;
  const int* dofs = Dofs(p, k);
  const int nd = NumDofs(p, k);
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);

  // dynamics: dM (v - v_free) - M dv_free - dJ' lambda (free_term false: without M dv_free)
  for (int a = 0; a < nd; a++) drv_[dofs[a]] = 0;
  for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
    const int b = is.tree_dofadr[is.trees[t]], e = b + is.tree_dofnum[is.trees[t]];
    if (dir.M && dir.M_lazy) {
      // (dM unformed: its closed-form product, on dM_k's tree only)
      if (dir.M_dof >= b && dir.M_dof < e) {
        for (int j = b; j < e; j++) tmp_[j] = p.v_free[j] - s.v[j];
        dir.M_lazy->SubProduct(dir.M_dof, tmp_.data(), drv_.data());
      }
    } else if (dir.M) {
      const double* dM = dir.Mass();
      for (int j = b; j < e; j++) tmp_[j] = s.v[j] - p.v_free[j];
      if (!dir.M_rows) {
        p.mass.MulValues(dM, tmp_.data(), drv_.data(), b, e);
      } else if (dir.M_nrows > 0 && dir.M_rows[0] >= b && dir.M_rows[0] < e) {
        // dM's rows on this tree only (drv_ is zero here)
        p.mass.AddMulValuesRows(dM, dir.M_rows, dir.M_nrows, tmp_.data(), drv_.data());
      }
    }
    if (dir.v_free && free_term) {
      p.mass.Mul(dir.v_free, rhs_.data(), b, e);
      for (int j = b; j < e; j++) drv_[j] -= rhs_[j];
    }
  }

  // rows: dJ v and dJ' lambda
  for (int a = 0; a < nr; a++) {
    const int i = rows[a], adr = J.rowadr[i], n = J.rownnz[i];
    double djv = 0;
    if (dir.J) {
      // (from the row's first nonzero entry of dJ: a direction off the chains of the row's
      // bodies leaves the whole row zero; the terms skipped are zeros)
      int c0 = 0;
      while (row_skip_on_ && c0 < n && dir.J[adr + c0] == 0) c0++;
      for (int c = c0; c < n; c++) {
        djv += dir.J[adr + c] * s.v[J.colind[adr + c]];
        drv_[J.colind[adr + c]] -= dir.J[adr + c] * s.lam[i];
      }
    }
    drz_[i] = -scale_[i] * djv;
  }
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    if (dir.pos && !capped_[i]) drz_[i] -= dir.pos[i] / h;
  }
  for (int e = L.eq_adr; e < L.eq_adr + L.eq_num; e++) {
    // r_e = J v - target + R lambda: hard target -pos/h, soft vel + h aref (and R)
    const int i = eq_[e];
    drz_[i] = -drz_[i];
    if (settings_.ipm.soft_equality) {
      if (dir.vel) drz_[i] -= dir.vel[i];
      if (dir.aref) drz_[i] -= h * dir.aref[i];
      if (dir.R && p.R[i] > 1e-15) drz_[i] += dir.R[i] * s.lam[i];
    } else if (dir.pos) {
      drz_[i] += dir.pos[i] / h;
    }
  }
}

double IpmSolver::CfdKappa(const Problem& p, int i, const ProblemTangent* dir,
                           double* dkappa) const {
  const double h = p.h, den = p.diag_approx[i] + p.R[i];
  const double x = h * p.aref[i] / den, t = target_[i];
  if (dir) {
    const double da = dir->aref ? dir->aref[i] : 0;
    const double dden = (dir->R ? dir->R[i] : 0) + (dir->diag_approx ? dir->diag_approx[i] : 0);
    const double dx = (h * da - x * dden) / den;
    const double dt = dir->pos && !capped_[i] ? dir->pos[i] / h : 0;
    *dkappa = dx * t + x * dt;
  }
  return x * t > 0 ? x * t : 0;
}

bool IpmSolver::AnswerPoint(const Problem& p, int k) {
  const ckIpmSettings& st = settings_.ipm;
  const IslandLists& L = lists_[k];
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  State* s = &cen_;
  // the impulses and the velocity they give, v_free + M^-1 J' lambda
  for (int a = 0; a < nr; a++) {
    const int i = rows[a];
    s->lam[i] = out_lam_[i];
    s->x[i] = out_lam_[i] / scale_[i];
  }
  ImpulseVelocity(p, k, out_lam_.data(), nullptr, s);
  // its velocities: gaps, slips (eta0 = |eta_R|, on the cone's boundary), measured as an iterate
  // (no residual but rounding's, its complementarity)
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    s->z[i] = s->u[i] + target_[i];
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    double z2 = 0;
    for (int r = soc_row_[e]; r < soc_row_[e] + soc_cnt_[e]; r++) {
      s->z[r] = scale_[r] * s->u[r];
      z2 += s->z[r] * s->z[r];
    }
    s->z0[soc_row_[e]] = std::sqrt(z2);
  }
  Residuals(p, k, s);
  // it holds the hard problem: forces in their cones, no gap closing, x o z at rounding (the
  // polish's pattern: an iterate's x o z ~ kappa_tol is a point of the central path, whose
  // derivative, with indeterminate forces, is not the hard limit's)
  const double rtol = kAnswerSlack * st.residual_tol, ktol = kAnswerKappa * st.kappa_tol;
  if (!(s->rvio < rtol && s->kvio < ktol)) return false;
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    if (!(s->x[orth_[e]] >= 0 && s->z[orth_[e]] >= -rtol)) return false;
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], nrm = soc_nrm_[e];
    double x2 = 0;
    for (int r = f; r < f + soc_cnt_[e]; r++) x2 += s->x[r] * s->x[r];
    if (!(std::sqrt(x2) <= (nrm >= 0 ? s->x[nrm] : bound_[f]) * (1 + kAnswerCone))) return false;
  }
  // the cone variables moved onto the central path at kappa_tol for the tangent's terms (the
  // measures stay the answer's): an orthant pair keeps x - z
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    const double ki = cfd_kappa_[i] > 0 ? cfd_kappa_[i] : st.kappa_tol;
    const double w = s->x[i] - s->z[i], r = std::sqrt(w * w + 4 * ki);
    const double big = 0.5 * (std::fabs(w) + r), small = ki / big;
    s->x[i] = w > 0 ? big : small;
    s->z[i] = w > 0 ? small : big;
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) AnswerCone(p, e, st.kappa_tol);
  return true;
}

void IpmSolver::AnswerCone(const Problem& p, int e, double kappa) {
  // the cone's pair (x0, xi t), (eta0, zeta t) along the tail direction t: on the central path
  // eta0 = kappa x0 / (x0^2 - xi^2), zeta = -kappa xi / (x0^2 - xi^2) with x0 fixed (the normal's
  // smoothed impulse or the friction-loss bound); a sticking cone (its force's distance to the
  // boundary x0 - xi above its slip's 2 |zeta|) keeps that distance, smoothed as an orthant
  // pair's, a sliding or open one its slip
  State* s = &cen_;
  const int f = soc_row_[e], cnt = soc_cnt_[e], nrm = soc_nrm_[e];
  const double x0 = nrm >= 0 ? s->x[nrm] : bound_[f];
  double t[2] = {0, 0}, tn = 0;
  for (int r = 0; r < cnt; r++) {
    t[r] = s->x[f + r] - s->z[f + r];
    tn += t[r] * t[r];
  }
  tn = std::sqrt(tn);
  if (!(tn > 0)) t[0] = tn = 1;
  double xi = 0, zeta = 0;
  for (int r = 0; r < cnt; r++) {
    t[r] /= tn;
    xi += t[r] * s->x[f + r];
    zeta += t[r] * s->z[f + r];
  }
  const double w = (x0 - xi) - 2 * std::fabs(zeta), r = std::sqrt(w * w + 4 * kappa);
  const double stick = x0 - 0.5 * (w + r);  // x0 - the smoothed distance
  if (w > 0 && std::fabs(stick) < x0) {
    xi = stick;
  } else {
    xi = -2 * zeta * x0 * x0 / (kappa + std::sqrt(kappa * kappa + 4 * zeta * zeta * x0 * x0));
  }
  const double det = (x0 - xi) * (x0 + xi);
  s->z0[f] = kappa * x0 / det;
  for (int c = 0; c < cnt; c++) {
    s->x[f + c] = xi * t[c];
    s->z[f + c] = -kappa * xi / det * t[c];
  }
}

bool IpmSolver::TangentJacobian(const Problem& p, int k) {
  if ((mode_want_[k] != mode_cur_[k] || mode_new_[k]) && !ModeTerms(p, k)) return false;
  if (lu_island_ != k) {
    // the island's exact Jacobian at its central point (its cone terms are still in place)
    double cond;
    if (!lu_.Analyze(p, k, chain_.data(), IslandLU::kAuto, gapJ_) || !Linearize(p, k, true, &cond))
      return false;
    lu_island_ = k;
  }
  return true;
}

bool IpmSolver::TangentRhs(const Problem& p, int k, const ProblemTangent& dir, bool free_term) {
  if (!TangentJacobian(p, k)) return false;
  stats_.tangent_islands++;
  TangentResiduals(p, k, dir, cen_, free_term);
  // contacts from distance: their central-path value moves with the data
  bool cfd = false;
  const IslandLists& L = lists_[k];
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    double dk = 0;
    if (cfd_kappa_[i] > 0 && !(mode_cur_[k] && row_moded_[i])) CfdKappa(p, i, &dir, &dk);
    dcomp_[i] = dk / cen_.z[i];
    cfd |= cfd_kappa_[i] > 0;
  }
  // a direction that leaves the rows alone (controls, velocities: dv_free only) has zero
  // constants and the right-hand side -drv, Constants' values without its pass over J
  const int* rows = Rows(p, k);
  bool rowless = true;
  for (int a = 0; a < NumRows(p, k) && rowless; a++) {
    rowless = drz_[rows[a]] == 0 && (!cfd || dcomp_[rows[a]] == 0);
  }
  if (rowless) {
    for (int a = 0; a < NumRows(p, k); a++) c_[rows[a]] = 0;
    const int* dofs = Dofs(p, k);
    for (int a = 0; a < NumDofs(p, k); a++) rhs_[dofs[a]] = -drv_[dofs[a]];
    return true;
  }
  Constants(p, k, drz_.data(), drv_.data(), false, cfd ? dcomp_.data() : nullptr);
  return true;
}

bool IpmSolver::Defect(const Problem& p, int k) {
  // one step of iterative refinement: the row and cone equations hold by construction (back
  // substitution), the dynamics M dv - J' dlam = -drv only to the accuracy of the reduced
  // solve, whose condition grows as 1/kappa near the hard-contact limit (and with hard
  // equality rows' 1e-10 regularizer): measured 5e-6 relative errors on the humanoid, 2e-4 on
  // the mechanism's redundant loop before. The correction solves the same system for the
  // dynamics defect with zero row residuals: here its right-hand side -drv into rhs_, and zero
  // row constants (at zero row residuals every row's constant is zero: no J' c to add)
  DynamicsChange(p, k, &dir_);
  const int* dofs = Dofs(p, k);
  double defect = 0, scale = 0;
  for (int a = 0; a < NumDofs(p, k); a++) {
    const int j = dofs[a];
    scale = std::max(scale, std::max(std::fabs(drv_[j]), std::fabs(dir_.rv[j])));
    drv_[j] += dir_.rv[j];
    defect = std::max(defect, std::fabs(drv_[j]));
  }
  if (defect <= kRefineTol * scale) return false;
  const int* rows = Rows(p, k);
  for (int a = 0; a < NumRows(p, k); a++) drz_[rows[a]] = c_[rows[a]] = 0;
  for (int a = 0; a < NumDofs(p, k); a++) rhs_[dofs[a]] = -drv_[dofs[a]];
  stats_.refinements++;
  return true;
}

bool IpmSolver::ForceTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                             double* dforce) {
  // implicit function theorem at the central point kappa_grad: R dw = -dF/dtheta dir
  for (int i = 0; i < p.nrow; i++) dforce[i] = 0;
  if (dir.touched) {
    std::copy(dir.touched, dir.touched + p.islands.nisland, touched_.begin());
  } else {
    reach_.Mark(p, dir, touched_.data());
  }
  for (int k = 0; k < p.islands.nisland; k++) {
    // a direction that leaves the island's data alone (most move one kinematic tree) has no
    // tangent there: no solve, and lu_ keeps the island it holds; an island ipm cannot center
    // fails only the directions that touch it
    if (!touched_[k]) continue;
    if (!Center(p, k)) {
      // (the step's answer there is no central point: differences of the island's solve)
      if (!IslandDifference(p, k, dir, dforce)) return false;
      continue;
    }
    if (!TangentRhs(p, k, dir)) return false;
    Direct(p, k, cen_, drz_.data(), false, &dir_);
    const int* rows = Rows(p, k);
    if (Defect(p, k)) {
      Direct(p, k, cen_, drz_.data(), false, &aff_);
      for (int a = 0; a < NumRows(p, k); a++) dir_.lam[rows[a]] += aff_.lam[rows[a]];
    }
    for (int a = 0; a < NumRows(p, k); a++) dforce[rows[a]] = dir_.lam[rows[a]] / p.h;
  }
  return true;
}

bool IpmSolver::QueueTangent(const Problem& p, const ProblemTangent& dir, int slot) {
  // ForceTangent up to the solve on the one island: the right-hand side into column slot of
  // blk_v_, the row constants, row and dynamics perturbations into the slot's rows, all without
  // the term M dv_free, and dv_free into column slot of blk_f_ (FlushTangents adds M dv_free of
  // all slots at once)
  const int k = 0, S = kTangentSlots, nr = p.nrow;
  if (p.islands.nisland != 1 || slot < 0 || slot >= S || !Center(p, k)) return false;
  if (dir.touched) {
    blk_on_[slot] = dir.touched[k];
  } else {
    reach_.Mark(p, dir, touched_.data());
    blk_on_[slot] = touched_[k];
  }
  const int* dofs = Dofs(p, k);
  const int* rows = Rows(p, k);
  const int nd = NumDofs(p, k);
  blk_mf_[slot] = !dir.v_free;  // (deferred, or no dv_free: M dv_free formed here)
  if (!blk_on_[slot]) {
    for (int a = 0; a < nd; a++) {
      blk_v_[static_cast<size_t>(dofs[a]) * S + slot] = 0;
      blk_f_[static_cast<size_t>(dofs[a]) * S + slot] = 0;
      blk_rv_[static_cast<size_t>(dofs[a]) * S + slot] = 0;
    }
    return true;
  }
  if (!TangentRhs(p, k, dir, false)) return false;
  double* c = blk_c_.data() + static_cast<size_t>(slot) * nr;
  double* rz = blk_rz_.data() + static_cast<size_t>(slot) * nr;
  for (int a = 0; a < nd; a++) {
    const int j = dofs[a];
    const double* x = dir.v_free ? dir.v_free : dir.v_free_rhs;
    blk_v_[static_cast<size_t>(j) * S + slot] = rhs_[j];
    blk_f_[static_cast<size_t>(j) * S + slot] = !x ? 0 : dir.v_free ? x[j] : p.h * x[j];
    blk_rv_[static_cast<size_t>(j) * S + slot] = drv_[j];
  }
  // deferred dv_free = e_unit + h M^-1 x: M dv_free = M e_unit + h x
  const int u = dir.v_free ? -1 : dir.v_free_unit;
  if (u >= 0) {
    const int t = p.dof_tree[u];
    const int e = p.islands.tree_dofadr[t] + p.islands.tree_dofnum[t];
    AddMassColumn(p.mass, u, e, blk_f_.data() + slot, S);
  }
  for (int a = 0; a < NumRows(p, k); a++) {
    c[rows[a]] = c_[rows[a]];
    rz[rows[a]] = drz_[rows[a]];
  }
  return true;
}

bool IpmSolver::FlushTangents(const Problem& p, int nslot, double* dforce) {
  // the queued slots' solves at once (their right-hand sides with M dv_free added at once), each
  // column's rows and refinement defect, the refinements' solves at once (columns without one
  // solve zeros), the forces
  const int k = 0, S = kTangentSlots, nr = p.nrow;
  if (p.islands.nisland != 1 || nslot > S) return false;
  for (int i = 0; i < nr * nslot; i++) dforce[i] = 0;
  bool any = false;
  for (int s = 0; s < nslot; s++) any |= blk_on_[s] != 0;
  if (!any) return true;
  const int* dofs = Dofs(p, k);
  const int* rows = Rows(p, k);
  const int nd = NumDofs(p, k), m = NumRows(p, k);
  // M dv_free of all slots (zero where off) added to the right-hand sides, then kept in blk_f_
  // for the defects (drv = rv - M dv_free)
  // (the deferred slots' M dv_free already in blk_f_: the product only for the others)
  bool formed = true;
  for (int s = 0; s < nslot; s++) formed &= blk_mf_[s] != 0;
  if (!formed) {
    MassTimesBlock(p, k, nslot, blk_f_.data(), S, blk_p_.data());
    for (int a = 0; a < nd; a++) {
      const size_t at = static_cast<size_t>(dofs[a]) * S;
      for (int s = 0; s < nslot; s++) {
        if (blk_mf_[s]) blk_p_[at + s] = blk_f_[at + s];
      }
    }
    std::swap(blk_p_, blk_f_);
  }
  for (int a = 0; a < nd; a++) {
    double* x = blk_v_.data() + static_cast<size_t>(dofs[a]) * S;
    const double* mf = blk_f_.data() + static_cast<size_t>(dofs[a]) * S;
    for (int s = 0; s < nslot; s++) x[s] += mf[s];
  }
  lu_.SolveColumns(blk_v_.data(), nslot, S);
  BlockRows(p, k, nslot);
  bool refine = false;
  for (int s = 0; s < nslot; s++) {
    double* lam = dforce + static_cast<size_t>(s) * nr;
    if (!blk_on_[s]) continue;
    const double* c = blk_c_.data() + static_cast<size_t>(s) * nr;
    const double* rz = blk_rz_.data() + static_cast<size_t>(s) * nr;
    TangentImpulses(p, k, rz, c, s, lam);
  }
  // each column's refinement defect (Defect's) from the dynamics changes of all at once
  BlockDynamics(p, k, nslot, dforce);
  double defect[kTangentSlots] = {}, scale[kTangentSlots] = {};
  for (int a = 0; a < nd; a++) {
    const size_t at = static_cast<size_t>(dofs[a]) * S;
    double* rv = blk_rv_.data() + at;
    const double* mf = blk_f_.data() + at;
    const double* dyn = blk_p_.data() + at;
    for (int s = 0; s < nslot; s++) {
      rv[s] -= mf[s];  // drv
      const double d = rv[s] + dyn[s];
      scale[s] = std::max(scale[s], std::max(std::fabs(rv[s]), std::fabs(dyn[s])));
      defect[s] = std::max(defect[s], std::fabs(d));
    }
  }
  for (int s = 0; s < nslot; s++) {
    if (!blk_on_[s]) continue;
    const bool on = defect[s] > kRefineTol * scale[s];
    blk_on_[s] = on ? 2 : 1;
    refine |= on;
    stats_.refinements += on;
  }
  for (int a = 0; a < nd; a++) {
    const size_t at = static_cast<size_t>(dofs[a]) * S;
    const double* rv = blk_rv_.data() + at;
    const double* dyn = blk_p_.data() + at;
    double* x = blk_v_.data() + at;
    for (int s = 0; s < nslot; s++) x[s] = blk_on_[s] == 2 ? -(rv[s] + dyn[s]) : 0;
  }
  if (refine) {
    lu_.SolveColumns(blk_v_.data(), nslot, S);
    BlockRows(p, k, nslot);
    for (int a = 0; a < m; a++) drz_[rows[a]] = c_[rows[a]] = 0;
    for (int s = 0; s < nslot; s++) {
      if (blk_on_[s] != 2) continue;
      double* lam = dforce + static_cast<size_t>(s) * nr;
      TangentImpulses(p, k, nullptr, nullptr, s, aff_.lam);
      for (int a = 0; a < m; a++) lam[rows[a]] += aff_.lam[rows[a]];
    }
  }
  for (int s = 0; s < nslot; s++) {
    double* f = dforce + static_cast<size_t>(s) * nr;
    for (int a = 0; a < m; a++) f[rows[a]] /= p.h;
  }
  return true;
}

void IpmSolver::RowAdjoint(const Problem& p, int k, const double* y, bool dynamics, double* out) {
  // the rows' relations (DirectRows, Constants): equality lam = c - u / R, c = -drz / R;
  // orthant lam = c - og u, c = og drz + dcomp; a friction row f + r of a cone with normal row n
  // lam = s_r (q_r lam_n - sum_c S_rc z_c), z_c = s_c u_c - drz_c, so that W and C share the
  // normal's weight y_n + sum_r s_r q_r y_r
  const IslandLists& L = lists_[k];
  for (int e = L.eq_adr; e < L.eq_adr + L.eq_num; e++) {
    const int i = eq_[e];
    out[i] = (dynamics ? y[i] : -y[i]) / reg_[i];
  }
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) adj_n_[orth_[e]] = y[orth_[e]];
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], nrm = soc_nrm_[e];
    const double* q = sq_.data() + 2 * e;
    const double* S = sS_.data() + 4 * e;
    for (int c = 0; c < cnt; c++) {
      double v = 0;
      for (int r = 0; r < cnt; r++) v += scale_[f + r] * S[r * cnt + c] * y[f + r];
      out[f + c] = dynamics ? scale_[f + c] * v : v;
    }
    if (nrm < 0) continue;
    for (int r = 0; r < cnt; r++) adj_n_[nrm] += scale_[f + r] * q[r] * y[f + r];
  }
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    out[i] = og_[i] * adj_n_[i];
  }
}

bool IpmSolver::AdjointDefect(const Problem& p, int k) {
  // the transposed system K' (-w, t) = (0, y / h) holds its rows by construction (t = y / h -
  // J w), its dynamics -A' w + G' W' y / h = 0 only to the accuracy of the transposed solve: the
  // defect e = M w - G' W' t, corrected by w -= A^-T e, t += J A^-T e (as Defect for dir_)
  const Islands& is = p.islands;
  const int* dofs = Dofs(p, k);
  const int nd = NumDofs(p, k);
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
    const int b = is.tree_dofadr[is.trees[t]];
    p.mass.Mul(adj_w_.data(), rhs_.data(), b, b + is.tree_dofnum[is.trees[t]]);
  }
  for (int a = 0; a < nd; a++) tmp_[dofs[a]] = 0;
  RowAdjoint(p, k, adj_t_.data(), true, adj_u_.data());
  for (int a = 0; a < nr; a++) gapJ_->AddRowTo(rows[a], adj_u_[rows[a]], tmp_.data());
  double defect = 0, scale = 0;
  for (int a = 0; a < nd; a++) {
    const int j = dofs[a];
    scale = std::max(scale, std::max(std::fabs(rhs_[j]), std::fabs(tmp_[j])));
    rhs_[j] -= tmp_[j];
    defect = std::max(defect, std::fabs(rhs_[j]));
  }
  if (defect <= kRefineTol * scale) return false;
  lu_.SolveTranspose(rhs_.data());
  for (int a = 0; a < nd; a++) adj_w_[dofs[a]] -= rhs_[dofs[a]];
  for (int a = 0; a < nr; a++) adj_t_[rows[a]] += p.J.Dot(rows[a], rhs_.data());
  stats_.adjoint_refined++;
  return true;
}

bool IpmSolver::PrepareAdjoint(const Problem& p, const Solution& sol, const double* y,
                               const double* xi) {
  // island by island, the tangent system M dv - J' dlam = -drv, dlam = c - W G dv, c = C drz +
  // dcomp (G: the rows that measure velocities) gives y' dlam / h = t' c + w' drv with w = A^-T
  // G' W' y / h (A = M + J' W G) and t = y / h - J w: adj_z_ = C' t, adj_n_ the orthant rows'
  // t for dcomp. Refined like the forward solve (AdjointDefect)
  if (xi) return false;
  const double h = p.h;
  for (int k = 0; k < p.islands.nisland; k++) {
    if (!Center(p, k) || !TangentJacobian(p, k)) return false;
    if (gapJ_ != &p.J && lu_.constraint_space()) return false;
    stats_.adjoint_islands++;
    const int* dofs = Dofs(p, k);
    const int nd = NumDofs(p, k);
    const int* rows = Rows(p, k);
    const int nr = NumRows(p, k);
    for (int a = 0; a < nr; a++) adj_t_[rows[a]] = y[rows[a]] / h;
    RowAdjoint(p, k, adj_t_.data(), true, adj_u_.data());
    for (int a = 0; a < nd; a++) adj_w_[dofs[a]] = 0;
    for (int a = 0; a < nr; a++) gapJ_->AddRowTo(rows[a], adj_u_[rows[a]], adj_w_.data());
    lu_.SolveTranspose(adj_w_.data());
    for (int a = 0; a < nr; a++) adj_t_[rows[a]] -= p.J.Dot(rows[a], adj_w_.data());
    AdjointDefect(p, k);
    RowAdjoint(p, k, adj_t_.data(), false, adj_z_.data());
    AdjointWeights(p, k);
  }
  return true;
}

void IpmSolver::AdjointWeights(const Problem& p, int k) {
  // TangentResiduals' terms: drv = dM (v - v_free) - M dv_free - dJ' lam and drz = -scale dJ v
  // (negated on equality rows), so that w' drv + z' drz = w' dM (v - v_free) - (M w)' dv_free +
  // sum over dJ's entries of dJ (-lam w -+ z scale v)
  const Islands& is = p.islands;
  const SparseRows& J = p.J;
  for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
    const int b = is.tree_dofadr[is.trees[t]], e = b + is.tree_dofnum[is.trees[t]];
    p.mass.Mul(adj_w_.data(), adj_mw_.data(), b, e);
    for (int j = b; j < e; j++) adj_dv_[j] = cen_.v[j] - p.v_free[j];
  }
  const int* rows = Rows(p, k);
  for (int a = 0; a < NumRows(p, k); a++) {
    const int i = rows[a], adr = J.rowadr[i];
    const double cv = (p.kind[i] == kRowEquality ? 1 : -1) * adj_z_[i] * scale_[i];
    const double cw = -cen_.lam[i];
    for (int c = adr; c < adr + J.rownnz[i]; c++) {
      adj_gj_[c] = cv * cen_.v[J.colind[c]] + cw * adj_w_[J.colind[c]];
    }
  }
}

double IpmSolver::IslandAdjointDot(const Problem& p, int k, const ProblemTangent& dir) {
  // the products of AdjointWeights with the direction's arrays, the rows' own terms
  // (TangentResiduals') and the contacts from distance's dcomp
  const Islands& is = p.islands;
  const SparseRows& J = p.J;
  const IslandLists& L = lists_[k];
  const double h = p.h;
  double s = 0;
  for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
    const int b = is.tree_dofadr[is.trees[t]], e = b + is.tree_dofnum[is.trees[t]];
    if (dir.v_free) {
      for (int j = b; j < e; j++) s -= adj_mw_[j] * dir.v_free[j];
    }
    const double* dM = dir.M ? dir.Mass() : nullptr;
    if (dir.M && !dir.M_rows) {
      for (int i = b; i < e; i++) s += RowBilinear(p.mass, dM, i, adj_w_.data(), adj_dv_.data());
    } else if (dir.M && dir.M_nrows > 0 && dir.M_rows[0] >= b && dir.M_rows[0] < e) {
      for (int r = 0; r < dir.M_nrows; r++) {
        s += RowBilinear(p.mass, dM, dir.M_rows[r], adj_w_.data(), adj_dv_.data());
      }
    }
  }
  const int* rows = Rows(p, k);
  for (int a = 0; a < NumRows(p, k) && dir.J; a++) {
    const int i = rows[a], adr = J.rowadr[i];
    for (int c = adr; c < adr + J.rownnz[i]; c++) s += dir.J[c] * adj_gj_[c];
  }
  // (without row arrays, AdjointRowWeights' terms: none, dkappa included)
  const bool moved = dir.J || dir.pos || dir.vel || dir.R || dir.aref || dir.diag_approx;
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num && moved; e++) {
    const int i = orth_[e];
    if (dir.pos && !capped_[i]) s -= adj_z_[i] * dir.pos[i] / h;
    if (!(cfd_kappa_[i] > 0) || (mode_cur_[k] && row_moded_[i])) continue;
    double dk;
    CfdKappa(p, i, &dir, &dk);
    s += adj_n_[i] * dk / cen_.z[i];
  }
  for (int e = L.eq_adr; e < L.eq_adr + L.eq_num && moved; e++) {
    const int i = eq_[e];
    double dz = 0;
    if (settings_.ipm.soft_equality) {
      if (dir.vel) dz -= dir.vel[i];
      if (dir.aref) dz -= h * dir.aref[i];
      if (dir.R && p.R[i] > 1e-15) dz += dir.R[i] * cen_.lam[i];
    } else if (dir.pos) {
      dz += dir.pos[i] / h;
    }
    s += adj_z_[i] * dz;
  }
  return s;
}

double IpmSolver::AdjointDot(const Problem& p, const Solution& sol, const ProblemTangent& dir) {
  // over the touched islands: products with PrepareAdjoint's weights, nothing solved
  if (dir.touched) {
    std::copy(dir.touched, dir.touched + p.islands.nisland, touched_.begin());
  } else {
    reach_.Mark(p, dir, touched_.data());
  }
  double s = 0;
  for (int k = 0; k < p.islands.nisland; k++) {
    if (touched_[k]) s += IslandAdjointDot(p, k, dir);
  }
  return s;
}

bool IpmSolver::AdjointRowWeights(const Problem& p, const Solution& sol, RowWeights* w) const {
  // IslandAdjointDot's row products; a contact from distance's dcomp (CfdKappa): none
  const SparseRows& J = p.J;
  const double h = p.h;
  for (int k = 0; k < p.islands.nisland; k++) {
    const IslandLists& L = lists_[k];
    for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
      const int i = orth_[e];
      if (cfd_kappa_[i] > 0 && !(mode_cur_[k] && row_moded_[i])) return false;
      if (!capped_[i]) w->pos[i] -= adj_z_[i] / h;
    }
    const int* rows = Rows(p, k);
    for (int a = 0; a < NumRows(p, k); a++) {
      const int i = rows[a];
      for (int c = J.rowadr[i]; c < J.rowadr[i] + J.rownnz[i]; c++) w->J[c] += adj_gj_[c];
    }
    for (int e = L.eq_adr; e < L.eq_adr + L.eq_num; e++) {
      const int i = eq_[e];
      if (!settings_.ipm.soft_equality) {
        w->pos[i] += adj_z_[i] / h;
        continue;
      }
      w->vel[i] -= adj_z_[i];
      w->aref[i] -= h * adj_z_[i];
      if (p.R[i] > 1e-15) w->R[i] += adj_z_[i] * cen_.lam[i];
    }
  }
  return true;
}

void IpmSolver::TangentImpulses(const Problem& p, int k, const double* rz, const double* c, int s,
                                double* lam) {
  // DirectRows' impulses (with_d false) alone, of slot s: its rows' velocities from blk_u_
  const IslandLists& L = lists_[k];
  const double* u = blk_u_.data() + s;
  constexpr size_t S = kTangentSlots;
  for (int e = L.eq_adr; e < L.eq_adr + L.eq_num; e++) {
    const int i = eq_[e];
    lam[i] = (c ? c[i] : 0) - u[i * S] / reg_[i];
  }
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    lam[i] = (c ? c[i] : 0) - og_[i] * u[i * S];
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], nrm = soc_nrm_[e], n = cnt + 1;
    const double* G = sG_.data() + 9 * e;
    double dz[2] = {0, 0};
    for (int r = 0; r < cnt; r++) dz[r] = scale_[f + r] * u[(f + r) * S] - (rz ? rz[f + r] : 0);
    double z0 = 0 - (nrm >= 0 ? lam[nrm] : 0);
    for (int c2 = 0; c2 < cnt; c2++) z0 -= G[c2 + 1] * dz[c2];
    z0 /= G[0];
    for (int r = 0; r < cnt; r++) {
      double v = 0 - G[(r + 1) * n] * z0;
      for (int c2 = 0; c2 < cnt; c2++) v -= G[(r + 1) * n + c2 + 1] * dz[c2];
      lam[f + r] = scale_[f + r] * v;
    }
  }
}

void IpmSolver::BlockRows(const Problem& p, int k, int nslot) {
  // DirectRows' J dv (the rows that measure velocities) with every entry applied to all columns,
  // a contact's rows that share their columns at once (each row's sums as alone)
  const SparseRows& G = *gapJ_;
  const size_t S = kTangentSlots;
  const double* X = blk_v_.data();
  const int* rows = Rows(p, k);
  const int m = NumRows(p, k);
  for (int a = 0; a < m;) {
    const int i = rows[a], adr = G.rowadr[i], n = G.rownnz[i];
    int g = 1;
    while (g < kRowGroup && a + g < m && rows[a + g] == i + g && SamePattern(G, i, i + g)) g++;
    const double* val[kRowGroup];
    double* u[kRowGroup];
    for (int r = 0; r < g; r++) {
      val[r] = G.val + G.rowadr[i + r];
      u[r] = blk_u_.data() + (i + r) * S;
    }
    const int* col = G.colind + adr;
    if (g == 3) {
      columns::RowsTimesAll<3>(val, col, n, X, S, nslot, u);
    } else if (g == 2) {
      columns::RowsTimesAll<2>(val, col, n, X, S, nslot, u);
    } else {
      columns::RowTimesAll(val[0], col, n, X, S, nslot, u[0]);
    }
    a += g;
  }
}

void IpmSolver::BlockDynamics(const Problem& p, int k, int nslot, const double* lam) {
  // DynamicsChange's M dv - J' lam with every entry of M and J applied to all columns
  const SparseRows& J = p.J;
  const int nr = p.nrow;
  const size_t S = kTangentSlots;
  double* P = blk_p_.data();
  MassTimesBlock(p, k, nslot, blk_v_.data(), S, P);
  // J' lam, a contact's rows that share their columns at once (each entry's terms in row order)
  const int* rows = Rows(p, k);
  const int m = NumRows(p, k);
  double l[kRowGroup][kTangentSlots];
  auto gather = [&](int i, double* li) {
    bool any = false;
    for (int s = 0; s < nslot; s++) {
      li[s] = lam[static_cast<size_t>(s) * nr + i];
      any |= li[s] != 0;
    }
    return any;
  };
  for (int a = 0; a < m;) {
    const int i = rows[a];
    if (!gather(i, l[0])) {
      a++;
      continue;
    }
    int g = 1;
    while (g < kRowGroup && a + g < m && rows[a + g] == i + g && SamePattern(J, i, i + g) &&
           gather(i + g, l[g])) {
      g++;
    }
    const double* val[kRowGroup];
    for (int r = 0; r < g; r++) val[r] = J.val + J.rowadr[i + r];
    const int* col = J.colind + J.rowadr[i];
    if (g == 3) {
      SubRowsT<3>(val, col, J.rownnz[i], l, nslot, S, P);
    } else if (g == 2) {
      SubRowsT<2>(val, col, J.rownnz[i], l, nslot, S, P);
    } else {
      SubRowsT<1>(val, col, J.rownnz[i], l, nslot, S, P);
    }
    a += g;
  }
}

bool IpmSolver::SetTangentModes(const Problem& p, const signed char* mode) {
  // islands whose contacts' modes differ from those their cone terms carry are marked; ModeTerms
  // re-forms them at their next tangent
  mode_keep_ = false;
  for (int k = 0; k < p.islands.nisland; k++) {
    const IslandLists& L = lists_[k];
    bool want = false, changed = false;
    for (int e = L.con_adr; e < L.con_adr + L.con_num && mode; e++) {
      const int i = con_[e], c = con_of_row_[i];
      want |= mode[c] >= 0;
      mode_keep_ |= mode[c] >= 0 && (mode[c] == 0) == Closed(p, i);
      changed |= mode[c] != (modes_on_ ? mode_[c] : -1);
    }
    mode_want_[k] = want;
    mode_new_[k] |= changed;
  }
  for (int c = 0; c < p.ncon && mode; c++) mode_[c] = mode[c];
  modes_on_ = mode != nullptr;
  return true;
}

bool IpmSolver::ModeTerms(const Problem& p, int k) {
  // the exact cone terms at the central point, then per contact whose mode reclassifies it: 0 on
  // a closed one holds its impulse (normal and friction rows leave the tangent: dx = 0 whatever
  // dz), 1 on an open one clamps its normal row (dz = 0, as a hard equality)
  if (!ConeJacobians(p, k, cen_, false)) return false;
  const IslandLists& L = lists_[k];
  const bool on = modes_on_ && mode_want_[k];
  for (int e = L.con_adr; e < L.con_adr + L.con_num; e++) {
    const int i = con_[e], m = on ? mode_[con_of_row_[i]] : -1;
    row_moded_[i] = 0;
    if (m < 0 || (m == 1) == Closed(p, i)) continue;
    row_moded_[i] = 1;
    if (m == 1) {
      og_[i] = 1 / std::max(kClampReg * p.diag_approx[i], 1e-300);
      continue;
    }
    og_[i] = 0;
    for (int g = con_soc_[e]; g < L.soc_adr + L.soc_num && soc_nrm_[g] == i; g++) {
      const int cnt = soc_cnt_[g], n = cnt + 1;
      double* G = sG_.data() + 9 * g;
      for (int r = 1; r < n; r++) {
        for (int c = 0; c < n; c++) G[r * n + c] = 0;
      }
      for (int r = 0; r < cnt; r++) sq_[2 * g + r] = 0;
      for (int r = 0; r < cnt * cnt; r++) sS_[4 * g + r] = 0;
    }
  }
  mode_cur_[k] = on;
  mode_new_[k] = 0;
  if (lu_island_ == k) lu_island_ = -1;  // lu_ held the island's other terms
  return true;
}

}  // namespace ipm
}  // namespace contactkit
