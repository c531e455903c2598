// Copyright 2026 The contactkit developers.
//
// Interior-point solver "ipm": Dojo's primal-dual method (Howell et al., section IV) on MuJoCo's
// constraint problem, island by island: hard contacts and limits, second-order friction cones,
// Mehrotra predictor-corrector reduced to the island's dofs and factored by IslandLU. ForceTangent
// differentiates the central-path point kappa_grad. The formulation is in docs/solvers.md (ipm).
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
  int tangent_islands = 0;   // island force tangents solved since the solve (islands touched)
  int adjoint_islands = 0;   // island adjoints (PrepareAdjoint) solved since the solve
  int adjoint_refined = 0;   // ... of them refined
  int holds = 0;             // islands re-solved without recovery (their answer added energy)
  int dissipated = 0;        // ... whose answer still did, scaled down to its least energy
  int prox_solved = 0;       // islands the proximal retry solved
  int refined_dirs = 0;      // Newton directions refined on the unfactored dynamics
  int polished = 0;          // islands solved by the polish on a complementarity pattern
  int polish_repeats = 0;    // its damped patterns not re-run (the last call's, rejected)
  double polish_work = 0;    // its damped patterns' dense LU work (sum of n^3), repeats' too
  int soft_twins = 0;        // soft attempts not run: their twin's run with every decision alike
  int semismooth = 0;        // islands solved by the semismooth Newton (after the polish)
  int newton_steps = 0;      // its Newton steps
  int far = 0;               // islands whose best answer ends beyond 1000x the tolerances
  int answer_centered = 0;   // islands Center reached from their answer, not the stored iterate
  int island_diffs = 0;      // force tangents from differences of an island's own solve

  void Reset() { *this = IpmStats(); }
};

// the solver's last IpmStats (null if solver is not an ipm solver)
const IpmStats* IpmSolverStats(const Solver* solver);

}  // namespace contactkit

#endif  // CONTACTKIT_SOLVERS_IPM_IPM_H_
