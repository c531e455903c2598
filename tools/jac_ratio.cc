// Copyright 2026 The contactkit developers.
//
// ck-jac-ratio: issue 18's evidence. For one model, the ratio of one forward mjd_transitionFD
// (eps 1e-6) to each solver's ck_transitionJac, and the cost of ck_transitionVJP (one adjoint)
// relative to that Jacobian, all in process CPU time in one process. The state: the model's
// keyframe (held controls) or default pose, stepped --steps times with mj_step; then each
// solver's handle takes --settle ck_steps (default one) from a copy (its own warm start and
// state), and its Jacobian is timed at the state those steps reached. Rounds interleave the solvers
// and one mjd_transitionFD; each figure is the best of the rounds.
//   ck-jac-ratio humanoid --steps 200 --rounds 10
//   ck-jac-ratio unitree_a1/scene --seconds 0.2
#include <mujoco/mujoco.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "contactkit/contactkit.h"
#include "tools/common/divergence.h"
#include "tools/common/tool_util.h"

namespace {

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// divergence: MuJoCo's resets, non-finite or exploding velocities; not penetration (a pile's
// soft contacts, humanoid100 under mj_step, sink beyond the other tools' 0.1 m)
const contactkit::tools::DivergenceLimits kLimits{1e3, HUGE_VAL};

struct Entry {
  int solver;
  ckHandle* ck = nullptr;
  mjData* d = nullptr;
  double jac = 1e300, vjp = 1e300;
};

// a handle per available solver of the comma-separated list, each with its own copy of d stepped
// settle times by ck_step under the held controls (its own warm start, at its own state), a
// solver whose steps diverge (DivergenceCheck) left out with its reason printed instead of a time;
// sets (KEY=VALUE) applied to every solver's settings after the tool's own; false (the error
// printed) if a setting is malformed or a handle cannot be made
bool MakeEntries(const mjModel* m, const mjData* d, const std::string& solvers_arg,
                 const std::vector<std::string>& sets, const std::vector<double>& held, int settle,
                 std::vector<Entry>* entries) {
  for (const std::string& name : contactkit::tools::Split(solvers_arg, ',')) {
    const int id = ck_solverId(name.c_str());
    if (id < 0 || !ck_solverAvailable(id)) continue;
    ckSettings s;
    ck_defaultSettings(&s);
    s.solver = id;
    s.deriv.enabled = 1;
    s.ipm.kappa_grad = s.ipm.kappa_tol;  // the derivative of the step taken
    std::string error;
    if (!contactkit::tools::ApplySets(sets, &s, &error)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      return false;
    }
    char err[512];
    Entry e;
    e.solver = id;
    e.ck = ck_make(m, &s, err, sizeof(err));
    if (!e.ck) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(), err);
      return false;
    }
    e.d = mj_makeData(m);
    mj_copyData(e.d, m, d);
    contactkit::tools::DivergenceCheck check(kLimits);
    check.Start(e.d);
    for (int i = 0; i < settle && !check.diverged(); i++) {
      std::copy(held.begin(), held.end(), e.d->ctrl);
      ck_step(e.ck, m, e.d);
      check.Check(m, e.d, i);
    }
    if (check.diverged()) {
      std::printf("  %-8s DIVERGED while settling: %s\n", name.c_str(), check.reason().c_str());
      ck_free(e.ck);
      mj_deleteData(e.d);
      continue;
    }
    entries->push_back(e);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ratio of mjd_transitionFD to ck_transitionJac per solver (process CPU time)"};
  std::string model_arg, solvers_arg = "mujoco,comfree,ipm,lcp";
  int steps = 200, rounds = 10;
  double seconds = 0;
  bool jac_only = false;
  std::string dump;
  app.add_option("model", model_arg, "model (path, bundled, MuJoCo example or Menagerie name)")
      ->required();
  app.add_option("--steps", steps, "mj_step steps before the Jacobian's state");
  app.add_option("--seconds", seconds, "simulated time before it instead (> 0)");
  int settle = 1;
  app.add_option("--settle", settle,
                 "ck_step steps each solver's handle then takes on its own (held controls)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--rounds", rounds, "timed rounds (best of)");
  app.add_option("--solvers", solvers_arg, "comma-separated solvers");
  app.add_flag("--jac-only", jac_only,
               "time the Jacobians only (for perf record; ratios of one FD)");
  bool vjp_only = false;
  app.add_flag("--vjp-only", vjp_only, "after one round, time the VJPs only (for perf record)");
  app.add_option("--dump", dump, "write each solver's A and B (binary doubles) to DUMP.<solver>");
  bool dump_fd = false;
  app.add_flag("--dump-fd", dump_fd,
               "with --dump, also ck_transitionFD's forward and centered differences (1e-6) to "
               "DUMP.<solver>.fd1 and .fd2");
  std::vector<std::string> sets;
  app.add_option("--set", sets,
                 "KEY=VALUE for every solver's handle, after the tool's kappa_grad = kappa_tol "
                 "(repeatable; keys: ck-run --list-settings)");
  CLI11_PARSE(app, argc, argv);

  std::string error;
  mjModel* m = contactkit::tools::LoadModel(model_arg, &error);
  if (!m) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  mjData* d = mj_makeData(m);
  if (m->nkey > 0) mj_resetDataKeyframe(m, d, 0);
  std::vector<double> held(d->ctrl, d->ctrl + m->nu);
  if (seconds > 0) steps = static_cast<int>(seconds / m->opt.timestep + 0.5);
  contactkit::tools::DivergenceCheck check(kLimits);
  check.Start(d);
  for (int i = 0; i < steps && !check.diverged(); i++) {
    std::copy(held.begin(), held.end(), d->ctrl);
    mj_step(m, d);
    check.Check(m, d, i);
  }
  if (check.diverged()) {
    std::fprintf(stderr, "mj_step diverged before the Jacobian's state: %s\n",
                 check.reason().c_str());
    return 1;
  }

  std::vector<Entry> entries;
  if (!MakeEntries(m, d, solvers_arg, sets, held, settle, &entries)) return 1;

  const int nv = static_cast<int>(m->nv), na = static_cast<int>(m->na);
  const int nu = std::max(static_cast<int>(m->nu), 1), ndx = 2 * nv + na;
  std::vector<mjtNum> A(ndx * ndx), B(ndx * nu), dx(ndx, 1.0), gx(ndx), gu(nu);
  double fd = 1e300;
  for (int r = 0; r < rounds; r++) {
    for (Entry& e : entries) {
      double t0 = CpuSeconds();
      if (vjp_only && r > 0) {
        ck_transitionVJP(e.ck, m, e.d, dx.data(), nullptr, gx.data(), gu.data());
        e.vjp = std::min(e.vjp, CpuSeconds() - t0);
        continue;
      }
      const int rc = ck_transitionJac(e.ck, m, e.d, A.data(), B.data(), nullptr, nullptr);
      double t1 = CpuSeconds();
      if (rc != 0)
        std::fprintf(stderr, "%s: Jacobian returned %d (%s)\n", ck_solverName(e.solver), rc,
                     ck_lastError(e.ck));
      e.jac = std::min(e.jac, t1 - t0);
      if (jac_only) continue;
      t0 = CpuSeconds();
      ck_transitionVJP(e.ck, m, e.d, dx.data(), nullptr, gx.data(), gu.data());
      t1 = CpuSeconds();
      e.vjp = std::min(e.vjp, t1 - t0);
    }
    if ((jac_only || vjp_only) && r > 0) continue;
    const double t0 = CpuSeconds();
    mjd_transitionFD(m, d, 1e-6, 0, A.data(), B.data(), nullptr, nullptr);
    fd = std::min(fd, CpuSeconds() - t0);
  }

  std::printf("%s: nv %d, ncon %d, mjd_transitionFD %.3f ms\n", model_arg.c_str(), nv,
              static_cast<int>(d->ncon), 1e3 * fd);
  for (const Entry& e : entries) {
    // (--jac-only times no VJP)
    char vjp[16] = "-";
    if (!jac_only) std::snprintf(vjp, sizeof(vjp), "%.2f", e.vjp / e.jac);
    std::printf("  %-8s jac %8.3f ms  ratio %6.1fx  vjp/jac %s  (ncon %d)\n",
                ck_solverName(e.solver), 1e3 * e.jac, fd / e.jac, vjp, static_cast<int>(e.d->ncon));
  }
  for (Entry& e : entries) {
    if (dump.empty()) break;
    // the Jacobians at the solver's state, for comparisons between builds
    ck_transitionJac(e.ck, m, e.d, A.data(), B.data(), nullptr, nullptr);
    for (int kind = 0; kind < (dump_fd ? 3 : 1); kind++) {
      if (kind > 0)
        ck_transitionFD(e.ck, m, e.d, 1e-6, kind - 1, A.data(), B.data(), nullptr, nullptr);
      const char* tail[3] = {"", ".fd1", ".fd2"};
      FILE* f = std::fopen((dump + "." + ck_solverName(e.solver) + tail[kind]).c_str(), "wb");
      if (!f) continue;
      std::fwrite(A.data(), sizeof(mjtNum), A.size(), f);
      std::fwrite(B.data(), sizeof(mjtNum), B.size(), f);
      std::fclose(f);
    }
  }
  for (Entry& e : entries) {
    ck_free(e.ck);
    mj_deleteData(e.d);
  }
  mj_deleteData(d);
  mj_deleteModel(m);
  return 0;
}
