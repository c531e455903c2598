// Copyright 2026 The contactkit developers.
//
// Two sums of the `mujoco` solver's blocked Jacobian formed once where they were formed per
// contact: the dJ' f of contacts on the same bodies from their summed wrenches
// (SmoothTangent::group_wrenches_), and a contact's symmetric J_c' W S J_c of the velocity columns'
// row terms once per pair of columns (SoftTangent::symmetric_velocity_rows_); and each body's B of
// the Newton-Euler tangents in closed form instead of column by column from the unit vectors
// (SmoothTangent::closed_form_b_). The Jacobians agree with the per-contact sums and the columns
// to rounding on the humanoid in contact (pyramidal and elliptic cones, with and without joint
// damping), where both feet hold several contacts.
#include <cmath>
#include <string>

#include "plugin/deriv/derivative.h"
#include "plugin/deriv/smooth_tangent.h"
#include "plugin/step/compat.h"
#include "solvers/mujoco/soft_tangent.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

class SharedTermsJacTest : public MujocoTest {
 protected:
  void TearDown() override {
    SmoothTangent::group_wrenches_ = true;
    SoftTangent::symmetric_velocity_rows_ = true;
    SmoothTangent::closed_form_b_ = true;
    MujocoTest::TearDown();
  }
};

TEST_F(SharedTermsJacTest, SummedWrenchesSymmetricRowsAndClosedFormBAreThePerContactSums) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  const int ndx = 2 * m->nv + m->na, nv = m->nv;
  int shared = 0;  // consecutive contacts on the same body: the grouping is exercised
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
    const std::string what = "variant " + std::to_string(variant);
    ASSERT_GE(d->ncon, 2) << what;
    for (int c = 1; c < d->ncon; c++) {
      shared += m->geom_bodyid[ContactGeom(d->contact + c, 1)] ==
                m->geom_bodyid[ContactGeom(d->contact + c - 1, 1)];
    }

    Jacobians once(m.get()), each(m.get());
    for (int pass = 0; pass < 2; pass++) {
      SmoothTangent::group_wrenches_ = pass == 0;
      SoftTangent::symmetric_velocity_rows_ = pass == 0;
      SmoothTangent::closed_form_b_ = pass == 0;
      Jacobians& jac = pass == 0 ? once : each;
      ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), jac.A.data(), jac.B.data(), nullptr,
                                    nullptr))
          << what << ": " << ck_lastError(ck.get());
    }
    EXPECT_LT(RelativeError(once.A, each.A), 1e-13) << what << "\n"
                                                    << WorstEntries(m.get(), once.A, each.A, ndx);
    EXPECT_EQ(0, RelativeError(once.B, each.B)) << what;  // (control columns: no dJ, no dv)
  }
  EXPECT_GE(shared, 2);
}

}  // namespace
}  // namespace contactkit::test
