// Copyright 2026 The contactkit developers.
#include "solvers/lcp/lcp.h"

#include <algorithm>
#include <cmath>
#include <new>
#include <utility>

#include "contactkit/settings.h"

namespace contactkit {
namespace {

constexpr signed char kFromInexact = 4;   // state bit of the warm-start table: island inexact
constexpr signed char kUnstabilized = 8;  // ... island solved without its equality stabilization
constexpr int kRetry = 4;       // then every kRetry-th solve tries it again (EqualityEnergy)
constexpr double kTol = 1e-10;  // acceptance tolerance (m/s), times max(1, max |b|)
constexpr uint64_t kContactKey = 1ull << 63;  // keyb of contact rows: this, occurrence << 8, row
constexpr int kPatchMax = 16;       // most contacts of one geom pair matched by their points
constexpr double kLooseTol = 1e-6;  // below this an inexact answer is INACCURATE, not MAX_ITER
constexpr double kInf = HUGE_VAL;
constexpr double kSchurRcond = 1e-8;  // least (Cholesky pivot)^2 / max diagonal of A_EE eliminated
constexpr double kEnergyTol = 1e-9;   // EqualityEnergy's tolerance, relative to its sums' terms
constexpr double kEnergyBudget = 10;  // ... its budget, in the rows' own corrections' energy
constexpr size_t kGsCache = size_t{1} << 21;  // most doubles of the Gauss-Seidel cache (16 MB)

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// calls f(begin, end) for the dof range of every tree that row i touches
template <typename F>
void ForTreeRanges(const Problem& p, int i, F f) {
  ForEachRowTree(p, i, [&](int t, int, int) {
    f(p.islands.tree_dofadr[t], p.islands.tree_dofadr[t] + p.islands.tree_dofnum[t]);
  });
}

}  // namespace

std::unique_ptr<Solver> MakeLcpSolver() { return std::make_unique<LcpSolver>(); }

const LcpStats* LcpSolverStats(const Solver* solver) {
  const LcpSolver* s = dynamic_cast<const LcpSolver*>(solver);
  return s ? &s->stats() : nullptr;
}

//------------------------------------- warm-start table -------------------------------------------

void LcpSolver::StateTable::Allocate(int n) {
  size_t cap = 16;
  while (cap < 2 * static_cast<size_t>(std::max(n, 1))) cap *= 2;
  ka.assign(cap, 0);
  kb.assign(cap, 0);
  stamp.assign(cap, 0);
  val.assign(cap, 0);
  imp.assign(cap, 0);
  pos.assign(3 * cap, 0);
  used.assign(cap, 0);
  nused = 0;
  mask = cap - 1;
  cur = 1;
}

void LcpSolver::StateTable::Clear() {
  nused = 0;
  if (++cur == 0) {
    std::fill(stamp.begin(), stamp.end(), 0u);
    cur = 1;
  }
}

void LcpSolver::StateTable::Put(uint64_t a, uint64_t b, signed char v, double x, const double* pt) {
  for (size_t s = Mix(a, b) & mask;; s = (s + 1) & mask) {
    if (stamp[s] != cur || (ka[s] == a && kb[s] == b)) {
      if (stamp[s] != cur) used[nused++] = s;
      stamp[s] = cur;
      ka[s] = a;
      kb[s] = b;
      val[s] = v;
      imp[s] = x;
      for (int d = 0; d < 3; d++) pos[3 * s + d] = pt ? pt[d] : 0;
      return;
    }
  }
}

bool LcpSolver::StateTable::CopyFrom(const StateTable& o) {
  if (o.ka.size() != ka.size()) return false;
  Clear();
  for (size_t e = 0; e < o.nused; e++) {
    const size_t s = o.used[e];
    Put(o.ka[s], o.kb[s], o.val[s], o.imp[s], &o.pos[3 * s]);
  }
  return true;
}

int LcpSolver::StateTable::Get(uint64_t a, uint64_t b, double* x) const {
  *x = 0;
  for (size_t s = Mix(a, b) & mask;; s = (s + 1) & mask) {
    if (stamp[s] != cur) return -1;
    if (ka[s] == a && kb[s] == b) {
      *x = imp[s];
      return val[s];
    }
  }
}

const double* LcpSolver::StateTable::Point(uint64_t a, uint64_t b) const {
  for (size_t s = Mix(a, b) & mask;; s = (s + 1) & mask) {
    if (stamp[s] != cur) return nullptr;
    if (ka[s] == a && kb[s] == b) return &pos[3 * s];
  }
}

//------------------------------------- setup ------------------------------------------------------

bool LcpSolver::Setup(const ProblemDims& dims, const ckSettings& settings, std::string* error) {
  try {
    dims_ = dims;
    settings_ = settings;
    cap_ = std::max(1, std::min(dims.max_rows, settings.lcp.max_island_rows));
    const size_t cap = cap_, rows = std::max(dims.max_rows, 1), nv = std::max(dims.nv, 1);
    boxed_.Allocate(cap_);
    schur_.Allocate(cap_);
    A_.Allocate(cap * cap);  // (dense storage: pages written as islands use them)
    for (auto* v :
         {&b_, &lo_, &hi_, &mu_, &x_, &w_, &x0_, &rc_, &dy_, &tq_, &xr_, &wr_, &x0r_, &stab_}) {
      v->assign(cap, 0);
    }
    findex_.assign(cap, -1);
    cidx_.assign(cap, 0);
    lstate_.assign(cap, 0);
    rstate_.assign(cap, 0);
    gstate_.assign(cap, 0);
    local_.assign(rows, -1);
    con_of_row_.assign(rows, -1);
    state_.assign(rows, kLcpLower);
    saved_state_.assign(rows, kLcpLower);
    guess_.assign(rows, -1);
    inexact_.assign(rows, 0);
    gsadr_.assign(rows, -1);
    gsy_.Allocate(std::min(rows * nv, kGsCache));
    keya_.assign(rows, 0);
    keyb_.assign(rows, 0);
    putb_.assign(rows, 0);
    for (auto* v : {&bfull_, &diag_, &ytil_, &px_, &plam_, &cdpos_, &cdvel_, &ximp_}) {
      v->assign(rows, 0);
    }
    for (auto* v : {&yv_, &vis_, &dv0_, &dvp_, &ustep_, &qfake_, &tmp_, &up_, &pz_}) {
      v->assign(nv, 0);
    }
    crow_.assign(rows, 0);
    csoft_.assign(rows, 0);
    cplace_.assign(rows, 0);
    brow_.assign(rows, 0);
    bnormal_.assign(rows, 0);
    bcoef_.assign(rows, 0);
    cadr_.assign(std::max(dims.ntree, 1) + 1, 0);
    badr_.assign(std::max(dims.ntree, 1) + 1, 0);
    reach0_.assign(std::max(dims.ntree, 1), 0);
    reachp_.assign(std::max(dims.ntree, 1), 0);
    touched_.assign(std::max(dims.ntree, 1), 0);
    for (auto* v : {&adj_lam_, &adj_om_, &adj_rho_}) v->assign(rows, 0);
    for (auto* v : {&adj_nu_, &adj_pi_, &adj_pin_, &adj_kappa_}) v->assign(nv, 0);
    pinv_.Allocate(Cod::Doubles(cap_));
    codblk_.assign(Cod::BlockDoubles(cap_), 0);
    ablk_.assign(nv * kRowBlock, 0);
    atree_.assign(std::max(dims.ntree, 1), 0);
    kadr_.assign(std::max(dims.ntree, 1), -1);
    nadr_.assign(std::max(dims.ntree, 1), -1);
    zst_.assign(kNullMax * nv, 0);
    const size_t S = kTangentSlots;
    for (auto* v : {&blk_r_, &blk_vf_, &blk_x_, &blk_m_}) v->assign(nv * S, 0);
    for (auto* v : {&blk_a_, &blk_st_, &blk_rc_, &blk_dy_}) v->assign(cap * S, 0);
    blk_ns_.assign(std::max<size_t>(cap, kNullMax) * S, 0);
    vadr_.assign(nv + 1, 0);
    vput_.assign(nv, 0);
    vrow_.assign(std::max(dims.max_nnz, 1), 0);
    vst_.assign(std::max(dims.max_nnz, 1), 0);
    for (auto* v : {&blk_on_, &blk_ron_, &blk_vfon_, &blk_rcon_, &blk_nson_}) v->assign(S, 0);
    zadr_.assign(std::max(dims.ntree, 1), -1);
    prev_.Allocate(dims.max_rows);
    next_.Allocate(dims.max_rows);
    factors_.assign(std::max(dims.ntree, 1), IslandFactor());
    changed_.assign(std::max(dims.ntree, 1), 0);
    exact_.assign(std::max(dims.ntree, 1), 0);
    unstabilized_.assign(std::max(dims.ntree, 1), 0);
    arena_d_.Allocate(2 * Cod::Doubles(cap_));
    arena_i_.assign(2 * Cod::Ints(cap_), 0);
    scratch_d_.Allocate(Cod::Doubles(cap_));
    scratch_i_.assign(Cod::Ints(cap_), 0);
    scratch_cod_.Bind(scratch_d_.data(), scratch_i_.data(), cap_);
    prow_.assign(rows, 0);
    jrows_.assign(rows, 0);
    pA_.Allocate(cap * cap);
    pcod_.assign(std::max(dims.ntree, 1), Cod());
    pcod_ok_.assign(std::max(dims.ntree, 1), 0);
    pcod_d_.Allocate(2 * Cod::Doubles(cap_));
    pcod_i_.assign(2 * Cod::Ints(cap_), 0);
    prowadr_.assign(std::max(dims.ntree, 1) + 1, 0);
  } catch (const std::bad_alloc&) {
    *error = "lcp: out of memory for the dense workspace (lower max_island_rows)";
    return false;
  }
  have_prev_ = false;
  bank_ = 0;
  solves_ = 0;
  nisland_ = 0;
  position_active_ = false;
  return true;
}

void LcpSolver::SetSettings(const ckSettings& settings) {
  // the workspace size stays the one of Setup
  const int max_island_rows = settings_.lcp.max_island_rows;
  settings_ = settings;
  settings_.lcp.max_island_rows = max_island_rows;
}

void LcpSolver::Reset() {
  have_prev_ = false;
  bank_ = 0;
}

bool LcpSolver::WarmStartFrom(const Solver& other) {
  // the previous classification and impulses, and the work budget's credit
  const LcpSolver* o = dynamic_cast<const LcpSolver*>(&other);
  if (!o || o == this || !prev_.CopyFrom(o->prev_)) return false;
  have_prev_ = o->have_prev_;
  bank_ = o->bank_;
  return true;
}

Cod* LcpSolver::factorization(int island) {
  if (island < 0 || island >= nisland_ || !factors_[island].stored) return nullptr;
  return &factors_[island].cod;
}

//------------------------------------- problem data -----------------------------------------------

double LcpSolver::Stabilization(const Problem& p, int i, double b0, double* dpos,
                                double* dvel) const {
  const double h = p.h, erp = settings_.lcp.erp;
  *dpos = *dvel = 0;

  // the rows of a contact from distance (derivative pass) are MuJoCo's soft rows (RowCfm): their
  // target is the reference acceleration, w = J v+ - vel - h aref + R x
  if (SoftRow(p, i)) {
    *dvel = -1;
    return -p.vel[i] - h * p.aref[i];
  }
  double pos;
  switch (p.kind[i]) {
    case kRowEquality:
      pos = p.pos[i];
      break;
    case kRowContactNormal: {
      // an approaching contact that closes within the step is reflected with sigma
      const double sigma = settings_.lcp.restitution, vel = p.vel[i];
      pos = p.pos[i] + settings_.lcp.slop;
      if (sigma > 0 && vel < -settings_.lcp.restitution_threshold && pos + h * b0 <= 0) {
        *dvel = sigma;
        return sigma * vel;
      }
      break;
    }
    case kRowLimit:
      pos = p.pos[i] + settings_.lcp.slop;
      break;
    default:
      return 0;
  }

  // split impulse: a gap (speculative contact, limit ahead) closes exactly within the step, a
  // penetration is the position pass's
  if (settings_.lcp.split_impulse && p.kind[i] != kRowEquality) {
    if (pos < 0) return 0;
    *dpos = 1 / h;
    return pos / h;
  }

  // the fraction erp of the gap (beyond the slop) closes within the step; corrections of a
  // violation are capped at max_correction
  const double s = erp * pos / h;
  if (s < -settings_.lcp.max_correction) return -settings_.lcp.max_correction;
  *dpos = erp / h;
  return s;
}

double LcpSolver::PositionTarget(const Problem& p, int i, double* dpos) const {
  *dpos = 0;
  if (!settings_.lcp.split_impulse || settings_.lcp.erp <= 0) return 0;
  if (p.kind[i] != kRowContactNormal && p.kind[i] != kRowLimit) return 0;
  // penetrations beyond 2 slop are brought back to 1.5 slop: resting contacts then sit inside
  // the band [slop, 2 slop] where neither the gap term of the velocity rows nor this pass acts,
  // so that the step is smooth there (no kink between the two corrections at rest)
  const double slop = settings_.lcp.slop;
  if (p.pos[i] + 2 * slop >= 0) return 0;
  const double s = settings_.lcp.erp * (p.pos[i] + 1.5 * slop) / p.h;
  if (s < -settings_.lcp.max_correction) return -settings_.lcp.max_correction;
  *dpos = settings_.lcp.erp / p.h;
  return s;
}

void LcpSolver::Keys(const Problem& p) {
  // contacts: geom pair, occurrence of the pair (MuJoCo lists a pair's contacts together), row
  for (int c0 = 0, c1; c0 < p.ncon; c0 = c1) {
    const Contact& con = p.con[c0];
    for (c1 = c0 + 1; c1 < p.ncon; c1++) {
      if (p.con[c1].geom[0] != con.geom[0] || p.con[c1].geom[1] != con.geom[1]) break;
    }
    const uint64_t a =
        (static_cast<uint64_t>(con.geom[0] + 1) << 32) | static_cast<uint32_t>(con.geom[1] + 1);
    for (int c = c0; c < c1; c++) {
      for (int r = 0; r < p.con[c].dim; r++) {
        const int i = p.con[c].row + r;
        keya_[i] = a;
        keyb_[i] = putb_[i] = kContactKey | (static_cast<uint64_t>(c - c0) << 8) | r;
      }
    }
    if (settings_.lcp.match_points && have_prev_ && c1 - c0 <= kPatchMax) PatchKeys(p, c0, c1, a);
  }

  // other rows: MuJoCo constraint type, object id, occurrence (rows of one weld, one tendon)
  int occ = 0;
  for (int i = 0; i < p.nrow; i++) {
    if (con_of_row_[i] >= 0) continue;
    if (i > 0 && con_of_row_[i - 1] < 0 && p.mj_type[i - 1] == p.mj_type[i] &&
        p.mj_id[i - 1] == p.mj_id[i]) {
      occ++;
    } else {
      occ = 0;
    }
    keya_[i] =
        (static_cast<uint64_t>(p.mj_type[i] + 1) << 32) | static_cast<uint32_t>(p.mj_id[i] + 1);
    keyb_[i] = putb_[i] = static_cast<uint64_t>(occ);
  }
}

void LcpSolver::PatchKeys(const Problem& p, int c0, int c1, uint64_t a) {
  // the previous step's contacts of the pair (filed under occurrences 0, 1, ...) and their points
  const double* prev[kPatchMax];
  int np = 0;
  while (np < kPatchMax) {
    prev[np] = prev_.Point(a, kContactKey | (static_cast<uint64_t>(np) << 8));
    if (!prev[np]) break;
    np++;
  }
  const int k = c1 - c0;
  if (np == 0 || (np == 1 && k == 1)) return;  // nothing to match, or the occurrence's match
  // greedy matching, nearest pair first (ties: the lower occurrences, so identical points keep
  // their order)
  int match[kPatchMax];
  bool taken[kPatchMax] = {};
  for (int i = 0; i < k; i++) match[i] = -1;
  for (int m = 0; m < std::min(k, np); m++) {
    double best = kInf;
    int bi = -1, bj = -1;
    for (int i = 0; i < k; i++) {
      if (match[i] >= 0) continue;
      const double* x = p.con[c0 + i].pos;
      for (int j = 0; j < np; j++) {
        if (taken[j]) continue;
        const double dx = x[0] - prev[j][0], dy = x[1] - prev[j][1], dz = x[2] - prev[j][2];
        const double d = dx * dx + dy * dy + dz * dz;
        if (d < best) {
          best = d;
          bi = i;
          bj = j;
        }
      }
    }
    if (bi < 0) break;  // (a point that is not finite)
    match[bi] = bj;
    taken[bj] = true;
  }
  for (int i = 0; i < k; i++) {
    // (an unmatched contact: an occurrence no step files)
    const uint64_t occ = match[i] >= 0 ? match[i] : (1ull << 40) + i;
    const Contact& con = p.con[c0 + i];
    for (int r = 0; r < con.dim; r++) keyb_[con.row + r] = kContactKey | (occ << 8) | r;
  }
}

void LcpSolver::SolveRow(const Problem& p, int i, double scale) {
  double* y = yv_.data();
  p.J.AddRowTo(i, scale, y);
  ForTreeRanges(p, i, [&](int begin, int end) { p.mass.Solve(y, begin, end); });
}

void LcpSolver::ClearY(const Problem& p, int i) {
  double* y = yv_.data();
  ForTreeRanges(p, i, [&](int begin, int end) { std::fill(y + begin, y + end, 0.0); });
}

double LcpSolver::RowCfm(const Problem& p, int i) const {
  return settings_.lcp.cfm + (SoftRow(p, i) ? p.R[i] : 0);
}

void LcpSolver::BuildA(const Problem& p, const int* rows, int n) {
  // A = J M^-1 J' + cfm of the rows: their M^-1 J' in block solves of kRowBlock columns on the
  // trees they touch (TreeMass::SolveBlock: each column gets SolveRow's operations; a tree where a
  // column is zero solves to zeros), each entry a J.Dot's sum
  const SparseRows& J = p.J;
  double* A = A_.data();
  double* X = ablk_.data();
  const size_t ld = n;  // column stride (n * n can exceed int)
  if (!block_rows_on_) {
    for (int j = 0; j < n; j++) {
      SolveRow(p, rows[j], 1);
      for (int i = j; i < n; i++) A[i + j * ld] = A[j + i * ld] = J.Dot(rows[i], yv_.data());
      A[j + j * ld] += RowCfm(p, rows[j]);
      ClearY(p, rows[j]);
    }
    return;
  }
  for (int j0 = 0; j0 < n; j0 += kRowBlock) {
    // (the block's trees solved, those of the later rows its dots read zeroed: 2 and 1)
    const int nb = std::min(kRowBlock, n - j0);
    for (int i = j0; i < n; i++) {
      const char mark = i < j0 + nb ? 2 : 1;
      ForEachRowTree(p, rows[i], [&](int t, int, int) { atree_[t] = std::max(atree_[t], mark); });
    }
    for (int t = 0; t < p.islands.ntree; t++) {
      const int b = p.islands.tree_dofadr[t], e = b + p.islands.tree_dofnum[t];
      for (size_t q = static_cast<size_t>(b) * nb; q < static_cast<size_t>(e) * nb && atree_[t];
           q++)
        X[q] = 0;
    }
    for (int c = 0; c < nb; c++) {
      const int g = rows[j0 + c];
      for (int q = J.rowadr[g]; q < J.rowadr[g] + J.rownnz[g]; q++)
        X[static_cast<size_t>(J.colind[q]) * nb + c] += J.val[q];
    }
    for (int t = 0; t < p.islands.ntree; t++) {
      const int b = p.islands.tree_dofadr[t];
      if (atree_[t] == 2) p.mass.SolveBlock(X, nb, b, b + p.islands.tree_dofnum[t]);
      atree_[t] = 0;
    }
    for (int c = 0; c < nb; c++) {
      const int j = j0 + c;
      for (int i = j; i < n; i++) {
        const int g = rows[i];
        double v = 0;
        for (int q = J.rowadr[g]; q < J.rowadr[g] + J.rownnz[g]; q++)
          v += J.val[q] * X[static_cast<size_t>(J.colind[q]) * nb + c];
        A[i + j * ld] = v;
        A[j + i * ld] = v;
      }
      A[j + j * ld] += RowCfm(p, rows[j]);
    }
  }
}

//------------------------------------- solve ------------------------------------------------------

void LcpSolver::Solve(const Problem& p, Solution* sol) {
  // a new solve: its own classification (SetTangentModes starts over)
  solves_++;
  modes_set_ = false;
  tan_ready_ = false;
  solved_ = sol;
  std::fill(changed_.begin(), changed_.end(), 0);
  const int nrow = p.nrow;
  sol->status = ckSTATUS_SOLVED;
  sol->iterations = 0;
  sol->residual = sol->kappa = sol->condition = 0;
  for (int i = 0; i < nrow; i++) {
    sol->force[i] = 0;
    state_[i] = kLcpLower;
    local_[i] = -1;
    con_of_row_[i] = -1;
  }
  for (int c = 0; c < p.ncon; c++) {
    for (int r = 0; r < p.con[c].dim; r++) con_of_row_[p.con[c].row + r] = c;
  }
  Keys(p);
  const bool use_guess = settings_.warmstart && have_prev_;
  for (int i = 0; i < nrow; i++) {
    guess_[i] = use_guess ? prev_.Get(keya_[i], keyb_[i], &ximp_[i]) : -1;
  }

  // islands are independent problems
  nisland_ = p.islands.nisland;
  arena_doff_ = arena_ioff_ = 0;
  stats_.Reset();
  // each island's velocity problem, then (split impulse) its position pass: the penetrations,
  // removed by a pseudo-velocity of the positions alone, while A_ still holds the island
  position_active_ = false;
  ptan_ready_ = false;
  prowadr_[0] = 0;
  for (int k = 0; k < nisland_; k++) {
    SolveIsland(p, k, sol);
    PositionIsland(p, k);
  }
  VelocityFromForce(p, sol->force, sol->v_next, nullptr);
  sol->position_correction = position_active_ ? up_.data() : nullptr;

  // remember the classification for the next step's guess
  next_.Clear();
  // (a row of an island without an exact answer is marked: its classification is a
  // Gauss-Seidel answer's, not worth an exact check)
  for (int i = 0; i < nrow; i++) {
    const int k = p.islands.row_island[i];
    const bool unstab = k >= 0 && unstabilized_[k];
    const int c = con_of_row_[i];
    next_.Put(keya_[i], putb_[i],
              state_[i] | (inexact_[i] ? kFromInexact : 0) | (unstab ? kUnstabilized : 0),
              p.h * sol->force[i], c >= 0 ? p.con[c].pos : nullptr);
  }
  std::swap(prev_, next_);
  have_prev_ = true;
}

double LcpSolver::BuildIsland(const Problem& p, int island) {
  const Islands& is = p.islands;
  const int n = is.nrows[island];
  const int* rows = is.rows + is.rowadr[island];
  const double h = p.h;
  // the island's boxed LCP in impulses x = h f
  for (int j = 0; j < n; j++) local_[rows[j]] = j;
  double vscale = 0;
  for (int j = 0; j < n; j++) {
    const int g = rows[j];
    const double b0 = p.J.Dot(g, p.v_free);
    double dpos, dvel;
    const double stab = Stabilization(p, g, b0, &dpos, &dvel);
    b_[j] = b0 + stab;
    stab_[j] = p.kind[g] == kRowEquality ? stab : 0;
    vscale = std::max(vscale, std::fabs(b_[j]));
    findex_[j] = -1;
    mu_[j] = 0;
    lo_[j] = 0;
    hi_[j] = kInf;
    switch (p.kind[g]) {
      case kRowEquality:
        lo_[j] = -kInf;
        break;
      case kRowFriction:
        lo_[j] = -h * p.floss[g];
        hi_[j] = h * p.floss[g];
        break;
      case kRowContactFriction: {
        // a contact from distance only pushes: no friction (its rows bound to zero)
        const Contact& con = p.con[con_of_row_[g]];
        if (FromDistance(con)) {
          lo_[j] = hi_[j] = 0;
          break;
        }
        findex_[j] = local_[con.row];
        mu_[j] = con.mu[g - con.row - 1];
        lo_[j] = -kInf;
        break;
      }
      default:
        break;
    }
  }
  BuildA(p, rows, n);
  return vscale;
}

void LcpSolver::SolveIsland(const Problem& p, int island, Solution* sol) {
  const Islands& is = p.islands;
  const int n = is.nrows[island];
  const int* rows = is.rows + is.rowadr[island];
  const double h = p.h;
  IslandFactor& fac = factors_[island];
  fac.stored = false;
  fac.lazy = false;
  exact_[island] = 0;
  unstabilized_[island] = 0;
  if (n > cap_) {
    const bool converged = LargeIsland(p, island, sol);
    for (int j = 0; j < n; j++) inexact_[rows[j]] = 1;
    sol->status = std::max(sol->status, converged ? static_cast<int>(ckSTATUS_INACCURATE)
                                                  : static_cast<int>(ckSTATUS_MAX_ITER));
    return;
  }

  const double vscale = BuildIsland(p, island);
  // (A = J M^-1 J' + cfm, built symmetric by BuildA)
  const DenseLcp lcp{n,          n,   A_.data(), b_.data(), lo_.data(), hi_.data(), findex_.data(),
                     mu_.data(), true};

  // the previous step's classification where rows match, a cold guess elsewhere
  BoxedOptions opt;
  opt.tol = kTol * std::max(1.0, vscale);
  opt.max_pivots = settings_.lcp.max_pivots;
  opt.budget = settings_.lcp.max_solves;
  opt.pgs_iter = settings_.lcp.pgs_iter;
  opt.max_work = Allowance();
  opt.sweep_rows = settings_.lcp.sweep_rows;
  opt.stabilize_rows = settings_.lcp.sweep_rows;
  opt.lemke_warm = settings_.lcp.lemke_warm == 3 ? 0 : settings_.lcp.lemke_warm;
  opt.lemke_sweep = settings_.lcp.lemke_warm == 3;
  opt.qp_sweep = settings_.lcp.qp_sweep;
  opt.factor_inexact = false;  // factored when a tangent asks (Refactor)
  signed char* state = lstate_.data();
  if (settings_.warmstart && have_prev_) {
    BoxedLcpSolver::ColdState(lcp, state);
    int matched = 0;
    bool unstab = false;  // the previous step solved these rows without the stabilization
    for (int j = 0; j < n; j++) {
      x0_[j] = ximp_[rows[j]];
      if (guess_[rows[j]] >= 0) {
        state[j] = guess_[rows[j]] & ~(kFromInexact | kUnstabilized);
        opt.check_guess = opt.check_guess && !(guess_[rows[j]] & kFromInexact);
        unstab = unstab || (guess_[rows[j]] & kUnstabilized);
        matched++;
      }
    }
    opt.use_guess = matched > 0;
    opt.start = x0_.data();
    if (unstab && solves_ % kRetry != 0) DropEqualityStabilization(p, island);
  }

  // the final decomposition goes to the store (kept for the derivative) when it fits
  Cod* cod = &scratch_cod_;
  const size_t nd = Cod::Doubles(n), ni = Cod::Ints(n);
  if (arena_doff_ + nd <= arena_d_.size() && arena_ioff_ + ni <= arena_i_.size()) {
    fac.cod.Bind(arena_d_.data() + arena_doff_, arena_i_.data() + arena_ioff_, n);
    arena_doff_ += nd;
    arena_ioff_ += ni;
    fac.stored = true;
    cod = &fac.cod;
  }
  BoxedStats st;
  bool exact = SolveDense(lcp, opt, state, cod, &st, false);
  if (EqualityEnergy(p, island)) {
    // solved again without the equality rows' stabilization, from the answer's classification
    const BoxedStats first = st;
    opt.use_guess = true;
    exact = SolveDense(lcp, opt, state, cod, &st, true);
    st.iterations += first.iterations;
    st.pivots += first.pivots;
    st.work += first.work;
  }
  for (int j = 0; j < n; j++) inexact_[rows[j]] = !exact;
  if (!st.factored && fac.stored) {
    fac.stored = false;
    fac.lazy = true;
  }
  exact_[island] = exact;
  // results and statistics
  bool pinned = false;
  for (int j = 0; j < n; j++) {
    sol->force[rows[j]] = x_[j] / h;
    state_[rows[j]] = state[j];
    // the friction rows of a contact from distance sit at their zero bounds, never clamped,
    // so that the tangent keeps them at zero
    const int g = rows[j];
    if (state[j] == kLcpClamped && p.kind[g] == kRowContactFriction &&
        FromDistance(p.con[con_of_row_[g]])) {
      state_[g] = kLcpLower;
      pinned = true;
    }
  }
  if (pinned && fac.stored) fac.stored = Refactor(p, island);
  if (opt.use_guess) {
    stats_.guess_tried = true;
    stats_.guess_all_hit = stats_.guess_all_hit && st.guess_hit;
  }
  sol->iterations += st.iterations;
  stats_.pivots += st.pivots;
  stats_.spent += st.spent;
  stats_.work += st.work;
  Spend(st.work);
  sol->residual = std::max(sol->residual, st.residual);
  sol->kappa = std::max(sol->kappa, st.kappa);
  if (st.factored) sol->condition = std::max(sol->condition, cod->condition());
  if (!exact) {
    const bool close = st.residual <= kLooseTol * std::max(1.0, vscale);
    sol->status = std::max(sol->status, close ? static_cast<int>(ckSTATUS_INACCURATE)
                                              : static_cast<int>(ckSTATUS_MAX_ITER));
  }
}

bool LcpSolver::EqualityEnergy(const Problem& p, int island) {
  // v+ = v_free + M^-1 J' x: K(v+) - K(v_free) = x'J v_free + x'(A - cfm) x / 2, A x = w - b;
  // the budget: kEnergyBudget sum_i stab_i^2 / (2 A_ii), each equality row's correction alone
  // (MuJoCo's hammock: gains above 100 budgets on most steps; its cloth and a chain of spheres
  // at rest on the floor: 1-3 on a few steps of their landing)
  const Islands& is = p.islands;
  const int n = is.nrows[island];
  const int* rows = is.rows + is.rowadr[island];
  const size_t ld = n;
  double gain = 0, scale = 0, budget = 0;
  bool any = false;
  for (int j = 0; j < n; j++) {
    const int g = rows[j];
    const double Ax = w_[j] - b_[j] - RowCfm(p, g) * x_[j];
    const double t0 = x_[j] * p.J.Dot(g, p.v_free), t1 = 0.5 * x_[j] * Ax;
    gain += t0 + t1;
    scale += std::fabs(t0) + std::fabs(t1);
    const double a = A_[j + j * ld];
    if (a > 0) budget += 0.5 * stab_[j] * stab_[j] / a;
    any = any || stab_[j] != 0;
  }
  // (beyond the sums' rounding)
  if (!any || !(gain > kEnergyBudget * budget + kEnergyTol * scale)) return false;
  DropEqualityStabilization(p, island);
  return true;
}

void LcpSolver::DropEqualityStabilization(const Problem& p, int island) {
  for (int j = 0; j < p.islands.nrows[island]; j++) {
    b_[j] -= stab_[j];
    stab_[j] = 0;
  }
  unstabilized_[island] = 1;
}

bool LcpSolver::SolveDense(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state,
                           Cod* cod, BoxedStats* st, bool again) {
  const int min_rows = settings_.lcp.schur_rows;
  if (again && schur_used_) {
    schur_.Rebase(lcp.b);  // (the same A: its elimination kept)
  } else if (min_rows <= 0 || lcp.n < opt.sweep_rows ||
             !schur_.Reduce(lcp, min_rows, kSchurRcond)) {
    schur_used_ = false;
    return boxed_.Solve(lcp, opt, state, x_.data(), w_.data(), cod, st);
  }
  schur_used_ = true;
  // the LCP of the other rows (the guess, impulses and start restricted to them; without other
  // rows the elimination is the answer), its answer expanded to the bilateral rows; the reduced
  // factorization goes to the scratch
  const int m = schur_.m();
  schur_.GatherState(state, rstate_.data());
  schur_.Gather(x_.data(), xr_.data());
  std::copy(state, state + lcp.n, gstate_.begin());
  BoxedOptions ropt = opt;
  if (opt.start) {
    schur_.Gather(opt.start, x0r_.data());
    ropt.start = x0r_.data();
  }
  *st = BoxedStats();
  bool exact = m == 0 || boxed_.Solve(schur_.reduced(), ropt, rstate_.data(), xr_.data(),
                                      wr_.data(), &scratch_cod_, st);
  schur_.Expand(xr_.data(), x_.data(), w_.data());
  for (int i = 0; i < lcp.n; i++) state[i] = kLcpClamped;
  for (int a = 0; a < m; a++) state[schur_.rows()[a]] = rstate_[a];
  // exact on the island itself (the expansion's rounding included)
  st->work += schur_.work();
  st->residual = BoxedLcpSolver::Residual(lcp, x_.data(), w_.data(), &st->kappa);
  exact = exact && st->residual <= opt.tol;
  st->spent = st->spent && !exact;
  st->factored = false;
  if (exact || m >= opt.sweep_rows) return exact;
  // a small reduced problem without an exact answer: the island itself from the same guess (the
  // best answer of a small problem is not Gauss-Seidel's; on the hammock such answers diverged)
  const BoxedStats reduced = *st;
  std::copy(gstate_.begin(), gstate_.begin() + lcp.n, state);
  exact = boxed_.Solve(lcp, opt, state, x_.data(), w_.data(), cod, st);
  st->iterations += reduced.iterations;
  st->pivots += reduced.pivots;
  st->work += reduced.work;
  return exact;
}

void LcpSolver::AddIslandSolve(const Problem& p, int island, double* y, double* out) const {
  const Islands& is = p.islands;
  for (int k = 0; k < is.ntrees[island]; k++) {
    const int t = is.trees[is.treeadr[island] + k];
    const int begin = is.tree_dofadr[t], end = begin + is.tree_dofnum[t];
    p.mass.Solve(y, begin, end);
    for (int i = begin; i < end; i++) {
      out[i] += y[i];
      y[i] = 0;
    }
  }
}

double LcpSolver::GsMove(const Problem& p, int g, double next, double* x, double* v) {
  const double delta = next - x[g];
  if (delta == 0) return 0;
  x[g] = next;
  if (gsadr_[g] >= 0) {
    // the row's M^-1 J_g' from the cache
    const double* y = gsy_.data() + gsadr_[g];
    ForTreeRanges(p, g, [&](int begin, int end) {
      for (int k = begin; k < end; k++) v[k] += delta * *y++;
    });
  } else {
    SolveRow(p, g, delta);
    ForTreeRanges(p, g, [&](int begin, int end) {
      for (int k = begin; k < end; k++) v[k] += yv_[k];
    });
    ClearY(p, g);
  }
  return std::fabs(delta) * diag_[g];
}

double LcpSolver::Allowance() const { return 1e6 * settings_.lcp.max_work + bank_; }

void LcpSolver::Spend(double work) {
  const double avg = 1e6 * settings_.lcp.max_work;
  if (std::isfinite(avg)) bank_ = std::min(kWorkCredit * avg, std::max(bank_ + avg - work, 0.0));
}

int LcpSolver::LargeSweeps() const {
  const double budget = Allowance() / std::max(large_sweep_, 1.0);
  return static_cast<int>(std::max(1.0, std::min<double>(settings_.lcp.pgs_iter, budget)));
}

bool LcpSolver::LargeIsland(const Problem& p, int island, Solution* sol) {
  const Islands& is = p.islands;
  const int n = is.nrows[island];
  const int* rows = is.rows + is.rowadr[island];
  const double h = p.h;
  double* v = vis_.data();
  double* lam = sol->force;  // impulses here, forces at the end
  for (int k = 0; k < is.ntrees[island]; k++) {
    const int t = is.trees[is.treeadr[island] + k];
    for (int d = is.tree_dofadr[t]; d < is.tree_dofadr[t] + is.tree_dofnum[t]; d++) {
      v[d] = p.v_free[d];
    }
  }
  double vscale = 0;
  large_sweep_ = 0;  // operations of one sweep: the row's product, its move and its trees' solves
  size_t off = 0;    // used part of gsy_
  for (int j = 0; j < n; j++) {
    const int g = rows[j];
    const double b0 = p.J.Dot(g, p.v_free);
    double dpos, dvel;
    bfull_[g] = Stabilization(p, g, b0, &dpos, &dvel);
    vscale = std::max(vscale, std::fabs(b0 + bfull_[g]));
    // M^-1 J_g' on the row's trees into the cache while it fits (a move is then one update of
    // v, not a solve with the trees' mass matrix)
    int dofs = 0;
    ForTreeRanges(p, g, [&](int begin, int end) { dofs += end - begin; });
    if (off + dofs <= gsy_.size()) {
      SolveRow(p, g, 1);
      diag_[g] = p.J.Dot(g, yv_.data()) + RowCfm(p, g);
      gsadr_[g] = static_cast<long>(off);
      ForTreeRanges(p, g, [&](int begin, int end) {
        for (int k = begin; k < end; k++) gsy_[off++] = yv_[k];
      });
      ClearY(p, g);
      large_sweep_ += 4.0 * p.J.rownnz[g] + 2.0 * dofs;
    } else {
      diag_[g] = RowInvMass(p, g, yv_.data()) + RowCfm(p, g);
      gsadr_[g] = -1;
      large_sweep_ += 4.0 * p.J.rownnz[g] + 8.0 * dofs;
    }
    lam[g] = 0;
  }

  // projected Gauss-Seidel on the velocities (no dense matrix), within the work budget
  const double tol = kTol * std::max(1.0, vscale);
  const int sweeps = LargeSweeps();
  bool converged = false;
  for (int sweep = 0; sweep < sweeps && !converged; sweep++) {
    double change = 0;
    for (int j = 0; j < n; j++) {
      const int g = rows[j];
      const double d = diag_[g];
      if (!(d > 0)) continue;
      double l = 0, u = kInf;
      if (p.kind[g] == kRowEquality) {
        l = -kInf;
      } else if (p.kind[g] == kRowFriction) {
        l = -h * p.floss[g];
        u = h * p.floss[g];
      } else if (p.kind[g] == kRowContactFriction) {
        const Contact& con = p.con[con_of_row_[g]];
        u = FromDistance(con) ? 0 : con.mu[g - con.row - 1] * std::max(lam[con.row], 0.0);
        l = -u;
      }
      const double wg = p.J.Dot(g, v) + bfull_[g] + RowCfm(p, g) * lam[g];
      change = std::max(change, GsMove(p, g, std::min(std::max(lam[g] - wg / d, l), u), lam, v));
    }
    converged = change <= tol;
  }
  stats_.work += large_sweep_ * sweeps;
  Spend(large_sweep_ * sweeps);
  stats_.spent += !converged && sweeps < settings_.lcp.pgs_iter;
  for (int j = 0; j < n; j++) {
    const int g = rows[j];
    state_[g] = lam[g] == 0 && p.kind[g] != kRowEquality ? kLcpLower : kLcpClamped;
    lam[g] /= h;
  }
  return converged;
}

void LcpSolver::PositionIsland(const Problem& p, int island) {
  const Islands& is = p.islands;
  const int n = is.nrows[island];
  const int* rows = is.rows + is.rowadr[island];
  int* prow = prow_.data() + prowadr_[island];
  prowadr_[island + 1] = prowadr_[island];
  // an island whose velocity solve failed moves no position (its velocities are only the best
  // answer); large islands get Gauss-Seidel
  if (n > cap_) {
    LargePositionIsland(p, island);
    return;
  }
  if (!exact_[island]) return;

  // the penetrating normals and limits (local indices into the island's A_)
  int np = 0;
  double vscale = 0;
  int* local = cidx_.data();
  for (int j = 0; j < n; j++) {
    double dpos;
    const double t = PositionTarget(p, rows[j], &dpos);
    if (t < 0) {
      local[np] = j;
      prow[np] = rows[j];
      b_[np] = t;
      vscale = std::max(vscale, -t);
      np++;
    }
  }
  if (!np) return;
  if (!position_active_) {
    std::fill(up_.begin(), up_.end(), 0.0);
    position_active_ = true;
  }

  // x >= 0 _|_ A x + b >= 0 on those rows alone (frictionless: no tangential pseudo-motion),
  // A_PP from the island's A_ of the velocity solve
  double* Ap = pA_.data();
  const size_t lp = np, ld = n;  // column strides of A_PP and A_ (their sizes can exceed int)
  for (int c = 0; c < np; c++) {
    for (int r = 0; r < np; r++) Ap[r + c * lp] = A_[local[r] + local[c] * ld];
  }
  for (int j = 0; j < np; j++) {
    lo_[j] = 0;
    hi_[j] = kInf;
    findex_[j] = -1;
    mu_[j] = 0;
  }
  const DenseLcp lcp{np,         np,  Ap, b_.data(), lo_.data(), hi_.data(), findex_.data(),
                     mu_.data(), true};
  // usually every penetrating row pushes: the minimum-norm solution of A_PP x = -b, accepted
  // when it is nonnegative; otherwise the boxed solver (with the default pivot limits, not the
  // settings': this small problem always gets its pivots; but within the settings' work budget,
  // since penetrations that no push can remove together leave it without an answer)
  signed char* state = lstate_.data();
  for (int j = 0; j < np; j++) rc_[j] = -b_[j];
  scratch_cod_.Factor(Ap, np, np, 1e-13);
  scratch_cod_.Solve(rc_.data(), x_.data());
  bool pushing = true;
  const double tol = kTol * std::max(1.0, vscale);
  for (int j = 0; j < np; j++) {
    state[j] = kLcpClamped;
    double w = b_[j];
    for (int k = 0; k < np; k++) w += Ap[j + k * lp] * x_[k];
    pushing = pushing && x_[j] >= 0 && std::fabs(w) <= tol;
  }
  bool solved = pushing;
  if (!solved) {
    BoxedOptions opt;
    opt.tol = tol;
    opt.budget = settings_.lcp.max_solves;
    BoxedLcpSolver::ColdState(lcp, state);
    opt.use_guess = true;
    BoxedStats st;
    solved = boxed_.Solve(lcp, opt, state, x_.data(), w_.data(), &scratch_cod_, &st);
  }
  if (!solved) {
    // no exact answer: each row's own correction shared among the rows, which never overshoots
    for (int j = 0; j < np; j++) {
      const double a = Ap[j + j * lp];
      x_[j] = a > 0 ? -b_[j] / (a * np) : 0;
      state[j] = x_[j] > 0 ? kLcpClamped : kLcpLower;
    }
  }

  // the pseudo-velocity M^-1 J_C' x (one solve per tree of the island), and the clamped rows
  // for PositionTangent
  double* y = yv_.data();
  int nc = 0;
  for (int j = 0; j < np; j++) {
    if (!(x_[j] > 0) || state[j] != kLcpClamped) continue;
    p.J.AddRowTo(prow[j], x_[j], y);
    px_[prowadr_[island] + nc] = x_[j];
    prow[nc++] = prow[j];
  }
  prowadr_[island + 1] = prowadr_[island] + nc;
  AddIslandSolve(p, island, y, up_.data());
}

void LcpSolver::LargePositionIsland(const Problem& p, int island) {
  const Islands& is = p.islands;
  const int n = is.nrows[island];
  const int* rows = is.rows + is.rowadr[island];
  const double cfm = settings_.lcp.cfm;
  double* lam = plam_.data();
  double vscale = 0;  // largest correction speed asked for (0: none)
  for (int j = 0; j < n; j++) {
    double dpos;
    const int g = rows[j];
    lam[g] = 0;
    vscale = std::max(vscale, -PositionTarget(p, g, &dpos));
  }
  if (!(vscale > 0)) return;
  if (!position_active_) {
    std::fill(up_.begin(), up_.end(), 0.0);
    position_active_ = true;
  }
  // projected Gauss-Seidel on x >= 0 _|_ J u + t >= 0, u accumulated in up_ (diag_ holds the
  // rows' inverse masses from the velocity pass), within the work budget
  const double tol = kTol * std::max(1.0, vscale);
  const int sweeps = LargeSweeps();
  for (int sweep = 0; sweep < sweeps; sweep++) {
    double change = 0;
    for (int j = 0; j < n; j++) {
      const int g = rows[j];
      double dpos;
      const double t = PositionTarget(p, g, &dpos);
      if (t == 0 && lam[g] == 0) continue;
      const double d = diag_[g];
      if (!(d > 0)) continue;
      const double w = p.J.Dot(g, up_.data()) + t + cfm * lam[g];
      change = std::max(change, GsMove(p, g, std::max(lam[g] - w / d, 0.0), lam, up_.data()));
    }
    if (change <= tol) break;
  }
}

bool LcpSolver::PositionTangent(const Problem& p, const ProblemTangent& dir, double* du) {
  // u = M^-1 J_C' x with A_CC x = -t_C: du = z + M^-1 J_C' dx, z = M^-1 (dJ_C' x - dM u), and
  // A_CC dx = -(dt_C + dJ_C u + J_C z), island by island (u is zero outside the islands, and
  // du on the islands the direction does not touch)
  if (!position_active_) return false;
  const int nv = p.nv;
  const SparseRows& J = p.J;
  const Islands& is = p.islands;
  std::fill(du, du + nv, 0.0);
  if (!ptan_ready_) PreparePositionTangent(p);
  MarkTouched(p, dir);

  double* z = pz_.data();
  double* y = yv_.data();
  for (int k = 0; k < nisland_; k++) {
    const int* rows = prow_.data() + prowadr_[k];
    const int nc = prowadr_[k + 1] - prowadr_[k];
    if (!nc || !touched_[k]) continue;
    for (int a = 0; a < is.ntrees[k]; a++) {
      const int t = is.trees[is.treeadr[k] + a];
      for (int i = is.tree_dofadr[t]; i < is.tree_dofadr[t] + is.tree_dofnum[t]; i++) z[i] = 0;
    }
    if (dir.J) {
      for (int a = 0; a < nc; a++) {
        const int g = rows[a], adr = J.rowadr[g];
        const double x = px_[prowadr_[k] + a];
        for (int q = 0; q < J.rownnz[g]; q++) z[J.colind[adr + q]] += dir.J[adr + q] * x;
      }
    }
    for (int a = 0; a < is.ntrees[k]; a++) {
      const int t = is.trees[is.treeadr[k] + a];
      const int b = is.tree_dofadr[t], e = b + is.tree_dofnum[t];
      if (dir.M) SubMassTangent(p, dir, up_.data(), z, b, e);
      p.mass.Solve(z, b, e);
      for (int i = b; i < e; i++) du[i] = z[i];
    }
    Cod* cod = &pcod_[k];
    if (!pcod_ok_[k]) {
      BuildA(p, rows, nc);
      scratch_cod_.Factor(A_.data(), nc, nc, 1e-13);
      cod = &scratch_cod_;
    }
    for (int j = 0; j < nc; j++) {
      const int g = rows[j];
      double dpos;
      PositionTarget(p, g, &dpos);
      double r = (dir.pos ? dpos * dir.pos[g] : 0) + J.Dot(g, z);
      if (dir.J) {
        const int adr = J.rowadr[g];
        for (int q = 0; q < J.rownnz[g]; q++) r += dir.J[adr + q] * up_[J.colind[adr + q]];
      }
      rc_[j] = -r;
    }
    cod->Solve(rc_.data(), dy_.data());
    // du += M^-1 J_C' dx, one solve per tree of the island
    for (int j = 0; j < nc; j++) J.AddRowTo(rows[j], dy_[j], y);
    AddIslandSolve(p, k, y, du);
  }
  return true;
}

void LcpSolver::PreparePositionTangent(const Problem& p) {
  // the clamped sets' A_CC, factored once per solve (into the store while it fits)
  size_t doff = 0, ioff = 0;
  for (int k = 0; k < nisland_; k++) {
    const int nc = prowadr_[k + 1] - prowadr_[k];
    pcod_ok_[k] = 0;
    if (!nc) continue;
    const size_t nd = Cod::Doubles(nc), ni = Cod::Ints(nc);
    if (doff + nd > pcod_d_.size() || ioff + ni > pcod_i_.size()) continue;
    pcod_[k].Bind(pcod_d_.data() + doff, pcod_i_.data() + ioff, nc);
    doff += nd;
    ioff += ni;
    BuildA(p, prow_.data() + prowadr_[k], nc);
    pcod_[k].Factor(A_.data(), nc, nc, 1e-13);
    pcod_ok_[k] = 1;
  }
  reach_.Prepare(p);
  ptan_ready_ = true;
}

}  // namespace contactkit
