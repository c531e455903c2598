// Copyright 2026 The contactkit developers.
//
// The robot suite shared by its CI test (tests/robots/robot_suite_test.cc) and its benchmark
// (ck-bench robots): the Menagerie robots and MuJoCo's example models present on this machine,
// each run with a solver at its own timestep or 5x it, from its keyframe or from a drop, with
// held or random controls, measuring divergence, rest drift, penetration and step time, and the
// analytic transition Jacobian against centered finite differences.
#ifndef CONTACTKIT_TOOLS_COMMON_ROBOT_SUITE_H_
#define CONTACTKIT_TOOLS_COMMON_ROBOT_SUITE_H_

#include <mujoco/mujoco.h>

#include <string>
#include <vector>

#include "contactkit/contactkit.h"

namespace contactkit::tools {

// one model of the suite, in the file that loads on this MuJoCo version
struct SuiteModel {
  std::string key;   // short name for tests and CSV ("panda")
  std::string name;  // display name ("Franka Panda")
  std::string path;  // MJCF file
  bool hovers;       // its keyframe's held controls keep it flying (no rest to check there)
  bool rests;        // comes to rest under held controls within the test's 2 s (the humanoid
                     // still rolls, the slider crank and the muscle arm swing freely)
};

// every model of the suite whose file exists: Menagerie robots under menagerie_dir (the original
// files on MuJoCo 3.x, the _mj222 variants on 2.x; the Unitree A1's variant on both, as its
// original lacks two visual meshes here) and MuJoCo's examples under examples_dir that load on
// 2.2.2 and 3.x; the files that are absent are appended to absent
std::vector<SuiteModel> SuiteModels(const std::string& menagerie_dir,
                                    const std::string& examples_dir,
                                    std::vector<std::string>* absent);

// keys of every model of the suite, present or not
std::vector<std::string> SuiteModelKeys();

// where a run starts and what its controls do: keyframe 0 (the default pose without one), or a
// drop of the free bodies from 0.2 m above it (models without a free body have no drop case);
// held controls are the keyframe's (zero without one; motors off for a hovering model's drop)
enum SuiteStart { kStartKeyframe, kStartDrop };
enum SuiteControl { kControlHeld, kControlRandom };
const char* SuiteStartName(SuiteStart s);
const char* SuiteControlName(SuiteControl c);

// one run of one model
struct SuiteCase {
  int solver = ckSOL_MUJOCO;
  int timestep_scale = 1;  // 1 or 5: the model's timestep times this
  SuiteStart start = kStartKeyframe;
  SuiteControl control = kControlHeld;
  double duration = 2;       // simulated time (s)
  double rest_window = 0.5;  // final part of a held-control run over which drift is measured (s)
  bool time_mujoco = false;  // also run mj_step with the same controls and time it
};

// limits of a run: beyond them it has diverged
constexpr double kSuiteMaxQvel = 1e3;         // |qvel| (rad/s or m/s) nothing in the suite reaches
constexpr double kSuiteDropHeight = 0.2;      // m, free bodies raised by this for a drop
constexpr double kSuiteJacobianSettle = 0.2;  // s from the keyframe to the Jacobian's state

// what one run measured
struct SuiteResult {
  bool diverged = false;
  std::string why;                // the first divergence (reset warning, non-finite, |qvel|)
  double max_qvel = 0;            // largest |qvel| over the run
  double max_penetration = 0;     // deepest contact over the run (m)
  double penetration_bound = -1;  // SuitePenetrationBound with held controls, -1 with random
  double rest_drift = -1;       // held controls: largest body displacement in the rest window (m);
                                // -1 when not measured (random controls, hovering, no rest)
  double step_time = 0;         // mean wall time of ck_step (s)
  double mujoco_step_time = 0;  // mean wall time of mj_step on the same case (s; time_mujoco)
  int steps = 0;
  int inexact = 0;    // solves that ended short of their tolerances
  std::string error;  // the run could not start
};

// the suite's bounds (docs/testing.md says where each comes from)
constexpr double kSuiteRestDrift = 1e-3;  // m a body may move in the rest window
// deepest contact a solver may reach with held controls at timestep h (m): the solver's own
// depth plus what a body at 4 m/s moves in a step before its contact is detected; random
// controls (arbitrary torques) are not bounded
double SuitePenetrationBound(int solver, double h);
// relative Frobenius error of A and B against centered differences a solver may reach
double SuiteJacobianBound(int solver);

// what in r breaks the bounds ("" if nothing): divergence, penetration, rest drift
std::string SuiteFailure(const SuiteResult& r);

// true if m has a free joint (a drop case exists)
bool HasFreeBody(const mjModel* m);

// run one case on m (m's timestep is restored afterwards)
SuiteResult RunSuiteCase(mjModel* m, const SuiteModel& model, const SuiteCase& c);

// the analytic Jacobian against centered finite differences of ck_step at one state
struct SuiteJacobian {
  int method = -1;      // ck_transitionJac's return: 0 analytic, 1 finite differences
  double error_A = -1;  // ||A - A_fd||_F / max(||A_fd||_F, 1e-6), per column against the
                        // nearest of the centered and the two one-sided differences
  double error_B = -1;  // same for B (0 when nu = 0)
  int onesided = 0;     // columns of A and B that a one-sided difference matched (kinks)
  int ncon = 0;         // contacts at the state
  std::string error;
};
// at the state after `settle` seconds from the keyframe with held controls, at the model's
// timestep times timestep_scale; MuJoCo's solver runs to (near) exact convergence and ipm takes
// its Jacobian at kappa_grad = kappa_tol (the step's own derivative, not the smoothed one)
SuiteJacobian CheckSuiteJacobian(mjModel* m, int solver, int timestep_scale, double settle);

// MuJoCo's solver tightened to (near) exact convergence, where a Jacobian is compared with
// differences of the step: at its default tolerance Newton's early stop makes the step not smooth
// in the state
void TightenMujoco(mjModel* m);

}  // namespace contactkit::tools

#endif  // CONTACTKIT_TOOLS_COMMON_ROBOT_SUITE_H_
