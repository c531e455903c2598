// Copyright 2026 The contactkit developers.
//
// Helpers for the ipm tests: a problem extracted from a MuJoCo state without the pipeline.
#ifndef CONTACTKIT_TESTS_SOLVERS_IPM_IPM_SUPPORT_H_
#define CONTACTKIT_TESTS_SOLVERS_IPM_IPM_SUPPORT_H_

#include <mujoco/mujoco.h>

#include <string>
#include <utility>

#include "plugin/step/extract.h"
#include "solvers/common/problem.h"
#include "support/fixture.h"

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

// a model stepped by MuJoCo from a keyframe (null: default pose) for steps, then on until its
// constraint problem has an island (at most 200 more steps), and that problem
class SteppedProblem {
 public:
  SteppedProblem(ModelPtr m, int steps, const char* key = nullptr)
      : m_(std::move(m)), e_(m_.get()), d_(mj_makeData(m_.get())) {
    if (key) mj_resetDataKeyframe(m_.get(), d_.get(), mj_name2id(m_.get(), mjOBJ_KEY, key));
    for (int i = 0; i < steps; i++) mj_step(m_.get(), d_.get());
    for (int i = 0; i < 200; i++) {
      mj_forward(m_.get(), d_.get());
      dropped_ = e_.Extract(m_.get(), d_.get());
      if (e_.problem().islands.nisland > 0) break;
      mj_step(m_.get(), d_.get());
    }
  }
  Problem& p() { return e_.problem(); }
  Solution& sol() { return e_.solution(); }
  const ProblemDims& dims() const { return e_.ex.dims(); }
  int dropped() const { return dropped_; }  // contacts left out for lack of capacity

 private:
  ModelPtr m_;
  ExtractedProblem e_;
  DataPtr d_;
  int dropped_ = 0;
};

}  // namespace contactkit::test

#endif  // CONTACTKIT_TESTS_SOLVERS_IPM_IPM_SUPPORT_H_
