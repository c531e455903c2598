// Copyright 2026 The contactkit developers.
//
// Google Benchmark harness for step time: each benchmark times one step of a model from a fixed
// prepared state (restored before every step), so that ck_step with any solver and MuJoCo's own
// mj_step are measured on the same model and state in one process. After the run, every group
// prints each variant's time as a ratio to the group's reference (mj_step).
#ifndef CONTACTKIT_TOOLS_BENCH_BENCH_H_
#define CONTACTKIT_TOOLS_BENCH_BENCH_H_

#include <mujoco/mujoco.h>

#include <functional>
#include <string>

#include "contactkit/contactkit.h"

namespace contactkit::bench {

// a model and how to bring it into the state that is timed
struct Scenario {
  std::string model;                       // model argument (path or short name)
  int warmup_steps = 200;                  // mj_step steps before timing (to be in contact)
  std::function<void(mjModel*)> edit;      // optional model edit (options, timestep)
};

// Register benchmark "step/<group>/<variant>". solver < 0 times mj_step (the group's reference);
// otherwise ck_step with the given settings (settings.solver is overwritten by solver).
void AddStep(const std::string& group, const std::string& variant, const Scenario& scenario,
             int solver, const ckSettings& settings);

// default settings
ckSettings DefaultSettings();

// registers benchmarks at static-initialization time: static Registrar r([] { AddStep(...); });
struct Registrar {
  explicit Registrar(const std::function<void()>& f);
};

}  // namespace contactkit::bench

#endif  // CONTACTKIT_TOOLS_BENCH_BENCH_H_
