// Copyright 2026 The contactkit developers.
//
// Iterative LQR with an augmented Lagrangian on the goal (as Dojo's planning, Table III): the
// dynamics are ck_step with a contactkit handle, or mj_step; the Jacobians come from
// ck_transitionJac or from MuJoCo's mjd_transitionFD. And Adam on the same problem with
// ck_rolloutGrad's gradients. Used by ck-bench dojo-planning.
#ifndef CONTACTKIT_TOOLS_COMMON_ILQR_H_
#define CONTACTKIT_TOOLS_COMMON_ILQR_H_

#include <mujoco/mujoco.h>

#include <string>
#include <vector>

#include "contactkit/contactkit.h"

namespace contactkit::tools {

// a trajectory optimization problem on model m: from start, reach goal at the horizon
struct IlqrTask {
  int horizon = 100;                  // steps T
  std::vector<double> goal_qpos;      // (nq)
  std::vector<double> goal_qvel;      // (nv)
  std::vector<double> q;              // stage weight of each tangent state entry (2nv+na)
  std::vector<double> r;              // stage weight of each control (nu)
  std::vector<int> constrained;       // tangent state entries that must reach the goal at T
  int waypoint_step = -1;             // a step with its own weights (-1: none)
  std::vector<double> waypoint_qpos;  // its target (nq)
  std::vector<double> waypoint_q;     // its weights (2nv+na)
  std::vector<double> nominal_ctrl;   // first guess, and the controls the cost is centred on (nu;
                                      // empty: zero): 0.5 r |u - nominal|^2
};

struct IlqrOptions {
  int max_iterations = 200;     // backward/forward passes in all
  int max_outer = 8;            // augmented Lagrangian updates
  double tolerance = 1e-4;      // relative cost decrease that ends an inner loop
  double violation_tol = 3e-3;  // goal violation (max |entry|) that ends the outer loop
  double rho = 10;              // first penalty; x 10 per outer update
};

// where a step's Jacobians come from: ck_transitionJac; MuJoCo's mjd_transitionFD; or
// ck_transitionJacAware with the cost-to-go gradient of the next state as its direction (the
// complementarity-aware Jacobians, computed in the backward pass where that gradient is known)
enum IlqrSource { kIlqrContactkit = 0, kIlqrMujocoFD, kIlqrContactkitAware };

struct IlqrResult {
  double cost = 0;       // stage and terminal cost without the constraint terms
  double violation = 0;  // max |goal entry| at T
  int iterations = 0;    // backward/forward passes
  double seconds = 0, deriv_seconds = 0;
  std::vector<double> history;     // cost after each iteration
  std::vector<double> violations;  // goal violation after each iteration
  std::vector<double> ctrl;        // the plan (T x nu)
  bool diverged = false;           // a rollout reset or blew up
  std::string error;               // why it stopped short
};

// optimize task from d's state; ck null: mj_step dynamics (source must be kIlqrMujocoFD)
IlqrResult RunIlqr(const mjModel* m, const mjData* start, ckHandle* ck, IlqrSource source,
                   const IlqrTask& task, const IlqrOptions& options);

// the same task by Adam on the controls with ck_rolloutGrad's reverse-mode gradient (first
// order, no line search: it crosses flat regions such as a thrust below a resting box's weight);
// step size lr / (1 + iteration / 100) times each control's range, options.max_iterations gradient
// evaluations, the augmented Lagrangian updated every options.max_iterations / options.max_outer of
// them
IlqrResult RunAdam(const mjModel* m, const mjData* start, ckHandle* ck, const IlqrTask& task,
                   const IlqrOptions& options, double lr = 0.02);

}  // namespace contactkit::tools

#endif  // CONTACTKIT_TOOLS_COMMON_ILQR_H_
