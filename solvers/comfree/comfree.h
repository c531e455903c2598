// Copyright 2026 The contactkit developers.
//
// Complementarity-free analytic contact (ComFree-Sim: Borse, Xie, Huang and Jin, section III).
// Every contact becomes dual-cone facets J~ = J_n - mu_s d' J_s, one family per kind of friction
// present at its condim (tangential, torsional, rolling), and each facet gets the closed-form
// force of eq. 8 from the smooth prediction v_smooth:
//   lambda = max(-K (J~ v_smooth h + phi) - D J~ v_smooth, 0),  K = k M / h,  D = d M / h,
//   M = r / (1 - r) / A   (eq. 12: r the impedance of |phi|, A the contact's inverse mass).
// The facets decouple across contacts, so one pass over them and one M^-1 solve give the next
// velocity (eq. 9). Limits take the same update on one facet and equality rows use it without a
// clamp; friction loss acts after them, a one-step stick clamped to the loss (FrictionAfter).
//
// Beyond the paper (docs/solvers.md, comfree): A is the exact normal inverse mass J_n M^-1 J_n',
// raised for contacts with a light tangent (kComfreeLightTangent) and shared by the contacts of a
// patch the collider relocates (a cylinder's; kComfreePatchPower); the facets of a family share
// its weight (4/n each for n tangential directions); relax_limit scales a tree's gains down where
// the facets over-correct; anchor gives position-level stick (plugin/step/anchor.h).
#ifndef CONTACTKIT_SOLVERS_COMFREE_COMFREE_H_
#define CONTACTKIT_SOLVERS_COMFREE_COMFREE_H_

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "solvers/common/solver.h"

namespace contactkit {

std::unique_ptr<Solver> MakeComfreeSolver();

// statistics of the last solve
struct ComfreeStats {
  int nfacet = 0;   // contact facets
  int nactive = 0;  // contact facets with a positive force
  int ncapped = 0;  // contacts and rows whose gain relax_limit scaled down
  int nroll = 0;    // contacts with a rolling stop (condim 6 with a gain)
  int nrolled = 0;  // ... whose rolling pair the cone scaled (a dry, sliding turn)

  void Reset() { *this = ComfreeStats(); }
};

// the solver's last ComfreeStats (null if solver is not a comfree solver)
const ComfreeStats* ComfreeSolverStats(const Solver* solver);

// slip speed (m/s) below which a sliding anchored contact sticks again
constexpr double kComfreeStickSpeed = 1e-3;

// angular speed (rad/s) below which an anchored contact's torsion or rolling sticks
constexpr double kComfreeStickTurn = 0.1;

// a sliding anchored contact keeps the displacement whose stick force carries this multiple of
// its share of the smooth load (up to the cone's edge)
constexpr double kComfreeLoadShare = 1.25;

// a sliding contact whose slip decays more slowly than its facets' viscous rate over this factor
// sticks again
constexpr double kComfreeSlideDecay = 10;

// a contact whose tangential inverse mass times mu^2 exceeds this multiple of its normal one
// takes gains from the tangent (Panda fingers: the explicit update diverged at h >= 5 ms)
constexpr double kComfreeLightTangent = 4;

// the contacts of a relocated patch share the power mean of this order of their inverse masses
// (near the largest: no contact's explicit update over-corrects much beyond its own; unlike the
// largest, smooth where contacts tie, as a resting box's do)
constexpr double kComfreePatchPower = 8;

// a contact's relaxation bound counts its facets' gap term k h this many times (a facet's explicit
// update of gap and velocity is stable while R (k h + d) + R k h / 2 < 2)
constexpr double kComfreeStableShare = 1.5;

// the coupled bound is held this far below relax_limit (it is near the update's largest eigenvalue,
// where the trace was far above it; at the stability edge the update rings: at 1.33 the humanoid
// diverged at 5h under random controls and a dropped cube at h = 20 ms, k = 0.5 rocked)
constexpr double kComfreeCoupledMargin = 1.6;

// the contacts of a body share the norm of this order of their relaxation bounds (near the
// largest; smooth where they tie)
constexpr double kComfreeRelaxPower = 8;

// most entries of ForceTangent's cache of M^-1 J' rows (2 MB); rows beyond it are solved per call
constexpr size_t kComfreeTangentPool = size_t{1} << 18;

// most facets a contact can have: 64 tangential, 2 torsional, 4 rolling
constexpr int kComfreeMaxFacets = 70;

// Facets of a contact with ntangent tangential directions (even, 4 .. 64, clamped): writes the row
// of each facet over the contact's frame rows, coef[6 j + r] (facet j's row is sum_r coef[6 j + r]
// J_r), and its weight, and returns the number of facets. With ntangent = 4 the facets are MuJoCo's
// pyramid edges in MuJoCo's order, J_n + mu_i J_i then J_n - mu_i J_i for i = 1 .. dim-1, all of
// weight 1. The weight (nullable) is 4 / ntangent for tangential facets, 1 for the others.
int ComfreeFacets(const Contact& con, int ntangent, double* coef, double* weight);

class ComfreeSolver final : public Solver {
 public:
  bool Setup(const ProblemDims& dims, const ckSettings& settings, std::string* error) override;
  void SetSettings(const ckSettings& settings) override;
  void Solve(const Problem& p, Solution* sol) override;
  bool ForceTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                    double* dforce) override;
  // complementarity-aware gradients: a contact given mode 0 (separating) keeps its force fixed
  // in the tangent (the closed form has no clamped set to change; "touching", mode 1, is how it
  // was solved already)
  bool SetTangentModes(const Problem& p, const signed char* mode) override;
  // blocked force tangents on a problem of one island: QueueTangent keeps a direction that moves
  // dv_free only (velocity, control: the force tangent is a fixed linear map of dv_free) and
  // forms the others' at once (ForceTangent); FlushTangents applies the map to the kept
  // dv_free of all slots at once, each entry of J to all columns (ForceTangent's bits)
  static constexpr int kTangentSlots = 32;
  int TangentSlots(const Problem& p) const override {
    return p.islands.nisland == 1 ? kTangentSlots : 0;
  }
  bool QueueTangent(const Problem& p, const ProblemTangent& dir, int slot) override;
  bool FlushTangents(const Problem& p, int nslot, double* dforce) override;
  bool DefersFreeVelocity() const override { return true; }
  bool ReadsMassLazily() const override { return true; }
  bool ReadsRowVelocity() const override { return false; }
  const char* TangentJacobianRows(const Problem& p) override;
  bool TangentRowWeight(const Problem& p, int row, double* w) override;
  // test hook: the tangent's rows' M^-1 J' solved in blocks (true) or row by row where first read
  static inline bool row_solves_on_ = true;
  // test hooks: a position direction's dv_free kept among the slots' (ForceTangent is linear in
  // it: LinearTangents' term) (true) or solved in QueueTangent; the kept slots' force tangents
  // from LinearTangents' map formed once per Solve (ltval_) (true) or facet sum by facet sum
  static inline bool free_split_on_ = true;
  static inline bool linear_map_on_ = true;
  // test hook: the kept slots' dv_free solved in blk_vf_ itself when they are its first columns
  // and LinearTangents' map applied to them padded to four columns (true), or packed into
  // blk_vx_ and back and the map applied to the slots alone
  static inline bool free_in_place_on_ = true;
  // test hook: DirectionTangent's facet terms of a condim-3 contact unrolled (FacetTerms::Add<3>)
  // and InvMassTangent's cached rows read without RowSolve's call (true), or the loops over dim
  static inline bool facet_dims_on_ = true;
  // test hook: InvMassTangent of a cached row on one tree with dJ w given without its pass over
  // the row's trees (true)
  static inline bool wtree_cut_on_ = true;
  // test hook: CoupledRelax's rows' M^-1 J' in BlockRowSolves' blocks and its cross terms of rows
  // on one tree without TreeOffset (CrossInvMass) (true), or each row solved and walked
  static inline bool coupled_blocks_on_ = true;
  // test hook: QuadRows' forms of kFormLanes rows at once (MassForms::FormsLanes) or one by one
  static inline bool forms_lanes_on_ = true;
  // test hook: the rolling rows' M^-1 J' in RowSolves' blocks and their w' dM w among QuadRows',
  // dv'' = dv' where no friction-loss row moves it (true), or each row solved where first read,
  // its w' dM w formed per direction, dv'' - dv' solved from zeros
  static inline bool roll_quads_on_ = true;
  // test hook: RollShareTangent's dJ terms from gather lists and its w' dM u from polarized forms
  // of dM_k, both formed once per Solve (true), or each pair's tree walks and w' dM u per direction
  static inline bool roll_gather_on_ = true;
  bool PrepareAdjoint(const Problem& p, const Solution& sol, const double* y,
                      const double* xi) override;
  double AdjointDot(const Problem& p, const Solution& sol, const ProblemTangent& dir) override;
  bool AdjointRowWeights(const Problem& p, const Solution& sol, RowWeights* w) const override;
  const double* AdjointFreeVelocityWeight(double* sign) const override {
    *sign = 1;  // (AdjointDot's adj_vfree_' dv_free)
    return adj_vfree_.data();
  }

  const ComfreeStats& stats() const { return stats_; }

  // facet forces (impulse / h, >= 0) of contact c in the last solve into out (70), in
  // ComfreeFacets' order; returns their number
  int FacetForce(int c, double* out) const;

  // gain M(phi) of a contact's normal row or of a plain row in the last solve, after relax_limit
  double Gain(int row) const { return gain_[row] * cap_[row]; }

 private:
  // summed facet weight of a contact: 1 facet (condim 1), else 4 tangential plus 2 per axis of
  // torsion and rolling
  static double WeightSum(int dim) { return dim == 1 ? 1 : 4 + 2 * (dim - 3); }

  // how far an anchored contact's tangential displacement y may stretch, as mu |y| over its
  // depth: W - 3 for summed facet weight W (WeightSum). The facets press alike at rest, each with
  // its share of the normal force; stretched by s, the facet along y presses with 1 + s shares,
  // the one opposite none, the other W - 2 with one each, so friction over normal force is
  // mu (1 + s) / (W - 1 + s): mu / 2 at s = W - 3. Condim 3 (W = 4) stops where the facet
  // opposite y lets go (s = 1); at condim 6 (W = 10) the torsional and rolling facets carry 6
  // shares without sliding friction, and s = 1 held only mu / 5 (the Unitree A1's feet slid)
  static double StickStretch(int dim) { return WeightSum(dim) - 3; }

  // pass 1 for a contact or plain row at row: inverse mass, gain, smooth row velocities
  void Measure(const Problem& p, int row, int dim, const Contact* con, double* x);

  // the contacts of a patch that the collider relocates (Contact::relocates; a geom pair's
  // contacts, listed together) share one inverse mass A in their gains, the power mean of
  // order kComfreePatchPower of theirs, so that a contact's stiffness does not depend on where on
  // the patch the collider puts it: the mug's rim triangle turns with its tilt, and gains that
  // follow the point (its A varies by 20% around the rim) made the contact forces
  // non-conservative, which fed a wobble that never settled. Writes patch_
  void SharePatches(const Problem& p);

  // damping of the facets of a contact from distance (normal row): MuJoCo's damping rate r B of
  // the contact's reference (solref), d = (1 - r) B h - k h, so that the pair does not ring in
  // the surrogate; at least the damping setting. slope (nullable): d d / d R
  double CfdDamping(const Problem& p, int row, double* slope) const;

  // factor of the gains on a tree whose facets sum to this relaxation (relax_limit)
  double CapFactor(double relax) const;

  // rows CoupledRelax bounds (rflag_): contacts' normal rows not from distance and plain rows,
  // gain > 0, on a tree whose summed relaxation relax_limit caps (elsewhere the sum, a bound of
  // the update's eigenvalues too, caps nothing)
  bool Relaxes(const Problem& p, int row) const;

  // offset of tree's dofs in a row's M^-1 J' packed by its trees (RowSolve), -1 if none
  static long TreeOffset(const Problem& p, int row, int tree);

  // sum_k val_k (M^-1 J_j')_k over row i's entries (val: J's or dJ's) on the trees both rows
  // touch, with wj = M^-1 J_j' packed by j's trees (RowSolve); a row j cached on one tree
  // (wtree_) read without TreeOffset's pass, and a row i cached on that tree alone without its own
  double CrossInvMass(const Problem& p, const double* val, int i, int j, const double* wj) const;
  // f(e, w) for each entry e of J's row i on the trees row j touches, w wj's value at its column
  template <typename F>
  static void ForEachCrossEntry(const Problem& p, int i, int j, const double* wj, F f) {
    const int adr = p.J.rowadr[i];
    ForEachRowTree(p, i, [&](int t, int k0, int k1) {
      const long seg = TreeOffset(p, j, t);
      if (seg < 0) return;
      const double* w = wj + seg - p.islands.tree_dofadr[t];
      for (int k = k0; k < k1; k++) f(adr + k, w[p.J.colind[adr + k]]);
    });
  }
  // its tangent dN_ij = dJ_i w_j + dJ_j w_i - w_i' dM w_j (wi, wj RowSolve's), and the
  // transpose: g dN_ij into adj_J_ and adj_M_
  double CrossInvMassTangent(const Problem& p, const ProblemTangent& dir, int i, int j,
                             const double* wi, const double* wj);
  void CrossInvMassAdjoint(const Problem& p, int i, int j, const double* wi, const double* wj,
                           double g);

  // the update's largest eigenvalue bounded by its columns (Gershgorin) instead of the trace:
  // with D_i = W_i G_i m (1.5 k h + d) (m = kComfreeCoupledMargin) the share of row i's facets and
  // N = J M^-1 J' over the relaxing rows, every eigenvalue of N D is at most the largest
  // row-weighted column sum rrelax_j = D_j A_j + sum_i D_i |N_ij| (the similarity diag(D) of
  // Gershgorin's rows). A body on many weakly coupled contacts (the humanoid lying on 30, one tree)
  // was capped by their sum: it sank 150-240 mm at 5h. 1.5 k h: a facet's explicit map of gap and
  // velocity is stable while R (k h + d) + R k h / 2 < 2. Writes rcon_, trow_, rd_, rrelax_, then
  // GroupRelax; coupled_ is false (the trees' sums relax_ cap the gains) when RowSolve's cache is
  // full
  void CoupledRelax(const Problem& p);

  // each relaxing row's bound rgam_: a contact's is the largest over its bodies b of the norm of
  // order kComfreeRelaxPower of the columns of b's contacts (rgroup_ the body, smooth where they
  // tie; one factor for a body's contacts, as a rigid body's gains must not vary from contact to
  // contact: the mug rocked), a plain row's its own column
  void GroupRelax(const Problem& p);

  // f(i) for each relaxing row i != j that shares a tree with row j, once
  template <typename F>
  void ForEachCoupled(const Problem& p, int j, F f) {
    const int stamp = ++stamp_;
    ForEachRowTree(p, j, [&](int t, int, int) {
      for (int a = trow_adr_[t]; a < trow_adr_[t + 1]; a++) {
        const int i = trow_[a];
        if (i == j || rstamp_[i] == stamp) continue;
        rstamp_[i] = stamp;
        f(i);
      }
    });
  }

  // f(i) for each relaxing contact row i on row j's trees with body b, once (j among them)
  template <typename F>
  void ForEachGroupRow(const Problem& p, int j, int b, F f) {
    const int stamp = ++stamp_;
    ForEachRowTree(p, j, [&](int t, int, int) {
      for (int a = trow_adr_[t]; a < trow_adr_[t + 1]; a++) {
        const int i = trow_[a], c = rcon_[i];
        if (c < 0 || rstamp_[i] == stamp || (p.con[c].body[0] != b && p.con[c].body[1] != b))
          continue;
        rstamp_[i] = stamp;
        f(i);
      }
    });
  }

  // tangent of each capped row's bound rgam_ along dir into dgam_ (CoupledRelax, GroupRelax)
  void CoupledRelaxTangent(const Problem& p, const ProblemTangent& dir);

  // reverse mode of CoupledRelaxTangent: adj_gam_ (by row) into the adjoint arrays
  void CoupledRelaxAdjoint(const Problem& p);

  // u' dM v on tree t (dM in the tree layout), with u, v on the tree's dofs from their first
  static double TreeQuad(const Problem& p, const double* dM, int t, const double* u,
                         const double* v);

  // pass 2 for contact c: facet forces, frame forces, pyramid edge forces; returns active facets
  int SolveContact(const Problem& p, int c, Solution* sol);

  // anchored contact c: the displacement it keeps for the next step and its state (anchor_)
  void SlideAnchor(const Problem& p, int c, const double* v_next);

  // v+ with friction loss after the other rows: v' = v_smooth + h M^-1 J' f of the other rows'
  // forces, then each friction-loss row i a one-step stick on it, f_i = -J_i v' / (A_i h) clamped
  // at +-floss (arg_ the unclamped force), and v+ = v' + h M^-1 J_f' f_f. Computed from
  // v_smooth, as the other rows are, the rows saw the velocity before the contacts and limits
  // stop the motion and could not hold a static load (docs/solvers.md, comfree)
  void FrictionAfter(const Problem& p, Solution* sol);

  // rolling friction after the other rows and the friction-loss rows: the contacts with a gain
  // and a rolling pair (roll_, nroll_), and for their rows r = 4, 5 the one-step stop x_r =
  // f_facets - J_r v'' / (S_r h) (arg_; S_r RollShare's), v'' the velocity after the
  // friction-loss rows (vroll_), scaled jointly into what the cone leaves the pair (the facets
  // alone resist a turn viscously, in mu_r^2, and held no static tilt)
  void RollRows(const Problem& p);
  // each rolling row's share S_s (rshare_) of the stop: its own inverse mass plus |J_s M^-1 J_q'|
  // over the other contacts' rolling rows q (Gershgorin's row sum), so that the stops of one
  // body's contacts, all computed from v'', end a common turn once together instead of once each
  void RollShare(const Problem& p);
  // the tangent of RollShare's cross terms of row 4 + r of roll_[k]: sum_q sign(N_sq) dN_sq
  double RollShareTangent(const Problem& p, const ProblemTangent& dir, int k, int r);
  // its rows' sums u_s (rupool_) from RollShare's pairs, built on the tangent's first call per
  // Solve
  void RollShareLists(const Problem& p);
  // ... its gather lists of dJ's entries (rgidx_, rgval_; false: they do not fit) and the forms
  // w_s' dM_k u_s = (q(w_s + u_s) - q(w_s - u_s)) / 4 of MassForms' q (rform_, on its first call
  // per Solve with forms)
  bool RollShareGather(const Problem& p);
  void RollShareForms(const Problem& p, const MassForms& forms);
  void RollStop(const Problem& p, int k, Solution* sol);
  // contact c's pyramid edge forces (edge_) re-split to carry its frame force after the stop
  void RollEdges(const Problem& p, int c, const double* force);

  // what the rolling pair of contact c may carry, in units of the normal force: the elliptic
  // cone's remainder sqrt(N^2 - sum_{r<4} (f_r / mu_r)^2), or the pyramid's N - sum_{r<4} |f_r| /
  // mu_r (a pyramidal model: its edge forces stay non-negative)
  static double RollBudget(const Problem& p, int c, const double* force) {
    const Contact& con = p.con[c];
    const double n = force[con.row];
    double used = 0;
    for (int r = 1; r < 4; r++) {
      if (!(con.mu[r - 1] > 0)) continue;
      const double u = force[con.row + r] / con.mu[r - 1];
      used += p.elliptic ? u * u : std::fabs(u);
    }
    if (p.elliptic) return n > 0 && n * n > used ? std::sqrt(n * n - used) : 0;
    return std::max(n - used, 0.0);
  }

  // the norm RollBudget bounds, of (x_4 / mu_4, x_5 / mu_5): 2-norm (elliptic) or 1-norm
  static double RollNorm(const Problem& p, int c, const double* x) {
    const Contact& con = p.con[c];
    double s = 0;
    for (int r = 4; r < 6; r++) {
      if (!(con.mu[r - 1] > 0)) continue;
      const double u = x[con.row + r] / con.mu[r - 1];
      s += p.elliptic ? u * u : std::fabs(u);
    }
    return p.elliptic ? std::sqrt(s) : s;
  }

  // f(i) for each rolling row i (rows 4, 5 of roll_'s contacts) with an inverse mass, whose dA
  // RollStopTangent reads: among RowSolves' and QuadRows' rows when roll_quads_on_
  template <typename F>
  void ForEachRollRow(const Problem& p, F f) const {
    for (int k = 0; k < nroll_ && roll_quads_on_; k++) {
      const int row = p.con[roll_[k]].row;
      for (int i = row + 4; i < row + 6; i++) {
        if (rowinv_[i] > 0) f(i);
      }
    }
  }

  // f(j, w_i, w_j, N_ji) for each rolling row j with an inverse mass of the contacts other than
  // roll_[k] (RollShare's terms of row i = 4 + r of roll_[k]; none unless rshare_on_), w RowSolve's
  template <typename F>
  void ForEachRollCross(const Problem& p, int k, int r, F f) {
    const int i = p.con[roll_[k]].row + 4 + r;
    if (!rshare_on_ || !(rowinv_[i] > 0)) return;
    const double* wi = RowSolve(p, i);
    for (int l = 0; l < nroll_; l++) {
      if (l == k) continue;
      for (int j = p.con[roll_[l]].row + 4; j < p.con[roll_[l]].row + 6; j++) {
        if (j == i || !(rowinv_[j] > 0)) continue;
        const double n = CrossInvMass(p, p.J.val, j, i, wi);
        if (n != 0) f(j, wi, RowSolve(p, j), n);
      }
    }
  }

  // rolling contact roll_[k] sticks (RollStop did not scale its pair)
  bool RollSticks(int k) const { return rscale_[k] == 1; }

  // friction-loss row i sticks (FrictionAfter's force is not clamped): its force has a tangent
  bool FrictionSticks(const Problem& p, int i) const {
    return p.kind[i] == kRowFriction && gain_[i] > 0 && arg_[i] > -p.floss[i] &&
           arg_[i] < p.floss[i];
  }

  // the friction-loss rows' force tangent (FrictionAfter), over what ForceTangent wrote for them
  // from the other rows' dforce: df_i = -(J_i dv' + dJ_i v') / (A_i h) - f_i dA_i / A_i, with
  // dv' = dv_free + h M^-1 (J_o' df_o + dJ_o' f_o - dM (v' - v_smooth) / h)
  void FrictionLossTangent(const Problem& p, const ProblemTangent& dir, double* dforce);
  // the rolling pairs' part of it (RollStop): dx_r = df_facets - (J_r dv'' + dJ_r v'') / (A_r h)
  // - (x_r - f_facets) dA_r / A_r, then the scaling's tangent (RollScaleTangent); g = dv', and
  // g += J_i' df_i + dJ_i' f_i over rows [i0, i1) (df null: the dJ' f terms alone; f read where
  // dir moves J); whether a row had a term
  static bool AddRowForceTerms(const Problem& p, const ProblemTangent& dir, int i0, int i1,
                               const double* df, const double* f, double* g);
  // dv'' = dv' + h M^-1 (J_f' df_f + dJ_f' f_f - dM (v'' - v') / h) (RollVelocityTangent)
  void RollStopTangent(const Problem& p, const ProblemTangent& dir, const double* g,
                       double* dforce);
  const double* RollVelocityTangent(const Problem& p, const ProblemTangent& dir, const double* g,
                                    const double* dforce);
  // ... its pairs from their rows' J dv'' (rdv_), written by RollStopTangent from dv'' or, where
  // no friction-loss row moves, by RollRowsTangent from C = J w_s (RollCross, once per Solve)
  // without dv' and dv'' (false: C not formed)
  void RollPairsTangent(const Problem& p, const ProblemTangent& dir, double* dforce);
  bool RollRowsTangent(const Problem& p, const ProblemTangent& dir, double* dforce);
  void RollCross(const Problem& p);
  // x = a w on row's trees, w RowSolve's M^-1 J' of row packed by them (a = 0: x cleared there)
  static void UnpackRow(const Problem& p, int row, const double* w, double* x, double a);
  // reverse mode of the rolling pairs' dx (RollStopTangent): z2 = M^-1 sum_r c_r J_r' (flw_), its
  // terms into the adjoint arrays; false if no rolling row has a weight
  bool RollStopAdjoint(const Problem& p, const double* y);
  // ... and z2's terms through v'': the friction-loss rows' dJ and dM, and J_f z2 added to their
  // weights (yf, by row, sticking rows only)
  void RollFrictionAdjoint(const Problem& p, double* yf);
  // -z' dM u into adj_M_
  void SubMassAdjoint(const Problem& p, const double* z, const double* u);
  // a friction-loss row's force (FrictionAfter)
  double FrictionLossForce(const Problem& p, int i) const {
    return gain_[i] > 0 ? std::clamp(arg_[i], -p.floss[i], p.floss[i]) : 0;
  }
  // a scaled pair f = b x / n(x) (b the budget): df = (b / n) (dx - x dn / n) + x db / n; in
  // reverse mode (adjoint) the same map transposed: y on f into weights on x (out) and on the
  // contact's rows 0-3 (added to yb, the budget's inputs)
  void RollScaleTangent(const Problem& p, int k, double* dx, const double* dforce) const;
  void RollScaleAdjoint(const Problem& p, int k, const double* y, double* yx, double* yb) const;

  // reverse mode of FrictionLossTangent: its y_f' df_f and the rolling pairs' y_r' df_r terms into
  // the adjoint arrays; returns the weights of the other rows' forces, y_o + J_o M^-1 sum_i (-y_i
  // / A_i) J_i' (adj_y_, friction rows 0; a rolling pair's own with RollScaleAdjoint's), or y
  // when no friction row sticks and no contact rolls
  const double* FrictionLossAdjoint(const Problem& p, const Solution& sol, const double* y);

  // tangent of the inverse mass A of the patch whose first contact is c0 (SharePatches; a
  // contact whose patch does not share is a patch of its own)
  double PatchInvMassTangent(const Problem& p, int c0, const ProblemTangent& dir);

  // tangent of the inverse mass A of a row along dir (dJ, dM)
  double InvMassTangent(const Problem& p, int row, const ProblemTangent& dir);

  // w'dM w (w = M^-1 J' from RowSolve) on dM's tree of the rows whose inverse mass the force
  // tangent differentiates, kQuadSlots rows per pass over dM's listed rows (dir.M_rows): into
  // quad_ with qset_ (InvMassTangent reads them); nothing without listed rows
  void QuadTangents(const Problem& p, const ProblemTangent& dir);
  void QuadPass(const Problem& p, const ProblemTangent& dir, int tree, int first);

  // the rows QuadTangents forms on a tree, gathered with their w at the first direction that
  // moves the tree's mass after a Solve (qtrow_, quadx_); none if the pool is full. With forms
  // (the direction's dM has them: ProblemTangent::M_forms) each row's w' dM_k w for every dof k
  // of the tree instead (qtform_), which QuadTangents then reads for every direction
  void QuadRows(const Problem& p, int tree, const MassForms* forms);
  // RowSolve's w of row on tree
  const double* QuadW(const Problem& p, int row, int tree);

  // ForceTangent without the solution (it reads the solver's own copy of what it needs)
  void DirectionTangent(const Problem& p, const ProblemTangent& dir, double* dforce);

  // the blocked tangents' workspace (Setup)
  void SetupTangentBlocks(const ProblemDims& dims);

  // FlushTangents' part for the slots kept as dv_free (lin_slot_): ForceTangent of a direction
  // that moves dv_free only, every entry of J applied to all of them
  void LinearTangents(const Problem& p, int nslot, double* dforce);
  // the same from its map dforce = L dv_free, L = -(G / h) (k h + damping) P J on a contact's
  // rows (they share J's columns; P its facet sums) and -(G / h) (k h + d) J on a plain row,
  // formed once per Solve with J's layout (ltval_; a contact whose rows do not share their
  // columns is not mapped: LinearTangents' terms)
  void LinearMapTangents(const Problem& p, int nslot, double* dforce);
  void FormLinearMap(const Problem& p);
  // a direction's dv_free (or with deferred its right-hand side) packed as a kept column
  void KeepFreeVelocity(const Problem& p, const ProblemTangent& dir, bool deferred, int slot);

  // ForceTangent's parts that do not depend on the direction, at its first call after a Solve:
  // each contact's facet sums (fsum_), whether a gain is capped, the quad rows' reset
  void PrepareTangent(const Problem& p);

  // M^-1 J' of a row on the trees it touches (their dof ranges back to back, in ForEachRowTree's
  // order): solved by the first ForceTangent after a Solve and kept for every later direction;
  // null if the cache is full
  const double* RowSolve(const Problem& p, int row);
  // a place in RowSolve's cache for row's M^-1 J' (wadr_[row]); false if the cache is full
  bool ReserveRow(const Problem& p, int row);
  // RowSolve's cache emptied if it belongs to an earlier Solve
  void FreshRowCache(const Problem& p);
  // RowSolve of every row whose inverse mass ForceTangent differentiates, in block solves
  void RowSolves(const Problem& p);
  // row listed for BlockRowSolves (rslist_, rsmark_) with its place reserved, unless cached,
  // listed or the cache is full
  void ListRowSolve(const Problem& p, int row, int* n);
  // the n listed rows' M^-1 J' into their places, per tree in block solves of up to kRowBlock
  // (TreeMass::SolveBlock: each column gets Solve's operations); unmarks them
  void BlockRowSolves(const Problem& p, int n);
  static constexpr int kRowBlock = 16;  // RowSolves' columns per block solve

  ckComfreeSettings settings_{};
  ProblemDims dims_;
  int nthread_ = 1;
  bool anchored_ = false;  // the last Solve used the problem's anchor displacements
  const signed char* tangent_modes_ = nullptr;  // SetTangentModes' modes (ncon; the caller's)
  ComfreeStats stats_;

  // workspace
  std::vector<double> gain_;     // gain M(phi) = r / (1 - r) / A, by row            (max_rows)
  std::vector<double> cap_;      // relax_limit factor of the gain, by row           (max_rows)
  std::vector<double> invmass_;  // A = J M^-1 J' of the normal / plain row, or amul_
                                 // times a much lighter tangent's; a patch's mean  (max_rows)
  std::vector<double> rowinv_;   // J M^-1 J' of each normal and tangential row (Measure) (max_rows)
  std::vector<int> arow_;        // the row whose inverse mass A is                   (max_rows)
  std::vector<double> amul_;     // A / (inverse mass of arow_)                       (max_rows)
  std::vector<double> vel_;      // J v_smooth of every row                          (max_rows)
  std::vector<double> arg_;      // unclamped force of every plain row               (max_rows)
  std::vector<double> facet_;    // unclamped facet forces, by contact (max_contacts x 70)
  std::vector<int> nfacet_;      // facets of each contact                           (max_contacts)
  std::vector<int> patch_;       // first contact of each contact's sharing patch    (max_contacts)
  std::vector<double> edge_;     // pyramid edge forces, contact at 2 row            (2 max_rows)
  std::vector<double> anchor_;   // anchor displacement for the next step, by row    (max_rows)
  std::vector<double> relax_;    // relaxation of the facets on each tree            (ntree)
  std::vector<double> rrelax_;   // CoupledRelax's column bound of each relaxing row  (max_rows)
  std::vector<double> rd_;       // ... each row's facets' share D_i                 (max_rows)
  std::vector<double> rgam_;     // GroupRelax's bound of each relaxing row           (max_rows)
  std::vector<int> rgroup_;      // ... the body whose contacts set it, -1 its own    (max_rows)
  std::vector<double> drho_;     // CoupledRelaxTangent: tangent of rrelax_          (max_rows)
  std::vector<double> dgam_;     // ... and of rgam_                                  (max_rows)
  std::vector<double> ddrel_;    // ... relative tangent of D_i                       (max_rows)
  std::vector<double> adj_rho_;  // CoupledRelaxAdjoint: adjoint of rrelax_           (max_rows)
  std::vector<double> adj_gam_;  // ... and of rgam_ (AdjointWeights)                 (max_rows)
  int stamp_ = 0;                // ForEachCoupled's and ForEachGroupRow's visit mark
  std::vector<int> trow_adr_;    // each tree's first entry in trow_                  (ntree + 1)
  std::vector<int> trow_;        // the relaxing rows touching each tree, tree by tree (4 max_rows)
  std::vector<int> rstamp_;      // CoupledRelax: the last column that visited a row  (max_rows)
  std::vector<int> rcon_;        // the contact whose normal row a row is, else -1    (max_rows)
  std::vector<char> rflag_;      // the row Relaxes                                   (max_rows)
  bool coupled_ = false;         // the gains are capped by rrelax_ (CoupledRelax)
  std::vector<double> drelax_;   // its tangent                                      (ntree)
  std::vector<double> scratch_;  // zeroed vectors, one per thread                   (nthread x nv)
  std::vector<double> tangent_;  // ForceTangent scratch                              (nv)
  std::vector<double> vafter_;   // v' of FrictionAfter, before the friction-loss rows (nv)
  std::vector<double> flg_;      // FrictionLossTangent / Adjoint scratch            (nv)
  std::vector<double> flu_;      // ... and (v' - v_smooth) / h                      (nv)
  std::vector<double> flv_;      // ... and a kept slot's dv_free (FlushTangents)     (nv)
  std::vector<double> flw_;      // ... and the rolling rows' dv'' or M^-1 J_r' weights  (nv)
  std::vector<double> vroll_;    // v'' = v' + h M^-1 J_f' f_f, what the rolling stops saw (nv)
  std::vector<double> flforce_;  // the forces v' saw (FrictionLossTangent's dJ' f) (max_rows)
  std::vector<int> roll_;        // FrictionAfter's rolling contacts (nroll_)    (max_contacts)
  std::vector<double> rscale_;   // ... their pairs' scale b / n(x), 1: unscaled  (max_contacts)
  int nroll_ = 0;                // ... their count
  std::vector<double> rshare_;   // ... their rows' shares S_s (RollShare)         (2 max_contacts)
  bool rshare_on_ = false;       // ... with the other contacts' terms
  bool rslists_ = false;         // ... RollShareLists' lists are this Solve's
  std::vector<int> rsadr_;      // ... each row's first pair in rpair_          (2 max_contacts + 1)
  std::vector<int> rpair_;      // ... the other rows q it shares a tree with
  std::vector<double> rpsign_;  // ... and sign(N_sq)          (min(4 max_contacts^2, pool))
  std::vector<int> ruadr_;      // ... each row's u_s in rupool_                 (2 max_contacts)
  std::vector<double> rupool_;  // ... u_s = sum_q sign(N_sq) M^-1 J_q' on its trees
                                //   (min(2 max_contacts nv, kComfreeTangentPool))
  std::vector<int> rgadr_;      // ... each row's first entry in rgidx_        (2 max_contacts + 1)
  std::vector<int> rgidx_;      // ... the dJ entries its tangent reads
  std::vector<double> rgval_;   // ... and their weights s_q w_s or u_s
                                //   (min(2 max_contacts (2 max_contacts + 1) nv, pool))
  bool rgather_ = false;        // ... the lists hold this Solve's terms
  std::vector<double> rform_;   // ... w_s' dM_k u_s for the dofs k of its trees, as rupool_
  bool rforms_ = false;         // ... rform_ holds this Solve's forms
  std::vector<double> rfscr_;   // ... RollShareForms' w +- u and their forms          (4 nv)
  std::vector<double> rdv_;     // ... their rows' J dv'' (RollPairsTangent)      (2 max_contacts)
  std::vector<double> rcross_;  // J_o w_s of each rolling row s, s-major (RollCross)
                                //   (min(2 max_contacts max_rows, kComfreeTangentPool))
  bool rcross_on_ = false;      // rcross_ holds this Solve's C
  std::vector<double> rforce_;  // ... and every row's force v'' saw (RollRowsTangent) (max_rows)
  std::vector<double> rvel_;    // ... and (v'' - v_smooth) / h                          (nv)
  std::vector<double> wpool_;   // RowSolve's M^-1 J' rows  (min(max_rows nv, kComfreeTangentPool))
  std::vector<int> wadr_;       // each row's start in wpool_, -1 unsolved, -2 full  (max_rows)
  std::vector<int> wtree_;      // a cached row's tree if it touches one, else -1    (max_rows)
  size_t wused_ = 0;            // entries of wpool_ in use
  bool wstale_ = true;          // wadr_ belongs to an earlier Solve
  std::vector<double> rsblk_;   // RowSolves' block of columns                 (nv kRowBlock)
  std::vector<int> rslist_;     // its rows                                        (max_rows)
  std::vector<char> rsmark_;    // listed                                          (max_rows)
  std::vector<int> rstadr_;     // start of each tree's rows in rstrow_                (ntree + 1)
  std::vector<int> rstrow_;     // the listed rows by tree                             (max_nnz)
  std::vector<char> dmtree_;    // ForceTangent: dir.M is nonzero on the tree        (ntree)
  // reverse mode (PrepareAdjoint): y' dforce as products with the problem tangent's arrays
  std::vector<double> adj_R_, adj_diag_, adj_pos_, adj_disp_;  // by row           (max_rows)
  std::vector<double> adj_ratio_, adj_dvel_, adj_invm_;        // ... of r / (1 - r), J v_smooth and
                                                               //  the inverse mass   (max_rows)
  std::vector<double> adj_J_;      // of dJ                                        (max_nnz)
  std::vector<double> adj_vfree_;  // of dv_free                                   (nv)
  std::vector<double> adj_M_;      // of dM, tree layout                           (nM)
  std::vector<double> adj_relax_;  // of the relaxation's tangent                  (ntree)
  std::vector<double> adj_patch_;  // of a patch's dA, by its first contact         (max_contacts)
  std::vector<double> adj_y_;      // FrictionLossAdjoint's weights of the forces   (max_rows)
  // PrepareAdjoint's parts: the contacts' and plain rows' weights, then the shared terms
  void AdjointWeights(const Problem& p, const double* y);
  void AdjointShared(const Problem& p);
  bool tstale_ = true;   // PrepareTangent's data belong to an earlier Solve
  bool capped_ = false;  // some gain has cap_ < 1 in the last Solve
  // per contact: sum_j arg_j c_j (6), sum_j w_j c_j c_j' (6 x 6), the latter times J v_smooth (6)
  static constexpr int kFacetSums = 48;
  std::vector<double> fsum_;   // over the active facets                (max_contacts x kFacetSums)
  std::vector<char> fshared_;  // the contact's rows share their columns         (max_contacts)
  static constexpr int kQuadSlots = 16;  // rows per QuadPass (a block of quadx_)
  // the width of a block of nq rows in quadx_: nq rounded up to even (SIMD pairs)
  static int QuadWidth(int nq) { return std::min(nq + (nq & 1), kQuadSlots); }
  std::vector<int> qtadr_;     // each tree's first quad row in qtrow_, -1 not gathered   (ntree)
  std::vector<int> qtnum_;     // its quad rows                                           (ntree)
  std::vector<size_t> qtx_;    // its first block in quadx_                               (ntree)
  std::vector<char> qtform_;   // its block holds the rows' forms, tree dofs per row      (ntree)
  std::vector<int> qtrow_;     // the trees' quad rows, tree after tree              (2 max_rows)
  int qtused_ = 0;             // entries of qtrow_ in use
  size_t qxused_ = 0;          // entries of quadx_ in use
  std::vector<double> quadx_;  // blocks of kQuadSlots quad rows' w on their tree, dof-major
                               // (tree dofs x kQuadSlots each)  (min((max_rows + 16) nv, pool))
  std::vector<double> quad_;   // w'dM w of a row on dM's tree (QuadTangents)        (max_rows)
  std::vector<char> qset_;     // quad_ holds the row's, for the current direction  (max_rows)
  std::vector<int> qrow_;      // the rows with qset_                               (max_rows)
  int nqrow_ = 0;              // how many
  // blocked tangents (QueueTangent): a slot's kind, 1 formed (blk_f_), 2 dv_free kept (blk_vf_)
  std::vector<signed char> blk_kind_;  //                                     (kTangentSlots)
  std::vector<char> blk_touch_;        // the slot's direction touches the island  (kTangentSlots)
  std::vector<double> blk_f_;          // formed slots' force tangents    (kTangentSlots x max_rows)
  std::vector<double> blk_vf_;         // kept dv_free, dof-major, packed      (nv x kTangentSlots)
  std::vector<double> blk_ds_;         // a contact's rows' J dv_free, packed   (6 x kTangentSlots)
  int lin_slot_[kTangentSlots] = {};   // the slot of each packed dv_free column
  int nlin_ = 0;                       // how many
  // the packed columns holding a deferred dv_free's right-hand side, their unit dof (-1 none)
  int lin_rhs_[kTangentSlots] = {}, lin_unit_[kTangentSlots] = {};
  int nrhs_ = 0;                // how many
  std::vector<double> blk_vx_;  // FreeVelocities' scratch              (nv x kTangentSlots)
  std::vector<double> vfree_;   // a formed slot's deferred dv_free, solved (nv)
  std::vector<double> ltval_;   // LinearMapTangents' L, J's layout               (max_nnz)
  std::vector<char> ltrow_;     // the row is mapped (FormLinearMap)                (max_rows)
  bool ltstale_ = true;         // ltval_ belongs to an earlier Solve
  std::vector<char> jrows_;     // TangentJacobianRows' rows                (max_rows)
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMFREE_COMFREE_H_
