// Copyright 2026 The contactkit developers.
#include "solvers/common/islands.h"

namespace contactkit {
namespace {

int Find(int* uf, int a) {
  while (uf[a] != a) {
    uf[a] = uf[uf[a]];
    a = uf[a];
  }
  return a;
}

}  // namespace

void Islands::Build(const SparseRows& J, const int* dof_tree) {
  int* uf = scratch;
  int* count = scratch + ntree;
  for (int t = 0; t < ntree; t++) {
    uf[t] = t;
    count[t] = 0;
  }

  // union the trees of each row; mark trees that carry rows
  for (int i = 0; i < J.nrow; i++) {
    const int n = J.rownnz[i], adr = J.rowadr[i];
    if (n == 0) continue;
    int root = Find(uf, dof_tree[J.colind[adr]]);
    count[root] = 1;
    for (int k = 1; k < n; k++) {
      const int other = Find(uf, dof_tree[J.colind[adr + k]]);
      if (other != root) {
        // attach the larger index under the smaller one so roots are the first tree
        if (other < root) {
          uf[root] = other;
          root = other;
        } else {
          uf[other] = root;
        }
        count[root] = 1;
      }
    }
  }

  // number islands in the order of their first tree
  nisland = 0;
  for (int t = 0; t < ntree; t++) {
    const int r = Find(uf, t);
    if (r == t) {
      tree_island[t] = count[t] ? nisland++ : -1;
    } else {
      count[r] = 1;
      tree_island[t] = -2;  // resolved below
    }
  }
  for (int t = 0; t < ntree; t++) {
    if (tree_island[t] == -2) tree_island[t] = tree_island[Find(uf, t)];
  }

  // trees and dofs per island
  for (int k = 0; k < nisland; k++) ntrees[k] = ndofs[k] = nrows[k] = 0;
  for (int t = 0; t < ntree; t++) {
    const int k = tree_island[t];
    if (k < 0) continue;
    ntrees[k]++;
    ndofs[k] += tree_dofnum[t];
  }
  int tadr = 0, dadr = 0;
  for (int k = 0; k < nisland; k++) {
    treeadr[k] = tadr;
    dofadr[k] = dadr;
    tadr += ntrees[k];
    dadr += ndofs[k];
    ntrees[k] = ndofs[k] = 0;
  }
  for (int t = 0; t < ntree; t++) {
    const int k = tree_island[t];
    if (k < 0) continue;
    trees[treeadr[k] + ntrees[k]++] = t;
    for (int j = 0; j < tree_dofnum[t]; j++) {
      dofs[dofadr[k] + ndofs[k]++] = tree_dofadr[t] + j;
    }
  }

  // rows per island
  for (int i = 0; i < J.nrow; i++) {
    row_island[i] = J.rownnz[i] ? tree_island[dof_tree[J.colind[J.rowadr[i]]]] : -1;
    if (row_island[i] >= 0) nrows[row_island[i]]++;
  }
  int radr = 0;
  for (int k = 0; k < nisland; k++) {
    rowadr[k] = radr;
    radr += nrows[k];
    nrows[k] = 0;
  }
  for (int i = 0; i < J.nrow; i++) {
    const int k = row_island[i];
    if (k >= 0) rows[rowadr[k] + nrows[k]++] = i;
  }
}

}  // namespace contactkit
