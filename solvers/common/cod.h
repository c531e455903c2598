// Copyright 2026 The contactkit developers.
//
// Complete orthogonal decomposition of a square, possibly rank-deficient and non-symmetric
// matrix on caller-provided storage (nothing is allocated): Householder QR with column pivoting
// A P = Q [R11 R12; 0 0], with rank r where |R(r,r)| falls below rtol |R(0,0)|, followed, when
// r < n, by a second QR of the r x n block [R11 R12]' = W [S; 0]. Then A = Q1 S' W1' P' and the
// pseudo-inverse is A^+ = P W1 S'^-1 Q1'. Gives the least-squares minimum-norm solution A^+ c,
// its transpose and the projector onto the null space (what derivatives of A^+ c need).
#ifndef CONTACTKIT_SOLVERS_COMMON_COD_H_
#define CONTACTKIT_SOLVERS_COMMON_COD_H_

#include <cstddef>

namespace contactkit {

class Cod {
 public:
  // storage needed for order n: doubles and ints
  static constexpr size_t Doubles(int n) {
    return 2 * static_cast<size_t>(n) * n + 5 * static_cast<size_t>(n);
  }
  static constexpr size_t Ints(int n) { return static_cast<size_t>(n); }

  // use storage for matrices up to order nmax (Doubles(nmax) doubles, Ints(nmax) ints)
  void Bind(double* dmem, int* imem, int nmax);

  // factor the n x n column-major matrix a (leading dimension lda; a is not changed); returns
  // the numerical rank
  int Factor(const double* a, int lda, int n, double rtol);

  // the decomposition held by o, whose order must fit this storage
  void CopyFrom(const Cod& o);

  // x = A^+ c (x and c may alias)
  void Solve(const double* c, double* x);

  // Y = A^+ Y for nb <= kBlock columns stored row-major (Y[i ldy + c]), each column with Solve's
  // operations in Solve's order (bit for bit Solve's answer); scratch: BlockDoubles(n) doubles
  static constexpr int kBlock = 16;
  static constexpr size_t BlockDoubles(int n) { return 8 * static_cast<size_t>(n); }
  void SolveBlock(double* Y, int ldy, int nb, double* scratch) const;

  // x = (A^+)' c (x and c may alias)
  void SolveT(const double* c, double* x);

  // x = (I - A^+ A) c, the component of c in the null space of A (zero at full rank)
  void NullProject(const double* c, double* x);

  // the n - rank() vectors of an orthonormal basis of the null space of A, vector i at v + i n
  // (I - A^+ A = V' V for the rows V; none at full rank)
  void NullBasis(double* v);

  int n() const { return n_; }
  int rank() const { return rank_; }
  int capacity() const { return nmax_; }

  // |R(0,0)| / |R(r-1,r-1)|: a lower estimate of the condition of the range part
  double condition() const { return cond_; }

 private:
  // Factor's operations (inlined into the portable code and into its AVX2 clone, which gives the
  // same bits: solvers/common/dense.h)
  int FactorBody(const double* a, int lda, int n, double rtol);
  int FactorAvx2(const double* a, int lda, int n, double rtol);
  // SolveBlock's operations (the portable code and its AVX2 clone), in chunks of W columns
  void SolveBlockBody(double* Y, int ldy, int nb, double* scratch) const;
  template <int W>
  void SolveChunk(double* Y, size_t ldy, double* xt) const;
  void SolveBlockAvx2(double* Y, int ldy, int nb, double* scratch) const;

  // apply the reflectors of a QR stored in q (leading dimension n, first m columns) to x (n)
  void ApplyQt(const double* q, const double* tau, int m, double* x) const;
  void ApplyQ(const double* q, const double* tau, int m, double* x) const;

  int nmax_ = 0;
  int n_ = 0;
  int rank_ = 0;
  double cond_ = 0;
  double* qr_ = nullptr;    // first QR: R above, reflectors below the diagonal   (n x n)
  double* qr2_ = nullptr;   // second QR of [R11 R12]': S above, reflectors below  (n x r)
  double* tau_ = nullptr;   // first QR's reflector scales                         (n)
  double* tau2_ = nullptr;  // second QR's reflector scales                        (n)
  double* norm_ = nullptr;  // column norms during pivoting                        (n)
  double* work_ = nullptr;  // scratch                                             (2n)
  int* perm_ = nullptr;     // column permutation: column j of A P is column perm[j] of A (n)
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_COD_H_
