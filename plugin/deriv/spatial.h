// Copyright 2026 The contactkit developers.
//
// Small 3- and 6-vector helpers and MuJoCo's spatial algebra (engine_util_spatial.c, not exported
// by 2.2.2) for the per-direction loops of the smooth tangents and their reverse pass (MuJoCo's
// own are library calls). Motions and forces are MuJoCo's 6-vectors (rotation first); an inertia
// is its 10-vector cinert.
#ifndef CONTACTKIT_PLUGIN_DERIV_SPATIAL_H_
#define CONTACTKIT_PLUGIN_DERIV_SPATIAL_H_

namespace contactkit::spatial {

inline double Dot3(const double* a, const double* b) {
  return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

inline double Dot6(const double* a, const double* b) { return Dot3(a, b) + Dot3(a + 3, b + 3); }

inline void Cross3(double* res, const double* a, const double* b) {
  res[0] = a[1] * b[2] - a[2] * b[1];
  res[1] = a[2] * b[0] - a[0] * b[2];
  res[2] = a[0] * b[1] - a[1] * b[0];
}

inline void Copy6(double* y, const double* x) {
  for (int k = 0; k < 6; k++) y[k] = x[k];
}

inline void Zero6(double* y) {
  for (int k = 0; k < 6; k++) y[k] = 0;
}

// out = a o (R' x): x in the frame of the row-major rotation R, scaled by a axis by axis (an
// ellipsoid's radii: its support direction along x)
inline void ScaledLocal(const double* R, const double* a, const double* x, double out[3]) {
  for (int k = 0; k < 3; k++) out[k] = a[k] * (R[k] * x[0] + R[3 + k] * x[1] + R[6 + k] * x[2]);
}

// the rate dt of the unit vector t = p / |p| as p moves by dp: (I - t t') dp scale, scale = +-1 /
// |p| (the sign: t = -p / |p|)
inline void UnitRate(const double* t, const double* dp, double scale, double dt[3]) {
  const double tq = Dot3(t, dp);
  for (int k = 0; k < 3; k++) dt[k] = scale * (dp[k] - tq * t[k]);
}

// MuJoCo's spatial algebra (engine_util_spatial.c, not exported by 2.2.2); T double or a SIMD
// vector of doubles (each lane's operations the double's)
template <class T>
inline void CrossMotion(T res[6], const double v[6], const T x[6]) {
  res[0] = -v[2] * x[1] + v[1] * x[2];
  res[1] = v[2] * x[0] - v[0] * x[2];
  res[2] = -v[1] * x[0] + v[0] * x[1];
  res[3] = -v[2] * x[4] + v[1] * x[5] - v[5] * x[1] + v[4] * x[2];
  res[4] = v[2] * x[3] - v[0] * x[5] + v[5] * x[0] - v[3] * x[2];
  res[5] = -v[1] * x[3] + v[0] * x[4] - v[4] * x[0] + v[3] * x[1];
}

template <class T>
inline void CrossForce(T res[6], const double v[6], const T f[6]) {
  res[0] = -v[2] * f[1] + v[1] * f[2] - v[5] * f[4] + v[4] * f[5];
  res[1] = v[2] * f[0] - v[0] * f[2] + v[5] * f[3] - v[3] * f[5];
  res[2] = -v[1] * f[0] + v[0] * f[1] - v[4] * f[3] + v[3] * f[4];
  res[3] = -v[2] * f[4] + v[1] * f[5];
  res[4] = v[2] * f[3] - v[0] * f[5];
  res[5] = -v[1] * f[3] + v[0] * f[4];
}

template <class T>
inline void MulInert(T res[6], const double* i, const T v[6]) {
  res[0] = i[0] * v[0] + i[3] * v[1] + i[4] * v[2] - i[8] * v[4] + i[7] * v[5];
  res[1] = i[3] * v[0] + i[1] * v[1] + i[5] * v[2] + i[8] * v[3] - i[6] * v[5];
  res[2] = i[4] * v[0] + i[5] * v[1] + i[2] * v[2] - i[7] * v[3] + i[6] * v[4];
  res[3] = i[8] * v[1] - i[7] * v[2] + i[9] * v[3];
  res[4] = i[6] * v[2] - i[8] * v[0] + i[9] * v[4];
  res[5] = i[7] * v[0] - i[6] * v[1] + i[9] * v[5];
}

inline void AddScl6(double* y, const double* x, double a) {
  for (int k = 0; k < 6; k++) y[k] += a * x[k];
}

// the motions a perturbation of dof S carries to the bodies after it, with u and au the velocity
// and acceleration before it: w = S x u and c = S x au - w x u (velocity), or w = 0 and c = S x au
inline void CarriedMotions(const double S[6], const double u[6], const double au[6], bool velocity,
                           double c[6], double w[6]) {
  CrossMotion(c, S, au);
  Zero6(w);
  if (!velocity) return;
  double t[6];
  CrossMotion(w, S, u);
  CrossMotion(t, w, u);
  for (int r = 0; r < 6; r++) c[r] -= t[r];
}

}  // namespace contactkit::spatial

#endif  // CONTACTKIT_PLUGIN_DERIV_SPATIAL_H_
