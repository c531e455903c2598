// Copyright 2026 The contactkit developers.
//
// When a run has diverged, judged the same way by every tool (ck-run, ck-bench and the
// measurements in bench_measure.h): MuJoCo reset the state (its bad qpos/qvel/qacc warnings), a
// velocity is not finite or beyond a bound, or a contact is deeper than a bound.
#ifndef CONTACTKIT_TOOLS_COMMON_DIVERGENCE_H_
#define CONTACTKIT_TOOLS_COMMON_DIVERGENCE_H_

#include <mujoco/mujoco.h>

#include <string>

namespace contactkit::tools {

// bounds beyond which a state counts as diverged
struct DivergenceLimits {
  double max_qvel = 1e3;         // largest |qvel| of any dof (m/s or rad/s)
  double max_penetration = 0.1;  // deepest contact, -dist (m)
};

// "|qvel| <= 1000 (m/s or rad/s), penetration <= 0.1 m": the bounds as the tools' notes state them
std::string DescribeLimits(const DivergenceLimits& limits);

// Follows one run: Start before the first step, Check after each; the first reason is kept.
class DivergenceCheck {
 public:
  explicit DivergenceCheck(const DivergenceLimits& limits = {}) : limits_(limits) {}

  // remember MuJoCo's reset-warning counters of d (a run starts from a clean state)
  void Start(const mjData* d);

  // check d after step `step` (0-based); true once the run has diverged
  bool Check(const mjModel* m, const mjData* d, int step);

  bool diverged() const { return !reason_.empty(); }

  // why, e.g. "MuJoCo reset the state (bad qacc at dof 7) at step 120"; empty if not diverged
  const std::string& reason() const { return reason_; }

 private:
  DivergenceLimits limits_;
  int warnings_[3] = {0, 0, 0};  // mjWARN_BADQPOS, BADQVEL, BADQACC counts at Start
  std::string reason_;
};

}  // namespace contactkit::tools

#endif  // CONTACTKIT_TOOLS_COMMON_DIVERGENCE_H_
