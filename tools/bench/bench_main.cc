// Copyright 2026 The contactkit developers.
//
// ck-bench-step: step-time benchmarks with ratios to mj_step measured in the same process.
// Usage: ck-bench-step [--benchmark_filter=REGEX] [--benchmark_min_time=0.2] ...
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tools/bench/bench.h"
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
  for (int t = 0; t < sc.warmup_steps; t++) mj_step(p->m, p->d);
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

// collects real time per iteration of every run
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
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
      std::vector<std::string> parts;
      size_t start = 0, pos;
      while ((pos = name.find('/', start)) != std::string::npos) {
        parts.push_back(name.substr(start, pos - start));
        start = pos + 1;
      }
      parts.push_back(name.substr(start));
      if (parts.size() < 3) continue;
      groups[parts[1]].push_back({name, t});
    }
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
    std::printf("%s", tools::MarkdownTable({"scene", "variant", "time/step (us)", "ratio to mj_step",
                                            "counters"},
                                           rows)
                          .c_str());
  }

 private:
  std::map<std::string, double> times_;
  std::map<std::string, std::map<std::string, double>> counters_;
};

}  // namespace

ckSettings DefaultSettings() {
  ckSettings s;
  ck_defaultSettings(&s);
  return s;
}

Registrar::Registrar(const std::function<void()>& f) { Registry().push_back(f); }

void AddStep(const std::string& group, const std::string& variant, const Scenario& scenario,
             int solver, const ckSettings& settings) {
  const std::string name = "step/" + group + "/" + variant;
  benchmark::RegisterBenchmark(name.c_str(), [scenario, solver, settings](benchmark::State& state) {
    std::string err;
    std::unique_ptr<Prepared> p = Prepare(scenario, &err);
    if (!p) {
      state.SkipWithError(err.c_str());
      return;
    }
    ckHandle* ck = nullptr;
    if (solver >= 0) {
      ckSettings s = settings;
      s.solver = solver;
      char cerr[1024];
      ck = ck_make(p->m, &s, cerr, sizeof(cerr));
      if (!ck) {
        state.SkipWithError(cerr);
        return;
      }
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
#if mjVERSION_HEADER >= 300
        iters += p->d->solver_niter[0];
#else
        iters += p->d->solver_iter;
#endif
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
      const int hits = ck_stats(ck)->guess_hits, tries = ck_stats(ck)->guess_tries;
      for (int t = 0; t < 200; t++) ck_step(ck, p->m, p->d);
      if (ck_stats(ck)->guess_tries > tries) {
        state.counters["hit_rate"] = static_cast<double>(ck_stats(ck)->guess_hits - hits) /
                                     (ck_stats(ck)->guess_tries - tries);
      }
      ck_free(ck);
    }
  })->Unit(benchmark::kMicrosecond)->UseRealTime();
}

}  // namespace contactkit::bench

int main(int argc, char** argv) {
  for (const auto& f : contactkit::bench::Registry()) f();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  contactkit::bench::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintRatios();
  benchmark::Shutdown();
  return 0;
}
