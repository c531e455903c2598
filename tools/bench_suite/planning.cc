// Copyright 2026 The contactkit developers.
#include "tools/bench_suite/planning.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "contactkit/contactkit.h"
#include "tools/bench_suite/plot.h"
#include "tools/common/ilqr.h"
#include "tools/common/tool_util.h"

namespace contactkit::bench {

using tools::Fmt;

namespace {

// a planning task: model, horizon at h = 0.01, goal, weights; with cfd, every source runs without
// and with contacts from distance
struct Task {
  std::string name, model;
  tools::IlqrTask task;
  bool cfd = false;
  int settle = 0;    // > 0: from keyframe 0, held for this many steps of the source's own
                     // dynamics; the goal is then the settled state moved by shift along x and
                     // the nominal controls the keyframe's
  double shift = 0;  // (m)
  int quick_iterations = 20;  // iterations with --quick
};

// Dojo's planar box: a 1 kg box resting on the floor (mu 0.5), moved 1 m right or up in 1 s,
// controls (push, thrust at its centre) from zero
Task Box(bool up) {
  Task t{up ? "box up" : "box right", "pushed_box.xml", {}};
  t.task.goal_qpos = {up ? 0.0 : 1.0, 0, up ? 1.1 : 0.1, 1, 0, 0, 0};
  t.task.goal_qvel.assign(6, 0.0);
  t.task.q.assign(12, 0.0);
  t.task.r = {1e-2, 1e-2};
  t.task.constrained = {0, 1, 2, 6, 7, 8};
  return t;
}

// the planar hopper: 0.5 m forward in 1 s, its torso 0.2 m higher half way (a hop), from zero
// controls
Task Hopper() {
  Task t{"hopper", "hopper.xml", {}};
  t.task.goal_qpos = {0.5, 0, 0, 0, 0, 0};
  t.task.goal_qvel.assign(6, 0.0);
  t.task.q = {0, 0, 1e-2, 1e-2, 1e-2, 1e-2, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 1e-3};
  t.task.r = {1e-1, 1e-1, 1e-1};
  t.task.constrained = {0, 1, 2};
  t.task.waypoint_step = 50;
  t.task.waypoint_qpos = {0.25, 0.2, 0, 0, 0, 0};
  t.task.waypoint_q = {0, 10, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  return t;
}

// DiffMJX's push from a distance: a pusher 0.15 m from a box (no gravity, no floor) must bring
// the box 0.3 m forward in 1 s; apart, no contact is reported and every Jacobian is zero between
// them unless contacts from distance (cfd_width 0.2) give one
Task Push() {
  Task t{"push", "pusher_box.xml", {}, true};
  t.task.goal_qpos = {0, 0.3};
  t.task.goal_qvel = {0, 0};
  t.task.q = {0, 0, 0, 0};
  t.task.r = {1e-2};
  t.task.constrained = {1};
  return t;
}

// the Menagerie Unitree A1 standing on its keyframe shifts its trunk 5 cm forward in 1 s and
// stops there, feet kept where they are by friction (a quadruped's body shift, without a gait):
// trunk position and linear velocity constrained, orientation and joints weighted, controls (its
// position servos' targets) centred on the keyframe's
Task Quadruped(const std::string& menagerie) {
  Task t{"quadruped", menagerie + "/unitree_a1/scene_mj222.xml", {}};
  const int nv = 18;
  t.task.q.assign(2 * nv, 0.0);
  for (int i = 3; i < 6; i++) t.task.q[i] = 1;
  for (int i = 6; i < nv; i++) t.task.q[i] = 0.1;
  for (int i = nv; i < 2 * nv; i++) t.task.q[i] = 1e-3;
  t.task.r.assign(12, 0.1);
  t.task.constrained = {0, 1, 2, nv, nv + 1, nv + 2};
  t.settle = 50;
  t.shift = 0.05;
  t.quick_iterations = 3;
  return t;
}

// a gradient source: a solver with settings, or MuJoCo's differences of mj_step
struct Source {
  std::string name;
  int solver;             // -1: MuJoCo's mjd_transitionFD on mj_step
  double kappa_grad = 0;  // ipm: > 0 this value, < 0 kappa_tol
  int anchor = -1;        // comfree: 0 or 1 (-1: default)
  bool adam = false;      // Adam on ck_rolloutGrad's gradients instead of iLQR
  bool aware = false;     // complementarity_aware
};

std::vector<Source> Sources(const std::vector<int>& solvers) {
  std::vector<Source> out;
  for (int s : solvers) {
    if (s == ckSOL_IPM) {
      out.push_back({"ipm (kappa_grad 1e-2)", s, 1e-2});
      out.push_back({"ipm (kappa_grad = kappa_tol)", s, -1});
    } else if (s == ckSOL_COMFREE) {
      out.push_back({"comfree", s});
      out.push_back({"comfree (anchor 0)", s, 0, 0});
      out.push_back({"comfree anchor 0 (complementarity-aware)", s, 0, 0, false, true});
    } else {
      out.push_back({ck_solverName(s), s});
    }
    // ck_transitionJacAware with the cost-to-go gradient as its direction
    if (s == ckSOL_LCP) out.push_back({"lcp (complementarity-aware)", s, 0, -1, false, true});
    if (s == ckSOL_MUJOCO) out.push_back({"mujoco (complementarity-aware)", s, 0, -1, false, true});
    if (s == ckSOL_IPM) {
      out.push_back({"ipm kappa_grad 1e-2 (complementarity-aware)", s, 1e-2, -1, false, true});
    }
  }
  out.push_back({"MuJoCo mjd_transitionFD", -1});
  // reverse mode: Adam over whole rollouts (comfree without anchors: ck_rolloutGrad refuses them)
  for (int s : solvers) {
    if (s == ckSOL_IPM) {
      out.push_back({"Adam: ipm (kappa_grad 1e-2)", s, 1e-2, -1, true});
    } else if (s == ckSOL_COMFREE) {
      out.push_back({"Adam: comfree (anchor 0)", s, 0, 0, true});
      out.push_back({"Adam: comfree anchor 0 (complementarity-aware)", s, 0, 0, true, true});
    } else {
      out.push_back({std::string("Adam: ") + ck_solverName(s), s, 0, -1, true});
    }
    if (s == ckSOL_LCP) out.push_back({"Adam: lcp (complementarity-aware)", s, 0, -1, true, true});
    if (s == ckSOL_MUJOCO) {
      out.push_back({"Adam: mujoco (complementarity-aware)", s, 0, -1, true, true});
    }
  }
  return out;
}

// one task with one source: the iLQR result, or an error message in r.error with r.iterations -1
tools::IlqrResult RunOne(const Task& task, const Source& src, double cfd_width,
                         const tools::IlqrOptions& options) {
  tools::IlqrResult r;
  std::string err;
  mjModel* m = tools::LoadModel(task.model, &err);
  if (!m) {
    r.error = err;
    r.iterations = -1;
    return r;
  }
  m->opt.timestep = 0.01;
  mjData* d = mj_makeData(m);
  if (task.settle > 0) mj_resetDataKeyframe(m, d, 0);
  mj_forward(m, d);
  ckHandle* ck = nullptr;
  if (src.solver >= 0) {
    ckSettings s;
    ck_defaultSettings(&s);
    s.solver = src.solver;
    if (src.kappa_grad > 0) s.ipm.kappa_grad = src.kappa_grad;
    if (src.kappa_grad < 0) s.ipm.kappa_grad = s.ipm.kappa_tol;
    if (src.anchor >= 0) s.comfree.anchor = src.anchor;
    s.deriv.complementarity_aware = src.aware;
    s.deriv.cfd_width = cfd_width;
    char cerr[512];
    ck = ck_make(m, &s, cerr, sizeof(cerr));
    if (!ck) r.error = cerr;
  }
  tools::IlqrTask goal = task.task;
  if (r.error.empty() && task.settle > 0) {
    goal.nominal_ctrl.assign(d->ctrl, d->ctrl + m->nu);
    for (int t = 0; t < task.settle; t++) {
      if (ck) {
        ck_step(ck, m, d);
      } else {
        mj_step(m, d);
      }
    }
    d->time = 0;
    goal.goal_qpos.assign(d->qpos, d->qpos + m->nq);
    goal.goal_qpos[0] += task.shift;
    goal.goal_qvel.assign(m->nv, 0.0);
  }
  if (r.error.empty() && src.adam) {
    tools::IlqrOptions adam = options;
    adam.max_iterations = options.max_iterations < 200 ? std::min(15, options.max_iterations) : 300;
    adam.max_outer = 5;
    r = tools::RunAdam(m, d, ck, goal, adam);
  } else if (r.error.empty()) {
    const tools::IlqrSource source = src.solver < 0 ? tools::kIlqrMujocoFD
                                     : src.aware    ? tools::kIlqrContactkitAware
                                                    : tools::kIlqrContactkit;
    r = tools::RunIlqr(m, d, ck, source, goal, options);
  } else {
    r.iterations = -1;
  }
  if (ck) ck_free(ck);
  mj_deleteData(d);
  mj_deleteModel(m);
  return r;
}

}  // namespace

int PlanningBench(const PlanningOptions& o, std::string* report) {
  std::vector<Task> tasks = {Box(false), Box(true), Hopper(), Push()};
  const Task quadruped = Quadruped(o.menagerie);
  if (o.menagerie.empty()) {
    std::fprintf(stderr,
                 "ck-bench: skipping the quadruped: no Menagerie folder (--menagerie or "
                 "CK_MENAGERIE)\n");
  } else if (access(quadruped.model.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "ck-bench: skipping the quadruped: %s is absent\n",
                 quadruped.model.c_str());
  } else {
    tasks.push_back(quadruped);
  }
  const std::vector<Source> sources = Sources(o.solvers);
  std::ofstream csv(o.out + "/dojo_planning.csv");
  csv << "task,source,cost,violation,iterations,seconds,derivative_seconds,status\n";
  std::vector<std::vector<std::string>> rows;
  int total = 0, done = 0;
  std::string stopped;  // runs that ended on an error, with it
  for (const Task& task : tasks) {
    for (const Source& src : sources) total += task.cfd && src.solver >= 0 ? 2 : 1;
  }
  tools::IlqrOptions options;
  for (const Task& task : tasks) {
    options.max_iterations = o.quick ? task.quick_iterations : tools::IlqrOptions().max_iterations;
    PlotSpec spec{"iLQR on " + task.name + ": goal violation against iteration",
                  "iteration",
                  "goal violation (max |entry|)",
                  false,
                  true,
                  {},
                  {}};
    for (const Source& src : sources) {
      for (double cfd : {0.0, 0.2}) {
        if (cfd > 0 && !(task.cfd && src.solver >= 0)) continue;
        const tools::IlqrResult r = RunOne(task, src, cfd, options);
        if (r.iterations < 0) {
          std::fprintf(stderr, "ck-bench: %s\n", r.error.c_str());
          return 2;
        }
        const std::string name = src.name + (cfd > 0 ? " + cfd_width 0.2" : "");
        const bool nan = r.error.find("not finite") != std::string::npos;
        const bool exploded = r.error.find("exploded") != std::string::npos;
        const std::string status = r.diverged && nan                     ? "gradient not finite"
                                   : r.diverged && exploded              ? "gradient exploded"
                                   : r.diverged                          ? "diverged"
                                   : r.violation < options.violation_tol ? "ok"
                                                                         : "failure";
        csv << task.name << "," << name << "," << r.cost << "," << r.violation << ","
            << r.iterations << "," << r.seconds << "," << r.deriv_seconds << "," << status << "\n";
        // a run that diverged or lost its gradient has no time or cost to show: its reason is
        // listed under the table
        if (r.diverged) {
          rows.push_back({task.name, name, "-", "-", std::to_string(r.iterations), "-", "-",
                          status == "diverged" ? "DIVERGED" : status});
        } else {
          rows.push_back({task.name, name, Fmt(r.cost), Fmt(r.violation, "%.1e"),
                          std::to_string(r.iterations), Fmt(r.seconds, "%.2f"),
                          Fmt(r.deriv_seconds, "%.2f"), status});
        }
        if (!r.error.empty()) stopped += "- " + task.name + ", " + name + ": " + r.error + "\n";
        Series series{name, {}, {}};
        for (size_t i = 0; i < r.violations.size(); i++) {
          series.x.push_back(static_cast<double>(i + 1));
          series.y.push_back(std::max(r.violations[i], 1e-6));
        }
        spec.series.push_back(series);
        if (o.progress) tools::Progress("dojo-planning", ++done, total);
      }
    }
    std::string name = "dojo_planning_" + task.name;
    for (char& c : name) c = c == ' ' ? '_' : c;
    std::string perr;
    if (o.plots && !Plot(o.out + "/" + name + ".png", spec, &perr)) {
      std::fprintf(stderr, "ck-bench: plot %s skipped: %s\n", name.c_str(), perr.c_str());
    }
  }
  if (o.progress) tools::ClearProgress();
  const std::string table =
      tools::MarkdownTable({"task", "gradients", "cost", "violation", "iterations", "time (s)",
                            "in derivatives (s)", "status"},
                           rows);
  std::string text =
      "### Planning with iLQR (Dojo Table III)\n\n" + table +
      "\niLQR with an augmented Lagrangian on the goal (tools/common/ilqr.h), h = 0.01, 1 s, "
      "controls from zero; the dynamics are each solver's ck_step (MuJoCo's mj_step for "
      "mjd_transitionFD, forward differences, eps 1e-6). Adam: the same problem by Adam on the "
      "controls with ck_rolloutGrad's reverse-mode gradient. status: ok = goal violation below " +
      Fmt(options.violation_tol) + ", failure = not reached within " +
      std::to_string(options.max_iterations) +
      " iterations (Adam: " + std::to_string(options.max_iterations < 200 ? 15 : 300) +
      " gradients). Dojo reports box right 14.5 (D) / 13.5 (M), box up 14.5 (D) / failure "
      "(M), hopper 8.9 (D) / 26.7 (M), with its own models and costs. push: a pusher 0.15 m "
      "from a box brings it 0.3 m forward (DiffMJX), each solver also with cfd_width 0.2.\n";
  if (!stopped.empty()) text += "\nRuns that stopped on an error:\n" + stopped;
  std::printf("\n%s\n", text.c_str());
  *report += text + "\n";
  return 0;
}

}  // namespace contactkit::bench
