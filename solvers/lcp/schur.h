// Copyright 2026 The contactkit developers.
//
// The bilateral rows E of a boxed LCP (dense_lcp.h) eliminated by their Schur complement. They
// are always clamped (w_E = 0, x_E free), so with A_EE positive definite
//   x_E = -A_EE^-1 (b_E + A_ER x_R),
//   w_R = S x_R + s,  S = A_RR - A_RE A_EE^-1 A_ER,  s = b_R - A_RE A_EE^-1 b_E,
// and the LCP on the other rows R (contacts, limits, friction loss; their friction bounds stay
// coupled to their normals, which are in R) has the same solutions x_R. With L L' = A_EE and
// G = L^-1 A_ER, S = A_RR - G'G is symmetric positive semidefinite like A. Each pivot or
// reduced solve of the smaller problem costs O(|R|^3) instead of O(n^3): islands held together
// by equality constraints or tendons (MuJoCo's composite hammock and cloth) have most of their
// rows in E.
#ifndef CONTACTKIT_SOLVERS_LCP_SCHUR_H_
#define CONTACTKIT_SOLVERS_LCP_SCHUR_H_

#include <vector>

#include "solvers/common/arena.h"
#include "solvers/lcp/dense_lcp.h"

namespace contactkit {

class BilateralSchur {
 public:
  // allocate for problems up to nmax rows
  void Allocate(int nmax);

  // eliminate the bilateral rows of lcp (symmetric A): false (nothing reduced) if it has fewer
  // than min_rows of them, or A_EE is not positive definite with every squared Cholesky pivot
  // above rcond times its largest diagonal entry. Without other rows (m() = 0) the answer is
  // Expand's alone
  bool Reduce(const DenseLcp& lcp, int min_rows, double rcond);

  // after Reduce, the reduced problem for another b of lcp (n; the same A and the same array:
  // Expand reads it)
  void Rebase(const double* b);

  // the reduced problem on R (valid after Reduce returned true, while lcp's arrays live)
  const DenseLcp& reduced() const { return red_; }
  int m() const { return red_.n; }
  const int* rows() const { return ridx_.data(); }  // R's rows of lcp, ascending (m)

  // v_R (m) from v (n)
  void Gather(const double* v, double* vr) const;
  template <typename T>
  void GatherState(const T* v, T* vr) const {
    for (int a = 0; a < red_.n; a++) vr[a] = v[ridx_[a]];
  }

  // x (n) of lcp from the reduced solution xr (m), with one step of iterative refinement of
  // x_E; w (n) gets A x + b
  void Expand(const double* xr, double* x, double* w);

  // estimated operations of the last Reduce
  double work() const { return work_; }

 private:
  // y = L^-1 y (e) and y = L^-T y, L the Cholesky factor of A_EE
  void Lower(double* y) const;
  void LowerT(double* y) const;

  int nmax_ = 0;
  int ne_ = 0;  // bilateral rows
  const DenseLcp* full_ = nullptr;
  DenseLcp red_;  // reduced problem (views of the arrays below)
  double work_ = 0;
  std::vector<int> eidx_;  // bilateral rows                                 (nmax)
  std::vector<int> ridx_;  // other rows                                     (nmax)
  std::vector<int> rpos_;  // place of a row in R, -1 in E                   (nmax)
  ZeroedArray<double> L_;  // Cholesky factor of A_EE, column-major          (nmax x nmax)
  ZeroedArray<double> G_;  // L^-1 A_ER, column-major (e x m)                (nmax x nmax)
  ZeroedArray<double> S_;  // A_RR - G'G, column-major (m x m)               (nmax x nmax)
  std::vector<double> s_;  // b_R - G' L^-1 b_E                              (nmax)
  std::vector<double> lo_, hi_, mu_;  // bounds of R                               (nmax)
  std::vector<int> findex_;           // findex of R in R's places                      (nmax)
  std::vector<double> ge_;            // L^-1 b_E, then scratch                         (nmax)
  std::vector<double> t_;             // scratch                                        (nmax)
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_LCP_SCHUR_H_
