// Copyright 2026 The contactkit developers.
//
// The "mujoco" reverse mode's row terms from weights made once per adjoint
// (SmoothTangent::PrepareRowAdjoint, smooth_adjoint.cc, and SoftTangent::RowAdjoint) instead of
// each direction's RowTangents and SoftTangent::RowRhs, and a static plane's contacts with
// spheres and capsules in reverse (PrepareContactAdjoint, ContactAdjoint): the VJP is the one of
// the row tangents (SmoothTangent::reverse_contacts_, reverse_rows_ off) and dx' [A B] of
// ck_transitionJac, on a scene of contacts (closed and re-collided), joint limits and friction
// loss under pyramidal and elliptic cones, on the humanoid and on humanoid100.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "plugin/deriv/smooth_tangent.h"
#include "tests/plugin/deriv/deriv_util.h"

namespace contactkit::test {
namespace {

class RowAdjointTest : public MujocoTest {
 protected:
  void TearDown() override {
    SmoothTangent::reverse_rows_ = SmoothTangent::reverse_contacts_ = true;
    MujocoTest::TearDown();
  }

  // the VJP with and without the rows' weights and dx' [A B] at a settled state
  void Check(mjModel* m, int steps, const std::string& what, bool closed = true) {
    const int ndx = 2 * m->nv + m->na, nu = m->nu;
    DataPtr d(mj_makeData(m));
    ckSettings s = Settings(ckSOL_MUJOCO);
    HandlePtr ck = Make(m, &s);
    SettleAndNudge(ck.get(), m, d.get(), steps);
    ASSERT_GT(d->ncon, 0) << what;

    // the rows' weights and the closed contacts in reverse; the weights alone; neither
    std::vector<double> dx(ndx), gx[3], gu[3];
    for (int i = 0; i < ndx; i++) dx[i] = std::sin(1.0 + i);
    for (int pass = 0; pass < 3; pass++) {
      SmoothTangent::reverse_rows_ = pass < 2;
      SmoothTangent::reverse_contacts_ = pass == 0;
      const int rows = SmoothTangent::reverse_rows_calls_;
      const int contacts = SmoothTangent::reverse_contacts_calls_;
      const int reversed = SmoothTangent::reversed_contacts_;
      gx[pass].assign(ndx, 0);
      gu[pass].assign(nu, 0);
      ASSERT_EQ(0, ck_transitionVJP(ck.get(), m, d.get(), dx.data(), nullptr, gx[pass].data(),
                                    gu[pass].data()))
          << what << ": " << ck_lastError(ck.get());
      EXPECT_EQ(pass < 2 ? rows + 1 : rows, SmoothTangent::reverse_rows_calls_) << what;
      EXPECT_EQ(pass == 0 ? contacts + 1 : contacts, SmoothTangent::reverse_contacts_calls_)
          << what;
      if (pass == 0 && closed) {
        EXPECT_GT(SmoothTangent::reversed_contacts_, reversed) << what;
      }
    }
    SmoothTangent::reverse_contacts_ = true;
    SmoothTangent::reverse_rows_ = true;
    Jacobians jac(m);
    ASSERT_EQ(0,
              ck_transitionJac(ck.get(), m, d.get(), jac.A.data(), jac.B.data(), nullptr, nullptr))
        << what;
    std::vector<double> ex, eu;
    TransposedProducts(m, jac, dx, {}, &ex, &eu);
    std::printf("%s: |g - g_rows| %.2g, |g - g_streamed| %.2g, |g - dx'[A B]| %.2g\n", what.c_str(),
                RelativeError(gx[0], gx[1]), RelativeError(gx[0], gx[2]), RelativeError(gx[0], ex));
    for (int pass = 1; pass < 3; pass++) {
      EXPECT_LT(RelativeError(gx[0], gx[pass]), 1e-10) << what << " pass " << pass;
      EXPECT_LT(RelativeError(gu[0], gu[pass]), 1e-10) << what << " pass " << pass;
      EXPECT_LT(RelativeError(gx[1], gx[2]), 1e-10) << what;
    }
    EXPECT_LT(RelativeError(gx[0], ex), 1e-10) << what;
    EXPECT_LT(RelativeError(gu[0], eu), 1e-10) << what;
  }
};

TEST_F(RowAdjointTest, RowWeightsAreTheRowTangentsVjp) {
  for (const char* cone : {"pyramidal", "elliptic"}) {
    ModelPtr m = LoadString(MixedJointScene(cone));
    ASSERT_TRUE(m);
    Check(m.get(), 60, std::string("scene ") + cone);
  }
}

TEST_F(RowAdjointTest, RowWeightsAreTheRowTangentsVjpOnTheHumanoid) {
  ModelPtr m = Load(MujocoModel("humanoid/humanoid.xml"));
  ASSERT_TRUE(m);
  Check(m.get(), 300, "humanoid");
  m->opt.cone = mjCONE_ELLIPTIC;
  Check(m.get(), 300, "humanoid elliptic");
}

TEST_F(RowAdjointTest, RowWeightsAreTheRowTangentsVjpOnHumanoid100) {
  ModelPtr m = Load(MujocoModel("humanoid100/humanoid100.xml"));
  ASSERT_TRUE(m);
  Check(m.get(), 100, "humanoid100");
}

}  // namespace
}  // namespace contactkit::test
