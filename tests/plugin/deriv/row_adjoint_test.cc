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

// a box on the floor; an arm whose hinge rests on its limit and whose tip (a ball joint with
// friction loss) presses on a second box; a torso with a limited, hinged limb lying on the floor
constexpr char kScene[] = R"(
<mujoco>
  <option timestep="0.005" cone="CONE"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="1 0 0.4">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.2" limited="true"
             range="-10 -2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      <body pos="0.3 0 0">
        <joint type="ball" damping="0.1" frictionloss="0.01"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.15" size="0.03"/>
      </body>
    </body>
    <body pos="1.3 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="-1 0 0.15">
      <freejoint/>
      <geom type="box" size="0.2 0.1 0.05" mass="2"/>
      <body pos="0.2 0 0">
        <joint name="knee" type="hinge" axis="0 1 0" damping="0.3" limited="true" range="-5 5"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 -0.1" size="0.04" mass="0.5"/>
        <body pos="0.2 0 -0.1">
          <joint type="slide" axis="1 0 0" damping="0.4" frictionloss="0.05"/>
          <geom type="sphere" size="0.05" mass="0.3"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="shoulder" gear="2"/>
    <motor joint="knee" gear="1"/>
  </actuator>
</mujoco>)";

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
    for (int i = 0; i < nu; i++) d->ctrl[i] = 0.2 * (i % 3) - 0.1;
    ckSettings s = Settings(ckSOL_MUJOCO);
    HandlePtr ck = Make(m, &s);
    for (int t = 0; t < steps; t++) ck_step(ck.get(), m, d.get());
    for (int i = 0; i < m->nv; i++) d->qvel[i] += 0.1 * std::sin(0.7 * i);
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
    std::vector<double> ex(ndx, 0.0), eu(nu, 0.0);
    for (int j = 0; j < ndx; j++) {
      for (int i = 0; i < ndx; i++) ex[j] += jac.A[i * ndx + j] * dx[i];
    }
    for (int j = 0; j < nu; j++) {
      for (int i = 0; i < ndx; i++) eu[j] += jac.B[i * nu + j] * dx[i];
    }
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
    std::string xml = kScene;
    xml.replace(xml.find("CONE"), 4, cone);
    ModelPtr m = LoadString(xml);
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
