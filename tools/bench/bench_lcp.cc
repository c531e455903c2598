// Copyright 2026 The contactkit developers.
//
// Solver "lcp" against MuJoCo's Newton solver (mj_step) on the humanoid lying on the floor and on
// the stacked primitives, with the warm-start guess (warmstart 1: the previous step's
// classification is checked first; the timed step repeats one state, so it measures the guess
// path) and without it (warmstart 0: the full pivoting solve every step). The guess hit rate of
// 200 consecutive steps from the same state is reported beside each (counter hit_rate).
#include "tools/bench/bench.h"

namespace contactkit::bench {
namespace {

const Registrar kRegister([] {
  struct Case {
    const char* group;
    const char* model;
    int warmup;
  };
  for (const Case& c : {Case{"lcp_humanoid", "humanoid", 600},
                        Case{"lcp_stacked_primitives", "stacked_primitives", 1000}}) {
    Scenario sc;
    sc.model = c.model;
    sc.warmup_steps = c.warmup;
    sc.edit = [](mjModel* m) { m->opt.solver = mjSOL_NEWTON; };
    AddStep(c.group, "mj_step", sc, -1, DefaultSettings());
    for (int warm : {1, 0}) {
      ckSettings s = DefaultSettings();
      s.warmstart = warm;
      AddStep(c.group, warm ? "lcp_guess" : "lcp_pivoting", sc, ckSOL_LCP, s);
    }
  }
});

}  // namespace
}  // namespace contactkit::bench
