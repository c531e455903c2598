// Copyright 2026 The contactkit developers.
//
// Jacobians of one step: ck_transitionJac with every solver of the build against MuJoCo's
// mjd_transitionFD (forward and centered) on the same model and state, with the cost of
// ck_transitionVJP for one adjoint relative to the Jacobian and the accuracy of ck_transitionJac
// against centered ck_transitionFD beside the speedups. Targets (issue 18): every solver >= 10x
// faster than forward differences on the humanoid in contact and >= 50x on humanoid100, faster
// than them on every Menagerie robot; the VJP at most 1/5 of the Jacobian on humanoid100.
// Scenes: the humanoid in contact, a pile of 20 primitives (tools/common/gen_stack.h, 5 x 4 x 1)
// after settling, humanoid100 (slow: mjd_transitionFD takes seconds there; select it with
// --benchmark_filter=humanoid100) and, when CK_MENAGERIE names a folder, each Menagerie robot of
// the robot suite (tools/common/robot_suite.h) 0.2 s after its keyframe under its held controls.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tools/bench/bench.h"
#include "tools/common/gen_stack.h"
#include "tools/common/robot_suite.h"

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
    std::string group;
    std::string model;
    int warmup;             // steps
    double warmup_seconds;  // or simulated time
  };
  std::vector<Scene> scenes = {{"humanoid", "humanoid", 200, 0},
                               {"stack20", StackFile(), 500, 0},
                               {"humanoid100", "humanoid100", 200, 0}};
  // the Menagerie robots of the robot suite, at the suite's Jacobian state
  const char* menagerie = std::getenv("CK_MENAGERIE");
  if (menagerie && *menagerie) {
    const std::string dir = menagerie;
    for (const tools::SuiteModel& r : tools::SuiteModels(dir, "", nullptr)) {
      if (r.path.compare(0, dir.size(), dir) != 0) continue;
      scenes.push_back({r.key, r.path, 0, tools::kSuiteJacobianSettle});
    }
  }
  for (const Scene& sc : scenes) {
    Scenario s;
    s.model = sc.model;
    s.warmup_steps = sc.warmup;
    s.warmup_seconds = sc.warmup_seconds;
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
