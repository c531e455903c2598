// Copyright 2026 The contactkit developers.
//
// Solver "lcp": hard contact as a velocity-level boxed LCP per island, solved exactly by
// classification (Nimble: Werling et al. 2021, sections III-IV, appendices A-B).
//
// Unknowns are the impulses x = h f of the island's rows; with u = M_eff^-1 J' x,
//   w = A x + b,  A = J M_eff^-1 J' + cfm I,  b = J v_free + stabilization,  v+ = v_free + u,
// so w is the row velocity after the step plus its stabilization:
//   equality rows   bilateral (x free, w = 0), b += erp pos / h, unless the island's answer
//                   then adds more kinetic energy than ten times what these corrections cost
//                   row by row: it is solved again without them (EqualityEnergy)
//   friction loss   |x| <= h floss
//   limits, normals x >= 0 complementary to w >= 0. With split_impulse (the default) b holds
//                   only a gap ahead, b += max(pos + slop, 0) / h, so that a speculative contact
//                   closes exactly to slop within the step, and a penetration deeper than
//                   2 slop is removed after the step by positions alone: the position pass
//                   solves the frictionless LCP x_p >= 0 _|_ A_PP x_p + t_P >= 0 on those rows,
//                   t = max(erp (pos + 1.5 slop) / h, -max_correction), and the pipeline moves
//                   q+ by h M^-1 J_P' x_p (Solution::position_correction) without touching v+, so
//                   no velocity is injected (MuJoCo reports a contact only once it penetrates).
//                   Resting contacts sit in the band [slop, 2 slop] deep where neither acts, so
//                   the step stays smooth at rest. Without split_impulse, b += erp (pos + slop)
//                   / h (Baumgarte): the correction speed stays in the body as velocity, capped
//                   at max_correction. A contact that approaches faster than
//                   restitution_threshold and closes within the step is reflected instead:
//                   b += sigma J_n v, so that J_n v+ >= -sigma J_n v
//   contact frame   |x_j| <= mu_j x_n for each tangent, torsional and rolling row: a box in the
//                   contact frame (a pyramid aligned with the frame axes), whatever MuJoCo's cone;
//                   motion between the tangent axes is therefore braked along the diagonal of the
//                   box (the sliding direction drifts toward 45 degrees)
//
// Statistics in Solution: iterations = reduced solves, residual = largest natural-map residual
// (m/s; boxed.h), kappa = largest |w_i| times the distance of x_i to its nearer bound, condition =
// largest |R(0,0) / R(r,r)| of the islands' decompositions; pivots and the guess in LcpStats.
// Status: SOLVED when every island is exact, INACCURATE when the best answer's residual is below
// 1e-6 (m/s, relative to max(1, |b|)), MAX_ITER otherwise.
//
// Each island's dense LCP goes to BoxedLcpSolver (boxed.h): the previous step's classification
// (contacts matched by geom pair) is checked first with one reduced solve (on islands of at least
// sweep_rows rows only when that step's answer was exact), islands of at least sweep_rows rows
// then start from Gauss-Seidel on the previous step's impulses, pivoting runs only
// when that fails, within a work budget (max_work operations per island solve on average; cheaper
// solves leave a credit of up to 30 max_work; LcpStats::spent counts the islands it stopped), and
// the final answer is recomputed from its classification with the minimum-norm solution (Nimble's
// stabilization). Islands of at least sweep_rows rows with at least schur_rows bilateral rows
// (equalities, tendons: always clamped) solve the LCP of their other rows, the bilateral ones
// eliminated by their Schur complement (schur.h), and expand its answer. The classification and
// the decomposition of each island's reduced matrix stay available after Solve for ForceTangent
// and the derivative module (an inexact island's, and one solved through the Schur complement, is
// computed when first asked for); SetTangentModes
// (complementarity-aware gradients, Nimble section IV-D) refactors the islands whose contacts it
// reclassifies and restores the solve's own factorizations on null. Islands above max_island_rows
// get matrix-free Gauss-Seidel with each row's M^-1 J' cached (at most 2^21 doubles), as many
// sweeps as pgs_iter and the work budget allow.
#ifndef CONTACTKIT_SOLVERS_LCP_LCP_H_
#define CONTACTKIT_SOLVERS_LCP_LCP_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "solvers/common/arena.h"
#include "solvers/common/cod.h"
#include "solvers/common/reach.h"
#include "solvers/common/solver.h"
#include "solvers/lcp/boxed.h"
#include "solvers/lcp/schur.h"

namespace contactkit {

std::unique_ptr<Solver> MakeLcpSolver();

// statistics of the last solve beyond Solution
struct LcpStats {
  bool guess_tried = false;   // a previous classification was checked on some island
  bool guess_all_hit = true;  // every checked classification was accepted
  int pivots = 0;             // principal pivots, Lemke pivots and Dantzig events
  int spent = 0;              // islands whose work budget ran out before an exact answer
  double work = 0;            // estimated operations of the dense solves (BoxedStats::work)

  void Reset() { *this = LcpStats(); }
};

// the solver's last LcpStats (null if solver is not an lcp solver)
const LcpStats* LcpSolverStats(const Solver* solver);

class LcpSolver final : public Solver {
 public:
  // most credit of the work budget, in max_work (the stacked pile's long inexact stretches were
  // islands of 216-252 rows needing 11-32 max_work a step; docs/solvers.md, pile22b)
  static constexpr double kWorkCredit = 30;

  bool Setup(const ProblemDims& dims, const ckSettings& settings, std::string* error) override;
  void SetSettings(const ckSettings& settings) override;
  void Solve(const Problem& p, Solution* sol) override;
  void Reset() override;
  bool WarmStartFrom(const Solver& other) override;
  bool ForceTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                    double* dforce) override;
  bool SetTangentModes(const Problem& p, const signed char* mode) override;
  // blocked force tangents on a problem of one island: QueueTangent forms a direction's parts
  // that need its data (dv0's right-hand side, dJ_C v+, the stabilization's change, the
  // null-space term), FlushTangents the tree solves of dv0, J_C dv0 and K^+ rc of all at once
  static constexpr int kTangentSlots = 32;
  int TangentSlots(const Problem& p) const override {
    return p.islands.nisland == 1 ? kTangentSlots : 0;
  }
  bool QueueTangent(const Problem& p, const ProblemTangent& dir, int slot) override;
  bool FlushTangents(const Problem& p, int nslot, double* dforce) override;
  // (on: the null-space term is left out where it exerts no generalized force, NullTermUnread)
  void SetForcesThroughJacobian(bool on) override { forces_through_j_ = on; }
  bool DefersFreeVelocity() const override { return true; }
  bool ReadsMassLazily() const override { return true; }
  bool FormsVelocityRows() const override { return velocity_rows_on_; }
  // QueueTangent reads dJ in products only (dJ_C v+, dJ' f, and on a rank-deficient island dJ q~
  // and dJ' y~): no row's dJ is formed
  bool ReadsJacobianProducts() const override { return jacobian_products_on_; }
  bool ReadsJacobianFreeVelocity() const override { return false; }
  // dR and daref on the clamped soft rows only (contacts from distance)
  bool ReadsRowImpedance(const Problem& p) override;
  const char* TangentJacobianRows(const Problem& p) override;
  bool TangentProducts(const Problem& p, const double** x, const double** y) override;
  bool PositionTangent(const Problem& p, const ProblemTangent& dir, double* du) override;
  bool PrepareAdjoint(const Problem& p, const Solution& sol, const double* y,
                      const double* xi) override;
  double AdjointDot(const Problem& p, const Solution& sol, const ProblemTangent& dir) override;
  bool AdjointRowWeights(const Problem& p, const Solution& sol, RowWeights* w) const override;
  const double* AdjointFreeVelocityWeight(double* sign) const override {
    *sign = -1;  // (AdjointDot's -nu' dv_free)
    return adj_nu_.data();
  }

  // classification of every row in the last solve (LcpRowState; normals and limits at their
  // lower bound are separating; rows outside islands are kLcpLower)                    (nrow)
  const signed char* classification() const { return state_.data(); }

  const LcpStats& stats() const { return stats_; }

  // decomposition of the reduced matrix K = A_CC + A_CB E of island i in the last solve (null
  // if it was not kept: island larger than max_island_rows, or the store was full)
  Cod* factorization(int island);

  // the most null-space rows for which an island's null-space velocity map is stored (tests; 0:
  // a tree solve per direction for every rank-deficient island); at most kNullMax
  void set_null_store_rows(int n) {
    null_rows_ = std::min(n, kNullMax);
    tan_ready_ = false;
  }

  // some island's stored null-space velocity map is not zero (tests; read after a ForceTangent)
  bool null_velocity_nonzero() const { return znonzero_; }

  // stabilization part of b for row i of p (velocity units) and its derivatives with respect to
  // pos and vel of that row; b0 = J_i v_free decides whether a contact bounces. With
  // split_impulse a penetration is left to the position pass
  double Stabilization(const Problem& p, int i, double b0, double* dpos, double* dvel) const;

  // regularizer on the diagonal of A for row i: cfm, plus R on the normal of a contact from
  // distance (the derivative pass's surrogate: MuJoCo's soft row, so that it pushes before the
  // bodies touch, Stabilization giving its target -vel - h aref; its friction rows are bound to
  // zero: it only pushes)
  double RowCfm(const Problem& p, int i) const;
  bool SoftRow(const Problem& p, int i) const {
    return p.kind[i] == kRowContactNormal && FromDistance(p.con[con_of_row_[i]]);
  }

  // with split_impulse, the penetration of normal or limit row i that the position pass removes
  // (velocity units, < 0; 0 if none) and its derivative with respect to pos
  double PositionTarget(const Problem& p, int i, double* dpos) const;

  // test hook: BuildA's M^-1 J' in block solves (true) or one row at a time
  static inline bool block_rows_on_ = true;
  // test hook: a velocity direction's clamped rows' stabilization change from J's column
  // (VelocityRowTable, dir.vel_unit; true) or from the smooth stage's row tangents
  static inline bool velocity_rows_on_ = true;
  // test hook: the blocked tangents' dJ products from the smooth stage (true:
  // ReadsJacobianProducts, dJ not formed) or from dJ itself
  static inline bool jacobian_products_on_ = true;
  // test hook: without a clamped soft row, a position direction's dR and daref left unformed
  // (true: ReadsRowImpedance false) or formed
  static inline bool impedance_unread_on_ = true;
  // test hook: FlushTangents' dv0 solved in place when every slot has a right-hand side and its
  // blocks padded to a multiple of four columns (true), or packed into blk_m_ and copied back,
  // the blocks nslot wide (BlockVelocity, BlockRowChange, BlockPinv)
  static inline bool block_in_place_on_ = true;
  // test hook: QueueTangent's stores with their operands chosen once per direction and no dv0
  // right-hand side formed for a direction that moves neither J nor M (true), or per entry as
  // ForceTangent forms them and r formed (zero) for every direction (QueueRhs, QueueRows)
  static inline bool lean_queue_on_ = true;
  // test hook: with forces read through J' alone (SetForcesThroughJacobian), the blocked
  // tangents' null-space term left out where its stored velocity map is zero (true: its forces
  // exert no generalized force, to kNullCancel), or formed
  static inline bool null_unread_on_ = true;
  // test hook: FlushTangents' dv0 solved in blk_r_ where QueueTangent stored it, and a slot
  // without a null-space term turned into forces in one pass (true), or dv0 copied into blk_x_
  // first and the forces written, bound and divided by h in turn
  static inline bool lean_flush_on_ = true;
  // test hook: FlushTangents' lean slots read K^+ rc / h formed for every slot at once (true:
  // the divisions vectorize over the slots) or divide each row of each slot
  static inline bool divided_rows_on_ = true;
  // test hook: BlockRowChange's J_C dv0 for a contact's rows that share their pattern and
  // BlockPinv's K^+ rc for four rows at once (true: X loaded once for them) or row by row
  static inline bool row_groups_on_ = true;

 private:
  // matching keys of the rows of p (geom pair, occurrence and row within the contact; or MuJoCo
  // constraint type, id and occurrence): keyb_ finds the previous step's entry, putb_ files this
  // step's. With match_points, a pair's contacts are matched to its previous contacts by their
  // points (PatchKeys)
  void Keys(const Problem& p);
  // the contacts c0..c1-1 of one geom pair (key a), matched to the previous step's contacts of
  // the pair, nearest points first: MuJoCo 3.x lists a patch's contacts in an order that changes
  // from step to step, and adds or drops some, so the occurrence would take another contact's
  // classification and impulses. Unmatched contacts get a key without a previous entry
  void PatchKeys(const Problem& p, int c0, int c1, uint64_t a);

  // the boxed LCP of one island into A_, b_, lo_, hi_, findex_, mu_ (local_ set); returns the
  // largest |b|
  double BuildIsland(const Problem& p, int island);

  // refactor the stored reduced matrix of island for the classification in state_
  bool Refactor(const Problem& p, int island);

  // touched_ from dir (its own, or found by reach_)
  void MarkTouched(const Problem& p, const ProblemTangent& dir);
  // PositionTangent's shared part: the position pass's clamped sets factored
  void PreparePositionTangent(const Problem& p);
  // ForceTangent's shared part (see tan_ready_); false if some island's decomposition is missing
  bool PrepareTangent(const Problem& p, const Solution& sol);
  // PrepareTangent's q = M^-1 J' y~ of the rank-deficient islands (qfake_), formed on first use
  const double* NullVelocity(const Problem& p);
  // PrepareTangent on one island: its clamped rows' entries of J by column (vadr_, vrow_), each
  // with the stabilization change of a unit velocity on that dof (vst_), as QueueTangent forms it
  // from the smooth stage's d (J v) = J e_j and d aref = -B d (J v)
  void VelocityRowTable(const Problem& p);
  // PrepareTangent: K^+ and K's null-space basis of island k (m clamped rows) into pinv_ at *off,
  // if they fit
  void StoreOperators(int k, int m, size_t* off);
  // PrepareTangent: Z = V S J_R M^-1 of island k over its trees' dofs into zst_ (see zst_);
  // false if it is zero (to rounding)
  bool StoreNullVelocity(const Problem& p, int k);
  // NullSpaceTangent with Z stored for every rank-deficient island (zall_)
  void NullSpaceTangentStored(const Problem& p, const ProblemTangent& dir, double* dforce);
  // ForceTangent's null-space term of rank-deficient islands, added to dforce (impulses)
  void NullSpaceTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                        double* dforce);
  // dv = [dir.v_free] + scale M^-1 (dJ' force - dM u) on the trees of the islands that the
  // direction reaches (zero on the others, not computed outside islands); reach[k]: dv is not
  // zero on some tree of island k; !solve: dJ' force - dM u alone (no solve, scale, v_free);
  // dJf (nv, nullable): dJ' force given (ProblemTangent::J_force, J_y), dJ not read
  void IslandVelocityTangent(const Problem& p, const double* force, const double* u,
                             const ProblemTangent& dir, bool free, double scale, double* dv,
                             unsigned char* reach, bool solve = true, const double* dJf = nullptr);
  // FlushTangents' parts on blocks nw >= nslot columns wide (the columns from nslot padding):
  // dv0 of the slots (returned with its stride *ld: blk_r_ solved in place, or blk_x_), their
  // clamped rows' rc from it into blk_rc_ (false: no slot's is nonzero), K^+ rc into blk_dy_
  const double* BlockVelocity(const Problem& p, int nslot, int nw, size_t* ld);
  // QueueTangent's stores: dv0's right-hand side (d0 + x, either nullable: its term 0) on dofs
  // [b, e) at R[j kTangentSlots], and the clamped rows' stabilization change and dJ v+ of slot
  void QueueRhs(const double* d0, const double* x, int b, int e, double* R) const;
  void QueueRows(const Problem& p, const ProblemTangent& dir, const Solution& sol, int slot);
  bool BlockRowChange(const Problem& p, int nslot, int nw, const double* X, size_t nb);
  void BlockPinv(int nslot, int nw);
  // the blocked tangents' null-space term is not read (after PrepareTangent): the caller reads
  // J' dforce alone and every rank-deficient island's stored map Z is zero
  bool NullTermUnread() const {
    return null_unread_on_ && forces_through_j_ && zall_ && !znonzero_;
  }
  // a bound friction row g follows its clamped normal: x_g = coef x_normal (0: it does not)
  double Coupling(const Problem& p, int g, int* normal) const;

  // one island into sol->force (impulses / h) and state_
  void SolveIsland(const Problem& p, int island, Solution* sol);
  // its boxed LCP (x_, w_): large islands with many bilateral rows by the Schur complement of
  // those rows (schur.h; their own factorization then on request, st->factored false), and
  // directly when that is not possible or a reduced problem below sweep_rows rows has no exact
  // answer; true if exact. again: the same island with another b (its elimination kept)
  bool SolveDense(const DenseLcp& lcp, const BoxedOptions& opt, signed char* state, Cod* cod,
                  BoxedStats* st, bool again);
  // The answer x_ of island adds more kinetic energy to the free motion than ten times what the
  // equality rows' stabilization (Baumgarte, erp pos / h) would cost row by row, sum_i stab_i^2
  // / (2 A_ii): true, and stab_ taken out of b_ (the island is to be solved again without it; its
  // drift is left to later steps). Redundant equality rows whose drifts conflict (a tendon grid
  // pinned at its corners, as MuJoCo's hammock), alone or clamped with contacts, ask large impulses
  // for a small correction, which the exact answer turns into kinetic energy
  bool EqualityEnergy(const Problem& p, int island);
  // stab_ out of b_, island marked unstabilized_. The next step's first solve of the same rows
  // leaves it out from the start (warm-start bit), but on every kRetry-th solve (lcp.cc)
  void DropEqualityStabilization(const Problem& p, int island);

  // dense A of an island's rows: A(i, j) = J_i M^-1 J_j' (+ cfm on the diagonal)
  void BuildA(const Problem& p, const int* rows, int n);
  static constexpr int kRowBlock = 16;  // BuildA's columns per block solve

  // y = M^-1 J_i' into yv_ (zero outside the trees of row i); returns nothing, see ClearY
  void SolveRow(const Problem& p, int i, double scale);
  void ClearY(const Problem& p, int i);

  // out += M^-1 y on the trees of island (one solve per tree); y is zero there afterwards
  void AddIslandSolve(const Problem& p, int island, double* y, double* out) const;

  // one Gauss-Seidel move of row g's impulse x[g] to next: v += M^-1 J_g' (next - x[g]); returns
  // the change in velocity units (times diag_[g])
  double GsMove(const Problem& p, int g, double next, double* x, double* v);

  // matrix-free Gauss-Seidel for islands above max_island_rows; true if converged
  bool LargeIsland(const Problem& p, int island, Solution* sol);
  // its sweeps: pgs_iter, fewer if the work allowance would be spent (large_sweep_ set)
  int LargeSweeps() const;

  // work budget of the next island solve (operations): max_work, plus the credit that cheaper
  // solves left (at most kWorkCredit max_work), so that an occasional hard solve can take more
  // while the average stays within max_work; Spend charges a solve's work to the credit
  double Allowance() const;
  void Spend(double work);

  // split impulse: the frictionless LCP of the island's penetrating normal and limit rows,
  // x >= 0 _|_ A x + PositionTarget >= 0, into up_ (pseudo-velocity M^-1 J' x) and the island's
  // clamped rows into prow_
  void PositionIsland(const Problem& p, int island);

  // the same by projected Gauss-Seidel, for islands above max_island_rows (no tangent)
  void LargePositionIsland(const Problem& p, int island);

  // open-addressing table from row keys to states (no allocation after Allocate)
  struct StateTable {
    std::vector<uint64_t> ka, kb;
    std::vector<unsigned> stamp;
    std::vector<signed char> val;
    std::vector<double> imp;   // the row's impulse
    std::vector<double> pos;   // a contact row's point (world frame; 3 per slot)
    std::vector<size_t> used;  // slots of the current entries, in the order put
    size_t nused = 0;
    unsigned cur = 1;
    size_t mask = 0;
    void Allocate(int n);
    void Clear();
    // (pt: a contact's point, 3, nullable)
    void Put(uint64_t a, uint64_t b, signed char v, double x, const double* pt = nullptr);
    // state (-1: none) and impulse x (0: none)
    int Get(uint64_t a, uint64_t b, double* x) const;
    // the point put with (a, b), nullptr if none
    const double* Point(uint64_t a, uint64_t b) const;
    // the entries of o (same capacity; a pass over o's entries); false if the capacities differ
    bool CopyFrom(const StateTable& o);
  };

  // kept per island for the derivative
  struct IslandFactor {
    bool stored = false;  // cod holds the island's final classification
    bool lazy = false;    // its storage is bound but not factored (an inexact answer): Refactor
    Cod cod;
  };

  ckSettings settings_{};
  ProblemDims dims_;
  int cap_ = 0;  // largest island solved densely
  BoxedLcpSolver boxed_;
  BilateralSchur schur_;     // bilateral rows of large islands eliminated
  bool schur_used_ = false;  // the last SolveDense eliminated them (Rebase possible)

  // island problem (local rows)
  ZeroedArray<double> A_;                         // (cap x cap)
  std::vector<double> b_, lo_, hi_, mu_, x_, w_;  // (cap)
  std::vector<double> x0_;                        // previous impulses, Gauss-Seidel's start (cap)
  std::vector<int> findex_;                       // (cap)
  std::vector<signed char> lstate_;               // (cap)
  std::vector<double> xr_, wr_, x0r_;             // reduced problem's x, w and start (cap)
  std::vector<double> stab_;                      // equality rows' stabilization in b_ (cap)
  std::vector<signed char> rstate_;               // its classification (cap)
  std::vector<signed char> gstate_;               // the island's guess, kept (cap)

  // rows of the problem
  std::vector<int> local_;             // place of a row in its island              (max_rows)
  std::vector<int> con_of_row_;        // contact of a contact row, -1 otherwise     (max_rows)
  std::vector<signed char> state_;     // classification                             (max_rows)
  std::vector<signed char> guess_;     // guessed classification, -1: none           (max_rows)
  std::vector<signed char> inexact_;   // the row's island had no exact answer         (max_rows)
  std::vector<double> ximp_;           // the previous step's impulse of a row, or 0  (max_rows)
  std::vector<uint64_t> keya_, keyb_;  // matching keys                              (max_rows)
  std::vector<uint64_t> putb_;         // keyb_ under which this step's rows are filed (max_rows)
  std::vector<double> bfull_;          // stabilization of every row (large islands) (max_rows)
  std::vector<double> diag_;           // diagonal of A (large islands)              (max_rows)
  std::vector<double> yv_;             // M^-1 J_i' scratch, zero between uses       (nv)
  std::vector<double> vis_;            // velocity of large islands                  (nv)
  double large_sweep_ = 0;             // operations of one sweep of the large island
  ZeroedArray<double> gsy_;            // M^-1 J_g' of its rows on their trees, packed
                                       //                      (min(max_rows nv, 2^21))
  std::vector<long> gsadr_;            // row g's start in gsy_, -1: not cached     (max_rows)

  // warm start
  StateTable prev_, next_;
  bool have_prev_ = false;
  double bank_ = 0;  // credit of the work budget (operations), see Allowance
  long solves_ = 0;  // Solve calls since Setup

  // factorizations of the last solve, in a store of two decompositions of the largest island
  std::vector<IslandFactor> factors_;  // (ntree)
  ZeroedArray<double> arena_d_;        // (2 Cod::Doubles(cap))
  std::vector<int> arena_i_;           // (2 Cod::Ints(cap))
  Cod scratch_cod_;                    // for islands that do not fit in the store

  // split impulse (position pass) of the last solve
  std::vector<double> up_;        // pseudo-velocity of the positions                 (nv)
  std::vector<int> prow_;         // clamped rows of the position pass, by island     (max_rows)
  std::vector<double> px_;        // their impulses                                   (max_rows)
  ZeroedArray<double> pA_;        // A_PP of the position pass                        (cap x cap)
  std::vector<double> plam_;      // impulses of LargePositionIsland, by row          (max_rows)
  std::vector<double> pz_;        // PositionTangent scratch                          (nv)
  std::vector<int> prowadr_;      // first of island k in prow_                       (ntree + 1)
  bool position_active_ = false;  // some island has a position correction
  std::vector<Cod> pcod_;         // PositionTangent: A_CC of each island, factored (ntree)
  std::vector<unsigned char> pcod_ok_;  // ... factored into the store                  (ntree)
  ZeroedArray<double> pcod_d_;     // ... store                            (2 Cod::Doubles(cap))
  std::vector<int> pcod_i_;        //                                      (2 Cod::Ints(cap))
  bool ptan_ready_ = false;        // pcod_ holds this solve's factorizations
  ZeroedArray<double> scratch_d_;  // (Cod::Doubles(cap))
  std::vector<int> scratch_i_;     // (Cod::Ints(cap))
  size_t arena_doff_ = 0, arena_ioff_ = 0;  // used part of the store
  int nisland_ = 0;                         // islands of the last solve
  LcpStats stats_;                          // of the last solve

  // classification of the solve while SetTangentModes holds another one
  std::vector<signed char> saved_state_;     // (max_rows)
  std::vector<unsigned char> changed_;       // island refactored for other modes  (ntree)
  std::vector<unsigned char> exact_;         // island's velocity solve was exact   (ntree)
  std::vector<unsigned char> unstabilized_;  // ... without the equality rows' stabilization
                                             // (EqualityEnergy)                       (ntree)
  bool modes_set_ = false;

  // ForceTangent: what every direction of a solve shares (PrepareTangent), then scratch
  bool tan_ready_ = false;             // crow_ ... qfake_ hold this solve's classification
  bool qfake_ready_ = false;           // qfake_ formed (NullVelocity)
  bool deficient_ = false;             // some island's reduced matrix is rank deficient
  std::vector<int> crow_;              // clamped rows, island by island            (max_rows)
  std::vector<int> cadr_;              // first of island k in crow_                (ntree + 1)
  std::vector<double> cdpos_, cdvel_;  // their Stabilization derivatives           (max_rows)
  std::vector<unsigned char> csoft_;   // ... a contact from distance's normal       (max_rows)
  std::vector<int> cplace_;            // a clamped row's place in its island's list (max_rows)
  std::vector<int> brow_, bnormal_;    // bound rows following a clamped normal, and
                                       // its place among the island's clamped rows (max_rows)
  std::vector<double> bcoef_;          // x_brow = bcoef x_normal                   (max_rows)
  std::vector<int> badr_;              // first of island k in brow_                (ntree + 1)
  std::vector<unsigned char> reach0_, reachp_;  // dv0_, dvp_ not zero on island k     (ntree)
  std::vector<uint8_t> touched_;   // island k's data perturbed by the tangent's direction (ntree)
  IslandReach reach_;              // finds them
  ZeroedArray<double> pinv_;       // K^+, null-space rows V by island (Cod::Doubles(cap))
  std::vector<long> kadr_, nadr_;  // their place in pinv_, -1: not stored      (ntree)
  // rank-deficient island k: row i of Z = V S J_R M^-1 (S: the clamped rows and the bound rows
  // folded onto their normals, as NullSpaceTangent gathers tq_), over the island's trees' dofs in
  // tree order, so that V tq's velocity part is Z (dJ' y~ - dM q) without a solve per direction
  static constexpr int kNullMax = 8;  // the most null-space rows of a stored Z
  int null_rows_ = kNullMax;          // ... in this solver (set_null_store_rows)
  std::vector<double> zst_;  // Z of the islands, one after the other (kNullMax nv: always fits)
  std::vector<long> zadr_;   // island k's place in zst_, -1: not stored  (ntree)
  bool zall_ = false;        // every rank-deficient island has its Z stored
  bool znonzero_ = false;    // some stored Z is not zero (else no r per direction)
  bool forces_through_j_ = false;               // SetForcesThroughJacobian
  static constexpr double kNullCancel = 1e-12;  // StoreNullVelocity's cancellation to zero
  std::vector<double> ytil_;             // y~ = K^+' h x_C by row                    (max_rows)
  std::vector<double> ustep_, qfake_;    // M^-1 J' f = (v+ - v_free) / h; M^-1 J' y~ (nv)
  std::vector<double> dv0_, dvp_, tmp_;  // (nv)
  std::vector<double> rc_, dy_, tq_;     // (cap)
  std::vector<double> ablk_;             // BuildA's block of M^-1 J' columns   (nv kRowBlock)
  std::vector<char> atree_;              // BuildA's trees of a block                  (ntree)
  std::vector<double> codblk_;           // Cod::SolveBlock's scratch  (Cod::BlockDoubles(cap))
  std::vector<int> cidx_;                // (cap)
  // blocked tangents (one island), slot s of kTangentSlots: by dof j at j S + s, by clamped row
  // a at a S + s
  const Solution* solved_ = nullptr;     // the last Solve's solution (QueueTangent has none)
  std::vector<double> blk_r_;            // dv0's right-hand side dJ' f - dM u, then
                                         // (lean_flush_on_) dv0 itself            (nv S)
  std::vector<double> blk_vf_;           // dv_free                                (nv S)
  std::vector<double> blk_x_;            // dv0, stride nw (FlushTangents)         (nv S)
  std::vector<double> blk_m_;            // M^-1 r of the slots with r, packed     (nv S)
  std::vector<double> blk_a_;            // dJ_C v+                               (cap S)
  std::vector<double> blk_st_;           // the stabilization's change            (cap S)
  std::vector<char> jrows_;              // TangentJacobianRows' marks           (max_rows)
  std::vector<int> vadr_;                // VelocityRowTable: column j's entries  (nv + 1)
  std::vector<int> vput_;                // ... its fill cursor                   (nv)
  std::vector<int> vrow_;                // ... each entry's clamped row a        (max_nnz)
  std::vector<double> vst_;              // ... its stabilization change, unit v  (max_nnz)
  std::vector<double> blk_rc_;           // rc                                    (cap S)
  std::vector<double> blk_dy_;           // K^+ rc                                (cap S)
  std::vector<double> blk_ns_;           // null-space term: V's weights w, or the vector
                                         // added                       (max(cap, kNullMax) S)
  std::vector<unsigned char> blk_on_;    // the slot's island touched                  (S)
  std::vector<unsigned char> blk_ron_;   // its r not zero                              (S)
  std::vector<unsigned char> blk_vfon_;  // its dv_free given                           (S)
  std::vector<unsigned char> blk_rcon_;  // its rc not zero                             (S)
  std::vector<unsigned char> blk_nson_;  // its null-space term kept: 1 weights, 2 vector (S)
  int rec_slot_ = -1;  // NullSpaceTangent records slot's term into blk_ns_ (-1: adds it)
  // a slot's deferred dv_free's unit dof (-1 none; its right-hand side is in blk_r_)
  int blk_unit_[kTangentSlots] = {};

  // reverse mode (PrepareAdjoint): lam = K^+' y_C of the clamped rows, om = the null-space
  // term's row weights, nu = J_C' lam, pi = h M^-1 nu, pin = M^-1 J' om
  std::vector<double> adj_lam_;                    // by clamped row, as crow_      (max_rows)
  std::vector<double> adj_om_;                     // by row                        (max_rows)
  std::vector<double> adj_nu_, adj_pi_, adj_pin_;  // (nv)
  // ... of the position correction: rho = A_CC^+' J_C M^-1 xi by prow_, kappa = M^-1 (xi -
  // J_C' rho), xi itself (null: no position term)
  std::vector<double> adj_rho_;    // (max_rows)
  std::vector<double> adj_kappa_;  // (nv)
  const double* adj_xi_ = nullptr;
  // PrepareAdjoint's position part; false if some island's A_CC is not in the store
  bool PreparePositionAdjoint(const Problem& p, const double* xi);
  double PositionAdjointDot(const Problem& p, const ProblemTangent& dir);
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_LCP_LCP_H_
