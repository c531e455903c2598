// Copyright 2026 The contactkit developers.
//
// The one place where the tools reach contactkit's transition Jacobians (ck_transitionJac and
// ck_transitionFD of the derivative module). tools/CMakeLists.txt defines CK_HAVE_DERIVATIVES;
// without it these functions report that the build has no derivatives and the tools print "not
// available in this build" for our columns while MuJoCo's (mjd_transitionFD) still run.
#ifndef CONTACTKIT_TOOLS_COMMON_DERIVATIVES_H_
#define CONTACTKIT_TOOLS_COMMON_DERIVATIVES_H_

#include <mujoco/mujoco.h>

#include "contactkit/contactkit.h"

namespace contactkit::tools {

// true if this build has contactkit's transition Jacobians
bool HaveDerivatives();

// Jacobians of one ck_step at d's state and controls: A = d x_next / d x (nx x nx, nx = 2 nv + na),
// B = d x_next / d u (nx x nu), row-major, as mjd_transitionFD. Analytic (through the solver) or by
// finite differences of ck_step (centered or forward, step eps). d's state is restored. False if
// this build has no derivatives or the call failed.
bool TransitionJacobian(ckHandle* ck, const mjModel* m, mjData* d, mjtNum* A, mjtNum* B);
bool TransitionFiniteDiff(ckHandle* ck, const mjModel* m, mjData* d, mjtNum eps, bool centered,
                          mjtNum* A, mjtNum* B);

// MuJoCo's finite-difference Jacobians of mj_step (mjd_transitionFD; no sensor outputs)
void MujocoTransitionFD(const mjModel* m, mjData* d, mjtNum eps, bool centered, mjtNum* A,
                        mjtNum* B);

}  // namespace contactkit::tools

#endif  // CONTACTKIT_TOOLS_COMMON_DERIVATIVES_H_
