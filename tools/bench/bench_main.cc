// Copyright 2026 The contactkit developers.
//
// ck-bench-step: step-time benchmarks with ratios to mj_step measured in the same process.
// Usage: ck-bench-step [--benchmark_filter=REGEX] [--benchmark_min_time=0.2] ...
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugin/step/compat.h"
#include "tools/bench/bench.h"
#include "tools/common/divergence.h"
#include "tools/common/robot_suite.h"
#include "tools/common/tool_util.h"

namespace contactkit::bench {
namespace {

std::vector<std::function<void()>>& Registry() {
  static std::vector<std::function<void()>> r;
  return r;
}

// a model, a data at the prepared state, and a copy of that state
struct Prepared {
  mjModel* m = nullptr;
  mjData* d = nullptr;
  mjData* saved = nullptr;
  ~Prepared() {
    if (saved) mj_deleteData(saved);
    if (d) mj_deleteData(d);
    if (m) mj_deleteModel(m);
  }
};

std::unique_ptr<Prepared> Prepare(const Scenario& sc, std::string* err) {
  auto p = std::make_unique<Prepared>();
  p->m = tools::LoadModel(sc.model, err);
  if (!p->m) return nullptr;
  if (sc.edit) sc.edit(p->m);
  p->d = mj_makeData(p->m);
  if (p->m->nkey > 0) mj_resetDataKeyframe(p->m, p->d, 0);
  // a warm-up that diverges (MuJoCo's resets, a velocity beyond the bound) gives no state to time
  // (never a time for a diverged run); penetration is not judged: MuJoCo's own soft contact sinks
  // the piled humanoid100 deeper than the solvers' bound
  tools::DivergenceLimits limits;
  limits.max_penetration = mjMAXVAL;
  tools::DivergenceCheck check(limits);
  check.Start(p->d);
  const int warmup = sc.warmup_seconds > 0
                         ? static_cast<int>(std::ceil(sc.warmup_seconds / p->m->opt.timestep))
                         : sc.warmup_steps;
  for (int t = 0; t < warmup; t++) {
    mj_step(p->m, p->d);
    if (check.Check(p->m, p->d, t)) {
      *err = "DIVERGED in the warm-up: " + check.reason();
      return nullptr;
    }
  }
  p->saved = mj_makeData(p->m);
  mj_copyData(p->saved, p->m, p->d);
  return p;
}

void Restore(const Prepared& p) {
  const mjModel* m = p.m;
  mju_copy(p.d->qpos, p.saved->qpos, m->nq);
  mju_copy(p.d->qvel, p.saved->qvel, m->nv);
  mju_copy(p.d->act, p.saved->act, m->na);
  mju_copy(p.d->qacc_warmstart, p.saved->qacc_warmstart, m->nv);
  mju_copy(p.d->ctrl, p.saved->ctrl, m->nu);
  p.d->time = p.saved->time;
}

// ||a - b||_F / ||b||_F
double RelativeError(const std::vector<mjtNum>& a, const std::vector<mjtNum>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); i++) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// splits "kind/group/variant[/...]"
std::vector<std::string> Split(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0, pos;
  while ((pos = name.find('/', start)) != std::string::npos) {
    parts.push_back(name.substr(start, pos - start));
    start = pos + 1;
  }
  parts.push_back(name.substr(start));
  return parts;
}

// collects real time per iteration of every run
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) errors_[r.benchmark_name()] = r.error_message;
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      times_[r.benchmark_name()] = r.GetAdjustedRealTime();
      for (const auto& [name, c] : r.counters) counters_[r.benchmark_name()][name] = c.value;
    }
    ConsoleReporter::ReportRuns(runs);
  }

  // per group: variant, time, ratio to the group's mj_step
  void PrintRatios() const {
    std::map<std::string, std::vector<std::pair<std::string, double>>> groups;
    for (const auto& [name, t] : times_) {
      // step/<group>/<variant>[/real_time...]
      const std::vector<std::string> parts = Split(name);
      if (parts.size() < 3 || parts[0] != "step") continue;
      groups[parts[1]].push_back({name, t});
    }
    if (groups.empty()) return;
    std::printf("\n## step time relative to mj_step (same model and state, one process)\n\n");
    std::vector<std::vector<std::string>> rows;
    for (const auto& [group, entries] : groups) {
      double ref = 0;
      for (const auto& [name, t] : entries) {
        if (name.find("/mj_step") != std::string::npos) ref = t;
      }
      for (const auto& [name, t] : entries) {
        const std::string variant = name.substr(name.find(group) + group.size() + 1);
        std::string extra;
        auto it = counters_.find(name);
        if (it != counters_.end()) {
          for (const auto& [cname, v] : it->second) extra += cname + "=" + tools::Fmt(v) + " ";
        }
        rows.push_back({group, variant, tools::Fmt(t, "%.2f"),
                        ref > 0 ? tools::Fmt(t / ref, "%.2f") : "-", extra});
      }
    }
    std::printf("%s",
                tools::MarkdownTable(
                    {"scene", "variant", "time/step (us)", "ratio to mj_step", "counters"}, rows)
                    .c_str());
  }

  // Jacobian groups: time, speedup over mjd_transitionFD forward and centered, VJP / Jacobian,
  // accuracy; runs that failed (a diverged warm-up, an error of the call) show why, no time
  void PrintJacobians() const {
    std::map<std::string, std::vector<std::pair<std::string, double>>> groups;
    for (const auto& [name, t] : times_) {
      const std::vector<std::string> parts = Split(name);
      if (parts.size() < 3 || parts[0] != "jac") continue;
      groups[parts[1]].push_back({parts[2], t});
    }
    for (const auto& [name, why] : errors_) {
      const std::vector<std::string> parts = Split(name);
      if (parts.size() >= 3 && parts[0] == "jac") groups[parts[1]].push_back({parts[2], -1});
    }
    if (groups.empty()) return;
    std::printf(
        "\n## Jacobians of one step: time, speedup over mjd_transitionFD, VJP cost, "
        "accuracy\n\n");
    std::vector<std::vector<std::string>> rows;
    for (const auto& [group, entries] : groups) {
      double fwd = 0, ctr = 0;
      for (const auto& [variant, t] : entries) {
        if (variant == "mjd_forward") fwd = t;
        if (variant == "mjd_centered") ctr = t;
      }
      for (const auto& [variant, t] : entries) {
        if (t < 0) {
          std::string why;
          for (const auto& [name, e] : errors_) {
            const std::vector<std::string> parts = Split(name);
            if (parts.size() >= 3 && parts[1] == group && parts[2] == variant) why = e;
          }
          rows.push_back({group, variant, "-", "-", "-", "-", "-", "-", why});
          continue;
        }
        rows.push_back(JacobianRow(group, variant, t, fwd, ctr));
      }
    }
    std::printf("%s", tools::MarkdownTable({"scene", "variant", "time (us)", "x vs mjd fwd",
                                            "x vs mjd ctr", "vjp / jac", "err A", "err B", "path"},
                                           rows)
                          .c_str());
  }

  // one row of the Jacobian table
  std::vector<std::string> JacobianRow(const std::string& group, const std::string& variant,
                                       double t, double fwd, double ctr) const {
    std::string ea = "-", eb = "-", path = "-", vjp = "-";
    for (const auto& [name, c] : counters_) {
      const std::vector<std::string> parts = Split(name);
      if (parts.size() < 3 || parts[0] != "jac" || parts[1] != group || parts[2] != variant) {
        continue;
      }
      if (c.count("err_A")) ea = tools::Fmt(c.at("err_A"), "%.1e");
      if (c.count("err_B")) eb = tools::Fmt(c.at("err_B"), "%.1e");
      if (c.count("vjp_over_jac")) vjp = tools::Fmt(c.at("vjp_over_jac"), "%.2f");
      if (c.count("analytic")) path = c.at("analytic") > 0 ? "analytic" : "FD fallback";
    }
    return {group,
            variant,
            tools::Fmt(t, "%.1f"),
            fwd > 0 ? tools::Fmt(fwd / t, "%.1f") : "-",
            ctr > 0 ? tools::Fmt(ctr / t, "%.1f") : "-",
            vjp,
            ea,
            eb,
            path};
  }

 private:
  std::map<std::string, double> times_;
  std::map<std::string, std::map<std::string, double>> counters_;
  std::map<std::string, std::string> errors_;  // runs that did not give a time (why)
};

// a handle with settings and solver, or null with the benchmark skipped
ckHandle* MakeOrSkip(benchmark::State& state, const mjModel* m, int solver,
                     const ckSettings& settings) {
  ckSettings s = settings;
  s.solver = solver;
  char cerr[1024];
  ckHandle* ck = ck_make(m, &s, cerr, sizeof(cerr));
  if (!ck) state.SkipWithError(cerr);
  return ck;
}

// ck_transitionVJP for one adjoint (all ones) over ck_transitionJac's time, the two interleaved
// from the same state (at least 3 pairs, as many as the timed Jacobians, at most 50)
double VjpOverJacobian(const Prepared& p, ckHandle* ck, int64_t iterations) {
  const mjModel* m = p.m;
  const size_t nx = 2 * m->nv + m->na;
  std::vector<mjtNum> A(nx * nx), B(nx * std::max(static_cast<int>(m->nu), 1));
  std::vector<mjtNum> dx(nx, 1.0), gx(nx), gu(std::max(static_cast<int>(m->nu), 1));
  using Clock = std::chrono::steady_clock;
  double jac = 0, vjp = 0;
  const int64_t n = std::clamp<int64_t>(iterations, 3, 50);
  for (int64_t i = 0; i < n; i++) {
    Restore(p);
    const auto t0 = Clock::now();
    ck_transitionJac(ck, m, p.d, A.data(), B.data(), nullptr, nullptr);
    const auto t1 = Clock::now();
    ck_transitionVJP(ck, m, p.d, dx.data(), nullptr, gx.data(), gu.data());
    const auto t2 = Clock::now();
    jac += std::chrono::duration<double>(t1 - t0).count();
    vjp += std::chrono::duration<double>(t2 - t1).count();
  }
  return jac > 0 ? vjp / jac : 0;
}

}  // namespace

ckSettings DefaultSettings() {
  ckSettings s;
  ck_defaultSettings(&s);
  return s;
}

Registrar::Registrar(const std::function<void()>& f) { Registry().push_back(f); }

void AddJacobian(const std::string& group, const std::string& variant, const Scenario& scenario,
                 int solver, const ckSettings& settings, JacMethod method) {
  const std::string name = "jac/" + group + "/" + variant;
  benchmark::RegisterBenchmark(
      name.c_str(),
      [scenario, solver, settings, method](benchmark::State& state) {
        std::string err;
        std::unique_ptr<Prepared> p = Prepare(scenario, &err);
        if (!p) {
          state.SkipWithError(err.c_str());
          return;
        }
        const mjModel* m = p->m;
        const size_t nx = 2 * m->nv + m->na;
        std::vector<mjtNum> A(nx * nx), B(nx * std::max(static_cast<int>(m->nu), 1));
        ckHandle* ck = nullptr;
        if (method == JacMethod::kAnalytic) {
          ck = MakeOrSkip(state, p->m, solver, settings);
          if (!ck) return;

          // accuracy against centered differences through ck_step, and which path was taken, with
          // MuJoCo's solver converged for the comparison (as the robot suite and the tests)
          std::vector<mjtNum> Afd(A.size()), Bfd(B.size());
          const mjOption opt = p->m->opt;
          tools::TightenMujoco(p->m);
          const int path = ck_transitionJac(ck, m, p->d, A.data(), B.data(), nullptr, nullptr);
          if (path >= 0) {
            ck_transitionFD(ck, m, p->d, 1e-6, 1, Afd.data(), Bfd.data(), nullptr, nullptr);
          }
          p->m->opt = opt;
          if (path < 0) {
            state.SkipWithError(ck_lastError(ck));
            ck_free(ck);
            return;
          }
          state.counters["err_A"] = RelativeError(A, Afd);
          state.counters["err_B"] = m->nu ? RelativeError(B, Bfd) : 0;
          state.counters["analytic"] = path == 0;
        }
        for (auto _ : state) {
          state.PauseTiming();
          Restore(*p);
          state.ResumeTiming();
          if (ck) {
            ck_transitionJac(ck, m, p->d, A.data(), B.data(), nullptr, nullptr);
          } else {
            mjd_transitionFD(m, p->d, 1e-6, method == JacMethod::kMujocoCentered, A.data(),
                             B.data(), nullptr, nullptr);
          }
        }
        if (ck) {
          state.counters["vjp_over_jac"] = VjpOverJacobian(*p, ck, state.iterations());
          ck_free(ck);
        }
      })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
}

void AddStep(const std::string& group, const std::string& variant, const Scenario& scenario,
             int solver, const ckSettings& settings) {
  const std::string name = "step/" + group + "/" + variant;
  benchmark::RegisterBenchmark(
      name.c_str(),
      [scenario, solver, settings](benchmark::State& state) {
        std::string err;
        std::unique_ptr<Prepared> p = Prepare(scenario, &err);
        if (!p) {
          state.SkipWithError(err.c_str());
          return;
        }
        ckHandle* ck = nullptr;
        if (solver >= 0) {
          ck = MakeOrSkip(state, p->m, solver, settings);
          if (!ck) return;
          // one untimed step so warm-start data exist
          ck_step(ck, p->m, p->d);
        }
        double iters = 0, pen = 0, con = 0;
        long n = 0;
        for (auto _ : state) {
          state.PauseTiming();
          Restore(*p);
          state.ResumeTiming();
          if (ck) {
            ck_step(ck, p->m, p->d);
          } else {
            mj_step(p->m, p->d);
          }
          state.PauseTiming();
          if (ck) {
            iters += ck_stats(ck)->iterations;
            pen = std::max(pen, static_cast<double>(ck_stats(ck)->max_penetration));
            con += ck_stats(ck)->ncon;
          } else {
            con += p->d->ncon;
            for (int i = 0; i < p->d->ncon; i++) pen = std::max(pen, -p->d->contact[i].dist);
            iters += contactkit::SolverIterations(p->d);
          }
          n++;
          state.ResumeTiming();
        }
        state.counters["iter"] = n ? iters / n : 0;
        state.counters["contacts"] = n ? con / n : 0;
        state.counters["pen_mm"] = pen * 1e3;
        if (ck) {
          // solvers that guess an active set: hit rate over consecutive steps from the state
          Restore(*p);
          const ckTotals before = *ck_totals(ck);
          for (int t = 0; t < 200; t++) ck_step(ck, p->m, p->d);
          const ckTotals* after = ck_totals(ck);
          if (after->guess_tries > before.guess_tries) {
            state.counters["hit_rate"] =
                static_cast<double>(after->guess_hits - before.guess_hits) /
                static_cast<double>(after->guess_tries - before.guess_tries);
          }
          ck_free(ck);
        }
      })
      ->Unit(benchmark::kMicrosecond)
      ->UseRealTime();
}

}  // namespace contactkit::bench

int main(int argc, char** argv) {
  for (const auto& f : contactkit::bench::Registry()) f();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  contactkit::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  reporter.PrintJacobians();
  benchmark::Shutdown();
  return 0;
}
