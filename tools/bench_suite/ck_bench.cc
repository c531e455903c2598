// Copyright 2026 The contactkit developers.
//
// ck-bench: the papers' comparisons for every solver in this build beside MuJoCo's, from one
// command. Each benchmark writes a CSV and a PNG plot into the output folder and prints a Markdown
// table; `all` also writes tables.md with the machine the figures were measured on.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "tools/bench_suite/comfree_slopes.h"
#include "tools/bench_suite/diffmjx_toss.h"
#include "tools/bench_suite/planning.h"
#include "tools/bench_suite/plot.h"
#include "tools/bench_suite/robots.h"
#include "tools/common/bench_measure.h"
#include "tools/common/command_line.h"
#include "tools/common/divergence.h"
#include "tools/common/gen_stack.h"
#include "tools/common/tool_util.h"

namespace contactkit::bench {
namespace {

using tools::Fmt;
using tools::MarkdownTable;

const char kUsage[] =
    "usage: ck-bench COMMAND [options]\n"
    "\n"
    "commands (each writes CSV + PNG into --out and prints a Markdown table):\n"
    "  all                  every benchmark below, plus OUT/tables.md with the machine\n"
    "  dojo-drop            humanoid drop: penetration against timestep (Dojo Table II)\n"
    "  dojo-planning        iLQR on box right, box up, the hopper, a push from a distance and\n"
    "                       the Unitree A1 (with --menagerie) with each solver's Jacobians and\n"
    "                       MuJoCo's finite differences, Adam on reverse-mode gradients (Dojo\n"
    "                       Table III)\n"
    "  dojo-speed           1000 steps at h = 0.01 with random actions and a Jacobian per step\n"
    "                       on humanoid, Unitree A1, Franka Panda, Skydio X2 (Dojo Table V)\n"
    "  comfree-penetration  dense drop of 5 x 5 x 5 primitives: penetration mean +- std\n"
    "                       (ComFree Fig. 3b)\n"
    "  comfree-scaling      step time against contact count on growing stacks (ComFree Fig. 7)\n"
    "  comfree-slopes       the same in detail: piles settled with CG, then every solver variant\n"
    "                       from the same state; median step and stage times, log-log slopes,\n"
    "                       ratios to comfree (long: not part of all)\n"
    "  nimble-jacobian      Jacobian time: analytic against central differences (Nimble Table II)\n"
    "  diffmjx-toss         cube toss on stiff contact: loss and gradient error against forward\n"
    "                       and gradient time, fixed-step Euler / RK4 against the adaptive pairs\n"
    "                       (DiffMJX Fig. 5 and 17; solver mujoco)\n"
    "  robots               robot suite: every Menagerie robot and example model, solver, "
    "timestep\n"
    "                       (h, 5h), start and controls; divergence, drift, penetration, Jacobian\n"
    "                       against differences, time against mj_step (long: not part of all)\n"
    "\n"
    "options:\n"
    "  --out DIR            output folder (default bench_out)\n"
    "  --menagerie DIR      folder of MuJoCo Menagerie robots (also --models-dir; default: the\n"
    "                       environment variable CK_MENAGERIE); robots that are absent, or all\n"
    "                       of them if neither is given, are skipped by name\n"
    "  --solvers A,B,...    solvers to compare (default: every available one)\n"
    "  --quick              a tenth of the steps (smoke runs; figures not for publication)\n"
    "  --sizes LIST         comfree-slopes: scenes as NXxNYxLAYERS, comma separated (default:\n"
    "                       3x2x1,3x3x2,5x4x3,6x6x4,7x7x4,8x8x4,8x8x6,8x8x8,7x7x14: about 10 to\n"
    "                       2000+ contacts)\n"
    "  --variants LIST      comfree-slopes: among comfree (default settings: with anchors),\n"
    "                       comfree_paper (anchor 0: the paper's scheme), comfree_serial (no\n"
    "                       OpenMP), comfree_pgsmodel (comfree on the model with opt.solver PGS),\n"
    "                       newton, pgs, cg, ipm (default: comfree, newton, pgs, ipm among\n"
    "                       --solvers)\n"
    "  --settle N           comfree-slopes: CG steps before timing (default 1000: the piles have\n"
    "                       landed and compacted; 7x7x14 then has 2000+ contacts)\n"
    "  --steps N            comfree-slopes: timed steps per variant and scene (default 20)\n"
    "  --budget S           comfree-slopes: seconds per variant and scene after which timing\n"
    "                       stops (default 15; at least 3 steps are timed)\n"
    "  --no-plots           CSV and tables only\n"
    "  --quiet              no progress bars\n"
    "  --help               this text\n"
    "\n"
    "A run that diverges (MuJoCo's bad qpos/qvel/qacc reset, |qvel| > 1000 or not finite, a\n"
    "contact deeper than 0.1 m) is marked DIVERGED in its table, with the reason under it,\n"
    "instead of a time or a measurement.\n";

struct Options {
  std::string out = "bench_out";
  std::string models_dir;
  std::vector<int> solvers;
  bool quick = false, plots = true, progress = true;
  SlopesOptions slopes;  // comfree-slopes' own options
};

int Fail(const std::string& msg) {
  std::fprintf(stderr, "ck-bench: %s\n", msg.c_str());
  return 2;
}

// n, or a tenth of it (at least lo) with --quick
int Steps(const Options& o, int n, int lo = 2) { return o.quick ? std::max(lo, n / 10) : n; }

std::string Solvers(const std::vector<int>& s) {
  std::string out;
  for (int i : s) out += std::string(out.empty() ? "" : ", ") + ck_solverName(i);
  return out;
}

ckSettings SettingsFor(int solver) {
  ckSettings s;
  ck_defaultSettings(&s);
  s.solver = solver;
  return s;
}

// one benchmark's outputs
struct Output {
  std::string name;   // file stem
  std::string title;  // heading
  std::string table;  // Markdown
  std::string notes;  // lines under the table
};

void Emit(const Options& o, const Output& out, std::string* report) {
  std::string text = "### " + out.title + "\n\n" + out.table;
  if (!out.notes.empty()) text += "\n" + out.notes;
  std::printf("\n%s\n", text.c_str());
  std::fflush(stdout);
  *report += text + "\n";
  if (o.plots) *report += "![" + out.title + "](" + out.name + ".png)\n\n";
}

void MaybePlot(const Options& o, const std::string& name, const PlotSpec& spec) {
  if (!o.plots) return;
  std::string err;
  if (!Plot(o.out + "/" + name + ".png", spec, &err)) {
    std::fprintf(stderr, "ck-bench: plot %s skipped: %s\n", name.c_str(), err.c_str());
  }
}

struct Robot {
  std::string name, path;
};

// the Dojo Table V set: MuJoCo's humanoid and three real robots from the models folder, in
// their original Menagerie files on MuJoCo 3.x and the _mj222 variants on 2.x (the Unitree A1's
// original lacks two visual meshes here, so it runs its variant, which drops them, on both)
std::vector<Robot> Robots(const Options& o, std::string* notes) {
  const std::string scene = mjVERSION_HEADER >= 300 ? "/scene.xml" : "/scene_mj222.xml";
  std::vector<Robot> all = {
      {"Humanoid", tools::ResolveModel("humanoid")},
      {"Unitree A1", o.models_dir + "/unitree_a1/scene_mj222.xml"},
      {"Franka Panda", o.models_dir + "/franka_emika_panda" + scene},
      {"Skydio X2", o.models_dir + "/skydio_x2" + scene},
  };
  std::vector<Robot> out;
  for (const Robot& r : all) {
    if (r.name != "Humanoid" && o.models_dir.empty()) {
      *notes += "Skipped " + r.name + ": no Menagerie folder (--menagerie DIR or CK_MENAGERIE).\n";
      std::fprintf(stderr,
                   "ck-bench: skipping %s: no Menagerie folder (--menagerie or CK_MENAGERIE)\n",
                   r.name.c_str());
    } else if (access(r.path.c_str(), R_OK) == 0) {
      out.push_back(r);
    } else {
      *notes += "Skipped " + r.name + ": " + r.path + " is absent.\n";
      std::fprintf(stderr, "ck-bench: skipping %s: %s is absent\n", r.name.c_str(), r.path.c_str());
    }
  }
  return out;
}

//---------------------------------- Dojo Table II -------------------------------------------------

// drop MuJoCo's humanoid from 0.3 m above its standing pose and record the deepest floor contact
int DojoDrop(const Options& o, std::string* report) {
  const std::vector<double> timesteps = {0.1, 0.01, 0.001};
  const double duration = o.quick ? 0.8 : 1.5;
  std::ofstream csv(o.out + "/dojo_drop.csv");
  csv << "solver,timestep,steps,max_penetration_m,failed\n";
  std::vector<std::vector<std::string>> rows;
  PlotSpec spec{"Humanoid drop: deepest floor penetration",
                "timestep (s)",
                "max penetration (mm)",
                true,
                true,
                {},
                {}};
  const int total = static_cast<int>(o.solvers.size() * timesteps.size());
  int done = 0;
  std::string diverged;
  for (int solver : o.solvers) {
    std::vector<std::string> row = {ck_solverName(solver)};
    Series series{ck_solverName(solver), {}, {}};
    for (double h : timesteps) {
      std::string err;
      mjModel* m = tools::LoadModel("humanoid", &err);
      if (!m) return Fail(err);
      m->opt.timestep = h;
      const int floor = mj_name2id(m, mjOBJ_GEOM, "floor");
      char cerr[512];
      ckSettings s = SettingsFor(solver);
      s.deriv.enabled = 0;  // simulation only
      ckHandle* ck = ck_make(m, &s, cerr, sizeof(cerr));
      if (!ck) return Fail(cerr);
      mjData* d = mj_makeData(m);
      d->qpos[2] += 0.3;
      const int steps = std::max(1, static_cast<int>(std::lround(duration / h)));
      double pen = 0;
      tools::DivergenceCheck divergence;
      divergence.Start(d);
      for (int t = 0; t < steps; t++) {
        ck_step(ck, m, d);
        for (int i = 0; i < d->ncon; i++) {
          const mjContact& c = d->contact[i];
          if (floor < 0 || c.geom1 == floor || c.geom2 == floor) pen = std::max(pen, -c.dist);
        }
        if (divergence.Check(m, d, t)) break;
      }
      const bool failed = divergence.diverged();
      csv << ck_solverName(solver) << "," << h << "," << steps << "," << pen << "," << failed
          << "\n";
      row.push_back(failed ? "DIVERGED" : Fmt(1e3 * pen, "%.3g"));
      if (failed) {
        diverged += std::string("DIVERGED: ") + ck_solverName(solver) + " at h = " + Fmt(h, "%g") +
                    ": " + divergence.reason() + ".\n";
      }
      if (!failed) {
        series.x.push_back(h);
        series.y.push_back(1e3 * pen);
      }
      mj_deleteData(d);
      ck_free(ck);
      mj_deleteModel(m);
      if (o.progress) tools::Progress("dojo-drop", ++done, total);
    }
    rows.push_back(row);
    spec.series.push_back(series);
  }
  if (o.progress) tools::ClearProgress();
  std::vector<std::string> header = {"max penetration (mm) \\ timestep (s)"};
  for (double h : timesteps) header.push_back(Fmt(h, "%g"));
  Output out{"dojo_drop", "Humanoid drop: penetration against timestep (Dojo Table II)",
             MarkdownTable(header, rows),
             "MuJoCo's humanoid.xml dropped from 0.3 m above its standing pose, " +
                 Fmt(duration, "%g") +
                 " s simulated; deepest contact with the floor (Dojo reports MuJoCo -28 mm at "
                 "0.01 s and -46 mm at 0.001 s, Dojo +1e-7 mm). DIVERGED: " +
                 tools::DescribeLimits({}) + ".\n" + diverged};
  MaybePlot(o, "dojo_drop", spec);
  Emit(o, out, report);
  return 0;
}

//---------------------------------- Dojo Table V --------------------------------------------------

int DojoSpeed(const Options& o, std::string* report) {
  const int steps = Steps(o, 1000, 10);
  std::string notes;
  const std::vector<Robot> robots = Robots(o, &notes);
  std::ofstream csv(o.out + "/dojo_speed.csv");
  csv << "solver,robot,steps,sim_s,jacobian_s,total_s,jacobian,diverged\n";
  std::vector<std::vector<std::string>> rows;
  PlotSpec spec{
      "1000 steps at h = 0.01 plus a Jacobian per step", "", "total time (s)", false, true, {}, {}};
  for (const Robot& r : robots) spec.xtics.push_back(r.name);
  const int total = static_cast<int>(o.solvers.size() * robots.size()) * steps;
  int done = 0;
  for (int solver : o.solvers) {
    std::vector<std::string> row = {ck_solverName(solver)};
    Series series{ck_solverName(solver), {}, {}};
    for (size_t r = 0; r < robots.size(); r++) {
      std::string err;
      mjModel* m = tools::LoadModel(robots[r].path, &err);
      if (!m) return Fail(err);
      m->opt.timestep = 0.01;
      char cerr[512];
      const ckSettings s = SettingsFor(solver);
      ckHandle* ck = ck_make(m, &s, cerr, sizeof(cerr));
      if (!ck) return Fail(cerr);
      mjData* d = mj_makeData(m);
      if (m->nkey > 0) mj_resetDataKeyframe(m, d, 0);
      const int nx = 2 * m->nv + m->na;
      std::vector<mjtNum> A(static_cast<size_t>(nx) * nx), B(static_cast<size_t>(nx) * m->nu + 1);
      std::mt19937 rng(12345);
      std::uniform_real_distribution<double> unit(0.0, 1.0);
      // MuJoCo's row is MuJoCo itself (mj_step + mjd_transitionFD)
      const bool mujoco = solver == ckSOL_MUJOCO;
      double t_sim = 0, t_jac = 0;
      tools::DivergenceCheck divergence;
      divergence.Start(d);
      for (int t = 0; t < steps; t++) {
        for (int i = 0; i < m->nu; i++) {
          const double lo = m->actuator_ctrllimited[i] ? m->actuator_ctrlrange[2 * i] : -1;
          const double hi = m->actuator_ctrllimited[i] ? m->actuator_ctrlrange[2 * i + 1] : 1;
          d->ctrl[i] = lo + (hi - lo) * unit(rng);
        }
        auto t0 = std::chrono::steady_clock::now();
        if (mujoco) {
          mj_step(m, d);
        } else {
          ck_step(ck, m, d);
        }
        auto t1 = std::chrono::steady_clock::now();
        t_sim += std::chrono::duration<double>(t1 - t0).count();
        if (divergence.Check(m, d, t)) {
          done += steps - t - 1;
          break;
        }
        if (mujoco) {
          mjd_transitionFD(m, d, 1e-6, 0, A.data(), B.data(), nullptr, nullptr);
        } else {
          ck_transitionJac(ck, m, d, A.data(), B.data(), nullptr, nullptr);
        }
        t_jac += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
        if (o.progress && (++done % 50 == 0 || done == total)) {
          tools::Progress("dojo-speed", done, total);
        }
      }
      const bool failed = divergence.diverged();
      csv << ck_solverName(solver) << "," << robots[r].name << "," << steps << "," << t_sim << ","
          << t_jac << "," << t_sim + t_jac << "," << (mujoco ? "mjd_transitionFD" : "analytic")
          << "," << failed << "\n";
      if (failed) {
        row.push_back("DIVERGED");
        notes += std::string("DIVERGED: ") + ck_solverName(solver) + " on " + robots[r].name +
                 ": " + divergence.reason() + ".\n";
      } else {
        row.push_back(Fmt(t_sim + t_jac, "%.3f") + " (" + Fmt(t_sim, "%.3f") + " + " +
                      Fmt(t_jac, "%.3f") + ")");
      }
      if (!failed) {
        series.x.push_back(static_cast<double>(r));
        series.y.push_back(t_sim + t_jac);
      }
      mj_deleteData(d);
      ck_free(ck);
      mj_deleteModel(m);
    }
    rows.push_back(row);
    spec.series.push_back(series);
  }
  if (o.progress) tools::ClearProgress();
  std::vector<std::string> header = {"total s (sim + Jacobian)"};
  for (const Robot& r : robots) header.push_back(r.name);
  notes += std::to_string(steps) +
           " steps at h = 0.01 with uniform random controls in each actuator's range (same "
           "seed for every solver); MuJoCo: mj_step + mjd_transitionFD (forward differences, "
           "eps 1e-6); ours: ck_step + ck_transitionJac. Dojo reports MuJoCo 1.51 / 1.11 / 0.34 "
           "/ 0.05 s and Dojo 1.75 / 5.24 / 1.16 / 0.81 s on its machine. DIVERGED: " +
           tools::DescribeLimits({}) + ".\n";
  Output out{"dojo_speed", "Simulation plus a Jacobian per step (Dojo Table V)",
             MarkdownTable(header, rows), notes};
  MaybePlot(o, "dojo_speed", spec);
  Emit(o, out, report);
  return 0;
}

//---------------------------------- ComFree Fig. 3b -----------------------------------------------

int ComfreePenetration(const Options& o, std::string* report) {
  const int steps = Steps(o, 1000, 20);
  std::string err;
  // five 5 x 5 layers of primitives (~5 cm) dropped onto a box
  mjModel* m = tools::LoadXMLString(tools::StackedPrimitivesXML(5, 5, 5, 0.002), &err);
  if (!m) return Fail(err);
  m->opt.solver = mjSOL_CG;
  struct Config {
    int solver;
    double k, dmp;  // comfree only
    int anchor;     // comfree only: 1 the default (anchors), 0 the paper's scheme
  };
  std::vector<Config> configs;
  for (int solver : o.solvers) {
    if (solver == ckSOL_COMFREE) {
      for (int anchor : {1, 0}) {
        for (double k : {0.1, 0.3, 0.5}) {
          for (double dmp : {0.001, 0.005}) configs.push_back({solver, k, dmp, anchor});
        }
      }
    } else {
      configs.push_back({solver, 0, 0, 0});
    }
  }
  std::ofstream csv(o.out + "/comfree_penetration.csv");
  csv << "solver,k_user,d_user,anchor,steps,mean_m,std_m,max_m,samples,step_ms,diverged\n";
  std::vector<std::vector<std::string>> rows;
  PlotSpec spec{
      "Dense drop: penetration over all contacts", "", "depth (mm)", false, false, {}, {}};
  Series series{"mean depth", {}, {}}, deep{"max depth / 10", {}, {}};
  std::string diverged;
  for (size_t c = 0; c < configs.size(); c++) {
    ckSettings s = SettingsFor(configs[c].solver);
    const bool cf = configs[c].solver == ckSOL_COMFREE;
    if (cf) {
      s.comfree.stiffness = configs[c].k;
      s.comfree.damping = configs[c].dmp;
      s.comfree.anchor = configs[c].anchor;
    }
    const std::string kd = cf ? Fmt(configs[c].k, "%g") + ", " + Fmt(configs[c].dmp, "%g") : "N/A";
    const std::string name = std::string(ck_solverName(configs[c].solver)) +
                             (cf && !configs[c].anchor ? " (anchor 0)" : "");
    spec.xtics.push_back(name + (cf ? " " + kd : ""));
    if (o.progress) std::fprintf(stderr, "%s %s\n", name.c_str(), kd.c_str());
    const tools::PenetrationStats ps = tools::MeasurePenetration(m, s, steps, o.progress);
    if (!ps.error.empty()) return Fail(ps.error);
    csv << ck_solverName(configs[c].solver) << "," << (cf ? configs[c].k : 0) << ","
        << (cf ? configs[c].dmp : 0) << "," << configs[c].anchor << "," << steps << "," << ps.mean
        << "," << ps.std << "," << ps.max << "," << ps.samples << "," << 1e3 * ps.step_time << ","
        << ps.diverged << "\n";
    if (ps.diverged) {
      rows.push_back({name, kd, "DIVERGED", "DIVERGED", "DIVERGED"});
      diverged += "DIVERGED: " + name + (cf ? " " + kd : "") + ": " + ps.why + ".\n";
    } else {
      rows.push_back({name, kd, Fmt(1e3 * ps.mean, "%.2f") + " ± " + Fmt(1e3 * ps.std, "%.2f"),
                      Fmt(1e3 * ps.max, "%.2f"), Fmt(1e3 * ps.step_time, "%.2f")});
    }
    if (!ps.diverged) {
      series.x.push_back(static_cast<double>(c));
      series.y.push_back(1e3 * ps.mean);
      deep.x.push_back(static_cast<double>(c));
      deep.y.push_back(1e2 * ps.max);
    }
  }
  mj_deleteModel(m);
  spec.series = {series, deep};
  Output out{
      "comfree_penetration", "Dense drop: penetration depth (ComFree Fig. 3b)",
      MarkdownTable({"solver", "k_user, d_user", "depth (mm) mean ± std", "max (mm)", "ms / step"},
                    rows),
      "125 primitives (5 layers of 5 x 5, tools/common/gen_stack.h) dropped onto a box at h = "
      "0.002, " +
          std::to_string(steps) +
          " steps; depth of every detected contact at every step. MuJoCo runs its CG "
          "solver. ComFree reports MJWarp 1.7 ± 4.9 mm and ComFree 0.9 ± 1.5 to 3.9 ± "
          "6.9 mm. DIVERGED: " +
          tools::DescribeLimits({}) + ".\n" + diverged};
  MaybePlot(o, "comfree_penetration", spec);
  Emit(o, out, report);
  return 0;
}

//---------------------------------- ComFree Fig. 7 ------------------------------------------------

int ComfreeScaling(const Options& o, std::string* report) {
  struct Size {
    int nx, ny, nl;
  };
  std::vector<Size> sizes = {{3, 2, 1}, {3, 3, 2}, {5, 4, 3}, {6, 6, 4}, {7, 7, 4}, {8, 8, 6}};
  if (o.quick) sizes.resize(3);
  const int warmup = Steps(o, 150, 60), steps = Steps(o, 150, 5);
  std::ofstream csv(o.out + "/comfree_scaling.csv");
  csv << "solver,bodies,contacts,step_ms,solve_ms,diverged\n";
  PlotSpec spec{
      "Step time against contact count", "contacts", "step time (ms)", true, true, {}, {}};
  std::vector<std::vector<std::string>> rows(sizes.size());
  const int total = static_cast<int>(o.solvers.size() * sizes.size());
  int done = 0;
  std::string diverged;
  for (size_t i = 0; i < sizes.size(); i++) {
    rows[i].push_back(std::to_string(sizes[i].nx * sizes[i].ny * sizes[i].nl));
  }
  for (int solver : o.solvers) {
    Series series{ck_solverName(solver), {}, {}};
    for (size_t i = 0; i < sizes.size(); i++) {
      const tools::ScalingPoint sp = tools::MeasureStackScaling(
          sizes[i].nx, sizes[i].ny, sizes[i].nl, SettingsFor(solver), warmup, steps);
      if (!sp.error.empty()) return Fail(sp.error);
      csv << ck_solverName(solver) << "," << sp.nbody << "," << sp.contacts << ","
          << 1e3 * sp.step_time << "," << 1e3 * sp.solve_time;
      csv << "," << sp.diverged << "\n";
      rows[i].push_back(sp.diverged ? "DIVERGED"
                                    : Fmt(sp.contacts, "%.0f") + " / " +
                                          Fmt(1e3 * sp.step_time, "%.3g") + " ms");
      if (sp.diverged) {
        diverged += std::string("DIVERGED: ") + ck_solverName(solver) + " with " +
                    std::to_string(sp.nbody) + " bodies: " + sp.why + ".\n";
      } else {
        series.x.push_back(sp.contacts);
        series.y.push_back(1e3 * sp.step_time);
      }
      if (o.progress) tools::Progress("scaling", ++done, total);
    }
    spec.series.push_back(series);
  }
  if (o.progress) tools::ClearProgress();
  std::vector<std::string> header = {"bodies"};
  for (int s : o.solvers) header.push_back(std::string(ck_solverName(s)) + ": contacts / step");
  Output out{"comfree_scaling", "Step time against contact count (ComFree Fig. 7)",
             MarkdownTable(header, rows),
             "Stacked primitives (tools/common/gen_stack.h) at h = 0.002; mean over " +
                 std::to_string(steps) + " steps after " + std::to_string(warmup) +
                 " steps of falling; full step (collision, solve, integration), one core. "
                 "MuJoCo runs CG. DIVERGED: " +
                 tools::DescribeLimits({}) + ".\n" + diverged};
  MaybePlot(o, "comfree_scaling", spec);
  Emit(o, out, report);
  return 0;
}

//---------------------------------- Nimble Table II -----------------------------------------------

int NimbleJacobian(const Options& o, std::string* report) {
  const int states = Steps(o, 50, 3), warmup = Steps(o, 300, 100);
  std::string notes;
  std::vector<Robot> models = {{"Humanoid", tools::ResolveModel("humanoid")},
                               {"Hopper", tools::ResolveModel("hopper")}};
  for (const Robot& r : Robots(o, &notes)) {
    if (r.name != "Humanoid") models.push_back(r);
  }
  std::ofstream csv(o.out + "/nimble_jacobian.csv");
  csv << "model,nv,solver,contacts,analytic_ms,central_ms,mujoco_central_ms\n";
  std::vector<std::vector<std::string>> rows;
  PlotSpec spec{"Jacobian time", "", "time per Jacobian (ms)", false, true, {}, {}};
  Series mj_series{"MuJoCo central differences", {}, {}};
  std::vector<Series> ours;
  std::vector<int> ours_solvers;
  for (int s : o.solvers) {
    if (s != ckSOL_MUJOCO) {
      ours.push_back({std::string(ck_solverName(s)) + " analytic", {}, {}});
      ours_solvers.push_back(s);
    }
  }
  const int total = static_cast<int>(models.size() * std::max<size_t>(1, ours_solvers.size()));
  int done = 0;
  for (const Robot& r : models) spec.xtics.push_back(r.name);
  for (size_t k = 0; k < models.size(); k++) {
    std::string err;
    mjModel* m = tools::LoadModel(models[k].path, &err);
    if (!m) return Fail(err);
    // MuJoCo's own: central differences of mj_step
    const tools::JacobianTiming base =
        tools::MeasureJacobians(m, SettingsFor(ckSOL_MUJOCO), warmup, states, true);
    if (!base.error.empty()) return Fail(base.error);
    if (base.diverged) {
      notes += "DIVERGED: mujoco on " + models[k].name + ": " + base.why + ".\n";
    }
    const std::string mj_fd = base.diverged ? "DIVERGED" : Fmt(1e3 * base.mujoco_fd, "%.3g");
    mj_series.x.push_back(static_cast<double>(k));
    mj_series.y.push_back(1e3 * base.mujoco_fd);
    if (ours_solvers.empty()) {
      rows.push_back({models[k].name, std::to_string(m->nv), Fmt(base.contacts, "%.1f"), "-", "-",
                      mj_fd, "-"});
      csv << models[k].name << "," << m->nv << ",mujoco," << base.contacts << ",,,"
          << 1e3 * base.mujoco_fd << "\n";
      if (o.progress) tools::Progress("jacobian", ++done, total);
    }
    for (size_t j = 0; j < ours_solvers.size(); j++) {
      const tools::JacobianTiming jt =
          tools::MeasureJacobians(m, SettingsFor(ours_solvers[j]), warmup, states, true);
      if (!jt.error.empty()) return Fail(jt.error);
      const bool have = jt.ours >= 0 && !jt.diverged;
      const std::string name = ck_solverName(ours_solvers[j]);
      if (jt.diverged)
        notes += "DIVERGED: " + name + " on " + models[k].name + ": " + jt.why + ".\n";
      const std::string missing = jt.diverged ? "DIVERGED" : "n/a";
      rows.push_back({models[k].name, std::to_string(m->nv), Fmt(jt.contacts, "%.1f"),
                      name + ": " +
                          (have          ? Fmt(1e3 * jt.ours, "%.3g")
                           : jt.diverged ? "DIVERGED"
                                         : "failed"),
                      have ? Fmt(1e3 * jt.ours_fd, "%.3g") : missing, mj_fd,
                      have ? Fmt(jt.ours_fd / jt.ours, "%.1f") + "x" : missing});
      csv << models[k].name << "," << m->nv << "," << ck_solverName(ours_solvers[j]) << ","
          << jt.contacts << "," << (have ? 1e3 * jt.ours : -1) << ","
          << (have ? 1e3 * jt.ours_fd : -1) << "," << 1e3 * base.mujoco_fd << "\n";
      if (have) {
        ours[j].x.push_back(static_cast<double>(k));
        ours[j].y.push_back(1e3 * jt.ours);
      }
      if (o.progress) tools::Progress("jacobian", ++done, total);
    }
    mj_deleteModel(m);
  }
  if (o.progress) tools::ClearProgress();
  spec.series = {mj_series};
  for (const Series& s : ours) spec.series.push_back(s);
  notes += "Time per Jacobian (A and B of one step, ms) at " + std::to_string(states) +
           " states of a run from the model's initial state, after " + std::to_string(warmup) +
           " steps (robots fall and touch the ground). Speedup = our central differences "
           "/ our analytic. Nimble reports 8.6x to 46x (Atlas: 16.1 ms against 737 ms). "
           "DIVERGED: " +
           tools::DescribeLimits({}) + ".\n";
  Output out{"nimble_jacobian", "Jacobian time against central differences (Nimble Table II)",
             MarkdownTable({"model", "nv", "contacts", "analytic (ms)", "our central diff (ms)",
                            "MuJoCo central diff (ms)", "speedup"},
                           rows),
             notes};
  MaybePlot(o, "nimble_jacobian", spec);
  Emit(o, out, report);
  return 0;
}

//---------------------------------- machine -------------------------------------------------------

std::string Machine() {
  std::string cpu = "unknown CPU";
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%d", std::gmtime(&now));
  return "Measured on " + cpu + ", " + std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) +
         " cores (one used), MuJoCo " + mj_versionString() + ", contactkit " + ckVERSION + ", " +
         date + ".";
}

// the benchmarks by command name; `all` runs those that are not long
using Bench = std::function<int(const Options&, std::string*)>;
std::vector<std::pair<std::string, Bench>> Benchmarks() {
  return {
      {"dojo-drop", DojoDrop},
      {"dojo-speed", DojoSpeed},
      {"comfree-penetration", ComfreePenetration},
      {"comfree-scaling", ComfreeScaling},
      {"nimble-jacobian", NimbleJacobian},
      {"dojo-planning",
       [](const Options& o, std::string* r) {
         return PlanningBench({o.out, o.models_dir, o.solvers, o.quick, o.plots, o.progress}, r);
       }},
      {"diffmjx-toss",
       [](const Options& o, std::string* r) {
         return TossBench({o.out, o.quick, o.plots, o.progress}, r);
       }},
      {"robots",
       [](const Options& o, std::string* r) {
         return RobotsBench({o.out, o.models_dir, o.solvers, o.quick, o.plots, o.progress}, r);
       }},
      {"comfree-slopes",
       [](const Options& o, std::string* r) {
         SlopesOptions so = o.slopes;
         so.out = o.out;
         so.solvers = o.solvers;
         so.quick = o.quick;
         so.plots = o.plots;
         so.progress = o.progress;
         return ComfreeSlopes(so, r);
       }},
  };
}

// the options after the command; -1 to go on, else the exit code
int ParseArgs(int argc, char** argv, std::string* cmd, Options* o, tools::CommandLine* cl) {
  cl->Positional("command", cmd);
  cl->Text("--out", &o->out);
  cl->Text("--menagerie,--models-dir", &o->models_dir);
  cl->Custom("--solvers", [o](const std::string& v, std::string* err) {
    for (const std::string& name : tools::Split(v, ',')) {
      const int id = tools::SolverFromName(name, err);
      if (id < 0) return false;
      if (std::find(o->solvers.begin(), o->solvers.end(), id) == o->solvers.end()) {
        o->solvers.push_back(id);
      }
    }
    return true;
  });
  cl->Flag("--quick", &o->quick);
  cl->Text("--sizes", &o->slopes.sizes);
  cl->Text("--variants", &o->slopes.variants);
  cl->Int("--settle", &o->slopes.settle, 0, INT_MAX, "0 or more steps");
  cl->Int("--steps", &o->slopes.steps, 1, INT_MAX, "1 or more steps");
  cl->Number("--budget", &o->slopes.budget, 0, false, "seconds > 0");
  cl->Flag("--no-plots", &o->plots, false);
  cl->Flag("--quiet", &o->progress, false);
  const int rc = cl->Parse(argc, argv);
  if (rc >= 0) return rc;
  if (*cmd == "help") {
    std::printf("%s", kUsage);
    return 0;
  }
  if (cmd->empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  return -1;
}

// defaults that depend on the machine: every available solver, the Menagerie folder, gnuplot;
// the output folder made; -1 to go on, else the exit code
int Prepare(Options* o, const tools::CommandLine& cl) {
  if (o->solvers.empty()) {
    for (int s = 0; s < ckNSOLVER; s++) {
      if (ck_solverAvailable(s)) o->solvers.push_back(s);
    }
  }
  if (o->models_dir.empty()) o->models_dir = tools::MenagerieDir();
  if (mkdir(o->out.c_str(), 0755) != 0 && access(o->out.c_str(), W_OK) != 0) {
    return cl.Fail("cannot create the output folder '" + o->out + "'");
  }
  if (o->plots && !HaveGnuplot()) {
    std::fprintf(stderr,
                 "ck-bench: gnuplot not found (apt-get install gnuplot-nox): plots "
                 "skipped, CSV and tables still written\n");
    o->plots = false;
  }
  std::fprintf(stderr, "ck-bench: solvers %s; output in %s%s\n", Solvers(o->solvers).c_str(),
               o->out.c_str(), o->quick ? " (--quick: shortened runs)" : "");
  return -1;
}

}  // namespace

int Main(int argc, char** argv) {
  Options o;
  std::string cmd;
  tools::CommandLine cl("ck-bench", kUsage);
  if (const int rc = ParseArgs(argc, argv, &cmd, &o, &cl); rc >= 0) return rc;
  std::vector<std::pair<std::string, Bench>> run;
  std::string names = "all";
  for (const auto& b : Benchmarks()) {
    const bool long_run = b.first == "robots" || b.first == "comfree-slopes";
    if ((cmd == "all" && !long_run) || cmd == b.first) run.push_back(b);
    names += ", " + b.first;
  }
  if (run.empty()) return cl.Fail("unknown command '" + cmd + "'; allowed: " + names);
  if (const int rc = Prepare(&o, cl); rc >= 0) return rc;

  std::string report = "## Benchmarks\n\n" + Machine() + "\n" +
                       (o.quick ? "(--quick run: shortened, not for publication)\n" : "") + "\n";
  std::printf("%s", report.c_str());
  for (const auto& b : run) {
    if (const int rc = b.second(o, &report); rc != 0) return rc;
  }
  if (cmd == "all") {
    std::ofstream(o.out + "/tables.md") << report;
    std::fprintf(stderr, "ck-bench: wrote %s/tables.md\n", o.out.c_str());
  }
  return 0;
}

}  // namespace contactkit::bench

int main(int argc, char** argv) { return contactkit::bench::Main(argc, argv); }
