// Copyright 2026 The contactkit developers.
//
// The interior-point solver's class (the method is described in ipm.h). Internal: tests reach
// the Newton step, the central-path point and the island lists through it.
#ifndef CONTACTKIT_SOLVERS_IPM_IPM_SOLVER_H_
#define CONTACTKIT_SOLVERS_IPM_IPM_SOLVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "solvers/common/reach.h"
#include "solvers/common/solver.h"
#include "solvers/ipm/ipm.h"
#include "solvers/ipm/island_lu.h"

namespace contactkit {
namespace ipm {

// the vectors of an iterate or of a search direction (then the changes of the residuals),
// indexed by global dof and row
struct Vectors {
  double* v;    // velocity v+                                                 (nv)
  double* rv;   // dynamics residual M (v - v_free) - J' lambda                (nv)
  double* x;    // force side: gamma, xi_j = lambda_j / mu_j, equality lambda   (rows)
  double* z;    // velocity side: s = pos/h + J v, eta_j = mu_j J_j v           (rows)
  double* z0;   // eta0 of the second-order cone whose first row is the index  (rows)
  double* lam;  // impulse of each row                                         (rows)
  double* u;    // J v                                                         (rows)
  double* rz;   // row residual: z - scale J v - target, equality residual     (rows)
};

// an iterate and its measures
struct State : Vectors {
  double rvio = 0;       // residual violation (velocity units)
  double kvio = 0;       // largest complementarity entry
  double mu = 0;         // mean complementarity x'z per cone
  bool interior = true;  // every cone strictly inside, with a margin above rounding
};

using Direction = Vectors;

// index ranges of one island's constraint lists
struct IslandLists {
  int orth_adr, orth_num;  // orthant pairs (limits, contact normals)
  int soc_adr, soc_num;    // second-order cones (friction groups, friction loss)
  int eq_adr, eq_num;      // equality rows
  int lim_adr, lim_num;    // limit rows (assembled one by one)
  int con_adr, con_num;    // contacts (assembled as blocks)
  int fl_adr, fl_num;      // friction-loss cones (assembled one by one)
};

class IpmSolver final : public Solver {
 public:
  bool Setup(const ProblemDims& dims, const ckSettings& settings, std::string* error) override;
  void SetSettings(const ckSettings& settings) override { settings_ = settings; }
  void Solve(const Problem& p, Solution* sol) override;
  bool ForceTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                    double* dforce) override;

  const double* TangentForce(const Problem& p) override { return CentralForce(p); }

  // blocked force tangents on a problem of one island: QueueTangent forms a direction's
  // residual perturbations and right-hand side, FlushTangents solves all queued ones with the
  // island's factor at once (then the refinement's, also at once)
  static constexpr int kTangentSlots = 32;
  int TangentSlots(const Problem& p) const override {
    return p.islands.nisland == 1 ? kTangentSlots : 0;
  }
  bool QueueTangent(const Problem& p, const ProblemTangent& dir, int slot) override;
  bool FlushTangents(const Problem& p, int nslot, double* dforce) override;
  // a blocked direction's dv_free unsolved: its M dv_free is M e_unit + h v_free_rhs (no solve);
  // dM read lazily (TangentResiduals' dM (v - v_free) in closed form)
  bool DefersFreeVelocity() const override { return true; }
  bool ReadsMassLazily() const override { return true; }

  // reverse mode: per island the transposed solve of the tangent system with the weights y
  // (once), then per direction the dot product with its residual perturbations (no position
  // correction: xi must be null). False if an island cannot be centred or factored, or under the
  // gap re-check on a constraint-space island (its transposed solve takes the rows as J)
  bool PrepareAdjoint(const Problem& p, const Solution& sol, const double* y,
                      const double* xi) override;
  double AdjointDot(const Problem& p, const Solution& sol, const ProblemTangent& dir) override;
  bool AdjointRowWeights(const Problem& p, const Solution& sol, RowWeights* w) const override;
  const double* AdjointFreeVelocityWeight(double* sign) const override {
    *sign = -1;  // (IslandAdjointDot's -(M w)' dv_free, on the islands' trees)
    return adj_mw_.data();
  }

  // complementarity-aware tangents: mode 0 holds the impulse of a contact the step holds closed
  // (Closed) fixed (its rows leave the tangent), mode 1 clamps the normal velocity (as a hard
  // equality) of one the step left open; otherwise, and for -1, as solved; null restores. Takes
  // effect island by island at the next ForceTangent (only islands whose contacts change are
  // re-factored)
  bool SetTangentModes(const Problem& p, const signed char* mode) override;
  // the modes reclassify a contact: mode 0 on a closed one, 1 on an open one
  bool KeepTangentModes() const override { return modes_on_ && mode_keep_; }

  const IpmStats& stats() const { return stats_; }

  // the force (nrow) at the central-path point kappa_grad of the last solve, where ForceTangent
  // differentiates; null if that point could not be reached
  const double* CentralForce(const Problem& p);

  // for tests: Center fails on this island (-1: none), to test what a failure leaves analytic
  static inline int center_fail_island_ = -1;
  // for tests: Center skips the stored iterate on this island (-1: none), as if its steps had
  // stalled, and takes its answer's point (AnswerPoint)
  static inline int center_stall_island_ = -1;
  // for tests: an island Center cannot reach leaves its columns to differences of the whole
  // step (DeferColumn), not to differences of its own solve (IslandDifference)
  static inline bool island_difference_off_ = false;
  // the step of IslandDifference's forward differences (the fallback's); for tests 0: the
  // impulses' change itself (zero where the replay gives the step's answer)
  static inline double island_nudge_ = 1e-6;
  // for tests: every island is solved by the proximal retry alone, from a zero centre
  static inline bool force_prox_ = false;
  // for tests: the polish runs a damped pattern again where it repeats the last one rejected
  static inline bool polish_repeat_off_ = false;
  // for tests: the soft attempt runs where its twin's decisions were alike
  static inline bool soft_twin_off_ = false;
  // for tests: TangentResiduals' dJ v and dJ' lambda from each row's first nonzero entry of dJ
  // (true) or over the whole row
  static inline bool row_skip_on_ = true;
  // for tests: one Newton direction at the cold start of island k for complementarity target
  // kappa (exact linearization); writes dv (nv) and dlam (nrow); false on failure
  bool NewtonAtColdStart(const Problem& p, int k, double kappa, double* dv, double* dlam);

  // for tests: the residual at the cold start moved by alpha along the last Newton direction:
  // dynamics (nv), rows (nrow) and complementarity x o z - kappa e per row (nrow; eta0 entries at
  // the first row of a cone go to comp0)
  void ResidualAlong(const Problem& p, int k, double alpha, double kappa, double* rv, double* rz,
                     double* comp, double* comp0);

 private:
  // per step
  void Prepare(const Problem& p, const double* pos);
  // row i's target, regularizer and bound at positions pos (Prepare's, but the scale)
  void PrepareRow(const Problem& p, const double* pos, int i);
  // constraint lists per island (lists_); chain flags for single-tree islands
  void BuildLists(const Problem& p);
  void SolveAll(const Problem& p, Solution* sol);
  void SolveIsland(const Problem& p, int k, Solution* sol);
  // the change of island k's kinetic energy (M_eff norm) from the free motion's that impulses
  // lam (nrow) make, work + quad / 2: work = v_free' J' lam, quad = lam' J M^-1 J' lam
  void EnergyTerms(const Problem& p, int k, const double* lam, double* work, double* quad);
  // impulses lam (nrow) of island k add more energy than kRecoveryEnergy times what its
  // recovering rows need alone
  bool AddsEnergy(const Problem& p, int k, const double* lam);
  // a limit, contact normal or hard equality row that undoes a violation (its target < 0)
  bool Recovers(const Problem& p, int i) const {
    const int kind = p.kind[i];
    return target_[i] < 0 && (kind == kRowLimit || kind == kRowContactNormal ||
                              (kind == kRowEquality && !settings_.ipm.soft_equality));
  }
  // after island k's answer (out_lam_) adds more energy than kRecoveryEnergy times what its
  // recovering rows need alone (rows whose recovery conflicts: a wedged body, limits violated
  // against contacts), holds those rows instead (target 0: no deeper, no recovery), under which
  // the step, a projection onto a set that holds v = 0, cannot add energy; true if it did
  bool HoldRecovery(const Problem& p, int k);
  // after the held re-solve: an exact answer without recovery cannot add energy (at most
  // kappa_tol per row); one that does more than kRecoveryEnergy times that is inexact, and is
  // scaled down along its direction to its least energy (status at least MAX_ITER)
  void Dissipate(const Problem& p, int k, int* status);
  // one solve attempt from a cold (warm_mu = 0) or warm start; recenter: re-center eta0 of
  // friction cones on feasible iterates; target: the final central-path value, fraction of ktol
  int Attempt(const Problem& p, int k, double floor, double warm_mu, bool recenter, bool scaled,
              double target, double rtol, double ktol, int* status, double* cond,
              const State** fin);
  // the dynamics change of the direction dir_ from s, measured, and refined while the factor's
  // solve leaves a defect
  void Refine(const Problem& p, int k, const State& s);
  // the last resort for an island every attempt left inexact (kPolishMax dofs + rows at most, no
  // equality or friction-loss rows): Newton on a complementarity pattern (PolishPattern) of the
  // best answer (out_lam_), then of every pattern of up to kPolishEnumerate orthant rows, with
  // full steps; then damped: the best answer's pattern, the same with contacts whose force does
  // not oppose their slip sticking (PolishGuess), patterns corrected from the last answer
  // (PolishCorrect), every pattern of few rows; the answer, measured on the hard problem, in
  // trial_; true if it meets both tolerances and its recovery adds no energy (AddsEnergy): then
  // out_lam_ holds it
  bool Polish(const Problem& p, int k);
  // the island's dense M, J and the start (pol_w0_)
  void PolishSystem(const Problem& p, int k);
  // the pattern's residual F (pol_F_) and Jacobian (pol_A_) at pol_w_
  void PolishNewtonSystem(const Problem& p, int k);
  // the pattern of the start (pol_w0_) into pol_pat_: rows that push harder than their gap
  // opens closed, closed cones sliding where x0 |z| > kappa_tol and the force opposes the slip
  // by the cosine align at least; true if that last condition made some cone stick
  bool PolishGuess(const Problem& p, int k, double align);
  // Newton on the pattern pol_pat_ (damped: steps halved until |F| decreases, stopped when it
  // shrinks only linearly); true if its answer lies in every cone and meets both tolerances.
  // A damped repeat of the last call's rejected pattern spends its work without running it
  bool PolishPattern(const Problem& p, int k, bool damped);
  bool PolishNewton(const Problem& p, int k, bool damped);  // (PolishPattern's run)
  // every pattern of up to kPolishEnumerate orthant rows; true once one is solved
  bool PolishEnumerate(const Problem& p, int k, bool damped);
  // after a pattern whose Newton converged to an answer outside the cones or short of the
  // tolerances: the pattern corrected from that answer (rows that pull open, rows that close
  // faster than residual_tol close, forces beyond their cone slide); true if it changed
  bool PolishCorrect(const Problem& p, int k);
  // the last resorts for an island every attempt left inexact: Polish, then Semismooth (off by
  // default); true if one solved it (trial_ holds its answer as measured)
  bool LastResort(const Problem& p, int k);
  // the last resort after the polish (islands of kNewtonMax rows at most, no equality or
  // friction-loss rows; newton.cc): semismooth Newton on the hard problem's natural residual in
  // the island's impulses, from the best answer (out_lam_); true if its answer meets both
  // tolerances and its recovery adds no energy: then out_lam_ holds it
  bool Semismooth(const Problem& p, int k);
  // the island's dense D = J M^-1 J' (ssn_D_), free row velocities (ssn_u0_), weights (ssn_r_)
  void NewtonDelassus(const Problem& p, int k);
  // the natural residual F (ssn_F_) at lam (island rows) and with jacobian its generalized
  // Jacobian (ssn_A_); returns |F|^2 / 2
  double NewtonResidual(const Problem& p, int k, const double* lam, bool jacobian);
  // the step (ssn_d_): Newton's (lm = 0) or Levenberg-Marquardt's; false if it cannot be solved
  bool NewtonDirection(int nr, double lm);
  double NewtonLmScale(int nr) const;
  // Tresca's radii (ssn_g_) moved to the answer's normal impulses, extrapolated; the largest step
  // and radius into change and gmax
  void TrescaRadii(const Problem& p, int k, double* change, double* gmax);
  // the next Levenberg-Marquardt weight into lm (its scale in lm_scale); false past the largest
  bool NewtonDamp(int nr, double* lm, double* lm_scale) const;
  // Newton from ssn_lam_ until |F| is below ftol, or (ftol = 0) until its answer meets the hard
  // problem (*solved); returns the steps
  int NewtonSolve(const Problem& p, int k, int max_iter, double ftol, bool* solved);
  // lam (island rows) measured as an iterate of the hard problem (trial_); true if it meets both
  // tolerances
  bool NewtonMeasure(const Problem& p, int k, const double* lam);
  bool Center(const Problem& p, int k);
  // where Center's steps stall (with GradAtEnd): into cen_ the island's answer (out_lam_, its
  // impulses as they are, the velocity they give, its measures) with the cones' variables on the
  // central path at kappa_tol, whose terms are those of the hard problem's limit (a closed
  // contact's velocity held, an open one's impulse null, a sliding one's on its cone), so that the
  // tangent is the answer's derivative; false unless the answer solves the hard problem with x o z
  // at rounding (a pattern's answer, the polish's: kAnswerKappa)
  bool AnswerPoint(const Problem& p, int k);
  // cone e's variables in cen_ moved onto the central path at kappa (AnswerPoint's)
  void AnswerCone(const Problem& p, int e, double kappa);
  // island k's force tangent along dir by a forward difference of its own solve (an island
  // Center cannot reach; island_difference.cc); false where that is not the step's difference
  bool IslandDifference(const Problem& p, int k, const ProblemTangent& dir, double* dforce);
  bool DifferenceApplies(const Problem& p, int k, const ProblemTangent& dir) const;
  // its workspace (Setup's)
  void AllocateDifference(const ProblemDims& dims);
  // q: p with island k's data moved by e along dir (into the dif_ arrays)
  void MovedProblem(const Problem& p, int k, const ProblemTangent& dir, double e, Problem* q);
  // Prepare's data-dependent terms of island k's rows and dofs
  void PrepareIsland(const Problem& p, int k, const double* pos);
  // kappa_grad at (or below) kappa_tol asks for the derivative of the hard-contact step itself:
  // the step then ends on the central point at kappa_tol (its own final target undershoots it),
  // and that point is differentiated
  bool GradAtEnd() const { return settings_.ipm.kappa_grad <= settings_.ipm.kappa_tol; }

  // per island
  void ColdStart(const Problem& p, int k, double floor, State* s);
  void WarmStart(const Problem& p, int k, double mu, State* s);
  // M^-1 J' lam on island k's dofs into tmp_ (impulses lam on the rows where ok, NULL: all)
  void ImpulseVelocityChange(const Problem& p, int k, const double* lam, const uint8_t* ok);
  // island k's velocity for those impulses: v = v_free + M^-1 J' lam on its dofs, u = J v on its
  // rows
  void ImpulseVelocity(const Problem& p, int k, const double* lam, const uint8_t* ok, State* s);
  void Residuals(const Problem& p, int k, State* s);
  // the proximal retry of an island that path following left stalled: soft problems whose rows'
  // velocities carry prox (x - xc), the first centred at the best answer so far, each next one
  // at the last answer (extrapolated), until an answer holds the hard residuals; returns the
  // iterations, the status and the answer (fin) measured on the hard problem
  int ProxRetry(const Problem& p, int k, int* status, const State** fin);
  void Measures(const Problem& p, int k, State* s) const;
  void RecenterEta0(const Problem& p, int k, State* s) const;
  // raises eta0 of velocity cones on their boundary after a blocked step; true if any changed
  bool LiftEta0(const Problem& p, int k, State* s) const;
  bool ConeJacobians(const Problem& p, int k, const State& s, bool scaled);
  bool Linearize(const Problem& p, int k, bool coupled, double* cond);
  bool Factor(const Problem& p, int k, double* cond);
  // row_kappa (nullable): a row's own central-path value where positive (contacts from distance)
  void Targets(const Problem& p, int k, const State& s, const Direction* aff, double kappa,
               const double* row_kappa = nullptr);
  // dcomp (nullable): change of the orthant rows' complementarity target over z
  void Constants(const Problem& p, int k, const double* rz, const double* rv, bool with_d,
                 const double* dcomp = nullptr);
  // the normal row i of a contact from distance (the derivative pass's surrogate)
  bool CfdRow(const Problem& p, int i) const {
    return p.kind[i] == kRowContactNormal && FromDistance(p.con[con_of_row_[i]]);
  }
  // its central-path value kappa_c = x_s t: x_s = h aref / (diag_approx + R) the soft impulse
  // MuJoCo's row gives the contact alone (its reference acceleration with the continued
  // impedance and softplus position, damping -B vel included), t its target pos / h (so the
  // central point of a contact at rest carries x_s); 0 where aref <= 0 (the row then stays at
  // kappa_grad); with dir, its tangent into dkappa
  double CfdKappa(const Problem& p, int i, const ProblemTangent* dir, double* dkappa) const;
  void Direct(const Problem& p, int k, const State& s, const double* rz, bool with_d, Direction* d);
  // Direct after its solve: the rows' and cones' changes from d->v and c_
  void DirectRows(const Problem& p, int k, const double* rz, bool with_d, Direction* d);
  void DynamicsChange(const Problem& p, int k, Direction* d);
  // the part of ForceTangent before island k's solve: residual perturbations (drz_, drv_), c_
  // and rhs_ (free_term false: without dv_free's term M dv_free, in drv_ and rhs_); false if the
  // island's Jacobian cannot be formed
  bool TangentRhs(const Problem& p, int k, const ProblemTangent& dir, bool free_term = true);
  // the refinement's dynamics defect of dir_ (drv_ + its change); true if it needs a solve
  bool Defect(const Problem& p, int k);
  // the dynamics changes M dv - J' lam of FlushTangents' slots [0, nslot) at once into blk_p_:
  // dv from blk_v_, lam (unscaled) from slot s's column lam + s * nrow
  void BlockDynamics(const Problem& p, int k, int nslot, const double* lam);
  // the rows' velocities J dv of FlushTangents' slots [0, nslot) at once into blk_u_, dv from
  // blk_v_ (DirectRows' products, each entry applied to all columns)
  void BlockRows(const Problem& p, int k, int nslot);
  // DirectRows' impulses alone (lam, rows), of FlushTangents' slot s: its rows' velocities from
  // blk_u_, row perturbations rz and constants c (null: zero)
  void TangentImpulses(const Problem& p, int k, const double* rz, const double* c, int s,
                       double* lam);
  // island k's exact Jacobian at its central point with the tangent modes, factored in lu_
  // (TangentRhs' and PrepareAdjoint's); false if it cannot be formed
  bool TangentJacobian(const Problem& p, int k);
  // the transposes of the row maps of the tangent system dlam = c - W u, u = G dv, c = C drz +
  // dcomp, for island k's row weights y: out = W' y (dynamics) or C' y, and adj_n_ the weight of
  // an orthant row's c (its own with its friction rows' coupling q)
  void RowAdjoint(const Problem& p, int k, const double* y, bool dynamics, double* out);
  // the transposed system's dynamics defect M w - G' W' t of island k's adjoint; if it is above
  // rounding, one refinement step (w, t); true if it took one
  bool AdjointDefect(const Problem& p, int k);
  // island k's weights of the direction's arrays (adj_mw_, adj_dv_, adj_gj_) from w and C' t
  void AdjointWeights(const Problem& p, int k);
  // island k's share of AdjointDot: y' dforce on its rows
  double IslandAdjointDot(const Problem& p, int k, const ProblemTangent& dir);
  double MaxStep(const Problem& p, int k, const State& s, const Direction& d, double tau) const;
  double MuAt(const Problem& p, int k, const State& s, const Direction& d, double alpha) const;
  void Step(const Problem& p, int k, const State& s, const Direction& d, double alpha,
            State* out) const;
  void Copy(const Problem& p, int k, const State& from, State* to) const;
  void TangentResiduals(const Problem& p, int k, const ProblemTangent& dir, const State& s,
                        bool free_term = true);
  // the step's solution holds contact normal row i closed: its impulse lam, alone on the row,
  // would move it faster than its gap closes, lam A > z, i.e. lam^2 A > lam z = kappa_tol
  bool Closed(const Problem& p, int i) const {
    return out_lam_[i] * out_lam_[i] * p.diag_approx[i] > settings_.ipm.kappa_tol;
  }
  // island k's cone terms at its central point, with the tangent modes where they apply; false
  // if they cannot be formed
  bool ModeTerms(const Problem& p, int k);

  // island ranges
  const int* Rows(const Problem& p, int k) const { return p.islands.rows + p.islands.rowadr[k]; }
  int NumRows(const Problem& p, int k) const { return p.islands.nrows[k]; }
  const int* Dofs(const Problem& p, int k) const { return p.islands.dofs + p.islands.dofadr[k]; }
  int NumDofs(const Problem& p, int k) const { return p.islands.ndofs[k]; }

  ckSettings settings_;
  ProblemDims dims_;
  IpmStats stats_;
  IslandLU lu_;

  // per row, per step
  std::vector<double> scale_;         // lambda = scale x: mu_j for friction rows, else 1    (rows)
  std::vector<double> target_;        // unilateral: pos/h (shifted, capped); equality target (rows)
  std::vector<uint8_t> capped_;       // target limited by recovery_speed                    (rows)
  std::vector<double> reg_;           // equality regularizer R                              (rows)
  std::vector<double> bound_;         // friction-loss impulse bound h floss                 (rows)
  std::vector<uint8_t> chain_;        // row lies on one dof chain                           (rows)
  std::vector<uint8_t> block_;        // rows from this one sharing its columns; 0: inside   (rows)
  std::vector<double> pos_;           // positions used for the targets                      (rows)
  std::vector<double> pos_next_;      // positions at q+ from the gap re-check               (rows)
  std::vector<double> jac_next_;      // Jacobian values at q+ from the gap re-check         (nnz)
  SparseRows gap_rows_;               // J with the values at q+ (gap re-check)
  const SparseRows* gapJ_ = nullptr;  // rows that measure velocities: p.J or gap_rows_

  // constraint lists (rows), grouped by island
  std::vector<IslandLists> lists_;                //                               (ntree)
  std::vector<int> orth_, eq_, lim_, con_, fl_;   //                               (rows)
  std::vector<int> con_dim_, con_soc_;            // contact dim, first cone       (rows)
  std::vector<int> soc_row_, soc_cnt_, soc_nrm_;  // first row, rows, normal row   (rows)
  std::vector<int> con_of_row_;                   // contact of a normal row       (rows)

  // linearization: orthant rows (by row), second-order cones (by cone): dx = d - G dz
  std::vector<double> og_, od_;  // x / z and d of an orthant row                       (rows)
  std::vector<double> sG_;       // Arw(z)^-1 Arw(x)                                    (cones x 9)
  std::vector<double> sq_;       // G_10 / G_00                                         (cones x 2)
  std::vector<double> sS_;       // G_11 - q G_01                                       (cones x 4)
  std::vector<double> sd_;       // z \ (kappa e - x o z - second-order term)            (cones x 3)
  std::vector<double> sW_;       // Nesterov-Todd scaling W of a scaled linearization   (cones x 9)
  std::vector<double> sWi_;      // W^-1                                                (cones x 9)
  std::vector<double> sl_;       // scaled point l = W z                                (cones x 3)
  bool scaled_ = false;          // the last ConeJacobians was Nesterov-Todd scaled
  std::vector<double> c_;        // constant of a row impulse: dlam = c - W J dv        (rows)

  // iterates and directions
  std::vector<double> store_;  // all State and Direction arrays
  State cur_, trial_, best_, grad_, cen_;
  Direction aff_, dir_;
  std::vector<double> rhs_;         // Newton right-hand side                              (nv)
  std::vector<double> tmp_;         // scratch                                             (nv)
  std::vector<double> mdiag_;       // diagonal of M_eff                                   (nv)
  std::vector<double> jc_, tw_;     // contact (group) rows and W-weighted rows           (12 x nv)
  std::vector<double> out_lam_;     // final impulses                                      (rows)
  std::vector<double> cen_force_;   // central-path force at kappa_grad                   (rows)
  std::vector<uint8_t> grad_ok_;    // island has a kappa_grad iterate                   (ntree)
  std::vector<double> grad_kappa_;  // central-path value Center goes to                (ntree)
  std::vector<uint8_t> centered_;   // 1: cen_ holds the island's central point, 2: Center
                                    // failed since the solve                            (ntree)
  int center_iterations_ = 0;       // Newton steps of the last Center
  int lu_island_ = -1;              // island whose central-point Jacobian lu_ holds
  bool differencing_ = false;       // SolveIsland solves for IslandDifference (no Center)
  std::vector<int> win_attempt_;    // attempt whose answer the step kept alone, else -1 (ntree)
  std::vector<int> win_steps_;      // ... its Newton steps to that answer                (ntree)
  int attempt_steps_ = 0;           // the last Attempt's steps to its answer
  int replay_steps_ = -1;           // Attempt stops after these steps, its answer the last
                                    // iterate (-1: it runs as it would)
  std::vector<double> dif_v_, dif_Dinv_;  // IslandDifference's moved v_free, D^-1      (nv)
  std::vector<double> dif_M_, dif_LD_;    // ... M and its factor                      (nM)
  std::vector<double> dif_J_;             // ... J's values                            (nnz)
  std::vector<double> dif_pos_, dif_vel_, dif_aref_, dif_R_, dif_diag_;  // ... rows  (rows)
  std::vector<double> dif_lam_;     // the step's impulses of the island        (rows)
  std::vector<double> drz_, drv_;   // residual perturbations for ForceTangent          (rows, nv)
  std::vector<double> blk_v_;       // queued right-hand sides, then dv, X[j * slots + s] (nv x 32)
  std::vector<double> blk_rv_;      // queued dynamics perturbations drv, R[j * slots + s] (nv x 32)
  std::vector<double> blk_c_;       // queued row constants c_, by slot                 (32 x rows)
  std::vector<double> blk_rz_;      // queued row perturbations drz, by slot            (32 x rows)
  std::vector<double> blk_u_;       // their rows' velocities, U[i * slots + s]          (rows x 32)
  std::vector<double> blk_p_;       // their dynamics changes, P[j * slots + s]        (nv x 32)
  std::vector<double> blk_f_;       // queued dv_free, X[j * slots + s]                 (nv x 32)
  std::vector<uint8_t> blk_mf_;     // ... or (deferred dv_free) M dv_free in blk_f_        (32)
  std::vector<uint8_t> blk_on_;     // queued direction touches the island               (32)
  std::vector<double> cfd_kappa_;   // central-path value of a contact from distance, 0: none (rows)
  std::vector<double> dcomp_;       // its tangent over z at the central point            (rows)
  std::vector<uint8_t> touched_;    // island's data perturbed by the tangent's direction (ntree)
  std::vector<signed char> mode_;   // SetTangentModes' mode of each contact            (contacts)
  bool modes_on_ = false;           // mode_ holds modes for the next tangents
  bool mode_keep_ = false;          // they reclassify a contact (KeepTangentModes)
  std::vector<uint8_t> mode_want_;  // island has a contact whose mode is not -1          (ntree)
  std::vector<uint8_t> mode_cur_;   // island's cone terms carry the modes                (ntree)
  std::vector<uint8_t> mode_new_;   // island's modes changed since its terms were formed (ntree)
  std::vector<uint8_t> row_moded_;  // normal row whose cone terms a mode replaced        (rows)
  IslandReach reach_;               // the islands a tangent's direction perturbs (touched_)

  // reverse mode (PrepareAdjoint): y' dforce = adj_z_' drz + adj_w_' drv + adj_n_' dcomp
  std::vector<double> adj_w_;   // w = A^-T G' W' y / h                                  (nv)
  std::vector<double> adj_t_;   // t = y / h - J w                                     (rows)
  std::vector<double> adj_u_;   // W' t and other row scratch                          (rows)
  std::vector<double> adj_z_;   // C' t: weight of the row perturbation drz            (rows)
  std::vector<double> adj_n_;   // weight of an orthant row's constant (dcomp)         (rows)
  std::vector<double> adj_mw_;  // M w: the weight of dv_free                            (nv)
  std::vector<double> adj_dv_;  // v - v_free at the central point: dM's right factor     (nv)
  std::vector<double> adj_gj_;  // weight of each dJ entry (through dJ v and dJ' lam)     (nnz)

  // proximal retry: the rows' velocities carry prox_ (x - xc_), a soft problem centred at xc_
  bool prox_on_ = false;
  std::vector<double> prox_;  // proximal weight: kProx diag_approx (x units)        (rows)
  std::vector<double> xc_;    // proximal centre (x units)                             (rows)
  std::vector<double> xd_;    // last step of the centre                               (rows)
  std::vector<double> pf_;    // orthant row: 1 / (1 + og prox)                          (rows)
  std::vector<double> sT_;    // cone: (I + S P)^-1                                      (cones x 4)
  std::vector<double> sq0_;   // cone: q before the proximal term                        (cones x 2)

  // the soft attempt's twin (kSoftTwin: its plan with the hard tolerances), run with a shadow of
  // the soft attempt's decisions: where all are alike the soft attempt is not run again
  struct Twin {
    bool on = false;            // the running attempt is the twin
    bool same = false;          // ... every decision alike under the soft tolerances
    double rtol = 0, ktol = 0;  // the soft attempt's tolerances
    int iterations = 0;         // the twin's steps and statistics
    int factorizations = 0, sym_fallbacks = 0, refined_dirs = 0, lifts = 0;
  };
  Twin twin_;
  // Attempt with kPlans[attempt] (twin: the soft attempt's twin may shadow it); its steps
  int PlannedAttempt(const Problem& p, int k, int attempt, bool twin, int* status, double* cond,
                     const State** fin);
  void TwinRan(const IpmStats& before, int steps);  // the twin's record (stats_ since before)
  void SoftAsTwin(int k, int* iterations);          // the soft attempt as the twin's run again

  // the current attempt follows the central path at kappa = path_sigma_ mu (no predictor or
  // second-order term); 0: Mehrotra predictor-corrector
  double path_sigma_ = 0;

  // polish (dense, P = kPolishMax = 64 dofs + rows at most), local indices: v then lambda
  std::vector<double> pol_M_;      // M of the island                                  (P x P)
  std::vector<double> pol_J_;      // J of the island (rows x dofs)                      (P x P)
  std::vector<double> pol_A_;      // Newton matrix, then its LU                        (P x P)
  std::vector<double> pol_w_;      // unknowns (v, lambda)                              (P)
  std::vector<double> pol_w0_;     // the start                                         (P)
  std::vector<double> pol_F_;      // residual, then the Newton step                    (P)
  std::vector<double> pol_d_;      // the Newton step                                   (P)
  std::vector<double> pol_wp_;     // the unknowns before the step                      (P)
  std::vector<double> pol_u_;      // row velocities J v                                (P)
  std::vector<int> pol_pat_;       // row: 0 open, 1 closed / sticking, 2 sliding       (P)
  std::vector<int> pol_piv_;       // row interchanges of pol_A_'s LU                   (P)
  std::vector<int> pol_cone_;      // cone of a friction row, -1: orthant row           (P)
  std::vector<int> pol_tried_;     // a stalled cone row's mode was switched (PolishCorrect) (P)
  std::vector<int> pol_last_pat_;  // the last PolishPattern's pattern               (P)
  double pol_last_work_ = -1;      // ... its work if it was damped, rejected and within the
                                   // budget, else -1 (PolishPattern's repeats)
  bool pol_solved_ = false;        // the last pattern's Newton converged (pol_w_ its answer)
  double pol_work_ = 0;            // dense LU work (sum of n^3) the damped patterns may still take
  std::vector<int> pol_loc_;       // local index of each island row                    (rows)
  std::vector<int> pol_dof_;       // local index of each island dof                    (nv)

  // semismooth Newton (dense, N = kNewtonMax rows at most), island-local row indices
  static constexpr int kNewtonMax = 128;
  std::vector<double> ssn_D_;    // J M^-1 J'                                        (N x N)
  std::vector<double> ssn_A_;    // generalized Jacobian of F                        (N x N)
  std::vector<double> ssn_H_;    // its LU, or A'A + lm I and its Cholesky factor     (N x N)
  std::vector<double> ssn_u0_;   // free row velocity, plus the target on orthant rows (N)
  std::vector<double> ssn_u_;    // row velocity at lam                               (N)
  std::vector<double> ssn_r_;    // weight r of the row's projection                   (N)
  std::vector<double> ssn_lam_;  // impulses                                          (N)
  std::vector<double> ssn_lp_;   // impulses before the step                          (N)
  std::vector<double> ssn_F_;    // natural residual                                  (N)
  std::vector<double> ssn_d_;    // step                                              (N)
  std::vector<int> ssn_piv_;     // row interchanges of the LU                         (N)
  std::vector<double> ssn_lt_;   // Tresca's answer of the last round                   (N)
  std::vector<double> ssn_gd_;   // Tresca: the radius's last step, at the first row    (N)
  std::vector<double> ssn_g_;    // Tresca: a cone's disc radius, at its first row      (N)
  bool tresca_ = false;          // F with the radii ssn_g_ held (Tresca's problem)

  // warm start of a re-solve within one step
  std::vector<double> warm_lam_;  // warm impulse of each row of this step            (rows)
  std::vector<uint8_t> warm_ok_;  // row has a warm impulse                            (rows)
};

}  // namespace ipm
}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_IPM_IPM_SOLVER_H_
