// Copyright 2026 The contactkit developers.
//
// The interface every solver in solvers/ implements. Setup allocates; Solve never does.
#ifndef CONTACTKIT_SOLVERS_COMMON_SOLVER_H_
#define CONTACTKIT_SOLVERS_COMMON_SOLVER_H_

#include <string>

#include "contactkit/settings.h"
#include "solvers/common/problem.h"

namespace contactkit {

class Solver {
 public:
  virtual ~Solver() = default;

  // allocate workspace for every problem that fits in dims; false with a message on error
  virtual bool Setup(const ProblemDims& dims, const ckSettings& settings, std::string* error) = 0;

  // take new settings between steps (no allocation; dims unchanged)
  virtual void SetSettings(const ckSettings& settings) = 0;

  // solve p: write sol->force for rows [0, p.nrow), sol->v_next and the statistics
  virtual void Solve(const Problem& p, Solution* sol) = 0;

  // forget warm-start information (after a reset or a jump in state)
  virtual void Reset() {}

  // Optional: take the warm-start information of other (a solver of the same kind set up for
  // the same dims), so that the next Solve is the one other would make (the derivative's shadow
  // handle: the step the caller's handle would take). False, with nothing changed, if it has
  // none or other differs. Must not allocate.
  virtual bool WarmStartFrom(const Solver& other) { return false; }

  // Derivative of the last solution (Solve on this p, same sol) along a perturbation of the
  // problem data, by the implicit function theorem on the solver's own optimality conditions,
  // reusing its final factorization: writes dforce (nrow). The velocity follows from
  // VelocityTangent. Returns false if the solver has no analytic derivative (the caller then
  // falls back to finite differences). Must not allocate.
  virtual bool ForceTangent(const Problem& p, const Solution& sol, const ProblemTangent& dir,
                            double* dforce) {
    return false;
  }

  // Optional, blocked force tangents (one factorization, a matrix right-hand side): how many
  // directions p's tangents take in one block (0: none, ForceTangent one by one). QueueTangent
  // takes the direction of slot (< TangentSlots) and FlushTangents solves slots [0, nslot) at
  // once, writing slot s's dforce at dforce + s * p.nrow, equal to ForceTangent's up to rounding.
  // False if the solver has no analytic derivative. Must not allocate.
  virtual int TangentSlots(const Problem& p) const { return 0; }
  virtual bool QueueTangent(const Problem& p, const ProblemTangent& dir, int slot) { return false; }
  virtual bool FlushTangents(const Problem& p, int nslot, double* dforce) { return false; }
  // Optional, with blocked force tangents: on, the caller reads FlushTangents' forces only
  // through J' dforce (set before each stage's directions), so that a part of them that J' maps
  // to zero (to rounding) may be left out; off (the default): ForceTangent's forces
  virtual void SetForcesThroughJacobian(bool on) {}
  // Optional, with blocked force tangents: QueueTangent takes a direction whose dv_free is left
  // unsolved (dir.v_free null, dir.v_free_rhs), and the solver solves the slots' at once
  virtual bool DefersFreeVelocity() const { return false; }
  // Optional: the tangent methods read dir.M's values through ProblemTangent::Mass() and its
  // products through SubMassTangent, so that dM may be left unformed (dir.M_lazy)
  virtual bool ReadsMassLazily() const { return false; }
  // Optional: the tangent methods never read dir.vel and dir.aref (comfree: its forces see
  // v_free, not v), so that a velocity direction's row tangents need not be formed (then null)
  virtual bool ReadsRowVelocity() const { return true; }
  // Optional, with blocked force tangents: QueueTangent forms a velocity direction's row
  // tangents it reads from J's column itself (dir.vel_unit), so that they need not be formed
  virtual bool FormsVelocityRows() const { return false; }
  // Optional, with blocked force tangents: the rows (nrow, 1: read) whose dJ QueueTangent reads
  // of a direction that gives dJ v_free (dir.J_vfree); the other rows' dJ need not be formed.
  // Null: every row's. Valid until the next Solve
  virtual const char* TangentJacobianRows(const Problem& p) { return nullptr; }
  // Optional, with TangentJacobianRows: adds w = M_eff^-1 J_i' of a row it marks into w (nv, zero
  // on the row's trees) if the solver keeps it; a direction then gives dJ_i w (dir.J_w) instead
  // of row i's dJ. False: the row's dJ is formed. Valid until the next Solve
  virtual bool TangentRowWeight(const Problem& p, int row, double* w) { return false; }
  // Optional, with TangentJacobianRows: QueueTangent reads dJ (beyond the rows it marks) only in
  // products with fixed vectors, which a direction of that path then gives instead: dJ v+ and
  // dJ' f of the solution (dir.J_vnext, dir.J_force) and, where TangentProducts returns true,
  // dJ x and dJ' y of its velocity x (nv) and row weights y (nrow) (dir.J_x, dir.J_y; either
  // null: not read). Valid until the next Solve
  virtual bool ReadsJacobianProducts() const { return false; }
  virtual bool TangentProducts(const Problem& p, const double** x, const double** y) {
    return false;
  }
  // Optional, with TangentJacobianRows: QueueTangent reads dir.J_vfree (false: it is not formed,
  // dir.J_vfree and the row weights' dir.J_w null)
  virtual bool ReadsJacobianFreeVelocity() const { return true; }
  // Optional, with TangentJacobianRows: QueueTangent reads a position direction's dir.R and
  // dir.aref (false: they are not formed, and null). Valid until the next Solve
  virtual bool ReadsRowImpedance(const Problem& p) { return true; }

  // Optional: the force (nrow) at which ForceTangent differentiates when it is not the last
  // solution's (ipm: its central point at kappa_grad, where contacts from distance push); null:
  // the solution's. Must not allocate.
  virtual const double* TangentForce(const Problem& p) { return nullptr; }

  // Optional, for complementarity-aware gradients (Nimble section IV-D): make the following
  // ForceTangent calls on the last solution differentiate another classification of its
  // contacts: mode[c] = 1 clamping (the contact's normal velocity held at zero), 0 separating
  // (no force), -1 as solved, for each problem contact c; null restores the solver's own
  // classification. Returns false if the solver has no such notion. Must not allocate.
  virtual bool SetTangentModes(const Problem& p, const signed char* mode) { return false; }

  // Optional, after SetTangentModes: true if the caller should keep the modes' tangent rather
  // than choose by Nimble's score (the larger gradient), because the solve's own tangent inflates
  // that score (ipm: its targets pos/h tie a contact's velocity to its depth, a 1/h term that
  // outweighs any other) and the modes changed the classification of some contact.
  virtual bool KeepTangentModes() const { return false; }

  // Optional, for solvers that set Solution::position_correction: its tangent along dir into
  // du (nv), for the classification of the last solve. Returns false if it has none. Must not
  // allocate.
  virtual bool PositionTangent(const Problem& p, const ProblemTangent& dir, double* du) {
    return false;
  }

  // Optional, reverse mode (a VJP): PrepareAdjoint takes force weights y (nrow) on the last
  // solution, and with a position correction weights xi (nv) of PositionTangent's du (else
  // null), and makes, with transposed solves of the forward factorizations, the adjoint of the
  // tangents' linear maps; AdjointDot then returns y' dforce + xi' du for the dforce and du that
  // ForceTangent and PositionTangent would write along dir (equal up to rounding) with products
  // only. False if the solver has none for this solve (the caller calls the tangents). Must not
  // allocate.
  virtual bool PrepareAdjoint(const Problem& p, const Solution& sol, const double* y,
                              const double* xi) {
    return false;
  }
  virtual double AdjointDot(const Problem& p, const Solution& sol, const ProblemTangent& dir) {
    return 0;
  }
  // Optional, after PrepareAdjoint: AdjointDot's weight c (nv) of dir.v_free, the term being
  // sign c' dv_free (*sign set), which AdjointDot leaves out when dir.v_free is null (the caller
  // then adds it, transposed through dv_free's smooth forces); null if the solver has none
  virtual const double* AdjointFreeVelocityWeight(double* sign) const { return nullptr; }
  // Optional, after PrepareAdjoint: AdjointDot's weights of dir's row arrays added into w, so
  // that AdjointDot(dir) is the sum over the touched islands' rows of w . (dir.J, pos, vel, R,
  // aref) plus AdjointDot(dir) with those arrays null (diag_approx null throughout, disp left to
  // AdjointDot); false if the solver has none for this solve
  virtual bool AdjointRowWeights(const Problem& p, const Solution& sol, RowWeights* w) const {
    return false;
  }
};

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_COMMON_SOLVER_H_
