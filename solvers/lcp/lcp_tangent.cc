// Copyright 2026 The contactkit developers.
//
// Derivative of the lcp solution along a perturbation of the problem data (Nimble section IV and
// appendix A): with the classification of the last solve held fixed, the clamped impulses solve
// K x_C = c with K = A_CC + A_CB E and c = -(b_C + A_CB g), the bound rows follow x_B = E x_C + g
// and separating rows stay zero. For the minimum-norm solution x_C = K^+ c (Golub-Pereyra, the
// rank of K locally constant, c in the range of K):
//   dx_C = K^+ (dc - dK x_C) + (I - K^+ K) dK' K^+' x_C,
// where dc - dK x_C = -(dJ_C v+ + J_C dv0 + dstab_C) is the change of the clamped rows' velocity
// at fixed impulses (dv0: IslandVelocityTangent), and dK' y folds dA y~ (y~ = y on C, zero
// elsewhere) over the bound rows through E'. What every direction shares (clamped rows, their
// stabilization derivatives, y~ and M^-1 J' y~, the bound rows' coupling, K^+, a basis V of K's
// null space with I - K^+ K = V' V and its velocity map V S J M^-1) is made once per solve
// (PrepareTangent); a direction then solves only the trees and islands it reaches, and the
// null-space term needs no solve.
#include <algorithm>
#include <cmath>

#include "solvers/common/columns.h"
#include "solvers/lcp/lcp.h"

namespace contactkit {
namespace {

// d(J_i) . x for the perturbed Jacobian values (0 if they do not change); given (nrow,
// nullable): the smooth stage's dJ x (ProblemTangent::J_vnext, J_x), read instead
double DJDot(const Problem& p, const ProblemTangent& dir, int i, const double* x,
             const double* given = nullptr) {
  if (given) return given[i];
  if (!dir.J) return 0;
  const SparseRows& J = p.J;
  double s = 0;
  for (int k = 0; k < J.rownnz[i]; k++) s += dir.J[J.rowadr[i] + k] * x[J.colind[J.rowadr[i] + k]];
  return s;
}

// DJDot(p, dir, i, x, given) + J_i . y (y nullable: 0) in one pass over the row, each sum as
// alone
double RowDots(const Problem& p, const ProblemTangent& dir, int i, const double* x, const double* y,
               const double* given = nullptr) {
  const SparseRows& J = p.J;
  if (!dir.J || !y || given) return DJDot(p, dir, i, x, given) + (y ? J.Dot(i, y) : 0);
  const int adr = J.rowadr[i], n = J.rownnz[i];
  const int* col = J.colind + adr;
  const double *dJ = dir.J + adr, *val = J.val + adr;
  double a = 0, b = 0;
  for (int k = 0; k < n; k++) {
    a += dJ[k] * x[col[k]];
    b += val[k] * y[col[k]];
  }
  return a + b;
}

}  // namespace

// y = X x for the m x m row-major X; four rows at a time (their sums independent, each in the
// order of one row alone)
static void MatVec(const double* X, int m, const double* x, double* y) {
  int a = 0;
  for (; a + 4 <= m; a += 4) {
    const double* r0 = X + static_cast<size_t>(a) * m;
    const double *r1 = r0 + m, *r2 = r1 + m, *r3 = r2 + m;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int j = 0; j < m; j++) {
      s0 += r0[j] * x[j];
      s1 += r1[j] * x[j];
      s2 += r2[j] * x[j];
      s3 += r3[j] * x[j];
    }
    y[a] = s0;
    y[a + 1] = s1;
    y[a + 2] = s2;
    y[a + 3] = s3;
  }
  for (; a < m; a++) {
    const double* r = X + static_cast<size_t>(a) * m;
    double s = 0;
    for (int j = 0; j < m; j++) s += r[j] * x[j];
    y[a] = s;
  }
}

// the stabilization's change of a clamped row with coefficients cpos and cvel of its dpos and
// dvel and, on a soft row (a contact from distance: its target -vel - h aref and regularizer
// R x), -h daref + dR h f; dpos, dvel, daref and dR point at the row's tangents (null: not
// formed, the term left out)
static double StabilizationChange(double cpos, double cvel, bool soft, const double* dpos,
                                  const double* dvel, const double* daref, const double* dR,
                                  double h, double f) {
  double dstab = (dpos ? cpos * *dpos : 0) + (dvel ? cvel * *dvel : 0);
  if (soft) {
    if (daref) dstab -= h * *daref;
    if (dR) dstab += *dR * h * f;
  }
  return dstab;
}

// the same with direction dir's row tangents of row g
static double StabilizationChange(const ProblemTangent& dir, int g, double cpos, double cvel,
                                  bool soft, double h, double f) {
  auto at = [g](const double* v) { return v ? v + g : nullptr; };
  return StabilizationChange(cpos, cvel, soft, at(dir.pos), at(dir.vel), at(dir.aref), at(dir.R), h,
                             f);
}

// n columns padded to a multiple of four (at most LcpSolver::kTangentSlots), or n (!pad)
static int PaddedWidth(int n, bool pad) {
  return pad ? std::min<int>(LcpSolver::kTangentSlots, (n + 3) / 4 * 4) : n;
}

// y = V' V x for the nn x m row-major V (rows orthonormal): the null-space projection of x
static void NullApply(const double* V, int m, int nn, const double* x, double* y) {
  for (int a = 0; a < m; a++) y[a] = 0;
  for (int i = 0; i < nn; i++) {
    const double* v = V + static_cast<size_t>(i) * m;
    double w = 0;
    for (int a = 0; a < m; a++) w += v[a] * x[a];
    for (int a = 0; a < m; a++) y[a] += w * v[a];
  }
}

void LcpSolver::StoreOperators(int k, int m, size_t* off) {
  // K^+ of island k as a dense m x m matrix (column j: the decomposition applied to e_j), so
  // that each direction costs one product, and, rank deficient, the m - r rows of a basis V of
  // K's null space (I - K^+ K = V' V); -1 where the store is full (the decomposition is then
  // applied per direction)
  Cod& cod = factors_[k].cod;
  kadr_[k] = nadr_[k] = -1;
  const size_t mm = static_cast<size_t>(m) * m;
  if (m == 0 || *off + mm > pinv_.size()) return;
  double* X = pinv_.data() + *off;
  for (int j0 = 0; j0 < m; j0 += Cod::kBlock) {
    // (Cod::SolveBlock on Cod::kBlock columns of the identity at a time)
    const int nb = std::min(Cod::kBlock, m - j0);
    for (int a = 0; a < m; a++) {
      for (int c = 0; c < nb; c++) X[static_cast<size_t>(a) * m + j0 + c] = a == j0 + c;
    }
    cod.SolveBlock(X + j0, m, nb, codblk_.data());
  }
  kadr_[k] = static_cast<long>(*off);
  *off += mm;
  const size_t nm = static_cast<size_t>(m - cod.rank()) * m;
  if (nm == 0 || *off + nm > pinv_.size()) return;
  cod.NullBasis(pinv_.data() + *off);
  nadr_[k] = static_cast<long>(*off);
  *off += nm;
}

bool LcpSolver::PrepareTangent(const Problem& p, const Solution& sol) {
  // what every direction shares: the clamped rows of each island with their stabilization's
  // derivatives, and for rank-deficient islands y~ = K^+' h x_C and its velocity M^-1 J' y~
  const Islands& is = p.islands;
  const int nrow = p.nrow, nv = p.nv;
  const double h = p.h;
  if (nisland_ != is.nisland) return false;
  reach_.Prepare(p);
  for (int i = 0; i < nrow; i++) ytil_[i] = 0;
  deficient_ = false;
  int cnt = 0, nb = 0;
  size_t off = 0;
  cadr_[0] = badr_[0] = 0;
  for (int k = 0; k < nisland_; k++) {
    if (factors_[k].lazy) Refactor(p, k);
    if (!factors_[k].stored) return false;
    const int n = is.nrows[k];
    const int* rows = is.rows + is.rowadr[k];
    for (int j = 0; j < n; j++) {
      const int g = rows[j];
      if (state_[g] != kLcpClamped) continue;
      const double b0 = p.J.Dot(g, p.v_free);
      Stabilization(p, g, b0, &cdpos_[cnt], &cdvel_[cnt]);
      if (p.kind[g] == kRowEquality && unstabilized_[k]) cdpos_[cnt] = 0;
      csoft_[cnt] = SoftRow(p, g);
      cplace_[g] = cnt - cadr_[k];
      crow_[cnt++] = g;
    }
    cadr_[k + 1] = cnt;
    // the bound rows that follow a clamped normal, with its place among the clamped rows
    for (int j = 0; j < n; j++) {
      int normal;
      const double coef = Coupling(p, rows[j], &normal);
      if (coef == 0) continue;
      brow_[nb] = rows[j];
      bnormal_[nb] = cplace_[normal];
      bcoef_[nb++] = coef;
    }
    badr_[k + 1] = nb;
    Cod& cod = factors_[k].cod;
    const int m = cnt - cadr_[k];
    if (m != cod.n()) return false;
    if (cod.rank() < m) {
      deficient_ = true;
      const int* c = crow_.data() + cadr_[k];
      for (int a = 0; a < m; a++) tq_[a] = h * sol.force[c[a]];
      cod.SolveT(tq_.data(), tq_.data());
      for (int a = 0; a < m; a++) ytil_[c[a]] = tq_[a];
    }
    StoreOperators(k, m, &off);
  }
  zall_ = true;
  znonzero_ = false;
  size_t zoff = 0;
  for (int k = 0; k < nisland_ && deficient_; k++) {
    zadr_[k] = -1;
    const Cod& cod = factors_[k].cod;
    if (cod.rank() == cod.n()) continue;
    size_t nvk = 0;
    for (int a = 0; a < is.ntrees[k]; a++) nvk += is.tree_dofnum[is.trees[is.treeadr[k] + a]];
    const size_t need = (cod.n() - cod.rank()) * nvk;
    if (nadr_[k] < 0 || cod.n() - cod.rank() > null_rows_ || zoff + need > zst_.size()) {
      zall_ = false;
      continue;
    }
    zadr_[k] = static_cast<long>(zoff);
    zoff += need;
    znonzero_ |= StoreNullVelocity(p, k);
  }
  if (nisland_ == 1) VelocityRowTable(p);
  // u = M^-1 J' f = (v+ - v_free) / h of the solution (q = M^-1 J' y~ where first read)
  for (int j = 0; j < nv; j++) ustep_[j] = (sol.v_next[j] - p.v_free[j]) / h;
  qfake_ready_ = false;
  tan_ready_ = true;
  return true;
}

const double* LcpSolver::NullVelocity(const Problem& p) {
  // q = M^-1 J' y~ = (v(y~) - v_free) / h, formed once per solve on first use
  if (deficient_ && !qfake_ready_) {
    VelocityFromForce(p, ytil_.data(), qfake_.data(), nullptr);
    for (int j = 0; j < p.nv; j++) qfake_[j] = (qfake_[j] - p.v_free[j]) / p.h;
  }
  qfake_ready_ = true;
  return qfake_.data();
}

void LcpSolver::VelocityRowTable(const Problem& p) {
  const SparseRows& J = p.J;
  const int nv = p.nv, m = cadr_[1] - cadr_[0];
  const int* c = crow_.data() + cadr_[0];
  // entries per column, then their addresses (a row without a velocity term left out:
  // QueueTangent's zero stands)
  auto unread = [&](int a) { return cdvel_[cadr_[0] + a] == 0 && !csoft_[cadr_[0] + a]; };
  for (int j = 0; j <= nv; j++) vadr_[j] = 0;
  for (int a = 0; a < m; a++) {
    if (unread(a)) continue;
    const int adr = J.rowadr[c[a]];
    for (int k = 0; k < J.rownnz[c[a]]; k++) vadr_[J.colind[adr + k] + 1]++;
  }
  for (int j = 0; j < nv; j++) vadr_[j + 1] += vadr_[j];
  for (int j = 0; j < nv; j++) vput_[j] = vadr_[j];
  // each entry's (0 + cdvel vel) - h aref with vel its value and aref = -B vel (QueueTangent's
  // operations)
  for (int a = 0; a < m; a++) {
    if (unread(a)) continue;
    const int g = c[a], adr = J.rowadr[g];
    for (int k = 0; k < J.rownnz[g]; k++) {
      const double vel = J.val[adr + k];
      const double aref = -p.KB[2 * g + 1] * vel;
      const int q = vput_[J.colind[adr + k]]++;
      vrow_[q] = a;
      vst_[q] = StabilizationChange(0, cdvel_[cadr_[0] + a], csoft_[cadr_[0] + a], nullptr, &vel,
                                    &aref, nullptr, p.h, 0);
    }
  }
}

bool LcpSolver::StoreNullVelocity(const Problem& p, int k) {
  // Z_i = M^-1 w_i, w_i = J_C' V_i + J_B' (bcoef V_i[bnormal]) on the island's trees, i < m - r;
  // a w_i that cancels to rounding (below kNullCancel of its terms' magnitudes, as when the
  // null-space pattern exerts no generalized force) is stored as zero; false: Z is zero
  const Islands& is = p.islands;
  const SparseRows& J = p.J;
  const int m = cadr_[k + 1] - cadr_[k], nn = m - factors_[k].cod.rank();
  const int* c = crow_.data() + cadr_[k];
  double* z = zst_.data() + zadr_[k];
  double* mag = dvp_.data();  // |terms| summed (dvp_: per-direction scratch)
  bool nonzero = false;
  for (int i = 0; i < nn; i++) {
    const double* v = pinv_.data() + nadr_[k] + static_cast<size_t>(i) * m;
    for (int a = 0; a < is.ntrees[k]; a++) {
      const int t = is.trees[is.treeadr[k] + a];
      for (int j = is.tree_dofadr[t]; j < is.tree_dofadr[t] + is.tree_dofnum[t]; j++)
        tmp_[j] = mag[j] = 0;
    }
    auto add_row = [&](int g, double w) {
      for (int q = J.rowadr[g]; q < J.rowadr[g] + J.rownnz[g]; q++) {
        tmp_[J.colind[q]] += w * J.val[q];
        mag[J.colind[q]] += std::fabs(w * J.val[q]);
      }
    };
    for (int a = 0; a < m; a++) add_row(c[a], v[a]);
    for (int b = badr_[k]; b < badr_[k + 1]; b++) add_row(brow_[b], bcoef_[b] * v[bnormal_[b]]);
    double wmax = 0, magmax = 0;
    for (int a = 0; a < is.ntrees[k]; a++) {
      const int t = is.trees[is.treeadr[k] + a];
      for (int j = is.tree_dofadr[t]; j < is.tree_dofadr[t] + is.tree_dofnum[t]; j++) {
        wmax = std::max(wmax, std::fabs(tmp_[j]));
        magmax = std::max(magmax, mag[j]);
      }
    }
    const bool zero = wmax <= kNullCancel * magmax;
    nonzero |= !zero;
    for (int a = 0; a < is.ntrees[k]; a++) {
      const int t = is.trees[is.treeadr[k] + a];
      const int b = is.tree_dofadr[t], e = b + is.tree_dofnum[t];
      if (!zero) p.mass.Solve(tmp_.data(), b, e);
      for (int j = b; j < e; j++) *z++ = zero ? 0 : tmp_[j];
    }
  }
  return nonzero;
}

void LcpSolver::NullSpaceTangentStored(const Problem& p, const ProblemTangent& dir,
                                       double* dforce) {
  // w = V tq with tq = S (dJ_R q + dR y~) + S J_R M^-1 r, r = dJ' y~ - dM q: w = V S (dJ_R q + dR
  // y~) + Z r; then dforce_C += V' w
  const Islands& is = p.islands;
  // (r only where some Z row is not zero)
  if (znonzero_) {
    IslandVelocityTangent(p, ytil_.data(), qfake_.data(), dir, false, 1, dvp_.data(),
                          reachp_.data(), false, dir.J_y);
  } else {
    for (int k = 0; k < nisland_; k++) reachp_[k] = 0;
  }
  double w[kNullMax];
  for (int k = 0; k < nisland_; k++) {
    const Cod& cod = factors_[k].cod;
    if (!touched_[k] || cod.rank() == cod.n()) continue;
    const int m = cadr_[k + 1] - cadr_[k], nn = m - cod.rank();
    const int* c = crow_.data() + cadr_[k];
    const double* V = pinv_.data() + nadr_[k];
    // tq without its velocity part: S (dJ_R q + dR y~)
    for (int a = 0; a < m; a++) {
      const int g = c[a];
      const double dR = dir.R && csoft_[cadr_[k] + a] ? dir.R[g] * ytil_[g] : 0;
      tq_[a] = DJDot(p, dir, g, qfake_.data(), dir.J_x) + dR;
    }
    for (int b = badr_[k]; b < badr_[k + 1]; b++)
      tq_[bnormal_[b]] += bcoef_[b] * DJDot(p, dir, brow_[b], qfake_.data(), dir.J_x);
    bool any = false;
    for (int i = 0; i < nn; i++) {
      const double* v = V + static_cast<size_t>(i) * m;
      double s = 0;
      for (int a = 0; a < m; a++) s += v[a] * tq_[a];
      w[i] = s;
    }
    if (reachp_[k]) {
      // Z r over the island's trees' dofs, row by row
      const double* z = zst_.data() + zadr_[k];
      size_t nvk = 0;
      for (int a = 0; a < is.ntrees[k]; a++) nvk += is.tree_dofnum[is.trees[is.treeadr[k] + a]];
      for (int i = 0; i < nn; i++) {
        const double* zi = z + static_cast<size_t>(i) * nvk;
        double s = 0;
        for (int a = 0; a < is.ntrees[k]; a++) {
          const int t = is.trees[is.treeadr[k] + a];
          const int b = is.tree_dofadr[t], e = b + is.tree_dofnum[t];
          for (int j = b; j < e; j++) s += *zi++ * dvp_[j];
        }
        w[i] += s;
      }
    }
    for (int i = 0; i < nn; i++) any |= w[i] != 0;
    if (!any) continue;  // the direction does not reach this island
    if (rec_slot_ >= 0) {
      // (QueueTangent: the weights, added by FlushTangents as here)
      for (int i = 0; i < nn; i++)
        blk_ns_[static_cast<size_t>(i) * kTangentSlots + rec_slot_] = w[i];
      blk_nson_[rec_slot_] = 1;
      continue;
    }
    for (int i = 0; i < nn; i++) {
      const double* v = V + static_cast<size_t>(i) * m;
      for (int a = 0; a < m; a++) dforce[c[a]] += w[i] * v[a];
    }
  }
}

void LcpSolver::NullSpaceTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                                 double* dforce) {
  // (I - K^+ K) dK' K^+' x_C on rank-deficient islands, with dA y~ = dJ q + J dvp / h and
  // dvp = h M^-1 (dJ' y~ - dM q); zero for a direction that leaves J, M and R alone
  if (!dir.J && !dir.M && !dir.R) return;
  NullVelocity(p);
  if (zall_) return NullSpaceTangentStored(p, dir, dforce);
  IslandVelocityTangent(p, ytil_.data(), qfake_.data(), dir, false, 1, dvp_.data(), reachp_.data(),
                        true, dir.J_y);
  bool reached = false;  // dvp is not zero on the island's trees
  auto dAy = [&](int g, bool soft) {
    const double dR = dir.R && soft ? dir.R[g] * ytil_[g] : 0;
    return RowDots(p, dir, g, qfake_.data(), reached ? dvp_.data() : nullptr, dir.J_x) + dR;
  };
  for (int k = 0; k < nisland_; k++) {
    Cod& cod = factors_[k].cod;
    if (!touched_[k] || cod.rank() == cod.n()) continue;
    reached = reachp_[k];
    const int m = cadr_[k + 1] - cadr_[k];
    const int* c = crow_.data() + cadr_[k];
    bool any = false;
    for (int a = 0; a < m; a++) {
      tq_[a] = dAy(c[a], csoft_[cadr_[k] + a]);
      any |= tq_[a] != 0;
    }
    for (int b = badr_[k]; b < badr_[k + 1]; b++) {
      const double v = bcoef_[b] * dAy(brow_[b], false);
      tq_[bnormal_[b]] += v;
      any |= v != 0;
    }
    if (!any) continue;  // the direction does not reach this island
    const double* add = dy_.data();
    if (nadr_[k] >= 0) {
      NullApply(pinv_.data() + nadr_[k], m, m - cod.rank(), tq_.data(), dy_.data());
    } else {
      cod.NullProject(tq_.data(), tq_.data());
      add = tq_.data();
    }
    if (rec_slot_ >= 0) {
      // (QueueTangent: the vector, added by FlushTangents)
      for (int a = 0; a < m; a++)
        blk_ns_[static_cast<size_t>(a) * kTangentSlots + rec_slot_] = add[a];
      blk_nson_[rec_slot_] = 2;
      continue;
    }
    for (int a = 0; a < m; a++) dforce[c[a]] += add[a];
  }
}

void LcpSolver::IslandVelocityTangent(const Problem& p, const double* force, const double* u,
                                      const ProblemTangent& dir, bool free, double scale,
                                      double* dv, unsigned char* reach, bool solve,
                                      const double* dJf) {
  // only the islands' trees matter (J_C dv), and of those only the ones of the islands the
  // direction touches (touched_; M^-1 is exact tree by tree): a tree whose right-hand side is
  // zero is not solved, and dv is left as it was on the trees of untouched islands
  const Islands& is = p.islands;
  const SparseRows& J = p.J;
  const TreeMass& mass = p.mass;
  const int nv = p.nv;
  for (int k = 0; k < nisland_; k++) {
    reach[k] = 0;
    if (!touched_[k]) continue;
    for (int a = 0; a < is.ntrees[k]; a++) {
      const int t = is.trees[is.treeadr[k] + a];
      for (int i = is.tree_dofadr[t]; i < is.tree_dofadr[t] + is.tree_dofnum[t]; i++) dv[i] = 0;
    }
    bool added = false;  // dJ' force or dM u written into dv (else dv is zero on the trees)
    if (dJf) {
      // (the smooth stage's dJ' force, on the island's trees)
      added = true;
      for (int a = 0; a < is.ntrees[k]; a++) {
        const int t = is.trees[is.treeadr[k] + a];
        for (int i = is.tree_dofadr[t]; i < is.tree_dofadr[t] + is.tree_dofnum[t]; i++)
          dv[i] = dJf[i];
      }
    } else if (dir.J) {
      // the island's rows have their columns on its trees
      const int* rows = is.rows + is.rowadr[k];
      for (int j = 0; j < is.nrows[k]; j++) {
        const int i = rows[j];
        const double fi = force[i];
        if (fi == 0) continue;
        added = true;
        const int adr = J.rowadr[i];
        for (int c = 0; c < J.rownnz[i]; c++) dv[J.colind[adr + c]] += dir.J[adr + c] * fi;
      }
    }
    for (int a = 0; a < is.ntrees[k]; a++) {
      const int t = is.trees[is.treeadr[k] + a];
      const int b = is.tree_dofadr[t], e = b + is.tree_dofnum[t];
      if (dir.M) {
        const int m0 = mass.madr[b], m1 = e < nv ? mass.madr[e] : mass.nM;
        // (listed rows: their tree, where a zero dM subtracts exact zeros)
        bool dm = dir.M_rows && dir.M_nrows > 0 && dir.M_rows[0] >= b && dir.M_rows[0] < e;
        for (int i = m0; i < m1 && !dm && !dir.M_rows; i++) dm = dir.M[i] != 0;
        added |= dm;
        if (dm && dir.M_lazy) {
          // dM u in closed form (tmp = -dM u)
          for (int i = b; i < e; i++) tmp_[i] = 0;
          SubMassTangent(p, dir, u, tmp_.data(), b, e);
          for (int i = b; i < e; i++) dv[i] += tmp_[i];
        } else if (dm && dir.M_rows) {
          // dM's rows (on this tree: dM is nonzero here)
          for (int i = b; i < e; i++) tmp_[i] = 0;
          mass.AddMulValuesRows(dir.M, dir.M_rows, dir.M_nrows, u, tmp_.data());
          for (int i = b; i < e; i++) dv[i] -= tmp_[i];
        } else if (dm) {
          mass.MulValues(dir.M, u, tmp_.data(), b, e);
          for (int i = b; i < e; i++) dv[i] -= tmp_[i];
        }
      }
      bool any = false;
      for (int i = b; i < e && !any && added; i++) any = dv[i] != 0;
      if (any && solve) {
        mass.Solve(dv, b, e);
        for (int i = b; i < e; i++) dv[i] *= scale;
      }
      if (free && dir.v_free) {
        for (int i = b; i < e; i++) {
          dv[i] += dir.v_free[i];
          any |= dv[i] != 0;
        }
      }
      reach[k] |= any;
    }
  }
}

double LcpSolver::Coupling(const Problem& p, int g, int* normal) const {
  *normal = -1;
  if (p.kind[g] != kRowContactFriction || state_[g] == kLcpClamped) return 0.0;
  const Contact& con = p.con[con_of_row_[g]];
  if (state_[con.row] != kLcpClamped || FromDistance(con)) return 0.0;
  *normal = con.row;
  return (state_[g] == kLcpUpper ? 1 : -1) * con.mu[g - con.row - 1];
}

void LcpSolver::MarkTouched(const Problem& p, const ProblemTangent& dir) {
  if (dir.touched) {
    std::copy(dir.touched, dir.touched + nisland_, touched_.begin());
  } else {
    reach_.Mark(p, dir, touched_.data());
  }
}

bool LcpSolver::ForceTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                             double* dforce) {
  const int nrow = p.nrow;
  const double h = p.h;
  if (!tan_ready_ && !PrepareTangent(p, sol)) return false;
  for (int i = 0; i < nrow; i++) dforce[i] = 0;
  // the islands whose data the direction perturbs (most directions move one tree): the others
  // keep dforce = 0 without any work
  MarkTouched(p, dir);

  // velocity change at fixed impulses
  IslandVelocityTangent(p, sol.force, ustep_.data(), dir, true, h, dv0_.data(), reach0_.data(),
                        true, dir.J_force);

  // dx_C = K^+ (dc - dK x_C), island by island; an island the direction does not reach (its
  // right-hand side exactly zero) keeps dx_C = 0 without a solve
  for (int k = 0; k < nisland_; k++) {
    if (!touched_[k]) continue;
    const int m = cadr_[k + 1] - cadr_[k];
    const int* c = crow_.data() + cadr_[k];
    const double* dpos = cdpos_.data() + cadr_[k];
    const double* dvel = cdvel_.data() + cadr_[k];
    bool any = false;
    for (int a = 0; a < m; a++) {
      const int g = c[a];
      const double dstab =
          StabilizationChange(dir, g, dpos[a], dvel[a], csoft_[cadr_[k] + a], h, sol.force[g]);
      // (dv0 = 0 on the trees of an island it does not reach)
      rc_[a] = -(RowDots(p, dir, g, sol.v_next, reach0_[k] ? dv0_.data() : nullptr, dir.J_vnext) +
                 dstab);
      any |= rc_[a] != 0;
    }
    if (!any) continue;
    if (kadr_[k] >= 0) {
      MatVec(pinv_.data() + kadr_[k], m, rc_.data(), dy_.data());
    } else {
      factors_[k].cod.Solve(rc_.data(), dy_.data());
    }
    for (int a = 0; a < m; a++) dforce[c[a]] = dy_[a];
  }

  // rank deficient islands: + (I - K^+ K) dK' K^+' x_C
  if (deficient_) NullSpaceTangent(p, sol, dir, dforce);

  // bound rows follow their normals; impulses to forces (rows outside islands have none)
  const Islands& is = p.islands;
  for (int k = 0; k < nisland_; k++) {
    if (!touched_[k]) continue;
    const int* c = crow_.data() + cadr_[k];
    for (int b = badr_[k]; b < badr_[k + 1]; b++)
      dforce[brow_[b]] = bcoef_[b] * dforce[c[bnormal_[b]]];
    const int* rows = is.rows + is.rowadr[k];
    for (int j = 0; j < is.nrows[k]; j++) dforce[rows[j]] /= h;
  }
  return true;
}

void LcpSolver::QueueRhs(const double* d0, const double* x, int b, int e, double* R) const {
  // R[j S] = (d0[j] or 0) + (x[j] or 0) on dofs [b, e), the sum's operands fixed outside the
  // loop (lean_queue_on_) or chosen per entry
  const size_t S = kTangentSlots;
  if (!lean_queue_on_) {
    for (int j = b; j < e; j++) R[j * S] = (d0 ? d0[j] : 0) + (x ? x[j] : 0);
  } else if (d0 && x) {
    for (int j = b; j < e; j++) R[j * S] = d0[j] + x[j];
  } else if (d0) {
    for (int j = b; j < e; j++) R[j * S] = d0[j] + 0;
  } else if (x) {
    for (int j = b; j < e; j++) R[j * S] = 0 + x[j];
  } else {
    for (int j = b; j < e; j++) R[j * S] = 0;
  }
}

void LcpSolver::QueueRows(const Problem& p, const ProblemTangent& dir, const Solution& sol,
                          int slot) {
  // each clamped row's stabilization change and dJ v+ into the slot's column of blk_st_ and
  // blk_a_; with lean_queue_on_ a direction without row tangents or dJ writes their zeros, and
  // one without soft rows' terms reads dpos and dvel alone (StabilizationChange's sums)
  const size_t S = kTangentSlots;
  const int m = cadr_[1] - cadr_[0];
  const int* c = crow_.data() + cadr_[0];
  const double h = p.h;
  double *st = blk_st_.data() + slot, *A = blk_a_.data() + slot;
  const double *pos = dir.pos, *vel = dir.vel, *jv = dir.J_vnext;
  const bool soft = dir.aref || dir.R;
  if (!lean_queue_on_ || soft || (!jv && dir.J)) {
    for (int a = 0; a < m; a++) {
      const int g = c[a];
      st[a * S] = StabilizationChange(dir, g, cdpos_[a], cdvel_[a], csoft_[a], h, sol.force[g]);
      A[a * S] = DJDot(p, dir, g, sol.v_next, jv);
    }
    return;
  }
  const double *cp = cdpos_.data(), *cv = cdvel_.data();
  for (int a = 0; a < m; a++) {
    const int g = c[a];
    st[a * S] = StabilizationChange(cp[a], cv[a], false, pos ? pos + g : nullptr,
                                    vel ? vel + g : nullptr, nullptr, nullptr, h, 0);
    A[a * S] = jv ? jv[g] : 0;
  }
}

bool LcpSolver::QueueTangent(const Problem& p, const ProblemTangent& dir, int slot) {
  // ForceTangent's parts that read the direction's data, on the one island: dv0's right-hand
  // side and dv_free, each clamped row's dJ v+ and stabilization change, the null-space term
  // (where read)
  const size_t S = kTangentSlots;
  if (p.islands.nisland != 1 || slot < 0 || slot >= kTangentSlots || !solved_) return false;
  const Solution& sol = *solved_;
  if (!tan_ready_ && !PrepareTangent(p, sol)) return false;
  MarkTouched(p, dir);
  blk_on_[slot] = touched_[0];
  blk_nson_[slot] = 0;
  if (!touched_[0]) return true;
  const Islands& is = p.islands;
  const double h = p.h;
  // (exact zeros on the trees where ForceTangent does not solve: their solve gives zeros; a
  // direction that moves neither J nor M, a velocity or control one, has r = 0 unread)
  if (!lean_queue_on_ || dir.J || dir.J_force || dir.M) {
    IslandVelocityTangent(p, sol.force, ustep_.data(), dir, false, h, dv0_.data(), reach0_.data(),
                          false, dir.J_force);
  } else {
    reach0_[0] = 0;
  }
  // a deferred dv_free = e_unit + h M^-1 x joins dv0's solve: dv0 = e_unit + h M^-1 (r + x)
  const double* x = dir.v_free ? nullptr : dir.v_free_rhs;
  const bool r = reach0_[0];
  blk_ron_[slot] = r || x;
  blk_vfon_[slot] = dir.v_free != nullptr;
  blk_unit_[slot] = x ? dir.v_free_unit : -1;
  // (the flags and arrays read once: the stores would reload them)
  const bool ron = blk_ron_[slot], vfon = blk_vfon_[slot];
  const double *d0 = dv0_.data(), *vf = dir.v_free;
  double *R = blk_r_.data() + slot, *VF = blk_vf_.data() + slot;
  for (int t = is.treeadr[0]; t < is.treeadr[0] + is.ntrees[0]; t++) {
    const int b = is.tree_dofadr[is.trees[t]], e = b + is.tree_dofnum[is.trees[t]];
    if (ron) QueueRhs(r ? d0 : nullptr, x, b, e, R);
    for (int j = b; j < e && vfon; j++) VF[j * S] = vf[j];
  }
  QueueRows(p, dir, sol, slot);
  // a velocity direction's rows left unformed (dir.vel_unit: pos, vel, aref and R null, dstab
  // zero above): its column's entries from VelocityRowTable
  const int u = dir.vel_unit;
  for (int q = u >= 0 ? vadr_[u] : 0; q < (u >= 0 ? vadr_[u + 1] : 0); q++)
    blk_st_[vrow_[q] * S + slot] = vst_[q];
  if (deficient_ && !NullTermUnread()) {
    rec_slot_ = slot;
    NullSpaceTangent(p, sol, dir, nullptr);
    rec_slot_ = -1;
  }
  return true;
}

const char* LcpSolver::TangentJacobianRows(const Problem& p) {
  // no row's dJ: QueueTangent reads it in products only (ReadsJacobianProducts). With a position
  // correction (whose PositionTangent reads dJ; the derivative then takes no blocks) every row's
  if (!jacobian_products_on_ || p.islands.nisland != 1 || !solved_ || position_active_)
    return nullptr;
  if (!tan_ready_ && !PrepareTangent(p, *solved_)) return nullptr;
  for (int i = 0; i < p.nrow; i++) jrows_[i] = 0;
  return jrows_.data();
}

bool LcpSolver::ReadsRowImpedance(const Problem& p) {
  // QueueTangent's stabilization change and the null-space term read dir.R and dir.aref on the
  // clamped soft rows alone (csoft_, PrepareTangent)
  if (!impedance_unread_on_ || !tan_ready_) return true;
  for (int a = 0; a < cadr_[nisland_]; a++) {
    if (csoft_[a]) return true;
  }
  return false;
}

bool LcpSolver::TangentProducts(const Problem& p, const double** x, const double** y) {
  // the null-space term's q~ = M^-1 J' y~ and y~ (PrepareTangent, rank-deficient islands; none
  // where the term is not read); dJ' y~ only where it is read (a stored null-space velocity map
  // that is not zero, or none stored)
  if (!tan_ready_ || !deficient_ || NullTermUnread()) return false;
  *x = NullVelocity(p);
  *y = znonzero_ || !zall_ ? ytil_.data() : nullptr;
  return true;
}

const double* LcpSolver::BlockVelocity(const Problem& p, int nslot, int nw, size_t* ld) {
  // dv0 = h M^-1 r + dv_free of every slot on the island's trees (a deferred dv_free's
  // right-hand side in r: e_unit + h M^-1 (r + x)) (ForceTangent's
  // IslandVelocityTangent: the same operations per column; a slot whose r is zero has
  // dv0 = 0 + dv_free without a solve); the columns from nslot to nw zero. The slots with an r
  // are solved at once: when every slot has one, in blk_r_ itself (stride kTangentSlots,
  // lean_flush_on_) or copied into blk_x_ (stride nw), else packed into blk_m_ (its width,
  // padded as nw is, its pad zero) and scattered into blk_x_; the block and its stride returned
  const Islands& is = p.islands;
  const size_t S = kTangentSlots;
  const double h = p.h;
  int packed[kTangentSlots], nc = 0;
  unsigned char vfon[kTangentSlots];  // (the flags read once: the stores would reload them)
  bool anyvf = false;
  for (int s = 0; s < nslot; s++) {
    if (blk_on_[s] && blk_ron_[s]) packed[nc++] = s;
    vfon[s] = blk_vfon_[s];
    anyvf |= vfon[s] != 0;
  }
  const bool direct = block_in_place_on_ && nc == nslot;
  const bool own = direct && lean_flush_on_;  // (solved where QueueTangent put it)
  const int ncw = direct ? nw : PaddedWidth(nc, block_in_place_on_);
  const size_t nb = own ? S : nw;
  double* X = own ? blk_r_.data() : blk_x_.data();
  double* Y = direct ? X : blk_m_.data();
  const double* R = blk_r_.data();
  for (int t = is.treeadr[0]; t < is.treeadr[0] + is.ntrees[0]; t++) {
    const int b = is.tree_dofadr[is.trees[t]], e = b + is.tree_dofnum[is.trees[t]];
    for (int j = b; j < e; j++) {
      if (own) {
        for (int c = nslot; c < nw; c++) Y[j * S + c] = 0;
        continue;
      }
      for (int c = 0; c < nc; c++) Y[j * ncw + c] = R[j * S + packed[c]];
      for (int c = nc; c < ncw; c++) Y[j * ncw + c] = 0;
    }
    if (nc) p.mass.SolveBlock(Y, ncw, own ? S : ncw, b, e);
    for (int j = b; j < e; j++) {
      double* x = X + j * nb;
      if (direct) {
        for (int s = 0; s < nw; s++) x[s] *= h;
      } else {
        for (int s = 0; s < nw; s++) x[s] = 0;
        for (int c = 0; c < nc; c++) x[packed[c]] = Y[j * ncw + c] * h;
      }
      const double* vf = blk_vf_.data() + j * S;
      for (int s = 0; s < nslot && anyvf; s++) {
        if (vfon[s]) x[s] += vf[s];
      }
    }
  }
  // a deferred dv_free's unit dv (on the island's trees, where dv0 is read)
  for (int s = 0; s < nslot; s++) {
    const int u = blk_unit_[s];
    if (blk_on_[s] && u >= 0 && is.tree_island[p.dof_tree[u]] == 0) X[u * nb + s] += 1;
  }
  *ld = nb;
  return X;
}

constexpr int kRowGroup = 4;  // rows taken at once by BlockRowChange and BlockPinv

// y[r] = val[r] X (nw columns, stride ld) for ng <= kRowGroup rows that share the pattern col
// (null: dense rows of n), each column's sums as RowTimesWide forms them
static void GroupTimes(const double* const* val, const int* col, int ng, int n, const double* X,
                       size_t ld, int nw, double* const* y) {
  switch (ng) {
    case 4:
      return columns::RowsTimesWide<4>(val, col, n, X, ld, nw, y);
    case 3:
      return columns::RowsTimesWide<3>(val, col, n, X, ld, nw, y);
    case 2:
      return columns::RowsTimesWide<2>(val, col, n, X, ld, nw, y);
    default:
      return columns::RowTimesWide(val[0], col, n, X, ld, nw, y[0]);
  }
}

bool LcpSolver::BlockRowChange(const Problem& p, int nslot, int nw, const double* X, size_t nb) {
  // rc = -(dJ_C v+ + J_C dv0 + dstab) of every slot, J_C dv0 with each entry of J applied to all
  // nw columns of dv0 (X, stride nb; each column's sum in RowDots' order)
  const SparseRows& J = p.J;
  const size_t S = kTangentSlots;
  const int m = cadr_[1] - cadr_[0];
  const int* c = crow_.data() + cadr_[0];
  double u[kRowGroup][kTangentSlots];
  // (a slot's flag as 1.0 or 0.0, local: in doubles the loop vectorizes, and the stores into
  // rc would reload a member's flags)
  double rcon[kTangentSlots] = {};
  for (int a = 0; a < m;) {
    // (consecutive rows with one pattern, a contact's, at once: X loaded once for them)
    const int g0 = c[a], adr = J.rowadr[g0];
    int ng = 1;
    while (row_groups_on_ && ng < kRowGroup && a + ng < m && c[a + ng] == g0 + ng &&
           J.SamePattern(g0, g0 + ng)) {
      ng++;
    }
    const double* val[kRowGroup];
    double* y[kRowGroup];
    for (int r = 0; r < ng; r++) {
      val[r] = J.val + J.rowadr[g0 + r];
      y[r] = u[r];
    }
    GroupTimes(val, J.colind + adr, ng, J.rownnz[g0], X, nb, nw, y);
    for (int r = 0; r < ng; r++, a++) {
      double* rc = blk_rc_.data() + a * S;
      const double *A = blk_a_.data() + a * S, *st = blk_st_.data() + a * S;
      for (int s = 0; s < nslot; s++) {
        const double v = -((A[s] + u[r][s]) + st[s]);
        rc[s] = v;
        rcon[s] = v != 0 ? 1.0 : rcon[s];
      }
      for (int s = nslot; s < nw; s++) rc[s] = 0;
    }
  }
  bool any = false;
  for (int s = 0; s < nslot; s++) {
    blk_rcon_[s] = rcon[s] != 0;
    any |= blk_on_[s] && rcon[s] != 0;
  }
  return any;
}

void LcpSolver::BlockPinv(int nslot, int nw) {
  // dy = K^+ rc of every slot: the stored K^+ applied to all nw columns (each column's sums in
  // MatVec's order), or the decomposition column by column
  const size_t S = kTangentSlots;
  const int m = cadr_[1] - cadr_[0];
  if (kadr_[0] >= 0) {
    const double* K = pinv_.data() + kadr_[0];
    const int R = row_groups_on_ ? kRowGroup : 1;
    for (int a = 0; a < m;) {
      const int ng = std::min(R, m - a);
      const double* val[kRowGroup];
      double* y[kRowGroup];
      for (int r = 0; r < ng; r++) {
        val[r] = K + static_cast<size_t>(a + r) * m;
        y[r] = blk_dy_.data() + (a + r) * S;
      }
      GroupTimes(val, nullptr, ng, m, blk_rc_.data(), S, nw, y);
      a += ng;
    }
    return;
  }
  for (int s = 0; s < nslot; s++) {
    if (!blk_on_[s] || !blk_rcon_[s]) continue;
    for (int a = 0; a < m; a++) rc_[a] = blk_rc_[a * S + s];
    factors_[0].cod.Solve(rc_.data(), dy_.data());
    for (int a = 0; a < m; a++) blk_dy_[a * S + s] = dy_[a];
  }
}

bool LcpSolver::FlushTangents(const Problem& p, int nslot, double* dforce) {
  // the queued slots' dv0, rc and K^+ rc at once, then each slot's forces as ForceTangent
  // forms them (the null-space term added after K^+ rc, the bound rows, impulses to forces)
  const size_t S = kTangentSlots;
  const int nr = p.nrow;
  if (p.islands.nisland != 1 || nslot > kTangentSlots || !tan_ready_) return false;
  for (size_t i = 0; i < static_cast<size_t>(nr) * nslot; i++) dforce[i] = 0;
  bool on = false;
  for (int s = 0; s < nslot; s++) on |= blk_on_[s] != 0;
  if (!on) return true;
  // (the blocks' width padded to a multiple of four: no single columns in the kernels' chunks)
  const int nw = PaddedWidth(nslot, block_in_place_on_);
  size_t ld;
  const double* dv0 = BlockVelocity(p, nslot, nw, &ld);
  const bool pinv = BlockRowChange(p, nslot, nw, dv0, ld);
  if (pinv) BlockPinv(nslot, nw);
  const Islands& is = p.islands;
  const int m = cadr_[1] - cadr_[0];
  const int* c = crow_.data() + cadr_[0];
  const int* rows = is.rows + is.rowadr[0];
  const int nrows = is.nrows[0];
  const double h = p.h;  // (read once: the stores into f would reload it)
  // (the lean slots' K^+ rc / h of every slot at once, a row's slots contiguous: the divisions
  // vectorize; into rc's storage, read no more)
  const bool divided = lean_flush_on_ && divided_rows_on_ && pinv;
  for (int a = 0; a < m && divided; a++) {
    const double* dy = blk_dy_.data() + a * S;
    double* q = blk_rc_.data() + a * S;
    for (int s = 0; s < nw; s++) q[s] = dy[s] / h;
  }
  for (int s = 0; s < nslot; s++) {
    if (!blk_on_[s]) continue;
    double* f = dforce + static_cast<size_t>(s) * nr;
    const bool rcon = blk_rcon_[s];
    if (lean_flush_on_ && blk_nson_[s] == 0) {
      // (without a null-space term: K^+ rc, the bound rows from it and the division by h in one
      // pass, the same operations; the other rows' zeros stay zeros)
      const double* dy = blk_dy_.data() + s;
      if (divided) {
        const double* q = blk_rc_.data() + s;
        for (int a = 0; a < m && rcon; a++) f[c[a]] = q[a * S];
      } else {
        for (int a = 0; a < m && rcon; a++) f[c[a]] = dy[a * S] / h;
      }
      for (int b = badr_[0]; b < badr_[1]; b++)
        f[brow_[b]] = (bcoef_[b] * (rcon ? dy[bnormal_[b] * S] : 0.0)) / h;
      continue;
    }
    for (int a = 0; a < m && rcon; a++) f[c[a]] = blk_dy_[a * S + s];
    if (blk_nson_[s] == 1) {
      const int nn = m - factors_[0].cod.rank();
      const double* V = pinv_.data() + nadr_[0];
      for (int i = 0; i < nn; i++) {
        const double* v = V + static_cast<size_t>(i) * m;
        const double w = blk_ns_[i * S + s];
        for (int a = 0; a < m; a++) f[c[a]] += w * v[a];
      }
    } else if (blk_nson_[s] == 2) {
      for (int a = 0; a < m; a++) f[c[a]] += blk_ns_[a * S + s];
    }
    for (int b = badr_[0]; b < badr_[1]; b++) f[brow_[b]] = bcoef_[b] * f[c[bnormal_[b]]];
    for (int j = 0; j < nrows; j++) f[rows[j]] /= h;
  }
  return true;
}

bool LcpSolver::Refactor(const Problem& p, int island) {
  const Islands& is = p.islands;
  const int n = is.nrows[island];
  const int* rows = is.rows + is.rowadr[island];
  IslandFactor& fac = factors_[island];
  if (fac.lazy) {
    // an inexact answer's classification, factored now
    fac.lazy = false;
    fac.stored = true;
  }
  if (!fac.stored) return false;
  tan_ready_ = false;
  BuildIsland(p, island);
  const DenseLcp lcp{n,          n,          A_.data(),      b_.data(),
                     lo_.data(), hi_.data(), findex_.data(), mu_.data()};
  for (int j = 0; j < n; j++) lstate_[j] = state_[rows[j]];
  BoxedOptions opt;
  return boxed_.Reduced(lcp, lstate_.data(), 0, opt.rtol, &fac.cod, x_.data(), w_.data());
}

bool LcpSolver::SetTangentModes(const Problem& p, const signed char* mode) {
  const Islands& is = p.islands;
  if (nisland_ != is.nisland) return false;
  tan_ready_ = false;
  if (!mode) {
    // the solve's own classification and factorizations
    if (!modes_set_) return true;
    for (int i = 0; i < p.nrow; i++) state_[i] = saved_state_[i];
    bool ok = true;
    for (int k = 0; k < nisland_; k++) {
      if (changed_[k]) ok = Refactor(p, k) && ok;
      changed_[k] = 0;
    }
    modes_set_ = false;
    return ok;
  }
  if (!modes_set_) {
    for (int i = 0; i < p.nrow; i++) saved_state_[i] = state_[i];
    modes_set_ = true;
  }
  for (int i = 0; i < p.nrow; i++) state_[i] = saved_state_[i];
  for (int c = 0; c < p.ncon; c++) {
    const Contact& con = p.con[c];
    if (mode[c] < 0) continue;
    const bool clamped = saved_state_[con.row] == kLcpClamped;
    if (mode[c] == 1 && !clamped) {
      // touching: the normal clamped, friction sticking
      for (int r = 0; r < con.dim; r++) state_[con.row + r] = kLcpClamped;
    } else if (mode[c] == 0 && clamped) {
      // separating: no impulse in any row of the contact
      for (int r = 0; r < con.dim; r++) state_[con.row + r] = kLcpLower;
    }
  }
  bool ok = true;
  for (int k = 0; k < nisland_; k++) {
    const int* rows = is.rows + is.rowadr[k];
    bool differs = false;
    for (int j = 0; j < is.nrows[k]; j++) differs |= state_[rows[j]] != saved_state_[rows[j]];
    if (differs || changed_[k]) {
      ok = Refactor(p, k) && ok;
      changed_[k] = differs;
    }
  }
  return ok;
}

//---------------------------------- reverse mode --------------------------------------------------

namespace {

// y = X' x for the m x m row-major X
void MatTVec(const double* X, int m, const double* x, double* y) {
  for (int j = 0; j < m; j++) y[j] = 0;
  for (int a = 0; a < m; a++) {
    const double* r = X + static_cast<size_t>(a) * m;
    for (int j = 0; j < m; j++) y[j] += r[j] * x[a];
  }
}

// x' dM u on the tree of dofs [b, e), dM u formed as IslandVelocityTangent forms it there (0
// where dM is zero on the tree); tmp (nv) is scratch
double TreeBilinear(const Problem& p, const ProblemTangent& dir, int b, int e, const double* x,
                    const double* u, double* tmp) {
  const TreeMass& mass = p.mass;
  const int m0 = mass.madr[b], m1 = e < p.nv ? mass.madr[e] : mass.nM;
  bool dm = dir.M_rows && dir.M_nrows > 0 && dir.M_rows[0] >= b && dir.M_rows[0] < e;
  for (int i = m0; i < m1 && !dm && !dir.M_rows; i++) dm = dir.M[i] != 0;
  if (!dm) return 0;
  if (dir.M_lazy) {
    // (tmp = -dM u: the sum negated)
    for (int i = b; i < e; i++) tmp[i] = 0;
    SubMassTangent(p, dir, u, tmp, b, e);
    double s = 0;
    for (int i = b; i < e; i++) s -= x[i] * tmp[i];
    return s;
  }
  if (dir.M_rows) {
    for (int i = b; i < e; i++) tmp[i] = 0;
    mass.AddMulValuesRows(dir.M, dir.M_rows, dir.M_nrows, u, tmp);
  } else {
    mass.MulValues(dir.M, u, tmp, b, e);
  }
  double s = 0;
  for (int i = b; i < e; i++) s += x[i] * tmp[i];
  return s;
}

// out += w J_i' (row i's nonzeros)
void AddRowT(const SparseRows& J, int i, double w, double* out) {
  if (w == 0) return;
  for (int k = 0; k < J.rownnz[i]; k++)
    out[J.colind[J.rowadr[i] + k]] += w * J.val[J.rowadr[i] + k];
}

}  // namespace

bool LcpSolver::PrepareAdjoint(const Problem& p, const Solution& sol, const double* y,
                               const double* xi) {
  // y' dforce = lam' dc_C with lam = K^+' y_C, y_C the clamped rows' weights with those of the
  // bound rows that follow them (x_brow = bcoef x_normal), over h; rank deficient islands add
  // om' dK' K^+' x_C with om = (I - K^+ K) y_C spread to the rows as tq_ gathers them
  const int nv = p.nv;
  const double h = p.h;
  if (!tan_ready_ && !PrepareTangent(p, sol)) return false;
  NullVelocity(p);
  if (!PreparePositionAdjoint(p, xi)) return false;
  for (int j = 0; j < nv; j++) adj_nu_[j] = adj_pin_[j] = 0;
  for (int i = 0; i < p.nrow; i++) adj_om_[i] = 0;
  for (int k = 0; k < nisland_; k++) {
    const int m = cadr_[k + 1] - cadr_[k];
    const int* c = crow_.data() + cadr_[k];
    double* lam = adj_lam_.data() + cadr_[k];
    for (int a = 0; a < m; a++) tq_[a] = y[c[a]];
    for (int b = badr_[k]; b < badr_[k + 1]; b++) tq_[bnormal_[b]] += bcoef_[b] * y[brow_[b]];
    for (int a = 0; a < m; a++) tq_[a] /= h;
    Cod& cod = factors_[k].cod;
    if (kadr_[k] >= 0) {
      MatTVec(pinv_.data() + kadr_[k], m, tq_.data(), lam);
    } else if (m > 0) {
      cod.SolveT(tq_.data(), lam);
    }
    for (int a = 0; a < m; a++) AddRowT(p.J, c[a], lam[a], adj_nu_.data());
    if (m == 0 || cod.rank() == m) continue;
    if (nadr_[k] >= 0) {
      NullApply(pinv_.data() + nadr_[k], m, m - cod.rank(), tq_.data(), dy_.data());
    } else {
      cod.NullProject(tq_.data(), dy_.data());
    }
    for (int a = 0; a < m; a++) adj_om_[c[a]] = dy_[a];
    for (int b = badr_[k]; b < badr_[k + 1]; b++) adj_om_[brow_[b]] += bcoef_[b] * dy_[bnormal_[b]];
    const int* rows = p.islands.rows + p.islands.rowadr[k];
    for (int j = 0; j < p.islands.nrows[k]; j++)
      AddRowT(p.J, rows[j], adj_om_[rows[j]], adj_pin_.data());
  }
  // pi = h M^-1 nu, pin = M^-1 J' om
  for (int j = 0; j < nv; j++) adj_pi_[j] = adj_nu_[j];
  p.mass.Solve(adj_pi_.data());
  for (int j = 0; j < nv; j++) adj_pi_[j] *= h;
  if (deficient_) p.mass.Solve(adj_pin_.data());
  return true;
}

double LcpSolver::AdjointDot(const Problem& p, const Solution& sol, const ProblemTangent& dir) {
  // over the touched islands: lam' rc = -lam' (dJ_C v+ + dstab_C) - nu' dv0, with nu' dv0 =
  // nu' dv_free + pi' (dJ' f - dM u); and om' (dJ qfake + J dvp + dR y~) with om' J dvp =
  // pin' (dJ' y~ - dM qfake)
  const Islands& is = p.islands;
  const double h = p.h;
  MarkTouched(p, dir);
  // (without row arrays, AdjointRowWeights' terms: the trees' alone)
  const bool rows = dir.J || dir.pos || dir.vel || dir.R || dir.aref;
  double s = adj_xi_ ? PositionAdjointDot(p, dir) : 0;
  for (int k = 0; k < nisland_; k++) {
    if (!touched_[k]) continue;
    for (int a = cadr_[k]; a < cadr_[k + 1] && rows; a++) {
      const int g = crow_[a];
      const double lam = adj_lam_[a];
      if (lam == 0) continue;
      const double dstab =
          StabilizationChange(dir, g, cdpos_[a], cdvel_[a], csoft_[a], h, sol.force[g]);
      s -= lam * (DJDot(p, dir, g, sol.v_next) + dstab);
    }
    const int* irows = is.rows + is.rowadr[k];
    for (int j = 0; j < is.nrows[k] && rows; j++) {
      const int i = irows[j];
      if (sol.force[i] != 0) s -= sol.force[i] * DJDot(p, dir, i, adj_pi_.data());
      if (!deficient_) continue;
      if (ytil_[i] != 0) s += ytil_[i] * DJDot(p, dir, i, adj_pin_.data());
      const double om = adj_om_[i];
      if (om == 0) continue;
      s += om * DJDot(p, dir, i, qfake_.data());
      if (dir.R && SoftRow(p, i)) s += om * dir.R[i] * ytil_[i];
    }
    for (int a = 0; a < is.ntrees[k]; a++) {
      const int t = is.trees[is.treeadr[k] + a];
      const int b = is.tree_dofadr[t], e = b + is.tree_dofnum[t];
      if (dir.v_free) {
        for (int i = b; i < e; i++) s -= adj_nu_[i] * dir.v_free[i];
      }
      if (!dir.M) continue;
      s += TreeBilinear(p, dir, b, e, adj_pi_.data(), ustep_.data(), tmp_.data());
      if (deficient_) s -= TreeBilinear(p, dir, b, e, adj_pin_.data(), qfake_.data(), tmp_.data());
    }
  }
  return s;
}

bool LcpSolver::AdjointRowWeights(const Problem& p, const Solution& sol, RowWeights* w) const {
  // AdjointDot's and PositionAdjointDot's row products: dJ_i's with the vectors DJDot reads
  const SparseRows& J = p.J;
  const Islands& is = p.islands;
  const double h = p.h;
  auto add = [&](int i, double s, const double* x) {
    if (s == 0) return;
    for (int q = J.rowadr[i]; q < J.rowadr[i] + J.rownnz[i]; q++) w->J[q] += s * x[J.colind[q]];
  };
  for (int k = 0; k < nisland_; k++) {
    for (int a = cadr_[k]; a < cadr_[k + 1]; a++) {
      const int g = crow_[a];
      const double lam = adj_lam_[a];
      if (lam == 0) continue;
      add(g, -lam, sol.v_next);
      w->pos[g] -= lam * cdpos_[a];
      w->vel[g] -= lam * cdvel_[a];
      if (csoft_[a]) {
        w->aref[g] += lam * h;
        w->R[g] -= lam * h * sol.force[g];
      }
    }
    const int* rows = is.rows + is.rowadr[k];
    for (int j = 0; j < is.nrows[k]; j++) {
      const int i = rows[j];
      add(i, -sol.force[i], adj_pi_.data());
      if (!deficient_) continue;
      add(i, ytil_[i], adj_pin_.data());
      add(i, adj_om_[i], qfake_.data());
      if (SoftRow(p, i)) w->R[i] += adj_om_[i] * ytil_[i];
    }
    if (!adj_xi_) continue;
    const int* prows = prow_.data() + prowadr_[k];
    const double* rho = adj_rho_.data() + prowadr_[k];
    const double* x = px_.data() + prowadr_[k];
    for (int j = 0; j < prowadr_[k + 1] - prowadr_[k]; j++) {
      const int g = prows[j];
      double dpos;
      PositionTarget(p, g, &dpos);
      add(g, x[j], adj_kappa_.data());
      add(g, -rho[j], up_.data());
      w->pos[g] -= rho[j] * dpos;
    }
  }
  return true;
}

bool LcpSolver::PreparePositionAdjoint(const Problem& p, const double* xi) {
  // xi' du = xi' z + zeta' dx with zeta = J_C M^-1 xi, zeta' dx = rho' rc for rho = A_CC^+' zeta:
  // xi' du = kappa' (dJ_C' x - dM u) - rho' (dt_C + dJ_C u), kappa = M^-1 (xi - J_C' rho)
  const Islands& is = p.islands;
  const SparseRows& J = p.J;
  adj_xi_ = position_active_ ? xi : nullptr;
  if (!adj_xi_) return true;
  if (!ptan_ready_) PreparePositionTangent(p);
  double* mx = tmp_.data();  // M^-1 xi
  for (int j = 0; j < p.nv; j++) mx[j] = adj_kappa_[j] = xi[j];
  p.mass.Solve(mx);
  for (int k = 0; k < nisland_; k++) {
    const int* rows = prow_.data() + prowadr_[k];
    const int nc = prowadr_[k + 1] - prowadr_[k];
    if (!nc) continue;
    if (!pcod_ok_[k]) return false;  // (ForceTangent's factor per direction: streamed)
    for (int j = 0; j < nc; j++) rc_[j] = J.Dot(rows[j], mx);
    double* rho = adj_rho_.data() + prowadr_[k];
    pcod_[k].SolveT(rc_.data(), rho);
    for (int j = 0; j < nc; j++) AddRowT(J, rows[j], -rho[j], adj_kappa_.data());
  }
  for (int k = 0; k < nisland_; k++) {
    if (prowadr_[k + 1] == prowadr_[k]) continue;
    for (int a = 0; a < is.ntrees[k]; a++) {
      const int t = is.trees[is.treeadr[k] + a];
      p.mass.Solve(adj_kappa_.data(), is.tree_dofadr[t], is.tree_dofadr[t] + is.tree_dofnum[t]);
    }
  }
  return true;
}

double LcpSolver::PositionAdjointDot(const Problem& p, const ProblemTangent& dir) {
  // over the touched islands with a position pass (PositionTangent's du is zero elsewhere)
  const Islands& is = p.islands;
  double s = 0;
  for (int k = 0; k < nisland_; k++) {
    const int* rows = prow_.data() + prowadr_[k];
    const int nc = prowadr_[k + 1] - prowadr_[k];
    if (!nc || !touched_[k]) continue;
    const double* rho = adj_rho_.data() + prowadr_[k];
    const double* x = px_.data() + prowadr_[k];
    for (int j = 0; j < nc && (dir.J || dir.pos); j++) {
      const int g = rows[j];
      double dpos;
      PositionTarget(p, g, &dpos);
      s += x[j] * DJDot(p, dir, g, adj_kappa_.data()) -
           rho[j] * ((dir.pos ? dpos * dir.pos[g] : 0) + DJDot(p, dir, g, up_.data()));
    }
    for (int a = 0; a < is.ntrees[k] && dir.M; a++) {
      const int t = is.trees[is.treeadr[k] + a];
      const int b = is.tree_dofadr[t], e = b + is.tree_dofnum[t];
      s -= TreeBilinear(p, dir, b, e, adj_kappa_.data(), up_.data(), tmp_.data());
    }
  }
  return s;
}

}  // namespace contactkit
