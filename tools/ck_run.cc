// Copyright 2026 The contactkit developers.
//
// ck-run: run a model headless under one solver, or under several side by side from the same
// initial state, and print time per step, contacts, penetration, iterations, energy drift,
// inexact solves, warnings, and whether the run diverged.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/step/compat.h"
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
    "),\n"
    "or a Menagerie model (e.g. franka_emika_panda/scene) from the folder given by --menagerie\n"
    "DIR or the environment variable CK_MENAGERIE (on MuJoCo 2.x its _mj222 variant first).\n"
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
    "  --menagerie DIR     folder of MuJoCo Menagerie models (default: $CK_MENAGERIE)\n"
    "  --max-qvel V        a run with |qvel| > V (m/s or rad/s) has diverged (default 1000)\n"
    "  --max-penetration P a run with a contact deeper than P (m) has diverged (default 0.1)\n"
    "  --quiet             no progress bar (drawn on stderr only when it is a terminal)\n"
    "  --list-settings     print every setting key with its default as a Markdown table\n"
    "  --help              this text\n"
    "\n"
    "Each solver's row is printed when its run ends. Columns: us/step (mean wall time of\n"
    "ck_step), contacts (mean and most), deepest penetration, solver iterations, energy drift,\n"
    "inexact solves (status not SOLVED), warnings MuJoCo counted in mjData, warnings contactkit\n"
    "raised (their messages are listed under the table, not printed into it), status.\n"
    "\n"
    "energy drift (J): the largest energy the run held beyond its initial energy plus the work\n"
    "put in, max over t of K(t) + Ug(t) - K(0) - Ug(0) - W(0,t), with K the kinetic energy, Ug\n"
    "the potential of gravity and W the work of actuators, passive forces (springs, damping,\n"
    "fluid) and qfrc_applied. Contacts and friction only take energy out, so a body that falls\n"
    "and comes to rest shows no drift; energy created by the solver or the integrator does.\n"
    "\n"
    "A run has diverged when MuJoCo resets its state (bad qpos, qvel or qacc warning), when a\n"
    "velocity is not finite or beyond --max-qvel, or when a contact is deeper than\n"
    "--max-penetration; its row says DIVERGED and why instead of a time, the run stops there\n"
    "and ck-run exits with status 1.\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "ck-run: %s\n", msg.c_str());
  return 2;
}

// MuJoCo warnings raised during a run (contactkit's among them), counted instead of printed
std::map<std::string, int> g_warnings;
void OnWarning(const char* msg) { g_warnings[msg]++; }

// a table row padded to the header's widths (cells longer than a column widen only their row)
std::string Row(const std::vector<std::string>& cells, const std::vector<std::string>& header) {
  std::string s = "|";
  for (size_t c = 0; c < header.size(); c++) {
    const std::string cell = c < cells.size() ? cells[c] : "";
    s += " " + cell +
         std::string(header[c].size() > cell.size() ? header[c].size() - cell.size() : 0, ' ') +
         " |";
  }
  return s + "\n";
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
    } else if (a == "--menagerie") {
      setenv("CK_MENAGERIE", value("--menagerie").c_str(), 1);
    } else if (a == "--max-qvel") {
      opts.limits.max_qvel = std::atof(value("--max-qvel").c_str());
      if (!(opts.limits.max_qvel > 0)) return Fail("--max-qvel must be a positive speed");
    } else if (a == "--max-penetration") {
      opts.limits.max_penetration = std::atof(value("--max-penetration").c_str());
      if (!(opts.limits.max_penetration > 0))
        return Fail("--max-penetration must be a positive distance in meters");
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
  std::printf("model %s: nv=%d, timestep %g s, integrator %s, %s cone, %d steps, MuJoCo %s\n\n",
              contactkit::tools::ResolveModel(model_arg).c_str(), static_cast<int>(m->nv), h,
              integ[m->opt.integrator % 4],
              m->opt.cone == mjCONE_ELLIPTIC ? "elliptic" : "pyramidal", opts.steps,
              mj_versionString());

  // header first, then each solver's row as its run ends
  std::vector<std::string> header = {"solver",
                                     "us/step",
                                     "contacts",
                                     "max contacts",
                                     "max penetration (mm)",
                                     "iterations (mean)",
                                     "iterations (median)",
                                     "energy drift (J)",
                                     "inexact solves",
                                     "MuJoCo warnings",
                                     "contactkit warnings",
                                     "status"};
  size_t name_width = header[0].size();
  for (int s : solvers) name_width = std::max(name_width, std::strlen(ck_solverName(s)));
  header[0].resize(name_width, ' ');
  header[1].resize(std::strlen("DIVERGED"), ' ');
  std::printf("%s", contactkit::tools::MarkdownTable(header, {}).c_str());
  std::fflush(stdout);
  std::vector<std::string> notes;
  int status = 0;
  mju_user_warning = OnWarning;
  for (int s : solvers) {
    ckSettings settings = base;
    settings.solver = s;
    contactkit::tools::RunOptions o = opts;
    o.progress = !quiet && opts.steps >= 200;
    if (!csv.empty()) o.csv = solvers.size() > 1 ? csv + "." + ck_solverName(s) + ".csv" : csv;
    g_warnings.clear();
    contactkit::tools::RunStats st = contactkit::tools::Run(m, settings, o);
    if (!st.error.empty()) {
      std::fprintf(stderr, "ck-run: %s: %s\n", ck_solverName(s), st.error.c_str());
      status = 1;
      continue;
    }
    std::printf("%s",
                Row({st.solver, st.diverged ? "DIVERGED" : Fmt(st.step_time * 1e6, "%.1f"),
                     Fmt(st.mean_contacts, "%.1f"), std::to_string(st.max_contacts),
                     Fmt(st.max_penetration * 1e3, "%.4f"), Fmt(st.mean_iterations, "%.1f"),
                     Fmt(st.median_iterations, "%.0f"), Fmt(st.energy_drift, "%.3g"),
                     std::to_string(st.inexact), std::to_string(st.warnings),
                     std::to_string(st.ck_warnings), st.diverged ? "DIVERGED: " + st.why : "ok"},
                    header)
                    .c_str());
    std::fflush(stdout);
    for (const auto& [msg, n] : g_warnings) {
      notes.push_back(st.solver + ": " + msg + (n > 1 ? " (" + std::to_string(n) + " times)" : ""));
    }
    if (st.diverged) status = 1;
  }
  mju_user_warning = nullptr;
  if (!notes.empty()) {
    std::printf("\nwarnings raised:\n");
    for (const std::string& n : notes) std::printf("- %s\n", n.c_str());
  }
  mj_deleteModel(m);
  return status;
}
