// Copyright 2026 The contactkit developers.
//
// Lemke's complementary pivoting for the boxed LCP of boxed.h, written as a standard LCP
// w = M z + q >= 0, z >= 0, w'z = 0 (Cottle, Pang & Stone, The Linear Complementarity Problem,
// section 4.4; the friction box as in Stewart & Trinkle 1996, one slack per tangent direction):
//   unilateral row i (bounds [0, inf)):  z = x_i,          w = (A x + b)_i
//   bilateral row i (unbounded):         x_i = p - m,      w_p = (A x + b)_i, w_m = -(A x + b)_i
//   box row i (|x_i| <= mu x_f or <= hi): x_i = p - m and a slack s:
//       w_p = (A x + b)_i + s,  w_m = -(A x + b)_i + s,  w_s = mu x_f - p - m  (or hi - p - m)
// so the friction bounds stay coupled to the normal forces. From scratch the starting basis is all
// slacks and the covering vector d is all ones; warm-started, the starting basis B is the
// complementary basis of a given classification and d = B e' with e' one on the rows whose basic
// value is negative (Cottle, Pang & Stone section 4.4, an arbitrary starting basis), so the
// artificial variable enters only there and the pivots grow with the rows the classification gets
// wrong. Ties in the ratio test are broken lexicographically. The basis inverse is kept explicitly
// and updated by each pivot, but only its columns of nonbasic slacks (the others are unit vectors),
// so a pivot costs O(N k) with k structural variables in the basis; it is refactored (O(k^3))
// only when the basic solution's residual shows lost accuracy. Columns of M are formed from A
// on demand.
#ifndef CONTACTKIT_SOLVERS_LCP_LEMKE_H_
#define CONTACTKIT_SOLVERS_LCP_LEMKE_H_

#include <vector>

#include "solvers/common/arena.h"
#include "solvers/lcp/dense_lcp.h"

namespace contactkit {

class Lemke {
 public:
  // allocate for boxed problems up to nmax rows (3 nmax standard variables)
  void Allocate(int nmax);

  // Solve lcp: x (n) and the classification read from the final basis (state, n). Returns false
  // on a secondary ray, the pivot limit, a numerically singular pivot or bounds it cannot
  // express (a finite bound that is not symmetric about zero and not [0, inf)).
  // With warm, the run starts from the complementary basis of the classification state holds on
  // entry (x: the impulses whose signs pick p or m of free rows), and fails at once (warm_ok()
  // false, no pivot) when that basis is singular (a pivot of its structural block at most
  // kWarmPivot times the block's largest entry). A warm run takes at most kWarmPivots +
  // kWarmPerRow pivots per row of negative basic value in the starting basis.
  bool Solve(const DenseLcp& lcp, int max_pivots, double* x, signed char* state, int* pivots,
             bool warm = false);
  bool warm_ok() const { return warm_ok_; }

 private:
  // column of [I, -M, -d] for variable v (w: 0..N-1, z: N..2N-1, z0: 2N) into col (N)
  void Column(const DenseLcp& lcp, int v, double* col) const;

  // the complementary basis of state (n; x: signs of free rows) as the starting basis, its basic
  // solution and the covering vector d = B e' (e': the rows with a negative basic value); false
  // (the basis left to the caller to reset) if that basis is singular
  bool WarmBasis(const DenseLcp& lcp, const signed char* state, const double* x);

  // recompute the basis inverse and the basic solution from the basic columns (only the block of
  // the structural columns is inverted); false if singular (a pivot of the block at most
  // pivot_tol times its largest entry)
  bool Refactor(const DenseLcp& lcp, double pivot_tol = 0);
  bool RefactorBody(const DenseLcp& lcp, double pivot_tol);  // (and its AVX2 clone: the same bits)
  bool RefactorAvx2(const DenseLcp& lcp, double pivot_tol);

  // one step of iterative refinement of the basic solution (after Refactor; uses tmp_, col_)
  void Refine(const DenseLcp& lcp);

  // largest |q - B xB| of the current basis, relative to max(1, |q|) (uses tmp_)
  double Residual(const DenseLcp& lcp);

  int nmax_ = 0;             // standard variables capacity (3 nmax rows)
  int N_ = 0;                // standard variables of the current problem
  std::vector<int> kind_;    // per row: 0 unilateral, 1 bilateral, 2 box      (nmax)
  std::vector<int> var_;     // per row: first standard variable               (nmax)
  std::vector<int> row_;     // per standard variable: its row                 (3 nmax)
  std::vector<int> role_;    // per standard variable: 0 x, 1 p, 2 m, 3 slack  (3 nmax)
  std::vector<double> xB_;   // basic solution                                 (N)
  std::vector<double> q_;    // right-hand side                                (N)
  std::vector<double> d_;    // covering vector (z0's column is -d)            (N)
  bool warm_ok_ = false;     // the last Solve started from the given classification
  int nneg_ = 0;             // rows of its starting basis with a negative basic value
  std::vector<int> basic_;   // basic variable of each row                     (N)
  std::vector<int> where_;   // row of each basic variable, -1: nonbasic       (2N + 1)
  std::vector<double> col_;  // entering column in basis coordinates           (N)
  std::vector<double> tmp_;  // scratch                                        (2N)
  std::vector<double> z_;    // standard solution                              (2N + 1)
  std::vector<int> cand_;    // ratio-test candidates                          (N)
  ZeroedArray<double> bu_;   // basis inverse on the columns of nonbasic slacks (N x N)
  std::vector<int> ucol_;    // column of the inverse in each column of bu_     (N)
  std::vector<int> upos_;    // column of bu_ holding column j, -1: unit vector (N)
  int nu_ = 0;               // columns in bu_
  std::vector<int> rowpos_;  // Refactor: place of a row no basic slack covers (N)
  std::vector<int> perm_;    // Refactor: row interchanges                     (N)
  ZeroedArray<double> g_;    // Refactor: inverse of the structural block      (N x N)
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_LCP_LEMKE_H_
