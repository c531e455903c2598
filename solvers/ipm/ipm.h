// Copyright 2026 The contactkit developers.
//
// Interior-point NCP solver "ipm": Dojo's primal-dual method (Howell et al., section IV) on
// MuJoCo's constraint problem. Per island, the unknowns are the next velocity v+ (island dofs)
// and, per constraint,
//  - equality rows: an impulse with J v+ + pos/h + R lambda = 0 (R: 1e-10 of MuJoCo's diagonal
//    estimate, so redundant rows stay solvable; MuJoCo's R and reference with soft_equality);
//  - joint/tendon limits and contact normals: gamma >= 0, s = pos/h + J v+ >= 0, gamma s = kappa
//    (contacts inside the margin are speculative: complementarity never lets them pull);
//  - contact friction: Dojo's second-order cones (19)-(23), one for the tangent pair, one for
//    torsion (condim 4, 6), one for rolling (condim 6): xi = (gamma, b_j / mu_j),
//    eta = (eta0, mu_j J_j v+), xi o eta = kappa e; friction opposes slip exactly;
//  - friction loss: the two-dimensional cone |f| <= frictionloss, xi = (h floss, lambda),
//    eta = (eta0, J v+).
// Mehrotra predictor-corrector (Algorithm 2) on the exact (unscaled) Newton system of this
// residual: the cones' complementarity is linearized as Arw(z) dx + Arw(x) dz = r, eta0 is
// eliminated per cone, and each Newton system reduces to the island's dofs,
// (M_eff + J' W J) dv = r, with W block diagonal per contact but nonsymmetric (the friction
// bound mu gamma couples the friction cones to the normal). It is factored by an LU without
// pivoting over the island's tree structure, or in constraint space for islands with few rows
// (island_lu.h). A solve that stalls is retried with Nesterov-Todd scaled directions, which stay
// defined where a force or velocity nears its cone's boundary. eta0 enters no linear residual: on
// feasible iterates it moves down to its central-path value given the contact's normal slack, where
// that lowers the cone's complementarity. ForceTangent differentiates the central-path point
// kappa_grad by the implicit function theorem.
#ifndef CONTACTKIT_SOLVERS_IPM_IPM_H_
#define CONTACTKIT_SOLVERS_IPM_IPM_H_

#include <memory>

#include "solvers/common/solver.h"

namespace contactkit {

// a new interior-point solver
std::unique_ptr<Solver> MakeIpmSolver();

// per-solve details beyond Solution (for tests and tools)
struct IpmStats {
  int islands = 0;           // islands solved
  int iterations = 0;        // most iterations of any island (attempts summed)
  int total_iterations = 0;  // iterations summed over islands
  int factorizations = 0;    // LU factorizations
  int sym_fallbacks = 0;     // factorizations redone without the friction coupling
  int retries = 0;           // failed island solves retried (central start, then softer)
  int rechecks = 0;          // re-solves with gaps re-measured at q+
  int lifts = 0;             // blocked steps after which velocity cones were lifted inside
  int tree_sparse = 0;       // islands factored in the tree-sparse layout
  int warm_islands = 0;      // islands of a re-solve started from the first solve
  int grad_islands = 0;      // islands with a stored kappa_grad iterate
  int refinements = 0;       // island force tangents refined since the solve

  void Reset() { *this = IpmStats(); }
};

// the solver's last IpmStats (null if solver is not an ipm solver)
const IpmStats* IpmSolverStats(const Solver* solver);

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_IPM_IPM_H_
