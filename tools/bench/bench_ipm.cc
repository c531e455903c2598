// Copyright 2026 The contactkit developers.
//
// The interior-point solver against mj_step with MuJoCo's Newton solver, on the same model and
// state: the humanoid in contact, stacked primitives, 22 humanoids. Counters: iterations,
// contacts, penetration (pen_mm) beside each time. Target: <= 2x mj_step on the humanoid.
#include "tools/bench/bench.h"

namespace contactkit::bench {
namespace {

const Registrar kRegister([] {
  struct Case {
    const char* model;
    int warmup;
  };
  for (const Case& c :
       {Case{"humanoid", 200}, Case{"stacked_primitives", 500}, Case{"22_humanoids", 200}}) {
    Scenario sc;
    sc.model = c.model;
    sc.warmup_steps = c.warmup;
    sc.edit = [](mjModel* m) { m->opt.solver = mjSOL_NEWTON; };
    AddStep(std::string("ipm_") + c.model, "mj_step", sc, -1, DefaultSettings());
    AddStep(std::string("ipm_") + c.model, "ipm", sc, ckSOL_IPM, DefaultSettings());
    ckSettings soft = DefaultSettings();
    soft.ipm.kappa_tol = 1e-6;
    AddStep(std::string("ipm_") + c.model, "ipm_kappa1e-6", sc, ckSOL_IPM, soft);
  }
});

}  // namespace
}  // namespace contactkit::bench
