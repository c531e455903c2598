// Copyright 2026 The contactkit developers.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "contactkit/settings.h"
#include "solvers/common/cone.h"
#include "solvers/common/dense.h"
#include "solvers/ipm/ipm_solver.h"

namespace contactkit {
namespace ipm {
namespace {

constexpr double kEqualityReg = 1e-10;     // regularizer of hard equality rows, x diag_approx
constexpr double kTauMax = 0.99;           // fraction to the boundary while mu is large
constexpr double kTauGain = 100;           // tau = max(kTauMax, 1 - kTauGain mu)
constexpr double kTauCap = 0.999;          // ... at most this, once a step was short or while
constexpr double kCapFade = 1000;          // mu > kCapFade kappa_tol (fading below)
constexpr double kCenterAfter = 0.2;       // a step shorter than this makes the next one centering
constexpr double kBacktrack = 0.5;         // Dojo's beta
constexpr int kMaxBacktrack = 12;          // halvings of a step
constexpr double kTargetFraction = 0.1;    // final central-path target, fraction of kappa_tol
constexpr double kRetryTarget = 1e-3;      // the same for the last retries (stalled islands)
constexpr double kPathSigma = 0.5;         // path-following retry: kappa = sigma mu each step
constexpr double kProx = 1e-3;             // proximal retry: weight, x diag_approx of the row
constexpr int kProxOuter = 10;             // ... soft problems (centres) at most
constexpr double kProxGain = 0.9;          // ... a centre that shrinks the residual less misses
constexpr int kProxMisses = 1;             // ... misses before it stops
constexpr double kProxJump = 1000;         // ... largest Aitken extrapolation of a centre
constexpr double kVelFloor = 3e-3;         // velocity scale of the cold start (m/s)
constexpr double kColdSlack = 0.1;         // cold-start gap slack, fraction of that scale
constexpr double kRetryFloor = 1;          // the same for the retry of a failed solve
constexpr double kSoftFactor = 1e3;        // tolerances of the last, softer retry
constexpr double kStallStep = 0.05;        // steps shorter than this are blocked
constexpr double kLiftDet = 1e-6;          // det(eta) / eta0^2 of a velocity cone blocking a step
constexpr int kStallIter = 3;              // blocked steps in a row that end a solve
constexpr double kInteriorMargin = 1e-13;  // det(y) / y0^2 of an interior point
constexpr double kInaccurate = 1000;       // "inaccurate": within this factor of both tolerances
constexpr double kRecoveryEnergy = 10;     // energy an island's recovery may add, x its rows' own
constexpr long kMaxPool = 1L << 22;        // dense block pool bound for large models (doubles)
constexpr int kCenterIter = 30;            // Newton steps onto the central point at kappa_grad
constexpr double kCenterTol = 1e-10;       // relative complementarity accuracy of that point
constexpr double kCenterResidual = 1e-12;  // and its residual violation
constexpr double kCenterStall = 1;         // largest relative deviation accepted when stalled
constexpr double kCenterRounding = 1e-15;  // rounding of a cone product, times |x| |z|
constexpr int kPolishMax = 64;             // polish: dofs + rows of an island at most
constexpr int kPolishRounds = 8;           // ... patterns corrected from the last answer
constexpr int kPolishBacktrack = 20;       // ... halvings of a Newton step
constexpr double kPolishWork = 4194304;    // ... damped: dense LU work, sum of n^3 (16 n = 64)
constexpr double kPolishReg = 1e-8;        // ... Jacobian regularizer of closed rows, x diag_approx
constexpr double kPolishRate = 0.5;        // ... a step shrinking the residual less is slow
constexpr int kPolishSlow = 3;             // ... slow steps in a row that end a pattern
constexpr double kPolishSlip = 1e-4;       // ... slip (mu m/s) above which a contact slides
constexpr double kPolishAlign = 0.9;       // ... cosine of force against slip of a sliding guess
constexpr int kPolishIter = 20;            // ... Newton steps per pattern
constexpr double kPolishTol = 1e-3;        // ... its residual, x residual_tol
constexpr double kPolishCone = 1e-9;       // ... relative excess of a force over its cone
constexpr int kPolishEnumerate = 4;        // ... orthant rows up to which every pattern is tried
// rows of Linearize's contact scratch: a contact of dimension 6, or a group of kMaxGroup of 3
constexpr int kJcRows = std::max(6, 3 * IslandLU::kMaxGroup);
constexpr int kRefineSteps = 2;      // refinements of a direction's dynamics change
constexpr double kRefineTol = 0.1;   // ... when its defect exceeds this x residual_tol
constexpr double kWarmMu = 1e-5;     // complementarity of a warm start (gap re-check)           //
                                     // complementarity of a warm start
constexpr double kWarmSpeed = 1e-3;  // smallest gap speed of a warm start (m/s)

constexpr int kProxAttempt = 6;  // the proximal retry's attempt
// attempts: warm (if any), cold, cold with Nesterov-Todd scaling (whose directions stay well
// defined where a cone's force or velocity nears its boundary: sliding contacts in large
// piles), cold from a more central point without eta0 re-centering (which can stall a pile's
// iterates near the cone boundary), cold path following, softer contact. A stall (inaccurate)
// goes to the attempt named in next; a failure to the following one. The last three aim lower:
// an island that stalled twice just above kappa_tol (a contact between sticking and sliding
// whose blocked steps end near the tolerance) gets there from a deeper final target. Path
// following (kappa = sigma mu each step, no predictor or second-order term) follows the central
// path where Mehrotra's long steps leave it and block on a cone's boundary far above kappa_tol
// (a sliding body against a floor and a wall: every other attempt stalls near mu ~ 1e-5).
// The proximal retry (ProxRetry) takes what path following leaves just above the tolerances
struct Plan {  // an island's attempt (SolveIsland)
  double floor, warm_mu, soft, target;
  bool recenter, scaled;
  double sigma;  // path following at kappa = sigma mu; 0: Mehrotra predictor-corrector
  int next;      // the attempt after a stall (-1: stop)
  int fail;      // the attempt after a failure (-1: stop)
};
constexpr Plan kPlans[7] = {
    {kVelFloor, kWarmMu, 1, kTargetFraction, true, false, 0, 2, 1},
    {kVelFloor, 0, 1, kTargetFraction, true, false, 0, 2, 2},
    {kVelFloor, 0, 1, kTargetFraction, true, true, 0, 3, 3},
    {kRetryFloor, 0, 1, kRetryTarget, false, false, 0, 4, 4},
    {kVelFloor, 0, 1, kRetryTarget, true, false, kPathSigma, kProxAttempt, 5},
    {kRetryFloor, 0, kSoftFactor, kRetryTarget, false, false, 0, -1, -1},
    {kVelFloor, 0, 1, kRetryTarget, true, false, 0, -1, 5}};

// the soft attempt, the last, and its twin: the same plan with the hard tolerances. Where every
// decision of the twin's run that reads the tolerances is taken alike under the soft ones (Twin),
// the soft attempt's run is the twin's again, its answer the twin's, which the step did not keep
constexpr int kSoftAttempt = 5, kSoftTwin = 3;
constexpr bool Twins(const Plan& a, const Plan& b) {
  return a.floor == b.floor && a.warm_mu == b.warm_mu && a.target == b.target &&
         a.recenter == b.recenter && !a.recenter && a.scaled == b.scaled && a.sigma == b.sigma &&
         a.sigma == 0 && a.soft == 1 && b.soft > 1 && b.next < 0 && b.fail < 0;
}
static_assert(Twins(kPlans[kSoftTwin], kPlans[kSoftAttempt]));

// fixed-size cone operations for the cones here (2 or 3 entries)
inline double Det(const double* y, int n) { return n == 3 ? cone::DetN<3>(y) : cone::DetN<2>(y); }
inline double ConeStep(const double* y, const double* dy, int n) {
  return n == 3 ? cone::StepN<3>(y, dy) : cone::StepN<2>(y, dy);
}
inline void Divide(const double* l, const double* r, int n, double* y) {
  n == 3 ? cone::DivideN<3>(l, r, y) : cone::DivideN<2>(l, r, y);
}
inline void Product(const double* x, const double* z, int n, double* out) {
  n == 3 ? cone::ProductN<3>(x, z, out) : cone::ProductN<2>(x, z, out);
}

// spectral power y^p of a cone vector (eigenvalues y0 +- |y_R|)
void ConePower(const double* y, int n, double pw, double* out) {
  double r2 = 0;
  for (int i = 1; i < n; i++) r2 += y[i] * y[i];
  const double r = std::sqrt(r2);
  const double l1 = std::pow(y[0] + r, pw), l2 = std::pow(y[0] - r, pw);
  out[0] = 0.5 * (l1 + l2);
  const double b = r > 0 ? 0.5 * (l1 - l2) / r : 0;
  for (int i = 1; i < n; i++) out[i] = b * y[i];
}

// quadratic representation P(y) = 2 y y' - det(y) J of a cone vector (n x n, row-major)
void QuadRep(const double* y, int n, double* P) {
  const double d = Det(y, n);
  for (int r = 0; r < n; r++) {
    for (int c = 0; c < n; c++) P[r * n + c] = 2 * y[r] * y[c] - (r != c ? 0 : r == 0 ? d : -d);
  }
}

// y = A x (n x n, row-major)
void MatVec(const double* A, const double* x, int n, double* y) {
  for (int r = 0; r < n; r++) {
    y[r] = 0;
    for (int c = 0; c < n; c++) y[r] += A[r * n + c] * x[c];
  }
}

// out[1..cnt] = v[f..f+cnt) for the cones here (cnt 1 or 2; no loop of unknown length)
inline void Tail(const double* v, int f, int cnt, double* out) {
  out[1] = v[f];
  out[2] = cnt == 2 ? v[f + 1] : 0;  // unused for cnt 1
}

// entries of cone c of an iterate: x = (x0, x_R), z = (z0, z_R)
inline int ConeVectors(const State& s, int f, int cnt, double x0, double* x, double* z) {
  x[0] = x0;
  z[0] = s.z0[f];
  Tail(s.x, f, cnt, x);
  Tail(s.z, f, cnt, z);
  return cnt + 1;
}

// friction cones of a contact of dimension dim: (first row offset, rows)
int FrictionGroups(int dim, int* first, int* count) {
  int n = 0;
  if (dim >= 3) first[n] = 1, count[n++] = 2;
  if (dim >= 4) first[n] = 3, count[n++] = 1;
  if (dim >= 6) first[n] = 4, count[n++] = 2;
  return n;
}

// rows [i, i + NB) share one column pattern and are stored one after another (a contact's rows):
// y[r] = J_(i+r) x
template <int NB>
inline void BlockDotN(const SparseRows& J, int i, const double* x, double* y) {
  const int adr = J.rowadr[i], n = J.rownnz[i];
  const int* col = J.colind + adr;
  const double* v = J.val + adr;
  double acc[NB] = {0};
  for (int c = 0; c < n; c++) {
    const double xc = x[col[c]];
    for (int r = 0; r < NB; r++) acc[r] += v[r * n + c] * xc;
  }
  for (int r = 0; r < NB; r++) y[r] = acc[r];
}

// the same rows: x += a sum_r f[r] J_(i+r)'
template <int NB>
inline void BlockAddN(const SparseRows& J, int i, double a, const double* f, double* x) {
  const int adr = J.rowadr[i], n = J.rownnz[i];
  const int* col = J.colind + adr;
  const double* v = J.val + adr;
  double af[NB];
  for (int r = 0; r < NB; r++) af[r] = a * f[r];
  for (int c = 0; c < n; c++) {
    double sum = 0;
    for (int r = 0; r < NB; r++) sum += af[r] * v[r * n + c];
    x[col[c]] += sum;
  }
}

// y (rows) = J x for the rows of a list; block[i] rows from row i share a pattern (0: inside a
// block)
void BlockDot(const SparseRows& J, const int* rows, int nr, const uint8_t* block, const double* x,
              double* y) {
  for (int a = 0; a < nr; a++) {
    const int i = rows[a];
    switch (block[i]) {
      case 1:
        y[i] = J.Dot(i, x);
        break;
      case 3:
        BlockDotN<3>(J, i, x, y + i);
        break;
      case 4:
        BlockDotN<4>(J, i, x, y + i);
        break;
      case 6:
        BlockDotN<6>(J, i, x, y + i);
        break;
      default:
        break;
    }
  }
}

// x += s J' f for the rows of a list (blocks as in BlockDot)
void BlockAdd(const SparseRows& J, const int* rows, int nr, const uint8_t* block, double s,
              const double* f, double* x) {
  for (int a = 0; a < nr; a++) {
    const int i = rows[a];
    switch (block[i]) {
      case 1:
        if (f[i] != 0) J.AddRowTo(i, s * f[i], x);
        break;
      case 3:
        BlockAddN<3>(J, i, s, f + i, x);
        break;
      case 4:
        BlockAddN<4>(J, i, s, f + i, x);
        break;
      case 6:
        BlockAddN<6>(J, i, s, f + i, x);
        break;
      default:
        break;
    }
  }
}

// a cone's eliminated terms with the proximal part P (cnt) of its velocity rows: T = (I + S P)^-1,
// q0 = q, then q = T q and S = T S
void ProxCone(const double* P, int cnt, double* q, double* S, double* T, double* q0) {
  double A[4];
  for (int r = 0; r < cnt; r++) {
    for (int c = 0; c < cnt; c++) A[r * cnt + c] = (r == c) + S[r * cnt + c] * P[c];
  }
  if (cnt == 1) {
    T[0] = 1 / A[0];
  } else {
    const double det = A[0] * A[3] - A[1] * A[2];
    T[0] = A[3] / det;
    T[1] = -A[1] / det;
    T[2] = -A[2] / det;
    T[3] = A[0] / det;
  }
  double Sn[4];
  for (int r = 0; r < cnt; r++) {
    q0[r] = q[r];
    for (int c = 0; c < cnt; c++) {
      Sn[r * cnt + c] = 0;
      for (int m = 0; m < cnt; m++) Sn[r * cnt + c] += T[r * cnt + m] * S[m * cnt + c];
    }
  }
  for (int r = 0; r < cnt; r++) {
    q[r] = 0;
    for (int m = 0; m < cnt; m++) q[r] += T[r * cnt + m] * q0[m];
  }
  for (int a = 0; a < cnt * cnt; a++) S[a] = Sn[a];
}

}  // namespace

bool IpmSolver::Setup(const ProblemDims& dims, const ckSettings& settings, std::string* error) {
  dims_ = dims;
  settings_ = settings;
  const size_t R = std::max(1, dims.max_rows), V = std::max(1, dims.nv);
  const size_t T = std::max(1, dims.ntree);
  if (!lu_.Allocate(dims, kMaxPool, error)) return false;
  try {
    scale_.assign(R, 1);
    target_.assign(R, 0);
    capped_.assign(R, 0);
    reg_.assign(R, 0);
    bound_.assign(R, 0);
    chain_.assign(R, 0);
    block_.assign(R, 1);
    pos_.assign(R, 0);
    pos_next_.assign(R, 0);
    jac_next_.assign(std::max(1, dims.max_nnz), 0);
    lists_.assign(T, IslandLists());
    for (auto* v : {&orth_, &eq_, &lim_, &con_, &fl_, &con_dim_, &con_soc_, &soc_row_, &soc_cnt_,
                    &soc_nrm_, &con_of_row_}) {
      v->assign(R, 0);
    }
    og_.assign(R, 0);
    od_.assign(R, 0);
    sG_.assign(9 * R, 0);
    sq_.assign(2 * R, 0);
    sS_.assign(4 * R, 0);
    sT_.assign(4 * R, 0);
    sq0_.assign(2 * R, 0);
    prox_.assign(R, 0);
    xc_.assign(R, 0);
    xd_.assign(R, 0);
    pf_.assign(R, 1);
    sd_.assign(3 * R, 0);
    sW_.assign(9 * R, 0);
    sWi_.assign(9 * R, 0);
    sl_.assign(3 * R, 0);
    c_.assign(R, 0);
    rhs_.assign(V, 0);
    tmp_.assign(V, 0);
    mdiag_.assign(V, 1);
    jc_.assign(kJcRows * V, 0);
    tw_.assign(kJcRows * V, 0);
    out_lam_.assign(R, 0);
    cen_force_.assign(R, 0);
    grad_ok_.assign(T, 0);
    grad_kappa_.assign(T, 0);
    centered_.assign(T, 0);
    drz_.assign(R, 0);
    blk_v_.assign(static_cast<size_t>(V) * kTangentSlots, 0);
    blk_rv_.assign(static_cast<size_t>(V) * kTangentSlots, 0);
    blk_c_.assign(static_cast<size_t>(R) * kTangentSlots, 0);
    blk_rz_.assign(static_cast<size_t>(R) * kTangentSlots, 0);
    blk_u_.assign(static_cast<size_t>(R) * kTangentSlots, 0);
    blk_on_.assign(kTangentSlots, 0);
    blk_mf_.assign(kTangentSlots, 0);
    cfd_kappa_.assign(R, 0);
    dcomp_.assign(R, 0);
    touched_.assign(T, 0);
    mode_.assign(std::max(1, dims.max_contacts), -1);
    mode_want_.assign(T, 0);
    mode_cur_.assign(T, 0);
    mode_new_.assign(T, 0);
    row_moded_.assign(R, 0);
    drv_.assign(V, 0);
    for (auto* v : {&adj_t_, &adj_u_, &adj_z_, &adj_n_}) v->assign(R, 0);
    adj_w_.assign(V, 0);
    adj_mw_.assign(V, 0);
    adj_dv_.assign(V, 0);
    adj_gj_.assign(std::max(1, dims.max_nnz), 0);
    blk_p_.assign(static_cast<size_t>(V) * kTangentSlots, 0);
    blk_f_.assign(static_cast<size_t>(V) * kTangentSlots, 0);
    warm_lam_.assign(R, 0);
    warm_ok_.assign(R, 0);
    AllocateDifference(dims);
    const size_t P = kPolishMax;
    pol_M_.assign(P * P, 0);
    pol_J_.assign(P * P, 0);
    pol_A_.assign(P * P, 0);
    for (auto* v : {&pol_w_, &pol_w0_, &pol_wp_, &pol_d_, &pol_F_, &pol_u_}) v->assign(P, 0);
    pol_pat_.assign(P, 0);
    pol_piv_.assign(P, 0);
    pol_tried_.assign(P, 0);
    pol_last_pat_.assign(P, 0);
    pol_cone_.assign(P, -1);
    pol_loc_.assign(R, 0);
    pol_dof_.assign(V, 0);
    const size_t N = std::min<size_t>(R, kNewtonMax);
    for (auto* v : {&ssn_D_, &ssn_A_, &ssn_H_}) v->assign(N * N, 0);
    for (auto* v : {&ssn_u0_, &ssn_u_, &ssn_r_, &ssn_lam_, &ssn_lp_, &ssn_F_, &ssn_d_, &ssn_g_,
                    &ssn_lt_, &ssn_gd_}) {
      v->assign(N, 0);
    }
    ssn_piv_.assign(N, 0);

    // 5 states of (2 nv + 6 rows), 2 directions of (2 nv + 6 rows)
    store_.assign(7 * (2 * V + 6 * R), 0);
  } catch (const std::bad_alloc&) {
    *error = "ipm: out of memory for the solver workspace";
    return false;
  }
  double* at = store_.data();
  auto take = [&at](size_t n) {
    double* p = at;
    at += n;
    return p;
  };
  for (Vectors* s :
       std::initializer_list<Vectors*>{&cur_, &trial_, &best_, &grad_, &cen_, &aff_, &dir_}) {
    s->v = take(V);
    s->rv = take(V);
    s->x = take(R);
    s->z = take(R);
    s->z0 = take(R);
    s->lam = take(R);
    s->u = take(R);
    s->rz = take(R);
  }
  return true;
}

void IpmSolver::Prepare(const Problem& p, const double* pos) {
  const SparseRows& J = p.J;

  // rows: scale, target, regularizer, bound
  for (int i = 0; i < p.nrow; i++) {
    scale_[i] = 1;
    PrepareRow(p, pos, i);
  }
  for (int i = 0; i < p.nrow; i++) block_[i] = 1;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    con_of_row_[con.row] = c;
    for (int r = 1; r < con.dim; r++) scale_[con.row + r] = con.mu[r - 1];

    // a contact's rows as one block when they share their columns, stored one after another
    const int i = con.row, n = J.rownnz[i];
    bool same = con.dim == 3 || con.dim == 4 || con.dim == 6;
    for (int r = 1; r < con.dim && same; r++) {
      same = J.rownnz[i + r] == n && J.rowadr[i + r] == J.rowadr[i] + r * n;
      for (int b = 0; b < n && same; b++) {
        same = J.colind[J.rowadr[i + r] + b] == J.colind[J.rowadr[i] + b];
      }
    }
    if (same) {
      block_[i] = static_cast<uint8_t>(con.dim);
      for (int r = 1; r < con.dim; r++) block_[i + r] = 0;
    }
  }
  for (int j = 0; j < p.nv; j++) mdiag_[j] = p.mass.M[p.mass.madr[j]];
  reach_.Prepare(p);
  BuildLists(p);
}

void IpmSolver::PrepareRow(const Problem& p, const double* pos, int i) {
  // row i's target, regularizer and bound (the data's, at positions pos; not its scale)
  const double h = p.h;
  const ckIpmSettings& st = settings_.ipm;
  target_[i] = 0;
  capped_[i] = 0;
  reg_[i] = 0;
  bound_[i] = 0;
  switch (p.kind[i]) {
    case kRowEquality:
      if (st.soft_equality) {
        reg_[i] = std::max(p.R[i], 1e-15);
        target_[i] = p.vel[i] + h * p.aref[i];
      } else {
        reg_[i] = std::max(kEqualityReg * p.diag_approx[i], 1e-300);
        target_[i] = -pos[i] / h;
      }
      break;
    case kRowFriction:
      bound_[i] = h * p.floss[i];
      break;
    case kRowLimit:
    case kRowContactNormal:
      // without margin, rest slightly inside so that MuJoCo keeps reporting the contact; undo
      // deep penetration (late detection, collision glitches) at a bounded speed
      target_[i] = (pos[i] - std::min(p.margin[i] - st.rest_depth, 0.0)) / h;
      if (target_[i] < -st.recovery_speed) {
        target_[i] = -st.recovery_speed;
        capped_[i] = 1;
      }
      break;
    default:
      break;
  }
}

void IpmSolver::BuildLists(const Problem& p) {
  const SparseRows& J = p.J;
  const Islands& is = p.islands;
  int north = 0, nsoc = 0, neq = 0, nlim = 0, ncon = 0, nfl = 0;
  for (int k = 0; k < is.nisland; k++) {
    IslandLists& L = lists_[k];
    L.orth_adr = north;
    L.soc_adr = nsoc;
    L.eq_adr = neq;
    L.lim_adr = nlim;
    L.con_adr = ncon;
    L.fl_adr = nfl;
    const int* rows = Rows(p, k);
    const int nr = NumRows(p, k);
    const bool single = is.ntrees[k] == 1;
    for (int a = 0; a < nr; a++) {
      const int i = rows[a];
      if (single) {
        // the rows of a block share the first row's columns
        chain_[i] = block_[i] ? RowIsChain(J.colind + J.rowadr[i], J.rownnz[i], p.mass.parent)
                              : chain_[i - 1];
      }
      switch (p.kind[i]) {
        case kRowEquality:
          eq_[neq++] = i;
          break;
        case kRowFriction:
          fl_[nfl++] = nsoc;
          soc_row_[nsoc] = i;
          soc_cnt_[nsoc] = 1;
          soc_nrm_[nsoc++] = -1;
          break;
        case kRowLimit:
          orth_[north++] = i;
          lim_[nlim++] = i;
          break;
        case kRowContactNormal: {
          const int c = con_of_row_[i];
          orth_[north++] = i;
          con_[ncon] = i;
          con_dim_[ncon] = p.con[c].dim;
          con_soc_[ncon++] = nsoc;
          int first[3], count[3];
          const int ng = FrictionGroups(p.con[c].dim, first, count);
          for (int g = 0; g < ng; g++) {
            soc_row_[nsoc] = i + first[g];
            soc_cnt_[nsoc] = count[g];
            soc_nrm_[nsoc++] = i;
          }
          break;
        }
        default:
          break;  // friction rows belong to their contact's cones
      }
    }
    L.orth_num = north - L.orth_adr;
    L.soc_num = nsoc - L.soc_adr;
    L.eq_num = neq - L.eq_adr;
    L.lim_num = nlim - L.lim_adr;
    L.con_num = ncon - L.con_adr;
    L.fl_num = nfl - L.fl_adr;
  }
}

void IpmSolver::ColdStart(const Problem& p, int k, double floor, State* s) {
  const SparseRows& G = *gapJ_;
  const IslandLists& L = lists_[k];
  const int* dofs = Dofs(p, k);
  for (int a = 0; a < NumDofs(p, k); a++) s->v[dofs[a]] = p.v_free[dofs[a]];
  const int* rows = Rows(p, k);
  BlockDot(G, rows, NumRows(p, k), block_.data(), s->v, s->u);
  for (int a = 0; a < NumRows(p, k); a++) s->x[rows[a]] = s->lam[rows[a]] = 0;

  // orthant pairs: gap velocity without force g; s ~ max(g, vs), gamma ~ vs / A
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    const double g = s->u[i] + target_[i];
    const double vs = std::fabs(g) + floor;
    const double A = std::max(p.diag_approx[i], 1e-12);
    s->z[i] = std::max(g, 0.0) + kColdSlack * vs;
    s->x[i] = s->lam[i] = (std::max(-g, 0.0) + 0.5 * vs) / A;
  }

  // cones centered: eta0 = 2 |eta_R| + vs, xi_R = -xi0 eta_R / eta0 (xi o eta = (., 0))
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], n = soc_nrm_[e];
    double nz = 0;
    for (int r = f; r < f + cnt; r++) {
      s->z[r] = scale_[r] * s->u[r];
      nz += s->z[r] * s->z[r];
    }
    nz = std::sqrt(nz);
    const double vs = n >= 0 ? std::fabs(s->u[n] + target_[n]) + floor : nz + floor;
    const double x0 = n >= 0 ? s->x[n] : bound_[f];
    s->z0[f] = 2 * nz + vs;
    for (int r = f; r < f + cnt; r++) {
      s->x[r] = -x0 * s->z[r] / s->z0[f];
      s->lam[r] = scale_[r] * s->x[r];
    }
  }
  Residuals(p, k, s);
}

void IpmSolver::ImpulseVelocityChange(const Problem& p, int k, const double* lam,
                                      const uint8_t* ok) {
  const Islands& is = p.islands;
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  const int* dofs = Dofs(p, k);
  const int nd = NumDofs(p, k);
  for (int a = 0; a < nd; a++) tmp_[dofs[a]] = 0;
  for (int a = 0; a < nr; a++) {
    const int i = rows[a];
    if ((!ok || ok[i]) && lam[i] != 0) p.J.AddRowTo(i, lam[i], tmp_.data());
  }
  for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
    const int b = is.tree_dofadr[is.trees[t]];
    p.mass.Solve(tmp_.data(), b, b + is.tree_dofnum[is.trees[t]]);
  }
}

void IpmSolver::ImpulseVelocity(const Problem& p, int k, const double* lam, const uint8_t* ok,
                                State* s) {
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  const int* dofs = Dofs(p, k);
  const int nd = NumDofs(p, k);
  ImpulseVelocityChange(p, k, lam, ok);
  for (int a = 0; a < nd; a++) s->v[dofs[a]] = p.v_free[dofs[a]] + tmp_[dofs[a]];
  for (int a = 0; a < nr; a++) s->u[rows[a]] = gapJ_->Dot(rows[a], s->v);
}

void IpmSolver::WarmStart(const Problem& p, int k, double mu, State* s) {
  // the cold start for rows without a warm impulse; the others from the previous impulses
  ColdStart(p, k, kVelFloor, s);
  const IslandLists& L = lists_[k];

  // velocity consistent with the warm impulses
  ImpulseVelocity(p, k, warm_lam_.data(), warm_ok_.data(), s);

  // orthant pairs: previous gamma, gap at v; complementarity at least mu
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    if (!warm_ok_[i]) continue;
    double z = std::max(s->u[i] + target_[i], 0.0);
    double x = std::max(warm_lam_[i], mu / std::max(z, kWarmSpeed));
    s->x[i] = s->lam[i] = x;
    s->z[i] = std::max(z, mu / x);
  }

  // cones with a warm normal: the central friction law at mu for the slip at v,
  // eta0 = (a + sqrt(a^2 + 4 |eta_R|^2)) / 2 with a = mu / xi0, xi_R = -xi0 eta_R / eta0
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], n = soc_nrm_[e];
    if (!warm_ok_[n >= 0 ? n : f]) continue;
    const double x0 = n >= 0 ? s->x[n] : bound_[f];
    double r2 = 0;
    for (int r = f; r < f + cnt; r++) {
      s->z[r] = scale_[r] * s->u[r];
      r2 += s->z[r] * s->z[r];
    }
    const double a = mu / x0;
    s->z0[f] = 0.5 * (a + std::sqrt(a * a + 4 * r2));
    for (int r = f; r < f + cnt; r++) {
      s->x[r] = -x0 * s->z[r] / s->z0[f];
      s->lam[r] = scale_[r] * s->x[r];
    }
  }
  for (int e = L.eq_adr; e < L.eq_adr + L.eq_num; e++) {
    const int i = eq_[e];
    if (warm_ok_[i]) s->x[i] = s->lam[i] = warm_lam_[i];
  }
  Residuals(p, k, s);
}

void IpmSolver::Residuals(const Problem& p, int k, State* s) {
  // row velocities; dynamics residual M (v - v_free) - J' lambda; row residuals
  const SparseRows& J = p.J;
  const Islands& is = p.islands;
  const IslandLists& L = lists_[k];
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  BlockDot(*gapJ_, rows, nr, block_.data(), s->v, s->u);
  const int* dofs = Dofs(p, k);
  const int nd = NumDofs(p, k);
  bool moved = false;
  for (int a = 0; a < nd; a++) {
    tmp_[dofs[a]] = s->v[dofs[a]] - p.v_free[dofs[a]];
    moved = moved || tmp_[dofs[a]] != 0;
  }
  if (moved) {
    for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
      const int b = is.tree_dofadr[is.trees[t]];
      p.mass.Mul(tmp_.data(), s->rv, b, b + is.tree_dofnum[is.trees[t]]);
    }
  } else {
    for (int a = 0; a < nd; a++) s->rv[dofs[a]] = 0;  // the cold start's v_free
  }
  BlockAdd(J, rows, nr, block_.data(), -1, s->lam, s->rv);
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    s->rz[i] = s->z[i] - s->u[i] - target_[i];
    if (prox_on_) s->rz[i] -= prox_[i] * (s->x[i] - xc_[i]);
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    for (int r = soc_row_[e]; r < soc_row_[e] + soc_cnt_[e]; r++) {
      s->rz[r] = s->z[r] - scale_[r] * s->u[r];
      if (prox_on_) s->rz[r] -= prox_[r] * (s->x[r] - xc_[r]);
    }
  }
  for (int e = L.eq_adr; e < L.eq_adr + L.eq_num; e++) {
    const int i = eq_[e];
    s->rz[i] = s->u[i] - target_[i] + reg_[i] * s->lam[i];
  }
  Measures(p, k, s);
}

void IpmSolver::Measures(const Problem& p, int k, State* s) const {
  // residual violation, largest complementarity entry, mean complementarity, interior
  const IslandLists& L = lists_[k];
  double rvio = 0, kvio = 0, gap = 0;
  bool interior = true;
  const int* dofs = Dofs(p, k);
  for (int a = 0; a < NumDofs(p, k); a++) {
    rvio = std::max(rvio, std::fabs(s->rv[dofs[a]]) / mdiag_[dofs[a]]);
  }
  const int* rows = Rows(p, k);
  for (int a = 0; a < NumRows(p, k); a++) rvio = std::max(rvio, std::fabs(s->rz[rows[a]]));
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    const double xz = s->x[i] * s->z[i];
    kvio = std::max(kvio, std::fabs(xz));
    gap += xz;
    interior = interior && s->x[i] > 0 && s->z[i] > 0;
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], nrm = soc_nrm_[e];
    double x[3], z[3], c[3];
    const int n = ConeVectors(*s, f, soc_cnt_[e], nrm >= 0 ? s->x[nrm] : bound_[f], x, z);
    Product(x, z, n, c);
    for (int r = 0; r < n; r++) kvio = std::max(kvio, std::fabs(c[r]));
    gap += c[0];
    interior = interior && x[0] > 0 && z[0] > 0 && Det(x, n) > kInteriorMargin * x[0] * x[0] &&
               Det(z, n) > kInteriorMargin * z[0] * z[0];
  }
  s->rvio = rvio;
  s->kvio = kvio;
  const int ncone = L.orth_num + L.soc_num;
  s->mu = ncone ? gap / ncone : 0;
  s->interior = interior;
}

namespace {

// eta0 on the central path through the normal pair (gamma s_n = kappa) of the cone at row f:
// (s_n + sqrt(s_n^2 + 4 |eta_R|^2)) / 2
double CentralEta0(const State& s, int f, int cnt, int nrm) {
  double r2 = 0;
  for (int r = f; r < f + cnt; r++) r2 += s.z[r] * s.z[r];
  const double a = s.z[nrm];
  return 0.5 * (a + std::sqrt(a * a + 4 * r2));
}

}  // namespace

void IpmSolver::RecenterEta0(const Problem& p, int k, State* s) const {
  // eta0 enters no linear residual: on the central path through the contact's normal pair
  // (gamma s_n = kappa) it is (s_n + sqrt(s_n^2 + 4 |eta_R|^2)) / 2. A feasible iterate's s_n is
  // final, but eta0 follows only through the linearized product gamma eta0, which lags by a
  // factor of ten per iteration when gamma collapses (separating contacts). Lower eta0 to that
  // value where this lowers the cone's largest complementarity entry.
  const IslandLists& L = lists_[k];
  bool changed = false;
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], nrm = soc_nrm_[e];
    if (nrm < 0) continue;
    const double eta0 = CentralEta0(*s, f, cnt, nrm);
    if (!(eta0 < s->z0[f])) continue;
    double x[3], z[3], before[3], after[3];
    const int n = ConeVectors(*s, f, cnt, s->x[nrm], x, z);
    Product(x, z, n, before);
    z[0] = eta0;
    if (!(Det(z, n) > kInteriorMargin * eta0 * eta0)) continue;
    Product(x, z, n, after);
    double mb = 0, ma = 0;
    for (int r = 0; r < n; r++) {
      mb = std::max(mb, std::fabs(before[r]));
      ma = std::max(ma, std::fabs(after[r]));
    }
    if (ma < mb) {
      s->z0[f] = eta0;
      changed = true;
    }
  }
  if (changed) Measures(p, k, s);
}

bool IpmSolver::LiftEta0(const Problem& p, int k, State* s) const {
  // a blocked step: a cone whose velocity reached its boundary while its force is inside (a
  // contact between sticking and sliding) admits no Newton step. eta0 enters no linear residual,
  // so raise it to its central-path value through the normal pair, back inside the cone
  const IslandLists& L = lists_[k];
  bool changed = false;
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], nrm = soc_nrm_[e];
    if (nrm < 0) continue;
    double x[3], z[3];
    const int n = ConeVectors(*s, f, cnt, s->x[nrm], x, z);
    if (Det(z, n) > kLiftDet * z[0] * z[0]) continue;
    const double eta0 = CentralEta0(*s, f, cnt, nrm);
    if (!(eta0 > s->z0[f])) continue;
    s->z0[f] = eta0;
    changed = true;
  }
  if (changed) Measures(p, k, s);
  return changed;
}

bool IpmSolver::ConeJacobians(const Problem& p, int k, const State& s, bool scaled) {
  // complementarity linearized: dx = d - G dz, G = Arw(z)^-1 Arw(x) (x/z for an orthant pair);
  // scaled: Nesterov-Todd's G = W^2 with W z = W^-1 x = l, W = P(w^1/2), P(w) z = x
  const IslandLists& L = lists_[k];
  scaled_ = scaled;
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    if (!(s.x[i] > 0 && s.z[i] > 0)) return false;
    og_[i] = s.x[i] / s.z[i];
    if (prox_on_) {
      // dz = du - rz + prox dx: dx = pf (d + og rz) - og pf du
      pf_[i] = 1 / (1 + og_[i] * prox_[i]);
      og_[i] *= pf_[i];
    }
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], nrm = soc_nrm_[e];
    double x[3], z[3], col[3], out[3];
    const int n = ConeVectors(s, f, cnt, nrm >= 0 ? s.x[nrm] : bound_[f], x, z);
    if (!(x[0] > 0 && z[0] > 0 && Det(x, n) > 0 && Det(z, n) > 0)) return false;
    double* G = sG_.data() + 9 * e;
    if (scaled) {
      // w = P(x^1/2) (P(x^1/2) z)^-1/2
      double xh[3], u[3], w[3], P[9];
      ConePower(x, n, 0.5, xh);
      QuadRep(xh, n, P);
      MatVec(P, z, n, u);
      ConePower(u, n, -0.5, out);
      MatVec(P, out, n, w);
      QuadRep(w, n, G);
      ConePower(w, n, 0.5, out);
      QuadRep(out, n, sW_.data() + 9 * e);
      ConePower(w, n, -0.5, out);
      QuadRep(out, n, sWi_.data() + 9 * e);
      MatVec(sW_.data() + 9 * e, z, n, sl_.data() + 3 * e);
    } else {
      for (int c = 0; c < n; c++) {
        // column c of Arw(x): (x_c, x0 e_c) for c > 0, x for c = 0
        for (int r = 0; r < n; r++) col[r] = c == 0 ? x[r] : (r == 0 ? x[c] : (r == c ? x[0] : 0));
        Divide(z, col, n, out);
        for (int r = 0; r < n; r++) G[r * n + c] = out[r];
      }
    }

    // eliminate eta0: q = G_10 / G_00, S = G_11 - q G_01
    double* q = sq_.data() + 2 * e;
    double* S = sS_.data() + 4 * e;
    for (int a = 0; a < cnt; a++) q[a] = G[(a + 1) * n] / G[0];
    for (int a = 0; a < cnt; a++) {
      for (int b = 0; b < cnt; b++) S[a * cnt + b] = G[(a + 1) * n + b + 1] - q[a] * G[b + 1];
    }
    if (prox_on_) ProxCone(prox_.data() + f, cnt, q, S, sT_.data() + 4 * e, sq0_.data() + 2 * e);
  }
  return true;
}

bool IpmSolver::Linearize(const Problem& p, int k, bool coupled, double* cond) {
  // M + J' W J: W per row (limits, friction loss, equality) or per contact (dim x dim)
  const SparseRows& J = p.J;
  const IslandLists& L = lists_[k];
  lu_.SetMass(p);
  double* jc = jc_.data();
  double* tw = tw_.data();
  const double* gval = gapJ_->val;  // right factor: the rows that measure velocities
  const bool cspace = lu_.constraint_space();
  auto single = [&](int i, double w) {
    if (cspace) {
      lu_.AddW(i, 1, &w);
      return;
    }
    const int n = J.rownnz[i];
    const double* ji = J.val + J.rowadr[i];
    const double* gi = gval + J.rowadr[i];
    for (int b = 0; b < n; b++) tw[b] = w * gi[b];
    lu_.AddJtT(J.colind + J.rowadr[i], n, 1, ji, tw);
  };
  for (int e = L.eq_adr; e < L.eq_adr + L.eq_num; e++) single(eq_[e], 1 / reg_[eq_[e]]);
  for (int e = L.lim_adr; e < L.lim_adr + L.lim_num; e++) single(lim_[e], og_[lim_[e]]);
  for (int e = L.fl_adr; e < L.fl_adr + L.fl_num; e++) {
    single(soc_row_[fl_[e]], sS_[4 * fl_[e]]);
  }
  // contact blocks W: normal a; friction D S D and coupling D q a. Consecutive contacts of
  // dimension 3 on the same columns, stored one after another (a geom pair's contacts), are added
  // as one group
  double Wg[IslandLU::kMaxGroup * 9];
  int g0 = 0, gm = 0;  // group: first contact entry, contacts
  auto flush = [&]() {
    if (!gm) return;
    const int i0 = con_[g0], dim = con_dim_[g0], n = J.rownnz[i0], adr = J.rowadr[i0];
    if (!(block_[i0] == dim &&
          lu_.AddJtWG(J.colind + adr, n, dim, gm, J.val + adr, Wg, gval + adr))) {
      // the group's rows and weighted rows one contact after another, added in one call
      for (int m = 0; m < gm; m++) {
        const int i = con_[g0 + m];
        const double* W = Wg + m * dim * dim;
        for (int r = 0; r < dim; r++) {
          const double* jr = J.val + J.rowadr[i + r];
          for (int b = 0; b < n; b++) jc[(m * dim + r) * n + b] = jr[b];
        }
        for (int r = 0; r < dim; r++) {
          double* tr = tw + (m * dim + r) * n;
          for (int b = 0; b < n; b++) tr[b] = 0;
          for (int c = 0; c < dim; c++) {
            const double wrc = W[r * dim + c];
            if (wrc == 0) continue;
            const double* jr = gval + J.rowadr[i + c];
            for (int b = 0; b < n; b++) tr[b] += wrc * jr[b];
          }
        }
      }
      lu_.AddJtT(J.colind + adr, n, dim, jc, tw, gm);
    }
    gm = 0;
  };
  double Wc[36];
  for (int e = L.con_adr; e < L.con_adr + L.con_num; e++) {
    const int i = con_[e], dim = con_dim_[e], n = J.rownnz[i];
    double* W = Wc;
    if (!cspace) {
      // join the open group (dimension-3 blocks on the same columns, stored right after it), or
      // start a new one
      const int i0 = con_[g0];
      bool join = gm > 0 && gm < IslandLU::kMaxGroup && dim == 3 && block_[i] == 3 &&
                  con_dim_[g0] == 3 && block_[i0] == 3 && n == J.rownnz[i0] &&
                  J.rowadr[i] == J.rowadr[i0] + 3 * gm * n;
      for (int b = 0; b < n && join; b++)
        join = J.colind[J.rowadr[i] + b] == J.colind[J.rowadr[i0] + b];
      if (!join) {
        flush();
        g0 = e;
      }
      W = Wg + gm * dim * dim;
      gm++;
    }
    for (int a = 0; a < dim * dim; a++) W[a] = 0;
    const double a = og_[i];
    W[0] = a;
    for (int g = con_soc_[e]; g < con_soc_[e] + (dim >= 6   ? 3
                                                 : dim >= 4 ? 2
                                                 : dim >= 3 ? 1
                                                            : 0);
         g++) {
      const int f = soc_row_[g] - i, cnt = soc_cnt_[g];
      const double* S = sS_.data() + 4 * g;
      const double* q = sq_.data() + 2 * g;
      for (int r = 0; r < cnt; r++) {
        const double dr = scale_[i + f + r];
        if (coupled) W[(f + r) * dim] = dr * q[r] * a;
        for (int c = 0; c < cnt; c++) {
          W[(f + r) * dim + f + c] = dr * S[r * cnt + c] * scale_[i + f + c];
        }
      }
    }
    if (cspace) lu_.AddW(i, dim, W);
    if (!cspace && !(dim == 3 && block_[i] == 3)) flush();  // only dimension-3 blocks group
  }
  flush();
  return Factor(p, k, cond);
}

bool IpmSolver::Factor(const Problem& p, int k, double* cond) {
  double mn, mx;
  if (!lu_.Factor(&mn, &mx)) return false;
  *cond = mx / mn;
  stats_.factorizations++;
  return true;
}

void IpmSolver::Targets(const Problem& p, int k, const State& s, const Direction* aff, double kappa,
                        const double* row_kappa) {
  // d = z \ rc per cone, rc = kappa e - x o z - dx_a o dz_a (Mehrotra's second-order term)
  const IslandLists& L = lists_[k];
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    const double ki = row_kappa && row_kappa[i] > 0 ? row_kappa[i] : kappa;
    double rc = ki - s.x[i] * s.z[i];
    if (aff) rc -= aff->x[i] * aff->z[i];
    od_[i] = rc / s.z[i];
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], nrm = soc_nrm_[e];
    double x[3], z[3], rc[3];
    const int n = ConeVectors(s, f, cnt, nrm >= 0 ? s.x[nrm] : bound_[f], x, z);
    // scaled: rc = kappa e - l o l - (W^-1 dx_a) o (W dz_a), d = W (l \ rc)
    const double* l = sl_.data() + 3 * e;
    Product(scaled_ ? l : x, scaled_ ? l : z, n, rc);
    for (int r = 0; r < n; r++) rc[r] = -rc[r];
    rc[0] += kappa;
    if (aff) {
      double dx[3], dz[3], prod[3];
      dx[0] = nrm >= 0 ? aff->x[nrm] : 0;
      dz[0] = aff->z0[f];
      Tail(aff->x, f, cnt, dx);
      Tail(aff->z, f, cnt, dz);
      if (scaled_) {
        double sx[3], sz[3];
        MatVec(sWi_.data() + 9 * e, dx, n, sx);
        MatVec(sW_.data() + 9 * e, dz, n, sz);
        Product(sx, sz, n, prod);
      } else {
        Product(dx, dz, n, prod);
      }
      for (int r = 0; r < n; r++) rc[r] -= prod[r];
    }
    if (scaled_) {
      double t[3];
      Divide(l, rc, n, t);
      MatVec(sW_.data() + 9 * e, t, n, sd_.data() + 3 * e);
    } else {
      Divide(z, rc, n, sd_.data() + 3 * e);
    }
  }
}

void IpmSolver::Constants(const Problem& p, int k, const double* rz, const double* rv, bool with_d,
                          const double* dcomp) {
  // c per row (dlam = c - W J dv) and the right-hand side -rv + J' c
  const SparseRows& J = p.J;
  const IslandLists& L = lists_[k];
  const int* dofs = Dofs(p, k);
  for (int a = 0; a < NumDofs(p, k); a++) rhs_[dofs[a]] = -rv[dofs[a]];
  for (int e = L.eq_adr; e < L.eq_adr + L.eq_num; e++) {
    const int i = eq_[e];
    c_[i] = -rz[i] / reg_[i];
  }
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    c_[i] =
        (with_d ? od_[i] * (prox_on_ ? pf_[i] : 1) : 0) + og_[i] * rz[i] + (dcomp ? dcomp[i] : 0);
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], nrm = soc_nrm_[e];
    const double cn = nrm >= 0 ? c_[nrm] : 0;
    const double* q = sq_.data() + 2 * e;
    const double* S = sS_.data() + 4 * e;
    const double* d = sd_.data() + 3 * e;
    const double* T = sT_.data() + 4 * e;
    const double* q0 = sq0_.data() + 2 * e;
    for (int r = 0; r < cnt; r++) {
      double v = q[r] * cn;
      if (with_d && prox_on_) {
        for (int c = 0; c < cnt; c++) v += T[r * cnt + c] * (d[c + 1] - q0[c] * d[0]);
      } else if (with_d) {
        v += d[r + 1] - q[r] * d[0];
      }
      for (int c = 0; c < cnt; c++) v += S[r * cnt + c] * rz[f + c];
      c_[f + r] = scale_[f + r] * v;
    }
  }
  BlockAdd(J, Rows(p, k), NumRows(p, k), block_.data(), 1, c_.data(), rhs_.data());
}

void IpmSolver::Direct(const Problem& p, int k, const State& s, const double* rz, bool with_d,
                       Direction* d) {
  // solve for dv, then every row's and cone's change and the change of the row residuals
  const int* dofs = Dofs(p, k);
  for (int a = 0; a < NumDofs(p, k); a++) d->v[dofs[a]] = rhs_[dofs[a]];
  lu_.Solve(d->v);
  DirectRows(p, k, rz, with_d, d);
}

void IpmSolver::DirectRows(const Problem& p, int k, const double* rz, bool with_d, Direction* d) {
  // every row's and cone's change from dv (d->v) and the constants c_
  const IslandLists& L = lists_[k];
  const int* rows = Rows(p, k);
  BlockDot(*gapJ_, rows, NumRows(p, k), block_.data(), d->v, d->u);
  for (int e = L.eq_adr; e < L.eq_adr + L.eq_num; e++) {
    const int i = eq_[e];
    d->x[i] = d->lam[i] = c_[i] - d->u[i] / reg_[i];
    d->rz[i] = d->u[i] + reg_[i] * d->lam[i];
  }
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    d->x[i] = d->lam[i] = c_[i] - og_[i] * d->u[i];
    d->z[i] = d->u[i] - rz[i];
    d->rz[i] = d->z[i] - d->u[i];
    if (prox_on_) {
      d->z[i] += prox_[i] * d->x[i];
      d->rz[i] = -rz[i];
    }
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], nrm = soc_nrm_[e], n = cnt + 1;
    const double* G = sG_.data() + 9 * e;
    const double* dd = sd_.data() + 3 * e;
    const double dx0 = nrm >= 0 ? d->x[nrm] : 0;
    if (prox_on_) {
      // dxi = c / scale - q (c_n - dgamma) - S scale du (the eliminated relations), then the
      // velocity with its proximal part
      const double* q = sq_.data() + 2 * e;
      const double* S = sS_.data() + 4 * e;
      const double cn = nrm >= 0 ? c_[nrm] : 0;
      double dxi[2];
      for (int r = 0; r < cnt; r++) {
        dxi[r] = c_[f + r] / scale_[f + r] - q[r] * (cn - dx0);
        for (int c = 0; c < cnt; c++) dxi[r] -= S[r * cnt + c] * scale_[f + c] * d->u[f + c];
      }
      for (int r = 0; r < cnt; r++)
        d->z[f + r] = scale_[f + r] * d->u[f + r] - rz[f + r] + prox_[f + r] * dxi[r];
      for (int r = f; r < f + cnt; r++) d->rz[r] = -rz[r];
    } else {
      for (int r = f; r < f + cnt; r++) {
        d->z[r] = scale_[r] * d->u[r] - rz[r];
        d->rz[r] = d->z[r] - scale_[r] * d->u[r];
      }
    }
    double z0 = (with_d ? dd[0] : 0) - dx0;
    for (int c = 0; c < cnt; c++) z0 -= G[c + 1] * d->z[f + c];
    z0 /= G[0];
    d->z0[f] = z0;
    for (int r = 0; r < cnt; r++) {
      double v = (with_d ? dd[r + 1] : 0) - G[(r + 1) * n] * z0;
      for (int c = 0; c < cnt; c++) v -= G[(r + 1) * n + c + 1] * d->z[f + c];
      d->x[f + r] = v;
      d->lam[f + r] = scale_[f + r] * v;
    }
  }
}

void IpmSolver::DynamicsChange(const Problem& p, int k, Direction* d) {
  // change of M (v - v_free) - J' lambda along the direction
  const SparseRows& J = p.J;
  const Islands& is = p.islands;
  for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
    const int b = is.tree_dofadr[is.trees[t]];
    p.mass.Mul(d->v, d->rv, b, b + is.tree_dofnum[is.trees[t]]);
  }
  const int* rows = Rows(p, k);
  for (int a = 0; a < NumRows(p, k); a++) {
    const int i = rows[a];
    if (d->lam[i] != 0) J.AddRowTo(i, -d->lam[i], d->rv);
  }
}

double IpmSolver::MaxStep(const Problem& p, int k, const State& s, const Direction& d,
                          double tau) const {
  // analytical step to the boundary of every cone (Dojo 41-46), times tau, at most 1
  const IslandLists& L = lists_[k];
  double a = cone::kInfStep;
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    if (d.x[i] < 0) a = std::min(a, -s.x[i] / d.x[i]);
    if (d.z[i] < 0) a = std::min(a, -s.z[i] / d.z[i]);
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], nrm = soc_nrm_[e];
    double x[3], z[3], dx[3], dz[3];
    const int n = ConeVectors(s, f, cnt, nrm >= 0 ? s.x[nrm] : bound_[f], x, z);
    dx[0] = nrm >= 0 ? d.x[nrm] : 0;
    dz[0] = d.z0[f];
    Tail(d.x, f, cnt, dx);
    Tail(d.z, f, cnt, dz);
    a = std::min(a, std::min(ConeStep(x, dx, n), ConeStep(z, dz, n)));
  }
  return std::min(1.0, tau * a);
}

double IpmSolver::MuAt(const Problem& p, int k, const State& s, const Direction& d,
                       double alpha) const {
  const IslandLists& L = lists_[k];
  const int ncone = L.orth_num + L.soc_num;
  if (!ncone) return 0;
  double gap = 0;
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    gap += (s.x[i] + alpha * d.x[i]) * (s.z[i] + alpha * d.z[i]);
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], nrm = soc_nrm_[e];
    const double x0 = nrm >= 0 ? s.x[nrm] + alpha * d.x[nrm] : bound_[f];
    gap += x0 * (s.z0[f] + alpha * d.z0[f]);
    for (int r = f; r < f + soc_cnt_[e]; r++) {
      gap += (s.x[r] + alpha * d.x[r]) * (s.z[r] + alpha * d.z[r]);
    }
  }
  return gap / ncone;
}

void IpmSolver::Step(const Problem& p, int k, const State& s, const Direction& d, double alpha,
                     State* out) const {
  // every residual is linear in the step: update it with the step
  const int* dofs = Dofs(p, k);
  for (int a = 0; a < NumDofs(p, k); a++) {
    const int j = dofs[a];
    out->v[j] = s.v[j] + alpha * d.v[j];
    out->rv[j] = s.rv[j] + alpha * d.rv[j];
  }
  const int* rows = Rows(p, k);
  for (int a = 0; a < NumRows(p, k); a++) {
    const int i = rows[a];
    out->x[i] = s.x[i] + alpha * d.x[i];
    out->z[i] = s.z[i] + alpha * d.z[i];
    out->z0[i] = s.z0[i] + alpha * d.z0[i];
    out->lam[i] = s.lam[i] + alpha * d.lam[i];
    out->u[i] = s.u[i] + alpha * d.u[i];
    out->rz[i] = s.rz[i] + alpha * d.rz[i];
  }
  Measures(p, k, out);
}

void IpmSolver::Copy(const Problem& p, int k, const State& from, State* to) const {
  const int* dofs = Dofs(p, k);
  for (int a = 0; a < NumDofs(p, k); a++) {
    const int j = dofs[a];
    to->v[j] = from.v[j];
    to->rv[j] = from.rv[j];
  }
  const int* rows = Rows(p, k);
  for (int a = 0; a < NumRows(p, k); a++) {
    const int i = rows[a];
    to->x[i] = from.x[i];
    to->z[i] = from.z[i];
    to->z0[i] = from.z0[i];
    to->lam[i] = from.lam[i];
    to->u[i] = from.u[i];
    to->rz[i] = from.rz[i];
  }
  to->rvio = from.rvio;
  to->kvio = from.kvio;
  to->mu = from.mu;
  to->interior = from.interior;
}

void IpmSolver::Refine(const Problem& p, int k, const State& s) {
  // the dynamics change of dir_ measured on the unfactored system, M dv - J' dlam; where the
  // factor's solve misses -rv (pivots without pivoting on ill-conditioned islands), the defect
  // is solved for again (iterative refinement) while it shrinks
  const int* dofs = Dofs(p, k);
  const int nd = NumDofs(p, k);
  auto defect = [&]() {
    double e = 0;
    for (int a = 0; a < nd; a++) {
      const int j = dofs[a];
      e = std::max(e, std::fabs(dir_.rv[j] + s.rv[j]) / mdiag_[j]);
    }
    return e;
  };
  DynamicsChange(p, k, &dir_);
  double e = defect();
  for (int r = 0; r < kRefineSteps && e > kRefineTol * settings_.ipm.residual_tol; r++) {
    for (int a = 0; a < nd; a++) tmp_[dofs[a]] = -(dir_.rv[dofs[a]] + s.rv[dofs[a]]);
    lu_.Solve(tmp_.data());
    for (int a = 0; a < nd; a++) {
      rhs_[dofs[a]] = dir_.v[dofs[a]];  // the direction before, kept if the defect grows
      dir_.v[dofs[a]] += tmp_[dofs[a]];
    }
    DirectRows(p, k, s.rz, true, &dir_);
    DynamicsChange(p, k, &dir_);
    const double e2 = defect();
    stats_.refined_dirs++;
    if (!(e2 < e)) {
      for (int a = 0; a < nd; a++) dir_.v[dofs[a]] = rhs_[dofs[a]];
      DirectRows(p, k, s.rz, true, &dir_);
      DynamicsChange(p, k, &dir_);
      break;
    }
    e = e2;
  }
}

int IpmSolver::Attempt(const Problem& p, int k, double floor, double warm_mu, bool recenter,
                       bool scaled, double target, double rtol, double ktol, int* status,
                       double* cond, const State** fin) {
  const ckIpmSettings& st = settings_.ipm;
  auto merit = [&](const State& s) { return std::max(s.rvio / rtol, s.kvio / ktol); };
  const bool cones = lists_[k].orth_num + lists_[k].soc_num > 0;
  const bool grad_at_end = GradAtEnd();
  // the soft twin's shadow (Twin): each decision that reads the tolerances taken alike under
  // twin_rtol_ and twin_ktol_, its best merit under them in sbest
  Twin& tw = twin_;
  auto smerit = [&](const State& s) { return std::max(s.rvio / tw.rtol, s.kvio / tw.ktol); };
  auto alike = [&](bool a, bool b) { tw.same = tw.same && a == b; };
  State* cur = &cur_;
  State* trial = &trial_;
  if (warm_mu > 0) {
    WarmStart(p, k, warm_mu, cur);
  } else {
    ColdStart(p, k, floor, cur);
  }
  // the best iterate: cur itself while cur_best, else a copy in best_ (made when cur is replaced
  // by a worse one)
  double best = merit(*cur), sbest = tw.on ? smerit(*cur) : 0;
  bool cur_best = true;
  if (tw.on) tw.same = cones && grad_at_end;
  // the proximal retry keeps the last attempt's point on the (hard) central path for gradients
  if (!(prox_on_ && grad_ok_[k])) grad_ok_[k] = 0;
  *status = ckSTATUS_MAX_ITER;
  int it = 0, stalled = 0;
  attempt_steps_ = 0;  // (the steps to the best iterate)
  double last_alpha = 1;
  bool short_step = false;  // some step of this attempt was short
  bool measure = false;     // the dynamics change of every direction is measured (Refine)
  for (; it <= st.max_iter; it++) {
    if (tw.on) alike(false, cur->rvio < tw.rtol && cur->kvio < tw.ktol);  // (the twin never ends)
    if (cur->rvio < rtol && cur->kvio < ktol) {
      // the residuals are tracked along the steps: measure them on the unfactored system, and
      // if the factor's solves left them above the tolerance, measure every direction from here
      // (a replay takes all its steps)
      Residuals(p, k, cur);
      const bool solved = cur->rvio < rtol && cur->kvio < ktol;
      if (solved) *status = ckSTATUS_SOLVED;
      if (solved && (replay_steps_ < 0 || it >= replay_steps_)) break;
      if (!solved) measure = true;
    }
    if (it == st.max_iter || it == replay_steps_) break;

    // cone linearization, Newton matrix; without the friction coupling if that fails
    if (!ConeJacobians(p, k, *cur, scaled)) {
      *status = ckSTATUS_NUMERICAL;
      break;
    }
    bool exact = true;
    if (!Linearize(p, k, true, cond)) {
      stats_.sym_fallbacks++;
      exact = false;
      if (!Linearize(p, k, false, cond)) {
        *status = ckSTATUS_NUMERICAL;
        break;
      }
    }

    // predictor: the affine direction gives the centering sigma = (mu_aff / mu)^3
    double kappa = ktol * target;
    // after a short step, a pure centering step (sigma = 1, no second-order term): a cone whose
    // velocity reached its boundary while its force did not (a sliding contact beside sticking
    // ones) blocks the predictor-corrector direction until it is centered again
    const bool centering = cones && last_alpha < kCenterAfter;
    if (cones && path_sigma_ > 0) {
      kappa = std::max(path_sigma_ * cur->mu, kappa);  // path following: no predictor
    } else if (centering) {
      kappa = std::max(cur->mu, kappa);
    } else if (cones) {
      Targets(p, k, *cur, nullptr, 0);
      Constants(p, k, cur->rz, cur->rv, true);
      Direct(p, k, *cur, cur->rz, true, &aff_);
      const double alpha_aff = MaxStep(p, k, *cur, aff_, 1);
      const double mu = cur->mu, mu_aff = MuAt(p, k, *cur, aff_, alpha_aff);
      const double ratio = std::min(1.0, std::max(0.0, mu > 0 ? mu_aff / mu : 0));
      kappa = std::max(ratio * ratio * ratio * mu, kappa);
    }
    if (tw.on) alike(true, kappa >= tw.ktol * target);  // (the floor does not bind)

    // corrector with the second-order term
    Targets(p, k, *cur, cones && !centering && !(path_sigma_ > 0) ? &aff_ : nullptr, kappa);
    Constants(p, k, cur->rz, cur->rv, true);
    Direct(p, k, *cur, cur->rz, true, &dir_);
    if (exact && lists_[k].eq_num == 0 && !measure) {
      // the exact Newton system makes M dv - J' dlam = -rv, up to the factor's accuracy, which
      // the convergence test measures (equality rows, with their tiny regularizer, leave a
      // rounding residual worth tracking)
      const int* dofs = Dofs(p, k);
      for (int a = 0; a < NumDofs(p, k); a++) dir_.rv[dofs[a]] = -cur->rv[dofs[a]];
    } else {
      Refine(p, k, *cur);
    }

    // fraction to the boundary, tending to 1 as mu vanishes, but kept off the boundary by a
    // thousandth until mu nears the tolerance (and for the rest of an attempt that had a short
    // step): a last step to within 1e-6 of the boundary left the velocity of a sliding contact
    // on its cone's boundary with its force inside, where no Newton direction moves (the blocked
    // steps of piles with patch contacts); backtrack until a violation decreases
    const double tau =
        std::min(1 - (1 - kTauCap) * (short_step ? 1 : std::min(1.0, cur->mu / (kCapFade * ktol))),
                 std::max(kTauMax, 1 - kTauGain * cur->mu));
    if (tw.on && !short_step) {
      alike(std::min(1.0, cur->mu / (kCapFade * ktol)) == 1, cur->mu / (kCapFade * tw.ktol) >= 1);
    }
    double alpha = MaxStep(p, k, *cur, dir_, tau);
    for (int bt = 0; bt <= kMaxBacktrack; bt++) {
      Step(p, k, *cur, dir_, alpha, trial);
      if (trial->interior && (trial->rvio <= cur->rvio || trial->kvio <= cur->kvio)) break;
      alpha *= kBacktrack;
    }
    if (recenter && trial->interior && trial->rvio < rtol) RecenterEta0(p, k, trial);
    if (trial->interior) {
      if (tw.on && cur_best) alike(merit(*trial) < best, smerit(*trial) < sbest);
      if (cur_best && !(merit(*trial) < best)) Copy(p, k, *cur, &best_);
      cur_best = false;
      std::swap(cur, trial);
    } else {
      alpha = 0;
    }

    // keep the iterate where the central path crosses kappa_grad, and the best one
    if (!grad_ok_[k] && !grad_at_end && cones && cur->mu <= st.kappa_grad) {
      Copy(p, k, *cur, &grad_);
      grad_ok_[k] = 1;
      grad_kappa_[k] = st.kappa_grad;
    }
    const double m = merit(*cur);
    if (tw.on) {
      alike(m < best, smerit(*cur) < sbest);
      if (m < best) sbest = smerit(*cur);
    }
    if (m < best) {
      best = m;
      cur_best = true;
      attempt_steps_ = it + 1;
    }
    if (it + 1 == replay_steps_) {
      it++;
      break;
    }

    // blocked steps: stop once close to the tolerances, or when hopeless
    if (tw.on && alpha < kStallStep) alike(cur->rvio < rtol, cur->rvio < tw.rtol);
    if (alpha < kStallStep && cones && cur->rvio < rtol) {
      if (cur_best) Copy(p, k, *cur, &best_);  // the best iterate stays the one before a lift
      if (LiftEta0(p, k, cur)) {
        stats_.lifts++;
        cur_best = false;
      }
    }
    stalled = alpha < kStallStep ? stalled + 1 : 0;
    if (tw.on && stalled >= kStallIter) alike(best < kInaccurate, sbest < kInaccurate);
    last_alpha = alpha;
    short_step = short_step || alpha < kCenterAfter;
    if (stalled >= kStallIter && (best < kInaccurate || stalled >= 3 * kStallIter) &&
        replay_steps_ < 0) {
      it++;
      break;
    }
  }
  // the converged iterate, else the best one (a replay: the iterate after its steps)
  if (*status == ckSTATUS_SOLVED) attempt_steps_ = it;
  *fin = *status == ckSTATUS_SOLVED || cur_best || replay_steps_ >= 0 ? cur : &best_;
  if (*status != ckSTATUS_SOLVED) Residuals(p, k, const_cast<State*>(*fin));  // measured
  if (!grad_ok_[k] && !grad_at_end) {
    Copy(p, k, *cur, &grad_);
    grad_ok_[k] = 1;
    grad_kappa_[k] = st.kappa_grad;
  }
  if (*status == ckSTATUS_MAX_ITER && merit(**fin) < kInaccurate) *status = ckSTATUS_INACCURATE;
  return it;
}

int IpmSolver::ProxRetry(const Problem& p, int k, int* status, const State** fin) {
  const ckIpmSettings& st = settings_.ipm;
  auto merit = [&](const State& s) {
    return std::max(s.rvio / st.residual_tol, s.kvio / st.kappa_tol);
  };
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  for (int a = 0; a < nr; a++) {
    const int i = rows[a];
    xc_[i] = out_lam_[i] / scale_[i];
    prox_[i] = kProx * scale_[i] * scale_[i] * p.diag_approx[i];
    xd_[i] = 0;
  }
  if (force_prox_) grad_ok_[k] = 0;  // no attempt before it
  int iterations = 0, misses = 0;
  double last_rvio = HUGE_VAL, best = HUGE_VAL;
  *status = ckSTATUS_MAX_ITER;
  *fin = nullptr;
  for (int outer = 0; outer < kProxOuter; outer++) {
    int result;
    double cond = 0;
    const State* f = nullptr;
    prox_on_ = true;
    iterations += Attempt(p, k, kVelFloor, 0, true, false, kRetryTarget, st.residual_tol,
                          st.kappa_tol, &result, &cond, &f);
    prox_on_ = false;
    State* s = const_cast<State*>(f);  // one of cur_, trial_, best_
    Residuals(p, k, s);                // the hard problem's residuals at the soft answer
    *fin = s;
    if (result != ckSTATUS_SOLVED) break;
    if (s->rvio < st.residual_tol && s->kvio < st.kappa_tol) {
      *status = ckSTATUS_SOLVED;
      stats_.prox_solved++;
      break;
    }
    // the best answer so far in cen_ (free until Center, after the solve)
    if (merit(*s) < best) {
      best = merit(*s);
      Copy(p, k, *s, &cen_);
    }
    if (outer > 0 && !(s->rvio < kProxGain * last_rvio) && ++misses > kProxMisses) break;
    last_rvio = s->rvio;
    // the next centre: this answer, moved ahead along its step by Aitken's r / (1 - r) when the
    // step shrinks at a steady rate r from the last one (a direction the problem barely resists)
    double dd = 0, dp = 0;
    for (int a = 0; a < nr; a++) {
      const int i = rows[a];
      const double d = s->x[i] - xc_[i];
      dd += d * xd_[i];
      dp += xd_[i] * xd_[i];
      xd_[i] = d;
    }
    const double r = dp > 0 ? dd / dp : 0;
    const double jump = r > 0 && r < 1 ? std::min(r / (1 - r), kProxJump) : 0;
    for (int a = 0; a < nr; a++) xc_[rows[a]] = s->x[rows[a]] + jump * xd_[rows[a]];
  }
  if (*status != ckSTATUS_SOLVED && best < HUGE_VAL) *fin = &cen_;
  if (*fin && *status != ckSTATUS_SOLVED) {
    *status = merit(**fin) < kInaccurate ? ckSTATUS_INACCURATE : ckSTATUS_MAX_ITER;
  }
  return iterations;
}

int IpmSolver::PlannedAttempt(const Problem& p, int k, int attempt, bool twin, int* status,
                              double* cond, const State** fin) {
  // attempt's plan, the soft attempt's twin with its shadow
  const ckIpmSettings& st = settings_.ipm;
  const Plan& plan = kPlans[attempt];
  const IpmStats before = stats_;
  twin_.on = twin && attempt == kSoftTwin && !soft_twin_off_;
  twin_.rtol = kPlans[kSoftAttempt].soft * st.residual_tol;
  twin_.ktol = kPlans[kSoftAttempt].soft * st.kappa_tol;
  const int steps =
      Attempt(p, k, plan.floor, plan.warm_mu, plan.recenter, plan.scaled, plan.target,
              plan.soft * st.residual_tol, plan.soft * st.kappa_tol, status, cond, fin);
  if (twin_.on) TwinRan(before, steps);
  return steps;
}

void IpmSolver::TwinRan(const IpmStats& before, int steps) {
  twin_.on = false;
  twin_.iterations = steps;
  twin_.factorizations = stats_.factorizations - before.factorizations;
  twin_.sym_fallbacks = stats_.sym_fallbacks - before.sym_fallbacks;
  twin_.refined_dirs = stats_.refined_dirs - before.refined_dirs;
  twin_.lifts = stats_.lifts - before.lifts;
}

void IpmSolver::SoftAsTwin(int k, int* iterations) {
  // what the soft attempt's run, the twin's again, would leave: its steps and statistics, and
  // the island without a gradient iterate (an attempt clears it at its start)
  *iterations += twin_.iterations;
  stats_.factorizations += twin_.factorizations;
  stats_.sym_fallbacks += twin_.sym_fallbacks;
  stats_.refined_dirs += twin_.refined_dirs;
  stats_.lifts += twin_.lifts;
  stats_.soft_twins++;
  grad_ok_[k] = 0;
}

void IpmSolver::EnergyTerms(const Problem& p, int k, const double* lam, double* work,
                            double* quad) {
  const Islands& is = p.islands;
  const int* rows = Rows(p, k);
  const int* dofs = Dofs(p, k);
  for (int a = 0; a < NumDofs(p, k); a++) tmp_[dofs[a]] = 0;
  for (int a = 0; a < NumRows(p, k); a++) {
    if (lam[rows[a]] != 0) p.J.AddRowTo(rows[a], lam[rows[a]], tmp_.data());
  }
  *work = *quad = 0;
  for (int a = 0; a < NumDofs(p, k); a++) *work += p.v_free[dofs[a]] * tmp_[dofs[a]];
  for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
    const int b = is.tree_dofadr[is.trees[t]], e = b + is.tree_dofnum[is.trees[t]];
    p.mass.SolveHalf(tmp_.data(), b, e);  // then lam' J M^-1 J' lam = sum Dinv_j tmp_j^2
    for (int j = b; j < e; j++) *quad += p.mass.Dinv[j] * tmp_[j] * tmp_[j];
  }
}

bool IpmSolver::AddsEnergy(const Problem& p, int k, const double* lam) {
  // the energy recovery may add: each recovering row moved alone at its speed, 1/2 t^2 / A_ii,
  // and what complementarity leaves, gamma s <= kappa_tol per row
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  double allow = nr * settings_.ipm.kappa_tol;
  bool recovers = false;
  for (int a = 0; a < nr; a++) {
    const int i = rows[a];
    if (!Recovers(p, i)) continue;
    allow += 0.5 * target_[i] * target_[i] / p.diag_approx[i];
    recovers = true;
  }
  if (!recovers) return false;
  double work, quad;
  EnergyTerms(p, k, lam, &work, &quad);
  return work + 0.5 * quad > kRecoveryEnergy * allow;
}

bool IpmSolver::HoldRecovery(const Problem& p, int k) {
  if (!AddsEnergy(p, k, out_lam_.data())) return false;
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  for (int a = 0; a < nr; a++) {
    const int i = rows[a];
    if (Recovers(p, i)) {
      target_[i] = 0;
      capped_[i] = 1;
    }
  }
  stats_.holds++;
  return true;
}

void IpmSolver::Dissipate(const Problem& p, int k, int* status) {
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  double work, quad;
  EnergyTerms(p, k, out_lam_.data(), &work, &quad);
  if (!(work + 0.5 * quad > kRecoveryEnergy * nr * settings_.ipm.kappa_tol)) return;
  // the least energy along the answer's direction: t lam with t = -work / quad in [0, 1]
  const double t = quad > 0 ? std::min(1.0, std::max(0.0, -work / quad)) : 0;
  for (int a = 0; a < nr; a++) out_lam_[rows[a]] *= t;
  if (*status == ckSTATUS_SOLVED || *status == ckSTATUS_INACCURATE) *status = ckSTATUS_MAX_ITER;
  stats_.dissipated++;
}

void IpmSolver::PolishSystem(const Problem& p, int k) {
  // the island's dense M and J (its rows over its dofs, local indices), and the start: the best
  // answer's impulses (out_lam_) and the velocity they give, v_free + M^-1 J' lambda
  const Islands& is = p.islands;
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  const int* dofs = Dofs(p, k);
  const int nd = NumDofs(p, k);
  for (int a = 0; a < nr; a++) pol_loc_[rows[a]] = a;
  for (int a = 0; a < nd; a++) pol_dof_[dofs[a]] = a;
  for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
    const int b = is.tree_dofadr[is.trees[t]], e = b + is.tree_dofnum[is.trees[t]];
    for (int c = b; c < e; c++) {
      for (int j = b; j < e; j++) tmp_[j] = j == c ? 1 : 0;
      p.mass.Mul(tmp_.data(), rhs_.data(), b, e);
      for (int a = 0; a < nd; a++) pol_M_[a * nd + pol_dof_[c]] = 0;
      for (int j = b; j < e; j++) pol_M_[pol_dof_[j] * nd + pol_dof_[c]] = rhs_[j];
    }
  }
  for (int a = 0; a < nr; a++) {
    for (int c = 0; c < nd; c++) tmp_[dofs[c]] = 0;
    gapJ_->AddRowTo(rows[a], 1, tmp_.data());
    for (int c = 0; c < nd; c++) pol_J_[a * nd + c] = tmp_[dofs[c]];
  }
  ImpulseVelocityChange(p, k, out_lam_.data(), nullptr);
  for (int a = 0; a < nd; a++) pol_w0_[a] = p.v_free[dofs[a]] + tmp_[dofs[a]];
  for (int a = 0; a < nr; a++) pol_w0_[nd + a] = out_lam_[rows[a]];
  // the cone and normal of each friction row (-1: an orthant row)
  for (int a = 0; a < nr; a++) pol_cone_[a] = -1;
  const IslandLists& L = lists_[k];
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    for (int r = soc_row_[e]; r < soc_row_[e] + soc_cnt_[e]; r++) pol_cone_[pol_loc_[r]] = e;
  }
}

void IpmSolver::PolishNewtonSystem(const Problem& p, int k) {
  // F(w) and its Jacobian A (row-major, n x n) at w = (v, lambda) for the pattern pol_pat_:
  // dynamics (scaled by diag M); a closed orthant row s = 0, an open one lambda = 0; a sticking
  // cone's rows J v = 0, a sliding one's lambda_r / scale_r + gamma z_r / |z| = 0, an open one's
  // lambda = 0
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  const int* dofs = Dofs(p, k);
  const int nd = NumDofs(p, k), n = nd + nr;
  const double* w = pol_w_.data();
  const double* M = pol_M_.data();
  const double* J = pol_J_.data();
  double* A = pol_A_.data();
  double* F = pol_F_.data();
  for (int a = 0; a < n * n; a++) A[a] = 0;
  for (int a = 0; a < nr; a++) {  // row velocities
    double u = 0;
    for (int c = 0; c < nd; c++) u += J[a * nd + c] * w[c];
    pol_u_[a] = u;
  }
  for (int a = 0; a < nd; a++) {
    const double s = 1 / mdiag_[dofs[a]];
    double f = 0;
    for (int c = 0; c < nd; c++) {
      f += M[a * nd + c] * (w[c] - p.v_free[dofs[c]]);
      A[a * n + c] = s * M[a * nd + c];
    }
    for (int b = 0; b < nr; b++) {
      f -= J[b * nd + a] * w[nd + b];
      A[a * n + nd + b] = -s * J[b * nd + a];
    }
    F[a] = s * f;
  }
  for (int a = 0; a < nr; a++) {
    const int i = rows[a], q = nd + a, e = pol_cone_[a];
    double* Aq = A + q * n;
    if (pol_pat_[a] == 0) {  // open: no impulse
      F[q] = w[q];
      Aq[q] = 1;
    } else if (e < 0 || pol_pat_[a] == 1) {  // closed orthant row, sticking cone row
      F[q] = (e < 0 ? target_[i] : 0) + pol_u_[a];
      for (int c = 0; c < nd; c++) Aq[c] = J[a * nd + c];
      // in the Jacobian only (F is exact): redundant closed rows leave their impulses undetermined
      Aq[q] = kPolishReg * p.diag_approx[i];
    } else {  // sliding: the force on the cone's boundary against the slip
      const int f = soc_row_[e], cnt = soc_cnt_[e], g = nd + pol_loc_[soc_nrm_[e]];
      double z[3], zn = 0;
      for (int r = 0; r < cnt; r++) {
        z[r] = scale_[f + r] * pol_u_[pol_loc_[f + r]];
        zn += z[r] * z[r];
      }
      zn = std::max(std::sqrt(zn), 1e-300);
      const int rr = i - f;
      F[q] = w[q] / scale_[i] + w[g] * z[rr] / zn;
      Aq[q] = 1 / scale_[i];
      Aq[g] = z[rr] / zn;
      for (int c2 = 0; c2 < cnt; c2++) {
        const double dz =
            w[g] / zn * ((rr == c2 ? 1 : 0) - z[rr] * z[c2] / (zn * zn)) * scale_[f + c2];
        for (int c = 0; c < nd; c++) Aq[c] += dz * J[pol_loc_[f + c2] * nd + c];
      }
    }
  }
}

bool IpmSolver::PolishPattern(const Problem& p, int k, bool damped) {
  // a damped pattern the last call tried and rejected from the same start takes the same steps
  // to the same end (pol_w_, pol_F_, pol_u_ and trial_ still hold it) when the budget left
  // covers their work: only the work is spent
  const int nr = NumRows(p, k);
  if (damped && pol_last_work_ >= 0 && pol_work_ >= pol_last_work_ && !polish_repeat_off_ &&
      std::equal(pol_pat_.begin(), pol_pat_.begin() + nr, pol_last_pat_.begin())) {
    pol_work_ -= pol_last_work_;
    stats_.polish_work += pol_last_work_;
    stats_.polish_repeats++;
    return false;
  }
  const double work = pol_work_;
  const bool accepted = PolishNewton(p, k, damped);
  if (damped) stats_.polish_work += work - pol_work_;
  // (a run the budget ended leaves pol_work_ below zero)
  pol_last_work_ = damped && !accepted && pol_work_ >= 0 ? work - pol_work_ : -1;
  std::copy(pol_pat_.begin(), pol_pat_.begin() + nr, pol_last_pat_.begin());
  return accepted;
}

bool IpmSolver::PolishNewton(const Problem& p, int k, bool damped) {
  // Newton on the pattern from the start (dense LU with partial pivoting), then the answer
  // measured as an iterate: accepted if it lies in every cone and meets both tolerances
  const ckIpmSettings& st = settings_.ipm;
  const IslandLists& L = lists_[k];
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);
  const int* dofs = Dofs(p, k);
  const int nd = NumDofs(p, k), n = nd + nr;
  double* w = pol_w_.data();
  double* F = pol_F_.data();
  for (int a = 0; a < n; a++) w[a] = pol_w0_[a];
  bool converged = false;
  pol_solved_ = false;
  // damped: a step is halved until |F|^2 decreases (a sliding cone's z / |z| turns fast where its
  // slip is small; a Newton step descends |F|^2), and the pattern is given up once |F|'s largest
  // entry (the convergence test) shrinks only linearly; full steps otherwise
  double fmax = 0;
  auto merit_at = [&]() {
    PolishNewtonSystem(p, k);
    double m = 0;
    fmax = 0;
    for (int a = 0; a < n; a++) {
      m += F[a] * F[a];
      fmax = std::max(fmax, std::fabs(F[a]));
    }
    return m;
  };
  double merit = merit_at(), last = HUGE_VAL;
  for (int it = 0, slow = 0; it < kPolishIter && slow < kPolishSlow; it++) {
    converged = fmax < kPolishTol * st.residual_tol;
    if (converged) break;
    slow = damped && fmax > kPolishRate * last ? slow + 1 : 0;  // linear: inconsistent pattern
    last = fmax;
    if (damped && (pol_work_ -= static_cast<double>(n) * n * n) < 0) break;  // budget spent
    double pmin = HUGE_VAL, pmax = 0;  // (the pivots' range, unused)
    if (!LuFactorRows(pol_A_.data(), n, pol_piv_.data(), &pmin, &pmax)) {
      merit_at();  // F at w again (PolishCorrect reads it)
      return false;
    }
    PermuteRows(pol_piv_.data(), n, F);  // F <- A^-1 F
    LowerSolveRows(pol_A_.data(), n, F, 1);
    UpperSolveRows(pol_A_.data(), n, F);
    for (int a = 0; a < n; a++) {
      pol_d_[a] = F[a];
      pol_wp_[a] = w[a];
    }
    double alpha = 1, next = HUGE_VAL;
    for (int bt = 0; bt <= kPolishBacktrack; bt++, alpha *= kBacktrack) {
      for (int a = 0; a < n; a++) w[a] = pol_wp_[a] - alpha * pol_d_[a];
      next = merit_at();
      if (next < merit || !damped) break;
    }
    if (damped && !(next < merit)) {  // no decrease along the Newton direction: F at w again
      for (int a = 0; a < n; a++) w[a] = pol_wp_[a];
      merit_at();
      break;
    }
    merit = next;
  }
  if (!converged) return false;
  pol_solved_ = true;  // pol_w_ and pol_u_ hold the pattern's answer (PolishCorrect reads it)
  State* s = &trial_;
  for (int a = 0; a < nd; a++) s->v[dofs[a]] = w[a];
  for (int a = 0; a < nr; a++) {
    s->lam[rows[a]] = w[nd + a];
    s->x[rows[a]] = w[nd + a] / scale_[rows[a]];
  }
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    if (s->x[i] < 0) return false;
    s->z[i] = std::max(0.0, target_[i] + pol_u_[pol_loc_[i]]);  // an open row's gap, measured
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], nrm = soc_nrm_[e];
    double z2 = 0, x2 = 0;
    for (int r = f; r < f + cnt; r++) {
      s->z[r] = scale_[r] * pol_u_[pol_loc_[r]];
      z2 += s->z[r] * s->z[r];
      x2 += s->x[r] * s->x[r];
    }
    s->z0[f] = std::sqrt(z2);  // on the boundary: a sliding cone's x o z vanishes
    if (std::sqrt(x2) > s->x[nrm] * (1 + kPolishCone)) return false;
  }
  Residuals(p, k, s);
  return s->rvio < st.residual_tol && s->kvio < st.kappa_tol;
}

bool IpmSolver::PolishCorrect(const Problem& p, int k) {
  // an active-set step: a closed row that pulls opens, an open row whose gap closes faster than
  // residual_tol closes (sticking), a sticking cone whose force left its cone slides
  const IslandLists& L = lists_[k];
  const int nd = NumDofs(p, k);
  const double* w = pol_w_.data();
  if (!pol_solved_) {
    // Newton stalled: the closed row with the largest residual changes: a sliding cone (its slip
    // turning) sticks, a sticking one (over-determined) slides, an orthant row opens
    int worst = -1;
    for (int a = 0; a < NumRows(p, k); a++) {
      if (pol_pat_[a] && (worst < 0 || std::fabs(pol_F_[nd + a]) > std::fabs(pol_F_[nd + worst])))
        worst = a;
    }
    if (worst < 0) return false;
    int e = pol_cone_[worst];
    if (e >= 0 && pol_tried_[worst]++) {  // the cone's other mode failed too: the contact opens
      worst = pol_loc_[soc_nrm_[e]];
      e = -1;
    }
    if (e < 0) {
      pol_pat_[worst] = 0;
      for (int c = L.soc_adr; c < L.soc_adr + L.soc_num; c++) {
        if (pol_loc_[soc_nrm_[c]] != worst) continue;
        for (int r = soc_row_[c]; r < soc_row_[c] + soc_cnt_[c]; r++) pol_pat_[pol_loc_[r]] = 0;
      }
      return true;
    }
    const int mode = 3 - pol_pat_[worst];
    for (int r = soc_row_[e]; r < soc_row_[e] + soc_cnt_[e]; r++) pol_pat_[pol_loc_[r]] = mode;
    return true;
  }
  bool changed = false;
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e], a = pol_loc_[i];
    const bool closed =
        pol_pat_[a] ? !(w[nd + a] < 0) : target_[i] + pol_u_[a] < -settings_.ipm.residual_tol;
    changed = changed || closed != (pol_pat_[a] != 0);
    pol_pat_[a] = closed;
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], g = pol_loc_[soc_nrm_[e]];
    int mode = pol_pat_[pol_loc_[f]];
    if (!pol_pat_[g]) {
      mode = 0;
    } else if (mode == 0) {
      mode = 1;
    } else if (mode == 1) {
      double x2 = 0;
      for (int r = f; r < f + cnt; r++) x2 += std::pow(w[nd + pol_loc_[r]] / scale_[r], 2);
      if (std::sqrt(x2) > w[nd + g] * (1 + kPolishCone)) mode = 2;
    }
    changed = changed || mode != pol_pat_[pol_loc_[f]];
    for (int r = f; r < f + cnt; r++) pol_pat_[pol_loc_[r]] = mode;
  }
  return changed;
}

bool IpmSolver::PolishGuess(const Problem& p, int k, double align) {
  // a closed row pushes harder than its gap opens (lambda A > s); a closed contact's cone slides
  // where its slip leaves x0 |z_R| above kappa_tol and its force opposes the slip by at least
  // align (cosine)
  const IslandLists& L = lists_[k];
  const int nd = NumDofs(p, k);
  const double* w0 = pol_w0_.data();
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e], a = pol_loc_[i];
    double s = target_[i];
    for (int c = 0; c < nd; c++) s += pol_J_[a * nd + c] * w0[c];
    pol_pat_[a] = w0[nd + a] * p.diag_approx[i] > s ? 1 : 0;
  }
  bool aligned = false;
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], cnt = soc_cnt_[e], g = pol_loc_[soc_nrm_[e]];
    double z2 = 0, xz = 0;
    for (int r = f; r < f + cnt; r++) {
      double u = 0;
      for (int c = 0; c < nd; c++) u += pol_J_[pol_loc_[r] * nd + c] * w0[c];
      const double x = w0[nd + pol_loc_[r]] / scale_[r];
      z2 += scale_[r] * scale_[r] * u * u;
      xz -= x * scale_[r] * u;
    }
    const double x0 = w0[nd + g];
    int mode = pol_pat_[g] ? (x0 * std::sqrt(z2) > settings_.ipm.kappa_tol ? 2 : 1) : 0;
    if (mode == 2 && !(xz >= align * x0 * std::sqrt(z2))) {
      mode = 1;
      aligned = true;
    }
    if (align > -HUGE_VAL && mode == 1 && std::sqrt(z2) > kPolishSlip) {
      mode = 2;  // slipping fast under a small force: slides
      aligned = true;
    }
    for (int r = f; r < f + cnt; r++) pol_pat_[pol_loc_[r]] = mode;
  }
  return aligned;
}

bool IpmSolver::PolishEnumerate(const Problem& p, int k, bool damped) {
  // every pattern of few contacts: each orthant row open, closed and sticking, or closed and
  // sliding
  const IslandLists& L = lists_[k];
  int total = 1;
  for (int c = 0; c < L.orth_num; c++) total *= 3;
  for (int code = 0; code < total; code++) {
    int rest = code;
    for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++, rest /= 3) {
      pol_pat_[pol_loc_[orth_[e]]] = rest % 3 > 0;
    }
    for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
      int mode = 0;
      for (int o = 0, r2 = code; o < L.orth_num; o++, r2 /= 3) {
        if (orth_[L.orth_adr + o] == soc_nrm_[e]) mode = r2 % 3;
      }
      for (int r = soc_row_[e]; r < soc_row_[e] + soc_cnt_[e]; r++) pol_pat_[pol_loc_[r]] = mode;
    }
    if (PolishPattern(p, k, damped)) return true;
    if (damped && pol_work_ <= 0) break;
  }
  return false;
}

bool IpmSolver::Polish(const Problem& p, int k) {
  const IslandLists& L = lists_[k];
  const int nr = NumRows(p, k), n = NumDofs(p, k) + nr;
  if (L.eq_num || L.fl_num || n > kPolishMax) return false;
  PolishSystem(p, k);
  pol_last_work_ = -1;  // (a new start)
  // an answer is taken unless its recovery adds energy (the attempts' answer was not held for it)
  auto accept = [&]() {
    if (AddsEnergy(p, k, trial_.lam)) return false;
    for (int a = 0; a < nr; a++) out_lam_[Rows(p, k)[a]] = trial_.lam[Rows(p, k)[a]];
    stats_.polished++;
    return true;
  };
  // full Newton steps: the best answer's pattern, then every pattern of up to kPolishEnumerate
  // contacts
  const bool few = L.orth_num <= kPolishEnumerate;
  PolishGuess(p, k, -HUGE_VAL);
  if (PolishPattern(p, k, false)) return accept();
  if (few && PolishEnumerate(p, k, false)) return accept();
  for (int a = 0; a < nr; a++) pol_tried_[a] = 0;
  pol_work_ = kPolishWork;
  // damped Newton: the best answer's pattern, the same with contacts whose force does not oppose
  // their slip sticking, then patterns corrected from the last answer while that changes them
  PolishGuess(p, k, -HUGE_VAL);
  if (PolishPattern(p, k, true)) return accept();
  if (PolishGuess(p, k, kPolishAlign) && PolishPattern(p, k, true)) return accept();
  for (int round = 0; round < kPolishRounds && pol_work_ > 0 && PolishCorrect(p, k); round++) {
    if (PolishPattern(p, k, true)) return accept();
  }
  // and every pattern of few contacts again, damped
  return few && pol_work_ > 0 && PolishEnumerate(p, k, true) && accept();
}

void IpmSolver::SolveIsland(const Problem& p, int k, Solution* sol) {
  const ckIpmSettings& st = settings_.ipm;
  auto merit = [&](const State& s) {
    return std::max(s.rvio / st.residual_tol, s.kvio / st.kappa_tol);
  };
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);

  // warm start in a re-solve from the first solve's impulses
  bool warm = false;
  for (int a = 0; a < nr && !warm; a++) warm = warm_ok_[rows[a]];
  if (warm) stats_.warm_islands++;

  // a failed attempt is retried from a more central start, then with softer contact
  int status = ckSTATUS_MAX_ITER, iterations = 0;
  double cond = 0, best = HUGE_VAL, rvio = 0, kvio = 0;
  // pass 1, only if pass 0's answer adds energy beyond what recovery may (HoldRecovery): the
  // island again without recovery
  // (a replay, IslandDifference's: only the attempt whose answer the step kept, nothing after)
  const int replay = differencing_ ? win_attempt_[k] : -1;
  bool held = false;
  int win = -1, win_steps = 0;  // the attempt whose answer is kept (-1: a later pass or a last
                                // resort) and its steps to that answer
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1 && (replay >= 0 || !(held = HoldRecovery(p, k)))) break;
    best = HUGE_VAL;
    twin_.same = false;
    const int start = force_prox_ ? kProxAttempt : replay >= 0 ? replay : warm ? 0 : 1;
    for (int attempt = start; attempt >= 0;) {
      const Plan& plan = kPlans[attempt];
      if (attempt == kSoftAttempt && twin_.same && replay < 0) {
        SoftAsTwin(k, &iterations);  // (its answer, the twin's, is not kept; the last attempt)
        break;
      }
      int result;
      double c = 0;
      const State* fin = nullptr;
      path_sigma_ = plan.sigma;
      replay_steps_ = replay >= 0 ? win_steps_[k] : -1;
      if (attempt == kProxAttempt) {
        iterations += ProxRetry(p, k, &result, &fin);
      } else {
        iterations += PlannedAttempt(p, k, attempt, replay < 0, &result, &c, &fin);
      }
      path_sigma_ = 0;
      replay_steps_ = -1;
      if (!fin) break;
      // every answer measured on the hard tolerances, the soft attempt's too (INACCURATE within
      // kInaccurate of them, else MAX_ITER): the best of all attempts is kept
      const double m = merit(*fin);
      const bool soft = plan.soft > 1 && result != ckSTATUS_NUMERICAL;
      if (soft) result = m < kInaccurate ? ckSTATUS_INACCURATE : ckSTATUS_MAX_ITER;
      if (attempt == start || m < best) {
        best = m;
        status = result;
        cond = c;
        rvio = fin->rvio;
        kvio = fin->kvio;
        win = pass == 0 ? attempt : -1;
        win_steps = attempt_steps_;
        for (int a = 0; a < nr; a++) out_lam_[rows[a]] = fin->lam[rows[a]];
        if (GradAtEnd()) {
          // the derivative of the step taken: the step ends on the central point at its
          // complementarity tolerance (below), which is where ForceTangent differentiates
          Copy(p, k, *fin, &grad_);
          grad_ok_[k] = 1;
          grad_kappa_[k] = plan.soft * st.kappa_tol;
        }
      }
      if (status == ckSTATUS_SOLVED || replay >= 0) break;
      attempt = result == ckSTATUS_INACCURATE ? plan.next : plan.fail;
      if (attempt >= 0) stats_.retries++;
    }
  }
  // the last resorts (LastResort), measured on the hard problem
  if (status != ckSTATUS_SOLVED && status != ckSTATUS_NUMERICAL && replay < 0 && LastResort(p, k)) {
    win = -1;
    status = ckSTATUS_SOLVED;
    rvio = trial_.rvio;
    kvio = trial_.kvio;
  }
  if (status == ckSTATUS_MAX_ITER) stats_.far++;
  if (held) Dissipate(p, k, &status);
  // an attempt from a cold start (independent of the others) whose answer the step keeps as it
  // is can be replayed alone
  if (!differencing_) {
    win_attempt_[k] = win >= 1 && win < kProxAttempt && !held ? win : -1;
    win_steps_[k] = win_steps;
  }
  // hard-contact derivatives: the final iterate (whose last target undershoots kappa_tol, a
  // different point for every perturbation) moved onto the central point at kappa_tol, a smooth
  // function of the problem that ForceTangent differentiates exactly; a few Newton steps, taken
  // only when kappa_grad <= kappa_tol asks for this derivative
  if (GradAtEnd() && status == ckSTATUS_SOLVED && !differencing_) {
    const bool centered = Center(p, k);
    iterations += center_iterations_;
    if (centered) {
      for (int a = 0; a < nr; a++) out_lam_[rows[a]] = cen_.lam[rows[a]];
      rvio = cen_.rvio;
      kvio = cen_.kvio;
    }
  }

  stats_.iterations = std::max(stats_.iterations, iterations);
  stats_.total_iterations += iterations;
  sol->iterations = std::max(sol->iterations, iterations);
  sol->residual = std::max(sol->residual, rvio);
  sol->kappa = std::max(sol->kappa, kvio);
  sol->condition = std::max(sol->condition, cond);
  if (status != ckSTATUS_SOLVED && (sol->status == ckSTATUS_SOLVED || status > sol->status)) {
    sol->status = status;
  }
}

void IpmSolver::SolveAll(const Problem& p, Solution* sol) {
  const Islands& is = p.islands;
  for (int i = 0; i < p.nrow; i++) out_lam_[i] = 0;
  lu_island_ = -1;
  modes_on_ = false;  // a new solve: its own tangent until SetTangentModes
  for (int k = 0; k < is.nisland; k++) {
    centered_[k] = 0;
    mode_want_[k] = mode_cur_[k] = mode_new_[k] = 0;
    lu_island_ = -1;  // lu_ is about to hold island k's iterations (Center may claim it after)
    if (!lu_.Analyze(p, k, chain_.data(), IslandLU::kAuto, gapJ_)) {
      // fill beyond the preallocated pool: no force on this island
      sol->status = ckSTATUS_NUMERICAL;
      grad_ok_[k] = 0;
      continue;
    }
    stats_.tree_sparse += lu_.tree_sparse();
    stats_.islands++;
    SolveIsland(p, k, sol);
  }
  for (int i = 0; i < p.nrow; i++) sol->force[i] = out_lam_[i] / p.h;
  VelocityFromForce(p, sol->force, sol->v_next, nullptr);
}

void IpmSolver::Solve(const Problem& p, Solution* sol) {
  stats_.Reset();
  sol->status = ckSTATUS_SOLVED;
  sol->iterations = 0;
  sol->residual = sol->kappa = sol->condition = 0;
  for (int i = 0; i < p.nrow; i++) {
    pos_[i] = p.pos[i];
    warm_ok_[i] = 0;
  }
  gapJ_ = &p.J;
  Prepare(p, pos_.data());
  SolveAll(p, sol);

  // gap re-check: Newton on the gap function phi(q(v+)) (Dojo's phi(z+)): the gap rows measure
  // s = phi(q+_k)/h + J(q+_k) (v - v+_k), the forces keep acting along J(q)
  for (int r = 0; r < settings_.ipm.gap_recheck && p.regap; r++) {
    if (!p.regap(p.regap_context, p, sol->v_next, pos_next_.data(), jac_next_.data())) break;
    gap_rows_ = p.J;
    gap_rows_.val = jac_next_.data();
    gapJ_ = &gap_rows_;
    for (int i = 0; i < p.nrow; i++) {
      const int kind = p.kind[i];
      if (kind == kRowLimit || kind == kRowContactNormal ||
          (kind == kRowEquality && !settings_.ipm.soft_equality)) {
        pos_[i] = pos_next_[i] - p.h * gap_rows_.Dot(i, sol->v_next);
      }
    }
    Prepare(p, pos_.data());
    for (int i = 0; i < p.nrow; i++) {
      warm_ok_[i] = 1;
      warm_lam_[i] = out_lam_[i];
    }
    const int iterations = sol->iterations;
    SolveAll(p, sol);
    sol->iterations += iterations;
    stats_.rechecks++;
  }
  stats_.grad_islands = p.islands.nisland;
}

//---------------------------------- gradients ---------------------------------------------------

bool IpmSolver::Center(const Problem& p, int k) {
  // Newton steps at fixed kappa from the stored iterate onto the central point (kappa_grad, or the
  // step's own kappa_tol with GradAtEnd); where they stall (an iterate far from the central
  // point with a cone near its boundary: an island the polish solved), with GradAtEnd the
  // answer's limit point (AnswerPoint)
  center_iterations_ = 0;
  if (centered_[k]) return centered_[k] == 1;  // (2: it failed since the solve)
  if (!grad_ok_[k] || !gapJ_) return false;
  const double kg = grad_kappa_[k];
  if (!(kg > 0)) return false;
  lu_island_ = -1;  // lu_ holds island k's terms from here on
  if (!lu_.Analyze(p, k, chain_.data(), IslandLU::kAuto, gapJ_)) return false;
  centered_[k] = 2;  // until it succeeds
  if (k == center_fail_island_) return false;
  State* cur = &cen_;
  State* trial = &trial_;
  Copy(p, k, grad_, cur);
  const IslandLists& L = lists_[k];

  // contacts from distance: their own central-path value (CfdKappa), kappa_grad elsewhere
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    const int i = orth_[e];
    cfd_kappa_[i] = CfdRow(p, i) ? CfdKappa(p, i, nullptr, nullptr) : 0;
  }
  auto deviation = [&](const State& s) {
    // largest |x o z - kappa e| entry, relative to kappa
    double dev = 0;
    for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
      const int i = orth_[e];
      const double ki = cfd_kappa_[i] > 0 ? cfd_kappa_[i] : kg;
      dev = std::max(dev, std::fabs(s.x[i] * s.z[i] - ki) * (kg / ki));
    }
    for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
      const int f = soc_row_[e], nrm = soc_nrm_[e];
      double x[3], z[3], c[3];
      const int n = ConeVectors(s, f, soc_cnt_[e], nrm >= 0 ? s.x[nrm] : bound_[f], x, z);
      Product(x, z, n, c);
      c[0] -= kg;
      // x o z sums products of up to |x| |z|: their rounding is no deviation (a sliding
      // contact's x0 z_R + z0 x_R cancels terms of order one against kappa ~ 1e-11)
      double nx = 0, nz = 0;
      for (int r = 0; r < n; r++) nx += x[r] * x[r], nz += z[r] * z[r];
      const double rounding = kCenterRounding * std::sqrt(nx * nz);
      for (int r = 0; r < n; r++) dev = std::max(dev, std::fabs(c[r]) - rounding);
    }
    return dev / kg;
  };
  double cond, last = HUGE_VAL;
  const bool stored = k != center_stall_island_;
  for (int it = 0; it < kCenterIter && stored; it++) {
    center_iterations_ = it;
    const double dev = deviation(*cur);
    if (cur->rvio < kCenterResidual && dev < kCenterTol) break;
    // acceptable and no longer halving: at the rounding floor
    if (cur->rvio < kCenterResidual && dev < 1e3 * kCenterTol && dev > 0.5 * last) break;
    last = dev;
    if (!ConeJacobians(p, k, *cur, false) || !Linearize(p, k, true, &cond)) return false;
    Targets(p, k, *cur, nullptr, kg, cfd_kappa_.data());
    Constants(p, k, cur->rz, cur->rv, true);
    Direct(p, k, *cur, cur->rz, true, &dir_);
    DynamicsChange(p, k, &dir_);
    double alpha = MaxStep(p, k, *cur, dir_, kTauMax);
    for (int bt = 0; bt <= kMaxBacktrack; bt++) {
      Step(p, k, *cur, dir_, alpha, trial);
      if (trial->interior) break;
      alpha *= kBacktrack;
    }
    if (!trial->interior) break;
    Copy(p, k, *trial, cur);
  }
  // a point whose products stall within a factor of two of kappa (a near-degenerate pair whose
  // product rounding exceeds kappa) is still differentiated: close to the central point and far
  // better than differences of a non-smooth step
  if (!stored || !(cur->rvio < 1e3 * kCenterResidual && deviation(*cur) < kCenterStall)) {
    // (the step's own derivative only: a smoothed kappa_grad asks for another point)
    if (!GradAtEnd() || !AnswerPoint(p, k)) return false;
    stats_.answer_centered++;
  }

  // the exact Jacobian at the central point, factored for ForceTangent
  if (!ConeJacobians(p, k, *cur, false) || !Linearize(p, k, true, &cond)) return false;
  centered_[k] = 1;
  lu_island_ = k;
  return true;
}

//---------------------------------- test hooks --------------------------------------------------

bool IpmSolver::NewtonAtColdStart(const Problem& p, int k, double kappa, double* dv, double* dlam) {
  stats_.Reset();
  for (int i = 0; i < p.nrow; i++) pos_[i] = p.pos[i];
  gapJ_ = &p.J;
  Prepare(p, pos_.data());
  if (!lu_.Analyze(p, k, chain_.data(), IslandLU::kAuto, gapJ_)) return false;
  ColdStart(p, k, kVelFloor, &cur_);
  double cond;
  if (!ConeJacobians(p, k, cur_, false) || !Linearize(p, k, true, &cond)) return false;
  Targets(p, k, cur_, nullptr, kappa);
  Constants(p, k, cur_.rz, cur_.rv, true);
  Direct(p, k, cur_, cur_.rz, true, &dir_);
  DynamicsChange(p, k, &dir_);
  for (int j = 0; j < p.nv; j++) dv[j] = dir_.v[j];
  for (int i = 0; i < p.nrow; i++) dlam[i] = dir_.lam[i];
  return true;
}

void IpmSolver::ResidualAlong(const Problem& p, int k, double alpha, double kappa, double* rv,
                              double* rz, double* comp, double* comp0) {
  Step(p, k, cur_, dir_, alpha, &trial_);
  Residuals(p, k, &trial_);  // from scratch, not by the linear update
  for (int j = 0; j < p.nv; j++) rv[j] = trial_.rv[j];
  for (int i = 0; i < p.nrow; i++) rz[i] = trial_.rz[i], comp[i] = comp0[i] = 0;
  const IslandLists& L = lists_[k];
  for (int e = L.orth_adr; e < L.orth_adr + L.orth_num; e++) {
    comp[orth_[e]] = trial_.x[orth_[e]] * trial_.z[orth_[e]] - kappa;
  }
  for (int e = L.soc_adr; e < L.soc_adr + L.soc_num; e++) {
    const int f = soc_row_[e], nrm = soc_nrm_[e];
    double x[3], z[3], c[3];
    const int n = ConeVectors(trial_, f, soc_cnt_[e], nrm >= 0 ? trial_.x[nrm] : bound_[f], x, z);
    Product(x, z, n, c);
    comp0[f] = c[0] - kappa;
    for (int r = 1; r < n; r++) comp[f + r - 1] = c[r];
  }
}

}  // namespace ipm

std::unique_ptr<Solver> MakeIpmSolver() { return std::make_unique<ipm::IpmSolver>(); }

const IpmStats* IpmSolverStats(const Solver* solver) {
  const ipm::IpmSolver* s = dynamic_cast<const ipm::IpmSolver*>(solver);
  return s ? &s->stats() : nullptr;
}

}  // namespace contactkit
