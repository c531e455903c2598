// Copyright 2026 The contactkit developers.
//
// ck-comfree-scaling: step time against the number of contacts (ComFree-Sim's Fig. 7) on stacked
// primitives of growing size (tools/common/gen_stack.h), for comfree, MuJoCo's Newton and PGS, and
// ipm when the build has it. Every scene is settled once with MuJoCo's CG; each solver then steps
// from that same state in this process (ck_step: MuJoCo's collision and integrator for all), and
// the tool prints median times, log-log slopes and ratios, and writes a CSV and a PNG (gnuplot).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "tools/common/bench_measure.h"
#include "tools/common/gen_stack.h"
#include "tools/common/tool_util.h"

namespace {

using contactkit::tools::Fmt;
using contactkit::tools::Split;

const char kUsage[] =
    "usage: ck-comfree-scaling [options]\n"
    "\n"
    "Step time against contacts on stacked primitives (tools/common/gen_stack.h): each scene is "
    "settled\n"
    "with MuJoCo's CG, then every solver steps from the same state; prints median times, log-log\n"
    "slopes and ratios to comfree, and writes a CSV and a PNG plot.\n"
    "\n"
    "options:\n"
    "  --sizes LIST     scenes as NXxNYxLAYERS, comma separated (default: 3x2x1,3x3x2,5x4x3,\n"
    "                   6x6x4,7x7x4,8x8x4,8x8x6,8x8x8,7x7x14: about 10 to 2000+ contacts)\n"
    "  --solvers LIST   among comfree (default settings: with anchors), comfree_paper (anchor 0:\n"
    "                   the paper's scheme), comfree_serial (no OpenMP), comfree_pgsmodel\n"
    "                   (comfree on the model with opt.solver PGS), newton, pgs, cg, ipm\n"
    "                   (default: comfree,newton,pgs,ipm; ipm only if this build has it)\n"
    "  --settle N       CG steps before timing (default 1000: the piles have landed and\n"
    "                   compacted; 7x7x14 then has 2000+ contacts)\n"
    "  --steps N        timed steps per solver and scene (default 20)\n"
    "  --budget S       seconds per solver and scene after which timing stops (default 15;\n"
    "                   at least 3 steps are timed)\n"
    "  --csv FILE       per (scene, solver) results (default comfree_scaling.csv)\n"
    "  --png FILE       log-log plot via gnuplot (default comfree_scaling.png; skipped with a\n"
    "                   message if gnuplot is absent)\n"
    "  --help           this text\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "ck-comfree-scaling: %s\n", msg.c_str());
  return 2;
}

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

// the part of mjData a step depends on
struct State {
  std::vector<mjtNum> qpos, qvel, act, ctrl, warm;
  mjtNum time = 0;
  void Save(const mjModel* m, const mjData* d) {
    qpos.assign(d->qpos, d->qpos + m->nq);
    qvel.assign(d->qvel, d->qvel + m->nv);
    act.assign(d->act, d->act + m->na);
    ctrl.assign(d->ctrl, d->ctrl + m->nu);
    warm.assign(d->qacc_warmstart, d->qacc_warmstart + m->nv);
    time = d->time;
  }
  void Restore(const mjModel* m, mjData* d) const {
    std::copy(qpos.begin(), qpos.end(), d->qpos);
    std::copy(qvel.begin(), qvel.end(), d->qvel);
    std::copy(act.begin(), act.end(), d->act);
    std::copy(ctrl.begin(), ctrl.end(), d->ctrl);
    std::copy(warm.begin(), warm.end(), d->qacc_warmstart);
    d->time = time;
  }
};

// one (scene, solver) measurement
struct Result {
  std::string scene, solver;
  int bodies = 0, nv = 0, steps = 0;
  double contacts = 0;       // mean contacts over the timed steps
  double step_ms = 0;        // median wall time of ck_step
  double constraint_ms = 0;  // median time of the constraint stage (extraction, solve, write-back)
  double collision_ms = 0;   // median time of MuJoCo's mj_collision in the step
  double assembly_ms = 0;    // median time of MuJoCo's mj_makeConstraint (rows, Jacobian)
  bool ok = true;
};

double Median(std::vector<double> x) {
  if (x.empty()) return 0;
  std::nth_element(x.begin(), x.begin() + x.size() / 2, x.end());
  return x[x.size() / 2];
}

// least-squares slope of log(y) against log(x)
double LogSlope(const std::vector<double>& x, const std::vector<double>& y) {
  const int n = static_cast<int>(x.size());
  if (n < 2) return NAN;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int i = 0; i < n; i++) {
    const double lx = std::log(x[i]), ly = std::log(y[i]);
    sx += lx;
    sy += ly;
    sxx += lx * lx;
    sxy += lx * ly;
  }
  return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

Result Measure(mjModel* m, mjData* d, const State& settled, const Variant& v, int steps,
               double budget) {
  Result r;
  r.solver = v.name;
  r.bodies = m->nbody - 1;
  r.nv = m->nv;
  const int saved_solver = m->opt.solver;
  m->opt.solver = v.mj_solver;
  ckSettings s;
  ck_defaultSettings(&s);
  s.solver = v.solver;
  if (v.parallel_min > 0) s.comfree.parallel_min = v.parallel_min;
  if (v.anchor >= 0) s.comfree.anchor = v.anchor;
  s.deriv.enabled = 0;  // simulation only
  char err[1024] = "";
  ckHandle* ck = ck_make(m, &s, err, sizeof(err));
  if (!ck) {
    std::fprintf(stderr, "  %s: %s\n", v.name.c_str(), err);
    r.ok = false;
    m->opt.solver = saved_solver;
    return r;
  }
  settled.Restore(m, d);
  ck_step(ck, m, d);  // untimed: touch the workspace once
  settled.Restore(m, d);
  std::vector<double> times, stage, collision, assembly;
  double contacts = 0, spent = 0;
  for (int t = 0; t < steps && (t < 3 || spent < budget); t++) {
    d->timer[mjTIMER_POS_COLLISION].duration = 0;
    d->timer[mjTIMER_POS_MAKE].duration = 0;
    const auto t0 = std::chrono::steady_clock::now();
    ck_step(ck, m, d);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spent += dt;
    times.push_back(1e3 * dt);
    stage.push_back(1e3 * ck_stats(ck)->solve_time);
    collision.push_back(d->timer[mjTIMER_POS_COLLISION].duration);
    assembly.push_back(d->timer[mjTIMER_POS_MAKE].duration);
    contacts += ck_stats(ck)->ncon;
    for (int i = 0; i < m->nv; i++) {
      if (!std::isfinite(d->qvel[i])) r.ok = false;
    }
  }
  r.steps = static_cast<int>(times.size());
  r.contacts = contacts / r.steps;
  r.step_ms = Median(times);
  r.constraint_ms = Median(stage);
  r.collision_ms = Median(collision);
  r.assembly_ms = Median(assembly);
  for (int i = 0; i < mjNWARNING; i++) {
    if (d->warning[i].number) r.ok = false;
  }
  ck_free(ck);
  m->opt.solver = saved_solver;
  return r;
}

// MuJoCo's timers (d->timer) run only with a clock callback: milliseconds
mjtNum ClockMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool HaveGnuplot() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

void Plot(const std::string& png, const std::string& data,
          const std::vector<std::string>& solvers) {
  const std::string script = png + ".gp";
  std::ofstream gp(script);
  gp << "set terminal pngcairo noenhanced size 1400,650 font ',11'\n"
     << "set output '" << png << "'\n"
     << "set multiplot layout 1,2 title 'Stacked primitives, MuJoCo 2.2.2, one process: time "
        "against contacts'\n"
     << "set logscale xy\n"
     << "set grid\n"
     << "set key top left\n"
     << "set xlabel 'contacts'\n";
  for (int panel = 0; panel < 2; panel++) {
    gp << "set ylabel '"
       << (panel == 0 ? "ck_step (ms), collision included" : "constraint stage (ms)") << "'\nplot ";
    for (size_t i = 0; i < solvers.size(); i++) {
      gp << (i ? ", " : "") << "'" << data << "' index " << i << " using 1:" << 2 + panel
         << " with linespoints lw 2 pt 7 title '" << solvers[i] << "'";
    }
    gp << "\n";
  }
  gp << "unset multiplot\n";
  gp.close();
  const std::string cmd = "gnuplot '" + script + "'";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "ck-comfree-scaling: gnuplot failed; script left in %s\n", script.c_str());
    return;
  }
  std::remove(script.c_str());
  std::printf("plot: %s\n", png.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string sizes_arg = "3x2x1,3x3x2,5x4x3,6x6x4,7x7x4,8x8x4,8x8x6,8x8x8,7x7x14";
  std::string solvers_arg = "comfree,newton,pgs,ipm";
  std::string csv = "comfree_scaling.csv", png = "comfree_scaling.png";
  int settle = 1000, steps = 20;
  double budget = 15;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ck-comfree-scaling: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--sizes") {
      sizes_arg = value();
    } else if (a == "--solvers") {
      solvers_arg = value();
    } else if (a == "--settle") {
      settle = std::atoi(value().c_str());
    } else if (a == "--steps") {
      steps = std::atoi(value().c_str());
    } else if (a == "--budget") {
      budget = std::atof(value().c_str());
    } else if (a == "--csv") {
      csv = value();
    } else if (a == "--png") {
      png = value();
    } else {
      return Fail("unknown option '" + a + "'\n\n" + kUsage);
    }
  }
  if (settle < 0 || steps < 1 || !(budget > 0)) return Fail("bad --settle, --steps or --budget");

  std::vector<Size> sizes;
  for (const std::string& s : Split(sizes_arg, ',')) {
    Size z;
    if (std::sscanf(s.c_str(), "%dx%dx%d", &z.nx, &z.ny, &z.nl) != 3 || z.nx < 1 || z.ny < 1 ||
        z.nl < 1) {
      return Fail("bad size '" + s + "' (want NXxNYxLAYERS, e.g. 8x8x6)");
    }
    sizes.push_back(z);
  }
  std::vector<Variant> variants;
  for (const std::string& s : Split(solvers_arg, ',')) {
    Variant v;
    if (!MakeVariant(s, &v)) {
      return Fail(
          "unknown solver '" + s +
          "'; allowed: comfree, comfree_paper, comfree_serial, comfree_pgsmodel, newton, pgs, cg, "
          "ipm");
    }
    if (!ck_solverAvailable(v.solver)) {
      std::fprintf(stderr, "ck-comfree-scaling: %s is not in this build; skipped\n", s.c_str());
      continue;
    }
    variants.push_back(v);
  }
  if (variants.empty()) return Fail("no solver to time");

  // measure (MuJoCo's stage timers give the collision share of each step)
  if (!mjcb_time) mjcb_time = ClockMs;
  std::vector<Result> results;
  for (const Size& z : sizes) {
    std::string err;
    mjModel* m = contactkit::tools::LoadXMLString(
        contactkit::tools::StackedPrimitivesXML(z.nx, z.ny, z.nl, 0.002), &err);
    if (!m) return Fail(z.name() + ": " + err);
    mjData* d = mj_makeData(m);
    if (!d) return Fail(z.name() + ": could not make mjData");
    m->opt.solver = mjSOL_CG;
    std::fprintf(stderr, "%s: %d bodies, settling %d CG steps ...\n", z.name().c_str(),
                 static_cast<int>(m->nbody) - 1, settle);
    for (int t = 0; t < settle; t++) mj_step(m, d);
    State settled;
    settled.Save(m, d);
    for (const Variant& v : variants) {
      Result r = Measure(m, d, settled, v, steps, budget);
      r.scene = z.name();
      std::fprintf(stderr,
                   "  %-14s %7.0f contacts %9.3f ms/step (constraint stage %8.3f ms), %d steps%s\n",
                   v.name.c_str(), r.contacts, r.step_ms, r.constraint_ms, r.steps,
                   r.ok ? "" : "  [warnings or non-finite state]");
      results.push_back(r);
    }
    mj_deleteData(d);
    mj_deleteModel(m);
  }

  // table: one row per scene, step time per solver and ratios to comfree
  auto find = [&](const std::string& scene, const std::string& solver) -> const Result* {
    for (const Result& r : results) {
      if (r.scene == scene && r.solver == solver && r.ok && r.steps > 0) return &r;
    }
    return nullptr;
  };
  std::vector<std::string> header = {"scene", "bodies", "contacts"};
  for (const Variant& v : variants) header.push_back(v.name + " ms/step");
  header.push_back("comfree collision ms");
  header.push_back("comfree constraint ms");
  for (const Variant& v : variants) {
    if (v.name != "comfree") header.push_back(v.name + " / comfree");
  }
  std::vector<std::vector<std::string>> rows;
  for (const Size& z : sizes) {
    const Result* cf = find(z.name(), "comfree");
    std::vector<std::string> row = {z.name(), std::to_string(z.nx * z.ny * z.nl),
                                    cf ? Fmt(cf->contacts, "%.0f") : "-"};
    for (const Variant& v : variants) {
      const Result* r = find(z.name(), v.name);
      row.push_back(r ? Fmt(r->step_ms, "%.3f") : "-");
    }
    row.push_back(cf ? Fmt(cf->collision_ms, "%.3f") : "-");
    row.push_back(cf ? Fmt(cf->constraint_ms, "%.3f") : "-");
    for (const Variant& v : variants) {
      if (v.name == "comfree") continue;
      const Result* r = find(z.name(), v.name);
      row.push_back(r && cf ? Fmt(r->step_ms / cf->step_ms, "%.1f") : "-");
    }
    rows.push_back(row);
  }
  std::printf("%s\n", contactkit::tools::MarkdownTable(header, rows).c_str());

  // log-log slopes over the scenes: full step, step without MuJoCo's collision, constraint stage
  std::vector<std::vector<std::string>> slopes;
  double cf_slope = NAN, cf_nocol_slope = NAN, cf_stage_slope = NAN;
  for (const Variant& v : variants) {
    std::vector<double> x, y, yn, ys;
    for (const Size& z : sizes) {
      const Result* r = find(z.name(), v.name);
      if (r && r->contacts > 0) {
        x.push_back(r->contacts);
        y.push_back(r->step_ms);
        yn.push_back(r->step_ms - r->collision_ms);
        ys.push_back(r->constraint_ms);
      }
    }
    const double s1 = LogSlope(x, y), sn = LogSlope(x, yn), s2 = LogSlope(x, ys);
    if (v.name == "comfree") {
      cf_slope = s1;
      cf_nocol_slope = sn;
      cf_stage_slope = s2;
    }
    slopes.push_back({v.name, Fmt(s1, "%.2f"), Fmt(sn, "%.2f"), Fmt(s2, "%.2f"),
                      x.empty() ? "-" : Fmt(x.front(), "%.0f") + " .. " + Fmt(x.back(), "%.0f")});
  }
  std::printf("%s\n", contactkit::tools::MarkdownTable(
                          {"solver", "slope, step", "slope, step without collision",
                           "slope, constraint stage", "contacts"},
                          slopes)
                          .c_str());

  // comfree's step split by stage: time per contact at both ends of the range and each stage's
  // slope (MuJoCo's stages are the same for every solver; "rest" is kinematics, inertia,
  // velocity, actuation, smooth acceleration and the integrator)
  {
    std::vector<double> x;
    std::vector<std::vector<double>> part(5);
    const char* names[5] = {
        "MuJoCo collision (mj_collision)", "MuJoCo constraint assembly (mj_makeConstraint)",
        "contactkit constraint stage (extract, solve, write back)", "rest", "whole step"};
    for (const Size& z : sizes) {
      const Result* r = find(z.name(), "comfree");
      if (!r || r->contacts <= 0) continue;
      x.push_back(r->contacts);
      const double rest = r->step_ms - r->collision_ms - r->assembly_ms - r->constraint_ms;
      const double p[5] = {r->collision_ms, r->assembly_ms, r->constraint_ms, rest, r->step_ms};
      for (int k = 0; k < 5; k++) part[k].push_back(p[k]);
    }
    if (x.size() >= 2) {
      std::vector<std::vector<std::string>> split;
      for (int k = 0; k < 5; k++) {
        split.push_back({names[k], Fmt(1e3 * part[k].front() / x.front(), "%.2f"),
                         Fmt(1e3 * part[k].back() / x.back(), "%.2f"),
                         Fmt(LogSlope(x, part[k]), "%.2f")});
      }
      std::printf("%s\n", contactkit::tools::MarkdownTable(
                              {"comfree step, by stage", "us/contact at " + Fmt(x.front(), "%.0f"),
                               "us/contact at " + Fmt(x.back(), "%.0f"), "slope"},
                              split)
                              .c_str());

      // the floor MuJoCo's shared stages set: the step's slope if contactkit's stage and the rest
      // cost at every size what they cost per contact in the smallest scene
      const double own = (part[2].front() + part[3].front()) / x.front();
      std::vector<double> floor;
      for (size_t i = 0; i < x.size(); i++) floor.push_back(part[0][i] + part[1][i] + own * x[i]);
      std::printf(
          "MuJoCo's collision and assembly alone, with the rest at a constant cost per contact: "
          "slope %.2f\n",
          LogSlope(x, floor));
    }
  }

  // targets
  double worst = INFINITY;
  for (const Size& z : sizes) {
    const Result *cf = find(z.name(), "comfree"), *nt = find(z.name(), "newton");
    if (cf && nt && cf->contacts > 500) worst = std::min(worst, nt->step_ms / cf->step_ms);
  }
  std::printf(
      "target: comfree slope <= 1.1: step %.2f (without MuJoCo's collision %.2f), constraint "
      "stage %.2f\n",
      cf_slope, cf_nocol_slope, cf_stage_slope);
  if (std::isfinite(worst)) {
    std::printf(
        "target: comfree >= 3x faster than Newton above 500 contacts: smallest ratio %.1f\n",
        worst);
  }

  // CSV, and a data file grouped by solver for gnuplot
  std::ofstream out(csv);
  out << "scene,bodies,nv,solver,contacts,step_ms,collision_ms,assembly_ms,constraint_ms,steps,"
         "ok\n";
  for (const Result& r : results) {
    out << r.scene << "," << r.bodies << "," << r.nv << "," << r.solver << "," << r.contacts << ","
        << r.step_ms << "," << r.collision_ms << "," << r.assembly_ms << "," << r.constraint_ms
        << "," << r.steps << "," << (r.ok ? 1 : 0) << "\n";
  }
  out.close();
  std::printf("csv: %s\n", csv.c_str());
  if (!HaveGnuplot()) {
    std::printf("gnuplot not found: no plot (install gnuplot, or plot %s yourself)\n", csv.c_str());
    return 0;
  }
  const std::string data = png + ".dat";
  std::ofstream dat(data);
  std::vector<std::string> plotted;
  for (const Variant& v : variants) {
    if (!plotted.empty()) dat << "\n\n";
    dat << "# " << v.name << "\n";
    for (const Size& z : sizes) {
      const Result* r = find(z.name(), v.name);
      if (r) dat << r->contacts << " " << r->step_ms << " " << r->constraint_ms << "\n";
    }
    plotted.push_back(v.name);
  }
  dat.close();
  Plot(png, data, plotted);
  std::remove(data.c_str());
  return 0;
}
