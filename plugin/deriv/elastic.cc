// Copyright 2026 The contactkit developers.
//
// Nimble's elastic bounce correction (section VI, appendix E). A contact that approaches at the
// start of the step (J_n v < 0, faster than lcp.restitution_threshold for "lcp") and separates at
// its end (J_n v+ > 0) bounces within the step; in continuous time its normal distance obeys
// dp+/dp = -sigma and dp+/dv = -sigma h, while the discrete step says +1 and +h. The position
// blocks dq+/dq and dq+/dv are replaced by the matrices nearest (Frobenius) to the discrete ones
// that satisfy, in the least-squares sense over all bouncing contacts i,
//   J_i X J_i' / |J_i|^2 = -sigma_i   (X = dq+/dq),   -sigma_i h   (X = dq+/dv),
// i.e. X = X0 + sum_i lambda_i W_i with W_i = J_i' J_i / |J_i|^2 and G lambda = r,
// G_ij = <W_i, W_j>, r_i = target_i - <W_i, X0>. (Nimble centers the fit at the identity; the
// discrete Jacobian keeps the directions no contact constrains.) sigma is lcp.restitution for
// "lcp", and for the soft models the restitution of MuJoCo's reference spring-damper,
// exp(-pi z / sqrt(1 - z^2)) with damping ratio z = B / (2 sqrt(K)) (0 when overdamped).
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "plugin/deriv/derivative.h"
#include "plugin/step/compat.h"
#include "plugin/step/handle.h"
#include "solvers/common/cod.h"

namespace contactkit {
namespace {

constexpr int kMaxBounce = ElasticWork::kMaxBounce;

}  // namespace

void Derivative::ElasticPrepare(const mjModel* m) {
  elastic_.n = 0;
  if (!settings_.deriv.elastic_correction || !has_rows_) return;
  const Problem& p = *problem_;
  const int nv = nv_;
  const bool lcp = settings_.solver == ckSOL_LCP;
  for (int c = 0; c < p.ncon && elastic_.n < kMaxBounce; c++) {
    const Contact& con = p.con[c];
    const double before = p.J.Dot(con.row, nominal_.qvel);
    const double threshold = lcp ? settings_.lcp.restitution_threshold : 0;
    if (!(before < -threshold)) continue;
    double sigma;
    if (lcp) {
      sigma = settings_.lcp.restitution;
    } else {
      const double K = p.KB[2 * con.row], B = p.KB[2 * con.row + 1];
      const double z = K > 0 ? B / (2 * std::sqrt(K)) : 1;
      sigma = z < 1 ? std::exp(-mjPI * z / std::sqrt(1 - z * z)) : 0;
    }

    // the normal row, dense, and its squared norm
    double* Ji = elastic_.normal_rows + static_cast<size_t>(elastic_.n) * nv;
    mju_zero(Ji, nv);
    p.J.AddRowTo(con.row, 1, Ji);
    const double nn = mju_dot(Ji, Ji, nv);
    if (!(nn > 0)) continue;
    elastic_.norm2[elastic_.n] = nn;
    elastic_.sigma[elastic_.n] = sigma;
    elastic_.projection[2 * elastic_.n] = elastic_.projection[2 * elastic_.n + 1] = 0;
    elastic_.n++;
  }
  (void)m;
}

void Derivative::ElasticSelect(const double* vnext) {
  // keep the approaching contacts that separate at the end of the step
  const int nv = nv_;
  int kept = 0;
  for (int i = 0; i < elastic_.n; i++) {
    const double* Ji = elastic_.normal_rows + static_cast<size_t>(i) * nv;
    if (!(mju_dot(Ji, vnext, nv) > 0)) continue;
    if (kept != i) {
      mju_copy(elastic_.normal_rows + static_cast<size_t>(kept) * nv, Ji, nv);
      elastic_.norm2[kept] = elastic_.norm2[i];
      elastic_.sigma[kept] = elastic_.sigma[i];
    }
    kept++;
  }
  elastic_.n = kept;
}

void Derivative::ElasticColumn(int col, const double* out) {
  // <W_i, X0> accumulates column by column: W_i[:, col] . out = J_i[col] (J_i . out) / |J_i|^2
  const int nv = nv_;
  if (col >= 2 * nv) return;
  const int block = col < nv ? 0 : 1, b = col % nv;
  for (int i = 0; i < elastic_.n; i++) {
    const double* Ji = elastic_.normal_rows + static_cast<size_t>(i) * nv;
    if (Ji[b] == 0) continue;
    elastic_.projection[2 * i + block] += Ji[b] * mju_dot(Ji, out, nv) / elastic_.norm2[i];
  }
}

void Derivative::ElasticFinish(double h) {
  const int n = elastic_.n, nv = nv_, ndx = 2 * nv_ + na_;
  if (!n) return;
  double G[kMaxBounce * kMaxBounce];  // column-major (n x n)
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) {
      const double dij = mju_dot(elastic_.normal_rows + static_cast<size_t>(i) * nv,
                                 elastic_.normal_rows + static_cast<size_t>(j) * nv, nv);
      G[i + j * n] = dij * dij / (elastic_.norm2[i] * elastic_.norm2[j]);
    }
  }
  // minimum-norm least squares, rank threshold as Eigen's default (n eps relative)
  double cod_d[Cod::Doubles(kMaxBounce)];
  int cod_i[Cod::Ints(kMaxBounce)];
  Cod cod;
  cod.Bind(cod_d, cod_i, kMaxBounce);
  cod.Factor(G, n, n, n * DBL_EPSILON);
  for (int block = 0; block < 2; block++) {
    double lambda[kMaxBounce];
    for (int i = 0; i < n; i++) {
      const double target = -elastic_.sigma[i] * (block == 0 ? 1 : h);
      lambda[i] = target - elastic_.projection[2 * i + block];
    }
    cod.Solve(lambda, lambda);

    // X += sum lambda_i W_i on the Jacobian, and its effect on the VJP
    for (int i = 0; i < n; i++) {
      const double* Ji = elastic_.normal_rows + static_cast<size_t>(i) * nv;
      const double w = lambda[i] / elastic_.norm2[i];
      if (sink_.A) {
        for (int a = 0; a < nv; a++) {
          if (Ji[a] == 0) continue;
          for (int c = 0; c < nv; c++) sink_.A[a * ndx + block * nv + c] += w * Ji[a] * Ji[c];
        }
      }
      if (sink_.gx && sink_.dx) {
        const double jd = mju_dot(Ji, sink_.dx, nv);
        for (int c = 0; c < nv; c++) sink_.gx[block * nv + c] += w * Ji[c] * jd;
      }
    }
  }
}

}  // namespace contactkit
