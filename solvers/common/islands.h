// Copyright 2026 The contactkit developers.
//
// Islands: groups of kinematic trees coupled by constraint rows. Solvers treat islands as
// independent problems, so bodies that do not interact never share a factorization.
#ifndef CONTACTKIT_SOLVERS_COMMON_ISLANDS_H_
#define CONTACTKIT_SOLVERS_COMMON_ISLANDS_H_

#include "solvers/common/sparse.h"

namespace contactkit {

struct Islands {
  int nisland = 0;                   // islands with at least one row
  int ntree = 0;                     // kinematic trees
  const int* tree_dofadr = nullptr;  // first dof of each tree                    (ntree)
  const int* tree_dofnum = nullptr;  // dofs of each tree                         (ntree)
  int* tree_island = nullptr;        // island of each tree, -1: unconstrained    (ntree)
  int* row_island = nullptr;         // island of each row, -1: row has no dofs   (max_rows)
  int* treeadr = nullptr;            // first entry of each island in trees       (ntree)
  int* ntrees = nullptr;             // trees of each island                      (ntree)
  int* trees = nullptr;              // trees grouped by island, ascending        (ntree)
  int* rowadr = nullptr;             // first entry of each island in rows        (ntree)
  int* nrows = nullptr;              // rows of each island                       (ntree)
  int* rows = nullptr;               // rows grouped by island, ascending         (max_rows)
  int* dofadr = nullptr;             // first entry of each island in dofs        (ntree)
  int* ndofs = nullptr;              // dofs of each island                       (ntree)
  int* dofs = nullptr;               // dofs grouped by island, ascending         (nv)
  int* scratch = nullptr;            // union-find parents and counters           (2*ntree)

  // group trees by the rows of J (columns are dofs; dof_tree maps dofs to trees)
  void Build(const SparseRows& J, const int* dof_tree);
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_ISLANDS_H_
