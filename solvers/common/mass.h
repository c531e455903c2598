// Copyright 2026 The contactkit developers.
//
// Mass matrix in MuJoCo's tree-sparse layout: row i holds M(i,i) followed by M(i,j) for the
// ancestors j of dof i, at address madr[i]. Kinematic trees occupy contiguous dof ranges and do
// not couple, so solves restricted to whole trees are exact.
#ifndef CONTACTKIT_SOLVERS_COMMON_MASS_H_
#define CONTACTKIT_SOLVERS_COMMON_MASS_H_

namespace contactkit {

struct TreeMass {
  int nv = 0;                   // dofs
  int nM = 0;                   // stored entries
  const int* parent = nullptr;  // parent dof of each dof, -1 at a root        (nv)
  const int* madr = nullptr;    // address of the diagonal of each row         (nv)
  double* M = nullptr;          // matrix values                               (nM)
  double* LD = nullptr;         // factor: L' D L = M, unit L below, D on diag (nM)
  double* Dinv = nullptr;       // inverse of D                                (nv)
  // dof of each stored entry (the row's own at its diagonal, then its ancestors): the sweeps
  // read it instead of walking parent (the same operations in the same order); null: walk
  const int* col = nullptr;  //                                                 (nM)

  // col for this layout's parent and madr into out (nM)
  void Columns(int* out) const;

  // factor M into LD, Dinv for dofs [begin, end) (whole trees); returns the number of
  // diagonal entries that had to be clamped (not positive definite)
  int Factor(int begin, int end);
  int Factor() { return Factor(0, nv); }

  // x = M^-1 x in place for dofs [begin, end) (whole trees)
  void Solve(double* x, int begin, int end) const;

  // x = L'^-1 x in place for dofs [begin, end) (whole trees): the first half of Solve, after
  // which x' M^-1 x = sum_i Dinv_i x_i^2 (effective inverse masses without a full solve)
  void SolveHalf(double* x, int begin, int end) const;
  void Solve(double* x) const { Solve(x, 0, nv); }

  // x = M^-1 x for nb right-hand sides stored row-major (x[i * ld + c], ld = nb unless given),
  // dofs [begin, end) (whole trees); the same operations as Solve on each column
  void SolveBlock(double* x, int nb, int begin, int end, int ld) const;
  void SolveBlock(double* x, int nb, int begin, int end) const {
    SolveBlock(x, nb, begin, end, nb);
  }
  void SolveBlock(double* x, int nb) const { SolveBlock(x, nb, 0, nv); }

  // y = M x for dofs [begin, end) (whole trees); y and x must differ
  void Mul(const double* x, double* y, int begin, int end) const;
  void Mul(const double* x, double* y) const { Mul(x, y, 0, nv); }

  // y = V x for a matrix V with this layout's sparsity (e.g. a tangent dM), dofs [begin, end)
  // (whole trees); y and x must differ
  void MulValues(const double* V, const double* x, double* y, int begin, int end) const;

  // y -= V x for a matrix V with this layout's sparsity (e.g. a tangent dM), dofs [begin, end)
  // (whole trees) or all
  void SubMulValues(const double* V, const double* x, double* y, int begin, int end) const;
  void SubMulValues(const double* V, const double* x, double* y) const {
    SubMulValues(V, x, y, 0, nv);
  }

  // acc - x' V x for a matrix V with this layout's sparsity, dofs [begin, end) (whole trees),
  // subtracted from acc term by term
  double SubQuadValues(const double* V, const double* x, double acc, int begin, int end) const;

  // the same two on the n rows listed (ascending), V zero on every other row: y += V x (y as
  // MulValues leaves it when y is zero on V's rows and their ancestors beforehand), and
  // acc - x' V x (SubQuadValues' value: the terms it skips are exact zeros)
  void AddMulValuesRows(const double* V, const int* rows, int n, const double* x, double* y) const;
  double SubQuadValuesRows(const double* V, const int* rows, int n, const double* x,
                           double acc) const;

  // dense block of dofs [begin, end) (whole trees), both triangles: out[(i-begin) + (j-begin)*ld]
  void Dense(int begin, int end, double* out, int ld) const;
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_MASS_H_
