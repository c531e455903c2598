// Copyright 2026 The contactkit developers.
#include "tools/common/divergence.h"

#include <cmath>
#include <cstdio>

namespace contactkit::tools {
namespace {

constexpr int kResetWarnings[3] = {mjWARN_BADQPOS, mjWARN_BADQVEL, mjWARN_BADQACC};
constexpr const char* kResetNames[3] = {"qpos", "qvel", "qacc"};

std::string Format(const char* fmt, double a, double b, int i, int step) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), fmt, a, b, i, step);
  return buf;
}

}  // namespace

std::string DescribeLimits(const DivergenceLimits& limits) {
  char buf[200];
  std::snprintf(buf, sizeof(buf),
                "MuJoCo's bad qpos/qvel/qacc reset, |qvel| > %g (m/s or rad/s) or not finite, "
                "penetration > %g m",
                limits.max_qvel, limits.max_penetration);
  return buf;
}

void DivergenceCheck::Start(const mjData* d) {
  for (int k = 0; k < 3; k++) warnings_[k] = d->warning[kResetWarnings[k]].number;
  reason_.clear();
}

bool DivergenceCheck::Check(const mjModel* m, const mjData* d, int step) {
  if (diverged()) return true;
  // MuJoCo's own reset (mj_checkPos/Vel/Acc zero the state and count a warning)
  for (int k = 0; k < 3; k++) {
    const mjWarningStat& w = d->warning[kResetWarnings[k]];
    if (w.number > warnings_[k]) {
      reason_ = "MuJoCo reset the state (bad " + std::string(kResetNames[k]) + " at dof " +
                std::to_string(w.lastinfo) + ") at step " + std::to_string(step);
      return true;
    }
  }
  // velocities: finite and bounded; positions finite
  for (int i = 0; i < m->nv; i++) {
    const double v = d->qvel[i];
    if (!std::isfinite(v)) {
      reason_ = "qvel not finite at dof " + std::to_string(i) + " at step " + std::to_string(step);
      return true;
    }
    if (std::fabs(v) > limits_.max_qvel) {
      reason_ =
          Format("|qvel| %.3g > %g at dof %d at step %d", std::fabs(v), limits_.max_qvel, i, step);
      return true;
    }
  }
  for (int i = 0; i < m->nq; i++) {
    if (!std::isfinite(d->qpos[i])) {
      reason_ =
          "qpos not finite at index " + std::to_string(i) + " at step " + std::to_string(step);
      return true;
    }
  }
  // the deepest contact of the state the step started from
  for (int i = 0; i < d->ncon; i++) {
    const double depth = -d->contact[i].dist;
    if (depth > limits_.max_penetration) {
      reason_ = Format("penetration %.3g m > %g m at contact %d at step %d", depth,
                       limits_.max_penetration, i, step);
      return true;
    }
  }
  return false;
}

}  // namespace contactkit::tools
