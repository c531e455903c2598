// Copyright 2026 The contactkit developers.
#include "tools/common/derivatives.h"

namespace contactkit::tools {

#ifdef CK_HAVE_DERIVATIVES

bool HaveDerivatives() { return true; }

bool TransitionJacobian(ckHandle* ck, const mjModel* m, mjData* d, mjtNum* A, mjtNum* B) {
  return ck_transitionJac(ck, m, d, A, B, nullptr, nullptr) == 0;
}

bool TransitionFiniteDiff(ckHandle* ck, const mjModel* m, mjData* d, mjtNum eps, bool centered,
                          mjtNum* A, mjtNum* B) {
  return ck_transitionFD(ck, m, d, eps, centered ? 1 : 0, A, B, nullptr, nullptr) == 0;
}

#else

bool HaveDerivatives() { return false; }

bool TransitionJacobian(ckHandle*, const mjModel*, mjData*, mjtNum*, mjtNum*) { return false; }

bool TransitionFiniteDiff(ckHandle*, const mjModel*, mjData*, mjtNum, bool, mjtNum*, mjtNum*) {
  return false;
}

#endif

void MujocoTransitionFD(const mjModel* m, mjData* d, mjtNum eps, bool centered, mjtNum* A,
                        mjtNum* B) {
  mjd_transitionFD(m, d, eps, centered ? 1 : 0, A, B, nullptr, nullptr);
}

}  // namespace contactkit::tools
