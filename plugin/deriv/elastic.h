// Copyright 2026 The contactkit developers.
//
// Nimble's elastic bounce correction of the position blocks of A (setting "elastic_correction";
// the method in elastic.cc).
#ifndef CONTACTKIT_PLUGIN_DERIV_ELASTIC_H_
#define CONTACTKIT_PLUGIN_DERIV_ELASTIC_H_

#include "contactkit/settings.h"
#include "plugin/deriv/workspace.h"
#include "solvers/common/problem.h"

namespace contactkit {

class ElasticCorrection {
 public:
  static constexpr int kMaxBounce = 16;  // bouncing contacts corrected per step

  void Carve(ArenaCarver& c, const DerivSizes& n);
  // contacts of problem (null: none) approaching at qvel (nv) at the start of the step, if the
  // settings ask for the correction
  void Prepare(const ckSettings& s, const Problem* problem, const double* qvel);
  // of those, the ones separating at vnext (nv)
  void Select(const double* vnext);
  // accumulate <W_i, X0> from column col of the state Jacobian (out: 2nv+na)
  void Column(int col, const double* out);
  // correct A (ndx x ndx, nullable) and the VJP gx += A' dx (gx nullable)
  void Finish(double h, int ndx, double* A, double* gx, const double* dx);
  // contacts being corrected
  int n() const { return n_; }

 private:
  int nv_ = 0;
  int n_ = 0;            // bouncing contacts of this step
  double* normal_rows_;  // their normal rows, dense            (kMaxBounce x nv)
  double* norm2_;        // |J_i|^2                              (kMaxBounce)
  double* sigma_;        // restitution                          (kMaxBounce)
  double* projection_;   // <W_i, X0> of dq+/dq and dq+/dv       (2 kMaxBounce)
};

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_DERIV_ELASTIC_H_
