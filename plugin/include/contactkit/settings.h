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

// interior-point settings
typedef struct ckIpmSettings_ {
  double kappa_tol;       // final complementarity (central-path value) for hard contact
  double residual_tol;    // final residual infinity norm of the optimality conditions
  double kappa_grad;      // central-path value at which gradients are taken; = kappa_tol: the
                          // step ends on the central point at kappa_tol (a few extra Newton
                          // steps) and gradients are the exact derivative of that step
  int max_iter;           // maximum number of predictor-corrector iterations
  int gap_recheck;        // number of re-solves with gaps re-measured at q+ (0: off)
  int soft_equality;      // 1: soften equality rows with their solref/solimp
  double rest_depth;      // depth (m) a resting contact or limit without margin settles at
  double recovery_speed;  // largest speed (m/s) at which a penetration is pushed out per step
} ckIpmSettings;

// complementarity-free settings
typedef struct ckComfreeSettings_ {
  double stiffness;    // k_user: dimensionless stiffness of the impedance update
  double damping;      // d_user: dimensionless damping of the impedance update
  int facets;          // tangential facet directions per contact (4: MuJoCo's pyramid)
  int parallel_min;    // contacts above which the facet loop runs with OpenMP
  double relax_limit;  // largest summed velocity correction of the facets on one tree (0: off)
  int anchor;          // 1 (default): position-level stick from contact anchors kept across
                       // steps; 0: the paper's viscous stick
} ckComfreeSettings;

// LCP settings
typedef struct ckLcpSettings_ {
  double erp;                    // fraction of a penetration or limit violation corrected per step
  int split_impulse;             // 1: corrected by a position projection after the step (adds no
                                 // velocity); 0: by the velocity target (Baumgarte)
  double max_correction;         // largest correction speed (m/s; rad/s for limits)
  double slop;                   // penetration kept by resting contacts and limits (m or rad)
  double restitution;            // normal restitution coefficient sigma
  double restitution_threshold;  // approach speed (m/s) below which no bounce is added
  double cfm;                    // constraint force mixing added to the diagonal of A
  int max_pivots;                // pivots per pivoting run, per island
  int pgs_iter;                  // projected Gauss-Seidel sweeps of the fallback
  int max_solves;                // work budget: factorizations per island per step
  int max_island_rows;           // largest island solved directly (dense workspace size)
} ckLcpSettings;

// derivative settings
typedef struct ckDerivSettings_ {
  int enabled;                // 1: the handle holds the derivative workspace (0: simulation
                              // only, less memory; ck_transition* then return -1)
  double cfd_width;           // contacts-from-distance width w_c in meters (0: off)
  double cfd_solimp[5];       // CFD impedance beyond the margin: (d_c at the width, d_0 at
                              // zero distance (0: the contact's own), width (0: cfd_width),
                              // midpoint, power), MuJoCo's spline from d_0 to d_c
  int elastic_correction;     // 1: Nimble's bounce correction of the position Jacobian
  int complementarity_aware;  // 1: complementarity-aware VJP for the lcp solver
} ckDerivSettings;

// all settings of one handle
typedef struct ckSettings_ {
  int solver;                 // ckSolver
  int warmstart;              // 1: warm-start from the previous step where it helps
  ckIpmSettings ipm;          // solver "ipm"
  ckComfreeSettings comfree;  // solver "comfree"
  ckLcpSettings lcp;          // solver "lcp"
  ckDerivSettings deriv;      // derivative module
} ckSettings;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // CONTACTKIT_SETTINGS_H_
