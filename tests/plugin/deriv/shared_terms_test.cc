// Copyright 2026 The contactkit developers.
//
// Two sums of the `mujoco` solver's blocked Jacobian formed once where they were formed per
// contact: the dJ' f of contacts on the same bodies from their summed wrenches
// (SmoothTangent::group_wrenches_), and a contact's symmetric J_c' W S J_c of the velocity columns'
// row terms once per pair of columns (SoftTangent::symmetric_velocity_rows_); and each body's B of
// the Newton-Euler tangents in closed form instead of column by column from the unit vectors
// (SmoothTangent::closed_form_b_). The Jacobians agree with the per-contact sums and the columns
// to rounding on the humanoid in contact (pyramidal and elliptic cones, with and without joint
// damping), where both feet hold several contacts. The blocked rows' dvel, dJ v+ and dJ' f
// wrenches from the point and frame tangents in 3-vectors (SmoothTangent::PointRows) instead of
// each row's 6-vector tangents agree with those to rounding (1e-13 of A's norm, B bit for bit) on
// the humanoid and on two free capsules stacked on a plane with condim 1, 3, 4 and 6 (rotation
// rows, a contact whose two sides move), pyramidal and elliptic. So do comfree's, whose rows' dJ
// it reads as dJ_i w_i (SmoothTangent::weighted_points_on_: PointRows with each weighted row's
// own body velocities), on the same scenes.
#include <cmath>
#include <cstring>
#include <string>

#include "plugin/deriv/derivative.h"
#include "plugin/deriv/smooth_tangent.h"
#include "plugin/step/compat.h"
#include "solvers/mujoco/soft_tangent.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

// two free capsules, one lying across the other on a plane, with condim dim
std::string CapsuleStack(int dim, bool elliptic) {
  return std::string("<mujoco><option timestep='0.005' cone='") +
         (elliptic ? "elliptic" : "pyramidal") + "'/><default><geom condim='" +
         std::to_string(dim) + "' friction='0.8 0.02 0.001'/></default><worldbody>" +
         "<geom type='plane' size='2 2 0.1'/>" +
         "<body pos='0 0 0.1'><freejoint/><geom type='capsule' size='0.1' fromto='-0.3 0 0 0.3 0 "
         "0'/></body>" +
         "<body pos='0.05 0 0.3' euler='0 0 80'><freejoint/><geom type='capsule' size='0.1' "
         "fromto='-0.3 0 0 0.3 0 0'/></body></worldbody></mujoco>";
}

class SharedTermsJacTest : public PathToggleTest {
 protected:
  void TearDown() override {
    SmoothTangent::point_rows_on_ = true;
    SmoothTangent::weighted_points_on_ = true;
    PathToggleTest::TearDown();
  }
  // PointRowsAreTheAxisTangentsRows' capsule stacks with set(true) and set(false), solver's A
  // within 1e-13 of its norm and B bit for bit; the number of them whose A differs at all
  template <class Set>
  int CompareOnCapsules(Set set, int solver) {
    int moved = 0;
    for (int dim : {1, 3, 4, 6}) {
      for (bool elliptic : {false, true}) {
        const std::string what = "condim " + std::to_string(dim) + (elliptic ? ", elliptic" : "");
        ModelPtr m = LoadString(CapsuleStack(dim, elliptic).c_str());
        EXPECT_TRUE(m) << what;
        if (!m) continue;
        ckSettings s = Settings(solver);
        HandlePtr ck = Make(m.get(), &s);
        DataPtr d(mj_makeData(m.get()));
        for (int t = 0; t < 100; t++) ck_step(ck.get(), m.get(), d.get());
        for (int i = 0; i < m->nv; i++) d->qvel[i] += 0.1 * std::sin(1.0 + i);
        bool both = false;  // a contact between the capsules: both sides move
        for (int c = 0; c < d->ncon; c++) {
          both |= m->geom_bodyid[ContactGeom(d->contact + c, 0)] > 0 &&
                  m->geom_bodyid[ContactGeom(d->contact + c, 1)] > 0;
        }
        EXPECT_TRUE(both) << what;
        Jacobians on(m.get()), off(m.get());
        if (!OnOff(m.get(), d.get(), ck.get(), set, &on, &off, what)) continue;
        EXPECT_LT(RelativeError(on.A, off.A), 1e-13)
            << what << "\n"
            << WorstEntries(m.get(), on.A, off.A, 2 * m->nv);
        EXPECT_EQ(0, std::memcmp(on.B.data(), off.B.data(), on.B.size() * sizeof(double))) << what;
        moved += std::memcmp(on.A.data(), off.A.data(), on.A.size() * sizeof(double)) != 0;
      }
    }
    return moved;
  }
};

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

TEST_F(SharedTermsJacTest, PointRowsAreTheAxisTangentsRows) {
  auto set = [](bool on) { SmoothTangent::point_rows_on_ = on; };
  CompareOnHumanoid(set, [](const mjModel*, const mjData*, const Jacobians&, const Jacobians&,
                            const std::string&) {});
  CompareOnCapsules(set, ckSOL_MUJOCO);
}

TEST_F(SharedTermsJacTest, ComfreeWeightedPointRowsAreTheAxisTangentsRows) {
  auto set = [](bool on) { SmoothTangent::weighted_points_on_ = on; };
  int moved = 0;  // (the path taken: A moves by rounding)
  CompareOnHumanoid(
      set,
      [&](const mjModel*, const mjData*, const Jacobians& on, const Jacobians& off,
          const std::string&) {
        moved += std::memcmp(on.A.data(), off.A.data(), on.A.size() * sizeof(double)) != 0;
      },
      ckSOL_COMFREE);
  EXPECT_EQ(3, moved);
  EXPECT_GE(CompareOnCapsules(set, ckSOL_COMFREE), 4);
}

}  // namespace
}  // namespace contactkit::test
