// Copyright 2026 The contactkit developers.
//
// comfree's force tangent: the closed-form facet forces differentiated along the problem data.
#include <algorithm>
#include <cmath>

#include "solvers/comfree/comfree.h"
#include "solvers/common/columns.h"
#include "solvers/common/dense.h"

namespace contactkit {
namespace {

double Sign(double x) { return (x > 0) - (x < 0); }

// row's island is one the direction leaves alone (dir.touched): its force tangent is zero
bool Untouched(const Problem& p, const ProblemTangent& dir, int row) {
  const int k = p.islands.row_island[row];
  return dir.touched && k >= 0 && !dir.touched[k];
}

// a plain row whose force moves with the direction: an equality, a limit with a positive
// argument a, a friction-loss row strictly inside its bounds
bool PlainActive(const Problem& p, int i, double a) {
  return p.kind[i] == kRowLimit      ? a > 0
         : p.kind[i] == kRowFriction ? a > -p.floss[i] && a < p.floss[i]
                                     : true;
}

}  // namespace

void ComfreeSolver::FreshRowCache(const Problem& p) {
  if (!wstale_) return;
  for (int i = 0; i < p.nrow; i++) wadr_[i] = -1;
  wused_ = 0;
  wstale_ = false;
}

bool ComfreeSolver::ReserveRow(const Problem& p, int row) {
  size_t size = 0;
  int ntree = 0;
  wtree_[row] = -1;
  ForEachRowTree(p, row, [&](int t, int, int) {
    size += p.islands.tree_dofnum[t];
    wtree_[row] = ntree++ ? -1 : t;
  });
  if (wused_ + size > wpool_.size()) return false;
  wadr_[row] = static_cast<int>(wused_);
  wused_ += size;
  return true;
}

const double* ComfreeSolver::RowSolve(const Problem& p, int row) {
  FreshRowCache(p);
  if (wadr_[row] == -1) {
    if (!ReserveRow(p, row)) {
      wadr_[row] = -2;
    } else {
      const SparseRows& J = p.J;
      const int adr = J.rowadr[row];
      double* w = tangent_.data();
      double* out = wpool_.data() + wadr_[row];
      for (int q = 0; q < J.rownnz[row]; q++) w[J.colind[adr + q]] = J.val[adr + q];
      ForEachRowTree(p, row, [&](int t, int, int) {
        const int begin = p.islands.tree_dofadr[t], end = begin + p.islands.tree_dofnum[t];
        p.mass.Solve(w, begin, end);
        for (int i = begin; i < end; i++) {
          *out++ = w[i];
          w[i] = 0;
        }
      });
    }
  }
  return wadr_[row] >= 0 ? wpool_.data() + wadr_[row] : nullptr;
}

void ComfreeSolver::RowSolves(const Problem& p) {
  // RowSolve of the rows whose inverse mass ForceTangent differentiates (arow_ of the rows with a
  // gain, the rolling rows: ForEachRollRow) not cached yet: their places in the cache in row order,
  // then per tree one block solve of up to kRowBlock of them (TreeMass::SolveBlock: each column
  // gets Solve's operations)
  FreshRowCache(p);
  if (!row_solves_on_) return;
  int n = 0;
  auto add = [&](int row) { ListRowSolve(p, row, &n); };
  for (int i = 0; i < p.ne + p.nf + p.nl; i++) {
    if (gain_[i] != 0) add(arow_[i]);
  }
  for (int c = 0; c < p.ncon; c++) {
    if (gain_[p.con[c].row] != 0) add(arow_[p.con[c].row]);
  }
  ForEachRollRow(p, add);
  BlockRowSolves(p, n);
}

void ComfreeSolver::ListRowSolve(const Problem& p, int row, int* n) {
  if (wadr_[row] != -1 || rsmark_[row]) return;
  if (!ReserveRow(p, row)) return;  // (full: RowSolve marks it)
  rsmark_[row] = 1;
  rslist_[(*n)++] = row;
}

void ComfreeSolver::BlockRowSolves(const Problem& p, int n) {
  const SparseRows& J = p.J;
  // the listed rows of each tree (counting sort: rstadr_, rstrow_; a row touches one or two)
  const int ntree = p.islands.ntree;
  for (int t = 0; t <= ntree; t++) rstadr_[t] = 0;
  for (int a = 0; a < n; a++) {
    ForEachRowTree(p, rslist_[a], [&](int t, int, int) { rstadr_[t + 1]++; });
  }
  for (int t = 0; t < ntree; t++) rstadr_[t + 1] += rstadr_[t];
  for (int a = 0; a < n; a++) {
    ForEachRowTree(p, rslist_[a], [&](int t, int, int) { rstrow_[rstadr_[t]++] = rslist_[a]; });
  }
  for (int t = ntree; t > 0; t--) rstadr_[t] = rstadr_[t - 1];
  rstadr_[0] = 0;
  double* X = rsblk_.data();
  for (int t = 0; t < ntree; t++) {
    const int begin = p.islands.tree_dofadr[t], end = begin + p.islands.tree_dofnum[t];
    for (int a = rstadr_[t]; a < rstadr_[t + 1]; a += kRowBlock) {
      // up to kRowBlock of the tree's rows, their entries there in X's columns
      const int nb = std::min(kRowBlock, rstadr_[t + 1] - a);
      const int* cols = rstrow_.data() + a;
      for (size_t e = static_cast<size_t>(begin) * nb; e < static_cast<size_t>(end) * nb; e++)
        X[e] = 0;
      for (int k = 0; k < nb; k++) {
        const int adr = J.rowadr[cols[k]];
        ForEachRowTree(p, cols[k], [&](int tr, int k0, int k1) {
          for (int q = k0; q < k1 && tr == t; q++) X[J.colind[adr + q] * nb + k] = J.val[adr + q];
        });
      }
      p.mass.SolveBlock(X, nb, begin, end);
      for (int k = 0; k < nb; k++) {
        double* out = wpool_.data() + wadr_[cols[k]] + TreeOffset(p, cols[k], t);
        for (int jj = begin; jj < end; jj++) out[jj - begin] = X[jj * nb + k];
      }
    }
  }
  for (int a = 0; a < n; a++) rsmark_[rslist_[a]] = 0;
}

double ComfreeSolver::InvMassTangent(const Problem& p, int row, const ProblemTangent& dir) {
  if (!dir.J && !dir.M) return 0;
  const SparseRows& J = p.J;
  const TreeMass& mass = p.mass;
  const int adr = J.rowadr[row];
  double* w = tangent_.data();

  // dA = 2 dJ w - w' dM w with w = M^-1 J', tree by tree (w from RowSolve's cache, or solved
  // here when it is full); dJ w given where the row's weight was (TangentRowWeight)
  // (a row already in the cache read directly: RowSolve's lookup)
  const double* cached =
      !wstale_ && wadr_[row] >= 0 && facet_dims_on_ ? wpool_.data() + wadr_[row] : RowSolve(p, row);
  if (!cached) {
    for (int q = 0; q < J.rownnz[row]; q++) w[J.colind[adr + q]] = J.val[adr + q];
  }
  const bool given = cached && dir.J_w && dir.J_w_rows[row];
  double dA = given ? 2 * dir.J_w[row] : 0;
  if (given && wtree_[row] >= 0 && wtree_cut_on_) {
    // (one tree, dJ w given: the loop's terms below without its pass over the row)
    const bool quad = dir.M && dmtree_[wtree_[row]];
    if (!quad) return dA;
    if (qset_[row]) return dA - quad_[row];
  }
  ForEachRowTree(p, row, [&](int t, int q0, int q1) {
    const int begin = p.islands.tree_dofadr[t], end = begin + p.islands.tree_dofnum[t];
    const bool quad = dir.M && dmtree_[t];  // (dM is zero on trees the direction misses)
    if (cached) {
      const double* wt = cached;
      cached += end - begin;
      if (dir.J && !given) {
        for (int q = q0; q < q1; q++) dA += 2 * dir.J[adr + q] * wt[J.colind[adr + q] - begin];
      }
      if (!quad) return;
      if (qset_[row]) {
        dA -= quad_[row];  // (QuadTangents: dM's tree is this one)
        return;
      }
      for (int i = begin; i < end; i++) w[i] = wt[i - begin];
    } else {
      mass.Solve(w, begin, end);
      if (dir.J) {
        for (int q = q0; q < q1; q++) dA += 2 * dir.J[adr + q] * w[J.colind[adr + q]];
      }
    }
    if (quad) {
      // (dM's rows, when listed, lie on this tree: dM is nonzero here)
      dA = dir.M_rows ? mass.SubQuadValuesRows(dir.Mass(), dir.M_rows, dir.M_nrows, w, dA)
                      : mass.SubQuadValues(dir.Mass(), w, dA, begin, end);
    }
    for (int i = begin; i < end; i++) w[i] = 0;
  });
  return dA;
}

double ComfreeSolver::PatchInvMassTangent(const Problem& p, int c0, const ProblemTangent& dir) {
  // A = (mean of A_i^n)^(1/n) over the patch's contacts that move anything (SharePatches):
  // dA = sum_i (A_i / A)^(n-1) dA_i / count, with A_i = amul_ times the inverse mass of arow_
  int count = 0;
  for (int c = c0; c < p.ncon && patch_[c] == c0; c++) count += gain_[p.con[c].row] > 0;
  double dA = 0;
  for (int c = c0; c < p.ncon && patch_[c] == c0; c++) {
    const int row = p.con[c].row;
    if (!(gain_[row] > 0)) continue;
    const double dAi = amul_[row] * InvMassTangent(p, arow_[row], dir);
    if (count == 1) return dAi;
    const double Ai = amul_[row] * rowinv_[arow_[row]];
    dA += std::pow(Ai / invmass_[row], kComfreePatchPower - 1) * dAi;
  }
  return dA / count;
}

void ComfreeSolver::QuadRows(const Problem& p, int tree, const MassForms* forms) {
  // the rows ForceTangent reaches (PatchInvMassTangent's, the plain rows', the rolling rows') on
  // the tree's island that touch the tree and whose w is cached (the others InvMassTangent forms
  // itself)
  const int island = p.islands.tree_island[tree], n = p.islands.tree_dofnum[tree];
  const int begin = p.islands.tree_dofadr[tree];
  const int nplain = p.ne + p.nf + p.nl, first = qtused_;
  qtadr_[tree] = first;
  qtnum_[tree] = 0;
  qtform_[tree] = 0;
  auto add = [&](int row) {
    if (qset_[row] || p.islands.row_island[row] != island) return;  // (another island's row)
    if (qtused_ == static_cast<int>(qtrow_.size()) || !RowSolve(p, row)) return;
    bool on = false;
    ForEachRowTree(p, row, [&](int t, int, int) { on = on || t == tree; });
    if (!on) return;  // (another tree's row)
    qset_[row] = 1;
    qtrow_[qtused_++] = row;
  };
  for (int c = 0; c < p.ncon; c++) {
    if (gain_[p.con[c].row] > 0) add(arow_[p.con[c].row]);
  }
  for (int i = 0; i < nplain; i++) {
    if (gain_[i] != 0) add(arow_[i]);
  }
  ForEachRollRow(p, add);
  const int nq = qtused_ - first, K = kQuadSlots;
  // (full blocks of K, the last one as wide as QuadWidth of its rows; with forms, each row's
  // w' dM_k w for the tree's dofs k)
  const size_t size =
      forms ? static_cast<size_t>(n) * nq
            : static_cast<size_t>(n) * (nq / K * K + (nq % K ? QuadWidth(nq % K) : 0));
  for (int a = first; a < qtused_; a++) qset_[qtrow_[a]] = 0;
  if (qxused_ + size > quadx_.size()) {
    qtused_ = first;  // (the pool is full: InvMassTangent forms them)
    return;
  }
  qtform_[tree] = forms != nullptr;
  if (forms) {
    double* x = quadx_.data() + qxused_;
    // (kFormLanes rows at a time: MassForms::FormsLanes)
    const int L = forms_lanes_on_ ? MassForms::kFormLanes : 1;
    for (int s = 0; s < nq; s += L) {
      const double* w[MassForms::kFormLanes];
      const int nl = std::min(L, nq - s);
      for (int l = 0; l < nl; l++) w[l] = QuadW(p, qtrow_[first + s + l], tree);
      if (L > 1) {
        forms->FormsLanes(w, nl, begin, begin + n, x + static_cast<size_t>(s) * n, n);
      } else {
        forms->Forms(w[0], begin, begin + n, x + static_cast<size_t>(s) * n);
      }
    }
    qtx_[tree] = qxused_;
    qxused_ += size;
    qtnum_[tree] = nq;
    return;
  }
  // their w on the tree, kQuadSlots rows per block, dof-major in a block as wide as its rows
  // rounded up to even (QuadWidth; the last block padded)
  double* x = quadx_.data() + qxused_;
  for (size_t e = 0; e < size; e++) x[e] = 0;
  for (int s = 0; s < nq; s++) {
    const double* w = QuadW(p, qtrow_[first + s], tree);
    const int W = QuadWidth(nq - s / K * K);
    double* xs = x + static_cast<size_t>(s / K) * n * K + s % K;
    for (int i = 0; i < n; i++) xs[static_cast<size_t>(i) * W] = w[i];
  }
  qtx_[tree] = qxused_;
  qxused_ += size;
  qtnum_[tree] = nq;
}

const double* ComfreeSolver::QuadW(const Problem& p, int row, int tree) {
  // (RowSolve's w of the row, packed by its trees)
  int off = -1, size = 0;
  ForEachRowTree(p, row, [&](int t, int, int) {
    if (t == tree) off = size;
    size += p.islands.tree_dofnum[t];
  });
  return RowSolve(p, row) + off;
}

void ComfreeSolver::QuadTangents(const Problem& p, const ProblemTangent& dir) {
  for (int a = 0; a < nqrow_; a++) qset_[qrow_[a]] = 0;
  nqrow_ = 0;
  if (!dir.M || !dir.M_rows || dir.M_nrows == 0) return;
  const int tree = p.dof_tree[dir.M_rows[0]];
  const bool forms = dir.M_forms && dir.M_dof >= 0 && p.dof_tree[dir.M_dof] == tree;
  if (qtadr_[tree] < 0) QuadRows(p, tree, forms ? dir.M_forms : nullptr);
  if (!qtform_[tree]) {
    for (int s = 0; s < qtnum_[tree]; s += kQuadSlots) QuadPass(p, dir, tree, s);
    return;
  }
  if (!forms) return;  // (the tree's rows hold forms: InvMassTangent forms this one's)
  // the rows' forms of dM_k at k = M_dof (QuadRows)
  const int n = p.islands.tree_dofnum[tree], k = dir.M_dof - p.islands.tree_dofadr[tree];
  const double* x = quadx_.data() + qtx_[tree];
  const int* rows = qtrow_.data() + qtadr_[tree];
  for (int s = 0; s < qtnum_[tree]; s++) {
    quad_[rows[s]] = x[static_cast<size_t>(s) * n + k];
    qset_[rows[s]] = 1;
    qrow_[nqrow_++] = rows[s];
  }
}

namespace {

// QuadPass' sums for a block of 2 H lanes (dof-major, stride 2 H) over dM's listed rows, into out
// (2 H), the lanes in SIMD pairs: each row's terms in the order of a pass over it alone
template <int H>
void QuadPairs(const TreeMass& mass, const ProblemTangent& dir, const double* x, int begin,
               double* out) {
  using columns::Load;
  using columns::Pair;
  const double* V = dir.Mass();
  Pair q[H] = {}, xi[H];
  for (int r = 0; r < dir.M_nrows; r++) {
    const int i = dir.M_rows[r];
    const double* x0 = x + static_cast<size_t>(i - begin) * 2 * H;
    for (int h = 0; h < H; h++) xi[h] = Load<2>(x0 + 2 * h);
    const Pair vii = {V[mass.madr[i]], V[mass.madr[i]]};
    for (int h = 0; h < H; h++) q[h] += vii * xi[h] * xi[h];
    int adr = mass.madr[i] + 1;
    for (int j = mass.parent[i]; j >= 0; j = mass.parent[j], adr++) {
      const double* xj = x + static_cast<size_t>(j - begin) * 2 * H;
      const double v2 = 2 * V[adr];
      const Pair v = {v2, v2};
      for (int h = 0; h < H; h++) q[h] += v * xi[h] * Load<2>(xj + 2 * h);
    }
  }
  for (int h = 0; h < H; h++) columns::Store<2>(out + 2 * h, q[h]);
}

}  // namespace

void ComfreeSolver::QuadPass(const Problem& p, const ProblemTangent& dir, int tree, int first) {
  // SubQuadValuesRows' terms for each of the block's rows (the tree's quad rows from first),
  // each summed apart and subtracted by InvMassTangent
  constexpr int K = kQuadSlots;
  const int begin = p.islands.tree_dofadr[tree], n = p.islands.tree_dofnum[tree];
  const int nq = std::min(qtnum_[tree] - first, K), H = QuadWidth(nq) / 2;
  const double* x = quadx_.data() + qtx_[tree] + static_cast<size_t>(first / K) * n * K;
  double q[K];
  switch (H) {
    case 1:
      QuadPairs<1>(p.mass, dir, x, begin, q);
      break;
    case 2:
      QuadPairs<2>(p.mass, dir, x, begin, q);
      break;
    case 3:
      QuadPairs<3>(p.mass, dir, x, begin, q);
      break;
    case 4:
      QuadPairs<4>(p.mass, dir, x, begin, q);
      break;
    case 5:
      QuadPairs<5>(p.mass, dir, x, begin, q);
      break;
    case 6:
      QuadPairs<6>(p.mass, dir, x, begin, q);
      break;
    case 7:
      QuadPairs<7>(p.mass, dir, x, begin, q);
      break;
    default:
      QuadPairs<8>(p.mass, dir, x, begin, q);
      break;
  }
  const int* rows = qtrow_.data() + qtadr_[tree] + first;
  for (int s = 0; s < nq; s++) {
    quad_[rows[s]] = q[s];
    qset_[rows[s]] = 1;
    qrow_[nqrow_++] = rows[s];
  }
}

void ComfreeSolver::PrepareTangent(const Problem& p) {
  // each contact's sums over its active facets: ForceTangent's facet loop is linear in them
  double coef[6 * kComfreeMaxFacets], weight[kComfreeMaxFacets];
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const int row = con.row, dim = con.dim;
    double* a = fsum_.data() + static_cast<size_t>(c) * kFacetSums;  // sum_j arg_j c_j
    double* P = a + 6;                                               // sum_j w_j c_j c_j'
    double* Pv = P + 36;                                             // P J v_smooth
    for (int e = 0; e < kFacetSums; e++) a[e] = 0;
    // (whether the contact's rows share their columns: VelocityTangents)
    const int* col = p.J.colind + p.J.rowadr[row];
    fshared_[c] = 1;
    for (int r = 1; r < dim && fshared_[c]; r++) {
      const int* cr = p.J.colind + p.J.rowadr[row + r];
      fshared_[c] =
          p.J.rownnz[row + r] == p.J.rownnz[row] && std::equal(col, col + p.J.rownnz[row], cr);
    }
    if (gain_[row] == 0) continue;
    const int nf = ComfreeFacets(con, settings_.facets, coef, weight);
    const double* arg = facet_.data() + static_cast<size_t>(c) * kComfreeMaxFacets;
    for (int j = 0; j < nf; j++) {
      if (!(arg[j] > 0)) continue;
      const double* cj = coef + 6 * j;
      for (int r = 0; r < dim; r++) {
        a[r] += arg[j] * cj[r];
        for (int s = 0; s < dim; s++) P[6 * r + s] += weight[j] * cj[r] * cj[s];
      }
    }
    for (int r = 0; r < dim; r++) {
      for (int s = 0; s < dim; s++) Pv[r] += P[6 * r + s] * vel_[row + s];
    }
  }
  capped_ = false;
  for (int i = 0; i < p.nrow && !capped_; i++) capped_ = cap_[i] < 1;
  for (int t = 0; t < p.islands.ntree; t++) qtadr_[t] = -1;
  qtused_ = 0;
  qxused_ = 0;
  RowSolves(p);
  RollCross(p);
  ltstale_ = true;
  tstale_ = false;
}

namespace {

// tangent of J_r v_smooth: J dv_free and dJ v_free summed apart, in one pass over the row (dJ
// v_free given: dir.J_vfree)
double VelocityTangent(const Problem& p, const ProblemTangent& dir, int row) {
  const int adr = p.J.rowadr[row], n = p.J.rownnz[row];
  const int* col = p.J.colind + adr;
  if (!dir.J || dir.J_vfree) {
    const double a = dir.v_free ? p.J.Dot(row, dir.v_free) : 0.0;
    return dir.J_vfree ? a + dir.J_vfree[row] : a;
  }
  const double* dJ = dir.J + adr;
  double a = 0, b = 0;
  if (dir.v_free) {
    const double* val = p.J.val + adr;
    for (int q = 0; q < n; q++) {
      a += val[q] * dir.v_free[col[q]];
      b += dJ[q] * p.v_free[col[q]];
    }
  } else {
    for (int q = 0; q < n; q++) b += dJ[q] * p.v_free[col[q]];
  }
  return a + b;
}

// VelocityTangent of a contact's D rows that share their columns, in one pass over them (each
// row's sums as VelocityTangent forms them) into ds
template <int D>
void VelocityTangents(const Problem& p, const ProblemTangent& dir, int row, double* ds) {
  const int n = p.J.rownnz[row];
  const int* col = p.J.colind + p.J.rowadr[row];
  const double* val[D];
  double a[D], b[D];
  for (int r = 0; r < D; r++) {
    val[r] = p.J.val + p.J.rowadr[row + r];
    a[r] = b[r] = 0;
  }
  if (dir.v_free) {
    for (int q = 0; q < n; q++) {
      const double x = dir.v_free[col[q]];
      for (int r = 0; r < D; r++) a[r] += val[r][q] * x;
    }
  }
  if (!dir.J || dir.J_vfree) {
    for (int r = 0; r < D; r++) ds[r] = dir.J_vfree ? a[r] + dir.J_vfree[row + r] : a[r];
    return;
  }
  const double* dJ[D];
  for (int r = 0; r < D; r++) dJ[r] = dir.J + p.J.rowadr[row + r];
  for (int q = 0; q < n; q++) {
    const double x = p.v_free[col[q]];
    for (int r = 0; r < D; r++) b[r] += dJ[r][q] * x;
  }
  for (int r = 0; r < D; r++) ds[r] = a[r] + b[r];
}

// relative tangent of r / (1 - r) = diag_approx / R
double RatioTangent(const Problem& p, const ProblemTangent& dir, int row) {
  return (dir.diag_approx ? dir.diag_approx[row] / p.diag_approx[row] : 0.0) -
         (dir.R ? dir.R[row] / p.R[row] : 0.0);
}

// a contact's force tangent from its facet sums (DirectionTangent): u = -cvc ds - k (dphi,
// ddisp), then dforce_r += rel a_r + G ((P u)_r - ddamp Pv_r) / h for its dim <= D rows (D its
// dim: the loops unrolled, the same operations)
struct FacetTerms {
  double cvc, k, dphi;
  const double* ddisp;
  double rel, G, ddamp, h;
  template <int D>
  void Add(const double* ds, const double* a, const double* P, const double* Pv, double* f,
           int dim = D) const {
    double u[D];
    for (int r = 0; r < dim; r++) u[r] = -cvc * ds[r] - k * (r == 0 ? dphi : ddisp ? ddisp[r] : 0);
    for (int r = 0; r < dim; r++) {
      double Pu = 0;
      for (int q = 0; q < dim; q++) Pu += P[6 * r + q] * u[q];
      f[r] += rel * a[r] + G * (Pu - ddamp * Pv[r]) / h;
    }
  }
};

}  // namespace

double ComfreeSolver::TreeQuad(const Problem& p, const double* dM, int t, const double* u,
                               const double* v) {
  const TreeMass& mass = p.mass;
  const int b = p.islands.tree_dofadr[t], e = b + p.islands.tree_dofnum[t];
  double s = 0;
  for (int j = b; j < e; j++) {
    int m = mass.madr[j];
    s += dM[m++] * u[j - b] * v[j - b];
    for (int l = mass.parent[j]; l >= 0; l = mass.parent[l])
      s += dM[m++] * (u[j - b] * v[l - b] + u[l - b] * v[j - b]);
  }
  return s;
}

void ComfreeSolver::CoupledRelaxTangent(const Problem& p, const ProblemTangent& dir) {
  // dD_i / D_i = dratio_i - dA_i / A_i; d(D_j A_j) = D_j A_j dratio_j; dN_ij = dJ_i w_j +
  // dJ_j w_i - w_i' dM w_j on the trees both rows touch
  const int nrow = p.nrow;
  for (int i = 0; i < nrow; i++) {
    if (!Relaxes(p, i)) continue;
    const int c = rcon_[i];
    const double dA = c >= 0 ? PatchInvMassTangent(p, patch_[c], dir)
                             : amul_[i] * InvMassTangent(p, arow_[i], dir);
    ddrel_[i] = RatioTangent(p, dir, i) - dA / invmass_[i];
  }
  for (int j = 0; j < nrow; j++) {
    if (!Relaxes(p, j)) continue;
    const double* wj = RowSolve(p, j);
    double d = rd_[j] * invmass_[j] * RatioTangent(p, dir, j);
    ForEachCoupled(p, j, [&](int i) {
      const double* wi = RowSolve(p, i);
      const double n = CrossInvMass(p, p.J.val, i, j, wj);
      const double dn = CrossInvMassTangent(p, dir, i, j, wi, wj);
      d += rd_[i] * (ddrel_[i] * std::fabs(n) + (n > 0 ? dn : n < 0 ? -dn : 0));
    });
    drho_[j] = d;
  }
  // the norm's tangent: d rgam = sum_i (rrelax_i / rgam)^(P-1) d rrelax_i over the group
  for (int j = 0; j < nrow; j++) {
    if (!Relaxes(p, j) || !(cap_[j] < 1)) continue;
    if (rgroup_[j] < 0) {
      dgam_[j] = drho_[j];
      continue;
    }
    double d = 0;
    ForEachGroupRow(p, j, rgroup_[j], [&](int i) {
      d += std::pow(rrelax_[i] / rgam_[j], kComfreeRelaxPower - 1) * drho_[i];
    });
    dgam_[j] = d;
  }
}

void ComfreeSolver::CoupledRelaxAdjoint(const Problem& p) {
  // CoupledRelaxTangent transposed: adj_gam_ to the columns, then each column's terms to the
  // ratios, inverse masses (patches), J and M
  const int nrow = p.nrow;
  for (int i = 0; i < nrow; i++) adj_rho_[i] = 0;
  for (int j = 0; j < nrow; j++) {
    if (!Relaxes(p, j) || adj_gam_[j] == 0) continue;
    if (rgroup_[j] < 0) {
      adj_rho_[j] += adj_gam_[j];
      continue;
    }
    ForEachGroupRow(p, j, rgroup_[j], [&](int i) {
      adj_rho_[i] += adj_gam_[j] * std::pow(rrelax_[i] / rgam_[j], kComfreeRelaxPower - 1);
    });
  }
  for (int j = 0; j < nrow; j++) {
    const double a = adj_rho_[j];
    if (!Relaxes(p, j) || a == 0) continue;
    adj_ratio_[j] += a * rd_[j] * invmass_[j];
    const double* wj = RowSolve(p, j);
    ForEachCoupled(p, j, [&](int i) {
      const double* wi = RowSolve(p, i);
      const double n = CrossInvMass(p, p.J.val, i, j, wj), e = a * rd_[i] * std::fabs(n);
      adj_ratio_[i] += e;
      if (rcon_[i] >= 0) {
        adj_patch_[patch_[rcon_[i]]] -= e / invmass_[i];
      } else {
        adj_invm_[arow_[i]] -= e * amul_[i] / invmass_[i];
      }
      CrossInvMassAdjoint(p, i, j, wi, wj, a * rd_[i] * (n > 0 ? 1 : n < 0 ? -1 : 0));
    });
  }
}

double ComfreeSolver::CrossInvMassTangent(const Problem& p, const ProblemTangent& dir, int i, int j,
                                          const double* wi, const double* wj) {
  // dN_ij = dJ_i w_j + dJ_j w_i - w_i' dM w_j on the trees both rows touch
  double dn = 0;
  if (dir.J) dn += CrossInvMass(p, dir.J, i, j, wj) + CrossInvMass(p, dir.J, j, i, wi);
  if (dir.M) {
    ForEachRowTree(p, i, [&](int t, int, int) {
      const long si = TreeOffset(p, i, t), sj = TreeOffset(p, j, t);
      if (sj >= 0 && dmtree_[t]) dn -= TreeQuad(p, dir.Mass(), t, wi + si, wj + sj);
    });
  }
  return dn;
}

void ComfreeSolver::CrossInvMassAdjoint(const Problem& p, int i, int j, const double* wi,
                                        const double* wj, double g) {
  // g dN_ij = g (dJ_i w_j + dJ_j w_i - w_i' dM w_j) into adj_J_ and adj_M_
  if (g == 0) return;
  auto addJ = [&](int r, int o, const double* wo) {
    ForEachCrossEntry(p, r, o, wo, [&](int e, double w) { adj_J_[e] += g * w; });
  };
  addJ(i, j, wj);
  addJ(j, i, wi);
  ForEachRowTree(p, i, [&](int t, int, int) {
    const long si = TreeOffset(p, i, t), sj = TreeOffset(p, j, t);
    if (sj < 0) return;
    const double *u = wi + si, *v = wj + sj;
    const int b = p.islands.tree_dofadr[t], end = b + p.islands.tree_dofnum[t];
    for (int q = b; q < end; q++) {
      int m = p.mass.madr[q];
      adj_M_[m++] -= g * u[q - b] * v[q - b];
      for (int l = p.mass.parent[q]; l >= 0; l = p.mass.parent[l])
        adj_M_[m++] -= g * (u[q - b] * v[l - b] + u[l - b] * v[q - b]);
    }
  });
}

bool ComfreeSolver::ForceTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                                 double* dforce) {
  DirectionTangent(p, dir, dforce);
  FrictionLossTangent(p, dir, dforce);
  return true;
}

void ComfreeSolver::DirectionTangent(const Problem& p, const ProblemTangent& dir, double* dforce) {
  const double h = p.h, k = settings_.stiffness, d = settings_.damping, cv = k * h + d;
  const int nplain = p.ne + p.nf + p.nl, ncon = p.ncon;
  for (int i = 0; i < p.nrow; i++) dforce[i] = 0;
  if (tstale_) PrepareTangent(p);

  auto dratio = [&](int row) { return RatioTangent(p, dir, row); };

  // trees on which dM is nonzero (a direction moves one tree's mass matrix; with its rows listed,
  // their tree, where a zero dM adds exact zeros to w'dMw)
  for (int t = 0; t < p.islands.ntree; t++) {
    dmtree_[t] = dir.M_rows && dir.M_nrows > 0 && t == p.dof_tree[dir.M_rows[0]];
    if (!dir.M || dir.M_rows) continue;
    const int b = p.islands.tree_dofadr[t], e = b + p.islands.tree_dofnum[t];
    const int m0 = p.mass.madr[b], m1 = e < p.nv ? p.mass.madr[e] : p.mass.nM;
    const double* V = dir.Mass();
    for (int k = m0; k < m1 && !dmtree_[t]; k++) dmtree_[t] = V[k] != 0;
  }
  QuadTangents(p, dir);

  // tangent of the relaxation per tree (read where a gain is capped only)
  for (int t = 0; t < p.islands.ntree; t++) drelax_[t] = 0;
  for (int i = 0; i < nplain && capped_; i++) {
    const double dw = gain_[i] * invmass_[i] * cv * dratio(i);
    ForEachRowTree(p, i, [&](int t, int, int) { drelax_[t] += dw; });
  }
  for (int c = 0; c < ncon && capped_; c++) {
    const Contact& con = p.con[c];
    if (FromDistance(con)) continue;
    const double dw =
        WeightSum(con.dim) * gain_[con.row] * invmass_[con.row] * cv * dratio(con.row);
    if (con.tree[0] >= 0) drelax_[con.tree[0]] += dw;
    if (con.tree[1] >= 0) drelax_[con.tree[1]] += dw;
  }
  if (capped_ && coupled_) CoupledRelaxTangent(p, dir);

  // tangent of J_r v_smooth
  auto dvel = [&](int row) { return VelocityTangent(p, dir, row); };

  // relative tangent of a gain: ratio, inverse mass (tangent dA) and, where it binds, the cap
  // set by tree t
  auto dgain = [&](int row, int t, double dA) {
    double rel = dratio(row) - dA / invmass_[row];
    if (cap_[row] < 1)
      rel -= coupled_ && Relaxes(p, row) ? dgam_[row] / rgam_[row] : drelax_[t] / relax_[t];
    return rel;
  };

  // contacts (the contacts of a patch share the tangent of its A)
  int patch = -1;
  double dA = 0;
  for (int c = 0; c < ncon; c++) {
    const Contact& con = p.con[c];
    const int row = con.row, dim = con.dim;
    // (a patch's contacts share one island: an untouched one skips the whole patch)
    if (gain_[row] == 0 || (tangent_modes_ && tangent_modes_[c] == 0) || Untouched(p, dir, row))
      continue;
    if (patch_[c] != patch) {
      patch = patch_[c];
      dA = PatchInvMassTangent(p, patch, dir);
    }
    const int t0 = con.tree[0], t1 = con.tree[1];
    const double rel = dgain(row, t1 >= 0 && (t0 < 0 || relax_[t1] > relax_[t0]) ? t1 : t0, dA);
    // contacts from distance: softplus position, their own damping (a function of R)
    const bool cfd = FromDistance(con);
    const double slope = cfd ? con.cfd_slope : 1;
    double ddamp = 0;
    const double dmp = cfd ? CfdDamping(p, row, &ddamp) : d, cvc = k * h + dmp;
    // (slope in R; in diag_approx it is -slope R / diag_approx)
    ddamp = (dir.R ? ddamp * dir.R[row] : 0) -
            (dir.diag_approx ? ddamp * p.R[row] / p.diag_approx[row] * dir.diag_approx[row] : 0);
    const double G = gain_[row] * cap_[row], dphi = dir.pos ? slope * dir.pos[row] : 0;
    const double* ddisp = anchored_ && dim >= 3 && dir.disp ? dir.disp + row : nullptr;
    double ds[6];
    if (fshared_[c] && dim == 3) {
      VelocityTangents<3>(p, dir, row, ds);
    } else if (fshared_[c] && dim == 4) {
      VelocityTangents<4>(p, dir, row, ds);
    } else {
      for (int r = 0; r < dim; r++) ds[r] = dvel(row + r);
    }
    // a direction that does not reach the contact (another tree) leaves its facets as they are
    bool moves = rel != 0 || dphi != 0 || ddamp != 0;
    for (int r = 0; r < dim && !moves; r++) moves = ds[r] != 0 || (ddisp && r > 0 && ddisp[r] != 0);
    if (!moves) continue;
    // the facets' sum_j c_j (rel arg_j + w_j G (-cvc c_j' ds - k c_j' dphi - ddamp c_j' v) / h)
    // by PrepareTangent's sums (dphi: the gap's tangent and the anchors' displacement's)
    const double* a = fsum_.data() + static_cast<size_t>(c) * kFacetSums;
    const double *P = a + 6, *Pv = P + 36;
    const FacetTerms terms = {cvc, k, dphi, ddisp, rel, G, ddamp, h};
    if (dim == 3 && facet_dims_on_) {
      terms.Add<3>(ds, a, P, Pv, dforce + row);
    } else {
      terms.Add<6>(ds, a, P, Pv, dforce + row, dim);
    }
  }

  // plain rows
  for (int i = 0; i < nplain; i++) {
    const double a = arg_[i];
    const bool active = PlainActive(p, i, a);
    if (gain_[i] == 0 || !active || Untouched(p, dir, i)) continue;
    int tmax = -1;
    ForEachRowTree(p, i, [&](int t, int, int) {
      if (tmax < 0 || relax_[t] > relax_[tmax]) tmax = t;
    });
    const double dphi = p.kind[i] != kRowFriction && dir.pos ? dir.pos[i] : 0;
    const double dA = amul_[i] * InvMassTangent(p, arow_[i], dir);
    dforce[i] = dgain(i, tmax, dA) * a + gain_[i] * cap_[i] * (-cv * dvel(i) - k * dphi) / h;
  }
}

//---------------------------------- blocked tangents ----------------------------------------------

void ComfreeSolver::SetupTangentBlocks(const ProblemDims& dims) {
  const size_t S = kTangentSlots, rows = std::max(dims.max_rows, 1), nv = std::max(dims.nv, 1);
  blk_kind_.assign(S, 0);
  blk_touch_.assign(S, 0);
  blk_f_.assign(S * rows, 0.0);
  blk_vf_.assign(nv * S, 0.0);
  blk_ds_.assign(6 * S, 0.0);
  blk_vx_.assign(nv * S, 0.0);
  vfree_.assign(nv, 0.0);
  jrows_.assign(rows, 0);
  wtree_.assign(rows, -1);
  ltval_.assign(std::max(dims.max_nnz, 1), 0.0);
  ltrow_.assign(rows, 0);
  nlin_ = nrhs_ = 0;
}

bool ComfreeSolver::QueueTangent(const Problem& p, const ProblemTangent& dir, int slot) {
  // a direction that moves dv_free only (the anchors' displacement, if any, zero) is kept for
  // FlushTangents' products; the others are formed now (their arrays change after the call)
  if (p.islands.nisland != 1 || slot < 0 || slot >= kTangentSlots) return false;
  if (slot == 0) nlin_ = nrhs_ = 0;
  const bool deferred = !dir.v_free && dir.v_free_rhs;  // (DefersFreeVelocity)
  bool linear =
      (dir.v_free || deferred) && !dir.J && !dir.M && !dir.R && !dir.diag_approx && !dir.pos;
  for (int c = 0; c < p.ncon && linear && anchored_ && dir.disp; c++) {
    for (int r = 1; r < p.con[c].dim; r++) linear = linear && dir.disp[p.con[c].row + r] == 0;
  }
  blk_touch_[slot] = !dir.touched || dir.touched[0];
  if (!linear) {
    blk_kind_[slot] = 1;
    // a deferred dv_free kept for FlushTangents' block solve (ForceTangent is linear in J dv_free:
    // its term is LinearTangents'), or solved here, where the force tangent reads it now (the
    // friction-loss rows read dv_free itself)
    const bool keep = deferred && free_split_on_ && p.nf == 0 && nroll_ == 0;
    ProblemTangent solved = dir;
    if (deferred && !keep) {
      FreeVelocityOf(p, dir, vfree_.data());
      solved.v_free = vfree_.data();
    }
    DirectionTangent(p, solved, blk_f_.data() + static_cast<size_t>(slot) * p.nrow);
    FrictionLossTangent(p, solved, blk_f_.data() + static_cast<size_t>(slot) * p.nrow);
    if (keep) KeepFreeVelocity(p, dir, deferred, slot);
    return true;
  }
  blk_kind_[slot] = 2;
  KeepFreeVelocity(p, dir, deferred, slot);
  return true;
}

void ComfreeSolver::KeepFreeVelocity(const Problem& p, const ProblemTangent& dir, bool deferred,
                                     int slot) {
  const size_t S = kTangentSlots;
  const double* vf = deferred ? dir.v_free_rhs : dir.v_free;
  for (int j = 0; j < p.nv; j++) blk_vf_[j * S + nlin_] = vf[j];
  if (deferred) {
    lin_rhs_[nrhs_] = nlin_;
    lin_unit_[nrhs_++] = dir.v_free_unit;
  }
  lin_slot_[nlin_++] = slot;
}

bool ComfreeSolver::FlushTangents(const Problem& p, int nslot, double* dforce) {
  const int nr = p.nrow;
  if (p.islands.nisland != 1 || nslot > kTangentSlots) return false;
  // the kept slots' deferred dv_free in one block solve (in place when every kept slot's is
  // deferred: they are the first nrhs_ columns and the padding's are unused)
  bool first = free_in_place_on_ && nrhs_ == nlin_;
  for (int k = 0; k < nrhs_ && first; k++) first = lin_rhs_[k] == k;
  FreeVelocities(p, -1, blk_vf_.data(), kTangentSlots, lin_rhs_, lin_unit_, nrhs_,
                 first ? nullptr : blk_vx_.data());
  nrhs_ = 0;
  for (int s = 0; s < nslot; s++) {
    double* f = dforce + static_cast<size_t>(s) * nr;
    const double* g = blk_f_.data() + static_cast<size_t>(s) * nr;
    if (blk_kind_[s] == 1) {
      std::copy(g, g + nr, f);
    } else {
      std::fill(f, f + nr, 0.0);
    }
  }
  if (nlin_ > 0) LinearTangents(p, nslot, dforce);
  for (int c = 0; c < nlin_ && (p.nf > 0 || nroll_ > 0); c++) {
    // the friction-loss rows of the kept slots (FrictionLossTangent), one direction at a time
    const size_t S = kTangentSlots;
    for (int j = 0; j < p.nv; j++) flv_[j] = blk_vf_[j * S + c];
    const uint8_t touch = blk_touch_[lin_slot_[c]];
    ProblemTangent dir;
    dir.v_free = flv_.data();
    dir.touched = &touch;
    FrictionLossTangent(p, dir, dforce + static_cast<size_t>(lin_slot_[c]) * nr);
  }
  nlin_ = 0;
  return true;
}

void ComfreeSolver::LinearTangents(const Problem& p, int nslot, double* dforce) {
  // ForceTangent's terms of a direction along dv_free alone: the gains' tangents (ratio, inverse
  // mass, relaxation) are exactly zero, as are dphi, ddamp and the anchors' ddisp; what is left
  // is each row's J dv_free through the facets' sums, each operation applied to all slots in
  // turn (the same operations per slot in ForceTangent's order)
  const double h = p.h, k = settings_.stiffness, d = settings_.damping, cv = k * h + d;
  const int nplain = p.ne + p.nf + p.nl, nr = p.nrow, nc = nlin_;
  const size_t S = kTangentSlots;
  if (tstale_) PrepareTangent(p);
  const SparseRows& J = p.J;
  const bool map = linear_map_on_;  // (the mapped rows' from L at the end)
  if (map && ltstale_) FormLinearMap(p);
  double* u = blk_ds_.data();  // a contact's rows' J dv_free, then u (6 x S)
  double f[kTangentSlots];     // a row's force tangent per slot
  unsigned char moves[kTangentSlots], touch[kTangentSlots];
  for (int c = 0; c < nc; c++) touch[c] = blk_touch_[lin_slot_[c]];
  auto rowdots = [&](int row, double* out) {
    const int adr = J.rowadr[row];
    columns::RowTimesAll(J.val + adr, J.colind + adr, J.rownnz[row], blk_vf_.data(), S, nc, out);
  };
  // f into the slots' dforce at row (a row outside the island is never skipped, as in
  // ForceTangent; a contact's rows are written once, onto zeros)
  double* dst[kTangentSlots];  // (each slot's dforce)
  bool all = true;             // (every slot touches the island)
  for (int c = 0; c < nc; c++) {
    dst[c] = dforce + static_cast<size_t>(lin_slot_[c]) * nr;
    all = all && touch[c];
  }
  auto store = [&](int row, const unsigned char* on) {
    const bool island = p.islands.row_island[row] >= 0;
    if (!on && (all || !island)) {
      for (int c = 0; c < nc; c++) dst[c][row] += f[c];
      return;
    }
    for (int c = 0; c < nc; c++) {
      if ((!on || on[c]) && (touch[c] || !island)) dst[c][row] += f[c];
    }
  };
  for (int c0 = 0; c0 < p.ncon; c0++) {
    const Contact& con = p.con[c0];
    const int row = con.row, dim = con.dim;
    if (gain_[row] == 0 || (tangent_modes_ && tangent_modes_[c0] == 0)) continue;
    if (map && ltrow_[row]) continue;
    const double rel = 0, ddamp = 0;
    double slope = 0;
    const double dmp = FromDistance(con) ? CfdDamping(p, row, &slope) : d, cvc = k * h + dmp;
    const double G = gain_[row] * cap_[row];
    for (int c = 0; c < nc; c++) moves[c] = 0;
    for (int r = 0; r < dim; r++) {
      double* ur = u + r * S;
      rowdots(row + r, ur);
      for (int c = 0; c < nc; c++) moves[c] |= ur[c] != 0;
      for (int c = 0; c < nc; c++) ur[c] = -cvc * ur[c] - k * 0.0;
    }
    const double* a = fsum_.data() + static_cast<size_t>(c0) * kFacetSums;
    const double *P = a + 6, *Pv = P + 36;
    for (int r = 0; r < dim; r++) {
      for (int c = 0; c < nc; c++) f[c] = 0;
      for (int q = 0; q < dim; q++) {
        const double Prq = P[6 * r + q], *uq = u + q * S;
        for (int c = 0; c < nc; c++) f[c] += Prq * uq[c];
      }
      const double ra = rel * a[r], dv = ddamp * Pv[r];
      for (int c = 0; c < nc; c++) f[c] = ra + G * (f[c] - dv) / h;
      store(row + r, moves);
    }
  }
  for (int i = 0; i < nplain; i++) {
    const double a = arg_[i];
    const bool active = PlainActive(p, i, a);
    if (gain_[i] == 0 || !active || (map && ltrow_[i])) continue;
    const double dga = 0 * a, G = gain_[i] * cap_[i];
    rowdots(i, f);
    for (int c = 0; c < nc; c++) f[c] = dga + G * (-cv * f[c] - k * 0.0) / h;
    store(i, nullptr);
  }
  // the mapped rows: L dv_free (padded to a multiple of 4 columns: f's extra entries unread)
  const int ncp = free_in_place_on_ ? std::min((nc + 3) / 4 * 4, kTangentSlots) : nc;
  auto mapped = [&](int i) {
    const int adr = J.rowadr[i];
    columns::RowTimesWide(ltval_.data() + adr, J.colind + adr, J.rownnz[i], blk_vf_.data(), S, ncp,
                          f);
    store(i, nullptr);
  };
  for (int c0 = 0; c0 < p.ncon && map; c0++) {
    const int row = p.con[c0].row;
    if (!ltrow_[row] || (tangent_modes_ && tangent_modes_[c0] == 0)) continue;
    for (int r = 0; r < p.con[c0].dim; r++) mapped(row + r);
  }
  for (int i = 0; i < nplain && map; i++) {
    if (ltrow_[i]) mapped(i);
  }
}

void ComfreeSolver::FormLinearMap(const Problem& p) {
  // LinearTangents' operations on J dv_free folded into one row per force row: a contact's rows
  // -(G / h) cvc P J, a plain row's -(G / h) cv J
  const double h = p.h, k = settings_.stiffness, d = settings_.damping, cv = k * h + d;
  const SparseRows& J = p.J;
  for (int i = 0; i < p.nrow; i++) ltrow_[i] = 0;
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const int row = con.row, dim = con.dim, n = J.rownnz[row];
    if (gain_[row] == 0 || !fshared_[c]) continue;
    double slope = 0;
    const double dmp = FromDistance(con) ? CfdDamping(p, row, &slope) : d;
    const double g = -gain_[row] * cap_[row] * (k * h + dmp) / h;
    const double* P = fsum_.data() + static_cast<size_t>(c) * kFacetSums + 6;
    for (int r = 0; r < dim; r++) {
      double* L = ltval_.data() + J.rowadr[row + r];
      for (int q = 0; q < n; q++) {
        double s = 0;
        for (int e = 0; e < dim; e++) s += P[6 * r + e] * J.val[J.rowadr[row + e] + q];
        L[q] = g * s;
      }
      ltrow_[row + r] = 1;
    }
  }
  for (int i = 0; i < p.ne + p.nf + p.nl; i++) {
    const double a = arg_[i];
    const bool active = PlainActive(p, i, a);
    if (gain_[i] == 0 || !active) continue;
    const double g = -gain_[i] * cap_[i] * cv / h;
    for (int q = 0; q < J.rownnz[i]; q++) ltval_[J.rowadr[i] + q] = g * J.val[J.rowadr[i] + q];
    ltrow_[i] = 1;
  }
  ltstale_ = false;
}

const char* ComfreeSolver::TangentJacobianRows(const Problem& p) {
  // InvMassTangent's rows (arow_ of the contacts and plain rows with a gain); every row where
  // CoupledRelaxTangent (a capped gain) or FrictionLossTangent (friction-loss rows) read dJ
  bool capped = false;
  for (int i = 0; i < p.nrow && !capped; i++) capped = cap_[i] < 1;
  if ((capped && coupled_) || p.nf > 0 || nroll_ > 0) return nullptr;
  for (int i = 0; i < p.nrow; i++) jrows_[i] = 0;
  for (int i = 0; i < p.ne + p.nf + p.nl; i++) {
    if (gain_[i] != 0) jrows_[arow_[i]] = 1;
  }
  for (int c = 0; c < p.ncon; c++) {
    if (gain_[p.con[c].row] != 0) jrows_[arow_[p.con[c].row]] = 1;
  }
  RowSolves(p);  // (TangentRowWeight's)
  return jrows_.data();
}

bool ComfreeSolver::TangentRowWeight(const Problem& p, int row, double* w) {
  // RowSolve's cached M^-1 J', unpacked from its trees
  const double* cached = RowSolve(p, row);
  if (!cached) return false;
  ForEachRowTree(p, row, [&](int t, int, int) {
    const int begin = p.islands.tree_dofadr[t], end = begin + p.islands.tree_dofnum[t];
    for (int i = begin; i < end; i++) w[i] += *cached++;
  });
  return true;
}

bool ComfreeSolver::SetTangentModes(const Problem& p, const signed char* mode) {
  tangent_modes_ = mode;
  return true;
}

//---------------------------------- reverse mode --------------------------------------------------

void ComfreeSolver::AdjointWeights(const Problem& p, const double* y) {
  // ForceTangent's sums transposed: y' dforce of a contact = rel sum_j Y_j arg_j + sum_j E_j
  // (-cvc dsj - k dphij - ddamp sj) with Y_j = c_j' y_rows, E_j = Y_j weight_j G / h; of a plain
  // row y_i (dgain a + G (-cv ds - k dphi) / h); rel and dgain's parts into ratio, patch (dA) and
  // relax weights
  const double h = p.h, k = settings_.stiffness, d = settings_.damping, cv = k * h + d;
  double coef[6 * kComfreeMaxFacets], weight[kComfreeMaxFacets];
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    const int row = con.row, dim = con.dim;
    if (gain_[row] == 0 || (tangent_modes_ && tangent_modes_[c] == 0)) continue;
    const int t0 = con.tree[0], t1 = con.tree[1];
    const int t = t1 >= 0 && (t0 < 0 || relax_[t1] > relax_[t0]) ? t1 : t0;
    const bool cfd = FromDistance(con);
    double dd = 0;
    const double dmp = cfd ? CfdDamping(p, row, &dd) : d, cvc = k * h + dmp;
    const double G = gain_[row] * cap_[row], slope = cfd ? con.cfd_slope : 1;
    const int nf = ComfreeFacets(con, settings_.facets, coef, weight);
    const double* arg = facet_.data() + static_cast<size_t>(c) * kComfreeMaxFacets;
    double a1 = 0, e1 = 0, es = 0, ec[6] = {0, 0, 0, 0, 0, 0};
    for (int j = 0; j < nf; j++) {
      if (!(arg[j] > 0)) continue;
      const double* cj = coef + 6 * j;
      double Y = 0, sj = 0;
      for (int r = 0; r < dim; r++) {
        Y += cj[r] * y[row + r];
        sj += cj[r] * vel_[row + r];
      }
      const double E = Y * weight[j] * G / h;
      a1 += Y * arg[j];
      e1 += E;
      es += E * sj;
      for (int r = 0; r < dim; r++) ec[r] += E * cj[r];
    }
    adj_ratio_[row] += a1;
    adj_patch_[patch_[c]] -= a1 / invmass_[row];
    if (cap_[row] < 1 && coupled_ && Relaxes(p, row)) {
      adj_gam_[row] -= a1 / rgam_[row];
    } else if (cap_[row] < 1) {
      adj_relax_[t] -= a1 / relax_[t];
    }
    adj_pos_[row] -= k * slope * e1;
    for (int r = 0; r < dim; r++) adj_dvel_[row + r] -= cvc * ec[r];
    for (int r = 1; anchored_ && dim >= 3 && r < dim; r++) adj_disp_[row + r] -= k * ec[r];
    if (cfd) {
      adj_R_[row] -= es * dd;
      adj_diag_[row] += es * dd * p.R[row] / p.diag_approx[row];
    }
  }
  for (int i = 0; i < p.ne + p.nf + p.nl; i++) {
    const double a = arg_[i];
    const bool active = PlainActive(p, i, a);
    if (gain_[i] == 0 || !active || y[i] == 0) continue;
    int tmax = -1;
    ForEachRowTree(p, i, [&](int t, int, int) {
      if (tmax < 0 || relax_[t] > relax_[tmax]) tmax = t;
    });
    adj_ratio_[i] += y[i] * a;
    adj_invm_[arow_[i]] -= y[i] * a * amul_[i] / invmass_[i];
    if (cap_[i] < 1 && coupled_ && Relaxes(p, i)) {
      adj_gam_[i] -= y[i] * a / rgam_[i];
    } else if (cap_[i] < 1) {
      adj_relax_[tmax] -= y[i] * a / relax_[tmax];
    }
    const double g = y[i] * gain_[i] * cap_[i] / h;
    adj_dvel_[i] -= g * cv;
    if (p.kind[i] != kRowFriction) adj_pos_[i] -= g * k;
  }
}

void ComfreeSolver::AdjointShared(const Problem& p) {
  // the patches' dA to their rows' inverse masses, the relaxation to the rows' ratios, the ratios
  // to R and diag_approx, J v_smooth to dv_free and dJ, and each inverse mass' 2 dJ w - w' dM w
  const SparseRows& J = p.J;
  const TreeMass& mass = p.mass;
  const double h = p.h, cv = settings_.stiffness * h + settings_.damping;
  if (coupled_) CoupledRelaxAdjoint(p);
  for (int c0 = 0; c0 < p.ncon; c0++) {
    if (patch_[c0] != c0 || adj_patch_[c0] == 0) continue;
    int count = 0;
    for (int c = c0; c < p.ncon && patch_[c] == c0; c++) count += gain_[p.con[c].row] > 0;
    for (int c = c0; c < p.ncon && patch_[c] == c0; c++) {
      const int row = p.con[c].row;
      if (!(gain_[row] > 0)) continue;
      const double Ai = amul_[row] * rowinv_[arow_[row]];
      const double w =
          count == 1 ? 1 : std::pow(Ai / invmass_[row], kComfreePatchPower - 1) / count;
      adj_invm_[arow_[row]] += adj_patch_[c0] * amul_[row] * w;
    }
  }
  for (int i = 0; i < p.ne + p.nf + p.nl; i++) {
    double s = 0;
    ForEachRowTree(p, i, [&](int t, int, int) { s += adj_relax_[t]; });
    adj_ratio_[i] += gain_[i] * invmass_[i] * cv * s;
  }
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    if (FromDistance(con)) continue;
    const double s = (con.tree[0] >= 0 ? adj_relax_[con.tree[0]] : 0) +
                     (con.tree[1] >= 0 ? adj_relax_[con.tree[1]] : 0);
    adj_ratio_[con.row] += WeightSum(con.dim) * gain_[con.row] * invmass_[con.row] * cv * s;
  }
  double* w = tangent_.data();
  for (int i = 0; i < p.nrow; i++) {
    const int adr = J.rowadr[i];
    if (adj_ratio_[i] != 0) {
      adj_diag_[i] += adj_ratio_[i] / p.diag_approx[i];
      adj_R_[i] -= adj_ratio_[i] / p.R[i];
    }
    for (int q = 0; q < J.rownnz[i] && adj_dvel_[i] != 0; q++) {
      adj_vfree_[J.colind[adr + q]] += adj_dvel_[i] * J.val[adr + q];
      adj_J_[adr + q] += adj_dvel_[i] * p.v_free[J.colind[adr + q]];
    }
    const double a = adj_invm_[i];
    if (a == 0) continue;
    for (int q = 0; q < J.rownnz[i]; q++) w[J.colind[adr + q]] = J.val[adr + q];
    ForEachRowTree(p, i, [&](int t, int, int) {
      const int b = p.islands.tree_dofadr[t], e = b + p.islands.tree_dofnum[t];
      mass.Solve(w, b, e);
      for (int j = b; j < e; j++) {
        int m = mass.madr[j];
        adj_M_[m++] -= a * w[j] * w[j];
        for (int l = mass.parent[j]; l >= 0; l = mass.parent[l]) adj_M_[m++] -= 2 * a * w[j] * w[l];
      }
    });
    for (int q = 0; q < J.rownnz[i]; q++) adj_J_[adr + q] += 2 * a * w[J.colind[adr + q]];
    ForEachRowTree(p, i, [&](int t, int, int) {
      const int b = p.islands.tree_dofadr[t], e = b + p.islands.tree_dofnum[t];
      for (int j = b; j < e; j++) w[j] = 0;
    });
  }
}

bool ComfreeSolver::PrepareAdjoint(const Problem& p, const Solution& sol, const double* y,
                                   const double* xi) {
  if (xi) return false;  // (no position correction)
  for (int i = 0; i < p.nrow; i++) {
    if (p.islands.row_island[i] < 0) return false;  // (AdjointDot visits the islands' rows)
  }
  for (auto* v : {&adj_R_, &adj_diag_, &adj_pos_, &adj_disp_, &adj_ratio_, &adj_dvel_, &adj_invm_})
    std::fill(v->begin(), v->begin() + p.nrow, 0.0);
  // (the rows' entries of J and the problem's contacts, not the handle's capacity: zeroing all
  // max_nnz entries was 16% of the humanoid's VJP)
  const SparseRows& J = p.J;
  for (int i = 0; i < p.nrow; i++) {
    std::fill(adj_J_.begin() + J.rowadr[i], adj_J_.begin() + J.rowadr[i] + J.rownnz[i], 0.0);
  }
  std::fill(adj_vfree_.begin(), adj_vfree_.begin() + p.nv, 0.0);
  std::fill(adj_M_.begin(), adj_M_.begin() + p.mass.nM, 0.0);
  std::fill(adj_relax_.begin(), adj_relax_.end(), 0.0);
  std::fill(adj_gam_.begin(), adj_gam_.begin() + p.nrow, 0.0);
  std::fill(adj_patch_.begin(), adj_patch_.begin() + p.ncon, 0.0);
  AdjointWeights(p, FrictionLossAdjoint(p, sol, y));
  AdjointShared(p);
  return true;
}

double ComfreeSolver::AdjointDot(const Problem& p, const Solution& sol, const ProblemTangent& dir) {
  // the products on the touched islands' rows and trees (the others' data do not move)
  const Islands& is = p.islands;
  const SparseRows& J = p.J;
  const TreeMass& mass = p.mass;
  double s = 0;
  for (int k = 0; k < is.nisland; k++) {
    if (dir.touched && !dir.touched[k]) continue;
    const int* rows = is.rows + is.rowadr[k];
    for (int a = 0; a < is.nrows[k]; a++) {
      const int i = rows[a];
      if (dir.R) s += adj_R_[i] * dir.R[i];
      if (dir.diag_approx) s += adj_diag_[i] * dir.diag_approx[i];
      if (dir.pos) s += adj_pos_[i] * dir.pos[i];
      if (dir.disp) s += adj_disp_[i] * dir.disp[i];
      for (int q = J.rowadr[i]; dir.J && q < J.rowadr[i] + J.rownnz[i]; q++)
        s += adj_J_[q] * dir.J[q];
    }
    for (int a = 0; a < is.ntrees[k]; a++) {
      const int t = is.trees[is.treeadr[k] + a];
      const int b = is.tree_dofadr[t], e = b + is.tree_dofnum[t];
      for (int j = b; dir.v_free && j < e; j++) s += adj_vfree_[j] * dir.v_free[j];
      if (!dir.M) continue;
      if (dir.M_rows && !(dir.M_nrows > 0 && dir.M_rows[0] >= b && dir.M_rows[0] < e)) continue;
      const int m0 = mass.madr[b], m1 = e < p.nv ? mass.madr[e] : mass.nM;
      const double* V = dir.Mass();
      if (!dir.M_rows) {
        for (int m = m0; m < m1; m++) s += adj_M_[m] * V[m];
        continue;
      }
      for (int r = 0; r < dir.M_nrows; r++) {
        int m = mass.madr[dir.M_rows[r]];
        s += adj_M_[m] * V[m];
        for (int l = mass.parent[dir.M_rows[r]]; l >= 0; l = mass.parent[l], m++)
          s += adj_M_[m + 1] * V[m + 1];
      }
    }
  }
  return s;
}

bool ComfreeSolver::AdjointRowWeights(const Problem& p, const Solution& sol, RowWeights* w) const {
  // AdjointDot's row products (diag_approx: unread; disp: AdjointDot's)
  const SparseRows& J = p.J;
  for (int i = 0; i < p.nrow; i++) {
    w->R[i] += adj_R_[i];
    w->pos[i] += adj_pos_[i];
    for (int q = J.rowadr[i]; q < J.rowadr[i] + J.rownnz[i]; q++) w->J[q] += adj_J_[q];
  }
  return true;
}

//---------------------------------- friction loss after the other rows ----------------------------

void ComfreeSolver::FrictionLossTangent(const Problem& p, const ProblemTangent& dir,
                                        double* dforce) {
  const SparseRows& J = p.J;
  const int f0 = p.ne, f1 = p.ne + p.nf, nv = p.nv;
  const double h = p.h;
  bool any = false;
  for (int i = f0; i < f1; i++) {
    dforce[i] = 0;  // (a clamped row's force is constant)
    any = any || (FrictionSticks(p, i) && !Untouched(p, dir, i));
  }
  const bool moves = any;  // (a friction-loss row's force moves)
  for (int k = 0; k < nroll_; k++) any = any || !Untouched(p, dir, p.con[roll_[k]].row);
  if (!any || (!moves && RollRowsTangent(p, dir, dforce))) return;

  // dv' = dv_free + h M^-1 (J_o' df_o + dJ_o' f_o - dM u) over the other rows, u = (v' - v_smooth)
  // / h
  double* g = flg_.data();
  for (int j = 0; j < nv; j++) g[j] = 0;
  AddRowForceTerms(p, dir, 0, f0, dforce, flforce_.data(), g);
  AddRowForceTerms(p, dir, f1, p.nrow, dforce, flforce_.data(), g);
  if (dir.M) {
    double* u = flu_.data();
    for (int j = 0; j < nv; j++) u[j] = (vafter_[j] - p.v_free[j]) / h;
    SubMassTangent(p, dir, u, g, 0, nv);
  }
  p.mass.Solve(g);
  for (int j = 0; j < nv; j++) g[j] = (dir.v_free ? dir.v_free[j] : 0) + h * g[j];

  // df_i = -(J_i dv' + dJ_i v') / (A_i h) - f_i dA_i / A_i
  for (int i = f0; i < f1; i++) {
    if (!FrictionSticks(p, i) || Untouched(p, dir, i)) continue;
    const int adr = J.rowadr[i];
    double dv = J.Dot(i, g);
    for (int q = 0; dir.J && q < J.rownnz[i]; q++)
      dv += dir.J[adr + q] * vafter_[J.colind[adr + q]];
    const double A = invmass_[i], dA = amul_[i] * InvMassTangent(p, arow_[i], dir);
    dforce[i] = -dv / (A * h) - arg_[i] * dA / A;
  }
  RollStopTangent(p, dir, g, dforce);
}

bool ComfreeSolver::AddRowForceTerms(const Problem& p, const ProblemTangent& dir, int i0, int i1,
                                     const double* df, const double* f, double* g) {
  const SparseRows& J = p.J;
  bool any = false;
  for (int i = i0; i < i1; i++) {
    const int adr = J.rowadr[i];
    const double d = df ? df[i] : 0, fi = dir.J ? f[i] : 0;
    if (d == 0 && fi == 0) continue;
    any = true;
    for (int q = 0; q < J.rownnz[i]; q++) {
      const double t = fi != 0 ? dir.J[adr + q] * fi : 0;
      g[J.colind[adr + q]] += df ? J.val[adr + q] * d + t : t;
    }
  }
  return any;
}

const double* ComfreeSolver::RollVelocityTangent(const Problem& p, const ProblemTangent& dir,
                                                 const double* g, const double* dforce) {
  if (p.nf == 0) return g;  // (v'' = v')
  const int nv = p.nv;
  double* g2 = flw_.data();
  for (int j = 0; j < nv; j++) g2[j] = 0;
  // (rforce_: the friction-loss rows' forces, RollCross)
  bool moves = AddRowForceTerms(p, dir, p.ne, p.ne + p.nf, dforce, rforce_.data(), g2);
  moves = moves || dir.M != nullptr;
  if (!moves && roll_quads_on_) return g;  // (v'' - v' has no tangent: its solve of zeros)
  if (dir.M) {
    double* w = flu_.data();  // (v'' - v') / h
    for (int j = 0; j < nv; j++) w[j] = (vroll_[j] - vafter_[j]) / p.h;
    SubMassTangent(p, dir, w, g2, 0, nv);
  }
  p.mass.Solve(g2);
  for (int j = 0; j < nv; j++) g2[j] = g[j] + p.h * g2[j];
  return g2;
}

void ComfreeSolver::RollStopTangent(const Problem& p, const ProblemTangent& dir, const double* g,
                                    double* dforce) {
  if (nroll_ > 0) g = RollVelocityTangent(p, dir, g, dforce);
  for (int k = 0; k < nroll_; k++) {
    const int row = p.con[roll_[k]].row;
    if (Untouched(p, dir, row)) continue;
    for (int r = 0; r < 2; r++)
      rdv_[2 * k + r] = rowinv_[row + 4 + r] > 0 ? p.J.Dot(row + 4 + r, g) : 0;
  }
  RollPairsTangent(p, dir, dforce);
}

void ComfreeSolver::RollCross(const Problem& p) {
  // C_s = J_o w_s over the rows o (friction-loss rows 0), w_s RowSolve's M^-1 J_s' of the rolling
  // row s = 2 k + r; none when the hook is off, a friction-loss row sticks (RollRowsTangent's path
  // is not taken), a w is not cached or C does not fit
  const size_t nr = p.nrow;
  rcross_on_ = false;
  if (nroll_ == 0) return;
  // (the direction-free parts: every row's force v'' saw, RollVelocityTangent's and
  // RollRowsTangent's, and (v'' - v_smooth) / h)
  for (int o = 0; o < p.nrow; o++)
    rforce_[o] = o >= p.ne && o < p.ne + p.nf ? FrictionLossForce(p, o) : flforce_[o];
  for (int j = 0; j < p.nv; j++) rvel_[j] = (vroll_[j] - p.v_free[j]) / p.h;
  if (!roll_quads_on_ || 2 * nroll_ * nr > rcross_.size()) return;
  for (int i = p.ne; i < p.ne + p.nf; i++) {
    if (FrictionSticks(p, i)) return;  // (its force moves: FrictionLossTangent's path)
  }
  for (int k = 0; k < nroll_; k++) {
    for (int r = 0; r < 2; r++) {
      const int i = p.con[roll_[k]].row + 4 + r;
      double* C = rcross_.data() + (2 * k + r) * nr;
      const double* w = rowinv_[i] > 0 ? RowSolve(p, i) : nullptr;
      if (rowinv_[i] > 0 && !w) return;  // (the cache is full: FrictionLossTangent's path)
      for (int o = 0; o < p.nrow; o++) C[o] = 0;
      if (!w) continue;
      double* wd = tangent_.data();  // (w_s unpacked: zero off its trees)
      UnpackRow(p, i, w, wd, 1);
      for (int o = 0; o < p.nrow; o++) {
        if (o < p.ne || o >= p.ne + p.nf) C[o] = p.J.Dot(o, wd);
      }
      UnpackRow(p, i, w, wd, 0);
    }
  }
  rcross_on_ = true;
}

void ComfreeSolver::UnpackRow(const Problem& p, int row, const double* w, double* x, double a) {
  // x = a w on row's trees (w packed by them, RowSolve's)
  ForEachRowTree(p, row, [&](int t, int, int) {
    const int begin = p.islands.tree_dofadr[t], n = p.islands.tree_dofnum[t];
    for (int j = 0; j < n; j++, w++) x[begin + j] = a != 0 ? a * *w : 0;
  });
}

bool ComfreeSolver::RollRowsTangent(const Problem& p, const ProblemTangent& dir, double* dforce) {
  // no friction-loss row moves (df_f = 0): J_s dv'' = J_s dv_free + h (C_s . df + w_s . b), b =
  // dJ' f - dM (v'' - v_smooth) / h over every row's force f (the rows', the friction-loss rows')
  if (!rcross_on_) return false;
  const SparseRows& J = p.J;
  const int nv = p.nv;
  double* b = (dir.J || dir.M) ? flw_.data() : nullptr;
  if (b) {
    for (int j = 0; j < nv; j++) b[j] = 0;
    AddRowForceTerms(p, dir, 0, p.nrow, nullptr, rforce_.data(), b);
    if (dir.M) SubMassTangent(p, dir, rvel_.data(), b, 0, nv);
  }
  for (int k = 0; k < nroll_; k++) {
    const int row = p.con[roll_[k]].row;
    for (int r = 0; r < 2; r++) {
      const int i = row + 4 + r, s = 2 * k + r;
      rdv_[s] = 0;
      if (!(rowinv_[i] > 0) || Untouched(p, dir, row)) continue;
      double c = Dot(rcross_.data() + static_cast<size_t>(s) * p.nrow, dforce, p.nrow);
      if (b) {
        const double* w = RowSolve(p, i);
        ForEachRowTree(p, i, [&](int t, int, int) {
          const int begin = p.islands.tree_dofadr[t], n = p.islands.tree_dofnum[t];
          c += Dot(w, b + begin, n);
          w += n;
        });
      }
      rdv_[s] = (dir.v_free ? J.Dot(i, dir.v_free) : 0) + p.h * c;
    }
  }
  RollPairsTangent(p, dir, dforce);
  return true;
}

double ComfreeSolver::RollShareTangent(const Problem& p, const ProblemTangent& dir, int k, int r) {
  // sum_q s_q dN_iq = sum_q s_q dJ_q w_i + dJ_i u_i - w_i' dM u_i with u_i = sum_q s_q w_q
  // (RollShare's, on row i's trees), s_q = sign N_iq
  const int i = p.con[roll_[k]].row + 4 + r, s = 2 * k + r;
  if (!rshare_on_ || !(rowinv_[i] > 0) || (!dir.J && !dir.M)) return 0;
  RollShareLists(p);
  const double* wi = RowSolve(p, i);
  const double* u = rupool_.data() + ruadr_[s];
  double d = 0;
  if (dir.J && rgather_) {
    for (int e = rgadr_[s]; e < rgadr_[s + 1]; e++) d += dir.J[rgidx_[e]] * rgval_[e];
  } else if (dir.J) {
    for (int a = rsadr_[s]; a < rsadr_[s + 1]; a++)
      d += rpsign_[a] * CrossInvMass(p, dir.J, rpair_[a], i, wi);
    d += CrossInvMass(p, dir.J, i, i, u);
  }
  if (!dir.M) return d;
  // (a position direction of dof k: the forms' entry k, RollShareForms)
  const bool forms = roll_gather_on_ && dir.M_forms && dir.M_dof >= 0;
  if (forms) RollShareForms(p, *dir.M_forms);
  size_t off = 0;
  ForEachRowTree(p, i, [&](int t, int, int) {
    const int begin = p.islands.tree_dofadr[t];
    if (forms && dmtree_[t] && p.dof_tree[dir.M_dof] == t) {
      d -= rform_[ruadr_[s] + off + dir.M_dof - begin];
    } else if (!forms && dmtree_[t]) {
      d -= TreeQuad(p, dir.Mass(), t, wi + off, u + off);
    }
    off += p.islands.tree_dofnum[t];
  });
  return d;
}

bool ComfreeSolver::RollShareGather(const Problem& p) {
  // each rolling row's dJ entries with their weights, in RollShareTangent's order: s_q w_i at
  // row q's entries on row i's trees for each pair, then u_i at row i's
  size_t ng = 0;
  auto add = [&](int e, double w) {
    if (ng < rgidx_.size()) {
      rgidx_[ng] = e;
      rgval_[ng] = w;
    }
    ng++;
  };
  for (int s = 0; s < 2 * nroll_; s++) {
    const int i = p.con[roll_[s / 2]].row + 4 + s % 2;
    rgadr_[s] = static_cast<int>(std::min(ng, rgidx_.size()));
    if (!(rowinv_[i] > 0)) continue;
    const double* wi = RowSolve(p, i);
    for (int a = rsadr_[s]; a < rsadr_[s + 1]; a++) {
      const double sign = rpsign_[a];
      ForEachCrossEntry(p, rpair_[a], i, wi, [&](int e, double w) { add(e, sign * w); });
    }
    ForEachCrossEntry(p, i, i, rupool_.data() + ruadr_[s], add);
  }
  rgadr_[2 * nroll_] = static_cast<int>(std::min(ng, rgidx_.size()));
  return ng <= rgidx_.size();
}

void ComfreeSolver::RollShareForms(const Problem& p, const MassForms& forms) {
  // w_s' dM_k u_s = (q(w_s + u_s) - q(w_s - u_s)) / 4 on each of row s's trees (dM_k symmetric)
  if (rforms_) return;
  rforms_ = true;
  const int nv = p.nv;
  double *a = rfscr_.data(), *b = a + nv, *qa = b + nv, *qb = qa + nv;
  for (int s = 0; s < 2 * nroll_; s++) {
    const int i = p.con[roll_[s / 2]].row + 4 + s % 2;
    if (!(rowinv_[i] > 0)) continue;
    const double* wi = RowSolve(p, i);
    const double* u = rupool_.data() + ruadr_[s];
    double* out = rform_.data() + ruadr_[s];
    size_t off = 0;
    ForEachRowTree(p, i, [&](int t, int, int) {
      const int begin = p.islands.tree_dofadr[t], n = p.islands.tree_dofnum[t];
      for (int q = 0; q < n; q++) {
        a[q] = wi[off + q] + u[off + q];
        b[q] = wi[off + q] - u[off + q];
      }
      const double* w[2] = {a, b};
      forms.FormsLanes(w, 2, begin, begin + n, qa, nv);
      for (int q = 0; q < n; q++) out[off + q] = 0.25 * (qa[q] - qb[q]);
      off += n;
    });
  }
}

void ComfreeSolver::RollPairsTangent(const Problem& p, const ProblemTangent& dir, double* dforce) {
  const SparseRows& J = p.J;
  for (int k = 0; k < nroll_; k++) {
    const int row = p.con[roll_[k]].row;
    if (Untouched(p, dir, row)) continue;
    // dx_r over the facets' df_r (dforce holds it), then the pair's scaling
    double dx[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
      const int i = row + 4 + r, adr = J.rowadr[i];
      const double S = rshare_[2 * k + r];
      if (!(rowinv_[i] > 0)) continue;
      double dv = rdv_[2 * k + r];
      for (int q = 0; dir.J && q < J.rownnz[i]; q++)
        dv += dir.J[adr + q] * vroll_[J.colind[adr + q]];
      const double dS = InvMassTangent(p, i, dir) + RollShareTangent(p, dir, k, r);
      dx[r] = dforce[i] - dv / (S * p.h) - (arg_[i] - flforce_[i]) * dS / S;
    }
    if (!RollSticks(k)) RollScaleTangent(p, k, dx, dforce);
    dforce[row + 4] = dx[0];
    dforce[row + 5] = dx[1];
  }
}

namespace {

// d n / d x_r of RollNorm's n of the rolling pair x (mu its coefficients)
double RollNormSlope(const Problem& p, const double* x, const double* mu, double n, int r) {
  if (!(mu[r] > 0)) return 0;
  return p.elliptic ? x[r] / (mu[r] * mu[r] * n) : Sign(x[r]) / mu[r];
}

// d b / d f_r of RollBudget's b > 0 for the contact's rows r = 0-3 (f their forces)   (4)
void RollBudgetSlope(const Problem& p, const Contact& con, const double* f, double b, double* out) {
  out[0] = p.elliptic ? f[0] / b : 1;
  for (int r = 1; r < 4; r++) {
    const double mu = con.mu[r - 1];
    out[r] = !(mu > 0) ? 0 : p.elliptic ? -f[r] / (mu * mu * b) : -Sign(f[r]) / mu;
  }
}

}  // namespace

void ComfreeSolver::RollScaleTangent(const Problem& p, int k, double* dx,
                                     const double* dforce) const {
  const Contact& con = p.con[roll_[k]];
  const double* x = arg_.data() + con.row + 4;
  const double* f = flforce_.data() + con.row;
  const double b = RollBudget(p, roll_[k], flforce_.data()), n = RollNorm(p, roll_[k], arg_.data());
  const double s = rscale_[k];
  if (!(b > 0)) {  // (no budget: the pair carries nothing)
    dx[0] = dx[1] = 0;
    return;
  }
  double dn = 0, db = 0, slope[4];
  for (int r = 0; r < 2; r++) dn += RollNormSlope(p, x, con.mu + 3, n, r) * dx[r];
  RollBudgetSlope(p, con, f, b, slope);
  for (int r = 0; r < 4; r++) db += slope[r] * dforce[con.row + r];
  for (int r = 0; r < 2; r++) dx[r] = s * (dx[r] - x[r] * dn / n) + x[r] * db / n;
}

void ComfreeSolver::RollScaleAdjoint(const Problem& p, int k, const double* y, double* yx,
                                     double* yb) const {
  const Contact& con = p.con[roll_[k]];
  const double* x = arg_.data() + con.row + 4;
  for (int r = 0; r < 4; r++) yb[r] = 0;
  yx[0] = y[0];
  yx[1] = y[1];
  if (RollSticks(k)) return;
  const double b = RollBudget(p, roll_[k], flforce_.data()), n = RollNorm(p, roll_[k], arg_.data());
  const double s = rscale_[k], t = y[0] * x[0] + y[1] * x[1];
  if (!(b > 0)) {
    yx[0] = yx[1] = 0;
    return;
  }
  for (int r = 0; r < 2; r++) yx[r] = s * y[r] - s * t / n * RollNormSlope(p, x, con.mu + 3, n, r);
  RollBudgetSlope(p, con, flforce_.data() + con.row, b, yb);
  for (int r = 0; r < 4; r++) yb[r] *= t / n;
}

bool ComfreeSolver::RollStopAdjoint(const Problem& p, const double* y) {
  // y_r dx_r = c_r / h (J_r dv'' + dJ_r v'') - y_r (x_r - f_facets) dA_r / A_r + y_r df_facets,
  // c_r = -y_r / A_r (y_r the pair's weights on x, RollScaleAdjoint): z2 = M^-1 sum_r c_r J_r'
  const SparseRows& J = p.J;
  double* z2 = flw_.data();
  for (int j = 0; j < p.nv; j++) z2[j] = 0;
  bool any = false;
  for (int k = 0; k < nroll_; k++) {
    const int row = p.con[roll_[k]].row;
    double yx[2], yb[4];
    RollScaleAdjoint(p, k, y + row + 4, yx, yb);
    for (int r = 0; r < 2; r++) {
      const int i = row + 4 + r, adr = J.rowadr[i];
      const double S = rshare_[2 * k + r];
      if (yx[r] == 0 || !(rowinv_[i] > 0)) continue;
      any = true;
      const double c = -yx[r] / S, e = yx[r] * (arg_[i] - flforce_[i]) / S;
      for (int q = 0; q < J.rownnz[i]; q++) {
        const int col = J.colind[adr + q];
        z2[col] += c * J.val[adr + q];
        adj_J_[adr + q] += c / p.h * vroll_[col];
        adj_vfree_[col] += c / p.h * J.val[adr + q];
      }
      adj_invm_[i] -= e;
      ForEachRollCross(p, k, r, [&](int j, const double* wi, const double* wj, double n) {
        CrossInvMassAdjoint(p, j, i, wj, wi, -e * Sign(n));
      });
    }
  }
  if (any) p.mass.Solve(z2);
  return any;
}

void ComfreeSolver::RollFrictionAdjoint(const Problem& p, double* yf) {
  // z2' (J_f' df_f + dJ_f' f_f - dM w), w = (v'' - v') / h
  const SparseRows& J = p.J;
  const double* z2 = flw_.data();
  for (int i = p.ne; i < p.ne + p.nf; i++) {
    const int adr = J.rowadr[i];
    const double f = FrictionLossForce(p, i);
    if (FrictionSticks(p, i)) yf[i] += J.Dot(i, z2);
    for (int q = 0; f != 0 && q < J.rownnz[i]; q++) adj_J_[adr + q] += f * z2[J.colind[adr + q]];
  }
  double* w = flu_.data();
  for (int j = 0; j < p.nv; j++) w[j] = (vroll_[j] - vafter_[j]) / p.h;
  SubMassAdjoint(p, z2, w);
}

void ComfreeSolver::SubMassAdjoint(const Problem& p, const double* z, const double* u) {
  // -z' dM u into adj_M_ (dM symmetric, tree-sparse)
  const TreeMass& mass = p.mass;
  for (int j = 0; j < p.nv; j++) {
    int m = mass.madr[j];
    adj_M_[m++] -= z[j] * u[j];
    for (int l = mass.parent[j]; l >= 0; l = mass.parent[l])
      adj_M_[m++] -= z[j] * u[l] + z[l] * u[j];
  }
}

const double* ComfreeSolver::FrictionLossAdjoint(const Problem& p, const Solution& sol,
                                                 const double* y) {
  const SparseRows& J = p.J;
  const TreeMass& mass = p.mass;
  const int f0 = p.ne, f1 = p.ne + p.nf, nv = p.nv;
  const double h = p.h;

  // the rolling rows first (they saw the friction-loss rows' forces), their weights through v''
  // onto the friction-loss rows' (yf: y_f + J_f z2)
  const bool roll = RollStopAdjoint(p, y);
  double* yf = adj_y_.data();
  for (int i = f0; i < f1; i++) yf[i] = y[i];
  if (roll && p.nf > 0) RollFrictionAdjoint(p, yf);

  // yf_i df_i = c_i / h (J_i dv' + dJ_i v') - yf_i f_i dA_i / A_i with c_i = -yf_i / A_i; J_i
  // dv' = J_i dv_free + h J_i M^-1 (...): z = M^-1 sum_i c_i J_i' carries the rest, and z2 too
  double* z = flg_.data();
  for (int j = 0; j < nv; j++) z[j] = 0;
  bool any = false;
  for (int i = f0; i < f1; i++) {
    if (!FrictionSticks(p, i) || yf[i] == 0) continue;
    any = true;
    const double A = invmass_[i], c = -yf[i] / A;
    const int adr = J.rowadr[i];
    for (int q = 0; q < J.rownnz[i]; q++) {
      const int col = J.colind[adr + q];
      z[col] += c * J.val[adr + q];
      adj_J_[adr + q] += c / h * vafter_[col];
      adj_vfree_[col] += c / h * J.val[adr + q];
    }
    adj_invm_[arow_[i]] -= yf[i] * arg_[i] * amul_[i] / A;
  }
  if (!any && nroll_ == 0) return y;
  if (any) mass.Solve(z);
  for (int j = 0; j < nv && roll; j++) z[j] += flw_[j];

  // z' (J_o' df_o + dJ_o' f_o - dM u): the other rows' weights y_o + J_o z, their dJ, and dM
  for (int i = 0; i < p.nrow; i++) {
    const bool fl = i >= f0 && i < f1;
    adj_y_[i] = fl ? 0 : y[i] + J.Dot(i, z);
    if (fl || flforce_[i] == 0) continue;
    const int adr = J.rowadr[i];
    for (int q = 0; q < J.rownnz[i]; q++) adj_J_[adr + q] += flforce_[i] * z[J.colind[adr + q]];
  }
  // a rolling pair: its facets' forces pass with the weights on x, the budget's inputs with yb
  for (int k = 0; k < nroll_; k++) {
    const int row = p.con[roll_[k]].row;
    double yx[2], yb[4];
    RollScaleAdjoint(p, k, y + row + 4, yx, yb);
    for (int r = 0; r < 2; r++) adj_y_[row + 4 + r] += yx[r] - y[row + 4 + r];
    for (int r = 0; r < 4; r++) adj_y_[row + r] += yb[r];
  }
  double* u = flu_.data();
  for (int j = 0; j < nv; j++) u[j] = (vafter_[j] - p.v_free[j]) / h;
  SubMassAdjoint(p, z, u);
  return adj_y_.data();
}

}  // namespace contactkit
