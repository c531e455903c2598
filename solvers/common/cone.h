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

#include <cmath>

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
  double beta = 0;         // (det x / det z)^(1/4)
  double v[kMaxSoc];       // unit hyperbolic direction (v'Jv = 1 after the shift), (n)
  double w[kMaxSoc];       // scaling point wbar, W^2 = beta^2 (2 w w' - J),           (n)
  double lambda[kMaxSoc];  // scaled point W z = W^-1 x,                               (n)
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

// the above for any n as inline code, and fixed-size versions for inner loops (N >= 2), which
// compilers unroll
inline double DetAny(const double* x, int n) {
  double r = 0;
  for (int i = 1; i < n; i++) r += x[i] * x[i];
  r = std::sqrt(r);
  return (x[0] - r) * (x[0] + r);
}

inline void ProductAny(const double* x, const double* z, int n, double* out) {
  double dot = 0;
  for (int i = 0; i < n; i++) dot += x[i] * z[i];
  const double x0 = x[0], z0 = z[0];
  for (int i = 1; i < n; i++) out[i] = x0 * z[i] + z0 * x[i];
  out[0] = dot;
}

inline void DivideAny(const double* lam, const double* r, int n, double* y) {
  // y0 = (lam0 r0 - lam1'r1) / det(lam), y1 = (r1 - y0 lam1) / lam0
  double dot = 0;
  for (int i = 1; i < n; i++) dot += lam[i] * r[i];
  const double y0 = (lam[0] * r[0] - dot) / DetAny(lam, n);
  const double inv = 1 / lam[0];
  for (int i = 1; i < n; i++) y[i] = (r[i] - y0 * lam[i]) * inv;
  y[0] = y0;
}

inline double StepAny(const double* y, const double* dy, int n) {
  // Dojo (42)-(46): nu, zeta, rho; the step is 1 / (|rho_1| - rho_0) when positive
  const double nu = DetAny(y, n);
  const double snu = std::sqrt(nu);
  double zeta = y[0] * dy[0];
  for (int i = 1; i < n; i++) zeta -= y[i] * dy[i];
  const double rho0 = zeta / nu;
  const double c = (zeta / snu + dy[0]) / (y[0] * snu + nu);
  double rho1 = 0;
  for (int i = 1; i < n; i++) {
    const double r = dy[i] / snu - c * y[i];
    rho1 += r * r;
  }
  rho1 = std::sqrt(rho1);
  return rho1 > rho0 ? 1 / (rho1 - rho0) : kInfStep;
}

template <int N>
inline double DetN(const double* x) {
  return DetAny(x, N);
}
template <int N>
inline void ProductN(const double* x, const double* z, double* out) {
  ProductAny(x, z, N, out);
}
template <int N>
inline void DivideN(const double* lam, const double* r, double* y) {
  DivideAny(lam, r, N, y);
}
template <int N>
inline double StepN(const double* y, const double* dy) {
  return StepAny(y, dy, N);
}

}  // namespace cone
}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_CONE_H_
