// Copyright 2026 The contactkit developers.
//
// The finite-difference reference (ck_transitionFD, and the fallback of ck_transitionJac): the
// Jacobians of a step by mjd_transitionFD's differences, each step taken by a target.
#ifndef CONTACTKIT_PLUGIN_DERIV_FD_REFERENCE_H_
#define CONTACTKIT_PLUGIN_DERIV_FD_REFERENCE_H_

#include <mujoco/mujoco.h>

#include "plugin/deriv/workspace.h"

namespace contactkit {

// what the differences step and where their columns go
class FdTarget {
 public:
  virtual ~FdTarget() = default;
  // one step from the inputs in the scratch mjData: next state (nq+nv+na), sensors (ns, nullable)
  virtual void Step(const mjModel* m, int skipstage, int skipsensor, double* next,
                    double* sensor) = 0;
  // column col of [A B] (state, 2nv+na) and of [C D] (sensors, ns)
  virtual void EmitState(int col, const double* column) = 0;
  virtual void EmitSensor(int col, const double* column) = 0;
};

class FdReference {
 public:
  void Carve(ArenaCarver& c, const DerivSizes& n);

  // the columns of mjd_transitionFD's differences at d (perturbation order, positions in the
  // tangent space, controls kept in ctrlrange, forward or centered with step eps), each
  // perturbation set in scratch: state and / or control columns, with sensors
  // (only: the columns of [A B] to difference, ndx + nu; null: all)
  void Run(const mjModel* m, const mjData* d, mjData* scratch, double eps, int centered, bool state,
           bool ctrl, bool sensors, FdTarget* target, const unsigned char* only = nullptr);

 private:
  double *next_, *next_plus_, *next_minus_;        // states  (nq+nv+na)
  double *sensor_, *sensor_plus_, *sensor_minus_;  // sensors (ns)
  double* column_;                                 // (max(2nv+na, ns))
};

// copy the inputs of a step (state, controls, applied forces, mocap, warm start, time) of src
// into dst
void CopyStepInputs(const mjModel* m, const mjData* src, mjData* dst);

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_DERIV_FD_REFERENCE_H_
