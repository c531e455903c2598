// Copyright 2026 The contactkit developers.
//
// The integrator tangent: the integrator's matrix of a stage (M under RK4 and explicit Euler,
// M + h D under Euler's implicit damping, M - h qDeriv under the implicit integrators) factored
// and solved, and the tangents of the position and activation updates. RK4 chains four stages
// with MuJoCo's tableau (plugin/step/integrator.h).
#ifndef CONTACTKIT_PLUGIN_DERIV_INTEGRATOR_TANGENT_H_
#define CONTACTKIT_PLUGIN_DERIV_INTEGRATOR_TANGENT_H_

#include <mujoco/mujoco.h>

#include "plugin/deriv/workspace.h"
#include "solvers/common/mass.h"

namespace contactkit {

class IntegratorTangent {
 public:
  void Carve(ArenaCarver& c, const DerivSizes& n, const mjModel* m);
  // the dense per-tree layout the implicit integrators factor in (dof_tree: nv)
  void Bind(const TreeBlocks* trees, const int* dof_tree, int ntree);

  // the integrator matrix of the stage in d (M: d's mass matrix, nM) factored, and qacc, after
  // SetKind with the same d; false if M - h qDeriv is singular
  bool Prepare(const mjModel* m, const mjData* d, const double* M, bool rk4);
  // implicit, fast and bias_dof for the model's integrator at d (rk4: the stages are RK4's)
  void SetKind(const mjModel* m, const mjData* d, bool rk4);
  // src: the factor of M (with_damping: M + h D, Euler's implicit damping) of the d the next
  // Prepare reads, made by another part (the stage's extraction: "mujoco"'s, or the shadow
  // step's): that Prepare copies it instead of factoring when it wants the same matrix.
  // ClearAdopted: none
  void AdoptFactor(const TreeMass& src, bool with_damping);
  void ClearAdopted() { adopted_ = false; }
  // test hook: factors adopted (true) or every Prepare factoring its own
  static inline bool adopt_factors_ = true;
  // x = M_int^-1 x, x = M_int^-T x   (nv), tree by tree (zero trees skipped)
  void Solve(double* x) const { Solve(x, nullptr, nullptr); }
  // the same; [lo, hi): the dofs from the first tree solved to the last (0, 0 if none: x was zero)
  void Solve(double* x, int* lo, int* hi) const;
  void SolveT(double* x) const;

  // the stage's integrator and what the tangents reuse
  double* qacc;               // acceleration the integrator uses   (nv)
  TreeMass mass;              // M or M + h D, factored (Euler, RK4)
  double* lu;                 // M - h qDeriv per tree, LU (implicit) (ntreeblock)
  int* pivots;                // its pivots                          (nv)
  bool implicit = false;      // the integrator matrix is lu
  bool damped = false;        // the integrator matrix is M + h D (Euler's implicit damping)
  bool fast = false;          // implicitfast: qDeriv without the bias forces' part but on bias_dof
  unsigned char* bias_dof;    // implicit: 1 where the matrix holds the bias forces' derivative (nv)
  bool fast_no_bias = false;  // implicitfast without a standalone free body: qDeriv has no RNE part
  // the integrator's acceleration (qacc) differs from the solver's: Euler's implicit damping, the
  // implicit integrators
  bool split() const { return damped || implicit; }
  double* step_maps;        // IntegrateMaps of the step's velocity     (18 njnt)
  double* correction_maps;  // IntegrateMaps of the position correction (18 njnt)
  double* qvel_next;        // v+, or RK4's weighted velocity            (nv)
  double* position_mid;     // q (+) h v+ before the position correction (nv)
  double* rk_stage_jac;     // stage Jacobian of (qacc, act_dot), column-major ((nv+na) ndir)
  double* rk_dir_state;     // per direction: tangent of the next stage state (ndx ndir)
  double* rk_dir_sum;       // per direction: sum b_j (dv_j, dF_j)             (ndx ndir)
  double* rk_state;         // nominal stage states                    (4 (nq+nv+na))
  double* rk_rate;          // nominal stage rates (qacc, act_dot)     (4 (nv+na))

 private:
  const TreeBlocks* trees_ = nullptr;
  const int* dof_tree_ = nullptr;  // (nv)
  int ntree_ = 0;
  bool adopted_ = false;          // mass holds AdoptFactor's copy
  bool adopted_damping_ = false;  // of M + h D
};

// maps (18 njnt) of the position update q (+) h w: R(h w) and the right Jacobian of each ball and
// free joint's rotation
void IntegrateMaps(const mjModel* m, const double* w, double h, double* maps);

// tangent out (nv) of q (+) h w for tangents dq, dw of q, w, with maps from IntegrateMaps of w;
// joints [j0, j1) only (j1 < 0: to the last), their dofs of out written, the others untouched
void IntegrateTangent(const mjModel* m, const double* maps, double h, const double* dq,
                      const double* dw, double* out, int j0 = 0, int j1 = -1);

// tangent out (na) of the activation update act + h rate (clipped to actrange) along dact, drate
void ActivationTangent(const mjModel* m, const double* act, const double* rate, const double* dact,
                       const double* drate, double h, double* out);

// transposes of IntegrateTangent (gq = Tq' a, gw = Tw' a for out = Tq dq + Tw dw) and of
// ActivationTangent (alpha = a where the update is not clipped: out' a = alpha' (dact + h drate))
void IntegrateTangentT(const mjModel* m, const double* maps, double h, const double* a, double* gq,
                       double* gw);
void ActivationAdjoint(const mjModel* m, const double* act, const double* rate, double h,
                       const double* a, double* alpha);

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_DERIV_INTEGRATOR_TANGENT_H_
