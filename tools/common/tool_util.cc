// Copyright 2026 The contactkit developers.
#include "tools/common/tool_util.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

namespace contactkit::tools {
namespace {

bool Exists(const std::string& p) { return access(p.c_str(), R_OK) == 0; }

}  // namespace

std::string MujocoModelsDir() {
  const char* env = std::getenv("CK_MUJOCO_MODELS");
  return env && env[0] ? env : CK_MUJOCO_MODELS;
}

std::string MenagerieDir() {
  const char* env = std::getenv("CK_MENAGERIE");
  return env && env[0] ? env : "";
}

std::string BundledModelsDir() {
  // an installed tool: <prefix>/bin/tool and <prefix>/share/contactkit/models
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    const std::string path(exe, n);
    const std::string bin = path.substr(0, path.rfind('/'));
    const std::string installed = bin.substr(0, bin.rfind('/')) + "/share/contactkit/models";
    if (Exists(installed)) return installed;
  }
  return std::string(CK_SOURCE_DIR) + "/mjcf_models";
}

std::string ResolveModel(const std::string& arg) {
  if (Exists(arg)) return arg;
  const std::string bundled = BundledModelsDir();
  const std::string mj = MujocoModelsDir();
  std::vector<std::string> candidates = {
      bundled + "/" + arg,
      bundled + "/" + arg + ".xml",
      mj + "/" + arg + "/" + arg + ".xml",
      mj + "/humanoid/" + arg + ".xml",
      mj + "/" + arg,
  };
  // Menagerie: on MuJoCo 2.x the _mj222 variant first
  const std::string men = MenagerieDir();
  if (!men.empty()) {
    if (mjVERSION_HEADER < 300) candidates.push_back(men + "/" + arg + "_mj222.xml");
    candidates.push_back(men + "/" + arg + ".xml");
    candidates.push_back(men + "/" + arg);
  }
  for (const std::string& c : candidates) {
    if (Exists(c)) return c;
  }
  return arg;
}

mjModel* LoadModel(const std::string& arg, std::string* error, std::string* loaded) {
  const std::string path = ResolveModel(arg);
  if (!Exists(path)) {
    *error = "model '" + arg +
             "' not found (give a path, a bundled model name such as box_sliding, humanoid / "
             "humanoid100 / 22_humanoids from MuJoCo's example models in '" +
             MujocoModelsDir() +
             "' (environment variable CK_MUJOCO_MODELS), or a Menagerie model such as "
             "franka_emika_panda/scene in " +
             (MenagerieDir().empty() ? std::string("the folder set by CK_MENAGERIE (not set)")
                                     : "'" + MenagerieDir() + "' (CK_MENAGERIE)") +
             ")";
    return nullptr;
  }
  char err[1024] = "";
  mjModel* m = ck_loadXML(path.c_str(), nullptr, err, sizeof(err));
  if (loaded) *loaded = path;
  // messages that start with the file's name already say where
  if (!m) *error = std::string(err).rfind(path, 0) == 0 ? err : path + ": " + err;
  // a Menagerie model whose assets are incomplete here (the A1's two largest visual meshes are
  // absent from the shared copy) loads from its _mj222 variant, which leaves them out
  const std::string variant =
      path.size() > 4 ? path.substr(0, path.size() - 4) + "_mj222.xml" : std::string();
  if (!m && path.size() > 4 && path.compare(path.size() - 4, 4, ".xml") == 0 && Exists(variant)) {
    m = ck_loadXML(variant.c_str(), nullptr, err, sizeof(err));
    if (m) {
      std::fprintf(stderr, "note: loaded %s instead (%s)\n", variant.c_str(), error->c_str());
      error->clear();
      if (loaded) *loaded = variant;
    }
  }
  return m;
}

EnergyDrift::~EnergyDrift() {
  if (scratch_) mj_deleteData(scratch_);
}

double EnergyDrift::Mechanical(const mjModel* m, const mjData* d) {
  // kinematics and body velocities of d's state on the scratch data
  mjData* s = scratch_;
  mju_copy(s->qpos, d->qpos, m->nq);
  mju_copy(s->qvel, d->qvel, m->nv);
  mju_copy(s->mocap_pos, d->mocap_pos, 3 * m->nmocap);
  mju_copy(s->mocap_quat, d->mocap_quat, 4 * m->nmocap);
  mj_kinematics(m, s);
  mj_comPos(m, s);
  mj_comVel(m, s);
  double e = 0;
  for (int b = 1; b < m->nbody; b++) {
    const mjtNum* w = s->cvel + 6 * b;  // [angular; linear at the subtree com of b's root]
    mjtNum r[3], v[3], wl[3];
    mju_sub3(r, s->xipos + 3 * b, s->subtree_com + 3 * m->body_rootid[b]);
    mju_cross(v, w, r);
    mju_addTo3(v, w + 3);
    mju_mulMatTVec(wl, s->ximat + 9 * b, w, 3, 3);  // angular velocity in the inertia frame
    const mjtNum* inertia = m->body_inertia + 3 * b;
    e += 0.5 * m->body_mass[b] * mju_dot3(v, v) +
         0.5 *
             (inertia[0] * wl[0] * wl[0] + inertia[1] * wl[1] * wl[1] + inertia[2] * wl[2] * wl[2]);
    // potential of gravity
    e -= m->body_mass[b] * mju_dot3(m->opt.gravity, s->xipos + 3 * b);
  }
  for (int i = 0; i < m->nv; i++) e += 0.5 * m->dof_armature[i] * d->qvel[i] * d->qvel[i];
  return e;
}

void EnergyDrift::Start(const mjModel* m, const mjData* d) {
  if (scratch_) mj_deleteData(scratch_);
  scratch_ = mj_makeData(m);
  e0_ = Mechanical(m, d);
  work_ = current_ = max_ = 0;
}

void EnergyDrift::Step(const mjModel* m, const mjData* d, const mjtNum* v_before) {
  // work of the step's actuator, passive and applied forces over its mean velocity
  double power = 0;
  for (int i = 0; i < m->nv; i++) {
    const double f = d->qfrc_actuator[i] + d->qfrc_passive[i] + d->qfrc_applied[i];
    power += f * 0.5 * (v_before[i] + d->qvel[i]);
  }
  work_ += m->opt.timestep * power;
  current_ = Mechanical(m, d) - e0_ - work_;
  max_ = std::max(max_, current_);
}

RunStats Run(mjModel* m, const ckSettings& settings, const RunOptions& opts) {
  RunStats st;
  st.solver = ck_solverName(settings.solver);
  if (opts.timestep > 0) m->opt.timestep = opts.timestep;

  char err[1024] = "";
  ckSettings sim = settings;
  sim.deriv.enabled = 0;  // a run takes no derivatives: no workspace for them
  ckHandle* ck = ck_make(m, &sim, err, sizeof(err));
  if (!ck) {
    st.error = err;
    return st;
  }
  mjData* d = mj_makeData(m);
  const int key = opts.keyframe >= 0 ? opts.keyframe : (m->nkey > 0 ? 0 : -1);
  if (key >= 0 && key < m->nkey) mj_resetDataKeyframe(m, d, key);
  mj_forward(m, d);
  EnergyDrift energy;
  energy.Start(m, d);
  DivergenceCheck divergence(opts.limits);
  divergence.Start(d);

  std::ofstream csv;
  if (!opts.csv.empty()) {
    csv.open(opts.csv);
    csv << "step,time,contacts,max_penetration,iterations,status,energy_drift,step_time\n";
  }

  std::vector<int> iters;
  iters.reserve(opts.steps);
  std::vector<mjtNum> v_before(m->nv);
  double total_time = 0, contacts = 0;
  std::mt19937 rng(std::max(0, opts.random_controls));
  double next_draw = -1;  // time of the next random controls
  for (int t = 0; t < opts.steps; t++) {
    if (opts.random_controls >= 0 && d->time >= next_draw - 1e-12) {
      next_draw = d->time + 0.02;
      for (int i = 0; i < m->nu; i++) {
        const bool limited = m->actuator_ctrllimited[i];
        const double lo = limited ? m->actuator_ctrlrange[2 * i] : -1;
        const double hi = limited ? m->actuator_ctrlrange[2 * i + 1] : 1;
        d->ctrl[i] = std::uniform_real_distribution<double>(lo, hi)(rng);
      }
    }
    mju_copy(v_before.data(), d->qvel, m->nv);
    const double time = d->time;
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
    st.steps = t + 1;
    if (divergence.Check(m, d, t)) break;
    energy.Step(m, d, v_before.data());
    if (csv.is_open()) {
      csv << t << "," << time << "," << s->ncon << "," << s->max_penetration << "," << s->iterations
          << "," << s->status << "," << energy.current() << "," << dt << "\n";
    }
    if (opts.on_step) opts.on_step(m, d, ck, t);
    if (opts.progress && (t % 50 == 0 || t + 1 == opts.steps))
      Progress(st.solver, t + 1, opts.steps);
  }
  if (opts.progress) ClearProgress();

  st.diverged = divergence.diverged();
  st.why = divergence.reason();
  st.energy_drift = energy.max();
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
  st.ck_warnings = ck_totals(ck)->nwarning;
  mj_deleteData(d);
  ck_free(ck);
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
  if (!isatty(STDERR_FILENO)) return;
  const int width = 30;
  const int filled = total ? done * width / total : width;
  std::string bar(filled, '=');
  if (filled < width) bar += '>' + std::string(width - filled - 1, ' ');
  std::fprintf(stderr, "\r%-10s [%s] %3d%%", label.c_str(), bar.c_str(),
               total ? 100 * done / total : 100);
  std::fflush(stderr);
}

void ClearProgress() {
  if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\r\033[K");
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

bool ApplySets(const std::vector<std::string>& sets, ckSettings* s, std::string* error) {
  char err[1024];
  for (const std::string& kv : sets) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) {
      *error = "--set takes KEY=VALUE, got '" + kv + "'";
      return false;
    }
    if (ck_setSetting(s, kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), err, sizeof(err)) !=
        0) {
      *error = err;
      return false;
    }
  }
  return true;
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
