// Copyright 2026 The contactkit developers.
#include "solvers/common/cone.h"

#include <cmath>

namespace contactkit {
namespace cone {
double SocDet(const double* x, int n) { return DetAny(x, n); }

void SocProduct(const double* x, const double* z, int n, double* out) { ProductAny(x, z, n, out); }

void SocDivide(const double* lam, const double* r, int n, double* y) { DivideAny(lam, r, n, y); }

double SocStep(const double* y, const double* dy, int n) {
  if (n == 1) return dy[0] < 0 ? -y[0] / dy[0] : kInfStep;
  return StepAny(y, dy, n);
}

double OrthantStep(const double* y, const double* dy, int n) {
  double a = kInfStep;
  for (int i = 0; i < n; i++) {
    if (dy[i] < 0) a = std::fmin(a, -y[i] / dy[i]);
  }
  return a;
}

bool SocNtScaling(const double* x, const double* z, int n, SocScaling* s) {
  s->n = n;
  const double dx = SocDet(x, n), dz = SocDet(z, n);
  if (!(x[0] > 0 && z[0] > 0 && dx > 0 && dz > 0)) return false;
  const double sx = std::sqrt(dx), sz = std::sqrt(dz);

  // normalized points and their scaled dot product
  double dot = 0;
  for (int i = 0; i < n; i++) dot += x[i] * z[i];
  dot /= sx * sz;
  const double gamma = std::sqrt(0.5 * (1 + dot));

  // w = (x/sx + J z/sz) / (2 gamma), v = (w + e) / sqrt(2 (w0 + 1))
  s->w[0] = (x[0] / sx + z[0] / sz) / (2 * gamma);
  for (int i = 1; i < n; i++) s->w[i] = (x[i] / sx - z[i] / sz) / (2 * gamma);
  const double scale = 1 / std::sqrt(2 * (s->w[0] + 1));
  s->v[0] = (s->w[0] + 1) * scale;
  for (int i = 1; i < n; i++) s->v[i] = s->w[i] * scale;
  s->beta = std::sqrt(sx / sz);

  // lambda = W z
  SocApplyW(*s, z, s->lambda);
  return true;
}

void SocApplyW(const SocScaling& s, const double* in, double* out) {
  // beta (2 v (v'in) - J in)
  const int n = s.n;
  double dot = 0;
  for (int i = 0; i < n; i++) dot += s.v[i] * in[i];
  out[0] = s.beta * (2 * s.v[0] * dot - in[0]);
  for (int i = 1; i < n; i++) out[i] = s.beta * (2 * s.v[i] * dot + in[i]);
}

void SocApplyWinv(const SocScaling& s, const double* in, double* out) {
  // W^-1 = (2 J v v' J - J) / beta
  const int n = s.n;
  double dot = s.v[0] * in[0];
  for (int i = 1; i < n; i++) dot -= s.v[i] * in[i];
  const double ib = 1 / s.beta;
  out[0] = ib * (2 * s.v[0] * dot - in[0]);
  for (int i = 1; i < n; i++) out[i] = ib * (-2 * s.v[i] * dot + in[i]);
}

void SocW2(const SocScaling& s, double* G) {
  const int n = s.n;
  const double b2 = s.beta * s.beta;
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) G[i * n + j] = 2 * b2 * s.w[i] * s.w[j];
  }
  G[0] -= b2;
  for (int i = 1; i < n; i++) G[i * n + i] += b2;
}

void SocArrow(const double* x, int n, double* A) {
  for (int i = 0; i < n * n; i++) A[i] = 0;
  for (int i = 0; i < n; i++) {
    A[i] = x[i];
    A[i * n] = x[i];
    A[i * n + i] = x[0];
  }
}

}  // namespace cone
}  // namespace contactkit
