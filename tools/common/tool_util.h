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

namespace contactkit::tools {

// folder of MuJoCo's example models: $CK_MUJOCO_MODELS, else the build's CK_MUJOCO_MODELS
std::string MujocoModelsDir();

// Resolve a model argument: an existing path, a bundled model name ("box_sliding"), or one of
// MuJoCo's examples by short name ("humanoid", "humanoid100", "22_humanoids").
std::string ResolveModel(const std::string& arg);

// load with ck_loadXML; null with a message on error
mjModel* LoadModel(const std::string& arg, std::string* error);

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
  double energy_drift = 0;       // largest |E(t) - E(0)| over the run (J)
  int warnings = 0;              // MuJoCo warnings raised in mjData
  int inexact = 0;        // steps whose solve ended short of its tolerances (status != SOLVED)
  bool diverged = false;  // state became non-finite or was reset by MuJoCo
  std::string error;      // non-empty if the run could not start
};

// options of a run
struct RunOptions {
  int steps = 1000;
  double timestep = 0;    // 0: model's own
  int keyframe = -1;      // -1: keyframe 0 if the model has one, else the default pose
  bool progress = false;  // show a progress bar on stderr
  std::string csv;        // per-step CSV output (empty: none)
  // called after each step (for tools that record more)
  std::function<void(const mjModel*, const mjData*, const ckHandle*, int)> on_step;
};

// run m from its initial state under settings; m's timestep may be changed by opts
RunStats Run(mjModel* m, const ckSettings& settings, const RunOptions& opts);

// Solver id for a name given on a command line, or -1 with a message that names the allowed
// solvers (unknown name) or the ones this build has (a solver not implemented yet).
int SolverFromName(const std::string& name, std::string* error);

// progress bar on stderr: "label [=====>     ] 45%"
void Progress(const std::string& label, int done, int total);

// a Markdown table
std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows);

// non-empty items of a separated list ("a,b,,c" -> a, b, c)
std::vector<std::string> Split(const std::string& s, char sep);

// number formatting helpers
std::string Fmt(double v, const char* fmt = "%.3g");

}  // namespace contactkit::tools

#endif  // CONTACTKIT_TOOLS_COMMON_TOOL_UTIL_H_
