// Copyright 2026 The contactkit developers.
#include "tools/bench_suite/comfree_slopes.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "contactkit/contactkit.h"
#include "tools/bench_suite/plot.h"
#include "tools/common/bench_measure.h"
#include "tools/common/gen_stack.h"
#include "tools/common/tool_util.h"

namespace contactkit::bench {

const char kSlopesVariants[] =
    "comfree (default settings: with anchors), comfree_paper (anchor 0: the paper's scheme), "
    "comfree_serial (no OpenMP), comfree_pgsmodel (comfree on the model with opt.solver PGS), "
    "newton, pgs, cg, ipm";

namespace {

using tools::Fmt;
using tools::MarkdownTable;

struct Size {
  int nx, ny, nl;
  std::string name() const {
    return std::to_string(nx) + "x" + std::to_string(ny) + "x" + std::to_string(nl);
  }
};

// a solver variant: contactkit solver and MuJoCo's own solver choice for the pass-through
struct Variant {
  std::string name;
  int solver;     // ckSolver
  int mj_solver;  // mjtSolver for ckSOL_MUJOCO
  int parallel_min;
  int anchor = -1;  // comfree contact anchors (-1: the default setting)
};

bool MakeVariant(const std::string& name, Variant* v) {
  if (name == "comfree")
    *v = {name, ckSOL_COMFREE, mjSOL_NEWTON, 0};
  else if (name == "comfree_serial")
    *v = {name, ckSOL_COMFREE, mjSOL_NEWTON, 1000000000};
  else if (name == "comfree_pgsmodel")  // a model that names PGS (MuJoCo 2.x then projects)
    *v = {name, ckSOL_COMFREE, mjSOL_PGS, 0};
  else if (name == "comfree_paper")
    *v = {name, ckSOL_COMFREE, mjSOL_NEWTON, 0, 0};
  else if (name == "newton")
    *v = {name, ckSOL_MUJOCO, mjSOL_NEWTON, 0};
  else if (name == "pgs")
    *v = {name, ckSOL_MUJOCO, mjSOL_PGS, 0};
  else if (name == "cg")
    *v = {name, ckSOL_MUJOCO, mjSOL_CG, 0};
  else if (name == "ipm")
    *v = {name, ckSOL_IPM, mjSOL_NEWTON, 0};
  else
    return false;
  return true;
}

// one (scene, variant) measurement
struct Result {
  std::string scene, solver;
  int bodies = 0, nv = 0;
  tools::StageTiming t;
};

// MuJoCo's timers (d->timer) run only with a clock callback: milliseconds
mjtNum ClockMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "ck-bench: comfree-slopes: %s\n", msg.c_str());
  return 2;
}

// the scenes and variants asked for, and what was measured on them
struct Slopes {
  std::vector<Size> sizes;
  std::vector<Variant> variants;
  std::vector<Result> results;

  // a measurement that ran to the end, or null
  const Result* Find(const std::string& scene, const std::string& solver) const {
    for (const Result& r : results) {
      if (r.scene == scene && r.solver == solver && r.t.ok && r.t.steps > 0) return &r;
    }
    return nullptr;
  }
};

// sizes and variants from the options; empty on success, else the message
std::string Parse(const SlopesOptions& o, Slopes* sl) {
  const std::string sizes_arg = !o.sizes.empty() ? o.sizes
                                : o.quick
                                    ? "3x2x1,3x3x2,5x4x3"
                                    : "3x2x1,3x3x2,5x4x3,6x6x4,7x7x4,8x8x4,8x8x6,8x8x8,7x7x14";
  for (const std::string& s : tools::Split(sizes_arg, ',')) {
    Size z;
    if (std::sscanf(s.c_str(), "%dx%dx%d", &z.nx, &z.ny, &z.nl) != 3 || z.nx < 1 || z.ny < 1 ||
        z.nl < 1) {
      return "bad size '" + s + "' (want NXxNYxLAYERS, e.g. 8x8x6)";
    }
    sl->sizes.push_back(z);
  }
  // the variants asked for, or the default ones of the solvers asked for
  for (const std::string& s :
       tools::Split(o.variants.empty() ? "comfree,newton,pgs,ipm" : o.variants, ',')) {
    Variant v;
    if (!MakeVariant(s, &v)) return "unknown variant '" + s + "'; allowed: " + kSlopesVariants;
    if (o.variants.empty() &&
        std::find(o.solvers.begin(), o.solvers.end(), v.solver) == o.solvers.end()) {
      continue;
    }
    if (!ck_solverAvailable(v.solver)) {
      std::fprintf(stderr, "ck-bench: comfree-slopes: %s is not in this build; skipped\n",
                   s.c_str());
      continue;
    }
    sl->variants.push_back(v);
  }
  return sl->variants.empty() ? "no solver to time" : "";
}

// every variant on each scene settled once with CG; empty on success, else the message
std::string Measure(const SlopesOptions& o, int settle, int steps, double budget, Slopes* sl) {
  // MuJoCo's stage timers give the collision share of each step
  if (!mjcb_time) mjcb_time = ClockMs;
  for (const Size& z : sl->sizes) {
    std::string err;
    mjModel* m = tools::LoadXMLString(tools::StackedPrimitivesXML(z.nx, z.ny, z.nl, 0.002), &err);
    if (!m) return z.name() + ": " + err;
    mjData* d = mj_makeData(m);
    if (!d) return z.name() + ": could not make mjData";
    m->opt.solver = mjSOL_CG;
    if (o.progress) {
      std::fprintf(stderr, "%s: %d bodies, settling %d CG steps ...\n", z.name().c_str(),
                   static_cast<int>(m->nbody) - 1, settle);
    }
    for (int t = 0; t < settle; t++) mj_step(m, d);
    for (const Variant& v : sl->variants) {
      ckSettings s;
      ck_defaultSettings(&s);
      s.solver = v.solver;
      if (v.parallel_min > 0) s.comfree.parallel_min = v.parallel_min;
      if (v.anchor >= 0) s.comfree.anchor = v.anchor;
      s.deriv.enabled = 0;  // simulation only
      Result r;
      r.scene = z.name();
      r.solver = v.name;
      r.bodies = m->nbody - 1;
      r.nv = m->nv;
      r.t = tools::MeasureStages(m, d, s, v.mj_solver, steps, budget);
      if (!r.t.error.empty()) std::fprintf(stderr, "  %s: %s\n", v.name.c_str(), r.t.error.c_str());
      if (o.progress) {
        std::fprintf(
            stderr,
            "  %-14s %7.0f contacts %9.3f ms/step (constraint stage %8.3f ms), %d steps%s\n",
            v.name.c_str(), r.t.contacts, r.t.step_ms, r.t.constraint_ms, r.t.steps,
            r.t.ok ? "" : "  [diverged or MuJoCo warnings: left out of the table]");
      }
      sl->results.push_back(r);
    }
    mj_deleteData(d);
    mj_deleteModel(m);
  }
  return "";
}

void WriteCsv(const std::string& path, const Slopes& sl) {
  std::ofstream csv(path);
  csv << "scene,bodies,nv,solver,contacts,step_ms,collision_ms,assembly_ms,constraint_ms,steps,"
         "ok\n";
  for (const Result& r : sl.results) {
    csv << r.scene << "," << r.bodies << "," << r.nv << "," << r.solver << "," << r.t.contacts
        << "," << r.t.step_ms << "," << r.t.collision_ms << "," << r.t.assembly_ms << ","
        << r.t.constraint_ms << "," << r.t.steps << "," << (r.t.ok ? 1 : 0) << "\n";
  }
}

// one row per scene: step time per variant and ratios to comfree
std::string StepTable(const Slopes& sl) {
  std::vector<std::string> header = {"scene", "bodies", "contacts"};
  for (const Variant& v : sl.variants) header.push_back(v.name + " ms/step");
  header.push_back("comfree collision ms");
  header.push_back("comfree constraint ms");
  for (const Variant& v : sl.variants) {
    if (v.name != "comfree") header.push_back(v.name + " / comfree");
  }
  std::vector<std::vector<std::string>> rows;
  for (const Size& z : sl.sizes) {
    const Result* cf = sl.Find(z.name(), "comfree");
    std::vector<std::string> row = {z.name(), std::to_string(z.nx * z.ny * z.nl),
                                    cf ? Fmt(cf->t.contacts, "%.0f") : "-"};
    for (const Variant& v : sl.variants) {
      const Result* r = sl.Find(z.name(), v.name);
      row.push_back(r ? Fmt(r->t.step_ms, "%.3f") : "-");
    }
    row.push_back(cf ? Fmt(cf->t.collision_ms, "%.3f") : "-");
    row.push_back(cf ? Fmt(cf->t.constraint_ms, "%.3f") : "-");
    for (const Variant& v : sl.variants) {
      if (v.name == "comfree") continue;
      const Result* r = sl.Find(z.name(), v.name);
      row.push_back(r && cf ? Fmt(r->t.step_ms / cf->t.step_ms, "%.1f") : "-");
    }
    rows.push_back(row);
  }
  return MarkdownTable(header, rows);
}

// log-log slopes over the scenes (full step, step without MuJoCo's collision, constraint stage)
// with their plots; comfree's three slopes in cf_slopes
std::string SlopeTable(const Slopes& sl, PlotSpec* step_plot, PlotSpec* stage_plot,
                       double cf_slopes[3]) {
  std::vector<std::vector<std::string>> slopes;
  for (const Variant& v : sl.variants) {
    std::vector<double> x, y, yn, ys;
    for (const Size& z : sl.sizes) {
      const Result* r = sl.Find(z.name(), v.name);
      if (r && r->t.contacts > 0) {
        x.push_back(r->t.contacts);
        y.push_back(r->t.step_ms);
        yn.push_back(r->t.step_ms - r->t.collision_ms);
        ys.push_back(r->t.constraint_ms);
      }
    }
    step_plot->series.push_back({v.name, x, y});
    stage_plot->series.push_back({v.name, x, ys});
    const double s1 = tools::LogSlope(x, y), sn = tools::LogSlope(x, yn);
    const double s2 = tools::LogSlope(x, ys);
    if (v.name == "comfree") {
      cf_slopes[0] = s1;
      cf_slopes[1] = sn;
      cf_slopes[2] = s2;
    }
    slopes.push_back({v.name, Fmt(s1, "%.2f"), Fmt(sn, "%.2f"), Fmt(s2, "%.2f"),
                      x.empty() ? "-" : Fmt(x.front(), "%.0f") + " .. " + Fmt(x.back(), "%.0f")});
  }
  return MarkdownTable({"solver", "slope, step", "slope, step without collision",
                        "slope, constraint stage", "contacts"},
                       slopes);
}

// Comfree's step split by stage: time per contact at both ends of the range and each stage's
// slope (MuJoCo's stages are the same for every solver; "rest" is kinematics, inertia,
// velocity, actuation, smooth acceleration and the integrator). Empty with fewer than two
// scenes; the floor MuJoCo's stages set goes to notes.
std::string StageTable(const Slopes& sl, std::string* notes) {
  std::vector<double> x;
  std::vector<std::vector<double>> part(5);
  const char* names[5] = {
      "MuJoCo collision (mj_collision)", "MuJoCo constraint assembly (mj_makeConstraint)",
      "contactkit constraint stage (extract, solve, write back)", "rest", "whole step"};
  for (const Size& z : sl.sizes) {
    const Result* r = sl.Find(z.name(), "comfree");
    if (!r || r->t.contacts <= 0) continue;
    x.push_back(r->t.contacts);
    const double rest = r->t.step_ms - r->t.collision_ms - r->t.assembly_ms - r->t.constraint_ms;
    const double p[5] = {r->t.collision_ms, r->t.assembly_ms, r->t.constraint_ms, rest,
                         r->t.step_ms};
    for (int k = 0; k < 5; k++) part[k].push_back(p[k]);
  }
  if (x.size() < 2) return "";
  std::vector<std::vector<std::string>> split;
  for (int k = 0; k < 5; k++) {
    split.push_back({names[k], Fmt(1e3 * part[k].front() / x.front(), "%.2f"),
                     Fmt(1e3 * part[k].back() / x.back(), "%.2f"),
                     Fmt(tools::LogSlope(x, part[k]), "%.2f")});
  }
  // the floor MuJoCo's shared stages set: the step's slope if contactkit's stage and the rest
  // cost at every size what they cost per contact in the smallest scene
  const double own = (part[2].front() + part[3].front()) / x.front();
  std::vector<double> floor;
  for (size_t i = 0; i < x.size(); i++) floor.push_back(part[0][i] + part[1][i] + own * x[i]);
  *notes +=
      "MuJoCo's collision and assembly alone, with the rest at a constant cost per "
      "contact: slope " +
      Fmt(tools::LogSlope(x, floor), "%.2f") + ".\n";
  return "\n" + MarkdownTable({"comfree step, by stage", "us/contact at " + Fmt(x.front(), "%.0f"),
                               "us/contact at " + Fmt(x.back(), "%.0f"), "slope"},
                              split);
}

// the targets against comfree's slopes and Newton's step time
std::string Targets(const Slopes& sl, const double cf_slopes[3]) {
  double worst = INFINITY;
  for (const Size& z : sl.sizes) {
    const Result *cf = sl.Find(z.name(), "comfree"), *nt = sl.Find(z.name(), "newton");
    if (cf && nt && cf->t.contacts > 500) worst = std::min(worst, nt->t.step_ms / cf->t.step_ms);
  }
  std::string notes = "Target: comfree slope <= 1.1: step " + Fmt(cf_slopes[0], "%.2f") +
                      " (without MuJoCo's collision " + Fmt(cf_slopes[1], "%.2f") +
                      "), constraint stage " + Fmt(cf_slopes[2], "%.2f") + ".\n";
  if (std::isfinite(worst)) {
    notes += "Target: comfree >= 3x faster than Newton above 500 contacts: smallest ratio " +
             Fmt(worst, "%.1f") + ".\n";
  }
  return notes;
}

}  // namespace

int ComfreeSlopes(const SlopesOptions& o, std::string* report) {
  const int settle = o.settle >= 0 ? o.settle : (o.quick ? 100 : 1000);
  const int steps = o.steps > 0 ? o.steps : (o.quick ? 3 : 20);
  const double budget = o.budget > 0 ? o.budget : 15;
  Slopes sl;
  if (std::string err = Parse(o, &sl); !err.empty()) return Fail(err);
  if (std::string err = Measure(o, settle, steps, budget, &sl); !err.empty()) return Fail(err);
  WriteCsv(o.out + "/comfree_slopes.csv", sl);

  // tables: step times, slopes, comfree's stages; then the notes
  PlotSpec step_plot{"Settled piles: ck_step against contacts",
                     "contacts",
                     "ck_step (ms), collision included",
                     true,
                     true,
                     {},
                     {}};
  PlotSpec stage_plot{"Settled piles: constraint stage against contacts",
                      "contacts",
                      "constraint stage (ms)",
                      true,
                      true,
                      {},
                      {}};
  double cf_slopes[3] = {NAN, NAN, NAN};
  std::string notes;
  std::string text = "### Step time against contacts on settled piles (ComFree Fig. 7)\n\n" +
                     StepTable(sl) + "\n" + SlopeTable(sl, &step_plot, &stage_plot, cf_slopes);
  text += StageTable(sl, &notes);
  notes += Targets(sl, cf_slopes);
  notes += "Each scene (tools/common/gen_stack.h, h = 0.002) settled with " +
           std::to_string(settle) + " CG steps; each variant then takes up to " +
           std::to_string(steps) + " steps (at most " + Fmt(budget, "%g") +
           " s) from that state; medians; collision and assembly are MuJoCo's timers of "
           "mj_collision and mj_makeConstraint inside the same steps.\n";
  text += "\n" + notes;

  if (o.plots) {
    std::string perr;
    for (const auto& [name, spec] : {std::make_pair("comfree_slopes", &step_plot),
                                     std::make_pair("comfree_slopes_stage", &stage_plot)}) {
      if (Plot(o.out + "/" + name + ".png", *spec, &perr)) {
        text += "\n![" + std::string(name) + "](" + name + ".png)\n";
      } else {
        std::fprintf(stderr, "ck-bench: plot %s skipped: %s\n", name, perr.c_str());
      }
    }
  }
  std::printf("\n%s\n", text.c_str());
  std::fflush(stdout);
  *report += text + "\n";
  return 0;
}

}  // namespace contactkit::bench
