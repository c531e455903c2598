// Copyright 2026 The contactkit developers.
#include "solvers/ipm/island_lu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <utility>

#include "solvers/common/dense.h"

namespace contactkit {
namespace {

constexpr double kTinyPivot = 1e-300;

// the two members of a tree-sparse entry (A(i, j), A(j, i)) as one SIMD value (GCC/Clang vector
// extension); unaligned loads and stores through memcpy
typedef double Pair __attribute__((vector_size(16)));
inline Pair LoadPair(const double* p) {
  Pair v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void StorePair(double* p, Pair v) { std::memcpy(p, &v, sizeof(v)); }

}  // namespace

bool RowIsChain(const int* cols, int n, const int* parent) {
  for (int a = n - 1; a > 0; a--) {
    int j = cols[a];
    while (j > cols[a - 1]) j = parent[j];
    if (j != cols[a - 1]) return false;
  }
  return true;
}

bool IslandLU::Allocate(const ProblemDims& dims, long max_pool, std::string* error) {
  nv_ = dims.nv;
  const int nv = std::max(1, dims.nv), ntree = std::max(1, dims.ntree);
  const long nv2 = static_cast<long>(nv) * nv;
  const long pool = std::min(nv2, std::max(max_pool, 64L * nv));
  max_edges_ = static_cast<int>(std::min(static_cast<long>(ntree) * (ntree - 1) / 2 + 1, pool / 2));
  words_ = (ntree + 63) / 64;
  try {
    depth_.assign(nv, 0);
    lu_.assign(2 * static_cast<size_t>(std::max(1, dims.nM)), 0);
    dinv_.assign(nv, 0);
    pos_size_.assign(ntree, 0);
    pos_dof_.assign(ntree, 0);
    pos_vadr_.assign(ntree, 0);
    diag_adr_.assign(ntree, 0);
    adj_adr_.assign(ntree, 0);
    adj_num_.assign(ntree, 0);
    adj_.assign(max_edges_, 0);
    lblk_.assign(max_edges_, 0);
    ublk_.assign(max_edges_, 0);
    dof_pos_.assign(nv, 0);
    dof_off_.assign(nv, 0);
    where_.assign(ntree, -1);
    add_.assign(kMaxDenseAdd * kMaxDenseAdd + 12 * static_cast<size_t>(nv), 0);
    row_loc_.assign(std::max(1, dims.max_rows), -1);
    Y_.assign(static_cast<size_t>(kMaxConstraintRows) * nv, 0);
    D_.assign(kMaxConstraintRows * kMaxConstraintRows, 0);
    W_.assign(kMaxConstraintRows * kMaxConstraintRows, 0);
    K_.assign(kMaxConstraintRows * kMaxConstraintRows, 0);
    piv_.assign(kMaxConstraintRows, 0);
    cvec_.assign(3 * kMaxConstraintRows, 0);
    dof_loc_.assign(nv, -1);
    pool_.assign(pool, 0);
    work_.assign(nv, 0);
    col_.assign(nv, 0);
    adjbits_.assign(static_cast<size_t>(ntree) * words_, 0);
    local_tree_.assign(ntree, -1);
    node_tree_.assign(ntree, 0);
    node_pos_.assign(ntree, 0);
    weight_.assign(ntree, 0);
    done_.assign(ntree, 0);
    elim_adr_.assign(ntree, 0);
    elim_num_.assign(ntree, 0);
    scratch_.assign(ntree, 0);
  } catch (const std::bad_alloc&) {
    *error = "ipm: out of memory for the factorization workspace";
    return false;
  }
  return true;
}

bool IslandLU::Analyze(const Problem& p, int island, const uint8_t* chain, Space space,
                       const SparseRows* right) {
  const Islands& is = p.islands;
  parent_ = p.mass.parent;
  madr_ = p.mass.madr;
  problem_ = &p;
  right_ = right ? right : &p.J;
  island_ = island;
  const int ntr = is.ntrees[island];
  const int* rows = is.rows + is.rowadr[island];
  const int nrows = is.nrows[island];
  cspace_ = false;
  bool chains = ntr == 1;
  for (int r = 0; r < nrows && chains; r++) chains = chain[rows[r]] != 0;
  if (space != kDofSpace && nrows <= kMaxConstraintRows && ConstraintSpace(p, chains, space)) {
    return true;
  }

  // one tree whose rows are all chains: tree-sparse
  tree_sparse_ = false;
  if (ntr == 1 && chains) {
    tree_sparse_ = true;
    const int tree = is.trees[is.treeadr[island]];
    begin_ = is.tree_dofadr[tree];
    end_ = begin_ + is.tree_dofnum[tree];
    for (int i = begin_; i < end_; i++) {
      depth_[i] = parent_[i] < 0 ? 0 : depth_[parent_[i]] + 1;
    }
    return true;
  }

  // block-sparse over the island's trees
  Adjacency(p);
  return EliminationOrder(p) && LayoutBlocks(p);
}

bool IslandLU::ConstraintSpace(const Problem& p, bool chains, Space space) {
  const Islands& is = p.islands;
  const int ntr = is.ntrees[island_];
  const int* trees = is.trees + is.treeadr[island_];
  const int* rows = is.rows + is.rowadr[island_];
  const int nrows = is.nrows[island_];
  const int nd = is.ndofs[island_];
  const int* dofs = is.dofs + is.dofadr[island_];

  // estimated instructions per iteration (calibrated on the humanoid): dof space assembles J'WJ
  // (sum of row widths squared) and factors the tree (sum of depth^2) or the dense tree blocks;
  // constraint space factors an m x m dense matrix and pays M^-1 and Y products in each solve
  double assembly = 0, factor = 0;
  for (int r = 0; r < nrows; r++)
    assembly += static_cast<double>(p.J.rownnz[rows[r]]) * p.J.rownnz[rows[r]];
  if (chains) {
    for (int a = 0; a < nd; a++) {
      const int j = dofs[a];
      depth_[j] = parent_[j] < 0 ? 0 : depth_[parent_[j]] + 1;
      factor += static_cast<double>(depth_[j]) * (depth_[j] + 1);
    }
    factor *= 10;
  } else {
    for (int t = 0; t < ntr; t++) {
      const double n = is.tree_dofnum[trees[t]];
      factor += 2 * (2.0 / 3.0) * n * n * n;
    }
  }
  const double m = nrows;
  const double dof_cost = 6 * assembly + factor;
  const double cs_cost = 5 * (2.0 / 3.0) * m * m * m + 2 * (11 * 2 * m * nd + 8 * p.mass.nM);
  if (space != kConstraintSpace && !(cs_cost < dof_cost)) return false;
  cspace_ = true;
  m_ = nrows;
  nd_ = nd;
  for (int r = 0; r < nrows; r++) row_loc_[rows[r]] = r;
  for (int a = 0; a < nd; a++) dof_loc_[dofs[a]] = a;

  // Y = M^-1 J' (row r of Y is M^-1 J_r'), D = R Y for the right rows R
  double* col = work_.data();
  for (int r = 0; r < nrows; r++) {
    for (int a = 0; a < nd; a++) col[dofs[a]] = 0;
    p.J.AddRowTo(rows[r], 1, col);
    for (int t = 0; t < ntr; t++) {
      const int b = is.tree_dofadr[trees[t]];
      p.mass.Solve(col, b, b + is.tree_dofnum[trees[t]]);
    }
    double* y = Y_.data() + static_cast<size_t>(r) * nd;
    for (int a = 0; a < nd; a++) y[a] = col[dofs[a]];
  }
  const SparseRows& R = *right_;
  for (int r = 0; r < nrows; r++) {
    const int i = rows[r], adr = R.rowadr[i];
    for (int c = 0; c < nrows; c++) {
      const double* y = Y_.data() + static_cast<size_t>(c) * nd;
      double v = 0;
      for (int k = 0; k < R.rownnz[i]; k++) v += R.val[adr + k] * y[dof_loc_[R.colind[adr + k]]];
      D_[r * nrows + c] = v;
    }
  }
  return true;
}

void IslandLU::Adjacency(const Problem& p) {
  const Islands& is = p.islands;
  const int T = is.ntrees[island_];
  const int* trees = is.trees + is.treeadr[island_];
  const int* rows = is.rows + is.rowadr[island_];
  const int nrows = is.nrows[island_];
  const int words = (T + 63) / 64;
  for (int l = 0; l < T; l++) {
    local_tree_[trees[l]] = l;
    node_tree_[l] = trees[l];
    done_[l] = 0;
    uint64_t* row = adjbits_.data() + static_cast<size_t>(l) * words_;
    for (int w = 0; w < words; w++) row[w] = 0;
  }
  for (int r = 0; r < nrows; r++) {
    int nt = 0;
    ForEachRowTree(p, rows[r], [&](int t, int, int) { scratch_[nt++] = local_tree_[t]; });
    for (int a = 0; a < nt; a++) {
      uint64_t* row = adjbits_.data() + static_cast<size_t>(scratch_[a]) * words_;
      for (int b = 0; b < nt; b++) {
        if (a != b) row[scratch_[b] >> 6] |= uint64_t{1} << (scratch_[b] & 63);
      }
    }
  }
}

bool IslandLU::EliminationOrder(const Problem& p) {
  const Islands& is = p.islands;
  const int T = is.ntrees[island_];
  const int words = (T + 63) / 64;

  // f(m) for the uneliminated neighbours m of node l
  auto neighbours = [&](int l, auto f) {
    const uint64_t* row = adjbits_.data() + static_cast<size_t>(l) * words_;
    for (int wd = 0; wd < words; wd++) {
      uint64_t bits = row[wd];
      while (bits) {
        const int m = wd * 64 + __builtin_ctzll(bits);
        bits &= bits - 1;
        if (!done_[m]) f(m);
      }
    }
  };

  // weighted degree: dofs of the uneliminated neighbours
  auto weigh = [&](int l) {
    int w = 0;
    neighbours(l, [&](int m) { w += is.tree_dofnum[node_tree_[m]]; });
    return w;
  };
  for (int l = 0; l < T; l++) weight_[l] = weigh(l);

  // minimum degree elimination; each step records its uneliminated neighbours (the fill)
  int nedge = 0;
  for (int step = 0; step < T; step++) {
    int best = -1;
    for (int l = 0; l < T; l++) {
      if (!done_[l] && (best < 0 || weight_[l] < weight_[best])) best = l;
    }
    done_[best] = 1;
    node_pos_[best] = step;
    elim_adr_[step] = nedge;
    uint64_t* rowb = adjbits_.data() + static_cast<size_t>(best) * words_;
    int cnt = 0;
    bool full = false;
    neighbours(best, [&](int m) {
      if (nedge >= max_edges_) {
        full = true;
        return;
      }
      adj_[nedge++] = m;
      cnt++;
    });
    if (full) return false;
    elim_num_[step] = cnt;

    // neighbours become a clique
    for (int e = elim_adr_[step]; e < nedge; e++) {
      const int m = adj_[e];
      uint64_t* rowm = adjbits_.data() + static_cast<size_t>(m) * words_;
      for (int wd = 0; wd < words; wd++) rowm[wd] |= rowb[wd];
      rowm[m >> 6] &= ~(uint64_t{1} << (m & 63));
    }
    for (int e = elim_adr_[step]; e < nedge; e++) weight_[adj_[e]] = weigh(adj_[e]);
  }
  return true;
}

bool IslandLU::LayoutBlocks(const Problem& p) {
  const Islands& is = p.islands;
  const int T = is.ntrees[island_];

  // positions, neighbour lists in positions (ascending), pool addresses
  npos_ = T;
  int vadr = 0;
  long pool = 0;
  for (int l = 0; l < T; l++) {
    const int k = node_pos_[l], t = node_tree_[l];
    pos_size_[k] = is.tree_dofnum[t];
    pos_dof_[k] = is.tree_dofadr[t];
  }
  for (int k = 0; k < T; k++) {
    pos_vadr_[k] = vadr;
    vadr += pos_size_[k];
    diag_adr_[k] = static_cast<int>(pool);
    pool += static_cast<long>(pos_size_[k]) * pos_size_[k];
    for (int j = 0; j < pos_size_[k]; j++) {
      dof_pos_[pos_dof_[k] + j] = k;
      dof_off_[pos_dof_[k] + j] = j;
    }
  }
  diag_end_ = static_cast<int>(pool);
  for (int k = 0; k < T; k++) {
    adj_adr_[k] = elim_adr_[k];
    adj_num_[k] = elim_num_[k];
    int* a = adj_.data() + adj_adr_[k];
    const int n = adj_num_[k];
    for (int e = 0; e < n; e++) a[e] = node_pos_[a[e]];
    std::sort(a, a + n);
    for (int e = 0; e < n; e++) {
      const long blk = static_cast<long>(pos_size_[k]) * pos_size_[a[e]];
      lblk_[adj_adr_[k] + e] = static_cast<int>(pool);
      ublk_[adj_adr_[k] + e] = static_cast<int>(pool + blk);
      pool += 2 * blk;
    }
  }
  if (pool > static_cast<long>(pool_.size())) return false;
  pool_used_ = static_cast<int>(pool);
  return true;
}

void IslandLU::SetMass(const Problem& p) {
  if (cspace_) {
    for (int a = 0; a < m_ * m_; a++) W_[a] = 0;
    return;
  }
  if (tree_sparse_) {
    const int a = madr_[begin_], b = end_ < p.nv ? madr_[end_] : p.mass.nM;
    for (int i = a; i < b; i++) lu_[2 * i] = lu_[2 * i + 1] = p.mass.M[i];
    return;
  }
  // the diagonal blocks are written whole; the coupling blocks start at zero
  for (int i = diag_end_; i < pool_used_; i++) pool_[i] = 0;
  for (int k = 0; k < npos_; k++) {
    p.mass.Dense(pos_dof_[k], pos_dof_[k] + pos_size_[k], pool_.data() + diag_adr_[k],
                 pos_size_[k]);
  }
}

double* IslandLU::Block(int i, int j) {
  if (i == j) return pool_.data() + diag_adr_[i];
  const int k = std::min(i, j), other = std::max(i, j);
  const int* a = adj_.data() + adj_adr_[k];
  const int e = static_cast<int>(std::lower_bound(a, a + adj_num_[k], other) - a) + adj_adr_[k];
  return pool_.data() + (i > j ? lblk_[e] : ublk_[e]);
}

void IslandLU::AddJtT(const int* cols, int n, int dim, const double* Jc, const double* T, int m) {
  if (m > 1) {  // (blocks in order: each entry gets their sums as one block at a time would)
    if (!tree_sparse_ && n <= kMaxDenseAdd && m * dim <= kMaxDenseAdd) {
      AddJtTBlocks(cols, n, dim, m, Jc, T);
    } else {
      for (int g = 0; g < m; g++) AddJtT(cols, n, dim, Jc + g * dim * n, T + g * dim * n, 1);
    }
    return;
  }
  if (tree_sparse_ && depth_[cols[n - 1]] - depth_[cols[0]] == n - 1) {
    AddJtTChain(cols, n, dim, Jc, T);
    return;
  }
  if (n > kMaxDenseAdd || dim > kMaxDenseAdd) {
    AddJtTLarge(cols, n, dim, Jc, T);
    return;
  }
  if (!tree_sparse_) {
    AddJtTBlocks(cols, n, dim, 1, Jc, T);
    return;
  }

  // G = Jc' T, dense (n x n), row by row
  double* G = add_.data();
  for (int a = 0; a < n * n; a++) G[a] = 0;
  for (int r = 0; r < dim; r++) {
    const double* jr = Jc + r * n;
    const double* tr = T + r * n;
    for (int a = 0; a < n; a++) {
      const double ja = jr[a];
      if (ja == 0) continue;
      double* ga = G + a * n;
      for (int b = 0; b < n; b++) ga[b] += ja * tr[b];
    }
  }

  // cb < ca is an ancestor of ca: the pair (A(ca, cb), A(cb, ca)) at depth(ca) - depth(cb)
  for (int a = 0; a < n; a++) {
    const int ca = cols[a], base = madr_[ca], da = depth_[ca];
    const double* ga = G + a * n;
    lu_[2 * base] += ga[a];
    for (int b = 0; b < a; b++) {
      const int adr = base + da - depth_[cols[b]];
      lu_[2 * adr] += ga[b];
      lu_[2 * adr + 1] += G[b * n + a];
    }
  }
}

namespace {

// out[b] += sum_r j[r] t[r][b] for b in [b0, b1), each sum formed from zero in r order (m rows),
// two entries at once
void AddRowRun(const double* j, const double* const* t, int m, int b0, int b1, double* out) {
  int b = b0;
  for (; b + 1 < b1; b += 2) {
    Pair acc = {0, 0};
    for (int r = 0; r < m; r++) acc += Pair{j[r], j[r]} * LoadPair(t[r] + b);
    StorePair(out + b, LoadPair(out + b) + acc);
  }
  for (; b < b1; b++) {
    double v = 0;
    for (int r = 0; r < m; r++) v += j[r] * t[r][b];
    out[b] += v;
  }
}

// AddRowRun for m blocks of 3 rows and 6 entries (contacts' rows on a free body), unrolled: the
// entries loaded once, each block's sums added in order
void AddRowRun36(const double* j, const double* const* t, int m, int b0, double* out) {
  Pair o[3];
  for (int c = 0; c < 3; c++) o[c] = LoadPair(out + b0 + 2 * c);
  for (int g = 0; g < m; g++, j += 3, t += 3) {
    Pair acc[3] = {{0, 0}, {0, 0}, {0, 0}};
    for (int r = 0; r < 3; r++) {
      const Pair jr = {j[r], j[r]};
      for (int c = 0; c < 3; c++) acc[c] += jr * LoadPair(t[r] + b0 + 2 * c);
    }
    for (int c = 0; c < 3; c++) o[c] += acc[c];
  }
  for (int c = 0; c < 3; c++) StorePair(out + b0 + 2 * c, o[c]);
}

}  // namespace

void IslandLU::AddJtTBlocks(const int* cols, int n, int dim, int m, const double* Jc,
                            const double* T) {
  // segments of cols by tree position, each entry's sum (Jc_g' T_g)(a, b) of each block g formed
  // from zero in row order (a zero Jc_g(r, a) adds nothing) and added to its block's entry, the
  // blocks in order; a run of consecutive dofs (a free body's) two entries at once
  double j[kMaxDenseAdd];
  const double* t[kMaxDenseAdd];
  int cnt[kMaxDenseAdd];  // rows of block g with Jc_g(r, a) != 0: j[], t[] in block order
  int seg[kMaxDenseAdd + 1], nseg = 0;  // first column of each segment, then n
  for (int b = 0; b < n; b++) {
    if (b == 0 || dof_pos_[cols[b]] != dof_pos_[cols[b - 1]]) seg[nseg++] = b;
  }
  seg[nseg] = n;
  double* blk[kMaxDenseAdd];  // the blocks of a segment's rows, one per column segment
  for (int sa = 0; sa < nseg; sa++) {
    const int pa = dof_pos_[cols[seg[sa]]];
    for (int sb = 0; sb < nseg; sb++) blk[sb] = Block(pa, dof_pos_[cols[seg[sb]]]);
    for (int a = seg[sa]; a < seg[sa + 1]; a++) {
      int nz = 0;
      bool three = true;  // every block's 3 rows nonzero
      for (int g = 0; g < m; g++) {
        cnt[g] = 0;
        for (int r = g * dim; r < (g + 1) * dim; r++) {
          if (Jc[r * n + a] != 0) j[nz] = Jc[r * n + a], t[nz++] = T + r * n, cnt[g]++;
        }
        three = three && cnt[g] == 3;
      }
      for (int sb = 0; sb < nseg; sb++) {
        const int b0 = seg[sb], b1 = seg[sb + 1];
        double* row = blk[sb] + dof_off_[cols[a]] * pos_size_[dof_pos_[cols[b0]]];
        if (cols[b1 - 1] - cols[b0] == b1 - 1 - b0) {   // a run
          double* out = row + dof_off_[cols[b0]] - b0;  // out[b]: entry (a, b)
          if (three && b1 - b0 == 6) {
            AddRowRun36(j, t, m, b0, out);
          } else {
            for (int g = 0, r0 = 0; g < m; r0 += cnt[g++]) {
              AddRowRun(j + r0, t + r0, cnt[g], b0, b1, out);
            }
          }
          continue;
        }
        for (int g = 0, r0 = 0; g < m; r0 += cnt[g++]) {
          for (int b = b0; b < b1; b++) {
            double v = 0;
            for (int r = r0; r < r0 + cnt[g]; r++) v += j[r] * t[r][b];
            row[dof_off_[cols[b]]] += v;
          }
        }
      }
    }
  }
}

namespace {

// chain rows: the pair at madr[cols[a]] + t gains (sum_r J(r, a) T(r, b), sum_r T(r, a) J(r, b))
// for b = a - t, t = 0..a; q holds the pairs (T(r, b), J(r, b)) row by row (D x 2n)
template <int D>
void ChainRows(int n, const double* q, const int* cols, const int* madr, double* lu) {
  for (int a = 0; a < n; a++) {
    double* out = lu + 2 * madr[cols[a]];
    Pair c[D];
    for (int r = 0; r < D; r++) c[r] = Pair{q[2 * (r * n + a) + 1], q[2 * (r * n + a)]};
    for (int t = 0, b = a; b >= 0; t++, b--) {
      Pair acc = LoadPair(out + 2 * t);
      for (int r = 0; r < D; r++) acc += c[r] * LoadPair(q + 2 * (r * n + b));
      StorePair(out + 2 * t, acc);
    }
  }
}

// the pairs ((W G)(r, b), J(r, b)) of m blocks of D rows J, G (m D x n) with their weights W
// (m blocks of D x D), into q (m D x 2n)
template <int D>
void WeightedPairs(int n, int m, const double* Jc, const double* W, const double* G, double* q) {
  for (int blk = 0; blk < m; blk++, Jc += D * n, G += D * n, W += D * D, q += 2 * D * n) {
    for (int r = 0; r < D; r++) {
      const double* w = W + r * D;
      double* qr = q + 2 * r * n;
      const double* jr = Jc + r * n;
      for (int b = 0; b < n; b++) {
        double t = 0;
        for (int c = 0; c < D; c++) t += w[c] * G[c * n + b];
        qr[2 * b] = t;
        qr[2 * b + 1] = jr[b];
      }
    }
  }
}

// the weighted pairs of n rows of dim entries with m right-hand columns, added along the chain
template <int kDim, int kM>
void PairsOnChain(int n, const double* Jc, const double* W, const double* G, double* q,
                  const int* cols, const int* madr, double* lu) {
  WeightedPairs<kDim>(n, kM, Jc, W, G, q);
  ChainRows<kDim * kM>(n, q, cols, madr, lu);
}

}  // namespace

bool IslandLU::AddJtWG(const int* cols, int n, int dim, int m, const double* Jc, const double* W,
                       const double* G) {
  if (!(tree_sparse_ && depth_[cols[n - 1]] - depth_[cols[0]] == n - 1)) return false;
  void (*add)(int, const double*, const double*, const double*, double*, const int*, const int*,
              double*) = nullptr;
  switch (dim * 8 + m) {
    case 1 * 8 + 1:
      add = PairsOnChain<1, 1>;
      break;
    case 3 * 8 + 1:
      add = PairsOnChain<3, 1>;
      break;
    case 3 * 8 + 2:
      add = PairsOnChain<3, 2>;
      break;
    case 3 * 8 + 3:
      add = PairsOnChain<3, 3>;
      break;
    case 3 * 8 + 4:
      add = PairsOnChain<3, 4>;
      break;
    case 4 * 8 + 1:
      add = PairsOnChain<4, 1>;
      break;
    case 6 * 8 + 1:
      add = PairsOnChain<6, 1>;
      break;
    default:
      return false;
  }
  add(n, Jc, W, G, add_.data(), cols, madr_, lu_.data());
  return true;
}

void IslandLU::AddJtTChain(const int* cols, int n, int dim, const double* Jc, const double* T) {
  // cols are consecutive ancestors: A(ca, c(a-t)) sits at madr[ca] + t
  if (n == 1 && dim == 1) {
    lu_[2 * madr_[cols[0]]] += Jc[0] * T[0];
    return;
  }
  double* q = add_.data();
  for (int r = 0; r < dim * n; r++) {
    q[2 * r] = T[r];
    q[2 * r + 1] = Jc[r];
  }
  double* lu = lu_.data();
  switch (dim) {
    case 1:
      ChainRows<1>(n, q, cols, madr_, lu);
      break;
    case 3:
      ChainRows<3>(n, q, cols, madr_, lu);
      break;
    case 4:
      ChainRows<4>(n, q, cols, madr_, lu);
      break;
    case 6:
      ChainRows<6>(n, q, cols, madr_, lu);
      break;
    default:
      AddJtTLarge(cols, n, dim, Jc, T);
      break;
  }
}

void IslandLU::AddJtTLarge(const int* cols, int n, int dim, const double* Jc, const double* T) {
  // rows touching many dofs (tendons, long chains): entry by entry
  for (int a = 0; a < n; a++) {
    const int ca = cols[a];
    for (int b = 0; b < n; b++) {
      double v = 0;
      for (int r = 0; r < dim; r++) v += Jc[r * n + a] * T[r * n + b];
      if (tree_sparse_) {
        if (a == b) {
          lu_[2 * madr_[ca]] += v;
        } else if (b < a) {
          lu_[2 * (madr_[ca] + depth_[ca] - depth_[cols[b]])] += v;
        } else {
          lu_[2 * (madr_[cols[b]] + depth_[cols[b]] - depth_[ca]) + 1] += v;
        }
      } else {
        const int cb = cols[b];
        Block(dof_pos_[ca], dof_pos_[cb])[dof_off_[ca] * pos_size_[dof_pos_[cb]] + dof_off_[cb]] +=
            v;
      }
    }
  }
}

void IslandLU::FactorTree(double* mn, double* mx, bool* ok) {
  // pairs (L, U) of each entry: lu[2 adr] below the diagonal, lu[2 adr + 1] above
  double* lu = lu_.data();
  for (int k = end_ - 1; k >= begin_; k--) {
    const int kk = madr_[k];
    const double d = lu[2 * kk];
    const double ad = std::fabs(d);
    if (!(ad > kTinyPivot) || !std::isfinite(d)) {
      *ok = false;
      return;
    }
    if (ad < *mn) *mn = ad;
    if (ad > *mx) *mx = ad;
    const double id = 1 / d;
    dinv_[k] = id;
    int ki = kk + 1;
    for (int i = parent_[k]; i >= 0; i = parent_[i], ki++) {
      // pairs (i, j), j = i and its ancestors: A(i,j) -= A(i,k) A(k,j) / d, A(j,i) likewise (the
      // diagonal's upper member is never read)
      const double aik = lu[2 * ki + 1] * id, aki = lu[2 * ki] * id;
      const Pair f = {aik, aki};
      const int cnt = depth_[i] + 1;
      double* li = lu + 2 * madr_[i];
      const double* lk = lu + 2 * ki;
      for (int c = 0; c < cnt; c++)
        StorePair(li + 2 * c, LoadPair(li + 2 * c) - f * LoadPair(lk + 2 * c));
      lu[2 * ki] = aki;
      lu[2 * ki + 1] = aik;
    }
  }
}

void IslandLU::FactorBlocks(double* mn, double* mx, bool* ok) {
  double* pool = pool_.data();
  for (int k = 0; k < npos_ && *ok; k++) {
    const int nk = pos_size_[k];
    double* D = pool + diag_adr_[k];
    if (!LuFactorRows(D, nk, nullptr, mn, mx)) {
      *ok = false;
      return;
    }
    const int a0 = adj_adr_[k], na = adj_num_[k];

    // off-diagonal blocks of position k
    for (int e = a0; e < a0 + na; e++) {
      const int nj = pos_size_[adj_[e]];
      LowerSolveRows(D, nk, pool + ublk_[e], nj);
      UpperSolveRight(D, nk, pool + lblk_[e], nj);
    }

    // Schur complement on the later neighbours
    for (int e1 = a0; e1 < a0 + na; e1++) {
      const int i = adj_[e1], ni = pos_size_[i];
      const double* Lik = pool + lblk_[e1];  // ni x nk
      const double* Uki = pool + ublk_[e1];  // nk x ni
      GemmSub(pool + diag_adr_[i], Lik, Uki, ni, nk, ni);
      if (e1 + 1 == a0 + na) continue;

      // blocks (i, j) and (j, i) for later j: edges of i
      const int b0 = adj_adr_[i], nb = adj_num_[i];
      for (int e = b0; e < b0 + nb; e++) where_[adj_[e]] = e;
      for (int e2 = e1 + 1; e2 < a0 + na; e2++) {
        const int j = adj_[e2], nj = pos_size_[j];
        const int e = where_[j];
        const double* Ljk = pool + lblk_[e2];            // nj x nk
        const double* Ukj = pool + ublk_[e2];            // nk x nj
        GemmSub(pool + ublk_[e], Lik, Ukj, ni, nk, nj);  // U(i, j)
        GemmSub(pool + lblk_[e], Ljk, Uki, nj, nk, ni);  // L(j, i)
      }
      for (int e = b0; e < b0 + nb; e++) where_[adj_[e]] = -1;
    }
  }
}

void IslandLU::AddW(int row, int dim, const double* Wb) {
  const int r0 = row_loc_[row];
  for (int r = 0; r < dim; r++) {
    for (int c = 0; c < dim; c++) W_[(r0 + r) * m_ + r0 + c] += Wb[r * dim + c];
  }
}

void IslandLU::FactorConstraintSpace(double* mn, double* mx, bool* ok) {
  // K = I + W D, LU with partial pivoting (rows of W are sparse: its blocks)
  const int m = m_;
  double* K = K_.data();
  for (int r = 0; r < m; r++) {
    double* kr = K + r * m;
    for (int c = 0; c < m; c++) kr[c] = r == c;
    const double* wr = W_.data() + r * m;
    for (int j = 0; j < m; j++) {
      const double w = wr[j];
      if (w == 0) continue;
      const double* dj = D_.data() + j * m;
      for (int c = 0; c < m; c++) kr[c] += w * dj[c];
    }
  }
  if (!LuFactorRows(K, m, piv_.data(), mn, mx)) *ok = false;
}

void IslandLU::SolveConstraintSpace(double* x, bool transpose) {
  // x <- M^-1 x - Y K^-1 W J M^-1 x; the transpose uses W' and K' (with the right rows equal
  // to J, D is symmetric and Y serves both)
  const Problem& p = *problem_;
  const Islands& is = p.islands;
  const int m = m_, nd = nd_;
  const int* dofs = is.dofs + is.dofadr[island_];
  const int* rows = is.rows + is.rowadr[island_];
  for (int t = is.treeadr[island_]; t < is.treeadr[island_] + is.ntrees[island_]; t++) {
    const int b = is.tree_dofadr[is.trees[t]];
    p.mass.Solve(x, b, b + is.tree_dofnum[is.trees[t]]);
  }
  double* g = cvec_.data();
  double* z = g + kMaxConstraintRows;
  const double* K = K_.data();
  for (int r = 0; r < m; r++) g[r] = (transpose ? p.J : *right_).Dot(rows[r], x);
  if (!transpose) {
    // z = W g, then K^-1 z
    for (int r = 0; r < m; r++) {
      double v = 0;
      const double* wr = W_.data() + r * m;
      for (int c = 0; c < m; c++) v += wr[c] * g[c];
      z[r] = v;
    }
    PermuteRows(piv_.data(), m, z);
    LowerSolveRows(K, m, z, 1);
    UpperSolveRows(K, m, z);
  } else {
    // z = K'^-1 g, then W' z
    UpperSolveRowsT(K, m, g);
    LowerSolveRowsT(K, m, g);
    PermuteRowsT(piv_.data(), m, g);
    for (int r = 0; r < m; r++) {
      double v = 0;
      for (int c = 0; c < m; c++) v += W_[c * m + r] * g[c];
      z[r] = v;
    }
  }
  for (int a = 0; a < nd; a++) {
    double v = 0;
    for (int r = 0; r < m; r++) v += Y_[static_cast<size_t>(r) * nd + a] * z[r];
    x[dofs[a]] -= v;
  }
}

bool IslandLU::Factor(double* min_pivot, double* max_pivot) {
  double mn = HUGE_VAL, mx = 0;
  bool ok = true;
  if (cspace_) {
    FactorConstraintSpace(&mn, &mx, &ok);
  } else if (tree_sparse_) {
    FactorTree(&mn, &mx, &ok);
  } else {
    FactorBlocks(&mn, &mx, &ok);
  }
  *min_pivot = mn;
  *max_pivot = mx;
  return ok;
}

void IslandLU::Solve(double* x) { SolveAny(x, false); }

void IslandLU::SolveTranspose(double* x) { SolveAny(x, true); }

void IslandLU::SolveColumns(double* X, int ncol, int stride) {
  if (!tree_sparse_ || cspace_) {
    // the other layouts column by column (a zero column stays zero)
    const Islands& is = problem_->islands;
    const int* dofs = is.dofs + is.dofadr[island_];
    const int nd = is.ndofs[island_];
    double* x = col_.data();
    for (int c = 0; c < ncol; c++) {
      bool zero = true;
      for (int a = 0; a < nd; a++) {
        x[dofs[a]] = X[static_cast<size_t>(dofs[a]) * stride + c];
        zero &= x[dofs[a]] == 0;
      }
      if (zero) continue;
      SolveAny(x, false);
      for (int a = 0; a < nd; a++) X[static_cast<size_t>(dofs[a]) * stride + c] = x[dofs[a]];
    }
    return;
  }
  // Solve's two sweeps, each entry of the factor applied to all columns: chunks of 8, 4, 2, then
  // single columns, each chunk's values kept in registers
  int c = 0;
  for (; c + 8 <= ncol; c += 8) SweepColumns<8>(X + c, stride);
  for (; c + 4 <= ncol; c += 4) SweepColumns<4>(X + c, stride);
  for (; c + 2 <= ncol; c += 2) SweepColumns<2>(X + c, stride);
  for (; c < ncol; c++) SweepColumns<1>(X + c, stride);
}

template <int W>
void IslandLU::SweepColumns(double* X, int stride) const {
  // the tree-sparse layout's two sweeps on W columns (Solve's operations on each): L' from the
  // leaves, the column's values in registers while they are pushed to its ancestors, then D and
  // U from the root, the row's values accumulated in registers; W even in SIMD pairs (GCC
  // does not vectorize the scalar form); the entries' dofs from the mass matrix's col (walking
  // parent where it is absent)
  constexpr int H = (W + 1) / 2;
  const double* fwd = lu_.data() + 1;
  const double* bwd = lu_.data();
  const int* col = problem_->mass.col;
  const int nM = problem_->mass.nM;
  for (int k = end_ - 1; k >= begin_; k--) {
    const double* xk = X + static_cast<size_t>(k) * stride;
    Pair v[H];
    for (int c = 0; c < H; c++) v[c] = W == 1 ? Pair{xk[0], 0} : LoadPair(xk + 2 * c);
    const int last = k + 1 < nv_ ? madr_[k + 1] : nM;
    for (int adr = madr_[k] + 1, i = parent_[k]; adr < last; adr++) {
      double* xi = X + static_cast<size_t>(col ? col[adr] : i) * stride;
      const Pair f = {fwd[2 * adr], fwd[2 * adr]};
      if (W == 1) {
        xi[0] -= f[0] * v[0][0];
      } else {
        for (int c = 0; c < H; c++) StorePair(xi + 2 * c, LoadPair(xi + 2 * c) - f * v[c]);
      }
      if (!col) i = parent_[i];
    }
  }
  for (int k = begin_; k < end_; k++) {
    double* xk = X + static_cast<size_t>(k) * stride;
    const Pair d = {dinv_[k], dinv_[k]};
    Pair acc[H];
    for (int c = 0; c < H; c++) acc[c] = (W == 1 ? Pair{xk[0], 0} : LoadPair(xk + 2 * c)) * d;
    const int last = k + 1 < nv_ ? madr_[k + 1] : nM;
    for (int adr = madr_[k] + 1, j = parent_[k]; adr < last; adr++) {
      const double* xj = X + static_cast<size_t>(col ? col[adr] : j) * stride;
      const Pair b = {bwd[2 * adr], bwd[2 * adr]};
      for (int c = 0; c < H; c++) acc[c] -= b * (W == 1 ? Pair{xj[0], 0} : LoadPair(xj + 2 * c));
      if (!col) j = parent_[j];
    }
    if (W == 1) {
      xk[0] = acc[0][0];
    } else {
      for (int c = 0; c < H; c++) StorePair(xk + 2 * c, acc[c]);
    }
  }
}

void IslandLU::SolveAny(double* x, bool transpose) {
  if (cspace_) {
    SolveConstraintSpace(x, transpose);
    return;
  }
  if (tree_sparse_) {
    // A' swaps the roles of the two triangles (members of the pairs)
    const double* fwd = lu_.data() + (transpose ? 0 : 1);
    const double* bwd = lu_.data() + (transpose ? 1 : 0);
    for (int k = end_ - 1; k >= begin_; k--) {
      const double xk = x[k];
      if (xk == 0) continue;
      int adr = 2 * (madr_[k] + 1);
      for (int i = parent_[k]; i >= 0; i = parent_[i], adr += 2) x[i] -= fwd[adr] * xk;
    }
    for (int k = begin_; k < end_; k++) {
      double s = x[k] * dinv_[k];
      int adr = 2 * (madr_[k] + 1);
      for (int j = parent_[k]; j >= 0; j = parent_[j], adr += 2) s -= bwd[adr] * x[j];
      x[k] = s;
    }
    return;
  }

  // gather in position order, solve, scatter back
  double* y = work_.data();
  for (int k = 0; k < npos_; k++) {
    for (int j = 0; j < pos_size_[k]; j++) y[pos_vadr_[k] + j] = x[pos_dof_[k] + j];
  }
  if (transpose) {
    SolveBlocksTranspose(y);
  } else {
    SolveBlocks(y);
  }
  for (int k = 0; k < npos_; k++) {
    for (int j = 0; j < pos_size_[k]; j++) x[pos_dof_[k] + j] = y[pos_vadr_[k] + j];
  }
}

void IslandLU::SolveBlocks(double* y) const {
  // L (unit lower) forward, then U backward
  const double* pool = pool_.data();
  for (int k = 0; k < npos_; k++) {
    const int nk = pos_size_[k];
    double* yk = y + pos_vadr_[k];
    LowerSolveRows(pool + diag_adr_[k], nk, yk, 1);
    for (int e = adj_adr_[k]; e < adj_adr_[k] + adj_num_[k]; e++) {
      const int j = adj_[e];
      GemvSub(y + pos_vadr_[j], pool + lblk_[e], yk, pos_size_[j], nk);
    }
  }
  for (int k = npos_ - 1; k >= 0; k--) {
    const int nk = pos_size_[k];
    double* yk = y + pos_vadr_[k];
    for (int e = adj_adr_[k]; e < adj_adr_[k] + adj_num_[k]; e++) {
      const int j = adj_[e];
      GemvSub(yk, pool + ublk_[e], y + pos_vadr_[j], nk, pos_size_[j]);
    }
    UpperSolveRows(pool + diag_adr_[k], nk, yk);
  }
}

void IslandLU::SolveBlocksTranspose(double* y) const {
  // A' = U' L': U' (lower) forward, then L' (unit upper) backward
  const double* pool = pool_.data();
  for (int k = 0; k < npos_; k++) {
    const int nk = pos_size_[k];
    double* yk = y + pos_vadr_[k];
    UpperSolveRowsT(pool + diag_adr_[k], nk, yk);
    for (int e = adj_adr_[k]; e < adj_adr_[k] + adj_num_[k]; e++) {
      const int j = adj_[e];
      GemvTSub(y + pos_vadr_[j], pool + ublk_[e], yk, nk, pos_size_[j]);
    }
  }
  for (int k = npos_ - 1; k >= 0; k--) {
    const int nk = pos_size_[k];
    double* yk = y + pos_vadr_[k];
    for (int e = adj_adr_[k]; e < adj_adr_[k] + adj_num_[k]; e++) {
      const int j = adj_[e];
      GemvTSub(yk, pool + lblk_[e], y + pos_vadr_[j], pos_size_[j], nk);
    }
    LowerSolveRowsT(pool + diag_adr_[k], nk, yk);
  }
}

}  // namespace contactkit
