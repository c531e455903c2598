// Copyright 2026 The contactkit developers.
//
// The `mujoco` solver's blocked velocity columns take their row terms from one product per
// island and stage (SoftTangent::VelocityRowRhs, J' W S J) instead of each direction's row
// tangents (SoftTangent::RowRhs): the Jacobians agree to rounding on the humanoid in contact
// (pyramidal and elliptic cones, with and without joint damping).
// Its blocked position columns' row terms J' fold (one island of every tree) added for a block's
// slots at once (SoftTangent::IslandFoldBlock, Derivative::block_fold_on_) instead of column by
// column (SoftTangent::RowRhs' AddRowsT): bit for bit, with the AVX2 clone and the portable code.
#include <string>
#include <vector>

#include "plugin/deriv/derivative.h"
#include "solvers/common/dense.h"
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

TEST_F(VelocityRowsJacTest, BlockFoldIsTheRowTermsPerColumn) {
  for (const bool avx2 : {true, false}) {
    Avx2Kernels::allowed_ = avx2;
    CompareOnHumanoid([](bool on) { Derivative::block_fold_on_ = on; },
                      [avx2](const mjModel* m, const mjData*, const Jacobians& on, const Jacobians&,
                             const std::string& what) {
                        // not trivially: the position columns move the next velocities through the
                        // rows
                        const int ndx = 2 * m->nv + m->na, nv = m->nv;
                        double coupled = 0;
                        for (int j = 6; j < nv; j++) {
                          for (int i = nv; i < nv + 6; i++) coupled += std::fabs(on.A[i * ndx + j]);
                        }
                        EXPECT_GT(coupled, 1e-3) << what << (avx2 ? ", AVX2" : ", portable");
                      },
                      ckSOL_MUJOCO, 0);
  }
  Avx2Kernels::allowed_ = true;
  Derivative::block_fold_on_ = true;
}

}  // namespace
}  // namespace contactkit::test
