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
// wrong. Ties in the ratio test are broken lexicographically. The basis B holds unit columns for
// its basic slacks (the rows J they cover) and k structural columns S (z and z0) for the rows R no
// slack covers, so B x = y gives S_R x_T = y_R and x_J = y_J - S_J x_T: only the inverse G of the
// k x k block S_R is kept, updated by each pivot in O(k^2) (a row and column added, replaced or
// removed), and S's columns, sparse as M is, are kept with their nonzero rows; a column in basis
// coordinates costs O(k^2 + nnz(S)) instead of O(N k) with N standard variables. G is refactored
// (O(k^3)) only when the basic solution's residual shows lost accuracy. Columns of M are formed
// from A on demand.
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

  // recompute G, S and the basic solution from the basic variables; false if S_R is singular (a
  // pivot at most pivot_tol times its largest entry)
  bool Refactor(const DenseLcp& lcp, double pivot_tol = 0);
  bool RefactorBody(const DenseLcp& lcp, double pivot_tol);  // (and its AVX2 clone: the same bits)
  bool RefactorAvx2(const DenseLcp& lcp, double pivot_tol);

  // out = B^-1 y (y: N, by row; out: N, by place in the basis); xT_ gets its structural part
  void Apply(const double* y, double* out);

  // the structural column of variable v (formed) as S's column t, with its nonzero rows
  void SetColumn(const DenseLcp& lcp, int t, int v);
  // S's column t as the column of variable v, from a formed column a (N)
  void StoreColumn(int t, int v, const double* a);

  // the pivot on place r with entering variable v (col_ and xT_ from Apply of its column):
  // basic solution, G, S and the index maps
  void Pivot(int r, int v);

  // row r of S over T times G: v (k, over R)
  void RowTimesG(int r, double* v);

  // one step of iterative refinement of the basic solution (after Refactor; uses tmp_, col_)
  void Refine(const DenseLcp& lcp);

  // largest |q - B xB| of the current basis, relative to max(1, |q|) (uses tmp_: r in its first N)
  double Residual(const DenseLcp& lcp);

  int nmax_ = 0;              // standard variables capacity (3 nmax rows)
  int N_ = 0;                 // standard variables of the current problem
  std::vector<int> kind_;     // per row: 0 unilateral, 1 bilateral, 2 box      (nmax)
  std::vector<int> var_;      // per row: first standard variable               (nmax)
  std::vector<int> row_;      // per standard variable: its row                 (3 nmax)
  std::vector<int> role_;     // per standard variable: 0 x, 1 p, 2 m, 3 slack  (3 nmax)
  std::vector<double> xB_;    // basic solution                                 (N)
  std::vector<double> q_;     // right-hand side                                (N)
  std::vector<double> d_;     // covering vector (z0's column is -d)            (N)
  bool warm_ok_ = false;      // the last Solve started from the given classification
  int nneg_ = 0;              // rows of its starting basis with a negative basic value
  std::vector<int> basic_;    // basic variable of each place                   (N)
  std::vector<int> where_;    // place of each basic variable, -1: nonbasic     (2N + 1)
  std::vector<double> col_;   // entering column in basis coordinates           (N)
  std::vector<double> tmp_;   // scratch                                        (2N)
  std::vector<double> z_;     // standard solution                              (2N + 1)
  std::vector<int> cand_;     // ratio-test candidates                          (N)
  int k_ = 0;                 // structural basic variables (= rows in R)
  std::vector<int> tvar_;     // structural basic variable of each column of S  (N)
  std::vector<int> tpos_;     // column of S of structural variable v - N, -1   (N + 1)
  std::vector<int> req_;      // row of R at each column of G                   (N)
  std::vector<int> rpos_;     // column of G of row j, -1: covered by its slack (N)
  std::vector<double> xT_;    // structural part of the last Apply              (N)
  std::vector<double> rowv_;  // Apply's y_R, then Pivot's update row            (N)
  std::vector<double> srow_;  // a row of S over T                              (N)
  ZeroedArray<double> g_;     // G, the inverse of S_R, row-major by T          (N x N)
  ZeroedArray<double> s_;     // S's columns (column-major)                     (N x N)
  ZeroedArray<int> snz_;      // their nonzero rows                             (N x N)
  std::vector<int> snn_;      // their counts                                   (N)
  ZeroedArray<double> lex_;   // tied places' rows of B^-1 on R; Refactor's S_R (N x N)
  std::vector<int> perm_;     // Refactor: row interchanges                     (N)
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_LCP_LEMKE_H_
