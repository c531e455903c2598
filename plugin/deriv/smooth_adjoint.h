// Copyright 2026 The contactkit developers.
//
// The reverse pass of the smooth stage's Newton-Euler tangents (smooth_adjoint.cc): for one
// adjoint x, x' d(M a + bias)/dq_k, x' d(M (a - aint))/dq_k and x' d bias/dv_k of every dof k from
// sums over the tree made once, instead of a tangent vector per direction (SmoothTangent's
// RneTangent and RneVelTangent, whose weighted sums these are).
#ifndef CONTACTKIT_PLUGIN_DERIV_SMOOTH_ADJOINT_H_
#define CONTACTKIT_PLUGIN_DERIV_SMOOTH_ADJOINT_H_

#include "plugin/deriv/workspace.h"

namespace contactkit {

// the sums of one adjoint (pass 0: the weights of d(M a + bias), pass 1: of d(M (a - aint)))
struct RneAdjointWork {
  double* carried_crb;   // sum of x_j crb cdof_j over the dofs j >= i of i's subtree  (2 x 6 nv)
  double* carried_bsub;  // the same of x_j Bsub' cdof_j (pass 0)                      (6 nv)
  double* chain;         // sum of x_j cdof_j over i and its ancestor dofs             (2 x 6 nv)
  double* child;         // the carried sums (crb, bsub) of each body, per pass       (24 nbody)
  bool ready = false;    // prepared for the current adjoint (PrepareRneAdjoint)
  bool damped = false;   // and pass 1 too
  void Carve(ArenaCarver& c, const DerivSizes& n);
};

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_DERIV_SMOOTH_ADJOINT_H_
