// Copyright 2026 The contactkit developers.
#include "solvers/ipm/ipm_solver.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "contactkit/contactkit.h"  // ckStatus (header only)
#include "solvers/common/cone.h"

namespace contactkit {
namespace ipm {
namespace {

constexpr double kEqualityReg = 1e-10;  // regularizer of hard equality rows, x diag_approx
constexpr double kTauMax = 0.99;        // Dojo's tau_max: fraction to a second-order cone's boundary
constexpr double kTauMin = 0.95;        // Dojo's tau_min
constexpr double kBacktrack = 0.5;      // Dojo's beta
constexpr int kMaxBacktrack = 12;
constexpr double kVelFloor = 1e-2;      // velocity scale of the cold start (m/s)
constexpr double kRetryFloor = 1;       // the same for the retry of a failed solve
constexpr double kSoftFactor = 1e3;     // tolerances of the last, softer retry
constexpr long kMaxPool = 1L << 22;     // dense block pool bound for large models (doubles)
constexpr double kStallStep = 0.05;     // steps shorter than this are blocked
constexpr int kStallIter = 3;          // blocked steps in a row that end a solve
constexpr double kInteriorMargin = 1e-13;  // det(y) / y0^2 of an interior point
constexpr double kTargetFraction = 0.1;  // final central-path target as a fraction of kappa_tol
constexpr double kInaccurate = 1000;    // "inaccurate": within this factor of both tolerances

}  // namespace

bool IpmSolver::Setup(const ProblemDims& dims, const ckSettings& settings, std::string* error) {
  dims_ = dims;
  settings_ = settings;
  trace_ = std::getenv("CK_IPM_TRACE") != nullptr;
  const size_t R = std::max(1, dims.max_rows), V = std::max(1, dims.nv);
  const size_t T = std::max(1, dims.ntree);
  if (!lu_.Allocate(dims, kMaxPool, error)) return false;
  try {
    scale_.assign(R, 1);
    target_.assign(R, 0);
    reg_.assign(R, 0);
    bound_.assign(R, 0);
    row_con_.assign(R, -1);
    chain_.assign(R, 0);
    unit_type_.assign(R, 0);
    unit_row_.assign(R, 0);
    unit_dim_.assign(R, 0);
    unit_adr_.assign(T, 0);
    unit_num_.assign(T, 0);
    ncone_.assign(T, 0);
    gn_.assign(R, 0);
    G_.assign(9 * R, 0);
    q_.assign(2 * R, 0);
    S_.assign(4 * R, 0);
    d_.assign(3 * R, 0);
    c_.assign(R, 0);
    rhs_.assign(V, 0);
    tmp_.assign(V, 0);
    mdiag_.assign(V, 1);
    jc_.assign(6 * V, 0);
    tw_.assign(6 * V, 0);
    out_lam_.assign(R, 0);
    grad_ok_.assign(T, 0);

    // 4 states of (2 nv + 6 rows), 2 directions of (nv + 5 rows)
    store_.assign(4 * (2 * V + 6 * R) + 2 * (V + 5 * R), 0);
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
  for (State* s : {&cur_, &trial_, &best_, &grad_}) {
    s->v = take(V);
    s->rv = take(V);
    s->x = take(R);
    s->z = take(R);
    s->z0 = take(R);
    s->lam = take(R);
    s->u = take(R);
    s->rz = take(R);
  }
  for (Direction* d : {&aff_, &dir_}) {
    d->v = take(V);
    d->x = take(R);
    d->z = take(R);
    d->z0 = take(R);
    d->lam = take(R);
    d->u = take(R);
  }
  return true;
}

void IpmSolver::Prepare(const Problem& p) {
  const double h = p.h;
  const SparseRows& J = p.J;
  const Islands& is = p.islands;

  // rows: scale, target, regularizer, bound
  for (int i = 0; i < p.nrow; i++) {
    scale_[i] = 1;
    target_[i] = 0;
    reg_[i] = 0;
    bound_[i] = 0;
    row_con_[i] = -1;
    switch (p.kind[i]) {
      case kRowEquality:
        if (settings_.ipm.soft_equality) {
          reg_[i] = std::max(p.R[i], 1e-15);
          target_[i] = p.vel[i] + h * p.aref[i];
        } else {
          reg_[i] = std::max(kEqualityReg * p.diag_approx[i], 1e-300);
          target_[i] = -p.pos[i] / h;
        }
        break;
      case kRowFriction:
        bound_[i] = h * p.floss[i];
        break;
      case kRowLimit:
      case kRowContactNormal:
        // without margin, rest slightly inside so that MuJoCo keeps reporting the contact; undo
        // deep penetration (late detection, collision glitches) at a bounded speed
        target_[i] = (p.pos[i] - std::min(p.margin[i] - settings_.ipm.rest_depth, 0.0)) / h;
        target_[i] = std::max(target_[i], -settings_.ipm.recovery_speed);
        break;
      default:
        break;
    }
  }
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    for (int r = 0; r < con.dim; r++) row_con_[con.row + r] = c;
    for (int r = 1; r < con.dim; r++) scale_[con.row + r] = con.mu[r - 1];
  }

  // diagonal of M_eff for residual scaling
  for (int j = 0; j < p.nv; j++) mdiag_[j] = p.mass.M[p.mass.madr[j]];

  // units per island; chain flags for single-tree islands
  int nunit = 0;
  for (int k = 0; k < is.nisland; k++) {
    unit_adr_[k] = nunit;
    int ncone = 0;
    const int* rows = Rows(p, k);
    const int nr = NumRows(p, k);
    const bool single = is.ntrees[k] == 1;
    for (int a = 0; a < nr; a++) {
      const int i = rows[a];
      if (single) {
        chain_[i] = RowIsChain(J.colind + J.rowadr[i], J.rownnz[i], p.mass.parent);
      }
      int type = -1, dim = 1;
      switch (p.kind[i]) {
        case kRowEquality:
          type = kUnitEquality;
          break;
        case kRowFriction:
          type = kUnitFrictionLoss;
          ncone++;
          break;
        case kRowLimit:
          type = kUnitLimit;
          ncone++;
          break;
        case kRowContactNormal: {
          type = kUnitContact;
          dim = p.con[row_con_[i]].dim;
          int first[3], count[3];
          ncone += 1 + FrictionGroups(dim, first, count);
          break;
        }
        default:
          break;  // friction rows belong to their contact's unit
      }
      if (type < 0) continue;
      unit_type_[nunit] = type;
      unit_row_[nunit] = i;
      unit_dim_[nunit] = dim;
      nunit++;
    }
    unit_num_[k] = nunit - unit_adr_[k];
    ncone_[k] = ncone;
  }
}

void IpmSolver::ColdStart(const Problem& p, int k, double floor, State* s) {
  const SparseRows& J = p.J;
  const int* dofs = Dofs(p, k);
  for (int a = 0; a < NumDofs(p, k); a++) s->v[dofs[a]] = p.v_free[dofs[a]];
  const int* rows = Rows(p, k);
  for (int a = 0; a < NumRows(p, k); a++) s->u[rows[a]] = J.Dot(rows[a], s->v);

  for (int e = unit_adr_[k]; e < unit_adr_[k] + unit_num_[k]; e++) {
    const int i = unit_row_[e];
    switch (unit_type_[e]) {
      case kUnitEquality:
        s->x[i] = s->lam[i] = 0;
        s->z[i] = 0;
        break;
      case kUnitFrictionLoss: {
        // centered: eta well inside, xi = F (1, -eta1 / eta0) so that xi o eta = (., 0)
        const double vs = std::fabs(s->u[i]) + floor;
        s->z[i] = s->u[i];
        s->z0[i] = 2 * std::fabs(s->u[i]) + vs;
        s->x[i] = s->lam[i] = -bound_[i] * s->z[i] / s->z0[i];
        break;
      }
      case kUnitLimit:
      case kUnitContact: {
        // gap velocity without force g; start with s ~ max(g, vs) and gamma ~ vs / A
        const double g = s->u[i] + target_[i];
        const double vs = std::fabs(g) + floor;
        const double A = std::max(p.diag_approx[i], 1e-12);
        s->z[i] = std::max(g, 0.0) + 0.5 * vs;
        const double gamma = (std::max(-g, 0.0) + 0.5 * vs) / A;
        s->x[i] = s->lam[i] = gamma;
        if (unit_type_[e] == kUnitContact) {
          // friction cones centered: eta0 = 2 |eta_R| + vs, xi_R = -gamma eta_R / eta0
          int first[3], count[3];
          const int ng = FrictionGroups(unit_dim_[e], first, count);
          for (int gi = 0; gi < ng; gi++) {
            const int f = i + first[gi];
            double nz = 0;
            for (int r = f; r < f + count[gi]; r++) {
              s->z[r] = scale_[r] * s->u[r];
              nz += s->z[r] * s->z[r];
            }
            s->z0[f] = 2 * std::sqrt(nz) + vs;
            for (int r = f; r < f + count[gi]; r++) {
              s->x[r] = -gamma * s->z[r] / s->z0[f];
              s->lam[r] = scale_[r] * s->x[r];
            }
          }
        }
        break;
      }
    }
  }
}

void IpmSolver::Evaluate(const Problem& p, int k, State* s) {
  const SparseRows& J = p.J;
  const Islands& is = p.islands;
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);

  // row velocities; dynamics residual M (v - v_free) - J' lambda
  for (int a = 0; a < nr; a++) s->u[rows[a]] = J.Dot(rows[a], s->v);
  const int* dofs = Dofs(p, k);
  const int nd = NumDofs(p, k);
  for (int a = 0; a < nd; a++) tmp_[dofs[a]] = s->v[dofs[a]] - p.v_free[dofs[a]];
  for (int t = is.treeadr[k]; t < is.treeadr[k] + is.ntrees[k]; t++) {
    const int tree = is.trees[t];
    const int b = is.tree_dofadr[tree], e = b + is.tree_dofnum[tree];
    p.mass.Mul(tmp_.data(), s->rv, b, e);
  }
  for (int a = 0; a < nr; a++) {
    const int i = rows[a];
    if (s->lam[i] != 0) J.AddRowTo(i, -s->lam[i], s->rv);
  }
  double rvio = 0;
  for (int a = 0; a < nd; a++) rvio = std::max(rvio, std::fabs(s->rv[dofs[a]]) / mdiag_[dofs[a]]);

  // row residuals, complementarity, interior
  double kvio = 0, gap = 0;
  bool interior = true;
  auto inside = [](const double* y, int n) {
    return y[0] > 0 && cone::SocDet(y, n) > kInteriorMargin * y[0] * y[0];
  };
  for (int e = unit_adr_[k]; e < unit_adr_[k] + unit_num_[k]; e++) {
    const int i = unit_row_[e];
    switch (unit_type_[e]) {
      case kUnitEquality:
        s->rz[i] = s->u[i] - target_[i] + reg_[i] * s->lam[i];
        rvio = std::max(rvio, std::fabs(s->rz[i]));
        break;
      case kUnitFrictionLoss: {
        s->rz[i] = s->z[i] - s->u[i];
        rvio = std::max(rvio, std::fabs(s->rz[i]));
        const double x0 = bound_[i], x1 = s->x[i], z0 = s->z0[i], z1 = s->z[i];
        const double c0 = x0 * z0 + x1 * z1, c1 = x0 * z1 + z0 * x1;
        kvio = std::max(kvio, std::max(std::fabs(c0), std::fabs(c1)));
        gap += c0;
        const double xv[2] = {x0, x1}, zv[2] = {z0, z1};
        interior = interior && inside(xv, 2) && inside(zv, 2);
        break;
      }
      case kUnitLimit:
      case kUnitContact: {
        s->rz[i] = s->z[i] - s->u[i] - target_[i];
        rvio = std::max(rvio, std::fabs(s->rz[i]));
        const double xz = s->x[i] * s->z[i];
        kvio = std::max(kvio, std::fabs(xz));
        gap += xz;

        interior = interior && s->x[i] > 0 && s->z[i] > 0;
        if (unit_type_[e] == kUnitLimit) break;
        int first[3], count[3];
        const int ng = FrictionGroups(unit_dim_[e], first, count);
        const double x0 = s->x[i];
        for (int gi = 0; gi < ng; gi++) {
          const int f = i + first[gi];
          const double z0 = s->z0[f];
          double c0 = x0 * z0;
          for (int r = f; r < f + count[gi]; r++) {
            s->rz[r] = s->z[r] - scale_[r] * s->u[r];
            rvio = std::max(rvio, std::fabs(s->rz[r]));
            c0 += s->x[r] * s->z[r];
            kvio = std::max(kvio, std::fabs(x0 * s->z[r] + z0 * s->x[r]));
          }
          kvio = std::max(kvio, std::fabs(c0));
          gap += c0;
          double xv[3], zv[3];
          GroupVectors(*s, f, count[gi], x0, xv, zv);
          interior = interior && inside(xv, count[gi] + 1) && inside(zv, count[gi] + 1);
        }
        break;
      }
    }
  }
  s->rvio = rvio;
  s->kvio = kvio;
  s->interior = interior;
  s->mu = ncone_[k] ? gap / ncone_[k] : 0;
}

bool IpmSolver::ConeJacobians(const Problem& p, int k, const State& s) {
  // per cone, the complementarity x o z linearized: dx = d - G dz with G = Arw(z)^-1 Arw(x)
  for (int e = unit_adr_[k]; e < unit_adr_[k] + unit_num_[k]; e++) {
    const int i = unit_row_[e], type = unit_type_[e];
    if (type == kUnitEquality) continue;
    int first[3] = {0}, count[3] = {1};
    int ng = 1;
    double x0 = bound_[i];
    if (type != kUnitFrictionLoss) {
      if (!(s.x[i] > 0 && s.z[i] > 0)) return false;
      gn_[i] = s.x[i] / s.z[i];
      if (type == kUnitLimit) continue;
      ng = FrictionGroups(unit_dim_[e], first, count);
      x0 = s.x[i];
    }
    for (int gi = 0; gi < ng; gi++) {
      const int f = i + first[gi], cnt = count[gi], n = cnt + 1;
      double x[3], z[3], A[9], col[3], out[3];
      GroupVectors(s, f, cnt, x0, x, z);
      if (!(cone::SocDet(x, n) > 0 && cone::SocDet(z, n) > 0 && x[0] > 0 && z[0] > 0)) {
        return false;
      }
      double* G = G_.data() + 9 * f;
      cone::SocArrow(x, n, A);
      for (int c = 0; c < n; c++) {
        for (int r = 0; r < n; r++) col[r] = A[r * n + c];
        cone::SocDivide(z, col, n, out);
        for (int r = 0; r < n; r++) G[r * n + c] = out[r];
      }

      // eliminate eta0: q = G_10 / G_00, S = G_11 - q G_01
      double* q = q_.data() + 2 * f;
      double* S = S_.data() + 4 * f;
      for (int a = 0; a < cnt; a++) q[a] = G[(a + 1) * n] / G[0];
      for (int a = 0; a < cnt; a++) {
        for (int b = 0; b < cnt; b++) S[a * cnt + b] = G[(a + 1) * n + b + 1] - q[a] * G[b + 1];
      }
    }
  }
  return true;
}

bool IpmSolver::Linearize(const Problem& p, int k, bool coupled, double* cond) {
  const SparseRows& J = p.J;
  lu_.SetMass(p);
  double* jc = jc_.data();
  double* tw = tw_.data();
  for (int e = unit_adr_[k]; e < unit_adr_[k] + unit_num_[k]; e++) {
    const int i = unit_row_[e], type = unit_type_[e];
    const int n = J.rownnz[i];
    const int* cols = J.colind + J.rowadr[i];
    if (n == 0) continue;
    if (type != kUnitContact) {
      // one row: weight w
      double w;
      if (type == kUnitEquality) {
        w = 1 / reg_[i];
      } else if (type == kUnitLimit) {
        w = gn_[i];
      } else {
        w = S_[4 * i];
      }
      const double* ji = J.val + J.rowadr[i];
      for (int b = 0; b < n; b++) tw[b] = w * ji[b];
      lu_.AddJtT(cols, n, 1, ji, tw);
      continue;
    }

    // contact block W (dim x dim): normal a; friction D S D and coupling D q a
    const int dim = unit_dim_[e];
    double W[36] = {0};
    const double a = gn_[i];
    W[0] = a;
    int first[3], count[3];
    const int ng = FrictionGroups(dim, first, count);
    for (int gi = 0; gi < ng; gi++) {
      const int f = first[gi], cnt = count[gi];
      const double* S = S_.data() + 4 * (i + f);
      const double* q = q_.data() + 2 * (i + f);
      for (int r = 0; r < cnt; r++) {
        const double dr = scale_[i + f + r];
        if (coupled) W[(f + r) * dim] = dr * q[r] * a;
        for (int c = 0; c < cnt; c++) W[(f + r) * dim + f + c] = dr * S[r * cnt + c] * scale_[i + f + c];
      }
    }
    for (int r = 0; r < dim; r++) {
      const double* jr = J.val + J.rowadr[i + r];
      for (int b = 0; b < n; b++) jc[r * n + b] = jr[b];
    }
    for (int r = 0; r < dim; r++) {
      double* tr = tw + r * n;
      for (int b = 0; b < n; b++) tr[b] = 0;
      for (int c = 0; c < dim; c++) {
        const double wrc = W[r * dim + c];
        if (wrc == 0) continue;
        const double* jr = jc + c * n;
        for (int b = 0; b < n; b++) tr[b] += wrc * jr[b];
      }
    }
    lu_.AddJtT(cols, n, dim, jc, tw);
  }
  double mn, mx;
  if (!lu_.Factor(&mn, &mx)) return false;
  *cond = mx / mn;
  info_.factorizations++;
  return true;
}

void IpmSolver::Targets(const Problem& p, int k, const State& s, const Direction* aff,
                        double kappa) {
  // d = z \ rc per cone, rc = kappa e - x o z - dx_a o dz_a (Mehrotra's second-order term)
  for (int e = unit_adr_[k]; e < unit_adr_[k] + unit_num_[k]; e++) {
    const int i = unit_row_[e], type = unit_type_[e];
    if (type == kUnitEquality) continue;
    int first[3] = {0}, count[3] = {1};
    int ng = 1;
    double x0 = bound_[i], dx0 = 0;
    if (type != kUnitFrictionLoss) {
      double rc = kappa - s.x[i] * s.z[i];
      if (aff) rc -= aff->x[i] * aff->z[i];
      d_[3 * i] = rc / s.z[i];
      if (type == kUnitLimit) continue;
      ng = FrictionGroups(unit_dim_[e], first, count);
      x0 = s.x[i];
      dx0 = aff ? aff->x[i] : 0;
    }
    for (int gi = 0; gi < ng; gi++) {
      const int f = i + first[gi], n = count[gi] + 1;
      double x[3], z[3], rc[3];
      GroupVectors(s, f, count[gi], x0, x, z);
      cone::SocProduct(x, z, n, rc);
      for (int r = 0; r < n; r++) rc[r] = -rc[r];
      rc[0] += kappa;
      if (aff) {
        double dx[3], dz[3], prod[3];
        dx[0] = dx0;
        dz[0] = aff->z0[f];
        for (int r = 1; r < n; r++) {
          dx[r] = aff->x[f + r - 1];
          dz[r] = aff->z[f + r - 1];
        }
        cone::SocProduct(dx, dz, n, prod);
        for (int r = 0; r < n; r++) rc[r] -= prod[r];
      }
      cone::SocDivide(z, rc, n, d_.data() + 3 * f);
    }
  }
}

void IpmSolver::Constants(const Problem& p, int k, const State& s, const double* rz,
                          const double* rv, bool with_d) {
  // c per row: dlam = c - W J dv; rhs = -rv + J' c
  const SparseRows& J = p.J;
  const int* dofs = Dofs(p, k);
  for (int a = 0; a < NumDofs(p, k); a++) rhs_[dofs[a]] = -rv[dofs[a]];
  for (int e = unit_adr_[k]; e < unit_adr_[k] + unit_num_[k]; e++) {
    const int i = unit_row_[e], type = unit_type_[e];
    double cn = 0;
    int first[3] = {0}, count[3] = {1};
    int ng = 1;
    if (type == kUnitEquality) {
      c_[i] = -rz[i] / reg_[i];
      J.AddRowTo(i, c_[i], rhs_.data());
      continue;
    }
    if (type != kUnitFrictionLoss) {
      cn = (with_d ? d_[3 * i] : 0) + gn_[i] * rz[i];
      c_[i] = cn;
      J.AddRowTo(i, cn, rhs_.data());
      if (type == kUnitLimit) continue;
      ng = FrictionGroups(unit_dim_[e], first, count);
    }
    for (int gi = 0; gi < ng; gi++) {
      const int f = i + first[gi], cnt = count[gi];
      const double* q = q_.data() + 2 * f;
      const double* S = S_.data() + 4 * f;
      const double* d = d_.data() + 3 * f;
      for (int r = 0; r < cnt; r++) {
        double v = q[r] * cn;
        if (with_d) v += d[r + 1] - q[r] * d[0];
        for (int c = 0; c < cnt; c++) v += S[r * cnt + c] * rz[f + c];
        c_[f + r] = scale_[f + r] * v;
        J.AddRowTo(f + r, c_[f + r], rhs_.data());
      }
    }
  }
}

void IpmSolver::Recover(const Problem& p, int k, const State& s, const double* rz, bool with_d,
                        Direction* d) {
  const SparseRows& J = p.J;
  const int* rows = Rows(p, k);
  for (int a = 0; a < NumRows(p, k); a++) d->u[rows[a]] = J.Dot(rows[a], d->v);
  for (int e = unit_adr_[k]; e < unit_adr_[k] + unit_num_[k]; e++) {
    const int i = unit_row_[e], type = unit_type_[e];
    double dx0 = 0;
    int first[3] = {0}, count[3] = {1};
    int ng = 1;
    if (type == kUnitEquality) {
      d->x[i] = d->lam[i] = c_[i] - d->u[i] / reg_[i];
      continue;
    }
    if (type != kUnitFrictionLoss) {
      d->z[i] = d->u[i] - rz[i];
      d->x[i] = d->lam[i] = c_[i] - gn_[i] * d->u[i];
      dx0 = d->x[i];
      if (type == kUnitLimit) continue;
      ng = FrictionGroups(unit_dim_[e], first, count);
    }
    for (int gi = 0; gi < ng; gi++) {
      const int f = i + first[gi], cnt = count[gi], n = cnt + 1;
      const double* G = G_.data() + 9 * f;
      const double* dd = d_.data() + 3 * f;
      for (int r = 0; r < cnt; r++) d->z[f + r] = scale_[f + r] * d->u[f + r] - rz[f + r];
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
}

double IpmSolver::MaxStep(const Problem& p, int k, const State& s, const Direction& d,
                          double tau_ort, double tau_soc) const {
  double a_ort = cone::kInfStep, a_soc = cone::kInfStep;
  for (int e = unit_adr_[k]; e < unit_adr_[k] + unit_num_[k]; e++) {
    const int i = unit_row_[e], type = unit_type_[e];
    if (type == kUnitEquality) continue;
    int first[3] = {0}, count[3] = {1};
    int ng = 1;
    double x0 = bound_[i], dx0 = 0;
    if (type != kUnitFrictionLoss) {
      a_ort = std::min(a_ort, cone::OrthantStep(s.x + i, d.x + i, 1));
      a_ort = std::min(a_ort, cone::OrthantStep(s.z + i, d.z + i, 1));
      if (trace_ && tau_ort < 1 && std::min(cone::OrthantStep(s.x + i, d.x + i, 1), cone::OrthantStep(s.z + i, d.z + i, 1)) < 1e-2) {
        std::fprintf(stderr, "    block orthant row %d: x %.3e dx %.3e z %.3e dz %.3e\n", i, s.x[i], d.x[i], s.z[i], d.z[i]);
      }
      if (type == kUnitLimit) continue;
      ng = FrictionGroups(unit_dim_[e], first, count);
      x0 = s.x[i];
      dx0 = d.x[i];
    }
    for (int gi = 0; gi < ng; gi++) {
      const int f = i + first[gi], cnt = count[gi], n = cnt + 1;
      double x[3], z[3], dx[3], dz[3];
      GroupVectors(s, f, cnt, x0, x, z);
      dx[0] = dx0;
      dz[0] = d.z0[f];
      for (int r = 0; r < cnt; r++) {
        dx[r + 1] = d.x[f + r];
        dz[r + 1] = d.z[f + r];
      }
      a_soc = std::min(a_soc, cone::SocStep(x, dx, n));
      a_soc = std::min(a_soc, cone::SocStep(z, dz, n));
      if (trace_ && tau_ort < 1 && std::min(cone::SocStep(x, dx, n), cone::SocStep(z, dz, n)) < 1e-2) {
        std::fprintf(stderr, "    block row %d: x %.3e %.3e %.3e dx %.3e %.3e %.3e | z %.3e %.3e %.3e dz %.3e %.3e %.3e\n",
                     f, x[0], x[1], n > 2 ? x[2] : 0, dx[0], dx[1], n > 2 ? dx[2] : 0, z[0], z[1], n > 2 ? z[2] : 0, dz[0], dz[1], n > 2 ? dz[2] : 0);
      }
    }
  }
  return std::min(1.0, std::min(tau_ort * a_ort, tau_soc * a_soc));
}

double IpmSolver::MuAt(const Problem& p, int k, const State& s, const Direction& d,
                       double alpha) const {
  if (!ncone_[k]) return 0;
  double gap = 0;
  for (int e = unit_adr_[k]; e < unit_adr_[k] + unit_num_[k]; e++) {
    const int i = unit_row_[e], type = unit_type_[e];
    if (type == kUnitEquality) continue;
    int first[3] = {0}, count[3] = {1};
    int ng = 1;
    double x0 = bound_[i];
    if (type != kUnitFrictionLoss) {
      x0 = s.x[i] + alpha * d.x[i];
      gap += x0 * (s.z[i] + alpha * d.z[i]);
      if (type == kUnitLimit) continue;
      ng = FrictionGroups(unit_dim_[e], first, count);
    }
    for (int gi = 0; gi < ng; gi++) {
      const int f = i + first[gi];
      gap += x0 * (s.z0[f] + alpha * d.z0[f]);
      for (int r = f; r < f + count[gi]; r++) {
        gap += (s.x[r] + alpha * d.x[r]) * (s.z[r] + alpha * d.z[r]);
      }
    }
  }
  return gap / ncone_[k];
}

void IpmSolver::Step(const Problem& p, int k, const State& s, const Direction& d, double alpha,
                     State* out) const {
  const int* dofs = Dofs(p, k);
  for (int a = 0; a < NumDofs(p, k); a++) {
    const int j = dofs[a];
    out->v[j] = s.v[j] + alpha * d.v[j];
  }
  const int* rows = Rows(p, k);
  for (int a = 0; a < NumRows(p, k); a++) {
    const int i = rows[a];
    out->x[i] = s.x[i] + alpha * d.x[i];
    out->z[i] = s.z[i] + alpha * d.z[i];
    out->z0[i] = s.z0[i] + alpha * d.z0[i];
    out->lam[i] = s.lam[i] + alpha * d.lam[i];
  }
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

int IpmSolver::Attempt(const Problem& p, int k, double floor, double rtol, double ktol,
                       int* status, double* cond, const State** fin) {
  const ckIpmSettings& st = settings_.ipm;
  auto merit = [&](const State& s) { return std::max(s.rvio / rtol, s.kvio / ktol); };
  State* cur = &cur_;
  State* trial = &trial_;
  ColdStart(p, k, floor, cur);
  Evaluate(p, k, cur);
  Copy(p, k, *cur, &best_);
  double best = merit(*cur);
  grad_ok_[k] = 0;
  *status = ckSTATUS_MAX_ITER;
  int it = 0, stalled = 0;
  for (; it <= st.max_iter; it++) {
    if (cur->rvio < rtol && cur->kvio < ktol) {
      *status = ckSTATUS_SOLVED;
      break;
    }
    if (it == st.max_iter) break;

    // cone linearization, Newton matrix; without the friction coupling if that fails
    if (!ConeJacobians(p, k, *cur)) {
      *status = ckSTATUS_NUMERICAL;
      break;
    }
    if (!Linearize(p, k, true, cond)) {
      info_.sym_fallbacks++;
      if (!Linearize(p, k, false, cond)) {
        *status = ckSTATUS_NUMERICAL;
        break;
      }
    }

    // predictor: the affine direction gives the centering sigma = (mu_aff / mu)^3
    const int* dofs = Dofs(p, k);
    const int nd = NumDofs(p, k);
    Targets(p, k, *cur, nullptr, 0);
    Constants(p, k, *cur, cur->rz, cur->rv, true);
    for (int a = 0; a < nd; a++) aff_.v[dofs[a]] = rhs_[dofs[a]];
    lu_.Solve(aff_.v);
    Recover(p, k, *cur, cur->rz, true, &aff_);
    double kappa = ktol * kTargetFraction;
    if (ncone_[k]) {
      const double alpha_aff = MaxStep(p, k, *cur, aff_, 1, 1);
      const double mu = cur->mu, mu_aff = MuAt(p, k, *cur, aff_, alpha_aff);
      const double ratio = std::min(1.0, std::max(0.0, mu > 0 ? mu_aff / mu : 0));
      kappa = std::max(ratio * ratio * ratio * mu, ktol * kTargetFraction);
    }

    // corrector with the second-order term
    Targets(p, k, *cur, &aff_, kappa);
    Constants(p, k, *cur, cur->rz, cur->rv, true);
    for (int a = 0; a < nd; a++) dir_.v[dofs[a]] = rhs_[dofs[a]];
    lu_.Solve(dir_.v);
    Recover(p, k, *cur, cur->rz, true, &dir_);

    // fraction to the boundary, then backtrack until a violation decreases
    const double vio = std::max(cur->rvio, cur->kvio);
    const double tau = std::min(kTauMax, std::max(kTauMin, 1 - vio * vio));
    double alpha = MaxStep(p, k, *cur, dir_, tau, tau);
    for (int bt = 0; bt <= kMaxBacktrack; bt++) {
      Step(p, k, *cur, dir_, alpha, trial);
      Evaluate(p, k, trial);
      if (trial->interior && (trial->rvio <= cur->rvio || trial->kvio <= cur->kvio)) break;
      alpha *= kBacktrack;
    }
    if (trial->interior) {
      std::swap(cur, trial);
    } else {
      alpha = 0;
    }
    if (trace_) {
      std::fprintf(stderr, "  isl %d it %2d rvio %.2e kvio %.2e mu %.2e kappa %.2e alpha %.3f\n", k,
                   it, cur->rvio, cur->kvio, cur->mu, kappa, alpha);
    }

    // keep the iterate where the central path crosses kappa_grad, and the best one
    if (!grad_ok_[k] && ncone_[k] && cur->mu <= st.kappa_grad) {
      Copy(p, k, *cur, &grad_);
      grad_ok_[k] = 1;
    }
    const double m = merit(*cur);
    if (m < best) {
      best = m;
      Copy(p, k, *cur, &best_);
    }

    // blocked steps: stop once close to the tolerances, or when hopeless
    stalled = alpha < kStallStep ? stalled + 1 : 0;
    if (stalled >= kStallIter && (best < kInaccurate || stalled >= 3 * kStallIter)) {
      it++;
      break;
    }
  }
  if (!grad_ok_[k]) {
    Copy(p, k, *cur, &grad_);
    grad_ok_[k] = 1;
  }

  // the converged iterate, else the best one
  *fin = *status == ckSTATUS_SOLVED ? cur : &best_;
  if (*status == ckSTATUS_MAX_ITER && merit(**fin) < kInaccurate) *status = ckSTATUS_INACCURATE;
  return it;
}

void IpmSolver::SolveIsland(const Problem& p, int k, Solution* sol) {
  const ckIpmSettings& st = settings_.ipm;
  auto merit = [&](const State& s) {
    return std::max(s.rvio / st.residual_tol, s.kvio / st.kappa_tol);
  };
  const int* rows = Rows(p, k);
  const int nr = NumRows(p, k);

  // a failed attempt is retried from a more central start, then with softer contact
  int status = ckSTATUS_MAX_ITER, iterations = 0;
  double cond = 0, best = HUGE_VAL, rvio = 0, kvio = 0;
  for (int attempt = 0; attempt < 3; attempt++) {
    int st_attempt;
    double c = 0;
    const State* fin = nullptr;
    const double soft = attempt == 2 ? kSoftFactor : 1;
    iterations += Attempt(p, k, attempt ? kRetryFloor : kVelFloor, soft * st.residual_tol,
                          soft * st.kappa_tol, &st_attempt, &c, &fin);
    if (attempt == 2 && st_attempt != ckSTATUS_NUMERICAL) st_attempt = ckSTATUS_INACCURATE;
    const double m = attempt == 2 && st_attempt == ckSTATUS_INACCURATE ? kInaccurate : merit(*fin);
    if (attempt == 0 || m < best) {
      best = m;
      status = st_attempt;
      cond = c;
      rvio = fin->rvio;
      kvio = fin->kvio;
      for (int a = 0; a < nr; a++) out_lam_[rows[a]] = fin->lam[rows[a]];
    }
    if (trace_) {
      std::fprintf(stderr, "  isl %d attempt %d status %d it %d rvio %.2e kvio %.2e nrow %d\n", k,
                   attempt, st_attempt, iterations, fin->rvio, fin->kvio, nr);
    }
    if (status == ckSTATUS_SOLVED || status == ckSTATUS_INACCURATE) break;
    info_.retries++;
  }

  info_.iterations = std::max(info_.iterations, iterations);
  info_.total_iterations += iterations;
  sol->iterations = std::max(sol->iterations, iterations);
  sol->residual = std::max(sol->residual, rvio);
  sol->kappa = std::max(sol->kappa, kvio);
  sol->condition = std::max(sol->condition, cond);
  if (status != ckSTATUS_SOLVED && (sol->status == ckSTATUS_SOLVED || status > sol->status)) {
    sol->status = status;
  }
}

void IpmSolver::Solve(const Problem& p, Solution* sol) {
  info_ = IpmInfo();
  sol->status = ckSTATUS_SOLVED;
  sol->iterations = 0;
  sol->residual = sol->kappa = sol->condition = 0;
  Prepare(p);
  for (int i = 0; i < p.nrow; i++) out_lam_[i] = 0;
  const Islands& is = p.islands;
  for (int k = 0; k < is.nisland; k++) {
    if (!lu_.Analyze(p, k, chain_.data())) {
      // fill beyond the preallocated pool: no force on this island
      sol->status = ckSTATUS_NUMERICAL;
      continue;
    }
    info_.tree_sparse += lu_.tree_sparse();
    info_.islands++;
    SolveIsland(p, k, sol);
  }
  info_.grad_islands = is.nisland;

  // forces and the velocity they produce
  for (int i = 0; i < p.nrow; i++) sol->force[i] = out_lam_[i] / p.h;
  VelocityFromForce(p, sol->force, sol->v_next, nullptr);
}

bool IpmSolver::ForceTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                             double* dforce) {
  return false;
}

}  // namespace ipm

std::unique_ptr<Solver> MakeIpmSolver() { return std::make_unique<ipm::IpmSolver>(); }

const IpmInfo* IpmSolverInfo(const Solver* solver) {
  const ipm::IpmSolver* s = dynamic_cast<const ipm::IpmSolver*>(solver);
  return s ? &s->info() : nullptr;
}

}  // namespace contactkit
