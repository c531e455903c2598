// Copyright 2026 The contactkit developers.
//
// Adaptive step-size integration of MuJoCo's continuous-time dynamics (DiffMJX, section 3.1 and
// appendix C): ck_step advances the model's timestep h through internal steps of an embedded
// explicit Runge-Kutta pair of order 5(4) (Tsitouras 2011, or Dormand and Prince 1980), each
// accepted when its error estimate is within the tolerances, sized by a PID controller
// (Soderlind; the coefficients and clipping of Diffrax's PIDController).
//
// The state is (qpos, qvel, act) with the rate (qvel, qacc, act_dot) from one forward pass of the
// pipeline (ForwardSkip) at the stage's state and time, the controls held over the step. The
// constraint forces are a force law of the state there: the "mujoco" solver (MuJoCo's soft
// constraints); the velocity-impulse solvers (ipm, comfree, lcp) are no right-hand side of an ODE
// and the settings refuse them. Positions integrate on the manifold as MuJoCo's RK4 does
// (mj_integratePos of a tangent-space velocity sum), so quaternions stay unit, and each stage's
// angular velocity enters that sum through the inverse derivative of the exponential map
// (Munthe-Kaas), which keeps the pairs' order for rotations (MuJoCo's RK4 adds the stages' body
// angular velocities as they are, a first-order error in the rotation within the step).
//
// Error: the difference of the two solutions in the tangent space (positions, velocities,
// activations), each component divided by atol + rtol max(|y0|, |y1|) (1 for a rotational
// position), and the root mean square of those. Controller: factor = safety err_n^-b1
// err_n-1^-b2 err_n-2^-b3 with b1 = (P + I + D) / 5, b2 = -(P + 2D) / 5, b3 = D / 5, safety 0.9,
// clipped to [1, 10] after an accepted step and [0.2, 0.9] after a rejected one.
#ifndef CONTACTKIT_PLUGIN_STEP_ADAPTIVE_H_
#define CONTACTKIT_PLUGIN_STEP_ADAPTIVE_H_

#include <mujoco/mujoco.h>

#include <vector>

#include "contactkit/contactkit.h"

namespace contactkit {

// an embedded explicit pair: stages s, a (s x s, lower triangle), b (s), e = b - bhat (s), c (s);
// first same as last: the last stage is evaluated at the solution (its a row is b)
struct ButcherPair {
  int stages;
  const double* a;
  const double* b;
  const double* e;
  const double* c;
};

// the pair of an integrator (ckINT_TSIT5 or ckINT_DOPRI5)
const ButcherPair& PairOf(int integrator);

// d's activations clipped to their actuators' ranges (as an accepted internal step leaves them)
void ClipActivations(const mjModel* m, mjData* d);

// the rotational part of a stage's rate k (2nv+na) in the tangent space at the internal step's
// start (Munthe-Kaas): for the first dof v of each of the nrot ball/free rotations, the body
// angular velocity k[v..v+2] through the inverse derivative of the exponential map at the stage's
// offset theta = step dx[v..v+2]
void RotationRate(const int* rotations, int nrot, double step, const double* dx, double* k);
// its tangent: dk holds the tangent of the uncorrected rate, omega the uncorrected rate (k before
// RotationRate), ddx the tangent of dx; dk's rotational parts are corrected in place
void RotationRateTangent(const int* rotations, int nrot, double step, const double* dx,
                         const double* omega, const double* ddx, double* dk);

class AdaptiveIntegrator {
 public:
  // sizes from the model; allocates everything the steps use
  void Setup(const mjModel* m);

  // forget the controller's history and proposed step (ck_reset)
  void Reset();

  // advance d by m->opt.timestep with the handle's settings; false (d back at its start, with a
  // forward pass there) when the step could not be completed, ck_lastError saying why
  bool Step(ckHandle* ck, const mjModel* m, mjData* d);

  const ckStepInfo& info() const { return info_; }

  // the accepted internal steps' sizes of the last Step, in order (the first kMaxTaken of them;
  // ntaken() counts them all)
  static constexpr int kMaxTaken = 1024;
  const double* taken() const { return taken_.data(); }
  int ntaken() const { return ntaken_; }
  // the first dof of each ball/free joint's rotation
  const std::vector<int>& rotations() const { return rotations_; }
  // the step-size controller's state: with it, the next Step takes the internal steps another
  // integrator with the same state would
  struct Controller {
    double dt;        // proposed next internal step (0: the timestep)
    double inv_err1;  // 1 / error of the last accepted internal step
    double inv_err2;  // ... and of the one before
  };
  Controller controller() const { return {dt_, inv_err1_, inv_err2_}; }
  void SetController(const Controller& c);

 private:
  // the rate of the state in d (qvel, qacc, act_dot) into k (2nv+na), from its last forward pass
  void ReadRate(const mjData* d, double* k) const;
  // the same after a forward pass at d's state
  void Rate(ckHandle* ck, const mjModel* m, mjData* d, double* k);
  // the rotational part of a stage's rate k in the tangent space at y0 (Munthe-Kaas): the stage's
  // body angular velocity through the inverse derivative of the exponential map at its offset
  // step dx_ (dx_ as Combine left it)
  void Rotations(double step, double* k) const;
  // d's state = y0 + dt sum_j w_j K_j (on the manifold), at time t
  void Combine(const mjModel* m, mjData* d, const double* w, int n, double dt, double t);
  // the scaled RMS norm of the error dt sum_j e_j K_j between y0 and y1 (d's state)
  double ErrorNorm(const mjModel* m, const mjData* d, const ButcherPair& pair, double dt,
                   const ckAdaptiveSettings& s);
  // the state y0 (qpos, qvel, act) into d / from d
  void Load(const mjModel* m, mjData* d) const;
  void Save(const mjModel* m, const mjData* d);

  int nq_ = 0, nv_ = 0, na_ = 0, nk_ = 0;  // sizes; nk = 2 nv + na (a rate)
  std::vector<double> y0_;                 // state at the internal step's start (nq+nv+na)
  std::vector<double> start_;              // state at ck_step's start           (nq+nv+na)
  std::vector<double> k_;                  // stage rates                             (7 x nk)
  std::vector<double> dx_;                 // tangent-space combination                  (nk)
  std::vector<double> warm_;               // qacc_warmstart at the step's start         (nv)
  std::vector<int> rotational_;            // dof is a rotation of a ball/free joint     (nv)
  std::vector<int> rotations_;             // first dof of each ball/free joint's rotation
  std::vector<double> taken_;              // accepted internal steps' sizes      (kMaxTaken)
  int ntaken_ = 0;                         // accepted internal steps of the last Step
  double dt_ = 0;                          // proposed next internal step (0: the timestep)
  double inv_err1_ = 1, inv_err2_ = 1;     // 1 / error of the last two accepted steps
  ckStepInfo info_ = {};                   // the last ck_step's statistics
};

}  // namespace contactkit

#endif  // CONTACTKIT_PLUGIN_STEP_ADAPTIVE_H_
