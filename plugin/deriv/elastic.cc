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
#include "plugin/deriv/elastic.h"

#include <cfloat>
#include <cmath>

#include "solvers/common/cod.h"

namespace contactkit {

void ElasticCorrection::Carve(ArenaCarver& c, const DerivSizes& n) {
  nv_ = n.nv;
  normal_rows_ = c.Take<double>(static_cast<size_t>(kMaxBounce) * n.nv);
  norm2_ = c.Take<double>(kMaxBounce);
  sigma_ = c.Take<double>(kMaxBounce);
  projection_ = c.Take<double>(2 * kMaxBounce);
}

void ElasticCorrection::Prepare(const ckSettings& s, const Problem* problem, const double* qvel) {
  n_ = 0;
  if (!s.deriv.elastic_correction || !problem) return;
  const Problem& p = *problem;
  const int nv = nv_;
  const bool lcp = s.solver == ckSOL_LCP;
  for (int c = 0; c < p.ncon && n_ < kMaxBounce; c++) {
    const Contact& con = p.con[c];
    const double before = p.J.Dot(con.row, qvel);
    const double threshold = lcp ? s.lcp.restitution_threshold : 0;
    if (!(before < -threshold)) continue;
    double sigma;
    if (lcp) {
      sigma = s.lcp.restitution;
    } else {
      const double K = p.KB[2 * con.row], B = p.KB[2 * con.row + 1];
      const double z = K > 0 ? B / (2 * std::sqrt(K)) : 1;
      sigma = z < 1 ? std::exp(-mjPI * z / std::sqrt(1 - z * z)) : 0;
    }

    // the normal row, dense, and its squared norm
    double* Ji = normal_rows_ + static_cast<size_t>(n_) * nv;
    mju_zero(Ji, nv);
    p.J.AddRowTo(con.row, 1, Ji);
    const double nn = mju_dot(Ji, Ji, nv);
    if (!(nn > 0)) continue;
    norm2_[n_] = nn;
    sigma_[n_] = sigma;
    projection_[2 * n_] = projection_[2 * n_ + 1] = 0;
    n_++;
  }
}

void ElasticCorrection::Select(const double* vnext) {
  // keep the approaching contacts that separate at the end of the step
  const int nv = nv_;
  int kept = 0;
  for (int i = 0; i < n_; i++) {
    const double* Ji = normal_rows_ + static_cast<size_t>(i) * nv;
    if (!(mju_dot(Ji, vnext, nv) > 0)) continue;
    if (kept != i) {
      mju_copy(normal_rows_ + static_cast<size_t>(kept) * nv, Ji, nv);
      norm2_[kept] = norm2_[i];
      sigma_[kept] = sigma_[i];
    }
    kept++;
  }
  n_ = kept;
}

void ElasticCorrection::Column(int col, const double* out) {
  // <W_i, X0> accumulates column by column: W_i[:, col] . out = J_i[col] (J_i . out) / |J_i|^2
  const int nv = nv_;
  if (col >= 2 * nv) return;
  const int block = col < nv ? 0 : 1, b = col % nv;
  for (int i = 0; i < n_; i++) {
    const double* Ji = normal_rows_ + static_cast<size_t>(i) * nv;
    if (Ji[b] == 0) continue;
    projection_[2 * i + block] += Ji[b] * mju_dot(Ji, out, nv) / norm2_[i];
  }
}

void ElasticCorrection::Finish(double h, int ndx, double* A, double* gx, const double* dx) {
  const int n = n_, nv = nv_;
  if (!n) return;
  double G[kMaxBounce * kMaxBounce];  // column-major (n x n)
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) {
      const double dij = mju_dot(normal_rows_ + static_cast<size_t>(i) * nv,
                                 normal_rows_ + static_cast<size_t>(j) * nv, nv);
      G[i + j * n] = dij * dij / (norm2_[i] * norm2_[j]);
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
      const double target = -sigma_[i] * (block == 0 ? 1 : h);
      lambda[i] = target - projection_[2 * i + block];
    }
    cod.Solve(lambda, lambda);

    // X += sum lambda_i W_i on the Jacobian, and its effect on the VJP
    for (int i = 0; i < n; i++) {
      const double* Ji = normal_rows_ + static_cast<size_t>(i) * nv;
      const double w = lambda[i] / norm2_[i];
      if (A) {
        for (int a = 0; a < nv; a++) {
          if (Ji[a] == 0) continue;
          for (int c = 0; c < nv; c++) A[a * ndx + block * nv + c] += w * Ji[a] * Ji[c];
        }
      }
      if (gx && dx) {
        const double jd = mju_dot(Ji, dx, nv);
        for (int c = 0; c < nv; c++) gx[block * nv + c] += w * Ji[c] * jd;
      }
    }
  }
}

}  // namespace contactkit
