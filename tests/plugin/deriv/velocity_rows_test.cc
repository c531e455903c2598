// Copyright 2026 The contactkit developers.
//
// The `mujoco` solver's blocked velocity columns take their row terms from one product per
// island and stage (SoftTangent::VelocityRowRhs, J' W S J) instead of each direction's row
// tangents (SoftTangent::RowRhs): the Jacobians agree to rounding on the humanoid in contact
// (pyramidal and elliptic cones, with and without joint damping).
#include <string>
#include <vector>

#include "plugin/deriv/derivative.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

class VelocityRowsJacTest : public MujocoTest {
 protected:
  void TearDown() override {
    Derivative::velocity_rows_ = true;
    MujocoTest::TearDown();
  }
};

TEST_F(VelocityRowsJacTest, OneProductPerIslandIsTheRowTermsPerDirection) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  const int ndx = 2 * m->nv + m->na, nv = m->nv;
  for (int variant = 0; variant < 3; variant++) {
    m->opt.cone = variant == 1 ? mjCONE_ELLIPTIC : mjCONE_PYRAMIDAL;
    if (variant == 2) {
      for (int i = 6; i < nv; i++) m->dof_damping[i] = 0.5;  // Euler's damped solve
    }
    ckSettings s = Settings(ckSOL_MUJOCO);
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    for (int t = 0; t < 150; t++) ck_step(ck.get(), m.get(), d.get());
    for (int i = 0; i < nv; i++) d->qvel[i] += 0.1 * std::sin(1.0 + i);
    ASSERT_GE(d->ncon, 2) << variant;
    const std::string what = "variant " + std::to_string(variant);

    Jacobians one(m.get()), each(m.get());
    for (int pass = 0; pass < 2; pass++) {
      Derivative::velocity_rows_ = pass == 0;
      Jacobians& jac = pass == 0 ? one : each;
      ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr,
                                    nullptr))
          << what << ": " << ck_lastError(ck.get());
    }
    EXPECT_LT(RelativeError(one.A, each.A), 1e-13) << what << "\n"
                                                   << WorstEntries(m.get(), one.A, each.A, ndx);
    EXPECT_EQ(0, RelativeError(one.B, each.B)) << what;  // (control columns: untouched)

    // not trivially: the velocity columns move the contact trees' next velocities through the
    // rows, beyond their own dof
    double coupled = 0;
    for (int j = nv; j < 2 * nv; j++) {
      for (int i = nv; i < 2 * nv; i++) {
        if (i != j) coupled += std::fabs(each.A[i * ndx + j]);
      }
    }
    EXPECT_GT(coupled, 1e-3) << what;
  }
}

}  // namespace
}  // namespace contactkit::test
