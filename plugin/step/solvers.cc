// Copyright 2026 The contactkit developers.
//
// Constructs a solver by its ckSOL_ number.
#include "plugin/step/handle.h"
#include "solvers/comfree/comfree.h"
#include "solvers/ipm/ipm.h"
#include "solvers/lcp/lcp.h"

namespace contactkit {

std::unique_ptr<Solver> MakeSolver(int solver) {
  switch (solver) {
    case ckSOL_IPM:
      return MakeIpmSolver();
    case ckSOL_COMFREE:
      return MakeComfreeSolver();
    case ckSOL_LCP:
      return MakeLcpSolver();
    default:
      return nullptr;
  }
}

}  // namespace contactkit

extern "C" int ck_solverAvailable(int solver) {
  if (solver == ckSOL_MUJOCO) return 1;
  if (solver < 0 || solver >= ckNSOLVER) return 0;
  return contactkit::MakeSolver(solver) != nullptr;
}
