// Copyright 2026 The contactkit developers.
//
// ck_rolloutGrad's tape: what each step of a rollout needs to be differentiated again in the
// backward sweep (docs/derivatives.md, Reverse mode over a rollout).
#ifndef CONTACTKIT_PLUGIN_DERIV_ROLLOUT_GRAD_H_
#define CONTACTKIT_PLUGIN_DERIV_ROLLOUT_GRAD_H_

#include <mujoco/mujoco.h>

#include <vector>

#include "plugin/step/adaptive.h"

namespace contactkit {

// the steps of one rollout, kept for its backward sweep; sized by Reserve (grows only)
class RolloutTape {
 public:
  RolloutTape() = default;
  ~RolloutTape();
  RolloutTape(const RolloutTape&) = delete;
  RolloutTape& operator=(const RolloutTape&) = delete;

  // room for nstep steps of model m; false if the scratch mjData cannot be made
  bool Reserve(const mjModel* m, int nstep);

  // step t starts from d's state (after its controls are set) and the handle's adaptive
  // step-size controller
  void Save(int t, const mjModel* m, const mjData* d, const AdaptiveIntegrator::Controller& c);
  const AdaptiveIntegrator::Controller* controller(int t) const { return &controller_[t]; }

  // the scratch mjData at step t's start (the inputs that the rollout holds taken from held)
  mjData* Load(int t, const mjModel* m, const mjData* held);

  double* dx(int t) { return dx_.data() + t * ndx_; }  // loss gradient after step t    (ndx)
  double* ds(int t) { return ds_.data() + t * ns_; }   // ... and of its sensors        (ns)
  double* adjoint() { return adjoint_.data(); }        // the running adjoint           (ndx)
  double* gx() { return gx_.data(); }                  // one step's dL/dx             (ndx)

  // room for one step's Jacobians in np parameters (grows only; called before the sweep)
  void ReserveParams(int np);
  double* dxdp() { return dxdp_.data(); }  // one step's d(next state)/dp     (ndx x np)
  double* dsdp() { return dsdp_.data(); }  // ... and of its sensors         (ns x np)
  int* how() { return how_.data(); }       // how each column was computed   (np)

 private:
  int nstep_ = 0, nstate_ = 0, ndx_ = 0, ns_ = 0;
  std::vector<double> state_;  // qpos, qvel, act, ctrl, qacc_warmstart, time, plugin
                               // state of each step's start            (nstep x nstate_)
  std::vector<AdaptiveIntegrator::Controller> controller_;  // of each step's start  (nstep)
  std::vector<double> dx_, ds_;       // loss gradients                 (nstep x ndx, nstep x ns)
  std::vector<double> adjoint_, gx_;  // (ndx)
  std::vector<double> dxdp_, dsdp_;   // parameter Jacobians of one step  (ndx x np, ns x np)
  std::vector<int> how_;              // their columns' ckParamHow        (np)
  mjData* data_ = nullptr;            // scratch state of the backward sweep
};

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_DERIV_ROLLOUT_GRAD_H_
