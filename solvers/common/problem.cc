// Copyright 2026 The contactkit developers.
#include "solvers/common/problem.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace contactkit {
namespace {

// tree structure arrays: parent, madr, dof_tree (nv), tree_dofadr, tree_dofnum (ntree)
struct TreeArrays {
  int *parent, *madr, *dof_tree, *tree_dofadr, *tree_dofnum;
  int* mass_col;  // TreeMass::col (nM)
};

void Carve(ArenaCarver& c, const ProblemDims& d, Problem* p, Solution* s, TreeArrays* t) {
  const size_t nv = d.nv, rows = d.max_rows, nnz = d.max_nnz, ntree = d.ntree;
  p->v_free = c.Take<double>(nv);
  p->mass.M = c.Take<double>(d.nM);
  p->mass.LD = c.Take<double>(d.nM);
  p->mass.Dinv = c.Take<double>(nv);
  p->J.rownnz = c.Take<int>(rows);
  p->J.rowadr = c.Take<int>(rows);
  p->J.colind = c.Take<int>(nnz);
  p->J.val = c.Take<double>(nnz);
  p->kind = c.Take<int>(rows);
  p->mj_type = c.Take<int>(rows);
  p->mj_id = c.Take<int>(rows);
  p->pos = c.Take<double>(rows);
  p->margin = c.Take<double>(rows);
  p->floss = c.Take<double>(rows);
  p->vel = c.Take<double>(rows);
  p->diag_approx = c.Take<double>(rows);
  p->imp = c.Take<double>(rows);
  p->R = c.Take<double>(rows);
  p->aref = c.Take<double>(rows);
  p->KB = c.Take<double>(2 * rows);
  p->con = c.Take<Contact>(d.max_contacts);
  Islands& is = p->islands;
  is.tree_island = c.Take<int>(ntree);
  is.row_island = c.Take<int>(rows);
  is.treeadr = c.Take<int>(ntree);
  is.ntrees = c.Take<int>(ntree);
  is.trees = c.Take<int>(ntree);
  is.rowadr = c.Take<int>(ntree);
  is.nrows = c.Take<int>(ntree);
  is.rows = c.Take<int>(rows);
  is.dofadr = c.Take<int>(ntree);
  is.ndofs = c.Take<int>(ntree);
  is.dofs = c.Take<int>(nv);
  is.scratch = c.Take<int>(2 * ntree);
  s->force = c.Take<double>(rows);
  s->v_next = c.Take<double>(nv);
  t->parent = c.Take<int>(nv);
  t->madr = c.Take<int>(nv);
  t->mass_col = c.Take<int>(d.nM);
  t->dof_tree = c.Take<int>(nv);
  t->tree_dofadr = c.Take<int>(ntree);
  t->tree_dofnum = c.Take<int>(ntree);
}

}  // namespace

void ProblemStorage::Allocate(const ProblemDims& dims, const int* dof_parent, const int* dof_madr,
                              const int* dof_tree, int ntree) {
  dims_ = dims;
  dims_.ntree = ntree;
  problem_ = Problem();
  solution_ = Solution();

  // one zeroed block holding everything
  TreeArrays t;
  arena_.Allocate([&](ArenaCarver& c) { Carve(c, dims_, &problem_, &solution_, &t); });

  // tree structure (copied so the problem does not point into the model)
  int *parent = t.parent, *madr = t.madr, *dtree = t.dof_tree;
  int *tadr = t.tree_dofadr, *tnum = t.tree_dofnum;
  // a model without dofs has null arrays, which memcpy may not be given even for 0 bytes
  if (dims.nv > 0) {
    std::memcpy(parent, dof_parent, sizeof(int) * dims.nv);
    std::memcpy(madr, dof_madr, sizeof(int) * dims.nv);
    std::memcpy(dtree, dof_tree, sizeof(int) * dims.nv);
  }
  for (int t = 0; t < ntree; t++) tnum[t] = 0;
  for (int j = dims.nv - 1; j >= 0; j--) {
    tadr[dtree[j]] = j;
    tnum[dtree[j]]++;
  }

  problem_.nv = dims.nv;
  problem_.mass.nv = dims.nv;
  problem_.mass.nM = dims.nM;
  problem_.mass.parent = parent;
  problem_.mass.madr = madr;
  if (dims.nv > 0) {
    problem_.mass.Columns(t.mass_col);
    problem_.mass.col = t.mass_col;
  }
  problem_.dof_tree = dtree;
  problem_.J.ncol = dims.nv;
  problem_.islands.ntree = ntree;
  problem_.islands.tree_dofadr = tadr;
  problem_.islands.tree_dofnum = tnum;
}

void SubMassTangent(const Problem& p, const ProblemTangent& dir, const double* x, double* y,
                    int begin, int end) {
  if (!dir.M_lazy) {
    p.mass.SubMulValues(dir.M, x, y, begin, end);
  } else if (dir.M_dof >= begin && dir.M_dof < end) {
    dir.M_lazy->SubProduct(dir.M_dof, x, y);  // (dM is zero off its tree)
  }
}

void VelocityFromForce(const Problem& p, const double* force, double* v_next, double* qfrc) {
  // v_next = J' f, then v_next = v_free + h M^-1 J' f
  p.J.MulT(force, v_next);
  if (qfrc) {
    for (int j = 0; j < p.nv; j++) qfrc[j] = v_next[j];
  }
  p.mass.Solve(v_next);
  for (int j = 0; j < p.nv; j++) v_next[j] = p.v_free[j] + p.h * v_next[j];
}

double RowInvMass(const Problem& p, int i, double* x) {
  const SparseRows& J = p.J;
  const int adr = J.rowadr[i];
  for (int k = 0; k < J.rownnz[i]; k++) x[J.colind[adr + k]] = J.val[adr + k];

  // per tree: the half solve fills in ancestors only, so it runs from the row's last column down
  double a = 0;
  ForEachRowTree(p, i, [&](int t, int k0, int k1) {
    const int begin = p.islands.tree_dofadr[t], end = J.colind[adr + k1 - 1] + 1;
    p.mass.SolveHalf(x, begin, end);
    for (int j = begin; j < end; j++) {
      a += x[j] * x[j] * p.mass.Dinv[j];
      x[j] = 0;
    }
  });
  return a;
}

void SolveNonzeroTrees(const TreeMass& mass, const Islands& is, int t0, int t1, double* x, int nb) {
  for (int t = t0; t < t1; t++) {
    const int b = is.tree_dofadr[t], e = b + is.tree_dofnum[t];
    const double* y = x + static_cast<size_t>(b) * nb;
    int i = 0;
    while (i < (e - b) * nb && y[i] == 0) i++;
    if (i == (e - b) * nb) continue;
    if (nb == 1) {
      mass.Solve(x, b, e);
    } else {
      mass.SolveBlock(x, nb, b, e);
    }
  }
}

void FreeVelocityOf(const Problem& p, const ProblemTangent& dir, double* out) {
  const int nv = p.nv;
  if (dir.v_free) {
    for (int j = 0; j < nv; j++) out[j] = dir.v_free[j];
    return;
  }
  for (int j = 0; j < nv; j++) out[j] = dir.v_free_rhs[j];
  SolveNonzeroTrees(p.mass, p.islands, 0, p.islands.ntree, out);
  for (int j = 0; j < nv; j++) out[j] = (j == dir.v_free_unit ? 1.0 : 0.0) + p.h * out[j];
}

void FreeVelocities(const Problem& p, int island, double* X, int ld, const int* cols,
                    const int* unit, int n, double* scratch) {
  const Islands& is = p.islands;
  // the columns packed in scratch (stride n), or without scratch solved in X itself, padded to
  // a multiple of 4 columns within ld (each column's solve the same at any width)
  double* Y = scratch ? scratch : X;
  const int ldy = scratch ? n : ld, nb = scratch ? n : std::min((n + 3) / 4 * 4, ld);
  const int nt = island < 0 ? is.ntree : is.ntrees[island];
  for (int a = 0; a < nt && n > 0; a++) {
    const int t = island < 0 ? a : is.trees[is.treeadr[island] + a];
    const int b = is.tree_dofadr[t], e = b + is.tree_dofnum[t];
    bool any = false;
    for (int j = b; j < e; j++) {
      double* y = Y + static_cast<size_t>(j) * ldy;
      if (scratch) {
        for (int k = 0; k < n; k++) y[k] = X[static_cast<size_t>(j) * ld + cols[k]];
      }
      for (int k = 0; k < n; k++) any |= y[k] != 0;
      for (int k = n; k < nb; k++) y[k] = 0;
    }
    if (any) p.mass.SolveBlock(Y, nb, ldy, b, e);
    if (!scratch) {
      // (0 + h y, then 1 + that at the unit: the bits of the packed path's 1 + h y)
      for (int j = b; j < e; j++) {
        double* x = X + static_cast<size_t>(j) * ld;
        for (int k = 0; k < n; k++) x[k] = 0.0 + p.h * x[k];
      }
      for (int k = 0; k < n; k++) {
        if (unit[k] >= b && unit[k] < e) X[static_cast<size_t>(unit[k]) * ld + k] += 1.0;
      }
      continue;
    }
    for (int j = b; j < e; j++) {
      const double* y = Y + static_cast<size_t>(j) * ldy;
      double* x = X + static_cast<size_t>(j) * ld;
      for (int k = 0; k < n; k++) x[cols[k]] = (j == unit[k] ? 1.0 : 0.0) + p.h * y[k];
    }
  }
}

void VelocityTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                     const double* dforce, double* dv, double* scratch) {
  const int nv = p.nv;
  const SparseRows& J = p.J;

  // dv = J' df + dJ' f
  J.MulT(dforce, dv);
  if (dir.J) {
    for (int i = 0; i < J.nrow; i++) {
      const double fi = sol.force[i];
      if (fi == 0) continue;
      for (int k = 0; k < J.rownnz[i]; k++)
        dv[J.colind[J.rowadr[i] + k]] += dir.J[J.rowadr[i] + k] * fi;
    }
  }

  // - dM M^-1 J' f, with M^-1 J' f = (v+ - v_free) / h
  if (dir.M) {
    for (int j = 0; j < nv; j++) scratch[j] = (sol.v_next[j] - p.v_free[j]) / p.h;
    SubMassTangent(p, dir, scratch, dv, 0, nv);
  }

  // dv = dv_free + h M^-1 (...)
  p.mass.Solve(dv);
  for (int j = 0; j < nv; j++) dv[j] = (dir.v_free ? dir.v_free[j] : 0) + p.h * dv[j];
}

bool ProblemIsFinite(const Problem& p) {
  auto finite = [](const double* x, int n) {
    for (int i = 0; i < n; i++) {
      if (!std::isfinite(x[i])) return false;
    }
    return true;
  };
  return finite(p.v_free, p.nv) && finite(p.mass.M, p.mass.nM) && finite(p.J.val, p.J.nnz) &&
         finite(p.pos, p.nrow) && finite(p.aref, p.nrow) && finite(p.R, p.nrow) &&
         finite(p.floss, p.nrow) && std::isfinite(p.h);
}

}  // namespace contactkit
