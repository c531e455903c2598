// Copyright 2026 The contactkit developers.
//
// The directions of a step: every unit direction of (q, v, act, ctrl) through the smooth tangent,
// the force tangent and the integrator tangent (Euler and implicit in one stage, RK4 chaining
// four; the adaptive pairs chain theirs in adaptive_tangent.cc), into the output columns. "mujoco"
// with constraint rows solves them in blocks.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "plugin/deriv/derivative.h"
#include "plugin/step/compat.h"
#include "plugin/step/handle.h"
#include "plugin/step/integrator.h"
#include "solvers/common/dense.h"
#include "solvers/common/reach.h"

namespace contactkit {
namespace {

// mass's solves of the block Y (nv rows of nb columns) tree by tree on the trees of the dofs
// [lo, hi) (Y's other rows are not read), skipping trees no column reaches
void SolveByTree(const TreeMass& mass, const Islands& is, const int* dof_tree, double* Y, int nb,
                 int lo, int hi) {
  if (hi > lo) SolveNonzeroTrees(mass, is, dof_tree[lo], dof_tree[hi - 1] + 1, Y, nb);
}

// b = a' for a (rows x cols, row stride lda) into b (cols x rows, row stride ldb), in tiles of
// 4 x 4 (copies: the same bits as element by element)
void TransposeTo(const double* a, size_t lda, int rows, int cols, double* b, size_t ldb) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    int c = 0;
    for (; c + 4 <= cols; c += 4) {
      const double* at = a + r * lda + c;
      double* bt = b + c * ldb + r;
      for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 4; j++) bt[j * ldb + i] = at[i * lda + j];
      }
    }
    for (; c < cols; c++) {
      for (int i = r; i < r + 4; i++) b[c * ldb + i] = a[i * lda + c];
    }
  }
  for (; r < rows; r++) {
    for (int c = 0; c < cols; c++) b[c * ldb + r] = a[r * lda + c];
  }
}

// w' dM (a - b) (b null: w' dM a) over dM's listed rows, M's lower triangle in MuJoCo's layout
double MassForm(const mjModel* m, const DirectionTangent& tan, const double* w, const double* a,
                const double* b) {
  double s = 0;
  for (int r = 0; r < tan.dM_nrows; r++) {
    const int i = tan.dM_rows[r];
    const double ai = b ? a[i] - b[i] : a[i];
    int adr = m->dof_Madr[i];
    s += tan.dM[adr++] * w[i] * ai;
    for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
      const double aj = b ? a[j] - b[j] : a[j];
      s += tan.dM[adr] * (w[i] * aj + w[j] * ai);
    }
  }
  return s;
}

}  // namespace

//---------------------------------- directions ----------------------------------------------------

template <typename Fn>
bool Derivative::Directions(const mjModel* m, bool state, bool ctrl, Fn&& fn) {
  // "mujoco" with constraint rows (stage_.batch): one blocked solve of MuJoCo's Hessian per kBlock
  // directions
  int nslot = 0;
  if (stage_.batch) ClearBlock();
  // (a solver's blocked tangents on one island: dv_free's solves in its blocks, and dJ on the
  // rows it reads)
  const bool blocked = stage_.slots && !stage_.own_slots && stage_.problem->islands.nisland == 1;
  // (QueueColumn's velocity columns: VelocityRowRhs, no row tangents read; so do the blocked
  // tangents of a solver that reads no row velocity or forms it from J, without sensors)
  const bool vel_unread =
      blocked && !stage_.sensors &&
      (!stage_.solver->ReadsRowVelocity() || stage_.solver->FormsVelocityRows());
  smooth_.set_velocity_rows_unread(((stage_.batch && velocity_rows_) || vel_unread) &&
                                   SmoothTangent::skip_unread_rows_);
  smooth_.set_defer_free_velocity(blocked && stage_.solver->DefersFreeVelocity());
  // (the solvers that read dM through ProblemTangent::Mass(): dM's products in closed form)
  smooth_.set_lazy_mass(!stage_.batch && stage_.solver && stage_.solver->ReadsMassLazily());
  smooth_.set_jacobian_rows(m, blocked && smooth_.analytic()
                                   ? stage_.solver->TangentJacobianRows(*stage_.problem)
                                   : nullptr);
  for (int kind = kCtrl; kind <= kPos; kind++) {
    if (kind == kCtrl ? !ctrl : !state) continue;
    const int n = kind == kCtrl ? nu_ : kind == kAct ? na_ : nv_;
    for (int index = 0; index < n; index++) {
      const int col = OutputColumn(kind, index);
      smooth_.UnitTangent(m, kind, index);
      if (stage_.batch) {
        QueueColumn(m, nslot, kind, index, col);
        if (++nslot == SoftTangent::kBlock) {
          FlushColumns(m, nslot, fn);
          nslot = 0;
        }
        continue;
      }
      if (stage_.slots) {
        // the solver's force tangents of a block of directions in one solve
        if (!QueueTangent(m, nslot, kind, index, col)) return false;
        if (++nslot == stage_.slots) {
          if (!FlushTangents(m, nslot, fn)) return false;
          nslot = 0;
        }
        continue;
      }
      if (!SolveTangent(m, kind, index)) {
        if (!DeferColumn(col)) return false;
        continue;
      }
      fn(kind, index, col);
    }
  }
  if (nslot && stage_.batch) FlushColumns(m, nslot, fn);
  if (nslot && !stage_.batch && !FlushTangents(m, nslot, fn)) return false;
  smooth_.set_velocity_rows_unread(false);
  smooth_.set_defer_free_velocity(false);
  smooth_.set_jacobian_rows(m, nullptr);
  smooth_.set_lazy_mass(false);
  smooth_.RestoreActuation();
  return true;
}

template <typename Fn>
bool Derivative::ParamDirections(const mjModel* m, int begin, int end, Fn&& fn) {
  // as Directions, one direction per parameter with an analytic path (the others: how[k] set)
  int nslot = 0;
  if (stage_.batch) ClearBlock();
  for (int k = begin; k < end; k++) {
    if (!ParamAnalytic(k)) continue;
    if (!ParamTangent(m, k)) return false;  // (rows not matched: every column by differences)
    if (stage_.batch) {
      QueueColumn(m, nslot, kParam, k, -1);
      if (++nslot == SoftTangent::kBlock) {
        FlushColumns(m, nslot, fn);
        nslot = 0;
      }
      continue;
    }
    if (!SolveTangent(m)) return false;
    fn(kParam, k, -1);
  }
  if (nslot) FlushColumns(m, nslot, fn);
  return true;
}

void Derivative::ClearBlock() {
  // (the other blocked paths leave their columns in rhs)
  mju_zero(block_.rhs, static_cast<size_t>(nv_) * SoftTangent::kBlock);
  block_.lo = block_.hi = 0;
  block_.fold_lo = -1;
}

void Derivative::ColumnReach(const Problem& p, int kind, int index, const double* r,
                             const double* pc, int* lo, int* hi) const {
  const Islands& is = p.islands;
  const int nv = nv_;
  // every tree in one island (the humanoid): the reach is all dofs, no scan (a zero column solved
  // there stays zero)
  if (is.nisland == 1 && is.ntrees[0] == is.ntree) {
    *lo = 0;
    *hi = nv;
    return;
  }
  // (r's and P's span in one scan: P's trees' islands too, a superset)
  const double* x[2] = {r, pc};
  int rl, rh;
  NonzeroSpan(x, 2, nv, &rl, &rh);
  int l = nv, u = 0;
  auto add = [&](int a, int b) {
    if (b <= a) return;
    l = std::min(l, a);
    u = std::max(u, b);
  };
  if (tan_.has_dM) add(tan_.dM_begin, tan_.dM_end);
  if (kind == kVel) add(index, index + 1);  // (its unit dv)
  // the trees and the islands they are in (an island's trees ascending: first to last)
  const int t0 = rh > rl ? p.dof_tree[rl] : 0, t1 = rh > rl ? p.dof_tree[rh - 1] + 1 : 0;
  for (int t = t0; t < t1; t++) {
    const int k = is.tree_island[t];
    if (k < 0) {
      add(is.tree_dofadr[t], is.tree_dofadr[t] + is.tree_dofnum[t]);
      continue;
    }
    const int first = is.trees[is.treeadr[k]], last = is.trees[is.treeadr[k] + is.ntrees[k] - 1];
    add(is.tree_dofadr[first], is.tree_dofadr[last] + is.tree_dofnum[last]);
  }
  // whole trees
  if (u > l) {
    const int a = p.dof_tree[l], b = p.dof_tree[u - 1];
    l = is.tree_dofadr[a];
    u = is.tree_dofadr[b] + is.tree_dofnum[b];
  }
  *lo = u > l ? l : 0;
  *hi = u > l ? u : 0;
}

void Derivative::QueueColumn(const mjModel* m, int slot, int kind, int index, int col) {
  const Problem& p = *stage_.problem;
  const int nv = nv_, nb = SoftTangent::kBlock;
  const double h = p.h;
  double* r = scratch_.a;

  // rhs = M dv + h (dqfrc_smooth - dM a + dJ' f) + J_E' (Phi t - h f rho)
  // (0 + h dqfrc_smooth first, + 0 as the zeroed vector's sum gave; then the unit dv's M row)
  for (int i = 0; i < nv; i++) r[i] = h * tan_.dqfrc_smooth[i] + 0.0;
  if (kind == kVel) {
    const int t = extractor_.dof_tree()[index], n = trees_.dofnum[t], b = trees_.dofadr[t];
    const double* mrow = trees_.mass + trees_.blockadr[t] + (index - b) * n;
    for (int i = 0; i < n; i++) r[b + i] += mrow[i];
  }
  double* pc = block_.mass_term + static_cast<size_t>(slot) * nv;
  mju_copy(pc, tan_.dqderiv_qacc, nv);
  if (tan_.has_dM) {
    smooth_.FormMass();
    // with a = qacc of the solver: r -= h dM a, and P = dM (a - aint) + h dqDeriv aint (a and
    // aint differ only under Euler's implicit damping and the implicit integrator)
    const double* a = stage_data_->qacc;
    const bool p_term = integrator_.damped || integrator_.implicit;
    for (int row = 0; row < tan_.dM_nrows; row++) {
      const int i = tan_.dM_rows[row];
      int adr = m->dof_Madr[i];
      const double mii = tan_.dM[adr++];
      r[i] -= h * mii * a[i];
      if (p_term) pc[i] += mii * (a[i] - integrator_.qacc[i]);
      for (int j = m->dof_parentid[i]; j >= 0; j = m->dof_parentid[j], adr++) {
        r[i] -= h * tan_.dM[adr] * a[j];
        r[j] -= h * tan_.dM[adr] * a[i];
        if (p_term) {
          pc[i] += tan_.dM[adr] * (a[j] - integrator_.qacc[j]);
          pc[j] += tan_.dM[adr] * (a[i] - integrator_.qacc[i]);
        }
      }
    }
  }
  ProblemTangent dir;
  if (tan_.has_dJ_force) {
    for (int i = 0; i < nv; i++)
      r[i] += h * tan_.dJ_force[i];  // (dJ itself: not written, tan_.dJ_qvel_next has dJ v+)
  } else if (tan_.has_dJ) {
    const SparseRows& J = p.J;
    for (int i = 0; i < J.nrow; i++) {
      const double fi = h * stage_.solution->force[i];
      if (fi == 0) continue;
      const int adr = J.rowadr[i];
      for (int k = 0; k < J.rownnz[i]; k++) r[J.colind[adr + k]] += tan_.dJ[adr + k] * fi;
    }
    dir.J = tan_.dJ;
  }
  dir.vel = tan_.has_dvel ? tan_.dvel : nullptr;
  dir.R = tan_.has_dpos || tan_.has_drows ? tan_.dR : nullptr;
  dir.diag_approx = tan_.has_drows ? tan_.ddiag : nullptr;
  dir.aref = tan_.has_dvel || tan_.has_dpos || tan_.has_drows ? tan_.daref : nullptr;
  // a position or velocity direction reaches the rows of its tree's island only (none if the
  // tree has no rows)
  int island = -1;
  if (kind == kPos || kind == kVel) island = p.islands.tree_island[p.dof_tree[index]];
  const bool rows = kind == kPos || kind == kVel ? island >= 0 : true;
  bool fold = false;
  if (rows && kind == kVel && velocity_rows_ && tan_.has_dvel && !tan_.has_dJ && !tan_.has_dpos &&
      !tan_.has_drows) {
    soft_.VelocityRowRhs(p, index, r);  // (J e_k's row terms: one product per island and stage)
  } else if (rows && (tan_.has_dJ || tan_.has_dvel || tan_.has_dpos || tan_.has_drows)) {
    const double* dJv = tan_.has_dJ_force ? tan_.dJ_qvel_next : nullptr;
    // one island of every tree: its J' fold left to FlushColumns, all the block's slots at once
    // (the column reaches every dof: ColumnReach)
    const Islands& is = p.islands;
    if (block_fold_on_ && island >= 0 && is.nisland == 1 && is.ntrees[0] == is.ntree) {
      if (block_.fold_lo < 0) block_.fold_lo = slot;
      soft_.IslandRowFold(p, dir, dJv, island, block_.dforce + static_cast<size_t>(slot) * p.nrow);
      fold = true;
    } else {
      soft_.RowRhs(p, dir, r, dJv, island);
    }
  }
  // (a slot after the block's first fold without one: its coefficients zero)
  if (!fold && block_.fold_lo >= 0)
    mju_zero(block_.dforce + static_cast<size_t>(slot) * p.nrow, p.nrow);
  // the column's reach: its solve H^-1 r stays on the islands (or lone trees) of r's trees, M_E^-1
  // P on P's trees; its right-hand side is written there only (rhs is zero elsewhere, FlushColumns)
  int lo = 0, hi = nv;
  if (column_spans_ && !integrator_.implicit) ColumnReach(p, kind, index, r, pc, &lo, &hi);
  block_.lo = block_.hi > block_.lo ? std::min(block_.lo, lo) : lo;
  block_.hi = std::max(block_.hi, hi);
  for (int i = lo; i < hi; i++) block_.rhs[static_cast<size_t>(i) * nb + slot] = r[i];

  // what the columns need after the solve
  block_.kind[slot] = kind;
  block_.index[slot] = index;
  block_.col[slot] = col;
  mju_copy(block_.act_dot + static_cast<size_t>(slot) * na_, tan_.dact_dot, na_);
}

template <typename Fn>
void Derivative::FlushColumns(const mjModel* m, int nslot, Fn&& fn) {
  const Problem& p = *stage_.problem;
  const int nv = nv_;
  const double h = p.h;
  // the dofs the columns reach (QueueColumn): rhs, Y and dacc are zero on the others
  const int lo = block_.lo, hi = block_.hi;
  // the slots' J' fold (QueueColumn) into rhs, a group of J's rows applied to every slot's
  // coefficients at once (the adds of SoftTangent::RowRhs per entry)
  if (block_.fold_lo >= 0) {
    const int s0 = block_.fold_lo;
    soft_.IslandFoldBlock(p, 0, block_.dforce + static_cast<size_t>(s0) * p.nrow, p.nrow,
                          nslot - s0, block_.rhs + s0, SoftTangent::kBlock);
    block_.fold_lo = -1;
  }

  // a partial block: its columns (rounded up to the solves' chunks of 8) packed to that stride
  const int nb = std::min(SoftTangent::kBlock, (nslot + 7) / 8 * 8);
  if (nb < SoftTangent::kBlock) {
    for (int i = 1; i < nv; i++) {
      for (int c = 0; c < nb; c++) {
        block_.rhs[static_cast<size_t>(i) * nb + c] =
            block_.rhs[static_cast<size_t>(i) * SoftTangent::kBlock + c];
      }
    }
  }
  for (int i = 0; i < nv && nslot < nb; i++) {
    for (int c = nslot; c < nb; c++) block_.rhs[static_cast<size_t>(i) * nb + c] = 0;
  }
  soft_.SolveBlock(p, block_.rhs, nb);

  // M_int dacc = M x / h + P with x = dv+ - dv: dacc = x / h when M_int = M (P = 0), and
  // x / h + M_E^-1 (P - D x) for Euler's M_E = M + h D, all columns in one sweep
  // (row by row: the block's rows are contiguous, the columns strided by nb)
  double* Y = block_.damped;
  if (!integrator_.implicit) {
    // x = dv+ - dv in place: a velocity column's unit dv off its entry (rhs is zeroed after)
    for (int slot = 0; slot < nslot; slot++) {
      if (block_.kind[slot] == kVel)
        block_.rhs[static_cast<size_t>(block_.index[slot]) * nb + slot] -= 1;
    }
  }
  if (integrator_.damped) {
    for (int i = lo; i < hi; i++) {
      const double* ri = block_.rhs + static_cast<size_t>(i) * nb;
      double* yi = Y + static_cast<size_t>(i) * nb;
      for (int slot = 0; slot < nslot; slot++) {
        const double x = ri[slot];
        yi[slot] = block_.mass_term[static_cast<size_t>(slot) * nv + i] - m->dof_damping[i] * x;
      }
      for (int c = nslot; c < nb; c++) yi[c] = 0;
    }
    SolveByTree(integrator_.mass, p.islands, p.dof_tree, Y, nb, lo, hi);
  }
  // Euler: every column's dacc = x / h (+ Y) into mass_term, no longer read (slot by slot); a
  // zero x is its own quotient (most of humanoid100's: the divisions were a tenth of its Jacobian)
  if (!integrator_.implicit) {
    for (int i = lo; i < hi; i++) {
      const double* ri = block_.rhs + static_cast<size_t>(i) * nb;
      const double* yi = Y + static_cast<size_t>(i) * nb;
      for (int slot = 0; slot < nslot; slot++) {
        const double x = ri[slot];
        block_.mass_term[static_cast<size_t>(slot) * nv + i] =
            (x != 0 ? x / h : x) + (integrator_.damped ? yi[slot] : 0);
      }
    }
  }
  // the unit directions again (one entry set per column, reset after it)
  mju_zero(tan_.dq, nv);
  mju_zero(tan_.dv, nv);
  mju_zero(tan_.dact, na_);
  mju_zero(tan_.du, nu_);
  if (!integrator_.implicit) mju_zero(tan_.dqacc_int, nv);
  for (int slot = 0; slot < nslot; slot++) {
    const int kind = block_.kind[slot], index = block_.index[slot];
    double* unit = kind == kCtrl    ? tan_.du
                   : kind == kAct   ? tan_.dact
                   : kind == kVel   ? tan_.dv
                   : kind == kParam ? nullptr
                                    : tan_.dq;
    if (unit) unit[index] = 1;
    mju_copy(tan_.dact_dot, block_.act_dot + static_cast<size_t>(slot) * na_, na_);

    const double* pc = block_.mass_term + static_cast<size_t>(slot) * nv;
    if (integrator_.implicit) {
      double* x = scratch_.b;
      for (int i = 0; i < nv; i++)
        x[i] = block_.rhs[static_cast<size_t>(i) * nb + slot] - tan_.dv[i];
      p.mass.Mul(x, tan_.dqacc_int);
      for (int i = 0; i < nv; i++) tan_.dqacc_int[i] = tan_.dqacc_int[i] / h + pc[i];
      integrator_.Solve(tan_.dqacc_int);
    } else {
      // (dacc, above; zero outside [lo, hi)): its span is found there
      mju_copy(tan_.dqacc_int + lo, pc + lo, hi - lo);
      const double* acc = tan_.dqacc_int + lo;
      int l, u;
      NonzeroSpan(&acc, 1, hi - lo, &l, &u);
      acc_lo_ = u > l ? lo + l : 0;
      acc_hi_ = u > l ? lo + u : 0;
      acc_known_ = true;
    }
    fn(kind, index, block_.col[slot]);
    if (unit) unit[index] = 0;
  }
  // rhs zero again for the next block (a partial block changed its stride: all of it)
  if (nb < SoftTangent::kBlock) {
    mju_zero(block_.rhs, static_cast<size_t>(nv) * SoftTangent::kBlock);
  } else {
    mju_zero(block_.rhs + static_cast<size_t>(lo) * nb, static_cast<size_t>(hi - lo) * nb);
  }
  block_.lo = block_.hi = 0;
}
bool Derivative::DeferColumn(int col) {
  if (!defer_columns_ || fallback_ != ckFALLBACK_NO_TANGENT) return false;
  if (nfd_ == 0) std::memset(out_.fd_col, 0, 2 * nv_ + na_ + nu_);
  out_.fd_col[col] = 1;
  nfd_++;
  fallback_ = ckFALLBACK_NONE;
  return true;
}

bool Derivative::QueueTangent(const mjModel* m, int slot, int kind, int index, int col) {
  // SolveTangent's parts but the force tangent's solve, J' df and the integrator's solve
  const Problem& p = *stage_.problem;
  ProblemTangent dir;
  FormUnitTangent(m, &dir, kind, index);
  // own_slots: the force tangent now, its column's terms with J' df (SolveTangent's sums)
  const bool ok = stage_.own_slots
                      ? stage_.solver->ForceTangent(p, *stage_.solution, dir, tan_.dforce)
                      : stage_.solver->QueueTangent(p, dir, slot);
  if (!ok) {
    fallback_ = ckFALLBACK_NO_TANGENT;
    return false;
  }
  // dJ' f (the force tangent zero unless own_slots) and the smooth terms
  if (!stage_.own_slots) {
    for (int i = 0; i < p.nrow; i++) tan_.dforce[i] = 0;
  }
  for (int i = 0; i < nv_; i++) tan_.dqfrc_constraint[i] = 0;
  ConstraintForceTangent(p, stage_.own_slots);
  AccelerationRhs(m, block_.mass_term + static_cast<size_t>(slot) * nv_);
  block_.kind[slot] = kind;
  block_.index[slot] = index;
  block_.col[slot] = col;
  mju_copy(block_.act_dot + static_cast<size_t>(slot) * na_, tan_.dact_dot, na_);
  return true;
}

template <typename Fn>
bool Derivative::FlushTangents(const mjModel* m, int nslot, Fn&& fn) {
  const Problem& p = *stage_.problem;
  const SparseRows& J = p.J;
  if (!stage_.own_slots && !stage_.solver->FlushTangents(p, nslot, block_.dforce)) {
    fallback_ = ckFALLBACK_NO_TANGENT;
    return false;
  }
  // each column's right-hand side M_int daint = its terms + J' df, row-major in rhs (padded to
  // the block solve's chunks of 8); solved at once but under the implicit integrator
  const int nv = nv_, nb = (nslot + 7) / 8 * 8;
  double* X = block_.rhs;
  if (transpose_tiles_on_) {
    TransposeTo(block_.mass_term, nv, nslot, nv, X, nb);
    for (int i = 0; i < nv; i++) {
      for (int slot = nslot; slot < nb; slot++) X[static_cast<size_t>(i) * nb + slot] = 0;
    }
  } else {
    for (int slot = 0; slot < nb; slot++) {
      const double* a = block_.mass_term + static_cast<size_t>(slot) * nv;
      for (int i = 0; i < nv; i++) X[static_cast<size_t>(i) * nb + slot] = slot < nslot ? a[i] : 0;
    }
  }
  if (!stage_.own_slots) {
    // (own_slots: J' df is in mass_term) J' df of all columns, each entry of J applied to the
    // row's forces of every column (one island's forces: few zeros)
    static_assert(SoftTangent::kBlock <= kTransposeBlock);
    AddTransposeBlock(J, block_.dforce, p.nrow, nslot, X, nb,
                      transpose_groups_on_ ? nominal_.row_group : nullptr);
  }
  if (!integrator_.implicit) {
    SolveByTree(integrator_.mass, p.islands, p.dof_tree, X, nb, 0, nv);
  }
  // the unit directions again (one entry set per column, reset after it)
  mju_zero(tan_.dq, nv);
  mju_zero(tan_.dv, nv);
  mju_zero(tan_.dact, na_);
  mju_zero(tan_.du, nu_);
  tan_.has_dposition_correction = false;
  // (the columns back into mass_term, read no more, slot by slot)
  if (transpose_tiles_on_) TransposeTo(X, nb, nv, nslot, block_.mass_term, nv);
  for (int slot = 0; slot < nslot; slot++) {
    const int kind = block_.kind[slot], index = block_.index[slot];
    double* unit = kind == kCtrl  ? tan_.du
                   : kind == kAct ? tan_.dact
                   : kind == kVel ? tan_.dv
                                  : tan_.dq;
    unit[index] = 1;
    mju_copy(tan_.dact_dot, block_.act_dot + static_cast<size_t>(slot) * na_, na_);
    if (transpose_tiles_on_) {
      mju_copy(tan_.dqacc_int, block_.mass_term + static_cast<size_t>(slot) * nv, nv);
    } else {
      for (int i = 0; i < nv; i++) tan_.dqacc_int[i] = X[static_cast<size_t>(i) * nb + slot];
    }
    if (integrator_.implicit) integrator_.Solve(tan_.dqacc_int);
    fn(kind, index, block_.col[slot]);
    unit[index] = 0;
  }
  return true;
}

//---------------------------------- single-stage integrators --------------------------------------

bool Derivative::SingleStage(const mjModel* m) {
  const int nv = nv_;
  const double h = m->opt.timestep;
  stage_.sensors = param_.run ? param_.ds != nullptr
                              : sink_.C || sink_.D || (sink_.ds && (sink_.gx || sink_.gu));
  if (!PrepareStage(m, false)) return false;

  // v+ of the step (the velocity the positions integrate), and lcp's position correction u
  // after it (split impulse: q+ = (q (+) h v+) (+) h u)
  double* vplus = integrator_.qvel_next;
  for (int i = 0; i < nv; i++) vplus[i] = nominal_.qvel[i] + h * integrator_.qacc[i];
  const double* up =
      stage_.has_rows && stage_.solver ? stage_.solution->position_correction : nullptr;
  double* maps = integrator_.step_maps;
  IntegrateMaps(m, vplus, h, maps);
  if (up) IntegrateMaps(m, up, h, integrator_.correction_maps);
  elastic_.Prepare(settings_, stage_.has_rows ? stage_.problem : nullptr, nominal_.qvel);
  elastic_.Select(vplus);
  if (!up && AdjointApplies()) {
    AdjointDirections(m);
    return true;
  }
  bool done = false;
  if (SolverAdjointApplies()) {
    const bool ok = SolverAdjointDirections(m, &done);
    if (done) return ok;
  }
  double* out = out_.state_col;
  double* ds = out_.sensor_col;
  // a column's dof rows outside the span of its nonzero tangents are zero: written and emitted
  // on that span only (whole joints), where nothing else reads the column (O(nv) per direction
  // was a fifth of humanoid100's Jacobian)
  const bool spans = column_spans_ && elastic_.n() == 0 && !sink_.gx && !sink_.gu;
  auto column = [&](int kind, int index, int col) {
    int lo = 0, hi = nv, j0 = 0, j1 = m->njnt;
    const bool span = spans && kind != kParam;
    if (span) {
      // dqacc_int's span from SolveTangent's solve (else scanned), a unit dq or dv at index
      // (the others zero), lcp's position correction scanned
      if (acc_known_) {
        lo = acc_lo_;
        hi = acc_hi_;
      } else {
        NonzeroSpan(&tan_.dqacc_int, 1, nv, &lo, &hi);
      }
      auto add = [&](int l, int u) {
        if (hi > lo) {
          lo = std::min(lo, l);
          hi = std::max(hi, u);
        } else {
          lo = l;
          hi = u;
        }
      };
      if (kind == kPos || kind == kVel) add(index, index + 1);
      if (up && tan_.has_dposition_correction) {
        int l, u;
        NonzeroSpan(&tan_.dposition_correction, 1, nv, &l, &u);
        if (u > l) add(l, u);
      }
      // (whole joints: a joint's dofs are consecutive, the joints' in order)
      j0 = hi > lo ? m->dof_jntid[lo] : 0;
      j1 = hi > lo ? m->dof_jntid[hi - 1] + 1 : 0;
      lo = hi > lo ? m->jnt_dofadr[j0] : 0;
      hi = j1 == 0 ? 0 : j1 < m->njnt ? m->jnt_dofadr[j1] : nv;
    }
    acc_known_ = false;
    // next state: dv+ = dv + h daint, dq+ through the position update, dact+
    for (int i = lo; i < hi; i++) out[nv + i] = tan_.dv[i] + h * tan_.dqacc_int[i];
    if (up) {
      double* mid = integrator_.position_mid;
      IntegrateTangent(m, maps, h, tan_.dq, out + nv, mid, j0, j1);
      if (!tan_.has_dposition_correction) mju_zero(tan_.dposition_correction + lo, hi - lo);
      IntegrateTangent(m, integrator_.correction_maps, h, mid, tan_.dposition_correction, out, j0,
                       j1);
    } else {
      IntegrateTangent(m, maps, h, tan_.dq, out + nv, out, j0, j1);
    }
    ActivationTangent(m, nominal_.act, nominal_.act_dot, tan_.dact, tan_.dact_dot, h, out + 2 * nv);
    if (kind == kParam) {
      EmitParam(index, out);
      return;
    }
    if (span) {
      EmitStateSpan(col, out, lo, hi);
    } else {
      EmitState(col, out);
    }
    if (stage_.sensors) {
      smooth_.SensorTangent(m, kind, ds);
      EmitSensor(col, ds);
    }
  };
  acc_known_ = false;  // (not a solve of another stage's or integrator's columns)
  // (a column without a force tangent: by differences after the others, Run)
  defer_columns_ = !param_.run && elastic_.n() == 0 && !settings_.deriv.complementarity_aware;
  const bool ok = param_.run ? ParamDirections(m, 0, param_.np, column)
                             : Directions(m, sink_.WantsState(), sink_.WantsCtrl(), column);
  defer_columns_ = false;
  if (ok && !param_.run) {
    sink_direct_ |= elastic_.n() > 0 && sink_.A;  // (A corrected in place)
    elastic_.Finish(h, 2 * nv_ + na_, sink_.A, sink_.gx, sink_.dx);
  }
  return ok;
}
//---------------------------------- reverse mode (VJP) --------------------------------------------

bool Derivative::AdjointApplies() const {
  return stage_.batch && !integrator_.implicit && elastic_.n() == 0 && sink_.dx && !sink_.A &&
         !sink_.B && !sink_.C && !sink_.D && !stage_.sensors && !apply_modes_;
}

void Derivative::AdjointDirections(const mjModel* m) {
  // column k of the step: out_k = (Tq dq_k + Tw dv+_k, dv+_k, clip(dact_k + h dact_dot_k)) with
  // dv+_k = s_k = H^-1 r_k undamped, and under Euler's damping dv+_k = dv_k + h dqacc_k,
  // dqacc_k = x_k / h + M_E^-1 (P_k - D x_k), x_k = s_k - dv_k (FlushColumns). With the adjoint
  // (aq, av, aact), g = Tw' aq + av and z = h M_E^-1 g:
  //   a' out_k = (Tq' aq)' dq_k + mu' r_k + z' P_k + (D z)' dv_k + alpha' (dact_k + h dact_dot_k)
  // with mu = H^-1 (g - D z) (z = 0 undamped) and alpha = aact where the update is not clipped
  const Problem& p = *stage_.problem;
  const int nv = nv_, na = na_;
  const double h = p.h;
  const bool damped = integrator_.damped;
  double* tq = block_.damped;          // Tq' aq           (nv)
  double* mu = block_.damped + nv;     // g, then mu       (nv)
  double* z = block_.damped + 2 * nv;  // h M_E^-1 g       (nv)
  double* alpha = out_.state_col;      //                  (na)
  IntegrateTangentT(m, integrator_.step_maps, h, sink_.dx, tq, mu);
  for (int i = 0; i < nv; i++) mu[i] += sink_.dx[nv + i];
  if (damped) {
    for (int i = 0; i < nv; i++) z[i] = h * mu[i];
    integrator_.mass.Solve(z);
    for (int i = 0; i < nv; i++) mu[i] -= m->dof_damping[i] * z[i];
  }
  constexpr int kWidth = 8;  // the block solve's narrowest chunk; column 0 carries mu
  for (int i = 0; i < nv; i++) {
    for (int c = 0; c < kWidth; c++) block_.rhs[i * kWidth + c] = c == 0 ? mu[i] : 0;
  }
  soft_.SolveBlock(p, block_.rhs, kWidth);
  for (int i = 0; i < nv; i++) mu[i] = block_.rhs[i * kWidth];
  mju_zero(block_.rhs, static_cast<size_t>(nv) * kWidth);  // (AdjointRhsDot's rows, zero)
  ActivationAdjoint(m, nominal_.act, nominal_.act_dot, h, sink_.dx + 2 * nv, alpha);
  // the Newton-Euler terms of mu' r_k (h dqfrc_smooth = -h d(M a + bias)) and z' P_k (damped:
  // d(M (a - aint))) by the smooth stage's reverse pass where it applies (analytic tangents)
  smooth_.PrepareRneAdjoint(m, mu, damped ? z : nullptr);
  smooth_.PrepareRowAdjoint(soft_, mu);  // (and the rows' term's weights)
  smooth_.PrepareContactAdjoint(m, mu);

  for (int kind = kCtrl; kind <= kPos; kind++) {
    if (kind == kCtrl ? !sink_.gu : !sink_.gx) continue;
    const int n = kind == kCtrl ? nu_ : kind == kAct ? na : nv;
    for (int index = 0; index < n; index++) {
      const int col = OutputColumn(kind, index);
      double g = 0;
      if (smooth_.AdjointUnitTangent(m, kind, index)) {
        double dot2 = 0;
        g = kind == kPos ? -h * smooth_.RnePositionAdjoint(m, index, &dot2) + dot2 +
                               smooth_.ContactAdjoint(m, index)
                         : -h * smooth_.RneVelocityAdjoint(m, index);
      }
      g += AdjointRhsDot(m, kind, index, mu, damped ? z : nullptr);
      for (int i = 0; i < na; i++) g += h * alpha[i] * tan_.dact_dot[i];
      g += kind == kPos   ? tq[index]
           : kind == kVel ? (damped ? m->dof_damping[index] * z[index] : 0)
           : kind == kAct ? alpha[index]
                          : 0;
      (kind == kCtrl ? sink_.gu[index] : sink_.gx[col]) += g;
    }
  }
  smooth_.EndRneAdjoint();
  smooth_.RestoreActuation();
}

void Derivative::ReachedDofs(int kind, int index, const int** dofs, int* lo, int* hi) const {
  const Problem& p = *stage_.problem;
  *dofs = nullptr;
  *lo = 0;
  *hi = nv_;
  if (!smooth_.analytic() || (kind != kPos && kind != kVel)) return;
  const Islands& is = p.islands;
  const int t = p.dof_tree[index], k = is.tree_island[t];
  if (k >= 0) {
    *dofs = is.dofs + is.dofadr[k];
    *hi = is.ndofs[k];
  } else {
    *lo = is.tree_dofadr[t];
    *hi = *lo + is.tree_dofnum[t];
  }
}

double Derivative::ReachedDot(int kind, int index, const double* w, const double* x) const {
  const int* dofs;
  int lo, hi;
  ReachedDofs(kind, index, &dofs, &lo, &hi);
  if (!dofs) return hi > lo ? mju_dot(w + lo, x + lo, hi - lo) : 0;
  double s = 0;
  for (int a = 0; a < hi; a++) s += w[dofs[a]] * x[dofs[a]];
  return s;
}

double Derivative::SmoothRhsDot(const mjModel* m, int kind, int index, const double* w,
                                const double* a, bool qderiv, bool touched) const {
  const Problem& p = *stage_.problem;
  double s = ReachedDot(kind, index, w, tan_.dqfrc_smooth);
  if (tan_.has_dJ_force) s += ReachedDot(kind, index, w, tan_.dJ_force);
  if (qderiv) s += ReachedDot(kind, index, w, tan_.dqderiv_qacc);
  if (tan_.has_dM) s -= MassForm(m, tan_, w, a, nullptr);
  if (tan_.has_dJ_force || !tan_.has_dJ) return s;
  // dJ' f row by row: w' dJ_i' f_i = f_i (dJ_i . w)
  const SparseRows& J = p.J;
  const double* force = stage_.solution->force;
  auto row = [&](int i) {
    if (force[i] == 0) return;
    const int adr = J.rowadr[i];
    double d = 0;
    for (int q = 0; q < J.rownnz[i]; q++) d += tan_.dJ[adr + q] * w[J.colind[adr + q]];
    s += force[i] * d;
  };
  if (touched) {
    ForTouchedRows(p.islands, row);
  } else {
    for (int i = 0; i < J.nrow; i++) row(i);
  }
  return s;
}

double Derivative::AdjointRhsDot(const mjModel* m, int kind, int index, const double* mu,
                                 const double* z) {
  // r = M dv + h (dqfrc_smooth - dM a + dJ' f) + J_E' (Phi t - h f rho) and P = dqderiv_qacc +
  // dM (a - aint) as QueueColumn forms them (a: the solver's qacc)
  const Problem& p = *stage_.problem;
  const double h = p.h;
  const double* a = stage_data_->qacc;
  double v = h * SmoothRhsDot(m, kind, index, mu, a, false, false);
  if (kind == kVel) {
    // mu' M e_index: the row of the tree's dense block
    const int t = extractor_.dof_tree()[index], n = trees_.dofnum[t], b = trees_.dofadr[t];
    const double* col = trees_.mass + trees_.blockadr[t] + (index - b) * n;
    for (int i = 0; i < n; i++) v += col[i] * mu[b + i];
  }
  if (z) {
    v += ReachedDot(kind, index, z, tan_.dqderiv_qacc);
    if (tan_.has_dM) v += MassForm(m, tan_, z, a, integrator_.qacc);
  }
  // the rows' term: RowRhs into a zero vector, read and zeroed again on the island's dofs (or,
  // in the reverse pass, from its weights of the row tangents)
  if (kind == kVel && smooth_.row_adjoint()) return v + smooth_.VelocityRowAdjoint(index);
  const bool moves = tan_.has_dJ || tan_.has_dvel || tan_.has_dpos || tan_.has_drows;
  int island = -1;
  if (kind == kPos || kind == kVel) island = p.islands.tree_island[p.dof_tree[index]];
  if (!moves || ((kind == kPos || kind == kVel) && island < 0)) return v;
  if ((kind == kPos || kind == kVel) && smooth_.row_adjoint() && !tan_.has_drows &&
      (tan_.has_dJ_force || !tan_.has_dJ)) {
    return v + smooth_.RowAdjointDot();  // (the reverse pass's weights of the row tangents)
  }
  ProblemTangent dir;
  if (!tan_.has_dJ_force && tan_.has_dJ) dir.J = tan_.dJ;
  dir.vel = tan_.has_dvel ? tan_.dvel : nullptr;
  dir.R = tan_.has_dpos || tan_.has_drows ? tan_.dR : nullptr;
  dir.diag_approx = tan_.has_drows ? tan_.ddiag : nullptr;
  dir.aref = tan_.has_dvel || tan_.has_dpos || tan_.has_drows ? tan_.daref : nullptr;
  double* rr = block_.rhs;
  soft_.RowRhs(p, dir, rr, tan_.has_dJ_force ? tan_.dJ_qvel_next : nullptr, island);
  if (island < 0) {
    v += mju_dot(mu, rr, nv_);
    mju_zero(rr, nv_);
    return v;
  }
  const Islands& is = p.islands;
  const int* dofs = is.dofs + is.dofadr[island];
  for (int k = 0; k < is.ndofs[island]; k++) {
    v += mu[dofs[k]] * rr[dofs[k]];
    rr[dofs[k]] = 0;
  }
  return v;
}

bool Derivative::SolverAdjointApplies() const {
  return stage_.solver && stage_.has_rows && !param_.run && elastic_.n() == 0 && sink_.dx &&
         !sink_.A && !sink_.B && !sink_.C && !sink_.D && !stage_.sensors && !apply_modes_;
}

bool Derivative::SolverAdjointDirections(const mjModel* m, bool* done) {
  // column k (SolveTangent): out_k = (Tq dq_k + Tw dv+_k, dv+_k, clip(dact_k + h dact_dot_k))
  // with dv+_k = dv_k + h daint_k, M_int daint_k = b_k + J' df_k (b_k: AccelerationRhs at
  // df = 0). With g = Tw' aq + av and w = h M_int^-T g (Euler's M, M + h D or implicit's LU):
  //   a' out_k = (Tq' aq)' dq_k + g' dv_k + w' b_k + (J w)' df_k + alpha' (dact_k + h dact_dot_k)
  // where (J w)' df_k is the solver's AdjointDot, prepared once with the weights J w; a solver
  // without one gives df_k by ForceTangent (no integrator solve, no column). lcp's position
  // correction u (q+ = (q (+) h v+) (+) h u): Tq, Tw through both maps, and xi' du_k with xi
  // the correction map's adjoint of du (in AdjointDot, or by PositionTangent)
  const Problem& p = *stage_.problem;
  const Solution& sol = *stage_.solution;
  const int nv = nv_, na = na_;
  const double h = p.h;
  smooth_.set_lazy_mass(false);         // (SmoothRhsDot reads dM)
  double* tq = block_.damped;           // Tq' aq           (nv)
  double* g = block_.damped + nv;       // Tw' aq + av      (nv)
  double* w = block_.damped + 2 * nv;   // h M_int^-T g     (nv)
  double* y = block_.dforce;            // J w              (nrow)
  double* xi = block_.damped + 3 * nv;  // du's adjoint      (nv)
  double* alpha = out_.state_col;       //                  (na)
  const double* up = sol.position_correction;
  if (up) {
    double* mid = block_.damped + 4 * nv;  // adjoint of q (+) h v+  (nv)
    IntegrateTangentT(m, integrator_.correction_maps, h, sink_.dx, mid, xi);
    IntegrateTangentT(m, integrator_.step_maps, h, mid, tq, g);
  } else {
    IntegrateTangentT(m, integrator_.step_maps, h, sink_.dx, tq, g);
  }
  for (int i = 0; i < nv; i++) g[i] += sink_.dx[nv + i];
  for (int i = 0; i < nv; i++) w[i] = h * g[i];
  integrator_.SolveT(w);
  for (int i = 0; i < p.nrow; i++) y[i] = p.J.Dot(i, w);
  const bool reverse = stage_.solver->PrepareAdjoint(p, sol, y, up ? xi : nullptr);
  // (a solver's blocked force tangents beat them one by one: streamed)
  if (!reverse && stage_.slots && !stage_.own_slots) return true;
  *done = true;
  ActivationAdjoint(m, nominal_.act, nominal_.act_dot, h, sink_.dx + 2 * nv, alpha);
  for (int i = 0; i < p.nrow; i++) tan_.dforce[i] = 0;  // (reverse: b_k has no force tangent)
  tan_.has_dposition_correction = false;
  defer_columns_ = !settings_.deriv.complementarity_aware;
  // (AdjointDot reads the touched islands alone: a unit direction's row tangents on its island)
  smooth_.set_island_rows(reverse && smooth_.analytic());
  const bool rne = reverse && PrepareSolverRne(m, w);
  // (and the position and velocity directions' rows from the solver's row weights)
  const bool rows = rne && smooth_.PrepareSolverRowAdjoint(m, *stage_.solver, sol, w);

  for (int kind = kCtrl; kind <= kPos; kind++) {
    if (kind == kCtrl ? !sink_.gu : !sink_.gx) continue;
    const int n = kind == kCtrl ? nu_ : kind == kAct ? na : nv;
    for (int index = 0; index < n; index++) {
      const int col = OutputColumn(kind, index);
      bool omit = false;  // (its Newton-Euler terms and dv_free: SolverRneDot's)
      if (rne) {
        omit = smooth_.SolverAdjointUnitTangent(m, kind, index);
      } else {
        smooth_.UnitTangent(m, kind, index);
      }
      // (the rows' term first: it writes the contacts' frame tangents that AnchorTangent reads)
      double v = omit && rows ? smooth_.SolverRowAdjointDot(m, kind, index) : 0;
      ProblemTangent dir;
      FormUnitTangent(m, &dir, kind, index);
      if (omit) dir.v_free = nullptr;
      if (omit) v += SolverRneDot(m, kind, index);
      if (reverse) {
        v += stage_.solver->AdjointDot(p, sol, dir);
      } else if (!stage_.solver->ForceTangent(p, sol, dir, tan_.dforce)) {
        // (by differences after the others, as Directions defers it)
        fallback_ = ckFALLBACK_NO_TANGENT;
        if (DeferColumn(col)) continue;
        defer_columns_ = false;
        smooth_.EndRneAdjoint();
        return false;
      } else {
        // (J w)' df_k on the touched islands' rows, as ConstraintForceTangent adds J' df_k
        ForTouchedRows(p.islands, [&](int i) { v += y[i] * tan_.dforce[i]; });
        if (up && stage_.solver->PositionTangent(p, dir, tan_.dposition_correction))
          v += mju_dot(xi, tan_.dposition_correction, nv);
      }
      // w' b_k (AccelerationRhs with df = 0) on the direction's spans and rows
      v += SmoothRhsDot(m, kind, index, w, integrator_.qacc, true, true);
      for (int i = 0; i < na; i++) v += h * alpha[i] * tan_.dact_dot[i];
      v += kind == kPos ? tq[index] : kind == kVel ? g[index] : kind == kAct ? alpha[index] : 0;
      (kind == kCtrl ? sink_.gu[index] : sink_.gx[col]) += v;
    }
  }
  defer_columns_ = false;
  smooth_.set_island_rows(false);
  smooth_.EndRneAdjoint();
  smooth_.RestoreActuation();
  return true;
}

bool Derivative::PrepareSolverRne(const mjModel* m, const double* w) {
  // AdjointDot's sign c' dv_free with dv_free = dv + h M_p^-1 (dqfrc_smooth - dM vfa), vfa =
  // (v_free - v) / h (FreeVelocityTangent), is sign c' dv + pic' (dqfrc_smooth - dM vfa) with
  // pic = sign h M_p^-1 c; with w' b_k's, dqfrc_smooth = springs etc. - d(M a + bias) + dM a weighs
  // x = w + pic: its Newton-Euler terms -x' d(M a + bias) by the reverse pass
  const Problem& p = *stage_.problem;
  const int nv = nv_;
  solver_c_ =
      smooth_.analytic() ? stage_.solver->AdjointFreeVelocityWeight(&solver_sign_) : nullptr;
  if (!solver_c_) return false;
  double* pic = block_.damped + 5 * nv;  // sign h M_p^-1 c  (nv)
  double* x = block_.damped + 6 * nv;    // w + pic          (nv)
  double* vfa = block_.damped + 7 * nv;  // (v_free - v) / h (nv)
  // (AdjointDot reads c on its touched islands' trees alone: zero on the others')
  const Islands& is = p.islands;
  for (int t = 0; t < is.ntree; t++) {
    const int b = is.tree_dofadr[t], e = b + is.tree_dofnum[t];
    for (int i = b; i < e; i++) pic[i] = is.tree_island[t] >= 0 ? solver_c_[i] : 0;
  }
  p.mass.Solve(pic);
  for (int i = 0; i < nv; i++) {
    pic[i] *= solver_sign_ * p.h;
    x[i] = w[i] + pic[i];
    vfa[i] = (p.v_free[i] - nominal_.qvel[i]) / p.h;
  }
  return smooth_.PrepareSolverRneAdjoint(m, x);
}

double Derivative::SolverRneDot(const mjModel* m, int kind, int index) const {
  // pic' (springs etc.) + sign c' dv - x' d(M a + bias) + x' dM a - pic' dM vfa (position), or
  // - x' d bias/dv (velocity); a the solver's qacc (AnalyticPosition's)
  const int nv = nv_;
  const double* pic = block_.damped + 5 * nv;
  const double* x = block_.damped + 6 * nv;
  const double* vfa = block_.damped + 7 * nv;
  double v = ReachedDot(kind, index, pic, tan_.dqfrc_smooth);
  if (kind == kVel) {
    const Problem& p = *stage_.problem;
    const bool island = p.islands.tree_island[p.dof_tree[index]] >= 0;
    return v + (island ? solver_sign_ * solver_c_[index] : 0) -
           smooth_.RneVelocityAdjoint(m, index);
  }
  return v - smooth_.RnePositionAdjoint(m, index, nullptr) +
         MassForm(m, tan_, x, stage_data_->qacc, nullptr) - MassForm(m, tan_, pic, vfa, nullptr);
}

void Derivative::MarkUnitTouched(const Problem& p, int dof) {
  // (IslandReach::Mark's superset without its passes over the row and Jacobian arrays)
  const Islands& is = p.islands;
  if (is.nisland == 1) {
    tan_.touched[0] = 1;
    return;
  }
  for (int k = 0; k < is.nisland; k++) tan_.touched[k] = 0;
  const int island = dof >= 0 ? is.tree_island[p.dof_tree[dof]] : -1;
  if (island >= 0) tan_.touched[island] = 1;
  // (a solver's reverse mode with the analytic tangents: dv_free stays on the tree)
  if (dof >= 0 && smooth_.island_rows()) return;
  ForNonzero(tan_.dv_free, p.nv, [&](int j) {
    const int k = is.tree_island[p.dof_tree[j]];
    if (k >= 0) tan_.touched[k] = 1;
  });
}

//---------------------------------- RK4 -----------------------------------------------------------

bool Derivative::RungeKutta(const mjModel* m) {
  const int nq = nq_, nv = nv_, na = na_, nu = nu_, ndx = 2 * nv + na, ndir = ndx + nu;
  const int nva = nv + na;
  const double h = m->opt.timestep, time = stage_data_->time;

  // directions to chain: state columns, control columns
  const bool state_out = sink_.A || (sink_.gx && sink_.dx);
  const bool ctrl_out = sink_.B || (sink_.gu && sink_.dx);
  const bool sensor_out = sink_.C || sink_.D || (sink_.ds && (sink_.gx || sink_.gu));
  const int first = state_out ? 0 : ndx, last = ctrl_out ? ndir : ndx;
  for (int k = first; k < last; k++) {
    double* K = integrator_.rk_dir_state + static_cast<size_t>(k) * ndx;
    double* S = integrator_.rk_dir_sum + static_cast<size_t>(k) * ndx;
    for (int i = 0; i < ndx; i++) K[i] = k < ndx && i == k ? 1 : 0;
    for (int i = 0; i < ndx; i++) S[i] = 0;
  }

  // nominal stages X_i, rates F_i; the first also gives the sensor Jacobians
  double* X0 = integrator_.rk_state;
  mju_copy(X0, stage_data_->qpos, nq);
  mju_copy(X0 + nq, stage_data_->qvel, nv);
  mju_copy(X0 + nq + nv, stage_data_->act, na);
  for (int stage = 0; stage < 4; stage++) {
    double* Fi = integrator_.rk_rate + stage * nva;
    if (stage > 0) RkStageState(m, stage);
    stage_data_->time = time + kRK4C[stage] * h;
    stage_.sensors = stage == 0 && sensor_out;
    if (!PrepareStage(m, true)) return false;
    if (stage == 0 && stage_.has_rows && stage_.solver && stage_.solution->position_correction) {
      fallback_ = ckFALLBACK_RK4_POSITION;
      return false;
    }
    if (stage == 0)
      elastic_.Prepare(settings_, stage_.has_rows ? stage_.problem : nullptr, nominal_.qvel);
    mju_copy(Fi, integrator_.qacc, nv);
    mju_copy(Fi + nv, nominal_.act_dot, na);

    if (!StageJacobian(m)) return false;

    RkChainStage(m, stage, first, last);
  }

  RkNextState(m, first, last);
  return true;
}

bool Derivative::StageJacobian(const mjModel* m) {
  const int nv = nv_, na = na_, nva = nv + na;
  double* ds = out_.sensor_col;
  return Directions(m, true, true, [&](int kind, int index, int col) {
    double* g = integrator_.rk_stage_jac + static_cast<size_t>(col) * nva;
    mju_copy(g, tan_.dqacc_int, nv);
    mju_copy(g + nv, tan_.dact_dot, na);
    if (stage_.sensors) {
      smooth_.SensorTangent(m, kind, ds);
      EmitSensor(col, ds);
    }
  });
}

bool Derivative::AdaptiveParamRates(const mjModel* m) {
  const int nv = nv_, na = na_, nva = nv + na, ndir = 2 * nv + na + nu_;
  const int begin = ad_.param_begin, end = std::min(param_.np, begin + ndir);
  mju_zero(ad_.gp.data(), static_cast<size_t>(end - begin) * nva);
  for (int k = begin; k < end; k++) {
    // (a column analytic at one stage and differenced at another would mix two derivatives)
    if (ParamKindAnalytic(param_.params[k].kind) && !ParamAnalytic(k)) return false;
  }
  return ParamDirections(m, begin, end, [&](int, int k, int) {
    double* g = ad_.gp.data() + static_cast<size_t>(k - begin) * nva;
    mju_copy(g, tan_.dqacc_int, nv);
    mju_copy(g + nv, tan_.dact_dot, na);
    if (stage_.sensors) EmitParamSensor(k);
  });
}

void Derivative::RkStageState(const mjModel* m, int stage) {
  // X_i = X_0 (+) h a_i (v_{i-1}, F_{i-1}) into stage_data_
  const int nq = nq_, nv = nv_, na = na_, nva = nv + na;
  const double h = m->opt.timestep;
  const double* X0 = integrator_.rk_state;
  double* w = integrator_.qvel_next;
  const double a = kRK4A[4 * (stage - 1)];  // the diagonal: stage i uses stage i - 1 alone
  const double* Fp = integrator_.rk_rate + (stage - 1) * nva;
  const double* vp = integrator_.rk_state + (stage - 1) * (nq + nv + na) + nq;
  double* Xi = integrator_.rk_state + stage * (nq + nv + na);
  for (int i = 0; i < nv; i++) w[i] = a * vp[i];
  mju_copy(Xi, X0, nq);
  mj_integratePos(m, Xi, w, h);
  for (int i = 0; i < nv; i++) Xi[nq + i] = X0[nq + i] + h * a * Fp[i];
  for (int i = 0; i < na; i++) Xi[nq + nv + i] = X0[nq + nv + i] + h * a * Fp[nv + i];
  mju_copy(stage_data_->qpos, Xi, nq);
  mju_copy(stage_data_->qvel, Xi + nq, nv);
  mju_copy(stage_data_->act, Xi + nq + nv, na);
}

void Derivative::RkChainStage(const mjModel* m, int stage, int first, int last) {
  const int nv = nv_, na = na_, ndx = 2 * nv + na, nva = nv + na, nq = nq_;
  const double h = m->opt.timestep;
  const double* G = integrator_.rk_stage_jac;
  double* w = integrator_.qvel_next;

  // each direction: dF_i = G [dX_i; du], S += b_i (dv_i, dF_i), dX_{i+1}
  const double* vi = integrator_.rk_state + stage * (nq + nv + na) + nq;
  if (stage < 3) {
    for (int i = 0; i < nv; i++) w[i] = kRK4A[4 * stage] * vi[i];
    IntegrateMaps(m, w, h, integrator_.step_maps);
  }
  for (int k = first; k < last; k++) {
    double* K = integrator_.rk_dir_state + static_cast<size_t>(k) * ndx;
    double* S = integrator_.rk_dir_sum + static_cast<size_t>(k) * ndx;
    double* dF = scratch_.a;
    double* dFact = tan_.dact;
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
      const double a = kRK4A[4 * stage];
      double* dw = scratch_.b;
      for (int i = 0; i < nv; i++) dw[i] = a * K[nv + i];
      double* e = tan_.dq;
      mju_zero(e, nv);
      if (k < nv) e[k] = 1;
      IntegrateTangent(m, integrator_.step_maps, h, e, dw, K);
      for (int i = 0; i < nv; i++) K[nv + i] = (k == nv + i ? 1 : 0) + h * a * dF[i];
      for (int i = 0; i < na; i++) K[2 * nv + i] = (k == 2 * nv + i ? 1 : 0) + h * a * dFact[i];
    }
  }
}

void Derivative::RkNextState(const mjModel* m, int first, int last) {
  const int nq = nq_, nv = nv_, na = na_, ndx = 2 * nv + na, nva = nv + na;
  const double h = m->opt.timestep;
  const double* X0 = integrator_.rk_state;

  // next state: v+ = v0 + h sum b F, q+ = q0 (+) h sum b v, act+ = act0 + h sum b F_act
  double* wsum = integrator_.qvel_next;
  double* rate = scratch_.b;
  mju_zero(wsum, nv);
  mju_zero(rate, nv + na);
  for (int stage = 0; stage < 4; stage++) {
    const double* vi = integrator_.rk_state + stage * (nq + nv + na) + nq;
    const double* Fi = integrator_.rk_rate + stage * nva;
    for (int i = 0; i < nv; i++) wsum[i] += kRK4B[stage] * vi[i];
    for (int i = 0; i < nva; i++) rate[i] += kRK4B[stage] * Fi[i];
  }
  double* out = out_.state_col;
  IntegrateMaps(m, wsum, h, integrator_.step_maps);
  double* vnext = tan_.dv_free;
  for (int i = 0; i < nv; i++) vnext[i] = X0[nq + i] + h * rate[i];
  elastic_.Select(vnext);
  for (int k = first; k < last; k++) {
    const double* S = integrator_.rk_dir_sum + static_cast<size_t>(k) * ndx;
    double* e = tan_.dq;
    mju_zero(e, nv);
    if (k < nv) e[k] = 1;
    IntegrateTangent(m, integrator_.step_maps, h, e, S, out);
    for (int i = 0; i < nv; i++) out[nv + i] = (k == nv + i ? 1 : 0) + h * S[nv + i];
    double* ea = tan_.dact;
    for (int i = 0; i < na; i++) ea[i] = k == 2 * nv + i ? 1 : 0;
    ActivationTangent(m, X0 + nq + nv, rate + nv, ea, S + 2 * nv, h, out + 2 * nv);
    EmitState(k, out);
  }
  sink_direct_ |= elastic_.n() > 0 && sink_.A;  // (A corrected in place)
  elastic_.Finish(h, ndx, sink_.A, sink_.gx, sink_.dx);
}

}  // namespace contactkit
