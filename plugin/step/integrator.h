// Copyright 2026 The contactkit developers.
//
// What the step's integrators (pipeline.cc) and their tangents (plugin/deriv) share: MuJoCo's RK4
// tableau and the activation limit.
#ifndef CONTACTKIT_PLUGIN_STEP_INTEGRATOR_H_
#define CONTACTKIT_PLUGIN_STEP_INTEGRATOR_H_

#include <mujoco/mujoco.h>

namespace contactkit {

// MuJoCo's RK4 Butcher tableau: a (3 x 3, row i the weights of stage i + 1), b (4), c (4)
inline constexpr mjtNum kRK4A[9] = {0.5, 0, 0, 0, 0.5, 0, 0, 0, 1};
inline constexpr mjtNum kRK4B[4] = {1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0};
inline constexpr mjtNum kRK4C[4] = {0, 0.5, 0.5, 1};

// activation act of actuator iu clipped to its actrange if limited; clamped (nullable): whether
// act lay outside
inline mjtNum ClipActivation(const mjModel* m, int iu, mjtNum act, bool* clamped) {
  bool outside = false;
  if (m->actuator_actlimited[iu]) {
    const mjtNum* range = m->actuator_actrange + 2 * iu;
    outside = act < range[0] || act > range[1];
    act = mju_clip(act, range[0], range[1]);
  }
  if (clamped) *clamped = outside;
  return act;
}

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_STEP_INTEGRATOR_H_
