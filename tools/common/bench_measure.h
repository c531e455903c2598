// Copyright 2026 The contactkit developers.
//
// Measurements shared by ck-bench and any other benchmark tool: loading generated MJCF, the
// penetration statistics of a dense drop, step time against contact count on stacked-primitive
// scenes, and the time of transition Jacobians (ours and MuJoCo's finite differences). Every
// function runs MuJoCo's solver and ours from the same initial state in this one process.
#ifndef CONTACTKIT_TOOLS_COMMON_BENCH_MEASURE_H_
#define CONTACTKIT_TOOLS_COMMON_BENCH_MEASURE_H_

#include <mujoco/mujoco.h>

#include <string>
#include <vector>

#include "contactkit/contactkit.h"

namespace contactkit::tools {

// load an MJCF string with ck_loadXML (through a temporary file); null with a message on error
mjModel* LoadXMLString(const std::string& xml, std::string* error);

// penetration depth of every detected contact at every step of a run (ComFree Fig. 3b)
struct PenetrationStats {
  double mean = 0, std = 0;  // over all (step, contact) samples, in m; a contact's depth is -dist
  double max = 0;            // deepest sample (m)
  long samples = 0;          // (step, contact) pairs
  double step_time = 0;      // mean wall time per step (s)
  bool diverged = false;     // see DivergenceCheck; statistics then cover the steps before
  std::string why;           // why it diverged
  std::string error;
};
PenetrationStats MeasurePenetration(mjModel* m, const ckSettings& settings, int steps,
                                    bool progress);

// one point of step time against contact count (ComFree Fig. 7)
struct ScalingPoint {
  int nbody = 0;          // bodies in the scene
  double contacts = 0;    // mean contacts per step over the measured steps
  double step_time = 0;   // mean wall time of a full step (collision, solve, integration; s)
  double solve_time = 0;  // mean wall time of the constraint stage (s)
  bool diverged = false;  // see DivergenceCheck
  std::string why;        // why it diverged
  std::string error;
};
// run an nx x ny x nlayers stacked-primitives scene (tools/common/gen_stack.h) for warmup + steps
// steps at h = 0.002 and average over the last steps; MuJoCo's own solver runs CG (its dense Newton
// is impractical beyond a few hundred bodies on MuJoCo 2.2.2)
ScalingPoint MeasureStackScaling(int nx, int ny, int nlayers, const ckSettings& settings,
                                 int warmup, int steps);

// step and stage times of ck_step from one saved state (ComFree Fig. 7 on settled piles)
struct StageTiming {
  int steps = 0;             // timed steps
  double contacts = 0;       // mean contacts over the timed steps
  double step_ms = 0;        // median wall time of ck_step
  double constraint_ms = 0;  // median time of the constraint stage (extraction, solve, write-back)
  double collision_ms = 0;   // median time of MuJoCo's mj_collision in the step
  double assembly_ms = 0;    // median time of MuJoCo's mj_makeConstraint (rows, Jacobian)
  bool ok = true;            // no warning and no divergence (DivergenceCheck) throughout
  std::string error;         // ck_make's message, or why the run diverged
};
// from d's state: one untimed ck_step under settings, back to that state, then `steps` timed
// steps in a row (at least 3; no more once `budget` seconds are spent), with m->opt.solver =
// mj_solver meanwhile. m and d's state are restored. MuJoCo's stage timers need mjcb_time set.
StageTiming MeasureStages(mjModel* m, mjData* d, const ckSettings& settings, int mj_solver,
                          int steps, double budget);

// median of x (0 if empty); least-squares slope of log(y) against log(x) (NaN below 2 points)
double Median(std::vector<double> x);
double LogSlope(const std::vector<double>& x, const std::vector<double>& y);

// time of one transition Jacobian (A and B of a step) at the states of a short run
struct JacobianTiming {
  double mujoco_fd = 0;   // MuJoCo's mjd_transitionFD (s per Jacobian; centered or forward)
  double ours = -1;       // contactkit analytic (s; -1: not available in this build)
  double ours_fd = -1;    // contactkit finite differences of ck_step (s; -1: not available)
  double contacts = 0;    // mean contacts at the sampled states
  bool diverged = false;  // the run diverged (DivergenceCheck): no timings
  std::string why;        // why it diverged
  std::string error;
};
// from the model's initial state (keyframe 0 if any) run `warmup` steps under settings, then
// `states` more and time the Jacobians at each; centered: central differences (Nimble Table II)
JacobianTiming MeasureJacobians(mjModel* m, const ckSettings& settings, int warmup, int states,
                                bool centered);

}  // namespace contactkit::tools

#endif  // CONTACTKIT_TOOLS_COMMON_BENCH_MEASURE_H_
