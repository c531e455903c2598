// Copyright 2026 The contactkit developers.
//
// Google Benchmark harness for step time: each benchmark times one step of a model from a fixed
// prepared state (restored before every step), so that ck_step with any solver and MuJoCo's own
// mj_step are measured on the same model and state in one process. After the run, every group
// prints each variant's time as a ratio to the group's reference (mj_step). A second kind of case
// times the Jacobians of one step (ck_transitionJac against mjd_transitionFD) with their accuracy.
#ifndef CONTACTKIT_TOOLS_BENCH_BENCH_H_
#define CONTACTKIT_TOOLS_BENCH_BENCH_H_

#include <mujoco/mujoco.h>

#include <functional>
#include <string>

#include "contactkit/contactkit.h"

namespace contactkit::bench {

// a model and how to bring it into the state that is timed
struct Scenario {
  std::string model;                   // model argument (path or short name)
  int warmup_steps = 200;              // mj_step steps before timing (to be in contact)
  double warmup_seconds = 0;           // if > 0: simulated time before timing instead
  std::function<void(mjModel*)> edit;  // optional model edit (options, timestep)
};

// Register benchmark "step/<group>/<variant>". solver < 0 times mj_step (the group's reference);
// otherwise ck_step with the given settings (settings.solver is overwritten by solver).
void AddStep(const std::string& group, const std::string& variant, const Scenario& scenario,
             int solver, const ckSettings& settings);

// how a Jacobian benchmark computes A and B of one step
enum class JacMethod {
  kAnalytic,        // ck_transitionJac (the group's accuracy is measured for it)
  kMujocoForward,   // mjd_transitionFD, forward differences (reference of the speedup)
  kMujocoCentered,  // mjd_transitionFD, centered differences (reference of the speedup)
};

// Register benchmark "jac/<group>/<variant>": one Jacobian of the step from the prepared state.
// The report prints each variant's time with the speedups over the group's kMujocoForward and
// kMujocoCentered runs, and for kAnalytic the relative Frobenius errors of A and B against
// centered ck_transitionFD (eps 1e-6) at the same state, computed once before timing.
void AddJacobian(const std::string& group, const std::string& variant, const Scenario& scenario,
                 int solver, const ckSettings& settings, JacMethod method);

// default settings
ckSettings DefaultSettings();

// registers benchmarks at static-initialization time: static Registrar r([] { AddStep(...); });
struct Registrar {
  explicit Registrar(const std::function<void()>& f);
};

}  // namespace contactkit::bench

#endif  // CONTACTKIT_TOOLS_BENCH_BENCH_H_
