// Copyright 2026 The contactkit developers.
//
// The transition Jacobians of ck_step by the implicit function theorem (ck_transitionJac,
// ck_transitionVJP) and by finite differences (ck_transitionFD). Derivative holds the parts, each
// with its workspace carved from one arena at ck_make (docs/derivatives.md lists the files):
//   SmoothTangent (smooth_tangent.h)          smooth dynamics and constraint rows along a direction
//   stage.cc                                  the nominal stage and the solver's force tangent
//   IntegratorTangent (integrator_tangent.h)  Euler, implicit and RK4
//   FdReference (fd_reference.h)              the finite-difference reference
//   this class                                entry points, directions (directions.cc), output
// Everything runs on scratch mjData and a shadow handle owned here: the caller's mjData and handle
// stay untouched.
#ifndef CONTACTKIT_PLUGIN_DERIVATIVE_H_
#define CONTACTKIT_PLUGIN_DERIVATIVE_H_

#include <mujoco/mujoco.h>

#include <memory>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/deriv/elastic.h"
#include "plugin/deriv/fd_reference.h"
#include "plugin/deriv/integrator_tangent.h"
#include "plugin/deriv/rollout_grad.h"
#include "plugin/deriv/smooth_tangent.h"
#include "plugin/deriv/workspace.h"
#include "plugin/step/anchor.h"
#include "plugin/step/extract.h"
#include "plugin/step/handle.h"
#include "solvers/common/problem.h"
#include "solvers/common/reach.h"
#include "solvers/common/solver.h"
#include "solvers/mujoco/soft_tangent.h"

namespace contactkit {

class Derivative : private FdTarget {
 public:
  Derivative() = default;
  ~Derivative() override;
  Derivative(const Derivative&) = delete;
  Derivative& operator=(const Derivative&) = delete;

  // allocate for model m and settings s; false with a message
  bool Setup(const mjModel* m, const ckSettings& s, std::string* error);

  // new settings of the owning handle (a solver switch allocates its workspace)
  bool SetSettings(const mjModel* m, const ckSettings& s, std::string* error);

  // ck_transitionJac: 0 analytic, 1 finite differences (no analytic path), -1 error
  int Jacobian(const mjModel* m, const mjData* d, mjtNum* A, mjtNum* B, mjtNum* C, mjtNum* D);

  // ck_transitionJacAware: with an adjoint dx (2nv+na) and a solver that reclassifies contacts
  // (every solver: docs/derivatives.md), the Jacobians of the classification the
  // complementarity-aware VJP of dx keeps (so that dx' [A B] is that VJP); dx null, RK4 or an
  // adaptive integrator: Jacobian
  int JacobianAware(const mjModel* m, const mjData* d, const mjtNum* dx, mjtNum* A, mjtNum* B,
                    mjtNum* C, mjtNum* D);

  // ck_transitionVJP: gx = A' dx + C' ds, gu = B' dx + D' ds; return as Jacobian
  int Vjp(const mjModel* m, const mjData* d, const mjtNum* dx, const mjtNum* ds, mjtNum* gx,
          mjtNum* gu);

  // ck_transitionFD: mjd_transitionFD's differences, stepping with ck_step
  void FiniteDiff(const mjModel* m, const mjData* d, mjtNum eps, int centered, mjtNum* A, mjtNum* B,
                  mjtNum* C, mjtNum* D);

  // the columns of the last Jacobian or VJP left to differences (a direction without a force
  // tangent: one island ipm cannot center), the others analytic
  int fd_columns() const { return nfd_; }

  // the owning handle: every evaluation starts the shadow handle from its contact anchors and
  // its adaptive integrator's step-size controller
  void set_owner(const ckHandle* owner) { owner_ = owner; }
  // the step-size controller evaluations start from instead of the owner's (null: the owner's;
  // ck_rolloutGrad's backward sweep sets each step's own)
  void set_controller(const AdaptiveIntegrator::Controller* c) { controller_ = c; }

  // ck_paramJac (params.cc): params checked by the caller, np > 0; return as Jacobian
  int ParamJacobian(const mjModel* m, const mjData* d, const ckParam* params, int np, mjtNum* DxDp,
                    mjtNum* DsDp, int* how);

  // ck_rolloutGrad's tape (made on first use)
  RolloutTape& tape();

  // why the last Jacobian or VJP fell back to finite differences (ckFallback; NONE if it did not)
  int fallback() const { return fallback_; }

  // MuJoCo's resets of the scratch mjData so far (a bad state reached within the evaluation)
  int ScratchResets() const { return Resets(stage_data_) + Resets(pass_data_); }

  // a step of the differences was refused (StepSkip: MuJoCo's implicit integrator could not
  // factor M - h qDeriv at a nudged state) since clear_refused
  bool refused() const { return refused_; }
  void clear_refused() { refused_ = false; }
  // every value the last Jacobian, JacobianAware or FiniteDiff wrote into A, B, C, D was finite
  // (EmitColumn checks what it writes; the others are the zeros of SinkTo); false after a write
  // that bypasses it (the elastic correction), when the caller checks the outputs itself
  bool SinkFinite() const { return !sink_direct_ && sink_check_ == 0; }

  // the last VJP asked for complementarity-aware gradients and the solver could reclassify (for
  // JacobianAware: the aware classification was kept)
  bool complementarity_applied() const { return complementarity_applied_; }

  // test hook: the single-stage columns written and emitted on their dofs' span (true) or whole
  static inline bool column_spans_ = true;
  // test hook: the blocked velocity columns' row terms from SoftTangent::VelocityRowRhs (true)
  // or from their row tangents one by one (SoftTangent::RowRhs)
  static inline bool velocity_rows_ = true;
  // test hook: AnchorTangent's (dw x o) . F as dw . (o x F), o x F formed once per stage
  // (tan_.anchor_cross) (true), or a cross product per contact and direction
  static inline bool anchor_crosses_on_ = true;
  // test hook: a direction that moves no position handed no ddisp (null) (true) or its zeros
  static inline bool zero_disp_null_on_ = true;
  // test hook: FlushTangents' columns moved into and out of its row-major block in 4 x 4 tiles,
  // out through mass_term (true), or element by element with the block's stride
  static inline bool transpose_tiles_on_ = true;
  // test hook: the blocked tangents' J' df of a contact's rows that share their columns at once
  // (AddTransposeBlock with the stage's row groups: the same sums) or row by row
  static inline bool transpose_groups_on_ = true;
  // test hook: "mujoco"'s blocked position columns' row terms J' fold on one island of every tree
  // added for a block's slots at once (FlushColumns, AddTransposeBlock) (true), or column by
  // column in QueueColumn (SoftTangent::RowRhs)
  static inline bool block_fold_on_ = true;

 private:
  // ---- the nominal stage and the force tangent (stage.cc) ----
  // the shadow handle as the caller's handle stands: its solver's warm start
  // (Solver::WarmStartFrom; cold for solvers without one), the caller's committed contact anchors
  void ResetShadow();
  // nominal forward at the state in stage_data_ and everything the tangents reuse; false if the
  // analytic path does not cover this state (reason in fallback_)
  bool PrepareStage(const mjModel* m, bool rk4);
  // pass_data_ at the nominal positions (the perturbation passes' base); implicit: qDeriv's
  // products
  void PreparePasses(const mjModel* m);
  // the problem of the "mujoco" solver: MuJoCo's rows with the solver's own mass matrix
  bool PrepareMujocoProblem(const mjModel* m);
  // contacts MuJoCo included in the constraint problem
  int CountIncluded(const mjData* d) const;
  // with contacts from distance in the stage's problem: the solution's force and v+ become the
  // ones the solver differentiates (Solver::TangentForce), if it says
  void UseTangentForce();
  // tan_.ddisp: tangent of the anchored contacts' displacements along the current direction
  // (anchors held: their material points move with the bodies, the contact frame turns)
  // (unit: the position dof of a unit direction, -1 a unit direction moving no position, -2
  // unknown: dq scanned)
  // (false: the direction moves no position, ddisp is zero)
  bool AnchorTangent(const mjModel* m, int unit = -2);
  // force tangent and integrator acceleration tangent tan_.dqacc_int; false if the solver has
  // none. kind, index: the unit direction it is (its islands by MarkUnitTouched), -1: another
  bool SolveTangent(const mjModel* m, int kind = -1, int index = -1);
  // the current direction's problem tangent (and tan_.touched; marked: the caller set it)
  void FormTangent(const mjModel* m, ProblemTangent* dir, bool marked = false, int unit = -2);
  // FormTangent of the unit direction (kind, index) (kind -1: another): a position or velocity
  // direction, and one that moves no row data and no M, marked by MarkUnitTouched
  void FormUnitTangent(const mjModel* m, ProblemTangent* dir, int kind, int index);
  // tan_.dqacc_int (or out, nv) = dqfrc_smooth + dqfrc_constraint + dqderiv_qacc - dM_int aint
  // (before the integrator's solve)
  void AccelerationRhs(const mjModel* m, double* out = nullptr);
  // tan_.dqfrc_constraint += J' dforce + dJ' f (or dJ_force) on the touched islands' rows (df
  // false: the caller's dforce is zero, J' dforce left out)
  void ConstraintForceTangent(const Problem& p, bool df = true);
  // fn(i) for each row i of the touched islands (tan_.touched), island by island in row order
  template <typename Fn>
  void ForTouchedRows(const Islands& is, Fn&& fn) const {
    for (int k = 0; k < is.nisland; k++) {
      if (!tan_.touched[k]) continue;
      const int* rows = is.rows + is.rowadr[k];
      for (int a = 0; a < is.nrows[k]; a++) fn(rows[a]);
    }
  }

  // ---- directions (directions.cc) ----
  // every unit direction of the current stage: fn(kind, index, column of [A B]) after
  // tan_.dqacc_int, tan_.dact_dot and the unit direction are set
  template <typename Fn>
  bool Directions(const mjModel* m, bool state, bool ctrl, Fn&& fn);
  // "mujoco": queue the current direction's right-hand side in a block's slot; solve a block
  void QueueColumn(const mjModel* m, int slot, int kind, int index, int col);
  // the dofs [lo, hi) (whole trees) outside which a queued column's dv+ and dacc are zero: the
  // islands (or lone trees) of the trees of its right-hand side r and of P, its unit dv's tree
  void ColumnReach(const Problem& p, int kind, int index, const double* r, const double* pc,
                   int* lo, int* hi) const;
  // rhs zeroed, no column queued (the start of the blocked directions)
  void ClearBlock();
  template <typename Fn>
  void FlushColumns(const mjModel* m, int nslot, Fn&& fn);
  // a solver with blocked force tangents (stage_.slots): queue the current direction's force
  // tangent in slot, with its column's terms but J' df in mass_term; solve a block's force
  // tangents and emit its columns. False if the solver has no tangent (fallback_ set)
  bool QueueTangent(const mjModel* m, int slot, int kind, int index, int col);
  template <typename Fn>
  bool FlushTangents(const mjModel* m, int nslot, Fn&& fn);
  // reverse mode for a VJP of "mujoco" with rows under Euler (Vjp, no Jacobian wanted, no sensors,
  // no elastic correction): one solve of H with the adjoint, then one product per direction with
  // its right-hand side instead of its solve and column
  bool AdjointApplies() const;
  // the column of [A B] (or the index of [gx gu]) of the unit direction (kind, index)
  int OutputColumn(int kind, int index) const {
    return kind == kCtrl  ? 2 * nv_ + na_ + index
           : kind == kAct ? 2 * nv_ + index
           : kind == kVel ? nv_ + index
                          : index;
  }
  void AdjointDirections(const mjModel* m);
  // the dofs a unit direction's smooth vectors (dqfrc_smooth, dJ_force, dqderiv_qacc) can be
  // nonzero on: an analytic position or velocity direction's island (dofs[0..hi)) or lone tree
  // [lo, hi) (Newton-Euler, springs, dampers and its joint's actuators stay in the tree, its
  // contact rows in the island), else all dofs; w' x over them
  void ReachedDofs(int kind, int index, const int** dofs, int* lo, int* hi) const;
  double ReachedDot(int kind, int index, const double* w, const double* x) const;
  // the reverse modes' product of the current direction's right-hand side with an adjoint, on the
  // dofs and rows the direction reaches (not formed over nv): w' (dqfrc_smooth + dJ' f - dM a)
  // (+ dqderiv_qacc with qderiv), dJ' f from dJ_force or the rows' forces (of the touched
  // islands with touched, else all rows)
  double SmoothRhsDot(const mjModel* m, int kind, int index, const double* w, const double* a,
                      bool qderiv, bool touched) const;
  // mu' r_k + z' P_k of QueueColumn's r_k and P_k (z null: undamped); RowRhs into block_.rhs's
  // first nv entries, kept zero between directions
  double AdjointRhsDot(const mjModel* m, int kind, int index, const double* mu, const double* z);
  // the same for a solver (comfree, lcp, ipm): the integrator's solve with the adjoint once, then
  // per direction its right-hand side's product and, with the solver's reverse mode
  // (Solver::PrepareAdjoint), AdjointDot instead of ForceTangent; false if a direction has no
  // force tangent and cannot be deferred (fallback_ set); *done false, with nothing emitted,
  // where the solver has blocked force tangents but no reverse mode (the caller streams)
  bool SolverAdjointApplies() const;
  bool SolverAdjointDirections(const mjModel* m, bool* done);
  // after the solver's PrepareAdjoint with the integrator's weights w: its weight c of dv_free
  // transposed (pic = sign h M_p^-1 c) and the reverse pass prepared with x = w + pic for the
  // Newton-Euler terms (false: the directions' dqfrc_smooth and dv_free, as before)
  bool PrepareSolverRne(const mjModel* m, const double* w);
  // a position or velocity direction's terms SolverAdjointUnitTangent left out: pic' dv_free's
  // and x' of dqfrc_smooth's Newton-Euler terms
  double SolverRneDot(const mjModel* m, int kind, int index) const;
  // tan_.touched of a unit position or velocity direction of dof: its tree's island (rows and
  // mass move with their trees) and the islands of the trees its dv_free reaches; dof -1: the
  // latter only (a direction that moves no row data and no M)
  void MarkUnitTouched(const Problem& p, int dof);
  // the Jacobians of an Euler / implicit step, of an RK4 step
  bool SingleStage(const mjModel* m);  // (param_.run: the parameter directions instead)
  bool RungeKutta(const mjModel* m);
  // a stage's rate Jacobian G = d(qacc, act_dot)/d(q, v, act, u) into integrator_.rk_stage_jac
  // ((nv+na) x ndir, column-major), and with stage_.sensors the sensor Jacobians' columns
  bool StageJacobian(const mjModel* m);
  // RK4: the nominal state of stage (1-3) into stage_data_; the directions' chains through a stage;
  // the next state's columns
  void RkStageState(const mjModel* m, int stage);
  void RkChainStage(const mjModel* m, int stage, int first, int last);
  void RkNextState(const mjModel* m, int first, int last);
  // the Jacobians of an adaptive step (tsit5, dopri5; adaptive_tangent.cc) as ck_step takes it
  // from d, its accepted internal steps' sizes held fixed (discretize-then-optimize); false if
  // the step does not complete or takes more than AdaptiveIntegrator::kMaxTaken internal steps
  bool Adaptive(const mjModel* m, const mjData* d);
  // one internal step of size step from ad_.y at time t: the stages, the directions' tangents
  // through them, then ad_.y and the directions' state tangents at its end
  bool AdaptiveInternalStep(const mjModel* m, double t, double step, bool first_step, int first,
                            int last);
  // direction kd through stage i of an internal step: its stage state's tangent and its rate's
  // (the last row: its state tangent at the step's end); in a parameter run kd is a slot
  void AdaptiveStageTangent(const mjModel* m, int i, double step, int kd);
  // ck_paramJac's columns through the adaptive step: the parameters in chunks of ndir slots, each
  // chunk along the step's internal steps with each stage's parameter rates G_p
  bool AdaptiveParams(const mjModel* m, const mjData* d, int ntaken);
  // the current stage's rate tangent of each analytic parameter of the chunk into ad_.gp (and its
  // sensor tangent at the step's first stage); false if one has no analytic path here
  bool AdaptiveParamRates(const mjModel* m);
  // the adaptive tangent's arrays, for integrator tsit5 / dopri5 (allocated with the settings)
  void SizeAdaptive(const ckSettings& s);

  // ---- parameter directions (params.cc, directions.cc) ----
  // the copy and buffers of ck_paramJac (Setup)
  bool SetupParams(const mjModel* m, std::string* error);
  // every parameter with an analytic path through the current stage: fn(kParam, k, -1) after
  // tan_.dqacc_int and tan_.dact_dot are set
  template <typename Fn>
  bool ParamDirections(const mjModel* m, int begin, int end, Fn&& fn);
  // parameter k has an analytic column here (its kind has one, and a derived one only without rows)
  bool ParamAnalytic(int k) const;
  // the smooth tangent of parameter k of the current call
  bool ParamTangent(const mjModel* m, int k);
  // column k of DxDp (out: 2nv+na) and of DsDp (the sensor tangent, computed here)
  void EmitParam(int k, const double* out);
  // column k of DsDp, the sensor tangent of the current parameter direction
  void EmitParamSensor(int k);
  // central differences of ck_step in parameter k into its columns
  void ParamFiniteDiff(const mjModel* m, const mjData* d, int k);

  // ---- complementarity-aware VJP and Jacobian (transition.cc) ----
  // out_.contact_modes from sink_.dx (Nimble: open where the adjoint pulls a contact apart)
  // handed to the solver; false if there are no rows or the solver cannot reclassify
  bool AwareModes(const mjModel* m);
  // Nimble's score of sink_'s gx, gu: |dL/dq|^2 + |dL/du|^2 / h
  double AwareScore(const mjModel* m) const;
  // a second VJP with the contacts reclassified by the adjoint; keeps the larger gradient
  void ComplementarityAware(const mjModel* m, const mjData* d);

  // ---- outputs (transition.cc) ----
  // where columns go: Jacobians (nullable) and / or the products of a VJP
  struct Sink {
    mjtNum *A = nullptr, *B = nullptr, *C = nullptr, *D = nullptr;
    const mjtNum *dx = nullptr, *ds = nullptr;
    mjtNum *gx = nullptr, *gu = nullptr;
    bool WantsState() const { return A || C || gx; }
    bool WantsCtrl() const { return B || D || gu; }
  };
  // the analytic path into sink_: 0, or 1 if it does not apply (reason in fallback_)
  int Run(const mjModel* m, const mjData* d);
  // a direction whose force tangent failed (fallback_ NO_TANGENT): its column col left to
  // differences if defer_columns_ allows (true), else false
  bool DeferColumn(int col);
  // after a Run that left columns to differences (nfd_): those columns into sink_
  int DeferredColumns(const mjModel* m, const mjData* d);
  // column col of [A B] (state tangent out, 2nv+na) and of [C D] (sensor tangent ds)
  void EmitState(int col, const double* out) override;
  // the same for a column out whose rows are zero outside the dofs [lo, hi) (rows lo..hi of dq+
  // and of dv+, and dact+), without the elastic correction or an adjoint (not read elsewhere)
  void EmitStateSpan(int col, const double* out, int lo, int hi);
  void EmitSensor(int col, const double* ds) override;
  // the sink writes the Jacobians A, B, C, D (each nullable), zeroed, and nothing else
  void SinkTo(mjtNum* A, mjtNum* B, mjtNum* C, mjtNum* D);
  // the sink's Jacobians to zero (EmitColumn writes nonzeros only)
  void ZeroSink();
  // column col (n rows) of [X U] (nullable), and its product with adjoint (n, nullable) into
  // sink_'s gx or gu
  void EmitColumn(int col, const double* x, int n, mjtNum* X, mjtNum* U, const mjtNum* adjoint);
  // finite differences into sink_, each step by Step (ck_step on stage_data_ and the shadow handle)
  void FiniteDiffSink(const mjModel* m, const mjData* d, double eps, int centered);
  void Step(const mjModel* m, int skipstage, int skipsensor, double* next, double* sensor) override;

  // scratch handle and data, owned
  ckHandle* shadow_ = nullptr;    // steps and solves for the derivative
  mjData* stage_data_ = nullptr;  // nominal stage
  mjData* pass_data_ = nullptr;   // perturbation passes
  Extractor extractor_;           // contact rows and "mujoco" problems
  ProblemStorage storage_;        // problem of the "mujoco" solver
  SoftTangent soft_;              // derivative of MuJoCo's solver
  ckSettings settings_{};
  const ckHandle* owner_ = nullptr;  // the owning handle (anchors, adaptive controller)
  const AdaptiveIntegrator::Controller* controller_ = nullptr;  // see set_controller

  // sizes
  int nq_ = 0, nv_ = 0, na_ = 0, nu_ = 0, nM_ = 0, ns_ = 0;

  // the nominal stage, the flags of a call
  StageState stage_;
  bool apply_modes_ = false;  // stages hand out_.contact_modes to the solver after solving
  bool complementarity_applied_ = false;  // see complementarity_applied()
  bool keep_modes_ = false;  // the solver keeps its modes' tangent without Nimble's score
  int fallback_ = ckFALLBACK_NONE;
  // a direction without a force tangent (one island ipm cannot center) leaves its column to
  // differences (out_.fd_col) instead of the whole Jacobian: single-stage Jacobians and VJPs
  bool defer_columns_ = false;
  int nfd_ = 0;  // columns left to differences by the last Run
  Sink sink_;
  double sink_check_ = 0;     // sum of x * 0 over the values EmitColumn wrote (NaN: not finite)
  bool refused_ = false;      // a step of the differences was refused (refused())
  bool sink_direct_ = false;  // a write into the sink bypassed EmitColumn since ZeroSink
  IslandReach reach_;         // the islands a direction perturbs (tan_.touched)
  // SolveTangent's integrator solve: the dofs [acc_lo_, acc_hi_) of the trees it solved (the span
  // of tan_.dqacc_int), until the column reads it (acc_known_)
  int acc_lo_ = 0, acc_hi_ = 0;
  bool acc_known_ = false;
  const double* solver_c_ = nullptr;  // the solver's weight of dv_free (PrepareSolverRne)
  double solver_sign_ = 0;            // and its sign
  // the contacts whose tan_.ddisp rows the last AnchorTangent wrote (the others' are zero): an
  // island's, -1 none, -2 any (a new stage)
  int ddisp_island_ = -2;
  bool anchor_cross_stale_ = true;  // tan_.anchor_cross belongs to an earlier stage
  // tan_.anchor_cross of the stage's anchored contacts (AnchorTangent)
  void AnchorCrosses();

  // the parts' workspaces, carved from arena_ (workspace.h)
  Arena arena_;
  NominalStage nominal_;
  DirectionTangent tan_;
  TreeBlocks trees_;
  IntegratorTangent integrator_;
  BlockWork block_;
  FdReference fd_;
  OutputWork out_;
  ElasticCorrection elastic_;
  Scratch scratch_;
  SmoothTangent smooth_{extractor_, nominal_, tan_, trees_, integrator_, scratch_, stage_};
  std::unique_ptr<RolloutTape> tape_;  // ck_rolloutGrad's steps (made by its first call)

  // the adaptive step's tangent (SizeAdaptive): nk = 2nv+na, ndir = nk + nu, 7 stages at most
  struct AdaptiveWork {
    std::vector<double> y;      // state at the internal step's start            (nq+nv+na)
    std::vector<double> k;      // stage rates, rotations corrected             (7 nk)
    std::vector<double> omega;  // the current stage's uncorrected rate         (nk)
    std::vector<double> dx;     // the stage's combination sum_j a_ij k_j       (nk)
    std::vector<double> dy;     // per direction: state tangent at the start    (ndir nk)
    std::vector<double> dk;     // per direction: stage rates' tangents         (ndir 6 nk)
    std::vector<double> ddx;    // a direction's combination tangent            (nk)
    std::vector<double> dX;     // a direction's stage state tangent            (nk)
    std::vector<double> gp;     // per parameter slot: the stage's rate tangent (ndir (nv+na))
    int param_begin = -1;       // a parameter run: slot s is parameter param_begin + s
  } ad_;

  // ck_paramJac: the call's parameters and outputs, the model copy they move, buffers
  struct ParamCall {
    bool run = false;                 // SingleStage takes the parameter directions
    const ckParam* params = nullptr;  // (np)
    int np = 0;
    mjtNum *dx = nullptr, *ds = nullptr;  // DxDp, DsDp (nullable)
    int* how = nullptr;                   // (nullable)
    const mjModel* base = nullptr;        // the caller's model
  } param_;
  mjModel* param_model_ = nullptr;    // copy of the caller's model, one field moved at a time
  ConstCache const_cache_;            // mj_setConst of param_model_ per moved value
  std::vector<double> param_next_;    // next states of the two sides (2 (nq + nv + na))
  std::vector<double> param_sensor_;  // sensors of the two sides (2 nsensordata)
  std::vector<double> param_dq_;      // tangent position difference (nv)
};

// ck_paramJac has an analytic path for parameters of this kind (the others: central differences)
bool ParamKindAnalytic(int kind);

// the first of n values that MuJoCo's checks would call bad (NaN, inf, beyond mjMAXVAL), or -1
int FirstBad(const mjtNum* x, int n);

// a caller's parameter list: 0, or -1 with ck_lastError naming the first bad parameter (np < 1,
// params NULL, a kind, id or index out of range)
int CheckParams(ckHandle* ck, const mjModel* m, const ckParam* params, int np, const char* fn);

// the checks of every derivative entry point: 0, or -1 (bad arguments, another model, no
// derivative workspace) or -2 (a state MuJoCo would reset) with ck_lastError saying why
int CheckTransition(ckHandle* ck, const mjModel* m, const mjData* d, const char* fn);

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_DERIVATIVE_H_
