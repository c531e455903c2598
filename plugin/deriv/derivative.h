// Copyright 2026 The contactkit developers.
//
// Jacobians of ck_step by the implicit function theorem (ck_transitionJac, ck_transitionVJP) and
// by finite differences through ck_step (ck_transitionFD).
//
// A step is split into
//   (a) smooth data as functions of (q, v, act, ctrl): mass matrix, smooth forces, activation
//       rates, constraint rows, gaps, reference accelerations, regularizers. Controls and
//       activations by differences of mj_fwdActuation alone. Velocities and positions
//       analytically where the model allows it (derivative_analytic.cc: Newton-Euler tangents
//       along cdof, joint springs and dampers, contact rows from cdof with collision re-run on
//       rigidly moved geom poses; the "mujoco" pass-through without sensors or the implicit
//       integrator), otherwise velocities from MuJoCo's analytic qDeriv and J and positions by
//       one forward-difference pass per direction through MuJoCo's position and velocity stages
//       (kinematics, inertia, tendons, transmission, RNE, passive forces; collision re-run only
//       for the contact pairs present, contact rows assembled here from cdof); never the
//       constraint solve;
//   (b) the solver's map from that data to forces: Solver::ForceTangent, or for the "mujoco"
//       pass-through the derivative of MuJoCo's soft-constraint optimality conditions
//       (solvers/mujoco/soft_tangent.h), each reusing one factorization for every direction;
//   (c) the integrator, differentiated exactly: Euler with implicit joint damping, implicit
//       (M - h qDeriv), and RK4 by chaining four stage Jacobians.
// Everything runs on scratch mjData and a shadow handle owned here, so the caller's mjData and
// handle stay untouched (the shadow handle takes the caller's committed contact anchors before
// every evaluation); all memory is allocated by Setup (ck_make).
#ifndef CONTACTKIT_PLUGIN_DERIVATIVE_H_
#define CONTACTKIT_PLUGIN_DERIVATIVE_H_

#include <mujoco/mujoco.h>

#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/step/anchor.h"
#include "plugin/step/extract.h"
#include "plugin/step/handle.h"
#include "solvers/common/problem.h"
#include "solvers/common/solver.h"
#include "solvers/mujoco/soft_tangent.h"

namespace contactkit {

class Derivative {
 public:
  Derivative() = default;
  ~Derivative();
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

  // a geom pair of the nominal contact list and how to re-run its collision
  struct Pair {
    int g1 = 0, g2 = 0;  // geoms in MuJoCo's order (type of g1 <= type of g2)
    int first = 0;       // first contact in the nominal list
    int count = 0;       // contacts of the pair in the nominal list
    double margin = 0;   // margin passed to the collision function
    int body1 = 0, body2 = 0;
  };

  // ---- stages (derivative.cc) ----
  // the shadow handle as the caller's handle stands: cold solver (reproducible), the caller's
  // committed contact anchors
  void ResetShadow();
  // copy the integration state of src into dst
  void LoadState(const mjModel* m, const mjData* src, mjData* dst);
  // nominal forward at the state in d0_ and everything the tangents reuse; false if the
  // analytic path does not cover this state (reason in fallback_)
  bool PrepareStage(const mjModel* m, bool rk4);
  // the problem of the "mujoco" solver: MuJoCo's rows with the solver's own mass matrix
  bool PrepareMujocoProblem(const mjModel* m);
  // integrator matrix of this stage (M, M + h D, M - h qDeriv), factored, and aint_
  bool PrepareIntegrator(const mjModel* m, bool rk4);
  // contact pairs of the nominal contact list
  void PreparePairs(const mjModel* m);
  // contacts MuJoCo included in the constraint problem
  int CountIncluded(const mjData* d) const;
  // x = M_int^-1 x, x = M_int^-T x
  void IntegratorSolve(double* x) const;
  void IntegratorSolveT(double* x) const;

  // ---- part (a): smooth data (derivative_smooth.cc) ----
  // tangents of the smooth data and rows along a unit direction
  void UnitTangent(const mjModel* m, int kind, int index);
  // controls and activations: differences of mj_fwdActuation on d0_
  void ActuationTangent(const mjModel* m, int kind, int index);
  void RestoreActuation();
  // qderiv_'s affine actuator terms made d actuator force / d qvel: zero where clamped
  void CorrectActuatorVel(const mjModel* m, const mjData* d);
  // actuator i's force is linear in its control across the nudge e (tangent: gain moment)
  bool LinearInCtrl(const mjModel* m, int i, double e) const;
  // velocities: qDeriv and J
  void VelocityTangent(const mjModel* m, int index);
  // positions: a pass on d1_ at q0 (+) eps dq (and v0 + eps dv, nullable)
  void PositionPass(const mjModel* m, const double* dq, const double* dv, double eps);
  // qDeriv aint of the polynomial velocity terms at the position stage in d (out: nv)
  void SmoothVelocityProduct(const mjModel* m, mjData* d, double* out);
  // re-run the collision of the pairs the pass (step eps) moved into con1_; false if a pair's
  // contact count changed or its patch switched points (those contacts are held, PatchTangent)
  bool Recollide(const mjModel* m, mjData* d, double eps);
  // the collision of pair k on the geometry in d, moved by step along a unit direction, into
  // out (con1_ or con2_), marking bit in con_sides_ of each contact found again; false if its
  // contact count changed or a contact jumped (those keep the nominal geometry in out)
  bool RecollidePair(const mjModel* m, mjData* d, int k, double step, int bit, mjContact* out);
  // match the n contacts in collide_buf_ with pair k's nominal ones into out (as RecollidePair);
  // jump: largest distance a contact point may move from its nominal one
  bool MatchPair(const mjModel* m, int k, int n, double jump, int bit, mjContact* out);
  // contact rows at the geometry of the pass
  void ContactTangent(const mjModel* m, mjData* d, const double* dq, double eps);
  // rows before the contacts (constant Jacobian, or MuJoCo's rows at the perturbed state)
  void PlainRowTangent(const mjModel* m, const double* dq, double eps);
  bool PlainRowVaries(const mjModel* m, int i) const;
  // impedance, regularizer and reference acceleration tangents from dpos_, dvel_; the rows'
  // regularizer slopes, J by columns, the contacts' impedance slopes and position terms
  void RowTangents();
  // dvel_ = dJ_ v (with_dJ) + J dv (nullable dv), then RowTangents
  void RowVelocityTangents(bool with_dJ, const double* dv);
  void PrepareRowSlopes();
  // sensor tangents of the current direction (after SolveTangent)
  void SensorTangent(const mjModel* m, int kind, double* ds);

  // ---- parts (b), (c) (derivative.cc) ----
  // ddisp_: tangent of the anchored contacts' displacements along the current direction (anchors
  // held: their material points move with the bodies, the contact frame turns)
  void AnchorTangent(const mjModel* m);
  // force tangent and integrator acceleration tangent dacc_; false if the solver has none
  bool SolveTangent(const mjModel* m);
  // tangent of q (+) h w for tangents dq, dw of q, w: out (nv); maps (18 njnt) from
  // IntegrateMaps of w: R(h w) and the right Jacobian of each ball and free joint's rotation
  void IntegrateMaps(const mjModel* m, const double* w, double h, double* maps) const;
  void IntegrateTangent(const mjModel* m, const double* maps, double h, const double* dq,
                        const double* dw, double* out) const;
  // activation update act + h rate (clamped to actrange) along dact, drate
  void ActNext(const mjModel* m, const double* act, const double* rate, const double* dact,
               const double* drate, double h, double* out) const;
  // every unit direction of the current stage: fn(kind, index, column of [A B]) after dacc_,
  // dactdot_ and the unit direction are set
  template <typename Fn>
  bool Directions(const mjModel* m, bool state, bool ctrl, Fn&& fn);
  // "mujoco": queue the current direction's right-hand side in a block; solve a block
  void QueueColumn(const mjModel* m, int slot, int kind, int index, int col);
  template <typename Fn>
  void FlushColumns(const mjModel* m, int nslot, Fn&& fn);
  // the Jacobians of an Euler / implicit step, of an RK4 step
  bool SingleStage(const mjModel* m);
  bool RungeKutta(const mjModel* m);

  // ---- analytic position tangents (derivative_analytic.cc) ----
  // the model is in their scope; nominal Newton-Euler quantities of the stage (sets analytic_)
  bool AnalyticScope(const mjModel* m) const;
  void DecideAnalytic(const mjModel* m);
  void PrepareAnalytic(const mjModel* m);
  // d(M a + bias)/dq_k into dtau and, if dtau2 is not null, d(M (a - aint))/dq_k into dtau2
  void RneTangent(const mjModel* m, int k, double* dtau, double* dtau2);
  // d M / dq_k (nM)
  void MassTangent(const mjModel* m, int k, double* dM);
  // d bias / dv_k into dtau (nv)
  void RneVelTangent(const mjModel* m, int k, double* dtau);
  // the tangents of the smooth data (and rows) along position / velocity dof k
  void AnalyticPosition(const mjModel* m, int k);
  // point, frame and distance tangents of contact i from the collisions nudged by step
  // (con1_ forward, con2_ backward, as con_sides_ marks); false if neither found it again
  bool GeometryTangent(int i, double step, double dp[3], double dF[9], double* ddist) const;
  // the same for a contact of a patch that switched points on every nudge, with its point held
  // and its bodies' rigid motions along the direction
  void PatchTangent(int i, double step, const Twist& t1, const Twist& t2, double dp[3],
                    double dF[9], double* ddist) const;
  void AnalyticVelocity(const mjModel* m, int k);

  // ---- contacts from distance (derivative_cfd.cc) ----
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

  // ---- elastic bounce correction (derivative_elastic.cc) ----
  static constexpr int kMaxBounce = 16;  // bouncing contacts corrected per step
  // contacts of the stage-0 problem approaching at the start of the step
  void ElasticPrepare(const mjModel* m);
  // of those, the ones separating at v+
  void ElasticSelect(const double* vnext);
  // accumulate <W_i, X0> from a column of dq+/dq or dq+/dv; then apply the correction
  void ElasticColumn(int col, const double* out);
  void ElasticFinish(double h);

  // ---- complementarity-aware VJP (derivative.cc) ----
  // a second VJP with the contacts reclassified by the adjoint; keeps the larger gradient
  void ComplementarityAware(const mjModel* m, const mjData* d);

  // ---- outputs ----
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
  void EmitState(int col, const double* out);
  void EmitSensor(int col, const double* ds);

  // ---- finite differences (derivative_fd.cc) ----
  void FiniteDiffSink(const mjModel* m, const mjData* d, double eps, int centered);
  void FdStep(const mjModel* m, int skipstage, int skipsensor, double* next, double* sensor);

  // workspace
  ckHandle* shadow_ = nullptr;  // steps and solves for the derivative, owned
  mjData* d0_ = nullptr;        // nominal stage
  mjData* d1_ = nullptr;        // perturbation passes
  Extractor extractor_;         // contact rows and "mujoco" problems
  ProblemStorage storage_;      // problem of the "mujoco" solver
  SoftTangent soft_;            // derivative of MuJoCo's solver
  ckSettings settings_{};
  mjModel* cfd_model_ = nullptr;  // contacts from distance: margins + w_c (null: off)
  double cfd_width_ = 0;          // w_c
  double cfd_solimp_[5] = {};     // (d_c, d_0, width, midpoint, power)
  bool cfd_ = false;              // the current stage solves the contacts-from-distance problem
  std::vector<double> cfd_r_;     // distance of each problem contact beyond its margin (ncon)
  std::vector<double> con_slope_, con_position_, con_dposition_;  // PrepareRowSlopes (ncon)
  std::vector<double> row_dR_;                                    // dR / dimp       (rows)
  std::vector<int> jcol_adr_, jcol_row_;  // J by columns: start (nv + 1), row of each (nnz)
  std::vector<double> jcol_val_;          // value of each                             (nnz)
  std::vector<signed char> modes_;        // contact classification of the second VJP       (ncon)
  bool apply_modes_ = false;              // stages hand modes_ to the solver after solving
  bool complementarity_applied_ = false;  // see complementarity_applied()
  std::vector<double> gsave_;             // the first VJP                            (2nv+na+nu)
  int elastic_n_ = 0;                     // bouncing contacts of this step
  std::vector<double> elastic_J_;         // their normal rows, dense             (kMaxBounce x nv)
  std::vector<double> elastic_norm2_, elastic_sigma_;  // |J_i|^2, sigma_i     (kMaxBounce)
  std::vector<double> elastic_s_;  // <W_i, X0> of dq+/dq and dq+/dv     (2 kMaxBounce)
  int fallback_ = ckFALLBACK_NONE;
  Sink sink_;
  int mode_changes_ = 0;  // pairs whose contacts changed (count, or a jump) within a nudge
  bool sensors_ = false;  // sensor Jacobians wanted in this stage

  // sizes
  int nq_ = 0, nv_ = 0, na_ = 0, nu_ = 0, nM_ = 0, ns_ = 0;

  // nominal stage
  const Problem* p_ = nullptr;  // solved problem (shadow's or storage_'s)
  Solution* sol_ = nullptr;     // its solution
  Solver* solver_ = nullptr;    // its solver (null: "mujoco", soft_)
  bool has_rows_ = false;       // the stage has constraint rows
  bool plain_varying_ = false;  // some row before the contacts has a q-dependent Jacobian
  std::vector<double> q0_, v0_, act0_, u0_;  // state and controls  (nq, nv, na, nu)
  std::vector<double> M0_;                   // mass matrix                                   (nM)
  std::vector<double> fs0_;                  // qfrc_smooth                                   (nv)
  std::vector<double> actdot0_;              // act_dot                                       (na)
  std::vector<double> qc0_;                  // qfrc_constraint                               (nv)
  std::vector<double> aint_;                 // acceleration the integrator uses              (nv)
  std::vector<double> mu_;       // MuJoCo's regularized cone friction per contact (ncon)
  std::vector<double> efc_jar_;  // J qacc - aref of MuJoCo's rows (3.x)        (nefc cap)
  std::vector<int> efc_state_;   // MuJoCo's row states                           (nefc cap)
  std::vector<int> tree_begin_, tree_size_, tree_adr_;  // dense per-tree blocks     (ntree)
  std::vector<double> mdense_;      // mass matrix in dense per-tree blocks (blocked path)
  std::vector<double> qderiv_;      // qDeriv, per-tree blocks, column-major
  std::vector<double> qderiv_rne_;  // implicit: RNE part of qDeriv at velocity aint
  std::vector<double> qderiv_a0_;   // implicit: qDeriv aint of the polynomial terms (nv)
  TreeMass mint_;                   // M or M + h D, factored (Euler, RK4)
  std::vector<double> mint_M_, mint_LD_, mint_Dinv_;  // its arrays (nM, nM, nv)
  std::vector<double> lu_;                            // M - h qDeriv per tree, LU (implicit)
  std::vector<int> piv_;   // its pivots                                    (nv)
  bool implicit_ = false;  // the integrator matrix is lu_
  bool damped_ = false;    // the integrator matrix is M + h D (Euler's implicit damping)
  bool batch_ = false;     // directions go through blocks (QueueColumn)
  bool analytic_ = false;  // position tangents from derivative_analytic.cc

  // analytic position tangents
  bool subtree_contiguous_ = false;                         // every subtree is a body range
  std::vector<int> subtree_last_;                           // last body of each subtree (nbody)
  std::vector<int> dof_act_count_, dof_act_adr_, dof_act_;  // actuators of each dof (nv, nv, nu)
  std::vector<char> dof_act_len_, dof_act_vel_;  // their forces depend on length / velocity (nv)
  std::vector<double> rne_cacc_, rne_cfrc_;      // accelerations, subtree forces (2 x 6 nbody)
  std::vector<double> rne_icvel_;                // I cvel (6 nbody)
  std::vector<int> carry_start_;     // first dof of its body that moving dof k carries    (nv)
  std::vector<int> later_start_;     // first dof of its body whose cdof_dot sees qvel k   (nv)
  std::vector<int> subtree_dofend_;  // one past the last dof of each subtree            (nbody)
  std::vector<double> rne_vpre_;     // cvel before each dof within its body             (6 nv)
  std::vector<double> rne_vn_, rne_vnpre_;  // the same for v+: per body (6 nbody), dof (6 nv)
  std::vector<double> rne_apre_;        // cacc of both passes before each dof              (12 nv)
  std::vector<double> rne_sc_;          // S x cdof of the chain above a direction (6 nv)
  std::vector<double> rne_p_, rne_q_;   // crb cdof and Bsub' cdof of each dof            (6 nv)
  std::vector<double> rne_bsub_;        // B of the subtree of each body (see PrepareAnalytic)
  std::vector<mjContact> collide_buf_;  // collision output (mjMAXCONPAIR)

  // blocks of directions ("mujoco")
  std::vector<double> blk_r_;       // right-hand sides, then dv+, row-major      (nv x kBlock)
  std::vector<double> blk_p_;       // dM (a - aint) + h dqDeriv aint per column   (kBlock x nv)
  std::vector<double> blk_y_;       // M_E^-1 (P - D x), row-major (nv x kBlock)
  std::vector<double> blk_actdot_;  // dact_dot per column                         (kBlock x na)
  std::vector<int> blk_kind_, blk_index_, blk_col_;  //                           (kBlock)

  // contact pairs of the nominal list
  int npair_ = 0;
  std::vector<Pair> pairs_;             // (ncon cap)
  std::vector<int> con_pair_;           // pair of each mjContact        (ncon cap)
  std::vector<mjContact> con0_, con1_;  // nominal, perturbed geometry   (ncon cap)
  std::vector<mjContact> con2_;         // geometry perturbed backwards  (ncon cap)
  std::vector<char> con_sides_;   // nudges that found a contact again: 1 forward, 2 back (ncon cap)
  std::vector<char> body_moved_;  // bodies moved by the pass      (nbody)
  std::vector<int> eq_type_;      // equality type                 (neq)
  std::vector<double> eq_torquescale_;  // weld rotation-to-translation  (neq)

  // tangent of the current direction
  std::vector<double> dq_, dv_, dact_, du_;  // input tangent    (nv, nv, na, nu)
  std::vector<double> dM_, dfs_, dactdot_;   // (nM, nv, na)
  bool has_dM_ = false, has_dJ_ = false, has_dpos_ = false, has_dvel_ = false;
  bool has_dJf_ = false;           // dJv_, dJf_ hold dJ v+ and dJ' f (analytic position tangents)
  std::vector<double> dJv_, dJf_;  // dJ v+ (rows), dJ' f (nv)
  std::vector<signed char> con_sign_;  // side of each contact row nonzero: -1 body 1, 1 body 2
  std::vector<char> con_written_;      // dJ_ of the contact holds a direction's values (ncon)
  std::vector<char> chain_mark_;       // scratch (nv)
  std::vector<double> dJ_;             // (nnz)
  std::vector<double> dpos_, dvel_, dimp_, dR_, daref_, df_;  // (rows)
  std::vector<double> ddisp_;   // anchor displacement tangent, contact tangent rows     (rows)
  std::vector<double> dframe_;  // tangent of each contact's tangent axes (position directions,
                                // frame rows 1, 2)                                 (6 ncon cap)
  const Anchors* anchor_source_ = nullptr;               // the owning handle's anchors
  std::vector<double> dvfree_, dqc_, dacc_, dqderiv_a_;  // (nv)
  std::vector<double> moment_;  // a dense actuator moment row                                (nv)
  std::vector<double> tmp_, tmp2_, vplus_;  // (nv + na, nv + na, nv)
  std::vector<double> dup_, wpos_;          // position correction's tangent, scratch       (nv, nv)
  std::vector<double> maps_pos_;            // IntegrateMaps of the position correction (18 njnt)
  bool has_dup_ = false;                    // dup_ holds the current direction's
  std::vector<double>
      maps_;  // IntegrateMaps of the current stage (18 njnt)                    // (nv)
  std::vector<int> cols_;      // contact row columns           (nv)
  std::vector<double> jrows_;  // contact rows                  (6 nv)

  // nominal actuation (restored after the control and activation differences)
  std::vector<double> act_force0_, qfrc_act0_;  // (nu, nv)

  // RK4
  std::vector<double> G_;    // stage Jacobian of (qacc, act_dot), column-major ((nv+na) ndir)
  std::vector<double> K_;    // per direction: tangent of the next stage state (ndx ndir)
  std::vector<double> S_;    // per direction: sum b_j (dv_j, dF_j)            (ndx ndir)
  std::vector<double> rkX_;  // nominal stage states                   (4 (nq+nv+na))
  std::vector<double> rkF_;  // nominal stage rates (qacc, act_dot)    (4 (nv+na))

  // finite differences and output columns
  std::vector<double> fd_next_, fd_plus_, fd_minus_;    // (nq+nv+na)
  std::vector<double> fd_sens_, fd_splus_, fd_sminus_;  // (nsensordata)
  std::vector<double> fd_col_;                          // (max(2nv+na, ns))
  std::vector<double> out_col_, sens_col_;              // (2nv+na), (ns)
};

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_DERIVATIVE_H_
