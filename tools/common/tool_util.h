// Copyright 2026 The contactkit developers.
//
// Helpers shared by the tools: model lookup, a timed headless run with statistics, progress
// reporting and Markdown tables.
#ifndef CONTACTKIT_TOOLS_COMMON_TOOL_UTIL_H_
#define CONTACTKIT_TOOLS_COMMON_TOOL_UTIL_H_

#include <mujoco/mujoco.h>

#include <functional>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "tools/common/divergence.h"

namespace contactkit::tools {

// folder of MuJoCo's example models: $CK_MUJOCO_MODELS, else the build's CK_MUJOCO_MODELS
std::string MujocoModelsDir();

// folder of MuJoCo Menagerie models: $CK_MENAGERIE (empty if not set)
std::string MenagerieDir();

// folder of the bundled models: <prefix>/share/contactkit/models beside an installed tool, else
// the source tree's mjcf_models
std::string BundledModelsDir();

// Resolve a model argument: an existing path, a bundled model name ("box_sliding"), or one of
// MuJoCo's examples by short name ("humanoid", "humanoid100", "22_humanoids"), or a Menagerie
// model under MenagerieDir() ("unitree_a1/scene"; on MuJoCo 2.x its _mj222 variant if present).
std::string ResolveModel(const std::string& arg);

// load with ck_loadXML; null with a message on error; loaded (nullable) gets the file read
mjModel* LoadModel(const std::string& arg, std::string* error, std::string* loaded = nullptr);

// statistics of one headless run
struct RunStats {
  std::string solver;            // solver name
  int steps = 0;                 // steps taken
  double step_time = 0;          // mean wall time per step (s)
  double mean_contacts = 0;      // mean contacts per step
  int max_contacts = 0;          // most contacts in a step
  double max_penetration = 0;    // deepest penetration over the run (m, >= 0)
  double mean_iterations = 0;    // mean solver iterations per step
  double median_iterations = 0;  // median solver iterations per step
  double energy_drift = 0;       // largest energy gained beyond the work put in (J; EnergyDrift)
  int warnings = 0;              // MuJoCo warnings raised in mjData
  int ck_warnings = 0;           // warnings contactkit raised (ckTotals.nwarning)
  int inexact = 0;        // steps whose solve ended short of its tolerances (status != SOLVED)
  bool diverged = false;  // see DivergenceCheck; the run stops at the step it diverged
  std::string why;        // why it diverged (DivergenceCheck::reason)
  std::string error;      // non-empty if the run could not start
};

// options of a run
struct RunOptions {
  int steps = 1000;
  double timestep = 0;       // 0: model's own
  int keyframe = -1;         // -1: keyframe 0 if the model has one, else the default pose
  bool progress = false;     // show a progress bar on stderr (only if stderr is a terminal)
  DivergenceLimits limits;   // when the run counts as diverged
  int random_controls = -1;  // >= 0: controls uniform in each range ([-1, 1] if unlimited),
                             // drawn anew every 20 ms by mt19937 with this seed (the robot
                             // suite's random case with 12345); -1: the model's
  std::string csv;           // per-step CSV output (empty: none)
  // called after each step (for tools that record more)
  std::function<void(const mjModel*, const mjData*, const ckHandle*, int)> on_step;
};

// Energy drift: the largest energy a run holds beyond its initial energy plus the work put in,
//   max_t [ K(t) + U_g(t) - K(0) - U_g(0) - W(0, t) ],  at least 0,
// with K kinetic energy (bodies and armature), U_g the potential of gravity and W the work of
// actuators, passive forces (springs, damping, fluid, gravity compensation) and qfrc_applied:
// each step's forces as the step leaves them in mjData, times its mean velocity. Contacts,
// friction and damping only take energy out, so a fall that comes to rest adds nothing; energy
// created by the solver or the integrator is drift. K and U_g are evaluated on a scratch mjData.
class EnergyDrift {
 public:
  EnergyDrift() = default;
  EnergyDrift(const EnergyDrift&) = delete;
  EnergyDrift& operator=(const EnergyDrift&) = delete;
  ~EnergyDrift();
  // at the initial state (allocates the scratch data)
  void Start(const mjModel* m, const mjData* d);
  // after each step; v_before is the qvel the step started from (nv)
  void Step(const mjModel* m, const mjData* d, const mjtNum* v_before);
  double current() const { return current_; }  // drift at the state after the last step
  double max() const { return max_; }

 private:
  double Mechanical(const mjModel* m, const mjData* d);  // K + U_g of d's qpos, qvel, mocap
  mjData* scratch_ = nullptr;
  double e0_ = 0, work_ = 0, current_ = 0, max_ = 0;
};

// run m from its initial state under settings; m's timestep may be changed by opts
RunStats Run(mjModel* m, const ckSettings& settings, const RunOptions& opts);

// Solver id for a name given on a command line, or -1 with a message that names the allowed
// solvers (unknown name) or the ones this build has (a solver not implemented yet).
int SolverFromName(const std::string& name, std::string* error);

// progress bar on stderr: "label [=====>     ] 45%", drawn only if stderr is a terminal
void Progress(const std::string& label, int done, int total);

// erase the progress bar's line (if one was drawn)
void ClearProgress();

// a Markdown table
std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows);

// apply --set pairs KEY=VALUE to s in order; false with a message naming the pair or the key and
// what is allowed (ck_setSetting's)
bool ApplySets(const std::vector<std::string>& sets, ckSettings* s, std::string* error);

// non-empty items of a separated list ("a,b,,c" -> a, b, c)
std::vector<std::string> Split(const std::string& s, char sep);

// number formatting helpers
std::string Fmt(double v, const char* fmt = "%.3g");

}  // namespace contactkit::tools

#endif  // CONTACTKIT_TOOLS_COMMON_TOOL_UTIL_H_
