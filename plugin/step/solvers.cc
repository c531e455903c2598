// Copyright 2026 The contactkit developers.
//
// Constructs the solvers this build has (each solver folder defines CK_HAVE_<NAME>).
#include "plugin/step/handle.h"

#ifdef CK_HAVE_IPM
#include "solvers/ipm/ipm.h"
#endif
#ifdef CK_HAVE_COMFREE
#include "solvers/comfree/comfree.h"
#endif
#ifdef CK_HAVE_LCP
#include "solvers/lcp/lcp.h"
#endif

namespace contactkit {

std::unique_ptr<Solver> MakeSolver(int solver) {
  switch (solver) {
#ifdef CK_HAVE_IPM
    case ckSOL_IPM:
      return MakeIpmSolver();
#endif
#ifdef CK_HAVE_COMFREE
    case ckSOL_COMFREE:
      return MakeComfreeSolver();
#endif
#ifdef CK_HAVE_LCP
    case ckSOL_LCP:
      return MakeLcpSolver();
#endif
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
