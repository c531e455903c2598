// Copyright 2026 The contactkit developers.
#include "tools/common/tool_util.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace contactkit::tools {
namespace {

bool Exists(const std::string& p) { return access(p.c_str(), R_OK) == 0; }

double Energy(const mjData* d) { return d->energy[0] + d->energy[1]; }

bool Finite(const mjtNum* x, int n) {
  for (int i = 0; i < n; i++) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

}  // namespace

std::string MujocoModelsDir() {
  const char* env = std::getenv("CK_MUJOCO_MODELS");
  return env && env[0] ? env : CK_MUJOCO_MODELS;
}

std::string ResolveModel(const std::string& arg) {
  if (Exists(arg)) return arg;
  const std::string src = CK_SOURCE_DIR;
  const std::string mj = MujocoModelsDir();
  const std::vector<std::string> candidates = {
      src + "/mjcf_models/" + arg,
      src + "/mjcf_models/" + arg + ".xml",
      mj + "/" + arg + "/" + arg + ".xml",
      mj + "/humanoid/" + arg + ".xml",
      mj + "/" + arg,
  };
  for (const std::string& c : candidates) {
    if (Exists(c)) return c;
  }
  return arg;
}

mjModel* LoadModel(const std::string& arg, std::string* error) {
  const std::string path = ResolveModel(arg);
  if (!Exists(path)) {
    *error =
        "model '" + arg +
        "' not found (give a path, a bundled model name such as "
        "box_sliding, or humanoid / humanoid100 / 22_humanoids from MuJoCo's example models in '" +
        MujocoModelsDir() + "', set by the environment variable CK_MUJOCO_MODELS)";
    return nullptr;
  }
  char err[1024] = "";
  mjModel* m = ck_loadXML(path.c_str(), nullptr, err, sizeof(err));
  if (!m) *error = path + ": " + err;
  return m;
}

RunStats Run(mjModel* m, const ckSettings& settings, const RunOptions& opts) {
  RunStats st;
  st.solver = ck_solverName(settings.solver);
  if (opts.timestep > 0) m->opt.timestep = opts.timestep;
  const int saved_flags = m->opt.enableflags;
  m->opt.enableflags |= mjENBL_ENERGY;

  char err[1024] = "";
  ckSettings sim = settings;
  sim.deriv.enabled = 0;  // a run takes no derivatives: no workspace for them
  ckHandle* ck = ck_make(m, &sim, err, sizeof(err));
  if (!ck) {
    st.error = err;
    m->opt.enableflags = saved_flags;
    return st;
  }
  mjData* d = mj_makeData(m);
  const int key = opts.keyframe >= 0 ? opts.keyframe : (m->nkey > 0 ? 0 : -1);
  if (key >= 0 && key < m->nkey) mj_resetDataKeyframe(m, d, key);
  mj_forward(m, d);
  const double e0 = Energy(d);

  std::ofstream csv;
  if (!opts.csv.empty()) {
    csv.open(opts.csv);
    csv << "step,time,contacts,max_penetration,iterations,status,energy,step_time\n";
  }

  std::vector<int> iters;
  iters.reserve(opts.steps);
  double total_time = 0, contacts = 0;
  for (int t = 0; t < opts.steps; t++) {
    const auto t0 = std::chrono::steady_clock::now();
    ck_step(ck, m, d);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total_time += dt;
    const ckStats* s = ck_stats(ck);
    contacts += s->ncon;
    st.max_contacts = std::max(st.max_contacts, s->ncon);
    st.max_penetration = std::max(st.max_penetration, static_cast<double>(s->max_penetration));
    iters.push_back(s->iterations);
    st.inexact += s->status != ckSTATUS_SOLVED;
    st.energy_drift = std::max(st.energy_drift, std::fabs(Energy(d) - e0));
    st.steps = t + 1;
    if (csv.is_open()) {
      csv << t << "," << d->time << "," << s->ncon << "," << s->max_penetration << ","
          << s->iterations << "," << s->status << "," << Energy(d) << "," << dt << "\n";
    }
    if (opts.on_step) opts.on_step(m, d, ck, t);
    if (opts.progress && (t % 50 == 0 || t + 1 == opts.steps))
      Progress(st.solver, t + 1, opts.steps);
    if (!Finite(d->qpos, m->nq) || !Finite(d->qvel, m->nv) || d->warning[mjWARN_BADQACC].number ||
        d->warning[mjWARN_BADQVEL].number || d->warning[mjWARN_BADQPOS].number) {
      st.diverged = true;
    }
  }
  if (opts.progress) std::fprintf(stderr, "\n");

  st.step_time = st.steps ? total_time / st.steps : 0;
  st.mean_contacts = st.steps ? contacts / st.steps : 0;
  if (!iters.empty()) {
    double sum = 0;
    for (int i : iters) sum += i;
    st.mean_iterations = sum / iters.size();
    std::nth_element(iters.begin(), iters.begin() + iters.size() / 2, iters.end());
    st.median_iterations = iters[iters.size() / 2];
  }
  for (int i = 0; i < mjNWARNING; i++) st.warnings += d->warning[i].number;
  mj_deleteData(d);
  ck_free(ck);
  m->opt.enableflags = saved_flags;
  return st;
}

int SolverFromName(const std::string& name, std::string* error) {
  const int id = ck_solverId(name.c_str());
  std::string all, avail;
  for (int s = 0; s < ckNSOLVER; s++) {
    all += std::string(s ? ", " : "") + ck_solverName(s);
    if (ck_solverAvailable(s)) avail += std::string(avail.empty() ? "" : ", ") + ck_solverName(s);
  }
  if (id < 0) {
    *error = "unknown solver '" + name + "'; allowed: " + all;
    return -1;
  }
  if (!ck_solverAvailable(id)) {
    *error = "solver '" + name + "' is not implemented in this build yet; available: " + avail;
    return -1;
  }
  return id;
}

void Progress(const std::string& label, int done, int total) {
  const int width = 30;
  const int filled = total ? done * width / total : width;
  std::string bar(filled, '=');
  if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
  std::fprintf(stderr, "\r%-10s [%s] %3d%%", label.c_str(), bar.c_str(),
               total ? 100 * done / total : 100);
  std::fflush(stderr);
}

std::string MarkdownTable(const std::vector<std::string>& header,
                          const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(header.size());
  for (size_t c = 0; c < header.size(); c++) w[c] = header[c].size();
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size() && c < w.size(); c++) w[c] = std::max(w[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    std::string s = "|";
    for (size_t c = 0; c < w.size(); c++) {
      const std::string cell = c < r.size() ? r[c] : "";
      s += " " + cell + std::string(w[c] - cell.size(), ' ') + " |";
    }
    return s + "\n";
  };
  std::string out = line(header) + "|";
  for (size_t c = 0; c < w.size(); c++) out += std::string(w[c] + 2, '-') + "|";
  out += "\n";
  for (const auto& r : rows) out += line(r);
  return out;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(sep, start), s.size());
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string Fmt(double v, const char* fmt) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

}  // namespace contactkit::tools
