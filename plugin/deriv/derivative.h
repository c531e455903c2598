// Copyright 2026 The contactkit developers.
//
// The transition Jacobians of ck_step (ck_transitionJac, ck_transitionVJP) by the implicit
// function theorem, and their finite-difference reference (ck_transitionFD). The parts, each with
// its workspace (workspace.h) carved from one arena at ck_make:
//   smooth tangent (smooth_tangent.cc, smooth_analytic.cc, smooth_cfd.cc): mass matrix, smooth
//     forces, activation rates and constraint rows along a direction, analytically where the
//     model allows it, else by forward differences of MuJoCo's position stages;
//   force tangent (stage.cc): the nominal stage and the solver's ForceTangent (or, for "mujoco",
//     the derivative of MuJoCo's soft-constraint conditions), one factorization for every
//     direction;
//   integrator tangent (integrator_tangent.cc): Euler, implicit and RK4 (directions.cc chains
//     four stages);
//   finite-difference reference (fd_reference.cc);
//   transition entry points (transition.cc, directions.cc, elastic.cc): the C API, the loop
//     over unit directions, the output columns.
// Everything runs on scratch mjData and a shadow handle owned here: the caller's mjData and handle
// stay untouched.
#ifndef CONTACTKIT_PLUGIN_DERIVATIVE_H_
#define CONTACTKIT_PLUGIN_DERIVATIVE_H_

#include <mujoco/mujoco.h>

#include <string>

#include "contactkit/contactkit.h"
#include "plugin/deriv/elastic.h"
#include "plugin/deriv/fd_reference.h"
#include "plugin/deriv/integrator_tangent.h"
#include "plugin/deriv/workspace.h"
#include "plugin/step/anchor.h"
#include "plugin/step/extract.h"
#include "plugin/step/handle.h"
#include "solvers/common/problem.h"
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

  // ck_transitionVJP: gx = A' dx + C' ds, gu = B' dx + D' ds; return as Jacobian
  int Vjp(const mjModel* m, const mjData* d, const mjtNum* dx, const mjtNum* ds, mjtNum* gx,
          mjtNum* gu);

  // ck_transitionFD: mjd_transitionFD's differences, stepping with ck_step
  void FiniteDiff(const mjModel* m, const mjData* d, mjtNum eps, int centered, mjtNum* A, mjtNum* B,
                  mjtNum* C, mjtNum* D);

  // the owning handle's contact anchors: every evaluation starts the shadow handle from them
  void set_anchor_source(const Anchors* anchors) { anchor_source_ = anchors; }

  // why the last Jacobian or VJP fell back to finite differences (ckFallback; NONE if it did not)
  int fallback() const { return fallback_; }

  // MuJoCo's resets of the scratch mjData so far (a bad state reached within the evaluation)
  int ScratchResets() const { return Resets(d0_) + Resets(d1_); }

  // the last VJP asked for complementarity-aware gradients and the solver could reclassify
  bool complementarity_applied() const { return complementarity_applied_; }

 private:
  // kinds of unit directions, in the order they are processed
  enum Kind : int { kCtrl = 0, kAct, kVel, kPos };

  // rigid motion of a body per unit of a direction: angular w, linear v at point o
  struct Twist {
    double w[3], v[3], o[3];
    // motion of the body's point x: w x (x - o) + v
    void PointMotion(const double* x, double* u) const {
      const double r[3] = {x[0] - o[0], x[1] - o[1], x[2] - o[2]};
      u[0] = w[1] * r[2] - w[2] * r[1] + v[0];
      u[1] = w[2] * r[0] - w[0] * r[2] + v[1];
      u[2] = w[0] * r[1] - w[1] * r[0] + v[2];
    }
  };

  // ---- the nominal stage and the force tangent (stage.cc) ----
  // the shadow handle as the caller's handle stands: cold solver (reproducible), the caller's
  // committed contact anchors
  void ResetShadow();
  // nominal forward at the state in d0_ and everything the tangents reuse; false if the
  // analytic path does not cover this state (reason in fallback_)
  bool PrepareStage(const mjModel* m, bool rk4);
  // out (+)= sign qDeriv of src in the dense per-tree blocks (ntreeblock), zeroed first if clear
  void DenseQDeriv(const mjModel* m, const mjData* src, double* out, double sign, bool clear) const;
  // d1_ at the nominal positions (the perturbation passes' base); implicit: qDeriv's products
  void PreparePasses(const mjModel* m);
  // the problem of the "mujoco" solver: MuJoCo's rows with the solver's own mass matrix
  bool PrepareMujocoProblem(const mjModel* m);
  // contact pairs of the nominal contact list
  void PreparePairs(const mjModel* m);
  // contacts MuJoCo included in the constraint problem
  int CountIncluded(const mjData* d) const;
  // tan_.ddisp: tangent of the anchored contacts' displacements along the current direction
  // (anchors held: their material points move with the bodies, the contact frame turns)
  void AnchorTangent(const mjModel* m);
  // force tangent and integrator acceleration tangent tan_.dqacc_int; false if the solver has
  // none
  bool SolveTangent(const mjModel* m);

  // ---- directions (directions.cc) ----
  // every unit direction of the current stage: fn(kind, index, column of [A B]) after
  // tan_.dqacc_int, tan_.dact_dot and the unit direction are set
  template <typename Fn>
  bool Directions(const mjModel* m, bool state, bool ctrl, Fn&& fn);
  // "mujoco": queue the current direction's right-hand side in a block; solve a block
  void QueueColumn(const mjModel* m, int slot, int kind, int index, int col);
  template <typename Fn>
  void FlushColumns(const mjModel* m, int nslot, Fn&& fn);
  // the Jacobians of an Euler / implicit step, of an RK4 step
  bool SingleStage(const mjModel* m);
  bool RungeKutta(const mjModel* m);
  // RK4: the nominal state of stage (1-3) into d0_; the directions' chains through a stage;
  // the next state's columns
  void RkStageState(const mjModel* m, int stage);
  void RkChainStage(const mjModel* m, int stage, int first, int last);
  void RkNextState(const mjModel* m, int first, int last);

  // ---- the smooth tangent (smooth_tangent.cc) ----
  // tangents of the smooth data and rows along a unit direction
  void UnitTangent(const mjModel* m, int kind, int index);
  // controls and activations: differences of mj_fwdActuation on d0_
  void ActuationTangent(const mjModel* m, int kind, int index);
  void RestoreActuation();
  // trees_.qderiv's affine actuator terms made d actuator force / d qvel: zero where clamped
  void CorrectActuatorVel(const mjModel* m, const mjData* d);
  // actuator i's force is linear in its control across the nudge e (tangent: gain moment)
  bool LinearInCtrl(const mjModel* m, int i, double e) const;
  // velocities: qDeriv and J
  void VelocityTangent(const mjModel* m, int index);
  // positions: a pass on d1_ at q0 (+) eps dq (and v0 + eps dv, nullable)
  void PositionPass(const mjModel* m, const double* dq, const double* dv, double eps);
  // qDeriv aint of the polynomial velocity terms at the position stage in d (out: nv)
  void SmoothVelocityProduct(const mjModel* m, mjData* d, double* out);
  // re-run the collision of the pairs the pass (step eps) moved into pairs_.forward; false if a
  // pair's contact count changed or its patch switched points (those contacts are held,
  // PatchTangent)
  bool Recollide(const mjModel* m, mjData* d, double eps);
  // the collision of pair k on the geometry in d, moved by step along a unit direction, into
  // out (pairs_.forward or pairs_.backward), marking bit in pairs_.found of each contact found
  // again; false if its contact count changed or a contact jumped (those keep the nominal geometry
  // in out)
  bool RecollidePair(const mjModel* m, mjData* d, int k, double step, int bit, mjContact* out);
  // match the n contacts in pairs_.collide_out with pair k's nominal ones into out (as
  // RecollidePair); jump: largest distance a contact point may move from its nominal one
  bool MatchPair(const mjModel* m, int k, int n, double jump, int bit, mjContact* out);
  // contact rows at the geometry of the pass
  void ContactTangent(const mjModel* m, mjData* d, const double* dq, double eps);
  // rows before the contacts (constant Jacobian, or MuJoCo's rows at the perturbed state)
  void PlainRowTangent(const mjModel* m, const double* dq, double eps);
  bool PlainRowVaries(const mjModel* m, int i) const;
  // impedance, regularizer and reference acceleration tangents from tan_.dpos, tan_.dvel; the rows'
  // regularizer slopes, J by columns, the contacts' impedance slopes and position terms
  void RowTangents();
  // tan_.dvel = tan_.dJ v (with_dJ) + J dv (nullable dv), then RowTangents
  void RowVelocityTangents(bool with_dJ, const double* dv);
  void PrepareRowSlopes();
  // sensor tangents of the current direction (after SolveTangent)
  void SensorTangent(const mjModel* m, int kind, double* ds);

  // ---- analytic position tangents (smooth_analytic.cc) ----
  // the model is in their scope; nominal Newton-Euler quantities of the stage (sets analytic_)
  bool AnalyticScope(const mjModel* m) const;
  void DecideAnalytic(const mjModel* m);
  void PrepareAnalytic(const mjModel* m);
  // contact rows: v+ of each body and before each dof, dJ cleared, the side of each column
  void PrepareAnalyticRows(const mjModel* m);
  // d(M a + bias)/dq_k into dtau and, if dtau2 is not null, d(M (a - aint))/dq_k into dtau2
  void RneTangent(const mjModel* m, int k, double* dtau, double* dtau2);
  // d M / dq_k (nM)
  void MassTangent(const mjModel* m, int k, double* dM);
  // d bias / dv_k into dtau (nv)
  void RneVelTangent(const mjModel* m, int k, double* dtau);
  // the tangents of the smooth data (and rows) along position / velocity dof k
  void AnalyticPosition(const mjModel* m, int k);
  // point, frame and distance tangents of contact i from the collisions nudged by step
  // (pairs_.forward, pairs_.backward, as pairs_.found marks); false if neither
  // found it again
  bool GeometryTangent(int i, double step, double dp[3], double dF[9], double* ddist) const;
  // the same for a contact of a patch that switched points on every nudge, with its point held
  // and its bodies' rigid motions along the direction
  void PatchTangent(int i, double step, const Twist& t1, const Twist& t2, double dp[3],
                    double dF[9], double* ddist) const;
  void AnalyticVelocity(const mjModel* m, int k);
  // the contact pairs dof k's subtree touches, re-collided on geom poses moved rigidly along it
  // forward and backward (into pairs_.forward, pairs_.backward)
  void RecollideRigid(const mjModel* m, int k);
  // contact rows along position dof k: dJ (or, blocked, dJ v, dJ v+ and dJ' f), gaps, frames
  void AnalyticContactRows(const mjModel* m, int k);
  // per side of contact con and row: d rho of the uncarried dofs and d rho - S x* rho of the
  // carried ones, from the nominal contact g0 and its point and frame tangents dp, dF
  void ContactAxisTangents(const mjModel* m, const Contact& con, const mjContact& g0,
                           const double dp[3], const double dF[9], const double* S,
                           double tan[2][2][6][6]) const;

  // ---- contacts from distance (smooth_cfd.cc) ----
  // the model copy with margins enlarged by cfd_width (null: off)
  bool MakeCfdModel(const mjModel* m, const ckSettings& s, std::string* error);
  // impedance continued to distance r >= 0 beyond the margin, and its slope d imp / dr
  double CfdImpedance(const double solimp[5], double r, double* slope) const;
  // softplus position term s(r) = -tau log(1 + exp(-r / tau)) and its slope
  double CfdSoftplus(double r, double* slope) const;
  // the stage's forward pass on the contacts-from-distance problem (d0_)
  void CfdForward(const mjModel* m);
  // MuJoCo's rows of the contacts: margin, impedance, R; then the softplus references
  void CfdAdjustRows(mjData* d);
  void CfdAdjustAref(mjData* d);
  // the same on an extracted problem; records each contact's distance beyond its margin
  void CfdAdjustProblem(const mjModel* m, Problem* p);

  // ---- complementarity-aware VJP (transition.cc) ----
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
  // column col of [A B] (state tangent out, 2nv+na) and of [C D] (sensor tangent ds)
  void EmitState(int col, const double* out) override;
  void EmitSensor(int col, const double* ds) override;
  // finite differences into sink_, each step by Step (ck_step on d0_ and the shadow handle)
  void FiniteDiffSink(const mjModel* m, const mjData* d, double eps, int centered);
  void Step(const mjModel* m, int skipstage, int skipsensor, double* next, double* sensor) override;

  // scratch handle and data, owned
  ckHandle* shadow_ = nullptr;  // steps and solves for the derivative
  mjData* d0_ = nullptr;        // nominal stage
  mjData* d1_ = nullptr;        // perturbation passes
  Extractor extractor_;         // contact rows and "mujoco" problems
  ProblemStorage storage_;      // problem of the "mujoco" solver
  SoftTangent soft_;            // derivative of MuJoCo's solver
  ckSettings settings_{};
  const Anchors* anchor_source_ = nullptr;  // the owning handle's anchors

  // contacts from distance
  mjModel* cfd_model_ = nullptr;  // margins + w_c (null: off)
  double cfd_width_ = 0;          // w_c
  double cfd_solimp_[5] = {};     // (d_c, d_0, width, midpoint, power)
  bool cfd_ = false;              // the current stage solves the contacts-from-distance problem

  // sizes
  int nq_ = 0, nv_ = 0, na_ = 0, nu_ = 0, nM_ = 0, ns_ = 0;

  // the nominal stage's solved problem
  const Problem* problem_ = nullptr;  // the shadow's or storage_'s
  Solution* solution_ = nullptr;      // its solution
  Solver* solver_ = nullptr;          // its solver (null: "mujoco", soft_)
  bool has_rows_ = false;             // the stage has constraint rows
  bool plain_varying_ = false;        // some row before the contacts has a q-dependent Jacobian
  bool batch_ = false;                // directions go through blocks (QueueColumn)
  bool analytic_ = false;             // position tangents from smooth_analytic.cc
  bool sensors_ = false;              // sensor Jacobians wanted in this stage
  bool apply_modes_ = false;          // stages hand out_.contact_modes to the solver after solving
  bool complementarity_applied_ = false;  // see complementarity_applied()
  int mode_changes_ = 0;  // pairs whose contacts changed (count, or a jump) within a nudge
  int fallback_ = ckFALLBACK_NONE;
  Sink sink_;

  // the parts' workspaces, carved from arena_ (workspace.h)
  Arena arena_;
  NominalStage nominal_;
  DirectionTangent tan_;
  RowWork rows_;
  TreeBlocks trees_;
  PairWork pairs_;
  RneWork rne_;
  IntegratorTangent integ_;
  BlockWork block_;
  FdReference fd_;
  OutputWork out_;
  ElasticCorrection elastic_;
  Scratch scratch_;
};

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_DERIVATIVE_H_
