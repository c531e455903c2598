// Copyright 2026 The contactkit developers.
//
// contactkit: alternative constraint solvers and derivatives for MuJoCo.
//
// The C API follows MuJoCo's conventions: functions take (handle, model, data, ...) with outputs
// last, optional outputs may be NULL, and errors are reported through an (error, error_sz) buffer
// and a NULL or negative return value. A handle owns all workspace for one mjData; create one
// handle per mjData (and per thread), exactly as with mjData.
//
// NULL pointers, one rule for every function: a pointer documented as optional ("may be NULL",
// "nullable") may be NULL; any other NULL pointer makes the function do nothing but report it:
// an int function returns -1, a pointer function NULL, with a message in its error buffer (or, for
// functions of a handle, in ck_lastError) where it has one; a void function returns without
// effect. error may always be NULL (error_sz is then ignored). Nothing ever dereferences NULL.
//
// A handle is made for one model: every function that takes the handle and a model (ck_forward,
// ck_step, ck_setSettings, ck_transition*) compares the model with the one of ck_make by a
// fingerprint of everything the workspace was sized from (sizes, kinematic tree, joint, geom,
// equality, tendon, actuator and sensor structure, limits and friction loss) and refuses any
// other: ck_forward / ck_step then leave d untouched and raise a MuJoCo warning once per handle,
// the others return -1; ck_lastError says why. Parameters that do not change the workspace
// (masses, lengths, gains, options) may be edited between calls.
//
// One handle is for one thread at a time. A call that finds the handle in use by another thread
// (ck_forward, ck_step, ck_setSettings, ck_reset, ck_transition*) does nothing but raise a MuJoCo
// warning and return -1 where it returns a value; it leaves ck_lastError to the other thread.
#ifndef CONTACTKIT_CONTACTKIT_H_
#define CONTACTKIT_CONTACTKIT_H_

#include <mujoco/mujoco.h>

#include "contactkit/settings.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define CKAPI __declspec(dllexport)
#else
#define CKAPI __attribute__((visibility("default")))
#endif

#define ckVERSION "0.1.0"

// why ck_transitionJac / ck_transitionVJP used finite differences (they then return 1)
typedef enum ckFallback_ {
  ckFALLBACK_NONE = 0,        // analytic, or no Jacobian (the call failed)
  ckFALLBACK_ROWS,            // more constraint rows than the handle's capacity
  ckFALLBACK_SOFT_HESSIAN,    // the Hessian of MuJoCo's solver is not positive definite
  ckFALLBACK_IMPLICIT,        // M - h qDeriv of the implicit integrator is singular
  ckFALLBACK_NO_TANGENT,      // the solver has no analytic force tangent for this problem
  ckFALLBACK_RK4_POSITION,    // lcp's position correction (split impulse) under RK4
  ckFALLBACK_NOSLIP,          // noslip iterations
  ckFALLBACK_FLUID_IMPLICIT,  // fluid forces under the implicit integrators
  ckFALLBACK_JDOTV,           // MuJoCo 3.7+'s Jdot v in connect and weld rows' reference
  ckFALLBACK_ADAPTIVE,        // an adaptive step (tsit5, dopri5) that fails or takes > 1024 steps
  ckNFALLBACK
} ckFallback;

// statistics of the last ck_forward / ck_step (the last RK4 stage for RK4)
typedef struct ckStats_ {
  int solver;              // ckSolver that produced the forces
  int status;              // ckStatus of the last solve
  int iterations;          // solver iterations; "mujoco": the slowest island's on MuJoCo 3.x
                           // (max of solver_niter), the one solve's solver_iter on 2.x
  int nrow;                // constraint rows in contact frames (contacts: 1, 3, 4 or 6 rows)
  int ncon;                // contacts included in the problem
  int nisland;             // independent groups of interacting trees
  mjtNum residual;         // final residual (solver-specific norm)
  mjtNum kappa;            // final complementarity / central-path value (ipm, lcp)
  mjtNum condition;        // conditioning estimate of the last factorization (0: unknown)
  mjtNum max_penetration;  // largest penetration depth among included contacts (m, >= 0)
  mjtNum solve_time;       // wall time of the constraint stage in seconds
} ckStats;

// counters of a handle since ck_make (ck_reset keeps them)
typedef struct ckTotals_ {
  long long solves;       // constraint solves (one per ck_forward and ck_step; RK4: per stage)
  long long inexact;      // of those, the ones whose status was not ckSTATUS_SOLVED
  long long guess_hits;   // lcp: solves whose active-set guess was accepted on every island
  long long guess_tries;  // lcp: solves where a guess was tried
  int nwarning;           // warnings the handle has raised
} ckTotals;

// how an adaptive ck_step ended
typedef enum ckAdaptStatus_ {
  ckADAPT_OK = 0,     // the step reached its end
  ckADAPT_MAX_STEPS,  // max_steps internal steps were not enough: the state is left at the start
  ckADAPT_MIN_STEP,   // the controller asked for a step below min_step: the state is left at the
                      // start
} ckAdaptStatus;

// the internal steps of the last ck_step (integrator tsit5 or dopri5; all zero with the model's
// own integrator)
typedef struct ckStepInfo_ {
  int integrator;    // ckIntegrator of the step
  int status;        // ckAdaptStatus
  int accepted;      // internal steps accepted
  int rejected;      // internal steps rejected (each costs its stages too)
  mjtNum min_step;   // smallest accepted internal step (s)
  mjtNum max_step;   // largest accepted internal step (s)
  mjtNum error;      // scaled error of the last accepted internal step (<= 1)
  mjtNum next_step;  // the controller's proposal, where the next ck_step starts (s)
} ckStepInfo;

// what the solver of the last forward pass reports beyond ckStats; the fields of other solvers
// are zero
typedef struct ckSolverInfo_ {
  int solver;              // ckSolver these fields describe
  int ipm_retries;         // ipm: island solves retried (central start, then softer contact)
  int ipm_lifts;           // ipm: blocked steps after which velocity cones were lifted inside
  int ipm_factorizations;  // ipm: LU factorizations
  int ipm_sym_fallbacks;   // ipm: factorizations redone without the friction coupling
  int ipm_warm_islands;    // ipm: islands of a re-solve started from the first solve
  int ipm_rechecks;        // ipm: re-solves with gaps re-measured at the step's end
  int lcp_pivots;          // lcp: principal pivots, Lemke pivots and Dantzig events
  int lcp_guess_tried;     // lcp: a previous classification was checked on some island
  int lcp_guess_hit;       // lcp: ... and accepted on every island
  int lcp_budget_spent;    // lcp: islands whose work budget (max_solves, max_work) ran out
  int comfree_facets;      // comfree: contact facets
  int comfree_active;      // comfree: facets with a positive force
  int comfree_capped;      // comfree: contacts and rows whose gain relax_limit scaled down
  int ipm_holds;           // ipm: islands re-solved with their recovery held (their answer added
                           // energy: conflicting limits and contacts undone at once)
  int ipm_dissipated;      // ipm: ... whose held answer still did, scaled to its least energy
  int ipm_prox_solved;     // ipm: islands the proximal retry solved (path following stalled)
} ckSolverInfo;

// opaque handle that owns the workspace of one mjData
typedef struct ckHandle_ ckHandle;

//---------------------------------- settings ------------------------------------------------------

// Set default settings: solver "mujoco" and every solver's documented defaults.
CKAPI void ck_defaultSettings(ckSettings* settings);

// Set one setting from text, as in an MJCF plugin config or <custom> field ("kappa_tol", "1e-8").
// Returns 0 on success (the error buffer is then empty), -1 with a message naming the key, the
// value and what is allowed.
CKAPI int ck_setSetting(ckSettings* settings, const char* key, const char* value, char* error,
                        int error_sz);

// Write the value of one setting as text into buf. Returns 0, or -1 for an unknown key.
CKAPI int ck_getSetting(const ckSettings* settings, const char* key, char* buf, int buf_sz);

// Read settings from a model on top of the defaults: the contactkit.solver plugin instance's
// config (MuJoCo 3.x; on 2.x ck_loadXML stores the tag as <custom> text fields) and <custom> text
// or numeric fields "contactkit:<key>". Returns 1 if the model names any setting, 0 if it names
// none (settings are then the defaults), -1 on bad input (bad value, unknown key, a key given
// twice, more than one instance) with a message naming the key and where it was given.
CKAPI int ck_settingsFromModel(const mjModel* m, ckSettings* settings, char* error, int error_sz);

// Validate settings (ranges, solver name). Returns 0 or -1 with a message.
CKAPI int ck_validateSettings(const ckSettings* settings, char* error, int error_sz);

// Number of setting keys, and the name / one-line documentation of key i (NULL if out of range).
CKAPI int ck_numSettingKeys(void);
CKAPI const char* ck_settingKey(int i);
CKAPI const char* ck_settingDoc(int i);

// Solver name ("mujoco", "ipm", "comfree", "lcp") and id from name (-1 if unknown).
CKAPI const char* ck_solverName(int solver);
CKAPI int ck_solverId(const char* name);

// 1 if the solver is implemented in this build, 0 otherwise.
CKAPI int ck_solverAvailable(int solver);

//---------------------------------- loading -------------------------------------------------------

// Load an MJCF that may carry the contactkit plugin tag
//   <extension><plugin plugin="contactkit.solver"><instance name="...">
//     <config key="solver" value="ipm"/> ... </instance></plugin></extension>
// on every MuJoCo version, and check the model's settings (ck_settingsFromModel). On MuJoCo 3.x
// the plugin is registered (also when the library is loaded, so mj_loadXML accepts the tag too)
// and the tag stays a plugin instance. On 2.x, which has no plugins, the tag is checked, removed,
// and its keys are stored as <custom> text fields "contactkit:<key>"; files without a tag go to
// mj_loadXML unchanged. vfs may be NULL. Returns NULL with a message naming the problem, and
// where possible its file and line, on error.
CKAPI mjModel* ck_loadXML(const char* filename, const mjVFS* vfs, char* error, int error_sz);

// Load an MJCF held in a string, as ck_loadXML does for a file (through a temporary file in
// $TMPDIR or /tmp; relative asset paths resolve from there). Returns NULL with a message on error,
// naming the place as "<xml string>:line".
CKAPI mjModel* ck_loadXMLString(const char* xml, char* error, int error_sz);

//---------------------------------- handle --------------------------------------------------------

// Why the last call of a function taking this handle (ck_forward, ck_step, ck_setSettings,
// ck_transition*) failed or was refused, or why ck_transitionJac / ck_transitionVJP used finite
// differences (return 1); "" after a success. Never NULL ("" for a NULL handle). Valid until the
// next call with the handle.
CKAPI const char* ck_lastError(const ckHandle* ck);

// The ckFallback of the last ck_transitionJac / ck_transitionVJP with this handle: why it used
// finite differences (return 1); ckFALLBACK_NONE after an analytic result, a failure or for a
// NULL handle.
CKAPI int ck_lastFallback(const ckHandle* ck);

// One line saying what a ckFallback means ("" for ckFALLBACK_NONE, NULL out of range).
CKAPI const char* ck_fallbackText(int reason);

// Create a handle for model m. settings may be NULL: the handle then takes its settings from the
// model (ck_settingsFromModel), and a model without any gets the "mujoco" pass-through.
// All workspace for stepping is allocated here; the derivative workspace (setting "derivatives")
// is made by the first derivative call on the handle and kept, so a handle that only simulates
// never holds it. Returns NULL with a message on error.
CKAPI ckHandle* ck_make(const mjModel* m, const ckSettings* settings, char* error, int error_sz);

// Free a handle (NULL is allowed).
CKAPI void ck_free(ckHandle* ck);

// 1 if m is the model ck was made for (the fingerprint every entry point compares), 0 if it is
// another model or either is NULL. Changes nothing (ck_lastError included).
CKAPI int ck_sameModel(const ckHandle* ck, const mjModel* m);

// Change settings between steps (solver switch included); allocates the new solver's workspace
// (also lcp's when max_island_rows changes, which sizes it) and frees the derivative workspace
// when "derivatives" is turned off (turned on, the next derivative call makes it). m may be NULL
// unless the change needs the model: turning ipm's "gap_recheck" on, or changing "cfd_width" to
// a positive value once the derivative workspace is made; if given, it must be the handle's
// model. Returns 0 (the error buffer is then empty), or -1 with a message, in which case the
// handle keeps its previous settings.
CKAPI int ck_setSettings(ckHandle* ck, const mjModel* m, const ckSettings* settings, char* error,
                         int error_sz);

// Forget what the handle carries from one step to the next (solver warm starts, comfree's contact
// anchors). Call it after mj_resetData or any other jump of the state that the handle steps.
CKAPI void ck_reset(ckHandle* ck);

// Copy the handle's current settings into settings (every value is the one in effect).
CKAPI void ck_getSettings(const ckHandle* ck, ckSettings* settings);

// Statistics of the last forward pass (NULL for a NULL handle).
CKAPI const ckStats* ck_stats(const ckHandle* ck);

// Counters since ck_make (NULL for a NULL handle).
CKAPI const ckTotals* ck_totals(const ckHandle* ck);

// Solver-specific statistics of the last forward pass into info (all zero before the first one,
// and for the "mujoco" solver, which reports through mjData). Returns 0, or -1 for NULL arguments.
CKAPI int ck_solverInfo(const ckHandle* ck, ckSolverInfo* info);

// The internal steps of the last ck_step with an adaptive integrator (NULL for a NULL handle).
CKAPI const ckStepInfo* ck_stepInfo(const ckHandle* ck);

//---------------------------------- pipeline ------------------------------------------------------

// Drop-in replacement for mj_forward: MuJoCo's stages with the selected constraint solver.
CKAPI void ck_forward(ckHandle* ck, const mjModel* m, mjData* d);

// Same as ck_forward but skip stages (mjSTAGE_POS, mjSTAGE_VEL) and sensors, as mj_forwardSkip.
CKAPI void ck_forwardSkip(ckHandle* ck, const mjModel* m, mjData* d, int skipstage, int skipsensor);

// Drop-in replacement for mj_step: checks, ck_forward, then the model's integrator (Euler with
// implicit joint damping, implicit, or RK4 whose four stages all use the selected solver).
CKAPI void ck_step(ckHandle* ck, const mjModel* m, mjData* d);

//---------------------------------- derivatives ---------------------------------------------------

// Jacobians of the step ck_step would take from d, with the handle's solver and the model's
// integrator, in mjd_transitionFD's layout and meaning:
//   A: (2nv+na) x (2nv+na)   d(next state) / d(state),   state = [tangent dqpos, qvel, act]
//   B: (2nv+na) x nu         d(next state) / d(ctrl)
//   C: nsensordata x (2nv+na)  d(sensordata) / d(state)  (sensors of this step's forward pass)
//   D: nsensordata x nu        d(sensordata) / d(ctrl)
// all row-major and nullable. Computed by the implicit function theorem on the solver's
// optimality conditions, reusing one factorization for every direction; the smooth dynamics
// analytically (Newton-Euler tangents, MuJoCo's qDeriv) where the model allows it, otherwise by
// forward differences of MuJoCo's position stages, never of the constraint solve. Settings
// "cfd_width" and "elastic_correction" change the Jacobian (not the step). d is left exactly as
// it was; the first derivative call on a handle makes its derivative workspace (see ck_make), later
// calls allocate nothing. Returns 0 if the analytic path was taken, 1 if finite differences
// through ck_step were used instead (forward, eps 1e-6: a solver without a force tangent, noslip
// iterations, more rows than the handle holds, a singular Hessian, an active connect or weld
// equality on MuJoCo 3.7+, whose reference holds Jdot v, fluid forces under the implicit
// integrators),
// -1 on bad arguments, a model other than the handle's, a handle without derivatives (setting
// "derivatives" = 0) or a derivative workspace that cannot be made, -2 for a state MuJoCo would
// reset (NaN, inf or beyond 1e10 in qpos, qvel, act, ctrl, qacc_warmstart, qfrc_applied,
// xfrc_applied or mocap; nothing written) or one whose step leaves that range, or where the
// implicit integrator's M - h qDeriv cannot be factored at a state the differences step (a pivot
// below 1e-15, where MuJoCo would stop the process; outputs then not meaningful);
// ck_lastError says why. With comfree's contact anchors (setting "anchor") the step
// starts from the handle's anchors and the Jacobian holds them fixed (the state does not include
// them); the handle's anchors are left as they were. Solver ipm: the Jacobian is NOT the derivative
// of the step taken. It is taken at the central-path point kappa_grad (default 1e-4), a smoothed
// gradient of softened contact, while the step is solved to kappa_tol (default 1e-10); with the
// defaults it lies 10-100% away from finite differences of ck_step on states with contact. For the
// exact derivative of the step set kappa_grad = kappa_tol: each solve then ends on the central
// point at kappa_tol (a few extra Newton steps; the step is that point) and that point is
// differentiated, which agrees with ck_transitionFD. An island whose central point ipm cannot reach
// (with kappa_grad = kappa_tol) gives its force tangent along each direction that touches it by a
// forward difference (step 1e-6) of that island's own solve replayed on its moved data, the rest
// of the column analytic, and the call returns 0. Where that does not apply (a smoothed
// kappa_grad, setting gap_recheck, contacts from distance) the columns of those directions are
// forward differences of ck_step, the others analytic: the call returns 1, ck_lastFallback says
// ckFALLBACK_NO_TANGENT and ck_lastError how many columns.
CKAPI int ck_transitionJac(ckHandle* ck, const mjModel* m, const mjData* d, mjtNum* A, mjtNum* B,
                           mjtNum* C, mjtNum* D);

// Complementarity-aware Jacobians (Nimble section IV-D) for optimizers that use A and B, such as
// iLQR and DDP, which then pass the cost-to-go gradient as dx. dx (2nv+na, nullable): the adjoint
// of the next state, the direction the caller's loss pulls it. With solver "lcp", each contact is
// classified by the sign of g_c = J_c M^-1 dL/dv+ (dL/dv+ from dx through the integrator): a
// clamped contact that dx would pull apart (g_c < 0) is treated as separating (no impulse in any
// of its rows, its friction included), a separating one that dx pushes together (g_c >= 0) as
// touching and sticking, and the Jacobians are those of that classification (the step itself is
// unchanged) when its product with dx is larger than the solve's own (|dx' A|^2 over the
// positions + |dx' B|^2 / h, Nimble's choice), else ck_transitionJac's. The result is the
// Jacobian whose product with dx is ck_transitionVJP(dx) with setting "complementarity_aware"
// on: dx' [A B] = [gx' gu'] (whatever that setting is on this handle). So for a box resting on
// the floor and a dx asking it to rise, B's column of an upward force is the free-flight one.
// With solver "comfree" (a closed form without a clamped set) a contact that dx pulls apart keeps
// its force fixed in the tangent, with the same choice by score. With "ipm" its impulse is held
// fixed (a contact the step left open that dx pushes together has its normal velocity clamped),
// with "mujoco" its rows leave the soft tangent's active set; for these two the classification of
// dx is kept whenever it changes a contact, without the score (their solved tangents tie velocity
// to depth, a 1/h term that the score would always prefer). dx NULL, the RK4 integrator and the
// adaptive integrators (as the VJP): exactly ck_transitionJac. Costs two to three ck_transitionJac
// evaluations when there is contact, one otherwise. Returns as ck_transitionJac, and -1 for a dx
// that is not finite.
CKAPI int ck_transitionJacAware(ckHandle* ck, const mjModel* m, const mjData* d, const mjtNum* dx,
                                mjtNum* A, mjtNum* B, mjtNum* C, mjtNum* D);

// Vector-Jacobian product of the same step, without forming the Jacobians:
//   gx = A' dx + C' ds   (2nv+na),   gu = B' dx + D' ds   (nu)
// dx (2nv+na): adjoint of the next state; ds (nsensordata): adjoint of the sensors; either may
// be NULL (zero); gx, gu nullable outputs. Setting "complementarity_aware" selects Nimble's
// complementarity-aware gradient (every solver's contact modes, as ck_transitionJacAware).
// Returns as ck_transitionJac.
CKAPI int ck_transitionVJP(ckHandle* ck, const mjModel* m, const mjData* d, const mjtNum* dx,
                           const mjtNum* ds, mjtNum* gx, mjtNum* gu);

// Finite-difference Jacobians through ck_step with mjd_transitionFD's conventions (perturbation
// order, qpos perturbed in the tangent space, controls kept inside ctrlrange, warm start
// restored, forward or centered differences with step eps), on a scratch copy of d. The
// reference for ck_transitionJac. Outputs as ck_transitionJac. Returns 0, or -1 / -2 as
// ck_transitionJac (and -1 for eps not > 0).
CKAPI int ck_transitionFD(ckHandle* ck, const mjModel* m, const mjData* d, mjtNum eps, int centered,
                          mjtNum* A, mjtNum* B, mjtNum* C, mjtNum* D);

// The loss of step t (0-based) of a ck_rolloutGrad rollout. d holds the state after the step and
// the sensors of the step (as mj_step leaves them). Writes the loss's gradient with respect to
// that state into dx (2nv+na, mjd_transitionFD's tangent layout, zeroed before the call) and
// with respect to the sensors into ds (nsensordata, zeroed), and returns the loss's value.
typedef mjtNum (*ckStepLoss)(void* user, int t, const mjModel* m, const mjData* d, mjtNum* dx,
                             mjtNum* ds);

// Reverse mode over an open-loop rollout. From d's state, nstep ck_steps with controls ctrl
// (nstep x nu; NULL: d->ctrl held); the loss is L = sum over t of loss(t). One backward sweep of
// vector-Jacobian products (ck_transitionVJP's, no Jacobian formed) gives
//   gx0 (2nv+na): dL/dx0, in mjd_transitionFD's tangent layout    gu (nstep x nu): dL/du_t
// Each step's state is kept (qpos, qvel, act, ctrl, warm start, time: memory O(nstep x state),
// grown by the first call of a length and then reused); the backward sweep re-solves each step
// from its kept state. d ends where nstep ck_steps leave it. value, gx0, gu are nullable.
// Refused for comfree with anchors (their history is not differentiated). Returns 0; 1 if some
// step used finite differences (ck_lastError names the first); -1 on bad input or a loss that is
// not finite; -2 if a step diverged (MuJoCo reset the state) or a gradient is not finite.
CKAPI int ck_rolloutGrad(ckHandle* ck, const mjModel* m, mjData* d, int nstep, const mjtNum* ctrl,
                         ckStepLoss loss, void* user, mjtNum* value, mjtNum* gx0, mjtNum* gu);

//---------------------------------- batched rollouts ----------------------------------------------

// Roll out nroll open-loop trajectories of nstep steps with ck_step, as MuJoCo's Python
// mujoco.rollout does with mj_step (MuJoCo 3.x; returns -1 on 2.x, which has no mj_getState):
//   state0      nroll x nstate                 initial states, nstate = mj_stateSize(m,
//                                              mjSTATE_FULLPHYSICS)
//   warmstart0  nroll x nv                     initial qacc_warmstart (nullable: zero)
//   control     nroll x nstep x ncontrol       inputs of control_spec (a subset of
//                                              mjSTATE_USER) before each step (nullable)
//   state       nroll x nstep x nstate         output: the state after each step (nullable)
//   sensordata  nroll x nstep x nsensordata    output: sensors after each step (nullable)
// Inputs outside control_spec take the model's defaults. handles[k] and datas[k] (k < nthread,
// each handle made for m) serve thread k; rollouts are handed to nthread threads one at a time,
// and each starts with ck_reset, so results do not depend on nthread. A rollout whose data raises
// a MuJoCo warning stops stepping and repeats its last outputs. Returns 0, or -1 with a message.
CKAPI int ck_rollout(const mjModel* m, ckHandle** handles, mjData** datas, int nthread, int nroll,
                     int nstep, int control_spec, const mjtNum* state0, const mjtNum* warmstart0,
                     const mjtNum* control, mjtNum* state, mjtNum* sensordata, char* error,
                     int error_sz);

#ifdef __cplusplus
}  // extern "C"
#endif

// parameter Jacobians (ck_paramJac)
#include "contactkit/params.h"

#endif  // CONTACTKIT_CONTACTKIT_H_
