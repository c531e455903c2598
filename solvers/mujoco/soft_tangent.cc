// Copyright 2026 The contactkit developers.
#include "solvers/mujoco/soft_tangent.h"

#include <algorithm>
#include <cmath>

#include "solvers/common/columns.h"
#include "solvers/common/dense.h"

namespace contactkit {
namespace {

// cone Hessian of 1/2 Dm (N - mu T)^2 in jar space (dim x dim, row-major), MuJoCo's middle zone
void ConeHessian(const double* jar, int dim, double mu, const double* friction, double D0,
                 double* H) {
  double U[6], scale[6];
  scale[0] = mu;
  for (int j = 1; j < dim; j++) scale[j] = friction[j - 1];
  for (int j = 0; j < dim; j++) U[j] = jar[j] * scale[j];
  double T = 0;
  for (int j = 1; j < dim; j++) T += U[j] * U[j];
  T = std::sqrt(T);
  const double N = U[0];
  const double Dm = D0 / (mu * mu * (1 + mu * mu));

  // U space: grad g grad g' + g hess g, g = N - mu T
  H[0] = 1;
  for (int j = 1; j < dim; j++) H[j] = H[j * dim] = -mu * U[j] / T;
  for (int k = 1; k < dim; k++) {
    for (int j = 1; j < dim; j++) {
      H[k * dim + j] = mu * N / (T * T * T) * U[j] * U[k] + (j == k ? mu * mu - mu * N / T : 0);
    }
  }

  // jar space: scale rows and columns, times Dm
  for (int k = 0; k < dim; k++) {
    for (int j = 0; j < dim; j++) H[k * dim + j] *= Dm * scale[k] * scale[j];
  }
}

// y[col] += sum_r V_r[q] x_r over the G rows of a group (each column's sum in the rows' order)
template <int G>
void AddGroupT(const SparseRows& J, const double* V, const double* x, int i, double* y) {
  const int nnz = J.rownnz[i];
  const int* col = J.colind + J.rowadr[i];
  const double* v[G];
  double xs[G];
  for (int r = 0; r < G; r++) {
    v[r] = V + J.rowadr[i + r];
    xs[r] = x[i + r];
  }
  for (int q = 0; q < nnz; q++) {
    double s = y[col[q]];
    for (int r = 0; r < G; r++) s += v[r][q] * xs[r];
    y[col[q]] = s;
  }
}

// K += J_c' G over the pairs y >= x of the contact's columns (local indices loc, K n x n), the
// product symmetric: jr its rows' J, G its dim x nnz block (D: dim, 0 for any)
template <int D>
void AddSymmetricBlock(const double* const* jr, const double* G, int dim, int nnz, const int* loc,
                       int n, double* K) {
  const int nd = D > 0 ? D : dim;
  for (int y = 0; y < nnz; y++) {
    double gy[6];
    for (int r = 0; r < nd; r++) gy[r] = G[r * nnz + y];
    double* ky = K + loc[y] * n;
    for (int x = 0; x <= y; x++) {
      double v = 0;
      for (int r = 0; r < nd; r++) v += jr[r][x] * gy[r];
      ky[loc[x]] += v;
      if (x != y) K[loc[x] * n + loc[y]] += v;
    }
  }
}

}  // namespace

void SharedRowGroups(const Problem& p, int* group) {
  const SparseRows& J = p.J;
  const Islands& is = p.islands;
  for (int i = 0; i < p.nrow; i++) group[i] = 1;
  for (int c = 0; c < p.ncon; c++) {
    const int row = p.con[c].row, dim = p.con[c].dim, k = is.row_island[row];
    if (dim == 1 || k < 0) continue;
    const int* rows = is.rows + is.rowadr[k];
    const int a = static_cast<int>(std::lower_bound(rows, rows + is.nrows[k], row) - rows);
    bool shared = a + dim <= is.nrows[k];
    const int n = J.rownnz[row];
    const int* col = J.colind + J.rowadr[row];
    for (int r = 1; r < dim && shared; r++) {
      const int* cr = J.colind + J.rowadr[row + r];
      shared = rows[a + r] == row + r && J.rownnz[row + r] == n && std::equal(col, col + n, cr);
    }
    if (!shared) continue;
    group[row] = dim;
    for (int r = 1; r < dim; r++) group[row + r] = 0;
  }
}

void AddRowsT(const SparseRows& J, const double* V, const double* x, const int* rows, int n,
              const int* group, double* y) {
  for (int a = 0; a < n;) {
    const int i = rows[a], g = std::max(group[i], 1);
    a += g;
    bool any = false;
    for (int r = 0; r < g; r++) any |= x[i + r] != 0;
    if (!any) continue;
    switch (g) {
      case 1: {
        const int adr = J.rowadr[i];
        for (int q = 0; q < J.rownnz[i]; q++) y[J.colind[adr + q]] += V[adr + q] * x[i];
        break;
      }
      case 2:
        AddGroupT<2>(J, V, x, i, y);
        break;
      case 3:
        AddGroupT<3>(J, V, x, i, y);
        break;
      case 4:
        AddGroupT<4>(J, V, x, i, y);
        break;
      case 6:
        AddGroupT<6>(J, V, x, i, y);
        break;
      default:
        for (int r = i; r < i + g; r++) {
          const int adr = J.rowadr[r];
          for (int q = 0; q < J.rownnz[r]; q++) y[J.colind[adr + q]] += V[adr + q] * x[r];
        }
    }
  }
}

void SoftTangent::Setup(const ProblemDims& dims) {
  const size_t nefc = dims.max_rows + 4 * static_cast<size_t>(dims.max_contacts);
  ra_.assign(nefc, 0);
  rb_.assign(nefc, -1);
  rc_.assign(nefc, 0);
  st_.assign(nefc, 0);
  D_.assign(nefc, 0);
  f_.assign(nefc, 0);
  te_.assign(nefc, 0);
  ge_.assign(nefc, 0);
  efc_of_row_.assign(std::max(dims.max_rows, 1), 0);
  con_of_row_.assign(std::max(dims.max_rows, 1), -1);
  hcone_.assign(36 * static_cast<size_t>(std::max(dims.max_contacts, 1)), 0);
  H_.assign(static_cast<size_t>(dims.nv) * dims.nv + 1, 0);
  K_.assign(static_cast<size_t>(dims.nv) * dims.nv + 1, 0);
  hadr_.assign(std::max(dims.ntree, 1), 0);
  local_.assign(std::max(dims.nv, 1), -1);
  t_.assign(std::max(dims.max_rows, 1), 0);
  fold_.assign(std::max(dims.max_rows, 1), 0);
  rho_.assign(std::max(dims.max_rows, 1), 0);
  jar_.assign(std::max(dims.max_rows, 1), 0);
  rhs_.assign(std::max(dims.nv, 1), 0);
  block_.assign(static_cast<size_t>(std::max(dims.nv, 1)) * kBlock, 0);
  tmp_.assign(std::max(dims.nv, 1), 0);
  loc_.assign(std::max(dims.nv, 1), 0);
  loc_cols_.assign(std::max(dims.nv, 1), 0);
  gbuf_.assign(6 * static_cast<size_t>(std::max(dims.nv, 1)), 0);
}

double SoftTangent::RowDot(const Problem& p, int e, const double* x) const {
  const double s = p.J.Dot(ra_[e], x);
  return rb_[e] < 0 ? s : s + rc_[e] * p.J.Dot(rb_[e], x);
}

void SoftTangent::ConeAdd(const Problem& p, const double* in, double scale, double* out) const {
  for (int c = 0; c < p.ncon; c++) ConeAddContact(p, c, in, scale, out);
}

void SoftTangent::ConeAddContact(const Problem& p, int c, const double* in, double scale,
                                 double* out) const {
  const Contact& con = p.con[c];
  const int adr = con.efc_address, dim = con.dim;
  if (dim == 1 || st_[adr] != kSoftCone) return;
  const double* hc = hcone_.data() + 36 * c;
  for (int r = 0; r < dim; r++) {
    double s = 0;
    for (int q = 0; q < dim; q++) s += hc[r * dim + q] * in[adr + q];
    out[adr + r] += scale * s;
  }
}

int SoftTangent::EfcCount(const Problem& p, int i) const {
  const int c = con_of_row_[i];
  if (c < 0) return 1;
  const Contact& con = p.con[c];
  if (i != con.row) return 0;
  return con.dim == 1 || elliptic_ ? con.dim : 2 * (con.dim - 1);
}

void SoftTangent::RowsAdd(const Problem& p, const double* a, double* y) {
  double* fold = fold_.data();
  for (int i = 0; i < p.nrow; i++) fold[i] = 0;
  for (int e = 0; e < nrow_; e++) {
    if (a[e] == 0) continue;
    fold[ra_[e]] += a[e];
    if (rb_[e] >= 0) fold[rb_[e]] += a[e] * rc_[e];
  }
  for (int i = 0; i < p.nrow; i++) {
    if (fold[i] != 0) p.J.AddRowTo(i, fold[i], y);
  }
}

bool SoftTangent::Prepare(const Problem& p, const SoftRows& rows, const double* v_next) {
  h_ = p.h;
  v_next_ = v_next;
  nrow_ = rows.nrow;
  if (nrow_ > static_cast<int>(ra_.size())) return false;
  k_ready_ = false;
  MapRows(p, rows, v_next);
  MassBlocks(p);
  AddCurvature(p, rows);

  // factor
  const Islands& is = p.islands;
  for (int k = 0; k < is.nisland; k++) {
    if (!CholFactor(H_.data() + hadr_[k], is.ndofs[k])) return false;
  }
  return true;
}

void SoftTangent::MapRows(const Problem& p, const SoftRows& rows, const double* v_next) {
  const SparseRows& J = p.J;

  // MuJoCo rows as combinations of frame rows
  elliptic_ = rows.elliptic;
  const int nplain = p.ne + p.nf + p.nl;
  for (int i = 0; i < nplain; i++) {
    ra_[i] = i;
    rb_[i] = -1;
    rc_[i] = 0;
    efc_of_row_[i] = i;
    con_of_row_[i] = -1;
  }
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const int adr = con.efc_address;
    for (int r = 0; r < con.dim; r++) {
      efc_of_row_[con.row + r] = adr;
      con_of_row_[con.row + r] = c;
    }
    if (con.dim == 1 || rows.elliptic) {
      for (int r = 0; r < con.dim; r++) {
        ra_[adr + r] = con.row + r;
        rb_[adr + r] = -1;
        rc_[adr + r] = 0;
      }
    } else {
      for (int j = 1; j < con.dim; j++) {
        for (int s = 0; s < 2; s++) {
          const int e = adr + 2 * (j - 1) + s;
          ra_[e] = con.row;
          rb_[e] = con.row + j;
          rc_[e] = s == 0 ? con.mu[j - 1] : -con.mu[j - 1];
        }
      }
    }
  }
  for (int e = 0; e < nrow_; e++) {
    st_[e] = rows.state[e];
    f_[e] = rows.force[e];
    D_[e] = 1 / rows.R[e];
  }
  modes_changed_ = false;
  if (mode_) ApplyModes(p);
  group_ = rows.group;

  // jar of the frame rows at the solution, cone Hessians
  for (int i = 0; i < p.nrow; i++) {
    jar_[i] = (J.Dot(i, v_next) - p.vel[i]) / h_ - p.aref[i];
  }
  if (rows.elliptic) {
    for (int c = 0; c < p.ncon; c++) {
      const Contact& con = p.con[c];
      if (con.dim > 1 && st_[con.efc_address] == kSoftCone) {
        ConeHessian(jar_.data() + con.row, con.dim, rows.mu[c], con.mu, D_[con.efc_address],
                    hcone_.data() + 36 * c);
      }
    }
  }
}

void SoftTangent::ApplyModes(const Problem& p) {
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    if (mode_[c] < 0) continue;
    const int adr = con.efc_address;
    const int n = con.dim == 1 || elliptic_ ? con.dim : 2 * (con.dim - 1);
    bool active = false;
    for (int e = adr; e < adr + n; e++) active |= st_[e] != kSoftSatisfied;
    if ((mode_[c] == 1) == active) continue;
    modes_changed_ = true;
    for (int e = adr; e < adr + n; e++) st_[e] = mode_[c] == 0 ? kSoftSatisfied : kSoftQuadratic;
  }
}

void SoftTangent::MassBlocks(const Problem& p) {
  // island blocks: dense M over the island's dofs
  const Islands& is = p.islands;
  int adr = 0;
  for (int k = 0; k < is.nisland; k++) {
    const int n = is.ndofs[k];
    hadr_[k] = adr;
    const int* dofs = is.dofs + is.dofadr[k];
    // dofs in reverse order (children before parents): the factor then fills in only toward
    // ancestors and the contacts' couplings, as MuJoCo's L'DL does
    for (int a = 0; a < n; a++) local_[dofs[a]] = n - 1 - a;
    double* Hk = H_.data() + adr;
    for (int a = 0; a < n * n; a++) Hk[a] = 0;
    for (int a = 0; a < n; a++) {
      const int i = dofs[a], la = local_[i];
      Hk[la * n + la] = p.mass.M[p.mass.madr[i]];
      int madr = p.mass.madr[i] + 1;
      for (int j = p.mass.parent[i]; j >= 0; j = p.mass.parent[j], madr++) {
        const int b = local_[j];
        Hk[la * n + b] = Hk[b * n + la] = p.mass.M[madr];
      }
    }
    adr += n * n;
  }
}

bool SoftTangent::ContactCurvature(const Problem& p, int c, double W[36]) const {
  const Contact& con = p.con[c];
  const int adr = con.efc_address, dim = con.dim, row = con.row;
  bool any = false;
  if (dim == 1 || rb_[adr] < 0) {
    for (int r = 0; r < dim; r++) {
      if (st_[adr + r] != kSoftQuadratic) continue;
      W[r * dim + r] += D_[adr + r];
      any = true;
    }
    if (elliptic_ && dim > 1 && st_[adr] == kSoftCone) {
      const double* hc = hcone_.data() + 36 * c;
      for (int q = 0; q < dim * dim; q++) W[q] += hc[q];
      any = true;
    }
  } else {
    for (int e = adr; e < adr + 2 * (dim - 1); e++) {
      if (st_[e] != kSoftQuadratic) continue;
      const int b = rb_[e] - row;
      const double De = D_[e], ce = rc_[e];
      W[0] += De;
      W[b] += De * ce;
      W[b * dim] += De * ce;
      W[b * dim + b] += De * ce * ce;
      any = true;
    }
  }
  return any;
}

void SoftTangent::VelocityRows(const Problem& p) {
  // a velocity direction e_k has t = -dvel - h daref = (h B - 1) J e_k on its island's rows and
  // IslandRowRhs adds J' fold, fold = -W t: K = J' W S J, S = diag(1 - h B), column k contiguous
  const SparseRows& J = p.J;
  const Islands& is = p.islands;
  const int nplain = p.ne + p.nf + p.nl;
  for (int k = 0; k < is.nisland; k++) {
    double* Kk = K_.data() + hadr_[k];
    for (int a = 0; a < is.ndofs[k] * is.ndofs[k]; a++) Kk[a] = 0;
  }
  for (int e = 0; e < nplain; e++) {
    const int k = is.row_island[e];
    if (st_[e] != kSoftQuadratic || k < 0) continue;
    const int n = is.ndofs[k], nnz = J.rownnz[e];
    const int* cols = J.colind + J.rowadr[e];
    const double* va = J.val + J.rowadr[e];
    const double s = D_[e] * (1 - h_ * p.KB[2 * e + 1]);
    double* Kk = K_.data() + hadr_[k];
    for (int y = 0; y < nnz; y++) {
      double* ky = Kk + local_[cols[y]] * n;
      for (int x = 0; x < nnz; x++) ky[local_[cols[x]]] += va[x] * s * va[y];
    }
  }
  double* G = gbuf_.data();
  int* loc = loc_cols_.data();
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const int dim = con.dim, row = con.row, k = is.row_island[row];
    double W[36] = {};
    if (k < 0 || !ContactCurvature(p, c, W)) continue;
    const int n = is.ndofs[k], nnz = J.rownnz[row];
    const int* cols = J.colind + J.rowadr[row];
    for (int x = 0; x < nnz; x++) loc[x] = local_[cols[x]];
    double sq[6];         // S's entries on the contact's rows
    const double* jr[6];  // their J
    bool uniform = symmetric_velocity_rows_;
    for (int q = 0; q < dim; q++) {
      sq[q] = 1 - h_ * p.KB[2 * (row + q) + 1];
      uniform &= sq[q] == sq[0];
      jr[q] = J.val + J.rowadr[row + q];
    }
    // G = W S J_c (the contact's rows share their columns)
    for (int r = 0; r < dim; r++) {
      for (int y = 0; y < nnz; y++) {
        double g = 0;
        for (int q = 0; q < dim; q++) g += W[r * dim + q] * sq[q] * jr[q][y];
        G[r * nnz + y] = g;
      }
    }
    double* Kk = K_.data() + hadr_[k];
    if (uniform) {
      // S = s I on the contact (MuJoCo's rows of a contact share their impedance): J_c' W S J_c
      // is symmetric, each pair of columns formed once
      if (dim == 3) {
        AddSymmetricBlock<3>(jr, G, dim, nnz, loc, n, Kk);
      } else {
        AddSymmetricBlock<0>(jr, G, dim, nnz, loc, n, Kk);
      }
      continue;
    }
    for (int y = 0; y < nnz; y++) {
      double* ky = Kk + loc[y] * n;
      for (int r = 0; r < dim; r++) {
        const double gry = G[r * nnz + y];
        if (gry == 0) continue;
        const double* jr = J.val + J.rowadr[row + r];
        for (int x = 0; x < nnz; x++) ky[loc[x]] += jr[x] * gry;
      }
    }
  }
}

void SoftTangent::VelocityRowRhs(const Problem& p, int k, double* rhs) {
  const Islands& is = p.islands;
  const int island = is.tree_island[p.dof_tree[k]];
  if (island < 0) return;
  if (!k_ready_) VelocityRows(p);
  k_ready_ = true;
  const int n = is.ndofs[island];
  const int* dofs = is.dofs + is.dofadr[island];
  const double* col = K_.data() + hadr_[island] + local_[k] * n;
  for (int a = 0; a < n; a++) rhs[dofs[a]] += col[local_[dofs[a]]];
}

void SoftTangent::AddCurvature(const Problem& p, const SoftRows& rows) {
  const SparseRows& J = p.J;
  const Islands& is = p.islands;
  const int nplain = p.ne + p.nf + p.nl;

  // the factor reads the lower triangle only (local row >= local column; columns ascend, local
  // indices descend): rows before the contacts one by one, contacts as J_c' W J_c with W the
  // curvature of their MuJoCo rows (quadratic rows, pyramid edges, cone) in their frame rows
  const int* loc = loc_cols_.data();
  double* G = gbuf_.data();
  for (int e = 0; e < nplain; e++) {
    if (st_[e] != kSoftQuadratic) continue;
    const int k = is.row_island[e];
    if (k < 0) continue;
    const int n = is.ndofs[k], nnz = J.rownnz[e];
    const int* cols = J.colind + J.rowadr[e];
    const double* va = J.val + J.rowadr[e];
    double* Hk = H_.data() + hadr_[k];
    for (int x = 0; x < nnz; x++) {
      const double djx = D_[e] * va[x];
      const int lx = local_[cols[x]];
      for (int y = 0; y <= x; y++) Hk[lx * n + local_[cols[y]]] += djx * va[y];
    }
  }
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const int dim = con.dim, row = con.row;
    const int k = is.row_island[row];
    if (k < 0) continue;
    double W[36] = {};
    if (!ContactCurvature(p, c, W)) continue;
    const int n = is.ndofs[k], nnz = J.rownnz[row];
    const int* cols = J.colind + J.rowadr[row];
    double* Hk = H_.data() + hadr_[k];
    for (int x = 0; x < nnz; x++) loc_cols_[x] = local_[cols[x]];
    const double* jr[6];  // the contact's rows' J
    for (int q = 0; q < dim; q++) jr[q] = J.val + J.rowadr[row + q];
    for (int r = 0; r < dim; r++) {
      for (int y = 0; y < nnz; y++) {
        double g = 0;
        for (int q = 0; q < dim; q++) g += W[r * dim + q] * jr[q][y];
        G[r * nnz + y] = g;
      }
    }
    for (int x = 0; x < nnz; x++) {
      double* hx = Hk + loc[x] * n;
      for (int r = 0; r < dim; r++) {
        const double jrx = jr[r][x];
        if (jrx == 0) continue;
        const double* gr = G + r * nnz;
        for (int y = 0; y <= x; y++) hx[loc[y]] += jrx * gr[y];
      }
    }
  }
}

void SoftTangent::Solve(const Problem& p, double* x) {
  const Islands& is = p.islands;
  for (int k = 0; k < is.nisland; k++) {
    const int n = is.ndofs[k];
    const int* dofs = is.dofs + is.dofadr[k];
    for (int a = 0; a < n; a++) loc_[local_[dofs[a]]] = x[dofs[a]];
    CholSolve(H_.data() + hadr_[k], n, loc_.data());
    for (int a = 0; a < n; a++) x[dofs[a]] = loc_[local_[dofs[a]]];
  }
  for (int t = 0; t < is.ntree; t++) {
    if (is.tree_island[t] >= 0) continue;
    const int begin = is.tree_dofadr[t];
    p.mass.Solve(x, begin, begin + is.tree_dofnum[t]);
  }
}

void SoftTangent::RowTerms(const Problem& p, const ProblemTangent& dir, const double* dJv) {
  const SparseRows& J = p.J;
  const double h = h_;
  const double* vn = v_next_;

  // frame rows: t = dJ v+ - dvel - h daref, rho = dR / R (a contact's rows share the normal's)
  for (int i = 0; i < p.nrow; i++) {
    double t = 0;
    if (dJv) {
      t = dJv[i];
    } else if (dir.J) {
      const int adr = J.rowadr[i];
      for (int k = 0; k < J.rownnz[i]; k++) t += dir.J[adr + k] * vn[J.colind[adr + k]];
    }
    if (dir.vel) t -= dir.vel[i];
    if (dir.aref) t -= h * dir.aref[i];
    t_[i] = t;
  }
  for (int i = 0; i < p.nrow; i++) {
    const int c = con_of_row_[i];
    const int ri = c < 0 ? i : p.con[c].row;
    rho_[i] = dir.R ? dir.R[ri] / p.R[ri] : 0;
  }

  // MuJoCo rows: te = t_a + c t_b, g = Phi te - h f rho
  for (int e = 0; e < nrow_; e++) {
    te_[e] = rb_[e] < 0 ? t_[ra_[e]] : t_[ra_[e]] + rc_[e] * t_[rb_[e]];
    const double rho = rho_[ra_[e]];
    switch (st_[e]) {
      case kSoftQuadratic:
        ge_[e] = -D_[e] * te_[e] - h * f_[e] * rho;
        break;
      case kSoftCone:
        ge_[e] = -h * f_[e] * rho;  // cone part added per contact below
        break;
      default:
        ge_[e] = 0;
    }
  }
  ConeAdd(p, te_.data(), -1, ge_.data());
}

void SoftTangent::RowRhs(const Problem& p, const ProblemTangent& dir, double* rhs,
                         const double* dJv, int island) {
  if (island >= 0) {
    const Islands& is = p.islands;
    IslandRowRhs(p, dir, dJv, is.rows + is.rowadr[island], is.nrows[island], rhs);
    return;
  }
  RowTerms(p, dir, dJv);
  RowsAdd(p, ge_.data(), rhs);
}

void SoftTangent::IslandRowRhs(const Problem& p, const ProblemTangent& dir, const double* dJv,
                               const int* rows, int n, double* rhs, double* fold) {
  // RowTerms and RowsAdd on these rows and their MuJoCo rows alone, a row or a contact's rows at
  // a time (they share the normal's rho)
  const SparseRows& J = p.J;
  const double h = h_;
  double* fd = fold ? fold : fold_.data();
  for (int a = 0; a < n;) {
    const int i = rows[a], c = con_of_row_[i];
    const int nr = c >= 0 && p.con[c].row == i ? p.con[c].dim : 1;  // (its frame rows)
    a += nr;
    const double rho = dir.R && dir.R[i] != 0 ? dir.R[i] / p.R[i] : 0;  // (no division for 0)
    // a row (contact) whose terms are zero, one the direction does not reach, adds zeros
    bool zero = rho == 0;
    for (int r = i; r < i + nr; r++) {
      double t = 0;
      if (dJv) {
        t = dJv[r];
      } else if (dir.J) {
        const int adr = J.rowadr[r];
        for (int k = 0; k < J.rownnz[r]; k++) t += dir.J[adr + k] * v_next_[J.colind[adr + k]];
      }
      if (dir.vel) t -= dir.vel[r];
      if (dir.aref) t -= h * dir.aref[r];
      t_[r] = t;
      fd[r] = 0;
      zero = zero && t == 0;
    }
    const int e0 = efc_of_row_[i], e1 = e0 + EfcCount(p, i);
    if (zero || e1 == e0) continue;
    for (int e = e0; e < e1; e++) {
      te_[e] = rb_[e] < 0 ? t_[ra_[e]] : t_[ra_[e]] + rc_[e] * t_[rb_[e]];
      ge_[e] = st_[e] == kSoftQuadratic ? -D_[e] * te_[e] - h * f_[e] * rho
               : st_[e] == kSoftCone    ? -h * f_[e] * rho
                                        : 0;
    }
    if (c >= 0) ConeAddContact(p, c, te_.data(), -1, ge_.data());
    for (int e = e0; e < e1; e++) {
      if (ge_[e] == 0) continue;
      fd[ra_[e]] += ge_[e];
      if (rb_[e] >= 0) fd[rb_[e]] += ge_[e] * rc_[e];
    }
  }
  if (rhs) AddRowsT(p.J, p.J.val, fd, rows, n, group_, rhs);
}

void SoftTangent::IslandRowFold(const Problem& p, const ProblemTangent& dir, const double* dJv,
                                int island, double* fold) {
  const Islands& is = p.islands;
  const int n = is.nrows[island];
  if (n < p.nrow) {
    for (int i = 0; i < p.nrow; i++) fold[i] = 0;
  }
  IslandRowRhs(p, dir, dJv, is.rows + is.rowadr[island], n, nullptr, fold);
}

namespace {

// AddRowsT for ns slots at once: X += J' F on the groups of rows[0..n), F slot-major (F[s * ldf
// + row]), X row-major (X[dof * ldx + s]); each entry of X gets AddRowsT's adds in its order (a
// group none of whose slots has a coefficient skipped)
template <int G>
CK_ALWAYS_INLINE void AddGroupBlock(const SparseRows& J, const double* F, size_t ldf, int i, int g,
                                    int ns, double* X, int ldx) {
  const int nr = G > 0 ? G : g;
  double f[columns::kMaxGroup][SoftTangent::kBlock];  // (a group's rows: at most a contact's 6)
  bool any = false;
  for (int r = 0; r < nr; r++) {
    for (int s = 0; s < ns; s++) {
      f[r][s] = F[s * ldf + i + r];
      any |= f[r][s] != 0;
    }
  }
  if (!any) return;
  columns::AddGroupT<G, SoftTangent::kBlock>(J, f, i, nr, ns, X, ldx);
}

CK_ALWAYS_INLINE void AddRowsTBlockBody(const SparseRows& J, const double* F, size_t ldf,
                                        const int* rows, int n, const int* group, int ns, double* X,
                                        int ldx) {
  for (int a = 0; a < n;) {
    const int i = rows[a], g = std::max(group[i], 1);
    a += g;
    // (a plain row and condim 3 unrolled; a contact's other dims in the generic loop)
    if (g == 1) {
      AddGroupBlock<1>(J, F, ldf, i, g, ns, X, ldx);
    } else if (g == 3) {
      AddGroupBlock<3>(J, F, ldf, i, g, ns, X, ldx);
    } else {
      AddGroupBlock<0>(J, F, ldf, i, g, ns, X, ldx);
    }
  }
}

#if CK_AVX2_CLONES
CK_TARGET_AVX2 void AddRowsTBlockAvx2(const SparseRows& J, const double* F, size_t ldf,
                                      const int* rows, int n, const int* group, int ns, double* X,
                                      int ldx) {
  AddRowsTBlockBody(J, F, ldf, rows, n, group, ns, X, ldx);
}
#endif

}  // namespace

void SoftTangent::IslandFoldBlock(const Problem& p, int island, const double* F, size_t ldf, int ns,
                                  double* X, int ldx) const {
  const Islands& is = p.islands;
  const int* rows = is.rows + is.rowadr[island];
  const int n = is.nrows[island];
#if CK_AVX2_CLONES
  if (Avx2Kernels::On()) return AddRowsTBlockAvx2(p.J, F, ldf, rows, n, group_, ns, X, ldx);
#endif
  AddRowsTBlockBody(p.J, F, ldf, rows, n, group_, ns, X, ldx);
}

void SoftTangent::RowAdjoint(const Problem& p, const double* y, double* tau, double* sigma) {
  // IslandRowRhs' mu' J_E' g = sum_e g_e ye_e (ye = J_e mu) with g_e = -D_e te_e - h f_e rho (a
  // quadratic row; a cone row: -h f_e rho minus its cone Hessian times te) and te_e = t_a + c t_b:
  // the weight of te is -D ye minus the cone Hessian's transpose times ye, folded onto t_a, t_b
  const double h = h_;
  double* ye = te_.data();
  double* we = ge_.data();
  for (int i = 0; i < p.nrow; i++) tau[i] = sigma[i] = 0;
  for (int i = 0; i < p.nrow; i++) {
    const int e0 = efc_of_row_[i], e1 = e0 + EfcCount(p, i);
    for (int e = e0; e < e1; e++) {
      ye[e] = rb_[e] < 0 ? y[ra_[e]] : y[ra_[e]] + rc_[e] * y[rb_[e]];
      we[e] = st_[e] == kSoftQuadratic ? -D_[e] * ye[e] : 0;
      if (st_[e] == kSoftQuadratic || st_[e] == kSoftCone) sigma[i] -= h * f_[e] * ye[e];
    }
    const int c = con_of_row_[i];
    if (c >= 0 && e1 > e0) {
      const Contact& con = p.con[c];
      const int adr = con.efc_address, dim = con.dim;
      if (dim > 1 && st_[adr] == kSoftCone) {
        const double* hc = hcone_.data() + 36 * c;
        for (int q = 0; q < dim; q++) {
          double s = 0;
          for (int r = 0; r < dim; r++) s += hc[r * dim + q] * ye[adr + r];
          we[adr + q] -= s;
        }
      }
    }
    for (int e = e0; e < e1; e++) {
      tau[ra_[e]] += we[e];
      if (rb_[e] >= 0) tau[rb_[e]] += rc_[e] * we[e];
    }
  }
}

namespace {

// the rows dofs[0..n) (or begin..begin + n) of the row-major block x (nb columns) are zero
bool BlockZero(const double* x, int nb, const int* dofs, int n) {
  for (int a = 0; a < n; a++) {
    const double* r = x + static_cast<size_t>(dofs[a]) * nb;
    for (int c = 0; c < nb; c++) {
      if (r[c] != 0) return false;
    }
  }
  return true;
}

bool BlockZero(const double* x, int nb, int begin, int n) {
  const double* r = x + static_cast<size_t>(begin) * nb;
  for (int i = 0; i < n * nb; i++) {
    if (r[i] != 0) return false;
  }
  return true;
}

}  // namespace

void SoftTangent::SolveBlock(const Problem& p, double* x, int nb) {
  const Islands& is = p.islands;
  double* blk = block_.data();
  for (int k = 0; k < is.nisland; k++) {
    const int n = is.ndofs[k];
    const int* dofs = is.dofs + is.dofadr[k];
    const double* L = H_.data() + hadr_[k];
    if (BlockZero(x, nb, dofs, n)) continue;  // no column reaches the island: H^-1 0 = 0
    for (int a = 0; a < n; a++) {
      const int la = local_[dofs[a]];
      for (int c = 0; c < nb; c++) blk[la * nb + c] = x[dofs[a] * nb + c];
    }

    CholSolveBlock(L, n, blk, nb, nb);  // L L' y = b
    for (int a = 0; a < n; a++) {
      const int la = local_[dofs[a]];
      for (int c = 0; c < nb; c++) x[dofs[a] * nb + c] = blk[la * nb + c];
    }
  }

  // trees outside the islands: M^-1
  for (int t = 0; t < is.ntree; t++) {
    if (is.tree_island[t] >= 0) continue;
    const int begin = is.tree_dofadr[t];
    if (BlockZero(x, nb, begin, is.tree_dofnum[t])) continue;
    p.mass.SolveBlock(x, nb, begin, begin + is.tree_dofnum[t]);
  }
}

void SoftTangent::ForceTangent(const Problem& p, const ProblemTangent& dir, double* dforce,
                               double* dv_next) {
  const int nv = p.nv;
  const SparseRows& J = p.J;
  const double h = h_;
  const double* vn = v_next_;
  RowTerms(p, dir, nullptr);

  // rhs = M dv_free - dM (v+ - v_free) + h dJ' f + sum J_e' g_e
  double* rhs = rhs_.data();
  if (dir.v_free) {
    p.mass.Mul(dir.v_free, rhs);
  } else {
    for (int j = 0; j < nv; j++) rhs[j] = 0;
  }
  if (dir.M) {
    for (int j = 0; j < nv; j++) tmp_[j] = vn[j] - p.v_free[j];
    p.mass.SubMulValues(dir.M, tmp_.data(), rhs);
  }
  if (dir.J) {
    for (int e = 0; e < nrow_; e++) {
      if (f_[e] == 0) continue;
      const double a = h * f_[e];
      for (int q = 0; q < 2; q++) {
        const int i = q == 0 ? ra_[e] : rb_[e];
        if (i < 0) continue;
        const double ai = q == 0 ? a : a * rc_[e];
        const int adr = J.rowadr[i];
        for (int k = 0; k < J.rownnz[i]; k++) rhs[J.colind[adr + k]] += ai * dir.J[adr + k];
      }
    }
  }
  RowsAdd(p, ge_.data(), rhs);

  // dv+ = H^-1 rhs
  Solve(p, rhs);
  if (dv_next) {
    for (int j = 0; j < nv; j++) dv_next[j] = rhs[j];
  }

  // MuJoCo row forces: df = Phi (te + J_e dv+) / h - f rho
  for (int e = 0; e < nrow_; e++) {
    if (st_[e] == kSoftQuadratic || st_[e] == kSoftCone) te_[e] += RowDot(p, e, rhs);
  }
  for (int e = 0; e < nrow_; e++) {
    const double rho = rho_[ra_[e]];
    ge_[e] = st_[e] == kSoftQuadratic ? -D_[e] * te_[e] / h - f_[e] * rho
             : st_[e] == kSoftCone    ? -f_[e] * rho
                                      : 0;
  }
  ConeAdd(p, te_.data(), -1 / h, ge_.data());

  // frame rows
  const int nplain = p.ne + p.nf + p.nl;
  for (int i = 0; i < nplain; i++) dforce[i] = ge_[i];
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const int adr = con.efc_address;
    double* out = dforce + con.row;
    if (con.dim == 1 || rb_[adr] < 0) {
      for (int r = 0; r < con.dim; r++) out[r] = ge_[adr + r];
    } else {
      out[0] = 0;
      for (int e = 0; e < 2 * (con.dim - 1); e++) out[0] += ge_[adr + e];
      for (int j = 1; j < con.dim; j++) {
        out[j] = con.mu[j - 1] * (ge_[adr + 2 * (j - 1)] - ge_[adr + 2 * (j - 1) + 1]);
      }
    }
  }
}

}  // namespace contactkit
