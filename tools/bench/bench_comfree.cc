// Copyright 2026 The contactkit developers.
//
// comfree against mj_step (Newton) and against MuJoCo's PGS through the pass-through, on the
// dense drop and on articulated models; the step-time sweep over contact counts is
// ck-bench comfree-slopes (tools/bench_suite/comfree_slopes.cc).
#include "tools/bench/bench.h"

namespace contactkit::bench {
namespace {

const Registrar kRegister([] {
  for (const char* model : {"stacked_primitives", "humanoid", "22_humanoids"}) {
    Scenario sc;
    sc.model = model;
    sc.warmup_steps = 500;
    AddStep(model, "mj_step", sc, -1, DefaultSettings());
    AddStep(model, "ck_step_comfree", sc, ckSOL_COMFREE, DefaultSettings());
    Scenario pgs = sc;
    pgs.edit = [](mjModel* m) { m->opt.solver = mjSOL_PGS; };
    AddStep(model, "ck_step_mujoco_pgs", pgs, ckSOL_MUJOCO, DefaultSettings());
  }
});

}  // namespace
}  // namespace contactkit::bench
