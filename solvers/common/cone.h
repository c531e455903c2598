// Copyright 2026 The contactkit developers.
//
// Cone algebra shared by the conic solvers and their derivatives: the positive orthant and the
// second-order cone Q^n = {x in R^n : x0 >= |x_1:n-1|} as Euclidean Jordan algebras (Dojo IV-B,
// equations 33-46; Vandenberghe's CVXOPT notes for the scaling). Vectors are plain arrays of
// length n (n >= 1; x0 first). Nothing here allocates.
//
// Conventions: for a complementary pair (x, z), x is the primal ("force") member and z the dual
// ("velocity") member; the Nesterov-Todd scaling W satisfies W z = W^-1 x = lambda, so that
// W^2 z = x and x'z = lambda'lambda.
#ifndef CONTACTKIT_SOLVERS_COMMON_CONE_H_
#define CONTACTKIT_SOLVERS_COMMON_CONE_H_

namespace contactkit {
namespace cone {

constexpr double kInfStep = 1e300;  // step to the boundary when the direction never leaves

// largest second-order cone dimension the fixed-size helpers below handle
constexpr int kMaxSoc = 8;

// x0^2 - |x1|^2, computed as (x0 - |x1|)(x0 + |x1|) for accuracy near the boundary
double SocDet(const double* x, int n);

// Jordan product x o z = (x'z, x0 z1 + z0 x1)                                          (n)
void SocProduct(const double* x, const double* z, int n, double* out);

// Jordan division: y with lam o y = r, lam in the interior of the cone                  (n)
void SocDivide(const double* lam, const double* r, int n, double* y);

// largest alpha with y + alpha dy in the cone, for y in its interior (Dojo 42-46);
// kInfStep if the ray never leaves the cone
double SocStep(const double* y, const double* dy, int n);

// the same for the orthant: min over dy_i < 0 of -y_i / dy_i
double OrthantStep(const double* y, const double* dy, int n);

// Nesterov-Todd scaling of one second-order cone pair: W = beta (2 v v' - J), J = diag(1, -1..)
struct SocScaling {
  int n = 0;
  double beta = 0;          // (det x / det z)^(1/4)
  double v[kMaxSoc];        // unit hyperbolic direction (v'Jv = 1 after the shift), (n)
  double w[kMaxSoc];        // scaling point wbar, W^2 = beta^2 (2 w w' - J),           (n)
  double lambda[kMaxSoc];   // scaled point W z = W^-1 x,                               (n)
};

// compute the scaling for x, z in the interior of Q^n (n <= kMaxSoc); false if either is not
// strictly inside
bool SocNtScaling(const double* x, const double* z, int n, SocScaling* s);

// out = W in, out = W^-1 in                                                             (n)
void SocApplyW(const SocScaling& s, const double* in, double* out);
void SocApplyWinv(const SocScaling& s, const double* in, double* out);

// G = W^2 (n x n, row-major): the map from a dual direction to the primal one
void SocW2(const SocScaling& s, double* G);

// Arrow matrix of x: Arw(x) y = x o y (n x n, row-major)
void SocArrow(const double* x, int n, double* A);

}  // namespace cone
}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_CONE_H_
