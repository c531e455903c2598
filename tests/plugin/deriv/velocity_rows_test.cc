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

class VelocityRowsJacTest : public PathToggleTest {};

TEST_F(VelocityRowsJacTest, OneProductPerIslandIsTheRowTermsPerDirection) {
  CompareOnHumanoid([](bool on) { Derivative::velocity_rows_ = on; },
                    [](const mjModel* m, const mjData*, const Jacobians&, const Jacobians& each,
                       const std::string& what) {
                      // not trivially: the velocity columns move the contact trees' next
                      // velocities through the rows, beyond their own dof
                      const int ndx = 2 * m->nv + m->na, nv = m->nv;
                      double coupled = 0;
                      for (int j = nv; j < 2 * nv; j++) {
                        for (int i = nv; i < 2 * nv; i++) {
                          if (i != j) coupled += std::fabs(each.A[i * ndx + j]);
                        }
                      }
                      EXPECT_GT(coupled, 1e-3) << what;
                    });
}

}  // namespace
}  // namespace contactkit::test
