// Copyright 2026 The contactkit developers.
//
// Jacobians of one step: ck_transitionJac with every solver of the build against MuJoCo's
// mjd_transitionFD (forward and centered) on the same model and state, with the accuracy of
// ck_transitionJac against centered ck_transitionFD beside the speedups. Targets (issue 6): on
// the humanoid in contact >= 10x faster than forward and >= 20x faster than centered differences.
// Scenes: the humanoid in contact, a pile of 20 primitives (tools/common/gen_stack.h, 5 x 4 x 1)
// after settling, and humanoid100 (slow: mjd_transitionFD takes seconds there; select it with
// --benchmark_filter=humanoid100).
#include <cstdio>
#include <fstream>
#include <string>

#include "tools/bench/bench.h"
#include "tools/common/gen_stack.h"

namespace contactkit::bench {
namespace {

// the 20-body pile as a file (MuJoCo 2.2.2 loads MJCF from files)
std::string StackFile() {
  const std::string path = "/tmp/ck_bench_deriv_stack20.xml";
  std::ofstream(path) << tools::StackedPrimitivesXML(5, 4, 1, 0.002);
  return path;
}

const Registrar kRegister([] {
  struct Scene {
    const char* group;
    std::string model;
    int warmup;
  };
  const Scene scenes[] = {{"humanoid", "humanoid", 200},
                          {"stack20", StackFile(), 500},
                          {"humanoid100", "humanoid100", 200}};
  for (const Scene& sc : scenes) {
    Scenario s;
    s.model = sc.model;
    s.warmup_steps = sc.warmup;
    AddJacobian(sc.group, "mjd_forward", s, -1, DefaultSettings(), JacMethod::kMujocoForward);
    AddJacobian(sc.group, "mjd_centered", s, -1, DefaultSettings(), JacMethod::kMujocoCentered);
    for (int solver = 0; solver < ckNSOLVER; solver++) {
      if (!ck_solverAvailable(solver)) continue;
      // ipm at kappa_grad = kappa_tol: the derivative of the step it takes (its default
      // kappa_grad gives smoothed gradients that differ from differences by design)
      ckSettings settings = DefaultSettings();
      settings.ipm.kappa_grad = settings.ipm.kappa_tol;
      AddJacobian(sc.group, std::string("ck_jac_") + ck_solverName(solver), s, solver, settings,
                  JacMethod::kAnalytic);
    }
  }
});

}  // namespace
}  // namespace contactkit::bench
