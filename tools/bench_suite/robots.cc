// Copyright 2026 The contactkit developers.
#include "tools/bench_suite/robots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>

#include "contactkit/contactkit.h"
#include "tools/bench_suite/plot.h"
#include "tools/common/robot_suite.h"
#include "tools/common/tool_util.h"

namespace contactkit::bench {

using tools::Fmt;
using tools::SuiteCase;
using tools::SuiteJacobian;
using tools::SuiteResult;

namespace {

// "1.2e-05" or "-" for an unmeasured value
std::string Num(double v, const char* fmt = "%.2g") { return v < 0 ? "-" : Fmt(v, fmt); }

// what a model and solver measured over all cases
struct Summary {
  int cases = 0, diverged = 0, failed = 0;
  double penetration = 0, drift = -1, qvel = 0;
  double log_ratio[2] = {0, 0};  // sum of log(ck_step / mj_step) at h and 5h
  int nratio[2] = {0, 0};
  SuiteJacobian jac[2];  // at h and 5h

  double Ratio(int k) const {
    return nratio[k] ? std::exp(log_ratio[k] / nratio[k])
                     : std::numeric_limits<double>::quiet_NaN();
  }
};

// the suite's CSV files and the cases that break a bound
struct Log {
  std::ofstream csv, jcsv;
  std::string failures;
};

// one case of a model and solver, added to sum and to the log
void AddCase(mjModel* m, const tools::SuiteModel& model, const SuiteCase& c, Summary* sum,
             Log* log) {
  const SuiteResult r = tools::RunSuiteCase(m, model, c);
  const std::string fail = tools::SuiteFailure(r), sname = ck_solverName(c.solver);
  const double ratio = r.mujoco_step_time > 0 ? r.step_time / r.mujoco_step_time : -1;
  sum->cases++;
  sum->diverged += r.diverged || !r.error.empty();
  sum->failed += !fail.empty();
  if (!r.diverged && r.error.empty()) {
    sum->penetration = std::max(sum->penetration, r.max_penetration);
    sum->drift = std::max(sum->drift, r.rest_drift);
    sum->qvel = std::max(sum->qvel, r.max_qvel);
    const int k = c.timestep_scale == 1 ? 0 : 1;
    if (ratio > 0) {
      sum->log_ratio[k] += std::log(ratio);
      sum->nratio[k]++;
    }
  }
  const std::string what = model.name + " " + sname + " h x" + std::to_string(c.timestep_scale) +
                           " " + tools::SuiteStartName(c.start) + " " +
                           tools::SuiteControlName(c.control);
  if (!fail.empty()) log->failures += "- " + what + ": " + fail + "\n";
  log->csv << model.key << "," << sname << "," << m->opt.timestep * c.timestep_scale << ","
           << tools::SuiteStartName(c.start) << "," << tools::SuiteControlName(c.control) << ","
           << r.steps << "," << (r.diverged || !r.error.empty()) << "," << r.max_qvel << ","
           << r.max_penetration << "," << r.rest_drift << "," << r.inexact << "," << r.step_time
           << "," << r.mujoco_step_time << "," << ratio << ",\"" << fail << "\"\n";
}

// the Jacobian at the state after a short settle from the keyframe, added to sum and the log
void AddJacobian(mjModel* m, const tools::SuiteModel& model, int solver, int scale, Summary* sum,
                 Log* log) {
  const std::string sname = ck_solverName(solver);
  SuiteJacobian& j = sum->jac[scale == 1 ? 0 : 1];
  j = tools::CheckSuiteJacobian(m, solver, scale, tools::kSuiteJacobianSettle);
  const double bound = tools::SuiteJacobianBound(solver);
  log->jcsv << model.key << "," << sname << "," << m->opt.timestep * scale << "," << j.ncon << ","
            << j.method << "," << j.error_A << "," << j.error_B << "," << bound << "\n";
  const std::string what = model.name + " " + sname + " Jacobian at h x" + std::to_string(scale) +
                           " (" + std::to_string(j.ncon) + " contacts)";
  if (!j.error.empty()) {
    log->failures += "- " + what + ": " + j.error + "\n";
    sum->failed++;
  } else if (j.error_A > bound || j.error_B > bound) {
    log->failures += "- " + what + ": relative error A " + Fmt(j.error_A, "%.2g") + ", B " +
                     Fmt(j.error_B, "%.2g") + " (bound " + Fmt(bound, "%.0g") + ")\n";
    sum->failed++;
  }
}

// every case of a model and solver: timesteps h and 5h, starts, controls, and the Jacobians
Summary RunModel(mjModel* m, const tools::SuiteModel& model, int solver, double duration,
                 double rest_window, Log* log) {
  Summary sum;
  for (int scale : {1, 5}) {
    for (tools::SuiteStart start : {tools::kStartKeyframe, tools::kStartDrop}) {
      if (start == tools::kStartDrop && !tools::HasFreeBody(m)) continue;  // nothing to drop
      for (tools::SuiteControl control : {tools::kControlHeld, tools::kControlRandom}) {
        SuiteCase c;
        c.solver = solver;
        c.timestep_scale = scale;
        c.start = start;
        c.control = control;
        c.duration = duration;
        c.rest_window = rest_window;
        c.time_mujoco = true;
        AddCase(m, model, c, &sum, log);
      }
    }
    AddJacobian(m, model, solver, scale, &sum, log);
  }
  return sum;
}

// a model and solver's table row
std::vector<std::string> Row(const std::string& model, int solver, const mjModel* m,
                             const Summary& sum) {
  auto jac = [](const SuiteJacobian& j) {
    if (!j.error.empty()) return std::string("error");
    return Num(j.error_A) + " / " + Num(j.error_B) + (j.method == 1 ? " (fd)" : "");
  };
  return {model,
          ck_solverName(solver),
          Fmt(m->opt.timestep, "%g"),
          std::to_string(sum.diverged) + " / " + std::to_string(sum.cases),
          Fmt(1e3 * sum.penetration, "%.3g"),
          Num(1e3 * sum.drift, "%.2g"),
          Fmt(sum.qvel, "%.3g"),
          jac(sum.jac[0]),
          jac(sum.jac[1]),
          Fmt(sum.Ratio(0), "%.2f"),
          Fmt(sum.Ratio(1), "%.2f"),
          sum.failed ? "FAIL (" + std::to_string(sum.failed) + ")" : "pass"};
}

// what the table's columns measure
std::string Notes(double duration, double rest_window) {
  return "Each model with each solver, at its own timestep h and at 5h, from its keyframe (the "
         "default pose without one) and from a drop (free bodies raised " +
         Fmt(100 * tools::kSuiteDropHeight, "%g") +
         " cm from there; models without a free body have no drop), with held controls (the "
         "keyframe's; the X2's motors off in its drop) and random ones (uniform in the control "
         "range, redrawn every 20 ms): up to 8 cases of " +
         Fmt(duration, "%g") +
         " s simulated. Diverged: a MuJoCo reset warning, a non-finite state or |qvel| > " +
         Fmt(tools::kSuiteMaxQvel, "%g") +
         ". Penetration: the deepest contact over the cases that did not diverge. Drift (models "
         "that come to rest): the "
         "furthest any body moves in the last " +
         Fmt(rest_window, "%g") + " s of a held-control run (bound " +
         Fmt(1e3 * tools::kSuiteRestDrift, "%g") +
         " mm). Jacobian: relative Frobenius error of A / B from ck_transitionJac against "
         "ck_transitionFD (eps 1e-6; per column the nearest of the centered and the two one-sided "
         "differences, since at a kink of the step the analytic derivative is a one-sided one; "
         "relative to max(norm, 1e-6)) after " +
         Fmt(tools::kSuiteJacobianSettle, "%g") +
         " s from the keyframe with held controls (bound " +
         Fmt(tools::SuiteJacobianBound(ckSOL_MUJOCO), "%g") +
         "); MuJoCo's solver tightened to convergence, ipm at kappa_grad = kappa_tol; (fd): the "
         "analytic path fell back to differences. Penetration bound (held controls only): mujoco " +
         Fmt(1e3 * tools::SuitePenetrationBound(ckSOL_MUJOCO, 0), "%g") + " mm, ipm and lcp " +
         Fmt(1e3 * tools::SuitePenetrationBound(ckSOL_IPM, 0), "%g") + " mm, comfree " +
         Fmt(1e3 * tools::SuitePenetrationBound(ckSOL_COMFREE, 0), "%g") +
         " mm, plus 4 m/s times the timestep. Time: geometric mean over the cases that did not "
         "diverge of ck_step's time over mj_step's on the same case in the same process.\n";
}

}  // namespace

int RobotsBench(const RobotsOptions& o, std::string* report) {
  const double duration = o.quick ? 1 : 3, rest_window = o.quick ? 0.25 : 0.5;
  std::vector<std::string> absent;
  const std::vector<tools::SuiteModel> models =
      tools::SuiteModels(o.models_dir, tools::MujocoModelsDir(), &absent);
  Log log;
  log.csv.open(o.out + "/robots.csv");
  log.csv << "model,solver,timestep,start,controls,steps,diverged,max_qvel,max_penetration_m,"
             "rest_drift_m,inexact,step_s,mj_step_s,ratio,failure\n";
  log.jcsv.open(o.out + "/robots_jacobian.csv");
  log.jcsv << "model,solver,timestep,ncon,method,error_A,error_B,bound\n";

  // gnuplot titles are single-quoted: no apostrophes
  PlotSpec time_plot{
      "ck_step time / mj_step time at h (geometric mean over the cases; no bar: every case "
      "diverged)",
      "",
      "ratio",
      false,
      true,
      {},
      {},
      true};
  PlotSpec pen_plot{"deepest penetration over all cases that did not diverge",
                    "",
                    "max penetration (mm)",
                    false,
                    true,
                    {},
                    {},
                    true};
  for (int solver : o.solvers) {
    time_plot.series.push_back({ck_solverName(solver), {}, {}});
    pen_plot.series.push_back({ck_solverName(solver), {}, {}});
  }

  // every model with every solver
  std::vector<std::vector<std::string>> rows;
  const int total = static_cast<int>(models.size() * o.solvers.size());
  int done = 0;
  for (const tools::SuiteModel& model : models) {
    std::string err;
    mjModel* m = tools::LoadModel(model.path, &err);
    if (!m) {
      std::fprintf(stderr, "ck-bench: %s\n", err.c_str());
      return 2;
    }
    time_plot.xtics.push_back(model.name);
    pen_plot.xtics.push_back(model.name);
    for (size_t si = 0; si < o.solvers.size(); si++) {
      const Summary sum = RunModel(m, model, o.solvers[si], duration, rest_window, &log);
      rows.push_back(Row(model.name, o.solvers[si], m, sum));
      time_plot.series[si].y.push_back(sum.Ratio(0));
      pen_plot.series[si].y.push_back(sum.diverged == sum.cases ? std::nan("")
                                                                : 1e3 * sum.penetration);
      if (o.progress) tools::Progress("robots", ++done, total);
    }
    mj_deleteModel(m);
  }
  if (o.progress) std::fprintf(stderr, "\n");

  // table, notes, plots
  std::string notes = Notes(duration, rest_window);
  for (const std::string& a : absent) notes += "\nSkipped (absent): " + a + "\n";
  if (!log.failures.empty()) notes += "\nCases that break a bound:\n\n" + log.failures;
  const std::string table =
      tools::MarkdownTable({"model", "solver", "h (s)", "diverged", "pen. (mm)", "drift (mm)",
                            "max abs qvel", "Jac. err A / B (h)", "Jac. err A / B (5h)",
                            "time / mj_step (h)", "time / mj_step (5h)", "verdict"},
                           rows);
  std::string text = "### Robot suite: every model, solver and case\n\n" + table + "\n" + notes;
  if (o.plots) {
    std::string perr;
    for (const auto& [name, spec] : {std::make_pair("robots_time", &time_plot),
                                     std::make_pair("robots_penetration", &pen_plot)}) {
      if (Plot(o.out + "/" + name + ".png", *spec, &perr)) {
        text += "\n![" + std::string(name) + "](" + name + ".png)\n";
      } else {
        std::fprintf(stderr, "ck-bench: plot %s skipped: %s\n", name, perr.c_str());
      }
    }
  }
  std::ofstream(o.out + "/robots.md") << text;
  std::printf("\n%s\n", text.c_str());
  std::fflush(stdout);
  *report += text + "\n";
  return 0;
}

}  // namespace contactkit::bench
