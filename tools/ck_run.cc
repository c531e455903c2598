// Copyright 2026 The contactkit developers.
//
// ck-run: run a model headless under one solver, or under several side by side from the same
// initial state, and print time per step, contacts, penetration, iterations and energy drift.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/compat.h"
#include "tools/common/tool_util.h"

namespace {

using contactkit::tools::Fmt;
using contactkit::tools::Split;

const char kUsage[] =
    "usage: ck-run MODEL [options]\n"
    "\n"
    "MODEL is a path, a bundled model name (e.g. box_sliding, stacked_primitives) or one of\n"
    "MuJoCo's examples (humanoid, humanoid100, 22_humanoids) from the folder in the\n"
    "environment variable CK_MUJOCO_MODELS (default: the build's, " CK_MUJOCO_MODELS
    ").\n"
    "\n"
    "options:\n"
    "  --solver S          solver: mujoco, ipm, comfree, lcp (default: the model's, else mujoco)\n"
    "  --compare A,B,...   run each solver from the same initial state; 'all' = every available\n"
    "  --steps N           steps to run (default 1000)\n"
    "  --timestep H        override the model's timestep (s)\n"
    "  --integrator I      override the integrator: euler, rk4, implicit\n"
    "  --margin M          every geom pair's margin M (m), gaps 0, on every MuJoCo version:\n"
    "                      speculative contacts, seen up to M before touching (raises\n"
    "                      nconmax/njmax to fit)\n"
    "  --key K             start from keyframe K (default: keyframe 0 if the model has one)\n"
    "  --set KEY=VALUE     set a solver setting (repeatable), e.g. --set kappa_tol=1e-6\n"
    "  --csv FILE          write per-step statistics (FILE gets the solver name appended when\n"
    "                      comparing)\n"
    "  --quiet             no progress bar\n"
    "  --list-settings     print every setting key with its default as a Markdown table\n"
    "  --help              this text\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "ck-run: %s\n", msg.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_arg, solver_arg, compare_arg, csv;
  std::vector<std::string> sets;
  contactkit::tools::RunOptions opts;
  int integrator = -1;
  double margin = -1;
  bool quiet = false;

  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ck-run: %s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--solver") {
      solver_arg = value("--solver");
    } else if (a == "--compare") {
      compare_arg = value("--compare");
    } else if (a == "--steps") {
      opts.steps = std::atoi(value("--steps").c_str());
      if (opts.steps <= 0) return Fail("--steps must be a positive integer");
    } else if (a == "--timestep") {
      opts.timestep = std::atof(value("--timestep").c_str());
      if (!(opts.timestep > 0)) return Fail("--timestep must be a positive number of seconds");
    } else if (a == "--margin") {
      margin = std::atof(value("--margin").c_str());
      if (!(margin >= 0)) return Fail("--margin must be a non-negative distance in meters");
    } else if (a == "--integrator") {
      const std::string v = value("--integrator");
      integrator = v == "euler"      ? mjINT_EULER
                   : v == "rk4"      ? mjINT_RK4
                   : v == "implicit" ? mjINT_IMPLICIT
                                     : -2;
      if (integrator == -2)
        return Fail("unknown integrator '" + v + "'; allowed: euler, rk4, implicit");
    } else if (a == "--key") {
      opts.keyframe = std::atoi(value("--key").c_str());
    } else if (a == "--set") {
      sets.push_back(value("--set"));
    } else if (a == "--csv") {
      csv = value("--csv");
    } else if (a == "--quiet") {
      quiet = true;
    } else if (a == "--list-settings") {
      ckSettings defaults;
      ck_defaultSettings(&defaults);
      std::vector<std::vector<std::string>> rows;
      for (int k = 0; k < ck_numSettingKeys(); k++) {
        char value[256];
        ck_getSetting(&defaults, ck_settingKey(k), value, sizeof(value));
        rows.push_back({std::string("`") + ck_settingKey(k) + "`", value, ck_settingDoc(k)});
      }
      std::printf("%s",
                  contactkit::tools::MarkdownTable({"key", "default", "meaning"}, rows).c_str());
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return Fail("unknown option '" + a + "'\n\n" + kUsage);
    } else if (model_arg.empty()) {
      model_arg = a;
    } else {
      return Fail("more than one model given ('" + model_arg + "', '" + a + "')");
    }
  }
  if (model_arg.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  if (!solver_arg.empty() && !compare_arg.empty())
    return Fail("give --solver or --compare, not both");

  std::string err;
  mjModel* m = contactkit::tools::LoadModel(model_arg, &err);
  if (!m) return Fail(err);
  if (integrator >= 0) m->opt.integrator = integrator;
  if (margin >= 0) {
    contactkit::SetPairMargins(m, margin);
    // speculative contacts need room: up to 20 per geom, 6 rows each
    m->nconmax = std::max(m->nconmax, 20 * m->ngeom);
    m->njmax = std::max(m->njmax, 6 * m->nconmax);
  }
  if (opts.keyframe >= m->nkey && opts.keyframe >= 0) {
    return Fail("model has " + std::to_string(m->nkey) + " keyframes; --key " +
                std::to_string(opts.keyframe) + " is out of range");
  }

  // base settings: the model's, then --set
  ckSettings base;
  char cerr[1024] = "";
  if (ck_settingsFromModel(m, &base, cerr, sizeof(cerr)) < 0) return Fail(cerr);
  for (const std::string& kv : sets) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return Fail("--set takes KEY=VALUE, got '" + kv + "'");
    if (ck_setSetting(&base, kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), cerr,
                      sizeof(cerr)) != 0) {
      return Fail(cerr);
    }
  }
  if (ck_validateSettings(&base, cerr, sizeof(cerr)) != 0) return Fail(cerr);

  // solvers to run
  std::vector<int> solvers;
  auto add_solver = [&](const std::string& name) -> bool {
    const int id = ck_solverId(name.c_str());
    if (id < 0) {
      err = "unknown solver '" + name + "'; allowed: mujoco, ipm, comfree, lcp";
      return false;
    }
    if (!ck_solverAvailable(id)) {
      err = "solver '" + name + "' is not implemented in this build yet";
      return false;
    }
    solvers.push_back(id);
    return true;
  };
  if (!compare_arg.empty()) {
    if (compare_arg == "all") {
      for (int s = 0; s < ckNSOLVER; s++) {
        if (ck_solverAvailable(s)) solvers.push_back(s);
      }
    } else {
      for (const std::string& name : Split(compare_arg, ',')) {
        if (!add_solver(name)) return Fail(err);
      }
    }
  } else if (!solver_arg.empty()) {
    if (!add_solver(solver_arg)) return Fail(err);
  } else {
    solvers.push_back(base.solver);
  }

  const double h = opts.timestep > 0 ? opts.timestep : m->opt.timestep;
  const char* integ[] = {"euler", "rk4", "implicit", "implicitfast"};
  std::printf("model %s: nv=%d, timestep %g s, integrator %s, %s cone, %d steps\n\n",
              contactkit::tools::ResolveModel(model_arg).c_str(), static_cast<int>(m->nv), h,
              integ[m->opt.integrator % 4],
              m->opt.cone == mjCONE_ELLIPTIC ? "elliptic" : "pyramidal", opts.steps);

  std::vector<std::vector<std::string>> rows;
  int status = 0;
  for (int s : solvers) {
    ckSettings settings = base;
    settings.solver = s;
    contactkit::tools::RunOptions o = opts;
    o.progress = !quiet && opts.steps >= 200;
    if (!csv.empty()) o.csv = solvers.size() > 1 ? csv + "." + ck_solverName(s) + ".csv" : csv;
    contactkit::tools::RunStats st = contactkit::tools::Run(m, settings, o);
    if (!st.error.empty()) {
      std::fprintf(stderr, "ck-run: %s: %s\n", ck_solverName(s), st.error.c_str());
      status = 1;
      continue;
    }
    rows.push_back({st.solver, Fmt(st.step_time * 1e6, "%.1f"), Fmt(st.mean_contacts, "%.1f"),
                    std::to_string(st.max_contacts), Fmt(st.max_penetration * 1e3, "%.4f"),
                    Fmt(st.mean_iterations, "%.1f"), Fmt(st.median_iterations, "%.0f"),
                    Fmt(st.energy_drift, "%.3g"), std::to_string(st.inexact),
                    st.diverged ? "diverged" : std::to_string(st.warnings)});
    if (st.diverged) status = 1;
  }
  std::printf("%s", contactkit::tools::MarkdownTable(
                        {"solver", "us/step", "contacts", "max contacts", "max penetration (mm)",
                         "iterations (mean)", "iterations (median)", "energy drift (J)",
                         "inexact solves", "warnings"},
                        rows)
                        .c_str());
  mj_deleteModel(m);
  return status;
}
