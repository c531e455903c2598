// Copyright 2026 The contactkit developers.
//
// LU factorization of one island's Newton matrix A = M + J'WJ: nonsymmetric values on a
// symmetric sparsity pattern (the Coulomb-friction coupling makes W nonsymmetric; Dojo's LDU,
// without pivoting in dof space). Three layouts, chosen per island and step:
//  - tree-sparse: one kinematic tree whose every row lies on a single root-to-leaf dof chain
//    (contacts with the world or with other islands' static geometry, joint limits). J'WJ then
//    only couples dofs with their ancestors, MuJoCo's mass-matrix pattern, and eliminating the
//    dofs from the leaves to the root makes no fill: O(sum of depth^2) work.
//  - block-sparse over trees: each tree is a dense block, rows couple the trees they touch;
//    trees are eliminated in minimum (dof-weighted) degree order, fill is computed symbolically
//    and stored in a pool preallocated at setup. Many small trees (stacked free bodies) cost a
//    few dense 6x6 block operations per coupling instead of an O(nv^3) dense factorization.
//  - constraint space, when an island has few rows m against its dofs: with the Delassus matrix
//    D = J M^-1 J' and Y = M^-1 J' computed once per analysis from M's tree factor,
//    (M + J'WJ)^-1 = M^-1 - Y (I + W D)^-1 W J M^-1 (Woodbury), and only the m x m matrix
//    I + W D is factored per iteration (dense LU with partial pivoting). W comes block by block
//    (AddW) instead of J'WJ.
// Vectors are indexed by global dof; only the island's dofs are read or written.
#ifndef CONTACTKIT_SOLVERS_IPM_ISLAND_LU_H_
#define CONTACTKIT_SOLVERS_IPM_ISLAND_LU_H_

#include <cstdint>
#include <string>
#include <vector>

#include "solvers/common/problem.h"

namespace contactkit {

// 1 if a row's ascending dofs cols form one chain (each an ancestor of the next)
bool RowIsChain(const int* cols, int n, const int* parent);

class IslandLU {
 public:
  enum Space { kAuto, kDofSpace, kConstraintSpace };  // layout choice in Analyze

  // allocate for every problem within dims; the dense block pool holds min(nv^2, max_pool)
  // numbers (the worst case is one island whose trees all couple)
  bool Allocate(const ProblemDims& dims, long max_pool, std::string* error);

  // analyze island k of p: choose the layout, order trees, compute fill; false if the fill does
  // not fit in the preallocated pool. chain[i] is 1 if row i lies on one dof chain. space:
  // automatic (estimated cost per iteration), or forced (constraint space needs at most 64 rows).
  // right: the rows on the right of J'WJ when they differ from J (gap re-check), null for J
  bool Analyze(const Problem& p, int island, const uint8_t* chain, Space space = kAuto,
               const SparseRows* right = nullptr);

  // A = M_eff restricted to the island
  void SetMass(const Problem& p);

  // A(cols, cols) += Jc' T for rows Jc and T (dim x n, row-major) on ascending global dofs cols
  // (dof-space layouts); m > 1: m such blocks one after another (m dim x n), added in order, each
  // entry as m calls would give it (a block-sparse island's in one pass)
  void AddJtT(const int* cols, int n, int dim, const double* Jc, const double* T, int m = 1);

  // A(cols, cols) += sum_b Jc_b' W_b G_b over m blocks of dim rows Jc_b and G_b (m dim x n,
  // row-major, blocks one after another) on ascending global dofs cols and weights W_b (m blocks
  // of dim x dim, row-major), in one pass when the rows lie on one chain of a tree-sparse island
  // and (dim, m) is (1, 1), (3, 1..kMaxGroup), (4, 1) or (6, 1); false (nothing added) otherwise
  static constexpr int kMaxGroup = 4;
  bool AddJtWG(const int* cols, int n, int dim, int m, const double* Jc, const double* W,
               const double* G);

  // W(rows, rows) = Wb for consecutive rows [row, row + dim) (dim x dim, row-major), so that
  // A = M + J'WJ (constraint-space layout)
  void AddW(int row, int dim, const double* Wb);

  // factor in place; false on a zero or non-finite pivot. min/max |pivot| for the condition
  bool Factor(double* min_pivot, double* max_pivot);

  // x <- A^-1 x and x <- A^-T x (island dofs of a global-dof vector)
  void Solve(double* x);
  void SolveTranspose(double* x);

  // X <- A^-1 X for ncol columns interleaved by dof, X[j * stride + c] (c < ncol <= stride,
  // island dofs j only): each column as Solve would give it, the tree-sparse layout's sweeps over
  // all columns at once
  void SolveColumns(double* X, int ncol, int stride);

  bool tree_sparse() const { return tree_sparse_; }
  bool constraint_space() const { return cspace_; }
  int ntrees() const { return npos_; }
  int fill() const { return pool_used_; }

 private:
  // Analyze's parts for island_: the constraint-space layout if it is asked for or cheaper
  // (false: not chosen); the trees' adjacency from the rows; the minimum-degree order of the
  // trees (false: more fill than the workspace holds); the blocks' places in the pool (false:
  // the pool is too small)
  bool ConstraintSpace(const Problem& p, bool chains, Space space);
  void Adjacency(const Problem& p);
  bool EliminationOrder(const Problem& p);
  bool LayoutBlocks(const Problem& p);

  // block (i, j) of positions i != j: pointer to its n_i x n_j row-major storage
  double* Block(int i, int j);
  void AddJtTLarge(const int* cols, int n, int dim, const double* Jc, const double* T);
  void AddJtTChain(const int* cols, int n, int dim, const double* Jc, const double* T);
  void AddJtTBlocks(const int* cols, int n, int dim, int m, const double* Jc, const double* T);
  static constexpr int kMaxDenseAdd = 96;  // rows wider than this are added entry by entry
  void FactorBlocks(double* min_pivot, double* max_pivot, bool* ok);
  void FactorTree(double* min_pivot, double* max_pivot, bool* ok);
  template <int W>
  void SweepColumns(double* X, int stride) const;  // SolveColumns' sweeps on W columns

  int nv_ = 0;
  const int* parent_ = nullptr;  // dof parents of the problem                (nv)
  const int* madr_ = nullptr;    // tree-sparse row addresses of the problem  (nv)
  std::vector<int> depth_;       // ancestors of each dof                     (nv)

  // current island
  bool tree_sparse_ = false;
  int begin_ = 0, end_ = 0;   // dof range of the island's tree (tree-sparse)
  std::vector<double> lu_;    // pairs (A(i, ancestor), A(ancestor, i)) in MuJoCo's layout (2 nM)
  std::vector<double> dinv_;  // inverse pivots                            (nv)

  // block-sparse structure, by elimination position
  int npos_ = 0;
  std::vector<int> pos_size_;  // dofs of the tree at each position         (ntree)
  std::vector<int> pos_dof_;   // first global dof of each position         (ntree)
  std::vector<int> pos_vadr_;  // first entry of each position in work_     (ntree)
  std::vector<int> diag_adr_;  // pool address of each diagonal block       (ntree)
  std::vector<int> adj_adr_;   // first later neighbour of each position    (ntree)
  std::vector<int> adj_num_;   // later neighbours of each position         (ntree)
  std::vector<int> adj_;       // later neighbours (positions, ascending)   (max_edges)
  std::vector<int> lblk_;      // pool address of L(j, k) for each edge     (max_edges)
  std::vector<int> ublk_;      // pool address of U(k, j) for each edge     (max_edges)
  std::vector<int> dof_pos_;   // position of each dof's tree               (nv)
  std::vector<int> dof_off_;   // offset of each dof in its tree            (nv)
  std::vector<int> where_;     // scatter: edge index of a position         (ntree)
  std::vector<double> pool_;   // dense blocks                              (max_pool)
  std::vector<double> work_;   // gathered vector in position order         (nv)
  std::vector<double> col_;    // one column of SolveColumns, by global dof (nv)
  std::vector<double> add_;    // Jc' T of one row group                    (96 x 96 + 12 nv)
  int pool_used_ = 0;
  int diag_end_ = 0;  // pool entries of the diagonal blocks (the coupling blocks follow)
  int max_edges_ = 0;

  // constraint space
  bool cspace_ = false;
  const Problem* problem_ = nullptr;
  const SparseRows* right_ = nullptr;  // rows on the right of J'WJ
  int island_ = 0;
  int m_ = 0;   // rows of the island
  int nd_ = 0;  // dofs of the island
  static constexpr int kMaxConstraintRows = 64;
  std::vector<int> row_loc_;  // local index of each island row            (rows)
  std::vector<double> Y_;     // M^-1 J' on the island dofs (m x nd)      (64 x nv)
  std::vector<double> D_;     // J M^-1 J' (m x m)                         (64 x 64)
  std::vector<double> W_;     // W (m x m), then I + W D, then its LU     (64 x 64)
  std::vector<double> K_;     // (64 x 64)
  std::vector<int> piv_;      // row pivots of the LU                      (64)
  std::vector<double> cvec_;  // constraint-space vectors                 (3 x 64)
  std::vector<int> dof_loc_;  // local index of each island dof           (nv)

  void FactorConstraintSpace(double* min_pivot, double* max_pivot, bool* ok);
  void SolveAny(double* x, bool transpose);
  void SolveBlocks(double* y) const;
  void SolveBlocksTranspose(double* y) const;
  void SolveConstraintSpace(double* x, bool transpose);

  // minimum-degree ordering on trees
  int words_ = 0;
  std::vector<uint64_t> adjbits_;  // adjacency bitsets of local trees        (ntree x words)
  std::vector<int> local_tree_;    // local index of each global tree, -1     (ntree)
  std::vector<int> node_tree_;     // global tree of each local node          (ntree)
  std::vector<int> node_pos_;      // elimination position of each node       (ntree)
  std::vector<int> weight_;        // weighted degree of each node            (ntree)
  std::vector<uint8_t> done_;      // node eliminated                         (ntree)
  std::vector<int> elim_adr_;      // first entry of each step's neighbours   (ntree)
  std::vector<int> elim_num_;      // neighbours of each step                 (ntree)
  std::vector<int> scratch_;       // trees of one row                        (ntree)
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_IPM_ISLAND_LU_H_
