// Copyright 2026 The contactkit developers.
#include "solvers/common/reach.h"

#include <initializer_list>

namespace contactkit {

void IslandReach::Prepare(const Problem& p) {
  const SparseRows& J = p.J;
  j_ordered_ = p.nrow == 0 || J.rowadr[0] == 0;
  for (int i = 0; i + 1 < p.nrow && j_ordered_; i++) {
    j_ordered_ = J.rowadr[i + 1] == J.rowadr[i] + J.rownnz[i];
  }
  m_ordered_ = p.nv == 0 || p.mass.madr[0] == 0;
  for (int j = 0; j + 1 < p.nv && m_ordered_; j++) {
    m_ordered_ = p.mass.madr[j + 1] > p.mass.madr[j];
  }
}

void IslandReach::Mark(const Problem& p, const ProblemTangent& dir, uint8_t* touched) const {
  // one pass over each array (a direction that moves one tree has few nonzeros), the nonzeros
  // mapped to islands
  const Islands& is = p.islands;
  const TreeMass& mass = p.mass;
  const SparseRows& J = p.J;
  if (is.nisland == 1) {
    touched[0] = 1;  // nothing to skip: the one island (a superset)
    return;
  }
  for (int k = 0; k < is.nisland; k++) touched[k] = 0;
  auto dof = [&](int j) {
    const int k = is.tree_island[p.dof_tree[j]];
    if (k >= 0) touched[k] = 1;
  };
  auto row = [&](int i) {
    if (is.row_island[i] >= 0) touched[is.row_island[i]] = 1;
  };
  if (dir.v_free) ForNonzero(dir.v_free, p.nv, dof);
  const double* V = dir.M ? dir.Mass() : nullptr;
  if (dir.M && m_ordered_) {
    int j = 0;
    ForNonzero(V, mass.nM, [&](int a) {
      while (j + 1 < p.nv && mass.madr[j + 1] <= a) j++;
      dof(j);
    });
  } else if (dir.M) {
    for (int j = 0; j < p.nv; j++) {
      int adr = mass.madr[j];
      bool nonzero = V[adr] != 0;
      for (int i = mass.parent[j]; i >= 0 && !nonzero; i = mass.parent[i]) nonzero = V[++adr] != 0;
      if (nonzero) dof(j);
    }
  }
  for (const double* x : {dir.pos, dir.vel, dir.R, dir.diag_approx, dir.aref, dir.disp}) {
    if (x) ForNonzero(x, p.nrow, row);
  }
  if (!dir.J) return;
  if (j_ordered_) {
    int i = 0;
    ForNonzero(dir.J, p.nrow ? J.rowadr[p.nrow - 1] + J.rownnz[p.nrow - 1] : 0, [&](int a) {
      while (i + 1 < p.nrow && J.rowadr[i + 1] <= a) i++;
      row(i);
    });
    return;
  }
  for (int i = 0; i < p.nrow; i++) {
    for (int a = J.rowadr[i]; a < J.rowadr[i] + J.rownnz[i]; a++) {
      if (dir.J[a] != 0) {
        row(i);
        break;
      }
    }
  }
}

}  // namespace contactkit
