// Copyright 2026 The contactkit developers.
//
// ck-comfree-table: our version of ComFree-Sim's penetration table (Fig. 3b): stacked primitives
// (tools/gen_stack.h) dropped onto a box, h = 0.002, 1000 steps; mean and standard deviation of
// the penetration depth over every included contact of every step, for MuJoCo's own solver and
// for comfree over a grid of (k_user, d_user), beside the paper's figures.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "tools/common/tool_util.h"
#include "tools/gen_stack.h"

namespace {

using contactkit::tools::Fmt;

const char kUsage[] =
    "usage: ck-comfree-table [options]\n"
    "\n"
    "Drops an nx x ny x layers stack of primitives (tools/gen_stack.h) onto a box and prints the\n"
    "mean +- std penetration depth over all included contacts of all steps, for MuJoCo's own\n"
    "solver and for comfree at every (k_user, d_user) of the grid, beside ComFree-Sim's Fig. 3b.\n"
    "\n"
    "options:\n"
    "  --nx N --ny N --layers N  scene size (default 5 5 5: 125 bodies, as the paper's 5 x 5 x 5)\n"
    "  --steps N                 steps (default 1000)\n"
    "  --timestep H              time step (default 0.002)\n"
    "  --k LIST                  k_user values (default 0.1,0.2,0.3,0.4,0.5)\n"
    "  --d LIST                  d_user values (default 0.001,0.005)\n"
    "  --set KEY=VALUE           another comfree setting (repeatable), e.g. --set facets=8\n"
    "  --help                    this text\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "ck-comfree-table: %s\n", msg.c_str());
  return 2;
}

std::vector<double> ParseList(const std::string& s) {
  std::vector<double> out;
  for (const std::string& item : contactkit::tools::Split(s, ','))
    out.push_back(std::atof(item.c_str()));
  return out;
}

// ComFree-Sim's Fig. 3b (mm): MJWarp 1.7 +- 4.9, and comfree at the paper's (k, d) points
std::string PaperDepth(double k, double d) {
  struct Row {
    double k, d;
    const char* depth;
  };
  static const Row kRows[] = {{0.1, 0.001, "3.9 ± 6.9"}, {0.1, 0.005, "3.8 ± 5.7"},
                              {0.3, 0.001, "1.6 ± 3.3"}, {0.3, 0.005, "1.4 ± 2.5"},
                              {0.5, 0.001, "1.0 ± 2.1"}, {0.5, 0.005, "0.9 ± 1.5"}};
  for (const Row& r : kRows) {
    if (std::fabs(r.k - k) < 1e-9 && std::fabs(r.d - d) < 1e-9) return r.depth;
  }
  return "";
}

// penetration statistics of one run
struct Depth {
  double sum = 0, sum2 = 0, max = 0;
  long n = 0;
  double lowest = 1e9;   // lowest body centre over the run (m)
  double fastest = 0;    // largest body speed over the last 100 steps (m/s)
  double step_time = 0;  // mean wall time per step (s)
  double contacts = 0;   // mean contacts per step
  bool diverged = false;
};

Depth Measure(mjModel* m, const ckSettings& settings, int steps) {
  Depth out;
  contactkit::tools::RunOptions opts;
  opts.steps = steps;
  opts.on_step = [&](const mjModel* m, const mjData* d, const ckHandle*, int t) {
    for (int i = 0; i < d->ncon; i++) {
      if (d->contact[i].efc_address < 0) continue;
      const double pen = std::max(0.0, -static_cast<double>(d->contact[i].dist));
      out.sum += pen;
      out.sum2 += pen * pen;
      out.max = std::max(out.max, pen);
      out.n++;
    }
    for (int b = 1; b < m->nbody; b++) {
      if (m->body_jntnum[b] == 0) continue;
      out.lowest = std::min(out.lowest, static_cast<double>(d->xipos[3 * b + 2]));
      if (t >= steps - 100) {
        const int v = m->jnt_dofadr[m->body_jntadr[b]];
        out.fastest = std::max(out.fastest,
                               std::sqrt(d->qvel[v] * d->qvel[v] + d->qvel[v + 1] * d->qvel[v + 1] +
                                         d->qvel[v + 2] * d->qvel[v + 2]));
      }
    }
  };
  const contactkit::tools::RunStats st = contactkit::tools::Run(m, settings, opts);
  out.step_time = st.step_time;
  out.contacts = st.mean_contacts;
  out.diverged = st.diverged || !st.error.empty();
  return out;
}

std::vector<std::string> Row(const std::string& engine, const std::string& kd, const Depth& d,
                             const std::string& paper) {
  const double mean = d.n ? d.sum / d.n : 0;
  const double var = d.n ? std::max(0.0, d.sum2 / d.n - mean * mean) : 0;
  return {engine,
          kd,
          Fmt(1e3 * mean, "%.2f") + " ± " + Fmt(1e3 * std::sqrt(var), "%.2f"),
          Fmt(1e3 * d.max, "%.1f"),
          paper,
          Fmt(d.contacts, "%.0f"),
          Fmt(d.lowest, "%.3f"),
          Fmt(d.fastest, "%.3f"),
          Fmt(1e6 * d.step_time, "%.0f"),
          d.diverged ? "diverged" : "ok"};
}

}  // namespace

int main(int argc, char** argv) {
  int nx = 5, ny = 5, layers = 5, steps = 1000;
  double h = 0.002;
  std::vector<double> ks = {0.1, 0.2, 0.3, 0.4, 0.5}, ds = {0.001, 0.005};
  std::vector<std::string> sets;
  for (int i = 1; i < argc; i++) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ck-comfree-table: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (a == "--nx") {
      nx = std::atoi(value().c_str());
    } else if (a == "--ny") {
      ny = std::atoi(value().c_str());
    } else if (a == "--layers") {
      layers = std::atoi(value().c_str());
    } else if (a == "--steps") {
      steps = std::atoi(value().c_str());
    } else if (a == "--timestep") {
      h = std::atof(value().c_str());
    } else if (a == "--k") {
      ks = ParseList(value());
    } else if (a == "--d") {
      ds = ParseList(value());
    } else if (a == "--set") {
      sets.push_back(value());
    } else {
      return Fail("unknown option '" + a + "'\n\n" + kUsage);
    }
  }
  if (nx <= 0 || ny <= 0 || layers <= 0 || steps <= 0 || !(h > 0)) {
    return Fail("sizes, steps and time step must be positive");
  }
  if (ks.empty() || ds.empty()) return Fail("--k and --d need at least one value");

  std::string err;
  mjModel* m = contactkit::tools::LoadModelString(
      contactkit::tools::StackedPrimitivesXML(nx, ny, layers, h), &err);
  if (!m) return Fail(err);

  ckSettings base;
  ck_defaultSettings(&base);
  char cerr[1024] = "";
  for (const std::string& kv : sets) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return Fail("--set takes KEY=VALUE, got '" + kv + "'");
    if (ck_setSetting(&base, kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), cerr,
                      sizeof(cerr)) != 0) {
      return Fail(cerr);
    }
  }

  std::printf("dense drop: %d x %d x %d stacked primitives (%d bodies), h = %g s, %d steps\n\n", nx,
              ny, layers, nx * ny * layers, h, steps);
  std::vector<std::vector<std::string>> rows;
  ckSettings s = base;
  s.solver = ckSOL_MUJOCO;
  std::fprintf(stderr, "mujoco ...\n");
  rows.push_back(Row("MuJoCo (Newton)", "-", Measure(m, s, steps), "MJWarp 1.7 ± 4.9"));
  if (!ck_solverAvailable(ckSOL_COMFREE)) return Fail("this build has no comfree solver");
  for (double k : ks) {
    for (double d : ds) {
      s = base;
      s.solver = ckSOL_COMFREE;
      s.comfree.stiffness = k;
      s.comfree.damping = d;
      if (ck_validateSettings(&s, cerr, sizeof(cerr)) != 0) return Fail(cerr);
      std::fprintf(stderr, "comfree k %g d %g ...\n", k, d);
      rows.push_back(Row("comfree", Fmt(k, "%g") + ", " + Fmt(d, "%g"), Measure(m, s, steps),
                         PaperDepth(k, d)));
    }
  }
  std::printf(
      "%s", contactkit::tools::MarkdownTable(
                {"engine", "k_user, d_user", "depth mean ± std (mm)", "max (mm)", "paper (mm)",
                 "contacts", "lowest body z (m)", "max speed, last 100 (m/s)", "us/step", "state"},
                rows)
                .c_str());
  mj_deleteModel(m);
  return 0;
}
