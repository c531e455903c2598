// Copyright 2026 The contactkit developers.
//
// A dense boxed LCP with friction-coupled bounds (see boxed.h) and the classification of its rows.
#ifndef CONTACTKIT_SOLVERS_LCP_DENSE_LCP_H_
#define CONTACTKIT_SOLVERS_LCP_DENSE_LCP_H_

namespace contactkit {

// classification of a row
enum LcpRowState : signed char {
  kLcpClamped = 0,  // w = 0, x inside its bounds
  kLcpLower,        // x at its lower bound (a normal or limit: separating)
  kLcpUpper,        // x at its upper bound
};

// one boxed LCP (views; A column-major with leading dimension ld)
struct DenseLcp {
  int n = 0;                    // rows
  int ld = 0;                   // leading dimension of A
  const double* A = nullptr;    // (n x n), symmetric positive semidefinite in practice
  const double* b = nullptr;    // (n)
  const double* lo = nullptr;   // constant lower bounds, -inf allowed          (n)
  const double* hi = nullptr;   // constant upper bounds, +inf allowed          (n)
  const int* findex = nullptr;  // row whose x scales the bounds, -1: constant  (n)
  const double* mu = nullptr;   // bound coefficient of findex rows             (n)
  bool symmetric = false;       // A is exactly symmetric: a row is read as its column
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_LCP_DENSE_LCP_H_
