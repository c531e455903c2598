// Copyright 2026 The contactkit developers.
#include "tools/common/bench_measure.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tools/common/divergence.h"
#include "tools/common/gen_stack.h"
#include "tools/common/tool_util.h"

namespace contactkit::tools {
namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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

}  // namespace

double Median(std::vector<double> x) {
  if (x.empty()) return 0;
  std::nth_element(x.begin(), x.begin() + x.size() / 2, x.end());
  return x[x.size() / 2];
}

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

StageTiming MeasureStages(mjModel* m, mjData* d, const ckSettings& settings, int mj_solver,
                          int steps, double budget) {
  StageTiming r;
  const int saved_solver = m->opt.solver;
  m->opt.solver = mj_solver;
  char err[1024] = "";
  ckHandle* ck = ck_make(m, &settings, err, sizeof(err));
  if (!ck) {
    r.error = err;
    r.ok = false;
    m->opt.solver = saved_solver;
    return r;
  }
  State start;
  start.Save(m, d);
  ck_step(ck, m, d);  // untimed: touch the workspace once
  start.Restore(m, d);
  std::vector<double> times, stage, collision, assembly;
  double contacts = 0, spent = 0;
  DivergenceCheck divergence;
  divergence.Start(d);
  for (int t = 0; t < steps && (t < 3 || spent < budget) && !divergence.diverged(); t++) {
    d->timer[mjTIMER_POS_COLLISION].duration = 0;
    d->timer[mjTIMER_POS_MAKE].duration = 0;
    const auto t0 = std::chrono::steady_clock::now();
    ck_step(ck, m, d);
    const double dt = Seconds(t0);
    spent += dt;
    times.push_back(1e3 * dt);
    stage.push_back(1e3 * ck_stats(ck)->solve_time);
    collision.push_back(d->timer[mjTIMER_POS_COLLISION].duration);
    assembly.push_back(d->timer[mjTIMER_POS_MAKE].duration);
    contacts += ck_stats(ck)->ncon;
    divergence.Check(m, d, t);
  }
  if (divergence.diverged()) {
    r.ok = false;
    r.error = divergence.reason();
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
  start.Restore(m, d);
  m->opt.solver = saved_solver;
  return r;
}

mjModel* LoadXMLString(const std::string& xml, std::string* error) {
  char err[1024] = "";
  mjModel* m = ck_loadXMLString(xml.c_str(), err, sizeof(err));
  if (!m) *error = err;
  return m;
}

PenetrationStats MeasurePenetration(mjModel* m, const ckSettings& settings, int steps,
                                    bool progress) {
  PenetrationStats ps;
  double sum = 0, sum2 = 0;
  RunOptions opts;
  opts.steps = steps;
  opts.progress = progress;
  opts.on_step = [&](const mjModel*, const mjData* d, const ckHandle*, int) {
    for (int i = 0; i < d->ncon; i++) {
      const double depth = std::max(0.0, -static_cast<double>(d->contact[i].dist));
      sum += depth;
      sum2 += depth * depth;
      ps.max = std::max(ps.max, depth);
      ps.samples++;
    }
  };
  const RunStats rs = Run(m, settings, opts);
  ps.error = rs.error;
  ps.diverged = rs.diverged;
  ps.why = rs.why;
  ps.step_time = rs.step_time;
  if (ps.samples > 0) {
    ps.mean = sum / static_cast<double>(ps.samples);
    ps.std = std::sqrt(std::max(0.0, sum2 / static_cast<double>(ps.samples) - ps.mean * ps.mean));
  }
  return ps;
}

ScalingPoint MeasureStackScaling(int nx, int ny, int nlayers, const ckSettings& settings,
                                 int warmup, int steps) {
  ScalingPoint sp;
  sp.nbody = nx * ny * nlayers;
  mjModel* m = LoadXMLString(StackedPrimitivesXML(nx, ny, nlayers, 0.002), &sp.error);
  if (!m) return sp;
  m->opt.solver = mjSOL_CG;
  double contacts = 0, step_time = 0, solve_time = 0;
  RunOptions opts;
  opts.steps = warmup + steps;
  // wall time between consecutive callbacks: one whole step (collision, solve, integration)
  auto last = std::chrono::steady_clock::now();
  opts.on_step = [&](const mjModel*, const mjData*, const ckHandle* ck, int t) {
    if (t >= warmup) {
      const ckStats* st = ck_stats(ck);
      contacts += st->ncon;
      solve_time += st->solve_time;
      step_time += Seconds(last);
    }
    last = std::chrono::steady_clock::now();
  };
  const RunStats rs = Run(m, settings, opts);
  sp.error = rs.error;
  sp.diverged = rs.diverged;
  sp.why = rs.why;
  if (rs.error.empty() && steps > 0) {
    sp.contacts = contacts / steps;
    sp.solve_time = solve_time / steps;
    sp.step_time = step_time / steps;
  }
  mj_deleteModel(m);
  return sp;
}

JacobianTiming MeasureJacobians(mjModel* m, const ckSettings& settings, int warmup, int states,
                                bool centered) {
  JacobianTiming jt;
  char err[1024] = "";
  ckHandle* ck = ck_make(m, &settings, err, sizeof(err));
  if (!ck) {
    jt.error = err;
    return jt;
  }
  mjData* d = mj_makeData(m);
  if (m->nkey > 0) mj_resetDataKeyframe(m, d, 0);
  const int nx = 2 * m->nv + m->na;
  std::vector<mjtNum> A(static_cast<size_t>(nx) * nx), B(static_cast<size_t>(nx) * m->nu + 1);
  const mjtNum eps = 1e-6;
  double t_mj = 0, t_ours = 0, t_ours_fd = 0, contacts = 0;
  bool have = true;  // our Jacobians succeeded at every state so far
  DivergenceCheck divergence;
  divergence.Start(d);
  for (int s = 0; s < warmup + states && !divergence.diverged(); s++) {
    ck_step(ck, m, d);
    if (divergence.Check(m, d, s) || s < warmup) continue;
    contacts += d->ncon;
    auto t0 = std::chrono::steady_clock::now();
    mjd_transitionFD(m, d, eps, centered ? 1 : 0, A.data(), B.data(), nullptr, nullptr);
    t_mj += Seconds(t0);
    if (have) {
      t0 = std::chrono::steady_clock::now();
      have = ck_transitionJac(ck, m, d, A.data(), B.data(), nullptr, nullptr) == 0;
      t_ours += Seconds(t0);
      t0 = std::chrono::steady_clock::now();
      have = have && ck_transitionFD(ck, m, d, eps, centered ? 1 : 0, A.data(), B.data(), nullptr,
                                     nullptr) == 0;
      t_ours_fd += Seconds(t0);
    }
  }
  jt.diverged = divergence.diverged();
  jt.why = divergence.reason();
  const double n = std::max(1, states);
  jt.mujoco_fd = t_mj / n;
  if (have) {
    jt.ours = t_ours / n;
    jt.ours_fd = t_ours_fd / n;
  }
  jt.contacts = contacts / n;
  mj_deleteData(d);
  ck_free(ck);
  return jt;
}

}  // namespace contactkit::tools
