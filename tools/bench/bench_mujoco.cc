// Copyright 2026 The contactkit developers.
//
// The pass-through: ck_step with solver "mujoco" against mj_step (target ratio <= 1.05).
#include "tools/bench/bench.h"

namespace contactkit::bench {
namespace {

const Registrar kRegister([] {
  for (const char* model : {"humanoid", "22_humanoids", "humanoid100"}) {
    Scenario sc;
    sc.model = model;
    sc.warmup_steps = 200;
    AddStep(model, "mj_step", sc, -1, DefaultSettings());
    AddStep(model, "ck_step_mujoco", sc, ckSOL_MUJOCO, DefaultSettings());
  }
});

}  // namespace
}  // namespace contactkit::bench
