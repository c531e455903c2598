// Copyright 2026 The contactkit developers.
//
// Helpers for the ipm tests: a problem extracted from a MuJoCo state without the pipeline.
#ifndef CONTACTKIT_TESTS_IPM_IPM_SUPPORT_H_
#define CONTACTKIT_TESTS_IPM_IPM_SUPPORT_H_

#include <mujoco/mujoco.h>

#include <string>

#include "plugin/extract.h"
#include "solvers/common/problem.h"

namespace contactkit::test {

// problem storage for a model, as ck_make sets it up
struct ExtractedProblem {
  Extractor ex;
  ProblemStorage storage;
  bool ok = false;
  explicit ExtractedProblem(const mjModel* m) {
    std::string err;
    ok = ex.Setup(m, 0, &err);
    if (ok) {
      storage.Allocate(ex.dims(), m->dof_parentid, m->dof_Madr, ex.dof_tree().data(), ex.ntree());
    }
  }
  Problem& problem() { return storage.problem(); }
  Solution& solution() { return storage.solution(); }

  // fill the problem from d after mj_forward
  int Extract(const mjModel* m, const mjData* d) { return ex.Extract(m, d, &storage.problem()); }
};

}  // namespace contactkit::test

#endif  // CONTACTKIT_TESTS_IPM_IPM_SUPPORT_H_
