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

class SharedTermsJacTest : public PathToggleTest {};

TEST_F(SharedTermsJacTest, SummedWrenchesSymmetricRowsAndClosedFormBAreThePerContactSums) {
  int shared = 0;  // consecutive contacts on the same body: the grouping is exercised
  CompareOnHumanoid(
      [](bool on) {
        SmoothTangent::group_wrenches_ = on;
        SoftTangent::symmetric_velocity_rows_ = on;
        SmoothTangent::closed_form_b_ = on;
      },
      [&](const mjModel* m, const mjData* d, const Jacobians&, const Jacobians&,
          const std::string&) {
        for (int c = 1; c < d->ncon; c++) {
          shared += m->geom_bodyid[ContactGeom(d->contact + c, 1)] ==
                    m->geom_bodyid[ContactGeom(d->contact + c - 1, 1)];
        }
      });
  EXPECT_GE(shared, 2);
}

}  // namespace
}  // namespace contactkit::test
