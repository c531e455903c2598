// Copyright 2026 The contactkit developers.
//
// Test support: the constraint problem of a MuJoCo state, extracted as ck_make and the pipeline do,
// for tests that drive a solver or the problem directly.
#ifndef CONTACTKIT_TESTS_SUPPORT_EXTRACTED_H_
#define CONTACTKIT_TESTS_SUPPORT_EXTRACTED_H_

#include <gtest/gtest.h>
#include <mujoco/mujoco.h>

#include <string>

#include "plugin/step/extract.h"

namespace contactkit::test {

// problem storage set up for a model, as ck_make does
struct Extracted {
  Extractor ex;
  ProblemStorage storage;
  explicit Extracted(const mjModel* m) {
    std::string err;
    EXPECT_TRUE(ex.Setup(m, 0, &err)) << err;
    storage.Allocate(ex.dims(), m->dof_parentid, m->dof_Madr, ex.dof_tree().data(), ex.ntree());
  }
  Problem& p() { return storage.problem(); }
  Solution& sol() { return storage.solution(); }

  // the problem at the state of d after MuJoCo's acceleration stage (mj_forward first)
  void Extract(const mjModel* m, mjData* d) {
    mj_forward(m, d);
    EXPECT_EQ(ex.Extract(m, d, &p()), 0);
  }
};

}  // namespace contactkit::test

#endif  // CONTACTKIT_TESTS_SUPPORT_EXTRACTED_H_
