// Copyright 2026 The contactkit developers.
//
// Cone algebra (solvers/common/cone.h) against closed forms and brute force: Jordan products and
// division, the analytical step to the boundary against bisection, and the Nesterov-Todd scaling's
// defining identities W z = W^-1 x = lambda, W^2 z = x.
#include "solvers/common/cone.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace contactkit::test {
namespace {

using cone::kInfStep;

// a random point strictly inside Q^n with |x1| = frac x0
void InteriorPoint(std::mt19937& rng, int n, double frac, double* x) {
  std::normal_distribution<double> g;
  double r = 0;
  for (int i = 1; i < n; i++) {
    x[i] = g(rng);
    r += x[i] * x[i];
  }
  r = std::sqrt(r);
  x[0] = std::exp(g(rng));
  for (int i = 1; i < n; i++) x[i] *= (r > 0 ? frac * x[0] / r : 0);
}

bool Inside(const double* x, int n) {
  double r = 0;
  for (int i = 1; i < n; i++) r += x[i] * x[i];
  return x[0] > std::sqrt(r);
}

TEST(ConeTest, ProductIdentityCommutesAndMatchesArrow) {
  std::mt19937 rng(1);
  for (int n = 2; n <= 6; n++) {
    double x[8], z[8], e[8] = {1}, a[8], b[8], A[64];
    InteriorPoint(rng, n, 0.7, x);
    InteriorPoint(rng, n, 0.3, z);
    cone::SocProduct(x, e, n, a);
    for (int i = 0; i < n; i++) EXPECT_DOUBLE_EQ(a[i], x[i]);
    cone::SocProduct(x, z, n, a);
    cone::SocProduct(z, x, n, b);
    for (int i = 0; i < n; i++) EXPECT_DOUBLE_EQ(a[i], b[i]);
    cone::SocArrow(x, n, A);
    for (int i = 0; i < n; i++) {
      double s = 0;
      for (int j = 0; j < n; j++) s += A[i * n + j] * z[j];
      EXPECT_NEAR(s, a[i], 1e-13 * (1 + std::fabs(a[i])));
    }
  }
}

TEST(ConeTest, DivisionInvertsTheProduct) {
  std::mt19937 rng(2);
  for (int n = 2; n <= 6; n++) {
    for (double frac : {0.0, 0.5, 0.999}) {
      double lam[8], r[8], y[8], back[8];
      InteriorPoint(rng, n, frac, lam);
      std::normal_distribution<double> g;
      for (int i = 0; i < n; i++) r[i] = g(rng);
      cone::SocDivide(lam, r, n, y);
      cone::SocProduct(lam, y, n, back);
      for (int i = 0; i < n; i++) EXPECT_NEAR(back[i], r[i], 1e-9) << n << " " << frac;
    }
  }
}

TEST(ConeTest, StepReachesTheBoundaryExactly) {
  std::mt19937 rng(3);
  std::normal_distribution<double> g;
  int finite = 0;
  for (int trial = 0; trial < 400; trial++) {
    const int n = 2 + trial % 4;
    double y[8], dy[8], p[8];
    InteriorPoint(rng, n, 0.9 * std::fabs(std::sin(trial)), y);
    for (int i = 0; i < n; i++) dy[i] = 3 * g(rng);
    const double a = cone::SocStep(y, dy, n);

    // bisection on membership along the ray
    double lo = 0, hi = 1e6;
    for (int i = 0; i < n; i++) p[i] = y[i] + hi * dy[i];
    if (Inside(p, n)) {
      EXPECT_EQ(a, kInfStep) << trial;
      continue;
    }
    for (int it = 0; it < 200; it++) {
      const double mid = 0.5 * (lo + hi);
      for (int i = 0; i < n; i++) p[i] = y[i] + mid * dy[i];
      (Inside(p, n) ? lo : hi) = mid;
    }
    ASSERT_LT(a, kInfStep) << trial;
    EXPECT_NEAR(a, lo, 1e-9 * (1 + lo)) << trial;
    finite++;
  }
  EXPECT_GT(finite, 100);
}

TEST(ConeTest, OrthantStep) {
  const double y[3] = {1, 2, 3}, dy[3] = {-2, 1, -1};
  EXPECT_DOUBLE_EQ(cone::OrthantStep(y, dy, 3), 0.5);
  const double up[3] = {1, 1, 0};
  EXPECT_EQ(cone::OrthantStep(y, up, 3), kInfStep);
}

TEST(ConeTest, NesterovToddScalingIdentities) {
  std::mt19937 rng(4);
  for (int trial = 0; trial < 200; trial++) {
    const int n = 2 + trial % 4;
    double x[8], z[8];
    // include nearly complementary pairs close to the boundary
    InteriorPoint(rng, n, trial % 3 == 0 ? 0.999999 : 0.6, x);
    InteriorPoint(rng, n, trial % 3 == 0 ? 0.999999 : 0.4, z);
    cone::SocScaling s;
    ASSERT_TRUE(cone::SocNtScaling(x, z, n, &s));
    double wz[8], wix[8], w2z[8], G[64];
    cone::SocApplyW(s, z, wz);
    cone::SocApplyWinv(s, x, wix);
    cone::SocW2(s, G);
    for (int i = 0; i < n; i++) {
      w2z[i] = 0;
      for (int j = 0; j < n; j++) w2z[i] += G[i * n + j] * z[j];
    }
    double xz = 0, ll = 0;
    for (int i = 0; i < n; i++) {
      const double scale = 1e-8 * (std::fabs(x[0]) + std::fabs(z[0]) + 1);
      EXPECT_NEAR(wz[i], s.lambda[i], scale) << trial;
      EXPECT_NEAR(wix[i], s.lambda[i], scale) << trial;
      EXPECT_NEAR(w2z[i], x[i], scale * (1 + std::fabs(x[0]))) << trial;
      xz += x[i] * z[i];
      ll += s.lambda[i] * s.lambda[i];
    }
    EXPECT_NEAR(xz, ll, 1e-9 * (1 + std::fabs(xz))) << trial;
    EXPECT_TRUE(Inside(s.lambda, n)) << trial;

    // W^-1 W = I on a random vector
    double v[8], wv[8], back[8];
    for (int i = 0; i < n; i++) v[i] = std::cos(3.0 * i + trial);
    cone::SocApplyW(s, v, wv);
    cone::SocApplyWinv(s, wv, back);
    for (int i = 0; i < n; i++) EXPECT_NEAR(back[i], v[i], 1e-8) << trial;
  }
}

TEST(ConeTest, ScalingRejectsBoundaryPoints) {
  const double x[3] = {1, 1, 0}, z[3] = {1, 0, 0.5};
  cone::SocScaling s;
  EXPECT_FALSE(cone::SocNtScaling(x, z, 3, &s));
  EXPECT_FALSE(cone::SocNtScaling(z, x, 3, &s));
}

}  // namespace
}  // namespace contactkit::test
