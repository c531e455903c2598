// Copyright 2026 The contactkit developers.
//
// ipm's semismooth Newton on the hard problem (IpmSolver::Semismooth): the last resort for an
// island every interior attempt and the polish left inexact. It does not follow the central path:
// the complementarity conditions are written as projections (Alart-Curnier's natural residual),
// F(lambda) = 0, in the island's impulses alone (u = u_free + D lambda, D = J M^-1 J' dense), and
// Newton's method with a generalized Jacobian, an Armijo line search on |F|^2 and a
// Levenberg-Marquardt fallback is started from the best interior answer.
#include <algorithm>
#include <cmath>
#include <utility>

#include "contactkit/settings.h"
#include "solvers/common/dense.h"
#include "solvers/ipm/ipm_solver.h"

namespace contactkit {
namespace ipm {
namespace {

constexpr int kNewtonIter = 100;        // Newton steps of one solve at most
constexpr int kNewtonBudget = 400;      // ... of all of an island's solves
constexpr int kNewtonBacktrack = 30;    // ... halvings of a step
constexpr double kNewtonArmijo = 1e-4;  // ... sufficient decrease of |F|^2 / 2, x the slope
constexpr double kNewtonLm = 1e-10;     // first Levenberg-Marquardt weight, x max diag(A'A)
constexpr double kNewtonLmGain = 100;   // ... its growth after a step without decrease
constexpr double kNewtonLmMax = 1e2;    // ... up to this, x max diag(A'A)
constexpr double kNewtonReg = 1e-8;    // Jacobian regularizer of closed and sticking rows, x r D_ii
constexpr int kTrescaOuter = 30;       // Tresca fixed-point rounds at most (twice with the prox)
constexpr double kTrescaProx = 1e-2;   // ... proximal weight of the second pass, x D_ii
constexpr double kTrescaTol = 1e-13;   // ... each solved to |F| below this, x the largest radius
constexpr double kTrescaLoose = 1e-2;  // ... or below this, x the radii's last change
constexpr double kTrescaJump = 4;      // ... largest Aitken extrapolation of the radii
constexpr double kProbeChange = 1e-2;  // Coulomb's problem tried below this change, x radius
constexpr int kProbeIter = 4;          // ... Newton steps on it

}  // namespace

void IpmSolver::NewtonDelassus(const Problem& p, int k) {
  // D = J M^-1 J' (row-major, island rows, velocities measured by gapJ_), the free row velocities
  // with their targets (orthant rows: s = u + target) and the rows' weights r (1 / D_ii; per cone
  // 1 / mean(scale^2 D_ii) in the cone's scaled variables)
  const Islands& is = p.islands;
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  const int* dofs = Dofs(p, k);
  const int nd = NumDofs(p, k);
  double* D = ssn_D_.data();
  for (int a = 0; a < nr; a++) {
    for (int c = 0; c < nd; c++) tmp_[dofs[c]] = 0;
    p.J.AddRowTo(rows[a], 1, tmp_.data());
    for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
      const int b = is.tree_dofadr[is.trees[t]];
      p.mass.Solve(tmp_.data(), b, b + is.tree_dofnum[is.trees[t]]);
    }
    for (int b = 0; b < nr; b++) D[b * nr + a] = gapJ_->Dot(rows[b], tmp_.data());
  }
  for (int a = 0; a < nr; a++) {
    pol_loc_[rows[a]] = a;
    ssn_u0_[a] = gapJ_->Dot(rows[a], p.v_free);
    ssn_r_[a] = 1 / std::max(D[a * nr + a], 1e-300);
  }
  const IslandLists& L = lists_[k];
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    ssn_u0_[pol_loc_[orth_[e]]] += target_[orth_[e]];
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e];
    double m = 0;
    for (int r = f; r < f + cnt; r++) {
      const int a = pol_loc_[r];
      m += scale_[r] * scale_[r] * D[a * nr + a] / cnt;
    }
    for (int r = f; r < f + cnt; r++) ssn_r_[pol_loc_[r]] = 1 / std::max(m, 1e-300);
  }
}

double IpmSolver::NewtonResidual(const Problem& p, int k, const double* lam, bool jacobian) {
  // F(lambda) (ssn_F_) and, with jacobian, a generalized Jacobian (ssn_A_, row-major): an
  // orthant row F = lambda - max(0, lambda - r s); a cone's rows (x = lambda / scale, z = scale u,
  // normal gamma) F = x - P(x - r z), P the projection onto the disc of radius max(gamma, 0);
  // returns |F|^2 / 2
  const int nr = NumRows(p, k);
  const double* D = ssn_D_.data();
  double* A = ssn_A_.data();
  double* F = ssn_F_.data();
  double* u = ssn_u_.data();
  for (int a = 0; a < nr; a++) u[a] = ssn_u0_[a] + Dot(D + a * nr, lam, nr);
  if (jacobian) std::fill(A, A + nr * nr, 0.0);
  const IslandLists& L = lists_[k];
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int a = pol_loc_[orth_[e]];
    const double r = ssn_r_[a];
    const bool on = lam[a] - r * u[a] > 0;
    F[a] = on ? r * u[a] : lam[a];
    if (!jacobian) continue;
    if (on) {
      for (int b = 0; b < nr; b++) A[a * nr + b] = r * D[a * nr + b];
      // in the Jacobian only: redundant closed rows (bit-identical contacts) leave their impulses
      // undetermined
      A[a * nr + a] += kNewtonReg * r * D[a * nr + a];
    } else {
      A[a * nr + a] = 1;
    }
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], g = pol_loc_[soc_nrm_[e]];
    const double gamma = tresca_ ? ssn_g_[pol_loc_[f]] : lam[g], r = ssn_r_[pol_loc_[f]];
    double y[3], yn = 0;
    for (int j = 0; j < cnt; j++) {
      const int a = pol_loc_[f + j];
      y[j] = lam[a] / scale_[f + j] - r * scale_[f + j] * u[a];
      yn += y[j] * y[j];
    }
    yn = std::sqrt(yn);
    const int mode = gamma <= 0 ? 0 : yn <= gamma ? 1 : 2;  // force null, inside, on the rim
    for (int j = 0; j < cnt; j++) {
      const int a = pol_loc_[f + j];
      const double x = lam[a] / scale_[f + j];
      F[a] = mode == 0 ? x : mode == 1 ? r * scale_[f + j] * u[a] : x - gamma * y[j] / yn;
      if (!jacobian) continue;
      double* Aa = A + a * nr;
      if (mode == 0) {
        Aa[a] = 1 / scale_[f + j];
      } else if (mode == 1) {
        for (int b = 0; b < nr; b++) Aa[b] = r * scale_[f + j] * D[a * nr + b];
        Aa[a] += kNewtonReg * r * scale_[f + j] * D[a * nr + a];
      } else {
        // dF_j = dx_j - dgamma y_j / |y| - gamma / |y| (I - n n')_jl dy_l,
        // dy_l = dlam_l / scale_l - r scale_l D_l dlam
        Aa[a] += 1 / scale_[f + j];
        if (!tresca_) Aa[g] -= y[j] / yn;
        for (int l = 0; l < cnt; l++) {
          const int c = pol_loc_[f + l];
          const double P = gamma / yn * ((j == l ? 1 : 0) - y[j] * y[l] / (yn * yn));
          Aa[c] -= P / scale_[f + l];
          const double w = P * r * scale_[f + l];
          for (int b = 0; b < nr; b++) Aa[b] += w * D[c * nr + b];
        }
      }
    }
  }
  return 0.5 * Dot(F, F, nr);
}

bool IpmSolver::NewtonDirection(int nr, double lm) {
  // the step d (ssn_d_) with A d = F (lm = 0: LU with partial pivoting), or the
  // Levenberg-Marquardt step (A'A + lm I) d = A'F; false if the system cannot be solved
  const double* A = ssn_A_.data();
  double* d = ssn_d_.data();
  if (lm == 0) {
    std::copy(A, A + nr * nr, ssn_H_.data());
    double mn = HUGE_VAL, mx = 0;
    if (!LuFactorRows(ssn_H_.data(), nr, ssn_piv_.data(), &mn, &mx)) return false;
    std::copy(ssn_F_.data(), ssn_F_.data() + nr, d);
    PermuteRows(ssn_piv_.data(), nr, d);
    LowerSolveRows(ssn_H_.data(), nr, d, 1);
    UpperSolveRows(ssn_H_.data(), nr, d);
  } else {
    double* H = ssn_H_.data();  // A'A + lm I (symmetric: either layout)
    for (int a = 0; a < nr; a++) {
      for (int b = 0; b <= a; b++) {
        double s = 0;
        for (int c = 0; c < nr; c++) s += A[c * nr + a] * A[c * nr + b];
        H[a * nr + b] = H[b * nr + a] = s + (a == b ? lm : 0);
      }
      double s = 0;
      for (int c = 0; c < nr; c++) s += A[c * nr + a] * ssn_F_[c];
      d[a] = s;
    }
    if (!CholFactor(H, nr)) return false;
    CholSolve(H, nr, d);
  }
  for (int a = 0; a < nr; a++) {
    if (!std::isfinite(d[a])) return false;
  }
  return true;
}

double IpmSolver::NewtonLmScale(int nr) const {
  // max diag(A'A): the scale of the Levenberg-Marquardt weight
  const double* A = ssn_A_.data();
  double m = 0;
  for (int a = 0; a < nr; a++) {
    double s = 0;
    for (int c = 0; c < nr; c++) s += A[c * nr + a] * A[c * nr + a];
    m = std::max(m, s);
  }
  return std::max(m, 1e-300);
}

bool IpmSolver::NewtonDamp(int nr, double* lm, double* lm_scale) const {
  // the next Levenberg-Marquardt weight: the first, or the last one grown; false beyond the last
  if (*lm == 0) {
    *lm_scale = NewtonLmScale(nr);
    *lm = kNewtonLm * *lm_scale;
  } else {
    *lm *= kNewtonLmGain;
  }
  return *lm <= kNewtonLmMax * *lm_scale;
}

bool IpmSolver::NewtonMeasure(const Problem& p, int k, const double* lam) {
  // the answer lam as an iterate of the hard problem (trial_): orthant impulses clipped at 0,
  // friction impulses into their cone, velocity from the impulses, gaps and slips measured, eta0
  // on the rim; true if it meets both tolerances
  const ckIpmSettings& st = settings_.ipm;
  const IslandLists& L = lists_[k];
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  State* s = &trial_;
  for (int a = 0; a < nr; a++) s->lam[rows[a]] = lam[a];
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    s->lam[orth_[e]] = std::max(s->lam[orth_[e]], 0.0);
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e];
    const double gamma = s->lam[soc_nrm_[e]];
    double x2 = 0;
    for (int r = f; r < f + cnt; r++) x2 += std::pow(s->lam[r] / scale_[r], 2);
    const double c = std::sqrt(x2) > gamma ? gamma / std::sqrt(x2) : 1;
    for (int r = f; r < f + cnt; r++) s->lam[r] *= c;
  }
  for (int a = 0; a < nr; a++) s->x[rows[a]] = s->lam[rows[a]] / scale_[rows[a]];
  ImpulseVelocity(p, k, s->lam, nullptr, s);
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    s->z[i] = std::max(0.0, target_[i] + s->u[i]);
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e];
    double z2 = 0;
    for (int r = f; r < f + cnt; r++) {
      s->z[r] = scale_[r] * s->u[r];
      z2 += s->z[r] * s->z[r];
    }
    s->z0[f] = std::sqrt(z2);
  }
  Residuals(p, k, s);
  return s->rvio < st.residual_tol && s->kvio < st.kappa_tol;
}

int IpmSolver::NewtonSolve(const Problem& p, int k, int max_iter, double ftol, bool* solved) {
  // Newton from ssn_lam_ until |F|'s largest entry is below ftol, or (ftol = 0) until the answer
  // meets the hard problem (solved); returns the steps taken
  const int nr = NumRows(p, k);
  double* lam = ssn_lam_.data();
  double* lp = ssn_lp_.data();
  double merit = NewtonResidual(p, k, lam, true), lm = 0, lm_scale = 0;
  *solved = false;
  int it = 0;
  for (; it < max_iter && !*solved; it++) {
    if (ftol > 0) {
      double fm = 0;
      for (int a = 0; a < nr; a++) fm = std::max(fm, std::fabs(ssn_F_[a]));
      if (fm < ftol) break;
    }
    if (!NewtonDirection(nr, lm)) {
      if (!NewtonDamp(nr, &lm, &lm_scale)) break;
      continue;
    }
    // Armijo on |F|^2 / 2 along -d (slope -2 merit for the Newton direction)
    std::copy(lam, lam + nr, lp);
    double alpha = 1, next = HUGE_VAL;
    bool ok = false;
    for (int bt = 0; bt < kNewtonBacktrack && !ok; bt++, alpha *= 0.5) {
      for (int a = 0; a < nr; a++) lam[a] = lp[a] - alpha * ssn_d_[a];
      next = NewtonResidual(p, k, lam, false);
      ok = next <= (1 - 2 * kNewtonArmijo * alpha) * merit;
    }
    if (!ok) {  // no decrease: back to lp, a Levenberg-Marquardt step (a larger one if it was)
      std::copy(lp, lp + nr, lam);
      NewtonResidual(p, k, lam, true);
      if (!NewtonDamp(nr, &lm, &lm_scale)) break;
      continue;
    }
    lm = 0;
    merit = NewtonResidual(p, k, lam, true);
    if (ftol == 0) *solved = NewtonMeasure(p, k, lam);
  }
  return it;
}

void IpmSolver::TrescaRadii(const Problem& p, int k, double* change, double* gmax) {
  // the radii's step d = gamma - g, extrapolated by Aitken's r / (1 - r) while it shrinks at a
  // steady rate r; change: the largest |d|, gmax the largest new radius before extrapolation
  const IslandLists& L = lists_[k];
  const double* lam = ssn_lam_.data();
  double dd = 0, dp = 0;
  *change = *gmax = 0;
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int a = pol_loc_[soc_row_[e]];
    const double d = std::max(lam[pol_loc_[soc_nrm_[e]]], 0.0) - ssn_g_[a];
    dd += d * ssn_gd_[a];
    dp += ssn_gd_[a] * ssn_gd_[a];
    ssn_gd_[a] = d;
    *change = std::max(*change, std::fabs(d));
    *gmax = std::max(*gmax, ssn_g_[a] + d);
  }
  const double r = dp > 0 ? dd / dp : 0;
  const double jump = r > -1 && r < 1 ? std::min(r / (1 - r), kTrescaJump) : 0;
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int a = pol_loc_[soc_row_[e]];
    ssn_g_[a] = std::max(ssn_g_[a] + (1 + jump) * ssn_gd_[a], 0.0);
  }
}

bool IpmSolver::LastResort(const Problem& p, int k) { return Polish(p, k) || Semismooth(p, k); }

bool IpmSolver::Semismooth(const Problem& p, int k) {
  const IslandLists& L = lists_[k];
  const int nr = NumRows(p, k);
  if (!semismooth_ || L.eq_num || L.fl_num || nr > kNewtonMax) return false;
  const int* rows = Rows(p, k);
  NewtonDelassus(p, k);
  double* lam = ssn_lam_.data();
  double* D = ssn_D_.data();
  bool solved = false;
  // Tresca's fixed point: the friction discs' radii held at the last normal impulses (a monotone
  // problem), solved, the radii updated; from the best answer, first plain, then with a proximal
  // term eps D_ii (lambda - lambda_c) on each row's velocity (lambda_c: the round's start), which
  // keeps the impulses that the problem leaves free (bit-identical contacts) near the last ones
  int steps = 0;
  for (const auto& [eps, rounds] :
       {std::pair<double, int>{0, kTrescaOuter}, {kTrescaProx, 2 * kTrescaOuter}}) {
    for (int a = 0; a < nr; a++) lam[a] = out_lam_[rows[a]];
    tresca_ = true;
    for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
      ssn_g_[pol_loc_[soc_row_[e]]] = std::max(lam[pol_loc_[soc_nrm_[e]]], 0.0);
      ssn_gd_[pol_loc_[soc_row_[e]]] = 0;
    }
    double change = HUGE_VAL, gmax = 0;
    int budget = kNewtonBudget;
    for (int outer = 0; outer < rounds && !solved && budget > 0; outer++) {
      std::copy(lam, lam + nr, ssn_lt_.data());  // lambda_c
      for (int a = 0; a < nr && eps > 0; a++) {
        ssn_u0_[a] -= eps * D[a * nr + a] * lam[a];
        D[a * nr + a] *= 1 + eps;
      }
      bool dummy;
      const int inner = NewtonSolve(p, k, std::min(kNewtonIter, budget),
                                    std::max(kTrescaTol * gmax, kTrescaLoose * change), &dummy);
      budget -= inner;
      for (int a = 0; a < nr && eps > 0; a++) {
        D[a * nr + a] /= 1 + eps;
        ssn_u0_[a] += eps * D[a * nr + a] * ssn_lt_[a];
      }
      TrescaRadii(p, k, &change, &gmax);
      if (inner == 0 || !(change < kProbeChange * gmax)) continue;
      // Newton on Coulomb's problem from Tresca's answer, kept if it solves it
      std::copy(lam, lam + nr, ssn_lt_.data());
      tresca_ = false;
      budget -= NewtonSolve(p, k, kProbeIter, 0, &solved);
      tresca_ = true;
      if (!solved) std::copy(ssn_lt_.data(), ssn_lt_.data() + nr, lam);
    }
    tresca_ = false;
    steps += kNewtonBudget - budget;
    if (solved) break;
  }
  stats_.newton_steps += steps;
  if (!solved || AddsEnergy(p, k, trial_.lam)) return false;
  for (int a = 0; a < nr; a++) out_lam_[rows[a]] = trial_.lam[rows[a]];
  stats_.semismooth++;
  return true;
}

}  // namespace ipm
}  // namespace contactkit
