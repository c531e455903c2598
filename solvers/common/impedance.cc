// Copyright 2026 The contactkit developers.
#include "solvers/common/impedance.h"

#include <algorithm>
#include <cmath>

namespace contactkit {
namespace {
constexpr double kMinVal = 1e-15;   // MuJoCo's mjMINVAL
constexpr double kMinImp = 0.0001;  // mjMINIMP
constexpr double kMaxImp = 0.9999;  // mjMAXIMP
}  // namespace

double Impedance(const double solimp[5], double pos, double margin, double* dimp) {
  // flat function
  if (solimp[0] == solimp[1] || solimp[2] <= kMinVal) {
    if (dimp) *dimp = 0;
    return 0.5 * (solimp[0] + solimp[1]);
  }

  // x = |pos - margin| / width
  double x = (pos - margin) / solimp[2];
  double sgn = 1;
  if (x < 0) {
    x = -x;
    sgn = -1;
  }

  // saturated
  if (x >= 1 || x <= 0) {
    if (dimp) *dimp = 0;
    return x >= 1 ? solimp[1] : solimp[0];
  }

  // y(x): linear, or two power segments joined at the midpoint
  double y, yp;
  const double mid = solimp[3], power = solimp[4];
  if (power == 1) {
    y = x;
    yp = 1;
  } else if (x <= mid) {
    const double a = 1 / std::pow(mid, power - 1);
    y = a * std::pow(x, power);
    yp = power * a * std::pow(x, power - 1);
  } else {
    const double b = 1 / std::pow(1 - mid, power - 1);
    y = 1 - b * std::pow(1 - x, power);
    yp = power * b * std::pow(1 - x, power - 1);
  }
  if (dimp) *dimp = yp * sgn * (solimp[1] - solimp[0]) / solimp[2];
  return solimp[0] + y * (solimp[1] - solimp[0]);
}

void ReferenceKB(const double solref[2], const double solimp[5], double* K, double* B) {
  const double dmax = solimp[1];
  if (solref[0] > 0) {
    *K = 1 / std::max(kMinVal, dmax * dmax * solref[0] * solref[0] * solref[1] * solref[1]);
  } else {
    *K = -solref[0] / std::max(kMinVal, dmax * dmax);
  }
  if (solref[1] > 0) {
    *B = 2 / std::max(kMinVal, dmax * solref[0]);
  } else {
    *B = -solref[1] / std::max(kMinVal, dmax);
  }
}

void ClampSolParams(double h, bool refsafe, double solref[2], double solimp[5]) {
  if (refsafe && solref[0] > 0) solref[0] = std::max(solref[0], 2 * h);
  solimp[0] = std::min(kMaxImp, std::max(kMinImp, solimp[0]));
  solimp[1] = std::min(kMaxImp, std::max(kMinImp, solimp[1]));
  solimp[2] = std::max(0.0, solimp[2]);
  solimp[3] = std::min(kMaxImp, std::max(kMinImp, solimp[3]));
  solimp[4] = std::max(1.0, solimp[4]);
}

void ContactSoftness(double h, bool refsafe, double dist, double margin, double solref[2],
                     double solimp[5], double* imp, double* K, double* B) {
  ClampSolParams(h, refsafe, solref, solimp);
  *imp = Impedance(solimp, dist, margin);
  ReferenceKB(solref, solimp, K, B);
}

void ContactRegularizers(double imp, double diag_approx, double impratio, const double mu[5],
                         int dim, double* R) {
  R[0] = std::max(kMinVal, (1 - imp) * diag_approx / imp);
  if (dim < 2) return;
  R[1] = R[0] / std::max(kMinVal, impratio);
  for (int j = 1; j < dim - 1; j++) R[j + 1] = R[1] * mu[0] * mu[0] / (mu[j] * mu[j]);
}

}  // namespace contactkit
