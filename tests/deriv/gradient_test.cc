// Copyright 2026 The contactkit developers.
//
// The gradient options: contacts from distance (DiffMJX Fig. 8: two billiard balls that miss),
// the elastic bounce correction (Nimble section VI), and solver-specific gradients.
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "deriv/deriv_util.h"

namespace contactkit::test {
namespace {

class GradientTest : public MujocoTest {};

// billiards with a motor pushing ball 1 along +y (towards ball 2's side), world frame
std::string PushedBilliards() {
  std::ifstream in(BundledModel("billiards.xml"));
  std::stringstream text;
  text << in.rdbuf();
  std::string xml = text.str();
  const std::string tag = "</worldbody>";
  xml.insert(xml.find(tag) + tag.size(),
             "\n  <actuator><motor name=\"push\" joint=\"ball1_free\" gear=\"0 1 0 0 0 0\"/>"
             "</actuator>");
  return xml;
}

// d(ball 2's y after a window past the closest approach at t = 2 s) / d(push on ball 1 in the
// window's first step), through the chain of step Jacobians
TEST_F(GradientTest, ContactsFromDistanceGiveGradientsBetweenBallsThatMiss) {
  ModelPtr m = LoadString(PushedBilliards());
  ASSERT_TRUE(m);
  const int nv = m->nv, ndx = 2 * nv, steps = 100;
  const int y2 = 7;  // tangent index of ball 2's y position
  std::vector<double> gradient(2), trajectory[2];
  for (int cfd = 0; cfd < 2; cfd++) {
    ckSettings s = Settings(ckSOL_MUJOCO);
    s.deriv.cfd_width = cfd ? 0.03 : 0;
    HandlePtr ck = Make(m.get(), &s);
    DataPtr d(mj_makeData(m.get()));
    mj_resetDataKeyframe(m.get(), d.get(), 0);
    while (d->time < 1.95) ck_step(ck.get(), m.get(), d.get());

    // Jacobians along the window, then the chain lambda' = e_y2' A_{N-1} ... A_1, lambda' B_0
    std::vector<double> A(static_cast<size_t>(steps) * ndx * ndx), B0(ndx * m->nu);
    for (int k = 0; k < steps; k++) {
      ASSERT_EQ(0, ck_transitionJac(ck.get(), m.get(), d.get(), A.data() + k * ndx * ndx,
                                    k == 0 ? B0.data() : nullptr, nullptr, nullptr));
      ck_step(ck.get(), m.get(), d.get());
      trajectory[cfd].insert(trajectory[cfd].end(), d->qpos, d->qpos + m->nq);
      trajectory[cfd].insert(trajectory[cfd].end(), d->qvel, d->qvel + nv);
    }
    std::vector<double> lambda(ndx, 0.0), next(ndx);
    lambda[y2] = 1;
    for (int k = steps - 1; k >= 1; k--) {
      const double* Ak = A.data() + k * ndx * ndx;
      for (int j = 0; j < ndx; j++) {
        next[j] = 0;
        for (int i = 0; i < ndx; i++) next[j] += Ak[i * ndx + j] * lambda[i];
      }
      lambda = next;
    }
    for (int i = 0; i < ndx; i++) gradient[cfd] += B0[i * m->nu] * lambda[i];
  }

  // without: ball 2 never feels ball 1; with: pushing ball 1 towards ball 2 pushes ball 2 away
  EXPECT_EQ(gradient[0], 0);
  EXPECT_GT(gradient[1], 1e-6);

  // the simulated trajectory does not depend on the option
  ASSERT_EQ(trajectory[0].size(), trajectory[1].size());
  EXPECT_EQ(0, std::memcmp(trajectory[0].data(), trajectory[1].data(),
                           sizeof(double) * trajectory[0].size()));
}

// with no pair within the width, the contacts-from-distance problem is the plain one
TEST_F(GradientTest, ContactsFromDistanceChangeNothingWithoutNearbyPairs) {
  ModelPtr m = Load(BundledModel("box_on_plane.xml"));
  ASSERT_TRUE(m);
  DataPtr d(mj_makeData(m.get()));
  Settle(m.get(), d.get(), 500);
  ASSERT_EQ(d->ncon, 4);
  for (int solver : {ckSOL_MUJOCO}) {
    ckSettings s = Settings(solver), c = s;
    c.deriv.cfd_width = 0.05;
    HandlePtr plain = Make(m.get(), &s), cfd = Make(m.get(), &c);
    Jacobians a(m.get()), b(m.get());
    ASSERT_EQ(0, ck_transitionJac(plain.get(), m.get(), d.get(), a.A.data(), a.B.data(), nullptr,
                                  nullptr));
    ASSERT_EQ(
        0, ck_transitionJac(cfd.get(), m.get(), d.get(), b.A.data(), b.B.data(), nullptr, nullptr));
    EXPECT_LT(RelativeError(b.A, a.A), 1e-10);
  }
}

// a ball bouncing on its restitution: dz+/dz = -sigma in the step where it turns around
TEST_F(GradientTest, ElasticCorrectionGivesMinusSigmaAcrossTheBounce) {
  ModelPtr m = Load(BundledModel("ball_bounce.xml"));
  ASSERT_TRUE(m);
  const int nv = m->nv, ndx = 2 * nv;
  ckSettings s = Settings(ckSOL_MUJOCO), e = s;
  e.deriv.elastic_correction = 1;
  HandlePtr plain = Make(m.get(), &s), elastic = Make(m.get(), &e);
  DataPtr d(mj_makeData(m.get()));

  // the step in which the ball's vertical velocity turns from down to up in contact
  int found = 0;
  for (int t = 0; t < 400 && !found; t++) {
    DataPtr next(mj_makeData(m.get()));
    mj_copyData(next.get(), m.get(), d.get());
    ck_step(plain.get(), m.get(), next.get());
    if (d->ncon > 0 && d->qvel[2] < 0 && next->qvel[2] > 0) {
      found = 1;
      Jacobians a(m.get()), b(m.get());
      ASSERT_EQ(0, ck_transitionJac(plain.get(), m.get(), d.get(), a.A.data(), nullptr, nullptr,
                                    nullptr));
      ASSERT_EQ(0, ck_transitionJac(elastic.get(), m.get(), d.get(), b.A.data(), nullptr, nullptr,
                                    nullptr));

      // restitution of the contact's damped spring: solref (0.04, 0.2)
      const double z = 0.2, sigma = std::exp(-mjPI * z / std::sqrt(1 - z * z));
      EXPECT_NEAR(a.A[2 * ndx + 2], 1, 0.2);  // the discrete step: about +1
      EXPECT_NEAR(b.A[2 * ndx + 2], -sigma, 1e-9);
      EXPECT_NEAR(b.A[2 * ndx + nv + 2], -sigma * m->opt.timestep, 1e-9);

      // directions the contact does not constrain keep the discrete Jacobian
      for (int i = 0; i < ndx; i++) {
        for (int j = 0; j < ndx; j++) {
          const bool corrected = i == 2 && (j == 2 || j == nv + 2);
          if (!corrected) {
            EXPECT_EQ(a.A[i * ndx + j], b.A[i * ndx + j]) << i << " " << j;
          }
        }
      }
    }
    ck_step(plain.get(), m.get(), d.get());
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace contactkit::test
