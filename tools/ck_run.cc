// Copyright 2026 The contactkit developers.
//
// ck-run: run a model headless under one solver, or under several side by side from the same
// initial state, and print time per step, contacts, penetration, iterations, energy drift,
// inexact solves, warnings, and whether the run diverged.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "plugin/step/compat.h"
#include "tools/common/command_line.h"
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
    "  --random-controls S controls uniform in each actuator's range, drawn anew every 20 ms of\n"
    "                      simulated time by mt19937 seeded with S (the robot suite's random\n"
    "                      case: 12345; the same draws for every solver of --compare)\n"
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

// ck-run's command line
struct Options {
  std::string model, solver, compare, csv, menagerie;
  std::string loaded;  // the file read (a variant when the original does not load)
  std::vector<std::string> sets;
  contactkit::tools::RunOptions run;
  int integrator = -1;
  double margin = -1;
  bool quiet = false, list_settings = false;
};

// parse argv into o; -1 to go on, else the exit code
int ParseArgs(int argc, char** argv, Options* o, contactkit::tools::CommandLine* cl) {
  cl->Positional("model", &o->model);
  cl->Text("--solver", &o->solver);
  cl->Text("--compare", &o->compare);
  cl->Int("--steps", &o->run.steps, 1, INT_MAX, "a positive integer");
  cl->Number("--timestep", &o->run.timestep, 0, false, "a positive number of seconds");
  cl->Choice("--integrator", "integrator", &o->integrator,
             {{"euler", mjINT_EULER}, {"rk4", mjINT_RK4}, {"implicit", mjINT_IMPLICIT}});
  cl->Number("--margin", &o->margin, 0, true, "a non-negative distance in meters");
  cl->Int("--key", &o->run.keyframe, 0, INT_MAX, "a keyframe index (0 or more)");
  cl->Int("--random-controls", &o->run.random_controls, 0, INT_MAX, "a seed (0 or more)");
  cl->Texts("--set", &o->sets);
  cl->Text("--csv", &o->csv);
  cl->Text("--menagerie", &o->menagerie);
  cl->Number("--max-qvel", &o->run.limits.max_qvel, 0, false, "a positive speed");
  cl->Number("--max-penetration", &o->run.limits.max_penetration, 0, false,
             "a positive distance in meters");
  cl->Flag("--quiet", &o->quiet);
  cl->Flag("--list-settings", &o->list_settings);
  const int rc = cl->Parse(argc, argv);
  if (rc >= 0 || o->list_settings) return rc;
  if (o->model.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  if (!o->solver.empty() && !o->compare.empty()) {
    return cl->Fail("give --solver or --compare, not both");
  }
  if (!o->menagerie.empty()) setenv("CK_MENAGERIE", o->menagerie.c_str(), 1);
  return -1;
}

// every setting key with its default, as a Markdown table
void ListSettings() {
  ckSettings defaults;
  ck_defaultSettings(&defaults);
  std::vector<std::vector<std::string>> rows;
  for (int k = 0; k < ck_numSettingKeys(); k++) {
    char value[256];
    ck_getSetting(&defaults, ck_settingKey(k), value, sizeof(value));
    rows.push_back({std::string("`") + ck_settingKey(k) + "`", value, ck_settingDoc(k)});
  }
  std::printf("%s", contactkit::tools::MarkdownTable({"key", "default", "meaning"}, rows).c_str());
}

// apply --integrator, --margin and check --key; empty on success, else the message
std::string EditModel(mjModel* m, const Options& o) {
  if (o.integrator >= 0) m->opt.integrator = o.integrator;
  if (o.margin >= 0) {
    contactkit::SetPairMargins(m, o.margin);
    // speculative contacts need room: up to 20 per geom, 6 rows each
    m->nconmax = std::max(m->nconmax, 20 * m->ngeom);
    m->njmax = std::max(m->njmax, 6 * m->nconmax);
  }
  if (o.run.keyframe >= m->nkey && o.run.keyframe >= 0) {
    return "model has " + std::to_string(m->nkey) + " keyframes; --key " +
           std::to_string(o.run.keyframe) + " is out of range";
  }
  return "";
}

// the model's settings, then --set; false with a message on error
bool BaseSettings(const mjModel* m, const Options& o, ckSettings* base, std::string* err) {
  char cerr[1024] = "";
  if (ck_settingsFromModel(m, base, cerr, sizeof(cerr)) < 0) {
    *err = cerr;
    return false;
  }
  if (!contactkit::tools::ApplySets(o.sets, base, err)) return false;
  if (ck_validateSettings(base, cerr, sizeof(cerr)) != 0) {
    *err = cerr;
    return false;
  }
  return true;
}

// solvers to run: --compare's, --solver, else the settings'; false with a message on error
bool SolversToRun(const Options& o, int fallback, std::vector<int>* solvers, std::string* err) {
  if (o.compare == "all") {
    for (int s = 0; s < ckNSOLVER; s++) {
      if (ck_solverAvailable(s)) solvers->push_back(s);
    }
    return true;
  }
  const std::vector<std::string> names =
      !o.compare.empty() ? Split(o.compare, ',')
                         : std::vector<std::string>(o.solver.empty() ? 0 : 1, o.solver);
  for (const std::string& name : names) {
    const int id = contactkit::tools::SolverFromName(name, err);
    if (id < 0) {
      *err = (o.compare.empty() ? "--solver: " : "--compare: ") + *err;
      return false;
    }
    solvers->push_back(id);
  }
  if (names.empty()) solvers->push_back(fallback);
  return true;
}

// the model line and the table's header, padded for the solvers' names
std::vector<std::string> PrintHeader(const mjModel* m, const Options& o,
                                     const std::vector<int>& solvers) {
  const double h = o.run.timestep > 0 ? o.run.timestep : m->opt.timestep;
  const char* integ[] = {"euler", "rk4", "implicit", "implicitfast"};
  std::printf("model %s: nv=%d, timestep %g s, integrator %s, %s cone, %d steps, MuJoCo %s\n\n",
              o.loaded.c_str(), static_cast<int>(m->nv), h, integ[m->opt.integrator % 4],
              m->opt.cone == mjCONE_ELLIPTIC ? "elliptic" : "pyramidal", o.run.steps,
              mj_versionString());
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
  return header;
}

// a run's table row
std::string RunRow(const contactkit::tools::RunStats& st, const std::vector<std::string>& header) {
  return Row({st.solver, st.diverged ? "DIVERGED" : Fmt(st.step_time * 1e6, "%.1f"),
              Fmt(st.mean_contacts, "%.1f"), std::to_string(st.max_contacts),
              Fmt(st.max_penetration * 1e3, "%.4f"), Fmt(st.mean_iterations, "%.1f"),
              Fmt(st.median_iterations, "%.0f"), Fmt(st.energy_drift, "%.3g"),
              std::to_string(st.inexact), std::to_string(st.warnings),
              std::to_string(st.ck_warnings), st.diverged ? "DIVERGED: " + st.why : "ok"},
             header);
}

// run each solver from the same state, printing its row as it ends; 1 if any failed or diverged
int RunAll(mjModel* m, const Options& o, const ckSettings& base, const std::vector<int>& solvers) {
  const std::vector<std::string> header = PrintHeader(m, o, solvers);
  std::vector<std::string> notes;
  int status = 0;
  mju_user_warning = OnWarning;
  for (int s : solvers) {
    ckSettings settings = base;
    settings.solver = s;
    contactkit::tools::RunOptions run = o.run;
    run.progress = !o.quiet && o.run.steps >= 200;
    if (!o.csv.empty()) {
      run.csv = solvers.size() > 1 ? o.csv + "." + ck_solverName(s) + ".csv" : o.csv;
    }
    g_warnings.clear();
    const contactkit::tools::RunStats st = contactkit::tools::Run(m, settings, run);
    if (!st.error.empty()) {
      std::fprintf(stderr, "ck-run: %s: %s\n", ck_solverName(s), st.error.c_str());
      status = 1;
      continue;
    }
    std::printf("%s", RunRow(st, header).c_str());
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
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  contactkit::tools::CommandLine cl("ck-run", kUsage);
  if (const int rc = ParseArgs(argc, argv, &o, &cl); rc >= 0) return rc;
  if (o.list_settings) {
    ListSettings();
    return 0;
  }
  std::string err;
  mjModel* m = contactkit::tools::LoadModel(o.model, &err, &o.loaded);
  if (!m) return cl.Fail(err);
  ckSettings base;
  std::vector<int> solvers;
  err = EditModel(m, o);
  if (err.empty() && BaseSettings(m, o, &base, &err)) SolversToRun(o, base.solver, &solvers, &err);
  const int status = err.empty() ? RunAll(m, o, base, solvers) : cl.Fail(err);
  mj_deleteModel(m);
  return status;
}
