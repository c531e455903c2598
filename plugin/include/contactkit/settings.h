// Copyright 2026 The contactkit developers.
//
// Settings of every contactkit solver and the status of a solve, as plain C types without MuJoCo
// types, so that the solvers in solvers/ (which do not depend on MuJoCo) share them with the C API.
#ifndef CONTACTKIT_SETTINGS_H_
#define CONTACTKIT_SETTINGS_H_

#ifdef __cplusplus
extern "C" {
#endif

// solver selection
typedef enum ckSolver_ {
  ckSOL_MUJOCO = 0,  // MuJoCo's own mj_fwdConstraint (PGS, CG or Newton from mjOption)
  ckSOL_IPM,         // primal-dual interior point NCP with second-order cones (Dojo)
  ckSOL_COMFREE,     // closed-form complementarity-free dual-cone contact (ComFree-Sim)
  ckSOL_LCP,         // boxed LCP with clamping-set stabilization (Nimble)
  ckNSOLVER
} ckSolver;

// outcome of one constraint solve
typedef enum ckStatus_ {
  ckSTATUS_SOLVED = 0,     // converged to the requested tolerances
  ckSTATUS_INACCURATE,     // stopped close to, but not within, the tolerances
  ckSTATUS_MAX_ITER,       // iteration limit reached; best iterate kept
  ckSTATUS_NUMERICAL,      // numerical failure (factorization, non-finite); best iterate kept
  ckSTATUS_INVALID_INPUT,  // non-finite problem data; constraint forces set to zero
  ckNSTATUS
} ckStatus;

// Settings. Each field is the setting key of the same name ("derivatives" for deriv.enabled);
// its meaning, unit, range and default are documented once, in the settings table
// (plugin/config/settings.cc): ck_settingDoc returns that line, and `ck-run --list-settings`
// prints the table as docs/settings.md.

// solver "ipm"
typedef struct ckIpmSettings_ {
  double kappa_tol;
  double residual_tol;
  double kappa_grad;
  int max_iter;
  int gap_recheck;
  int soft_equality;
  double rest_depth;
  double recovery_speed;
  int semismooth;
} ckIpmSettings;

// solver "comfree"
typedef struct ckComfreeSettings_ {
  double stiffness;
  double damping;
  int facets;
  int parallel_min;
  double relax_limit;
  int anchor;
} ckComfreeSettings;

// solver "lcp"
typedef struct ckLcpSettings_ {
  double erp;
  int split_impulse;
  double max_correction;
  double slop;
  double restitution;
  double restitution_threshold;
  double cfm;
  int max_pivots;
  int pgs_iter;
  int max_solves;
  int max_island_rows;
  double max_work;
  int sweep_rows;
  int schur_rows;
  int lemke_warm;
  int match_points;
  int qp_sweep;
} ckLcpSettings;

// integrator of ck_step
typedef enum ckIntegrator_ {
  ckINT_MODEL = 0,  // the model's own opt.integrator (Euler, RK4, implicit, implicitfast)
  ckINT_TSIT5,      // adaptive steps of Tsitouras' 5(4) pair with error control (DiffMJX)
  ckINT_DOPRI5,     // adaptive steps of Dormand and Prince's 5(4) pair
  ckNINTEGRATOR
} ckIntegrator;

// the adaptive integrators (integrator tsit5, dopri5)
typedef struct ckAdaptiveSettings_ {
  double rtol;
  double atol;
  double min_step;
  int max_steps;
  double pcoeff;
  double icoeff;
  double dcoeff;
} ckAdaptiveSettings;

// derivative module
typedef struct ckDerivSettings_ {
  int enabled;  // key "derivatives"
  double cfd_width;
  double cfd_solimp[5];
  int elastic_correction;
  int complementarity_aware;
} ckDerivSettings;

// all settings of one handle
typedef struct ckSettings_ {
  int solver;  // ckSolver
  int warmstart;
  ckIpmSettings ipm;
  ckComfreeSettings comfree;
  ckLcpSettings lcp;
  ckDerivSettings deriv;
  int integrator;  // ckIntegrator
  ckAdaptiveSettings adaptive;
} ckSettings;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // CONTACTKIT_SETTINGS_H_
