// Copyright 2026 The contactkit developers.
//
// ipm's force tangent of an island Center cannot reach (its solve ends off the central path: a
// stalled island, docs/derivatives.md eleventh and eighteenth passes): a forward difference of
// that island's own solve along the direction's data tangent, every other island and the rest of
// the step differentiated as before. It stands in for a forward difference of the whole step in
// that column (DeferColumn: one ck_step of the whole model per column).
#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "solvers/ipm/ipm_solver.h"

namespace contactkit {
namespace ipm {
namespace {

// out = base + e d on the rows listed (d null: base), out elsewhere untouched
void MoveRows(const double* base, const double* d, double e, const int* rows, int n, double* out) {
  for (int a = 0; a < n; a++) {
    const int i = rows[a];
    out[i] = d ? base[i] + e * d[i] : base[i];
  }
}

}  // namespace

void IpmSolver::AllocateDifference(const ProblemDims& dims) {
  // (Setup's, which catches std::bad_alloc)
  const size_t R = std::max(1, dims.max_rows), V = std::max(1, dims.nv);
  const size_t T = std::max(1, dims.ntree), NM = std::max(1, dims.nM);
  win_attempt_.assign(T, -1);
  win_steps_.assign(T, 0);
  for (auto* v : {&dif_v_, &dif_Dinv_}) v->assign(V, 0);
  for (auto* v : {&dif_M_, &dif_LD_}) v->assign(NM, 0);
  dif_J_.assign(std::max(1, dims.max_nnz), 0);
  for (auto* v : {&dif_pos_, &dif_vel_, &dif_aref_, &dif_R_, &dif_diag_, &dif_lam_}) {
    v->assign(R, 0);
  }
}

bool IpmSolver::DifferenceApplies(const Problem& p, int k, const ProblemTangent& dir) const {
  // the step's own derivative (a smoothed kappa_grad asks for a central point), no gap re-check
  // (its second solve starts warm from the first), no contact from distance or tangent mode (the
  // derivative's own surrogates), and every datum the solve reads known along the direction (dM
  // itself, not its forms)
  if (island_difference_off_ || !GradAtEnd() || mode_want_[k]) return false;
  if (settings_.ipm.gap_recheck > 0 && p.regap) return false;
  if (dir.M_forms && !dir.M) return false;
  const int* rows = Rows(p, k);
  for (int a = 0; a < NumRows(p, k); a++) {
    if (CfdRow(p, rows[a])) return false;
  }
  return true;
}

void IpmSolver::MovedProblem(const Problem& p, int k, const ProblemTangent& dir, double e,
                             Problem* q) {
  // q: p with island k's data moved by e along dir (v_free, M and its factor on the island's
  // trees, J's values, positions and the soft rows' data on its rows)
  const Islands& is = p.islands;
  const TreeMass& m = p.mass;
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  *q = p;
  q->v_free = dif_v_.data();
  q->mass.M = dif_M_.data();
  q->mass.LD = dif_LD_.data();
  q->mass.Dinv = dif_Dinv_.data();
  q->J.val = dif_J_.data();
  // (only the island's entries: its solve reads no others; M over the island's dof range,
  // which IslandLU's tree-sparse layout reads whole)
  const int* dofs = Dofs(p, k);
  const int d0 = dofs[0], d1 = dofs[NumDofs(p, k) - 1];
  int m1 = m.madr[d1];
  for (int a = d1; a >= 0; a = m.parent[a]) m1++;
  std::copy(m.M + m.madr[d0], m.M + m1, dif_M_.begin() + m.madr[d0]);
  std::copy(m.LD + m.madr[d0], m.LD + m1, dif_LD_.begin() + m.madr[d0]);
  std::copy(m.Dinv + d0, m.Dinv + d1 + 1, dif_Dinv_.begin() + d0);
  std::copy(p.v_free + d0, p.v_free + d1 + 1, dif_v_.begin() + d0);
  for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
    const int b = is.tree_dofadr[is.trees[t]], end = b + is.tree_dofnum[is.trees[t]];
    for (int j = b; j < end && dir.v_free; j++) dif_v_[j] += e * dir.v_free[j];
    if (!dir.M) continue;
    const double* dM = dir.Mass();
    for (int j = b; j < end; j++) {
      // row j's entries: its diagonal, then one per ancestor (dM zero off M_rows when given)
      if (dir.M_rows && !std::binary_search(dir.M_rows, dir.M_rows + dir.M_nrows, j)) continue;
      int adr = m.madr[j];
      for (int a = j; a >= 0; a = m.parent[a]) dif_M_[adr] += e * dM[adr], adr++;
    }
    q->mass.Factor(b, end);
  }
  for (int a = 0; a < nr; a++) {
    const int i = rows[a];
    for (int c = p.J.rowadr[i]; c < p.J.rowadr[i] + p.J.rownnz[i]; c++) {
      dif_J_[c] = dir.J ? p.J.val[c] + e * dir.J[c] : p.J.val[c];
    }
  }
  MoveRows(pos_.data(), dir.pos, e, rows, nr, dif_pos_.data());
  MoveRows(p.vel, dir.vel, e, rows, nr, dif_vel_.data());
  MoveRows(p.aref, dir.aref, e, rows, nr, dif_aref_.data());
  MoveRows(p.R, dir.R, e, rows, nr, dif_R_.data());
  MoveRows(p.diag_approx, dir.diag_approx, e, rows, nr, dif_diag_.data());
  q->pos = dif_pos_.data();
  q->vel = dif_vel_.data();
  q->aref = dif_aref_.data();
  q->R = dif_R_.data();
  q->diag_approx = dif_diag_.data();
}

void IpmSolver::PrepareIsland(const Problem& p, int k, const double* pos) {
  // Prepare's data-dependent terms of island k's rows and dofs
  const int* rows = Rows(p, k);
  for (int a = 0; a < NumRows(p, k); a++) PrepareRow(p, pos, rows[a]);
  const int* dofs = Dofs(p, k);
  for (int a = 0; a < NumDofs(p, k); a++) mdiag_[dofs[a]] = p.mass.M[p.mass.madr[dofs[a]]];
}

bool IpmSolver::IslandDifference(const Problem& p, int k, const ProblemTangent& dir,
                                 double* dforce) {
  // island k solved again on its data moved by island_nudge_ along dir (no Center), its impulses'
  // forward difference against the step's answer: where the step kept an attempt from a cold
  // start as it was (win_attempt_), that attempt alone for as many steps (a smooth function of
  // the data that gives the step's answer bit for bit at zero), else as the step solves it
  // (every attempt, the polish, the last resorts); the solver's state of the step restored after
  if (!DifferenceApplies(p, k, dir)) return false;
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  Problem q;
  MovedProblem(p, k, dir, island_nudge_, &q);
  const IpmStats stats = stats_;
  const uint8_t grad_ok = grad_ok_[k], centered = centered_[k];
  const double grad_kappa = grad_kappa_[k];
  const SparseRows* gapJ = gapJ_;
  for (int a = 0; a < nr; a++) dif_lam_[rows[a]] = out_lam_[rows[a]];
  PrepareIsland(q, k, q.pos);
  gapJ_ = &q.J;
  lu_island_ = -1;
  bool ok = lu_.Analyze(q, k, chain_.data(), IslandLU::kAuto, gapJ_);
  if (ok) {
    Solution sol;
    sol.status = ckSTATUS_SOLVED;
    differencing_ = true;
    SolveIsland(q, k, &sol);
    differencing_ = false;
    ok = sol.status != ckSTATUS_NUMERICAL;
    const double scale = island_nudge_ > 0 ? 1 / (island_nudge_ * p.h) : 1;
    for (int a = 0; a < nr; a++) {
      const int i = rows[a];
      dforce[i] = (out_lam_[i] - dif_lam_[i]) * scale;
      ok = ok && std::isfinite(dforce[i]);
      out_lam_[i] = dif_lam_[i];
    }
  }
  // the step's state back: its rows' terms, the island's flags, the statistics
  PrepareIsland(p, k, pos_.data());
  gapJ_ = gapJ;
  lu_island_ = -1;
  grad_ok_[k] = grad_ok;
  grad_kappa_[k] = grad_kappa;
  centered_[k] = centered;
  stats_ = stats;
  stats_.island_diffs += ok;
  return ok;
}

}  // namespace ipm
}  // namespace contactkit
